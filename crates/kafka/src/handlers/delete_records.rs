//! DeleteRecords: the same storage call as the tree's `delete-records`
//! (`PartitionLog::delete_records_before`). `-1` means the high watermark.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::delete_records_request::DeleteRecordsRequest;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsResponse, DeleteRecordsTopicResult,
};
use log::{info, warn};

use crate::broker::Broker;
use crate::error::{Family, code_for};
use crate::handlers::internal_topics;

/// `may_delete`: DELETE on the topic.
pub fn handle(
    b: &Broker,
    req: DeleteRecordsRequest,
    may_delete: &dyn Fn(&str) -> bool,
) -> DeleteRecordsResponse {
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let topic = t.name.0.as_str().to_string();
            let allowed = may_delete(&topic);
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let r = DeleteRecordsPartitionResult::default()
                        .with_partition_index(p.partition_index)
                        .with_low_watermark(-1);
                    let what = format!(
                        "DeleteRecords of {topic}-{} before {}",
                        p.partition_index, p.offset
                    );
                    if !allowed {
                        return r.with_error_code(ResponseError::TopicAuthorizationFailed.code());
                    }
                    let Some(log) = b.partition(&topic, p.partition_index) else {
                        warn!("Kafka: {what} refused: no such partition");
                        return r.with_error_code(ResponseError::UnknownTopicOrPartition.code());
                    };
                    if let Some((code, why)) = internal_topics::delete_records(&topic) {
                        warn!("Kafka: {what} refused with {code:?}: {why}");
                        return r.with_error_code(code.code());
                    }
                    let offset = if p.offset == -1 {
                        log.high_watermark()
                    } else {
                        p.offset
                    };
                    match log.delete_records_before(offset) {
                        Ok(start) => {
                            info!("Kafka: {what} done; the log start offset is {start}");
                            r.with_low_watermark(start)
                        }
                        Err(e) => r.with_error_code(code_for(Family::Read, &what, &e).code()),
                    }
                })
                .collect();
            DeleteRecordsTopicResult::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    DeleteRecordsResponse::default().with_topics(topics)
}
