//! Storage as a library runs its own timed duties: a program that opens a
//! data directory with `LogManager::open`, and nothing of the daemon, gets
//! retention every `log.retention.check.interval.ms`.

use std::time::{Duration, Instant};

use commitfs::record::NewRecord;
use commitfs::storage::{FLUSH_JOB, LogConfig, LogManager, OpenOptions, RETENTION_JOB, TimedJobs};

/// Far more than a 20 ms check needs, even on a loaded machine: only a
/// retention job that never runs reaches it.
const WAIT: Duration = Duration::from_secs(60);

fn options(retention_check: Duration) -> OpenOptions {
    OpenOptions {
        timed: Some(TimedJobs {
            retention_check,
            ..TimedJobs::default()
        }),
        ..OpenOptions::default()
    }
}

/// Waits, [`WAIT`] at most, until `done` holds.
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done() {
        assert!(
            Instant::now() < deadline,
            "{what}: still not so after {WAIT:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn retention_runs_with_no_daemon() {
    let tmp = tempfile::tempdir().unwrap();
    let mut defaults = LogConfig::default();
    defaults.set("retention.ms", "1").unwrap();
    let mgr = LogManager::open(tmp.path(), defaults, options(Duration::from_millis(20))).unwrap();
    let jobs = ["kafka-log-cleaner-thread-0", FLUSH_JOB, RETENTION_JOB];
    assert_eq!(mgr.jobs(), jobs.map(String::from));
    let log = mgr.create_partition("t-0").unwrap();
    for i in 0..3 {
        log.append(&[NewRecord::value(format!("record {i}").as_bytes())])
            .unwrap();
        log.roll().unwrap();
    }
    // Every record is older than retention.ms=1 at once: the check deletes
    // every sealed segment, and the log starts past them.
    wait_until("retention deleted the sealed segments", || {
        log.log_start_offset() == 3
    });
    assert_eq!(log.segment_bases(), [3]);
    drop(log);
    mgr.close().unwrap();
    assert!(mgr.jobs().is_empty(), "the close stops every job");
}

#[test]
fn no_timed_job_when_asked_for_none_or_read_only() {
    let tmp = tempfile::tempdir().unwrap();
    let none = OpenOptions {
        timed: None,
        ..OpenOptions::without_cleaner_threads()
    };
    let mgr = LogManager::open(tmp.path(), LogConfig::default(), none).unwrap();
    assert!(mgr.jobs().is_empty(), "{:?}", mgr.jobs());
    mgr.close().unwrap();
    let ro = OpenOptions {
        read_only: true,
        ..options(Duration::from_millis(20))
    };
    let mgr = LogManager::open(tmp.path(), LogConfig::default(), ro).unwrap();
    assert!(mgr.jobs().is_empty(), "{:?}", mgr.jobs());
    mgr.close().unwrap();
}
