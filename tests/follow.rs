//! Item 8 without FUSE: a data directory opened read-only while another
//! writer (doing what a running broker does, in its order) changes it. Each
//! look (`LogManager::partition`) brings the view up to what is on disk:
//! appends, rolls, retention, checkpoints, partitions created and deleted,
//! and a log cut underneath. A half-written batch is never shown.

#[path = "support/kafka_writer.rs"]
mod kafka_writer;

use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use commitfs::storage::{LogConfig, LogManager, OpenOptions, PartitionLog, StorageError};
use kafka_writer::{BASE_TS, KafkaWriter, seg_name, stream, value, write_meta};

fn open_ro(dir: &Path) -> LogManager {
    LogManager::open(
        dir,
        LogConfig::default(),
        OpenOptions {
            read_only: true,
            ..Default::default()
        },
    )
    .unwrap()
}

/// Looks at partition `name` until `ok` holds of it: a change made within
/// the directory timestamp's granularity of the last look shows at a later
/// look (within a tenth of a second), not necessarily the next.
fn wait_for(mgr: &LogManager, name: &str, ok: impl Fn(&PartitionLog) -> bool) -> Arc<PartitionLog> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(p) = mgr.partition(name)
            && ok(&p)
        {
            return p;
        }
        assert!(Instant::now() < deadline, "{name} never got there");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The names of the files the partition's directory holds.
fn file_names(p: &PartitionLog) -> Vec<String> {
    p.local()
        .files()
        .unwrap()
        .into_iter()
        .map(|f| f.name)
        .collect()
}

fn whole_stream(p: &PartitionLog) -> String {
    let len = p.stream_len().unwrap() as usize;
    let mut buf = vec![0; len + 10];
    let n = p.read_stream(0, &mut buf).unwrap();
    buf.truncate(n);
    String::from_utf8(buf).unwrap()
}

fn read_value(p: &PartitionLog, offset: i64) -> Result<String, StorageError> {
    p.read(offset)
        .map(|r| String::from_utf8(r.value.unwrap_or_default()).unwrap())
}

fn broker(index_interval: u64) -> (tempfile::TempDir, KafkaWriter) {
    let tmp = tempfile::tempdir().unwrap();
    write_meta(tmp.path());
    let w = KafkaWriter::create(tmp.path(), "t", 0, index_interval);
    (tmp, w)
}

/// A broker's `t-0` of `batches` batches of `records` records each, and a
/// read-only manager that has opened it at that end.
fn opened_after(
    index_interval: u64,
    batches: usize,
    records: usize,
) -> (tempfile::TempDir, KafkaWriter, LogManager) {
    let (tmp, mut w) = broker(index_interval);
    for _ in 0..batches {
        w.append(records);
    }
    let mgr = open_ro(tmp.path());
    let end = (batches * records) as i64;
    assert_eq!(mgr.partition("t-0").unwrap().log_end_offset(), end);
    (tmp, w, mgr)
}

/// A broker's `t-0` of `sealed` segments of ten records in five batches,
/// then an active one of one record, its checkpoints at the log end.
fn sealed_segments(sealed: usize) -> (tempfile::TempDir, KafkaWriter) {
    let (tmp, mut w) = broker(0);
    for _ in 0..sealed {
        for _ in 0..5 {
            w.append(2);
        }
        w.roll();
    }
    w.append(1);
    w.write_checkpoints(w.next_offset);
    (tmp, w)
}

#[test]
fn appends_to_the_active_segment_are_followed() {
    let (_tmp, mut w, mgr) = opened_after(100, 5, 3);
    assert_eq!(whole_stream(&mgr.partition("t-0").unwrap()), stream(0, 15));
    for _ in 0..40 {
        w.append(2);
    }
    let p = wait_for(&mgr, "t-0", |p| p.log_end_offset() == 95);
    assert_eq!(whole_stream(&p), stream(0, 95));
    for o in [0, 14, 15, 50, 94] {
        assert_eq!(read_value(&p, o).unwrap(), value(o));
    }
    assert!(matches!(
        p.read(95),
        Err(StorageError::OffsetOutOfRange { .. })
    ));
    let f = p.local().file(&seg_name(0, "log")).unwrap();
    assert_eq!(f.size, w.active_size());
    // Batches of two from 15 carry their base offset's timestamp.
    assert_eq!(p.offset_for_timestamp(BASE_TS + 60).unwrap(), Some(61));
}

