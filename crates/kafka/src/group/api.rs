//! The group APIs' requests into coordinator calls, and their answers into
//! responses at each version.

use std::collections::BTreeMap;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::GroupId;
use kafka_protocol::messages::delete_groups_request::DeleteGroupsRequest;
use kafka_protocol::messages::delete_groups_response::{
    DeletableGroupResult, DeleteGroupsResponse,
};
use kafka_protocol::messages::describe_groups_request::DescribeGroupsRequest;
use kafka_protocol::messages::describe_groups_response::{
    DescribeGroupsResponse, DescribedGroup, DescribedGroupMember,
};
use kafka_protocol::messages::heartbeat_request::HeartbeatRequest;
use kafka_protocol::messages::heartbeat_response::HeartbeatResponse;
use kafka_protocol::messages::join_group_request::JoinGroupRequest;
use kafka_protocol::messages::join_group_response::{JoinGroupResponse, JoinGroupResponseMember};
use kafka_protocol::messages::leave_group_request::LeaveGroupRequest;
use kafka_protocol::messages::leave_group_response::{LeaveGroupResponse, MemberResponse};
use kafka_protocol::messages::list_groups_request::ListGroupsRequest;
use kafka_protocol::messages::list_groups_response::{ListGroupsResponse, ListedGroup};
use kafka_protocol::messages::sync_group_request::SyncGroupRequest;
use kafka_protocol::messages::sync_group_response::SyncGroupResponse;
use kafka_protocol::protocol::StrBytes;

use super::coordinator::JoinArgs;
use super::membership::SyncArgs;
use crate::broker::Broker;

fn s(v: &StrBytes) -> String {
    v.as_str().to_string()
}

