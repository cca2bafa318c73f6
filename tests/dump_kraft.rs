//! `commitfs dump` on the files of a real Kafka 3.8 KRaft data directory
//! (tests/fixtures/kafka/codecrafters-kafka-tester): the metadata log, the
//! bootstrap snapshot and producer snapshots, plus `.txnindex`,
//! `--index-sanity-check`, `--max-bytes` and `--skip-record-metadata`.
//!
//! The expected lines are in kafka-dump-log's format (Kafka 4.1); their
//! values were read off the bytes and checked against the data directory's
//! own witnesses (`meta.properties`: directory id `AiSXPLrdRM-HREWplhnaNA`;
//! `quorum-state`: leader 1, voters [1]).

#[path = "support/bounded.rs"]
mod bounded;
#[path = "support/dump.rs"]
mod run_dump;

use std::path::PathBuf;

use run_dump::dump;

use commitfs::record::state_files::{AbortedTxn, ProducerEntry, write_producer_snapshot};

fn fixture(rel: &str) -> PathBuf {
    [
        env!("CARGO_MANIFEST_DIR"),
        "tests/fixtures/kafka/codecrafters-kafka-tester",
        rel,
    ]
    .iter()
    .collect()
}

/// A file named `name` holding `bytes`, alone in a directory that lasts as
/// long as the returned handle: dump goes by the name's suffix.
fn written(name: &str, bytes: &[u8]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    (dir, path)
}

fn line_of(out: &str, offset: i64) -> &str {
    let prefix = format!("| offset: {offset} ");
    out.lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no offset {offset} in {out}"))
}

const DIR: &str = "AiSXPLrdRM-HREWplhnaNA";
const TOPIC: &str = "fZi4qEpCTsik-rzkyV0Ypg";

