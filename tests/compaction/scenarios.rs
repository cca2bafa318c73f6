//! Kafka's `LogCleanerTest` scenarios that apply to one replica, with
//! Kafka's expected outcomes (the test names are Kafka's). Batches of
//! idempotent producers are encoded by kafka-protocol, not by commitfs.
//! Kafka's tests set `segment.bytes` to 1024 to make segments; here the
//! minimum is Kafka 4's 1 MiB, so segments are made by rolls, where Kafka's
//! tests roll too. A first dirty offset a Kafka test gives the cleaner is
//! written to `cleaner-offset-checkpoint` while the directory is closed.

use std::path::Path;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use commitfs::storage::{LogManager, PartitionLog};
use kafka_protocol::records::Compression;

use super::decode::decode_dir;
use super::{compacted, open_with, put};

/// Kafka's `makeCleaner(capacity)`: a map of `capacity` slots, load factor
/// 0.75. Reads of 256 bytes make chunks of a batch or a few, and a pass's
/// two threads take turns filtering them, so Kafka's cases judge both
/// threads' filtering and the order their chunks come out in.
fn cleaner(capacity: usize) -> commitfs::storage::cleaner::CleanerConfig {
    let mut c = super::cleaner_config();
    c.set("log.cleaner.io.buffer.size", "512").unwrap();
    c.sharing = commitfs::storage::cleaner::Sharing::Alternate;
    c.set(
        "log.cleaner.dedupe.buffer.size",
        &(capacity * 24).to_string(),
    )
    .unwrap();
    c.set("log.cleaner.io.buffer.load.factor", "0.75").unwrap();
    c
}

/// Kafka's `record(key, value)`: one keyed record in a batch of its own.
fn record(log: &PartitionLog, key: i32, value: i32) {
    put(log, &[(&key.to_string(), Some(&value.to_string()))]);
}

/// Kafka's `appendIdempotentAsLeader(log, pid, epoch)(keys)`: one batch of
/// a producer, its sequence following the producer's last.
fn idempotent(log: &PartitionLog, pid: i64, seq: i32, keys: &[i32]) -> (i64, i64) {
    let info = log.append_produced(&keyed(pid, seq, false, keys)).unwrap();
    (info.first_offset, info.last_offset)
}

/// Kafka's `appendTransactionalAsLeader(log, pid, epoch)(keys)`: one
/// transactional batch of a producer, its sequence following `seq`.
fn transactional(log: &PartitionLog, pid: i64, seq: &mut i32, keys: &[i32]) {
    log.append_transactional(&keyed(pid, *seq, true, keys))
        .unwrap();
    *seq += keys.len() as i32;
}

/// One batch of producer `pid` from sequence `seq`, each of `keys` its
/// record's key and value.
fn keyed(pid: i64, seq: i32, transactional: bool, keys: &[i32]) -> BytesMut {
    let records = keys.iter().map(|k| {
        let k = Bytes::from(k.to_string().into_bytes());
        (Some(k.clone()), Some(k))
    });
    // Now: producer state forgets a producer idle for a day.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    super::batch::encode(
        (pid, 0),
        Some(seq),
        transactional,
        now,
        records,
        Compression::None,
    )
}

/// Kafka's `abortMarker` / `commitMarker`, from the coordinator.
fn marker(log: &PartitionLog, pid: i64, commit: bool) {
    log.append_end_txn_marker(pid, 0, 0, commit).unwrap();
}

