//! Malformed requests, one connection each: every row gets its documented
//! answer (a Kafka error code, or the connection closed), the daemon stays
//! up and serves the next connection, and the data directory is unchanged.

mod kafka_support;

use bytes::Bytes;
use commitfs::record::{Compression, NewRecord, compute_crc, encode_batch_compressed};
use commitfs::storage::{LogConfig, LogManager, OpenOptions};
use kafka_protocol::messages::api_versions_request::ApiVersionsRequest;
use kafka_protocol::messages::api_versions_response::ApiVersionsResponse;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreateTopicsRequest};
use kafka_protocol::messages::create_topics_response::CreateTopicsResponse;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchRequest, FetchTopic};
use kafka_protocol::messages::fetch_response::FetchResponse;
use kafka_protocol::messages::metadata_request::MetadataRequest;
use kafka_protocol::messages::produce_request::{
    PartitionProduceData, ProduceRequest, TopicProduceData,
};
use kafka_protocol::messages::produce_response::ProduceResponse;
use kafka_protocol::messages::sasl_handshake_request::SaslHandshakeRequest;
use kafka_protocol::messages::sasl_handshake_response::SaslHandshakeResponse;
use kafka_protocol::messages::{ApiKey, TopicName, TransactionalId};
use kafka_protocol::protocol::StrBytes;
use kafka_support::{Conn, Server};

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

fn produce(t: &str, records: Option<Vec<u8>>, acks: i16) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(5000)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(name(t))
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(0)
                        .with_records(records.map(Bytes::from)),
                ]),
        ])
}

fn batch(n: usize, codec: Compression) -> Vec<u8> {
    let v: Vec<String> = (0..n).map(|i| format!("value-{i}")).collect();
    let recs: Vec<NewRecord> = v.iter().map(|v| NewRecord::value(v.as_bytes())).collect();
    let mut buf = Vec::new();
    encode_batch_compressed(&mut buf, 0, 1_700_000_000_000, &recs, codec);
    buf
}

fn fix_crc(b: &mut [u8]) {
    let crc = compute_crc(b);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
}

/// What a row must get.
enum Expect {
    Closed,
    /// The Produce response's partition error code.
    Produce(i16),
}

struct Table<'a> {
    server: &'a mut Server,
    rows: usize,
}

impl Table<'_> {
    /// Sends `frame` on a fresh connection and checks the answer.
    fn raw(&mut self, what: &str, frame: &[u8], expect: Expect) {
        let mut c = Conn::new(&self.server.addr);
        c.send_raw(frame);
        self.check(what, c, expect);
    }

    fn check(&mut self, what: &str, mut c: Conn, expect: Expect) {
        match expect {
            // A close, and only a close: an answer or a hang fails the row.
            Expect::Closed => c.expect_closed(what),
            Expect::Produce(code) => {
                let mut resp = c.recv_raw().unwrap_or_else(|| panic!("{what}: no answer"));
                use kafka_protocol::protocol::Decodable;
                kafka_protocol::messages::ResponseHeader::decode(&mut resp, 1).unwrap();
                let r = ProduceResponse::decode(&mut resp, 9).unwrap();
                let got = r.responses[0].partition_responses[0].error_code;
                assert_eq!(got, code, "{what}");
            }
        }
        assert!(self.server.alive(), "{what}: the daemon died");
        let mut probe = Conn::new(&self.server.addr);
        let r: ApiVersionsResponse =
            probe.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
        assert_eq!(r.error_code, 0, "{what}: the next connection is not served");
        self.rows += 1;
    }

    fn produce(&mut self, what: &str, req: &ProduceRequest, expect: Expect) {
        let mut c = Conn::new(&self.server.addr);
        let frame = c.encode(ApiKey::Produce, 9, req);
        self.raw(what, &frame, expect);
    }
}

#[test]
fn malformed_requests_get_their_documented_answer() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mgr = LogManager::open(&data, LogConfig::default(), OpenOptions::default()).unwrap();
    mgr.create_partition("t-0").unwrap();
    mgr.close().unwrap();
    let mut server = Server::start(
        &data,
        &["socket.request.max.bytes=1048576", "max.message.bytes=2000"],
    );
    let before = kafka_support::snapshot(&data);
    let mut t = Table {
        server: &mut server,
        rows: 0,
    };
    let mut c = Conn::new(&t.server.addr);
    framing_rows(&mut t, &mut c);
    version_rows(&mut t, &mut c);
    produce_rows(&mut t);
    let rows = t.rows + other_refusals(&mut c);
    assert!(rows >= 20, "only {rows} rows");
    assert_eq!(
        kafka_support::snapshot(&data),
        before,
        "the data dir changed"
    );
    let log = server.log();
    for line in [
        "larger than socket.request.max.bytes",
        "unknown API key 999",
        "Produce v2 is not served",
        "refused with CorruptMessage",
        "refused with MessageTooLarge",
        "SASL handshake refused",
    ] {
        assert!(log.contains(line), "no log line with {line:?}:\n{log}");
    }
    assert!(server.stop(), "the daemon did not stop cleanly");
    assert!(
        data.join(".kafka_cleanshutdown").exists(),
        "SIGTERM did not end in a clean shutdown"
    );
}

