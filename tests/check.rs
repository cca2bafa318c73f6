//! `commitfs check`: every kind of problem it reports, and `--repair`.

#[path = "support/batch.rs"]
mod batch;
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
fn data_dir() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let mgr = LogManager::open(tmp.path(), config(), OpenOptions::default()).unwrap();
    let log = mgr.create_partition("t-0").unwrap();
    let v = vec![b'v'; 1500];
    for _ in 0..150 {
        let recs: Vec<NewRecord> = (0..10).map(|_| NewRecord::value(&v)).collect();
        log.append(&recs).unwrap();
    }
    assert_eq!(log.segment_bases().len(), 3);
    drop(log);
    mgr.close().unwrap();
    tmp
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
    let tmp = data_dir();
    let (code, out) = check(tmp.path(), &[]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("Checked 1 partitions, 3 segments, 150 batches: 0 problems"),
        "{out}"
    );
}

#[test]
fn crc_damage_is_reported_with_file_and_position_and_repaired() {
    let tmp = data_dir();
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
    let tmp = data_dir();
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
    let tmp = data_dir();
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
    let tmp = data_dir();
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
    let tmp = data_dir();
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

// ---- Kafka's load rules -----------------------------------------------------
//
// What Kafka's loader does with a segment's index files, from its source
// (`LogLoader.loadSegmentFiles` and `recoverLog`, `LogSegment.sanityCheck`,
// `AbstractIndex`): after a clean shutdown, and below the recovery point
// after an unclean one, both indexes are opened as they are (only a missing
// offset index makes it rebuild them; a missing time index is created
// empty); from the segment holding the recovery point on, after an unclean
// one, they are rebuilt from the `.log`. Findings Kafka would act on are
// problems (exit 1); what it loads as it is and reads right, notes (exit 0).

/// Each problem's position and what it says.
fn found(r: &commitfs::storage::check::CheckReport) -> Vec<(u64, &str)> {
    (r.problems.iter())
        .map(|p| (p.position, p.what.as_str()))
        .collect()
}

fn notes_about(r: &commitfs::storage::check::CheckReport, file: &Path) -> Vec<String> {
    r.notes
        .iter()
        .filter(|n| n.file == file)
        .map(|n| n.what.clone())
        .collect()
}

#[test]
fn a_clean_data_dir_has_neither_problems_nor_notes() {
    let tmp = data_dir();
    let r = check_data_dir(tmp.path(), &config(), None).unwrap();
    assert!(r.is_clean(), "{:?} {:?}", r.problems, r.notes);
    let (code, out) = check(tmp.path(), &[]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(": 0 problems, 0 notes"), "{out}");
}

/// An append's index entries and max timestamps come from the headers
/// parsed (a Produce's) or encoded (the tree's) once on its way down, never
/// read back from its bytes: after Produces of two batches of scattered
/// timestamps, and the tree's appends, under CreateTime and LogAppendTime,
/// across rolls, every index is what a rebuild from the `.log` gives, and
/// the largest timestamp is the one the batches were stored with.
#[test]
fn indexes_from_parsed_headers_match_the_log() {
    for timestamp_type in ["CreateTime", "LogAppendTime"] {
        let tmp = tempfile::tempdir().unwrap();
        let mut c = config();
        c.set("message.timestamp.type", timestamp_type).unwrap();
        let mgr = LogManager::open(tmp.path(), c.clone(), OpenOptions::default()).unwrap();
        let log = mgr.create_partition("t-0").unwrap();
        let v = vec![b'v'; 3000];
        let recs: Vec<NewRecord> = (0..4).map(|_| NewRecord::value(&v)).collect();
        let (created, mut largest) = (1_700_000_000_000i64, 0);
        let before = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        for i in 0..200i64 {
            if i % 3 == 0 {
                log.append(&recs).unwrap();
                continue;
            }
            let ts = created + (i * 7919 % 61) * 1000;
            largest = largest.max(ts);
            let mut buf = Vec::new();
            commitfs::record::encode_batch(&mut buf, 0, ts, &recs);
            commitfs::record::encode_batch(&mut buf, 0, ts - 5000, &recs[..1]);
            log.append_produced(&buf).unwrap();
        }
        assert!(log.segment_bases().len() > 2, "{timestamp_type}");
        let max = log.local().max_timestamp().unwrap().unwrap();
        if timestamp_type == "CreateTime" {
            // The tree's batches carry the append's time, after the rest.
            assert!(max >= before, "{timestamp_type}: {max}");
            assert!(log.offset_for_timestamp(largest).unwrap().is_some());
        } else {
            assert!(max >= before && max > largest, "{timestamp_type}: {max}");
        }
        drop(log);
        mgr.close().unwrap();
        let r = check_data_dir(tmp.path(), &c, None).unwrap();
        assert!(
            r.is_clean(),
            "{timestamp_type}: {:?} {:?}",
            r.problems,
            r.notes
        );
    }
}

/// An empty offset index is one Kafka loads and looks up through (from the
/// segment's start); an empty time index likewise. Both are notes, for the
/// sealed segments and the active one alike, after a clean shutdown.
#[test]
fn empty_indexes_after_a_clean_shutdown_are_notes_for_every_segment() {
    let tmp = data_dir();
    let bases = first_segment_bases(tmp.path());
    for &b in &[bases[0], bases[2]] {
        fs::write(seg(tmp.path(), b, "index"), b"").unwrap();
        fs::write(seg(tmp.path(), b, "timeindex"), b"").unwrap();
    }
    let r = check_data_dir(tmp.path(), &config(), None).unwrap();
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    for &b in &[bases[0], bases[2]] {
        let idx = notes_about(&r, &seg(tmp.path(), b, "index"));
        assert_eq!(idx.len(), 1, "{idx:?}");
        assert!(
            idx[0].starts_with("0 entries where the index rule"),
            "{idx:?}"
        );
        let tix = notes_about(&r, &seg(tmp.path(), b, "timeindex"));
        assert_eq!(tix.len(), 1, "{tix:?}");
        assert!(tix[0].starts_with("no entries, where"), "{tix:?}");
    }
    assert_eq!(r.notes.len(), 4, "{:?}", r.notes);
    let (code, out) = check(tmp.path(), &["--repair"]);
    assert_eq!(code, 0, "nothing to repair: {out}");
    assert!(out.contains(": 0 problems, 4 notes"), "{out}");
    assert!(!out.contains("Repair:"), "{out}");
    // And it is read as Kafka would: every record through the empty indexes.
    let mgr = LogManager::open(tmp.path(), config(), OpenOptions::default()).unwrap();
    let log = mgr.partition("t-0").unwrap();
    for o in [0, 505, 1499] {
        assert_eq!(log.read(o).unwrap().value.unwrap().len(), 1500);
    }
    drop(log);
    mgr.close().unwrap();
}

#[test]
fn a_missing_offset_index_is_a_problem_a_missing_time_index_a_note() {
    let tmp = data_dir();
    fs::remove_file(seg(tmp.path(), 0, "index")).unwrap();
    let r = check_data_dir(tmp.path(), &config(), None).unwrap();
    assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
    assert!(
        r.problems[0].what.contains("Kafka rebuilds"),
        "{:?}",
        r.problems
    );
    assert!(r.notes.is_empty(), "{:?}", r.notes);

    let tmp = data_dir();
    let tix = seg(tmp.path(), 0, "timeindex");
    fs::remove_file(&tix).unwrap();
    let r = check_data_dir(tmp.path(), &config(), None).unwrap();
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    assert_eq!(
        notes_about(&r, &tix),
        vec!["time index file is missing: Kafka creates it empty at load".to_string()]
    );
}

/// A data dir as a crash leaves it: no marker, the recovery point inside
/// the middle segment. Kafka rebuilds the indexes of the middle and last
/// segments (the one holding the recovery point, and after), so what their
/// indexes hold is a note; the first segment's are loaded as they are.
#[test]
fn after_an_unclean_shutdown_only_segments_below_the_recovery_point_keep_their_indexes() {
    let tmp = data_dir();
    let bases = first_segment_bases(tmp.path());
    fs::remove_file(tmp.path().join(".kafka_cleanshutdown")).unwrap();
    fs::write(
        tmp.path().join("recovery-point-offset-checkpoint"),
        format!("0\n1\nt 0 {}\n", bases[1] + 5),
    )
    .unwrap();
    let pointing_nowhere = |b: i64| {
        let p = seg(tmp.path(), b, "index");
        let mut bytes = fs::read(&p).unwrap();
        bytes[4..8].copy_from_slice(&123u32.to_be_bytes());
        fs::write(&p, bytes).unwrap();
        p
    };
    let (first, middle, last) = (
        pointing_nowhere(bases[0]),
        pointing_nowhere(bases[1]),
        pointing_nowhere(bases[2]),
    );
    // The active segment as a crash leaves it: its index still preallocated.
    let mut active = fs::read(&last).unwrap();
    active.extend_from_slice(&[0; 800]);
    fs::write(&last, active).unwrap();
    let r = check_data_dir(tmp.path(), &config(), None).unwrap();
    let problems: Vec<&Path> = r.problems.iter().map(|p| p.file.as_path()).collect();
    assert!(problems.iter().all(|f| *f == first), "{:?}", r.problems);
    assert!(!problems.is_empty());
    for rebuilt in [&middle, &last] {
        let notes = notes_about(&r, rebuilt);
        assert!(!notes.is_empty(), "{:?}", r.notes);
        assert!(
            notes.iter().all(|n| n.contains("rebuilt at load")),
            "{notes:?}"
        );
    }
    // The preallocated tail of the active index is what a crash leaves: not even a note.
    assert!(
        !r.notes.iter().any(|n| n.what.contains("zero-filled")),
        "{:?}",
        r.notes
    );
}

/// After a clean shutdown the active segment's index is trimmed; one still
/// preallocated (zero-filled past its entries) is read by Kafka as that
/// many entries.
#[test]
fn an_untrimmed_index_after_a_clean_shutdown_is_a_problem() {
    let tmp = data_dir();
    let bases = first_segment_bases(tmp.path());
    let idx = seg(tmp.path(), bases[2], "index");
    let mut bytes = fs::read(&idx).unwrap();
    let entries = bytes.len() / 8;
    bytes.extend_from_slice(&[0; 80]);
    fs::write(&idx, bytes).unwrap();
    let r = check_data_dir(tmp.path(), &config(), None).unwrap();
    assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
    assert_eq!(r.problems[0].file, idx);
    assert_eq!(r.problems[0].position, (entries * 8) as u64);
    assert!(
        r.problems[0].what.starts_with("10 zero-filled entries"),
        "{:?}",
        r.problems
    );
}

/// Kafka's producer snapshot of a real partition (Kafka 3.8, from
/// tests/fixtures/kafka/codecrafters-kafka-tester/foo-0): version 1 and a
/// CRC-32C that Kafka computed.
fn kafka_snapshot() -> Vec<u8> {
    let p = [
        env!("CARGO_MANIFEST_DIR"),
        "tests/fixtures/kafka/codecrafters-kafka-tester/foo-0/00000000000000000003.snapshot",
    ]
    .iter()
    .collect::<std::path::PathBuf>();
    fs::read(p).unwrap()
}

#[test]
fn a_producer_snapshot_with_a_bad_crc_or_version_is_a_problem_repair_removes() {
    let tmp = data_dir();
    let snap = seg(tmp.path(), 0, "snapshot");
    let good = kafka_snapshot();
    fs::write(&snap, &good).unwrap();
    let r = check_data_dir(tmp.path(), &config(), None).unwrap();
    assert!(r.is_clean(), "Kafka's own snapshot: {:?}", r.problems);

    // A producer id changed under the CRC (bytes 10.. are the first entry).
    let mut bad_crc = good.clone();
    bad_crc[17] ^= 1;
    fs::write(&snap, &bad_crc).unwrap();
    let r = check_data_dir(tmp.path(), &config(), None).unwrap();
    assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
    assert_eq!(r.problems[0].file, snap);
    let stored = u32::from_be_bytes(good[2..6].try_into().unwrap());
    assert!(
        r.problems[0].what.contains(&format!(
            "Snapshot is corrupt (CRC is no longer valid). Stored crc: {stored}. Computed crc: "
        )),
        "{:?}",
        r.problems
    );

    let mut version_2 = good.clone();
    version_2[1] = 2;
    fs::write(&snap, &version_2).unwrap();
    let (code, out) = check(tmp.path(), &["--repair"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("Snapshot contained an unknown file version 2"),
        "{out}"
    );
    assert!(
        out.contains(&format!("Repair: removed {}", snap.display())),
        "{out}"
    );
    assert!(out.contains("After repair: clean"), "{out}");
    assert!(!snap.exists());
    // Nothing else was touched: no recovery was needed.
    assert!(tmp.path().join(".kafka_cleanshutdown").exists());
}

/// One `.txnindex` entry as Kafka's `AbortedTxn` lays it out: version
/// (int16), producer id, first offset, last offset, last stable offset.
/// `AbortedTxn.version()` reads the first byte only (`buffer.get(0)`), so
/// the version given here is that byte.
fn aborted_txn(version: u8, pid: i64, first: i64, last: i64, lso: i64) -> Vec<u8> {
    let mut b = vec![version, 0];
    for v in [pid, first, last, lso] {
        b.extend_from_slice(&v.to_be_bytes());
    }
    assert_eq!(b.len(), 34);
    b
}

#[test]
fn a_txnindex_of_an_unknown_version_or_below_its_segment_is_a_problem() {
    let tmp = data_dir();
    let bases = first_segment_bases(tmp.path());
    let b = bases[1];
    let txn = seg(tmp.path(), b, "txnindex");
    let good = aborted_txn(0, 7, b + 1, b + 3, b + 4);
    fs::write(&txn, &good).unwrap();
    let r = check_data_dir(tmp.path(), &config(), None).unwrap();
    assert!(r.is_clean(), "{:?} {:?}", r.problems, r.notes);

    // A partial entry at the end is not read: a note.
    let mut partial = good.clone();
    partial.extend_from_slice(&[0; 10]);
    fs::write(&txn, &partial).unwrap();
    let r = check_data_dir(tmp.path(), &config(), None).unwrap();
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    assert_eq!(notes_about(&r, &txn).len(), 1, "{:?}", r.notes);
    assert_eq!(r.notes[0].position, 34);

    // An aborted transaction that ends below the segment, then one of version 1.
    let mut bad = good.clone();
    bad.extend(aborted_txn(0, 8, b - 10, b - 5, b - 4));
    bad.extend(aborted_txn(1, 9, b + 5, b + 6, b + 7));
    fs::write(&txn, &bad).unwrap();
    let r = check_data_dir(tmp.path(), &config(), None).unwrap();
    let found = found(&r);
    assert_eq!(found.len(), 2, "{found:?}");
    let abs = std::path::absolute(&txn).unwrap();
    assert_eq!(found[0].0, 68);
    assert!(
        found[0].1.starts_with(&format!(
            "Unexpected aborted transaction version 1 in transaction index {}, current version is 0",
            abs.display()
        )),
        "{found:?}"
    );
    assert_eq!(found[1].0, 34);
    assert!(
        found[1].1.contains("below the segment's base offset"),
        "{found:?}"
    );
}

/// What Kafka's writer never leaves in a `.txnindex` and Kafka reads as it
/// is, serving fetches through it: a problem, unless the load rebuilds the
/// segment's indexes anyway (then a note).
#[test]
fn txnindex_entries_kafka_never_writes_are_problems_unless_rebuilt() {
    let tmp = data_dir();
    let bases = first_segment_bases(tmp.path());
    let b = bases[1];
    let txn = seg(tmp.path(), b, "txnindex");
    let mut bytes = aborted_txn(0, 7, b + 1, b + 3, b + 4);
    bytes.extend(aborted_txn(0, 8, b + 9, b + 5, b + 10)); // ends before it begins
    bytes.extend(aborted_txn(0, 9, b + 2, b + 4, b + 11)); // does not grow
    bytes.extend(aborted_txn(0, 10, bases[2], bases[2], bases[2])); // past the segment
    fs::write(&txn, &bytes).unwrap();
    let r = check_data_dir(tmp.path(), &config(), None).unwrap();
    let found = found(&r);
    assert_eq!(found.len(), 3, "{found:?}");
    assert!(r.problems.iter().all(|p| p.file == txn), "{found:?}");
    assert_eq!(found[0].0, 34);
    assert!(found[0].1.contains("before it begins at"), "{found:?}");
    assert_eq!(found[1].0, 68);
    assert!(
        found[1].1.contains("not after the entry before it"),
        "{found:?}"
    );
    assert_eq!(found[2].0, 102);
    assert!(
        found[2].1.contains("past the segment's batches"),
        "{found:?}"
    );
    assert!(r.notes.is_empty(), "{:?}", r.notes);

    // After a crash with the recovery point at 0 every segment is
    // recovered, its transaction index rebuilt: the same findings are notes.
    fs::remove_file(tmp.path().join(".kafka_cleanshutdown")).unwrap();
    fs::write(
        tmp.path().join("recovery-point-offset-checkpoint"),
        "0\n1\nt 0 0\n",
    )
    .unwrap();
    let r = check_data_dir(tmp.path(), &config(), None).unwrap();
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    let notes = notes_about(&r, &txn);
    assert_eq!(notes.len(), 3, "{notes:?}");
    assert!(
        notes.iter().all(|n| n.contains("rebuilt at load")),
        "{notes:?}"
    );
}

/// A partial entry at the end of the active segment's `.txnindex`: Kafka
/// appends the next aborted transaction after it, out of step with every
/// entry it reads from there on.
#[test]
fn a_partial_entry_at_the_end_of_the_active_txnindex_is_a_problem() {
    let tmp = data_dir();
    let bases = first_segment_bases(tmp.path());
    let b = bases[2];
    let txn = seg(tmp.path(), b, "txnindex");
    let mut bytes = aborted_txn(0, 7, b + 1, b + 3, b + 4);
    bytes.extend_from_slice(&[0; 10]);
    fs::write(&txn, &bytes).unwrap();
    let r = check_data_dir(tmp.path(), &config(), None).unwrap();
    assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
    assert_eq!(r.problems[0].file, txn);
    assert_eq!(r.problems[0].position, 34);
    assert!(
        r.problems[0]
            .what
            .starts_with("size 44 is not a whole number of 34-byte entries: Kafka appends"),
        "{:?}",
        r.problems
    );
    assert!(r.notes.is_empty(), "{:?}", r.notes);
}

/// Kafka's indexes read a relative offset as a Java int
/// (`AbstractIndex.toRelative`): a batch whose last offset is more than
/// `Integer.MAX_VALUE` past its segment's base cannot be indexed there.
#[test]
fn a_relative_offset_past_a_java_int_is_a_problem() {
    let what = "offset does not fit a relative offset";
    for (past_base, fits) in [(i32::MAX as i64, true), (i32::MAX as i64 + 1, false)] {
        let tmp = data_dir();
        let active = *first_segment_bases(tmp.path()).last().unwrap();
        let mut batch = Vec::new();
        commitfs::record::encode_batch(
            &mut batch,
            active + past_base,
            1_700_000_000_000,
            &[NewRecord::value(b"far")],
        );
        let log = seg(tmp.path(), active, "log");
        let mut bytes = fs::read(&log).unwrap();
        bytes.extend_from_slice(&batch);
        fs::write(&log, bytes).unwrap();
        let r = check_data_dir(tmp.path(), &config(), None).unwrap();
        let found = r.problems.iter().any(|p| p.file == log && p.what == what);
        assert_eq!(found, !fits, "{past_base}: {:?}", r.problems);
    }
}

/// A saved stream length the load would take (saved at the segment's size)
/// but the segment's records do not make is a problem, named with its file
/// and line; `--repair` removes the file, and the next mount counts again.
/// A length the load would not take is a note.
#[test]
fn wrong_saved_stream_lengths_are_problems_and_repaired() {
    let tmp = data_dir();
    let lengths = tmp.path().join("t-0").join("commitfs.streamlen");
    let saved = fs::read_to_string(&lengths).unwrap();
    assert_eq!(saved.lines().count(), 3, "{saved}");
    let (code, out) = check(tmp.path(), &[]);
    assert_eq!(code, 0, "the saved lengths are right: {out}");

    // The first segment's length off by one; the second saved at another size.
    let mut lines: Vec<Vec<String>> = saved
        .lines()
        .map(|l| l.split(' ').map(str::to_string).collect())
        .collect();
    let right: u64 = lines[0][1].parse().unwrap();
    lines[0][1] = (right + 1).to_string();
    lines[1][2] = "7".to_string();
    // The third counted on another file of its size (a replaced segment).
    lines[2][3] = "1".to_string();
    let text: String = lines.iter().map(|l| l.join(" ") + "\n").collect();
    fs::write(&lengths, &text).unwrap();
    let (code, out) = check(tmp.path(), &[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!(
            "{}: position 1: segment 0's saved length is {} bytes, its records make {right}",
            lengths.display(),
            right + 1
        )),
        "{out}"
    );
    assert!(out.contains("counted at 7 bytes"), "{out}");
    assert!(out.contains("counted on another file (inode 1)"), "{out}");
    assert!(out.contains("1 problems"), "{out}");

    let (code, out) = check(tmp.path(), &["--repair"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("removed {}", lengths.display())),
        "{out}"
    );
    assert!(out.contains("After repair: clean"), "{out}");
    assert!(!lengths.exists());
    let mgr = LogManager::open(tmp.path(), config(), OpenOptions::default()).unwrap();
    let log = mgr.partition("t-0").unwrap();
    assert_eq!(log.stream_len().unwrap(), 1500 * 10 * 150 + 10 * 150);
    drop(log);
    mgr.close().unwrap();
    let (code, out) = check(tmp.path(), &[]);
    assert_eq!(code, 0, "{out}");
}

/// One transactional batch of producer 7 holding `value`, encoded by kafka-protocol.
fn transactional(value: &str) -> bytes::BytesMut {
    let value = Some(value.to_string().into_bytes().into());
    batch::encode(
        (7, 0),
        Some(0),
        true,
        1_700_000_000_000,
        [(None, value)],
        kafka_protocol::records::Compression::None,
    )
}

/// The same for `commitfs.committedlen`, on a partition with an aborted
/// transaction: its records are not in `committed`'s length (the check
/// reads the `.txnindex`), though they are in `log`'s.
#[test]
fn wrong_saved_committed_lengths_are_problems() {
    let tmp = tempfile::tempdir().unwrap();
    let mgr = LogManager::open(tmp.path(), config(), OpenOptions::default()).unwrap();
    let log = mgr.create_partition("t-0").unwrap();
    log.append(&[NewRecord::value(b"plain")]).unwrap();
    log.append_transactional(&transactional("aborted")).unwrap();
    log.append_end_txn_marker(7, 0, 0, false).unwrap();
    log.append(&[NewRecord::value(b"after")]).unwrap();
    log.roll().unwrap();
    assert_eq!(log.committed_len().unwrap(), 12);
    assert_eq!(log.stream_len().unwrap(), 20);
    drop(log);
    mgr.close().unwrap();
    let lengths = tmp.path().join("t-0").join("commitfs.committedlen");
    let saved = fs::read_to_string(&lengths).unwrap();
    assert!(saved.starts_with("0 12 "), "{saved}");
    let (code, out) = check(tmp.path(), &[]);
    assert_eq!(code, 0, "{out}");
    fs::write(&lengths, saved.replacen("0 12 ", "0 20 ", 1)).unwrap();
    let (code, out) = check(tmp.path(), &[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("segment 0's saved length is 20 bytes, its records make 12: `committed`"),
        "{out}"
    );
}
