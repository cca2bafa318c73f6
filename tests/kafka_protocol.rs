//! The listener spoken to directly, through `kafka-protocol`'s client side:
//! ApiVersions, Produce stored verbatim, Fetch from inside a batch, the long
//! poll woken by an append, and a table of malformed requests. Runs
//! `commitfs serve`, so no FUSE is needed.

mod kafka_support;

use bytes::Bytes;
use commitfs::record::{Compression, NewRecord, encode_batch_compressed};
use kafka_protocol::messages::api_versions_request::ApiVersionsRequest;
use kafka_protocol::messages::api_versions_response::ApiVersionsResponse;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchRequest, FetchTopic};
use kafka_protocol::messages::fetch_response::FetchResponse;
use kafka_protocol::messages::metadata_request::MetadataRequest;
use kafka_protocol::messages::metadata_response::MetadataResponse;
use kafka_protocol::messages::produce_request::{
    PartitionProduceData, ProduceRequest, TopicProduceData,
};
use kafka_protocol::messages::produce_response::ProduceResponse;
use kafka_protocol::messages::{ApiKey, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_support::{Conn, Server, data_dir};

pub fn topic(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

pub fn produce_req(t: &str, partition: i32, records: Option<Bytes>, acks: i16) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(topic(t))
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(partition)
                        .with_records(records),
                ]),
        ])
}

pub fn fetch_req(t: &str, offset: i64, max_wait: i32, max_bytes: i32) -> FetchRequest {
    FetchRequest::default()
        .with_max_wait_ms(max_wait)
        .with_min_bytes(1)
        .with_max_bytes(max_bytes)
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(topic(t))
                .with_partitions(vec![
                    FetchPartition::default()
                        .with_fetch_offset(offset)
                        .with_partition_max_bytes(max_bytes),
                ]),
        ])
}

/// A batch a producer might send: keyed records with headers, compressed.
fn client_batch(n: usize, codec: Compression, tag: &str) -> Vec<u8> {
    let keys: Vec<String> = (0..n).map(|i| format!("k{i}")).collect();
    let values: Vec<String> = (0..n)
        .map(|i| format!("{tag}-{i}-{}", "v".repeat(i % 7)))
        .collect();
    let headers = [("h", Some(&b"hv"[..]))];
    let recs: Vec<NewRecord> = (0..n)
        .map(|i| NewRecord {
            key: Some(keys[i].as_bytes()),
            value: Some(values[i].as_bytes()),
            headers: &headers,
        })
        .collect();
    let mut buf = Vec::new();
    // A client's base offset is 0; the broker assigns the real one.
    encode_batch_compressed(&mut buf, 0, 1_700_000_000_000, &recs, codec);
    buf
}

