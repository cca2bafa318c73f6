//! A hostile client against Kafka's internal topics and KRaft's metadata
//! log, in raw frames built with `kafka-protocol`, one `commitfs serve` per
//! test. Each answer is the one Kafka's broker or controller gives (the
//! code and message in Kafka's source, named at each check); after each,
//! the daemon is alive, the records there before are intact (decoded by
//! kafka-protocol, compared whole), and `commitfs check` is clean.

mod kafka_support;

use std::path::Path;
use std::process::Command;

use commitfs::record::{NewRecord, encode_batch};
use commitfs::storage::{LogConfig, LogManager, OpenOptions};
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsRequest, DeleteRecordsTopic,
};
use kafka_protocol::messages::delete_records_response::DeleteRecordsResponse;
use kafka_protocol::messages::delete_topics_request::{DeleteTopicState, DeleteTopicsRequest};
use kafka_protocol::messages::delete_topics_response::DeleteTopicsResponse;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig, IncrementalAlterConfigsRequest,
};
use kafka_protocol::messages::incremental_alter_configs_response::IncrementalAlterConfigsResponse;
use kafka_protocol::messages::metadata_request::{MetadataRequest, MetadataRequestTopic};
use kafka_protocol::messages::metadata_response::MetadataResponse;
use kafka_protocol::messages::offset_fetch_request::{OffsetFetchRequest, OffsetFetchRequestTopic};
use kafka_protocol::messages::offset_fetch_response::OffsetFetchResponse;
use kafka_protocol::messages::{ApiKey, GroupId, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_support::requests::{
    Answer, creatable, create_partitions, create_topics, produce_to, standalone_commit, topic_name,
};
use kafka_support::{BIN, Conn, Server, bounded, decode_partition, snapshot};

// Kafka's error codes (`org.apache.kafka.common.protocol.Errors`).
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const INVALID_TOPIC_EXCEPTION: i16 = 17;
const INVALID_PARTITIONS: i16 = 37;
const INVALID_REQUEST: i16 = 42;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn name(v: &str) -> TopicName {
    topic_name(v)
}

/// Topic `t` with one record, and optionally `__cluster_metadata-0` with
/// one record of its own, made through storage before the daemon starts.
fn data_dir(dir: &Path, cluster_metadata: bool) {
    let mgr = LogManager::open(dir, LogConfig::default(), OpenOptions::default()).unwrap();
    let t = mgr.create_partition("t-0").unwrap();
    t.append(&[NewRecord::value(b"first")]).unwrap();
    if cluster_metadata {
        let m = mgr.create_partition("__cluster_metadata-0").unwrap();
        m.append(&[NewRecord::value(b"a metadata record")]).unwrap();
    }
    mgr.close().unwrap();
}

/// A commit record for group `g` of `t-0` at `offset`, as the coordinator
/// would write it: what a forger puts in `__consumer_offsets`. Spelled out
/// from Kafka's `OffsetCommitKey` (version 1) and `OffsetCommitValue`
/// (version 3) schemas rather than by commitfs's encoder.
fn forged_commit(offset: i64) -> Vec<u8> {
    let string = |s: &str| [&(s.len() as i16).to_be_bytes()[..], s.as_bytes()].concat();
    let key = [
        &1i16.to_be_bytes()[..], // version
        &string("g"),            // group
        &string("t"),            // topic
        &0i32.to_be_bytes(),     // partition
    ]
    .concat();
    let value = [
        &3i16.to_be_bytes()[..],             // version
        &offset.to_be_bytes(),               // offset
        &(-1i32).to_be_bytes(),              // leaderEpoch
        &string(""),                         // metadata
        &1_700_000_000_000i64.to_be_bytes(), // commitTimestamp
    ]
    .concat();
    let mut out = Vec::new();
    encode_batch(
        &mut out,
        0,
        1_700_000_000_000,
        &[NewRecord::keyed(&key, &value)],
    );
    out
}

/// A standalone commit (no membership) of `t-0` at `offset` for group `g`.
fn commit(c: &mut Conn, offset: i64) -> i16 {
    standalone_commit(c, "g", "t", offset, None)
}

fn committed(addr: &str) -> i64 {
    let req = OffsetFetchRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_topics(Some(vec![
            OffsetFetchRequestTopic::default()
                .with_name(name("t"))
                .with_partition_indexes(vec![0]),
        ]));
    let r: OffsetFetchResponse = Conn::new(addr).call(ApiKey::OffsetFetch, 5, &req);
    r.topics[0].partitions[0].committed_offset
}

fn delete_records(c: &mut Conn, topic: &str) -> (i16, i64) {
    let req = DeleteRecordsRequest::default().with_topics(vec![
        DeleteRecordsTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![DeleteRecordsPartition::default().with_offset(-1)]),
    ]);
    let r: DeleteRecordsResponse = c.call(ApiKey::DeleteRecords, 2, &req);
    let p = &r.topics[0].partitions[0];
    (p.error_code, p.low_watermark)
}

