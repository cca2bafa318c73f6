//! The group coordinator: this daemon is the coordinator of every group.
//! Its state (groups and committed offsets) sits behind one lock; group
//! records are written to `__consumer_offsets` under it, so they land in
//! the order the state changed.
//!
//! JoinGroup and SyncGroup wait for the rebalance on the request handler
//! thread running them (the pool grows while every handler is busy), on a
//! condition variable raised at every
//! change, waking at least every [`TICK`] to run the timers (sessions, the
//! rebalance deadline, the initial delay). So the timers need no background
//! thread (only the expiry of offsets and empty groups has one, see
//! [`super::cleanup`]), FUSE and other connections never wait on a group,
//! and every wait is bounded by the member's rebalance or session timeout.

use std::collections::BTreeMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::ResponseError;
use log::{info, warn};
use parking_lot::{Condvar, Mutex, MutexGuard};

use super::load;
use super::offsets::{KeyValue, OFFSETS_TOPIC, OffsetsTopic};
use super::records::StoredGroup;
use super::state::{Group, Inner, Joined, Member, State, ms, now_ms};
use commitfs_storage::LogManager;

/// How often a waiting JoinGroup or SyncGroup runs the timers.
const TICK: Duration = Duration::from_millis(100);
/// Past the member's own timeout, how long a wait may last before it gives up.
const WAIT_MARGIN: Duration = Duration::from_secs(5);

pub use crate::config::GroupSettings;

pub struct GroupCoordinator {
    pub(super) inner: Mutex<Inner>,
    pub(super) changed: Condvar,
    pub(super) topic: OffsetsTopic,
    pub settings: GroupSettings,
    /// The partitions of `__consumer_offsets` that failed to load, with why.
    failed: BTreeMap<u32, String>,
    ids: AtomicU64,
}

/// A JoinGroup as the coordinator takes it.
pub struct JoinArgs {
    pub group: String,
    pub member_id: String,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    /// JoinGroup v4+: an unknown member gets an id first (KIP-394).
    pub require_known_member_id: bool,
}

fn failed(error: ResponseError, member_id: &str) -> Joined {
    Joined {
        error: Some(error),
        generation: -1,
        protocol_type: None,
        protocol: None,
        leader: String::new(),
        member_id: member_id.to_string(),
        members: Vec::new(),
    }
}

impl GroupCoordinator {
    /// The coordinator, with its groups and offsets read back from
    /// `__consumer_offsets` (see [`super::load`]).
    pub fn new(mgr: Arc<LogManager>, settings: GroupSettings) -> GroupCoordinator {
        let topic = OffsetsTopic::new(mgr, settings.offsets_partitions);
        let loaded = load::load(&topic, &settings);
        GroupCoordinator {
            inner: Mutex::new(loaded.inner),
            changed: Condvar::new(),
            topic,
            settings,
            failed: loaded.failed,
            ids: AtomicU64::new(0),
        }
    }

    /// NOT_COORDINATOR for a group whose partition of `__consumer_offsets`
    /// failed to load at start (Kafka's answer for a coordinator partition
    /// whose load failed): its state is unknown, and an answer such as "no
    /// committed offset" would send its consumers back to
    /// `auto.offset.reset`. Clients retry on NOT_COORDINATOR.
    pub(super) fn unavailable(&self, api: &str, group: &str) -> Option<ResponseError> {
        if self.failed.is_empty() {
            return None;
        }
        let p = self.topic.partition_index(group);
        let why = self.failed.get(&p)?;
        warn!(
            "Kafka: {api} of group {group} refused with NOT_COORDINATOR: {OFFSETS_TOPIC}-{p} \
             failed to load at start ({why})"
        );
        Some(ResponseError::NotCoordinator)
    }

    /// Kafka's member id: the client id, a dash, a random UUID.
    fn new_member_id(&self, client_id: &str) -> String {
        let n = self.ids.fetch_add(1, Ordering::Relaxed);
        let mut h = std::hash::RandomState::new().build_hasher();
        h.write_u64(n);
        let a = h.finish();
        h.write_u64(a);
        let b = h.finish();
        format!(
            "{client_id}-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xffff,
            b >> 48,
            b & 0xffff_ffff_ffff
        )
    }

