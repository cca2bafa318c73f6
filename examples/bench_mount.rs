//! Mount-level benchmarks (issue 5): mounts fresh data dirs with the built
//! `commitfs` binary, runs the shell pipelines of the issue, and prints a
//! markdown table of medians, each figure next to its baseline measured in the
//! same run. Asserts nothing about speed.
//!
//! ```text
//! cargo build --release --bins --example bench_mount    # with the same CARGO_TARGET_DIR
//! target/release/examples/bench_mount                   # as root, /dev/fuse present
//! target/release/examples/bench_mount p3 p5             # only some figures
//! COMMITFS_BENCH_QUICK=1 target/release/examples/bench_mount   # smoke run
//! COMMITFS_BASELINE_BIN=/path/to/old/commitfs target/release/examples/bench_mount p7
//! ```
//!
//! Every daemon is unmounted and reaped at the end, even on error or panic
//! (the `Daemon` drop guard).

#[path = "../benches/common/batches.rs"]
mod batches;
#[path = "../benches/common/mod.rs"]
mod common;
#[path = "common/mod.rs"]
mod serve;

use batches::walk_batches;
use common::{GIB, KIB, MIB, Rng, Spread, env_u64, median, percentile};
use serve::sh;
use std::env;
use std::fs::{self, File};
use std::io::Write;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use commitfs::record::NewRecord;
use commitfs::storage::{LogConfig, LogManager, OpenOptions};

type Res<T> = Result<T, String>;

// ---- parameters ------------------------------------------------------------------

struct Params {
    quick: bool,
    bin: PathBuf,
    /// `COMMITFS_MOUNT_BENCH_RUNS`: runs per figure (median shown).
    runs: usize,
    /// `COMMITFS_MOUNT_BENCH_BYTES`: size of lines.txt for P1 (the P3/P4 partition).
    p1_bytes: u64,
    /// `COMMITFS_MOUNT_BENCH_LOOKUPS`: in-process random lookups for P3.
    lookups: usize,
    /// `COMMITFS_MOUNT_BENCH_SHELL_LOOKUPS`: `cat offset/N` processes for P3.
    shell_lookups: usize,
    /// `COMMITFS_MOUNT_BENCH_SEGMENTS`: sealed 1 MiB segments for P5.
    p5_segments: usize,
    /// `COMMITFS_MOUNT_BENCH_RSS_SEGMENTS`: segments for P6.
    p6_segments: usize,
    /// `COMMITFS_MOUNT_BENCH_PARTITIONS`: partition counts for P7.
    p7_partitions: Vec<usize>,
    /// `COMMITFS_BASELINE_BIN`: another daemon (the code before a change)
    /// that P7 times next to `bin`.
    baseline_bin: Option<PathBuf>,
    /// `COMMITFS_BENCH_DIR`: scratch base (default: the temp dir).
    dir: PathBuf,
    only: Vec<String>,
}

impl Params {
    fn from_env() -> Params {
        let quick = env::var("COMMITFS_BENCH_QUICK").is_ok_and(|v| !v.is_empty() && v != "0");
        let q = |full: u64, small: u64| if quick { small } else { full };
        // target/release/examples/bench_mount -> target/release/commitfs
        let bin = env::var_os("COMMITFS_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                let exe = env::current_exe().expect("current exe");
                exe.parent()
                    .and_then(Path::parent)
                    .expect("exe in target/<profile>/examples")
                    .join("commitfs")
            });
        Params {
            quick,
            bin,
            runs: env_u64("COMMITFS_MOUNT_BENCH_RUNS", q(3, 1)).max(1) as usize,
            p1_bytes: env_u64("COMMITFS_MOUNT_BENCH_BYTES", q(GIB, 8 * MIB)),
            lookups: env_u64("COMMITFS_MOUNT_BENCH_LOOKUPS", q(2000, 50)) as usize,
            shell_lookups: env_u64("COMMITFS_MOUNT_BENCH_SHELL_LOOKUPS", q(100, 10)) as usize,
            p5_segments: env_u64("COMMITFS_MOUNT_BENCH_SEGMENTS", q(1000, 5)) as usize,
            p6_segments: env_u64("COMMITFS_MOUNT_BENCH_RSS_SEGMENTS", q(10_000, 20)) as usize,
            p7_partitions: env::var("COMMITFS_MOUNT_BENCH_PARTITIONS")
                .ok()
                .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect())
                .unwrap_or_else(|| {
                    if quick {
                        vec![1, 10]
                    } else {
                        vec![1, 10, 100, 300]
                    }
                }),
            baseline_bin: env::var_os("COMMITFS_BASELINE_BIN").map(PathBuf::from),
            dir: env::var_os("COMMITFS_BENCH_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(env::temp_dir),
            only: env::args()
                .skip(1)
                .filter(|a| !a.starts_with('-'))
                .map(|a| a.to_lowercase())
                .collect(),
        }
    }
    fn wants(&self, id: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|o| o == id)
    }
}