fn keys(log: &PartitionLog) -> Vec<i32> {
    decode_dir(log.local().dir())
        .iter()
        .filter(|b| !b.control)
        .flat_map(|b| &b.records)
        .filter(|r| r.value.is_some())
        .map(|r| {
            String::from_utf8(r.key.clone().unwrap())
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect()
}

fn offsets(log: &PartitionLog) -> Vec<i64> {
    decode_dir(log.local().dir())
        .iter()
        .flat_map(|b| &b.records)
        .filter(|r| r.value.is_some() && r.key.is_some())
        .map(|r| r.offset)
        .collect()
}

fn last_offsets_per_batch(log: &PartitionLog) -> Vec<i64> {
    decode_dir(log.local().dir())
        .iter()
        .map(|b| b.last_offset)
        .collect()
}

/// The directory closed, its first dirty offset set, opened again.
fn with_first_dirty(dir: &Path, mgr: LogManager, offset: i64, capacity: usize) -> LogManager {
    mgr.close().unwrap();
    drop(mgr);
    std::fs::write(
        dir.join("cleaner-offset-checkpoint"),
        format!("0\n1\nt 0 {offset}\n"),
    )
    .unwrap();
    open_with(dir, cleaner(capacity))
}

fn setup(capacity: usize) -> (tempfile::TempDir, LogManager, Arc<PartitionLog>) {
    let tmp = tempfile::tempdir().unwrap();
    let mgr = open_with(tmp.path(), cleaner(capacity));
    let log = compacted(&mgr, "t-0");
    (tmp, mgr, log)
}

#[test]
fn test_log_cleaner_stats() {
    let (tmp, mgr, log) = setup(4);
    for (k, v) in [(0, 0), (1, 1), (0, 0), (1, 1), (0, 0)] {
        record(&log, k, v);
    }
    log.roll().unwrap();
    let initial = log.status().unwrap().size_bytes;
    drop(log);
    let mgr = with_first_dirty(tmp.path(), mgr, 2, 4);
    let log = mgr.partition("t-0").unwrap();
    let pass = log.clean_now().unwrap().expect("a pass");
    assert_eq!(pass.end_offset, 5);
    assert_eq!(pass.messages_read, 5);
    assert_eq!(pass.bytes_read, initial);
    assert_eq!(pass.messages_written, 2);
    assert_eq!(pass.bytes_written, log.status().unwrap().size_bytes);
}

#[test]
fn test_partial_segment_clean() {
    // Two slots at a load factor of 0.75: one key per pass.
    let (tmp, mgr, log) = setup(2);
    for (k, v) in [(0, 0), (1, 1), (0, 0), (1, 1), (0, 0)] {
        record(&log, k, v);
    }
    log.roll().unwrap();
    drop(log);
    let mgr = with_first_dirty(tmp.path(), mgr, 2, 2);
    let log = mgr.partition("t-0").unwrap();
    log.clean_now().unwrap();
    assert_eq!(keys(&log), vec![1, 0, 1, 0]);
    assert_eq!(offsets(&log), vec![1, 2, 3, 4]);
    // The next passes go on from where the last stopped: 3, then 4.
    log.clean_now().unwrap();
    assert_eq!(keys(&log), vec![0, 1, 0]);
    assert_eq!(offsets(&log), vec![2, 3, 4]);
    log.clean_now().unwrap();
    assert_eq!(keys(&log), vec![1, 0]);
    assert_eq!(offsets(&log), vec![3, 4]);
}

#[test]
fn test_cleaning_with_unkeyed_messages() {
    let (_tmp, _mgr, log) = setup(1 << 16);
    log.set_config("cleanup.policy", "delete").unwrap();
    let values: Vec<String> = (0..10).map(|i| i.to_string()).collect();
    for v in &values {
        log.append(&[commitfs::record::NewRecord::value(v.as_bytes())])
            .unwrap();
    }
    log.roll().unwrap();
    let unkeyed_size = log.status().unwrap().size_bytes;
    log.set_config("cleanup.policy", "compact").unwrap();
    for i in 10..20 {
        record(&log, i, i);
    }
    log.roll().unwrap();
    let expected = log.status().unwrap().size_bytes - unkeyed_size;
    let pass = log.clean_now().unwrap().unwrap();
    assert!(
        decode_dir(log.local().dir())
            .iter()
            .flat_map(|b| &b.records)
            .all(|r| r.key.is_some()),
        "only keyed records are left"
    );
    assert_eq!(log.status().unwrap().size_bytes, expected);
    assert_eq!(
        pass.messages_read - pass.messages_written,
        10,
        "the invalid ones"
    );
}

#[test]
fn test_log_cleaner_retains_producer_last_sequence() {
    let (_tmp, _mgr, log) = setup(10);
    record(&log, 0, 0);
    idempotent(&log, 1, 0, &[0]);
    idempotent(&log, 2, 0, &[0]);
    idempotent(&log, 3, 0, &[0]);
    idempotent(&log, 2, 1, &[1]);
    log.roll().unwrap();
    log.clean_now().unwrap();
    assert_eq!(last_offsets_per_batch(&log), vec![1, 3, 4]);
    let batches = decode_dir(log.local().dir());
    let seqs: Vec<(i64, usize)> = batches
        .iter()
        .map(|b| (b.producer_id, b.records.len()))
        .collect();
    assert_eq!(
        seqs,
        vec![(1, 0), (3, 1), (2, 1)],
        "pid 1's last batch stays, emptied"
    );
    assert_eq!(keys(&log), vec![0, 1]);
    assert_eq!(offsets(&log), vec![3, 4]);
}

#[test]
fn test_duplicate_check_after_cleaning() {
    let (tmp, mgr, log) = setup(1 << 16);
    idempotent(&log, 1, 0, &[1, 2, 3]);
    idempotent(&log, 2, 0, &[3, 1, 4]);
    idempotent(&log, 3, 0, &[1, 4]);
    log.roll().unwrap();
    log.clean_now().unwrap();
    assert_eq!(last_offsets_per_batch(&log), vec![2, 5, 7]);
    assert_eq!(keys(&log), vec![2, 3, 1, 4]);
    assert_eq!(offsets(&log), vec![1, 3, 6, 7]);
    drop(log);
    mgr.close().unwrap();
    let mgr = open_with(tmp.path(), cleaner(1 << 16));
    let log = mgr.partition("t-0").unwrap();
    // Retries are answered with the offsets the batches were first stored at.
    assert_eq!(idempotent(&log, 1, 0, &[1, 2, 3]), (0, 2));
    assert_eq!(idempotent(&log, 3, 0, &[1, 4]), (6, 7));
    assert_eq!(idempotent(&log, 2, 0, &[3, 1, 4]), (3, 5));
    idempotent(&log, 4, 0, &[2]);
    log.roll().unwrap();
    log.clean_now().unwrap();
    assert_eq!(last_offsets_per_batch(&log), vec![2, 5, 7, 8]);
    assert_eq!(keys(&log), vec![3, 1, 4, 2]);
    assert_eq!(offsets(&log), vec![3, 6, 7, 8]);
    drop(log);
    mgr.close().unwrap();
    let mgr = open_with(tmp.path(), cleaner(1 << 16));
    let log = mgr.partition("t-0").unwrap();
    assert_eq!(
        idempotent(&log, 1, 0, &[1, 2, 3]),
        (0, 2),
        "still a duplicate"
    );
}

#[test]
fn test_clean_tombstone() {
    let (_tmp, _mgr, log) = setup(10);
    put(&log, &[("0", Some("0"))]);
    log.roll().unwrap();
    log.clean_now().unwrap();
    put(&log, &[("0", None)]);
    log.roll().unwrap();
    log.clean_now().unwrap();
    let first = &decode_dir(log.local().dir())[0];
    assert_eq!(first.last_offset, 1, "The tombstone should be retained.");
    assert!(first.delete_horizon, "its batch carries the horizon");
    put(&log, &[("1", Some("1"))]);
    log.roll().unwrap();
    log.clean_now().unwrap();
    assert_eq!(
        decode_dir(log.local().dir())[0].last_offset,
        1,
        "The tombstone should be retained."
    );
}

#[test]
fn test_log_to_clean_with_uncleanable_section() {
    let (tmp, mgr, log) = setup(10);
    for _ in 0..6 {
        put(&log, &[("1", Some("xxxxxxxxxxxxxxxxxxxxxxxxx"))]);
        log.roll().unwrap();
    }
    let sizes: Vec<u64> = super::decode::segment_bases(log.local().dir())
        .iter()
        .map(|b| {
            std::fs::metadata(log.local().dir().join(format!("{b:020}.log")))
                .unwrap()
                .len()
        })
        .collect();
    drop(log);
    let mgr = with_first_dirty(tmp.path(), mgr, 2, 10);
    let log = mgr.partition("t-0").unwrap();
    let (clean, cleanable) = (
        sizes[..2].iter().sum::<u64>(),
        sizes[2..6].iter().sum::<u64>(),
    );
    let status = log.cleaner_status().unwrap();
    assert_eq!(status.checkpoint, Some(2));
    let want = cleanable as f64 / (clean + cleanable) as f64;
    assert!(
        (status.dirty_ratio - want).abs() < 1e-6,
        "{} vs {want}",
        status.dirty_ratio
    );
}

/// `LogCleanerManagerTest.testCleanableOffsetsForNone` and friends: with
/// `min.compaction.lag.ms`, a segment newer than the lag is not cleaned,
/// nor any after it.
#[test]
fn min_compaction_lag_holds_new_segments_back() {
    let (_tmp, _mgr, log) = setup(10);
    log.set_config("min.compaction.lag.ms", "3600000").unwrap();
    put(&log, &[("a", Some("1"))]);
    put(&log, &[("a", Some("2"))]);
    log.roll().unwrap();
    put(&log, &[("b", Some("1"))]);
    assert!(
        log.clean_now().unwrap().is_none(),
        "every segment is within the lag"
    );
    assert_eq!(offsets(&log), vec![0, 1, 2]);
    log.set_config("min.compaction.lag.ms", "0").unwrap();
    log.clean_now().unwrap().unwrap();
    assert_eq!(offsets(&log), vec![1, 2]);
}

/// Kafka's `testBasicTransactionAwareCleaning`: the aborted transaction's
/// records go, the committed ones are cleaned as any, and the transaction
/// index is the same after the pass.
#[test]
fn test_basic_transaction_aware_cleaning() {
    let (_tmp, _mgr, log) = setup(1 << 16);
    let (mut s1, mut s2) = (0, 0);
    transactional(&log, 1, &mut s1, &[1, 2]);
    transactional(&log, 2, &mut s2, &[2, 3]);
    transactional(&log, 1, &mut s1, &[3, 4]);
    marker(&log, 1, false);
    marker(&log, 2, true);
    transactional(&log, 1, &mut s1, &[2]);
    marker(&log, 1, true);
    let aborted = log.aborted_transactions(0, log.log_end_offset()).unwrap();
    assert_eq!(aborted.len(), 1);
    log.roll().unwrap();
    log.clean_now().unwrap();
    assert_eq!(keys(&log), vec![3, 2]);
    // Markers hold a key and a value: they count, as in Kafka's
    // `offsetsInLog`; they stay while their transactions' batches do.
    assert_eq!(offsets(&log), vec![3, 6, 7, 8, 9]);
    assert_eq!(
        log.aborted_transactions(0, log.log_end_offset()).unwrap(),
        aborted
    );
}

/// Kafka's `testAbortMarkerRemoval`: the aborted records go at once; the
/// marker gets a delete horizon, and goes once it has passed.
#[test]
fn test_abort_marker_removal() {
    let (_tmp, _mgr, log) = setup(1 << 16);
    log.set_config("delete.retention.ms", "0").unwrap();
    let mut seq = 0;
    transactional(&log, 1, &mut seq, &[1]);
    transactional(&log, 1, &mut seq, &[2, 3]);
    marker(&log, 1, false);
    transactional(&log, 1, &mut seq, &[3]);
    marker(&log, 1, true);
    log.roll().unwrap();
    log.clean_now().unwrap();
    assert_eq!(keys(&log), vec![3]);
    assert_eq!(offsets(&log), vec![3, 4, 5]);
    // Kafka's `runTwoPassClean`: the first pass sets the abort marker's
    // delete horizon, the second, past it, removes it. Here a pass needs a
    // dirty section: a record of another key before each.
    put(&log, &[("9", Some("9"))]);
    log.roll().unwrap();
    log.clean_now().unwrap();
    assert_eq!(offsets(&log), vec![3, 4, 5, 6]);
    let marker_batch = |log: &PartitionLog| {
        decode_dir(log.local().dir())
            .into_iter()
            .find(|b| b.control && b.base_offset == 3)
    };
    assert!(
        marker_batch(&log).unwrap().delete_horizon,
        "its horizon is set"
    );
    put(&log, &[("9", Some("9"))]);
    log.roll().unwrap();
    log.clean_now().unwrap();
    assert!(marker_batch(&log).is_none(), "past its horizon it goes");
    assert_eq!(keys(&log), vec![3, 9]);
    assert_eq!(offsets(&log), vec![4, 5, 7]);
}

/// Kafka's `testAbortedTransactionSpanningSegments`: the batch stays as the
/// producer's last (empty), and so does the marker of its transaction.
#[test]
fn test_aborted_transaction_spanning_segments() {
    let (_tmp, _mgr, log) = setup(1 << 16);
    log.set_config("delete.retention.ms", "0").unwrap();
    let mut seq = 0;
    transactional(&log, 1, &mut seq, &[1]);
    log.roll().unwrap();
    marker(&log, 1, false);
    log.roll().unwrap();
    log.clean_now().unwrap();
    assert_eq!(offsets(&log), vec![1]);
    assert_eq!(last_offsets_per_batch(&log), vec![0, 1]);
    log.clean_now().unwrap();
    assert_eq!(offsets(&log), vec![1]);
    assert_eq!(last_offsets_per_batch(&log), vec![0, 1]);
}
