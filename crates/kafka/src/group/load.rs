//! The coordinator's state read back from `__consumer_offsets` at start.
//!
//! Anyone who can write to the data directory can write records there (a
//! shell append to `__consumer_offsets-0/log`, a copied directory), so each
//! record is checked before it is applied, and one that fails is skipped
//! with a log line: a record of a group that hashes to another partition,
//! an offset commit whose metadata is over `offset.metadata.max.bytes`, a
//! group whose members Kafka's JoinGroup would have refused (a session
//! timeout outside `group.min.session.timeout.ms` ..
//! `group.max.session.timeout.ms`), or that no coordinator writes (members
//! without a protocol, a leader that is not a member, duplicate member ids).
//! A forged Stable group holding a member whose session never ends would
//! otherwise keep every real member out.
//!
//! A partition that cannot be read to its end is *failed*, as Kafka's
//! `CoordinatorRuntime` marks a partition whose load threw: nothing of it
//! is applied, and its groups are refused with NOT_COORDINATOR until a
//! restart loads it, rather than answered as if they had no state.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use log::{error, info, warn};

use super::offsets::OffsetsTopic;
use super::records::{Stored, StoredGroup, partition_for};
use super::state::{Group, Inner, ms, now_ms};
use crate::config::GroupSettings;
use commitfs_record::internal::OffsetCommit;

/// What start-up read back.
pub(super) struct Loaded {
    pub inner: Inner,
    /// The partitions that could not be read, with why.
    pub failed: BTreeMap<u32, String>,
}

/// Reads every partition of the topic and applies what passes [`check`].
pub(super) fn load(topic: &OffsetsTopic, settings: &GroupSettings) -> Loaded {
    let mut inner = Inner::default();
    let mut failed = BTreeMap::new();
    let count = topic.count();
    let now = Instant::now();
    for p in topic.read_all() {
        let records = match p.records {
            Ok(records) => records,
            Err(why) => {
                error!(
                    "Failed to load metadata from {} due to {why}. Its groups are refused with \
                     NOT_COORDINATOR until a restart loads it",
                    p.name
                );
                failed.insert(p.index, why);
                continue;
            }
        };
        let (mut applied, mut skipped) = (0, 0);
        for (offset, s) in records {
            match check(&s, p.index, count, settings) {
                Ok(()) => {
                    apply_stored(&mut inner, s, now);
                    applied += 1;
                }
                Err(why) => {
                    warn!("{} offset {offset}: {why}; record skipped", p.name);
                    skipped += 1;
                }
            }
        }
        for (pid, records) in p.pending {
            for (offset, s) in records {
                match (check(&s, p.index, count, settings), s) {
                    (
                        Ok(()),
                        Stored::Offset {
                            commit: Some(c), ..
                        },
                    ) => inner.pending_txn.entry(pid).or_default().push(c),
                    (Ok(()), _) => warn!(
                        "{} offset {offset}: a transactional record that is no offset commit; skipped",
                        p.name
                    ),
                    (Err(why), _) => warn!("{} offset {offset}: {why}; record skipped", p.name),
                }
            }
        }
        info!(
            "Loaded {applied} group records from {} ({skipped} skipped)",
            p.name
        );
    }
    settle(&mut inner, settings, now);
    Loaded { inner, failed }
}

/// After the records: a group known only by its offsets (one that never
/// had members here) is an Empty group, as Kafka shows it; a group over
/// `group.max.size` (lowered since it was written) rebalances, so the
/// members past the size are shed when they rejoin (Kafka's `onLoaded`).
fn settle(inner: &mut Inner, settings: &GroupSettings, now: Instant) {
    let ts = now_ms();
    let pending = inner.pending_txn.values().flatten().map(|c| &c.group);
    for g in inner.offsets.keys().chain(pending) {
        if !inner.groups.contains_key(g) {
            inner.groups.insert(g.clone(), Group::new(g, ts));
        }
    }
    for g in inner.groups.values_mut() {
        if g.members.len() > settings.max_size as usize {
            let reason = format!(
                "Freshly-loaded group {} (size {}) is over capacity {}. Rebalancing in order to \
                 give a chance for consumers to commit offsets",
                g.id,
                g.members.len(),
                settings.max_size
            );
            let delay = settings.initial_delay;
            g.prepare_rebalance(now, ts, delay, Duration::ZERO, &reason);
        }
    }
    if !inner.groups.is_empty() || !inner.offsets.is_empty() {
        info!(
            "Group coordinator loaded {} groups and committed offsets of {} groups",
            inner.groups.len(),
            inner.offsets.len()
        );
    }
}

/// Why a record read back is not applied; `Ok`: apply it.
pub(super) fn check(
    s: &Stored,
    index: u32,
    count: u32,
    settings: &GroupSettings,
) -> Result<(), String> {
    let group = match s {
        Stored::Offset { group, .. } | Stored::Group { group, .. } => group,
        Stored::Other => return Ok(()),
    };
    if group.is_empty() {
        return Err("a record of the empty group id".to_string());
    }
    let home = partition_for(group, count);
    if home != index {
        return Err(format!(
            "a record of group {group}, whose records go to partition {home}"
        ));
    }
    match s {
        Stored::Offset {
            topic,
            partition,
            commit: Some(c),
            ..
        } => check_commit(topic, *partition, c, settings),
        Stored::Group { value: Some(v), .. } => check_group(v, settings),
        _ => Ok(()),
    }
}

