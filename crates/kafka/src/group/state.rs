//! One classic consumer group, as Kafka's `GroupMetadata` and the classic
//! `GroupCoordinator` keep it: members, generations, the state machine
//! (Empty, PreparingRebalance, CompletingRebalance, Stable; a group is
//! dropped rather than made Dead), protocol selection. Pure: time comes in
//! as an argument, and what must be written or answered goes out as values.
//!
//! A rebalance completes when every member has rejoined, or when the
//! longest member's rebalance timeout passes (those that did not rejoin are
//! removed). A group rebalancing from Empty waits
//! `group.initial.rebalance.delay.ms` first, extended by each new member up
//! to the rebalance timeout (Kafka's `InitialDelayedJoin`), so consumers
//! started together share the first generation.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::ResponseError;
use log::info;

use super::records::{StoredGroup, StoredMember};
use commitfs_record::internal::OffsetCommit;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
}

impl State {
    /// The name DescribeGroups and ListGroups give.
    pub fn name(self) -> &'static str {
        match self {
            State::Empty => "Empty",
            State::PreparingRebalance => "PreparingRebalance",
            State::CompletingRebalance => "CompletingRebalance",
            State::Stable => "Stable",
        }
    }
}

/// A JoinGroup answer, waiting for its member.
#[derive(Clone, Debug)]
pub struct Joined {
    /// `None`: joined.
    pub error: Option<ResponseError>,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub leader: String,
    pub member_id: String,
    /// The members with their metadata: for the leader only.
    pub members: Vec<(String, Bytes)>,
}

#[derive(Clone, Debug)]
pub struct Member {
    pub id: String,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout: Duration,
    pub rebalance_timeout: Duration,
    pub protocols: Vec<(String, Bytes)>,
    pub assignment: Bytes,
    pub awaiting_join: bool,
    pub awaiting_sync: bool,
    pub join_result: Option<Joined>,
    pub sync_result: Option<Result<Bytes, ResponseError>>,
    pub last_heartbeat: Instant,
    /// Join order: the leader of a new group is the first member.
    pub seq: u64,
}

impl Member {
    pub fn metadata(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(n, _)| n == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }
}

pub struct Group {
    pub id: String,
    pub state: State,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub members: BTreeMap<String, Member>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, not yet joined, with
    /// when they expire (the session timeout asked for, as Kafka does).
    pub pending: BTreeMap<String, Instant>,
    pub rebalance_deadline: Option<Instant>,
    /// The initial delay of a rebalance from Empty: (until, latest).
    pub initial_delay: Option<(Instant, Instant)>,
    /// When the group entered its state (Kafka's `currentStateTimestamp`);
    /// -1 when unknown (a record older than value version 2).
    pub state_timestamp: i64,
    next_seq: u64,
}

/// What a transition asks of the caller: a group record to write.
#[must_use]
#[derive(Debug, Default)]
pub struct Effects {
    pub write: Option<StoredGroup>,
}

impl Group {
    pub fn new(id: &str, now_ms: i64) -> Group {
        Group {
            id: id.to_string(),
            state: State::Empty,
            generation: 0,
            protocol_type: None,
            protocol: None,
            leader: None,
            members: BTreeMap::new(),
            pending: BTreeMap::new(),
            rebalance_deadline: None,
            initial_delay: None,
            state_timestamp: now_ms,
            next_seq: 0,
        }
    }

