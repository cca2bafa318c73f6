//! Transactions in storage (issue 21): a client's transactional batches
//! and the coordinator's markers, the last stable offset they leave, the
//! `.txnindex` entry of an abort, and all of it again after a clean close
//! and after a crash. The batches are encoded, and the log read back, by
//! kafka-protocol (another implementation than commitfs's codec).

#[path = "support/batch.rs"]
mod batch;

use bytes::BytesMut;
use kafka_protocol::records::{Compression, RecordBatchDecoder};

use commitfs::record::NewRecord;
use commitfs::record::state_files::AbortedTxn;
use commitfs::storage::producer_state::ProducerRefusal;
use commitfs::storage::{LogConfig, LogManager, OpenOptions, PartitionLog, StorageError};

fn open(dir: &std::path::Path) -> LogManager {
    LogManager::open(
        dir,
        LogConfig::default(),
        OpenOptions::without_cleaner_threads(),
    )
    .unwrap()
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// One batch of `n` records of producer `pid`, first sequence `seq`,
/// transactional or not, as kafka-protocol encodes it.
fn batch(pid: i64, epoch: i16, seq: i32, n: usize, transactional: bool) -> BytesMut {
    let records = (0..n).map(|i| {
        let key = Some(format!("k{pid}-{}", seq + i as i32).into_bytes().into());
        (key, Some(b"v".to_vec().into()))
    });
    let producer = (pid, epoch);
    batch::encode(
        producer,
        Some(seq),
        transactional,
        now(),
        records,
        Compression::None,
    )
}

fn txn(log: &PartitionLog, pid: i64, seq: i32, n: usize) -> i64 {
    log.append_transactional(&batch(pid, 0, seq, n, true))
        .unwrap()
        .first_offset
}

/// A control record as kafka-protocol reads it: (offset, producer id,
/// transactional, marker key, marker value).
type ControlRecord = (i64, i64, bool, Vec<u8>, Vec<u8>);

/// Each control record of the segment at 0.
fn markers(log: &PartitionLog) -> Vec<ControlRecord> {
    let bytes = std::fs::read(log.local().dir().join(format!("{:020}.log", 0))).unwrap();
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() {
        let len = i32::from_be_bytes(bytes[pos + 8..pos + 12].try_into().unwrap()) as usize;
        let frame = &bytes[pos..pos + 12 + len];
        let set = RecordBatchDecoder::decode(&mut &frame[..]).unwrap();
        for r in &set.records {
            if r.control {
                out.push((
                    r.offset,
                    r.producer_id,
                    r.transactional,
                    r.key.as_ref().unwrap().to_vec(),
                    r.value.as_ref().unwrap().to_vec(),
                ));
            }
        }
        pos += 12 + len;
    }
    out
}

/// An aborted transaction: (producer id, first offset, last offset, last
/// stable offset).
type Aborted = (i64, i64, i64, i64);

/// The `.txnindex` of the segment at `base`, read here rather than by
/// commitfs: entries of 34 bytes as Kafka's `AbortedTxn` lays them out, a
/// version 0 in two bytes then the four longs.
fn txn_index(log: &PartitionLog, base: i64) -> Vec<Aborted> {
    let path = log.local().dir().join(format!("{base:020}.txnindex"));
    let bytes = std::fs::read(&path).unwrap_or_default();
    assert_eq!(bytes.len() % 34, 0, "whole entries only");
    let entries = bytes.chunks_exact(34).map(|e| {
        assert_eq!(e[..2], [0, 0], "version 0");
        let long = |at: usize| i64::from_be_bytes(e[at..at + 8].try_into().unwrap());
        (long(2), long(10), long(18), long(26))
    });
    entries.collect()
}

/// What the log answers a read_committed fetch with, as [`Aborted`].
fn aborted_transactions(log: &PartitionLog, from: i64, to: i64) -> Vec<Aborted> {
    let txns = log.aborted_transactions(from, to).unwrap();
    let fields = |t: AbortedTxn| {
        assert_eq!(t.version, 0);
        (
            t.producer_id,
            t.first_offset,
            t.last_offset,
            t.last_stable_offset,
        )
    };
    txns.into_iter().map(fields).collect()
}

#[test]
fn a_transaction_is_unstable_until_its_marker_and_an_abort_is_indexed() {
    let tmp = tempfile::tempdir().unwrap();
    let mgr = open(tmp.path());
    let log = mgr.create_partition("t-0").unwrap();
    log.append(&[NewRecord::value(b"a"), NewRecord::value(b"b")])
        .unwrap();
    assert_eq!((log.last_stable_offset(), log.high_watermark()), (2, 2));

    assert_eq!(txn(&log, 7, 0, 2), 2);
    assert_eq!(txn(&log, 8, 0, 1), 4);
    assert_eq!(txn(&log, 7, 2, 1), 5);
    assert_eq!((log.last_stable_offset(), log.high_watermark()), (2, 6));
    assert_eq!(log.open_transactions(), vec![(2, 7), (4, 8)]);

    // Producer 7 aborts: stable up to producer 8's open transaction.
    assert_eq!(log.append_end_txn_marker(7, 0, 3, false).unwrap(), 6);
    assert_eq!(log.last_stable_offset(), 4);
    assert_eq!(txn_index(&log, 0), vec![(7, 2, 6, 4)]);
    assert_eq!(aborted_transactions(&log, 0, 7), vec![(7, 2, 6, 4)]);
    assert_eq!(aborted_transactions(&log, 7, 100), vec![]);

    // Producer 8 commits: nothing open, nothing more indexed.
    assert_eq!(log.append_end_txn_marker(8, 0, 3, true).unwrap(), 7);
    assert_eq!((log.last_stable_offset(), log.high_watermark()), (8, 8));
    assert_eq!(txn_index(&log, 0).len(), 1);

    // The markers as Kafka's reader sees them: transactional control
    // batches, key (version 0, type: 0 ABORT, 1 COMMIT), value (version 0,
    // coordinator epoch).
    let key = |t: u8| vec![0, 0, 0, t];
    let value = vec![0, 0, 0, 0, 0, 3];
    assert_eq!(
        markers(&log),
        vec![
            (6, 7, true, key(0), value.clone()),
            (7, 8, true, key(1), value.clone())
        ]
    );

    // A marker of a transaction that wrote nothing here completes none.
    assert_eq!(log.append_end_txn_marker(9, 0, 3, false).unwrap(), 8);
    assert_eq!(log.last_stable_offset(), 9);
    assert_eq!(txn_index(&log, 0).len(), 1);
    drop(log);
    mgr.close().unwrap();

    let mgr = open(tmp.path());
    let log = mgr.partition("t-0").unwrap();
    assert_eq!((log.last_stable_offset(), log.high_watermark()), (9, 9));
    assert_eq!(aborted_transactions(&log, 0, 9), vec![(7, 2, 6, 4)]);
}

/// Open transactions come back from the snapshots and the batches after
/// them, markers included, after a clean close and after a crash.
#[test]
fn open_transactions_survive_a_close_and_a_crash() {
    for crash in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let mgr = open(tmp.path());
        let log = mgr.create_partition("t-0").unwrap();
        txn(&log, 7, 0, 2);
        txn(&log, 8, 0, 1);
        // A roll writes a snapshot: producer 7's transaction is open in it,
        // and its marker comes after it.
        log.roll().unwrap();
        log.append_end_txn_marker(7, 0, 1, true).unwrap();
        txn(&log, 7, 2, 1);
        assert_eq!(log.open_transactions(), vec![(2, 8), (4, 7)]);
        drop(log);
        if crash {
            drop(mgr);
            let _ = std::fs::remove_file(tmp.path().join(".kafka_cleanshutdown"));
        } else {
            mgr.close().unwrap();
        }
        let mgr = open(tmp.path());
        let log = mgr.partition("t-0").unwrap();
        assert_eq!(
            log.open_transactions(),
            vec![(2, 8), (4, 7)],
            "crash {crash}"
        );
        assert_eq!(log.last_stable_offset(), 2);
        log.append_end_txn_marker(8, 0, 1, false).unwrap();
        assert_eq!(log.last_stable_offset(), 4);
        log.append_end_txn_marker(7, 0, 1, true).unwrap();
        assert_eq!(log.last_stable_offset(), log.high_watermark());
        drop(log);
        mgr.close().unwrap();
    }
}

