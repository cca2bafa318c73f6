//! Consumer groups in memory, for the memory backend: what a test makes of
//! them (members join and leave, offsets are committed) and what the tree
//! asks, with a coordinator's refusals.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::Mutex;

use super::groups::{Committed, GroupDescription, Groups, Member, Reset, TopicPartition};
use super::{BackendError, BackendResult, ErrorKind};

#[derive(Clone, Debug, Default)]
struct Group {
    protocol_type: String,
    assignor: String,
    members: Vec<Member>,
    committed: BTreeMap<TopicPartition, Committed>,
}

/// The groups of a [`super::mem::MemBackend`].
pub struct MemGroups {
    groups: Mutex<BTreeMap<String, Group>>,
    /// Refuses changes when set (the backend is read-only).
    read_only: Arc<dyn Fn() -> bool + Send + Sync>,
}

fn no_group(group: &str) -> BackendError {
    BackendError::new(ErrorKind::NotFound, format!("group {group} does not exist"))
}

impl MemGroups {
    pub(super) fn new(read_only: Arc<dyn Fn() -> bool + Send + Sync>) -> MemGroups {
        MemGroups {
            groups: Mutex::default(),
            read_only,
        }
    }

    /// `member` joins `group` (made if new) as a consumer with `assignor`.
    pub fn join(&self, group: &str, assignor: &str, member: Member) {
        let mut groups = self.groups.lock();
        let g = groups.entry(group.to_string()).or_default();
        g.protocol_type = "consumer".into();
        g.assignor = assignor.into();
        g.members.retain(|m| m.member_id != member.member_id);
        g.members.push(member);
    }

    /// The member leaves; the group stays, empty, with its offsets.
    pub fn leave(&self, group: &str, member_id: &str) {
        if let Some(g) = self.groups.lock().get_mut(group) {
            g.members.retain(|m| m.member_id != member_id);
            if g.members.is_empty() {
                g.assignor.clear();
            }
        }
    }

    /// An OffsetCommit of a member (or of a client outside any generation).
    pub fn commit(&self, group: &str, offset: Committed) {
        let mut groups = self.groups.lock();
        let g = groups.entry(group.to_string()).or_default();
        g.committed.insert(offset.partition.clone(), offset);
    }

    fn writable(&self) -> BackendResult<()> {
        match (self.read_only)() {
            true => Err(BackendError::new(
                ErrorKind::ReadOnly,
                "the memory backend is read-only",
            )),
            false => Ok(()),
        }
    }
}

impl Groups for MemGroups {
    fn list(&self) -> BackendResult<Vec<String>> {
        Ok(self.groups.lock().keys().cloned().collect())
    }

    fn describe(&self, group: &str) -> BackendResult<GroupDescription> {
        let groups = self.groups.lock();
        let g = groups.get(group).ok_or_else(|| no_group(group))?;
        Ok(GroupDescription {
            state: match g.members.is_empty() {
                true => "Empty",
                false => "Stable",
            }
            .into(),
            protocol_type: g.protocol_type.clone(),
            assignor: g.assignor.clone(),
            coordinator: None,
            members: g.members.clone(),
        })
    }

    fn committed(&self, group: &str) -> BackendResult<Vec<Committed>> {
        let groups = self.groups.lock();
        let g = groups.get(group).ok_or_else(|| no_group(group))?;
        Ok(g.committed.values().cloned().collect())
    }

    fn reset(&self, group: &str, offsets: &[Reset]) -> BackendResult<()> {
        self.writable()?;
        let mut groups = self.groups.lock();
        let g = groups.entry(group.to_string()).or_default();
        if !g.members.is_empty() {
            return Err(BackendError::new(
                ErrorKind::Busy,
                format!(
                    "group {group} has {} active members: its offsets can be reset only while it is inactive",
                    g.members.len()
                ),
            ));
        }
        for r in offsets {
            g.committed.insert(
                r.partition.clone(),
                Committed {
                    partition: r.partition.clone(),
                    offset: r.offset,
                    leader_epoch: None,
                    metadata: String::new(),
                    commit_timestamp: Some(now_ms()),
                },
            );
        }
        Ok(())
    }

    fn delete(&self, group: &str) -> BackendResult<()> {
        self.writable()?;
        let mut groups = self.groups.lock();
        let g = groups.get(group).ok_or_else(|| no_group(group))?;
        if !g.members.is_empty() {
            return Err(BackendError::new(
                ErrorKind::NotEmpty,
                format!("group {group} is not empty: it has active members"),
            ));
        }
        groups.remove(group);
        Ok(())
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
