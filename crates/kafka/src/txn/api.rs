//! The transaction APIs a client sends (Kafka's `KafkaApis` handlers):
//! AddPartitionsToTxn (the client versions, 0 to 3), AddOffsetsToTxn (0 to
//! 3), TxnOffsetCommit (0 to 3) and EndTxn (0 to 4); and what
//! `kafka-transactions.sh` asks: DescribeTransactions (0) and
//! ListTransactions (0 and 1; 2's id pattern is not served).
//! Each decodes, asks the coordinator, and downgrades the codes older
//! clients do not know.

use std::collections::BTreeSet;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::add_offsets_to_txn_request::AddOffsetsToTxnRequest;
use kafka_protocol::messages::add_offsets_to_txn_response::AddOffsetsToTxnResponse;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnRequest;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResponse, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::describe_transactions_request::DescribeTransactionsRequest;
use kafka_protocol::messages::describe_transactions_response::{
    DescribeTransactionsResponse, TopicData, TransactionState as Described,
};
use kafka_protocol::messages::end_txn_request::EndTxnRequest;
use kafka_protocol::messages::end_txn_response::EndTxnResponse;
use kafka_protocol::messages::list_transactions_request::ListTransactionsRequest;
use kafka_protocol::messages::list_transactions_response::{
    ListTransactionsResponse, TransactionState as Listed,
};
use kafka_protocol::messages::txn_offset_commit_request::TxnOffsetCommitRequest;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponse, TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{GroupId, ProducerId, TopicName, TransactionalId};
use kafka_protocol::protocol::StrBytes;
use log::{info, warn};

use super::metadata::{TopicPartition, TxnMetadata};
use crate::acl::{self, Operation, ResourceType};
use crate::broker::Broker;
use crate::group::commits::CommitArgs;
use crate::group::offsets::OFFSETS_TOPIC;
use crate::network::session::Session;

/// PRODUCER_FENCED (90) is INVALID_PRODUCER_EPOCH (47) to a client whose
/// request version is below `below`: it does not know the newer code.
pub fn downgrade_fenced(code: ResponseError, version: i16, below: i16) -> ResponseError {
    if code == ResponseError::ProducerFenced && version < below {
        ResponseError::InvalidProducerEpoch
    } else {
        code
    }
}