/// What OffsetCommit would have refused.
fn check_commit(
    topic: &str,
    partition: i32,
    c: &OffsetCommit,
    settings: &GroupSettings,
) -> Result<(), String> {
    if topic.is_empty() || partition < 0 {
        return Err(format!(
            "an offset commit of {topic:?} partition {partition}"
        ));
    }
    if c.metadata.len() as i64 > settings.metadata_max_bytes as i64 {
        return Err(format!(
            "an offset commit whose metadata of {} bytes is over offset.metadata.max.bytes ({})",
            c.metadata.len(),
            settings.metadata_max_bytes
        ));
    }
    Ok(())
}

/// What JoinGroup would have refused, or no coordinator writes.
fn check_group(v: &StoredGroup, settings: &GroupSettings) -> Result<(), String> {
    if v.members.is_empty() {
        return Ok(());
    }
    let g = &v.group;
    if v.protocol_type.is_empty() || v.protocol.as_deref().unwrap_or("").is_empty() {
        return Err(format!("group {g} has members but no protocol"));
    }
    if v.generation < 1 {
        return Err(format!(
            "group {g} has members in generation {}",
            v.generation
        ));
    }
    let ids: BTreeSet<&str> = v.members.iter().map(|m| m.member_id.as_str()).collect();
    if ids.len() != v.members.len() || ids.contains("") {
        return Err(format!("group {g} has empty or repeated member ids"));
    }
    if !v.leader.as_deref().is_some_and(|l| ids.contains(l)) {
        return Err(format!(
            "group {g}'s leader {:?} is not one of its members",
            v.leader
        ));
    }
    let (min, max) = (settings.min_session, settings.max_session);
    for m in &v.members {
        let session = ms(m.session_timeout_ms);
        if m.session_timeout_ms < 0 || session < min || session > max {
            return Err(format!(
                "member {} of group {g} has a session timeout of {} ms, outside \
                 group.min.session.timeout.ms ({}) to group.max.session.timeout.ms ({})",
                m.member_id,
                m.session_timeout_ms,
                min.as_millis(),
                max.as_millis()
            ));
        }
    }
    Ok(())
}

/// Applies one record read back at start.
fn apply_stored(inner: &mut Inner, s: Stored, now: Instant) {
    match s {
        Stored::Offset {
            group,
            topic,
            partition,
            commit,
        } => {
            let offsets = inner.offsets.entry(group.clone()).or_default();
            match commit {
                Some(c) => {
                    offsets.insert((topic, partition), c);
                }
                None => {
                    offsets.remove(&(topic, partition));
                }
            }
            if offsets.is_empty() {
                inner.offsets.remove(&group);
            }
        }
        Stored::Group { group, value } => match value {
            Some(v) => {
                inner.groups.insert(group, Group::restore(&v, now));
            }
            None => {
                inner.groups.remove(&group);
            }
        },
        Stored::Other => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::records::StoredMember;

    fn member(id: &str, session_ms: i32) -> StoredMember {
        StoredMember {
            member_id: id.into(),
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            rebalance_timeout_ms: session_ms,
            session_timeout_ms: session_ms,
            subscription: Vec::new(),
            assignment: Vec::new(),
        }
    }

    fn stable(members: Vec<StoredMember>) -> Stored {
        Stored::Group {
            group: "g".into(),
            value: Some(StoredGroup {
                group: "g".into(),
                protocol_type: "consumer".into(),
                generation: 1,
                protocol: Some("range".into()),
                leader: members.first().map(|m| m.member_id.clone()),
                state_timestamp: 0,
                members,
            }),
        }
    }

    fn commit(metadata_len: usize) -> Stored {
        Stored::Offset {
            group: "g".into(),
            topic: "t".into(),
            partition: 0,
            commit: Some(OffsetCommit {
                group: "g".into(),
                topic: "t".into(),
                partition: 0,
                offset: 1,
                leader_epoch: -1,
                metadata: "m".repeat(metadata_len),
                commit_timestamp: 0,
                expire_timestamp: -1,
            }),
        }
    }

    /// Each guard, with the record that passes next to the one it stops.
    #[test]
    fn records_are_checked_as_kafka_would_have_refused_them() {
        let s = GroupSettings::default();
        let ok = |r: &Stored| check(r, 0, 1, &s);
        assert_eq!(ok(&stable(vec![member("m", 10_000)])), Ok(()));
        let ghost = ok(&stable(vec![member("m", i32::MAX)])).unwrap_err();
        assert!(
            ghost.contains("session timeout of 2147483647 ms"),
            "{ghost}"
        );
        assert!(
            ok(&stable(vec![member("m", 100)])).is_err(),
            "under the min"
        );
        assert!(ok(&stable(vec![member("m", -1)])).is_err());
        let twice = stable(vec![member("m", 10_000), member("m", 10_000)]);
        assert!(ok(&twice).unwrap_err().contains("repeated"));
        let Stored::Group {
            value: Some(mut v), ..
        } = stable(vec![member("m", 10_000)])
        else {
            unreachable!()
        };
        v.leader = Some("other".into());
        let led = Stored::Group {
            group: "g".into(),
            value: Some(v.clone()),
        };
        assert!(ok(&led).unwrap_err().contains("leader"));
        v.leader = Some("m".into());
        v.protocol = None;
        let bare = Stored::Group {
            group: "g".into(),
            value: Some(v),
        };
        assert!(ok(&bare).unwrap_err().contains("no protocol"));

        assert_eq!(ok(&commit(4096)), Ok(()));
        assert!(
            ok(&commit(4097))
                .unwrap_err()
                .contains("offset.metadata.max.bytes")
        );
        // "g" hashes to partition 1 of 2.
        assert_eq!(partition_for("g", 2), 1);
        assert!(
            check(&commit(0), 0, 2, &s)
                .unwrap_err()
                .contains("partition 1")
        );
        assert_eq!(check(&commit(0), 1, 2, &s), Ok(()));
    }
}