#[test]
fn a_half_written_batch_is_never_shown() {
    let (tmp, mut w) = broker(4096);
    w.append(4);
    let mgr = open_ro(tmp.path());
    let whole = w.active_size();
    for cut in [1, 11, 12, 40, 61, 70] {
        w.append_torn(3, cut);
        for _ in 0..3 {
            let p = mgr.partition("t-0").unwrap();
            assert_eq!(p.log_end_offset(), w.next_offset, "cut at {cut}");
            assert_eq!(
                p.local().file(&seg_name(0, "log")).unwrap().size,
                w.active_size()
            );
            assert_eq!(whole_stream(&p), stream(0, w.next_offset));
            let mut buf = vec![0u8; 4096];
            let n = p
                .local()
                .read_file(&seg_name(0, "log"), whole, &mut buf)
                .unwrap();
            assert_eq!(n as u64, w.active_size() - whole);
        }
        w.finish_torn();
        let next = w.next_offset;
        let p = wait_for(&mgr, "t-0", |p| p.log_end_offset() == next);
        assert_eq!(whole_stream(&p), stream(0, next));
    }
}

#[test]
fn rolls_are_followed_and_sealed_segments_are_not_scanned() {
    let (_tmp, mut w, mgr) = opened_after(0, 10, 1);
    // One roll between two looks, then three.
    w.roll();
    w.append(5);
    let p = wait_for(&mgr, "t-0", |p| p.log_end_offset() == 15);
    assert_eq!(p.segment_bases(), [0, 10]);
    assert_eq!(p.local().active_segment_base(), Some(10));
    for _ in 0..3 {
        w.roll();
        w.append(2);
    }
    let p = wait_for(&mgr, "t-0", |p| p.log_end_offset() == 21);
    assert_eq!(p.segment_bases(), [0, 10, 15, 17, 19]);
    assert_eq!(whole_stream(&p), stream(0, 21));
    for o in 0..21 {
        assert_eq!(read_value(&p, o).unwrap(), value(o));
    }
    // The trimmed indexes show at their new size.
    assert_eq!(p.local().file(&seg_name(0, "index")).unwrap().size, 9 * 8);
    assert_eq!(
        p.local().file(&seg_name(19, "index")).unwrap().size,
        10 * 1024 * 1024
    );
    let status = p.status().unwrap();
    assert_eq!((status.segments, status.active_segment), (5, 19));
}

#[test]
fn retention_and_checkpoints_are_followed() {
    let (tmp, mut w) = sealed_segments(3);
    let mgr = open_ro(tmp.path());
    let p = mgr.partition("t-0").unwrap();
    assert_eq!((p.log_start_offset(), p.log_end_offset()), (0, 31));
    assert_eq!(p.local().recovery_point(), 31);

    // Retention: renamed `.deleted`, then deleted.
    let doomed = w.retain(1);
    let p = wait_for(&mgr, "t-0", |p| p.log_start_offset() == 10);
    assert_eq!(p.segment_bases(), [10, 20, 30]);
    assert!(matches!(
        p.read(3),
        Err(StorageError::OffsetOutOfRange { .. })
    ));
    assert_eq!(whole_stream(&p), stream(10, 31));
    let names = file_names(&p);
    assert!(!names.contains(&seg_name(0, "log")), "{names:?}");
    assert!(matches!(
        p.local().file(&seg_name(0, "index")),
        Err(StorageError::NoSuchFile(_))
    ));
    assert!(matches!(
        p.local().read_file(&seg_name(0, "log"), 0, &mut [0; 10]),
        Err(StorageError::NoSuchFile(_))
    ));
    w.purge(&doomed);
    assert_eq!(mgr.partition("t-0").unwrap().log_start_offset(), 10);

    // delete-records on the broker: the log start offset checkpoint moves.
    w.delete_records(14);
    let p = wait_for(&mgr, "t-0", |p| p.log_start_offset() == 14);
    assert_eq!(p.local().recovery_point(), 0);
    assert_eq!(whole_stream(&p), stream(14, 31));
    assert!(read_value(&p, 13).is_err());
    assert_eq!(read_value(&p, 14).unwrap(), value(14));
    // Both segments of the front going at once.
    let doomed = w.retain(2);
    w.purge(&doomed);
    let p = wait_for(&mgr, "t-0", |p| p.log_start_offset() == 30);
    assert_eq!(p.segment_bases(), [30]);
    assert_eq!(whole_stream(&p), stream(30, 31));
}

