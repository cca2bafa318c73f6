//! Named tests of particular failures: each failed before its fix.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::Arc;

use commitfs::record::NewRecord;
use commitfs::storage::check::check_data_dir;
use commitfs::storage::{LogManager, PartitionLog, StorageError};
use fail::FailScenario;

use crate::{append_values, config, open, value};

/// A data dir with `t-0` holding records 0..3, open.
fn small_dir() -> (tempfile::TempDir, LogManager, Arc<PartitionLog>) {
    let tmp = tempfile::tempdir().unwrap();
    let mgr = open(tmp.path()).unwrap();
    let t = mgr.create_partition("t-0").unwrap();
    append_values(&t, 0, 3);
    (tmp, mgr, t)
}

/// After the remount, `t-0` holds records 0..n and `check` is clean.
fn assert_holds(dir: &Path, n: usize) {
    let mgr = open(dir).unwrap();
    let t = mgr.partition("t-0").unwrap();
    assert_eq!(t.log_end_offset(), n as i64);
    for i in 0..n {
        assert_eq!(t.read(i as i64).unwrap().value.unwrap(), value(i));
    }
    drop(t);
    mgr.close().unwrap();
    let report = check_data_dir(dir, &config(), None).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
}

/// With `flush.messages`, an append is fsynced before it is published: a
/// failed fsync is undone like a failed write, so an append reported failed
/// was never published (and a retry cannot duplicate it).
#[test]
fn a_failed_fsync_of_an_append_publishes_nothing() {
    let scenario = FailScenario::setup();
    let (tmp, mgr, t) = small_dir();
    t.set_config("flush.messages", "1").unwrap();
    fail::cfg("segment.flush.fdatasync", "return").unwrap();
    let e = t.append(&[NewRecord::value(&value(3))]).unwrap_err();
    fail::remove("segment.flush.fdatasync");
    assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
    assert_eq!(
        t.log_end_offset(),
        3,
        "nothing of the failed append was published"
    );
    assert!(t.read(3).is_err());
    let retry = t.append(&[NewRecord::value(&value(3))]).unwrap_err();
    assert!(matches!(retry, StorageError::Offline { .. }), "{retry}");
    drop(t);
    assert!(mgr.close().is_err());
    assert_holds(tmp.path(), 3);
    scenario.teardown();
}

/// delete-records writes its checkpoint before it moves the log start: a
/// failed write leaves it where it was, in memory as on disk.
#[test]
fn a_failed_delete_records_checkpoint_leaves_the_log_start() {
    let scenario = FailScenario::setup();
    let (tmp, mgr, t) = small_dir();
    fail::cfg("atomic.rename", "return").unwrap();
    let e = t.delete_records_before(2).unwrap_err();
    fail::remove("atomic.rename");
    assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
    assert_eq!(t.log_start_offset(), 0);
    drop(t);
    assert!(mgr.close().is_err());
    assert_holds(tmp.path(), 3);
    scenario.teardown();
}

/// A segment whose size cannot be learned is an error, never an empty
/// segment: the active one taken as empty would be written over from 0.
#[test]
fn a_failed_stat_of_the_active_segment_is_not_an_empty_segment() {
    let scenario = FailScenario::setup();
    let (tmp, mgr, t) = small_dir();
    drop(t);
    mgr.close().unwrap();
    fail::cfg("segment.size.stat", "1*return").unwrap();
    let mgr = open(tmp.path()).unwrap();
    fail::remove("segment.size.stat");
    let t = mgr.partition("t-0").unwrap();
    let cause = t.status().unwrap().offline.expect("offline");
    assert!(cause.contains("segment.size.stat"), "{cause}");
    let e = t.append(&[NewRecord::value(b"over")]).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
    drop(t);
    assert!(mgr.close().is_err());
    assert_holds(tmp.path(), 3);
    scenario.teardown();
}

/// A panic between a segment write and its publish (here in the index
/// entry) takes the partition offline: the next append would otherwise
/// publish the bytes left behind with offsets given again.
#[test]
fn a_panic_between_write_and_publish_takes_the_partition_offline() {
    let scenario = FailScenario::setup();
    let (tmp, mgr, t) = small_dir();
    fail::cfg("index.push", "panic").unwrap();
    let r = catch_unwind(AssertUnwindSafe(|| {
        t.append(&[NewRecord::value(&value(3))])
    }));
    fail::remove("index.push");
    assert!(r.is_err(), "the append panicked");
    let e = t.append(&[NewRecord::value(&value(3))]).unwrap_err();
    assert!(matches!(e, StorageError::Offline { .. }), "{e}");
    let cause = t.status().unwrap().offline.expect("offline");
    assert!(cause.contains("panic"), "{cause}");
    drop(t);
    assert!(mgr.close().is_err());
    // The batch written before the panic is whole: recovery may keep it.
    let mgr = open(tmp.path()).unwrap();
    let t = mgr.partition("t-0").unwrap();
    assert!((3..=4).contains(&t.log_end_offset()));
    for i in 0..t.log_end_offset() as usize {
        assert_eq!(t.read(i as i64).unwrap().value.unwrap(), value(i));
    }
    drop(t);
    mgr.close().unwrap();
    let report = check_data_dir(tmp.path(), &config(), None).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    scenario.teardown();
}

/// The last stable offset moves in the order a `read_committed` reader
/// relies on (`partition/txn.rs`): paused right after an append is
/// published, a writer that opens a transaction has already made it
/// unstable, and one that writes its marker has not yet made it stable.
#[test]
fn a_reader_never_sees_an_open_transaction_as_stable() {
    let scenario = FailScenario::setup();
    let (_tmp, mgr, t) = small_dir();
    let leo = t.log_end_offset();
    let published = |t: &PartitionLog, hw: i64| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while t.high_watermark() < hw {
            assert!(
                std::time::Instant::now() < deadline,
                "the append was not published in 30 s"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    };

    fail::cfg("partition.append.published", "pause").unwrap();
    let writer = {
        let t = t.clone();
        std::thread::spawn(move || crate::append_transactional(&t, leo as usize))
    };
    published(&t, leo + 1);
    assert_eq!(
        t.last_stable_offset(),
        leo,
        "the transaction's batch is unstable"
    );
    fail::remove("partition.append.published");
    writer.join().unwrap();
    assert_eq!(t.last_stable_offset(), leo);

    fail::cfg("partition.append.published", "pause").unwrap();
    let writer = {
        let t = t.clone();
        std::thread::spawn(move || t.append_end_txn_marker(7, 0, 0, true).unwrap())
    };
    published(&t, leo + 2);
    assert_eq!(
        t.last_stable_offset(),
        leo,
        "stable only after the marker's publish"
    );
    fail::remove("partition.append.published");
    writer.join().unwrap();
    assert_eq!(t.last_stable_offset(), leo + 2);
    drop(t);
    mgr.close().unwrap();
    scenario.teardown();
}
