//! Fail-stop under injected I/O faults (`cargo test --features failpoints
//! --test failpoints`), in the manner of raft-engine's
//! `tests/failpoints/test_io_error.rs`.
//!
//! Every call site in `storage::io::SITES` (each write, fsync, rename,
//! truncate, allocation, msync and removal storage makes) is made to fail
//! during each operation that reaches it: append (plain, rolling, with
//! `flush.messages`), roll, flush, retention, delete-records, a config
//! change, close, mkdir, rmdir, a stream read that saves lengths, recovery
//! and index rebuilds at load, a lazy index rebuild on a read, the open of
//! the data dir and `check --repair`. Each case checks:
//! - the caller got an errno (EIO, or ENOSPC for a full disk);
//! - the partition went offline (every later operation EIO, `status` says
//!   why), unless the fault was a refusal (a full disk, undone), after which
//!   it carries on; another partition carries on either way;
//! - after a remount, every acknowledged record is there at its offset with
//!   its value, the failed operation's records are there whole or not at
//!   all, nothing else is, and `commitfs check` is clean.
//!
//! The cases are in [`cases`]; a test fails if a site has none.

use std::fs;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::Arc;

use commitfs::record::NewRecord;
use commitfs::storage::check::{check_data_dir, repair_data_dir};
use commitfs::storage::io::SITES;
use commitfs::storage::{LogConfig, LogManager, OpenOptions, PartitionLog, StorageError};
use fail::FailScenario;

const VALUE_LEN: usize = 10_000;
/// The failpoint action for an I/O error (EIO).
const E: &str = "return";
/// The same, once: at a load, for the first partition (t-0) only.
const E1: &str = "1*return";
const FILLED: usize = 250;

fn config() -> LogConfig {
    let mut c = LogConfig::default();
    c.set("segment.bytes", "1048576").unwrap();
    c.set("index.interval.bytes", "1000").unwrap();
    c
}

fn value(i: usize) -> Vec<u8> {
    let mut v = format!("{i:08}-").into_bytes();
    v.resize(VALUE_LEN, b'a' + (i % 26) as u8);
    v
}

fn open(dir: &Path) -> commitfs::storage::Result<LogManager> {
    LogManager::open(dir, config(), OpenOptions::default())
}

fn append_values(log: &PartitionLog, from: usize, n: usize) {
    for i in from..from + n {
        log.append(&[NewRecord::value(&value(i))]).unwrap();
    }
}

/// What an operation does. Each runs on a data dir holding `t-0` with
/// [`FILLED`] acknowledged records in three segments, and `u-0` and `w-0`
/// with a few, cleanly closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
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
    /// An open of a partition with a `.deleted`, a `.swap` and an orphan index.
    Stray,
    /// An open of the data dir, clean.
    Open,
    /// An open of a data dir that does not exist yet.
    OpenNew,
    /// `check --repair` of a damaged index.
    Repair,
}

/// How a case ends, before the remount.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
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

struct Case {
    /// Failpoints and their actions (`return`, `return(ENOSPC)`, `panic`,
    /// `1*off->return` to let the first call through).
    faults: &'static [(&'static str, &'static str)],
    op: Op,
    outcome: Outcome,
}

const fn case(faults: &'static [(&'static str, &'static str)], op: Op, outcome: Outcome) -> Case {
    Case {
        faults,
        op,
        outcome,
    }
}