fn refusal(e: StorageError) -> ProducerRefusal {
    match e {
        StorageError::Producer { refusal, .. } => refusal,
        other => panic!("not a producer refusal: {other}"),
    }
}

#[test]
fn a_plain_batch_in_a_transaction_and_stale_markers_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let mgr = open(tmp.path());
    let log = mgr.create_partition("t-0").unwrap();
    txn(&log, 7, 0, 1);
    let e = log
        .append_transactional(&batch(7, 0, 1, 1, false))
        .unwrap_err();
    assert_eq!(refusal(e), ProducerRefusal::InvalidTxnState);
    assert_eq!(log.high_watermark(), 1, "nothing of it was written");

    log.append_end_txn_marker(7, 0, 5, true).unwrap();
    let e = log.append_end_txn_marker(7, 0, 4, true).unwrap_err();
    assert_eq!(refusal(e), ProducerRefusal::CoordinatorFenced);
    // A new epoch (the coordinator fenced the producer), then the old one.
    log.append_end_txn_marker(7, 1, 5, false).unwrap();
    let e = log.append_end_txn_marker(7, 0, 5, false).unwrap_err();
    assert_eq!(refusal(e), ProducerRefusal::InvalidProducerEpoch);
    assert_eq!(log.high_watermark(), 3);
    // The listener's path still refuses transactional batches.
    let e = log.append_produced(&batch(7, 1, 0, 1, true)).unwrap_err();
    assert_eq!(refusal(e), ProducerRefusal::Transactional);
    drop(log);
    mgr.close().unwrap();
}

