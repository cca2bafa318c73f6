//! The storage library on real temp directories: Kafka's roll arithmetic and
//! index rule, recovery, index rebuilds, retention, checkpoints.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use commitfs::record::{BatchIter, NewRecord};
use commitfs::storage::{LogConfig, LogManager, OpenOptions, PartitionLog, StorageError};
use proptest::prelude::*;

fn open(dir: &Path, config: &LogConfig) -> LogManager {
    LogManager::open(dir, config.clone(), OpenOptions::default()).unwrap()
}

fn small_segments() -> LogConfig {
    let mut c = LogConfig::default();
    c.set("segment.bytes", "1048576").unwrap();
    c
}

fn value(i: usize, len: usize) -> Vec<u8> {
    let mut v = format!("{i:08}-").into_bytes();
    v.resize(len, b'a' + (i % 26) as u8);
    v
}

/// Appends `batches` batches of `per_batch` records of `len` bytes.
fn fill(log: &PartitionLog, batches: usize, per_batch: usize, len: usize) {
    for b in 0..batches {
        let vals: Vec<Vec<u8>> = (0..per_batch)
            .map(|i| value(b * per_batch + i, len))
            .collect();
        let recs: Vec<NewRecord> = vals.iter().map(|v| NewRecord::value(v)).collect();
        let info = log.append(&recs).unwrap();
        assert_eq!(info.first_offset, (b * per_batch) as i64);
        assert_eq!(info.batches, 1);
    }
}

/// A cleanly closed data dir whose partition `t-0` got `batches` appends of
/// `per_batch` records of `len` bytes.
fn closed_partition(
    config: &LogConfig,
    batches: usize,
    per_batch: usize,
    len: usize,
) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let mgr = open(tmp.path(), config);
    let log = mgr.create_partition("t-0").unwrap();
    fill(&log, batches, per_batch, len);
    drop(log);
    mgr.close().unwrap();
    tmp
}

/// A new data dir whose empty `t-0` is open under the defaults but for
/// `key`, set to `value`.
fn empty_partition_with(
    key: &str,
    value: &str,
) -> (tempfile::TempDir, LogManager, Arc<PartitionLog>) {
    let tmp = tempfile::tempdir().unwrap();
    let mut c = LogConfig::default();
    c.set(key, value).unwrap();
    let mgr = open(tmp.path(), &c);
    let log = mgr.create_partition("t-0").unwrap();
    (tmp, mgr, log)
}

/// `t-0` under `small_segments` with an index entry every 1000 bytes, open,
/// after 150 appends of ten 700-byte records: a sealed segment and an
/// active one with many entries each. The config comes too, for reopening.
fn densely_indexed() -> (tempfile::TempDir, LogConfig, LogManager, Arc<PartitionLog>) {
    let tmp = tempfile::tempdir().unwrap();
    let mut c = small_segments();
    c.set("index.interval.bytes", "1000").unwrap();
    let mgr = open(tmp.path(), &c);
    let log = mgr.create_partition("t-0").unwrap();
    fill(&log, 150, 10, 700);
    (tmp, c, mgr, log)
}

fn seg_path(dir: &Path, part: &str, base: i64, suffix: &str) -> PathBuf {
    dir.join(part).join(format!("{base:020}.{suffix}"))
}

/// `closed_partition` of `batches` batches of ten 1506-byte records, its
/// first segment's `.index` changed by `damage`, opened again: the data
/// dir, its manager, the index's path and the index as it was written.
fn damaged_first_index(
    batches: usize,
    damage: impl FnOnce(&mut Vec<u8>),
) -> (tempfile::TempDir, LogManager, PathBuf, Vec<u8>) {
    let tmp = closed_partition(&small_segments(), batches, 10, 1506);
    let idx = seg_path(tmp.path(), "t-0", 0, "index");
    let good = fs::read(&idx).unwrap();
    let mut bad = good.clone();
    damage(&mut bad);
    fs::write(&idx, &bad).unwrap();
    let mgr = open(tmp.path(), &small_segments());
    (tmp, mgr, idx, good)
}

