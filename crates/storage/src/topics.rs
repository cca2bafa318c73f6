//! Topics over partition directories: Kafka's topic `T` with partitions
//! `0..n-1` is the directories `T-0 … T-(n-1)`. Both faces (the tree's
//! `mkdir`/`rmdir`, the listener's CreateTopics/DeleteTopics) go through
//! here, so they follow one rule.
//!
//! **No holes.** Kafka clients assume a topic's partition ids are `0..n-1`.
//! So a partition is created only when the one below it exists (`mkdir T-1`
//! needs `T-0`), and deleted only when it is the topic's highest (`rmdir
//! T-0` needs `T-1` gone): a topic grows and shrinks at its top, and
//! DeleteTopics removes partitions from the highest down. A directory made
//! behind commitfs's back can still leave a hole; [`LogManager::topics`]
//! reports it as a missing partition (`None`), which the listener serves as
//! an unavailable partition rather than leaving the id out.
//!
//! Topic names follow Kafka's `Topic.validate`, and, as Kafka, a new topic
//! may not collide with an existing one once `.` and `_` are taken as equal
//! (Kafka's metric names cannot tell them apart).

use std::collections::BTreeMap;
use std::sync::Arc;

use log::{error, info};

use super::error::{Result, StorageError};
use super::manager::LogManager;
use super::names::{parse_partition_name, validate_topic};
use super::partition::PartitionLog;

/// One topic: its partitions by id. `None` marks a hole left by a directory
/// created or removed outside commitfs.
#[derive(Clone)]
pub struct Topic {
    pub name: String,
    pub partitions: Vec<Option<Arc<PartitionLog>>>,
}

impl Topic {
    /// Whether this is one of Kafka's internal topics.
    pub fn is_internal(&self) -> bool {
        is_internal_topic(&self.name)
    }
}

pub use commitfs_record::names::is_internal_topic;

/// Kafka's `Topic.unifyCollisionChars`.
fn unified(name: &str) -> String {
    name.replace('.', "_")
}

fn gap(name: &str, reason: String) -> StorageError {
    StorageError::PartitionGap {
        name: name.to_string(),
        reason,
    }
}

impl LogManager {
    /// Every topic, sorted by name.
    pub fn topics(&self) -> Vec<Topic> {
        let mut by_topic: BTreeMap<String, Vec<Option<Arc<PartitionLog>>>> = BTreeMap::new();
        for p in self.partitions() {
            let slots = by_topic.entry(p.local().topic().to_string()).or_default();
            let i = p.local().partition() as usize;
            if slots.len() <= i {
                slots.resize(i + 1, None);
            }
            slots[i] = Some(p);
        }
        by_topic
            .into_iter()
            .map(|(name, partitions)| Topic { name, partitions })
            .collect()
    }

    /// One topic, if any partition of it exists.
    pub fn topic(&self, name: &str) -> Option<Topic> {
        let parts = self.partitions.read();
        let mut partitions: Vec<Option<Arc<PartitionLog>>> = Vec::new();
        let prefix = format!("{name}-");
        for (pname, p) in parts.range(prefix.clone()..) {
            if !pname.starts_with(&prefix) {
                break;
            }
            if p.local().topic() != name {
                continue; // `a-b-0` is topic `a-b`, not a partition of `a`
            }
            let i = p.local().partition() as usize;
            if partitions.len() <= i {
                partitions.resize(i + 1, None);
            }
            partitions[i] = Some(p.clone());
        }
        (!partitions.is_empty()).then(|| Topic {
            name: name.to_string(),
            partitions,
        })
    }

    fn has_partition(&self, topic: &str, partition: u32) -> bool {
        self.partitions
            .read()
            .contains_key(&format!("{topic}-{partition}"))
    }

    /// A new topic whose name collides with an existing one (Kafka's rule).
    fn check_collision(&self, topic: &str) -> Result<()> {
        let mine = unified(topic);
        for p in self.partitions.read().values() {
            if p.local().topic() != topic && unified(p.local().topic()) == mine {
                return Err(StorageError::TopicCollision {
                    topic: topic.to_string(),
                    existing: p.local().topic().to_string(),
                });
            }
        }
        Ok(())
    }

    /// The no-holes rule for a new partition; admin lock held.
    pub(super) fn check_create(&self, name: &str) -> Result<()> {
        let (topic, partition) = parse_partition_name(name)?;
        if partition == 0 {
            return self.check_collision(&topic);
        }
        if !self.has_partition(&topic, partition - 1) {
            return Err(gap(
                name,
                format!(
                    "partition {} of topic {topic} does not exist: Kafka clients need partitions \
                     0..n-1 without holes, so create them in order from 0",
                    partition - 1
                ),
            ));
        }
        Ok(())
    }

