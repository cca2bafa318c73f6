//! Consumer groups with this daemon as their coordinator, and idempotent
//! producers' ids:
//! - [`coordinator`]: the state behind one lock, JoinGroup and its waits;
//!   [`membership`]: SyncGroup, Heartbeat, LeaveGroup; [`commits`]:
//!   OffsetCommit, OffsetFetch, ListGroups, DescribeGroups; [`cleanup`]:
//!   offsets expired, empty groups removed, DeleteGroups; [`load`]: the
//!   state read back, and checked, at start;
//! - [`state`]: one group's state machine (pure);
//! - [`records`], [`offsets`]: the `__consumer_offsets` records in Kafka's
//!   layout, and the partitions they are written to and read back from;
//! - [`api`]: requests and responses at each version;
//! - here: routing, FindCoordinator, OffsetCommit/OffsetFetch's request
//!   shapes, InitProducerId.
//!
//! Producer state itself is storage's (`storage::producer_state`, kept per
//! partition in `.snapshot` files); every produced append is checked
//! against it (`PartitionLog::append_produced`). InitProducerId with a
//! transactional id is the transaction coordinator's (`kafka::txn`).

pub mod admin;
pub mod api;
pub mod cleanup;
pub mod commits;
pub mod coordinator;
mod load;
pub mod membership;
pub mod offsets;
pub mod records;
pub mod state;

use super::session::Session;
use std::cell::RefCell;

use kafka_protocol::ResponseError;

use crate::error::Family;
use kafka_protocol::messages::find_coordinator_request::FindCoordinatorRequest;
use kafka_protocol::messages::find_coordinator_response::{Coordinator, FindCoordinatorResponse};
use kafka_protocol::messages::init_producer_id_request::InitProducerIdRequest;
use kafka_protocol::messages::init_producer_id_response::InitProducerIdResponse;
use kafka_protocol::messages::offset_commit_request::OffsetCommitRequest;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponse, OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_fetch_request::{OffsetFetchRequest, OffsetFetchRequestGroup};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponse, OffsetFetchResponseGroup, OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions, OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{BrokerId, ProducerId, RequestKind, ResponseKind, TopicName};
use kafka_protocol::protocol::StrBytes;
use log::{info, warn};

use super::acl::{self, Operation, ResourceType};
use super::broker::Broker;
use super::handlers::outcome::Outcome;
pub use cleanup::Cleaner;
use commits::{CommitArgs, Fetched};
pub use coordinator::GroupSettings;

