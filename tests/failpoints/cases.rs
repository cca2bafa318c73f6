//! The matrix: call site × operation, and how each case ends.

use commitfs::storage::disk::SITES;

use crate::{E, E1};

/// What an operation does. Each runs on a data dir holding `t-0` with
/// [`FILLED`] acknowledged records in three segments, and `u-0` and `w-0`
/// with a few, cleanly closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// One append of three records in three batches (max.message.bytes 12000).
    Append,
    /// The same, rolling first (segment.ms 1).
    AppendRolling,
    /// One record with flush.messages 1.
    AppendFlushed,
    Roll,
    /// An append, then a flush.
    Flush,
    /// retention.bytes 1: the two sealed segments go.
    Retention,
    /// delete-records 150: the first segment goes.
    DeleteRecords,
    SetConfig,
    /// The manager's close (as at umount).
    Close,
    /// mkdir v-0.
    Mkdir,
    /// rmdir w-0.
    Rmdir,
    /// stat log after a remount without commitfs.streamlen: lengths saved.
    StreamRead,
    /// An open after a crash that left a torn tail in the active segment.
    RecoverTail,
    /// An open after a crash that left a torn tail in the middle segment:
    /// the last segment goes (as Kafka's recovery does).
    RecoverMiddle,
    /// An open with segment 0's .index deleted: rebuilt at load.
    RebuildAtLoad,
    /// A read through segment 0's damaged .index: rebuilt on the read.
    RebuildOnRead,
    /// An open of a partition with a `.deleted`, a `.swap`, an orphan index
    /// and a producer snapshot past the log end.
    Stray,
    /// An open of the data dir, clean.
    Open,
    /// An open of a data dir that does not exist yet.
    OpenNew,
    /// `check --repair` of a damaged index and a producer snapshot of an
    /// unknown version.
    Repair,
    /// The ABORT marker of producer 7's transaction, whose one record
    /// (acknowledged) is the last of t-0: the abort is indexed.
    Abort,
    /// The same marker, then a flush.
    AbortFlush,
    /// An open after a crash, of a t-0 whose last records are an aborted
    /// transaction and its marker: recovery rebuilds the `.txnindex`.
    RecoverTxn,
}

/// How a case ends, before the remount.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The caller got an errno and t-0 is offline.
    Offline,
    /// The operation stood (its effect is durable and published) but what
    /// followed failed: t-0 is offline.
    OfflineAfter,
    /// The caller got ENOSPC and t-0 carries on.
    Refused,
    /// The open of the data dir failed with an errno.
    OpenFails,
    /// The partition's load failed: it is listed offline, the others mount.
    LoadOffline,
    /// `check --repair` failed with an errno; a second one succeeds.
    RepairFails,
    /// The close failed with an errno after the partitions closed (the
    /// data dir's checkpoints or marker): no clean-shutdown marker.
    CloseFails,
}

pub struct Case {
    /// Failpoints and their actions (`return`, `return(ENOSPC)`, `panic`,
    /// `1*off->return` to let the first call through).
    pub faults: &'static [(&'static str, &'static str)],
    pub op: Op,
    pub outcome: Outcome,
}

const fn case(faults: &'static [(&'static str, &'static str)], op: Op, outcome: Outcome) -> Case {
    Case {
        faults,
        op,
        outcome,
    }
}

/// The matrix: call site × operation.
pub fn cases() -> Vec<Case> {
    let mut all = append_cases();
    all.extend(maintenance_cases());
    all.extend(load_cases());
    all
}

