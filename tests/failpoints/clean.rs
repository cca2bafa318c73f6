//! The log cleaner under injected faults: each call a pass makes to the
//! data directory fails (or panics) during a pass asked for on `t-0`, a
//! compacted partition of several segments. What each case promises:
//! - writing the cleaned segment fails: the pass fails, its `.cleaned`
//!   files go (or, if even that fails, the next load removes them), and
//!   the partition carries on as it was;
//! - a rename of the swap fails: the partition goes offline (fail-stop),
//!   and the remount completes or rolls back the swap;
//! - removing a replaced segment's `.deleted` files fails: the pass stands
//!   and the next load removes them;
//! - the load that completes a swap fails: the partition loads offline,
//!   and a load after that completes it.
//!
//! Either way nothing that was the latest value of a key is lost, the
//! bystander carries on, and `check` is clean after the remount.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use commitfs::record::NewRecord;
use commitfs::storage::check::check_data_dir;
use commitfs::storage::{LogManager, OpenOptions, PartitionLog};
use fail::FailScenario;

use crate::{E, E1, config};

/// How a case ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ends {
    /// The pass failed; t-0 is online and as it was.
    PassFails,
    /// The pass failed; t-0 is offline until the remount.
    Offline,
    /// The pass stood (a `.deleted` file is left for the next load).
    PassStands,
    /// The load completing a swap left by a crash failed: t-0 is offline.
    LoadOffline,
}

/// The cases: faults, and how the case ends.
pub fn cases() -> Vec<(&'static [(&'static str, &'static str)], Ends)> {
    use Ends::*;
    vec![
        (&[("cleaner.cleaned.create", E)], PassFails),
        (&[("cleaner.cleaned.create", "return(ENOSPC)")], PassFails),
        (&[("cleaner.cleaned.write", E)], PassFails),
        (&[("cleaner.cleaned.write", "return(ENOSPC)")], PassFails),
        (&[("cleaner.cleaned.write", "panic")], PassFails),
        (&[("cleaner.cleaned.fsync", E)], PassFails),
        (&[("cleaner.cleaned.create_index", E)], PassFails),
        (&[("cleaner.cleaned.write_index", E)], PassFails),
        (&[("cleaner.cleaned.fsync_index", E)], PassFails),
        (
            // The first four removals are at the start (none is there);
            // the fifth, of the failed pass's files, fails.
            &[
                ("cleaner.cleaned.write", E),
                ("cleaner.cleaned.remove", "4*off->return"),
            ],
            PassFails,
        ),
        (&[("cleaner.swap.to_swap", E)], Offline),
        (&[("cleaner.swap.to_swap", "1*off->return")], Offline),
        (&[("cleaner.swap.to_deleted", E)], Offline),
        (&[("cleaner.swap.to_deleted", "2*off->return")], Offline),
        (&[("cleaner.swap.from_swap", E)], Offline),
        (&[("cleaner.swap.from_swap", "panic")], Offline),
        (&[("cleaner.swap.dir_fsync", E)], Offline),
        (&[("cleaner.deleted.remove", E)], PassStands),
        (&[("loader.swap.remove_replaced", E1)], LoadOffline),
        (&[("loader.swap.remove_doomed", E1)], LoadOffline),
        (&[("loader.swap.rename", E1)], LoadOffline),
    ]
}

fn open(dir: &Path) -> LogManager {
    LogManager::open(dir, config(), OpenOptions::without_cleaner_threads()).unwrap()
}

fn put(log: &PartitionLog, key: &str, value: &str) {
    log.append(&[NewRecord::keyed(key.as_bytes(), value.as_bytes())])
        .unwrap();
}

/// `t-0` compacted over three segments, `u-0` a bystander; returns the
/// latest value of each key of `t-0`.
fn prepare(dir: &Path) -> BTreeMap<String, String> {
    let mgr = open(dir);
    let t = mgr.create_partition("t-0").unwrap();
    t.set_config("cleanup.policy", "compact").unwrap();
    t.set_config("file.delete.delay.ms", "0").unwrap();
    let mut latest = BTreeMap::new();
    for round in 0..3 {
        for k in 0..5 {
            let (key, value) = (format!("k{k}"), format!("v{round}-{k}"));
            put(&t, &key, &value);
            latest.insert(key, value);
        }
        t.roll().unwrap();
    }
    put(&t, "k0", "last");
    latest.insert("k0".into(), "last".into());
    mgr.create_partition("u-0").unwrap();
    drop(t);
    mgr.close().unwrap();
    latest
}

/// The latest value of each key a consumer of `t-0` reads.
fn latest_values(log: &PartitionLog) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for o in log.log_start_offset()..log.log_end_offset() {
        if let Ok(r) = log.read(o) {
            let s = |b: Option<Vec<u8>>| String::from_utf8(b.unwrap_or_default()).unwrap();
            out.insert(s(r.key), s(r.value));
        }
    }
    out
}