/// After a crash, the recovered segments' `.txnindex` files are rebuilt
/// from the markers replayed: a lost file comes back whole, and an entry
/// whose marker the recovery cut away goes.
#[test]
fn recovery_rebuilds_the_transaction_index() {
    let tmp = tempfile::tempdir().unwrap();
    let mgr = open(tmp.path());
    let log = mgr.create_partition("t-0").unwrap();
    txn(&log, 7, 0, 2);
    txn(&log, 8, 0, 1);
    log.append_end_txn_marker(7, 0, 1, false).unwrap();
    txn(&log, 9, 0, 1);
    log.append_end_txn_marker(8, 0, 1, false).unwrap();
    let before = txn_index(&log, 0);
    assert_eq!(before, vec![(7, 0, 3, 2), (8, 2, 5, 4)]);
    let dir = log.local().dir().to_path_buf();
    let (log_path, index_path) = (
        dir.join(format!("{:020}.log", 0)),
        dir.join(format!("{:020}.txnindex", 0)),
    );
    let len_before_last_marker = std::fs::metadata(&log_path).unwrap().len() - 78;
    drop(log);
    drop(mgr);

    // The index lost: rebuilt whole.
    std::fs::remove_file(&index_path).unwrap();
    let _ = std::fs::remove_file(tmp.path().join(".kafka_cleanshutdown"));
    let mgr = open(tmp.path());
    let log = mgr.partition("t-0").unwrap();
    assert_eq!(txn_index(&log, 0), before);
    assert_eq!(log.open_transactions(), vec![(4, 9)]);
    drop(log);
    drop(mgr);

    // The last marker torn away: its entry goes, its transaction is open.
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&log_path)
        .unwrap();
    f.set_len(len_before_last_marker + 30).unwrap();
    drop(f);
    let _ = std::fs::remove_file(tmp.path().join(".kafka_cleanshutdown"));
    let mgr = open(tmp.path());
    let log = mgr.partition("t-0").unwrap();
    assert_eq!(log.high_watermark(), 5);
    assert_eq!(txn_index(&log, 0), vec![(7, 0, 3, 2)]);
    assert_eq!(log.open_transactions(), vec![(2, 8), (4, 9)]);
    assert_eq!(log.last_stable_offset(), 2);
    drop(log);
    mgr.close().unwrap();
}

/// Kafka's cleanableOffsets: the cleaner stops at the segment holding the
/// last stable offset, so an open transaction's batches stay until its
/// marker is written.
#[test]
fn the_cleaner_does_not_clean_past_an_open_transaction() {
    let tmp = tempfile::tempdir().unwrap();
    let mgr = open(tmp.path());
    let log = mgr.create_partition("t-0").unwrap();
    log.set_config("cleanup.policy", "compact").unwrap();
    let put = |key: &str| {
        log.append(&[NewRecord::keyed(key.as_bytes(), b"v")])
            .unwrap()
            .first_offset
    };
    put("k");
    put("k");
    log.roll().unwrap();
    // Producer 7's transaction writes key k7-0 at 2 in a segment of its
    // own; k7-0 comes again as a plain record at 3, in the next one.
    assert_eq!(txn(&log, 7, 0, 1), 2);
    log.roll().unwrap();
    assert_eq!(put("k7-0"), 3);
    log.roll().unwrap();
    assert_eq!(log.last_stable_offset(), 2);
    log.clean_now().unwrap();
    let offsets = |log: &PartitionLog| -> Vec<i64> {
        (0..log.high_watermark())
            .filter(|o| log.read(*o).is_ok())
            .collect()
    };
    // Cleaned below the transaction's segment only: its record stays.
    assert_eq!(offsets(&log), vec![1, 2, 3]);
    log.append_end_txn_marker(7, 0, 0, true).unwrap();
    log.roll().unwrap();
    log.clean_now().unwrap();
    assert_eq!(offsets(&log), vec![1, 3]);
    drop(log);
    mgr.close().unwrap();
}

