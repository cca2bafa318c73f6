//! `commitfs check`: every kind of problem it reports, and `--repair`.

#[path = "support/bounded.rs"]
mod bounded;

use std::fs;
use std::path::Path;
use std::process::Command;

use commitfs::record::NewRecord;
use commitfs::storage::check::check_data_dir;
use commitfs::storage::{LogConfig, LogManager, OpenOptions};

fn config() -> LogConfig {
    let mut c = LogConfig::default();
    c.set("segment.bytes", "1048576").unwrap();
    c.set("index.interval.bytes", "1000").unwrap();
    c
}

/// A cleanly closed data dir with partition t-0 of three segments.
fn make_data_dir(dir: &Path) {
    let mgr = LogManager::open(dir, config(), OpenOptions::default()).unwrap();
    let log = mgr.create_partition("t-0").unwrap();
    let v = vec![b'v'; 1500];
    for _ in 0..150 {
        let recs: Vec<NewRecord> = (0..10).map(|_| NewRecord::value(&v)).collect();
        log.append(&recs).unwrap();
    }
    assert_eq!(log.segment_bases().len(), 3);
    drop(log);
    mgr.close().unwrap();
}

fn seg(dir: &Path, base: i64, suffix: &str) -> std::path::PathBuf {
    dir.join("t-0").join(format!("{base:020}.{suffix}"))
}

fn check(dir: &Path, extra: &[&str]) -> (i32, String) {
    let out = bounded::run(
        Command::new(env!("CARGO_BIN_EXE_commitfs"))
            .arg("check")
            .arg(dir)
            .args(["-o", "segment.bytes=1048576,index.interval.bytes=1000"])
            .args(extra),
        &format!("commitfs check {extra:?}"),
    );
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap(), text)
}

fn first_segment_bases(dir: &Path) -> Vec<i64> {
    let mut v: Vec<i64> = fs::read_dir(dir.join("t-0"))
        .unwrap()
        .filter_map(|e| {
            let n = e.unwrap().file_name().into_string().unwrap();
            n.strip_suffix(".log").map(|s| s.parse().unwrap())
        })
        .collect();
    v.sort();
    v
}

#[test]
fn a_clean_data_dir_checks_clean() {
    let tmp = tempfile::tempdir().unwrap();
    make_data_dir(tmp.path());
    let (code, out) = check(tmp.path(), &[]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("Checked 1 partitions, 3 segments, 150 batches: 0 problems"),
        "{out}"
    );
}