/// Appends: plain, rolling, with flush.messages; errors, a full disk, panics.
fn append_cases() -> Vec<Case> {
    use Op::*;
    use Outcome::*;
    vec![
        case(&[("segment.append.write", E)], Append, Offline),
        case(&[("txnindex.append.open", E)], Abort, Offline),
        case(&[("txnindex.append.write", E)], Abort, Offline),
        case(&[("txnindex.append.write", "panic")], Abort, Offline),
        case(
            &[("segment.append.write", "1*off->return")],
            Append,
            Offline,
        ),
        case(
            &[("segment.append.write", "return(ENOSPC)")],
            Append,
            Refused,
        ),
        case(
            &[("segment.append.write", "1*off->return(ENOSPC)")],
            Append,
            Refused,
        ),
        case(
            &[
                ("segment.append.write", "return(ENOSPC)"),
                ("segment.append.cut_back", E),
            ],
            Append,
            Offline,
        ),
        case(
            &[
                ("segment.append.write", "1*off->return(ENOSPC)"),
                ("segment.rollback.truncate", E),
            ],
            Append,
            Offline,
        ),
        // The index's blocks for an append's entries, before its batch.
        case(&[("index.fallocate", "return(ENOSPC)")], Append, Refused),
        case(&[("index.fallocate", E)], Append, Offline),
        case(&[("index.push", E)], Append, Offline),
        case(&[("index.push", "panic")], Append, Offline),
        case(&[("segment.append.write", "panic")], Append, Offline),
        case(&[("segment.create", E)], AppendRolling, Offline),
        case(
            &[("segment.create", "return(ENOSPC)")],
            AppendRolling,
            Refused,
        ),
        case(&[("index.create", E)], AppendRolling, Offline),
        case(
            &[("index.fallocate", "return(ENOSPC)")],
            AppendRolling,
            Refused,
        ),
        case(&[("index.fallocate", E)], AppendRolling, Offline),
        case(&[("index.set_len", E)], AppendRolling, Offline),
        case(&[("index.resize.truncate", E)], AppendRolling, Offline),
        case(&[("index.msync", E)], AppendRolling, Offline),
        case(
            &[
                ("segment.append.write", "1*off->return(ENOSPC)"),
                ("segment.delete.remove", E),
            ],
            AppendRolling,
            Offline,
        ),
        case(
            &[
                ("segment.append.write", "1*off->return(ENOSPC)"),
                ("segment.delete.remove_txnindex", E),
            ],
            AppendRolling,
            Offline,
        ),
        case(&[("segment.create", "panic")], AppendRolling, Offline),
        case(&[("segment.flush.fdatasync", E)], AppendFlushed, Offline),
        case(
            &[("segment.flush.fdatasync", "panic")],
            AppendFlushed,
            Offline,
        ),
        case(&[("index.msync", E)], AppendFlushed, Offline),
        case(&[("partition.flush.dir_fsync", E)], AppendFlushed, Offline),
        case(&[("atomic.write", E)], AppendFlushed, OfflineAfter),
        case(&[("atomic.rename", E)], AppendFlushed, OfflineAfter),
    ]
}

/// Roll, flush, retention, delete-records, config, close, mkdir, rmdir and
/// the stream lengths saved by a read.
fn maintenance_cases() -> Vec<Case> {
    use Op::*;
    use Outcome::*;
    vec![
        case(&[("segment.create", E)], Roll, Offline),
        case(&[("index.create", "return(ENOSPC)")], Roll, Refused),
        case(&[("index.resize.truncate", E)], Roll, Offline),
        case(&[("index.msync", E)], Roll, Offline),
        case(&[("segment.flush.fdatasync", E)], Flush, Offline),
        case(&[("index.msync", E)], Flush, Offline),
        case(&[("partition.flush.dir_fsync", E)], Flush, Offline),
        case(&[("atomic.create", E)], Flush, Offline),
        case(&[("atomic.write", E)], Flush, Offline),
        case(&[("atomic.fsync", E)], Flush, Offline),
        case(&[("atomic.rename", E)], Flush, Offline),
        case(&[("atomic.dir_fsync", E)], Flush, Offline),
        case(&[("txnindex.flush", E)], AbortFlush, Offline),
        // Retention and delete-records.
        case(&[("segment.delete.remove", E)], Retention, Offline),
        case(&[("segment.delete.remove_txnindex", E)], Retention, Offline),
        case(&[("atomic.rename", E)], Retention, Offline),
        case(&[("atomic.fsync", E)], DeleteRecords, Offline),
        case(
            &[("atomic.write", "return(ENOSPC)")],
            DeleteRecords,
            Refused,
        ),
        case(&[("segment.delete.remove", E)], DeleteRecords, Offline),
        // Config, close, mkdir, rmdir, stream lengths.
        case(&[("atomic.create", E)], SetConfig, Offline),
        case(&[("atomic.write", "return(ENOSPC)")], SetConfig, Refused),
        case(&[("segment.flush.fdatasync", E)], Close, Offline),
        case(&[("index.resize.truncate", E)], Close, Offline),
        case(&[("index.msync", E)], Close, Offline),
        case(&[("atomic.rename", E)], Close, CloseFails),
        case(&[("atomic.create", E)], Close, CloseFails),
        case(&[("partition.create.mkdir", E)], Mkdir, Offline),
        case(&[("segment.create", E)], Mkdir, Offline),
        case(&[("atomic.write", E)], Mkdir, Offline),
        case(
            &[("index.create", E), ("partition.create.cleanup", E)],
            Mkdir,
            Offline,
        ),
        case(&[("partition.delete.remove", E)], Rmdir, Offline),
        case(&[("atomic.rename", E)], Rmdir, Offline),
        case(&[("atomic.write", E)], StreamRead, OfflineAfter),
    ]
}

