//! The room for consumer groups (FindCoordinator, JoinGroup, SyncGroup,
//! Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch) and idempotent
//! producers (InitProducerId). They are not served yet: each is answered
//! with a clear error, in its own response shape, with a log line.
//!
//! For whoever serves them: the requests arrive here decoded; committed
//! offsets belong in `__consumer_offsets` partitions made with
//! `LogManager::create_topic` (so they appear in the tree), encoded with
//! `record::internal` / `record::schema` (e.g. `OffsetCommit::to_record()`)
//! and appended through `PartitionLog::append_produced`; producer state plugs
//! into the append path through `storage::ProducerStateHook` (the produce
//! handler passes `NoProducerState` today).

use kafka_protocol::ResponseError;
use kafka_protocol::messages::find_coordinator_response::{Coordinator, FindCoordinatorResponse};
use kafka_protocol::messages::heartbeat_response::HeartbeatResponse;
use kafka_protocol::messages::init_producer_id_request::InitProducerIdRequest;
use kafka_protocol::messages::init_producer_id_response::InitProducerIdResponse;
use kafka_protocol::messages::join_group_response::JoinGroupResponse;
use kafka_protocol::messages::leave_group_response::LeaveGroupResponse;
use kafka_protocol::messages::offset_commit_request::OffsetCommitRequest;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponse, OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequest;
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponse, OffsetFetchResponseGroup,
};
use kafka_protocol::messages::sync_group_response::SyncGroupResponse;
use kafka_protocol::messages::{BrokerId, ProducerId, RequestKind, ResponseKind};
use kafka_protocol::protocol::StrBytes;
use log::warn;

use super::broker::Broker;
use super::dispatch::Outcome;

const GROUPS: &str =
    "consumer groups are not served yet: assign partitions and keep offsets in the client";
/// Retriable, so a client with a group keeps its assigned fetches going.
const NO_GROUPS: ResponseError = ResponseError::CoordinatorNotAvailable;

fn refuse(api: &str, why: &str) {
    warn!("Kafka: {api} refused: {why}");
}

pub fn handle(_b: &Broker, version: i16, request: RequestKind) -> Outcome {
    let code = NO_GROUPS.code();
    let response = match request {
        RequestKind::FindCoordinator(r) => {
            refuse("FindCoordinator", GROUPS);
            ResponseKind::FindCoordinator(find_coordinator(version, r.coordinator_keys))
        }
        RequestKind::JoinGroup(_) => {
            refuse("JoinGroup", GROUPS);
            ResponseKind::JoinGroup(
                JoinGroupResponse::default()
                    .with_error_code(code)
                    .with_generation_id(-1),
            )
        }
        RequestKind::SyncGroup(_) => {
            refuse("SyncGroup", GROUPS);
            ResponseKind::SyncGroup(SyncGroupResponse::default().with_error_code(code))
        }
        RequestKind::Heartbeat(_) => {
            refuse("Heartbeat", GROUPS);
            ResponseKind::Heartbeat(HeartbeatResponse::default().with_error_code(code))
        }
        RequestKind::LeaveGroup(_) => {
            refuse("LeaveGroup", GROUPS);
            ResponseKind::LeaveGroup(LeaveGroupResponse::default().with_error_code(code))
        }
        RequestKind::OffsetCommit(r) => {
            refuse("OffsetCommit", GROUPS);
            ResponseKind::OffsetCommit(offset_commit(r))
        }
        RequestKind::OffsetFetch(r) => {
            refuse("OffsetFetch", GROUPS);
            ResponseKind::OffsetFetch(offset_fetch(version, r))
        }
        RequestKind::InitProducerId(r) => ResponseKind::InitProducerId(init_producer_id(&r)),
        _ => return Outcome::Close("a request of an API that is not served".to_string()),
    };
    Outcome::Respond(response)
}

fn find_coordinator(version: i16, keys: Vec<StrBytes>) -> FindCoordinatorResponse {
    let code = NO_GROUPS.code();
    let msg = Some(StrBytes::from_static_str(GROUPS));
    let resp = FindCoordinatorResponse::default();
    if version >= 4 {
        let keys = keys.into_iter().map(|k| {
            Coordinator::default()
                .with_key(k)
                .with_node_id(BrokerId(-1))
                .with_port(-1)
                .with_error_code(code)
                .with_error_message(msg.clone())
        });
        return resp.with_coordinators(keys.collect());
    }
    let resp = resp
        .with_error_code(code)
        .with_node_id(BrokerId(-1))
        .with_port(-1);
    if version >= 1 {
        resp.with_error_message(msg)
    } else {
        resp
    }
}

fn offset_commit(r: OffsetCommitRequest) -> OffsetCommitResponse {
    let topics = r.topics.into_iter().map(|t| {
        let parts = t.partitions.iter().map(|p| {
            OffsetCommitResponsePartition::default()
                .with_partition_index(p.partition_index)
                .with_error_code(NO_GROUPS.code())
        });
        OffsetCommitResponseTopic::default()
            .with_name(t.name)
            .with_partitions(parts.collect())
    });
    OffsetCommitResponse::default().with_topics(topics.collect())
}

fn offset_fetch(version: i16, r: OffsetFetchRequest) -> OffsetFetchResponse {
    let resp = OffsetFetchResponse::default();
    if version >= 8 {
        let groups = r.groups.into_iter().map(|g| {
            OffsetFetchResponseGroup::default()
                .with_group_id(g.group_id)
                .with_error_code(NO_GROUPS.code())
        });
        resp.with_groups(groups.collect())
    } else if version >= 2 {
        resp.with_error_code(NO_GROUPS.code())
    } else {
        resp
    }
}

fn init_producer_id(r: &InitProducerIdRequest) -> InitProducerIdResponse {
    let (code, why) = if r.transactional_id.is_some() {
        (
            ResponseError::TransactionalIdAuthorizationFailed,
            "transactions are not served",
        )
    } else {
        (
            ResponseError::ClusterAuthorizationFailed,
            "idempotent producers are not served yet: produce with enable.idempotence=false",
        )
    };
    refuse("InitProducerId", why);
    InitProducerIdResponse::default()
        .with_error_code(code.code())
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1)
}