/// The `.index` and `.timeindex` of each of `bases` in `t-0`, with their bytes.
fn index_files(dir: &Path, bases: &[i64]) -> Vec<(PathBuf, Vec<u8>)> {
    (bases.iter())
        .flat_map(|b| ["index", "timeindex"].map(|s| seg_path(dir, "t-0", *b, s)))
        .map(|p| {
            let bytes = fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect()
}

/// Make the next open recover `t-0` from its first segment.
fn recover_from_start(dir: &Path) {
    fs::write(
        dir.join("recovery-point-offset-checkpoint"),
        "0\n1\nt 0 0\n",
    )
    .unwrap();
}

fn file_len(p: &Path) -> u64 {
    fs::metadata(p).unwrap().len()
}

/// (relative offset, position) entries of an `.index` file.
fn index_entries(p: &Path) -> Vec<(u32, u32)> {
    fs::read(p)
        .unwrap()
        .chunks(8)
        .map(|c| {
            (
                u32::from_be_bytes(c[0..4].try_into().unwrap()),
                u32::from_be_bytes(c[4..8].try_into().unwrap()),
            )
        })
        .collect()
}

#[test]
fn roll_arithmetic_matches_kafka() {
    let tmp = tempfile::tempdir().unwrap();
    let mgr = open(tmp.path(), &small_segments());
    let log = mgr.create_partition("orders-0").unwrap();
    fill(&log, 69, 10, 1506);
    assert_eq!(
        log.segment_bases(),
        vec![0, 680],
        "68 batches fit, the 69th rolls"
    );
    let sealed = seg_path(tmp.path(), "orders-0", 0, "log");
    assert_eq!(file_len(&sealed), 68 * 15_211);
    let idx = seg_path(tmp.path(), "orders-0", 0, "index");
    assert_eq!(
        file_len(&idx),
        67 * 8,
        "sealed index trimmed; the first batch is never indexed"
    );
    let entries = index_entries(&idx);
    for (i, (rel, pos)) in entries.iter().enumerate() {
        // Batch k (k >= 1) is indexed under its LAST offset, at its START position.
        let k = i as u32 + 1;
        assert_eq!(*rel, k * 10 + 9);
        assert_eq!(*pos, k * 15_211);
    }
    assert_eq!(
        file_len(&seg_path(tmp.path(), "orders-0", 680, "index")),
        10_485_760
    );
    assert_eq!(
        file_len(&seg_path(tmp.path(), "orders-0", 680, "timeindex")),
        10_485_756
    );
    let tix = file_len(&seg_path(tmp.path(), "orders-0", 0, "timeindex"));
    assert!(
        tix > 0 && tix.is_multiple_of(12),
        "sealed time index trimmed to whole entries with its final entry"
    );
    for off in [0, 9, 10, 679, 680, 689] {
        let r = log.read(off).unwrap();
        assert_eq!(r.offset, off);
        assert_eq!(r.value.unwrap(), value(off as usize, 1506));
    }
    mgr.close().unwrap();
}

#[test]
fn index_interval_rule_is_strictly_greater() {
    let (tmp, mgr, log) = empty_partition_with("index.interval.bytes", "200");
    // One-record batches of exactly 100 bytes: 61 header + 39 record bytes.
    let v = vec![b'x'; 32];
    let recs = [NewRecord::value(&v)];
    assert_eq!(commitfs::record::batch_size(&recs), 100);
    for _ in 0..7 {
        log.append(&recs).unwrap();
    }
    log.roll().unwrap();
    // Counter after batches: 100, 200, 300>200 -> index batch 3 (offset 3, pos 300),
    // reset, 100, 200, 300 -> index batch 6.
    let e = index_entries(&seg_path(tmp.path(), "t-0", 0, "index"));
    assert_eq!(e, vec![(3, 300), (6, 600)]);
    mgr.close().unwrap();
}

#[test]
fn batches_split_at_max_message_bytes_and_oversized_records_append_nothing() {
    let (_tmp, mgr, log) = empty_partition_with("max.message.bytes", "1000");
    let vals: Vec<Vec<u8>> = (0..10).map(|i| value(i, 300)).collect();
    let recs: Vec<NewRecord> = vals.iter().map(|v| NewRecord::value(v)).collect();
    let info = log.append(&recs).unwrap();
    assert_eq!((info.first_offset, info.last_offset), (0, 9));
    assert_eq!(info.batches, 4, "3+3+3+1 records of ~307 bytes under 1000");
    let big = vec![0u8; 2000];
    let before = log.status().unwrap();
    let err = log
        .append(&[NewRecord::value(b"ok"), NewRecord::value(&big)])
        .unwrap_err();
    assert!(matches!(err, StorageError::RecordTooLarge { .. }), "{err}");
    assert_eq!(
        log.status().unwrap(),
        before,
        "nothing of a refused append lands"
    );
    mgr.close().unwrap();
}

/// Crash = drop the manager without `close()`: no marker, untrimmed indexes.
fn crash(mgr: LogManager) {
    drop(mgr);
}

#[test]
fn torn_tail_recovers_to_previous_batch_at_every_cut() {
    let tmp = tempfile::tempdir().unwrap();
    let mgr = open(tmp.path(), &LogConfig::default());
    let log = mgr.create_partition("t-0").unwrap();
    fill(&log, 5, 3, 40);
    let log_path = seg_path(tmp.path(), "t-0", 0, "log");
    let full = fs::read(&log_path).unwrap();
    let last_start = BatchIter::new(&full).map(|b| b.unwrap().0).last().unwrap();
    drop(log);
    crash(mgr);
    for cut in last_start..full.len() {
        fs::write(&log_path, &full[..cut]).unwrap();
        let _ = fs::remove_file(tmp.path().join(".kafka_cleanshutdown"));
        let mgr = open(tmp.path(), &LogConfig::default());
        let log = mgr.partition("t-0").unwrap();
        assert_eq!(log.log_end_offset(), 12, "cut at {cut}");
        assert_eq!(file_len(&log_path), last_start as u64);
        let info = log.append(&[NewRecord::value(b"next")]).unwrap();
        assert_eq!(info.first_offset, 12);
        assert_eq!(log.read(12).unwrap().value.unwrap(), b"next");
        assert_eq!(log.read(11).unwrap().value.unwrap(), value(11, 40));
        drop(log);
        crash(mgr);
    }
}

#[test]
fn deleted_index_is_rebuilt_byte_identical() {
    let (tmp, c, mgr, log) = densely_indexed();
    assert_eq!(log.segment_bases().len(), 2);
    drop(log);
    mgr.close().unwrap();
    let bases = [0i64, fs_first_active(tmp.path())];
    let originals = index_files(tmp.path(), &bases);
    for (p, _) in &originals {
        fs::remove_file(p).unwrap();
    }
    let mgr = open(tmp.path(), &c);
    mgr.close().unwrap();
    for (p, bytes) in &originals {
        assert_eq!(
            &fs::read(p).unwrap(),
            bytes,
            "{} rebuilt identically",
            p.display()
        );
    }
}

fn fs_first_active(dir: &Path) -> i64 {
    let mut bases: Vec<i64> = fs::read_dir(dir.join("t-0"))
        .unwrap()
        .filter_map(|e| {
            let n = e.unwrap().file_name().into_string().unwrap();
            n.strip_suffix(".log").map(|s| s.parse().unwrap())
        })
        .collect();
    bases.sort();
    *bases.last().unwrap()
}

#[test]
fn zero_padded_indexes_are_detected_and_rebuilt() {
    let (tmp, c, mgr, log) = densely_indexed();
    drop(log);
    mgr.close().unwrap();
    let idx = seg_path(tmp.path(), "t-0", 0, "index");
    let tix = seg_path(tmp.path(), "t-0", 0, "timeindex");
    let (idx_bytes, tix_bytes) = (fs::read(&idx).unwrap(), fs::read(&tix).unwrap());
    // What a crash before trimming leaves: the preallocated, zero-filled tail.
    fs::OpenOptions::new()
        .write(true)
        .open(&idx)
        .unwrap()
        .set_len(10_485_760)
        .unwrap();
    fs::OpenOptions::new()
        .write(true)
        .open(&tix)
        .unwrap()
        .set_len(10_485_756)
        .unwrap();
    let mgr = open(tmp.path(), &c);
    let log = mgr.partition("t-0").unwrap();
    for off in [0, 5, 700, 1000] {
        assert_eq!(
            log.read(off).unwrap().value.unwrap(),
            value(off as usize, 700)
        );
    }
    assert_eq!(fs::read(&idx).unwrap(), idx_bytes);
    assert_eq!(fs::read(&tix).unwrap(), tix_bytes);
    drop(log);
    mgr.close().unwrap();
}

#[test]
fn clean_reopen_continues_at_the_log_end() {
    let tmp = tempfile::tempdir().unwrap();
    let mgr = open(tmp.path(), &LogConfig::default());
    let log = mgr.create_partition("t-0").unwrap();
    fill(&log, 20, 7, 900);
    drop(log);
    mgr.close().unwrap();
    assert!(tmp.path().join(".kafka_cleanshutdown").exists());
    let rp = fs::read_to_string(tmp.path().join("recovery-point-offset-checkpoint")).unwrap();
    assert_eq!(rp, "0\n1\nt 0 140\n");
    let mgr = open(tmp.path(), &LogConfig::default());
    assert!(
        !tmp.path().join(".kafka_cleanshutdown").exists(),
        "deleted at start-up"
    );
    let log = mgr.partition("t-0").unwrap();
    assert_eq!(log.log_end_offset(), 140);
    assert_eq!(log.local().recovery_point(), 140);
    assert_eq!(
        log.append(&[NewRecord::value(b"x")]).unwrap().first_offset,
        140
    );
    assert_eq!(
        file_len(&seg_path(tmp.path(), "t-0", 0, "index")),
        10_485_760,
        "the active index is preallocated again"
    );
    drop(log);
    mgr.close().unwrap();
}

#[test]
fn second_open_of_a_data_dir_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let mgr = open(tmp.path(), &LogConfig::default());
    let err = LogManager::open(tmp.path(), LogConfig::default(), OpenOptions::default())
        .err()
        .unwrap();
    assert!(matches!(err, StorageError::Locked(_)), "{err}");
    mgr.close().unwrap();
}

#[test]
fn retention_by_time_size_and_delete_records() {
    let tmp = tempfile::tempdir().unwrap();
    let mgr = open(tmp.path(), &small_segments());
    let log = mgr.create_partition("t-0").unwrap();
    fill(&log, 300, 10, 1506); // 68 batches a segment: 5 segments
    assert_eq!(log.segment_bases(), vec![0, 680, 1360, 2040, 2720]);
    let seg_size = 68 * 15_211u64;

    // Size: 4.4 segments' worth against a limit of 2: Kafka deletes while the
    // log would still be at or over the limit without the segment.
    log.set_config("retention.bytes", &(seg_size * 2).to_string())
        .unwrap();
    let deleted = log.apply_retention(commitfs_now()).unwrap();
    assert_eq!(deleted, 2);
    assert_eq!(log.segment_bases(), vec![1360, 2040, 2720]);
    assert_eq!(log.log_start_offset(), 1360);
    assert!(!seg_path(tmp.path(), "t-0", 0, "log").exists());
    assert!(matches!(
        log.read(5),
        Err(StorageError::OffsetOutOfRange { .. })
    ));

    // Delete records: inside a kept segment, offsets below it vanish at once.
    log.set_config("retention.bytes", "-1").unwrap();
    assert_eq!(log.delete_records_before(2100).unwrap(), 2100);
    assert_eq!(log.segment_bases(), vec![2040, 2720]);
    assert!(matches!(
        log.read(2099),
        Err(StorageError::OffsetOutOfRange { .. })
    ));
    assert_eq!(log.read(2100).unwrap().offset, 2100);
    let lso = fs::read_to_string(tmp.path().join("log-start-offset-checkpoint")).unwrap();
    assert_eq!(lso, "0\n1\nt 0 2100\n");

    // Time: everything is older than 1 ms an hour from now; the active segment
    // is rolled first so the log keeps an (empty) active segment.
    log.set_config("retention.ms", "1").unwrap();
    let deleted = log.apply_retention(commitfs_now() + 3_600_000).unwrap();
    assert_eq!(deleted, 2);
    assert_eq!(log.segment_bases(), vec![3000]);
    assert_eq!(log.log_start_offset(), 3000);
    assert_eq!(
        log.append(&[NewRecord::value(b"after")])
            .unwrap()
            .first_offset,
        3000
    );
    drop(log);
    mgr.close().unwrap();

    let mgr = open(tmp.path(), &small_segments());
    let log = mgr.partition("t-0").unwrap();
    assert_eq!(log.log_start_offset(), 3000, "survives a reopen");
    assert_eq!(log.config().retention_ms, 1, "overrides persist");
    drop(log);
    mgr.close().unwrap();
}

fn commitfs_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[test]
fn timestamp_lookup_goes_through_the_time_index() {
    let tmp = tempfile::tempdir().unwrap();
    let mgr = open(tmp.path(), &LogConfig::default());
    let log = mgr.create_partition("t-0").unwrap();
    let t0 = commitfs_now();
    log.append(&[NewRecord::value(b"a"), NewRecord::value(b"b")])
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(5));
    let t1 = commitfs_now();
    log.append(&[NewRecord::value(b"c")]).unwrap();
    assert_eq!(log.offset_for_timestamp(t0 - 1000).unwrap(), Some(0));
    assert_eq!(log.offset_for_timestamp(t1).unwrap(), Some(2));
    assert_eq!(log.offset_for_timestamp(t1 + 60_000).unwrap(), None);
    drop(log);
    mgr.close().unwrap();
}

