//! Writing an append's batches (Kafka's `LocalLog.append`, with the roll
//! `UnifiedLog.maybeRoll` asks for): at the log end, unpublished, rolling
//! where Kafka would; then published together, or undone.
//!
//! Why a write and a publish, two calls: between them the partition counts
//! the batches in its stream tally, and after the publish it commits
//! producer state, all under the writer lock it holds, so that the next
//! append sees both. What has to wait for nothing (unloading sealed
//! segments' indexes, their flush, a due recovery point checkpoint) comes
//! after the lock is let go.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use log::{error, warn};

use super::roll::RollContext;
use super::{LocalLog, LogWriter};
use crate::config::LogConfig;
use crate::error::{Result, StorageError};
use crate::producer_state::ProducerStateManager;
use crate::segment::{LogSegment, SegmentSnapshot};
use commitfs_record::state_files::AbortedTxn;
use commitfs_record::{BatchHeader, EncodedBatch};

/// A batch of an append where it landed, or a roll between two of them:
/// in order, what the partition's stream tally counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Landed {
    Batch {
        segment: i64,
        position: u64,
        size: u64,
    },
    Rolled(Rolled),
}

/// A roll: segment `sealed` became inactive at `sealed_size` bytes, and a
/// new one at `new_base` is active.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Rolled {
    pub sealed: i64,
    /// The sealed segment's [`LogSegment::id`](crate::segment::LogSegment::id).
    pub sealed_id: u64,
    pub sealed_size: u64,
    pub new_base: i64,
}

/// What an append wrote: unpublished until [`LogWriter::publish`].
pub(crate) struct Written {
    pub first_offset: i64,
    /// The log end offset once it is published.
    pub next_offset: i64,
    /// Bytes added to the log.
    pub bytes: u64,
    pub landed: Vec<Landed>,
    /// Segments it wrote to, the first being the one active at its start.
    segments: Vec<Arc<LogSegment>>,
    /// Segments it sealed by rolling.
    sealed: Vec<Arc<LogSegment>>,
    /// `flush.messages` was due: the batches were fsynced before the publish.
    flush_due: bool,
}

