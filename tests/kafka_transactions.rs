//! Transactions through the listener: the coordinator's answers to raw
//! requests (each Kafka's code, nothing stored on a refusal), then
//! confluent-kafka's and kafka-python's transactional producers, whose
//! commits and aborts their own read_committed consumers read back, and
//! whose markers and `.txnindex` entries kafka-protocol decodes on disk.

#[path = "support/batch.rs"]
mod batch;
mod kafka_support;

use bytes::{Bytes, BytesMut};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnTopic,
};
use kafka_protocol::messages::add_partitions_to_txn_response::AddPartitionsToTxnResponse;
use kafka_protocol::messages::end_txn_request::EndTxnRequest;
use kafka_protocol::messages::end_txn_response::EndTxnResponse;
use kafka_protocol::messages::init_producer_id_request::InitProducerIdRequest;
use kafka_protocol::messages::init_producer_id_response::InitProducerIdResponse;
use kafka_protocol::messages::produce_response::ProduceResponse;
use kafka_protocol::messages::{ApiKey, ProducerId, TopicName, TransactionalId};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Compression, RecordBatchDecoder};

use kafka_support::requests::{produce_request, txn_coordinator};
use kafka_support::{Conn, PY_CONSUME_ISOLATED, Server, data_dir, python, require, run_python};

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn init(c: &mut Conn, version: i16, id: &str, timeout: i32) -> InitProducerIdResponse {
    let req = InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(sb(id))))
        .with_transaction_timeout_ms(timeout)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    c.call(ApiKey::InitProducerId, version, &req)
}

/// AddPartitionsToTxn's codes, (topic, partition, code) in answer order.
fn add(
    c: &mut Conn,
    version: i16,
    id: &str,
    (pid, epoch): (i64, i16),
    partitions: &[(&str, i32)],
) -> Vec<(String, i32, i16)> {
    let mut topics: Vec<AddPartitionsToTxnTopic> = Vec::new();
    for (t, p) in partitions {
        match topics.iter_mut().find(|x| x.name.0.as_str() == *t) {
            Some(x) => x.partitions.push(*p),
            None => topics.push(
                AddPartitionsToTxnTopic::default()
                    .with_name(TopicName(sb(t)))
                    .with_partitions(vec![*p]),
            ),
        }
    }
    let req = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(TransactionalId(sb(id)))
        .with_v3_and_below_producer_id(ProducerId(pid))
        .with_v3_and_below_producer_epoch(epoch)
        .with_v3_and_below_topics(topics);
    let r: AddPartitionsToTxnResponse = c.call(ApiKey::AddPartitionsToTxn, version, &req);
    r.results_by_topic_v3_and_below
        .iter()
        .flat_map(|t| {
            t.results_by_partition.iter().map(|p| {
                (
                    t.name.0.to_string(),
                    p.partition_index,
                    p.partition_error_code,
                )
            })
        })
        .collect()
}

fn end(c: &mut Conn, version: i16, id: &str, (pid, epoch): (i64, i16), commit: bool) -> i16 {
    let req = EndTxnRequest::default()
        .with_transactional_id(TransactionalId(sb(id)))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_committed(commit);
    let r: EndTxnResponse = c.call(ApiKey::EndTxn, version, &req);
    r.error_code
}

/// One batch of producer (`pid`, `epoch`) at `seq`, of `values`.
fn batch(pid: i64, epoch: i16, seq: i32, transactional: bool, values: &[&str]) -> Bytes {
    let records = (values.iter()).map(|v| (None, Some(Bytes::copy_from_slice(v.as_bytes()))));
    // Now: an old timestamp would roll the segment at the next append (segment.ms).
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let producer = (pid, epoch);
    batch::encode(
        producer,
        Some(seq),
        transactional,
        now,
        records,
        Compression::None,
    )
    .freeze()
}

/// Produce v9 of `records` to `topic`-0; (code, base offset, message).
fn produce(
    c: &mut Conn,
    txn_id: Option<&str>,
    topic: &str,
    records: Bytes,
) -> (i16, i64, Option<String>) {
    let req = produce_request(topic, 0, records)
        .with_timeout_ms(5000)
        .with_transactional_id(txn_id.map(|t| TransactionalId(sb(t))));
    let r: ProduceResponse = c.call(ApiKey::Produce, 9, &req);
    let p = &r.responses[0].partition_responses[0];
    (
        p.error_code,
        p.base_offset,
        p.error_message.as_ref().map(|m| m.to_string()),
    )
}

/// A partition's batches as kafka-protocol decodes them: for each, its
/// base offset, producer id and epoch, and either its values or, for a
/// control batch, `COMMIT`/`ABORT` from its record's key.
fn batches(dir: &std::path::Path) -> Vec<(i64, i64, i16, Vec<String>)> {
    let mut out = Vec::new();
    for base in kafka_support::log_bases(dir) {
        let bytes = std::fs::read(dir.join(format!("{base:020}.log"))).unwrap();
        let mut buf = Bytes::from(bytes);
        while !buf.is_empty() {
            let set = RecordBatchDecoder::decode(&mut buf).unwrap();
            let first = &set.records[0];
            let values = set
                .records
                .iter()
                .map(|r| {
                    if r.control {
                        let key = r.key.as_ref().unwrap();
                        match i16::from_be_bytes([key[2], key[3]]) {
                            0 => "ABORT".to_string(),
                            1 => "COMMIT".to_string(),
                            t => format!("control {t}"),
                        }
                    } else {
                        String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned()
                    }
                })
                .collect();
            out.push((
                first.offset,
                first.producer_id,
                first.producer_epoch,
                values,
            ));
        }
    }
    out
}

fn ok(rows: &[(String, i32, i16)]) -> bool {
    rows.iter().all(|(_, _, e)| *e == 0)
}

