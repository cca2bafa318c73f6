//! The cluster mount next to the local mount, in one run: append (`dd` of
//! lines, 1 MiB writes) and `cat log` throughput through each. Asserts
//! nothing about speed.
//!
//! ```text
//! cargo build --release --bins --example bench_cluster
//! target/release/examples/bench_cluster          # as root, /dev/fuse present
//! COMMITFS_BENCH_BOOTSTRAP=127.0.0.1:9092 target/release/examples/bench_cluster
//! COMMITFS_BENCH_CLUSTER=mock target/release/examples/bench_cluster
//! COMMITFS_BENCH_QUICK=1 target/release/examples/bench_cluster   # smoke run
//! ```
//!
//! The cluster is, by default, our own listener: `commitfs serve` of a
//! fresh data directory on a free loopback port, started by the bench. Or
//! `COMMITFS_BENCH_BOOTSTRAP` (any broker), or with
//! `COMMITFS_BENCH_CLUSTER=mock` librdkafka's mock cluster in this process.
//! The topic `bench-<pid>-0` is made with mkdir through the cluster mount
//! (on the mock, which has no admin API, up front). Every daemon is
//! unmounted or stopped and reaped at the end, even on error (the guards).

// Only some of what the benches share is used here.
#[allow(dead_code)]
#[path = "../benches/common/mod.rs"]
mod common;
#[path = "common/mod.rs"]
mod serve;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use common::{MIB, env_u64, median};
use serve::sh;

use rdkafka::mocking::MockCluster;
use rdkafka::producer::DefaultProducerContext;

type Res<T> = Result<T, String>;

fn mounted(mnt: &Path) -> bool {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let want = mnt.to_string_lossy();
    info.lines().any(|l| l.split(' ').nth(4) == Some(&*want))
}

/// A foreground daemon; unmounted and reaped on drop.
struct Daemon {
    child: Child,
    mnt: PathBuf,
}

