//! A hostile client against Kafka's internal topics and KRaft's metadata
//! log, in raw frames built with `kafka-protocol`, one `commitfs serve` per
//! test. Each answer is the one Kafka's broker or controller gives (the
//! code and message in Kafka's source, named at each check); after each,
//! the daemon is alive, the records there before are intact (decoded by
//! kafka-protocol, compared whole), and `commitfs check` is clean.

mod kafka_support;

use std::path::Path;
use std::process::Command;

use bytes::Bytes;
use commitfs::record::internal::OffsetCommit;
use commitfs::record::{NewRecord, encode_batch};
use commitfs::storage::{LogConfig, LogManager, OpenOptions};
use kafka_protocol::messages::create_partitions_request::{
    CreatePartitionsRequest, CreatePartitionsTopic,
};
use kafka_protocol::messages::create_partitions_response::CreatePartitionsResponse;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreateTopicsRequest};
use kafka_protocol::messages::create_topics_response::CreateTopicsResponse;
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
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_commit_response::OffsetCommitResponse;
use kafka_protocol::messages::offset_fetch_request::{OffsetFetchRequest, OffsetFetchRequestTopic};
use kafka_protocol::messages::offset_fetch_response::OffsetFetchResponse;
use kafka_protocol::messages::produce_request::{
    PartitionProduceData, ProduceRequest, TopicProduceData,
};
use kafka_protocol::messages::produce_response::ProduceResponse;
use kafka_protocol::messages::{ApiKey, GroupId, TopicName};
use kafka_protocol::protocol::StrBytes;
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
    TopicName(s(v))
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

fn produce(c: &mut Conn, topic: &str, records: Vec<u8>) -> (i16, Option<String>) {
    let req = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(name(topic))
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(Bytes::from(records))),
                ]),
        ]);
    let r: ProduceResponse = c.call(ApiKey::Produce, 9, &req);
    let p = &r.responses[0].partition_responses[0];
    (
        p.error_code,
        p.error_message.as_ref().map(|m| m.to_string()),
    )
}

/// A commit record for group `g` of `t-0` at `offset`, as the coordinator
/// would write it: what a forger puts in `__consumer_offsets`.
fn forged_commit(offset: i64) -> Vec<u8> {
    let (k, v) = OffsetCommit {
        group: "g".into(),
        topic: "t".into(),
        partition: 0,
        offset,
        leader_epoch: -1,
        metadata: String::new(),
        commit_timestamp: 1_700_000_000_000,
        expire_timestamp: -1,
    }
    .to_record()
    .unwrap();
    let mut out = Vec::new();
    encode_batch(&mut out, 0, 1_700_000_000_000, &[NewRecord::keyed(&k, &v)]);
    out
}

/// A standalone commit (no membership) of `t-0` at `offset` for group `g`.
fn commit(c: &mut Conn, offset: i64) -> i16 {
    let req = OffsetCommitRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_generation_id_or_member_epoch(-1)
        .with_member_id(s(""))
        .with_topics(vec![
            OffsetCommitRequestTopic::default()
                .with_name(name("t"))
                .with_partitions(vec![
                    OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(offset),
                ]),
        ]);
    let r: OffsetCommitResponse = c.call(ApiKey::OffsetCommit, 8, &req);
    r.topics[0].partitions[0].error_code
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

fn create_topic(c: &mut Conn, topic: &str, partitions: i32) -> (i16, Option<String>) {
    let req = CreateTopicsRequest::default().with_topics(vec![
        CreatableTopic::default()
            .with_name(name(topic))
            .with_num_partitions(partitions)
            .with_replication_factor(-1),
    ]);
    let r: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 7, &req);
    let t = &r.topics[0];
    (
        t.error_code,
        t.error_message.as_ref().map(|m| m.to_string()),
    )
}

fn grow(c: &mut Conn, topic: &str, count: i32) -> (i16, Option<String>) {
    let req = CreatePartitionsRequest::default()
        .with_topics(vec![
            CreatePartitionsTopic::default()
                .with_name(name(topic))
                .with_count(count),
        ])
        .with_timeout_ms(10_000);
    let r: CreatePartitionsResponse = c.call(ApiKey::CreatePartitions, 3, &req);
    let t = &r.results[0];
    (
        t.error_code,
        t.error_message.as_ref().map(|m| m.to_string()),
    )
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

    // ReplicaManager.appendToLocalLog: INVALID_TOPIC_EXCEPTION, no custom message.
    let (code, msg) = produce(&mut c, "__consumer_offsets", forged_commit(999));
    assert_eq!((code, msg), (INVALID_TOPIC_EXCEPTION, None));
    // An internal topic a client created (Kafka lets it) is guarded alike.
    assert_eq!(create_topic(&mut c, "__transaction_state", 1).0, 0);
    let (code, _) = produce(&mut c, "__transaction_state", forged_commit(5));
    assert_eq!(code, INVALID_TOPIC_EXCEPTION);
    // ReplicaManager.deleteRecordsOnLocalLog.
    assert_eq!(
        delete_records(&mut c, "__consumer_offsets"),
        (INVALID_TOPIC_EXCEPTION, -1)
    );
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
    let (code, _) = produce(&mut c, "__cluster_metadata", forged_commit(7));
    assert_eq!(code, UNKNOWN_TOPIC_OR_PARTITION);
    assert_eq!(
        delete_records(&mut c, "__cluster_metadata"),
        (UNKNOWN_TOPIC_OR_PARTITION, -1)
    );
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
