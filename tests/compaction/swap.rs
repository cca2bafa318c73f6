//! A swap stopped at each of its steps, as a crash leaves it, and what the
//! next load makes of it: Kafka's `LogLoader` drops `.cleaned` files and
//! `.swap` files at or above the lowest `.cleaned` (the log stays as before
//! the pass), and completes the other `.swap` files (the log is as after
//! it). Either way the latest value of every key is there, the consumer
//! stream's length matches its records, and `check` is clean. A read-only
//! mount of the same directory shows what the load would make of it, and
//! changes nothing.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use commitfs::storage::{LogConfig, LogManager, OpenOptions};

use super::{compacted, consumed, open, put};

type Consumed = Vec<(i64, String, Option<String>)>;

/// A crash state: its name, the cleaned segment's files and their
/// suffixes, the suffix of each replaced segment's files, and the log the
/// load must give.
type Case<'a> = (
    &'a str,
    Vec<(&'a str, Option<&'a str>)>,
    &'a dyn Fn(i64) -> &'static str,
    &'a Consumed,
);

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else if e.file_name() != ".lock" {
            fs::copy(e.path(), target).unwrap();
        }
    }
}

/// The data directory before a pass, and its copy after one whose replaced
/// files were kept (`.deleted`): the pieces every crash state is made of.
fn before_and_after() -> (tempfile::TempDir, tempfile::TempDir, Consumed, Consumed) {
    let before = tempfile::tempdir().unwrap();
    let mgr = open(before.path());
    let log = compacted(&mgr, "t-0");
    log.set_config("file.delete.delay.ms", "3600000").unwrap();
    put(&log, &[("a", Some("1")), ("b", Some("1"))]);
    put(&log, &[("a", Some("2"))]);
    log.roll().unwrap();
    put(&log, &[("b", Some("2")), ("c", Some("1"))]);
    log.roll().unwrap();
    put(&log, &[("c", Some("2"))]);
    let old = consumed(&log);
    drop(log);
    mgr.close().unwrap();
    let after = tempfile::tempdir().unwrap();
    copy_dir(before.path(), after.path());
    let mgr = open(after.path());
    let log = mgr.partition("t-0").unwrap();
    log.clean_now().unwrap().expect("a pass");
    let new = consumed(&log);
    drop(log);
    mgr.close().unwrap();
    assert_ne!(old, new, "the pass changed the log");
    (before, after, old, new)
}

/// One crash state: the `before` directory with the cleaned segment's files
/// under `new_suffix` (`None`: absent) and the replaced segments' under
/// `old_suffix` (per base).
fn crash_state(
    before: &Path,
    after: &Path,
    new_suffix: &[(&str, Option<&str>)],
    old_suffix: &dyn Fn(i64) -> &'static str,
) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(before, dir.path());
    let part = dir.path().join("t-0");
    // An old segment's transaction index: the cleaned one has none, so a
    // completed swap must remove it with the rest of the old segment.
    fs::write(part.join(format!("{:020}.txnindex", 0)), b"").unwrap();
    let bases: Vec<i64> = super::decode::segment_bases(&part);
    let active = *bases.last().unwrap();
    for base in bases.iter().filter(|b| **b < active) {
        for kind in ["log", "index", "timeindex", "txnindex"] {
            let name = format!("{base:020}.{kind}");
            let suffix = old_suffix(*base);
            if !suffix.is_empty() && part.join(&name).exists() {
                fs::rename(part.join(&name), part.join(format!("{name}{suffix}"))).unwrap();
            }
        }
    }
    for (kind, suffix) in new_suffix {
        let name = format!("{:020}.{kind}", 0);
        if let Some(suffix) = suffix {
            fs::copy(
                after.join("t-0").join(&name),
                part.join(format!("{name}{suffix}")),
            )
            .unwrap();
        }
    }
    dir
}