/// A crash during a pass, as `crash` makes it (a panic where nothing
/// after it runs): after the swap's renames to `.swap`, the next load has
/// a swap to complete; with the `.cleaned` files left, files to drop.
fn crash_in_pass(dir: &Path, crash: &[(&str, &str)]) {
    let mgr = open(dir);
    let t = mgr.partition("t-0").unwrap();
    for (site, action) in crash {
        fail::cfg(*site, action).unwrap();
    }
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| t.clean_now()));
    for (site, _) in crash {
        fail::remove(site);
    }
    assert!(
        r.is_err() || r.is_ok_and(|r| r.is_err()),
        "the pass stopped"
    );
    drop(t);
    // No close: the crash.
    drop(mgr);
}

fn run(faults: &[(&str, &str)], ends: Ends) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let latest = prepare(dir);
    let name = format!("{faults:?}");
    let mgr: Arc<LogManager>;
    let mut errno = "none".to_string();
    if ends == Ends::LoadOffline {
        let crash: &[(&str, &str)] = match faults[0].0 {
            "loader.swap.remove_doomed" => &[
                ("cleaner.cleaned.fsync", "return"),
                ("cleaner.cleaned.remove", "4*off->panic"),
            ],
            _ => &[("cleaner.swap.to_deleted", "panic")],
        };
        crash_in_pass(dir, crash);
        for (site, action) in faults {
            fail::cfg(*site, action).unwrap();
        }
        mgr = Arc::new(open(dir));
        for (site, _) in faults {
            fail::remove(site);
        }
        let t = mgr.partition("t-0").unwrap();
        let files: Vec<String> = std::fs::read_dir(t.local().dir())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        let cause = t
            .status()
            .unwrap()
            .offline
            .unwrap_or_else(|| panic!("{name}: t-0 loads offline ({files:?})"));
        assert!(
            faults.iter().any(|(f, _)| cause.contains(f)),
            "{name}: {cause}"
        );
    } else {
        mgr = Arc::new(open(dir));
        let t = mgr.partition("t-0").unwrap();
        for (site, action) in faults {
            fail::cfg(*site, action).unwrap();
        }
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| t.clean_now()));
        for (site, _) in faults {
            fail::remove(site);
        }
        let offline = t.status().unwrap().offline;
        match (ends, ran) {
            (Ends::PassStands, Ok(Ok(Some(_)))) => assert!(offline.is_none(), "{name}"),
            (Ends::PassFails, Ok(Err(e))) => {
                errno = format!("{:?}", e.raw_os_error());
                assert!(offline.is_none(), "{name}: online after {e}");
                assert_eq!(latest_values(&t), latest, "{name}: as it was");
                let left = std::fs::read_dir(t.local().dir())
                    .unwrap()
                    .filter(|e| {
                        e.as_ref()
                            .unwrap()
                            .file_name()
                            .to_string_lossy()
                            .ends_with(".cleaned")
                    })
                    .count();
                let removal_failed = faults.iter().any(|(s, _)| *s == "cleaner.cleaned.remove");
                assert_eq!(left > 0, removal_failed, "{name}: .cleaned files left");
            }
            (Ends::PassFails, Err(_)) => assert!(offline.is_none(), "{name}"),
            (Ends::Offline, r) => {
                assert!(!matches!(r, Ok(Ok(_))), "{name}: the pass failed");
                let cause = offline.unwrap_or_else(|| panic!("{name}: offline"));
                errno = "EIO".into();
                assert!(t.read(0).is_err(), "{name}: reads refused: {cause}");
            }
            (ends, r) => panic!("{name}: {ends:?} but {r:?}"),
        }
    }
    let u = mgr.partition("u-0").unwrap();
    u.append(&[NewRecord::value(b"bystander")]).unwrap();
    drop(u);
    let _ = mgr.close();
    drop(mgr);
    // The remount: every latest value there, the bystander's record too.
    let mgr = open(dir);
    let t = mgr.partition("t-0").unwrap();
    assert!(t.status().unwrap().offline.is_none(), "{name}: recovered");
    assert_eq!(
        latest_values(&t),
        latest,
        "{name}: latest values after the remount"
    );
    assert_eq!(mgr.partition("u-0").unwrap().log_end_offset(), 1, "{name}");
    let leftovers: Vec<String> = std::fs::read_dir(t.local().dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".cleaned") || n.ends_with(".swap") || n.ends_with(".deleted"))
        .collect();
    assert!(leftovers.is_empty(), "{name}: {leftovers:?}");
    drop(t);
    mgr.close().unwrap();
    let report = check_data_dir(dir, &config(), None).unwrap();
    assert!(!report.has_problems(), "{name}: {:?}", report.problems);
    format!("{name} | {ends:?} | {errno}")
}

#[test]
fn every_fault_of_a_pass_keeps_every_latest_value() {
    let scenario = FailScenario::setup();
    let mut table = Vec::new();
    for (faults, ends) in cases() {
        table.push(run(faults, ends));
    }
    scenario.teardown();
    println!("site(s) | outcome | errno");
    for l in table {
        println!("{l}");
    }
}