/// Loading (recovery, index rebuilds, stray files), a lazy rebuild on a
/// read, the open of the data dir, and `check --repair`.
fn load_cases() -> Vec<Case> {
    use Op::*;
    use Outcome::*;
    vec![
        case(
            &[("segment.recover.truncate", E1)],
            RecoverTail,
            LoadOffline,
        ),
        case(&[("index.create", E1)], RecoverTail, LoadOffline),
        case(&[("txnindex.truncate", E1)], RecoverTxn, LoadOffline),
        case(&[("index.push", E1)], RecoverTail, LoadOffline),
        case(&[("segment.delete.remove", E1)], RecoverMiddle, LoadOffline),
        case(
            &[("segment.recover.truncate", E1)],
            RecoverMiddle,
            LoadOffline,
        ),
        case(&[("index.create", E1)], RebuildAtLoad, LoadOffline),
        case(&[("index.fallocate", E1)], RebuildAtLoad, LoadOffline),
        case(&[("index.set_len", E1)], RebuildAtLoad, LoadOffline),
        case(&[("index.resize.truncate", E1)], RebuildAtLoad, LoadOffline),
        case(&[("index.install", E1)], RebuildAtLoad, LoadOffline),
        case(&[("index.install", E1)], RecoverTail, LoadOffline),
        case(
            &[("index.fallocate", E1), ("index.discard", E)],
            RebuildAtLoad,
            LoadOffline,
        ),
        case(&[("index.create", E)], RebuildOnRead, Offline),
        case(&[("index.resize.truncate", E)], RebuildOnRead, Offline),
        case(&[("loader.stray.remove", E1)], Stray, LoadOffline),
        case(&[("loader.swap.rename", E1)], Stray, LoadOffline),
        case(&[("loader.swap.remove_replaced", E1)], Stray, LoadOffline),
        case(&[("loader.orphan_index.remove", E1)], Stray, LoadOffline),
        case(&[("producer.snapshot.remove", E1)], Stray, LoadOffline),
        case(&[("segment.size.stat", E1)], Open, LoadOffline),
        // The data dir.
        case(&[("manager.mkdir", E)], OpenNew, OpenFails),
        case(&[("manager.lock.open", E)], Open, OpenFails),
        case(&[("manager.lock.truncate", E)], Open, OpenFails),
        case(&[("manager.lock.write", E)], Open, OpenFails),
        case(&[("manager.marker.remove", E)], Open, OpenFails),
        case(&[("manager.marker.dir_fsync", E)], Open, OpenFails),
        case(&[("repair.remove_index", E)], Repair, RepairFails),
        case(&[("repair.remove_snapshot", E)], Repair, RepairFails),
        case(&[("repair.remove_stream_lengths", E)], Repair, RepairFails),
        case(&[("repair.remove_marker", E)], Repair, RepairFails),
        case(&[("atomic.rename", E)], Repair, RepairFails),
    ]
}

#[test]
fn every_site_has_a_case() {
    let cases = cases();
    let cleaner = crate::clean::cases();
    let missing: Vec<&str> = SITES
        .iter()
        .copied()
        .filter(|s| !cases.iter().any(|c| c.faults.iter().any(|(f, _)| f == s)))
        .filter(|s| {
            !cleaner
                .iter()
                .any(|(faults, _)| faults.iter().any(|(f, _)| f == s))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "sites without a failpoint case: {missing:?}"
    );
    for c in &cases {
        for (f, _) in c.faults {
            assert!(SITES.contains(f), "{f} is not a site");
        }
    }
}
