//! The coordinator as the tree's `groups/` sees it: the backend seam's
//! [`Groups`] over this daemon's own coordinator, so that a commit by a
//! client shows in `groups/` at once and a reset there is what the next
//! consumer of the group fetches. The answers are the ones Kafka's admin
//! client gets: a reset is an OffsetCommit outside any generation, allowed
//! only while the group is `Empty`, as `kafka-consumer-groups.sh` checks.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Buf;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::ConsumerProtocolAssignment;
use kafka_protocol::protocol::Decodable;
use log::info;
use parking_lot::Mutex;

use super::commits::{CommitArgs, Described};
use super::coordinator::{GroupCoordinator, GroupSettings};
use commitfs_backend::groups::{
    Committed, Coordinator as CoordinatorId, GroupDescription, Groups, Member, Reset,
    TopicPartition,
};
use commitfs_backend::{BackendError, BackendResult, ErrorKind};
use commitfs_storage::LogManager;

/// The coordinator's groups, with who the coordinator is.
pub struct CoordinatorGroups {
    source: Source,
    settings: GroupSettings,
    mgr: Arc<LogManager>,
    id: Option<CoordinatorId>,
}

enum Source {
    /// The listener's, which every client's request goes through.
    Listener(Arc<GroupCoordinator>),
    /// The tree's own: none until `groups/` is first looked at.
    Own(Mutex<Option<LoadedGroups>>),
}

/// The tree's own coordinator, and the log end offsets of
/// `__consumer_offsets` it was loaded at.
struct LoadedGroups {
    coordinator: Arc<GroupCoordinator>,
    ends: Vec<(String, i64)>,
    checked: Instant,
}

/// How often a read-only mount looks for records a broker appended to
/// `__consumer_offsets` since the coordinator was loaded (the tree's
/// `FOLLOW_TTL`).
const FOLLOW: Duration = Duration::from_secs(1);

impl CoordinatorGroups {
    /// The listener's coordinator; `id`: the broker as Metadata advertises it.
    pub fn new(
        coordinator: Arc<GroupCoordinator>,
        mgr: Arc<LogManager>,
        id: Option<CoordinatorId>,
    ) -> CoordinatorGroups {
        CoordinatorGroups {
            settings: coordinator.settings.clone(),
            source: Source::Listener(coordinator),
            mgr,
            id,
        }
    }

    /// A coordinator of the tree's own, over `mgr`'s `__consumer_offsets`,
    /// started at the first look at `groups/`: starting one reads the
    /// topic and makes it compacted, as Kafka's coordinator does, which a
    /// mount whose groups nobody looks at must not do to a directory. On a
    /// read-only directory (a broker's, perhaps running) it is loaded again
    /// when the topic has grown, at most once a second, so that `groups/`
    /// follows the broker's commits as `status` follows its appends.
    pub fn standalone(mgr: Arc<LogManager>, settings: GroupSettings) -> CoordinatorGroups {
        CoordinatorGroups {
            source: Source::Own(Mutex::new(None)),
            settings,
            mgr,
            id: None,
        }
    }

    fn coordinator(&self) -> Arc<GroupCoordinator> {
        let own = match &self.source {
            Source::Listener(c) => return c.clone(),
            Source::Own(own) => own,
        };
        let mut own = own.lock();
        if let Some(l) = own.as_mut() {
            if !self.mgr.read_only() || l.checked.elapsed() < FOLLOW {
                return l.coordinator.clone();
            }
            let ends = self.offsets_ends();
            l.checked = Instant::now();
            if ends == l.ends {
                return l.coordinator.clone();
            }
        }
        let ends = self.offsets_ends();
        let coordinator = Arc::new(GroupCoordinator::new(
            self.mgr.clone(),
            self.settings.clone(),
        ));
        *own = Some(LoadedGroups {
            coordinator: coordinator.clone(),
            ends,
            checked: Instant::now(),
        });
        coordinator
    }

    /// The log end offset of each partition of `__consumer_offsets`, each
    /// brought up to what its directory holds now (on a read-only mount,
    /// asking the manager for a partition follows it).
    fn offsets_ends(&self) -> Vec<(String, i64)> {
        let prefix = format!("{}-", super::offsets::OFFSETS_TOPIC);
        self.mgr
            .partitions()
            .iter()
            .filter(|p| p.name().starts_with(&prefix))
            .filter_map(|p| self.mgr.partition(p.name()))
            .map(|p| (p.name().to_string(), p.log_end_offset()))
            .collect()
    }
}