#[test]
fn readers_never_see_half_a_batch_while_appends_and_rolls_run() {
    let tmp = tempfile::tempdir().unwrap();
    let mgr = Arc::new(open(tmp.path(), &small_segments()));
    let log = mgr.create_partition("t-0").unwrap();
    let writer = {
        let log = log.clone();
        std::thread::spawn(move || fill(&log, 200, 10, 1000))
    };
    let mut checked = 0;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !writer.is_finished() {
        assert!(
            std::time::Instant::now() < deadline,
            "the writer is not done after 120 s"
        );
        let end = log.log_end_offset();
        for off in (0..end).step_by(97) {
            let r = log.read(off).unwrap();
            assert_eq!(r.value.unwrap(), value(off as usize, 1000));
            checked += 1;
        }
    }
    writer.join().unwrap();
    assert!(checked > 0);
    drop(log);
    mgr.close().unwrap();
}

#[test]
fn unclean_open_truncates_and_drops_later_segments() {
    let tmp = tempfile::tempdir().unwrap();
    let mgr = open(tmp.path(), &small_segments());
    let log = mgr.create_partition("t-0").unwrap();
    fill(&log, 150, 10, 1506);
    assert_eq!(log.segment_bases(), vec![0, 680, 1360]);
    drop(log);
    crash(mgr);
    // Rolls flush sealed segments in the background, which moves the recovery
    // point past them; put it back to 0 as if those flushes had not happened
    // (a dropped manager has stopped its flusher: nothing rewrites it later).
    recover_from_start(tmp.path());
    // Garble a byte in the middle of the second segment.
    let p = seg_path(tmp.path(), "t-0", 680, "log");
    let mut bytes = fs::read(&p).unwrap();
    bytes[15_211 * 3 + 100] ^= 0xff;
    fs::write(&p, &bytes).unwrap();
    let mgr = open(tmp.path(), &small_segments());
    let log = mgr.partition("t-0").unwrap();
    assert_eq!(
        log.local().recovery_point(),
        0,
        "recovery started at the first segment"
    );
    assert_eq!(log.log_end_offset(), 710, "cut at the garbled batch");
    assert_eq!(log.segment_bases(), vec![0, 680]);
    assert!(!seg_path(tmp.path(), "t-0", 1360, "log").exists());
    assert_eq!(
        log.append(&[NewRecord::value(b"z")]).unwrap().first_offset,
        710
    );
    drop(log);
    mgr.close().unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Any byte string appended to a valid segment recovers to a valid prefix
    /// that keeps every batch written before it.
    #[test]
    fn garbage_after_a_valid_log_recovers_to_it(garbage in proptest::collection::vec(any::<u8>(), 1..400)) {
        let tmp = tempfile::tempdir().unwrap();
        let mgr = open(tmp.path(), &LogConfig::default());
        let log = mgr.create_partition("t-0").unwrap();
        fill(&log, 4, 2, 30);
        drop(log);
        crash(mgr);
        let p = seg_path(tmp.path(), "t-0", 0, "log");
        let valid = fs::read(&p).unwrap();
        let mut bytes = valid.clone();
        bytes.extend_from_slice(&garbage);
        fs::write(&p, &bytes).unwrap();
        let mgr = open(tmp.path(), &LogConfig::default());
        let log = mgr.partition("t-0").unwrap();
        let kept = fs::read(&p).unwrap();
        prop_assert!(kept.len() >= valid.len());
        prop_assert_eq!(&kept[..valid.len()], &valid[..]);
        let mut next = 0;
        for b in BatchIter::new(&kept) {
            let (_, b) = b.unwrap();
            b.verify_crc().unwrap();
            prop_assert!(b.header.base_offset >= next);
            next = b.header.next_offset();
        }
        prop_assert_eq!(log.log_end_offset(), next);
        for off in 0..8 {
            prop_assert_eq!(log.read(off).unwrap().value.unwrap(), value(off as usize, 30));
        }
        drop(log);
        mgr.close().unwrap();
    }
}