    /// A group read back from its record: Stable with its members (their
    /// session timers start now), or Empty without.
    pub fn restore(s: &StoredGroup, now: Instant) -> Group {
        let mut g = Group::new(&s.group, s.state_timestamp);
        g.generation = s.generation;
        g.protocol_type = Some(s.protocol_type.clone()).filter(|t| !t.is_empty());
        g.protocol = s.protocol.clone();
        g.leader = s.leader.clone();
        for m in &s.members {
            let member = Member {
                id: m.member_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                session_timeout: ms(m.session_timeout_ms),
                rebalance_timeout: ms(m.rebalance_timeout_ms),
                protocols: vec![(
                    g.protocol.clone().unwrap_or_default(),
                    Bytes::from(m.subscription.clone()),
                )],
                assignment: Bytes::from(m.assignment.clone()),
                awaiting_join: false,
                awaiting_sync: false,
                join_result: None,
                sync_result: None,
                last_heartbeat: now,
                seq: g.next_seq,
            };
            g.next_seq += 1;
            g.members.insert(member.id.clone(), member);
        }
        if !g.members.is_empty() {
            g.state = State::Stable;
        }
        g
    }

    /// The record of the group as it stands.
    pub fn stored(&self) -> StoredGroup {
        let protocol = self.protocol.clone().unwrap_or_default();
        StoredGroup {
            group: self.id.clone(),
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation: self.generation,
            protocol: self.protocol.clone(),
            leader: self.leader.clone(),
            state_timestamp: self.state_timestamp,
            members: self
                .members
                .values()
                .map(|m| StoredMember {
                    member_id: m.id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout.as_millis() as i32,
                    session_timeout_ms: m.session_timeout.as_millis() as i32,
                    subscription: m.metadata(&protocol).to_vec(),
                    assignment: m.assignment.to_vec(),
                })
                .collect(),
        }
    }

    fn set_state(&mut self, state: State, now_ms: i64) {
        self.state = state;
        self.state_timestamp = now_ms;
    }

    /// The protocols every member supports (Kafka's `candidateProtocols`).
    fn candidates(&self) -> BTreeSet<String> {
        let mut it = self.members.values();
        let Some(first) = it.next() else {
            return BTreeSet::new();
        };
        let mut set: BTreeSet<String> = first.protocols.iter().map(|(n, _)| n.clone()).collect();
        for m in it {
            set.retain(|n| m.protocols.iter().any(|(p, _)| p == n));
        }
        set
    }

    /// Whether a joining member's protocols fit the group (`supportsProtocols`).
    pub fn supports(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if self.members.is_empty() {
            return !protocol_type.is_empty() && !protocols.is_empty();
        }
        let candidates = self.candidates();
        self.protocol_type.as_deref() == Some(protocol_type)
            && protocols.iter().any(|(n, _)| candidates.contains(n))
    }

    /// Whether a JoinGroup of `member_id` (empty: a new member) fits
    /// `group.max.size` (Kafka's `acceptJoiningMember`). While rebalancing,
    /// the members that rejoined count, not the group's size: the size may
    /// be over a lowered maximum, and counting rejoins sheds the last ones
    /// to rejoin.
    pub fn accepts(&self, member_id: &str, max: u32) -> bool {
        let max = max as usize;
        let member = self.members.get(member_id);
        match self.state {
            State::Empty => true,
            State::PreparingRebalance => {
                member.is_some_and(|m| m.awaiting_join)
                    || self.members.values().filter(|m| m.awaiting_join).count() < max
            }
            State::CompletingRebalance | State::Stable => {
                member.is_some() || self.members.len() < max
            }
        }
    }