// ---- small helpers -------------------------------------------------------------------

fn mb_s(bytes: u64, s: f64) -> f64 {
    bytes as f64 / s / 1e6
}

fn us(s: f64) -> String {
    format!("{:.1} µs", s * 1e6)
}

fn ms(s: f64) -> String {
    format!("{:.1} ms", s * 1e3)
}

fn human(b: u64) -> String {
    if b >= GIB {
        format!("{:.2} GiB", b as f64 / GIB as f64)
    } else if b >= MIB {
        format!("{:.1} MiB", b as f64 / MIB as f64)
    } else {
        format!("{:.1} KiB", b as f64 / KIB as f64)
    }
}

fn q(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', r"'\''"))
}

fn mounted(mnt: &Path) -> bool {
    let want = mnt.to_string_lossy();
    fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split(' ').nth(4) == Some(&want))
}

// ---- the daemon guard ------------------------------------------------------------------

/// A `commitfs mount --foreground` child. Dropping it unmounts and reaps it.
struct Daemon {
    child: Option<Child>,
    mnt: PathBuf,
    log: PathBuf,
}

impl Daemon {
    /// Spawns the daemon and returns once the mount answers; also returns the
    /// time from spawn to ready.
    fn start(bin: &Path, data: &Path, mnt: &Path, opts: &[&str]) -> Res<(Daemon, f64)> {
        fs::create_dir_all(mnt).map_err(|e| format!("mkdir {}: {e}", mnt.display()))?;
        let mnt = mnt.canonicalize().map_err(|e| e.to_string())?;
        let log = data.with_extension("daemon.log");
        let logf = File::options()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(|e| format!("{}: {e}", log.display()))?;
        let parent_dev = fs::metadata(mnt.parent().unwrap_or(Path::new("/")))
            .map_err(|e| e.to_string())?
            .dev();
        let mut cmd = Command::new(bin);
        cmd.arg("mount").arg("--foreground");
        for o in opts {
            cmd.arg("-o").arg(o);
        }
        cmd.arg(data).arg(&mnt);
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(logf);
        let t = Instant::now();
        let child = cmd
            .spawn()
            .map_err(|e| format!("spawn {}: {e}", bin.display()))?;
        let mut d = Daemon {
            child: Some(child),
            mnt: mnt.clone(),
            log,
        };
        // Ready = the mountpoint is served by the daemon (its st_dev changes;
        // the stat itself is a FUSE round trip once mounted).
        loop {
            if fs::metadata(&mnt).is_ok_and(|m| m.dev() != parent_dev) {
                break;
            }
            if let Some(st) = d.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                d.child = None;
                return Err(format!(
                    "commitfs exited with {st} before mounting:\n{}",
                    d.log_tail()
                ));
            }
            if t.elapsed() > Duration::from_secs(120) {
                return Err(format!("no mount after 120 s:\n{}", d.log_tail()));
            }
            sleep(Duration::from_micros(200));
        }
        let ready = t.elapsed().as_secs_f64();
        Ok((d, ready))
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, |c| c.id())
    }

    /// SIGTERM, as systemd or `kill` ends a daemon; returns the time until
    /// it exited (0 is required).
    fn terminate(&mut self) -> Res<f64> {
        let mut child = self.child.take().ok_or("no daemon")?;
        let t = Instant::now();
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let st = child.wait().map_err(|e| e.to_string())?;
        let s = t.elapsed().as_secs_f64();
        if !st.success() {
            return Err(format!("daemon exited with {st}:\n{}", self.log_tail()));
        }
        Ok(s)
    }

    fn log_tail(&self) -> String {
        let s = fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = s.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// Unmounts (the daemon then flushes and exits) and reaps the daemon.
    fn stop(&mut self) -> Res<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        let mut err = None;
        if mounted(&self.mnt) {
            let st = Command::new("umount").arg(&self.mnt).status();
            if !st.is_ok_and(|s| s.success()) {
                err = Some("umount failed; detaching lazily".to_string());
                let _ = Command::new("umount").arg("-l").arg(&self.mnt).status();
            }
        }
        let deadline = Instant::now() + Duration::from_secs(300);
        loop {
            match child.try_wait() {
                Ok(Some(st)) => {
                    if !st.success() {
                        err.get_or_insert(format!("daemon exited with {st}:\n{}", self.log_tail()));
                    }
                    break;
                }
                Ok(None) if Instant::now() < deadline => sleep(Duration::from_millis(5)),
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    err.get_or_insert("daemon did not exit after umount; killed".into());
                    break;
                }
            }
        }
        if mounted(&self.mnt) {
            let _ = Command::new("umount").arg("-l").arg(&self.mnt).status();
        }
        err.map_or(Ok(()), Err)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Err(e) = self.stop() {
            eprintln!("bench_mount: {e}");
        }
    }
}