impl Daemon {
    fn start(bin: &Path, args: &[&str], mnt: &Path, log: &Path) -> Res<Daemon> {
        std::fs::create_dir_all(mnt).map_err(|e| e.to_string())?;
        let log = std::fs::File::create(log).map_err(|e| e.to_string())?;
        let child = Command::new(bin)
            .args(["mount", "--foreground"])
            .args(args)
            .arg(mnt)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| e.to_string())?;
        let d = Daemon {
            child,
            mnt: mnt.to_path_buf(),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while !mounted(mnt) {
            if Instant::now() > deadline {
                return Err(format!("{} did not mount", mnt.display()));
            }
            sleep(Duration::from_millis(20));
        }
        Ok(d)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mnt).status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline && self.child.try_wait().ok().flatten().is_none() {
            sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `bytes` of 100-byte lines.
fn write_lines(path: &Path, bytes: u64) -> Res<()> {
    let line = format!("{}\n", "x".repeat(99));
    let text = line.repeat((bytes / 100) as usize);
    std::fs::write(path, text).map_err(|e| e.to_string())
}

/// MB/s of appending `lines` to `part`/log, then of `cat`-ing it, median of `runs`.
fn measure(mnt: &Path, part: &str, lines: &Path, bytes: u64, runs: usize) -> Res<(f64, f64)> {
    let (mut app, mut cat) = (Vec::new(), Vec::new());
    let log = mnt.join(part).join("log");
    for _ in 0..runs {
        let s = sh(&format!(
            "dd if={} of={} bs=1M oflag=append conv=notrunc status=none",
            lines.display(),
            log.display()
        ))?;
        app.push(bytes as f64 / MIB as f64 / s);
    }
    let total = std::fs::metadata(&log).map_err(|e| e.to_string())?.len();
    for _ in 0..runs {
        let s = sh(&format!("cat {} > /dev/null", log.display()))?;
        cat.push(total as f64 / MIB as f64 / s);
    }
    Ok((median(&mut app), median(&mut cat)))
}

/// `commitfs serve` of a data directory; stopped with SIGTERM and reaped on drop.
struct Serve(Child);

impl Serve {
    fn start(bin: &Path, data: &Path, log: &Path) -> Res<(Serve, String)> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        let addr = format!("127.0.0.1:{port}");
        let log = std::fs::File::create(log).map_err(|e| e.to_string())?;
        let child = Command::new(bin)
            .args(["serve", "--listeners", &format!("PLAINTEXT://{addr}")])
            .arg(data)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| e.to_string())?;
        let s = Serve(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(&addr).is_err() {
            if Instant::now() > deadline {
                return Err("commitfs serve did not listen".to_string());
            }
            sleep(Duration::from_millis(20));
        }
        Ok((s, addr))
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline && self.0.try_wait().ok().flatten().is_none() {
            sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The cluster the cluster mount goes to, and what keeps it running.
enum Cluster {
    Listener {
        _kept: Serve,
    },
    Mock {
        _kept: MockCluster<'static, DefaultProducerContext>,
    },
    Outside,
}

fn cluster(bin: &Path, root: &Path) -> Res<(Cluster, String, String, String)> {
    if let Ok(b) = std::env::var("COMMITFS_BENCH_BOOTSTRAP") {
        return Ok((
            Cluster::Outside,
            b.clone(),
            b,
            format!("bench-{}-0", std::process::id()),
        ));
    }
    if std::env::var("COMMITFS_BENCH_CLUSTER").as_deref() == Ok("mock") {
        let m = MockCluster::new(1).map_err(|e| e.to_string())?;
        m.create_topic("bench", 1, 1).map_err(|e| e.to_string())?;
        let b = m.bootstrap_servers();
        return Ok((
            Cluster::Mock { _kept: m },
            b,
            "mock cluster".into(),
            "bench-0".into(),
        ));
    }
    let (s, addr) = Serve::start(bin, &root.join("served"), &root.join("serve.log"))?;
    let name = format!("our listener, commitfs serve at {addr}");
    Ok((Cluster::Listener { _kept: s }, addr, name, "bench-0".into()))
}

fn main() {
    let quick = std::env::var_os("COMMITFS_BENCH_QUICK").is_some();
    let bytes = env_u64(
        "COMMITFS_CLUSTER_BENCH_BYTES",
        if quick { MIB } else { 32 * MIB },
    );
    let runs = env_u64("COMMITFS_CLUSTER_BENCH_RUNS", if quick { 1 } else { 3 }) as usize;
    let exe = std::env::current_exe().expect("exe");
    let bin = std::env::var_os("COMMITFS_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| exe.parent().unwrap().parent().unwrap().join("commitfs"));
    if !Path::new("/dev/fuse").exists() || unsafe { libc::geteuid() } != 0 {
        eprintln!("bench_cluster: needs root and /dev/fuse");
        std::process::exit(2);
    }
    let scratch = tempfile::tempdir().expect("scratch");
    let root = scratch.path().canonicalize().unwrap();
    let lines = root.join("lines.txt");
    write_lines(&lines, bytes).expect("lines");
    let run = || -> Res<Vec<(String, f64, f64)>> {
        let local = Daemon::start(
            &bin,
            &[root.join("data").to_str().unwrap()],
            &root.join("local"),
            &root.join("local.log"),
        )?;
        sh(&format!("mkdir {}", local.mnt.join("bench-0").display()))?;
        let (la, lc) = measure(&local.mnt, "bench-0", &lines, bytes, runs)?;
        drop(local);
        let (kept, bootstrap, name, part) = cluster(&bin, &root)?;
        let mounted = Daemon::start(
            &bin,
            &["--bootstrap-server", &bootstrap],
            &root.join("cluster"),
            &root.join("cluster.log"),
        )?;
        if !matches!(kept, Cluster::Mock { .. }) {
            sh(&format!("mkdir {}", mounted.mnt.join(&part).display()))?;
        }
        let (ca, cc) = measure(&mounted.mnt, &part, &lines, bytes, runs)?;
        drop(mounted);
        drop(kept);
        Ok(vec![
            ("local mount".to_string(), la, lc),
            (format!("cluster mount ({name})"), ca, cc),
        ])
    };
    println!("# cluster mount next to the local mount\n");
    println!("bytes per append run: {bytes}, 100-byte lines, dd bs=1M; runs: {runs} (median)\n");
    match run() {
        Ok(rows) => {
            println!("| mount | append MB/s | cat log MB/s |");
            println!("|---|---|---|");
            for (name, a, c) in rows {
                println!("| {name} | {a:.1} | {c:.1} |");
            }
        }
        Err(e) => {
            eprintln!("bench_cluster: {e}");
            for log in ["local.log", "cluster.log", "serve.log"] {
                let text = std::fs::read_to_string(root.join(log)).unwrap_or_default();
                let lines: Vec<&str> = text.lines().collect();
                eprintln!(
                    "{log}:\n{}",
                    lines[lines.len().saturating_sub(15)..].join("\n")
                );
            }
            // exit() skips destructors: the scratch directory goes first.
            drop(scratch);
            std::process::exit(1);
        }
    }
}
