//! A transaction marker whose write fails during EndTxn, in a running
//! daemon (this package's `commitfs` built with the `failpoints` feature,
//! its failpoints from FAILPOINTS): the abort of a transaction over t-0 and
//! u-0 fails at t-0's `.txnindex` entry, which an ABORT marker's write
//! makes before the marker. The README's "Transactions": the transaction
//! stays prepared (DescribeTransactions says PrepareAbort) and the next
//! EndTxn of the id writes the markers again: after a refused write (a full
//! disk) t-0 carries on and that EndTxn completes the transaction; after an
//! I/O error t-0 is offline (fail-stop) until the next start, which writes
//! them and completes it. u-0's marker is written the first time.

use bytes::Bytes;
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnTopic,
};
use kafka_protocol::messages::add_partitions_to_txn_response::AddPartitionsToTxnResponse;
use kafka_protocol::messages::describe_transactions_request::DescribeTransactionsRequest;
use kafka_protocol::messages::describe_transactions_response::DescribeTransactionsResponse;
use kafka_protocol::messages::end_txn_request::EndTxnRequest;
use kafka_protocol::messages::end_txn_response::EndTxnResponse;
use kafka_protocol::messages::init_producer_id_request::InitProducerIdRequest;
use kafka_protocol::messages::init_producer_id_response::InitProducerIdResponse;
use kafka_protocol::messages::produce_response::ProduceResponse;
use kafka_protocol::messages::{ApiKey, ProducerId, TopicName, TransactionalId};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Compression, RecordBatchDecoder};

use commitfs::storage::{LogConfig, LogManager, OpenOptions};

use crate::kafka_support::requests::produce_request;
use crate::kafka_support::{Conn, Server};

const ID: &str = "tx";

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn txn_id() -> TransactionalId {
    TransactionalId(sb(ID))
}

/// InitProducerId v4 of the id: (code, producer id, epoch).
fn init(c: &mut Conn) -> (i16, i64, i16) {
    let req = InitProducerIdRequest::default()
        .with_transactional_id(Some(txn_id()))
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let r: InitProducerIdResponse = c.call(ApiKey::InitProducerId, 4, &req);
    (r.error_code, r.producer_id.0, r.producer_epoch)
}

/// AddPartitionsToTxn v3 of partition 0 of each topic: every code.
fn add(c: &mut Conn, (pid, epoch): (i64, i16), topics: &[&str]) -> Vec<i16> {
    let req = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(txn_id())
        .with_v3_and_below_producer_id(ProducerId(pid))
        .with_v3_and_below_producer_epoch(epoch)
        .with_v3_and_below_topics(
            (topics.iter())
                .map(|t| {
                    AddPartitionsToTxnTopic::default()
                        .with_name(TopicName(sb(t)))
                        .with_partitions(vec![0])
                })
                .collect(),
        );
    let r: AddPartitionsToTxnResponse = c.call(ApiKey::AddPartitionsToTxn, 3, &req);
    (r.results_by_topic_v3_and_below.iter())
        .flat_map(|t| {
            t.results_by_partition
                .iter()
                .map(|p| p.partition_error_code)
        })
        .collect()
}

/// Produce v9 of one transactional record to `topic`-0: its code.
fn produce(c: &mut Conn, (pid, epoch): (i64, i16), topic: &str) -> i16 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let record = (None, Some(Bytes::from_static(b"in-txn")));
    let batch = super::batch::encode(
        (pid, epoch),
        Some(0),
        true,
        now,
        [record],
        Compression::None,
    );
    let req = produce_request(topic, 0, batch.freeze()).with_transactional_id(Some(txn_id()));
    let r: ProduceResponse = c.call(ApiKey::Produce, 9, &req);
    r.responses[0].partition_responses[0].error_code
}

/// EndTxn v3: its code.
fn end(c: &mut Conn, (pid, epoch): (i64, i16), commit: bool) -> i16 {
    let req = EndTxnRequest::default()
        .with_transactional_id(txn_id())
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_committed(commit);
    let r: EndTxnResponse = c.call(ApiKey::EndTxn, 3, &req);
    r.error_code
}

/// DescribeTransactions' state of the id, and its partitions' topics.
fn state(c: &mut Conn) -> (String, Vec<String>) {
    let req = DescribeTransactionsRequest::default().with_transactional_ids(vec![txn_id()]);
    let r: DescribeTransactionsResponse = c.call(ApiKey::DescribeTransactions, 0, &req);
    let d = &r.transaction_states[0];
    assert_eq!(d.error_code, 0);
    let mut topics: Vec<String> = d.topics.iter().map(|t| t.topic.0.to_string()).collect();
    topics.sort();
    (d.transaction_state.to_string(), topics)
}

/// The control records of a partition, as kafka-protocol decodes them:
/// `COMMIT` or `ABORT`, in offset order.
fn markers(dir: &std::path::Path) -> Vec<&'static str> {
    let mut out = Vec::new();
    for base in crate::kafka_support::log_bases(dir) {
        let bytes = std::fs::read(dir.join(format!("{base:020}.log"))).unwrap();
        let mut buf = Bytes::from(bytes);
        while !buf.is_empty() {
            let set = RecordBatchDecoder::decode(&mut buf).unwrap();
            for r in set.records.iter().filter(|r| r.control) {
                let key = r.key.as_ref().unwrap();
                out.push(match i16::from_be_bytes([key[2], key[3]]) {
                    0 => "ABORT",
                    1 => "COMMIT",
                    _ => "other",
                });
            }
        }
    }
    out
}

