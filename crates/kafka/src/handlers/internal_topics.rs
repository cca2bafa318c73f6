//! What a client may do to Kafka's internal topics (`Topic.isInternal`:
//! `__consumer_offsets`, `__transaction_state`, `__share_group_state`) and
//! to KRaft's metadata log (`__cluster_metadata`), answered as Kafka's
//! broker and controller answer, in one place per API:
//!
//! | API | internal topic | `__cluster_metadata` |
//! |---|---|---|
//! | Produce | `INVALID_TOPIC_EXCEPTION` (`ReplicaManager.appendToLocalLog`) | `UNKNOWN_TOPIC_OR_PARTITION` (not in the metadata cache) |
//! | DeleteRecords | `INVALID_TOPIC_EXCEPTION` (`ReplicaManager.deleteRecordsOnLocalLog`) | `UNKNOWN_TOPIC_OR_PARTITION` |
//! | CreateTopics | as any topic | `INVALID_REQUEST` (`ControllerApis.createTopics`) |
//! | DeleteTopics | refused, see [`delete_topic`] | `UNKNOWN_TOPIC_OR_PARTITION` (`findTopicIds`) |
//! | CreatePartitions | `__consumer_offsets` refused, see [`create_partitions`] | `UNKNOWN_TOPIC_OR_PARTITION` |
//! | IncrementalAlterConfigs | as any topic | `UNKNOWN_TOPIC_OR_PARTITION` (`ConfigResourceExistenceChecker`) |
//! | Metadata | listed, `is_internal` | never listed, never auto-created |
//!
//! The group coordinator writes `__consumer_offsets` through storage, not
//! through these APIs, so nothing here stands in its way.

use kafka_protocol::ResponseError;

use commitfs_record::names::{CLUSTER_METADATA_TOPIC, is_internal_topic};

/// A refusal: the code, and the message where the API carries one.
pub type TopicRefusal = (ResponseError, Option<String>);

/// Kafka's `Errors.UNKNOWN_TOPIC_OR_PARTITION.message()`.
const NOT_HOSTED: &str = "This server does not host this topic-partition.";

/// Produce. Kafka answers an internal topic without the message it logs
/// (`hasCustomErrorMessage = false`), so the message here is for the log.
pub fn produce(topic: &str) -> Option<(ResponseError, String)> {
    write_refusal(topic, "append to")
}

/// DeleteRecords (whose response has no message: this one is logged).
pub fn delete_records(topic: &str) -> Option<(ResponseError, String)> {
    write_refusal(topic, "delete records of")
}

/// What `ReplicaManager` answers a client's write to `topic`, in the words
/// of its refusal: `Cannot {doing} internal topic T`.
fn write_refusal(topic: &str, doing: &str) -> Option<(ResponseError, String)> {
    if is_internal_topic(topic) {
        return Some((
            ResponseError::InvalidTopicException,
            format!("Cannot {doing} internal topic {topic}"),
        ));
    }
    (topic == CLUSTER_METADATA_TOPIC).then(|| {
        (
            ResponseError::UnknownTopicOrPartition,
            format!("{topic} is KRaft's metadata log, not a topic clients can write"),
        )
    })
}

/// CreateTopics: only the metadata log is refused; Kafka lets a client
/// create an internal topic that does not exist yet.
pub fn create_topic(topic: &str) -> Option<TopicRefusal> {
    (topic == CLUSTER_METADATA_TOPIC).then(|| {
        (
            ResponseError::InvalidRequest,
            Some(format!(
                "Creation of internal topic {CLUSTER_METADATA_TOPIC} is prohibited."
            )),
        )
    })
}

/// DeleteTopics. Kafka's controller would delete an internal topic for a
/// principal allowed to (only `kafka-topics.sh` refuses, with the message
/// below); here no principal is checked and the group coordinator keeps
/// its state in `__consumer_offsets`, so the refusal is the tool's, with
/// the code Kafka gives the other writes to internal topics.
pub fn delete_topic(topic: &str) -> Option<TopicRefusal> {
    if is_internal_topic(topic) {
        return Some((
            ResponseError::InvalidTopicException,
            Some(format!(
                "Topic {topic} is a kafka internal topic and is not allowed to be marked for deletion."
            )),
        ));
    }
    (topic == CLUSTER_METADATA_TOPIC).then(|| {
        (
            ResponseError::UnknownTopicOrPartition,
            Some(NOT_HOSTED.into()),
        )
    })
}

/// CreatePartitions. Growing `__consumer_offsets` would move groups away
/// from their records (a group's partition is its hash modulo the count);
/// Kafka's controller allows it and `kafka-topics.sh` refuses it with the
/// message below.
pub fn create_partitions(topic: &str) -> Option<TopicRefusal> {
    if topic == "__consumer_offsets" {
        return Some((
            ResponseError::InvalidPartitions,
            Some("The number of partitions for the offsets topic cannot be changed.".into()),
        ));
    }
    (topic == CLUSTER_METADATA_TOPIC).then_some((ResponseError::UnknownTopicOrPartition, None))
}

/// IncrementalAlterConfigs: Kafka's existence check of a topic resource.
pub fn alter_configs(topic: &str) -> Option<TopicRefusal> {
    (topic == CLUSTER_METADATA_TOPIC).then(|| {
        (
            ResponseError::UnknownTopicOrPartition,
            Some(format!("The topic '{topic}' does not exist.")),
        )
    })
}

/// Metadata: whether `topic` is one clients see (and may auto-create).
pub fn listed(topic: &str) -> bool {
    topic != CLUSTER_METADATA_TOPIC
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_api_answers_kafkas_code_and_user_topics_pass() {
        use ResponseError as R;
        type Api = fn(&str) -> Option<R>;
        let produce: Api = |t| produce(t).map(|r| r.0);
        let delete_records: Api = |t| delete_records(t).map(|r| r.0);
        let create_topic: Api = |t| create_topic(t).map(|r| r.0);
        let delete_topic: Api = |t| delete_topic(t).map(|r| r.0);
        let create_partitions: Api = |t| create_partitions(t).map(|r| r.0);
        let alter_configs: Api = |t| alter_configs(t).map(|r| r.0);
        let invalid = Some(R::InvalidTopicException);
        let unknown = Some(R::UnknownTopicOrPartition);
        let (offsets, txn, meta) = (
            "__consumer_offsets",
            "__transaction_state",
            "__cluster_metadata",
        );
        let cases: &[(Api, &str, Option<R>)] = &[
            (produce, offsets, invalid),
            (produce, "__share_group_state", invalid),
            (produce, meta, unknown),
            (delete_records, txn, invalid),
            (create_topic, meta, Some(R::InvalidRequest)),
            (create_topic, offsets, None),
            (delete_topic, offsets, invalid),
            (delete_topic, meta, unknown),
            (create_partitions, offsets, Some(R::InvalidPartitions)),
            (create_partitions, txn, None),
            (alter_configs, offsets, None),
            (alter_configs, meta, unknown),
        ];
        for (i, (api, topic, want)) in cases.iter().enumerate() {
            assert_eq!(api(topic), *want, "case {i}: {topic}");
        }
        assert!(!listed("__cluster_metadata"));
        for user in ["orders", "_consumer_offsets", "__consumer_offsets_x"] {
            for api in [produce, delete_records, create_topic, delete_topic] {
                assert_eq!(api(user), None, "{user}");
            }
            assert!(listed(user), "{user}");
        }
    }
}