#[test]
fn a_transaction_through_raw_requests_commits_and_aborts() {
    let (_tmp, data) = data_dir(&["t-0", "u-0"]);
    let s = Server::start(&data, &[]);
    let mut c = Conn::new(&s.addr);

    assert_eq!(txn_coordinator(&mut c, "tx"), (0, 0));

    let r = init(&mut c, 4, "tx", 60_000);
    assert_eq!(r.error_code, 0);
    let me = (r.producer_id.0, r.producer_epoch);
    assert_eq!(me.1, 0, "a new id starts at epoch 0");

    // A transactional batch before its partition is in the transaction.
    let (code, _, msg) = produce(&mut c, Some("tx"), "t", batch(me.0, 0, 0, true, &["x"]));
    assert_eq!(code, ResponseError::InvalidTxnState.code());
    assert_eq!(
        msg.as_deref(),
        Some("Partition was not added to the transaction")
    );

    assert!(ok(&add(&mut c, 3, "tx", me, &[("t", 0), ("u", 0)])));
    assert_eq!(
        produce(
            &mut c,
            Some("tx"),
            "t",
            batch(me.0, 0, 0, true, &["c1", "c2"])
        )
        .0,
        0
    );
    assert_eq!(
        produce(&mut c, Some("tx"), "u", batch(me.0, 0, 0, true, &["c3"])).0,
        0
    );
    assert_eq!(end(&mut c, 3, "tx", me, true), 0);
    assert_eq!(end(&mut c, 3, "tx", me, true), 0, "a retried commit");
    assert_eq!(
        end(&mut c, 3, "tx", me, false),
        ResponseError::InvalidTxnState.code(),
        "an abort of what was committed"
    );

    assert!(ok(&add(&mut c, 3, "tx", me, &[("t", 0)])));
    assert_eq!(
        produce(&mut c, Some("tx"), "u", batch(me.0, 0, 1, true, &["x"])).0,
        ResponseError::InvalidTxnState.code(),
        "a partition of the last transaction, not of this one"
    );
    assert_eq!(
        produce(&mut c, Some("tx"), "t", batch(me.0, 0, 2, true, &["a1"])).0,
        0
    );
    assert_eq!(end(&mut c, 3, "tx", me, false), 0);

    let t = batches(&data.join("t-0"));
    let shape: Vec<(i64, Vec<String>)> = t.iter().map(|b| (b.0, b.3.clone())).collect();
    assert_eq!(
        shape,
        vec![
            (0, vec!["c1".to_string(), "c2".to_string()]),
            (2, vec!["COMMIT".to_string()]),
            (3, vec!["a1".to_string()]),
            (4, vec!["ABORT".to_string()]),
        ]
    );
    assert!(t.iter().all(|b| (b.1, b.2) == me), "{t:?}");
    let u = batches(&data.join("u-0"));
    assert_eq!(u.len(), 2);
    assert_eq!(u[1].3, vec!["COMMIT".to_string()]);
    // The abort's entry: producer, first offset 3, marker 4, stable 5.
    let index = std::fs::read(data.join("t-0/00000000000000000000.txnindex")).unwrap_or_else(|e| {
        panic!(
            "{e}: {:?}\n{}",
            std::fs::read_dir(data.join("t-0"))
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect::<Vec<_>>(),
            s.log()
        )
    });
    let mut want = vec![0u8, 0];
    for v in [me.0, 3, 4, 5] {
        want.extend_from_slice(&v.to_be_bytes());
    }
    assert_eq!(index, want);
}

#[test]
fn refusals_answer_kafkas_codes_and_store_nothing() {
    let (_tmp, data) = data_dir(&["t-0"]);
    let s = Server::start(&data, &[]);
    let mut c = Conn::new(&s.addr);
    let leo = |data: &std::path::Path| {
        std::fs::metadata(data.join("t-0/00000000000000000000.log"))
            .unwrap()
            .len()
    };

    assert_eq!(
        init(&mut c, 4, "tx", 0).error_code,
        ResponseError::InvalidTransactionTimeout.code()
    );
    assert_eq!(
        init(&mut c, 4, "tx", 900_001).error_code,
        ResponseError::InvalidTransactionTimeout.code(),
        "over transaction.max.timeout.ms"
    );
    assert_eq!(
        end(&mut c, 3, "nobody", (5, 0), true),
        ResponseError::InvalidProducerIdMapping.code()
    );
    let r = init(&mut c, 4, "tx", 60_000);
    let me = (r.producer_id.0, r.producer_epoch);
    assert_eq!(
        add(&mut c, 3, "tx", me, &[("t", 0), ("nope", 0)]),
        vec![
            (
                "nope".to_string(),
                0,
                ResponseError::UnknownTopicOrPartition.code()
            ),
            (
                "t".to_string(),
                0,
                ResponseError::OperationNotAttempted.code()
            ),
        ]
    );
    assert_eq!(
        add(&mut c, 3, "tx", me, &[("__consumer_offsets", 0)]),
        vec![(
            "__consumer_offsets".to_string(),
            0,
            ResponseError::TopicAuthorizationFailed.code()
        )]
    );
    assert_eq!(
        add(&mut c, 3, "tx", (me.0 + 1, 0), &[("t", 0)]),
        vec![(
            "t".to_string(),
            0,
            ResponseError::InvalidProducerIdMapping.code()
        )]
    );
    // A wrong epoch: PRODUCER_FENCED from version 2, INVALID_PRODUCER_EPOCH below.
    assert_eq!(
        add(&mut c, 2, "tx", (me.0, 3), &[("t", 0)])[0].2,
        ResponseError::ProducerFenced.code()
    );
    assert_eq!(
        add(&mut c, 1, "tx", (me.0, 3), &[("t", 0)])[0].2,
        ResponseError::InvalidProducerEpoch.code()
    );
    assert_eq!(
        end(&mut c, 3, "tx", me, true),
        ResponseError::InvalidTxnState.code(),
        "no transaction is open"
    );
    let before = leo(&data);
    let txn = batch(me.0, 0, 0, true, &["x"]);
    assert_eq!(
        produce(&mut c, None, "t", txn.clone()).0,
        ResponseError::TransactionalIdAuthorizationFailed.code(),
        "a transactional batch without a transactional id"
    );
    assert_eq!(
        produce(&mut c, Some("tx"), "t", txn.clone()).0,
        ResponseError::InvalidTxnState.code()
    );
    assert!(ok(&add(&mut c, 3, "tx", me, &[("t", 0)])));
    assert_eq!(
        produce(&mut c, Some("tx"), "t", batch(me.0, 1, 0, true, &["x"])).0,
        ResponseError::InvalidProducerEpoch.code(),
        "a batch of another epoch than the transaction's"
    );
    assert_eq!(
        produce(&mut c, Some("other"), "t", txn.clone()).0,
        ResponseError::InvalidProducerIdMapping.code(),
        "a transactional id that is not the producer's"
    );
    let mut two = BytesMut::new();
    two.extend_from_slice(&txn);
    two.extend_from_slice(&batch(me.0 + 1, 0, 0, true, &["y"]));
    assert_eq!(
        produce(&mut c, Some("tx"), "t", two.freeze()).0,
        ResponseError::InvalidProducerIdMapping.code(),
        "two producers' transactional batches in one request"
    );
    assert_eq!(leo(&data), before, "nothing stored");
    // A plain batch of a producer whose transaction is open here.
    assert_eq!(produce(&mut c, Some("tx"), "t", txn).0, 0);
    assert_eq!(
        produce(&mut c, Some("tx"), "t", batch(me.0, 0, 1, false, &["p"])).0,
        ResponseError::InvalidTxnState.code()
    );
    assert_eq!(end(&mut c, 3, "tx", me, false), 0);
}

