//! Groups and committed offsets removed, as Kafka's
//! `GroupMetadataManager.cleanupGroupMetadata` removes them: offsets
//! expire after `offsets.retention.minutes`, a group left Empty without
//! offsets is removed, and both leave tombstones in `__consumer_offsets`
//! (a group's own only if a record of it was ever written: generation
//! above 0). DeleteGroups removes an Empty group and all its offsets at
//! once. [`Cleaner`] runs the expiry at start and then every
//! `offsets.retention.check.interval.ms`.
//!
//! When an offset expires (Kafka's `GroupMetadata.removeExpiredOffsets`):
//! - in an Empty group with a protocol type: once the retention has passed
//!   since the group became Empty (since the commit when its record, older
//!   than value version 2, has no state timestamp);
//! - in a Stable group of protocol type `consumer`: an offset of a topic no
//!   member subscribes to, once the retention has passed since its commit
//!   (none, when a member's subscription does not decode);
//! - in a group without a protocol type (commits without membership, a
//!   standalone consumer's): once the retention has passed since its commit;
//! - in any other group (rebalancing, or of another protocol type): never.
//!
//! An offset committed with a retention time (OffsetCommit v2 to v4) expires
//! at its own expire timestamp instead, under the same rules.
//!
//! The tombstones are written before anything is forgotten: a write that
//! fails leaves the state as it is (logged), for the next pass to retry, so
//! what is in memory never drifts from what a restart would load.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::ResponseError;
use log::{info, warn};

use super::coordinator::GroupCoordinator;
use super::offsets::KeyValue;
use super::records::{group_tombstone_key, offset_tombstone_key};
use super::state::{Group, State};
use super::state::{Inner, Offsets, now_ms};
use crate::broker::Broker;
use crate::error::{Family, code_for};
use commitfs_record::internal::OffsetCommit;
use commitfs_record::schema::group::CONSUMER_PROTOCOL_SUBSCRIPTION;
use commitfs_record::schema::{Value, decode};
use commitfs_storage::StorageError;
use commitfs_storage::scheduler::Scheduler;

impl GroupCoordinator {
    /// One expiry pass at `now` (ms since the epoch): expired offsets and
    /// Empty groups without offsets are removed, with their tombstones.
    pub fn cleanup(&self, now: i64) {
        let started = Instant::now();
        let retention = self.settings.retention_ms();
        let mut inner = self.inner.lock();
        let names: Vec<String> = inner.groups.keys().cloned().collect();
        let mut removed = 0;
        for name in &names {
            self.tick(&mut inner, name, Instant::now());
            let Some(g) = inner.groups.get(name) else {
                continue;
            };
            let offsets = inner.offsets.get(name);
            let expired = offsets.map_or_else(Vec::new, |o| expired(g, o, now, retention));
            // A group with offsets in an open transaction stays (Kafka's
            // `hasOffsets` counts the pending ones).
            let pending = (inner.pending_txn.values().flatten()).any(|c| c.group == *name);
            let dead = g.state == State::Empty
                && offsets.map_or(0, |o| o.len()) == expired.len()
                && !pending;
            if expired.is_empty() && !dead {
                continue;
            }
            let generation = g.generation;
            if let Err(e) = self.forget(&mut inner, name, &expired, dead) {
                warn!(
                    "Group {name}: the tombstones of {} expired offsets{} could not be written \
                     ({e}); kept until the next check",
                    expired.len(),
                    if dead { " and of the group" } else { "" }
                );
                continue;
            }
            if dead {
                info!("Group {name} transitioned to Dead in generation {generation}");
            }
            removed += expired.len();
        }
        if removed > 0 {
            info!(
                "Removed {removed} expired offsets in {} milliseconds.",
                started.elapsed().as_millis()
            );
        }
    }