#[test]
fn index_damage_that_passes_the_open_checks_is_caught_on_first_use() {
    // Entry 0 (offset 19 at 15211) now points inside batch 0: increasing and in
    // range, so only its first use can tell.
    let (_tmp, mgr, idx, good) = damaged_first_index(69, |bad| {
        bad[4..8].copy_from_slice(&15_000u32.to_be_bytes());
    });
    let log = mgr.partition("t-0").unwrap();
    assert_eq!(log.read(25).unwrap().value.unwrap(), value(25, 1506));
    assert_eq!(fs::read(&idx).unwrap(), good, "rebuilt byte-identical");
    drop(log);
    mgr.close().unwrap();
}

#[test]
fn decreasing_or_out_of_range_index_entries_are_rebuilt() {
    for damage in ["decreasing", "past-end", "ragged"] {
        let (_tmp, mgr, idx, good) = damaged_first_index(69, |bad| match damage {
            "decreasing" => bad[8..12].copy_from_slice(&1u32.to_be_bytes()),
            "past-end" => bad[20..24].copy_from_slice(&u32::MAX.to_be_bytes()),
            _ => bad.truncate(bad.len() - 5),
        });
        let log = mgr.partition("t-0").unwrap();
        for off in [0, 11, 300, 679] {
            assert_eq!(
                log.read(off).unwrap().value.unwrap(),
                value(off as usize, 1506),
                "{damage}"
            );
        }
        assert_eq!(
            fs::read(&idx).unwrap(),
            good,
            "{damage}: rebuilt byte-identical"
        );
        drop(log);
        mgr.close().unwrap();
    }
}