/// AddPartitionsToTxn v0–3: every partition is checked first (an internal
/// topic or a missing partition fails them all, the others answered
/// OPERATION_NOT_ATTEMPTED); then one answer for all.
pub fn add_partitions(
    b: &Broker,
    s: &Session,
    version: i16,
    r: AddPartitionsToTxnRequest,
) -> AddPartitionsToTxnResponse {
    let id = r.v3_and_below_transactional_id.0.to_string();
    let (pid, epoch) = (r.v3_and_below_producer_id.0, r.v3_and_below_producer_epoch);
    let partitions: BTreeSet<TopicPartition> = r
        .v3_and_below_topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (t.name.0.to_string(), *p)))
        .collect();
    // Kafka's order: the id, then WRITE on every topic; with a topic
    // refused, nothing is attempted.
    let denied: BTreeSet<&str> = (partitions.iter())
        .map(|(t, _)| t.as_str())
        .filter(|t| !acl::allowed(b, s, Operation::Write, ResourceType::Topic, t))
        .collect();
    let refused = if !acl::allowed(b, s, Operation::Write, ResourceType::TransactionalId, &id) {
        Some(
            Box::new(|_: &str| ResponseError::TransactionalIdAuthorizationFailed)
                as Box<dyn Fn(&str) -> ResponseError>,
        )
    } else if !denied.is_empty() {
        Some(Box::new(|t: &str| match denied.contains(t) {
            true => ResponseError::TopicAuthorizationFailed,
            false => ResponseError::OperationNotAttempted,
        }) as Box<dyn Fn(&str) -> ResponseError>)
    } else {
        None
    };
    let results: Vec<(TopicPartition, Option<ResponseError>)> = match refused
        .map(|code| {
            (partitions.iter())
                .map(|tp| (tp.clone(), code(&tp.0)))
                .collect::<Vec<_>>()
        })
        .or_else(|| b.txns.check_partitions(&partitions))
    {
        Some(failed) => {
            warn!(
                "Kafka: AddPartitionsToTxn of transactional id {id} refused: {}",
                failed
                    .iter()
                    .filter(|(_, e)| *e != ResponseError::OperationNotAttempted)
                    .map(|((t, p), e)| format!("{t}-{p}: {e:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            failed.into_iter().map(|(tp, e)| (tp, Some(e))).collect()
        }
        None => {
            let answer =
                b.txns
                    .add_partitions(&id, pid, epoch, &partitions, commitfs_storage::now_ms());
            let code = match answer {
                Ok(()) => None,
                Err(e) => {
                    let e = downgrade_fenced(e, version, 2);
                    warn!(
                        "Kafka: AddPartitionsToTxn of transactional id {id} (producer {pid}, epoch {epoch}) refused with {e:?}"
                    );
                    Some(e)
                }
            };
            partitions.into_iter().map(|tp| (tp, code)).collect()
        }
    };
    let mut topics: Vec<AddPartitionsToTxnTopicResult> = Vec::new();
    for ((topic, p), e) in results {
        if topics.last().is_none_or(|t| t.name.0.as_str() != topic) {
            topics.push(
                AddPartitionsToTxnTopicResult::default()
                    .with_name(TopicName(StrBytes::from_string(topic))),
            );
        }
        let code = e.map_or(0, |e| e.code());
        topics
            .last_mut()
            .expect("pushed above")
            .results_by_partition
            .push(
                AddPartitionsToTxnPartitionResult::default()
                    .with_partition_index(p)
                    .with_partition_error_code(code),
            );
    }
    AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(topics)
}

/// EndTxn v0–4: the coordinator writes the decision, the markers and the
/// completion before this answers.
pub fn end_txn(b: &Broker, s: &Session, version: i16, r: EndTxnRequest) -> EndTxnResponse {
    let id = r.transactional_id.0.to_string();
    if !acl::allowed(b, s, Operation::Write, ResourceType::TransactionalId, &id) {
        return EndTxnResponse::default()
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
            .with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code());
    }
    let (pid, epoch) = (r.producer_id.0, r.producer_epoch);
    let what = if r.committed { "commit" } else { "abort" };
    let answer = b
        .txns
        .end_txn(&id, pid, epoch, r.committed, commitfs_storage::now_ms());
    let resp = EndTxnResponse::default()
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    match answer {
        Ok(()) => {
            info!("Kafka: transactional id {id} ended its transaction ({what})");
            resp
        }
        Err(e) => {
            let e = downgrade_fenced(e, version, 2);
            warn!(
                "Kafka: EndTxn ({what}) of transactional id {id} (producer {pid}, epoch {epoch}) refused with {e:?}"
            );
            resp.with_error_code(e.code())
        }
    }
}

/// The transactional id and group AddOffsetsToTxn and TxnOffsetCommit
/// both name, and their checks in Kafka's order: WRITE on the id, then READ
/// on the group; the error of the first refused.
fn offsets_ids(
    b: &Broker,
    s: &Session,
    id: &TransactionalId,
    group: &GroupId,
) -> (String, String, Option<ResponseError>) {
    let (id, group) = (id.0.to_string(), group.0.to_string());
    let refused = if !acl::allowed(b, s, Operation::Write, ResourceType::TransactionalId, &id) {
        Some(ResponseError::TransactionalIdAuthorizationFailed)
    } else if !acl::allowed(b, s, Operation::Read, ResourceType::Group, &group) {
        Some(ResponseError::GroupAuthorizationFailed)
    } else {
        None
    };
    (id, group, refused)
}

/// AddOffsetsToTxn v0–3: the group's partition of `__consumer_offsets`
/// (made with the topic if needed: the transaction's marker goes there)
/// joins the transaction, with AddPartitionsToTxn's answers.
pub fn add_offsets(
    b: &Broker,
    s: &Session,
    version: i16,
    r: AddOffsetsToTxnRequest,
) -> AddOffsetsToTxnResponse {
    let (id, group, refused) = offsets_ids(b, s, &r.transactional_id, &r.group_id);
    if let Some(e) = refused {
        return AddOffsetsToTxnResponse::default().with_error_code(e.code());
    }
    let (pid, epoch) = (r.producer_id.0, r.producer_epoch);
    let answer = match b.groups.offsets_partition(&group) {
        Ok(n) => {
            let tp: BTreeSet<TopicPartition> = [(OFFSETS_TOPIC.to_string(), n as i32)].into();
            b.txns
                .add_partitions(&id, pid, epoch, &tp, commitfs_storage::now_ms())
                .map_err(|e| downgrade_fenced(e, version, 2))
        }
        Err(e) => {
            warn!("Kafka: AddOffsetsToTxn of group {group}: no partition of {OFFSETS_TOPIC}: {e}");
            Err(ResponseError::CoordinatorNotAvailable)
        }
    };
    let resp = AddOffsetsToTxnResponse::default();
    match answer {
        Ok(()) => resp,
        Err(e) => {
            warn!(
                "Kafka: AddOffsetsToTxn of transactional id {id} (group {group}, producer {pid}, epoch {epoch}) refused with {e:?}"
            );
            resp.with_error_code(e.code())
        }
    }
}

/// TxnOffsetCommit v0–3: the offsets are written in the producer's
/// transaction once the group's partition of `__consumer_offsets` is known
/// to be in it (AddOffsetsToTxn); they count when the transaction commits.
pub fn txn_offset_commit(
    b: &Broker,
    s: &Session,
    version: i16,
    r: TxnOffsetCommitRequest,
) -> TxnOffsetCommitResponse {
    let (id, group, whole) = offsets_ids(b, s, &r.transactional_id, &r.group_id);
    let (pid, epoch) = (r.producer_id.0, r.producer_epoch);
    // Fields of v3 and up (KIP-447); below, a producer that names no member.
    let (generation, member) = if version >= 3 {
        (r.generation_id, r.member_id.to_string())
    } else {
        (-1, String::new())
    };
    let mut shape: Vec<(String, Vec<i32>, Option<ResponseError>)> = Vec::new();
    let mut parts = Vec::new();
    for t in &r.topics {
        let name = t.name.0.to_string();
        let refused = whole.or_else(|| {
            (!acl::allowed(b, s, Operation::Read, ResourceType::Topic, &name))
                .then_some(ResponseError::TopicAuthorizationFailed)
        });
        shape.push((
            name.clone(),
            t.partitions.iter().map(|p| p.partition_index).collect(),
            refused,
        ));
        if refused.is_some() {
            continue;
        }
        for p in &t.partitions {
            parts.push(CommitArgs::new(
                &name,
                p.partition_index,
                p.committed_offset,
                (version >= 2).then_some(p.committed_leader_epoch),
                p.committed_metadata.as_deref(),
            ));
        }
    }
    let n = parts.len();
    let answers = if n == 0 && shape.iter().any(|(_, _, refused)| refused.is_some()) {
        Vec::new()
    } else {
        txn_commit_parts(b, (&id, &group), (pid, epoch), (generation, &member), parts)
    };
    let mut codes = answers.into_iter();
    let topics = shape
        .into_iter()
        .map(|(name, ps, refused)| {
            let partitions = ps
                .into_iter()
                .map(|p| {
                    let code = match refused {
                        Some(e) => e.code(),
                        None => codes.next().flatten().map_or(0, |e| e.code()),
                    };
                    TxnOffsetCommitResponsePartition::default()
                        .with_partition_index(p)
                        .with_error_code(code)
                })
                .collect();
            TxnOffsetCommitResponseTopic::default()
                .with_name(TopicName(StrBytes::from_string(name)))
                .with_partitions(partitions)
        })
        .collect();
    TxnOffsetCommitResponse::default().with_topics(topics)
}

/// The offsets written in the transaction: per partition, its error.
fn txn_commit_parts(
    b: &Broker,
    (id, group): (&str, &str),
    (pid, epoch): (i64, i16),
    (generation, member): (i32, &str),
    parts: Vec<CommitArgs>,
) -> Vec<Option<ResponseError>> {
    let n = parts.len();
    let tp = (
        OFFSETS_TOPIC,
        b.groups.offsets_partition_index(group) as i32,
    );
    let exists = |t: &str, p: i32| b.partition(t, p).is_some();
    b
        .txns
        .append_in_txn(id, pid, epoch, tp, || {
            b.groups
                .txn_commit(group, (pid, epoch), generation, member, parts, &exists)
        })
        .unwrap_or_else(|e| {
            let code = match e {
                ResponseError::ProducerFenced => ResponseError::InvalidProducerEpoch,
                ResponseError::ConcurrentTransactions | ResponseError::NotCoordinator => {
                    ResponseError::CoordinatorLoadInProgress
                }
                other => other,
            };
            warn!(
                "Kafka: TxnOffsetCommit of transactional id {id} (group {group}, producer {pid}, epoch {epoch}) refused with {code:?}"
            );
            vec![Some(code); n]
        })
}

/// DescribeTransactions v0: each id's state, timeout, start, producer and
/// partitions, or its error.
/// An id that may not be described is TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
/// topics that may not be described are left out of a transaction's list.
pub fn describe(
    b: &Broker,
    s: &Session,
    r: DescribeTransactionsRequest,
) -> DescribeTransactionsResponse {
    let states = r.transactional_ids.into_iter().map(|id| {
        let d = Described::default().with_transactional_id(id.clone());
        if !acl::allowed(
            b,
            s,
            Operation::Describe,
            ResourceType::TransactionalId,
            &id,
        ) {
            return d.with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code());
        }
        match b.txns.describe(id.0.as_str()) {
            Err(e) => d.with_error_code(e.code()),
            Ok(TxnMetadata { current: m, .. }) => {
                let mut topics: Vec<TopicData> = Vec::new();
                let may = |t: &str| {
                    acl::allowed_quietly(b, s, Operation::Describe, ResourceType::Topic, t)
                };
                for (t, p) in m.partitions.iter().filter(|(t, _)| may(t)) {
                    if topics.last().is_none_or(|x| x.topic.0.as_str() != t) {
                        topics.push(
                            TopicData::default()
                                .with_topic(TopicName(StrBytes::from_string(t.clone()))),
                        );
                    }
                    topics.last_mut().expect("pushed").partitions.push(*p);
                }
                d.with_transaction_state(StrBytes::from_static_str(m.state.name()))
                    .with_transaction_timeout_ms(m.timeout_ms)
                    .with_transaction_start_time_ms(m.start_ms)
                    .with_producer_id(ProducerId(m.producer_id))
                    .with_producer_epoch(m.producer_epoch)
                    .with_topics(topics)
            }
        }
    });
    DescribeTransactionsResponse::default().with_transaction_states(states.collect())
}

