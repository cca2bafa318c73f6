//! Kafka's `LogCleanerManagerTest` rules: which log a thread picks, the
//! states of a partition's cleaning, and what a segment group holds
//! (`LogCleanerTest.testSegmentGrouping`).

use std::sync::Arc;

use super::clean::{SegmentSizes, group_by_size};
use super::manager::CleaningState;
use super::*;
use crate::{LogConfig, LogManager, OpenOptions};
use commitfs_record::NewRecord;

fn manager(dir: &std::path::Path) -> LogManager {
    let opts = OpenOptions::without_cleaner_threads();
    LogManager::open(dir, LogConfig::default(), opts).unwrap()
}

/// A compacted partition whose `dirty` sealed segments each repeat one
/// key, after `clean` segments cleaned already.
fn log_with(mgr: &LogManager, name: &str, clean: usize, dirty: usize) -> Arc<PartitionLog> {
    let log = mgr.create_partition(name).unwrap();
    log.set_config("cleanup.policy", "compact").unwrap();
    let segment = |i: usize| {
        log.append(&[NewRecord::keyed(format!("k{i}").as_bytes(), b"v")])
            .unwrap();
        log.roll().unwrap();
    };
    (0..clean).for_each(segment);
    if clean > 0 {
        log.clean_now().unwrap();
    }
    (clean..clean + dirty).for_each(segment);
    log
}

#[test]
fn the_dirtiest_log_above_its_ratio_is_picked() {
    let tmp = tempfile::tempdir().unwrap();
    let mgr = manager(tmp.path());
    let core = CleanerCore::new(mgr.cleaner_config().clone());
    let half = log_with(&mgr, "half-0", 2, 2);
    let most = log_with(&mgr, "most-0", 1, 3);
    let none = log_with(&mgr, "none-0", 2, 0);
    let logs = vec![half.clone(), most.clone(), none.clone()];
    let now = crate::now_ms();
    let ltc = core.grab_filthiest(&logs, now).expect("a log");
    assert_eq!(ltc.log.name(), "most-0");
    assert!(
        (ltc.cleanable_ratio() - 0.75).abs() < 1e-9,
        "{}",
        ltc.cleanable_ratio()
    );
    assert_eq!(
        core.manager.state_of("most-0"),
        Some(CleaningState::InProgress)
    );
    // Taken: the next pick is the next dirtiest, whose ratio 0.5 is not
    // strictly above min.cleanable.dirty.ratio 0.5.
    assert!(core.grab_filthiest(&logs, now).is_none());
    half.set_config("min.cleanable.dirty.ratio", "0.49")
        .unwrap();
    assert_eq!(
        core.grab_filthiest(&logs, now).unwrap().log.name(),
        "half-0"
    );
}

#[test]
fn max_compaction_lag_admits_a_log_below_its_ratio() {
    let tmp = tempfile::tempdir().unwrap();
    let mgr = manager(tmp.path());
    let core = CleanerCore::new(mgr.cleaner_config().clone());
    let log = log_with(&mgr, "t-0", 3, 1);
    let logs = vec![log.clone()];
    let now = crate::now_ms();
    assert!(
        core.grab_filthiest(&logs, now).is_none(),
        "0.25 is not above 0.5"
    );
    log.set_config("max.compaction.lag.ms", "1").unwrap();
    // A day later, the dirty segment's first batch is past the lag.
    let ltc = core
        .grab_filthiest(&logs, now + 86_400_000)
        .expect("forced");
    assert!(ltc.needs_compaction_now);
}

/// Waits for `cond`, 30 s at most: a deadlock fails the test.
fn within(what: &str, cond: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !cond() {
        assert!(
            std::time::Instant::now() < deadline,
            "gave up after 30 s waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Kafka's states: a pass aborted by a deletion, which waits for it.
#[test]
fn an_abort_waits_for_the_pass_and_pauses_the_partition() {
    let m = Arc::new(CleanerManager::default());
    assert!(m.try_begin("t-0"));
    assert!(!m.try_begin("t-0"), "one pass at a time");
    let waiter = {
        let m = m.clone();
        std::thread::spawn(move || m.abort_and_pause("t-0"))
    };
    within("the abort", || {
        m.state_of("t-0") == Some(CleaningState::Aborted)
    });
    assert!(!waiter.is_finished(), "the abort waits for the pass");
    assert!(m.check_aborted("t-0").is_err(), "the pass sees the abort");
    assert!(!m.done("t-0"), "an aborted pass writes no checkpoint");
    within("the abort to return once the pass is done", || {
        waiter.is_finished()
    });
    waiter.join().unwrap();
    assert_eq!(m.state_of("t-0"), Some(CleaningState::Paused(1)));
    assert!(!m.try_begin("t-0"), "paused");
    m.forget("t-0");
    assert!(m.try_begin("t-0"));
}

#[test]
fn segments_are_grouped_as_kafka_groups_them() {
    let seg = |base: i64, log: u64, index: u64| SegmentSizes {
        base,
        log,
        offset_index: index,
        time_index: index,
    };
    // testSegmentGrouping: groups stay under segment.bytes and segment.index.bytes.
    let segs: Vec<SegmentSizes> = (0..10).map(|i| seg(i * 10, 400, 8)).collect();
    let groups = group_by_size(&segs, 1000, 1000, 100);
    assert_eq!(
        groups,
        vec![vec![0, 1], vec![2, 3], vec![4, 5], vec![6, 7], vec![8, 9]]
    );
    let groups = group_by_size(&segs, 10_000, 24, 100);
    assert_eq!(
        groups.iter().map(Vec::len).collect::<Vec<_>>(),
        vec![3, 3, 3, 1]
    );
    // testSegmentGroupingWithSparseOffsets: a group's offsets fit an int
    // from its base; an empty segment does not count.
    let max = i32::MAX as i64;
    // Segment 1 ends (by the next base) at MAX: it fits; the empty one
    // joins whatever its offsets; the last ends past MAX from the base.
    let segs = vec![
        seg(0, 10, 0),
        seg(max, 10, 0),
        seg(max + 1, 0, 0),
        seg(2 * max, 10, 0),
    ];
    let groups = group_by_size(&segs, 1 << 30, 1 << 20, 2 * max + 5);
    assert_eq!(groups, vec![vec![0, 1, 2], vec![3]]);
    let segs = vec![seg(0, 10, 0), seg(max + 1, 10, 0)];
    assert_eq!(
        group_by_size(&segs, 1 << 30, 1 << 20, max + 5),
        vec![vec![0], vec![1]]
    );
}
