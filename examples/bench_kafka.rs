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

struct Figures {
    append: f64,
    cat: f64,
    produce: f64,
    fetch: f64,
    /// `kcat -C -c N`: the same fetch, ending at the last record instead of
    /// at the end-of-partition answer, which comes after one long poll
    /// (librdkafka's fetch.wait.max.ms, 500 ms) as from Kafka.
    fetch_count: f64,
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
    let append = sh(&format!("cat {l} >> {}/log", m.display()))?;
    let pid = d.child.id();
    let cpu0 = cpu_seconds(pid);
    let produce = sh(&format!(
        "{kcat} -b {addr} -P -t k -p 0 -l {l} -X linger.ms=5 -X batch.size=1000000"
    ))?;
    let cpu1 = cpu_seconds(pid);
    let cat = sh(&format!("cat {}/log > /dev/null", m.display()))?;
    let cpu2 = cpu_seconds(pid);
    let fetch = sh(&format!(
        "{kcat} -b {addr} -C -t k -p 0 -o beginning -e -q > /dev/null"
    ))?;
    let daemon_cpu = (cpu1 - cpu0, cpu_seconds(pid) - cpu2);
    let fetch_count = sh(&format!(
        "{kcat} -b {addr} -C -t k -p 0 -o beginning -c {n} -q > /dev/null"
    ))?;
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
        daemon_cpu,
    })
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
    let m = |f: fn(&Figures) -> f64| median(figs.iter().map(f).collect());
    let (append, cat, produce, fetch) = (
        m(|f| f.append),
        m(|f| f.cat),
        m(|f| f.produce),
        m(|f| f.fetch),
    );
    let fetch_count = m(|f| f.fetch_count);
    println!("{n} lines of 100 bytes ({mb:.0} MB), median of {runs} runs, MB/s:");
    println!("| what | Kafka listener | mount | ratio (target >= 0.5) |");
    println!("|---|---|---|---|");
    println!(
        "| produce (`kcat -P -l`) vs append (`cat >> log`) | {:.1} | {:.1} | {:.2} |",
        mb / produce,
        mb / append,
        append / produce
    );
    println!(
        "| fetch (`kcat -C -e`) vs `cat log` | {:.1} | {:.1} | {:.2} |",
        mb / fetch,
        mb / cat,
        cat / fetch
    );
    println!(
        "| fetch (`kcat -C -c N`, no final long poll) vs `cat log` | {:.1} | {:.1} | {:.2} |",
        mb / fetch_count,
        mb / cat,
        cat / fetch_count
    );
    let (pc, fc) = (m(|f| f.daemon_cpu.0), m(|f| f.daemon_cpu.1));
    println!(
        "daemon CPU: {pc:.2} s of the produce's {produce:.2} s, {fc:.2} s of the fetch's {fetch:.2} s \
         (the rest is kcat's own work and, for -e, the final long poll)"
    );
    match which("tansu") {
        Ok(_) => println!("tansu is installed, but measuring it is not wired in yet"),
        Err(_) => println!(
            "tansu is not installed (cargo install tansu --features dynostore): not measured"
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