/// The load of `dir`: what a consumer reads, checked whole. `forward`:
/// the swap is completed, so no file of the old first segment is left.
fn load(dir: &Path, forward: bool) -> Consumed {
    let mgr = open(dir);
    let log = mgr.partition("t-0").unwrap();
    let got = consumed(&log);
    let stream: u64 = got
        .iter()
        .map(|(_, _, v)| v.as_ref().map_or(0, |v| v.len()) as u64 + 1)
        .sum();
    assert_eq!(
        log.stream_len().unwrap(),
        stream,
        "the stream's length is its records'"
    );
    drop(log);
    mgr.close().unwrap();
    let report =
        commitfs::storage::check::check_data_dir(dir, &LogConfig::default(), None).unwrap();
    assert!(!report.has_problems(), "{:?}", report.problems);
    let left: Vec<String> = fs::read_dir(dir.join("t-0"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".swap") || n.ends_with(".cleaned") || n.ends_with(".deleted"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    let old_txn = dir.join("t-0").join(format!("{:020}.txnindex", 0)).exists();
    assert_eq!(old_txn, !forward, "the old segment's .txnindex");
    got
}

/// What a read-only mount shows, its files untouched.
fn read_only(dir: &Path) -> Consumed {
    let files = |d: &Path| -> BTreeMap<String, Vec<u8>> {
        fs::read_dir(d.join("t-0"))
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (
                    e.file_name().into_string().unwrap(),
                    fs::read(e.path()).unwrap(),
                )
            })
            .collect()
    };
    let before = files(dir);
    let opts = OpenOptions {
        read_only: true,
        ..Default::default()
    };
    let mgr = LogManager::open(dir, LogConfig::default(), opts).unwrap();
    let log = mgr.partition("t-0").unwrap();
    let got: Consumed = (log.log_start_offset()..log.log_end_offset())
        .filter_map(|o| log.read(o).ok())
        .map(|r| {
            let s = |b: Option<Vec<u8>>| b.map(|b| String::from_utf8(b).unwrap());
            (r.offset, s(r.key).unwrap_or_default(), s(r.value))
        })
        .collect();
    drop(log);
    mgr.close().unwrap();
    assert_eq!(files(dir), before, "a read-only mount changes no byte");
    got
}

#[test]
fn a_swap_stopped_at_any_step_is_rolled_back_or_completed() {
    let (before, after, old, new) = before_and_after();
    let (b, a) = (before.path(), after.path());
    let none = |_| "";
    let all_deleted = |_| ".deleted";
    let cases: Vec<Case> = vec![
        // Writing the cleaned segment.
        (
            "cleaned written",
            vec![("log", Some(".cleaned")), ("index", Some(".cleaned"))],
            &none,
            &old,
        ),
        // Its `.log` renamed `.swap`, its indexes not yet: a `.cleaned` at
        // the swap's base makes it a split's, dropped.
        (
            "one file swapped",
            vec![
                ("log", Some(".swap")),
                ("index", Some(".cleaned")),
                ("timeindex", Some(".cleaned")),
            ],
            &none,
            &old,
        ),
        (
            "all swapped",
            vec![
                ("log", Some(".swap")),
                ("index", Some(".swap")),
                ("timeindex", Some(".swap")),
            ],
            &none,
            &new,
        ),
        (
            "first old segment deleted",
            vec![
                ("log", Some(".swap")),
                ("index", Some(".swap")),
                ("timeindex", Some(".swap")),
            ],
            &|base| if base == 0 { ".deleted" } else { "" },
            &new,
        ),
        (
            "log renamed in place",
            vec![
                ("log", Some("")),
                ("index", Some(".swap")),
                ("timeindex", Some(".swap")),
            ],
            &all_deleted,
            &new,
        ),
    ];
    for (what, new_files, old_files, want) in cases {
        let dir = crash_state(b, a, &new_files, old_files);
        assert_eq!(&read_only(dir.path()), want, "{what}: read-only");
        assert_eq!(&load(dir.path(), *want == new), want, "{what}");
    }
}
