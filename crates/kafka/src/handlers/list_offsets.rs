//! ListOffsets: earliest (the log start offset), latest (the high
//! watermark), the largest timestamp (v7's -3), and by timestamp through the
//! time index, the same lookup as the tree's `time/<ms>`.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsRequest};
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsResponse, ListOffsetsTopicResponse,
};

use crate::acl::{self, Operation, ResourceType};
use crate::broker::Broker;
use crate::error::{Family, code_for};
use crate::network::session::Session;
use commitfs_storage::{PartitionLog, Result};

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;

pub fn handle(
    b: &Broker,
    s: &Session,
    version: i16,
    req: ListOffsetsRequest,
) -> ListOffsetsResponse {
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let name = t.name.0.as_str().to_string();
            let may = acl::allowed(b, s, Operation::Describe, ResourceType::Topic, &name);
            let partitions = (t.partitions.iter())
                .map(|p| match may {
                    true => one(b, version, req.isolation_level, &name, p),
                    false => ListOffsetsPartitionResponse::default()
                        .with_partition_index(p.partition_index)
                        .with_timestamp(-1)
                        .with_offset(-1)
                        .with_error_code(ResponseError::TopicAuthorizationFailed.code()),
                })
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    ListOffsetsResponse::default().with_topics(topics)
}

fn one(
    b: &Broker,
    version: i16,
    isolation_level: i8,
    topic: &str,
    p: &ListOffsetsPartition,
) -> ListOffsetsPartitionResponse {
    let resp = ListOffsetsPartitionResponse::default()
        .with_partition_index(p.partition_index)
        .with_timestamp(-1)
        .with_offset(-1);
    let what = format!(
        "ListOffsets of {topic}-{} at {}",
        p.partition_index, p.timestamp
    );
    let Some(log) = b.partition(topic, p.partition_index) else {
        log::warn!("Kafka: {what} refused: no such partition");
        return resp.with_error_code(ResponseError::UnknownTopicOrPartition.code());
    };
    if p.timestamp == MAX_TIMESTAMP && version < 7 {
        return resp.with_error_code(ResponseError::UnsupportedVersion.code());
    }
    // Kafka's `lastFetchableOffset`: what a consumer at this isolation
    // level may read up to.
    let fetchable = match isolation_level {
        1 => log.last_stable_offset(),
        _ => log.high_watermark(),
    };
    match find(&log, p.timestamp, fetchable) {
        Ok(Some((timestamp, offset))) => resp.with_timestamp(timestamp).with_offset(offset),
        Ok(None) => resp,
        Err(e) => resp.with_error_code(code_for(Family::Read, &what, &e).code()),
    }
}

/// (timestamp, offset) for a ListOffsets target, `None` when no record
/// below `fetchable` matches.
fn find(log: &PartitionLog, target: i64, fetchable: i64) -> Result<Option<(i64, i64)>> {
    let found = match target {
        LATEST => return Ok(Some((-1, fetchable))),
        EARLIEST => Ok(Some((-1, log.log_start_offset()))),
        MAX_TIMESTAMP => {
            let Some(max) = log.local().max_timestamp()? else {
                return Ok(None);
            };
            at_timestamp(log, max)
        }
        ts if ts >= 0 => at_timestamp(log, ts),
        _ => Ok(None),
    }?;
    Ok(found.filter(|(_, offset)| target == EARLIEST || *offset < fetchable))
}

fn at_timestamp(log: &PartitionLog, ts: i64) -> Result<Option<(i64, i64)>> {
    Ok(log
        .timestamp_and_offset(ts)?
        .map(|(offset, timestamp)| (timestamp, offset)))
}
