//! Produce: each partition's batches are validated and appended by storage,
//! through the same append path as the tree's writes. acks 1 and -1 are
//! answered once the batches are in the page cache (the high watermark on
//! this single replica moves then); acks 0 is not answered at all.
//!
//! Transactional batches need the request's transactional id, one
//! producer (id and epoch) per request, and their partition added to that
//! id's open transaction (Kafka's produce-time verification, KIP-890 part
//! 1): the transaction coordinator checks it and holds its decision still
//! while the batches are appended.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::ResponseKind;
use kafka_protocol::messages::produce_request::ProduceRequest;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, ProduceResponse, TopicProduceResponse,
};
use kafka_protocol::protocol::StrBytes;
use log::warn;

use std::collections::BTreeSet;

use crate::acl::{self, Operation, ResourceType};
use crate::broker::Broker;
use crate::error::{Family, code_for, message_for};
use crate::handlers::internal_topics;
use crate::handlers::outcome::Outcome;
use crate::network::session::Session;
use commitfs_record::ParsedBatches;

fn refused(
    index: i32,
    code: ResponseError,
    message: Option<String>,
    version: i16,
) -> PartitionProduceResponse {
    let r = PartitionProduceResponse::default()
        .with_index(index)
        .with_error_code(code.code())
        .with_base_offset(-1);
    match message {
        Some(m) if version >= 8 => r.with_error_message(Some(StrBytes::from_string(m))),
        _ => r,
    }
}

/// Kafka's `RecordErrors` (v8+): each record a validator refused, by its
/// index in its batch (the keyless records of a compacted topic).
fn with_record_errors(
    r: PartitionProduceResponse,
    e: &commitfs_storage::StorageError,
    version: i16,
) -> PartitionProduceResponse {
    let commitfs_storage::StorageError::KeylessRecords { partition, indexes } = e else {
        return r;
    };
    if version < 8 {
        return r;
    }
    let message = commitfs_storage::error::keyless_record_message(partition);
    r.with_record_errors(
        indexes
            .iter()
            .map(|i| {
                BatchIndexAndErrorMessage::default()
                    .with_batch_index(*i)
                    .with_batch_index_error_message(Some(StrBytes::from_string(message.clone())))
            })
            .collect(),
    )
}

pub fn handle(b: &Broker, s: &Session, version: i16, req: ProduceRequest) -> Outcome {
    let acks = req.acks;
    // Each partition's batch headers, parsed once for the whole path down
    // to the segment; batches that do not parse are left to validation.
    let parsed: Vec<Vec<ParsedBatches>> = req
        .topic_data
        .iter()
        .map(|t| {
            let records = t.partition_data.iter().map(|p| p.records.as_deref());
            records
                .map(|r| ParsedBatches::parse(r.unwrap_or(&[])))
                .collect()
        })
        .collect();
    let producers: BTreeSet<(i64, i16)> = parsed
        .iter()
        .flatten()
        .flat_map(ParsedBatches::transactional_producers)
        .collect();
    let txn_id = req.transactional_id.as_ref().map(|t| t.0.to_string());
    let whole_request_error = if !matches!(acks, -1..=1) {
        warn!("Kafka: Produce with acks={acks} refused: acks must be -1, 0 or 1");
        Some((ResponseError::InvalidRequiredAcks, None))
    } else if !producers.is_empty() && txn_id.is_none() {
        warn!("Kafka: a Produce of transactional batches without a transactional id refused");
        Some((ResponseError::TransactionalIdAuthorizationFailed, None))
    } else if let Some(id) = txn_id.as_deref().filter(|_| !producers.is_empty())
        && !acl::allowed(b, s, Operation::Write, ResourceType::TransactionalId, id)
    {
        Some((ResponseError::TransactionalIdAuthorizationFailed, None))
    } else if producers.len() > 1 {
        warn!(
            "Kafka: a Produce of transactional batches of {} producers refused: one is allowed",
            producers.len()
        );
        Some((
            ResponseError::InvalidProducerIdMapping,
            Some("Transactional records contained more than one producer ID".to_string()),
        ))
    } else {
        None
    };
    let txn = txn_id.zip(producers.first().copied());
    let mut failed = 0usize;
    let mut responses = Vec::with_capacity(req.topic_data.len());
    for (topic, parsed) in req.topic_data.iter().zip(parsed) {
        let name = topic.name.0.as_str().to_string();
        let may_write = acl::allowed(b, s, Operation::Write, ResourceType::Topic, &name);
        let mut partitions = Vec::with_capacity(topic.partition_data.len());
        for (p, parsed) in topic.partition_data.iter().zip(parsed) {
            let r = match &whole_request_error {
                Some((code, msg)) => refused(p.index, *code, msg.clone(), version),
                None if !may_write => refused(
                    p.index,
                    ResponseError::TopicAuthorizationFailed,
                    None,
                    version,
                ),
                None => produce_one(b, &name, p.index, parsed, txn.as_ref(), version),
            };
            failed += (r.error_code != 0) as usize;
            partitions.push(r);
        }
        responses.push(
            TopicProduceResponse::default()
                .with_name(topic.name.clone())
                .with_partition_responses(partitions),
        );
    }
    if acks == 0 {
        // The client waits for nothing; closing is Kafka's way to tell it.
        return if failed > 0 {
            Outcome::Close(format!("an acks=0 Produce failed for {failed} partitions"))
        } else {
            Outcome::Silent
        };
    }
    Outcome::Respond(ResponseKind::Produce(
        ProduceResponse::default().with_responses(responses),
    ))
}

