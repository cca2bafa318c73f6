//! Fetch: whole batches from segment bytes, sent with `sendfile(2)`.
//!
//! - An offset inside a batch returns the containing batch.
//! - `max_bytes` (the response) and `partition_max_bytes` are respected; the
//!   first partition with data returns its first batch whole even when it is
//!   larger, as Kafka does, so a consumer always makes progress.
//! - Long poll: with fewer than `min_bytes` available, the request is
//!   parked ([`Waiting`], Kafka's fetch purgatory) without holding a thread;
//!   the server reads again after an append to any partition (a shell write
//!   included) and at `max_wait_ms`.
//! - Fetch sessions (KIP-227) are not kept: every response has session id 0,
//!   which tells the client to send full fetches.

use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::ProducerId;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchRequest};
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, FetchResponse, FetchableTopicResponse, PartitionData,
};

use crate::acl::{self, Operation, ResourceType};
use crate::broker::Broker;
use crate::error::{Family, code_for};
use crate::handlers::outcome::{DelayedOperation, Outcome};
use crate::network::session::Session;
use crate::network::splice::{MAX_PLACEHOLDER, placeholder};
use commitfs_storage::{Isolation, SegmentSlice, StorageError};

/// Kafka's broker default `fetch.max.bytes` (55 MiB): the most one response carries.
const FETCH_MAX_BYTES: u64 = 57_671_680;
/// Longest long poll honoured; clients ask for 500 ms by default.
const MAX_WAIT: Duration = Duration::from_secs(300);

/// One pass over the request's partitions.
struct Pass {
    responses: Vec<FetchableTopicResponse>,
    slices: Vec<SegmentSlice>,
    bytes: u64,
    errors: bool,
}

/// A Fetch waiting for `min_bytes` (Kafka's `DelayedFetch`): read again
/// with [`Waiting::retry`] once the append generation moves past
/// [`Waiting::seen`], or at [`Waiting::deadline`].
pub struct Waiting {
    req: FetchRequest,
    /// Per topic of the request, whether READ was refused (decided once).
    denied: Vec<bool>,
    version: i16,
    deadline: Instant,
    seen: u64,
}

impl DelayedOperation for Waiting {
    fn deadline(&self) -> Instant {
        self.deadline
    }

    fn seen(&self) -> u64 {
        self.seen
    }

    fn retry(self: Box<Self>, b: &Broker) -> Outcome {
        let w = *self;
        attempt(b, w.version, w.req, w.denied, w.deadline)
    }
}

pub fn handle(b: &Broker, s: &Session, version: i16, req: FetchRequest) -> Outcome {
    if req.session_id != 0 {
        // No session was ever handed out, so none can be found.
        return Outcome::Fetch(
            FetchResponse::default().with_error_code(ResponseError::FetchSessionIdNotFound.code()),
            Vec::new(),
        );
    }
    let wait = Duration::from_millis(req.max_wait_ms.max(0) as u64).min(MAX_WAIT);
    // A follower's fetch (a replica id, v14 and below) needs
    // CLUSTER_ACTION instead of READ, as in KafkaApis.
    let denied = if req.replica_id.0 >= 0 {
        let refused = !acl::cluster(b, s, Operation::ClusterAction);
        vec![refused; req.topics.len()]
    } else {
        (req.topics.iter())
            .map(|t| !acl::allowed(b, s, Operation::Read, ResourceType::Topic, &t.topic))
            .collect()
    };
    attempt(b, version, req, denied, Instant::now() + wait)
}

/// One read of every partition: the response, or the request parked.
fn attempt(
    b: &Broker,
    version: i16,
    req: FetchRequest,
    denied: Vec<bool>,
    deadline: Instant,
) -> Outcome {
    let min_bytes = req.min_bytes.max(0) as u64;
    let max_bytes = if version >= 3 {
        (req.max_bytes.max(0) as u64).min(FETCH_MAX_BYTES)
    } else {
        FETCH_MAX_BYTES
    };
    let seen = b.mgr.appends().generation();
    let pass = read_pass(b, &req, &denied, max_bytes);
    let done = pass.bytes >= min_bytes
        || req.topics.is_empty()
        || pass.errors
        || Instant::now() >= deadline
        || b.stopping();
    if done {
        let resp = FetchResponse::default().with_responses(pass.responses);
        return Outcome::Fetch(resp, pass.slices);
    }
    Outcome::Wait(Box::new(Waiting {
        req,
        denied,
        version,
        deadline,
        seen,
    }))
}

