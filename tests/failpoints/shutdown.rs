//! How long a SIGTERM takes with many partitions, on a disk whose syncs are
//! slow: every fsync, fdatasync and msync of the daemon sleeps `SYNC_MS`
//! first (the `sleep` action of its failpoint), so the time a shutdown
//! spends waiting for the disk is known from the code, not from this
//! machine.
//!
//! A close that syncs partition after partition waits at least
//! `PARTITIONS * SYNCS_PER_PARTITION * SYNC_MS` (150 s here) on one thread.
//! One whose partitions close side by side but that still rewrites the
//! shared recovery-point checkpoint at each partition waits at least
//! `PARTITIONS * 2 * SYNC_MS` (30 s: those writes take turns). One that
//! closes 16 partitions at a time and writes the checkpoint once waits
//! about `PARTITIONS / 16 * 8 * SYNC_MS` (8 s). `BOUND` rules out the
//! first two and leaves the last room for a loaded machine.

use std::time::{Duration, Instant};

use commitfs::storage::{LogConfig, LogManager, OpenOptions};
use fail::FailScenario;

use crate::harness::{Mount, Tmpfs, fuse_or_skip};

const PARTITIONS: usize = 300;
const SYNC_MS: u64 = 50;
/// The syncs of closing one partition with an unflushed append, serially:
/// its `.log`, both indexes and its directory (the flush), the recovery
/// point checkpoint and its directory, both indexes again once trimmed,
/// and `commitfs.streamlen` and its directory.
const SYNCS_PER_PARTITION: u64 = 10;
const BOUND: Duration = Duration::from_secs(30);

/// Every site that waits for the disk.
const SLOW_SYNCS: &[&str] = &[
    "segment.flush.fdatasync",
    "index.msync",
    "partition.flush.dir_fsync",
    "atomic.fsync",
    "atomic.dir_fsync",
    "manager.marker.dir_fsync",
];

fn config() -> LogConfig {
    let mut c = LogConfig::default();
    // 300 active segments' preallocated indexes on a small tmpfs.
    c.set("segment.index.bytes", "4096").unwrap();
    c
}

#[test]
fn sigterm_with_300_partitions_does_not_sync_them_one_after_another() {
    if !fuse_or_skip() {
        return;
    }
    let serial = Duration::from_millis(PARTITIONS as u64 * SYNCS_PER_PARTITION * SYNC_MS);
    let checkpoint_each = Duration::from_millis(PARTITIONS as u64 * 2 * SYNC_MS);
    assert!(
        checkpoint_each >= BOUND,
        "the bound must rule both slow closes out"
    );
    // Holds off other tests' failpoints while this process writes the data dir.
    let scenario = FailScenario::setup();
    let tmp = tempfile::Builder::new()
        .prefix("commitfs-fp-shutdown-")
        .tempdir()
        .unwrap();
    let fs = Tmpfs::mount(&tmp.path().join("fs"), "256m");
    let data = fs.0.join("data");
    let mgr = LogManager::open(&data, config(), OpenOptions::default()).unwrap();
    for i in 0..PARTITIONS {
        mgr.create_partition(&format!("t{i}-0")).unwrap();
    }
    mgr.close().unwrap();
    drop(mgr);

    let sleeps: Vec<String> = SLOW_SYNCS
        .iter()
        .map(|s| format!("{s}=sleep({SYNC_MS})"))
        .collect();
    let mut m = Mount::with(
        &["segment.index.bytes=4096"],
        Some(&data),
        &[("FAILPOINTS", &sleeps.join(";"))],
    );
    // An unflushed append in each: every partition has a flush to do.
    m.ok(&format!(
        "for i in $(seq 0 {}); do echo x >> t$i-0/log || exit 1; done",
        PARTITIONS - 1
    ));
    let asked = Instant::now();
    m.signal(libc::SIGTERM);
    while !m.exited() {
        assert!(
            asked.elapsed() < BOUND,
            "still shutting down after {BOUND:?} (a serial close takes at least {serial:?}, \
             one that writes the checkpoint at each partition at least {checkpoint_each:?}):\n{}",
            m.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let took = asked.elapsed();
    assert!(m.wait().success(), "{}", m.log());
    assert!(data.join(".kafka_cleanshutdown").exists(), "{}", m.log());
    assert!(m.log().contains("Shutdown complete"), "{}", m.log());
    eprintln!("shutdown of {PARTITIONS} partitions with {SYNC_MS} ms syncs: {took:?}");
    scenario.teardown();
}
