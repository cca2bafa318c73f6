//! SyncGroup, Heartbeat and LeaveGroup, with Kafka's classic coordinator's
//! answers in each state.

use std::collections::BTreeMap;
use std::time::Instant;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use log::info;

use super::coordinator::GroupCoordinator;
use super::state::State;
use super::state::now_ms;

/// A SyncGroup as the coordinator takes it.
pub struct SyncArgs {
    pub group: String,
    pub generation: i32,
    pub member_id: String,
    /// v5: must match the group's, when given.
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignments: BTreeMap<String, Bytes>,
}

/// What SyncGroup answers: the member's assignment, and the group's
/// protocol type and name (v5).
pub struct Synced {
    pub result: Result<Bytes, ResponseError>,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
}

impl GroupCoordinator {
    /// SyncGroup: the leader hands out the assignments; everyone waits for
    /// them (bounded by the session timeout: a leader that never syncs
    /// expires and its group rebalances).
    pub fn sync(&self, a: SyncArgs, stopping: &dyn Fn() -> bool) -> Synced {
        if let Some(e) = self.unavailable("SyncGroup", &a.group) {
            return Synced {
                result: Err(e),
                protocol_type: None,
                protocol_name: None,
            };
        }
        let mut inner = self.inner.lock();
        let now = Instant::now();
        self.tick(&mut inner, &a.group, now);
        let (pt, pn) = match inner.groups.get(&a.group) {
            Some(g) => (g.protocol_type.clone(), g.protocol.clone()),
            None => (None, None),
        };
        let answer = |result| Synced {
            result,
            protocol_type: pt.clone(),
            protocol_name: pn.clone(),
        };
        let Some(g) = inner.groups.get_mut(&a.group) else {
            return answer(Err(ResponseError::UnknownMemberId));
        };
        let leader = g.leader.as_deref() == Some(a.member_id.as_str());
        let generation = g.generation;
        let Some(m) = g.members.get_mut(&a.member_id) else {
            return answer(Err(ResponseError::UnknownMemberId));
        };
        if a.generation != generation {
            return answer(Err(ResponseError::IllegalGeneration));
        }
        let mismatch =
            |given: &Option<String>, ours: &Option<String>| given.is_some() && given != ours;
        if mismatch(&a.protocol_type, &pt) || mismatch(&a.protocol_name, &pn) {
            return answer(Err(ResponseError::InconsistentGroupProtocol));
        }
        m.last_heartbeat = now;
        match g.state {
            State::Empty => return answer(Err(ResponseError::UnknownMemberId)),
            State::PreparingRebalance => return answer(Err(ResponseError::RebalanceInProgress)),
            State::Stable => return answer(Ok(m.assignment.clone())),
            State::CompletingRebalance => {}
        }
        m.awaiting_sync = true;
        m.sync_result = None;
        let session = m.session_timeout;
        if leader {
            let stored = g.complete_sync(&a.assignments, now_ms());
            info!(
                "Assignment received from leader {} for group {} for generation {generation}. The group has {} members",
                a.member_id,
                a.group,
                stored.members.len()
            );
            self.persist(&stored);
        }
        self.changed.notify_all();
        let deadline = now + session + std::time::Duration::from_secs(5);
        let group = a.group.clone();
        let result = self.wait_for_sync(inner, &group, &a.member_id, deadline, stopping);
        answer(result)
    }

    fn wait_for_sync(
        &self,
        inner: parking_lot::MutexGuard<'_, super::state::Inner>,
        group: &str,
        member: &str,
        deadline: Instant,
        stopping: &dyn Fn() -> bool,
    ) -> Result<Bytes, ResponseError> {
        self.wait_for(inner, group, member, deadline, stopping, |m| {
            m.sync_result.take()
        })?
    }

    /// Heartbeat: the member's session goes on; the answer says whether a
    /// rebalance is under way.
    pub fn heartbeat(
        &self,
        group: &str,
        generation: i32,
        member_id: &str,
    ) -> Option<ResponseError> {
        if let Some(e) = self.unavailable("Heartbeat", group) {
            return Some(e);
        }
        let mut inner = self.inner.lock();
        let now = Instant::now();
        self.tick(&mut inner, group, now);
        let Some(g) = inner.groups.get_mut(group) else {
            return Some(ResponseError::UnknownMemberId);
        };
        if g.state == State::Empty {
            return Some(ResponseError::UnknownMemberId);
        }
        let current = g.generation;
        let state = g.state;
        let Some(m) = g.members.get_mut(member_id) else {
            return Some(ResponseError::UnknownMemberId);
        };
        if generation != current {
            return Some(ResponseError::IllegalGeneration);
        }
        m.last_heartbeat = now;
        match state {
            State::PreparingRebalance => Some(ResponseError::RebalanceInProgress),
            _ => None,
        }
    }

    /// LeaveGroup: each member's answer (`None`: it left), or the group's
    /// error. Leaving starts a rebalance; the last member leaving empties
    /// the group.
    pub fn leave(
        &self,
        group: &str,
        members: &[String],
    ) -> Result<Vec<Option<ResponseError>>, ResponseError> {
        if let Some(e) = self.unavailable("LeaveGroup", group) {
            return Err(e);
        }
        let mut inner = self.inner.lock();
        let now = Instant::now();
        self.tick(&mut inner, group, now);
        let Some(g) = inner.groups.get_mut(group) else {
            return Ok(vec![Some(ResponseError::UnknownMemberId); members.len()]);
        };
        let mut out = Vec::with_capacity(members.len());
        let mut left = false;
        for id in members {
            if g.pending.remove(id).is_some() {
                out.push(None);
            } else if g.remove_member(id).is_some() {
                info!("Member {id} has left group {group} through explicit LeaveGroup");
                left = true;
                out.push(None);
            } else {
                out.push(Some(ResponseError::UnknownMemberId));
            }
        }
        if left {
            let delay = self.settings.initial_delay;
            g.prepare_rebalance(
                now,
                now_ms(),
                delay,
                std::time::Duration::ZERO,
                "a member left",
            );
            self.tick(&mut inner, group, now);
        }
        self.changed.notify_all();
        Ok(out)
    }
}
