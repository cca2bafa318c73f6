//! kill -9 of a daemon in the middle of its cleaner's passes, 100 times
//! (`COMMITFS_COMPACTION_KILLS` for more): before each run a round of keyed
//! updates is appended and rolled, so the daemon's cleaner thread (backoff
//! 1 ms, every dirty ratio enough) starts a pass at once; the kill lands a
//! random time (0-3 ms) after the pass began, after its cleaned segment's
//! `.log.cleaned` appeared, or after its "Swapping in" line, in turn. After each kill the
//! directory is opened again (completing or rolling back what the kill
//! left) and must hold the latest value of every key, and `check` must be
//! clean. The run prints how many kills left a pass's files behind.

#[allow(dead_code)]
#[path = "compaction/decode.rs"]
mod decode;
mod kafka_support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use commitfs::record::NewRecord;
use commitfs::storage::check::check_data_dir;
use commitfs::storage::{LogConfig, LogManager, OpenOptions};
use kafka_support::BIN;

const KEYS: usize = 1000;

fn open(dir: &Path) -> LogManager {
    let opts = OpenOptions::without_cleaner_threads();
    LogManager::open(dir, LogConfig::default(), opts).unwrap()
}

/// One round of updates to every key, in batches of 50, then a roll.
fn round(dir: &Path, r: usize, latest: &mut BTreeMap<String, String>) {
    let mgr = open(dir);
    let log = match mgr.partition("t-0") {
        Some(log) => log,
        None => {
            let log = mgr.create_partition("t-0").unwrap();
            log.set_config("cleanup.policy", "compact").unwrap();
            log.set_config("file.delete.delay.ms", "0").unwrap();
            log
        }
    };
    let entries: Vec<(String, String)> = (0..KEYS)
        .map(|k| {
            (
                format!("key-{k}"),
                format!("round-{r}-{k}-{}", "x".repeat(k % 40)),
            )
        })
        .collect();
    for chunk in entries.chunks(50) {
        let recs: Vec<NewRecord> = chunk
            .iter()
            .map(|(k, v)| NewRecord::keyed(k.as_bytes(), v.as_bytes()))
            .collect();
        log.append(&recs).unwrap();
    }
    latest.extend(entries);
    log.roll().unwrap();
    drop(log);
    mgr.close().unwrap();
}

/// The latest value of each key the directory holds, as kafka-protocol's
/// decoder reads the segments the recovery left (not commitfs's reader)
/// and as the tree's lookups read them, and whether `check` is clean.
fn verify(dir: &Path, latest: &BTreeMap<String, String>, what: &str) {
    let mgr = open(dir);
    let log = mgr.partition("t-0").unwrap();
    assert!(log.status().unwrap().offline.is_none(), "{what}");
    let s = |b: Option<Vec<u8>>| String::from_utf8(b.unwrap()).unwrap();
    let mut read = BTreeMap::new();
    for o in log.log_start_offset()..log.log_end_offset() {
        if let Ok(r) = log.read(o) {
            read.insert(s(r.key), s(r.value));
        }
    }
    let start = log.log_start_offset();
    drop(log);
    mgr.close().unwrap();
    let mut decoded = BTreeMap::new();
    for r in decode::records_from(&dir.join("t-0"), start) {
        decoded.insert(s(r.key), s(r.value));
    }
    let wrong: Vec<_> = latest
        .iter()
        .filter(|(k, v)| decoded.get(*k) != Some(*v))
        .take(3)
        .collect();
    assert!(
        wrong.is_empty() && decoded.len() == latest.len(),
        "{what}: {} keys on disk of {}; first wrong: {wrong:?}",
        decoded.len(),
        latest.len()
    );
    assert!(
        read == decoded,
        "{what}: offset lookups read other values than are on disk"
    );
    // Notes are what Kafka loads as it is (a cleaned segment written in one
    // chunk has an empty index, as Kafka's cleaner leaves it): not problems.
    let report = check_data_dir(dir, &LogConfig::default(), None).unwrap();
    assert!(!report.has_problems(), "{what}: {:?}", report.problems);
}

/// When a kill comes: a moment after the pass began, after its cleaned
/// segment appeared, or after it began its swap.
#[derive(Clone, Copy, Debug)]
enum After {
    Began,
    Cleaned,
    Swapping,
}

impl After {
    fn seen(self, log: &str, part: &Path) -> bool {
        match self {
            After::Began => log.contains("Beginning cleaning of log t-0"),
            After::Swapping => log.contains("Swapping in cleaned segment"),
            After::Cleaned => std::fs::read_dir(part).is_ok_and(|mut d| {
                d.any(|e| {
                    e.is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".log.cleaned"))
                })
            }),
        }
    }
}

/// Starts a daemon over `dir` and kills it `delay` after `after` (or,
/// bounded, whenever it did not come). Whether it came.
fn run_and_kill(dir: &Path, log_path: &Path, after: After, delay: Duration) -> bool {
    let log = std::fs::File::create(log_path).unwrap();
    let mut child = Command::new(BIN)
        .args(["serve", "--listeners", "PLAINTEXT://127.0.0.1:0"])
        .args([
            "-o",
            "log.cleaner.backoff.ms=1,log.cleaner.min.cleanable.ratio=0",
        ])
        .args(["-o", "log.cleaner.dedupe.buffer.size=4194304"])
        .arg(dir)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let start = Instant::now();
    let part = dir.join("t-0");
    let mut came = false;
    while start.elapsed() < Duration::from_secs(20) {
        let text = std::fs::read_to_string(log_path).unwrap_or_default();
        if after.seen(&text, &part) {
            came = true;
            break;
        }
        if let Ok(Some(st)) = child.try_wait() {
            panic!("the daemon exited with {st}:\n{text}");
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    std::thread::sleep(delay);
    let _ = child.kill();
    let _ = child.wait();
    came
}

#[test]
fn kill_9_during_passes_loses_no_latest_value() {
    let kills: usize = std::env::var("COMMITFS_COMPACTION_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let log_path = tmp.path().join("daemon.log");
    let mut latest = BTreeMap::new();
    let (mut began, mut left_files) = (0, 0);
    // A pseudo-random delay per kill, from a fixed seed: a failure replays.
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0..kills {
        round(&dir, i, &mut latest);
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let after = [After::Began, After::Cleaned, After::Swapping][i % 3];
        let delay = Duration::from_micros(seed % 3_000);
        began += run_and_kill(&dir, &log_path, after, delay) as usize;
        let part = dir.join("t-0");
        left_files += std::fs::read_dir(&part).unwrap().any(|e| {
            let n = e.unwrap().file_name().into_string().unwrap();
            n.ends_with(".cleaned") || n.ends_with(".swap") || n.ends_with(".deleted")
        }) as usize;
        verify(
            &dir,
            &latest,
            &format!("kill {i} ({delay:?} after {after:?})"),
        );
    }
    println!(
        "{kills} kills: {began} where they were aimed, {left_files} left a pass's files behind"
    );
    assert!(
        began * 2 > kills,
        "most kills land where aimed ({began} of {kills})"
    );
    assert!(
        left_files > 0,
        "some kills land inside a swap or a cleaned segment's write"
    );
}