thread_local! {
    /// The connection's peer, as Kafka shows a member's host (`/127.0.0.1`).
    static PEER: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Notes the connection's peer for the requests its thread handles.
pub fn set_peer(peer: &std::net::SocketAddr) {
    PEER.with(|p| *p.borrow_mut() = format!("/{}", peer.ip()));
}

fn peer() -> String {
    PEER.with(|p| p.borrow().clone())
}

pub fn handle(
    b: &Broker,
    session: &Session,
    version: i16,
    client_id: &str,
    request: RequestKind,
) -> Outcome {
    if let Some(len) = longest_id(&request).filter(|n| *n > MAX_STRING_BYTES) {
        return Outcome::Close(format!(
            "a group or member id of {len} bytes: Kafka's strings hold at most {MAX_STRING_BYTES}"
        ));
    }
    let group_read = |g: &str| acl::allowed(b, session, Operation::Read, ResourceType::Group, g);
    let topic_read = |t: &str| acl::allowed(b, session, Operation::Read, ResourceType::Topic, t);
    let group_describe =
        |g: &str| acl::allowed(b, session, Operation::Describe, ResourceType::Group, g);
    let topic_describe =
        |t: &str| acl::allowed(b, session, Operation::Describe, ResourceType::Topic, t);
    let group_delete =
        |g: &str| acl::allowed(b, session, Operation::Delete, ResourceType::Group, g);
    let group_denied = ResponseError::GroupAuthorizationFailed.code();
    let response = match request {
        RequestKind::JoinGroup(r) if !group_read(&r.group_id) => {
            ResponseKind::JoinGroup(api::join_refused(version, group_denied))
        }
        RequestKind::SyncGroup(r) if !group_read(&r.group_id) => {
            ResponseKind::SyncGroup(api::sync_refused(version, group_denied))
        }
        RequestKind::Heartbeat(r) if !group_read(&r.group_id) => ResponseKind::Heartbeat(
            kafka_protocol::messages::HeartbeatResponse::default().with_error_code(group_denied),
        ),
        RequestKind::LeaveGroup(r) if !group_read(&r.group_id) => ResponseKind::LeaveGroup(
            kafka_protocol::messages::LeaveGroupResponse::default().with_error_code(group_denied),
        ),
        RequestKind::OffsetCommit(r) if !group_read(&r.group_id) => {
            ResponseKind::OffsetCommit(offset_commit_refused(&r, group_denied))
        }
        RequestKind::FindCoordinator(r) => {
            ResponseKind::FindCoordinator(find_coordinator(b, session, version, r))
        }
        RequestKind::JoinGroup(r) => ResponseKind::JoinGroup(api::join(b, version, client_id, r)),
        RequestKind::SyncGroup(r) => ResponseKind::SyncGroup(api::sync(b, version, r)),
        RequestKind::Heartbeat(r) => ResponseKind::Heartbeat(api::heartbeat(b, r)),
        RequestKind::LeaveGroup(r) => ResponseKind::LeaveGroup(api::leave(b, version, r)),
        RequestKind::OffsetCommit(r) => {
            ResponseKind::OffsetCommit(offset_commit(b, version, r, &topic_read))
        }
        RequestKind::OffsetFetch(r) => ResponseKind::OffsetFetch(offset_fetch(
            b,
            version,
            r,
            &group_describe,
            &topic_describe,
        )),
        RequestKind::ListGroups(r) => {
            // Kafka's filter, unlogged: CLUSTER DESCRIBE shows every group.
            let all = acl::allowed_quietly(
                b,
                session,
                Operation::Describe,
                ResourceType::Cluster,
                acl::CLUSTER_NAME,
            );
            let may = |g: &str| {
                all || acl::allowed_quietly(b, session, Operation::Describe, ResourceType::Group, g)
            };
            ResponseKind::ListGroups(api::list_groups(b, version, r, &may))
        }
        RequestKind::DescribeGroups(r) => {
            let include_operations = version >= 3 && r.include_authorized_operations;
            let mut response = api::describe_groups(b, r, &group_describe);
            // As KafkaApis: for each group answered without an error.
            if include_operations {
                for g in response.groups.iter_mut().filter(|g| g.error_code == 0) {
                    g.authorized_operations =
                        acl::authorized_operations(b, session, ResourceType::Group, &g.group_id);
                }
            }
            ResponseKind::DescribeGroups(response)
        }
        RequestKind::InitProducerId(r) => {
            ResponseKind::InitProducerId(init_producer_id(b, session, version, &r))
        }
        RequestKind::DeleteGroups(r) => {
            ResponseKind::DeleteGroups(api::delete_groups(b, r, &group_delete))
        }
        _ => return Outcome::Close("a request of an API that is not served".to_string()),
    };
    Outcome::Respond(response)
}

/// Kafka's decoder refuses a string field longer than this (`0x7fff`, what
/// a STRING's int16 length holds), compact ones included, and the request
/// with it. kafka-protocol reads compact strings of any length, so a group
/// API's ids are bounded here: a group id is kept in memory, answered in
/// ListGroups and written into `__consumer_offsets` keys, whose STRING
/// could not hold more.
const MAX_STRING_BYTES: usize = 0x7fff;

/// The longest group, member or protocol name a group request carries.
fn longest_id(request: &RequestKind) -> Option<usize> {
    let ids: Vec<&StrBytes> = match request {
        RequestKind::FindCoordinator(r) => {
            std::iter::once(&r.key).chain(&r.coordinator_keys).collect()
        }
        RequestKind::JoinGroup(r) => [&r.group_id.0, &r.member_id, &r.protocol_type]
            .into_iter()
            .chain(r.protocols.iter().map(|p| &p.name))
            .collect(),
        RequestKind::SyncGroup(r) => vec![&r.group_id.0, &r.member_id],
        RequestKind::Heartbeat(r) => vec![&r.group_id.0, &r.member_id],
        RequestKind::LeaveGroup(r) => std::iter::once(&r.group_id.0)
            .chain(std::iter::once(&r.member_id))
            .chain(r.members.iter().map(|m| &m.member_id))
            .collect(),
        RequestKind::OffsetCommit(r) => vec![&r.group_id.0, &r.member_id],
        RequestKind::OffsetFetch(r) => std::iter::once(&r.group_id.0)
            .chain(r.groups.iter().map(|g| &g.group_id.0))
            .collect(),
        RequestKind::DescribeGroups(r) => r.groups.iter().map(|g| &g.0).collect(),
        RequestKind::DeleteGroups(r) => r.groups_names.iter().map(|g| &g.0).collect(),
        _ => Vec::new(),
    };
    ids.iter().map(|s| s.len()).max()
}

/// FindCoordinator: this broker, for every group and every transactional
/// id (there is one broker; its `__transaction_state` is made at the first
/// write of a transactional id's state).
fn find_coordinator(
    b: &Broker,
    session: &Session,
    version: i16,
    r: FindCoordinatorRequest,
) -> FindCoordinatorResponse {
    let key_type = r.key_type;
    let judge = |key: &str| match key_type {
        0 if !acl::allowed(b, session, Operation::Describe, ResourceType::Group, key) => {
            (ResponseError::GroupAuthorizationFailed.code(), None, -1)
        }
        1 if !acl::allowed(
            b,
            session,
            Operation::Describe,
            ResourceType::TransactionalId,
            key,
        ) =>
        {
            (
                ResponseError::TransactionalIdAuthorizationFailed.code(),
                None,
                -1,
            )
        }
        0 | 1 => (0, None, b.node_id()),
        t => {
            warn!(
                "Kafka: FindCoordinator with key type {t} refused: only groups (0) and transactions (1) are served"
            );
            (
                ResponseError::InvalidRequest.code(),
                Some(StrBytes::from_static_str("unknown key type")),
                -1,
            )
        }
    };
    let address = |node: i32| {
        if node >= 0 {
            let a = b.advertised(session.listener);
            (a.host.clone(), a.port as i32)
        } else {
            (String::new(), -1)
        }
    };
    let resp = FindCoordinatorResponse::default();
    if version >= 4 {
        let keys = r.coordinator_keys.into_iter().map(|k| {
            let (code, msg, node) = judge(&k);
            let (host, port) = address(node);
            Coordinator::default()
                .with_key(k)
                .with_node_id(BrokerId(node))
                .with_host(StrBytes::from_string(host))
                .with_port(port)
                .with_error_code(code)
                .with_error_message(msg)
        });
        return resp.with_coordinators(keys.collect());
    }
    let (code, msg, node) = judge(&r.key);
    let (host, port) = address(node);
    let resp = resp
        .with_error_code(code)
        .with_node_id(BrokerId(node))
        .with_host(StrBytes::from_string(host))
        .with_port(port);
    if version >= 1 {
        resp.with_error_message(msg)
    } else {
        resp
    }
}

fn offset_commit(
    b: &Broker,
    version: i16,
    r: OffsetCommitRequest,
    may_read: &dyn Fn(&str) -> bool,
) -> OffsetCommitResponse {
    let group = r.group_id.0.as_str().to_string();
    let mut shape = Vec::new();
    let mut parts = Vec::new();
    for t in &r.topics {
        let topic = t.name.0.as_str().to_string();
        let allowed = may_read(&topic);
        shape.push((t.name.clone(), t.partitions.len(), allowed));
        if !allowed {
            continue;
        }
        for p in &t.partitions {
            parts.push(CommitArgs::new(
                &topic,
                p.partition_index,
                p.committed_offset,
                (version >= 6).then_some(p.committed_leader_epoch),
                p.committed_metadata.as_deref(),
            ));
        }
    }
    // Only v2-v4 carry a retention time; -1 means the broker's default.
    let retention = if (2..=4).contains(&version) {
        r.retention_time_ms
    } else {
        -1
    };
    let exists = |t: &str, p: i32| b.partition(t, p).is_some();
    let member = r.member_id.as_str();
    let answers = b.groups.commit(
        &group,
        r.generation_id_or_member_epoch,
        member,
        retention,
        parts,
        &exists,
    );
    let mut answers = answers.into_iter();
    let mut topics = Vec::new();
    for (t, (name, n, allowed)) in r.topics.iter().zip(shape) {
        let partitions = t.partitions.iter().take(n).map(|p| {
            let e = match allowed {
                true => answers.next().flatten(),
                false => Some(ResponseError::TopicAuthorizationFailed),
            };
            OffsetCommitResponsePartition::default()
                .with_partition_index(p.partition_index)
                .with_error_code(e.map_or(0, |e| e.code()))
        });
        topics.push(
            OffsetCommitResponseTopic::default()
                .with_name(name)
                .with_partitions(partitions.collect()),
        );
    }
    OffsetCommitResponse::default().with_topics(topics)
}

/// The offsets a topic-by-topic request asks for (`None`: every one).
fn wanted(ts: Option<Vec<(TopicName, Vec<i32>)>>) -> Option<Vec<(String, Vec<i32>)>> {
    ts.map(|ts| {
        ts.into_iter()
            .map(|(t, ps)| (t.0.as_str().to_string(), ps))
            .collect::<Vec<_>>()
    })
}

fn topic_name(t: &str) -> TopicName {
    TopicName(StrBytes::from_string(t.to_string()))
}

fn fetched_metadata(f: &Fetched) -> Option<StrBytes> {
    Some(StrBytes::from_string(f.metadata.clone()))
}

/// One partition's OffsetFetch answer, the same in every version: the
/// versions differ only in the generated types that carry it (v8's
/// per-group partitions and the older ones), hence a macro over both.
macro_rules! fetched_partition {
    ($p:expr, $allowed:expr, $unstable:expr, $f:expr, $epoch:expr) => {{
        let p = $p;
        if !$allowed {
            p.with_committed_offset(-1)
                .with_metadata(Some(StrBytes::default()))
                .with_error_code(ResponseError::TopicAuthorizationFailed.code())
        } else if $unstable {
            p.with_committed_offset(-1)
                .with_error_code(ResponseError::UnstableOffsetCommit.code())
        } else {
            p.with_committed_offset($f.offset)
                .with_committed_leader_epoch($epoch)
                .with_metadata(fetched_metadata($f))
        }
    }};
}

/// OffsetFetch v8+'s answer for one group.
fn offset_fetch_group(
    b: &Broker,
    g: OffsetFetchRequestGroup,
    unstable: &dyn Fn(&str, &str, i32) -> bool,
    may_group: &dyn Fn(&str) -> bool,
    may_topic: &dyn Fn(&str) -> bool,
) -> OffsetFetchResponseGroup {
    let asked = g.topics.map(|ts| {
        ts.into_iter()
            .map(|t| (t.name, t.partition_indexes))
            .collect()
    });
    let resp = OffsetFetchResponseGroup::default().with_group_id(g.group_id.clone());
    if !may_group(g.group_id.0.as_str()) {
        return resp.with_error_code(ResponseError::GroupAuthorizationFailed.code());
    }
    let all = asked.is_none();
    let topics = match b.groups.fetch(g.group_id.0.as_str(), wanted(asked)) {
        Ok(topics) => topics,
        Err(e) => return resp.with_error_code(e.code()),
    };
    let group = g.group_id.0.as_str();
    let topics = topics.into_iter().filter(|(t, _)| !all || may_topic(t));
    let topics = topics.map(|(t, ps)| {
        let allowed = may_topic(&t);
        let parts = ps.iter().map(|f| {
            let p = OffsetFetchResponsePartitions::default().with_partition_index(f.partition);
            fetched_partition!(
                p,
                allowed,
                unstable(group, &t, f.partition),
                f,
                f.leader_epoch
            )
        });
        OffsetFetchResponseTopics::default()
            .with_name(topic_name(&t))
            .with_partitions(parts.collect())
    });
    resp.with_topics(topics.collect())
}

/// `may_group` is DESCRIBE on a group, `may_topic` DESCRIBE on a topic:
/// a topic that may not be described is left out of an all-topics answer
/// and TOPIC_AUTHORIZATION_FAILED when asked for by name.
fn offset_fetch(
    b: &Broker,
    version: i16,
    r: OffsetFetchRequest,
    may_group: &dyn Fn(&str) -> bool,
    may_topic: &dyn Fn(&str) -> bool,
) -> OffsetFetchResponse {
    // Kafka's `requireStable` (v7+): an offset a transaction has written
    // but not committed yet is UNSTABLE_OFFSET_COMMIT, and the client asks
    // again, rather than reading the offset before it.
    let stable = version >= 7 && r.require_stable;
    let unstable = |group: &str, t: &str, p: i32| stable && b.groups.unstable(group, t, p);
    if version >= 8 {
        let groups = (r.groups.into_iter())
            .map(|g| offset_fetch_group(b, g, &unstable, may_group, may_topic));
        return OffsetFetchResponse::default().with_groups(groups.collect());
    }
    let asked = r.topics.map(|ts| {
        ts.into_iter()
            .map(|t| (t.name, t.partition_indexes))
            .collect()
    });
    let asked = wanted(asked);
    if !may_group(r.group_id.0.as_str()) {
        return offset_fetch_refused(version, ResponseError::GroupAuthorizationFailed, asked);
    }
    let all = asked.is_none();
    let topics = match b.groups.fetch(r.group_id.0.as_str(), asked.clone()) {
        Ok(topics) => topics,
        Err(e) => return offset_fetch_refused(version, e, asked),
    };
    let group = r.group_id.0.as_str();
    let topics = topics.into_iter().filter(|(t, _)| !all || may_topic(t));
    let topics = topics.map(|(t, ps)| {
        let allowed = may_topic(&t);
        let parts = ps.iter().map(|f| {
            let p = OffsetFetchResponsePartition::default().with_partition_index(f.partition);
            let epoch = if version >= 5 { f.leader_epoch } else { -1 };
            fetched_partition!(p, allowed, unstable(group, &t, f.partition), f, epoch)
        });
        OffsetFetchResponseTopic::default()
            .with_name(topic_name(&t))
            .with_partitions(parts.collect())
    });
    OffsetFetchResponse::default().with_topics(topics.collect())
}

/// `OffsetCommitRequest.getErrorResponse`: every partition carries the error.
fn offset_commit_refused(r: &OffsetCommitRequest, code: i16) -> OffsetCommitResponse {
    let topics = r.topics.iter().map(|t| {
        let partitions = t.partitions.iter().map(|p| {
            OffsetCommitResponsePartition::default()
                .with_partition_index(p.partition_index)
                .with_error_code(code)
        });
        OffsetCommitResponseTopic::default()
            .with_name(t.name.clone())
            .with_partitions(partitions.collect())
    });
    OffsetCommitResponse::default().with_topics(topics.collect())
}

/// A refused OffsetFetch before v8: the error at the top from v2 on; v1 has
/// no top-level error, so each partition asked for carries it (as Kafka's
/// `OffsetFetchResponse` does for v0 and v1).
fn offset_fetch_refused(
    version: i16,
    e: ResponseError,
    asked: Option<Vec<(String, Vec<i32>)>>,
) -> OffsetFetchResponse {
    if version >= 2 {
        return OffsetFetchResponse::default().with_error_code(e.code());
    }
    let topics = asked.unwrap_or_default().into_iter().map(|(t, ps)| {
        let parts = ps.into_iter().map(|p| {
            OffsetFetchResponsePartition::default()
                .with_partition_index(p)
                .with_committed_offset(-1)
                .with_error_code(e.code())
        });
        OffsetFetchResponseTopic::default()
            .with_name(TopicName(StrBytes::from_string(t)))
            .with_partitions(parts.collect())
    });
    OffsetFetchResponse::default().with_topics(topics.collect())
}

/// InitProducerId: a new producer id at epoch 0 for an idempotent producer
/// (Kafka gives a new id even to one that asks to bump its epoch, when it
/// has no transactional id); ids are unique across restarts. With a
/// transactional id, the transaction coordinator answers.
fn init_producer_id(
    b: &Broker,
    session: &Session,
    version: i16,
    r: &InitProducerIdRequest,
) -> InitProducerIdResponse {
    let refused = |code: ResponseError| {
        InitProducerIdResponse::default()
            .with_error_code(code.code())
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
    };
    match &r.transactional_id {
        Some(id)
            if !acl::allowed(
                b,
                session,
                Operation::Write,
                ResourceType::TransactionalId,
                id,
            ) =>
        {
            return refused(ResponseError::TransactionalIdAuthorizationFailed);
        }
        // An idempotent producer: IDEMPOTENT_WRITE on the cluster, or
        // WRITE on some topic (KIP-679 made the second enough).
        None if !acl::allowed_quietly(
            b,
            session,
            Operation::IdempotentWrite,
            ResourceType::Cluster,
            acl::CLUSTER_NAME,
        ) && !acl::any_of_type(b, session, Operation::Write, ResourceType::Topic) =>
        {
            return refused(ResponseError::ClusterAuthorizationFailed);
        }
        _ => {}
    }
    if let Some(id) = &r.transactional_id {
        let id = id.0.as_str();
        let granted = b.txns.init_producer_id(
            id,
            r.transaction_timeout_ms,
            (r.producer_id.0, r.producer_epoch),
            commitfs_storage::now_ms(),
            &|| b.producer_ids.next(),
        );
        return match granted {
            Ok((pid, epoch)) => {
                info!("Kafka: transactional id {id} has producer id {pid}, epoch {epoch}");
                InitProducerIdResponse::default()
                    .with_producer_id(ProducerId(pid))
                    .with_producer_epoch(epoch)
            }
            Err(code) => {
                let code = crate::txn::api::downgrade_fenced(code, version, 4);
                warn!("Kafka: InitProducerId of transactional id {id} refused with {code:?}");
                refused(code)
            }
        };
    }
    match b.producer_ids.next() {
        Ok(id) => {
            info!("Kafka: gave producer id {id} (epoch 0) to an idempotent producer");
            InitProducerIdResponse::default()
                .with_producer_id(ProducerId(id))
                .with_producer_epoch(0)
        }
        Err(e) => refused(crate::error::code_for(
            Family::ProducerId,
            "InitProducerId",
            &e,
        )),
    }
}