fn framing_rows(t: &mut Table, c: &mut Conn) {
    let metadata = c.encode(ApiKey::Metadata, 12, &MetadataRequest::default());
    let mut conn = Conn::new(&t.server.addr);
    conn.stream.write_all(&(-1i32).to_be_bytes()).unwrap();
    t.check("negative frame size", conn, Expect::Closed);
    let mut conn = Conn::new(&t.server.addr);
    // Only the size is sent: a refusal that waited for the body would hang here.
    conn.stream
        .write_all(&(2_000_000i32).to_be_bytes())
        .unwrap();
    t.check("frame over socket.request.max.bytes", conn, Expect::Closed);
    t.raw("empty frame", &[], Expect::Closed);
    t.raw("frame of 2 bytes", &[0, 3], Expect::Closed);
    let mut truncated = Conn::new(&t.server.addr);
    truncated.stream.write_all(&100i32.to_be_bytes()).unwrap();
    truncated.stream.write_all(&metadata[..10]).unwrap();
    kafka_support::half_close(&truncated);
    t.check("a frame cut short by the peer", truncated, Expect::Closed);
    t.raw("garbage bytes", &[0xde; 64], Expect::Closed);
}

fn version_rows(t: &mut Table, c: &mut Conn) {
    let metadata = c.encode(ApiKey::Metadata, 12, &MetadataRequest::default());
    let good = batch(3, Compression::None);
    let mut unknown = metadata.clone();
    unknown[0..2].copy_from_slice(&999i16.to_be_bytes());
    t.raw("unknown API key 999", &unknown, Expect::Closed);
    let mut not_served = metadata.clone();
    not_served[0..2].copy_from_slice(&60i16.to_be_bytes());
    t.raw(
        "DescribeCluster, a Kafka API not served",
        &not_served,
        Expect::Closed,
    );
    let mut old = c.encode(ApiKey::Produce, 3, &produce("t", Some(good.clone()), 1));
    old[2..4].copy_from_slice(&2i16.to_be_bytes());
    t.raw(
        "Produce v2: advertised for old librdkafka, not served",
        &old,
        Expect::Closed,
    );
    let mut high = metadata.clone();
    high[2..4].copy_from_slice(&13i16.to_be_bytes());
    t.raw(
        "Metadata v13: above the served range",
        &high,
        Expect::Closed,
    );
    let mut neg = metadata.clone();
    neg[2..4].copy_from_slice(&(-1i16).to_be_bytes());
    t.raw("negative API version", &neg, Expect::Closed);
    t.raw(
        "Metadata cut inside its body",
        &metadata[..metadata.len() - 1],
        Expect::Closed,
    );
    let mut client_id = c.encode(ApiKey::Metadata, 1, &MetadataRequest::default());
    client_id[8..10].copy_from_slice(&5000i16.to_be_bytes());
    t.raw(
        "client id longer than the frame",
        &client_id,
        Expect::Closed,
    );
    // Metadata v1 (a non-flexible array): two billion topics claimed in 4 bytes.
    let mut huge = c.encode(
        ApiKey::Metadata,
        1,
        &MetadataRequest::default().with_topics(Some(vec![])),
    );
    let n = huge.len();
    huge[n - 4..].copy_from_slice(&i32::MAX.to_be_bytes());
    t.raw("an array claiming 2^31-1 elements", &huge, Expect::Closed);
}