fn delete_topic(c: &mut Conn, topic: &str) -> (i16, Option<String>) {
    let req = DeleteTopicsRequest::default().with_topics(vec![
        DeleteTopicState::default().with_name(Some(name(topic))),
    ]);
    let r: DeleteTopicsResponse = c.call(ApiKey::DeleteTopics, 6, &req);
    let t = &r.responses[0];
    (
        t.error_code,
        t.error_message.as_ref().map(|m| m.to_string()),
    )
}

fn create_topic(c: &mut Conn, topic: &str, partitions: i32) -> Answer {
    create_topics(c, vec![creatable(topic, partitions)], false).remove(0)
}

fn grow(c: &mut Conn, topic: &str, count: i32) -> Answer {
    create_partitions(c, &[(topic, count)], false).remove(0)
}

/// A Produce of a forged commit and a DeleteRecords of everything, to
/// partition 0 of `topic`: both get `code` (no message).
fn writes_refused(c: &mut Conn, topic: &str, code: i16) {
    assert_eq!(
        produce_to(c, topic, forged_commit(999)),
        (code, None),
        "{topic}"
    );
    assert_eq!(delete_records(c, topic), (code, -1), "{topic}");
}

fn alter(c: &mut Conn, topic: &str, key: &str, value: &str) -> (i16, Option<String>) {
    let req = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s(topic))
            .with_configs(vec![
                AlterableConfig::default()
                    .with_name(s(key))
                    .with_config_operation(0)
                    .with_value(Some(s(value))),
            ]),
    ]);
    let r: IncrementalAlterConfigsResponse = c.call(ApiKey::IncrementalAlterConfigs, 1, &req);
    let t = &r.responses[0];
    (
        t.error_code,
        t.error_message.as_ref().map(|m| m.to_string()),
    )
}

/// Metadata of every topic (`None`) or of `topics`: (name, code, internal).
fn metadata(c: &mut Conn, topics: Option<&[&str]>) -> Vec<(String, i16, bool)> {
    let req = MetadataRequest::default()
        .with_topics(topics.map(|ts| {
            ts.iter()
                .map(|t| MetadataRequestTopic::default().with_name(Some(name(t))))
                .collect()
        }))
        .with_allow_auto_topic_creation(false);
    let r: MetadataResponse = c.call(ApiKey::Metadata, 12, &req);
    r.topics
        .iter()
        .map(|t| {
            let n = t.name.as_ref().map_or(String::new(), |n| n.0.to_string());
            (n, t.error_code, t.is_internal)
        })
        .collect()
}

/// Every record value of a partition directory, by kafka-protocol's decoder.
fn records(dir: &Path) -> Vec<(i64, Option<Vec<u8>>)> {
    decode_partition(dir)
        .into_iter()
        .flat_map(|b| b.records)
        .collect()
}