#[test]
fn partitions_created_and_deleted_are_followed() {
    let (tmp, mut w) = broker(4096);
    w.append(1);
    let mgr = open_ro(tmp.path());
    let names = |m: &LogManager| -> Vec<String> {
        m.partitions()
            .iter()
            .map(|p| p.name().to_string())
            .collect()
    };
    assert_eq!(names(&mgr), ["t-0"]);
    let mut u = KafkaWriter::create(tmp.path(), "u", 3, 4096);
    u.append(2);
    let deadline = Instant::now() + Duration::from_secs(5);
    while names(&mgr) != ["t-0", "u-3"] {
        assert!(Instant::now() < deadline, "{:?}", names(&mgr));
        std::thread::sleep(Duration::from_millis(10));
    }
    let p = wait_for(&mgr, "u-3", |p| p.log_end_offset() == 2);
    assert_eq!(whole_stream(&p), stream(0, 2));
    // Kafka deletes a partition by renaming its directory, then removing it.
    let renamed = tmp
        .path()
        .join("t-0.3c1d5f8e0b2a4d6c8e0f1a2b3c4d5e6f-delete");
    fs::rename(tmp.path().join("t-0"), &renamed).unwrap();
    assert!(mgr.partition("t-0").is_none());
    assert_eq!(names(&mgr), ["u-3"]);
    fs::remove_dir_all(&renamed).unwrap();
    // The directory comes back (a new topic of the same name).
    let mut t = KafkaWriter::create(tmp.path(), "t", 0, 4096);
    t.append(1);
    t.append(1);
    let p = wait_for(&mgr, "t-0", |p| p.log_end_offset() == 2);
    assert_eq!(whole_stream(&p), stream(0, 2));
}

#[test]
fn a_log_cut_underneath_is_read_again() {
    let (tmp, w, mgr) = opened_after(4096, 6, 2);
    // A follower truncating to offset 8: the `.log` is cut at that batch.
    let log = w.path(0, "log");
    let batch = w.active_size() / 6;
    fs::OpenOptions::new()
        .write(true)
        .open(&log)
        .unwrap()
        .set_len(batch * 4)
        .unwrap();
    let p = wait_for(&mgr, "t-0", |p| p.log_end_offset() == 8);
    assert_eq!(whole_stream(&p), stream(0, 8));
    assert!(p.read(9).is_err());
    // The log emptied and started again lower (Kafka's
    // `truncateFullyAndStartAt`), seen in two looks.
    drop(w);
    for suffix in ["log", "index", "timeindex"] {
        fs::remove_file(tmp.path().join("t-0").join(seg_name(0, suffix))).unwrap();
    }
    let p = wait_for(&mgr, "t-0", |p| p.segment_bases().is_empty());
    assert_eq!(whole_stream(&p), "");
    assert_eq!(p.log_end_offset(), 8);
    let mut w = KafkaWriter::create(tmp.path(), "t", 0, 4096);
    w.append(3);
    let p = wait_for(&mgr, "t-0", |p| p.log_end_offset() == 3);
    assert_eq!(whole_stream(&p), stream(0, 3));
    // A file that is not a log at all: nothing past what checks is shown.
    let log = w.path(0, "log");
    fs::write(
        &log,
        b"not a kafka log, not a kafka log, not a kafka log, at all",
    )
    .unwrap();
    let p = wait_for(&mgr, "t-0", |p| p.log_end_offset() == 0);
    assert_eq!(whole_stream(&p), "");
    assert!(p.read(0).is_err());
}

#[test]
fn a_compacted_segment_swapped_in_is_read_again() {
    let (tmp, mut w) = sealed_segments(2);
    let mgr = open_ro(tmp.path());
    let p = mgr.partition("t-0").unwrap();
    assert_eq!(whole_stream(&p), stream(0, 21));
    // The cleaner merges the two sealed segments, keeping odd offsets. In
    // the middle of its swap the first `.log` name is missing.
    let dir = tmp.path().join("t-0");
    w.compact(
        &[0, 10],
        |o| o % 2 == 1,
        || {
            let p = mgr.partition("t-0").unwrap();
            assert_eq!(p.log_start_offset(), 0, "a swap is not retention");
            assert!(p.segment_bases().contains(&0));
            assert!(dir.join(seg_name(0, "log.swap")).exists());
        },
    );
    let odd: String = (0..20)
        .filter(|o| o % 2 == 1)
        .map(|o| value(o) + "\n")
        .collect();
    let want = odd + &stream(20, 21);
    let p = wait_for(&mgr, "t-0", |p| p.segment_bases() == [0, 20]);
    assert_eq!(whole_stream(&p), want);
    assert_eq!(read_value(&p, 13).unwrap(), value(13));
    assert!(matches!(p.read(12), Err(StorageError::RecordNotFound(12))));
    assert_eq!(p.log_start_offset(), 0);
    let names = file_names(&p);
    assert!(!names.contains(&seg_name(10, "log")), "{names:?}");
}