    /// Writes a group's record; a failure is logged (the group goes on in
    /// memory; its committed offsets are written separately).
    pub(super) fn persist(&self, stored: &StoredGroup) {
        if self.topic.read_only() {
            return;
        }
        let record = match stored.to_record() {
            Ok((k, v)) => (k, Some(v)),
            Err(e) => {
                warn!("Group {}: cannot encode its record: {}", stored.group, e.0);
                return;
            }
        };
        if let Err(e) = self.topic.append(&stored.group, &[record]) {
            warn!(
                "Group {}: its record could not be written: {e}",
                stored.group
            );
        }
    }

    pub(super) fn append(&self, group: &str, records: &[KeyValue]) -> commitfs_storage::Result<()> {
        self.topic.append(group, records)
    }

    /// The partition of `__consumer_offsets` of a group's records, made
    /// with the topic if needed (AddOffsetsToTxn adds it to a transaction).
    pub fn offsets_partition(&self, group: &str) -> commitfs_storage::Result<u32> {
        self.topic.ensure_partition(group)
    }

    /// The partition of `__consumer_offsets` of a group's records.
    pub fn offsets_partition_index(&self, group: &str) -> u32 {
        self.topic.partition_index(group)
    }

    pub(super) fn read_only(&self) -> bool {
        self.topic.read_only()
    }

    /// Runs a group's timers, writing what they ask to write. Waiters are
    /// woken only when something changed (they tick too: waking them at
    /// every tick would have them wake each other without end).
    pub(super) fn tick(&self, inner: &mut Inner, group: &str, now: Instant) {
        let Some(g) = inner.groups.get_mut(group) else {
            return;
        };
        let before = (g.state, g.generation, g.members.len());
        let fx = g.tick(now, now_ms(), self.settings.initial_delay);
        let changed = before != (g.state, g.generation, g.members.len());
        if let Some(s) = fx.write {
            self.persist(&s);
        }
        if changed {
            self.changed.notify_all();
        }
    }

    /// Waits until `take` finds the member's answer, running timers, up to
    /// `deadline` (or until the listener stops).
    pub(super) fn wait_for<T>(
        &self,
        mut inner: MutexGuard<'_, Inner>,
        group: &str,
        member: &str,
        deadline: Instant,
        stopping: &dyn Fn() -> bool,
        take: impl Fn(&mut Member) -> Option<T>,
    ) -> Result<T, ResponseError> {
        loop {
            let now = Instant::now();
            self.tick(&mut inner, group, now);
            let m = inner
                .groups
                .get_mut(group)
                .and_then(|g| g.members.get_mut(member));
            match m {
                None => return Err(ResponseError::UnknownMemberId),
                Some(m) => {
                    if let Some(r) = take(m) {
                        return Ok(r);
                    }
                }
            }
            if stopping() {
                return Err(ResponseError::CoordinatorNotAvailable);
            }
            if now >= deadline {
                return Err(ResponseError::RebalanceInProgress);
            }
            self.changed.wait_for(&mut inner, TICK);
        }
    }

    fn check_join(&self, a: &JoinArgs) -> Option<ResponseError> {
        let session = ms(a.session_timeout_ms);
        if a.group.is_empty() {
            return Some(ResponseError::InvalidGroupId);
        }
        if let Some(e) = self.unavailable("JoinGroup", &a.group) {
            return Some(e);
        }
        if a.session_timeout_ms < 0
            || session < self.settings.min_session
            || session > self.settings.max_session
        {
            return Some(ResponseError::InvalidSessionTimeout);
        }
        None
    }