impl LogWriter<'_> {
    /// Writes `batches` (whole RecordBatches back to back, all but their
    /// base offsets final, each where `parsed` says, with its header) at
    /// the log end, unpublished, setting each one's base offset there (it
    /// lies outside the CRC); rolls first wherever
    /// Kafka would, and each roll writes `producers`' snapshot at the new
    /// segment's base. With `flush.messages` due, the batches are fsynced
    /// too. All or nothing: if anything fails, everything written is cut
    /// away again (an undo that fails takes the partition offline).
    pub fn append(
        &mut self,
        batches: &mut [u8],
        parsed: &[EncodedBatch],
        config: &LogConfig,
        producers: &ProducerStateManager,
    ) -> Result<Written> {
        let first_offset = self.log_end_offset();
        let first_segment = self.active()?;
        let snapshot = first_segment.snapshot()?;
        let count: i64 = parsed
            .iter()
            .map(|b| b.header.last_offset_delta as i64 + 1)
            .sum();
        let mut written = Written {
            first_offset,
            next_offset: first_offset,
            bytes: 0,
            landed: Vec::with_capacity(parsed.len()),
            segments: vec![first_segment.clone()],
            sealed: Vec::new(),
            flush_due: first_offset + count - self.log.recovery_point() >= config.flush_messages,
        };
        let roll = RollContext { config, producers };
        // A flush that is due happens before the publish, so that a failed
        // fsync is undone like a failed write: an append is never published
        // and then reported failed.
        let result = self
            .write_batches(batches, parsed, &roll, &mut written)
            .and_then(|()| index_aborted(producers, &written))
            .and_then(|()| match written.flush_due {
                true => self.log.sync_segments(None),
                false => Ok(()),
            });
        if let Err(e) = result {
            // An undo that fails too is a failure, never a refusal: its
            // error is the caller's, as when a segment cannot cut back a
            // failed write.
            self.undo(&first_segment, &snapshot, &written, &e)?;
            return Err(e);
        }
        Ok(written)
    }

    fn write_batches(
        &mut self,
        batches: &mut [u8],
        parsed: &[EncodedBatch],
        roll: &RollContext,
        written: &mut Written,
    ) -> Result<()> {
        for b in parsed {
            let base = written.next_offset;
            let bytes = &mut batches[b.range.clone()];
            bytes[..8].copy_from_slice(&base.to_be_bytes());
            let header = BatchHeader {
                base_offset: base,
                ..b.header
            };
            self.write_batch(bytes, &header, roll, written)?;
        }
        Ok(())
    }

    /// Writes one batch at `written.next_offset` (its base offset already
    /// set, in its bytes and its `header`), rolling first where Kafka would.
    fn write_batch(
        &mut self,
        bytes: &[u8],
        header: &BatchHeader,
        roll: &RollContext,
        written: &mut Written,
    ) -> Result<()> {
        let size = bytes.len() as u64;
        let base = written.next_offset;
        let last_offset = header.last_offset();
        if let Some((sealed, rolled)) =
            self.maybe_roll(roll, size, header.max_timestamp, last_offset, base)?
        {
            written.sealed.push(sealed);
            written.segments.push(self.active()?);
            written.landed.push(Landed::Rolled(rolled));
        }
        let seg = self.active()?;
        let position = seg.write_pos()?;
        seg.append(bytes, header)?;
        written.landed.push(Landed::Batch {
            segment: seg.base_offset,
            position,
            size,
        });
        written.bytes += size;
        written.next_offset = last_offset + 1;
        Ok(())
    }

    /// Removes every trace of a failed append: segments it rolled to are
    /// deleted, the first one is cut back and made active again. An undo
    /// that fails leaves bytes the partition no longer accounts for, so it
    /// takes the partition offline, and its error is returned.
    fn undo(
        &mut self,
        first: &LogSegment,
        snapshot: &SegmentSnapshot,
        written: &Written,
        cause: &StorageError,
    ) -> Result<()> {
        let undone = self
            .delete_segments(&written.segments[1..], "an undone append")
            .and_then(|()| first.rollback(snapshot));
        let name = self.log.name();
        match undone {
            Ok(()) => {
                warn!(
                    "Append to {name} failed ({cause}); nothing of it was kept (log end offset stays {})",
                    self.log_end_offset()
                );
                Ok(())
            }
            Err(e) => {
                error!(
                    "Could not undo a failed append to {name}: {e}; the unpublished bytes stay past the log end until recovery"
                );
                self.log
                    .health
                    .fail("an append", &format!("{cause}; undoing it failed too: {e}"));
                Err(e)
            }
        }
    }

    /// Makes an append's batches visible together: readers see them, and
    /// the log end offset moves past them.
    pub fn publish(&mut self, written: &Written) {
        for seg in &written.segments {
            seg.publish();
        }
        self.log
            .log_end_offset
            .store(written.next_offset, Ordering::Release);
    }
}

/// Kafka's `segment.updateTxnIndex` for each transaction the append's
/// markers abort: an entry in the `.txnindex` of the segment the marker
/// went to, with the last stable offset producer state gives it. Before
/// the publish, so the undo of a failed append removes it again.
fn index_aborted(producers: &ProducerStateManager, written: &Written) -> Result<()> {
    for (txn, last_stable_offset) in producers.staged_completions() {
        if !txn.aborted {
            continue;
        }
        let Some(seg) = written
            .segments
            .iter()
            .rev()
            .find(|s| s.base_offset <= txn.last_offset)
        else {
            continue;
        };
        seg.txn_index().append(AbortedTxn {
            version: 0,
            producer_id: txn.producer_id,
            first_offset: txn.first_offset,
            last_offset: txn.last_offset,
            last_stable_offset,
        })?;
    }
    Ok(())
}

impl LocalLog {
    /// What follows a publish, with the writer lock let go: sealed
    /// segments' indexes unloaded, their flush scheduled, or the recovery
    /// point advanced after a due flush.
    pub(crate) fn after_publish(&self, written: &Written) {
        for sealed in &written.sealed {
            sealed.unload_indexes();
        }
        if let Some(last_rolled_to) = written.segments.last()
            && written.segments.len() > 1
            && !written.flush_due
        {
            self.schedule_flush(last_rolled_to.base_offset);
        }
        if written.flush_due {
            // The append is published and durable: a checkpoint that cannot
            // be written takes the partition offline, but the append stands.
            let _ = self.health.judge(
                "the recovery point checkpoint",
                self.advance_recovery_point(written.next_offset),
            );
        }
    }
}
