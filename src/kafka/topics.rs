//! CreateTopics, CreatePartitions and DeleteTopics: the same storage calls
//! as `mkdir` and `rmdir` in the tree (`LogManager::create_topic`,
//! `create_partition`, `delete_topic`), with the same no-holes rule. Topic
//! configs given at creation are applied as the tree's `config/<name>`
//! writes are.

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

use super::broker::Broker;
use super::error::{Family, code_for, message_for};
use crate::names::validate_topic;
use crate::storage::{LogConfig, StorageError};

type Refused = (ResponseError, String);

pub fn create(b: &Broker, version: i16, req: CreateTopicsRequest) -> CreateTopicsResponse {
    let topics = req
        .topics
        .iter()
        .map(|t| {
            let name = t.name.0.as_str();
            let result = CreatableTopicResult::default().with_name(t.name.clone());
            match create_one(b, t, req.validate_only) {
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
    validate_topic(name).map_err(|why| (ResponseError::InvalidTopicException, why.to_string()))?;
    let count = partition_count(b, t)?;
    let mut configs = Vec::new();
    let mut check = LogConfig::clone(b.mgr.defaults());
    for c in &t.configs {
        let value = c.value.as_deref().unwrap_or_default();
        check
            .set(c.name.as_str(), value)
            .map_err(|e| (ResponseError::InvalidConfig, e.to_string()))?;
        configs.push((c.name.as_str(), Some(value)));
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
    if validate_only {
        return Ok(count);
    }
    let storage = |e: StorageError| {
        let code = code_for(Family::Admin, &format!("CreateTopics of {name}"), &e);
        (code, message_for(&e))
    };
    let topic = b.mgr.create_topic(name, count).map_err(storage)?;
    if !configs.is_empty() {
        for log in topic.partitions.iter().flatten() {
            log.alter_configs(&configs).map_err(storage)?;
        }
    }
    info!("Kafka: created topic {name} with {count} partitions");
    Ok(count)
}

pub fn delete(b: &Broker, version: i16, req: DeleteTopicsRequest) -> DeleteTopicsResponse {
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

/// CreatePartitions: grows each topic to `count` partitions, the new ones
/// made in order (`T-n`, `T-n+1`, ...) as `mkdir` makes them, so no hole
/// can appear even when one creation fails half way.
pub fn create_partitions(b: &Broker, req: CreatePartitionsRequest) -> CreatePartitionsResponse {
    let results = req
        .topics
        .iter()
        .map(|t| {
            let result = CreatePartitionsTopicResult::default().with_name(t.name.clone());
            match grow_one(b, t, req.validate_only) {
                Ok(()) => result,
                Err((code, msg)) => {
                    warn!(
                        "Kafka: CreatePartitions of {} refused with {code:?}: {msg}",
                        t.name.0.as_str()
                    );
                    result
                        .with_error_code(code.code())
                        .with_error_message(Some(StrBytes::from_string(msg)))
                }
            }
        })
        .collect();
    CreatePartitionsResponse::default().with_results(results)
}

fn grow_one(b: &Broker, t: &CreatePartitionsTopic, validate_only: bool) -> Result<(), Refused> {
    let name = t.name.0.as_str();
    let topic = b.mgr.topic(name).ok_or_else(|| {
        (
            ResponseError::UnknownTopicOrPartition,
            format!("Topic '{name}' does not exist."),
        )
    })?;
    let have = topic.partitions.len() as i32;
    if t.count <= have {
        return Err((
            ResponseError::InvalidPartitions,
            format!(
                "Topic currently has {have} partitions, which is higher than or equal to the requested {}.",
                t.count
            ),
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
                format!("new partitions may only be assigned to broker {me}"),
            ));
        }
    }
    if validate_only {
        return Ok(());
    }
    for id in have..t.count {
        let partition = format!("{name}-{id}");
        b.mgr.create_partition(&partition).map_err(|e| {
            let code = code_for(
                Family::Admin,
                &format!("CreatePartitions of {partition}"),
                &e,
            );
            (code, message_for(&e))
        })?;
    }
    info!("Kafka: topic {name} now has {} partitions", t.count);
    Ok(())
}
