//! The consumer stream (`value\n` per record from the log start), checked
//! against a model built from the records themselves.

#[path = "support/read_stream.rs"]
mod read_stream;

use std::fs;

use commitfs::record::NewRecord;
use commitfs::storage::{LogConfig, LogManager, OpenOptions, PartitionLog};
use proptest::prelude::*;
use read_stream::read_stream;

fn config() -> LogConfig {
    let mut c = LogConfig::default();
    c.set("segment.bytes", "1048576").unwrap();
    c
}

fn value(i: usize) -> Vec<u8> {
    // Varied lengths, including empty values, so positions do not line up.
    let len = (i * 7919) % 3000;
    let mut v = format!("{i}:").into_bytes();
    v.resize(len.max(v.len()), b'a' + (i % 26) as u8);
    if i.is_multiple_of(97) {
        v.clear();
    }
    v
}

fn model(from: usize, to: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for i in from..to {
        out.extend_from_slice(&value(i));
        out.push(b'\n');
    }
    out
}

#[test]
fn stream_matches_the_records_across_segments_reopens_and_retention() {
    let tmp = tempfile::tempdir().unwrap();
    let mgr = LogManager::open(tmp.path(), config(), OpenOptions::default()).unwrap();
    let log = mgr.create_partition("t-0").unwrap();
    let mut n = 0;
    for batch in 0..400 {
        let vals: Vec<Vec<u8>> = (n..n + 1 + batch % 5).map(value).collect();
        let recs: Vec<NewRecord> = vals.iter().map(|v| NewRecord::value(v)).collect();
        log.append(&recs).unwrap();
        n += vals.len();
        if batch % 50 == 0 {
            // Growth shows at once, as `tail -f` needs.
            assert_eq!(log.stream_len().unwrap() as usize, model(0, n).len());
        }
    }
    assert!(log.segment_bases().len() >= 2, "{:?}", log.segment_bases());
    assert_eq!(read_stream(&log, 4096), model(0, n));
    assert_eq!(read_stream(&log, 1_000_000), model(0, n));
    drop(log);
    mgr.close().unwrap();

    // Sealed lengths are persisted, so a clean reopen need not scan them.
    let lengths = fs::read_to_string(tmp.path().join("t-0").join("commitfs.streamlen")).unwrap();
    assert!(!lengths.is_empty());
    let mgr = LogManager::open(tmp.path(), config(), OpenOptions::default()).unwrap();
    let log = mgr.partition("t-0").unwrap();
    assert_eq!(log.stream_len().unwrap() as usize, model(0, n).len());

    // Delete records inside the first segment: the stream starts at the new log start.
    log.delete_records_before(5).unwrap();
    assert_eq!(read_stream(&log, 65536), model(5, n));
    let second = log.segment_bases()[1];
    log.delete_records_before(second + 3).unwrap();
    assert_eq!(read_stream(&log, 65536), model(second as usize + 3, n));
    drop(log);
    mgr.close().unwrap();
}

#[test]
fn tampered_stream_lengths_are_dropped_after_an_unclean_start() {
    let tmp = tempfile::tempdir().unwrap();
    let (mgr, log) = fifty_sealed(tmp.path());
    drop(log);
    drop(mgr); // crash: the flusher stops with it, so nothing rewrites the checkpoint below
    fs::write(
        tmp.path().join("recovery-point-offset-checkpoint"),
        "0\n1\nt 0 0\n",
    )
    .unwrap();
    // A wrong cached length for a segment that recovery revisits must not be trusted.
    fs::write(tmp.path().join("t-0").join("commitfs.streamlen"), "0 5\n").unwrap();
    let mgr = LogManager::open(tmp.path(), config(), OpenOptions::default()).unwrap();
    let log = mgr.partition("t-0").unwrap();
    assert_eq!(
        log.local().recovery_point(),
        0,
        "recovery revisited the first segment"
    );
    assert_eq!(read_stream(&log, 777), model(0, 50));
    drop(log);
    mgr.close().unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Any read position and length returns exactly the model's bytes there.
    #[test]
    fn reads_at_any_position_match_the_model(
        sizes in proptest::collection::vec(0usize..5000, 1..60),
        probes in proptest::collection::vec((0.0f64..1.0, 1usize..10_000), 1..20),
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let mut c = LogConfig::default();
        c.set("index.interval.bytes", "100").unwrap();
        let mgr = LogManager::open(tmp.path(), c, OpenOptions::default()).unwrap();
        let log = mgr.create_partition("t-0").unwrap();
        let mut expect = Vec::new();
        for (i, s) in sizes.iter().enumerate() {
            let v = vec![b'0' + (i % 10) as u8; *s];
            log.append(&[NewRecord::value(&v)]).unwrap();
            expect.extend_from_slice(&v);
            expect.push(b'\n');
            if i % 7 == 3 {
                log.roll().unwrap();
            }
        }
        prop_assert_eq!(log.stream_len().unwrap() as usize, expect.len());
        for (frac, len) in probes {
            let pos = ((expect.len() as f64) * frac) as usize;
            let mut buf = vec![0u8; len];
            let n = log.read_stream(pos as u64, &mut buf).unwrap();
            let want = &expect[pos..(pos + len).min(expect.len())];
            prop_assert_eq!(&buf[..n], want);
        }
        drop(log);
        mgr.close().unwrap();
    }
}