fn sb(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn code(e: Option<ResponseError>) -> i16 {
    e.map_or(0, |e| e.code())
}

pub fn join(b: &Broker, version: i16, client_id: &str, r: JoinGroupRequest) -> JoinGroupResponse {
    let a = JoinArgs {
        group: s(&r.group_id.0),
        member_id: s(&r.member_id),
        client_id: client_id.to_string(),
        client_host: super::peer(),
        session_timeout_ms: r.session_timeout_ms,
        // v0 has no rebalance timeout: Kafka takes the session timeout.
        rebalance_timeout_ms: if version >= 1 {
            r.rebalance_timeout_ms
        } else {
            r.session_timeout_ms
        },
        protocol_type: s(&r.protocol_type),
        protocols: r
            .protocols
            .iter()
            .map(|p| (s(&p.name), p.metadata.clone()))
            .collect(),
        require_known_member_id: version >= 4,
    };
    let j = b.groups.join(a, &|| b.stopping());
    let resp = JoinGroupResponse::default()
        .with_error_code(code(j.error))
        .with_generation_id(j.generation)
        .with_leader(sb(&j.leader))
        .with_member_id(sb(&j.member_id))
        .with_members(
            j.members
                .iter()
                .map(|(id, md)| {
                    JoinGroupResponseMember::default()
                        .with_member_id(sb(id))
                        .with_metadata(md.clone())
                })
                .collect(),
        );
    let name = j.protocol.as_deref().map(sb);
    if version >= 7 {
        resp.with_protocol_name(name)
            .with_protocol_type(j.protocol_type.as_deref().map(sb))
    } else {
        // Before v7 the protocol name is not nullable.
        resp.with_protocol_name(Some(name.unwrap_or_default()))
    }
}

/// `JoinGroupRequest.getErrorResponse`: no generation, no member, no leader.
pub fn join_refused(version: i16, code: i16) -> JoinGroupResponse {
    let resp = JoinGroupResponse::default()
        .with_error_code(code)
        .with_generation_id(-1)
        .with_leader(StrBytes::default())
        .with_member_id(StrBytes::default());
    if version >= 7 {
        resp.with_protocol_name(None)
    } else {
        resp.with_protocol_name(Some(StrBytes::default()))
    }
}

/// `SyncGroupRequest.getErrorResponse`: an empty assignment.
pub fn sync_refused(version: i16, code: i16) -> SyncGroupResponse {
    let resp = SyncGroupResponse::default()
        .with_error_code(code)
        .with_assignment(Bytes::new());
    if version >= 5 {
        resp.with_protocol_type(None).with_protocol_name(None)
    } else {
        resp
    }
}

pub fn sync(b: &Broker, version: i16, r: SyncGroupRequest) -> SyncGroupResponse {
    let assignments: BTreeMap<String, Bytes> = r
        .assignments
        .iter()
        .map(|a| (s(&a.member_id), a.assignment.clone()))
        .collect();
    let a = SyncArgs {
        group: s(&r.group_id.0),
        generation: r.generation_id,
        member_id: s(&r.member_id),
        protocol_type: r.protocol_type.as_ref().map(s),
        protocol_name: r.protocol_name.as_ref().map(s),
        assignments,
    };
    let synced = b.groups.sync(a, &|| b.stopping());
    let (err, assignment) = match synced.result {
        Ok(x) => (None, x),
        Err(e) => (Some(e), Bytes::new()),
    };
    let resp = SyncGroupResponse::default()
        .with_error_code(code(err))
        .with_assignment(assignment);
    if version >= 5 {
        resp.with_protocol_type(synced.protocol_type.as_deref().map(sb))
            .with_protocol_name(synced.protocol_name.as_deref().map(sb))
    } else {
        resp
    }
}

pub fn heartbeat(b: &Broker, r: HeartbeatRequest) -> HeartbeatResponse {
    let e = b
        .groups
        .heartbeat(r.group_id.0.as_str(), r.generation_id, r.member_id.as_str());
    HeartbeatResponse::default().with_error_code(code(e))
}

pub fn leave(b: &Broker, version: i16, r: LeaveGroupRequest) -> LeaveGroupResponse {
    let group = s(&r.group_id.0);
    if version < 3 {
        let e = b.groups.leave(&group, &[s(&r.member_id)]).map(|e| e[0]);
        return LeaveGroupResponse::default().with_error_code(code(e.unwrap_or_else(Some)));
    }
    let ids: Vec<String> = r.members.iter().map(|m| s(&m.member_id)).collect();
    let answers = match b.groups.leave(&group, &ids) {
        Ok(answers) => answers,
        Err(e) => return LeaveGroupResponse::default().with_error_code(e.code()),
    };
    let members = r
        .members
        .iter()
        .zip(answers)
        .map(|(m, e)| {
            MemberResponse::default()
                .with_member_id(m.member_id.clone())
                .with_group_instance_id(m.group_instance_id.clone())
                .with_error_code(code(e))
        })
        .collect();
    LeaveGroupResponse::default().with_members(members)
}

/// `may_describe`: whether a group is listed (Kafka's DESCRIBE filter).
pub fn list_groups(
    b: &Broker,
    version: i16,
    r: ListGroupsRequest,
    may_describe: &dyn Fn(&str) -> bool,
) -> ListGroupsResponse {
    let states: Vec<String> = r.states_filter.iter().map(s).collect();
    let types: Vec<String> = r.types_filter.iter().map(|t| s(t).to_lowercase()).collect();
    let groups = b
        .groups
        .list()
        .into_iter()
        .filter(|g| states.is_empty() || states.iter().any(|st| st.eq_ignore_ascii_case(g.state)))
        .filter(|_| types.is_empty() || types.iter().any(|t| t == "classic"))
        .filter(|g| may_describe(&g.group))
        .map(|g| {
            let l = ListedGroup::default()
                .with_group_id(GroupId(sb(&g.group)))
                .with_protocol_type(sb(&g.protocol_type));
            let l = if version >= 4 {
                l.with_group_state(sb(g.state))
            } else {
                l
            };
            if version >= 5 {
                l.with_group_type(sb("classic"))
            } else {
                l
            }
        })
        .collect();
    ListGroupsResponse::default().with_groups(groups)
}

/// A group `may_describe` refuses is GROUP_AUTHORIZATION_FAILED, its
/// state and protocol empty (`DescribeGroupsResponse.groupError`).
pub fn describe_groups(
    b: &Broker,
    r: DescribeGroupsRequest,
    may_describe: &dyn Fn(&str) -> bool,
) -> DescribeGroupsResponse {
    let groups = r
        .groups
        .iter()
        .map(|id| {
            let d = DescribedGroup::default().with_group_id(id.clone());
            if !may_describe(id.0.as_str()) {
                return d.with_error_code(ResponseError::GroupAuthorizationFailed.code());
            }
            match b.groups.describe(id.0.as_str()) {
                Err(e) => d.with_error_code(e.code()),
                // Kafka answers an unknown group as Dead, with no error.
                Ok(None) => d.with_group_state(sb("Dead")),
                Ok(Some(g)) => d
                    .with_group_state(sb(g.state))
                    .with_protocol_type(sb(&g.protocol_type))
                    .with_protocol_data(sb(&g.protocol))
                    .with_members(
                        g.members
                            .into_iter()
                            .map(|(m, client, host, md, asg)| {
                                DescribedGroupMember::default()
                                    .with_member_id(sb(&m))
                                    .with_client_id(sb(&client))
                                    .with_client_host(sb(&host))
                                    .with_member_metadata(md)
                                    .with_member_assignment(asg)
                            })
                            .collect(),
                    ),
            }
        })
        .collect();
    DescribeGroupsResponse::default().with_groups(groups)
}

/// A group `may_delete` refuses is GROUP_AUTHORIZATION_FAILED, untouched.
pub fn delete_groups(
    b: &Broker,
    r: DeleteGroupsRequest,
    may_delete: &dyn Fn(&str) -> bool,
) -> DeleteGroupsResponse {
    let (allowed, refused): (Vec<GroupId>, Vec<GroupId>) =
        (r.groups_names.into_iter()).partition(|g| may_delete(g.0.as_str()));
    let ids: Vec<String> = allowed.iter().map(|g| s(&g.0)).collect();
    let mut results = Vec::with_capacity(ids.len() + refused.len());
    for (g, e) in allowed.into_iter().zip(b.groups.delete_groups(&ids)) {
        let result = DeletableGroupResult::default().with_group_id(g);
        results.push(result.with_error_code(code(e)));
    }
    for g in refused {
        results.push(
            DeletableGroupResult::default()
                .with_group_id(g)
                .with_error_code(ResponseError::GroupAuthorizationFailed.code()),
        );
    }
    DeleteGroupsResponse::default().with_results(results)
}
