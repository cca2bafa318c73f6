//! What the log cleaner needs of a partition (Kafka's `UnifiedLog` side of
//! compaction): its segments as they stand, producer state's last batches,
//! the checkpoint of its first dirty offset, and the one swap of cleaned
//! segments, under the writer lock, after which the stream forgets what it
//! knew of the segments replaced. Also what a compacted partition refuses
//! (a record without a key) and what `status` shows of its cleaning.

use std::collections::HashMap;
use std::sync::Arc;

use super::PartitionLog;
use crate::error::{Result, StorageError};
use crate::segment::LogSegment;
use commitfs_record::NewRecord;

/// The log cleaner as a partition sees it. In Kafka `UnifiedLog` never
/// calls the cleaner; here `compact` and `status` ask it of the partition,
/// so the partition holds the cleaner behind this, and the cleaner, which
/// works on partitions, stays the one that knows the other.
pub(crate) trait Compactor: Send + Sync {
    /// A pass over `log` now, whatever its dirty ratio.
    fn clean_now(&self, log: &Arc<PartitionLog>) -> Result<Option<LastPass>>;
    /// Cleanable bytes over all bytes, from the first dirty offset
    /// `checkpoint` keeps; 0 for an empty log.
    fn dirty_ratio(&self, log: &Arc<PartitionLog>, checkpoint: Option<i64>) -> Result<f64>;
    /// Whether a pass over the partition `name` failed and made it uncleanable.
    fn is_uncleanable(&self, name: &str) -> bool;
}

/// What the last pass over a partition did, for its `status`.
#[derive(Clone, Debug, PartialEq)]
pub struct LastPass {
    /// When it ended, in ms since the epoch.
    pub ended_ms: i64,
    pub first_dirty_offset: i64,
    pub end_offset: i64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub messages_read: u64,
    pub messages_written: u64,
    pub elapsed_secs: f64,
}

/// A producer's last batch as producer state knows it (Kafka's `LastRecord`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LastRecord {
    pub last_data_offset: Option<i64>,
    pub epoch: i16,
}

/// The cleaner's state of one partition, for `status`.
#[derive(Clone, Debug, PartialEq)]
pub struct CleanerStatus {
    /// The first dirty offset the `cleaner-offset-checkpoint` keeps.
    pub checkpoint: Option<i64>,
    /// Cleanable bytes over all bytes (Kafka's `cleanableRatio`).
    pub dirty_ratio: f64,
    pub last_pass: Option<LastPass>,
    /// A pass failed with something but an I/O error: not cleaned again
    /// until a remount (or a pass asked for with `compact`).
    pub uncleanable: bool,
}

impl PartitionLog {
    /// The segments as they stand, for a pass (which takes no lock).
    pub(crate) fn cleaner_segments(&self) -> Vec<Arc<LogSegment>> {
        self.local.segment_list()
    }

    /// A compacted, writable, online partition that is still there.
    pub(crate) fn cleanable_now(&self) -> bool {
        self.local.writable()
            && self.config().cleanup_policy.compact()
            && self.health.cause().is_none()
            && !self.local.is_deleted()
    }

    pub(crate) fn is_gone(&self) -> bool {
        self.local.is_deleted()
    }

    pub(crate) fn cleaner_checkpoint(&self) -> Option<i64> {
        self.checkpoints
            .cleaner_offset(self.local.topic(), self.local.partition())
    }

    /// Writes the first dirty offset to `cleaner-offset-checkpoint`; a
    /// failed write takes the partition offline.
    pub(crate) fn set_cleaner_checkpoint(&self, offset: i64) -> Result<()> {
        let written = self.checkpoints.set_cleaner_offset(
            self.local.topic(),
            self.local.partition(),
            Some(offset),
        );
        self.health.judge("writing the cleaner checkpoint", written)
    }

    /// Kafka's `lastRecordsOfActiveProducers`.
    pub(crate) fn last_records_of_active_producers(&self) -> HashMap<i64, LastRecord> {
        self.producers
            .last_records()
            .into_iter()
            .map(|(id, last_data_offset, epoch)| {
                (
                    id,
                    LastRecord {
                        last_data_offset,
                        epoch,
                    },
                )
            })
            .collect()
    }

    /// Kafka's `UnifiedLog.replaceSegments`: the cleaned segment at `base`
    /// takes the place of `old`. Nothing learned of the segments replaced
    /// is dropped here: the cleaned one is a new segment, of another file,
    /// and every view keeps what it learned against the segment and file
    /// it counted on (see `stream`), whichever path replaced it. A failure
    /// of the renames takes the partition offline; the next load completes
    /// or undoes the swap.
    pub(crate) fn replace_segments(&self, base: i64, old: &[Arc<LogSegment>]) -> Result<()> {
        self.health.guard("a swap of cleaned segments", || {
            let config = self.config();
            let mut w = self.local.writer()?;
            w.replace_segments(base, old, &config)?;
            for seg in old.iter().filter(|s| s.base_offset != base) {
                self.producers.remove_snapshot(seg.base_offset)?;
            }
            drop(w);
            let mut stream = self.stream.lock();
            self.save_stream(&mut stream)
        })
    }

    pub(crate) fn record_pass(&self, pass: LastPass) {
        *self.last_pass.lock() = Some(pass);
    }

    /// A pass of the log cleaner over this partition now (the tree's
    /// `compact`), whatever its dirty ratio; `None` when nothing was
    /// cleanable (everything is in the active segment, or clean already).
    pub fn clean_now(self: &Arc<Self>) -> Result<Option<LastPass>> {
        if !self.local.writable() {
            return Err(StorageError::ReadOnly);
        }
        self.check_live()?;
        self.cleaner.clean_now(self)
    }

    /// What `status` shows of the cleaner for a compacted partition.
    pub fn cleaner_status(self: &Arc<Self>) -> Result<CleanerStatus> {
        let checkpoint = self.cleaner_checkpoint();
        Ok(CleanerStatus {
            checkpoint,
            dirty_ratio: self.cleaner.dirty_ratio(self, checkpoint)?,
            last_pass: self.last_pass.lock().clone(),
            uncleanable: self.cleaner.is_uncleanable(self.name()),
        })
    }

    /// Kafka's `LogValidator.validateKey`: a compacted partition takes no
    /// record without a key.
    pub fn check_keys(&self, records: &[NewRecord]) -> Result<()> {
        StorageError::check_keys(&self.config(), self.name(), records)
    }
}