#[test]
fn a_second_producer_of_an_id_fences_the_first_and_aborts_its_transaction() {
    let (_tmp, data) = data_dir(&["t-0"]);
    let s = Server::start(&data, &[]);
    let mut c = Conn::new(&s.addr);
    let r = init(&mut c, 4, "tx", 60_000);
    let first = (r.producer_id.0, r.producer_epoch);
    assert!(ok(&add(&mut c, 3, "tx", first, &[("t", 0)])));
    assert_eq!(
        produce(
            &mut c,
            Some("tx"),
            "t",
            batch(first.0, 0, 0, true, &["open"])
        )
        .0,
        0
    );
    // The second producer: the open transaction is aborted and it is told
    // to retry; the retry gets the next epoch.
    let r = init(&mut c, 4, "tx", 60_000);
    assert_eq!(r.error_code, ResponseError::ConcurrentTransactions.code());
    let r = init(&mut c, 4, "tx", 60_000);
    assert_eq!(r.error_code, 0);
    let second = (r.producer_id.0, r.producer_epoch);
    assert_eq!(second, (first.0, 2), "fenced at 1, given 2");
    assert_eq!(
        end(&mut c, 3, "tx", first, true),
        ResponseError::ProducerFenced.code()
    );
    assert_eq!(
        end(&mut c, 1, "tx", first, true),
        ResponseError::InvalidProducerEpoch.code()
    );
    assert_eq!(
        produce(
            &mut c,
            Some("tx"),
            "t",
            batch(first.0, 0, 1, true, &["late"])
        )
        .0,
        ResponseError::InvalidProducerEpoch.code()
    );
    let t = batches(&data.join("t-0"));
    let shape: Vec<(i16, Vec<String>)> = t.iter().map(|b| (b.2, b.3.clone())).collect();
    assert_eq!(
        shape,
        vec![
            (0, vec!["open".to_string()]),
            (1, vec!["ABORT".to_string()]),
        ],
        "the abort carries the fencing epoch"
    );
}

/// The transaction coordinator's state survives a restart, and a producer
/// id is never given twice, even with `commitfs.producer-ids` gone.
#[test]
fn ids_and_epochs_survive_a_restart() {
    let (_tmp, data) = data_dir(&["t-0"]);
    let mut s = Server::start(&data, &[]);
    let mut c = Conn::new(&s.addr);
    let r = init(&mut c, 4, "tx", 60_000);
    let me = (r.producer_id.0, r.producer_epoch);
    assert!(ok(&add(&mut c, 3, "tx", me, &[("t", 0)])));
    assert_eq!(end(&mut c, 3, "tx", me, true), 0);
    drop(c);
    assert!(s.stop());
    std::fs::remove_file(data.join("commitfs.producer-ids")).unwrap();
    let s = Server::start(&data, &[]);
    let mut c = Conn::new(&s.addr);
    let r = init(&mut c, 4, "tx", 60_000);
    assert_eq!((r.producer_id.0, r.producer_epoch), (me.0, 1));
    let idempotent = InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_transaction_timeout_ms(-1)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let r: InitProducerIdResponse = c.call(ApiKey::InitProducerId, 4, &idempotent);
    assert!(r.producer_id.0 > me.0, "{} after {}", r.producer_id.0, me.0);
}

const PRODUCE: &str = r#"
import sys
addr, client, topic = sys.argv[1], sys.argv[2], sys.argv[3]
plan = [('c0', True), ('a1', False), ('c2', True)]
if client == 'confluent':
    from confluent_kafka import Producer
    p = Producer({'bootstrap.servers': addr, 'transactional.id': 'tx-' + topic})
    p.init_transactions(30)
    for name, commit in plan:
        p.begin_transaction()
        for j in range(3):
            p.produce(topic, value=('%s-%d' % (name, j)).encode())
        if commit:
            p.commit_transaction(30)
        else:
            p.flush(30)
            p.abort_transaction(30)
