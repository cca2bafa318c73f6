//! OffsetCommit and OffsetFetch (committed offsets, durable in
//! `__consumer_offsets` before they are acknowledged), ListGroups and
//! DescribeGroups.

use std::time::Instant;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use log::{info, warn};

use super::coordinator::GroupCoordinator;
use super::offsets::KeyValue;
use super::state::now_ms;
use super::state::{Group, State};
use crate::error::{Family, code_for};
use commitfs_record::internal::OffsetCommit;

/// One partition of an OffsetCommit.
pub struct CommitArgs {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
}

impl CommitArgs {
    /// A partition of an OffsetCommit or TxnOffsetCommit request; the
    /// leader epoch only from the version that carries it on.
    pub fn new(
        topic: &str,
        partition: i32,
        offset: i64,
        leader_epoch: Option<i32>,
        metadata: Option<&str>,
    ) -> CommitArgs {
        CommitArgs {
            topic: topic.to_string(),
            partition,
            offset,
            leader_epoch: leader_epoch.unwrap_or(-1),
            metadata: metadata.unwrap_or("").to_string(),
        }
    }
}

/// One committed offset as OffsetFetch answers it.
pub struct Fetched {
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
}

/// A group as ListGroups and DescribeGroups show it.
pub struct Described {
    pub group: String,
    pub state: &'static str,
    pub protocol_type: String,
    pub protocol: String,
    /// (member id, client id, client host, metadata, assignment).
    pub members: Vec<(String, String, String, Bytes, Bytes)>,
}

impl GroupCoordinator {
    /// Who may commit for the group (Kafka's classic `doCommitOffsets`):
    /// `None` when the commit may go ahead.
    fn commit_refusal(&self, g: &Group, generation: i32, member_id: &str) -> Option<ResponseError> {
        if generation < 0 && g.state == State::Empty {
            return None; // a group that keeps offsets without membership
        }
        if g.state == State::CompletingRebalance {
            return Some(ResponseError::RebalanceInProgress);
        }
        if !g.members.contains_key(member_id) {
            return Some(ResponseError::UnknownMemberId);
        }
        if generation != g.generation {
            return Some(ResponseError::IllegalGeneration);
        }
        None
    }

    /// What refuses a commit of `group` before its group is looked at: an
    /// empty group id, a partition of `__consumer_offsets` that failed to
    /// load, a data directory served read-only.
    fn refused_before_commit(&self, api: &str, group: &str) -> Option<ResponseError> {
        if group.is_empty() {
            return Some(ResponseError::InvalidGroupId);
        }
        if let Some(e) = self.unavailable(api, group) {
            return Some(e);
        }
        if self.read_only() {
            warn!("Kafka: {api} of group {group} refused: the data directory is served read-only");
            return Some(ResponseError::GroupAuthorizationFailed);
        }
        None
    }

    /// OffsetCommit: each partition's answer, in order (`None`: committed).
    /// The records are written, as one batch, before anything is answered.
    pub fn commit(
        &self,
        group: &str,
        generation: i32,
        member_id: &str,
        retention_ms: i64,
        parts: Vec<CommitArgs>,
        exists: &dyn Fn(&str, i32) -> bool,
    ) -> Vec<Option<ResponseError>> {
        let all = |e: ResponseError| vec![Some(e); parts.len()];
        if let Some(e) = self.refused_before_commit("OffsetCommit", group) {
            return all(e);
        }
        let mut inner = self.inner.lock();
        let now = Instant::now();
        self.tick(&mut inner, group, now);
        if !inner.groups.contains_key(group) {
            if generation >= 0 {
                return all(ResponseError::IllegalGeneration);
            }
            inner
                .groups
                .insert(group.to_string(), Group::new(group, now_ms()));
        }
        let g = inner.groups.get_mut(group).expect("just made");
        if let Some(e) = self.commit_refusal(g, generation, member_id) {
            return all(e);
        }
        if let Some(m) = g.members.get_mut(member_id) {
            m.last_heartbeat = now;
        }
        let Prepared {
            mut out,
            commits,
            records,
        } = prepare(
            group,
            parts,
            retention_ms,
            self.settings.metadata_max_bytes,
            exists,
        );
        if let Err(e) = self.append(group, &records) {
            let what = format!("OffsetCommit of group {group}");
            let code = code_for(Family::GroupCommit, &what, &e);
            for (i, _) in &commits {
                out[*i] = Some(code);
            }
            return out;
        }
        let offsets = inner.offsets.entry(group.to_string()).or_default();
        for (_, c) in commits {
            offsets.insert((c.topic.clone(), c.partition), c);
        }
        out
    }

