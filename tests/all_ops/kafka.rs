//! What the test says to the Kafka listener and reads back, with
//! kafka-protocol's client codecs: Produce (plain and idempotent),
//! InitProducerId, Fetch at both isolation levels, ListOffsets; and the
//! batches the test builds for produce and for the storage API's
//! transactional appends.

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchRequest, FetchTopic};
use kafka_protocol::messages::fetch_response::FetchResponse;
use kafka_protocol::messages::init_producer_id_request::InitProducerIdRequest;
use kafka_protocol::messages::init_producer_id_response::InitProducerIdResponse;
use kafka_protocol::messages::list_offsets_request::{
    ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic,
};
use kafka_protocol::messages::list_offsets_response::ListOffsetsResponse;
use kafka_protocol::messages::produce_response::ProduceResponse;
use kafka_protocol::messages::{ApiKey, BrokerId, ProducerId, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Compression, RecordBatchDecoder};

use super::kafka_support::Conn;
use super::kafka_support::requests::produce_request;
use super::system::TOPIC;

fn topic() -> TopicName {
    TopicName(StrBytes::from_static_str(TOPIC))
}

pub type KV = (Option<Vec<u8>>, Option<Vec<u8>>);

/// One batch of `recs` at `ts`, of producer (`pid`, `epoch`) from `seq`
/// (`pid` -1: no producer).
pub fn batch(recs: &[KV], ts: i64, pid: i64, epoch: i16, seq: i32, txn: bool) -> Bytes {
    let records =
        (recs.iter()).map(|(k, v)| (k.clone().map(Bytes::from), v.clone().map(Bytes::from)));
    let seq = (pid >= 0).then_some(seq);
    super::batch::encode((pid, epoch), seq, txn, ts, records, Compression::None).freeze()
}

/// InitProducerId without a transactional id: (producer id, epoch).
pub fn init_producer(c: &mut Conn) -> (i64, i16) {
    // No transactional id (the default is an empty one, a transactional
    // producer's).
    let req = InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_transaction_timeout_ms(-1)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let r: InitProducerIdResponse = c.call(ApiKey::InitProducerId, 4, &req);
    assert_eq!(r.error_code, 0, "InitProducerId");
    (r.producer_id.0, r.producer_epoch)
}

/// Produce v9 (acks -1) of one batch to t-0: (error code, base offset).
pub fn produce(c: &mut Conn, records: Bytes) -> (i16, i64) {
    let req = produce_request(TOPIC, 0, records);
    let r: ProduceResponse = c.call(ApiKey::Produce, 9, &req);
    let p = &r.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

/// One record as a consumer decodes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Got {
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub timestamp: i64,
    pub producer_id: i64,
    pub transactional: bool,
    /// A control record: Some(commit).
    pub control: Option<bool>,
}

/// What one partition's fetches said.
#[derive(Debug, Default)]
pub struct Fetched {
    pub records: Vec<Got>,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    /// (producer, first offset) of the aborted transactions listed.
    pub aborted: Vec<(i64, i64)>,
}

/// Fetch v12 from `from` at `isolation` until the end the response gives
/// (the high watermark, or the last stable offset), batch by batch.
pub fn fetch_all(c: &mut Conn, isolation: i8, from: i64) -> Fetched {
    let mut out = Fetched::default();
    let mut offset = from;
    for round in 0.. {
        assert!(round < 1000, "Fetch never reached the end");
        let req = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(0)
            .with_max_bytes(1 << 20)
            .with_isolation_level(isolation)
            .with_topics(vec![
                FetchTopic::default()
                    .with_topic(topic())
                    .with_partitions(vec![
                        FetchPartition::default()
                            .with_partition(0)
                            .with_fetch_offset(offset)
                            .with_partition_max_bytes(1 << 20),
                    ]),
            ]);
        let r: FetchResponse = c.call(ApiKey::Fetch, 12, &req);
        assert_eq!(r.error_code, 0, "Fetch");
        let p = &r.responses[0].partitions[0];
        assert_eq!(p.error_code, 0, "Fetch of t-0 at {offset}");
        out.high_watermark = p.high_watermark;
        out.last_stable_offset = p.last_stable_offset;
        out.log_start_offset = p.log_start_offset;
        for a in p.aborted_transactions.iter().flatten() {
            if !out.aborted.contains(&(a.producer_id.0, a.first_offset)) {
                out.aborted.push((a.producer_id.0, a.first_offset));
            }
        }
        let bytes = p.records.clone().unwrap_or_default();
        let end = if isolation == 0 {
            p.high_watermark
        } else {
            p.last_stable_offset
        };
        if bytes.is_empty() {
            break;
        }
        let mut pos = 0;
        while pos + 61 <= bytes.len() {
            let len = i32::from_be_bytes(bytes[pos + 8..pos + 12].try_into().unwrap()) as usize;
            if pos + 12 + len > bytes.len() {
                break; // a partial batch at the end of the response
            }
            let frame = bytes.slice(pos..pos + 12 + len);
            let base = i64::from_be_bytes(frame[0..8].try_into().unwrap());
            let delta = i32::from_be_bytes(frame[23..27].try_into().unwrap()) as i64;
            let set = RecordBatchDecoder::decode(&mut frame.clone()).expect("a fetched batch");
            for r in set.records {
                if r.offset < from {
                    continue;
                }
                let control = r.control.then(|| {
                    let k = r.key.as_ref().expect("a control record's key");
                    i16::from_be_bytes([k[2], k[3]]) == 1
                });
                out.records.push(Got {
                    offset: r.offset,
                    key: r.key.map(|k| k.to_vec()),
                    value: r.value.map(|v| v.to_vec()),
                    timestamp: r.timestamp,
                    producer_id: r.producer_id,
                    transactional: r.transactional,
                    control,
                });
            }
            offset = base + delta + 1;
            pos += 12 + len;
        }
        if offset >= end {
            break;
        }
    }
    out
}

/// What a `read_committed` consumer keeps of fetched records: control
/// records never, and a transactional record of a producer whose aborted
/// transaction (from the response's list) began at or before it, until
/// that producer's ABORT marker (Kafka's `Fetcher` logic).
pub fn consumer_filter(f: &Fetched) -> Vec<Got> {
    let mut pending = f.aborted.clone();
    pending.sort_by_key(|(_, first)| *first);
    let mut pending = pending.into_iter().peekable();
    let mut aborting = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for r in &f.records {
        while let Some((pid, _)) = pending.next_if(|(_, first)| *first <= r.offset) {
            aborting.insert(pid);
        }
        match r.control {
            Some(commit) => {
                if !commit {
                    aborting.remove(&r.producer_id);
                }
            }
            None if r.transactional && aborting.contains(&r.producer_id) => {}
            None => out.push(r.clone()),
        }
    }
    out
}

/// ListOffsets v7 of t-0 at `timestamp` (-2 earliest, -1 latest):
/// (error code, offset, timestamp).
pub fn list_offset(c: &mut Conn, isolation: i8, timestamp: i64) -> (i16, i64, i64) {
    let req = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_isolation_level(isolation)
        .with_topics(vec![
            ListOffsetsTopic::default()
                .with_name(topic())
                .with_partitions(vec![
                    ListOffsetsPartition::default()
                        .with_partition_index(0)
                        .with_timestamp(timestamp),
                ]),
        ]);
    let r: ListOffsetsResponse = c.call(ApiKey::ListOffsets, 7, &req);
    let p = &r.topics[0].partitions[0];
    (p.error_code, p.offset, p.timestamp)
}