fn produce_rows(t: &mut Table) {
    let good = batch(3, Compression::None);
    let mut crc = good.clone();
    let last = crc.len() - 1;
    crc[last] ^= 0xff;
    t.produce(
        "batch with a bad CRC",
        &produce("t", Some(crc), 1),
        Expect::Produce(2),
    );
    let cut = good[..good.len() - 3].to_vec();
    t.produce(
        "batch shorter than its length",
        &produce("t", Some(cut), 1),
        Expect::Produce(2),
    );
    let mut magic = good.clone();
    magic[16] = 1;
    t.produce(
        "magic 1 message set",
        &produce("t", Some(magic), 1),
        Expect::Produce(2),
    );
    let mut count = good.clone();
    count[57..61].copy_from_slice(&7i32.to_be_bytes());
    fix_crc(&mut count);
    t.produce(
        "record count that does not match",
        &produce("t", Some(count), 1),
        Expect::Produce(2),
    );
    let mut control = good.clone();
    control[22] |= 0x20;
    fix_crc(&mut control);
    t.produce(
        "a control batch from a client",
        &produce("t", Some(control), 1),
        Expect::Produce(2),
    );
    let mut bomb = batch(3, Compression::Gzip);
    let l = bomb.len();
    bomb[l - 8..].copy_from_slice(&[0xff; 8]);
    fix_crc(&mut bomb);
    t.produce(
        "gzip section that does not inflate",
        &produce("t", Some(bomb), 1),
        Expect::Produce(2),
    );
    t.produce(
        "no records at all",
        &produce("t", None, 1),
        Expect::Produce(2),
    );
    let big = batch(200, Compression::None);
    t.produce(
        "batch over max.message.bytes",
        &produce("t", Some(big), 1),
        Expect::Produce(10),
    );
    t.produce(
        "acks=5",
        &produce("t", Some(good.clone()), 5),
        Expect::Produce(21),
    );
    t.produce(
        "unknown topic",
        &produce("nope", Some(good.clone()), 1),
        Expect::Produce(3),
    );
    // The good batch made transactional (attributes bit 4, producer 7 at
    // epoch 0, its CRC redone): without a transactional id Kafka refuses
    // the request (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); with one the
    // coordinator does not know, INVALID_PRODUCER_ID_MAPPING. More in
    // tests/kafka_transactions.rs.
    let mut txn_batch = good.to_vec();
    txn_batch[22] |= 0x10;
    txn_batch[43..51].copy_from_slice(&7i64.to_be_bytes());
    txn_batch[51..53].copy_from_slice(&0i16.to_be_bytes());
    let crc = crc32c::crc32c(&txn_batch[21..]);
    txn_batch[17..21].copy_from_slice(&crc.to_be_bytes());
    t.produce(
        "a transactional batch without a transactional id",
        &produce("t", Some(txn_batch.clone()), 1),
        Expect::Produce(53),
    );
    let txn = produce("t", Some(txn_batch), 1)
        .with_transactional_id(Some(TransactionalId(StrBytes::from_static_str("tx"))));
    t.produce(
        "a transactional batch of an unknown transactional id",
        &txn,
        Expect::Produce(49),
    );
    t.produce(
        "acks=0 with a bad batch: Kafka closes the connection",
        &produce("t", Some(good[..20].to_vec()), 0),
        Expect::Closed,
    );
}

/// Refusals that answer on a live connection; returns how many rows.
fn other_refusals(c: &mut Conn) -> usize {
    let r: SaslHandshakeResponse = c.call(
        ApiKey::SaslHandshake,
        1,
        &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN")),
    );
    assert_eq!(
        r.error_code, 34,
        "SASL on a PLAINTEXT listener: ILLEGAL_SASL_STATE"
    );
    let r: FetchResponse = c.call(
        ApiKey::Fetch,
        12,
        &FetchRequest::default()
            .with_session_id(7)
            .with_max_wait_ms(0),
    );
    assert_eq!(r.error_code, 70, "an unknown fetch session");
    let out_of_range = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(name("t"))
                .with_partitions(vec![
                    FetchPartition::default()
                        .with_fetch_offset(42)
                        .with_partition_max_bytes(1000),
                ]),
        ]);
    let r: FetchResponse = c.call(ApiKey::Fetch, 12, &out_of_range);
    assert_eq!(
        r.responses[0].partitions[0].error_code, 1,
        "OFFSET_OUT_OF_RANGE"
    );
    let bad_topics = CreateTopicsRequest::default().with_topics(vec![
        CreatableTopic::default()
            .with_name(name("bad/name"))
            .with_num_partitions(1)
            .with_replication_factor(1),
        CreatableTopic::default()
            .with_name(name("x"))
            .with_num_partitions(1)
            .with_replication_factor(3),
    ]);
    let r: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 7, &bad_topics);
    assert_eq!(r.topics[0].error_code, 17, "INVALID_TOPIC_EXCEPTION");
    assert_eq!(r.topics[1].error_code, 38, "INVALID_REPLICATION_FACTOR");
    5
}

use std::io::Write;