    /// OffsetFetch: the committed offsets of the partitions asked for
    /// (`None`: every partition the group committed), -1 where none; or
    /// the group's error.
    pub fn fetch(
        &self,
        group: &str,
        wanted: Option<Vec<(String, Vec<i32>)>>,
    ) -> Result<Vec<(String, Vec<Fetched>)>, ResponseError> {
        if let Some(e) = self.unavailable("OffsetFetch", group) {
            return Err(e);
        }
        let inner = self.inner.lock();
        let offsets = inner.offsets.get(group);
        let found = |topic: &str, partition: i32| {
            let c = offsets.and_then(|o| o.get(&(topic.to_string(), partition)));
            Fetched {
                partition,
                offset: c.map_or(-1, |c| c.offset),
                leader_epoch: c.map_or(-1, |c| c.leader_epoch),
                metadata: c.map_or(String::new(), |c| c.metadata.clone()),
            }
        };
        Ok(match wanted {
            Some(topics) => topics
                .into_iter()
                .map(|(t, ps)| {
                    let parts = ps.iter().map(|p| found(&t, *p)).collect();
                    (t, parts)
                })
                .collect(),
            None => {
                let mut out: Vec<(String, Vec<Fetched>)> = Vec::new();
                for (t, p) in offsets
                    .map(|o| o.keys().cloned().collect::<Vec<_>>())
                    .unwrap_or_default()
                {
                    let f = found(&t, p);
                    match out.last_mut() {
                        Some((last, parts)) if *last == t => parts.push(f),
                        _ => out.push((t, vec![f])),
                    }
                }
                out
            }
        })
    }

    /// The group's committed offsets as they were committed (the tree shows
    /// their times); `None` where the group has none.
    pub fn committed(&self, group: &str) -> Result<Vec<OffsetCommit>, ResponseError> {
        if let Some(e) = self.unavailable("OffsetFetch", group) {
            return Err(e);
        }
        let inner = self.inner.lock();
        Ok(inner
            .offsets
            .get(group)
            .map(|o| o.values().cloned().collect())
            .unwrap_or_default())
    }

    /// Groups that have committed offsets.
    pub fn groups_with_offsets(&self) -> Vec<String> {
        let inner = self.inner.lock();
        inner
            .offsets
            .iter()
            .filter(|(_, o)| !o.is_empty())
            .map(|(g, _)| g.clone())
            .collect()
    }

    /// TxnOffsetCommit (Kafka's `handleTxnCommitOffsets` and its
    /// `validateOffsetCommit` for a transaction): each partition's answer,
    /// in order. The records are written as one batch of the producer's
    /// transaction, and count only when it commits; the caller has checked
    /// that the group's partition of `__consumer_offsets` is in it. A
    /// producer that gives no member id nor generation (KIP-447's fields
    /// absent or unset) commits for the group whatever its state.
    pub fn txn_commit(
        &self,
        group: &str,
        producer: (i64, i16),
        generation: i32,
        member_id: &str,
        parts: Vec<CommitArgs>,
        exists: &dyn Fn(&str, i32) -> bool,
    ) -> Vec<Option<ResponseError>> {
        let all = |e: ResponseError| vec![Some(e); parts.len()];
        if let Some(e) = self.refused_before_commit("TxnOffsetCommit", group) {
            return all(e);
        }
        let mut inner = self.inner.lock();
        let now = Instant::now();
        self.tick(&mut inner, group, now);
        if !inner.groups.contains_key(group) {
            inner
                .groups
                .insert(group.to_string(), Group::new(group, now_ms()));
        }
        let g = inner.groups.get(group).expect("just made");
        if generation >= 0 || !member_id.is_empty() {
            if !g.members.contains_key(member_id) {
                return all(ResponseError::UnknownMemberId);
            }
            if generation != g.generation {
                return all(ResponseError::IllegalGeneration);
            }
        }
        let Prepared {
            mut out,
            commits,
            records,
        } = prepare(group, parts, -1, self.settings.metadata_max_bytes, exists);
        if let Err(e) = self.topic.append_transactional(group, &records, producer) {
            let what = format!("TxnOffsetCommit of group {group}");
            let code = code_for(Family::GroupCommit, &what, &e);
            for (i, _) in &commits {
                out[*i] = Some(code);
            }
            return out;
        }
        let pending = inner.pending_txn.entry(producer.0).or_default();
        pending.extend(commits.into_iter().map(|(_, c)| c));
        out
    }

