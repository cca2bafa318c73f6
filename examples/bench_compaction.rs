//! The log cleaner against `cp` of the same segments, in one run (issue
//! 20): a partition of 100-byte records (a 10-byte key, a value to make
//! 100 bytes on the wire) over 1M distinct keys, every key written about
//! ten times, cleaned by one pass asked for. Prints a table; nothing
//! asserts a speed.
//!
//! ```sh
//! mkdir -p /tmp/bench && mount -t tmpfs -o size=4G tmpfs /tmp/bench
//! COMMITFS_BENCH_DIR=/tmp/bench target/release/examples/bench_compaction
//! umount /tmp/bench
//! COMMITFS_BENCH_QUICK=1 target/release/examples/bench_compaction   # CI smoke run
//! ```
//!
//! | variable | default (quick) | what |
//! |---|---|---|
//! | `COMMITFS_BENCH_BYTES` | 1G (4M) | bytes of records in the partition |
//! | `COMMITFS_BENCH_KEYS` | 1000000 (10000) | distinct keys |
//! | `COMMITFS_BENCH_DEDUPE` | 128M | `log.cleaner.dedupe.buffer.size` |
//! | `COMMITFS_BENCH_TRIALS` | 5 (1) | trials, each a `cp` and a pass of each kind |
//! | `COMMITFS_BENCH_DIR` | `$TMPDIR` | where the scratch data dir goes (a tmpfs) |
//!
//! The pass runs in a child process of its own (`bench_compaction clean
//! DIR`), so its peak RSS is the pass's alone. The child first cleans a
//! small partition, so that the big pass finds the cleaner's dedupe buffer
//! faulted in as a running daemon's is; that first pass is timed apart.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use commitfs::record::NewRecord;
use commitfs::storage::cleaner::{CleanerConfig, Sharing};
use commitfs::storage::{LogConfig, LogManager, OpenOptions};

const RECORD: usize = 100;

fn size(var: &str, default: u64, quick: u64) -> u64 {
    let quick_run = env::var("COMMITFS_BENCH_QUICK").is_ok_and(|v| !v.is_empty() && v != "0");
    let Ok(text) = env::var(var) else {
        return if quick_run { quick } else { default };
    };
    let (num, mult) = match text.chars().last() {
        Some('K') => (&text[..text.len() - 1], 1 << 10),
        Some('M') => (&text[..text.len() - 1], 1 << 20),
        Some('G') => (&text[..text.len() - 1], 1 << 30),
        _ => (&text[..], 1),
    };
    num.parse::<u64>().expect("a size") * mult
}

fn open(dir: &Path, dedupe: u64, sharing: Sharing) -> LogManager {
    let mut cleaner = CleanerConfig {
        sharing,
        ..CleanerConfig::default()
    };
    cleaner.set("log.cleaner.threads", "0").unwrap();
    cleaner
        .set("log.cleaner.dedupe.buffer.size", &dedupe.to_string())
        .unwrap();
    let opts = OpenOptions {
        read_only: false,
        cleaner,
        ..OpenOptions::default()
    };
    let mut config = LogConfig::default();
    config.set("segment.bytes", "134217728").unwrap();
    config.set("file.delete.delay.ms", "0").unwrap();
    config.set("cleanup.policy", "compact").unwrap();
    LogManager::open(dir, config, opts).unwrap()
}

/// Appends `bytes` of 100-byte records over `keys` keys, 100 per batch,
/// each key in turn; rolls so every record is cleanable. Returns how many.
fn fill(dir: &Path, bytes: u64, keys: u64, dedupe: u64) -> u64 {
    let mgr = open(dir, dedupe, Sharing::default());
    let log = mgr.create_partition("t-0").unwrap();
    let n = bytes / RECORD as u64;
    // A record of a 10-byte key and a 72-byte value is 100 bytes in a batch
    // (its length, attributes, deltas and lengths take 18).
    let value = vec![b'v'; 72];
    let mut keys_buf: Vec<Vec<u8>> = Vec::with_capacity(100);
    let mut i = 0;
    while i < n {
        keys_buf.clear();
        for j in i..(i + 100).min(n) {
            keys_buf.push(format!("k{:09}", j % keys).into_bytes());
        }
        let recs: Vec<NewRecord> = keys_buf
            .iter()
            .map(|k| NewRecord::keyed(k, &value))
            .collect();
        log.append(&recs).unwrap();
        i += recs.len() as u64;
    }
    log.roll().unwrap();
    drop(log);
    // A small partition for the child's first pass (see `clean`).
    let warm = mgr.create_partition("w-0").unwrap();
    for i in 0..100 {
        let keys: Vec<Vec<u8>> = (0..100)
            .map(|j| format!("w{:09}", i * 100 + j).into_bytes())
            .collect();
        let recs: Vec<NewRecord> = keys.iter().map(|k| NewRecord::keyed(k, &value)).collect();
        warm.append(&recs).unwrap();
    }
    warm.roll().unwrap();
    drop(warm);
    mgr.close().unwrap();
    n
}

