//! Idempotent producers' state in storage: a retry answered with its first
//! offsets, sequence gaps and old epochs refused, and the state kept in
//! Kafka's `.snapshot` files across a clean close, a crash, retention, and
//! printed by `commitfs dump` as kafka-dump-log prints it.

#[path = "support/bounded.rs"]
mod bounded;

use std::path::{Path, PathBuf};
use std::process::Command;

use commitfs::record::{NewRecord, encode_batch};
use commitfs::storage::producer_state::ProducerRefusal;
use commitfs::storage::{LogConfig, LogManager, OpenOptions, PartitionLog, StorageError};

/// The batches' timestamp: now, since a producer whose last batch is older
/// than a day has expired when its state is loaded.
fn ts() -> i64 {
    static TS: std::sync::OnceLock<i64> = std::sync::OnceLock::new();
    *TS.get_or_init(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64
    })
}

/// A client's batch of `n` records from producer `pid` at `epoch`, first
/// sequence `seq`: commitfs's encoder, with the producer fields set and the
/// CRC made again.
fn batch(pid: i64, epoch: i16, seq: i32, n: usize) -> Vec<u8> {
    let values: Vec<Vec<u8>> = (0..n).map(|i| format!("v{seq}-{i}").into_bytes()).collect();
    let records: Vec<NewRecord> = values.iter().map(|v| NewRecord::value(v)).collect();
    let mut b = Vec::new();
    encode_batch(&mut b, 0, ts(), &records);
    b[43..51].copy_from_slice(&pid.to_be_bytes());
    b[51..53].copy_from_slice(&epoch.to_be_bytes());
    b[53..57].copy_from_slice(&seq.to_be_bytes());
    let crc = commitfs::record::compute_crc(&b);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

fn open(dir: &Path) -> LogManager {
    LogManager::open(dir, LogConfig::default(), OpenOptions::default()).unwrap()
}

/// (first offset, duplicate) of a produced append.
fn produce(log: &PartitionLog, bytes: &[u8]) -> Result<(i64, bool), StorageError> {
    log.append_produced(bytes)
        .map(|i| (i.first_offset, i.duplicate))
}

fn refusal(r: Result<(i64, bool), StorageError>) -> ProducerRefusal {
    match r {
        Err(StorageError::Producer { refusal, .. }) => refusal,
        other => panic!("expected a producer refusal, got {other:?}"),
    }
}

fn snapshots(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "snapshot"))
        .collect();
    v.sort();
    v
}

#[test]
fn retries_sequences_and_epochs() {
    let tmp = tempfile::tempdir().unwrap();
    let mgr = open(tmp.path());
    let log = mgr.create_partition("t-0").unwrap();
    log.append(&[NewRecord::value(b"shell")]).unwrap();
    assert!(
        snapshots(log.local().dir()).is_empty(),
        "no producer state without producer ids"
    );
    assert_eq!(produce(&log, &batch(5, 0, 0, 3)).unwrap(), (1, false));
    assert_eq!(produce(&log, &batch(5, 0, 3, 2)).unwrap(), (4, false));
    // The resend of a stored batch gets its original offsets and adds nothing.
    assert_eq!(produce(&log, &batch(5, 0, 0, 3)).unwrap(), (1, true));
    assert_eq!(produce(&log, &batch(5, 0, 3, 2)).unwrap(), (4, true));
    assert_eq!(log.log_end_offset(), 6);
    assert_eq!(
        refusal(produce(&log, &batch(5, 0, 9, 1))),
        ProducerRefusal::OutOfOrderSequence
    );
    assert_eq!(produce(&log, &batch(5, 1, 0, 1)).unwrap(), (6, false));
    assert_eq!(
        refusal(produce(&log, &batch(5, 0, 5, 1))),
        ProducerRefusal::InvalidProducerEpoch
    );
    // A refusal is no failure: the partition carries on.
    assert!(log.offline_cause().is_none());
    assert_eq!(log.log_end_offset(), 7);
    // A request whose second batch is a retry is answered as the retry, and
    // its first batch leaves no trace.
    let mut two = batch(5, 1, 1, 1);
    two.extend(batch(5, 1, 0, 1));
    assert_eq!(produce(&log, &two).unwrap(), (6, true));
    assert_eq!(produce(&log, &batch(5, 1, 1, 1)).unwrap(), (7, false));
    // The first batch with a producer id marked where the state starts.
    let names: Vec<_> = snapshots(log.local().dir())
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["00000000000000000001.snapshot"]);
    mgr.close().unwrap();
}