    /// The end of producer `producer_id`'s transaction, once its marker is
    /// in `__consumer_offsets` (Kafka's `completePendingTxnOffsetCommit`):
    /// its offsets are committed, in their order, or dropped.
    pub fn complete_txn(&self, producer_id: i64, commit: bool) {
        let mut inner = self.inner.lock();
        let Some(pending) = inner.pending_txn.remove(&producer_id) else {
            return;
        };
        let n = pending.len();
        for c in pending {
            if !commit {
                continue;
            }
            let group = c.group.clone();
            if !inner.groups.contains_key(&group) {
                inner
                    .groups
                    .insert(group.clone(), Group::new(&group, now_ms()));
            }
            inner
                .offsets
                .entry(group)
                .or_default()
                .insert((c.topic.clone(), c.partition), c);
        }
        info!(
            "Kafka: {n} offsets of producer {producer_id}'s transaction {}",
            if commit {
                "committed"
            } else {
                "dropped (aborted)"
            }
        );
        self.changed.notify_all();
    }

    /// Whether a transaction has an offset of `group` for `topic`-`partition`
    /// not committed yet (OffsetFetch with `require_stable` answers
    /// UNSTABLE_OFFSET_COMMIT for it).
    pub fn unstable(&self, group: &str, topic: &str, partition: i32) -> bool {
        let inner = self.inner.lock();
        inner
            .pending_txn
            .values()
            .flatten()
            .any(|c| c.group == group && c.topic == topic && c.partition == partition)
    }

    /// Whether `group` has committed offsets.
    pub fn has_offsets(&self, group: &str) -> bool {
        let inner = self.inner.lock();
        inner.offsets.get(group).is_some_and(|o| !o.is_empty())
    }

    /// Every group, as DescribeGroups sees it; timers run first.
    pub fn list(&self) -> Vec<Described> {
        let mut inner = self.inner.lock();
        let names: Vec<String> = inner.groups.keys().cloned().collect();
        let now = Instant::now();
        for n in &names {
            self.tick(&mut inner, n, now);
        }
        inner.groups.values().map(describe).collect()
    }

    /// One group; `None` if the coordinator does not know it.
    pub fn describe(&self, group: &str) -> Result<Option<Described>, ResponseError> {
        if let Some(e) = self.unavailable("DescribeGroups", group) {
            return Err(e);
        }
        let mut inner = self.inner.lock();
        self.tick(&mut inner, group, Instant::now());
        Ok(inner.groups.get(group).map(describe))
    }
}

/// An OffsetCommit's partitions checked and encoded.
struct Prepared {
    /// Each partition's answer so far.
    out: Vec<Option<ResponseError>>,
    /// The commits to keep once written, with their place in `out`.
    commits: Vec<(usize, OffsetCommit)>,
    records: Vec<KeyValue>,
}

/// Checks each partition (metadata size, existence) and encodes its record.
fn prepare(
    group: &str,
    parts: Vec<CommitArgs>,
    retention_ms: i64,
    metadata_max_bytes: i32,
    exists: &dyn Fn(&str, i32) -> bool,
) -> Prepared {
    let ts = now_ms();
    let mut p = Prepared {
        out: Vec::with_capacity(parts.len()),
        commits: Vec::new(),
        records: Vec::new(),
    };
    for a in parts {
        if a.metadata.len() as i64 > metadata_max_bytes as i64 {
            p.out.push(Some(ResponseError::OffsetMetadataTooLarge));
            continue;
        }
        if !exists(&a.topic, a.partition) {
            p.out.push(Some(ResponseError::UnknownTopicOrPartition));
            continue;
        }
        let c = OffsetCommit {
            group: group.to_string(),
            topic: a.topic,
            partition: a.partition,
            offset: a.offset,
            leader_epoch: a.leader_epoch,
            metadata: a.metadata,
            commit_timestamp: ts,
            expire_timestamp: if retention_ms >= 0 {
                ts + retention_ms
            } else {
                -1
            },
        };
        match c.to_record() {
            Ok((k, v)) => {
                p.records.push((k, Some(v)));
                p.commits.push((p.out.len(), c));
                p.out.push(None);
            }
            Err(e) => {
                warn!("OffsetCommit of group {group}: cannot encode: {}", e.0);
                p.out.push(Some(ResponseError::InvalidCommitOffsetSize));
            }
        }
    }
    p
}

/// Kafka's group summary: members' metadata and assignments only when Stable.
fn describe(g: &Group) -> Described {
    let stable = g.state == State::Stable;
    let protocol = g.protocol.clone().unwrap_or_default();
    Described {
        group: g.id.clone(),
        state: g.state.name(),
        protocol_type: g.protocol_type.clone().unwrap_or_default(),
        protocol: if stable {
            protocol.clone()
        } else {
            String::new()
        },
        members: g
            .members
            .values()
            .map(|m| {
                let (md, asg) = if stable {
                    (m.metadata(&protocol), m.assignment.clone())
                } else {
                    (Bytes::new(), Bytes::new())
                };
                (
                    m.id.clone(),
                    m.client_id.clone(),
                    m.client_host.clone(),
                    md,
                    asg,
                )
            })
            .collect(),
    }
}
