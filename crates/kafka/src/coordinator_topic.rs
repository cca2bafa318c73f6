//! A coordinator's internal topic (`__consumer_offsets`,
//! `__transaction_state`): made with `LogManager::create_topic` at the
//! first write, with Kafka's configs (so it appears in the tree and in
//! Metadata as Kafka's internal topic); a key's records in partition
//! `abs(javaHashCode(key)) % n`, appended through the storage append path
//! (uncompressed, no producer id, one batch per write); every partition
//! read back at start by the coordinator that owns the topic.
//!
//! `n` is the configured count (default 1 here, where Kafka's 50 would
//! fill the tree); once the topic exists its own count is used, so a
//! changed option never moves a key away from its records.
//!
//! The topics are compacted, as Kafka makes them: the log cleaner keeps the
//! latest record of each key, so a long-running daemon's writes stay
//! bounded. A topic made before it was compacted is made so when its
//! coordinator starts.

use std::sync::Arc;

use log::{info, warn};

use commitfs_record::{Batch, BatchIter, NewRecord};
use commitfs_storage::{LogManager, PartitionLog, StorageError};

/// One record to write: key, and value (`None`: a tombstone).
pub type KeyValue = (Vec<u8>, Option<Vec<u8>>);

/// Kafka's `Utils.abs(key.hashCode()) % count`, with Java's `String.hashCode`
/// over UTF-16 code units.
pub fn partition_for(key: &str, count: u32) -> u32 {
    let mut h: i32 = 0;
    for unit in key.encode_utf16() {
        h = h.wrapping_mul(31).wrapping_add(unit as i32);
    }
    // Kafka's `Utils.abs`: `Integer.MIN_VALUE` maps to 0.
    let abs = if h == i32::MIN { 0 } else { h.abs() };
    abs as u32 % count.max(1)
}

pub struct CoordinatorTopic {
    mgr: Arc<LogManager>,
    name: &'static str,
    /// Kafka's topic configs for it.
    configs: &'static [(&'static str, Option<&'static str>)],
    /// The configured count, used when the topic is made.
    configured: u32,
    /// What its records are, for the log lines.
    what: &'static str,
}

impl CoordinatorTopic {
    pub fn new(
        mgr: Arc<LogManager>,
        name: &'static str,
        configs: &'static [(&'static str, Option<&'static str>)],
        configured: u32,
        what: &'static str,
    ) -> CoordinatorTopic {
        CoordinatorTopic {
            mgr,
            name,
            configs,
            configured,
            what,
        }
    }

