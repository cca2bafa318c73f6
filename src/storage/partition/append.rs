//! Appends (Kafka's `UnifiedLog.append` and `maybeRoll`): records are packed
//! into batches, written unpublished, and published together, or undone.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use log::{error, warn};

use super::{PartitionLog, Writer, now_ms};
use crate::record::{
    EncodedBatch, NewRecord, TimestampType, TooLarge, encode_batches, set_log_append_time,
};
use crate::storage::config::LogConfig;
use crate::storage::error::{Result, StorageError};
use crate::storage::segment::{LogSegment, SegmentSnapshot};

/// Where an append landed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppendInfo {
    pub first_offset: i64,
    pub last_offset: i64,
    /// How many batches the records were packed into.
    pub batches: usize,
    /// Bytes added to the log.
    pub bytes: u64,
}

/// One encoded batch on its way into the log.
pub(super) struct BatchToWrite<'a> {
    pub bytes: &'a [u8],
    pub last_offset: i64,
    /// What `segment.ms` rolls by.
    pub max_timestamp: i64,
    /// Bytes it adds to the consumer stream.
    pub stream_bytes: u64,
}

/// What an append has written so far.
pub(super) struct Written {
    /// Segments it wrote to, the first being the one active at its start.
    segments: Vec<Arc<LogSegment>>,
    /// Segments it sealed by rolling.
    sealed: Vec<Arc<LogSegment>>,
    pub next_offset: i64,
    pub bytes: u64,
}

impl PartitionLog {
    /// Appends `records` at the log end offset, packed in order into the fewest
    /// batches that each fit `max.message.bytes` and `segment.bytes`. All or
    /// nothing: a record that fits no batch fails the whole call with
    /// `RecordTooLarge` (or `BatchLargerThanSegment`) before anything is
    /// written. Returns once the bytes are in the segment file (page cache),
    /// and with `flush.messages` due, once they are fsynced: an error means
    /// nothing of the append was published.
    pub fn append(&self, records: &[NewRecord]) -> Result<AppendInfo> {
        if records.is_empty() {
            return Err(StorageError::EmptyAppend);
        }
        if !self.writable {
            return Err(StorageError::ReadOnly);
        }
        self.health.guard("an append", || self.append_now(records))
    }

    fn append_now(&self, records: &[NewRecord]) -> Result<AppendInfo> {
        let config = self.config();
        let timestamp = now_ms();
        ENCODED.with_borrow_mut(|enc| {
            // Encoded before the writer lock, so a refused record takes no
            // lock and another appender's write overlaps this encoding.
            enc.encode(records, &config, timestamp)?;
            let (first_offset, written) =
                self.append_with(&config, records.len() as i64, |_, written| {
                    self.write_encoded(&config, enc, timestamp, written)
                })?;
            let batches = enc.batches.len();
            enc.release_if_large();
            Ok(AppendInfo {
                first_offset,
                last_offset: written.next_offset - 1,
                batches,
                bytes: written.bytes,
            })
        })
    }

    /// The one append path, whoever appends (the tree's `log`, a Kafka
    /// produce): under the writer lock, `write` writes batches of `count`
    /// records unpublished; they become visible together, or, if anything
    /// fails, are cut away again. Then waiting fetches are woken. Returns the
    /// first offset written and what was written. Call it inside
    /// `health.guard`.
    pub(super) fn append_with(
        &self,
        config: &LogConfig,
        count: i64,
        write: impl FnOnce(&mut Writer, &mut Written) -> Result<()>,
    ) -> Result<(i64, Written)> {
        let mut w = self.writer.lock();
        if w.closed {
            return Err(StorageError::NoSuchPartition(self.name.clone()));
        }
        // All or nothing: batches are written unpublished and become visible
        // together; if one fails, the ones before it are cut away again.
        let first_offset = self.log_end_offset.load(Ordering::Acquire);
        let first_segment = self.writable_active()?;
        let snapshot = first_segment.snapshot()?;
        let mut written = Written {
            segments: vec![first_segment.clone()],
            sealed: Vec::new(),
            next_offset: first_offset,
            bytes: 0,
        };
        let end = first_offset + count;
        let flush_due = end - self.recovery_point() >= config.flush_messages;
        // A flush that is due happens before the publish, so that a failed
        // fsync is undone like a failed write: an append is never published
        // and then reported failed.
        let result = write(&mut w, &mut written).and_then(|()| {
            if flush_due {
                self.sync_segments(None)
            } else {
                Ok(())
            }
        });
        if let Err(e) = result {
            // An undo that fails too is a failure, never a refusal: its
            // error is the caller's, as when a segment cannot cut back a
            // failed write.
            self.undo_append(&first_segment, &snapshot, &written, &e)?;
            return Err(e);
        }
        for seg in &written.segments {
            seg.publish();
        }
        self.log_end_offset
            .store(written.next_offset, Ordering::Release);
        drop(w);
        self.appends.notify();
        self.after_publish(&written, flush_due);
        Ok((first_offset, written))
    }

    /// What follows a publish: sealed segments' indexes unloaded, their
    /// flush scheduled, or the recovery point advanced after a due flush.
    fn after_publish(&self, written: &Written, flush_due: bool) {
        for sealed in &written.sealed {
            sealed.unload_indexes();
        }
        if let Some(last_sealed) = written.segments.last()
            && written.segments.len() > 1
            && !flush_due
        {
            self.schedule_flush(last_sealed.base_offset);
        }
        if flush_due {
            // The append is published and durable: a checkpoint that cannot
            // be written takes the partition offline, but the append stands.
            let _ = self.health.judge(
                "the recovery point checkpoint",
                self.advance_recovery_point(written.next_offset),
            );
        }
    }

