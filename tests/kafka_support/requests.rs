//! Admin and produce requests a raw client sends, built with
//! `kafka-protocol`, each answering with what its tests compare: the error
//! code and the message of each topic or partition.

use std::path::Path;

use bytes::Bytes;
use kafka_protocol::messages::create_partitions_request::{
    CreatePartitionsRequest, CreatePartitionsTopic,
};
use kafka_protocol::messages::create_partitions_response::CreatePartitionsResponse;
use kafka_protocol::messages::create_topics_request::{
    CreatableTopic, CreatableTopicConfig, CreateTopicsRequest,
};
use kafka_protocol::messages::create_topics_response::CreateTopicsResponse;
use kafka_protocol::messages::find_coordinator_request::FindCoordinatorRequest;
use kafka_protocol::messages::find_coordinator_response::FindCoordinatorResponse;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_commit_response::OffsetCommitResponse;
use kafka_protocol::messages::produce_request::{
    PartitionProduceData, ProduceRequest, TopicProduceData,
};
use kafka_protocol::messages::produce_response::ProduceResponse;
use kafka_protocol::messages::{ApiKey, GroupId, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::Conn;

/// A code and the message beside it, if the response carried one.
pub type Answer = (i16, Option<String>);

pub fn topic_name(v: &str) -> TopicName {
    TopicName(StrBytes::from_string(v.to_string()))
}

fn answer(code: i16, message: &Option<StrBytes>) -> Answer {
    (code, message.as_ref().map(|m| m.to_string()))
}

fn answers<'a>(items: impl Iterator<Item = (i16, &'a Option<StrBytes>)>) -> Vec<Answer> {
    items.map(|(code, m)| answer(code, m)).collect()
}

/// A topic of `partitions` partitions (-1: `num.partitions`), replication
/// left to the broker.
pub fn creatable(name: &str, partitions: i32) -> CreatableTopic {
    CreatableTopic::default()
        .with_name(topic_name(name))
        .with_num_partitions(partitions)
        .with_replication_factor(-1)
}

/// A new topic's configs, each `(name, value)`.
pub fn topic_configs(configs: &[(&str, &str)]) -> Vec<CreatableTopicConfig> {
    let s = |v: &str| StrBytes::from_string(v.to_string());
    configs
        .iter()
        .map(|(k, v)| {
            CreatableTopicConfig::default()
                .with_name(s(k))
                .with_value(Some(s(v)))
        })
        .collect()
}

/// CreateTopics v7 of `topics`: each topic's answer.
pub fn create_topics(c: &mut Conn, topics: Vec<CreatableTopic>, validate: bool) -> Vec<Answer> {
    let req = CreateTopicsRequest::default()
        .with_topics(topics)
        .with_validate_only(validate);
    let r: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 7, &req);
    answers(r.topics.iter().map(|t| (t.error_code, &t.error_message)))
}

/// CreatePartitions v3 growing each topic to its count: each topic's answer.
pub fn create_partitions(c: &mut Conn, counts: &[(&str, i32)], validate: bool) -> Vec<Answer> {
    let topics = counts
        .iter()
        .map(|(t, n)| {
            CreatePartitionsTopic::default()
                .with_name(topic_name(t))
                .with_count(*n)
        })
        .collect();
    let req = CreatePartitionsRequest::default()
        .with_topics(topics)
        .with_timeout_ms(10_000)
        .with_validate_only(validate);
    let r: CreatePartitionsResponse = c.call(ApiKey::CreatePartitions, 3, &req);
    answers(r.results.iter().map(|t| (t.error_code, &t.error_message)))
}

/// A Produce (acks -1, a 10 s timeout) of `records` to `partition` of
/// `topic`.
pub fn produce_request(topic: &str, partition: i32, records: Bytes) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(topic_name(topic))
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(partition)
                        .with_records(Some(records)),
                ]),
        ])
}

/// FindCoordinator v4 of the transactional id `id`: the code and the
/// coordinator's node id.
pub fn txn_coordinator(c: &mut Conn, id: &str) -> (i16, i32) {
    let find = FindCoordinatorRequest::default()
        .with_key_type(1)
        .with_coordinator_keys(vec![StrBytes::from_string(id.to_string())]);
    let r: FindCoordinatorResponse = c.call(ApiKey::FindCoordinator, 4, &find);
    (r.coordinators[0].error_code, r.coordinators[0].node_id.0)
}

/// Produce v9 (acks -1) of `records` to partition 0 of `topic`: its answer.
pub fn produce_to(c: &mut Conn, topic: &str, records: Vec<u8>) -> Answer {
    let req = produce_request(topic, 0, Bytes::from(records));
    let r: ProduceResponse = c.call(ApiKey::Produce, 9, &req);
    let p = &r.responses[0].partition_responses[0];
    answer(p.error_code, &p.error_message)
}

/// OffsetCommit v8 of partition 0 of `topic` at `offset` by a group with
/// no members (generation -1), as `assign()` users commit: its code.
pub fn standalone_commit(
    c: &mut Conn,
    group: &str,
    topic: &str,
    offset: i64,
    metadata: Option<&str>,
) -> i16 {
    let partition = OffsetCommitRequestPartition::default()
        .with_partition_index(0)
        .with_committed_offset(offset)
        .with_committed_metadata(metadata.map(|m| StrBytes::from_string(m.to_string())));
    let req = OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![
            OffsetCommitRequestTopic::default()
                .with_name(topic_name(topic))
                .with_partitions(vec![partition]),
        ]);
    let r: OffsetCommitResponse = c.call(ApiKey::OffsetCommit, 8, &req);
    r.topics[0].partitions[0].error_code
}

/// The directories of `dir`, sorted: a data directory's partitions.
pub fn subdirs(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}