/// ListTransactions v0–1: the ids that pass the state, producer and (v1)
/// duration filters.
/// Ids that may not be described are left out.
pub fn list(
    b: &Broker,
    s: &Session,
    version: i16,
    r: ListTransactionsRequest,
) -> ListTransactionsResponse {
    let pids: Vec<i64> = r.producer_id_filters.iter().map(|p| p.0).collect();
    let states: Vec<String> = r.state_filters.iter().map(|s| s.to_string()).collect();
    let duration = if version >= 1 { r.duration_filter } else { -1 };
    let (unknown, found) = b
        .txns
        .list(&pids, &states, duration, commitfs_storage::now_ms());
    ListTransactionsResponse::default()
        .with_unknown_state_filters(unknown.into_iter().map(StrBytes::from_string).collect())
        .with_transaction_states(
            found
                .into_iter()
                .filter(|(id, _, _)| {
                    acl::allowed_quietly(
                        b,
                        s,
                        Operation::Describe,
                        ResourceType::TransactionalId,
                        id,
                    )
                })
                .map(|(id, pid, state)| {
                    Listed::default()
                        .with_transactional_id(kafka_protocol::messages::TransactionalId(
                            StrBytes::from_string(id),
                        ))
                        .with_producer_id(ProducerId(pid))
                        .with_transaction_state(StrBytes::from_static_str(state.name()))
                })
                .collect(),
        )
}
