//! Runs each case of the matrix and checks what it promises.

use std::fs;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::Arc;

use commitfs::record::NewRecord;
use commitfs::storage::check::{check_data_dir, repair_data_dir};
use commitfs::storage::{LogManager, StorageError};
use fail::FailScenario;

use crate::cases::{Case, Op, Outcome, cases};
use crate::{FILLED, append_transactional, append_values, config, open, value};

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
    let mut filled = FILLED;
    if matches!(op, Op::Abort | Op::AbortFlush | Op::RecoverTxn) {
        append_transactional(&t, FILLED);
        filled += 1;
        if op == Op::RecoverTxn {
            t.append_end_txn_marker(7, 0, 0, false).unwrap();
        }
    }
    match op {
        Op::Append | Op::AppendRolling => t.set_config("max.message.bytes", "12000").unwrap(),
        Op::AppendFlushed => t.set_config("flush.messages", "1").unwrap(),
        Op::Retention => t.set_config("retention.bytes", "1").unwrap(),
        _ => {}
    }
    drop(t);
    // The close stops the flusher, waiting for a flush that runs: no flush
    // scheduled by a roll here can meet a fault set later.
    mgr.close().unwrap();
    let bases = segment_bases(dir);
    let seg = |base: i64, suffix: &str| dir.join("t-0").join(format!("{base:020}.{suffix}"));
    match op {
        Op::RecoverTxn => {
            fs::remove_file(dir.join(".kafka_cleanshutdown")).unwrap();
            fs::write(dir.join("recovery-point-offset-checkpoint"), "0\n0\n").unwrap();
        }
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
            if op == Op::Repair {
                // A producer snapshot of an unknown version: repair removes it first.
                fs::write(seg(0, "snapshot"), [0, 2, 0, 0, 0, 0, 0, 0, 0, 0]).unwrap();
                // A saved stream length its segment's records do not make:
                // repair removes the file.
                let log = fs::metadata(seg(0, "log")).unwrap();
                let (size, ino) = (log.len(), std::os::unix::fs::MetadataExt::ino(&log));
                let lengths = dir.join("t-0").join("commitfs.streamlen");
                fs::write(lengths, format!("0 999999 {size} {ino}\n")).unwrap();
            }
        }
        Op::Stray => {
            fs::write(dir.join("t-0").join("junk.deleted"), b"x").unwrap();
            fs::copy(
                seg(bases[1], "log"),
                dir.join("t-0").join(format!("{:020}.log.swap", bases[1])),
            )
            .unwrap();
            fs::write(dir.join("t-0").join(format!("{:020}.index", 999_999)), b"").unwrap();
            // A producer snapshot past the log end, which the load removes.
            fs::write(
                dir.join("t-0").join(format!("{:020}.snapshot", 999_999)),
                b"",
            )
            .unwrap();
        }
        Op::StreamRead => fs::remove_file(dir.join("t-0").join("commitfs.streamlen")).unwrap(),
        _ => {}
    }
    let survivors = if op == Op::RecoverMiddle {
        bases[2] as usize
    } else {
        filled
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
            Op::Abort => t().append_end_txn_marker(7, 0, 0, false).map(|_| ()),
            Op::AbortFlush => {
                t().append_end_txn_marker(7, 0, 0, false)?;
                t().flush()
            }
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

/// Runs the case's operation with its faults set: operations on a live
/// partition open first, then fail; the others fail in the open (or in
/// repair, which opens nothing beforehand).
fn inject(c: &Case, dir: &Path) -> (Ran, Option<Arc<LogManager>>) {
    let loads = matches!(c.outcome, Outcome::OpenFails | Outcome::LoadOffline);
    let mgr = if loads || c.op == Op::Repair {
        None
    } else {
        Some(Arc::new(open(dir).unwrap()))
    };
    for (site, action) in c.faults {
        fail::cfg(*site, action).unwrap();
    }
    let result = if loads {
        match open(dir) {
            Ok(m) => (Ran::Ok, Some(Arc::new(m))),
            Err(e) => (Ran::Err(e), None),
        }
    } else {
        (run_op(dir, c.op, mgr.as_ref()), mgr)
    };
    for (site, _) in c.faults {
        fail::remove(site);
    }
    result
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
    let (ran, mgr) = inject(c, &dir);
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
    remount_and_verify(&dir, &name, &acked, &maybe, &bystanders(c));
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

/// What the partitions other than t-0 must hold after the remount (`None`:
/// absent): u-0 and w-0 were given records 0..3, and u-0 one more
/// ("bystander") after the fault unless the case closed the manager or
/// failed its open; the failed rmdir of w-0 leaves it whole when the
/// directory's removal failed, and absent when what failed came after it.
fn bystanders(c: &Case) -> Vec<(&'static str, Option<Vec<Vec<u8>>>)> {
    if c.op == Op::OpenNew {
        return Vec::new();
    }
    let three: Vec<Vec<u8>> = (0..3).map(value).collect();
    let mut u = three.clone();
    let appended =
        !matches!(c.op, Op::Close | Op::Repair) && !matches!(c.outcome, Outcome::OpenFails);
    if appended {
        u.push(b"bystander".to_vec());
    }
    let w = match c.op {
        Op::Rmdir
            if c.faults
                .iter()
                .any(|(s, _)| *s == "partition.delete.remove") =>
        {
            Some(three)
        }
        Op::Rmdir => None,
        _ => Some(three),
    };
    vec![("u-0", Some(u)), ("w-0", w)]
}

/// What the caller saw, the partition's state, and the bystander's.
fn check_outcome(c: &Case, name: &str, ran: &Ran, mgr: Option<&Arc<LogManager>>) -> String {
    let site = c.faults.last().map(|(s, _)| *s).unwrap_or_default();
    let errno = match ran {
        Ran::Err(e) => {
            // A full disk is refused with ENOSPC; every other fault is an
            // I/O error (EIO), whatever the site: the injected errno when
            // it is the one the caller meets, the fail-stop guard's EIO when
            // an undo failed after it.
            let want = if c.outcome == Outcome::Refused {
                libc::ENOSPC
            } else {
                libc::EIO
            };
            assert_eq!(e.raw_os_error(), Some(want), "{name}: the errno of {e}");
            format!("{want}")
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
            check_offline(c, name, ran, mgr, target.as_deref())
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

/// An offline outcome: the caller's answer, then every operation on t-0
/// refused with EIO and the cause naming the fault (or, for mkdir, no
/// partition and no directory left).
fn check_offline(
    c: &Case,
    name: &str,
    ran: &Ran,
    mgr: &LogManager,
    target: Option<&commitfs::storage::PartitionLog>,
) {
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
    } else if c.op == Op::Rmdir {
        // w-0 is gone from the tree, or still listed but offline: never
        // served as if the rmdir had not happened. Its name cannot be made
        // again over what is left of its directory until a remount.
        if let Some(w) = mgr.partition("w-0") {
            let cause = w.status().unwrap().offline;
            assert!(cause.is_some(), "{name}: w-0 still served, online");
            assert_eq!(w.read(0).unwrap_err().raw_os_error(), Some(libc::EIO));
        }
        if mgr.dir().join("w-0").exists() {
            let Err(e) = mgr.create_partition("w-0") else {
                panic!("{name}: w-0 made again over its half-deleted directory")
            };
            assert!(
                matches!(e, StorageError::PartitionExists(_)),
                "{name}: mkdir over a half-deleted w-0: {e}"
            );
        }
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

/// The remount: recovery brings every partition back; t-0 holds every
/// acknowledged record, then none of the failed append's or (when its undo
/// failed too, as after a crash in its middle) a prefix of its whole
/// batches, nothing more; `check` is clean.
fn remount_and_verify(
    dir: &Path,
    name: &str,
    acked: &[Vec<u8>],
    maybe: &[Vec<u8>],
    others: &[(&str, Option<Vec<Vec<u8>>>)],
) {
    let mgr = open(dir).unwrap_or_else(|e| panic!("{name}: remount: {e}"));
    // The other partitions hold exactly what they were given.
    for (p, want) in others {
        let got = mgr.partition(p).map(|l| {
            assert_eq!(l.log_start_offset(), 0, "{name}: {p}");
            (0..l.log_end_offset())
                .map(|o| {
                    l.read(o)
                        .unwrap_or_else(|e| panic!("{name}: {p} offset {o}: {e}"))
                        .value
                        .unwrap_or_default()
                })
                .collect::<Vec<_>>()
        });
        assert!(
            got == *want,
            "{name}: {p} holds {:?} records, not {:?}",
            got.as_ref().map(Vec::len),
            want.as_ref().map(Vec::len)
        );
    }
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
        // Transaction markers hold no record: a marker that stood is
        // there, past the records.
        let records: Vec<i64> = (acked_end..end)
            .filter(|o| !matches!(t.read(*o), Err(StorageError::RecordNotFound(_))))
            .collect();
        // A prefix of the failed append's batches when its undo failed too,
        // as a crash in its middle leaves (one record per batch here).
        let extra = records.len();
        assert!(
            extra <= maybe.len(),
            "{name}: {extra} records past the acknowledged ones (the failed append had {})",
            maybe.len()
        );
        for (i, o) in records.into_iter().enumerate() {
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
