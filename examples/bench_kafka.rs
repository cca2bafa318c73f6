//! The Kafka listener next to the mount, in the same run, on the same
//! 100-byte lines: `kcat -P -l lines.txt` against `cat lines.txt >> log`, and
//! `kcat -C -e` against `cat log`. Prints each figure, its baseline and the
//! ratio (the target is 0.5 or more). With tansu on the PATH, tansu's
//! produce and fetch of the same lines are measured beside them.
//!
//! Needs root, /dev/fuse and kcat. Not a test: nothing is asserted.
//!
//! ```sh
//! cargo build --release --bins --example bench_kafka
//! target/release/examples/bench_kafka            # 50 MB of lines, 3 runs
//! COMMITFS_BENCH_QUICK=1 target/release/examples/bench_kafka
//! ```

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::net::TcpStream;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

type Res<T> = Result<T, String>;

fn sh(cmd: &str) -> Res<f64> {
    let t = Instant::now();
    let out = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!(
            "`{cmd}` failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(t.elapsed().as_secs_f64())
}

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
    })
}

/// tansu (in memory) with the same kcat commands, or why it was not measured.
fn tansu_run(kcat: &str, lines: &Path) -> Res<(Timed, Timed)> {
    let tansu = which("tansu")?;
    let port = free_port();
    let url = format!("tcp://127.0.0.1:{port}");
    let mut child = Command::new(&tansu)
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
    let addr = format!("127.0.0.1:{port}");
    let r = (|| {
        wait_until("tansu's listener", || TcpStream::connect(&addr).is_ok())?;
        sh(&format!(
            "{tansu} topic create k --partitions 1 --broker {url}"
        ))?;
        let kc = Kcat {
            kcat,
            addr: &addr,
            topic: "k",
        };
        Ok((kc.produce(lines)?, kc.consume("-e")?))
    })();
    let _ = child.kill();
    let _ = child.wait();
    r
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
}

fn main() {
    let quick = std::env::var_os("COMMITFS_BENCH_QUICK").is_some();
    let n = if quick { 20_000 } else { 500_000 };
    let runs = if quick { 1 } else { 3 };
    let bin = std::env::current_exe()
        .ok()
        .and_then(|p| Some(p.parent()?.parent()?.join("commitfs")))
        .filter(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from("target/release/commitfs"));
    let bin = std::env::var_os("COMMITFS_BIN").map_or(bin, PathBuf::from);
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
            Ok(f) => figs.push(f),
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
