//! CreateTopics, CreatePartitions and DeleteTopics: the same storage calls
//! as `mkdir` and `rmdir` in the tree (`LogManager::create_topic_configured`,
//! `grow_topic`, `delete_topic`), with the same no-holes rule. Topic
//! configs given at creation are applied as the tree's `config/<name>`
//! writes are. A creation is all or nothing: one that fails half way (a
//! full disk, `max.broker.partitions`) leaves no partition behind.
//!
//! One request creates at most [`MAX_PARTITIONS_PER_REQUEST`] partitions
//! (Kafka's `ReplicationControlManager.MAX_PARTITIONS_PER_BATCH`): past it,
//! every topic of the request gets `POLICY_VIOLATION` and nothing is made.

use std::collections::HashMap;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::TopicName;
use kafka_protocol::messages::create_partitions_request::{
    CreatePartitionsRequest, CreatePartitionsTopic,
};
use kafka_protocol::messages::create_partitions_response::{
    CreatePartitionsResponse, CreatePartitionsTopicResult,
};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreateTopicsRequest};
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicResult, CreateTopicsResponse,
};
use kafka_protocol::messages::delete_topics_request::DeleteTopicsRequest;
use kafka_protocol::messages::delete_topics_response::{
    DeletableTopicResult, DeleteTopicsResponse,
};
use kafka_protocol::protocol::StrBytes;
use log::{info, warn};

use super::Refused;
use crate::broker::Broker;
use crate::error::{Family, code_for, message_for};
use crate::handlers::internal_topics;
use commitfs_record::names::validate_topic;
use commitfs_storage::{LogConfig, StorageError};

/// Kafka's `MAX_PARTITIONS_PER_BATCH`: the partitions one CreateTopics may
/// make, and (commitfs's reading of Kafka's 10,000-record bound on one
/// controller operation) one CreatePartitions.
pub const MAX_PARTITIONS_PER_REQUEST: u64 = 10_000;

/// Kafka's message for a request over [`MAX_PARTITIONS_PER_REQUEST`].
const EXCESSIVE: &str = "Excessively large number of partitions per request.";

/// Kafka's `validateTotalNumberOfPartitions`: the partitions a CreateTopics
/// asks for, over topics the controller sees (not `__cluster_metadata`,
/// not a name given twice), counted without Java's int overflow.
fn requested_partitions(b: &Broker, req: &CreateTopicsRequest) -> u64 {
    let mut named: HashMap<&TopicName, usize> = HashMap::new();
    for t in &req.topics {
        *named.entry(&t.name).or_default() += 1;
    }
    req.topics
        .iter()
        .filter(|t| {
            named[&t.name] == 1 && internal_topics::create_topic(t.name.0.as_str()).is_none()
        })
        .map(|t| match (t.assignments.is_empty(), t.num_partitions) {
            (false, _) => t.assignments.len() as u64,
            (true, -1) => b.config.num_partitions as u64,
            (true, n) => n.max(0) as u64,
        })
        .sum()
}

/// `may_create`: CREATE on the cluster or on the topic.
pub fn create(
    b: &Broker,
    version: i16,
    req: CreateTopicsRequest,
    may_create: &dyn Fn(&str) -> bool,
) -> CreateTopicsResponse {
    let over = requested_partitions(b, &req) > MAX_PARTITIONS_PER_REQUEST;
    let topics = req
        .topics
        .iter()
        .map(|t| {
            let name = t.name.0.as_str();
            let result = CreatableTopicResult::default().with_name(t.name.clone());
            let outcome = if !may_create(name) {
                // ControllerApis' text.
                Err((
                    ResponseError::TopicAuthorizationFailed,
                    "Authorization failed.".to_string(),
                ))
            } else if over {
                Err((ResponseError::PolicyViolation, EXCESSIVE.to_string()))
            } else {
                create_one(b, t, req.validate_only)
            };
            match outcome {
                Ok(n) => {
                    let r = result.with_num_partitions(n as i32);
                    if version >= 5 {
                        r.with_replication_factor(1)
                    } else {
                        r
                    }
                }
                Err((code, msg)) => {
                    warn!("Kafka: CreateTopics of {name} refused with {code:?}: {msg}");
                    let r = result.with_error_code(code.code());
                    if version >= 1 {
                        r.with_error_message(Some(StrBytes::from_string(msg)))
                    } else {
                        r
                    }
                }
            }
        })
        .collect();
    CreateTopicsResponse::default().with_topics(topics)
}