    /// Kafka's `selectProtocol`: each member votes for its first choice
    /// among the candidates; the most votes wins (ties: the first name).
    fn select_protocol(&self) -> Option<String> {
        let candidates = self.candidates();
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some((n, _)) = m.protocols.iter().find(|(n, _)| candidates.contains(n)) {
                *votes.entry(n.as_str()).or_default() += 1;
            }
        }
        let best = votes.values().copied().max()?;
        votes
            .into_iter()
            .find(|(_, v)| *v == best)
            .map(|(n, _)| n.to_string())
    }

    /// Adds a member (awaiting join) and starts or joins a rebalance.
    pub fn add_member(
        &mut self,
        mut m: Member,
        protocol_type: &str,
        now: Instant,
        now_ms: i64,
        delay: Duration,
    ) {
        if self.members.is_empty() {
            self.protocol_type = Some(protocol_type.to_string());
        }
        m.seq = self.next_seq;
        self.next_seq += 1;
        m.awaiting_join = true;
        let rebalance = m.rebalance_timeout;
        self.members.insert(m.id.clone(), m);
        if let Some((until, latest)) = self.initial_delay {
            // Kafka's InitialDelayedJoin: each new member waits the delay again,
            // up to the rebalance timeout.
            self.initial_delay = Some(((now + delay).min(latest).max(until), latest));
        }
        self.prepare_rebalance(now, now_ms, delay, rebalance, "a new member joined");
    }

    /// Starts a rebalance (from Stable, CompletingRebalance or Empty); in
    /// PreparingRebalance it only stretches the deadline.
    pub fn prepare_rebalance(
        &mut self,
        now: Instant,
        now_ms: i64,
        delay: Duration,
        at_least: Duration,
        reason: &str,
    ) {
        let timeout = self
            .members
            .values()
            .map(|m| m.rebalance_timeout)
            .max()
            .unwrap_or(at_least)
            .max(at_least);
        if self.state == State::PreparingRebalance {
            return;
        }
        if self.state == State::CompletingRebalance {
            for m in self.members.values_mut().filter(|m| m.awaiting_sync) {
                m.sync_result = Some(Err(ResponseError::RebalanceInProgress));
                m.awaiting_sync = false;
            }
        }
        if self.state == State::Empty && !delay.is_zero() {
            self.initial_delay = Some(((now + delay).min(now + timeout), now + timeout));
        }
        self.rebalance_deadline = Some(now + timeout);
        info!(
            "Preparing to rebalance group {} in state PreparingRebalance with old generation {} (reason: {reason})",
            self.id, self.generation
        );
        self.set_state(State::PreparingRebalance, now_ms);
    }

    /// Removes a member: its waiting join or sync hears UNKNOWN_MEMBER_ID.
    pub fn remove_member(&mut self, id: &str) -> Option<Member> {
        let m = self.members.remove(id)?;
        if self.leader.as_deref() == Some(id) {
            self.leader = None;
        }
        Some(m)
    }

    /// Timers: expired sessions, and a rebalance whose members have all
    /// rejoined or whose time is up. Called at every request and by waiters.
    pub fn tick(&mut self, now: Instant, now_ms: i64, delay: Duration) -> Effects {
        let mut fx = Effects::default();
        self.pending.retain(|_, until| now < *until);
        if self.state != State::Empty {
            let expired: Vec<String> = self
                .members
                .values()
                .filter(|m| !m.awaiting_join && now >= m.last_heartbeat + m.session_timeout)
                .map(|m| m.id.clone())
                .collect();
            for id in &expired {
                info!(
                    "Member {id} in group {} has failed, removing it from the group",
                    self.id
                );
                self.remove_member(id);
            }
            // In PreparingRebalance a member that stopped heartbeating
            // without rejoining goes too, so the rebalance need not wait for
            // its rebalance timeout.
            if !expired.is_empty() && self.state != State::PreparingRebalance {
                self.prepare_rebalance(
                    now,
                    now_ms,
                    delay,
                    Duration::ZERO,
                    "a member's session expired",
                );
            }
        }
        if self.state == State::PreparingRebalance {
            let all_joined =
                self.members.values().all(|m| m.awaiting_join) && self.pending.is_empty();
            let delayed = self.initial_delay.is_some_and(|(until, _)| now < until);
            let timed_out = self.rebalance_deadline.is_some_and(|d| now >= d);
            if (all_joined && !delayed) || timed_out {
                fx = self.complete_join(now, now_ms);
            }
        }
        fx
    }

    /// Kafka's `onCompleteJoin`: a new generation for the members that
    /// rejoined; the others are removed.
    fn complete_join(&mut self, now: Instant, now_ms: i64) -> Effects {
        let gone: Vec<String> = self
            .members
            .values()
            .filter(|m| !m.awaiting_join)
            .map(|m| m.id.clone())
            .collect();
        for id in gone {
            info!(
                "Member {id} of group {} did not rejoin in time; removing it",
                self.id
            );
            self.remove_member(&id);
        }
        self.pending.clear();
        self.initial_delay = None;
        self.rebalance_deadline = None;
        self.generation += 1;
        if self.members.is_empty() {
            self.protocol = None;
            self.leader = None;
            self.set_state(State::Empty, now_ms);
            info!(
                "Group {} with generation {} is now empty",
                self.id, self.generation
            );
            return Effects {
                write: Some(self.stored()),
            };
        }
        self.protocol = self.select_protocol();
        let leader = match &self.leader {
            Some(l) if self.members.contains_key(l) => l.clone(),
            _ => self
                .members
                .values()
                .min_by_key(|m| m.seq)
                .map(|m| m.id.clone())
                .unwrap_or_default(),
        };
        self.leader = Some(leader.clone());
        self.set_state(State::CompletingRebalance, now_ms);
        let protocol = self.protocol.clone().unwrap_or_default();
        let all: Vec<(String, Bytes)> = self
            .members
            .values()
            .map(|m| (m.id.clone(), m.metadata(&protocol)))
            .collect();
        let generation = self.generation;
        for m in self.members.values_mut() {
            m.awaiting_join = false;
            m.last_heartbeat = now;
            m.join_result = Some(Joined {
                error: None,
                generation,
                protocol_type: self.protocol_type.clone(),
                protocol: self.protocol.clone(),
                leader: leader.clone(),
                member_id: m.id.clone(),
                members: if m.id == leader {
                    all.clone()
                } else {
                    Vec::new()
                },
            });
        }
        info!(
            "Stabilized group {} generation {} with {} members (protocol {protocol})",
            self.id,
            generation,
            self.members.len()
        );
        Effects::default()
    }

    /// The leader's SyncGroup: every member's assignment (missing ones
    /// empty); the group becomes Stable and waiting members get theirs.
    pub fn complete_sync(
        &mut self,
        assignments: &BTreeMap<String, Bytes>,
        now_ms: i64,
    ) -> StoredGroup {
        for m in self.members.values_mut() {
            m.assignment = assignments.get(&m.id).cloned().unwrap_or_default();
        }
        self.set_state(State::Stable, now_ms);
        for m in self.members.values_mut() {
            if m.awaiting_sync {
                m.sync_result = Some(Ok(m.assignment.clone()));
                m.awaiting_sync = false;
            }
        }
        self.stored()
    }

    /// The current generation as a member sees it, for a member that
    /// rejoins a Stable or CompletingRebalance group unchanged.
    pub fn current_join(&self, member_id: &str) -> Joined {
        let protocol = self.protocol.clone().unwrap_or_default();
        let leader = self.leader.clone().unwrap_or_default();
        Joined {
            error: None,
            generation: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol: self.protocol.clone(),
            leader: leader.clone(),
            member_id: member_id.to_string(),
            members: if member_id == leader {
                self.members
                    .values()
                    .map(|m| (m.id.clone(), m.metadata(&protocol)))
                    .collect()
            } else {
                Vec::new()
            },
        }
    }
}

pub(super) type Offsets = BTreeMap<(String, i32), OffsetCommit>;

/// Every group and its committed offsets: what the coordinator's lock
/// guards, and what loading `__consumer_offsets` rebuilds, so it lives
/// below both.
#[derive(Default)]
pub(super) struct Inner {
    pub groups: BTreeMap<String, Group>,
    pub offsets: BTreeMap<String, Offsets>,
    /// Each producer's TxnOffsetCommits, in order, until its transaction
    /// ends (Kafka's `pendingTransactionalOffsetCommits`): invisible to
    /// OffsetFetch, applied at its COMMIT marker, dropped at its ABORT.
    pub pending_txn: BTreeMap<i64, Vec<OffsetCommit>>,
}

pub(super) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

pub fn ms(v: i32) -> Duration {
    Duration::from_millis(v.max(0) as u64)
}
