//! The Kafka listener next to the mount, in the same run, on the same
//! 100-byte lines: `kcat -P -l lines.txt` against `cat lines.txt >> log`, and
//! `kcat -C -e` against `cat log`. Prints each figure, its baseline and the
//! ratio (the target is 0.5 or more). With tansu on the PATH (or in
//! ~/.cargo/bin), tansu's produce and fetch of the same lines are measured
//! beside them.
//!
//! A second client, in this process on the `rdkafka` crate (the librdkafka
//! commitfs bundles), produces the same lines (idempotent, `acks=all`) and
//! consumes them from offset 0, against the listener (topic `r`) and against
//! tansu (on the PATH or in ~/.cargo/bin, in memory, started for each run):
//! kcat 2.0.2 does not get past tansu's ApiVersions answer, this client does.
//! Its produced and consumed counts must equal the lines written.
//!
//! Needs root, /dev/fuse and kcat. Not a test: only the rdkafka client's
//! counts are checked.
//!
//! ```sh
//! cargo build --release --bins --example bench_kafka
//! target/release/examples/bench_kafka            # 50 MB of lines, 3 runs
//! COMMITFS_BENCH_QUICK=1 target/release/examples/bench_kafka
//! ```

#[path = "common/mod.rs"]
mod common;

use common::{Deliveries, assigned_consumer, bulk_idempotent, send_all, sh};
use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::net::TcpStream;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::Consumer;
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, Producer};