fn read_pass(b: &Broker, req: &FetchRequest, denied: &[bool], max_bytes: u64) -> Pass {
    let mut pass = Pass {
        responses: Vec::with_capacity(req.topics.len()),
        slices: Vec::new(),
        bytes: 0,
        errors: false,
    };
    let isolation = match req.isolation_level {
        1 => Isolation::ReadCommitted,
        _ => Isolation::ReadUncommitted,
    };
    for (i, topic) in req.topics.iter().enumerate() {
        let name = topic.topic.0.as_str();
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in &topic.partitions {
            if denied.get(i).copied().unwrap_or(false) {
                // `FetchResponse.partitionResponse`: no offsets, no records.
                pass.errors = true;
                partitions.push(
                    PartitionData::default()
                        .with_partition_index(p.partition)
                        .with_error_code(ResponseError::TopicAuthorizationFailed.code())
                        .with_high_watermark(-1)
                        .with_last_stable_offset(-1)
                        .with_log_start_offset(-1),
                );
                continue;
            }
            let left = max_bytes.saturating_sub(pass.bytes);
            partitions.push(read_partition(b, name, p, left, isolation, &mut pass));
        }
        pass.responses.push(
            FetchableTopicResponse::default()
                .with_topic(topic.topic.clone())
                .with_partitions(partitions),
        );
    }
    pass
}

fn read_partition(
    b: &Broker,
    topic: &str,
    p: &FetchPartition,
    left: u64,
    isolation: Isolation,
    pass: &mut Pass,
) -> PartitionData {
    // At read_committed every partition answers a list, empty but where
    // the records it sends hold aborted transactions.
    let committed = isolation == Isolation::ReadCommitted;
    let data = PartitionData::default()
        .with_partition_index(p.partition)
        .with_aborted_transactions(committed.then(Vec::new));
    let what = || {
        format!(
            "Fetch of {topic}-{} at offset {}",
            p.partition, p.fetch_offset
        )
    };
    let Some(log) = b.partition(topic, p.partition) else {
        pass.errors = true;
        log::warn!("Kafka: {} refused: no such partition", what());
        return data.with_error_code(ResponseError::UnknownTopicOrPartition.code());
    };
    let limit = (p.partition_max_bytes.max(0) as u64)
        .min(left)
        .min(MAX_PLACEHOLDER as u64);
    // Kafka's minOneMessage: only until some partition has returned data.
    let min_one = pass.bytes == 0;
    match log.read_isolated(p.fetch_offset, limit, min_one, isolation) {
        Ok(read) => {
            let aborted = read.aborted.map(|txns| {
                txns.iter()
                    .map(|t| {
                        AbortedTransaction::default()
                            .with_producer_id(ProducerId(t.producer_id))
                            .with_first_offset(t.first_offset)
                    })
                    .collect()
            });
            let data = data
                .with_high_watermark(read.high_watermark)
                .with_last_stable_offset(read.last_stable_offset)
                .with_log_start_offset(read.log_start_offset)
                .with_aborted_transactions(aborted);
            let Some(slice) = read.slice else {
                return data.with_records(Some(Bytes::new()));
            };
            pass.bytes += slice.len;
            let records = match placeholder(slice.len as usize) {
                Some(ph) => {
                    pass.slices.push(slice);
                    ph
                }
                // Too large to splice (a single batch over the placeholder):
                // copied instead.
                None => match slice.read() {
                    Ok(bytes) => Bytes::from(bytes),
                    Err(e) => {
                        pass.errors = true;
                        return data.with_error_code(code_for(Family::Read, &what(), &e).code());
                    }
                },
            };
            data.with_records(Some(records))
        }
        Err(e) => {
            pass.errors = true;
            let code = code_for(Family::Read, &what(), &e);
            let data = data.with_error_code(code.code());
            match e {
                StorageError::OffsetOutOfRange {
                    log_start_offset,
                    log_end_offset,
                    ..
                } => data
                    .with_high_watermark(log_end_offset)
                    .with_last_stable_offset(log_end_offset)
                    .with_log_start_offset(log_start_offset),
                _ => data,
            }
        }
    }
}