else:
    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=addr, transactional_id='tx-' + topic)
    p.init_transactions()
    for name, commit in plan:
        p.begin_transaction()
        for j in range(3):
            p.send(topic, value=('%s-%d' % (name, j)).encode())
        if commit:
            p.commit_transaction()
        else:
            p.flush()
            p.abort_transaction()
    p.close()
print('done')
"#;

/// confluent-kafka's and kafka-python's transactional producers commit,
/// abort and commit again; both clients' read_committed consumers read
/// the committed records only, their read_uncommitted ones all of them;
/// on disk, kafka-protocol finds each transaction's marker.
#[test]
fn confluent_kafka_and_kafka_python_transactions_commit_and_abort() {
    let Some(py) = require(python()) else { return };
    let (_tmp, data) = data_dir(&["tc-0", "tk-0"]);
    let s = Server::start(&data, &[]);
    let names = |prefix: &[&str]| -> String {
        prefix
            .iter()
            .flat_map(|n| (0..3).map(move |j| format!("{n}-{j}")))
            .collect::<Vec<_>>()
            .join(",")
    };
    for (producer, topic) in [("confluent", "tc"), ("kafka-python", "tk")] {
        let out = run_python(&py, PRODUCE, &[&s.addr, producer, topic]);
        assert_eq!(out.trim(), "done", "{producer}");
        for consumer in ["confluent", "kafka-python"] {
            let out = run_python(
                &py,
                PY_CONSUME_ISOLATED,
                &[&s.addr, consumer, topic, "read_committed"],
            );
            assert_eq!(
                out.trim(),
                names(&["c0", "c2"]),
                "{producer}'s transactions read by {consumer}"
            );
            let out = run_python(
                &py,
                PY_CONSUME_ISOLATED,
                &[&s.addr, consumer, topic, "read_uncommitted"],
            );
            assert_eq!(out.trim(), names(&["c0", "a1", "c2"]), "{consumer}");
        }
        let markers: Vec<String> = batches(&data.join(format!("{topic}-0")))
            .into_iter()
            .filter(|b| b.3.len() == 1 && (b.3[0] == "COMMIT" || b.3[0] == "ABORT"))
            .map(|b| b.3[0].clone())
            .collect();
        assert_eq!(markers, ["COMMIT", "ABORT", "COMMIT"], "{producer}");
    }
}

const VANISH: &str = r#"
import sys, os
from confluent_kafka import Producer
addr, topic = sys.argv[1], sys.argv[2]
p = Producer({'bootstrap.servers': addr, 'transactional.id': 'vanishing',
              'transaction.timeout.ms': 2000, 'socket.timeout.ms': 1000})
p.init_transactions(30)
p.begin_transaction()
p.produce(topic, value=b'lost')
p.flush(30)
print('open', flush=True)
# Gone without a word: no commit, no abort, no close.
os._exit(0)
"#;

/// A producer that vanishes with its transaction open: once the
/// transaction's timeout has passed, the coordinator aborts it (the ABORT
/// marker under the fencing epoch, the `.txnindex` entry), and
/// read_committed consumers move past it.
#[test]
fn a_vanished_producers_transaction_is_aborted_after_its_timeout() {
    let Some(py) = require(python()) else { return };
    let (_tmp, data) = data_dir(&["t-0"]);
    let s = Server::start(
        &data,
        &["transaction.abort.timed.out.transaction.cleanup.interval.ms=200"],
    );
    let out = run_python(&py, VANISH, &[&s.addr, "t"]);
    assert_eq!(out.trim(), "open");
    let mut c = Conn::new(&s.addr);
    assert_eq!(
        produce(&mut c, None, "t", batch(-1, -1, -1, false, &["after"])).0,
        0
    );
    let stable = || {
        let t = batches(&data.join("t-0"));
        t.iter().any(|b| b.3 == ["ABORT"])
    };
    s.wait_until(
        "the timed-out transaction's ABORT marker",
        std::time::Duration::from_secs(60),
        stable,
    );
    let t = batches(&data.join("t-0"));
    let shape: Vec<(i64, i16, Vec<String>)> = t.iter().map(|b| (b.0, b.2, b.3.clone())).collect();
    assert_eq!(
        shape,
        vec![
            (0, 0, vec!["lost".to_string()]),
            (1, -1, vec!["after".to_string()]),
            (2, 1, vec!["ABORT".to_string()]),
        ],
        "the abort carries the fencing epoch"
    );
    let index = std::fs::read(data.join("t-0/00000000000000000000.txnindex")).unwrap();
    assert_eq!(index.len(), 34);
    assert_eq!(
        &index[10..34],
        &[0i64.to_be_bytes(), 2i64.to_be_bytes(), 3i64.to_be_bytes()].concat()[..]
    );
    for consumer in ["confluent", "kafka-python"] {
        let out = run_python(
            &py,
            PY_CONSUME_ISOLATED,
            &[&s.addr, consumer, "t", "read_committed"],
        );
        assert_eq!(out.trim(), "after", "{consumer}");
    }
}

