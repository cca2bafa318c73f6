//! Metadata: one broker (this daemon), the topics and partitions of the data
//! directory, leader = self for every partition.
//!
//! - A hole left by a directory made outside commitfs (`T-0` and `T-2`
//!   without `T-1`) is listed as an unavailable partition (leader -1,
//!   LEADER_NOT_AVAILABLE), so clients never see a gap in partition ids.
//! - Leader epochs are reported as -1 (unknown): librdkafka then skips
//!   OffsetForLeaderEpoch validation, which is not served.
//! - KRaft's metadata log (`__cluster_metadata`) is not a topic here, as
//!   in Kafka: never listed, never auto-created.
//! - Topic auto-creation happens only with `auto.create.topics.enable=true`
//!   and a request that allows it; the topic gets `num.partitions`
//!   partitions through the same storage call as CreateTopics.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::metadata_request::MetadataRequest;
use kafka_protocol::messages::metadata_response::{
    MetadataResponse, MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, TopicName};
use kafka_protocol::protocol::StrBytes;
use log::{info, warn};

use crate::acl::{self, CLUSTER_NAME, Operation, ResourceType};
use crate::broker::Broker;
use crate::error::{Family, code_for};
use crate::handlers::internal_topics;
use crate::network::session::Session;
use commitfs_record::names::validate_topic;
use commitfs_storage::{StorageError, Topic, is_internal_topic};

use Operation::Describe;
const TOPIC: ResourceType = ResourceType::Topic;

pub fn handle(
    b: &Broker,
    session: &Session,
    version: i16,
    req: MetadataRequest,
) -> MetadataResponse {
    let advertised = b.advertised(session.listener);
    let broker = MetadataResponseBroker::default()
        .with_node_id(BrokerId(b.node_id()))
        .with_host(StrBytes::from_string(advertised.host.clone()))
        .with_port(advertised.port as i32);
    // v0 has no null list: an empty one means every topic.
    let wanted: Option<Vec<String>> = match req.topics {
        None => None,
        Some(t) if t.is_empty() && version == 0 => None,
        Some(t) => Some(
            t.into_iter()
                .filter_map(|t| t.name.map(|n| n.0.as_str().to_string()))
                .collect(),
        ),
    };
    // Before v4 a request could not say no, and always allowed it.
    let may_create = b.config.auto_create_topics && (version < 4 || req.allow_auto_topic_creation);
    let mut topics: Vec<MetadataResponseTopic> = match wanted {
        None => b
            .mgr
            .topics()
            .iter()
            .filter(|t| internal_topics::listed(&t.name))
            // Topics that may not be described are left out, unlogged.
            .filter(|t| acl::allowed_quietly(b, session, Describe, TOPIC, &t.name))
            .map(|t| describe(b, t))
            .collect(),
        Some(names) => (names.iter())
            .map(|n| match acl::allowed(b, session, Describe, TOPIC, n) {
                true => lookup(b, session, n, may_create),
                false => refused(n, ResponseError::TopicAuthorizationFailed),
            })
            .collect(),
    };
    // What the principal may do, when asked (v8+): on each topic it may
    // describe (KafkaApis leaves the refused ones at the schema's
    // default), and on the cluster (v8–10) if it may describe that.
    if version >= 8 && req.include_topic_authorized_operations {
        let denied = ResponseError::TopicAuthorizationFailed.code();
        for t in topics.iter_mut().filter(|t| t.error_code != denied) {
            if let Some(name) = &t.name {
                t.topic_authorized_operations = acl::authorized_operations(b, session, TOPIC, name);
            }
        }
    }
    let mut cluster_operations = i32::MIN;
    if (8..=10).contains(&version) && req.include_cluster_authorized_operations {
        cluster_operations = match acl::cluster(b, session, Describe) {
            true => acl::authorized_operations(b, session, ResourceType::Cluster, CLUSTER_NAME),
            false => 0,
        };
    }
    MetadataResponse::default()
        .with_brokers(vec![broker])
        .with_cluster_id(Some(StrBytes::from_string(b.cluster_id.clone())))
        .with_controller_id(BrokerId(b.node_id()))
        .with_topics(topics)
        .with_cluster_authorized_operations(cluster_operations)
}

fn refused(name: &str, code: ResponseError) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(name.to_string()))))
        .with_error_code(code.code())
}

fn lookup(b: &Broker, s: &Session, name: &str, may_create: bool) -> MetadataResponseTopic {
    let failed = |code: ResponseError| refused(name, code);
    if !internal_topics::listed(name) {
        return failed(ResponseError::UnknownTopicOrPartition);
    }
    if let Some(t) = b.mgr.topic(name) {
        return describe(b, &t);
    }
    if let Err(why) = validate_topic(name) {
        warn!("Kafka: Metadata for topic {name:?} refused: {why}");
        return failed(ResponseError::InvalidTopicException);
    }
    if !may_create || b.mgr.read_only() {
        return failed(ResponseError::UnknownTopicOrPartition);
    }
    if !acl::allowed_quietly(b, s, Operation::Create, ResourceType::Cluster, CLUSTER_NAME)
        && !acl::allowed(b, s, Operation::Create, TOPIC, name)
    {
        return failed(ResponseError::TopicAuthorizationFailed);
    }
    match b.mgr.create_topic(name, b.config.num_partitions) {
        Ok(t) => {
            info!(
                "Kafka: auto-created topic {name} with {} partitions",
                t.partitions.len()
            );
            describe(b, &t)
        }
        // Created meanwhile by someone else: describe what is there.
        Err(StorageError::PartitionExists(_)) => match b.mgr.topic(name) {
            Some(t) => describe(b, &t),
            None => failed(ResponseError::UnknownTopicOrPartition),
        },
        Err(e) => failed(code_for(
            Family::Admin,
            &format!("auto-creation of topic {name}"),
            &e,
        )),
    }
}

fn describe(b: &Broker, t: &Topic) -> MetadataResponseTopic {
    let me = BrokerId(b.node_id());
    let partitions = t
        .partitions
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let part = MetadataResponsePartition::default()
                .with_partition_index(i as i32)
                .with_leader_epoch(-1);
            match p {
                Some(_) => part
                    .with_leader_id(me)
                    .with_replica_nodes(vec![me])
                    .with_isr_nodes(vec![me]),
                None => part
                    .with_error_code(ResponseError::LeaderNotAvailable.code())
                    .with_leader_id(BrokerId(-1)),
            }
        })
        .collect();
    MetadataResponseTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(t.name.clone()))))
        .with_is_internal(is_internal_topic(&t.name))
        .with_partitions(partitions)
}