#[test]
fn cluster_metadata_log_of_a_real_broker() {
    let log = fixture("__cluster_metadata-0/00000000000000000000.log");
    let (code, out, err) = dump(&["--cluster-metadata-decoder"], &[&log]);
    assert_eq!(code, 0, "{err}");
    let payload = |ty: &str, version: i32, data: &str| {
        format!(r#"payload: {{"type":"{ty}","version":{version},"data":{data}}}"#)
    };
    // (offset, CreateTime, keySize, valueSize, what the record decodes to)
    let want: [(i64, i64, i32, i32, String); 11] = [
        (
            0,
            1725272014353,
            4,
            19,
            r#"LeaderChange: {"version":0,"leaderId":1,"voters":[{"voterId":1}],"grantingVoters":[{"voterId":1}]}"#
                .to_string(),
        ),
        (
            1,
            1725272014403,
            -1,
            24,
            payload("BEGIN_TRANSACTION_RECORD", 0, r#"{"name":"Bootstrap records"}"#),
        ),
        (
            2,
            1725272014403,
            -1,
            23,
            payload(
                "FEATURE_LEVEL_RECORD",
                0,
                r#"{"name":"metadata.version","featureLevel":20}"#,
            ),
        ),
        (
            3,
            1725272014403,
            -1,
            5,
            payload("ZK_MIGRATION_STATE_RECORD", 0, r#"{"zkMigrationState":0}"#),
        ),
        (4, 1725272014403, -1, 4, payload("END_TRANSACTION_RECORD", 0, "{}")),
        (
            5,
            1725272014480,
            -1,
            78,
            payload(
                "REGISTER_CONTROLLER_RECORD",
                0,
                r#"{"controllerId":1,"incarnationId":"IINQdyyYTmm1sC6Dj-riIA","zkMigrationReady":false,"endPoints":[{"name":"CONTROLLER","host":"ryans-laptop","port":9093,"securityProtocol":0}],"features":[{"name":"metadata.version","minSupportedVersion":1,"maxSupportedVersion":20}]}"#,
            ),
        ),
        (
            6,
            1725272014514,
            -1,
            104,
            payload(
                "REGISTER_BROKER_RECORD",
                3,
                &format!(
                    r#"{{"brokerId":1,"isMigratingZkBroker":false,"incarnationId":"iSVO518sQIiDDdNEcPZBBA","brokerEpoch":6,"endPoints":[{{"name":"PLAINTEXT","host":"localhost","port":9092,"securityProtocol":0}}],"features":[{{"name":"metadata.version","minSupportedVersion":1,"maxSupportedVersion":20}}],"rack":null,"fenced":true,"inControlledShutdown":false,"logDirs":["{DIR}"]}}"#
                ),
            ),
        ),
        (
            7,
            1725272014594,
            -1,
            19,
            payload(
                "BROKER_REGISTRATION_CHANGE_RECORD",
                0,
                r#"{"brokerId":1,"brokerEpoch":6,"fenced":-1}"#,
            ),
        ),
        (8, 1725272014908, -1, 4, payload("NO_OP_RECORD", 0, "{}")),
        (
            22,
            1725272021745,
            -1,
            24,
            payload(
                "TOPIC_RECORD",
                0,
                &format!(r#"{{"name":"foo","topicId":"{TOPIC}"}}"#),
            ),
        ),
        (
            23,
            1725272021745,
            -1,
            65,
            payload(
                "PARTITION_RECORD",
                1,
                &format!(
                    r#"{{"partitionId":0,"topicId":"{TOPIC}","replicas":[1],"isr":[1],"removingReplicas":[],"addingReplicas":[],"leader":1,"leaderEpoch":0,"partitionEpoch":0,"directories":["{DIR}"]}}"#
                ),
            ),
        ),
    ];
    for (o, ts, k, v, decoded) in &want {
        assert_eq!(
            line_of(&out, *o),
            format!(
                "| offset: {o} CreateTime: {ts} keySize: {k} valueSize: {v} sequence: -1 headerKeys: [] {decoded}"
            )
        );
    }
    // Every record decodes.
    assert!(!out.contains("skipping"), "{out}");
}

#[test]
fn skip_record_metadata_and_max_bytes() {
    let log = fixture("__cluster_metadata-0/00000000000000000000.log");
    let (code, out, _) = dump(
        &[
            "--cluster-metadata-decoder",
            "--skip-record-metadata",
            "--max-bytes",
            "236",
        ],
        &[&log],
    );
    assert_eq!(code, 0);
    let lines: Vec<&str> = out.lines().collect();
    // Two whole batches fit in 236 bytes (91 + 145); no "invalid bytes" line
    // under --max-bytes. The control record's line is empty (Kafka 4.1 prints
    // the payload after one space when the metadata is skipped).
    assert_eq!(lines.len(), 2 + 1 + 1 + 1 + 4, "{out}");
    assert!(lines[2].starts_with("baseOffset: 0 lastOffset: 0 count: 1 "));
    assert_eq!(lines[3], "");
    assert!(lines[4].starts_with("baseOffset: 1 lastOffset: 4 count: 4 "));
    assert_eq!(
        lines[6],
        " payload: {\"type\":\"FEATURE_LEVEL_RECORD\",\"version\":0,\"data\":{\"name\":\"metadata.version\",\"featureLevel\":20}}"
    );
}

#[test]
fn kraft_snapshots_print_their_header_and_control_records() {
    let dir = tempfile::tempdir().unwrap();
    let named = dir
        .path()
        .join("00000000000000000100-0000000001.checkpoint");
    std::fs::copy(fixture("bootstrap.checkpoint"), &named).unwrap();
    let boot = fixture("bootstrap.checkpoint");
    let (code, out, err) = dump(&["--cluster-metadata-decoder"], &[&boot, &named]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[1], "KRaft bootstrap snapshot");
    assert_eq!(
        lines[3],
        "| offset: 0 CreateTime: 1725272012705 keySize: 4 valueSize: 11 sequence: -1 headerKeys: [] SnapshotHeader {\"version\":0,\"lastContainedLogTimestamp\":0}"
    );
    assert_eq!(
        lines[7],
        "| offset: 2 CreateTime: 1725272012716 keySize: 4 valueSize: 3 sequence: -1 headerKeys: [] SnapshotFooter {\"version\":0}"
    );
    assert!(
        out.contains("\nSnapshot end offset: 100, epoch: 1\n"),
        "{out}"
    );
}

#[test]
fn producer_snapshots() {
    let real = fixture("foo-0/00000000000000000003.snapshot");
    let empty = fixture("__cluster_metadata-0/00000000000000000081.snapshot");
    let (code, out, err) = dump(&[], &[&real, &empty]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[1],
        "producerId: 0 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong.empty \
         lastTimestamp: 1725272041932 firstSequence: 2 lastSequence: 2 lastOffset: 2 offsetDelta: 0 \
         timestamp: 1725272041932"
    );
    assert_eq!(lines.len(), 3, "{out}");

    // A transactional producer, written in Kafka's layout; then a flipped byte.
    let mut bytes = write_producer_snapshot(&[ProducerEntry {
        producer_id: 7,
        epoch: 3,
        last_sequence: 1,
        last_offset: 41,
        offset_delta: 4,
        timestamp: 1_700_000_000_000,
        coordinator_epoch: 5,
        current_txn_first_offset: 37,
    }]);
    let (_dir, path) = written("00000000000000000042.snapshot", &bytes);
    let (_, out, _) = dump(&[], &[&path]);
    assert_eq!(
        out.lines().nth(1).unwrap(),
        "producerId: 7 producerEpoch: 3 coordinatorEpoch: 5 currentTxnFirstOffset: OptionalLong[37] \
         lastTimestamp: 1700000000000 firstSequence: 2147483645 lastSequence: 1 lastOffset: 41 \
         offsetDelta: 4 timestamp: 1700000000000"
    );
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let (_, out, err) = dump(&[], &[&path]);
    assert_eq!(out.lines().count(), 1);
    assert!(
        err.starts_with("Snapshot is corrupt (CRC is no longer valid). Stored crc: "),
        "{err}"
    );
}

#[test]
fn transaction_index_entries() {
    let mut bytes = AbortedTxn {
        version: 0,
        producer_id: 98323,
        first_offset: 5,
        last_offset: 9,
        last_stable_offset: 5,
    }
    .to_bytes()
    .to_vec();
    bytes.extend_from_slice(&[0; 10]); // a torn entry is not read
    let (_dir, path) = written("00000000000000000000.txnindex", &bytes);
    let (code, out, _) = dump(&[], &[&path]);
    assert_eq!(code, 0);
    assert_eq!(
        out.lines().collect::<Vec<_>>()[1..],
        ["version: 0 producerId: 98323 firstOffset: 5 lastOffset: 9 lastStableOffset: 5"]
    );
}

#[test]
fn index_sanity_check() {
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("00000000000000000000.index");
    let time = dir.path().join("00000000000000000000.timeindex");
    std::fs::write(&index, [0, 0, 0, 5, 0, 0, 0, 0]).unwrap();
    let mut t = 10i64.to_be_bytes().to_vec();
    t.extend_from_slice(&5i32.to_be_bytes());
    std::fs::write(&time, &t).unwrap();
    let (code, out, _) = dump(&["--index-sanity-check"], &[&index, &time]);
    assert_eq!(code, 0);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[1],
        format!("{} passed sanity check.", index.display())
    );
    assert_eq!(lines[3], format!("{} passed sanity check.", time.display()));

    std::fs::write(&index, [0, 0, 0, 5, 0, 0, 0, 0, 0, 0]).unwrap();
    let (code, _, err) = dump(&["--index-sanity-check"], &[&index]);
    assert_eq!(code, 1);
    assert_eq!(
        err.trim_end(),
        format!(
            "Index file {} is corrupt, found 10 bytes which is neither positive nor a multiple of 8",
            index.display()
        )
    );
}