/// AddOffsetsToTxn then TxnOffsetCommit, raw: the offset is invisible to
/// OffsetFetch until the transaction commits (with `require_stable`, it is
/// UNSTABLE_OFFSET_COMMIT meanwhile), an abort drops it, and a restart with
/// the transaction open keeps it pending.
#[test]
fn offsets_in_a_transaction_count_when_it_commits() {
    use kafka_protocol::messages::GroupId;
    use kafka_protocol::messages::add_offsets_to_txn_request::AddOffsetsToTxnRequest;
    use kafka_protocol::messages::add_offsets_to_txn_response::AddOffsetsToTxnResponse;
    use kafka_protocol::messages::offset_fetch_request::{
        OffsetFetchRequest, OffsetFetchRequestTopic,
    };
    use kafka_protocol::messages::offset_fetch_response::OffsetFetchResponse;
    use kafka_protocol::messages::txn_offset_commit_request::{
        TxnOffsetCommitRequest, TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
    };
    use kafka_protocol::messages::txn_offset_commit_response::TxnOffsetCommitResponse;

    let (_tmp, data) = data_dir(&["t-0"]);
    let mut s = Server::start(&data, &[]);
    let mut c = Conn::new(&s.addr);
    let add_offsets = |c: &mut Conn, me: (i64, i16)| -> i16 {
        let req = AddOffsetsToTxnRequest::default()
            .with_transactional_id(TransactionalId(sb("tx")))
            .with_producer_id(ProducerId(me.0))
            .with_producer_epoch(me.1)
            .with_group_id(GroupId(sb("g")));
        let r: AddOffsetsToTxnResponse = c.call(ApiKey::AddOffsetsToTxn, 3, &req);
        r.error_code
    };
    let commit_offset = |c: &mut Conn, me: (i64, i16), offset: i64| -> i16 {
        let req = TxnOffsetCommitRequest::default()
            .with_transactional_id(TransactionalId(sb("tx")))
            .with_group_id(GroupId(sb("g")))
            .with_producer_id(ProducerId(me.0))
            .with_producer_epoch(me.1)
            .with_generation_id(-1)
            .with_topics(vec![
                TxnOffsetCommitRequestTopic::default()
                    .with_name(TopicName(sb("t")))
                    .with_partitions(vec![
                        TxnOffsetCommitRequestPartition::default()
                            .with_partition_index(0)
                            .with_committed_offset(offset)
                            .with_committed_leader_epoch(-1),
                    ]),
            ]);
        let r: TxnOffsetCommitResponse = c.call(ApiKey::TxnOffsetCommit, 3, &req);
        r.topics[0].partitions[0].error_code
    };
    let fetched = |c: &mut Conn, require_stable: bool| -> (i16, i64) {
        let req = OffsetFetchRequest::default()
            .with_group_id(GroupId(sb("g")))
            .with_require_stable(require_stable)
            .with_topics(Some(vec![
                OffsetFetchRequestTopic::default()
                    .with_name(TopicName(sb("t")))
                    .with_partition_indexes(vec![0]),
            ]));
        let r: OffsetFetchResponse = c.call(ApiKey::OffsetFetch, 7, &req);
        let p = &r.topics[0].partitions[0];
        (p.error_code, p.committed_offset)
    };

    let r = init(&mut c, 4, "tx", 60_000);
    let me = (r.producer_id.0, r.producer_epoch);
    assert_eq!(
        commit_offset(&mut c, me, 5),
        ResponseError::InvalidTxnState.code(),
        "before AddOffsetsToTxn"
    );
    assert_eq!(add_offsets(&mut c, me), 0);
    assert_eq!(commit_offset(&mut c, me, 5), 0);
    assert_eq!(fetched(&mut c, false), (0, -1), "not committed yet");
    assert_eq!(
        fetched(&mut c, true),
        (ResponseError::UnstableOffsetCommit.code(), -1)
    );
    assert_eq!(end(&mut c, 3, "tx", me, true), 0);
    assert_eq!(fetched(&mut c, true), (0, 5));

    assert_eq!(add_offsets(&mut c, me), 0);
    assert_eq!(commit_offset(&mut c, me, 9), 0);
    assert_eq!(end(&mut c, 3, "tx", me, false), 0);
    assert_eq!(fetched(&mut c, true), (0, 5), "an abort drops the offset");

    // Open at a restart: pending again after the load, committed by the
    // client's commit afterwards.
    assert_eq!(add_offsets(&mut c, me), 0);
    assert_eq!(commit_offset(&mut c, me, 12), 0);
    drop(c);
    assert!(s.stop());
    let s = Server::start(&data, &[]);
    let mut c = Conn::new(&s.addr);
    assert_eq!(
        fetched(&mut c, true),
        (ResponseError::UnstableOffsetCommit.code(), -1)
    );
    assert_eq!(end(&mut c, 3, "tx", me, true), 0);
    assert_eq!(fetched(&mut c, true), (0, 12));
    // The markers in `__consumer_offsets`, as kafka-protocol reads them.
    let markers: Vec<String> = batches(&data.join("__consumer_offsets-0"))
        .into_iter()
        .filter(|b| b.3 == ["COMMIT"] || b.3 == ["ABORT"])
        .map(|b| b.3[0].clone())
        .collect();
    assert_eq!(markers, ["COMMIT", "ABORT", "COMMIT"]);
}

const EOS: &str = r#"
import sys
from confluent_kafka import Consumer, Producer, TopicPartition
addr, n = sys.argv[1], int(sys.argv[2])
c = Consumer({'bootstrap.servers': addr, 'group.id': 'eos', 'enable.auto.commit': False,
              'auto.offset.reset': 'earliest', 'isolation.level': 'read_committed'})
c.assign([TopicPartition('in', 0)])
p = Producer({'bootstrap.servers': addr, 'transactional.id': 'eos-tx'})
p.init_transactions(30)
done, aborted = 0, False
while done < n:
    msgs = c.consume(50, 5)
    if not msgs:
        continue
    p.begin_transaction()
    for m in msgs:
        p.produce('out', value=m.value().upper())
    p.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), 30)
    if not aborted and done > 0:
        # One transaction aborted: its output never shows, and the input
        # is read again from the committed offset.
        aborted = True
        # Sent first, so that the aborted records are in the log (an abort
        # purges what the client still holds).
        p.flush(30)
        p.abort_transaction(30)
        committed = c.committed([TopicPartition('in', 0)], 30)
        c.seek(committed[0])
        continue
    p.commit_transaction(30)
    done += len(msgs)