#[test]
fn api_versions_every_version_and_an_unknown_one() {
    let (_tmp, data) = data_dir(&[]);
    let s = Server::start(&data, &[]);
    let mut c = Conn::new(&s.addr);
    for v in 0..=3 {
        let r: ApiVersionsResponse = c.call(ApiKey::ApiVersions, v, &ApiVersionsRequest::default());
        assert_eq!(r.error_code, 0, "v{v}");
        let produce = r.api_keys.iter().find(|k| k.api_key == 0).expect("Produce");
        assert_eq!((produce.min_version, produce.max_version), (0, 9));
        let fetch = r.api_keys.iter().find(|k| k.api_key == 1).expect("Fetch");
        assert_eq!((fetch.min_version, fetch.max_version), (0, 12));
    }
    // A version above ours: UNSUPPORTED_VERSION, answered at v0 with the list.
    // (Encoded at v3, then labelled v9: no encoder knows v9.)
    let mut frame = c.encode(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    frame[2..4].copy_from_slice(&9i16.to_be_bytes());
    c.send_raw(&frame);
    let mut resp = c.recv_raw().expect("answered");
    use kafka_protocol::protocol::Decodable;
    kafka_protocol::messages::ResponseHeader::decode(&mut resp, 0).unwrap();
    let r = ApiVersionsResponse::decode(&mut resp, 0).unwrap();
    assert_eq!(r.error_code, 35);
    assert!(r.api_keys.len() >= 10);
}

#[test]
fn produce_is_stored_verbatim_and_fetch_returns_whole_batches() {
    let (_tmp, data) = data_dir(&["t-0"]);
    let s = Server::start(&data, &[]);
    let mut c = Conn::new(&s.addr);
    let mut sent = Vec::new();
    let mut offset = 0i64;
    for (i, codec) in [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ]
    .into_iter()
    .enumerate()
    {
        let batch = client_batch(5 + i, codec, codec.name());
        let r: ProduceResponse = c.call(
            ApiKey::Produce,
            9,
            &produce_req("t", 0, Some(Bytes::from(batch.clone())), -1),
        );
        let p = &r.responses[0].partition_responses[0];
        assert_eq!(p.error_code, 0, "{codec:?}");
        assert_eq!(p.base_offset, offset);
        offset += 5 + i as i64;
        sent.push(batch);
    }
    // The segment holds each batch as sent but for baseOffset (0..8) and
    // partitionLeaderEpoch (12..16).
    let seg = std::fs::read(data.join("t-0/00000000000000000000.log")).unwrap();
    let mut pos = 0;
    let mut base = 0i64;
    for b in &sent {
        let stored = &seg[pos..pos + b.len()];
        assert_eq!(&stored[8..12], &b[8..12]);
        assert_eq!(
            &stored[16..],
            &b[16..],
            "batch at {pos} differs from what was sent"
        );
        assert_eq!(i64::from_be_bytes(stored[0..8].try_into().unwrap()), base);
        base += i32::from_be_bytes(b[23..27].try_into().unwrap()) as i64 + 1;
        pos += b.len();
    }
    assert_eq!(pos, seg.len());
    // A fetch from inside the second batch starts with that whole batch.
    let r: FetchResponse = c.call(ApiKey::Fetch, 12, &fetch_req("t", 7, 0, 1 << 20));
    let p = &r.responses[0].partitions[0];
    assert_eq!(p.error_code, 0);
    assert_eq!(p.high_watermark, offset);
    let records = p.records.as_ref().unwrap();
    assert_eq!(
        &records[..],
        &seg[sent[0].len()..],
        "whole batches from the one holding 7"
    );
    // A fetch limit smaller than the first batch still returns it whole.
    let r: FetchResponse = c.call(ApiKey::Fetch, 12, &fetch_req("t", 0, 0, 10));
    let records = r.responses[0].partitions[0].records.clone().unwrap();
    assert_eq!(&records[..], &seg[..sent[0].len()]);
}

/// The long poll is proved, not assumed: the daemon says the fetch is
/// parked (held for an append, on no thread) before the produce is sent, and it asks to wait 300 s, far past
/// the 60 s the test waits for its answer: so an answer at all is a
/// wake-up, and no answer fails the test.
#[test]
fn a_long_poll_wakes_on_an_append() {
    let (_tmp, data) = data_dir(&["t-0"]);
    let s = Server::start(&data, &[]);
    let parked = || kafka_support::parked_fetches(&s.log());
    assert_eq!(parked(), 0, "nothing waits yet");
    let mut waiter = Conn::new(&s.addr);
    let frame = waiter.encode(ApiKey::Fetch, 12, &fetch_req("t", 0, 300_000, 1 << 20));
    waiter.send_raw(&frame);
    kafka_support::wait_for_parked_fetch(|| s.log(), 0, "a fetch at the log end");
    let mut c = Conn::new(&s.addr);
    let batch = client_batch(3, Compression::None, "late");
    let r: ProduceResponse = c.call(
        ApiKey::Produce,
        9,
        &produce_req("t", 0, Some(Bytes::from(batch.clone())), 1),
    );
    assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
    // recv_raw fails the test if nothing comes within READ_TIMEOUT (60 s),
    // long before the fetch's own 300 s could run out.
    let mut resp = waiter
        .recv_for("the parked fetch's answer: the append did not wake it")
        .expect("the parked fetch's answer, not a closed connection");
    use kafka_protocol::protocol::Decodable;
    kafka_protocol::messages::ResponseHeader::decode(&mut resp, 1).unwrap();
    let r = FetchResponse::decode(&mut resp, 12).unwrap();
    let p = &r.responses[0].partitions[0];
    assert_eq!(p.error_code, 0);
    assert_eq!(p.high_watermark, 3);
    assert_eq!(
        p.records.as_ref().map(|r| r.len()),
        Some(batch.len()),
        "the woken fetch returns the appended batch"
    );
}

#[test]
fn metadata_lists_topics_and_fills_holes() {
    let (_tmp, data) = data_dir(&["a-0", "a-1", "a-2", "b-0"]);
    // A hole made behind commitfs's back.
    std::fs::remove_dir_all(data.join("a-1")).unwrap();
    let s = Server::start(&data, &[]);
    let mut c = Conn::new(&s.addr);
    for v in [1, 4, 9, 12] {
        let r: MetadataResponse = c.call(
            ApiKey::Metadata,
            v,
            &MetadataRequest::default().with_topics(None),
        );
        assert_eq!(r.brokers.len(), 1);
        assert_eq!(
            r.brokers[0].port as u16,
            s.addr.rsplit(':').next().unwrap().parse::<u16>().unwrap()
        );
        let a = r
            .topics
            .iter()
            .find(|t| t.name.as_ref().unwrap().0.as_str() == "a")
            .unwrap();
        let ids: Vec<i32> = a.partitions.iter().map(|p| p.partition_index).collect();
        assert_eq!(ids, [0, 1, 2], "v{v}: no hole in partition ids");
        assert_eq!(
            a.partitions[1].error_code, 5,
            "the hole is an unavailable partition"
        );
        assert_eq!(a.partitions[1].leader_id.0, -1);
        assert_eq!(a.partitions[0].leader_id.0, 0);
        assert_eq!(r.topics.len(), 2);
    }
}