/// `t-0` in a new data dir at `dir`: records 0..50 in a sealed segment,
/// their stream as the model says.
fn fifty_sealed(dir: &std::path::Path) -> (LogManager, std::sync::Arc<PartitionLog>) {
    let mgr = LogManager::open(dir, config(), OpenOptions::default()).unwrap();
    let log = mgr.create_partition("t-0").unwrap();
    let vals: Vec<Vec<u8>> = (0..50).map(value).collect();
    let recs: Vec<NewRecord> = vals.iter().map(|v| NewRecord::value(v)).collect();
    log.append(&recs).unwrap();
    log.roll().unwrap();
    assert_eq!(read_stream(&log, 777), model(0, 50));
    (mgr, log)
}

fn fill_2000(dir: &std::path::Path) -> LogManager {
    let mgr = LogManager::open(dir, config(), OpenOptions::default()).unwrap();
    let log = mgr.create_partition("t-0").unwrap();
    let vals: Vec<Vec<u8>> = (0..2000).map(value).collect();
    for chunk in vals.chunks(10) {
        let recs: Vec<NewRecord> = chunk.iter().map(|v| NewRecord::value(v)).collect();
        log.append(&recs).unwrap();
    }
    assert!(log.segment_bases().len() > 1);
    mgr
}

#[test]
fn appended_bytes_are_counted_so_stat_needs_no_scan() {
    let tmp = tempfile::tempdir().unwrap();
    let mgr = fill_2000(tmp.path());
    let log = mgr.partition("t-0").unwrap();
    // Empty the first segment's file behind the log's back: a length computed
    // by scanning would now come out short; the append-time tally does not.
    fs::OpenOptions::new()
        .write(true)
        .open(tmp.path().join("t-0").join("00000000000000000000.log"))
        .unwrap()
        .set_len(0)
        .unwrap();
    assert_eq!(log.stream_len().unwrap() as usize, model(0, 2000).len());
    let saved = fs::read_to_string(tmp.path().join("t-0").join("commitfs.streamlen")).unwrap();
    assert_eq!(
        saved.lines().count(),
        log.segment_bases().len() - 1,
        "{saved}"
    );
}

#[test]
fn a_clean_reopen_keeps_counting_from_the_saved_length() {
    let tmp = tempfile::tempdir().unwrap();
    fill_2000(tmp.path()).close().unwrap();
    let mgr = LogManager::open(tmp.path(), config(), OpenOptions::default()).unwrap();
    let log = mgr.partition("t-0").unwrap();
    log.append(&[NewRecord::value(b"tail")]).unwrap();
    let mut expect = model(0, 2000);
    expect.extend_from_slice(b"tail\n");
    assert_eq!(log.stream_len().unwrap() as usize, expect.len());
    assert_eq!(read_stream(&log, 100_000), expect);
    drop(log);
    mgr.close().unwrap();
}

/// A length saved without the size it was counted at (the format before
/// sizes were kept for `log`; the wrong length of a cleaned segment that
/// the tally once saved was of this form) is not trusted at a clean load:
/// it is counted again, and saved with its size.
#[test]
fn a_saved_length_without_its_size_is_counted_again() {
    let tmp = tempfile::tempdir().unwrap();
    let (mgr, log) = fifty_sealed(tmp.path());
    drop(log);
    mgr.close().unwrap();
    let lengths = tmp.path().join("t-0").join("commitfs.streamlen");
    let saved = fs::read_to_string(&lengths).unwrap();
    assert!(saved.starts_with("0 "), "{saved}");
    fs::write(&lengths, "0 37895\n").unwrap();
    let mgr = LogManager::open(tmp.path(), config(), OpenOptions::default()).unwrap();
    let log = mgr.partition("t-0").unwrap();
    assert_eq!(log.stream_len().unwrap() as usize, model(0, 50).len());
    assert_eq!(read_stream(&log, 777), model(0, 50));
    drop(log);
    mgr.close().unwrap();
    assert_eq!(fs::read_to_string(&lengths).unwrap(), saved);
}