/// A coordinator's refusal in the project's words.
fn refused(what: &str, code: ResponseError) -> BackendError {
    let kind = match code {
        ResponseError::GroupIdNotFound => ErrorKind::NotFound,
        ResponseError::NonEmptyGroup => ErrorKind::NotEmpty,
        ResponseError::GroupAuthorizationFailed => ErrorKind::ReadOnly,
        ResponseError::UnknownTopicOrPartition => ErrorKind::NotFound,
        ResponseError::RebalanceInProgress
        | ResponseError::UnknownMemberId
        | ResponseError::IllegalGeneration => ErrorKind::Busy,
        ResponseError::OffsetMetadataTooLarge | ResponseError::InvalidCommitOffsetSize => {
            ErrorKind::Invalid
        }
        // A partition of `__consumer_offsets` that failed to load: its
        // groups cannot be known.
        ResponseError::NotCoordinator | ResponseError::CoordinatorNotAvailable => {
            ErrorKind::Offline
        }
        _ => ErrorKind::Io,
    };
    BackendError::new(kind, format!("{what}: the coordinator answered {code:?}"))
}

/// A consumer's assignment (`ConsumerProtocolAssignment`, its version
/// first); empty when it is not a consumer's or does not decode.
fn assignment(bytes: &[u8]) -> Vec<TopicPartition> {
    let mut buf = bytes;
    if buf.len() < 2 {
        return Vec::new();
    }
    let version = buf.get_i16();
    let Ok(a) = ConsumerProtocolAssignment::decode(&mut buf, version.clamp(0, 3)) else {
        return Vec::new();
    };
    let mut out: Vec<TopicPartition> = a
        .assigned_partitions
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| TopicPartition {
                topic: t.topic.to_string(),
                partition: *p,
            })
        })
        .collect();
    out.sort();
    out
}

impl CoordinatorGroups {
    fn description(&self, d: Described) -> GroupDescription {
        let consumer = d.protocol_type == "consumer";
        GroupDescription {
            state: d.state.to_string(),
            assignor: d.protocol,
            coordinator: self.id.clone(),
            members: d
                .members
                .into_iter()
                .map(|(member_id, client_id, host, _, asg)| Member {
                    member_id,
                    group_instance_id: None,
                    client_id,
                    host,
                    assignment: if consumer {
                        assignment(&asg)
                    } else {
                        Vec::new()
                    },
                })
                .collect(),
            protocol_type: d.protocol_type,
        }
    }
}

impl Groups for CoordinatorGroups {
    fn list(&self) -> BackendResult<Vec<String>> {
        let mut names: Vec<String> = self
            .coordinator()
            .list()
            .into_iter()
            .map(|d| d.group)
            .collect();
        names.extend(self.coordinator().groups_with_offsets());
        names.sort();
        names.dedup();
        Ok(names)
    }

    fn describe(&self, group: &str) -> BackendResult<GroupDescription> {
        let what = || format!("DescribeGroups of group {group}");
        match self.coordinator().describe(group) {
            Ok(Some(d)) => Ok(self.description(d)),
            // A group with offsets only is Empty, as Kafka loads one.
            Ok(None) if self.coordinator().has_offsets(group) => Ok(GroupDescription {
                state: "Empty".into(),
                coordinator: self.id.clone(),
                ..GroupDescription::default()
            }),
            Ok(None) => Err(refused(&what(), ResponseError::GroupIdNotFound)),
            Err(e) => Err(refused(&what(), e)),
        }
    }

    fn committed(&self, group: &str) -> BackendResult<Vec<Committed>> {
        let commits = self
            .coordinator()
            .committed(group)
            .map_err(|e| refused(&format!("OffsetFetch of group {group}"), e))?;
        Ok(commits
            .into_iter()
            .map(|c| Committed {
                partition: TopicPartition {
                    topic: c.topic,
                    partition: c.partition,
                },
                offset: c.offset,
                leader_epoch: (c.leader_epoch >= 0).then_some(c.leader_epoch),
                metadata: c.metadata,
                commit_timestamp: Some(c.commit_timestamp),
            })
            .collect())
    }

    fn reset(&self, group: &str, offsets: &[Reset]) -> BackendResult<()> {
        let what = format!("reset of the offsets of group {group}");
        if let Ok(Some(d)) = self.coordinator().describe(group)
            && d.state != "Empty"
        {
            info!("{what} refused: the group is {}", d.state);
            return Err(BackendError::new(
                ErrorKind::Busy,
                format!(
                    "Assignments can only be reset if the group '{group}' is inactive, but the current state is {}.",
                    d.state
                ),
            ));
        }
        let parts = offsets
            .iter()
            .map(|r| CommitArgs {
                topic: r.partition.topic.clone(),
                partition: r.partition.partition,
                offset: r.offset,
                leader_epoch: -1,
                metadata: String::new(),
            })
            .collect();
        let mgr = &self.mgr;
        let exists = |t: &str, p: i32| p >= 0 && mgr.partition(&format!("{t}-{p}")).is_some();
        let answers = self.coordinator().commit(group, -1, "", -1, parts, &exists);
        match answers.into_iter().flatten().next() {
            None => Ok(()),
            Some(code) => Err(refused(&what, code)),
        }
    }

    fn delete(&self, group: &str) -> BackendResult<()> {
        let answers = self.coordinator().delete_groups(&[group.to_string()]);
        match answers.into_iter().flatten().next() {
            None => Ok(()),
            Some(code) => Err(refused(&format!("DeleteGroups of group {group}"), code)),
        }
    }
}