#[test]
fn compression_type_compresses_appended_batches() {
    use commitfs::record::{Batch, Compression};
    for (name, codec) in [
        ("gzip", Compression::Gzip),
        ("snappy", Compression::Snappy),
        ("lz4", Compression::Lz4),
        ("zstd", Compression::Zstd),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let mgr = open(tmp.path(), &LogConfig::default());
        let log = mgr.create_partition("t-0").unwrap();
        log.set_config("compression.type", name).unwrap();
        fill(&log, 3, 50, 200);
        let bytes = fs::read(seg_path(tmp.path(), "t-0", 0, "log")).unwrap();
        assert!(
            bytes.len() < 3 * 50 * 200,
            "{name}: repetitive values shrink"
        );
        for b in BatchIter::new(&bytes) {
            let (_, b): (usize, Batch) = b.unwrap();
            assert_eq!(b.header.compression(), codec);
            b.verify_crc().unwrap();
        }
        for off in [0, 49, 50, 149] {
            assert_eq!(
                log.read(off).unwrap().value.unwrap(),
                value(off as usize, 200),
                "{name}"
            );
        }
        drop(log);
        mgr.close().unwrap();
    }
}

#[test]
fn overrides_can_be_reset_to_the_default() {
    let tmp = tempfile::tempdir().unwrap();
    let mgr = open(tmp.path(), &small_segments());
    let log = mgr.create_partition("t-0").unwrap();
    log.set_config("segment.bytes", "2097152").unwrap();
    assert_eq!(log.config().segment_bytes, 2_097_152);
    log.reset_config("segment.bytes").unwrap();
    assert_eq!(
        log.config().segment_bytes,
        1_048_576,
        "back to the mount-wide default"
    );
    assert!(log.overrides().is_empty());
    assert!(log.reset_config("no.such").is_err());
    let f = log.local().file("00000000000000000000.index").unwrap();
    assert_eq!(f.size, 10_485_760);
    // The library lists its own files too; which files a face shows is the
    // face's business (tests/tree.rs).
    assert!(log.local().file("commitfs.properties").is_ok());
    assert!(log.local().file("../x").is_err());
    drop(log);
    mgr.close().unwrap();
}