/// The partition count a request asks for, checked against what one broker can do.
fn partition_count(b: &Broker, t: &CreatableTopic) -> Result<u32, Refused> {
    if !matches!(t.replication_factor, -1 | 1) {
        return Err((
            ResponseError::InvalidReplicationFactor,
            format!(
                "replication factor {} is larger than the one broker there is",
                t.replication_factor
            ),
        ));
    }
    if !t.assignments.is_empty() {
        let me = b.node_id();
        let ok = t.assignments.iter().enumerate().all(|(i, a)| {
            a.partition_index == i as i32 && a.broker_ids.iter().all(|id| id.0 == me)
        });
        if !ok || t.num_partitions != -1 {
            return Err((
                ResponseError::InvalidReplicaAssignment,
                format!("partitions 0..n-1 may only be assigned to broker {me}"),
            ));
        }
        return Ok(t.assignments.len() as u32);
    }
    match t.num_partitions {
        -1 => Ok(b.config.num_partitions),
        n if n >= 1 => Ok(n as u32),
        n => Err((
            ResponseError::InvalidPartitions,
            format!("number of partitions must be at least 1, was {n}"),
        )),
    }
}

fn create_one(b: &Broker, t: &CreatableTopic, validate_only: bool) -> Result<u32, Refused> {
    let name = t.name.0.as_str();
    if let Some((code, msg)) = internal_topics::create_topic(name) {
        return Err((code, msg.unwrap_or_default()));
    }
    validate_topic(name).map_err(|why| (ResponseError::InvalidTopicException, why.to_string()))?;
    let count = partition_count(b, t)?;
    let mut configs = Vec::new();
    let mut check = LogConfig::clone(b.mgr.defaults());
    for c in &t.configs {
        let value = c.value.as_deref().unwrap_or_default();
        check
            .set(c.name.as_str(), value)
            .map_err(|e| (ResponseError::InvalidConfig, e.to_string()))?;
        configs.push((c.name.as_str(), value));
    }
    check
        .validate()
        .map_err(|e| (ResponseError::InvalidConfig, e.to_string()))?;
    if b.mgr.topic(name).is_some() {
        return Err((
            ResponseError::TopicAlreadyExists,
            format!("Topic '{name}' already exists."),
        ));
    }
    let storage = |e: StorageError| {
        let code = code_for(Family::Admin, &format!("CreateTopics of {name}"), &e);
        (code, message_for(&e))
    };
    if validate_only {
        b.mgr.check_room(count as usize).map_err(storage)?;
        return Ok(count);
    }
    b.mgr
        .create_topic_configured(name, count, &configs)
        .map_err(storage)?;
    info!("Kafka: created topic {name} with {count} partitions");
    Ok(count)
}

/// `may_delete`: DELETE on the topic (which implies DESCRIBE).
pub fn delete(
    b: &Broker,
    version: i16,
    req: DeleteTopicsRequest,
    may_delete: &dyn Fn(&str) -> bool,
) -> DeleteTopicsResponse {
    // v6 names topics in `topics` (by name or id); earlier versions in `topic_names`.
    let names: Vec<Option<TopicName>> = if version >= 6 {
        req.topics.into_iter().map(|t| t.name).collect()
    } else {
        req.topic_names.into_iter().map(Some).collect()
    };
    let responses = names
        .into_iter()
        .map(|name| {
            let Some(name) = name else {
                // Topic ids are not kept: no id can be found.
                return DeletableTopicResult::default()
                    .with_error_code(ResponseError::UnknownTopicId.code());
            };
            let r = DeletableTopicResult::default().with_name(Some(name.clone()));
            let topic = name.0.as_str();
            if !may_delete(topic) {
                return r.with_error_code(ResponseError::TopicAuthorizationFailed.code());
            }
            let refused =
                internal_topics::delete_topic(topic).filter(|_| b.mgr.topic(topic).is_some());
            if let Some((code, msg)) = refused {
                warn!("Kafka: DeleteTopics of {topic} refused with {code:?}: {msg:?}");
                let r = r.with_error_code(code.code());
                return match version >= 5 {
                    true => r.with_error_message(msg.map(StrBytes::from_string)),
                    false => r,
                };
            }
            match b.mgr.delete_topic(topic) {
                Ok(n) => {
                    info!("Kafka: deleted topic {topic} ({n} partitions)");
                    r
                }
                Err(e) => {
                    let code = code_for(Family::Admin, &format!("DeleteTopics of {topic}"), &e);
                    let r = r.with_error_code(code.code());
                    if version >= 5 {
                        r.with_error_message(Some(StrBytes::from_string(message_for(&e))))
                    } else {
                        r
                    }
                }
            }
        })
        .collect();
    DeleteTopicsResponse::default().with_responses(responses)
}