/// An aborted transaction that spans a roll is indexed in the segment its
/// marker went to, and a read_committed fetch of its first segment still
/// finds it (the search goes on into the later segments).
#[test]
fn an_abort_is_indexed_in_its_markers_segment() {
    let tmp = tempfile::tempdir().unwrap();
    let mgr = open(tmp.path());
    let log = mgr.create_partition("t-0").unwrap();
    txn(&log, 7, 0, 2);
    log.roll().unwrap();
    log.append(&[NewRecord::value(b"plain")]).unwrap();
    assert_eq!(log.append_end_txn_marker(7, 0, 0, false).unwrap(), 3);
    assert_eq!(txn_index(&log, 0), vec![]);
    assert_eq!(txn_index(&log, 2), vec![(7, 0, 3, 4)]);
    assert_eq!(aborted_transactions(&log, 0, 4), vec![(7, 0, 3, 4)]);
    drop(log);
    mgr.close().unwrap();
}

/// A partition's `status` in the tree names its last stable offset and the
/// transactions that hold it back (producer@first offset); a shell append
/// is never held back by one.
#[test]
fn status_shows_the_last_stable_offset_and_open_transactions() {
    use commitfs::backend::Backend;
    use commitfs::backend::local::LocalBackend;
    let tmp = tempfile::tempdir().unwrap();
    let mgr = std::sync::Arc::new(open(tmp.path()));
    let log = mgr.create_partition("t-0").unwrap();
    let backend = LocalBackend::new(mgr.clone());
    let status = || backend.partition("t-0").unwrap().status().unwrap().text();
    assert!(
        status().contains("last_stable_offset: 0\nopen_transactions:\n"),
        "{}",
        status()
    );
    log.append(&[NewRecord::value(b"plain")]).unwrap();
    assert_eq!(txn(&log, 7, 0, 2), 1);
    assert_eq!(txn(&log, 9, 0, 1), 3);
    // The shell's append lands at once, above the open transactions.
    assert_eq!(
        log.append(&[NewRecord::value(b"shell")])
            .unwrap()
            .first_offset,
        4
    );
    assert!(status().contains("high_watermark: 5\n"), "{}", status());
    assert!(
        status().contains("last_stable_offset: 1\nopen_transactions: 7@1 9@3\n"),
        "{}",
        status()
    );
    log.append_end_txn_marker(7, 0, 0, true).unwrap();
    assert!(
        status().contains("last_stable_offset: 3\nopen_transactions: 9@3\n"),
        "{}",
        status()
    );
}

/// `offset/N` of a transaction's record says what became of it in the
/// xattr `user.kafka.transaction`: committed, aborted or open; a plain
/// record has none.
#[test]
fn a_records_xattr_says_what_became_of_its_transaction() {
    use commitfs::backend::local::LocalBackend;
    use commitfs::fs::Tree;
    use std::ffi::OsStr;
    let tmp = tempfile::tempdir().unwrap();
    let mgr = std::sync::Arc::new(open(tmp.path()));
    let log = mgr.create_partition("t-0").unwrap();
    assert_eq!(txn(&log, 7, 0, 1), 0);
    assert_eq!(txn(&log, 8, 0, 1), 1);
    log.append_end_txn_marker(7, 0, 0, false).unwrap();
    log.append_end_txn_marker(8, 0, 0, true).unwrap();
    assert_eq!(txn(&log, 9, 0, 1), 4);
    log.append(&[NewRecord::value(b"plain")]).unwrap();
    let tree = Tree::new(std::sync::Arc::new(LocalBackend::new(mgr.clone())));
    let dir = tree.lookup(1, OsStr::new("t-0")).unwrap().attr.ino;
    let offsets = tree.lookup(dir, OsStr::new("offset")).unwrap().attr.ino;
    let outcome = |n: i64| {
        let ino = tree
            .lookup(offsets, OsStr::new(&n.to_string()))
            .unwrap()
            .attr
            .ino;
        tree.getxattr(ino, OsStr::new("user.kafka.transaction"))
            .map(|v| String::from_utf8(v).unwrap())
            .map_err(|e| e.errno)
    };
    assert_eq!(outcome(0), Ok("aborted".to_string()));
    assert_eq!(outcome(1), Ok("committed".to_string()));
    assert_eq!(outcome(4), Ok("open".to_string()));
    assert_eq!(outcome(5), Err(libc::ENODATA), "a plain record");
}