fn produce_one(
    b: &Broker,
    topic: &str,
    index: i32,
    records: ParsedBatches,
    txn: Option<&(String, (i64, i16))>,
    version: i16,
) -> PartitionProduceResponse {
    let what = format!("Produce to {topic}-{index}");
    let Some(log) = b.partition(topic, index) else {
        warn!("Kafka: {what} refused: no such partition");
        return refused(index, ResponseError::UnknownTopicOrPartition, None, version);
    };
    if let Some((code, why)) = internal_topics::produce(topic) {
        warn!("Kafka: {what} refused with {code:?}: {why}");
        return refused(index, code, None, version);
    }
    if records.is_empty() {
        warn!("Kafka: {what} refused: no record batch");
        return refused(
            index,
            ResponseError::CorruptMessage,
            Some("the request holds no record batch".to_string()),
            version,
        );
    }
    let in_txn = records.transactional_producers().next().is_some();
    let appended = match txn.filter(|_| in_txn) {
        None => log.append_produced(records),
        Some((id, (pid, epoch))) => {
            let checked = b.txns.append_in_txn(id, *pid, *epoch, (topic, index), || {
                log.append_transactional(records)
            });
            match checked {
                Ok(appended) => appended,
                Err(e) => {
                    let (code, message) = verification_refusal(e);
                    warn!(
                        "Kafka: {what} refused with {code:?}: transactional id {id}, producer {pid} epoch {epoch}: {message}"
                    );
                    return refused(index, code, Some(message), version);
                }
            }
        }
    };
    match appended {
        Ok(info) => PartitionProduceResponse::default()
            .with_index(index)
            .with_base_offset(info.first_offset)
            .with_log_append_time_ms(info.log_append_time)
            .with_log_start_offset(info.log_start_offset),
        Err(e) => {
            let code = code_for(Family::Produce, &what, &e);
            let r = refused(index, code, Some(message_for(&e)), version);
            with_record_errors(r, &e, version)
        }
    }
}

/// What a producer is told when its partition's place in its transaction
/// could not be verified (Kafka's `ReplicaManager` after
/// `AddPartitionsToTxnManager`): the coordinator's codes, as Produce
/// (through version 10) knows them.
fn verification_refusal(e: ResponseError) -> (ResponseError, String) {
    match e {
        ResponseError::InvalidTxnState => (
            ResponseError::InvalidTxnState,
            "Partition was not added to the transaction".to_string(),
        ),
        ResponseError::ProducerFenced => (
            ResponseError::InvalidProducerEpoch,
            "Producer attempted to produce with an old epoch.".to_string(),
        ),
        ResponseError::ConcurrentTransactions
        | ResponseError::CoordinatorLoadInProgress
        | ResponseError::CoordinatorNotAvailable
        | ResponseError::NotCoordinator => (
            ResponseError::NotEnoughReplicas,
            format!(
                "Unable to verify the partition has been added to the transaction. Underlying error: {}",
                kafka_error_name(e)
            ),
        ),
        other => (other, format!("{other:?}")),
    }
}

/// Kafka's name of a code (`Errors.name()`), for messages.
fn kafka_error_name(e: ResponseError) -> String {
    let mut out = String::new();
    for (i, c) in format!("{e:?}").chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}