/// The partitions a CreatePartitions would add, over the topics that exist
/// and would grow.
fn added_partitions(b: &Broker, req: &CreatePartitionsRequest) -> u64 {
    req.topics
        .iter()
        .filter_map(|t| {
            let have = b.mgr.topic(t.name.0.as_str())?.partitions.len() as i64;
            Some((t.count as i64 - have).max(0) as u64)
        })
        .sum()
}

/// CreatePartitions: grows each topic to `count` partitions, the new ones
/// made in order (`T-n`, `T-n+1`, ...) as `mkdir` makes them, all or none.
/// `may_alter`: ALTER on the topic.
pub fn create_partitions(
    b: &Broker,
    req: CreatePartitionsRequest,
    may_alter: &dyn Fn(&str) -> bool,
) -> CreatePartitionsResponse {
    let over = added_partitions(b, &req) > MAX_PARTITIONS_PER_REQUEST;
    let results = req
        .topics
        .iter()
        .map(|t| {
            let result = CreatePartitionsTopicResult::default().with_name(t.name.clone());
            let outcome = if !may_alter(t.name.0.as_str()) {
                Err((ResponseError::TopicAuthorizationFailed, None))
            } else if over {
                Err((ResponseError::PolicyViolation, Some(EXCESSIVE.to_string())))
            } else {
                grow_one(b, t, req.validate_only)
            };
            match outcome {
                Ok(()) => result,
                Err((code, msg)) => {
                    warn!(
                        "Kafka: CreatePartitions of {} refused with {code:?}: {msg:?}",
                        t.name.0.as_str()
                    );
                    result
                        .with_error_code(code.code())
                        .with_error_message(msg.map(StrBytes::from_string))
                }
            }
        })
        .collect();
    CreatePartitionsResponse::default().with_results(results)
}

fn grow_one(
    b: &Broker,
    t: &CreatePartitionsTopic,
    validate_only: bool,
) -> Result<(), internal_topics::TopicRefusal> {
    let name = t.name.0.as_str();
    if let Some(refused) = internal_topics::create_partitions(name) {
        return Err(refused);
    }
    let topic = b.mgr.topic(name).ok_or_else(|| {
        (
            ResponseError::UnknownTopicOrPartition,
            Some(format!("Topic '{name}' does not exist.")),
        )
    })?;
    let have = topic.partitions.len() as i32;
    if t.count <= have {
        return Err((
            ResponseError::InvalidPartitions,
            Some(format!(
                "Topic currently has {have} partitions, which is higher than or equal to the requested {}.",
                t.count
            )),
        ));
    }
    // An empty list is what clients send when they name no brokers.
    if let Some(assignments) = t.assignments.as_ref().filter(|a| !a.is_empty()) {
        let me = b.node_id();
        let ok = assignments.len() as i32 == t.count - have
            && assignments
                .iter()
                .all(|a| a.broker_ids.iter().all(|id| id.0 == me));
        if !ok {
            return Err((
                ResponseError::InvalidReplicaAssignment,
                Some(format!(
                    "new partitions may only be assigned to broker {me}"
                )),
            ));
        }
    }
    let storage = |e: StorageError| {
        let code = code_for(Family::Admin, &format!("CreatePartitions of {name}"), &e);
        (code, Some(message_for(&e)))
    };
    if validate_only {
        return b.mgr.check_room((t.count - have) as usize).map_err(storage);
    }
    b.mgr.grow_topic(name, t.count as u32).map_err(storage)?;
    info!("Kafka: topic {name} now has {} partitions", t.count);
    Ok(())
}