c.close()
print(done)
"#;

const EOS_KAFKA_PYTHON: &str = r#"
import sys
from kafka import KafkaConsumer, KafkaProducer, TopicPartition, OffsetAndMetadata
addr, n = sys.argv[1], int(sys.argv[2])
tp = TopicPartition('in', 0)
c = KafkaConsumer(bootstrap_servers=addr, group_id='eos-kp', enable_auto_commit=False,
                  auto_offset_reset='earliest', isolation_level='read_committed')
c.assign([tp])
p = KafkaProducer(bootstrap_servers=addr, transactional_id='eos-kp-tx')
p.init_transactions()
done, aborted = 0, False
while done < n:
    msgs = c.poll(timeout_ms=1000, max_records=50).get(tp, [])
    if not msgs:
        continue
    p.begin_transaction()
    for m in msgs:
        p.send('out-kp', value=m.value.upper())
    offsets = {tp: OffsetAndMetadata(msgs[-1].offset + 1, '', -1)}
    p.send_offsets_to_transaction(offsets, 'eos-kp')
    if not aborted and done > 0:
        aborted = True
        p.flush()
        p.abort_transaction()
        c.seek(tp, c.committed(tp))
        continue
    p.commit_transaction()
    done += len(msgs)
p.close()
c.close()
print(done)
"#;

/// A consume-transform-produce loop of confluent-kafka with
/// `send_offsets_to_transaction`, one of its transactions aborted: a
/// read_committed consumer of the output reads each input record once, and
/// the group's committed offset is the input's end. The same with
/// kafka-python's loop.
#[test]
fn a_consume_transform_produce_loop_is_exactly_once() {
    let Some(py) = require(python()) else { return };
    let (_tmp, data) = data_dir(&["in-0", "out-0", "out-kp-0"]);
    let s = Server::start(&data, &[]);
    let mut c = Conn::new(&s.addr);
    let n = 300;
    let values: Vec<String> = (0..n).map(|i| format!("r{i}")).collect();
    for chunk in values.chunks(30) {
        let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
        assert_eq!(
            produce(&mut c, None, "in", batch(-1, -1, -1, false, &refs)).0,
            0
        );
    }
    let out = run_python(&py, EOS, &[&s.addr, &n.to_string()]);
    assert_eq!(out.trim(), n.to_string());
    let read = run_python(
        &py,
        PY_CONSUME_ISOLATED,
        &[&s.addr, "confluent", "out", "read_committed"],
    );
    let want: Vec<String> = values.iter().map(|v| v.to_uppercase()).collect();
    assert_eq!(read.trim(), want.join(","));
    let all = run_python(
        &py,
        PY_CONSUME_ISOLATED,
        &[&s.addr, "kafka-python", "out", "read_uncommitted"],
    );
    assert!(
        all.trim().split(',').count() > n,
        "the aborted transaction's output is in the log"
    );

    let out = run_python(&py, EOS_KAFKA_PYTHON, &[&s.addr, &n.to_string()]);
    assert_eq!(out.trim(), n.to_string());
    let read = run_python(
        &py,
        PY_CONSUME_ISOLATED,
        &[&s.addr, "kafka-python", "out-kp", "read_committed"],
    );
    assert_eq!(read.trim(), want.join(","), "kafka-python's loop");
}

/// DescribeTransactions and ListTransactions (what `kafka-transactions.sh
/// describe` and `list` send), with Kafka's filters and errors.
#[test]
fn transactions_are_described_and_listed() {
    use kafka_protocol::messages::describe_transactions_request::DescribeTransactionsRequest;
    use kafka_protocol::messages::describe_transactions_response::DescribeTransactionsResponse;
    use kafka_protocol::messages::list_transactions_request::ListTransactionsRequest;
    use kafka_protocol::messages::list_transactions_response::ListTransactionsResponse;

    let (_tmp, data) = data_dir(&["t-0", "t-1", "u-0"]);
    let s = Server::start(&data, &[]);
    let mut c = Conn::new(&s.addr);
    let r = init(&mut c, 4, "open", 45_000);
    let open = (r.producer_id.0, r.producer_epoch);
    assert!(ok(&add(
        &mut c,
        3,
        "open",
        open,
        &[("u", 0), ("t", 1), ("t", 0)]
    )));
    let r = init(&mut c, 4, "idle", 60_000);
    let idle = (r.producer_id.0, r.producer_epoch);

    let req = DescribeTransactionsRequest::default().with_transactional_ids(vec![
        TransactionalId(sb("open")),
        TransactionalId(sb("nobody")),
        TransactionalId(sb("")),
    ]);
    let r: DescribeTransactionsResponse = c.call(ApiKey::DescribeTransactions, 0, &req);
    let d = &r.transaction_states[0];
    assert_eq!(
        (
            d.error_code,
            d.transaction_state.as_str(),
            d.transaction_timeout_ms,
            d.producer_id.0,
            d.producer_epoch
        ),
        (0, "Ongoing", 45_000, open.0, open.1)
    );
    assert!(d.transaction_start_time_ms > 0);
    let topics: Vec<(String, Vec<i32>)> = d
        .topics
        .iter()
        .map(|t| (t.topic.0.to_string(), t.partitions.clone()))
        .collect();
    assert_eq!(
        topics,
        vec![("t".to_string(), vec![0, 1]), ("u".to_string(), vec![0])]
    );
    assert_eq!(
        r.transaction_states[1].error_code,
        ResponseError::TransactionalIdNotFound.code()
    );
    assert_eq!(
        r.transaction_states[2].error_code,
        ResponseError::InvalidRequest.code()
    );

    let list = |c: &mut Conn, version: i16, states: &[&str], pids: &[i64], duration: i64| {
        let req = ListTransactionsRequest::default()
            .with_state_filters(states.iter().map(|s| sb(s)).collect())
            .with_producer_id_filters(pids.iter().map(|p| ProducerId(*p)).collect())
            .with_duration_filter(duration);
        let r: ListTransactionsResponse = c.call(ApiKey::ListTransactions, version, &req);
        let unknown: Vec<String> = r
            .unknown_state_filters
            .iter()
            .map(|s| s.to_string())
            .collect();
        let mut found: Vec<(String, i64, String)> = r
            .transaction_states
            .iter()
            .map(|t| {
                (
                    t.transactional_id.0.to_string(),
                    t.producer_id.0,
                    t.transaction_state.to_string(),
                )
            })
            .collect();
        found.sort();
        (r.error_code, unknown, found)
    };
    let both = vec![
        ("idle".to_string(), idle.0, "Empty".to_string()),
        ("open".to_string(), open.0, "Ongoing".to_string()),
    ];
    assert_eq!(list(&mut c, 0, &[], &[], -1), (0, vec![], both.clone()));
    assert_eq!(
        list(&mut c, 0, &["Ongoing", "Bogus"], &[], -1),
        (0, vec!["Bogus".to_string()], vec![both[1].clone()])
    );
    assert_eq!(
        list(&mut c, 0, &[], &[idle.0], -1),
        (0, vec![], vec![both[0].clone()])
    );
    // Open for longer than an hour: none. An Empty id's start is -1, so any
    // duration passes it, as in Kafka.
    assert_eq!(
        list(&mut c, 1, &[], &[], 3_600_000),
        (0, vec![], vec![both[0].clone()])
    );
}