    pub fn name(&self) -> &'static str {
        self.name
    }

    pub fn read_only(&self) -> bool {
        self.mgr.read_only()
    }

    /// The partition count: the topic's, or the configured one before it exists.
    pub fn count(&self) -> u32 {
        match self.mgr.topic(self.name) {
            Some(t) => t.partitions.len() as u32,
            None => self.configured,
        }
    }

    /// The partition a key's records go to.
    pub fn partition_index(&self, key: &str) -> u32 {
        partition_for(key, self.count())
    }

    /// The partition a key's records go to, made with the topic if needed.
    pub fn partition_of(&self, key: &str) -> Result<Arc<PartitionLog>, StorageError> {
        let count = self.count();
        if self.mgr.topic(self.name).is_none() {
            match self.mgr.create_topic(self.name, count) {
                Ok(t) => {
                    for log in t.partitions.iter().flatten() {
                        log.alter_configs(self.configs)?;
                    }
                    info!(
                        "Created {} with {count} partitions for {}",
                        self.name, self.what
                    )
                }
                // Made meanwhile by another connection: use it.
                Err(StorageError::PartitionExists(_)) => {}
                Err(e) => return Err(e),
            }
        }
        let name = format!("{}-{}", self.name, partition_for(key, count));
        self.mgr
            .partition(&name)
            .ok_or(StorageError::NoSuchPartition(name))
    }

    /// Appends a key's records as one batch; returns once they are in the
    /// segment file, as an acknowledged produce.
    pub fn append(&self, key: &str, records: &[KeyValue]) -> Result<(), StorageError> {
        if records.is_empty() {
            return Ok(());
        }
        let log = self.partition_of(key)?;
        let recs = new_records(records);
        log.append(&recs).map(|_| ())
    }

    /// Appends a key's records as one transactional batch of producer
    /// (`producer_id`, `epoch`), base sequence 0, as Kafka's group
    /// coordinator writes a TxnOffsetCommit
    /// (`GroupMetadataManager.storeOffsets`); they count once the
    /// transaction's marker is written.
    pub fn append_transactional(
        &self,
        key: &str,
        records: &[KeyValue],
        (producer_id, epoch): (i64, i16),
    ) -> Result<(), StorageError> {
        if records.is_empty() {
            return Ok(());
        }
        let log = self.partition_of(key)?;
        let recs = new_records(records);
        let mut b = Vec::new();
        commitfs_record::encode_batch(&mut b, 0, commitfs_storage::now_ms(), &recs);
        // Attributes: transactional; producer id, epoch, base sequence 0.
        b[21..23].copy_from_slice(&0x10i16.to_be_bytes());
        b[43..51].copy_from_slice(&producer_id.to_be_bytes());
        b[51..53].copy_from_slice(&epoch.to_be_bytes());
        b[53..57].copy_from_slice(&0i32.to_be_bytes());
        let crc = commitfs_record::compute_crc(&b);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        log.append_from_coordinator(&b).map(|_| ())
    }

    /// Every partition of the topic, to read back at start (none before it
    /// exists); each made compacted first if it was not.
    pub fn partitions(&self) -> Vec<Arc<PartitionLog>> {
        let Some(topic) = self.mgr.topic(self.name) else {
            return Vec::new();
        };
        if topic.partitions.len() as u32 != self.configured {
            info!(
                "{} has {} partitions ({} are configured): using the topic's count",
                self.name,
                topic.partitions.len(),
                self.configured
            );
        }
        let logs: Vec<Arc<PartitionLog>> = topic.partitions.iter().flatten().cloned().collect();
        if !self.mgr.read_only() {
            for log in &logs {
                self.compact_if_not(log);
            }
        }
        logs
    }

    /// A partition of the topic made before it was compacted is made so.
    fn compact_if_not(&self, log: &PartitionLog) {
        if log.config().cleanup_policy.compact()
            || log.check_live().is_err()
            || log.overrides().contains_key("cleanup.policy")
        {
            return;
        }
        match log.alter_configs(&[("cleanup.policy", Some("compact"))]) {
            Ok(()) => info!(
                "{}: cleanup.policy=compact, as Kafka keeps {}",
                log.name(),
                self.name
            ),
            Err(e) => warn!("{}: could not make it compacted: {e}", log.name()),
        }
    }
}

/// Key-value pairs as the records of an append.
fn new_records(records: &[KeyValue]) -> Vec<NewRecord<'_>> {
    records
        .iter()
        .map(|(k, v)| NewRecord {
            key: Some(k),
            value: v.as_deref(),
            headers: &[],
        })
        .collect()
}

/// Bytes read at a time when a partition is read back.
const READ_CHUNK: u64 = 1 << 20;

/// Hands `f` every batch of `log` from its log start to its high watermark,
/// in offset order, CRC checked, with the offset the read had reached (a
/// batch may begin below it, after a chunk cut it). A partition that cannot
/// be read to its end (offline, an I/O error, a batch that does not parse
/// or fails its CRC), or that `f` refuses, is an `Err`: what it holds is
/// unknown, so the caller applies none of it.
pub fn for_each_batch(
    log: &PartitionLog,
    mut f: impl FnMut(&Batch, i64) -> Result<(), String>,
) -> Result<(), String> {
    log.check_online().map_err(|e| e.to_string())?;
    let mut offset = log.log_start_offset();
    let end = log.high_watermark();
    while offset < end {
        let at = |e: &dyn std::fmt::Display| format!("reading offset {offset}: {e}");
        let read = log
            .read_for_fetch(offset, READ_CHUNK, true)
            .map_err(|e| at(&e))?;
        let Some(slice) = read.slice else {
            return Err(format!(
                "nothing to read at offset {offset}, below the log end {end}"
            ));
        };
        let bytes = slice.read().map_err(|e| at(&e))?;
        let before = offset;
        for item in BatchIter::new(&bytes) {
            let batch = match item {
                Ok((_, batch)) => batch,
                // A chunk may end inside a batch: read on from there.
                Err(_) if offset > before => break,
                Err(e) => return Err(format!("the batch at offset {offset} does not parse: {e}")),
            };
            batch.verify_crc().map_err(|e| e.to_string())?;
            f(&batch, offset)?;
            offset = batch.header.next_offset();
        }
        if offset == before {
            return Err(format!("no batch could be read at offset {offset}"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_hash_partitioning() {
        // "test-group".hashCode() == 627841412 in Java; "polygenelubricants"
        // hashes to i32::MIN, which Kafka's Utils.abs maps to 0.
        assert_eq!(partition_for("test-group", 50), 12);
        assert_eq!(partition_for("polygenelubricants", 50), 0);
        assert_eq!(partition_for("", 50), 0);
        assert_eq!(partition_for("anything", 1), 0);
    }
}
