//! Consumer groups, a capability a backend offers ([`super::Backend::groups`]):
//! what `kafka-consumer-groups.sh` asks a coordinator (ListGroups,
//! DescribeGroups, OffsetFetch, an OffsetCommit as `--reset-offsets`
//! makes it, DeleteGroups), in the project's own types.
//!
//! The local daemon answers from its own group coordinator, a read-only
//! mount of a broker's directory from `__consumer_offsets` as the broker
//! would load it, the cluster mount through the cluster's admin API.

use super::BackendResult;

/// A group's members and state, as DescribeGroups answers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupDescription {
    /// Kafka's name of the state: `Empty`, `Stable`, `PreparingRebalance`,
    /// `CompletingRebalance`, `Dead`.
    pub state: String,
    /// `consumer` for consumers; empty for a group that only commits.
    pub protocol_type: String,
    /// The assignor the members agreed on (`range`, `cooperative-sticky`).
    pub assignor: String,
    pub coordinator: Option<Coordinator>,
    pub members: Vec<Member>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Coordinator {
    pub id: i32,
    pub host: String,
    pub port: i32,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Member {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    /// As Kafka shows it: `/127.0.0.1`.
    pub host: String,
    /// The partitions assigned to the member, where the assignment is a
    /// consumer's (`protocol_type` `consumer`).
    pub assignment: Vec<TopicPartition>,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

impl TopicPartition {
    /// The partition's name in the tree: `<topic>-<partition>`.
    pub fn name(&self) -> String {
        format!("{}-{}", self.topic, self.partition)
    }
}

/// One committed offset of a group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Committed {
    pub partition: TopicPartition,
    pub offset: i64,
    pub leader_epoch: Option<i32>,
    pub metadata: String,
    /// When it was committed (ms), where the backend knows.
    pub commit_timestamp: Option<i64>,
}

/// A group as `--reset-offsets` sets it: the partition and its new offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reset {
    pub partition: TopicPartition,
    pub offset: i64,
}

pub trait Groups: Send + Sync {
    /// Every group's id, sorted.
    fn list(&self) -> BackendResult<Vec<String>>;
    /// The group's state and members; `NotFound` when the coordinator has
    /// no such group (Kafka answers state `Dead`).
    fn describe(&self, group: &str) -> BackendResult<GroupDescription>;
    /// The group's committed offsets, sorted by partition.
    fn committed(&self, group: &str) -> BackendResult<Vec<Committed>>;
    /// Commits `offsets` for the group, as `--reset-offsets --execute`
    /// does: refused (`Busy`) while the group has members.
    fn reset(&self, group: &str, offsets: &[Reset]) -> BackendResult<()>;
    /// DeleteGroups: the group and its offsets go. `NotFound` when there
    /// is no such group, `NotEmpty` while it has members.
    fn delete(&self, group: &str) -> BackendResult<()>;
}
