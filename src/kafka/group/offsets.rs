//! The coordinator's partitions: `__consumer_offsets-0 … -(n-1)`, made with
//! `LogManager::create_topic` at the first write (so they appear in the
//! tree and in Metadata, as Kafka's internal topic), a group's records in
//! partition `abs(javaHashCode(group)) % n`, appended through the storage
//! append path (uncompressed, no producer id, one batch per write). At
//! start every record is read back, in offset order, to rebuild committed
//! offsets and groups.
//!
//! `n` is `offsets.topic.num.partitions` (default 1 here, where Kafka's 50
//! would fill the tree); once the topic exists its own count is used, so a
//! changed option never moves a group away from its records.
//!
//! The topic is compacted, as Kafka makes it (`cleanup.policy=compact`,
//! `segment.bytes` = `offsets.topic.segment.bytes`, 100 MiB): the log
//! cleaner keeps the latest record of each key, so a long-running daemon's
//! commits stay bounded. A topic made before it was compacted is made so
//! when the coordinator starts.

use std::sync::Arc;

use log::{info, warn};

use super::records::{Stored, parse, partition_for};
use crate::record::{BatchIter, NewRecord};
use crate::storage::{LogManager, PartitionLog, StorageError};

pub const OFFSETS_TOPIC: &str = "__consumer_offsets";
/// Kafka's topic configs of `__consumer_offsets` (`offsets.topic.segment.bytes`).
const OFFSETS_TOPIC_CONFIGS: &[(&str, Option<&str>)] = &[
    ("cleanup.policy", Some("compact")),
    ("segment.bytes", Some("104857600")),
];

/// Bytes read at a time when the topic is read back.
const READ_CHUNK: u64 = 1 << 20;

pub struct OffsetsTopic {
    mgr: Arc<LogManager>,
    /// The configured count, used when the topic is made.
    configured: u32,
}

/// One record to write: key, and value (`None`: a tombstone).
pub type KeyValue = (Vec<u8>, Option<Vec<u8>>);

impl OffsetsTopic {
    pub fn new(mgr: Arc<LogManager>, configured: u32) -> OffsetsTopic {
        OffsetsTopic { mgr, configured }
    }

    pub fn read_only(&self) -> bool {
        self.mgr.read_only()
    }

    /// The partition count: the topic's, or the configured one before it exists.
    fn count(&self) -> u32 {
        match self.mgr.topic(OFFSETS_TOPIC) {
            Some(t) => t.partitions.len() as u32,
            None => self.configured,
        }
    }

    /// The partition a group's records go to, made with the topic if needed.
    fn partition_of(&self, group: &str) -> Result<Arc<PartitionLog>, StorageError> {
        let count = self.count();
        if self.mgr.topic(OFFSETS_TOPIC).is_none() {
            match self.mgr.create_topic(OFFSETS_TOPIC, count) {
                Ok(t) => {
                    for log in t.partitions.iter().flatten() {
                        log.alter_configs(OFFSETS_TOPIC_CONFIGS)?;
                    }
                    info!("Created {OFFSETS_TOPIC} with {count} partitions for group records")
                }
                // Made meanwhile by another connection: use it.
                Err(StorageError::PartitionExists(_)) => {}
                Err(e) => return Err(e),
            }
        }
        let name = format!("{OFFSETS_TOPIC}-{}", partition_for(group, count));
        self.mgr
            .partition(&name)
            .ok_or(StorageError::NoSuchPartition(name))
    }

    /// Appends a group's records as one batch; returns once they are in the
    /// segment file, as an acknowledged produce.
    pub fn append(&self, group: &str, records: &[KeyValue]) -> Result<(), StorageError> {
        if records.is_empty() {
            return Ok(());
        }
        let log = self.partition_of(group)?;
        let recs: Vec<NewRecord> = records
            .iter()
            .map(|(k, v)| NewRecord {
                key: Some(k),
                value: v.as_deref(),
                headers: &[],
            })
            .collect();
        log.append(&recs).map(|_| ())
    }

    /// Every record of the topic, partition by partition, in offset order.
    /// Records that do not decode are logged and skipped, as Kafka's loader
    /// does with what it cannot read.
    pub fn read_all(&self) -> Vec<Stored> {
        let mut out = Vec::new();
        let Some(topic) = self.mgr.topic(OFFSETS_TOPIC) else {
            return out;
        };
        if topic.partitions.len() as u32 != self.configured {
            info!(
                "{OFFSETS_TOPIC} has {} partitions (offsets.topic.num.partitions is {}): using the topic's count",
                topic.partitions.len(),
                self.configured
            );
        }
        for log in topic.partitions.iter().flatten() {
            if !self.mgr.read_only() {
                compact_if_not(log);
            }
            if let Err(e) = read_partition(log, &mut out) {
                warn!(
                    "Could not read the group records of {}: {e}; groups there start without them",
                    log.name()
                );
            }
        }
        out
    }
}

/// A partition of the topic made before it was compacted is made so.
fn compact_if_not(log: &PartitionLog) {
    if log.config().cleanup_policy.compact()
        || log.check_live().is_err()
        || log.overrides().contains_key("cleanup.policy")
    {
        return;
    }
    match log.alter_configs(&[("cleanup.policy", Some("compact"))]) {
        Ok(()) => info!(
            "{}: cleanup.policy=compact, as Kafka keeps {OFFSETS_TOPIC}",
            log.name()
        ),
        Err(e) => warn!("{}: could not make it compacted: {e}", log.name()),
    }
}

fn read_partition(log: &PartitionLog, out: &mut Vec<Stored>) -> Result<(), StorageError> {
    let mut offset = log.log_start_offset();
    let end = log.high_watermark();
    let mut count = 0usize;
    while offset < end {
        let read = log.read_for_fetch(offset, READ_CHUNK, true)?;
        let Some(slice) = read.slice else { break };
        let bytes = slice.read()?;
        let before = offset;
        for item in BatchIter::new(&bytes) {
            let Ok((_, batch)) = item else { break };
            let next = batch.header.next_offset();
            if batch.header.is_control() {
                offset = next;
                continue;
            }
            for r in batch.records()? {
                if r.offset < offset {
                    continue;
                }
                let Some(key) = r.key.as_deref() else {
                    continue;
                };
                match parse(key, r.value.as_deref()) {
                    Ok(Stored::Other) => {}
                    Ok(s) => {
                        out.push(s);
                        count += 1;
                    }
                    Err(e) => warn!(
                        "{} offset {}: a group record that does not decode ({e}); skipped",
                        log.name(),
                        r.offset
                    ),
                }
            }
            offset = next;
        }
        if offset == before {
            break; // a batch cut by the chunk that cannot be read whole
        }
    }
    info!("Loaded {count} group records from {}", log.name());
    Ok(())
}