    /// The no-holes rule for deleting a partition; admin lock held.
    pub(super) fn check_delete(&self, name: &str) -> Result<()> {
        let (topic, partition) = parse_partition_name(name)?;
        if self.has_partition(&topic, partition + 1) {
            return Err(gap(
                name,
                format!(
                    "partition {} of topic {topic} exists: Kafka clients need partitions 0..n-1 \
                     without holes, so delete them from the highest down",
                    partition + 1
                ),
            ));
        }
        Ok(())
    }

    /// Kafka's CreateTopics: partitions `0..count`, all or none.
    pub fn create_topic(&self, topic: &str, count: u32) -> Result<Topic> {
        self.create_topic_configured(topic, count, &[])
    }

    /// [`LogManager::create_topic`] with topic config overrides set on each
    /// partition as it is made: a topic whose configs cannot all be written
    /// is removed again, so a failure half way leaves nothing behind.
    pub fn create_topic_configured(
        &self,
        topic: &str,
        count: u32,
        configs: &[(&str, &str)],
    ) -> Result<Topic> {
        validate_topic(topic)
            .map_err(|why| StorageError::InvalidPartitionName(topic.to_string(), why))?;
        if count == 0 || count > i32::MAX as u32 {
            return Err(gap(topic, format!("{count} is not a partition count")));
        }
        if self.read_only() {
            return Err(StorageError::ReadOnly);
        }
        let _admin = self.admin.lock();
        if self.topic(topic).is_some() {
            return Err(StorageError::PartitionExists(topic.to_string()));
        }
        self.check_collision(topic)?;
        self.check_room(count as usize)?;
        let made = self.create_range_locked(topic, 0, count, configs)?;
        info!("Created topic {topic} with {count} partitions");
        Ok(Topic {
            name: topic.to_string(),
            partitions: made.into_iter().map(Some).collect(),
        })
    }

    /// Kafka's CreatePartitions: partitions from the topic's count up to
    /// `count`, made in order, all or none (what was made is removed
    /// again if one fails). Returns the topic as it then is.
    pub fn grow_topic(&self, topic: &str, count: u32) -> Result<Topic> {
        if self.read_only() {
            return Err(StorageError::ReadOnly);
        }
        let _admin = self.admin.lock();
        let Some(t) = self.topic(topic) else {
            return Err(StorageError::NoSuchPartition(topic.to_string()));
        };
        let have = t.partitions.len() as u32;
        if count <= have || count > i32::MAX as u32 {
            return Err(gap(
                topic,
                format!("{count} partitions would not grow a topic of {have}"),
            ));
        }
        self.check_room((count - have) as usize)?;
        let made = self.create_range_locked(topic, have, count, &[])?;
        info!("Topic {topic} grew from {have} to {count} partitions");
        let mut grown = t;
        grown.partitions.extend(made.into_iter().map(Some));
        Ok(grown)
    }

    /// Partitions `from..to` of `topic`, each with `configs`; admin lock
    /// held. If one fails, those made before it are deleted, from the
    /// highest down, and the first error is returned.
    fn create_range_locked(
        &self,
        topic: &str,
        from: u32,
        to: u32,
        configs: &[(&str, &str)],
    ) -> Result<Vec<Arc<PartitionLog>>> {
        let mut made: Vec<Arc<PartitionLog>> = Vec::new();
        for p in from..to {
            let name = format!("{topic}-{p}");
            let one = super::names::validate_new_partition_name(&name)
                .and_then(|_| self.create_partition_locked(&name))
                .and_then(|log| {
                    made.push(log.clone());
                    // As one change: a set is validated whole (the
                    // compaction lags against each other).
                    let changes: Vec<(&str, Option<&str>)> =
                        configs.iter().map(|(k, v)| (*k, Some(*v))).collect();
                    match changes.is_empty() {
                        true => Ok(()),
                        false => log.alter_configs(&changes),
                    }
                });
            if let Err(e) = one {
                for log in made.iter().rev() {
                    if let Err(d) = self.delete_partition_locked(log.name()) {
                        error!(
                            "Could not remove {} after a creation that failed ({e}): {d}",
                            log.name()
                        );
                    }
                }
                return Err(e);
            }
        }
        Ok(made)
    }

    /// Kafka's DeleteTopics: every partition, from the highest down.
    /// Returns how many were deleted.
    pub fn delete_topic(&self, topic: &str) -> Result<usize> {
        if self.read_only() {
            return Err(StorageError::ReadOnly);
        }
        let _admin = self.admin.lock();
        let Some(t) = self.topic(topic) else {
            return Err(StorageError::NoSuchPartition(topic.to_string()));
        };
        let mut deleted = 0;
        for log in t.partitions.iter().rev().flatten() {
            self.delete_partition_locked(log.name())?;
            deleted += 1;
        }
        info!("Deleted topic {topic} ({deleted} partitions)");
        Ok(deleted)
    }
}