fn du(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.ends_with(".log") || n.ends_with(".index") || n.ends_with(".timeindex")
        })
        .map(|e| e.metadata().unwrap().len())
        .sum()
}

/// `cp` of the segment files, as the baseline a pass that copies every
/// segment cannot beat.
fn cp_time(part: &Path, scratch: &Path) -> Duration {
    std::fs::create_dir_all(scratch).unwrap();
    let files: Vec<PathBuf> = std::fs::read_dir(part)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            matches!(
                p.extension().and_then(|x| x.to_str()),
                Some("log" | "index" | "timeindex")
            )
        })
        .collect();
    let start = Instant::now();
    let st = Command::new("cp")
        .args(&files)
        .arg(scratch)
        .status()
        .unwrap();
    let t = start.elapsed();
    assert!(st.success());
    std::fs::remove_dir_all(scratch).unwrap();
    t
}

/// The child: one pass over `t-0`, then its figures and peak RSS.
fn clean(dir: &Path, dedupe: u64, sharing: Sharing) {
    // The cleaner's summary on stderr, with COMMITFS_BENCH_LOG=1.
    if env::var("COMMITFS_BENCH_LOG").is_ok() {
        env_logger::Builder::new().parse_filters("info").init();
    }
    let mgr = open(dir, dedupe, sharing);
    // A cleaner's first pass faults its dedupe buffer in (a new key's probe
    // lands anywhere in it, so every page is touched), which Kafka pays
    // when a cleaner thread starts. The small partition's pass pays it
    // here, and is timed on its own; the big pass then runs as it would in
    // a daemon that has cleaned before.
    let warm = mgr.partition("w-0").unwrap();
    let start = Instant::now();
    warm.clean_now().unwrap().expect("a pass");
    let first = start.elapsed();
    drop(warm);
    let log = mgr.partition("t-0").unwrap();
    let start = Instant::now();
    let pass = log.clean_now().unwrap().expect("a pass");
    let t = start.elapsed();
    // SAFETY: getrusage into a zeroed struct of its own.
    let (rss_kib, cpu) = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        (u.ru_maxrss, secs(u.ru_utime) + secs(u.ru_stime))
    };
    println!(
        "{} {} {} {} {} {} {} {}",
        first.as_secs_f64(),
        t.as_secs_f64(),
        cpu,
        pass.elapsed_secs,
        pass.messages_read,
        pass.messages_written,
        pass.bytes_written,
        rss_kib
    );
    drop(log);
    mgr.close().unwrap();
}