    /// Writes each encoded batch of an append, rolling where Kafka would:
    /// its base offset is set here, under the writer lock, where the log end
    /// is known (it lies outside the CRC).
    fn write_encoded(
        &self,
        config: &LogConfig,
        enc: &mut Encoded,
        timestamp: i64,
        written: &mut Written,
    ) -> Result<()> {
        let log_append_time = config.message_timestamp_type == TimestampType::LogAppendTime;
        for b in &enc.batches {
            let base = written.next_offset;
            let bytes = &mut enc.buf[b.range.clone()];
            bytes[..8].copy_from_slice(&base.to_be_bytes());
            if log_append_time {
                set_log_append_time(bytes, timestamp);
            }
            let batch = BatchToWrite {
                bytes,
                last_offset: base + b.records as i64 - 1,
                max_timestamp: timestamp,
                stream_bytes: b.stream_bytes,
            };
            self.write_batch(config, &batch, written)?;
        }
        Ok(())
    }

    /// Writes one batch at `written.next_offset` (its base offset already set),
    /// rolling first where Kafka would. Writer lock held.
    pub(super) fn write_batch(
        &self,
        config: &LogConfig,
        batch: &BatchToWrite,
        written: &mut Written,
    ) -> Result<()> {
        let base = written.next_offset;
        let size = batch.bytes.len() as u64;
        if let Some(sealed) =
            self.maybe_roll(config, size, batch.max_timestamp, batch.last_offset, base)?
        {
            written.sealed.push(sealed);
            written.segments.push(self.writable_active()?);
        }
        let seg = self.writable_active()?;
        let pos = seg.write_pos()?;
        seg.append(batch.bytes)?;
        self.tally
            .appended(seg.base_offset, pos, size, batch.stream_bytes);
        written.bytes += size;
        written.next_offset = batch.last_offset + 1;
        Ok(())
    }

    /// Removes every trace of a failed append: segments it rolled to are
    /// deleted, the first one is cut back and made active again. An undo
    /// that fails leaves bytes the partition no longer accounts for, so it
    /// takes the partition offline, and its error is returned.
    fn undo_append(
        &self,
        first: &Arc<LogSegment>,
        snapshot: &SegmentSnapshot,
        written: &Written,
        cause: &StorageError,
    ) -> Result<()> {
        let undone = (|| {
            for seg in &written.segments[1..] {
                self.segments.write().remove(&seg.base_offset);
                seg.delete_files()?;
            }
            first.rollback(snapshot)
        })();
        self.tally.forget();
        match undone {
            Ok(()) => {
                warn!(
                    "Append to {} failed ({cause}); nothing of it was kept (log end offset stays {})",
                    self.name,
                    self.log_end_offset()
                );
                Ok(())
            }
            Err(e) => {
                error!(
                    "Could not undo a failed append to {}: {e}; the unpublished bytes stay past the log end until recovery",
                    self.name
                );
                self.health
                    .fail("an append", &format!("{cause}; undoing it failed too: {e}"));
                Err(e)
            }
        }
    }

    /// Kafka's `maybeRoll`, called with the writer lock held. Returns the
    /// segment it sealed, if it rolled.
    fn maybe_roll(
        &self,
        config: &LogConfig,
        batch_size: u64,
        max_timestamp: i64,
        last_offset: i64,
        new_base: i64,
    ) -> Result<Option<Arc<LogSegment>>> {
        let active = self.writable_active()?;
        if active.write_pos()? == 0 {
            return Ok(None);
        }
        let segment_ms = config.segment_ms.saturating_sub(config.segment_jitter_ms);
        if active.should_roll(
            batch_size,
            max_timestamp,
            config.segment_bytes as u64,
            segment_ms,
        )? || !active.can_convert_to_relative(last_offset)
        {
            return self.roll_locked(config, new_base);
        }
        Ok(None)
    }
}

/// An append's batches, encoded. One per thread, reused: a 1 MiB write
/// to `log` encodes into the same buffer every time.
#[derive(Default)]
struct Encoded {
    buf: Vec<u8>,
    batches: Vec<EncodedBatch>,
}

thread_local! {
    static ENCODED: std::cell::RefCell<Encoded> = std::cell::RefCell::default();
}

impl Encoded {
    /// Encodes `records` packed in order into the fewest batches that each
    /// fit both `max.message.bytes` and `segment.bytes`. A record that fits
    /// a batch of its own under neither is refused, naming the limit it breaks.
    fn encode(&mut self, records: &[NewRecord], config: &LogConfig, timestamp: i64) -> Result<()> {
        let max = config.max_message_bytes.max(0) as usize;
        let segment_bytes = config.segment_bytes.max(0) as usize;
        let codec = config.compression_type.codec();
        self.buf.clear();
        self.batches.clear();
        encode_batches(
            &mut self.buf,
            timestamp,
            records,
            max.min(segment_bytes),
            codec,
            &mut self.batches,
        )
        .map_err(|TooLarge { size }| {
            if size > max {
                StorageError::RecordTooLarge { size, max }
            } else {
                StorageError::BatchLargerThanSegment {
                    size,
                    max: segment_bytes,
                }
            }
        })
    }

    /// A rare huge append does not pin its buffer for the thread's life.
    fn release_if_large(&mut self) {
        if self.buf.capacity() > 16 << 20 {
            *self = Encoded::default();
        }
    }
}