    /// DeleteGroups: each group's answer (`None`: deleted with its offsets).
    pub fn delete_groups(&self, groups: &[String]) -> Vec<Option<ResponseError>> {
        let mut inner = self.inner.lock();
        let answers: Vec<Option<ResponseError>> = groups
            .iter()
            .map(|g| self.delete_group(&mut inner, g))
            .collect();
        let deleted: Vec<&str> = groups
            .iter()
            .zip(&answers)
            .filter(|(_, a)| a.is_none())
            .map(|(g, _)| g.as_str())
            .collect();
        if !deleted.is_empty() {
            info!("The following groups were deleted: {}", deleted.join(", "));
        }
        answers
    }

    /// Kafka's refusals: GROUP_ID_NOT_FOUND for a group it does not know,
    /// NON_EMPTY_GROUP for one with members (or rebalancing); a group whose
    /// tombstones cannot be written is kept and answered as a failed commit.
    fn delete_group(&self, inner: &mut Inner, group: &str) -> Option<ResponseError> {
        if let Some(e) = self.unavailable("DeleteGroups", group) {
            return Some(e);
        }
        self.tick(inner, group, Instant::now());
        let Some(g) = inner.groups.get(group) else {
            info!("DeleteGroups of group {group}: refused with GROUP_ID_NOT_FOUND");
            return Some(ResponseError::GroupIdNotFound);
        };
        if g.state != State::Empty {
            info!(
                "DeleteGroups of group {group}: refused with NON_EMPTY_GROUP (it is {})",
                g.state.name()
            );
            return Some(ResponseError::NonEmptyGroup);
        }
        let offsets: Vec<(String, i32)> = inner
            .offsets
            .get(group)
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default();
        let what = format!("DeleteGroups of group {group}");
        if self.read_only() {
            warn!("Kafka: {what} refused: the data directory is served read-only");
            return Some(ResponseError::GroupAuthorizationFailed);
        }
        match self.forget(inner, group, &offsets, true) {
            Ok(()) => None,
            Err(e) => Some(code_for(Family::GroupCommit, &what, &e)),
        }
    }

    /// Writes the tombstones of `offsets` of `group` (and of the group,
    /// with `whole`), then forgets them. A read-only directory forgets in
    /// memory only.
    fn forget(
        &self,
        inner: &mut Inner,
        group: &str,
        offsets: &[(String, i32)],
        whole: bool,
    ) -> Result<(), StorageError> {
        let written = inner.groups.get(group).is_some_and(|g| g.generation > 0);
        let records = tombstones(group, offsets, whole && written);
        if !self.read_only() {
            self.append(group, &records)?;
        }
        if let Some(o) = inner.offsets.get_mut(group) {
            for k in offsets {
                o.remove(k);
            }
            if o.is_empty() {
                inner.offsets.remove(group);
            }
        }
        if whole {
            inner.groups.remove(group);
        }
        Ok(())
    }
}

/// The tombstones of a group's offsets, and of the group with `group_too`.
fn tombstones(group: &str, offsets: &[(String, i32)], group_too: bool) -> Vec<KeyValue> {
    let keys = offsets
        .iter()
        .map(|(t, p)| offset_tombstone_key(group, t, *p))
        .chain(group_too.then(|| group_tombstone_key(group)));
    let mut out = Vec::new();
    for k in keys {
        match k {
            Ok(k) => out.push((k, None)),
            // Only a key over a string's 32767 bytes fails, and requests
            // holding one are refused before they reach the coordinator.
            Err(e) => warn!("Group {group}: a tombstone key does not encode: {}", e.0),
        }
    }
    out
}

/// The offsets of `g` expired at `now` (see the module doc).
fn expired(g: &Group, offsets: &Offsets, now: i64, retention: i64) -> Vec<(String, i32)> {
    let since_empty = |c: &OffsetCommit| match g.state_timestamp {
        t if t >= 0 => t,
        _ => c.commit_timestamp,
    };
    let since_commit = |c: &OffsetCommit| c.commit_timestamp;
    type Since<'a> = &'a dyn Fn(&OffsetCommit) -> i64;
    let (base, kept): (Since, BTreeSet<String>) = match (g.protocol_type.as_deref(), g.state) {
        (Some(_), State::Empty) => (&since_empty, BTreeSet::new()),
        (Some("consumer"), State::Stable) => match subscribed_topics(g) {
            Some(topics) => (&since_commit, topics),
            None => return Vec::new(),
        },
        (None, _) => (&since_commit, BTreeSet::new()),
        _ => return Vec::new(),
    };
    offsets
        .iter()
        .filter(|((topic, _), c)| {
            !kept.contains(topic)
                && match c.expire_timestamp {
                    at if at >= 0 => now >= at,
                    _ => now.saturating_sub(base(c)) >= retention,
                }
        })
        .map(|(k, _)| k.clone())
        .collect()
}

