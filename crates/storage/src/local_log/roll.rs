//! Rolls and flushes (Kafka's `LocalLog.roll` and `flush`): sealing the
//! active segment, and making what was written durable up to the recovery
//! point.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Instant;

use log::{error, info};
use parking_lot::Mutex;

use super::{LocalLog, LogWriter, Rolled, settings};
use crate::config::LogConfig;
use crate::disk;
use crate::error::{IoContext, Result, StorageError};
use crate::now_ms;
use crate::producer_state::ProducerStateManager;
use crate::segment::LogSegment;

/// What a flush keeps between two flushes.
pub(super) struct Flushes {
    /// One flush at a time: each syncs everything written before it.
    lock: Mutex<()>,
    /// When the last flush ran; `flush.ms` counts from it (from the open at first).
    last_ms: AtomicI64,
    /// fsync(2) calls on `.log` files.
    fsyncs: AtomicU64,
}

impl Flushes {
    pub fn new() -> Flushes {
        Flushes {
            lock: Mutex::new(()),
            last_ms: AtomicI64::new(now_ms()),
            fsyncs: AtomicU64::new(0),
        }
    }
}

/// What a roll needs from the partition: its config, and the producer
/// state whose snapshot it writes at the new segment's base.
pub(super) struct RollContext<'a> {
    pub config: &'a LogConfig,
    pub producers: &'a ProducerStateManager,
}