fn vm_rss_kib(pid: u32, field: &str) -> u64 {
    fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn status_counter(mnt: &Path, part: &str, name: &str) -> Res<u64> {
    let text = fs::read_to_string(mnt.join(part).join("status")).map_err(|e| e.to_string())?;
    text.lines()
        .find_map(|l| {
            l.strip_prefix(name)?
                .strip_prefix(": ")?
                .trim()
                .parse()
                .ok()
        })
        .ok_or_else(|| format!("no {name} in status"))
}

// ---- data ------------------------------------------------------------------------------

/// `bytes` of 100-byte lines (99 characters + newline).
fn write_lines(path: &Path, bytes: u64) -> Res<()> {
    let mut f = std::io::BufWriter::with_capacity(
        MIB as usize,
        File::create(path).map_err(|e| e.to_string())?,
    );
    let mut line = [b'x'; 100];
    line[99] = b'\n';
    let mut i = 0u64;
    while i * 100 < bytes {
        let head = format!("{i:012} ");
        line[..head.len()].copy_from_slice(head.as_bytes());
        f.write_all(&line).map_err(|e| e.to_string())?;
        i += 1;
    }
    f.flush().map_err(|e| e.to_string())
}

fn log_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "log"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// A closed data dir with one partition: `sealed` sealed segments made by
/// `segment.bytes` (when `seg_bytes` is set) or by an explicit roll every
/// `per_segment` batches.
fn build_data(
    data: &Path,
    part: &str,
    sealed: usize,
    seg_bytes: Option<u64>,
    per_segment: usize,
) -> Res<(u64, f64)> {
    let t = Instant::now();
    let mut config = LogConfig::default();
    if let Some(b) = seg_bytes {
        config
            .set("segment.bytes", &b.to_string())
            .map_err(|e| e.to_string())?;
    }
    let mut mgr = LogManager::open(data, config.clone(), OpenOptions::default())
        .map_err(|e| e.to_string())?;
    let mut log = mgr.create_partition(part).map_err(|e| e.to_string())?;
    let mut rolls = 0usize;
    let value = [b'v'; 100];
    let records = vec![NewRecord::value(&value); 100];
    let mut n = 0usize;
    loop {
        let st = log.status().unwrap();
        let done = if sealed == 0 {
            st.size_bytes + 16 * KIB >= MIB
        } else {
            st.segments > sealed
        };
        if done {
            break;
        }
        log.append(&records).map_err(|e| e.to_string())?;
        n += 1;
        if seg_bytes.is_none()
            && n.is_multiple_of(per_segment.max(1))
            && log.status().unwrap().segments <= sealed
        {
            log.roll().map_err(|e| e.to_string())?;
            rolls += 1;
            // A rolled segment keeps its index files open and mapped until the
            // data dir is reopened (3 descriptors per segment): reopen now and
            // then so that 10,000 segments fit the descriptor limit.
            if rolls.is_multiple_of(1000) {
                // Each roll's flush thread holds the partition (and so every
                // descriptor) until its fsync is done: wait for the backlog.
                while std::sync::Arc::strong_count(&log) > 2 {
                    sleep(Duration::from_millis(10));
                }
                drop(log);
                mgr.close().map_err(|e| e.to_string())?;
                drop(mgr); // before the new one opens every segment again
                mgr = LogManager::open(data, config.clone(), OpenOptions::default())
                    .map_err(|e| e.to_string())?;
                log = mgr.partition(part).ok_or("partition gone after reopen")?;
            }
        }
    }
    let size = log.status().unwrap().size_bytes;
    drop(log);
    mgr.close().map_err(|e| e.to_string())?;
    Ok((size, t.elapsed().as_secs_f64()))
}

// ---- P1, P3, P4 ---------------------------------------------------------------------------

/// Flushes every dirty page, so that a timed write starts with none behind
/// it: ext4 throttles a writer once dirty pages pile up, and a baseline
/// that ran behind the other side's dirty pages would look slower than it is.
fn sync_all() -> Res<()> {
    sh("sync").map(|_| ())
}

/// Times `a` and `b` once per run, alternating which goes first, each
/// after a `sync`; `setup(run)` runs untimed before each pair.
fn paired(
    runs: usize,
    mut setup: impl FnMut(usize) -> Res<()>,
    mut a: impl FnMut(usize) -> Res<f64>,
    mut b: impl FnMut(usize) -> Res<f64>,
) -> Res<(Vec<f64>, Vec<f64>)> {
    let (mut ta, mut tb) = (Vec::new(), Vec::new());
    for run in 0..runs {
        setup(run)?;
        if run % 2 == 0 {
            sync_all()?;
            ta.push(a(run)?);
            sync_all()?;
            tb.push(b(run)?);
        } else {
            sync_all()?;
            tb.push(b(run)?);
            sync_all()?;
            ta.push(a(run)?);
        }
    }
    Ok((ta, tb))
}

/// `median (min–max) MB/s` of `bytes` moved in each of `times`.
fn rate(bytes: u64, times: &[f64]) -> String {
    let r = Spread::of(times).map(|s| mb_s(bytes, s));
    format!("{:.0} MB/s ({:.0}–{:.0})", r.median, r.min, r.max)
}

/// The ratio of median times `base / ours` and the spread of the per-run
/// ratios (runs were paired).
fn ratio(ours: &[f64], base: &[f64]) -> String {
    let per_run: Vec<f64> = ours.iter().zip(base).map(|(o, b)| b / o).collect();
    let r = Spread::of(&per_run);
    let m = Spread::of(base).median / Spread::of(ours).median;
    format!("**{m:.2}** (runs {:.2}–{:.2})", r.min, r.max)
}

fn p1_p3_p4(p: &Params, scratch: &Path, out: &mut Vec<String>) -> Res<()> {
    let lines = scratch.join("lines.txt");
    write_lines(&lines, p.p1_bytes)?;
    let data = scratch.join("data-p1");
    let mnt = scratch.join("mnt-p1");
    let (d, _) = Daemon::start(&p.bin, &data, &mnt, &[])?;
    let mnt = d.mnt.clone();
    let plain = scratch.join("plain");
    fs::create_dir_all(&plain).map_err(|e| e.to_string())?;
    // One topic per run: a topic's partitions must exist from 0 without holes.
    let name = |run: usize| format!("t{run}-0");
    let keep = name(p.runs - 1);
    let target = |run: usize| mnt.join(name(run)).join("log");
    let base = |run: usize| plain.join(format!("plain-{run}"));
    // Both sides start each run on a fresh, empty file: a new partition
    // (its first segment) and a new plain file; the last partition is kept.
    let setup = |run: usize| -> Res<()> {
        if run > 0 {
            fs::remove_file(base(run - 1)).map_err(|e| e.to_string())?;
            let prev = mnt.join(name(run - 1));
            fs::remove_dir(&prev).map_err(|e| format!("rmdir {}: {e}", prev.display()))?;
        }
        let part = mnt.join(name(run));
        fs::create_dir(&part).map_err(|e| format!("mkdir {}: {e}", part.display()))?;
        File::create(base(run)).map_err(|e| e.to_string())?;
        Ok(())
    };
    let (tm, tp) = paired(
        p.runs,
        setup,
        |run| sh(&format!("cat {} >> {}", q(&lines), q(&target(run)))),
        |run| sh(&format!("cat {} >> {}", q(&lines), q(&base(run)))),
    )?;
    let blk_m = fs::metadata(mnt.join(&keep).join("log"))
        .map(|m| m.blksize())
        .unwrap_or(0);
    let blk_p = fs::metadata(base(p.runs - 1))
        .map(|m| m.blksize())
        .unwrap_or(0);
    fs::remove_file(base(p.runs - 1)).map_err(|e| e.to_string())?;
    if p.wants("p1") {
        out.push(format!(
            "| P1 | `cat lines.txt >> MNT/t-0/log`, {} of 100-byte lines, {} runs (st_blksize {} vs {}) | {} | `cat lines.txt >> plain-file` (fresh file, `sync` before each run): {} | {} | ≥ 0.5 |",
            human(p.p1_bytes),
            p.runs,
            blk_m,
            blk_p,
            rate(p.p1_bytes, &tm),
            rate(p.p1_bytes, &tp),
            ratio(&tm, &tp)
        ));
    }

    let part_dir = data.join(&keep);
    let files = log_files(&part_dir);
    if p.wants("p4") {
        p4(p, &mnt.join(&keep), &files, out)?;
    }
    if p.wants("p3") {
        p3(p, &mnt, &keep, &files, out)?;
    }
    if p.wants("p8") {
        p8(p, &mnt.join(&keep), out)?;
    }
    drop(d);
    Ok(())
}

/// P4: the consumer stream (`cat log`) and the raw segments, each through
/// the mount and against `cat` of the backing `.log` files.
fn p4(p: &Params, part: &Path, files: &[PathBuf], out: &mut Vec<String>) -> Res<()> {
    let raw_bytes: u64 = files
        .iter()
        .map(|f| fs::metadata(f).map_or(0, |m| m.len()))
        .sum();
    let stream_bytes = fs::metadata(part.join("log"))
        .map_err(|e| e.to_string())?
        .len();
    let via: Vec<String> = files
        .iter()
        .map(|f| q(&part.join(f.file_name().unwrap())))
        .collect();
    let direct: Vec<String> = files.iter().map(|f| q(f)).collect();
    let stream_cmd = format!("cat {} > /dev/null", q(&part.join("log")));
    let raw_via = format!("cat {} > /dev/null", via.join(" "));
    let raw_direct = format!("cat {} > /dev/null", direct.join(" "));
    // Once untimed each: the page cache and the stream's map are warm.
    for c in [&stream_cmd, &raw_via, &raw_direct] {
        sh(c)?;
    }
    let runs = p.runs.max(3);
    let (ts, td) = paired(runs, |_| Ok(()), |_| sh(&stream_cmd), |_| sh(&raw_direct))?;
    out.push(format!(
        "| P4 | `cat MNT/t-0/log > /dev/null`: the consumer stream, {} of values, {runs} runs | {} | `cat DATA/t-0/*.log > /dev/null` ({} in {} files, the same records): {} | {} | ≥ 0.25 |",
        human(stream_bytes),
        rate(stream_bytes, &ts),
        human(raw_bytes),
        files.len(),
        rate(raw_bytes, &td),
        ratio(&ts, &td)
    ));
    let (tv, td) = paired(runs, |_| Ok(()), |_| sh(&raw_via), |_| sh(&raw_direct))?;
    out.push(format!(
        "| P4r | `cat MNT/t-0/*.log > /dev/null` ({} in {} files), {runs} runs | {} | `cat DATA/t-0/*.log`: {} | {} | ≥ 0.8 |",
        human(raw_bytes),
        files.len(),
        rate(raw_bytes, &tv),
        rate(raw_bytes, &td),
        ratio(&tv, &td)
    ));
    Ok(())
}

fn p3(p: &Params, mnt: &Path, part: &str, files: &[PathBuf], out: &mut Vec<String>) -> Res<()> {
    let oracle = walk_batches(files, true);
    let end = oracle.last().map_or(0, |b| b.last_offset + 1);
    if end == 0 {
        return Err("P3: empty partition".into());
    }
    let handles: Vec<File> = files.iter().map(|f| File::open(f).unwrap()).collect();
    let mut buf = vec![0u8; oracle.iter().map(|b| b.size).max().unwrap_or(0)];
    let offset_dir = mnt.join(part).join("offset");
    let mut rng = Rng(7);
    let find = |n: i64| oracle[oracle.partition_point(|b| b.last_offset < n)];
    for _ in 0..10.min(p.lookups) {
        let n = rng.below(end as u64) as i64;
        fs::read(offset_dir.join(n.to_string())).map_err(|e| e.to_string())?;
    }
    let before = status_counter(mnt, part, "lookup_bytes_read")?;
    let (mut tm, mut tfd, mut topen) = (Vec::new(), Vec::new(), Vec::new());
    let mut batch_bytes = 0u64;
    for i in 0..p.lookups {
        let n = rng.below(end as u64) as i64;
        let b = find(n);
        batch_bytes += b.size as u64;
        let via_mount = || -> Res<f64> {
            let t = Instant::now();
            let v = fs::read(offset_dir.join(n.to_string())).map_err(|e| e.to_string())?;
            let s = t.elapsed().as_secs_f64();
            std::hint::black_box(v);
            Ok(s)
        };
        let mut pread_fd = || {
            let t = Instant::now();
            handles[b.file]
                .read_exact_at(&mut buf[..b.size], b.pos)
                .expect("pread");
            t.elapsed().as_secs_f64()
        };
        if i % 2 == 0 {
            tm.push(via_mount()?);
            tfd.push(pread_fd());
        } else {
            tfd.push(pread_fd());
            tm.push(via_mount()?);
        }
        let t = Instant::now();
        let f = File::open(&files[b.file]).map_err(|e| e.to_string())?;
        f.read_exact_at(&mut buf[..b.size], b.pos)
            .map_err(|e| e.to_string())?;
        drop(f);
        topen.push(t.elapsed().as_secs_f64());
    }
    let after = status_counter(mnt, part, "lookup_bytes_read")?;
    let per_lookup = (after - before) as f64 / p.lookups as f64;
    let per_batch = batch_bytes as f64 / p.lookups as f64;
    for v in [&mut tm, &mut tfd, &mut topen] {
        v.sort_by(|a, b| a.total_cmp(b));
    }
    let (m50, fd50, op50) = (
        percentile(&tm, 0.5),
        percentile(&tfd, 0.5),
        percentile(&topen, 0.5),
    );
    out.push(format!(
        "| P3 | read `MNT/t-0/offset/N` in-process, {} random N of {end} (p50 / p99) | {} / {} | `pread` of the batch, fd open: {} / {}; open+pread+close: {} / {} | **{:.2}** (vs open+pread+close {:.2}) | ≤ 2 |",
        p.lookups,
        us(m50),
        us(percentile(&tm, 0.99)),
        us(fd50),
        us(percentile(&tfd, 0.99)),
        us(op50),
        us(percentile(&topen, 0.99)),
        m50 / fd50,
        m50 / op50
    ));
    out.push(format!(
        "| P3 | bytes read per lookup (`status` lookup_bytes_read) | {per_lookup:.0} B | batch size: {per_batch:.0} B | **{:.2}** | ≤ (index interval + batch) / batch |",
        per_lookup / per_batch
    ));
    // The shell pipeline itself: one process per lookup on both sides.
    let (mut sm, mut sd) = (Vec::new(), Vec::new());
    for _ in 0..p.shell_lookups {
        let n = rng.below(end as u64) as i64;
        let b = find(n);
        let c1 = format!("cat {} > /dev/null", q(&offset_dir.join(n.to_string())));
        let c2 = format!(
            "dd if={} of=/dev/null bs={} skip={} count=1 iflag=skip_bytes,count_bytes status=none",
            q(&files[b.file]),
            b.size,
            b.pos
        );
        sm.push(sh(&c1)?);
        sd.push(sh(&c2)?);
    }
    let (sm, sd) = (median(&mut sm), median(&mut sd));
    out.push(format!(
        "| P3 | `cat MNT/t-0/offset/N` ({} processes) | {} | `dd` of the batch bytes from the backing file: {} | {:.2} | ≤ 2 |",
        p.shell_lookups,
        ms(sm),
        ms(sd),
        sm / sd
    ));
    Ok(())
}

// ---- P5, P6 ---------------------------------------------------------------------------------

/// P8: `ls -f offset/` of the P1 partition, which lists the offsets that
/// hold a record by walking batch headers from the offset index (a batch
/// whose records fill its range gives them from its header), against
/// `cat log` of the same partition, which decodes every record.
fn p8(p: &Params, part: &Path, out: &mut Vec<String>) -> Res<()> {
    let offsets = part.join("offset");
    let log = part.join("log");
    let listed = Command::new("sh")
        .arg("-c")
        .arg(format!("ls -f {} | wc -l", q(&offsets)))
        .output()
        .map_err(|e| e.to_string())?;
    let names: u64 = String::from_utf8_lossy(&listed.stdout)
        .trim()
        .parse::<u64>()
        .map_err(|e| format!("ls -f offset/ | wc -l: {e}"))?
        .saturating_sub(2);
    let (tl, tc) = paired(
        p.runs,
        |_| Ok(()),
        |_| sh(&format!("ls -f {} > /dev/null", q(&offsets))),
        |_| sh(&format!("cat {} > /dev/null", q(&log))),
    )?;
    let (l, c) = (Spread::of(&tl), Spread::of(&tc));
    out.push(format!(
        "| P8 | `ls -f MNT/t-0/offset` of the P1 partition ({names} names, {} runs) | {} ({}–{}), {:.0} ns a name | `cat MNT/t-0/log > /dev/null`, every record decoded: {} | {} | — |",
        p.runs,
        ms(l.median),
        ms(l.min),
        ms(l.max),
        l.median * 1e9 / names.max(1) as f64,
        ms(c.median),
        ratio(&tl, &tc)
    ));
    Ok(())
}

fn p5(p: &Params, scratch: &Path, out: &mut Vec<String>) -> Res<()> {
    let many = scratch.join("data-p5-many");
    let one = scratch.join("data-p5-one");
    let (many_bytes, build_s) = build_data(&many, "s-0", p.p5_segments, Some(MIB), 0)?;
    build_data(&one, "s-0", 0, Some(MIB), 0)?;
    let mnt = scratch.join("mnt-p5");
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for run in 0..p.runs.max(5) {
        for k in 0..2 {
            let use_many = (k + run) % 2 == 0;
            let (mut d, s) = Daemon::start(&p.bin, if use_many { &many } else { &one }, &mnt, &[])?;
            d.stop()?;
            if use_many { &mut a } else { &mut b }.push(s);
        }
    }
    let (a, b) = (median(&mut a), median(&mut b));
    out.push(format!(
        "| P5 | mount ready, clean data dir with {} sealed 1 MiB segments ({}, built in {:.0} s) | {} | same with 1 segment: {} | **{:.2}** | ≤ 2 |",
        p.p5_segments,
        human(many_bytes),
        build_s,
        ms(a),
        ms(b),
        a / b
    ));
    fs::remove_dir_all(&many).map_err(|e| e.to_string())?;
    fs::remove_dir_all(&one).map_err(|e| e.to_string())?;
    Ok(())
}

fn p6(p: &Params, scratch: &Path, out: &mut Vec<String>) -> Res<()> {
    let many = scratch.join("data-p6-many");
    let one = scratch.join("data-p6-one");
    let (bytes, build_s) = build_data(&many, "r-0", p.p6_segments, None, 1)?;
    build_data(&one, "r-0", 0, None, usize::MAX)?;
    let mnt = scratch.join("mnt-p6");
    let rss = |data: &Path, reads: usize| -> Res<(u64, u64, f64)> {
        let bases: Vec<i64> = log_files(&data.join("r-0"))
            .iter()
            .filter_map(|f| f.file_stem()?.to_str()?.parse().ok())
            .collect();
        let (d, ready) = Daemon::start(&p.bin, data, &mnt, &[])?;
        let end = status_counter(&d.mnt, "r-0", "log_end_offset")? as i64;
        // (first offset, end) of every segment holding records.
        let ranges: Vec<(i64, i64)> = bases
            .iter()
            .enumerate()
            .map(|(i, &b)| (b, bases.get(i + 1).copied().unwrap_or(end)))
            .filter(|(b, e)| e > b)
            .collect();
        let mut rng = Rng(99);
        for _ in 0..reads {
            let (lo, hi) = ranges[rng.below(ranges.len() as u64) as usize];
            let n = lo + rng.below((hi - lo) as u64) as i64;
            fs::read(d.mnt.join("r-0").join("offset").join(n.to_string()))
                .map_err(|e| format!("offset {n}: {e}"))?;
        }
        let pid = d.pid();
        let r = (vm_rss_kib(pid, "VmRSS:"), vm_rss_kib(pid, "VmHWM:"), ready);
        drop(d);
        Ok(r)
    };
    let (rm, hm, readym) = rss(&many, 100)?;
    let (ro, ho, _) = rss(&one, 1)?;
    out.push(format!(
        "| P6 | daemon VmRSS after mounting {} segments ({}, built in {:.0} s, mounted in {}) and reading one offset in each of 100 random segments (VmHWM) | {:.1} MiB ({:.1}) | 1 segment, one read: {:.1} MiB ({:.1}) | {:.2} | ≤ 64 MiB |",
        p.p6_segments,
        human(bytes),
        build_s,
        ms(readym),
        rm as f64 / 1024.0,
        hm as f64 / 1024.0,
        ro as f64 / 1024.0,
        ho as f64 / 1024.0,
        rm as f64 / ro.max(1) as f64
    ));
    fs::remove_dir_all(&many).map_err(|e| e.to_string())?;
    fs::remove_dir_all(&one).map_err(|e| e.to_string())?;
    Ok(())
}

// ---- P7 ---------------------------------------------------------------------------------

/// P7: SIGTERM until the daemon exited, for a data dir of `n` partitions,
/// each idle or holding one unflushed append; `COMMITFS_BASELINE_BIN`, when
/// set, is timed the same way in the same runs, alternating which goes first.
fn p7(p: &Params, scratch: &Path, out: &mut Vec<String>) -> Res<()> {
    let mut bins = vec![&p.bin];
    bins.extend(&p.baseline_bin);
    for &n in &p.p7_partitions {
        for dirty in [false, true] {
            let mut times = vec![Vec::new(); bins.len()];
            for run in 0..p.runs.max(3) {
                for k in 0..bins.len() {
                    let which = (k + run) % bins.len();
                    times[which].push(p7_once(bins[which], scratch, n, dirty)?);
                }
            }
            let medians: Vec<f64> = times.iter_mut().map(|t| median(t)).collect();
            let (base, ratio) = match medians.get(1) {
                Some(b) => (
                    format!("before: {}", ms(*b)),
                    format!("**{:.2}**", medians[0] / b),
                ),
                None => (
                    "before: not measured (set COMMITFS_BASELINE_BIN)".into(),
                    "-".into(),
                ),
            };
            let what = if dirty {
                "one unflushed append each"
            } else {
                "idle"
            };
            out.push(format!(
                "| P7 | SIGTERM until exit, {n} partitions, {what} | {} | {base} | {ratio} | grows with the work left |",
                ms(medians[0]),
            ));
        }
    }
    Ok(())
}

/// One P7 run of `bin`: a fresh data dir of `n` partitions, mounted, one
/// line appended to each when `dirty`, then SIGTERM.
fn p7_once(bin: &Path, scratch: &Path, n: usize, dirty: bool) -> Res<f64> {
    let data = scratch.join("data-p7");
    let _ = fs::remove_dir_all(&data);
    // 1 MiB indexes rather than 10 MiB: every active segment preallocates both.
    let index_bytes = "segment.index.bytes=1048576";
    let mut config = LogConfig::default();
    let (k, v) = index_bytes.split_once('=').unwrap_or_default();
    config.set(k, v).map_err(|e| e.to_string())?;
    let mgr = LogManager::open(&data, config, OpenOptions::default()).map_err(|e| e.to_string())?;
    for i in 0..n {
        mgr.create_partition(&format!("t{i}-0"))
            .map_err(|e| e.to_string())?;
    }
    mgr.close().map_err(|e| e.to_string())?;
    drop(mgr);
    let (mut d, _) = Daemon::start(bin, &data, &scratch.join("mnt-p7"), &[index_bytes])?;
    for i in (0..n).filter(|_| dirty) {
        let log = d.mnt.join(format!("t{i}-0/log"));
        File::options()
            .append(true)
            .open(&log)
            .and_then(|mut f| f.write_all(b"x\n"))
            .map_err(|e| format!("{}: {e}", log.display()))?;
    }
    let s = d.terminate()?;
    if !data.join(".kafka_cleanshutdown").exists() {
        return Err(format!(
            "P7: no clean-shutdown marker after SIGTERM ({n} partitions):\n{}",
            d.log_tail()
        ));
    }
    fs::remove_dir_all(&data).map_err(|e| e.to_string())?;
    Ok(s)
}

// ---- main -----------------------------------------------------------------------------------

fn main() {
    let p = Params::from_env();
    if !p.bin.exists() {
        eprintln!(
            "bench_mount: {} not found: build it first (cargo build --release --bins --example bench_mount), or set COMMITFS_BIN",
            p.bin.display()
        );
        std::process::exit(2);
    }
    if !Path::new("/dev/fuse").exists() || unsafe { libc::geteuid() } != 0 {
        eprintln!("bench_mount: needs root and /dev/fuse (the daemon mounts with mount(2))");
        std::process::exit(2);
    }
    fs::create_dir_all(&p.dir).expect("bench dir");
    let scratch = tempfile::Builder::new()
        .prefix("commitfs-mount-bench-")
        .tempdir_in(&p.dir)
        .expect("scratch dir");
    let root = scratch.path().canonicalize().expect("canonical scratch");
    println!("# commitfs mount benchmarks\n");
    println!(
        "quick={} runs={} bin={} p1_bytes={} lookups={} shell_lookups={} p5_segments={} p6_segments={} scratch={}\n",
        p.quick,
        p.runs,
        p.bin.display(),
        human(p.p1_bytes),
        p.lookups,
        p.shell_lookups,
        p.p5_segments,
        p.p6_segments,
        root.display()
    );
    let mut rows = Vec::new();
    let mut failed = false;
    let mut step = |name: &str, r: Res<()>| {
        if let Err(e) = r {
            eprintln!("bench_mount: {name}: {e}");
            failed = true;
        }
    };
    if p.wants("p1") || p.wants("p3") || p.wants("p4") || p.wants("p8") {
        step("P1/P3/P4", p1_p3_p4(&p, &root, &mut rows));
    }
    if p.wants("p5") {
        step("P5", p5(&p, &root, &mut rows));
    }
    if p.wants("p6") {
        step("P6", p6(&p, &root, &mut rows));
    }
    if p.wants("p7") {
        step("P7", p7(&p, &root, &mut rows));
    }
    println!("| id | commitfs | figure | baseline (same run) | ratio | target |");
    println!("|---|---|---|---|---|---|");
    for r in &rows {
        // Rows are built as "| id | what | figure | baseline | ratio | target |".
        println!("{r}");
    }
    drop(scratch);
    if failed {
        std::process::exit(1);
    }
}