/// The matrix: call site × operation.
fn cases() -> Vec<Case> {
    use Op::*;
    use Outcome::*;
    vec![
        // Appends.
        case(&[("segment.append.write", E)], Append, Offline),
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
        // Roll and flush.
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
        // Loading: recovery, index rebuilds, stray files.
        case(
            &[("segment.recover.truncate", E1)],
            RecoverTail,
            LoadOffline,
        ),
        case(&[("index.create", E1)], RecoverTail, LoadOffline),
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
        case(&[("loader.swap.remove_index", E1)], Stray, LoadOffline),
        case(&[("loader.orphan_index.remove", E1)], Stray, LoadOffline),
        case(&[("segment.size.stat", E1)], Open, LoadOffline),
        // The data dir.
        case(&[("manager.mkdir", E)], OpenNew, OpenFails),
        case(&[("manager.lock.open", E)], Open, OpenFails),
        case(&[("manager.lock.truncate", E)], Open, OpenFails),
        case(&[("manager.lock.write", E)], Open, OpenFails),
        case(&[("manager.marker.remove", E)], Open, OpenFails),
        case(&[("manager.marker.dir_fsync", E)], Open, OpenFails),
        case(&[("repair.remove_index", E)], Repair, RepairFails),
        case(&[("repair.remove_marker", E)], Repair, RepairFails),
        case(&[("atomic.rename", E)], Repair, RepairFails),
    ]
}

#[test]
fn every_site_has_a_case() {
    let cases = cases();
    let missing: Vec<&str> = SITES
        .iter()
        .copied()
        .filter(|s| !cases.iter().any(|c| c.faults.iter().any(|(f, _)| f == s)))
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

#[test]
fn every_case_fails_stop_and_loses_nothing() {
    let scenario = FailScenario::setup();
    let mut table = Vec::new();
    for c in cases() {
        let line = run_case(&c);
        table.push(line);
    }
    scenario.teardown();
    println!("site(s) | operation | outcome | errno");
    for l in table {
        println!("{l}");
    }
}

/// The data dir every case starts from, cleanly closed; returns the
/// acknowledged values of t-0.
fn prepare(dir: &Path, op: Op) -> Vec<Vec<u8>> {
    let mgr = open(dir).unwrap();
    let t = mgr.create_partition("t-0").unwrap();
    append_values(&t, 0, FILLED);
    for p in ["u-0", "w-0"] {
        let l = mgr.create_partition(p).unwrap();
        append_values(&l, 0, 3);
    }
    assert_eq!(t.segment_bases().len(), 3, "{:?}", t.segment_bases());
    match op {
        Op::Append | Op::AppendRolling => t.set_config("max.message.bytes", "12000").unwrap(),
        Op::AppendFlushed => t.set_config("flush.messages", "1").unwrap(),
        Op::Retention => t.set_config("retention.bytes", "1").unwrap(),
        _ => {}
    }
    drop(t);
    mgr.close().unwrap();
    // Let the flushes scheduled by rolls finish before any fault is set.
    std::thread::sleep(std::time::Duration::from_millis(50));
    let bases = segment_bases(dir);
    let seg = |base: i64, suffix: &str| dir.join("t-0").join(format!("{base:020}.{suffix}"));
    match op {
        Op::RecoverTail | Op::RecoverMiddle => {
            let base = if op == Op::RecoverTail {
                bases[2]
            } else {
                bases[1]
            };
            let mut bytes = fs::read(seg(base, "log")).unwrap();
            bytes.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 1, 0, 0]);
            fs::write(seg(base, "log"), bytes).unwrap();
            fs::remove_file(dir.join(".kafka_cleanshutdown")).unwrap();
            fs::write(dir.join("recovery-point-offset-checkpoint"), "0\n0\n").unwrap();
        }
        Op::RebuildAtLoad => fs::remove_file(seg(0, "index")).unwrap(),
        Op::RebuildOnRead | Op::Repair => {
            let mut idx = fs::read(seg(0, "index")).unwrap();
            idx[4..8].copy_from_slice(&123u32.to_be_bytes());
            fs::write(seg(0, "index"), idx).unwrap();
        }
        Op::Stray => {
            fs::write(dir.join("t-0").join("junk.deleted"), b"x").unwrap();
            fs::copy(
                seg(bases[1], "log"),
                dir.join("t-0").join(format!("{:020}.log.swap", bases[1])),
            )
            .unwrap();
            fs::write(dir.join("t-0").join(format!("{:020}.index", 999_999)), b"").unwrap();
        }
        Op::StreamRead => fs::remove_file(dir.join("t-0").join("commitfs.streamlen")).unwrap(),
        _ => {}
    }
    let survivors = if op == Op::RecoverMiddle {
        bases[2] as usize
    } else {
        FILLED
    };
    (0..survivors).map(value).collect()
}