type Res<T> = Result<T, String>;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_or(19092, |a| a.port())
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) -> Res<()> {
    let t = Instant::now();
    while !f() {
        if t.elapsed() > Duration::from_secs(20) {
            return Err(format!("{what} did not happen within 20 s"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// A mount with a listener; unmounted (and the daemon reaped) on drop.
struct Daemon {
    child: Child,
    mnt: PathBuf,
}

impl Daemon {
    fn start(bin: &Path, data: &Path, mnt: &Path, addr: &str) -> Res<Daemon> {
        fs::create_dir_all(mnt).map_err(|e| e.to_string())?;
        let parent = fs::metadata(mnt.parent().unwrap_or(Path::new("/")))
            .map_err(|e| e.to_string())?
            .dev();
        let child = Command::new(bin)
            .args(["mount", "--foreground", "-o"])
            .arg(format!("listeners=PLAINTEXT://{addr}"))
            .arg(data)
            .arg(mnt)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| e.to_string())?;
        let d = Daemon {
            child,
            mnt: mnt.to_path_buf(),
        };
        wait_until("the mount", || {
            fs::metadata(mnt).is_ok_and(|m| m.dev() != parent)
        })?;
        wait_until("the listener", || TcpStream::connect(addr).is_ok())?;
        Ok(d)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mnt).status();
        let _ = self.child.wait();
    }
}

/// `n` lines of 99 bytes plus `\n`: 100 bytes each, unique.
fn write_lines(path: &Path, n: usize) -> Res<()> {
    let mut f = BufWriter::new(File::create(path).map_err(|e| e.to_string())?);
    for i in 0..n {
        let head = format!("line-{i:010}-");
        writeln!(f, "{head}{}", "x".repeat(99 - head.len())).map_err(|e| e.to_string())?;
    }
    f.flush().map_err(|e| e.to_string())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// One timed command: its wall time and the CPU its processes used.
#[derive(Clone, Copy, Default)]
struct Timed {
    wall: f64,
    /// User + system CPU of the command and its children (kcat, cat).
    cpu: f64,
}

/// CPU seconds (user + system) of the reaped children of this process.
fn children_cpu() -> f64 {
    // SAFETY: getrusage fills the struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(ru.ru_utime) + t(ru.ru_stime)
}

fn timed(cmd: &str) -> Res<Timed> {
    let c0 = children_cpu();
    let wall = sh(cmd)?;
    Ok(Timed {
        wall,
        cpu: children_cpu() - c0,
    })
}

struct Figures {
    append: Timed,
    cat: Timed,
    produce: Timed,
    fetch: Timed,
    /// `kcat -C -c N`: the same fetch, ending at the last record instead of
    /// at the end-of-partition answer, which comes after one long poll
    /// (librdkafka's fetch.wait.max.ms, 500 ms) as from Kafka.
    fetch_count: Timed,
    /// `kcat -C -e -X fetch.wait.max.ms=10`: the end-of-partition answer
    /// after a 10 ms long poll instead of 500 ms.
    fetch_short_wait: Timed,
    /// The daemon's CPU seconds during the produce and during `kcat -C -e`.
    daemon_cpu: (f64, f64),
    /// The rdkafka client's produce and consume against the listener.
    rd: RdPair,
    /// The same against tansu, or why not.
    rd_tansu: Res<RdPair>,
}

/// utime + stime of a process, in seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name, which is in parentheses.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<f64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (f.get(11).unwrap_or(&0.0) + f.get(12).unwrap_or(&0.0)) / ticks.max(1.0)
}

/// The kcat commands of a run against a broker at `addr`, topic `topic`.
struct Kcat<'a> {
    kcat: &'a str,
    addr: &'a str,
    topic: &'a str,
}

impl Kcat<'_> {
    fn produce(&self, lines: &Path) -> Res<Timed> {
        timed(&format!(
            "{} -b {} -P -t {} -p 0 -l {} -X linger.ms=5 -X batch.size=1000000",
            self.kcat,
            self.addr,
            self.topic,
            lines.display()
        ))
    }

    fn consume(&self, how: &str) -> Res<Timed> {
        timed(&format!(
            "{} -b {} -C -t {} -p 0 -o beginning {how} -q > /dev/null",
            self.kcat, self.addr, self.topic
        ))
    }
}

fn one_run(
    bin: &Path,
    kcat: &str,
    (lines, n): (&Path, usize),
    scratch: &Path,
    run: usize,
) -> Res<Figures> {
    let data = scratch.join(format!("data-{run}"));
    let mnt = scratch.join(format!("mnt-{run}"));
    let addr = format!("127.0.0.1:{}", free_port());
    let d = Daemon::start(bin, &data, &mnt, &addr)?;
    let (m, k) = (d.mnt.join("m-0"), d.mnt.join("k-0"));
    fs::create_dir(&m).map_err(|e| e.to_string())?;
    fs::create_dir(&k).map_err(|e| e.to_string())?;
    let l = lines.display();
    let kc = Kcat {
        kcat,
        addr: &addr,
        topic: "k",
    };
    sh("sync")?;
    let append = timed(&format!("cat {l} >> {}/log", m.display()))?;
    let pid = d.child.id();
    sh("sync")?;
    let cpu0 = cpu_seconds(pid);
    let produce = kc.produce(lines)?;
    let cpu1 = cpu_seconds(pid);
    let cat = timed(&format!("cat {}/log > /dev/null", m.display()))?;
    let cpu2 = cpu_seconds(pid);
    let fetch = kc.consume("-e")?;
    let daemon_cpu = (cpu1 - cpu0, cpu_seconds(pid) - cpu2);
    let fetch_count = kc.consume(&format!("-c {n}"))?;
    let fetch_short_wait = kc.consume("-e -X fetch.wait.max.ms=10")?;
    fs::create_dir(d.mnt.join("r-0")).map_err(|e| e.to_string())?;
    sh("sync")?;
    let rd = rd_run(&addr, "r", lines).map_err(|e| format!("rdkafka, listener: {e}"))?;
    let (a, b) = (
        fs::read_to_string(m.join("status")).unwrap_or_default(),
        fs::read_to_string(k.join("status")).unwrap_or_default(),
    );
    let leo = |s: &str| {
        s.lines()
            .find(|l| l.starts_with("log_end_offset"))
            .map(str::to_string)
    };
    if leo(&a).is_none()
        || leo(&a).map(|x| x.replace(' ', "")) != leo(&b).map(|x| x.replace(' ', ""))
    {
        return Err(format!("the two partitions differ:\n{a}\n{b}"));
    }
    Ok(Figures {
        append,
        cat,
        produce,
        fetch,
        fetch_count,
        fetch_short_wait,
        daemon_cpu,
        rd,
        rd_tansu: Err(String::new()),
    })
}

/// CPU seconds (user + system) of this process, all its threads.
fn self_cpu() -> f64 {
    // SAFETY: getrusage fills the struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(ru.ru_utime) + t(ru.ru_stime)
}

/// The lines of the file without their `\n`, as kcat -l sends them.
fn read_lines(lines: &Path) -> Res<Vec<Vec<u8>>> {
    let all = fs::read(lines).map_err(|e| e.to_string())?;
    Ok(all
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(<[u8]>::to_vec)
        .collect())
}

/// The rdkafka client against the broker at `addr`: every line produced to
/// `topic` partition 0 (each delivery awaited), then all of them consumed
/// from offset 0 and compared with the lines. Fails unless both counts
/// equal the lines'.
fn rd_run(addr: &str, topic: &str, lines: &Path) -> Res<RdPair> {
    let recs = read_lines(lines)?;
    let n = recs.len();
    let produce = {
        let mut c = ClientConfig::new();
        bulk_idempotent(&mut c)
            .set("bootstrap.servers", addr)
            .set("client.id", "bench_kafka")
            .set("message.timeout.ms", "60000");
        let p: BaseProducer<Deliveries> = c
            .create_with_context(Deliveries::default())
            .map_err(|e| e.to_string())?;
        let (t, c0) = (Instant::now(), self_cpu());
        send_all(&p, topic, &recs)?;
        p.flush(Duration::from_secs(120))
            .map_err(|e| format!("flush: {e}"))?;
        let timed = Timed {
            wall: t.elapsed().as_secs_f64(),
            cpu: self_cpu() - c0,
        };
        let ctx = p.context();
        let (ok, failed) = (
            ctx.ok.load(Ordering::SeqCst),
            ctx.failed.load(Ordering::SeqCst),
        );
        if ok != n || failed != 0 {
            return Err(format!(
                "produced {ok} of {n} lines, {failed} failed (first error: {})",
                ctx.first_error.lock().unwrap().as_deref().unwrap_or("none")
            ));
        }
        timed
    };
    let consume = {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", addr)
            .set("client.id", "bench_kafka")
            .set("group.id", "bench_kafka");
        let (k, tpl) = assigned_consumer(&mut c, topic)?;
        let (t, c0) = (Instant::now(), self_cpu());
        k.assign(&tpl).map_err(|e| e.to_string())?;
        let mut got = 0;
        while got < n {
            if t.elapsed() > Duration::from_secs(120) {
                return Err(format!("consumed {got} of {n} lines within 120 s"));
            }
            match k.poll(Duration::from_millis(100)) {
                None => {}
                Some(Err(e)) => return Err(format!("consume: {e}")),
                Some(Ok(m)) => {
                    if m.offset() != got as i64 || m.payload() != Some(&recs[got][..]) {
                        return Err(format!(
                            "record {got}: offset {} and payload {:?}, not line {got}",
                            m.offset(),
                            m.payload().map(String::from_utf8_lossy)
                        ));
                    }
                    got += 1;
                }
            }
        }
        Timed {
            wall: t.elapsed().as_secs_f64(),
            cpu: self_cpu() - c0,
        }
    };
    Ok((produce, consume))
}

const NO_TANSU: &str = "neither on the PATH nor in ~/.cargo/bin";

/// tansu on the PATH or in ~/.cargo/bin.
fn find_tansu() -> Res<String> {
    which("tansu").or_else(|_| {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        home.map(|h| h.join(".cargo/bin/tansu"))
            .filter(|p| p.exists())
            .map(|p| p.display().to_string())
            .ok_or(format!("tansu is {NO_TANSU}"))
    })
}

/// A tansu broker, in memory, with topic `topic` (one partition); killed on
/// drop.
struct Tansu {
    child: Child,
    addr: String,
}

impl Tansu {
    fn start(tansu: &str, topic: &str) -> Res<Tansu> {
        let port = free_port();
        let url = format!("tcp://127.0.0.1:{port}");
        let child = Command::new(tansu)
            .args([
                "broker",
                "--listener-url",
                &url,
                "--advertised-listener-url",
                &url,
            ])
            .args(["--storage-engine", "memory://tansu/"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| e.to_string())?;
        let t = Tansu {
            child,
            addr: format!("127.0.0.1:{port}"),
        };
        wait_until("tansu's listener", || TcpStream::connect(&t.addr).is_ok())?;
        sh(&format!(
            "{tansu} topic create {topic} --partitions 1 --broker {url}"
        ))?;
        Ok(t)
    }
}

impl Drop for Tansu {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The rdkafka client against a fresh tansu.
fn rd_tansu_run(lines: &Path) -> Res<RdPair> {
    let tansu = find_tansu()?;
    let t = Tansu::start(&tansu, "k")?;
    rd_run(&t.addr, "k", lines)
}

/// tansu (in memory) with the same kcat commands, or why it was not measured.
fn tansu_run(kcat: &str, lines: &Path) -> Res<(Timed, Timed)> {
    let tansu = find_tansu()?;
    let t = Tansu::start(&tansu, "k")?;
    let kc = Kcat {
        kcat,
        addr: &t.addr,
        topic: "k",
    };
    Ok((kc.produce(lines)?, kc.consume("-e")?))
}

/// `median (min–max)` of `mb` over each run's time.
fn rate(mb: f64, t: &[f64]) -> String {
    let mut r: Vec<f64> = t.iter().map(|s| mb / s).collect();
    r.sort_by(|a, b| a.total_cmp(b));
    format!(
        "{:.0} MB/s ({:.0}–{:.0})",
        r[r.len() / 2],
        r[0],
        r[r.len() - 1]
    )
}

/// One line of the table: id, the listener's command, its figure, the mount's
/// same-run baseline (wall times, client CPU) and that baseline's command.
type Row<'a> = (
    &'a str,
    &'a str,
    fn(&Figures) -> Timed,
    &'a [f64],
    f64,
    &'a str,
);

fn report(figs: &[Figures], mb: f64, n: usize) {
    let col = |f: fn(&Figures) -> Timed| -> (Vec<f64>, f64) {
        (
            figs.iter().map(|x| f(x).wall).collect(),
            median(figs.iter().map(|x| f(x).cpu).collect()),
        )
    };
    let (append, append_cpu) = col(|f| f.append);
    let (cat, cat_cpu) = col(|f| f.cat);
    println!(
        "{n} lines of 100 bytes ({mb:.0} MB), {} runs, median (min–max); CPU = user + system of the client command (kcat or cat), median:\n",
        figs.len()
    );
    println!("| id | Kafka listener | figure | mount, same lines, same run | ratio | target |");
    println!("|---|---|---|---|---|---|");
    let rows: [Row; 4] = [
        (
            "K1",
            "`kcat -P -l lines.txt`",
            |f| f.produce,
            &append,
            append_cpu,
            "`cat lines.txt >> log`",
        ),
        (
            "K2",
            "`kcat -C -e`",
            |f| f.fetch,
            &cat,
            cat_cpu,
            "`cat log`",
        ),
        (
            "K2c",
            "`kcat -C -c N` (ends at the last record, no final long poll)",
            |f| f.fetch_count,
            &cat,
            cat_cpu,
            "`cat log`",
        ),
        (
            "K2w",
            "`kcat -C -e -X fetch.wait.max.ms=10` (final long poll 10 ms, not librdkafka's 500)",
            |f| f.fetch_short_wait,
            &cat,
            cat_cpu,
            "`cat log`",
        ),
    ];
    for (id, what, f, base, base_cpu, base_what) in rows {
        let (t, cpu) = col(f);
        println!(
            "| {id} | {what} | {}, kcat CPU {cpu:.2} s | {base_what}: {}, CPU {base_cpu:.2} s | **{:.2}** | ≥ 0.5 |",
            rate(mb, &t),
            rate(mb, base),
            median(base.to_vec()) / median(t)
        );
    }
    let (pc, fc) = (
        median(figs.iter().map(|f| f.daemon_cpu.0).collect()),
        median(figs.iter().map(|f| f.daemon_cpu.1).collect()),
    );
    println!(
        "\ndaemon CPU: {pc:.2} s during the produce, {fc:.2} s during `kcat -C -e` \
         (the rest of their wall time is kcat's own work and, for -e, the final long poll)"
    );
    report_rd(figs, mb);
}

/// The rdkafka client's produce and consume of one run.
type RdPair = (Timed, Timed);

/// The rdkafka client's table: the listener and tansu, side by side.
fn report_rd(figs: &[Figures], mb: f64) {
    let tansu: Vec<RdPair> = figs
        .iter()
        .filter_map(|f| f.rd_tansu.as_ref().ok().copied())
        .collect();
    let why = figs
        .iter()
        .find_map(|f| f.rd_tansu.as_ref().err())
        .map(|e| e.lines().take(3).collect::<Vec<_>>().join(" / "));
    println!(
        "\nrdkafka client in this process (librdkafka {}), same lines, same runs; produce: \
         idempotent, acks=all, linger.ms=5, batch.size=1000000, every delivery awaited; \
         consume: assigned from offset 0 (no group joined), until the last line; \
         CPU = user + system of this process, median:\n",
        rdkafka::util::get_rdkafka_version().1
    );
    println!("| rdkafka client | commitfs listener | tansu (memory://) | ratio commitfs/tansu |");
    println!("|---|---|---|---|");
    for (what, consume) in [("rdkafka produce", false), ("rdkafka consume", true)] {
        let f = |x: &RdPair| if consume { x.1 } else { x.0 };
        let cell = |v: &[RdPair]| -> (String, f64) {
            let t: Vec<f64> = v.iter().map(|x| f(x).wall).collect();
            let cpu = median(v.iter().map(|x| f(x).cpu).collect());
            (format!("{}, CPU {cpu:.2} s", rate(mb, &t)), median(t))
        };
        let ours: Vec<RdPair> = figs.iter().map(|x| x.rd).collect();
        let (a, ta) = cell(&ours);
        let (b, ratio) = if tansu.is_empty() {
            ("not measured".to_string(), "–".to_string())
        } else {
            let (b, tb) = cell(&tansu);
            (b, format!("**{:.2}**", tb / ta))
        };
        println!("| {what} | {a} | {b} | {ratio} |");
    }
    if tansu.len() < figs.len() {
        println!(
            "\ntansu not measured with rdkafka in {} of {} runs: {}",
            figs.len() - tansu.len(),
            figs.len(),
            why.unwrap_or_default()
        );
    }
}

fn main() {
    let quick = std::env::var_os("COMMITFS_BENCH_QUICK").is_some();
    let n = if quick { 20_000 } else { 500_000 };
    let runs = if quick { 1 } else { 3 };
    let bin = common::commitfs_bin();
    let Ok(kcat) = which("kcat") else {
        println!("bench_kafka: kcat is not installed; nothing measured");
        return;
    };
    if !Path::new("/dev/fuse").exists() {
        println!("bench_kafka: no /dev/fuse; nothing measured");
        return;
    }
    let scratch = tempfile::tempdir().expect("scratch dir");
    let lines = scratch.path().join("lines.txt");
    write_lines(&lines, n).expect("lines");
    let mb = (n * 100) as f64 / 1e6;
    let mut figs = Vec::new();
    for run in 0..runs {
        match one_run(&bin, &kcat, (&lines, n), scratch.path(), run) {
            Ok(mut f) => {
                f.rd_tansu = rd_tansu_run(&lines);
                figs.push(f)
            }
            Err(e) => {
                eprintln!("bench_kafka: {e}");
                std::process::exit(1);
            }
        }
    }
    report(&figs, mb, n);
    match tansu_run(&kcat, &lines) {
        Ok((p, f)) => println!(
            "\ntansu (memory://, same kcat commands, one run): produce {:.0} MB/s (kcat CPU {:.2} s), `kcat -C -e` {:.0} MB/s",
            mb / p.wall,
            p.cpu,
            mb / f.wall
        ),
        Err(e) => println!(
            "\ntansu not measured: {}",
            e.lines().take(3).collect::<Vec<_>>().join(" / ")
        ),
    }
    // A missing tansu is not a failure; anything else the rdkafka client met
    // there (counts that differ included) is, once the tables are out.
    if let Some(e) = figs
        .iter()
        .filter_map(|f| f.rd_tansu.as_ref().err())
        .find(|e| !e.ends_with(NO_TANSU))
    {
        eprintln!("bench_kafka: rdkafka, tansu: {e}");
        std::process::exit(1);
    }
}

fn which(tool: &str) -> Res<String> {
    std::env::var("PATH")
        .unwrap_or_default()
        .split(':')
        .map(|d| Path::new(d).join(tool))
        .find(|p| p.exists())
        .map(|p| p.display().to_string())
        .ok_or_else(|| format!("{tool} not found"))
}
