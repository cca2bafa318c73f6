//! Log compaction (Kafka's `LogCleaner`) on real data directories: passes
//! asked for and run by the cleaner threads, checked against Kafka's rules
//! (the scenarios of Kafka's `LogCleanerTest` in `scenarios.rs`), against a
//! model of compaction written apart from the code (`model.rs`), with every
//! segment decoded by kafka-protocol, not by commitfs (`decode.rs`).

#[path = "support/batch.rs"]
mod batch;
#[allow(dead_code)]
#[path = "compaction/decode.rs"]
mod decode;
mod kafka_support;
#[path = "compaction/model.rs"]
mod model;
#[path = "support/read_stream.rs"]
mod read_stream;
#[path = "compaction/scenarios.rs"]
mod scenarios;
#[path = "compaction/swap.rs"]
mod swap;
#[path = "compaction/views.rs"]
mod views;

use std::path::Path;
use std::sync::Arc;

use commitfs::record::NewRecord;
use commitfs::storage::cleaner::CleanerConfig;
use commitfs::storage::{LogConfig, LogManager, OpenOptions, PartitionLog};

/// Kafka's defaults but for a small dedupe buffer and no threads: passes
/// run when a test asks for them.
pub fn cleaner_config() -> CleanerConfig {
    let mut c = CleanerConfig::default();
    c.set("log.cleaner.threads", "0").unwrap();
    c.set("log.cleaner.dedupe.buffer.size", "4194304").unwrap();
    c
}

pub fn open_with(dir: &Path, cleaner: CleanerConfig) -> LogManager {
    let opts = OpenOptions {
        read_only: false,
        cleaner,
        ..OpenOptions::default()
    };
    LogManager::open(dir, LogConfig::default(), opts).unwrap()
}

pub fn open(dir: &Path) -> LogManager {
    open_with(dir, cleaner_config())
}

/// A compacted partition `t-0` whose replaced files go at once.
pub fn compacted(mgr: &LogManager, name: &str) -> Arc<PartitionLog> {
    let log = mgr.create_partition(name).unwrap();
    log.set_config("cleanup.policy", "compact").unwrap();
    log.set_config("file.delete.delay.ms", "0").unwrap();
    log
}

/// Appends one batch of `(key, value)` records (`None` value: a tombstone).
pub fn put(log: &PartitionLog, records: &[(&str, Option<&str>)]) {
    let recs: Vec<NewRecord> = records
        .iter()
        .map(|(k, v)| NewRecord {
            key: Some(k.as_bytes()),
            value: v.map(str::as_bytes),
            headers: &[],
        })
        .collect();
    log.append(&recs).unwrap();
}

/// The (offset, key, value) a consumer from the log start reads, through
/// kafka-protocol's decoder.
pub fn consumed(log: &PartitionLog) -> Vec<(i64, String, Option<String>)> {
    decode::records_from(log.local().dir(), log.log_start_offset())
        .into_iter()
        .map(|r| {
            (
                r.offset,
                String::from_utf8(r.key.unwrap_or_default()).unwrap(),
                r.value.map(|v| String::from_utf8(v).unwrap()),
            )
        })
        .collect()
}

#[test]
fn a_pass_keeps_the_latest_value_of_each_key_and_the_active_segment() {
    let tmp = tempfile::tempdir().unwrap();
    let mgr = open(tmp.path());
    let log = compacted(&mgr, "t-0");
    put(&log, &[("a", Some("1")), ("b", Some("1"))]);
    put(&log, &[("a", Some("2")), ("c", Some("1"))]);
    log.roll().unwrap();
    put(&log, &[("b", Some("2"))]);
    log.roll().unwrap();
    put(&log, &[("a", Some("3"))]);
    let pass = log.clean_now().unwrap().expect("a pass ran");
    assert_eq!((pass.first_dirty_offset, pass.end_offset), (0, 5));
    // The active segment is never cleaned: a=3 there is not in the map,
    // so a=2 is the latest value of `a` the pass knows, and stays.
    assert_eq!(
        consumed(&log),
        vec![
            (2, "a".into(), Some("2".into())),
            (3, "c".into(), Some("1".into())),
            (4, "b".into(), Some("2".into())),
            (5, "a".into(), Some("3".into())),
        ]
    );
    assert_eq!(log.log_end_offset(), 6);
    assert_eq!(log.read(4).unwrap().value.as_deref(), Some(&b"2"[..]));
    assert!(log.read(0).is_err(), "a removed offset holds no record");
    drop(log);
    mgr.close().unwrap();
    let report =
        commitfs::storage::check::check_data_dir(tmp.path(), &LogConfig::default(), None).unwrap();
    assert!(!report.has_problems(), "{:?}", report.problems);
}