fn segment_bases(dir: &Path) -> Vec<i64> {
    let mut bases: Vec<i64> = fs::read_dir(dir.join("t-0"))
        .unwrap()
        .filter_map(|e| {
            let n = e.unwrap().file_name().into_string().unwrap();
            n.strip_suffix(".log").and_then(|b| b.parse().ok())
        })
        .collect();
    bases.sort();
    bases
}

/// What the operation returned: an error (its errno), a panic, or success.
enum Ran {
    Ok,
    Err(StorageError),
    Panicked(String),
}

/// The records the operation tried to append (present whole or not at all).
fn attempted(op: Op) -> Vec<Vec<u8>> {
    match op {
        Op::Append | Op::AppendRolling => (FILLED..FILLED + 3).map(value).collect(),
        Op::AppendFlushed | Op::Flush => vec![value(FILLED)],
        _ => Vec::new(),
    }
}

fn run_op(dir: &Path, op: Op, mgr: Option<&Arc<LogManager>>) -> Ran {
    let t = mgr.and_then(|m| m.partition("t-0"));
    let result = catch_unwind(AssertUnwindSafe(|| -> commitfs::storage::Result<()> {
        let t = || t.clone().expect("t-0 is loaded");
        let recs: Vec<Vec<u8>> = attempted(op);
        let recs: Vec<NewRecord> = recs.iter().map(|v| NewRecord::value(v)).collect();
        match op {
            Op::Append | Op::AppendFlushed => t().append(&recs).map(|_| ()),
            Op::AppendRolling => {
                t().set_config("segment.ms", "1")?;
                std::thread::sleep(std::time::Duration::from_millis(5));
                t().append(&recs).map(|_| ())
            }
            Op::Roll => t().roll(),
            Op::Flush => {
                t().append(&recs)?;
                t().flush()
            }
            Op::Retention => t().apply_retention(i64::MAX / 2).map(|_| ()),
            Op::DeleteRecords => t().delete_records_before(150).map(|_| ()),
            Op::SetConfig => t().set_config("retention.ms", "12345"),
            Op::Close => mgr.expect("open").close(),
            Op::Mkdir => mgr.expect("open").create_partition("v-0").map(|_| ()),
            Op::Rmdir => mgr.expect("open").delete_partition("w-0"),
            Op::StreamRead => t().stream_len().map(|_| ()),
            Op::RebuildOnRead => t().read(1).map(|_| ()),
            Op::Repair => {
                let report = check_data_dir(dir, &config(), None)?;
                repair_data_dir(dir, &config(), &report).map(|_| ())
            }
            // Load-time operations run in the open itself.
            _ => Ok(()),
        }
    }));
    match result {
        Ok(Ok(())) => Ran::Ok,
        Ok(Err(e)) => Ran::Err(e),
        Err(p) => Ran::Panicked(
            p.downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default(),
        ),
    }
}