#[test]
fn crc_damage_is_reported_with_file_and_position_and_repaired() {
    let tmp = tempfile::tempdir().unwrap();
    make_data_dir(tmp.path());
    let bases = first_segment_bases(tmp.path());
    let p = seg(tmp.path(), bases[1], "log");
    let mut bytes = fs::read(&p).unwrap();
    let batch = 15_151usize; // 10 records of 1500 bytes
    bytes[batch * 2 + 500] ^= 0x01;
    fs::write(&p, &bytes).unwrap();
    let (code, out) = check(tmp.path(), &[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!(
            "{}: position {}: CRC mismatch",
            p.display(),
            batch * 2
        )),
        "{out}"
    );
    // Without --repair nothing changed.
    assert_eq!(fs::read(&p).unwrap(), bytes);

    let (code, out) = check(tmp.path(), &["--repair"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains(&format!("truncated {}", p.display())), "{out}");
    assert!(out.contains("deleted"), "the later segment goes: {out}");
    assert!(out.contains("After repair: clean"), "{out}");
    assert_eq!(fs::metadata(&p).unwrap().len(), (batch * 2) as u64);
    let (code, out) = check(tmp.path(), &[]);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn index_problems_are_reported() {
    let tmp = tempfile::tempdir().unwrap();
    make_data_dir(tmp.path());
    let idx = seg(tmp.path(), 0, "index");
    let good = fs::read(&idx).unwrap();

    // Not a whole number of entries.
    fs::write(&idx, &good[..good.len() - 3]).unwrap();
    let r = check_data_dir(tmp.path(), &config(), None).unwrap();
    assert!(
        r.problems
            .iter()
            .any(|p| p.what.contains("not a whole number")),
        "{:?}",
        r.problems
    );

    // An entry pointing past the batches.
    let mut bad = good.clone();
    bad[4..8].copy_from_slice(&123u32.to_be_bytes());
    fs::write(&idx, &bad).unwrap();
    let r = check_data_dir(tmp.path(), &config(), None).unwrap();
    assert!(
        r.problems
            .iter()
            .any(|p| p.what.contains("does not point at a batch")),
        "{:?}",
        r.problems
    );

    // Missing.
    fs::remove_file(&idx).unwrap();
    let r = check_data_dir(tmp.path(), &config(), None).unwrap();
    assert!(r.problems.iter().any(|p| p.what.contains("missing")));

    // Repair rebuilds it byte-identical.
    let (code, out) = check(tmp.path(), &["--repair"]);
    assert_eq!(code, 1, "{out}");
    assert_eq!(fs::read(&idx).unwrap(), good);
}

#[test]
fn time_index_and_checkpoint_problems_are_reported() {
    let tmp = tempfile::tempdir().unwrap();
    make_data_dir(tmp.path());
    let tix = seg(tmp.path(), 0, "timeindex");
    let good = fs::read(&tix).unwrap();
    assert!(good.len() >= 12);
    let mut bad = good.clone();
    bad[0..8].copy_from_slice(&i64::MAX.to_be_bytes());
    fs::write(&tix, &bad).unwrap();
    fs::write(
        tmp.path().join("recovery-point-offset-checkpoint"),
        "0\n1\nt 0 99999\n",
    )
    .unwrap();
    fs::write(tmp.path().join("log-start-offset-checkpoint"), "garbage").unwrap();
    let r = check_data_dir(tmp.path(), &config(), None).unwrap();
    let all: Vec<String> = r.problems.iter().map(|p| p.to_string()).collect();
    assert!(
        all.iter()
            .any(|p| p.contains("timeindex") && p.contains("does not")),
        "{all:?}"
    );
    assert!(
        all.iter().any(|p| p.contains("past the log end offset")),
        "{all:?}"
    );
    assert!(
        all.iter()
            .any(|p| p.contains("not a valid offset checkpoint")),
        "{all:?}"
    );
}

#[test]
fn offsets_that_go_backwards_and_misnamed_segments_are_reported() {
    let tmp = tempfile::tempdir().unwrap();
    make_data_dir(tmp.path());
    let bases = first_segment_bases(tmp.path());
    // Rename the last segment to the wrong base offset.
    let last = bases[2];
    for s in ["log", "index", "timeindex"] {
        fs::rename(seg(tmp.path(), last, s), seg(tmp.path(), last + 5, s)).unwrap();
    }
    let r = check_data_dir(tmp.path(), &config(), None).unwrap();
    let all: Vec<String> = r.problems.iter().map(|p| p.to_string()).collect();
    assert!(
        all.iter().any(|p| p.contains("but the file is named for")),
        "{all:?}"
    );
    assert!(!all.iter().any(|p| p.contains("goes backwards")), "{all:?}");

    // A valid batch with old offsets appended to the end of the middle segment.
    let first = fs::read(seg(tmp.path(), 0, "log")).unwrap();
    let mid = seg(tmp.path(), bases[1], "log");
    let mut bytes = fs::read(&mid).unwrap();
    let end = bytes.len();
    bytes.extend_from_slice(&first[..15_151]);
    fs::write(&mid, &bytes).unwrap();
    let r = check_data_dir(tmp.path(), &config(), None).unwrap();
    assert!(
        r.problems.iter().any(|p| p.file == mid
            && p.position == end as u64
            && p.what.contains("goes backwards")),
        "{:?}",
        r.problems
    );
}

#[test]
fn a_mounted_data_dir_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let mgr = LogManager::open(tmp.path(), config(), OpenOptions::default()).unwrap();
    let (code, out) = check(tmp.path(), &[]);
    assert_eq!(code, 2);
    assert!(out.contains("in use"), "{out}");
    mgr.close().unwrap();
}

/// The library's repair takes the data-dir lock before it changes anything:
/// with the directory open (a mount) it is refused and no file is touched.
#[test]
fn repair_of_an_open_data_dir_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    make_data_dir(tmp.path());
    let idx = seg(tmp.path(), 0, "index");
    let mut bad = fs::read(&idx).unwrap();
    bad[4..8].copy_from_slice(&123u32.to_be_bytes());
    fs::write(&idx, &bad).unwrap();
    let report = check_data_dir(tmp.path(), &config(), None).unwrap();
    assert!(!report.is_clean());
    let rp = tmp.path().join("recovery-point-offset-checkpoint");
    let rp_before = fs::read(&rp).unwrap();
    // The mount: the index of the sealed segment loads lazily, so the open
    // leaves it as it is.
    let mgr = LogManager::open(tmp.path(), config(), OpenOptions::default()).unwrap();
    let err =
        commitfs::storage::check::repair_data_dir(tmp.path(), &config(), &report).unwrap_err();
    assert!(
        matches!(err, commitfs::storage::StorageError::Locked(_)),
        "{err}"
    );
    assert_eq!(fs::read(&idx).unwrap(), bad, "the index was not deleted");
    assert_eq!(
        fs::read(&rp).unwrap(),
        rp_before,
        "the checkpoint was not rewritten"
    );
    mgr.close().unwrap();
    assert!(tmp.path().join(".kafka_cleanshutdown").exists());
}