/// The topics the members of a `consumer` group subscribe to (Kafka's
/// `computeSubscribedTopics`); `None` when a member's subscription does not
/// decode.
fn subscribed_topics(g: &Group) -> Option<BTreeSet<String>> {
    let protocol = g.protocol.as_deref()?;
    let mut all = BTreeSet::new();
    for m in g.members.values() {
        let Some(topics) = subscription_topics(&m.metadata(protocol)) else {
            warn!(
                "Failed to parse Consumer Protocol consumer:{protocol} of group {}. Consumer \
                 group coordinator is not aware of the subscribed topics.",
                g.id
            );
            return None;
        };
        all.extend(topics);
    }
    Some(all)
}

/// A `ConsumerProtocolSubscription`'s topics, read as Kafka reads them: as
/// version 0, which every later version begins with.
fn subscription_topics(bytes: &[u8]) -> Option<Vec<String>> {
    let body = bytes.get(2..)?;
    let (v, _) = decode(&CONSUMER_PROTOCOL_SUBSCRIPTION, 0, body).ok()?;
    let Some(Value::Array(Some(items))) = v.get(&CONSUMER_PROTOCOL_SUBSCRIPTION.body, "topics")
    else {
        return None;
    };
    items
        .iter()
        .map(|i| match i {
            Value::Str(Some(t)) => Some(t.clone()),
            _ => None,
        })
        .collect()
}

/// Runs [`GroupCoordinator::cleanup`] at start and every
/// `offsets.retention.check.interval.ms` (Kafka's
/// `delete-expired-group-metadata` task), until stopped.
pub struct Cleaner(Scheduler);

impl Cleaner {
    pub fn start(broker: Arc<Broker>) -> Result<Cleaner, String> {
        let every = broker.groups.settings.retention_check;
        let jobs = Scheduler::new("kafka-group-expiry", 1);
        let expire = move || broker.groups.cleanup(now_ms());
        jobs.schedule(
            "delete-expired-group-metadata",
            Duration::ZERO,
            every,
            expire,
        )
        .map_err(|e| format!("cannot start the group expiry: {e}"))?;
        Ok(Cleaner(jobs))
    }

    /// Stops the job and waits for it (a pass under way finishes first).
    pub fn stop(&mut self) {
        self.0.stop();
    }
}

impl Drop for Cleaner {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::state::Member;
    use bytes::Bytes;

    const DAY: i64 = 86_400_000;

    fn commit(topic: &str, at: i64, expire: i64) -> ((String, i32), OffsetCommit) {
        let c = OffsetCommit {
            group: "g".into(),
            topic: topic.into(),
            partition: 0,
            offset: 5,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp: at,
            expire_timestamp: expire,
        };
        ((topic.to_string(), 0), c)
    }

    /// A consumer's subscription to `topics` as the schema writes it at
    /// version 1 (owned partitions after v0's fields), behind its version.
    fn subscription(topics: &[&str]) -> Bytes {
        use commitfs_record::schema::{StructValue, encode};
        let body = &CONSUMER_PROTOCOL_SUBSCRIPTION.body;
        let mut v = StructValue::default_for(body);
        let names = topics.iter().map(|t| Value::Str(Some(t.to_string())));
        v.set(body, "topics", Value::Array(Some(names.collect())));
        let mut out = 1i16.to_be_bytes().to_vec();
        encode(&CONSUMER_PROTOCOL_SUBSCRIPTION, 1, &v, &mut out).unwrap();
        Bytes::from(out)
    }