fn main() {
    let args: Vec<String> = env::args().collect();
    let dedupe = size("COMMITFS_BENCH_DEDUPE", 128 << 20, 128 << 20);
    if args.get(1).map(String::as_str) == Some("clean") {
        let sharing = match args[3].as_str() {
            "alone" => Sharing::CleanerThread,
            _ => Sharing::WhenBehind,
        };
        clean(Path::new(&args[2]), dedupe, sharing);
        return;
    }
    let bytes = size("COMMITFS_BENCH_BYTES", 1 << 30, 4 << 20);
    let keys = size("COMMITFS_BENCH_KEYS", 1_000_000, 10_000);
    let base = env::var("COMMITFS_BENCH_DIR").map_or_else(|_| env::temp_dir(), PathBuf::from);
    let tmp = tempfile::tempdir_in(base).unwrap();
    let data = tmp.path().join("data");
    let t = Instant::now();
    let n = fill(&data, bytes, keys, dedupe);
    let filled = t.elapsed();
    let part = data.join("t-0");
    let before = du(&part);
    // Trials of a `cp` of the segments beside a pass over a copy of the
    // data dir, one after the other, so both meet the same machine; the
    // figures are each trial's and the median. The first `cp` of a trial
    // copies into pages the tmpfs has yet to allocate, so each trial's
    // `cp` is the best of three.
    let quick = env::var("COMMITFS_BENCH_QUICK").is_ok_and(|v| !v.is_empty() && v != "0");
    let trials = if quick {
        1
    } else {
        size("COMMITFS_BENCH_TRIALS", 5, 1) as usize
    };
    let mut rows = Vec::new();
    let mut last = None;
    for _ in 0..trials {
        let cp = (0..3)
            .map(|_| cp_time(&part, &tmp.path().join("cp")))
            .min()
            .unwrap()
            .as_secs_f64();
        // Each trial runs a pass of each kind, the filtering shared by
        // the pass's two threads and left to the cleaner thread alone, so
        // that both meet the same machine.
        let mut passes = Vec::new();
        for sharing in ["shared", "alone"] {
            let trial = tmp.path().join("trial");
            let st = Command::new("cp")
                .arg("-a")
                .arg(&data)
                .arg(&trial)
                .status()
                .unwrap();
            assert!(st.success());
            let out = Command::new(&args[0])
                .arg("clean")
                .arg(&trial)
                .arg(sharing)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            std::fs::remove_dir_all(&trial).unwrap();
            let text = String::from_utf8(out.stdout).unwrap();
            let f: Vec<f64> = text
                .split_whitespace()
                .map(|x| x.parse().unwrap())
                .collect();
            passes.push(f);
            if sharing == "shared" {
                last = Some(out.stderr);
            }
        }
        rows.push((cp, passes));
    }
    // The last pass's own summary (COMMITFS_BENCH_LOG=1): where its time went.
    for line in String::from_utf8_lossy(&last.unwrap_or_default()).lines() {
        if let Some(at) = line.find('\t') {
            println!("    {}", &line[at + 1..]);
        }
    }
    println!("## Compaction: one pass vs `cp` of the same segments\n");
    println!(
        "{n} records of {RECORD} bytes over {keys} keys, {:.0} MiB of segments (filled in {:.1} s)\n",
        before as f64 / 1048576.0,
        filled.as_secs_f64()
    );
    println!(
        "| trial | `cp` of the segment files (best of 3) | a fresh cleaner's first pass: 10,000 records, faults in the {} MiB buffer | pass, filtering shared by its two threads | ÷ cp | pass, the cleaner thread filtering alone | ÷ cp | CPU time of the shared pass's child (both passes) |",
        dedupe >> 20
    );
    println!("|---|---|---|---|---|---|---|---|");
    for (i, (cp, f)) in rows.iter().enumerate() {
        let (shared, alone) = (&f[0], &f[1]);
        println!(
            "| {} | {cp:.3} s | {:.3} s | {:.3} s | {:.2}× | {:.3} s | {:.2}× | {:.3} s |",
            i + 1,
            shared[0],
            shared[1],
            shared[1] / cp,
            alone[1],
            alone[1] / cp,
            shared[2]
        );
    }
    let median = |k: usize| {
        let mut ratios: Vec<f64> = rows.iter().map(|(cp, f)| f[k][1] / cp).collect();
        ratios.sort_by(f64::total_cmp);
        ratios[ratios.len() / 2]
    };
    println!(
        "| **median** | | | | **{:.2}×** | | **{:.2}×** | |\n",
        median(0),
        median(1)
    );
    let f = &rows[rows.len() - 1].1[0];
    let (read, written, bytes_written, rss) = (f[4], f[5], f[6], f[7]);
    println!("| the last pass | |\n|---|---|");
    println!("| messages read → kept | {read} → {written} |");
    println!("| bytes after | {:.1} MiB |", bytes_written / 1048576.0);
    println!(
        "| peak RSS of the pass's process | {:.1} MiB (dedupe buffer {} MiB) |",
        rss / 1024.0,
        dedupe >> 20
    );
}