#[test]
fn root_files_list_the_data_dir() {
    let tmp = tempfile::tempdir().unwrap();
    fs::write(tmp.path().join("meta.properties"), "version=1\n").unwrap();
    let mgr = open(tmp.path(), &LogConfig::default());
    mgr.create_partition("t-0").unwrap();
    let names: Vec<String> = mgr
        .root_files()
        .unwrap()
        .into_iter()
        .map(|f| f.name)
        .collect();
    assert!(names.contains(&"meta.properties".to_string()), "{names:?}");
    assert!(
        names.contains(&"recovery-point-offset-checkpoint".to_string()),
        "{names:?}"
    );
    assert!(!names.contains(&"t-0".to_string()), "{names:?}");
    let mut buf = [0u8; 64];
    let n = mgr.read_root_file("meta.properties", 0, &mut buf).unwrap();
    assert_eq!(&buf[..n], b"version=1\n");
    assert!(mgr.read_root_file("../etc", 0, &mut buf).is_err());
    mgr.close().unwrap();
}

#[test]
fn a_lookup_reads_one_index_interval_and_one_batch_and_repeats_read_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let mgr = open(tmp.path(), &small_segments());
    let log = mgr.create_partition("t-0").unwrap();
    fill(&log, 300, 10, 1506);
    let before = log.status().unwrap().lookup_bytes_read;
    let r = log.read(2_000).unwrap();
    assert_eq!(r.value.unwrap(), value(2_000, 1506));
    let first = log.status().unwrap().lookup_bytes_read - before;
    // At most one index interval of headers plus the batch itself.
    assert!(
        first <= 4096 + 2 * 61 + 15_211,
        "{first} bytes for one lookup"
    );
    assert!(first >= 15_211, "the batch itself is read");
    log.read(2_000).unwrap();
    log.read(2_005).unwrap();
    assert_eq!(
        log.status().unwrap().lookup_bytes_read - before,
        first,
        "same batch: no new reads"
    );
    drop(log);
    mgr.close().unwrap();
}

/// This process's descriptors open on files under `dir`, as their paths.
/// Other tests of this binary open files at the same time, elsewhere.
fn fds_under(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| fs::read_link(e.ok()?.path()).ok())
        .filter(|p| p.starts_with(dir))
        .collect();
    out.sort();
    out
}

#[test]
fn sealed_segments_keep_one_descriptor_and_a_clean_open_opens_none() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let part = root.join("t-0");
    let mgr = open(&root, &LogConfig::default());
    let log = mgr.create_partition("t-0").unwrap();
    for i in 0..100 {
        log.append(&[NewRecord::value(format!("{i}").as_bytes())])
            .unwrap();
        log.roll().unwrap();
    }
    // The flushes after each roll open the directory while they run.
    assert!(mgr.wait_for_flushes(std::time::Duration::from_secs(60)));
    let fds = fds_under(&part);
    let sealed = |p: &PathBuf, suffix: &str| {
        p.extension().is_some_and(|e| e == suffix) && *p != seg_path(&root, "t-0", 100, suffix)
    };
    let sealed_logs = fds.iter().filter(|p| sealed(p, "log")).count();
    assert_eq!(sealed_logs, 100, "one descriptor per sealed .log: {fds:#?}");
    assert!(
        !fds.iter()
            .any(|p| sealed(p, "index") || sealed(p, "timeindex")),
        "sealed indexes keep no descriptor: {fds:#?}"
    );
    assert!(
        fds.len() <= 100 + 3,
        "100 sealed .log files and the active segment's files only: {fds:#?}"
    );
    assert_eq!(log.read(42).unwrap().value.unwrap(), b"42");
    drop(log);
    mgr.close().unwrap();
    drop(mgr);
    assert_eq!(
        fds_under(&part),
        Vec::<PathBuf>::new(),
        "closed and dropped"
    );

    let mgr = open(&root, &LogConfig::default());
    let log = mgr.partition("t-0").unwrap();
    let fds = fds_under(&part);
    assert!(
        !fds.iter()
            .any(|p| sealed(p, "log") || sealed(p, "index") || sealed(p, "timeindex")),
        "a clean open of 101 segments opened sealed ones: {fds:#?}"
    );
    assert!(fds.len() <= 3, "{fds:#?}");
    assert_eq!(log.read(7).unwrap().value.unwrap(), b"7");
    drop(log);
    mgr.close().unwrap();
}

