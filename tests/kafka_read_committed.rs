//! A `read_committed` consumer over the listener (issue 21): Fetch bounded
//! by the last stable offset with the aborted transactions listed, and
//! ListOffsets' LATEST at the last stable offset; then confluent-kafka and
//! kafka-python, whose consumers skip an aborted transaction's records by
//! that list and its marker, read what Kafka would let them read.
//!
//! The transactions are written through the library (the listener does not
//! take transactional produces yet): producer 7's record aborted, producer
//! 8's committed, producer 9's left open.

#[path = "support/batch.rs"]
mod batch;
mod kafka_support;

use kafka_protocol::messages::ApiKey;
use kafka_protocol::messages::fetch_response::FetchResponse;
use kafka_protocol::messages::list_offsets_request::{
    ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic,
};
use kafka_protocol::messages::list_offsets_response::ListOffsetsResponse;
use kafka_protocol::records::{Compression, RecordBatchDecoder};

use commitfs::record::NewRecord;
use commitfs::storage::{LogConfig, LogManager, OpenOptions, PartitionLog};
use kafka_support::{Conn, PY_CONSUME_ISOLATED, Server, python, require, run_python};

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Producer `pid`'s transactional batch of one record, value `v`.
fn txn(log: &PartitionLog, pid: i64, v: &str) -> i64 {
    let records = [(None, Some(v.as_bytes().to_vec().into()))];
    let buf = batch::encode((pid, 0), Some(0), true, now(), records, Compression::None);
    log.append_transactional(&buf).unwrap().first_offset
}

/// t-0: `plain` (0), producer 7's `aborted` (1), producer 8's `committed`
/// (2), 7's ABORT (3), 8's COMMIT (4), `after` (5), producer 9's `open`
/// (6), `last` (7). The last stable offset is 6, the high watermark 8.
fn data_dir() -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mgr = LogManager::open(&data, LogConfig::default(), OpenOptions::default()).unwrap();
    let log = mgr.create_partition("t-0").unwrap();
    let plain = |v: &str| log.append(&[NewRecord::value(v.as_bytes())]).unwrap();
    plain("plain");
    assert_eq!(txn(&log, 7, "aborted"), 1);
    assert_eq!(txn(&log, 8, "committed"), 2);
    assert_eq!(log.append_end_txn_marker(7, 0, 0, false).unwrap(), 3);
    assert_eq!(log.append_end_txn_marker(8, 0, 0, true).unwrap(), 4);
    plain("after");
    assert_eq!(txn(&log, 9, "open"), 6);
    plain("last");
    assert_eq!((log.last_stable_offset(), log.high_watermark()), (6, 8));
    drop(log);
    mgr.close().unwrap();
    (tmp, data)
}

fn fetch(c: &mut Conn, isolation: i8) -> FetchResponse {
    let mut req = kafka_protocol::messages::fetch_request::FetchRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_isolation_level(isolation);
    req.topics = vec![
        kafka_protocol::messages::fetch_request::FetchTopic::default()
            .with_topic(kafka_protocol::messages::TopicName(
                kafka_protocol::protocol::StrBytes::from_static_str("t"),
            ))
            .with_partitions(vec![
                kafka_protocol::messages::fetch_request::FetchPartition::default()
                    .with_partition(0)
                    .with_fetch_offset(0)
                    .with_partition_max_bytes(1 << 20),
            ]),
    ];
    c.call(ApiKey::Fetch, 12, &req)
}

/// The offsets of the records a response holds, control records apart:
/// (data offsets, control offsets), as kafka-protocol decodes them.
fn offsets(r: &FetchResponse) -> (Vec<i64>, Vec<i64>) {
    let mut bytes = r.responses[0].partitions[0].records.clone().unwrap();
    let (mut data, mut control) = (Vec::new(), Vec::new());
    while !bytes.is_empty() {
        let set = RecordBatchDecoder::decode(&mut bytes).unwrap();
        for rec in set.records {
            if rec.control {
                control.push(rec.offset);
            } else {
                data.push(rec.offset);
            }
        }
    }
    (data, control)
}

fn latest(c: &mut Conn, isolation: i8) -> i64 {
    let req = ListOffsetsRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_isolation_level(isolation)
        .with_topics(vec![
            ListOffsetsTopic::default()
                .with_name(kafka_protocol::messages::TopicName(
                    kafka_protocol::protocol::StrBytes::from_static_str("t"),
                ))
                .with_partitions(vec![
                    ListOffsetsPartition::default()
                        .with_partition_index(0)
                        .with_timestamp(-1),
                ]),
        ]);
    let r: ListOffsetsResponse = c.call(ApiKey::ListOffsets, 7, &req);
    let p = &r.topics[0].partitions[0];
    assert_eq!(p.error_code, 0);
    p.offset
}

#[test]
fn a_read_committed_fetch_stops_at_the_last_stable_offset_and_lists_the_aborts() {
    let (_tmp, data) = data_dir();
    let s = Server::start(&data, &[]);
    let mut c = Conn::new(&s.addr);

    let r = fetch(&mut c, 1);
    let p = &r.responses[0].partitions[0];
    assert_eq!(p.error_code, 0);
    assert_eq!((p.high_watermark, p.last_stable_offset), (8, 6));
    let aborted: Vec<(i64, i64)> = p
        .aborted_transactions
        .as_ref()
        .expect("a list at read_committed")
        .iter()
        .map(|t| (t.producer_id.0, t.first_offset))
        .collect();
    assert_eq!(aborted, vec![(7, 1)]);
    // The batches below the last stable offset, markers and all: the
    // client drops producer 7's record by the list.
    assert_eq!(offsets(&r), (vec![0, 1, 2, 5], vec![3, 4]));

    let r = fetch(&mut c, 0);
    let p = &r.responses[0].partitions[0];
    assert_eq!((p.high_watermark, p.last_stable_offset), (8, 6));
    assert!(p.aborted_transactions.is_none(), "none at read_uncommitted");
    assert_eq!(offsets(&r), (vec![0, 1, 2, 5, 6, 7], vec![3, 4]));

    assert_eq!(latest(&mut c, 1), 6);
    assert_eq!(latest(&mut c, 0), 8);
}

/// Clients we did not write apply the aborted list and the markers.
#[test]
fn confluent_kafka_and_kafka_python_read_committed_skip_the_abort() {
    let Some(py) = require(python()) else { return };
    let (_tmp, data) = data_dir();
    let s = Server::start(&data, &[]);
    for client in ["confluent", "kafka-python"] {
        let out = run_python(
            &py,
            PY_CONSUME_ISOLATED,
            &[&s.addr, client, "t", "read_committed"],
        );
        assert_eq!(out.trim(), "plain,committed,after", "{client}");
        let out = run_python(
            &py,
            PY_CONSUME_ISOLATED,
            &[&s.addr, client, "t", "read_uncommitted"],
        );
        assert_eq!(
            out.trim(),
            "plain,aborted,committed,after,open,last",
            "{client}"
        );
    }
}