fn assert_check_clean(data: &Path) {
    let out = bounded::run(Command::new(BIN).arg("check").arg(data), "commitfs check");
    assert!(
        out.status.success(),
        "commitfs check is not clean:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn writes_to_internal_topics_are_refused_as_kafka_refuses_them() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    data_dir(&data, false);
    let mut server = Server::start(&data, &[]);
    let mut c = Conn::new(&server.addr);
    // The coordinator writes __consumer_offsets-0 itself.
    assert_eq!(commit(&mut c, 1), 0);
    let offsets = data.join("__consumer_offsets-0");
    let before = records(&offsets);
    assert_eq!(before.len(), 1, "the coordinator's one commit record");

    // ReplicaManager.appendToLocalLog (no custom message) and
    // deleteRecordsOnLocalLog: INVALID_TOPIC_EXCEPTION.
    writes_refused(&mut c, "__consumer_offsets", INVALID_TOPIC_EXCEPTION);
    // An internal topic a client created (Kafka lets it) is guarded alike.
    assert_eq!(create_topic(&mut c, "__transaction_state", 1).0, 0);
    writes_refused(&mut c, "__transaction_state", INVALID_TOPIC_EXCEPTION);
    // kafka-topics.sh's refusals (the broker itself would go ahead).
    assert_eq!(
        delete_topic(&mut c, "__consumer_offsets"),
        (
            INVALID_TOPIC_EXCEPTION,
            Some(
                "Topic __consumer_offsets is a kafka internal topic and is not allowed to be \
                 marked for deletion."
                    .into()
            )
        )
    );
    assert_eq!(
        grow(&mut c, "__consumer_offsets", 4),
        (
            INVALID_PARTITIONS,
            Some("The number of partitions for the offsets topic cannot be changed.".into())
        )
    );
    // Configs of an internal topic are a client's to change, as in Kafka.
    assert_eq!(
        alter(&mut c, "__consumer_offsets", "retention.ms", "86400000").0,
        0
    );
    let listed = metadata(&mut c, Some(&["__consumer_offsets"]));
    assert_eq!(listed, [("__consumer_offsets".to_string(), 0, true)]);

    assert!(server.alive());
    assert!(!data.join("__consumer_offsets-1").exists());
    assert_eq!(records(&offsets), before, "nothing forged, nothing deleted");
    assert!(records(&data.join("__transaction_state-0")).is_empty());
    assert_eq!(records(&data.join("t-0")), [(0, Some(b"first".to_vec()))]);
    // The coordinator reads the topic back at a start: its own commit only.
    assert!(server.stop(), "a clean stop");
    assert_check_clean(&data);
    let server = Server::start(&data, &[]);
    assert_eq!(committed(&server.addr), 1);
}

#[test]
fn the_cluster_metadata_log_is_not_a_topic_to_clients() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    data_dir(&data, true);
    let kraft = data.join("__cluster_metadata-0");
    let before = snapshot(&kraft);
    let mut server = Server::start(&data, &[]);
    let mut c = Conn::new(&server.addr);
    const NOT_HOSTED: &str = "This server does not host this topic-partition.";

    // Not in Kafka's metadata image: never listed, unknown by name.
    let all = metadata(&mut c, None);
    assert_eq!(all, [("t".to_string(), 0, false)]);
    let named = metadata(&mut c, Some(&["__cluster_metadata"]));
    assert_eq!(named[0].1, UNKNOWN_TOPIC_OR_PARTITION);
    writes_refused(&mut c, "__cluster_metadata", UNKNOWN_TOPIC_OR_PARTITION);
    // ControllerApis.createTopics, ReplicationControlManager.findTopicIds,
    // QuorumController's ConfigResourceExistenceChecker.
    assert_eq!(
        create_topic(&mut c, "__cluster_metadata", 1),
        (
            INVALID_REQUEST,
            Some("Creation of internal topic __cluster_metadata is prohibited.".into())
        )
    );
    assert_eq!(
        delete_topic(&mut c, "__cluster_metadata"),
        (UNKNOWN_TOPIC_OR_PARTITION, Some(NOT_HOSTED.into()))
    );
    assert_eq!(
        grow(&mut c, "__cluster_metadata", 2),
        (UNKNOWN_TOPIC_OR_PARTITION, None)
    );
    assert_eq!(
        alter(&mut c, "__cluster_metadata", "retention.ms", "1"),
        (
            UNKNOWN_TOPIC_OR_PARTITION,
            Some("The topic '__cluster_metadata' does not exist.".into())
        )
    );
    assert!(server.alive());
    assert!(!data.join("__cluster_metadata-1").exists());
    assert!(server.stop(), "a clean stop");
    assert_eq!(snapshot(&kraft), before, "the metadata log is as it was");
    assert_check_clean(&data);
}

#[test]
fn creating_the_cluster_metadata_log_leaves_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    data_dir(&data, false);
    let server = Server::start(&data, &["auto.create.topics.enable=true"]);
    let mut c = Conn::new(&server.addr);
    let (code, _) = create_topic(&mut c, "__cluster_metadata", 1);
    assert_eq!(code, INVALID_REQUEST);
    // Nor does auto-creation make it: Metadata asks, allowed to create.
    let req = MetadataRequest::default()
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(name("__cluster_metadata"))),
        ]))
        .with_allow_auto_topic_creation(true);
    let r: MetadataResponse = c.call(ApiKey::Metadata, 12, &req);
    assert_eq!(r.topics[0].error_code, UNKNOWN_TOPIC_OR_PARTITION);
    assert!(!data.join("__cluster_metadata-0").exists());
}