#[test]
fn unclean_recovery_rebuilds_every_index_byte_identical() {
    let (tmp, c, mgr, log) = densely_indexed();
    let bases = log.segment_bases();
    assert!(bases.len() >= 2);
    drop(log);
    crash(mgr);
    // Recover everything, as if no flush had ever completed (a dropped
    // manager has stopped its flusher: nothing rewrites the file later).
    recover_from_start(tmp.path());
    let before = index_files(tmp.path(), &bases);
    let mgr = open(tmp.path(), &c);
    for (p, bytes) in &before {
        assert_eq!(
            &fs::read(p).unwrap(),
            bytes,
            "{} after recovery",
            p.display()
        );
    }
    let log = mgr.partition("t-0").unwrap();
    assert_eq!(
        log.local().recovery_point(),
        0,
        "recovery started at the first segment"
    );
    assert_eq!(log.log_end_offset(), 1500);
    drop(log);
    mgr.close().unwrap();
}

#[test]
fn a_last_active_entry_off_its_batch_does_not_lose_the_log_end() {
    let (_tmp, mgr, idx, good) = damaged_first_index(30, |bad| {
        let last = bad.len() - 8;
        let pos = u32::from_be_bytes(bad[last + 4..last + 8].try_into().unwrap());
        bad[last + 4..last + 8].copy_from_slice(&(pos + 7).to_be_bytes());
    });
    let log = mgr.partition("t-0").unwrap();
    assert_eq!(log.log_end_offset(), 300);
    assert_eq!(
        log.append(&[NewRecord::value(b"next")])
            .unwrap()
            .first_offset,
        300
    );
    drop(log);
    mgr.close().unwrap();
    assert_eq!(&fs::read(&idx).unwrap()[..good.len()], &good[..]);
}

#[test]
fn stray_files_are_cleaned_up_as_kafka_does() {
    let tmp = closed_partition(&small_segments(), 69, 10, 1506);
    let dir = tmp.path().join("t-0");
    let log680 = seg_path(tmp.path(), "t-0", 680, "log");
    // A `.swap` that completes a segment; its stale indexes must go.
    fs::rename(&log680, dir.join(format!("{:020}.log.swap", 680))).unwrap();
    fs::write(dir.join(format!("{:020}.log.deleted", 5)), b"x").unwrap();
    // A `.cleaned` above the `.swap`: the swap is a cleaner's, completed
    // (below it, the swap would be an unfinished split's, dropped).
    fs::write(dir.join(format!("{:020}.index.cleaned", 1000)), b"x").unwrap();
    // Index files whose `.log` is gone.
    fs::write(dir.join(format!("{:020}.index", 9_999)), [0u8; 8]).unwrap();
    fs::write(dir.join(format!("{:020}.timeindex", 9_999)), [0u8; 12]).unwrap();
    let mgr = open(tmp.path(), &small_segments());
    let names: Vec<String> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(log680.exists(), "{names:?}");
    assert!(
        !names
            .iter()
            .any(|n| n.ends_with(".swap") || n.ends_with(".deleted") || n.ends_with(".cleaned")),
        "{names:?}"
    );
    assert!(
        !names
            .iter()
            .any(|n| n.starts_with(&format!("{:020}", 9_999))),
        "{names:?}"
    );
    let log = mgr.partition("t-0").unwrap();
    assert_eq!(log.log_end_offset(), 690);
    assert_eq!(log.read(685).unwrap().value.unwrap(), value(685, 1506));
    drop(log);
    mgr.close().unwrap();
}

/// An index rebuilt under a `segment.index.bytes` smaller than the one its
/// segment was written with holds every entry the rule gives (the setting
/// sizes new segments only), and the load does not panic.
#[test]
fn a_rebuild_under_a_smaller_segment_index_bytes_fits_every_entry() {
    let mut c = small_segments();
    c.set("index.interval.bytes", "4096").unwrap();
    let tmp = closed_partition(&c, 300, 1, 5000);
    let bases = fs_bases(tmp.path());
    assert!(bases.len() >= 2, "a sealed and an active segment");
    let originals = index_files(tmp.path(), &bases);
    let mut small = c.clone();
    small.set("segment.index.bytes", "8").unwrap();
    for clean in [true, false] {
        for (p, _) in &originals {
            fs::remove_file(p).unwrap();
        }
        if !clean {
            fs::remove_file(tmp.path().join(".kafka_cleanshutdown")).unwrap();
            recover_from_start(tmp.path());
        }
        let mgr = open(tmp.path(), &small);
        let log = mgr.partition("t-0").unwrap();
        assert_eq!(log.log_end_offset(), 300);
        for i in [0usize, 1, 150, 299] {
            assert_eq!(log.read(i as i64).unwrap().value.unwrap(), value(i, 5000));
        }
        drop(log);
        mgr.close().unwrap();
        for (p, bytes) in &originals {
            assert_eq!(
                &fs::read(p).unwrap(),
                bytes,
                "{} rebuilt identically (clean: {clean})",
                p.display()
            );
        }
    }
    let report = commitfs::storage::check::check_data_dir(tmp.path(), &c, None).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
}