fn run_case(c: &Case) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let dir = if c.op == Op::OpenNew {
        tmp.path().join("new")
    } else {
        tmp.path().to_path_buf()
    };
    let mut acked = if c.op == Op::OpenNew {
        Vec::new()
    } else {
        prepare(&dir, c.op)
    };
    let name = format!("{:?} × {:?}", c.faults, c.op);
    let loads = matches!(c.outcome, Outcome::OpenFails | Outcome::LoadOffline);
    // Operations on a live partition open first, then fail; the others
    // fail in the open (or in repair, which opens nothing beforehand).
    let mgr = if loads || c.op == Op::Repair {
        None
    } else {
        Some(Arc::new(open(&dir).unwrap()))
    };
    for (site, action) in c.faults {
        fail::cfg(*site, action).unwrap();
    }
    let (ran, mgr) = if loads {
        let opened = open(&dir);
        for (site, _) in c.faults {
            fail::remove(site);
        }
        match opened {
            Ok(m) => (Ran::Ok, Some(Arc::new(m))),
            Err(e) => (Ran::Err(e), None),
        }
    } else {
        let ran = run_op(&dir, c.op, mgr.as_ref());
        for (site, _) in c.faults {
            fail::remove(site);
        }
        (ran, mgr)
    };
    let errno = check_outcome(c, &name, &ran, mgr.as_ref());
    // What the caller was told is appended must be there after the remount;
    // what it was told failed may be there whole, or not at all.
    let mut maybe = Vec::new();
    match (&ran, c.op) {
        (Ran::Ok, _) => acked.extend(attempted(c.op)),
        // The append went through; the flush after it failed.
        (_, Op::Flush) => acked.extend(attempted(c.op)),
        _ => maybe = attempted(c.op),
    }
    if c.outcome == Outcome::Refused {
        // check_outcome appended one more record after the refusal.
        maybe.clear();
        acked.push(value(FILLED));
    }
    if let Some(m) = mgr {
        // The umount: an offline partition makes the close fail, so the
        // clean-shutdown marker is not written and the remount recovers.
        let closed = m.close();
        let offline = !matches!(
            c.outcome,
            Outcome::Refused | Outcome::RepairFails | Outcome::CloseFails
        );
        if offline && !matches!(c.op, Op::Close | Op::Rmdir | Op::Mkdir) {
            assert!(
                closed.is_err(),
                "{name}: the close of an offline partition fails"
            );
            assert!(!dir.join(".kafka_cleanshutdown").exists(), "{name}");
        }
        drop(m);
    }
    if c.outcome == Outcome::RepairFails {
        let report = check_data_dir(&dir, &config(), None).unwrap();
        repair_data_dir(&dir, &config(), &report).unwrap();
    }
    std::thread::sleep(std::time::Duration::from_millis(20));
    remount_and_verify(&dir, &name, &acked, &maybe);
    format!(
        "{} | {:?} | {:?} | {}",
        c.faults
            .iter()
            .map(|(s, a)| format!("{s}={a}"))
            .collect::<Vec<_>>()
            .join(", "),
        c.op,
        c.outcome,
        errno
    )
}