    /// JoinGroup: blocks until the rebalance completes for this member.
    pub fn join(&self, a: JoinArgs, stopping: &dyn Fn() -> bool) -> Joined {
        if let Some(e) = self.check_join(&a) {
            info!("JoinGroup of group {:?} refused: {e:?}", a.group);
            return failed(e, &a.member_id);
        }
        let mut inner = self.inner.lock();
        let now = Instant::now();
        self.tick(&mut inner, &a.group, now);
        if !a.member_id.is_empty() && !inner.groups.contains_key(&a.group) {
            return failed(ResponseError::UnknownMemberId, &a.member_id);
        }
        let g = inner
            .groups
            .entry(a.group.clone())
            .or_insert_with(|| Group::new(&a.group, now_ms()));
        if !g.accepts(&a.member_id, self.settings.max_size) {
            info!(
                "JoinGroup of group {}: refused with GROUP_MAX_SIZE_REACHED: group.max.size is {}",
                a.group, self.settings.max_size
            );
            g.remove_member(&a.member_id);
            g.pending.remove(&a.member_id);
            self.changed.notify_all();
            return failed(ResponseError::GroupMaxSizeReached, "");
        }
        if !g.supports(&a.protocol_type, &a.protocols) {
            info!(
                "JoinGroup of group {}: protocol type {:?} or protocols fit no member's",
                a.group, a.protocol_type
            );
            return failed(ResponseError::InconsistentGroupProtocol, &a.member_id);
        }
        let member_id = if a.member_id.is_empty() {
            let id = self.new_member_id(&a.client_id);
            if a.require_known_member_id {
                g.pending.insert(id.clone(), now + ms(a.session_timeout_ms));
                return failed(ResponseError::MemberIdRequired, &id);
            }
            id
        } else {
            a.member_id.clone()
        };
        let delay = self.settings.initial_delay;
        let (now_ms, rebalance) = (now_ms(), ms(a.rebalance_timeout_ms));
        let known = g.members.contains_key(&member_id);
        if a.member_id.is_empty() || g.pending.remove(&member_id).is_some() {
            let m = new_member(&a, &member_id, now);
            g.add_member(m, &a.protocol_type, now, now_ms, delay);
        } else if !known {
            info!("JoinGroup of group {}: unknown member {member_id}", a.group);
            return failed(ResponseError::UnknownMemberId, &member_id);
        } else if let Some(done) = rejoin(g, &a, &member_id, now, now_ms, delay, rebalance) {
            return done;
        }
        self.changed.notify_all();
        let deadline = now + rebalance.max(self.settings.initial_delay) + WAIT_MARGIN;
        let r = self.wait_for(inner, &a.group, &member_id, deadline, stopping, |m| {
            m.join_result.take()
        });
        r.unwrap_or_else(|e| failed(e, &member_id))
    }
}

fn new_member(a: &JoinArgs, id: &str, now: Instant) -> Member {
    Member {
        id: id.to_string(),
        client_id: a.client_id.clone(),
        client_host: a.client_host.clone(),
        session_timeout: ms(a.session_timeout_ms),
        rebalance_timeout: ms(a.rebalance_timeout_ms),
        protocols: a.protocols.clone(),
        assignment: Bytes::new(),
        awaiting_join: true,
        awaiting_sync: false,
        join_result: None,
        sync_result: None,
        last_heartbeat: now,
        seq: 0,
    }
}

/// A known member joining again. `Some`: the answer at once (an unchanged
/// follower of a settled generation gets that generation back, as Kafka
/// does); `None`: wait for the rebalance.
fn rejoin(
    g: &mut Group,
    a: &JoinArgs,
    member_id: &str,
    now: Instant,
    now_ms: i64,
    delay: Duration,
    rebalance: Duration,
) -> Option<Joined> {
    let leader = g.leader.as_deref() == Some(member_id);
    let m = g.members.get_mut(member_id)?;
    let same = m.protocols == a.protocols;
    m.last_heartbeat = now;
    match g.state {
        State::Stable | State::CompletingRebalance if same && !leader => {
            return Some(g.current_join(member_id));
        }
        State::CompletingRebalance if same => return Some(g.current_join(member_id)),
        _ => {}
    }
    m.protocols = a.protocols.clone();
    m.session_timeout = ms(a.session_timeout_ms);
    m.rebalance_timeout = rebalance;
    m.awaiting_join = true;
    m.join_result = None;
    g.prepare_rebalance(now, now_ms, delay, rebalance, "a member rejoined");
    None
}