/// What the listener's transactions leave on disk, as `commitfs dump`
/// prints it in kafka-dump-log's words: the markers, the abort's
/// `.txnindex` entry, the open transaction in the producer snapshot, and
/// each state change of the id in `__transaction_state`.
#[test]
fn dump_shows_the_transactions_kafkas_way() {
    let (_tmp, data) = data_dir(&["t-0"]);
    let mut s = Server::start(&data, &[]);
    let mut c = Conn::new(&s.addr);
    let r = init(&mut c, 4, "tx", 60_000);
    let me = (r.producer_id.0, r.producer_epoch);
    let values = ["c1", "a1", "open"];
    for (i, v) in values.iter().enumerate() {
        assert!(ok(&add(&mut c, 3, "tx", me, &[("t", 0)])));
        let b = batch(me.0, 0, i as i32, true, &[v]);
        assert_eq!(produce(&mut c, Some("tx"), "t", b).0, 0);
        if i < 2 {
            assert_eq!(end(&mut c, 3, "tx", me, i == 0), 0);
        }
    }
    drop(c);
    assert!(s.stop());
    let dump = |args: &[&str], file: &str| -> String {
        let out = kafka_support::bounded::run(
            std::process::Command::new(env!("CARGO_BIN_EXE_commitfs"))
                .arg("dump")
                .args(args)
                .arg(data.join(file)),
            "commitfs dump",
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let log = dump(&["--deep-iteration"], "t-0/00000000000000000000.log");
    for want in [
        "endTxnMarker: COMMIT coordinatorEpoch: 0",
        "endTxnMarker: ABORT coordinatorEpoch: 0",
        &format!("producerId: {} producerEpoch: 0", me.0),
        "isTransactional: true isControl: true",
    ] {
        assert!(log.contains(want), "{want} not in:\n{log}");
    }
    let index = dump(&[], "t-0/00000000000000000000.txnindex");
    assert!(
        index.contains(&format!(
            "version: 0 producerId: {} firstOffset: 2 lastOffset: 3 lastStableOffset: 4",
            me.0
        )),
        "{index}"
    );
    let snapshot = dump(&[], "t-0/00000000000000000005.snapshot");
    assert!(
        snapshot.contains(&format!(
            "producerId: {} producerEpoch: 0 coordinatorEpoch: 0 currentTxnFirstOffset: OptionalLong[4]",
            me.0
        )),
        "{snapshot}"
    );
    let states = dump(
        &["--transaction-log-decoder"],
        "__transaction_state-0/00000000000000000000.log",
    );
    let statuses: Vec<&str> = states
        .lines()
        .filter_map(|l| l.split("\"transactionStatus\":").nth(1))
        .map(|rest| rest.split(',').next().unwrap())
        .collect();
    // Empty at InitProducerId; then each transaction Ongoing, Prepare and
    // Complete (commit 2 and 4, abort 3 and 5); the last one left Ongoing.
    assert_eq!(
        statuses,
        ["0", "1", "2", "4", "1", "3", "5", "1"],
        "{states}"
    );
    assert!(states.contains(r#""transactionalId":"tx""#), "{states}");
}

const EOS_UNTIL_DONE: &str = r#"
import sys, time
from confluent_kafka import Consumer, Producer, TopicPartition
addr, n = sys.argv[1], int(sys.argv[2])
tp = TopicPartition('in', 0)
c = Consumer({'bootstrap.servers': addr, 'group.id': 'eos', 'enable.auto.commit': False,
              'auto.offset.reset': 'earliest', 'isolation.level': 'read_committed'})
p = Producer({'bootstrap.servers': addr, 'transactional.id': 'eos-tx',
              'transaction.timeout.ms': 10000})
p.init_transactions(60)
c.assign([tp])
while True:
    msgs = [m for m in c.consume(10, 1) if not m.error()]
    if not msgs:
        # Before its first record, a consumer has no position: the group's
        # committed offset says whether the input is done.
        if c.committed([tp], 60)[0].offset >= n:
            break
        continue
    p.begin_transaction()
    for m in msgs:
        p.produce('out', value=m.value().upper())
    # Ten records a transaction, written, then a pause before its end: the
    # work outlasts the kills, and a transaction stays open on the daemon
    # most of the time, for the kills to land in.
    p.flush(60)
    time.sleep(0.05)
    p.send_offsets_to_transaction(c.position([tp]), c.consumer_group_metadata(), 60)
    p.commit_transaction(60)
c.close()
print('done')
"#;

/// Whether the last whole batch of a partition directory is a
/// transaction's data, not a marker: a transaction is open there. Read by
/// the batches' headers only (attributes: 0x10 transactional, 0x20
/// control), so that it can be asked again and again while the daemon
/// writes; a batch not all there yet is not counted.
fn ends_in_open_transaction(dir: &std::path::Path) -> bool {
    let mut last = None;
    for base in kafka_support::log_bases(dir) {
        let Ok(bytes) = std::fs::read(dir.join(format!("{base:020}.log"))) else {
            continue;
        };
        let mut pos = 0;
        while bytes.len() - pos >= 23 {
            let len = i32::from_be_bytes(bytes[pos + 8..pos + 12].try_into().unwrap());
            let Ok(len) = usize::try_from(len) else { break };
            if len < 11 || bytes.len() - pos < 12 + len {
                break;
            }
            let attributes = i16::from_be_bytes([bytes[pos + 21], bytes[pos + 22]]);
            last = Some(attributes & 0x30 == 0x10);
            pos += 12 + len;
        }
    }
    last == Some(true)
}

/// The consume-transform-produce loop of 10,000 records, killed with
/// SIGKILL at random points 30 times: the daemon, then the client, in 20
/// rounds, and the client alone in the other 10: once a last client runs to
/// the end,
/// a read_committed consumer of the output reads each input record exactly
/// once. The seed is printed; COMMITFS_TEST_SEED replays it. The daemon's
/// kills are aimed inside a transaction, and those that landed there (its
/// data in `out-0`, its marker not, once the daemon is dead) are counted:
/// none would mean the test proved nothing of them.
#[test]
fn a_consume_transform_produce_loop_is_exactly_once_through_kills() {
    let Some(py) = require(python()) else { return };
    let seed = kafka_support::seed_from_env("COMMITFS_TEST_SEED");
    println!("COMMITFS_TEST_SEED={seed}");
    let mut rng = seed | 1;
    let mut next = move |below: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % below
    };
    let (_tmp, data) = data_dir(&["in-0", "out-0"]);
    let mut s = Server::start(&data, &[]);
    let n = 10_000;
    let values: Vec<String> = (0..n).map(|i| format!("r{i:05}")).collect();
    {
        let mut c = Conn::new(&s.addr);
        for chunk in values.chunks(500) {
            let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
            assert_eq!(
                produce(&mut c, None, "in", batch(-1, -1, -1, false, &refs)).0,
                0
            );
        }
    }
    let (mut clients, mut daemons, mut mid_transaction) = (0, 0, 0);
    for round in 0..30 {
        let mut client = std::process::Command::new(&py)
            .arg("-c")
            .arg(EOS_UNTIL_DONE)
            .args([&s.addr, &n.to_string()])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300 + next(2500)));
        // The daemon, then the client; every third round the client alone,
        // so that some of its successors meet a daemon that went on.
        let kill_daemon = round % 3 != 2;
        if kill_daemon {
            // Aimed inside a transaction: its data written to out-0, its
            // marker not yet (2 s at most; the kill lands anyway).
            let until = std::time::Instant::now() + std::time::Duration::from_secs(2);
            while !ends_in_open_transaction(&data.join("out-0"))
                && std::time::Instant::now() < until
            {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            s.kill();
            daemons += 1;
            mid_transaction += usize::from(ends_in_open_transaction(&data.join("out-0")));
        }
        // Killed even if it finished: its exit status is not looked at.
        let _ = client.kill();
        let _ = client.wait();
        clients += 1;
        if kill_daemon {
            s = Server::start(&data, &[]);
        }
    }
    // How far the killed clients got (for the log: how far depends on the
    // machine's speed, so nothing is asserted of it).
    let written = kafka_support::decode_partition_records(&data.join("out-0")).len();
    println!(
        "{clients} clients and {daemons} daemons killed, {mid_transaction} daemons inside a \
         transaction; {written} records and markers in out-0 before the last client"
    );
    assert!(
        mid_transaction > 0,
        "no kill of the daemon landed inside a transaction (seed {seed})"
    );
    let last =
        std::panic::catch_unwind(|| run_python(&py, EOS_UNTIL_DONE, &[&s.addr, &n.to_string()]));
    let Ok(out) = last else {
        panic!(
            "the last client did not finish (seed {seed}); the daemon's log:\n{}",
            s.log()
        );
    };
    assert_eq!(out.trim(), "done");
    let read = run_python(
        &py,
        PY_CONSUME_ISOLATED,
        &[&s.addr, "confluent", "out", "read_committed"],
    );
    let mut got: Vec<&str> = read.trim().split(',').collect();
    got.sort_unstable();
    let want: Vec<String> = values.iter().map(|v| v.to_uppercase()).collect();
    let dups = got.windows(2).filter(|w| w[0] == w[1]).count();
    assert_eq!(dups, 0, "records read twice (seed {seed})");
    assert_eq!(got.len(), n, "records missing (seed {seed})");
    assert_eq!(got, want.iter().map(String::as_str).collect::<Vec<_>>());
}