/// What the caller saw, the partition's state, and the bystander's.
fn check_outcome(c: &Case, name: &str, ran: &Ran, mgr: Option<&Arc<LogManager>>) -> String {
    let site = c.faults.last().map(|(s, _)| *s).unwrap_or_default();
    let errno = match ran {
        Ran::Err(e) => {
            let errno = e.raw_os_error();
            assert!(errno.is_some(), "{name}: an errno, not {e}");
            format!("{}", errno.unwrap_or(0))
        }
        Ran::Panicked(msg) => {
            assert!(msg.contains("failpoint"), "{name}: {msg}");
            "panic (EIO at the mount)".to_string()
        }
        Ran::Ok => "none".to_string(),
    };
    match c.outcome {
        Outcome::OpenFails => {
            assert!(mgr.is_none(), "{name}: the open fails");
            let Ran::Err(e) = ran else { unreachable!() };
            assert!(e.to_string().contains(site), "{name}: {e}");
            return format!("{errno} (the open)");
        }
        Outcome::RepairFails | Outcome::CloseFails => {
            let Ran::Err(e) = ran else {
                panic!("{name}: should fail")
            };
            assert!(e.to_string().contains(site), "{name}: {e}");
            if let Some(m) = mgr {
                assert!(!m.dir().join(".kafka_cleanshutdown").exists(), "{name}");
            }
            return errno;
        }
        _ => {}
    }
    let Some(mgr) = mgr else {
        panic!("{name}: the data dir should be open")
    };
    let target = match c.op {
        Op::Mkdir => None,
        Op::Rmdir => None,
        _ => mgr.partition("t-0"),
    };
    match c.outcome {
        Outcome::Refused => {
            let Ran::Err(e) = ran else {
                panic!("{name}: refused")
            };
            assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{name}: {e}");
            let t = target.expect("t-0");
            assert!(t.status().unwrap().offline.is_none(), "{name}: online");
            let leo = t.log_end_offset();
            assert_eq!(leo, FILLED as i64, "{name}: nothing appended");
            t.append(&[NewRecord::value(&value(FILLED))]).unwrap();
        }
        Outcome::Offline | Outcome::OfflineAfter | Outcome::LoadOffline => {
            if c.outcome == Outcome::Offline {
                assert!(!matches!(ran, Ran::Ok), "{name}: the caller got an errno");
            }
            if c.outcome == Outcome::LoadOffline {
                assert!(matches!(ran, Ran::Ok), "{name}: the others mount");
            }
            if let Some(t) = target {
                let s = t.status().unwrap();
                let cause = s.offline.unwrap_or_else(|| panic!("{name}: t-0 offline"));
                if !matches!(ran, Ran::Panicked(_)) {
                    assert!(
                        c.faults.iter().any(|(f, _)| cause.contains(f)),
                        "{name}: cause {cause}"
                    );
                }
                let e = t.append(&[NewRecord::value(b"no")]).unwrap_err();
                assert!(matches!(e, StorageError::Offline { .. }), "{name}: {e}");
                assert_eq!(e.raw_os_error(), Some(libc::EIO));
                assert!(t.read(0).is_err(), "{name}: reads refused too");
                assert!(t.flush().is_err(), "{name}");
            } else if c.op == Op::Mkdir {
                assert!(
                    mgr.partition("v-0").is_none(),
                    "{name}: no half-made partition"
                );
                let left = mgr.dir().join("v-0").exists();
                let cleanup_failed = c
                    .faults
                    .iter()
                    .any(|(s, _)| *s == "partition.create.cleanup");
                assert_eq!(left, cleanup_failed, "{name}: the directory goes");
            }
        }
        _ => unreachable!(),
    }
    // The bystander carries on.
    if !matches!(c.op, Op::Close) {
        let u = mgr.partition("u-0").expect("u-0");
        u.append(&[NewRecord::value(b"bystander")]).unwrap();
    }
    errno
}

/// The remount: recovery brings every partition back; t-0 holds every
/// acknowledged record, then none of the failed append's or (when its undo
/// failed too, as after a crash in its middle) a prefix of its whole
/// batches, nothing more; `check` is clean.
fn remount_and_verify(dir: &Path, name: &str, acked: &[Vec<u8>], maybe: &[Vec<u8>]) {
    let mgr = open(dir).unwrap_or_else(|e| panic!("{name}: remount: {e}"));
    for p in mgr.partitions() {
        assert!(
            p.status().unwrap().offline.is_none(),
            "{name}: {} recovered",
            p.name()
        );
    }
    if let Some(t) = mgr.partition("t-0") {
        let start = t.log_start_offset();
        let end = t.log_end_offset();
        let acked_end = acked.len() as i64;
        assert!(
            end >= acked_end,
            "{name}: log end {end} < {acked_end} acknowledged"
        );
        for o in start.max(0)..acked_end {
            let got = t
                .read(o)
                .unwrap_or_else(|e| panic!("{name}: offset {o}: {e}"));
            assert_eq!(
                got.value.as_deref(),
                Some(&acked[o as usize][..]),
                "{name}: offset {o} overwritten"
            );
        }
        // A prefix of the failed append's batches when its undo failed too,
        // as a crash in its middle leaves (one record per batch here).
        let extra = (end - acked_end) as usize;
        assert!(
            extra <= maybe.len(),
            "{name}: {extra} records past the acknowledged ones (the failed append had {})",
            maybe.len()
        );
        for (i, o) in (acked_end..end).enumerate() {
            let got = t.read(o).unwrap();
            assert_eq!(
                got.value.as_deref(),
                Some(&maybe[i][..]),
                "{name}: offset {o}"
            );
        }
    }
    drop(mgr.close());
    let report = check_data_dir(dir, &config(), None).unwrap();
    assert!(report.is_clean(), "{name}: {:?}", report.problems);
}

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