#[test]
fn state_survives_a_clean_close_and_a_crash() {
    let tmp = tempfile::tempdir().unwrap();
    let mgr = open(tmp.path());
    let log = mgr.create_partition("t-0").unwrap();
    for i in 0..3 {
        produce(&log, &batch(9, 2, i * 2, 2)).unwrap();
    }
    log.roll().unwrap();
    produce(&log, &batch(9, 2, 6, 2)).unwrap();
    mgr.close().unwrap();
    let dir = tmp.path().join("t-0");
    // Marker at 0, roll at 6, close at the log end 8.
    assert_eq!(snapshots(&dir).len(), 3, "{:?}", snapshots(&dir));

    let mgr = open(tmp.path());
    let log = mgr.partition("t-0").unwrap();
    assert_eq!(produce(&log, &batch(9, 2, 6, 2)).unwrap(), (6, true));
    assert_eq!(produce(&log, &batch(9, 2, 8, 1)).unwrap(), (8, false));
    // A crash: no close, no snapshot at the log end; the load replays the
    // active segment from its roll snapshot.
    drop(log);
    drop(mgr);
    let mgr = open(tmp.path());
    let log = mgr.partition("t-0").unwrap();
    assert_eq!(produce(&log, &batch(9, 2, 8, 1)).unwrap(), (8, true));
    assert_eq!(
        refusal(produce(&log, &batch(9, 2, 10, 1))),
        ProducerRefusal::OutOfOrderSequence
    );
    assert_eq!(produce(&log, &batch(9, 2, 9, 1)).unwrap(), (9, false));
    mgr.close().unwrap();
}

#[test]
fn a_corrupt_snapshot_is_skipped_and_snapshots_leave_with_their_segment() {
    let tmp = tempfile::tempdir().unwrap();
    let mgr = open(tmp.path());
    let log = mgr.create_partition("t-0").unwrap();
    produce(&log, &batch(3, 0, 0, 1)).unwrap();
    log.roll().unwrap();
    produce(&log, &batch(3, 0, 1, 1)).unwrap();
    drop(log);
    drop(mgr);
    let dir = tmp.path().join("t-0");
    // The roll's snapshot torn, as a power loss may leave it.
    std::fs::write(dir.join("00000000000000000001.snapshot"), b"\0\x01garbage").unwrap();
    let mgr = open(tmp.path());
    let log = mgr.partition("t-0").unwrap();
    assert_eq!(produce(&log, &batch(3, 0, 1, 1)).unwrap(), (1, true));
    // delete-records past the first segment takes its snapshot with it.
    log.roll().unwrap();
    log.delete_records_before(2).unwrap();
    assert!(!dir.join("00000000000000000000.snapshot").exists());
    assert!(dir.join("00000000000000000002.snapshot").exists());
    // The state stays (as Kafka keeps it until the producer id expires).
    assert_eq!(produce(&log, &batch(3, 0, 1, 1)).unwrap(), (1, true));
    mgr.close().unwrap();
}

#[test]
fn dump_prints_our_snapshots_as_kafka_dump_log() {
    let tmp = tempfile::tempdir().unwrap();
    let mgr = open(tmp.path());
    let log = mgr.create_partition("t-0").unwrap();
    produce(&log, &batch(11, 0, 0, 4)).unwrap();
    produce(&log, &batch(12, 1, 7, 2)).unwrap();
    mgr.close().unwrap();
    let snap = tmp.path().join("t-0/00000000000000000006.snapshot");
    let out = bounded::run(
        Command::new(env!("CARGO_BIN_EXE_commitfs"))
            .arg("dump")
            .arg(&snap),
        "commitfs dump of a snapshot",
    );
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let ts = ts();
    assert_eq!(lines[0], format!("Dumping {}", snap.display()));
    assert_eq!(
        &lines[1..],
        [
            format!(
                "producerId: 11 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: \
                 OptionalLong.empty lastTimestamp: {ts} firstSequence: 0 lastSequence: 3 \
                 lastOffset: 3 offsetDelta: 3 timestamp: {ts}"
            ),
            format!(
                "producerId: 12 producerEpoch: 1 coordinatorEpoch: -1 currentTxnFirstOffset: \
                 OptionalLong.empty lastTimestamp: {ts} firstSequence: 7 lastSequence: 8 \
                 lastOffset: 5 offsetDelta: 1 timestamp: {ts}"
            ),
        ]
    );
}