    fn group(protocol_type: Option<&str>, state: State, since: i64, subs: &[&[&str]]) -> Group {
        let mut g = Group::new("g", since);
        g.protocol_type = protocol_type.map(str::to_string);
        g.protocol = Some("range".into());
        g.state = state;
        for (i, topics) in subs.iter().enumerate() {
            let m = Member {
                id: format!("m{i}"),
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                session_timeout: Duration::from_secs(10),
                rebalance_timeout: Duration::from_secs(10),
                protocols: vec![("range".into(), subscription(topics))],
                assignment: Bytes::new(),
                awaiting_join: false,
                awaiting_sync: false,
                join_result: None,
                sync_result: None,
                last_heartbeat: Instant::now(),
                seq: i as u64,
            };
            g.members.insert(m.id.clone(), m);
        }
        g
    }

    fn topics(v: Vec<(String, i32)>) -> Vec<String> {
        v.into_iter().map(|(t, _)| t).collect()
    }

    /// Kafka's rules, each with an offset just inside and just past them.
    #[test]
    fn offsets_expire_by_kafkas_rules() {
        let now = 100 * DAY;
        let offsets: Offsets = [
            commit("old", now - 8 * DAY, -1),
            commit("new", now - DAY, -1),
            commit("own", now - DAY, now - 1),
        ]
        .into_iter()
        .collect();
        let week = 7 * DAY;
        // Empty for 8 days: every offset, whenever committed.
        let empty = group(Some("consumer"), State::Empty, now - 8 * DAY, &[]);
        assert_eq!(
            topics(expired(&empty, &offsets, now, week)),
            ["new", "old", "own"]
        );
        // Empty for 6 days: only the one with its own expire timestamp.
        let lately = group(Some("consumer"), State::Empty, now - 6 * DAY, &[]);
        assert_eq!(topics(expired(&lately, &offsets, now, week)), ["own"]);
        // No state timestamp (an old record): since each commit.
        let old_record = group(Some("consumer"), State::Empty, -1, &[]);
        assert_eq!(
            topics(expired(&old_record, &offsets, now, week)),
            ["old", "own"]
        );
        // Stable: a subscribed topic's offset never; others since commit.
        let stable = group(Some("consumer"), State::Stable, now, &[&["old"], &["x"]]);
        assert_eq!(topics(expired(&stable, &offsets, now, week)), ["own"]);
        let unsubscribed = group(Some("consumer"), State::Stable, now, &[&["x"]]);
        assert_eq!(
            topics(expired(&unsubscribed, &offsets, now, week)),
            ["old", "own"]
        );
        // A standalone consumer's (no protocol type): since each commit.
        let simple = group(None, State::Empty, now, &[]);
        assert_eq!(
            topics(expired(&simple, &offsets, now, week)),
            ["old", "own"]
        );
        // Rebalancing, another protocol type, or a subscription that does not decode: never.
        let busy = group(Some("consumer"), State::PreparingRebalance, 0, &[&["x"]]);
        assert!(expired(&busy, &offsets, now, week).is_empty());
        let connect = group(Some("connect"), State::Stable, 0, &[&["x"]]);
        assert!(expired(&connect, &offsets, now, week).is_empty());
        let mut garbled = group(Some("consumer"), State::Stable, 0, &[&["x"]]);
        garbled.members.get_mut("m0").unwrap().protocols[0].1 =
            Bytes::from_static(b"\0\0\0\0\0\x09");
        assert!(expired(&garbled, &offsets, now, week).is_empty());
    }

    #[test]
    fn subscriptions_read_as_version_0() {
        assert_eq!(
            subscription_topics(&subscription(&["a", "bc"])),
            Some(vec!["a".to_string(), "bc".to_string()])
        );
        assert_eq!(
            subscription_topics(&[0, 0, 0, 0, 0, 9]),
            None,
            "9 topics claimed"
        );
        assert_eq!(subscription_topics(&[]), None);
    }
}
