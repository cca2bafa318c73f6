//! Rolls and flushes (Kafka's `LocalLog.roll` and `flush`): sealing the
//! active segment, and making what was written durable up to the recovery
//! point.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use log::{error, info};

use super::{PartitionLog, now_ms, settings};
use crate::storage::config::LogConfig;
use crate::storage::disk;
use crate::storage::error::{IoContext, Result, StorageError};
use crate::storage::segment::LogSegment;

impl PartitionLog {
    /// Rolls the active segment. Rolling an empty active segment does nothing.
    pub fn roll(&self) -> Result<()> {
        if !self.writable {
            return Err(StorageError::ReadOnly);
        }
        self.health.guard("a roll", || {
            let config = self.config();
            let w = self.writer.lock();
            if w.closed {
                return Err(StorageError::NoSuchPartition(self.name.clone()));
            }
            self.roll_now(&config)
        })
    }

    /// A roll outside an append: at the log end, with nothing unpublished.
    pub(super) fn roll_now(&self, config: &LogConfig) -> Result<()> {
        let new_base = self.log_end_offset();
        if let Some(sealed) = self.roll_locked(config, new_base)? {
            sealed.unload_indexes();
            self.schedule_flush(new_base);
        }
        Ok(())
    }

    /// Seals the active segment and starts one at `new_base`. The caller
    /// unloads the sealed segment's indexes and schedules its flush once
    /// what it wrote is published.
    pub(super) fn roll_locked(
        &self,
        config: &LogConfig,
        new_base: i64,
    ) -> Result<Option<Arc<LogSegment>>> {
        let started = Instant::now();
        let active = self.writable_active()?;
        if active.write_pos()? == 0 {
            return Ok(None);
        }
        // The producer snapshot for the new segment, then the segment: if
        // the disk is full the old segment stays active, untouched, and the
        // snapshot goes again (it may hold batches of an append being undone).
        self.take_producer_snapshot(new_base)?;
        let created =
            LogSegment::create(&self.dir, new_base, settings(config), self.health.clone());
        let segment = match created {
            Ok(s) => Arc::new(s),
            Err(e) => {
                self.remove_producer_snapshot(new_base)?;
                return Err(e);
            }
        };
        if let Err(e) = active.seal() {
            // A failure (the partition goes offline); the new files go, so
            // that recovery finds the old segment last.
            if let Err(d) = segment.delete_files() {
                error!(
                    "Could not remove {} after a failed roll: {d}",
                    segment.path().display()
                );
            }
            return Err(e);
        }
        self.tally.sealed(active.base_offset, active.write_pos()?);
        self.tally.start_segment(new_base);
        self.segments.write().insert(new_base, segment);
        info!(
            "[Log partition={}, dir={}] Rolled new log segment at offset {new_base} in {} ms.",
            self.name,
            self.dir.parent().unwrap_or(&self.dir).display(),
            started.elapsed().as_millis()
        );
        Ok(Some(active))
    }

    /// Kafka flushes a sealed segment asynchronously, advancing the recovery point.
    pub(super) fn schedule_flush(&self, up_to: i64) {
        let me = self.self_ref.clone();
        self.flusher.schedule(&self.name, move || {
            if let Some(log) = me.upgrade()
                && !log.deleted.load(Ordering::Acquire)
                && let Err(e) = log.flush_up_to(up_to)
                && !matches!(e, StorageError::Offline { .. })
            {
                error!("Error flushing {} after roll: {e}", log.name);
            }
        });
    }

    /// fsyncs every segment up to the LEO, advances the recovery point, writes the checkpoint.
    /// A deleted partition (still held by an open handle) refuses:
    /// `NoSuchPartition`.
    pub fn flush(&self) -> Result<()> {
        if self.deleted.load(Ordering::Acquire) {
            return Err(StorageError::NoSuchPartition(self.name.clone()));
        }
        self.flush_up_to(self.log_end_offset())
    }

    fn flush_up_to(&self, offset: i64) -> Result<()> {
        if !self.writable {
            return Ok(());
        }
        self.health.guard("a flush", || {
            self.sync_segments(Some(offset))?;
            self.advance_recovery_point(offset)
        })
    }

    /// fsyncs the segments below `below` (all of them: `None`), everything
    /// written to them, and the directory, whose entries new segments need.
    pub(super) fn sync_segments(&self, below: Option<i64>) -> Result<()> {
        let _f = self.flush_lock.lock();
        let segs: Vec<_> = self
            .segments
            .read()
            .range(..below.unwrap_or(i64::MAX))
            .map(|(_, s)| s.clone())
            .collect();
        for seg in segs {
            if seg.flush()? {
                self.fsyncs.fetch_add(1, Ordering::Relaxed);
            }
        }
        disk::sync_dir("partition.flush.dir_fsync", &self.dir).synced(&self.dir)?;
        self.last_flush_ms.store(now_ms(), Ordering::Relaxed);
        Ok(())
    }

    /// Moves the recovery point up to `offset`, once what is below it is
    /// synced, and writes the checkpoint.
    pub(super) fn advance_recovery_point(&self, offset: i64) -> Result<()> {
        if offset > self.recovery_point() {
            self.recovery_point.fetch_max(offset, Ordering::AcqRel);
            if !self.deleted.load(Ordering::Acquire) {
                self.checkpoints.set_recovery_point(
                    &self.topic,
                    self.partition,
                    self.recovery_point(),
                )?;
            }
        }
        Ok(())
    }

    /// Flushes when `flush.ms` has passed since the last flush.
    /// An offline partition is skipped: the failure was logged once.
    pub fn maybe_flush_on_time(&self, now_ms: i64) -> Result<()> {
        let flush_ms = self.config().flush_ms;
        if flush_ms == i64::MAX
            || self.log_end_offset() == self.recovery_point()
            || self.health.cause().is_some()
        {
            return Ok(());
        }
        if now_ms - self.last_flush_ms.load(Ordering::Relaxed) >= flush_ms {
            self.flush()?;
        }
        Ok(())
    }
}