fn fs_bases(dir: &Path) -> Vec<i64> {
    let mut bases: Vec<i64> = fs::read_dir(dir.join("t-0"))
        .unwrap()
        .filter_map(|e| {
            let n = e.unwrap().file_name().into_string().unwrap();
            n.strip_suffix(".log").map(|b| b.parse().unwrap())
        })
        .collect();
    bases.sort();
    bases
}

/// With `segment.bytes` below `max.message.bytes` (the README walkthrough's
/// 1 MiB segments and the default limit), records are packed into batches
/// that fit a segment; only a single record that fits no segment is refused.
#[test]
fn batches_are_packed_to_fit_segment_bytes_when_it_is_the_smaller_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let c = small_segments();
    assert!(c.max_message_bytes as i64 > c.segment_bytes as i64);
    let mgr = open(tmp.path(), &c);
    let log = mgr.create_partition("t-0").unwrap();
    // One 1 MiB write of `seq` lines, as `cat f >> log` sends it.
    let vals: Vec<Vec<u8>> = (1..=150_000).map(|i| i.to_string().into_bytes()).collect();
    let recs: Vec<NewRecord> = vals.iter().map(|v| NewRecord::value(v)).collect();
    let info = log.append(&recs).unwrap();
    assert_eq!((info.first_offset, info.last_offset), (0, 149_999));
    assert!(info.batches >= 2, "{info:?}");
    assert_eq!(log.read(149_999).unwrap().value.unwrap(), b"150000");
    for f in fs::read_dir(tmp.path().join("t-0")).unwrap() {
        let f = f.unwrap();
        if f.file_name().to_str().unwrap().ends_with(".log") {
            assert!(f.metadata().unwrap().len() <= 1_048_576);
        }
    }
    // A single record that fits max.message.bytes but no segment.
    log.set_config("max.message.bytes", "2000000").unwrap();
    let big = vec![b'b'; 1_500_000];
    // The rolls' background flushes count in the status: done first.
    assert!(mgr.wait_for_flushes(std::time::Duration::from_secs(60)));
    let before = log.status().unwrap();
    let err = log.append(&[NewRecord::value(&big)]).unwrap_err();
    assert!(
        matches!(err, StorageError::BatchLargerThanSegment { .. }),
        "{err}"
    );
    assert_eq!(log.status().unwrap(), before);
    drop(log);
    mgr.close().unwrap();
    let report = commitfs::storage::check::check_data_dir(tmp.path(), &c, None).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
}

/// A handle on a deleted partition (a file held open across `rmdir`) keeps
/// its `PartitionLog`. Every change through it must be refused, and above
/// all must not reach a new partition created under the same name: its
/// files, config and checkpoints live at the same paths.
#[test]
fn a_deleted_partition_refuses_changes_and_spares_its_successor() {
    let tmp = tempfile::tempdir().unwrap();
    let mgr = open(tmp.path(), &LogConfig::default());
    let old = mgr.create_partition("t-0").unwrap();
    old.append(&[NewRecord::value(b"a"), NewRecord::value(b"b")])
        .unwrap();
    old.roll().unwrap();
    old.append(&[NewRecord::value(b"c")]).unwrap();
    mgr.delete_partition("t-0").unwrap();
    let new = mgr.create_partition("t-0").unwrap();
    new.append(&[NewRecord::value(b"x")]).unwrap();
    let gone = |r: Result<(), StorageError>| matches!(r, Err(StorageError::NoSuchPartition(_)));
    assert!(gone(old.delete_records_before(2).map(drop)));
    assert!(gone(old.set_config("retention.ms", "5")));
    assert!(gone(old.reset_config("retention.ms")));
    assert!(gone(old.flush()));
    assert!(seg_path(tmp.path(), "t-0", 0, "log").exists());
    drop((old, new));
    mgr.close().unwrap();
    drop(mgr);
    let mgr = open(tmp.path(), &LogConfig::default());
    let new = mgr.partition("t-0").unwrap();
    assert_eq!((new.log_start_offset(), new.log_end_offset()), (0, 1));
    assert_eq!(new.read(0).unwrap().value.unwrap(), b"x");
    assert_eq!(new.config().retention_ms, LogConfig::default().retention_ms);
    drop(new);
    mgr.close().unwrap();
}