/// Waits, bounded, for `cond`.
fn wait_for(what: &str, cond: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !cond() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The cleaner thread applies retention to compacted logs (Kafka's
/// `cleanFilthiestLog` step 2): `compact,delete` by time and size as a
/// `delete` log, plain `compact` only below the log start. The scheduler's
/// retention check leaves both alone.
#[test]
fn the_cleaner_thread_applies_retention_to_compacted_logs() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cleaner = cleaner_config();
    cleaner.set("log.cleaner.threads", "1").unwrap();
    cleaner.set("log.cleaner.backoff.ms", "20").unwrap();
    let mgr = open_with(tmp.path(), cleaner);
    let both = compacted(&mgr, "both-0");
    both.set_config("cleanup.policy", "compact,delete").unwrap();
    let only = compacted(&mgr, "only-0");
    for log in [&both, &only] {
        log.set_config("min.cleanable.dirty.ratio", "1").unwrap();
        for i in 0..3 {
            put(log, &[(&format!("k{i}"), Some("v"))]);
            log.roll().unwrap();
        }
        log.set_config("retention.ms", "1").unwrap();
    }
    // The log start moves before the segments below it go: wait for both.
    wait_for("retention of both-0", || {
        both.log_start_offset() == 3 && both.segment_bases() == vec![3]
    });
    // The thread goes over only-0 in every round: two more rounds ended
    // means one began and ended after the scheduler's check, and its
    // segments stay through both.
    mgr.run_retention(i64::MAX / 2).unwrap();
    let rounds = mgr.cleaner_counters().rounds;
    wait_for("two more rounds of the cleaner thread", || {
        mgr.cleaner_counters().rounds >= rounds + 2
    });
    assert_eq!(only.log_start_offset(), 0);
    assert_eq!(only.segment_bases(), vec![0, 1, 2, 3]);
    assert_eq!(consumed(&only).len(), 3);
}

/// `log.cleaner.enable=false`: no cleaner thread runs, so a compacted
/// partition however dirty is never cleaned in the background, and a
/// `compact,delete` one past its `retention.ms` is not retained (Kafka's
/// rule: retention of compacted logs is the cleaner's); the scheduler's
/// retention leaves both alone too. The tree's `compact` still runs a pass
/// when asked. The control, with the cleaner on and the same settings,
/// cleans and retains.
#[test]
fn a_disabled_cleaner_neither_cleans_nor_retains() {
    for enable in [true, false] {
        let tmp = tempfile::tempdir().unwrap();
        let mut cleaner = cleaner_config();
        cleaner
            .set("log.cleaner.enable", &enable.to_string())
            .unwrap();
        cleaner.set("log.cleaner.threads", "1").unwrap();
        cleaner.set("log.cleaner.backoff.ms", "10").unwrap();
        let mgr = open_with(tmp.path(), cleaner);
        // Nothing is cleanable while the rounds are written (no ratio is
        // above 1); the partitions are made cleanable once they are.
        let kv = compacted(&mgr, "kv-0");
        kv.set_config("min.cleanable.dirty.ratio", "1").unwrap();
        let both = compacted(&mgr, "both-0");
        both.set_config("cleanup.policy", "compact,delete").unwrap();
        both.set_config("min.cleanable.dirty.ratio", "1").unwrap();
        for round in 0..10 {
            let v = round.to_string();
            put(&kv, &[("a", Some(&v)), ("b", Some(&v)), ("c", Some(&v))]);
            kv.roll().unwrap();
            put(&both, &[("a", Some(&v))]);
            both.roll().unwrap();
        }
        let dirty = kv.cleaner_status().unwrap();
        assert!(dirty.dirty_ratio > 0.5, "{}", dirty.dirty_ratio);
        assert_eq!((dirty.checkpoint, dirty.last_pass.is_some()), (None, false));
        let kv_segments = kv.segment_bases();
        kv.set_config("min.cleanable.dirty.ratio", "0.01").unwrap();
        both.set_config("retention.ms", "1").unwrap();
        if enable {
            wait_for("the cleaner thread's pass over kv-0", || {
                kv.cleaner_status().unwrap().last_pass.is_some()
            });
            wait_for("retention of both-0", || both.log_start_offset() == 10);
            assert_eq!(kv.cleaner_status().unwrap().checkpoint, Some(30));
            assert_eq!(consumed(&kv).len(), 3);
        } else {
            // A hundred of the thread's backoffs, had it started: nothing.
            let until = std::time::Instant::now() + std::time::Duration::from_secs(1);
            while std::time::Instant::now() < until {
                let status = kv.cleaner_status().unwrap();
                assert_eq!(
                    (status.checkpoint, status.last_pass.is_some()),
                    (None, false)
                );
                assert_eq!(kv.segment_bases(), kv_segments);
                assert_eq!(both.log_start_offset(), 0);
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            assert_eq!(consumed(&kv).len(), 30);
            mgr.run_retention(i64::MAX / 2).unwrap();
            assert_eq!((both.log_start_offset(), consumed(&both).len()), (0, 10));
            // `compact`: a pass when asked, cleaner or not.
            let pass = kv.clean_now().unwrap().expect("a pass ran");
            assert_eq!((pass.first_dirty_offset, pass.end_offset), (0, 30));
            assert_eq!(consumed(&kv).len(), 3);
            assert_eq!(kv.cleaner_status().unwrap().checkpoint, Some(30));
        }
        drop((kv, both));
        mgr.close().unwrap();
    }
}

/// A partition deleted while the cleaner thread cleans it again and
/// again: the deletion waits for the pass, and nothing of it is left. The
/// rounds whose deletion aborted a pass under way are counted: some must
/// have, or the race was never run.
#[test]
fn a_partition_deleted_under_the_cleaner_thread_goes_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cleaner = cleaner_config();
    cleaner.set("log.cleaner.threads", "1").unwrap();
    cleaner.set("log.cleaner.backoff.ms", "1").unwrap();
    let mgr = open_with(tmp.path(), cleaner);
    let mut overlapped = 0;
    for round in 0..20 {
        let log = compacted(&mgr, "t-0");
        log.set_config("min.cleanable.dirty.ratio", "0").unwrap();
        for i in 0..50 {
            put(&log, &[("k", Some(&format!("{round}-{i}")))]);
            if i % 10 == 9 {
                log.roll().unwrap();
            }
        }
        drop(log);
        let aborted = mgr.cleaner_counters().passes_aborted;
        mgr.delete_partition("t-0").unwrap();
        assert!(!tmp.path().join("t-0").exists(), "round {round}");
        overlapped += usize::from(mgr.cleaner_counters().passes_aborted > aborted);
    }
    mgr.close().unwrap();
    println!("{overlapped} of 20 deletions aborted a pass");
    assert!(overlapped > 0, "no deletion met a pass under way");
}

/// `commitfs dump` prints what the cleaner wrote as kafka-dump-log does: a
/// tombstone's batch with its `deleteHorizonMs` and its offset range as it
/// was, and `check` takes it.
#[test]
fn dump_shows_delete_horizons() {
    let tmp = tempfile::tempdir().unwrap();
    let mgr = open(tmp.path());
    let log = compacted(&mgr, "t-0");
    put(&log, &[("a", Some("1"))]);
    put(&log, &[("a", None), ("b", Some("1"))]);
    log.roll().unwrap();
    put(&log, &[("b", Some("2"))]);
    log.roll().unwrap();
    log.clean_now().unwrap().unwrap();
    let horizon = decode::decode_dir(log.local().dir())
        .iter()
        .find(|b| b.delete_horizon)
        .map(|b| b.base_timestamp)
        .expect("a batch with a horizon");
    let seg = log.local().dir().join(format!("{:020}.log", 0));
    let out = kafka_support::bounded::run(
        std::process::Command::new(env!("CARGO_BIN_EXE_commitfs"))
            .args(["dump", "--deep-iteration"])
            .arg(&seg),
        "commitfs dump",
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(&format!("deleteHorizonMs: OptionalLong[{horizon}]")),
        "{text}"
    );
    // b=1 went from the tombstone's batch, which keeps its range.
    assert!(
        text.contains("baseOffset: 1 lastOffset: 2 count: 1"),
        "{text}"
    );
    assert!(
        text.contains("baseOffset: 3 lastOffset: 3 count: 1"),
        "{text}"
    );
    drop(log);
    mgr.close().unwrap();
    let report =
        commitfs::storage::check::check_data_dir(tmp.path(), &LogConfig::default(), None).unwrap();
    assert!(!report.has_problems(), "{:?}", report.problems);
}