/// A data directory with t-0 and u-0, served with `failpoints`; an
/// aborted transaction over both, whose t-0 marker fails: the daemon, a
/// connection, the producer.
fn failed_abort(failpoints: &str) -> (tempfile::TempDir, Server, Conn, (i64, i16)) {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    {
        let mgr = LogManager::open(&data, LogConfig::default(), OpenOptions::default()).unwrap();
        mgr.create_partition("t-0").unwrap();
        mgr.create_partition("u-0").unwrap();
        mgr.close().unwrap();
    }
    let s = Server::start_with_env(&data, &[], &[("FAILPOINTS", failpoints)]);
    let mut c = Conn::new(&s.addr);
    let (code, pid, epoch) = init(&mut c);
    assert_eq!(code, 0);
    let producer = (pid, epoch);
    assert_eq!(add(&mut c, producer, &["t", "u"]), vec![0, 0]);
    assert_eq!(produce(&mut c, producer, "t"), 0);
    assert_eq!(produce(&mut c, producer, "u"), 0);
    assert_eq!(state(&mut c).0, "Ongoing");

    // The abort: its decision is written, t-0's marker is not.
    let code = end(&mut c, producer, false);
    let log = s.log();
    assert!(
        log.contains(&format!(
            "Transactional id {ID}: the ABORT marker for t-0 was not written"
        )),
        "{log}"
    );
    assert!(
        log.contains(&format!(
            "Transactional id {ID} stays PrepareAbort until its markers reach t-0"
        )),
        "{log}"
    );
    assert_eq!(code, 0, "the decision is durable: EndTxn succeeds");
    assert_eq!(
        state(&mut c),
        (
            "PrepareAbort".to_string(),
            vec!["t".to_string(), "u".to_string()]
        )
    );
    assert_eq!(markers(&data.join("t-0")), Vec::<&str>::new());
    assert_eq!(markers(&data.join("u-0")), vec!["ABORT"]);
    (tmp, s, c, producer)
}

/// The transaction of [`failed_abort`] completed as an abort (t-0 holds
/// its marker, u-0 ABORT markers only: its first, and any repeated as a
/// retry); the id's next InitProducerId succeeds: its epoch.
fn completed_abort(c: &mut Conn, data: &std::path::Path) -> i16 {
    assert_eq!(state(c), ("CompleteAbort".to_string(), vec![]));
    assert_eq!(markers(&data.join("t-0")), vec!["ABORT"]);
    assert!(
        markers(&data.join("u-0")).iter().all(|m| *m == "ABORT"),
        "{:?}",
        markers(&data.join("u-0"))
    );
    let (code, _, next) = init(c);
    assert_eq!(code, 0);
    next
}

/// A full disk at t-0's marker: the write is refused and undone, t-0
/// carries on, and the next EndTxn of the id writes the marker and
/// completes the transaction.
#[test]
fn a_refused_marker_write_is_written_by_the_next_end_txn() {
    let (tmp, s, mut c, producer) = failed_abort("txnindex.append.write=1*return(ENOSPC)");
    let data = tmp.path().join("data");
    assert_eq!(end(&mut c, producer, false), 0);
    // t-0 is online: a plain record goes in after the marker.
    let producer = (producer.0, completed_abort(&mut c, &data));
    assert_eq!(add(&mut c, producer, &["t"]), vec![0]);
    assert_eq!(produce(&mut c, producer, "t"), 0);
    assert_eq!(end(&mut c, producer, true), 0);
    assert_eq!(markers(&data.join("t-0")), vec!["ABORT", "COMMIT"]);
    drop(s);
}

/// An I/O error at t-0's marker: t-0 goes offline, the next EndTxn tries
/// again and fails again, and the next start writes the marker.
#[test]
fn a_failed_marker_write_leaves_the_transaction_prepared_until_the_next_start() {
    let (tmp, mut s, mut c, producer) = failed_abort("txnindex.append.write=1*return");
    let data = tmp.path().join("data");
    let epoch = producer.1;

    // The next EndTxn of the id sends the markers again; t-0 went offline
    // with its failed write, so the transaction stays prepared.
    assert_eq!(end(&mut c, producer, false), 0);
    s.wait_for_log(
        &format!("Transactional id {ID}: the ABORT marker for t-0 was not written"),
        2,
    );
    assert_eq!(state(&mut c).0, "PrepareAbort");
    assert_eq!(markers(&data.join("t-0")), Vec::<&str>::new());
    s.stop();

    // The next start writes them (u-0 takes its repeated marker as a retry)
    // and completes the transaction.
    let s = Server::start(&data, &[]);
    s.wait_for_log(
        &format!("Transactional id {ID} was prepared at the last stop: completing it"),
        1,
    );
    let mut c = Conn::new(&s.addr);
    // The id starts a transaction again.
    assert!(completed_abort(&mut c, &data) > epoch);
}