impl LogWriter<'_> {
    /// Rolls the active segment at the log end, outside an append (nothing
    /// is unpublished). Rolling an empty active segment does nothing.
    pub fn roll(
        &mut self,
        config: &LogConfig,
        producers: &ProducerStateManager,
    ) -> Result<Option<Rolled>> {
        let new_base = self.log_end_offset();
        let roll = RollContext { config, producers };
        let Some((sealed, rolled)) = self.roll_at(&roll, new_base)? else {
            return Ok(None);
        };
        sealed.unload_indexes();
        self.log.schedule_flush(new_base);
        Ok(Some(rolled))
    }

    /// Kafka's `maybeRoll`, before a batch of `batch_size` bytes whose
    /// offsets end at `last_offset` is written at `new_base`. Returns the
    /// segment it sealed, if it rolled.
    pub(super) fn maybe_roll(
        &mut self,
        roll: &RollContext,
        batch_size: u64,
        max_timestamp: i64,
        last_offset: i64,
        new_base: i64,
    ) -> Result<Option<(Arc<LogSegment>, Rolled)>> {
        let active = self.active()?;
        if active.write_pos()? == 0 {
            return Ok(None);
        }
        let config = roll.config;
        let segment_ms = config
            .max_segment_ms()
            .saturating_sub(config.segment_jitter_ms);
        if active.should_roll(
            batch_size,
            max_timestamp,
            config.segment_bytes as u64,
            segment_ms,
        )? || !active.can_convert_to_relative(last_offset)
        {
            return self.roll_at(roll, new_base);
        }
        Ok(None)
    }

    /// Seals the active segment and starts one at `new_base`. The caller
    /// unloads the sealed segment's indexes and schedules its flush once
    /// what it wrote is published.
    fn roll_at(
        &mut self,
        roll: &RollContext,
        new_base: i64,
    ) -> Result<Option<(Arc<LogSegment>, Rolled)>> {
        let started = Instant::now();
        let active = self.active()?;
        if active.write_pos()? == 0 {
            return Ok(None);
        }
        let log = self.log;
        // The producer snapshot for the new segment, then the segment: if
        // the disk is full the old segment stays active, untouched, and the
        // snapshot goes again (it may hold batches of an append being undone).
        roll.producers.take_snapshot(new_base)?;
        let created = LogSegment::create(
            &log.dir,
            new_base,
            settings(roll.config),
            log.health.clone(),
        );
        let segment = match created {
            Ok(s) => Arc::new(s),
            Err(e) => {
                roll.producers.remove_snapshot(new_base)?;
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
        let rolled = Rolled {
            sealed: active.base_offset,
            sealed_id: active.id(),
            sealed_size: active.write_pos()?,
            new_base,
        };
        log.segments.insert(segment);
        info!(
            "[Log partition={}, dir={}] Rolled new log segment at offset {new_base} in {} ms.",
            log.name(),
            log.dir.parent().unwrap_or(&log.dir).display(),
            started.elapsed().as_millis()
        );
        Ok(Some((active, rolled)))
    }
}

impl LocalLog {
    /// Kafka flushes a sealed segment asynchronously, advancing the recovery point.
    pub(super) fn schedule_flush(&self, up_to: i64) {
        let me = self.self_ref.clone();
        self.flusher.schedule(self.name(), move || {
            if let Some(log) = me.upgrade()
                && !log.is_deleted()
                && let Err(e) = log.flush_up_to(up_to)
                && !matches!(e, StorageError::Offline { .. })
            {
                error!("Error flushing {} after roll: {e}", log.name());
            }
        });
    }

    /// fsyncs every segment up to the log end, advances the recovery point,
    /// writes the checkpoint. A deleted log (still held by an open handle)
    /// refuses: `NoSuchPartition`.
    pub fn flush(&self) -> Result<()> {
        if self.is_deleted() {
            return Err(StorageError::NoSuchPartition(self.name().to_string()));
        }
        self.flush_up_to(self.log_end_offset())
    }

    fn flush_up_to(&self, offset: i64) -> Result<()> {
        if !self.writable {
            return Ok(());
        }
        self.health.guard("a flush", || {
            let flushed = self
                .sync_segments(Some(offset))
                .and_then(|()| self.advance_recovery_point(offset));
            // A flush that raced the partition's deletion (a background
            // flush after a roll) lost its files to it: nothing failed.
            match flushed {
                Err(_) if self.is_deleted() => {
                    Err(StorageError::NoSuchPartition(self.name().to_string()))
                }
                r => r,
            }
        })
    }

    /// Flushes when `flush_ms` has passed since the last flush. An offline
    /// log is skipped: the failure was logged once.
    pub(crate) fn flush_on_time(&self, now_ms: i64, flush_ms: i64) -> Result<()> {
        if flush_ms == i64::MAX
            || self.log_end_offset() == self.recovery_point()
            || self.health.cause().is_some()
        {
            return Ok(());
        }
        if now_ms - self.flushes.last_ms.load(Ordering::Relaxed) >= flush_ms {
            self.flush()?;
        }
        Ok(())
    }

    /// fsync(2) calls on `.log` files so far.
    pub fn fsyncs(&self) -> u64 {
        self.flushes.fsyncs.load(Ordering::Relaxed)
    }

    /// fsyncs the segments below `below` (all of them: `None`), everything
    /// written to them, and the directory, whose entries new segments need.
    pub(super) fn sync_segments(&self, below: Option<i64>) -> Result<()> {
        let _f = self.flushes.lock.lock();
        for seg in self.segments.below(below.unwrap_or(i64::MAX)) {
            if seg.flush()? {
                self.flushes.fsyncs.fetch_add(1, Ordering::Relaxed);
            }
        }
        disk::sync_dir("partition.flush.dir_fsync", &self.dir).synced(&self.dir)?;
        self.flushes.last_ms.store(now_ms(), Ordering::Relaxed);
        Ok(())
    }

    /// Moves the recovery point up to `offset`, once what is below it is
    /// synced, and writes the checkpoint.
    pub(super) fn advance_recovery_point(&self, offset: i64) -> Result<()> {
        if offset > self.recovery_point() {
            self.recovery_point.fetch_max(offset, Ordering::AcqRel);
            if !self.is_deleted() {
                self.checkpoints.set_recovery_point(
                    self.topic(),
                    self.partition(),
                    self.recovery_point(),
                )?;
            }
        }
        Ok(())
    }
}
