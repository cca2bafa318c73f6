//! Reads of the partition: records and fetches bounded by the log start
//! offset and the high watermark, the consumer stream, lookups by
//! timestamp, and the partition's files. The local log finds the bytes;
//! what may be read is said here.
//!
//! **The high watermark.** On this single replica it is the log end offset
//! as published: an append (a tree write or a Kafka produce) publishes its
//! batches once they are in the segment file (the page cache), the same
//! point at which a shell write returns and a Produce is acknowledged. A
//! consumer never sees bytes past it, and an acknowledged produce is visible
//! at once. It is not a durability promise: see `flush.messages` and the
//! README's durability section for what survives power loss.

use std::sync::Arc;

use super::PartitionLog;
use crate::error::{Result, StorageError};
use crate::local_log::{RecordEntry, SegmentSlice};
use crate::segment::LogSegment;
use crate::stream::{Live, Stream, View};
use commitfs_record::Record;
use commitfs_record::state_files::AbortedTxn;

/// What a fetch of one partition found.
pub struct FetchRead {
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    /// `None` when there is nothing at or after the offset yet.
    pub slice: Option<SegmentSlice>,
    /// At `read_committed`, the aborted transactions the slice may hold
    /// batches of (Kafka's `abortedTransactions`); `None` otherwise.
    pub aborted: Option<Vec<AbortedTxn>>,
}

/// Which records a fetch may see (Kafka's `FetchIsolation` of a consumer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isolation {
    /// Up to the high watermark.
    ReadUncommitted,
    /// Up to the last stable offset, with the aborted transactions to skip.
    ReadCommitted,
}

fn out_of_range(offset: i64, log_start_offset: i64, log_end_offset: i64) -> StorageError {
    StorageError::OffsetOutOfRange {
        offset,
        log_start_offset,
        log_end_offset,
    }
}

impl PartitionLog {
    /// Record `offset`, found through the sparse index.
    /// `OffsetOutOfRange` outside [log start, LEO).
    pub fn read(&self, offset: i64) -> Result<Record> {
        self.read_entry(offset).map(|e| e.record)
    }

    /// The offsets from `from` on (at least the log start), below the log
    /// end, that hold a record: what `ls offset/` lists, at most `max` of
    /// them. Offsets the log cleaner removed and control records are not
    /// among them, as [`Self::read`] finds none there.
    pub fn record_offsets(&self, from: i64, max: usize) -> Result<Vec<i64>> {
        self.check_online()?;
        self.local
            .record_offsets(from.max(self.log_start_offset()), max)
    }

    /// Record `offset` with where it sits: its batch and file position.
    pub fn read_entry(&self, offset: i64) -> Result<RecordEntry> {
        self.check_online()?;
        let (start, end) = (self.log_start_offset(), self.log_end_offset());
        if offset < start || offset >= end {
            return Err(out_of_range(offset, start, end));
        }
        self.local.read_entry(offset)
    }

    /// The high watermark: the published log end offset (see the module doc).
    pub fn high_watermark(&self) -> i64 {
        self.log_end_offset()
    }

    /// Batches from the one holding `offset`, at most `max_bytes` of them;
    /// with `min_one`, the first batch whole even if it is larger (Kafka's
    /// `minOneMessage`, so a consumer always makes progress). An offset
    /// inside a batch returns that whole batch: the client skips what it
    /// did not ask for. `OffsetOutOfRange` outside [log start, high watermark].
    pub fn read_for_fetch(&self, offset: i64, max_bytes: u64, min_one: bool) -> Result<FetchRead> {
        self.read_isolated(offset, max_bytes, min_one, Isolation::ReadUncommitted)
    }

    /// [`PartitionLog::read_for_fetch`] at `isolation`: at `read_committed`
    /// the batches below the last stable offset only (an offset at or past
    /// it, up to the high watermark, reads nothing yet), with the aborted
    /// transactions among them (Kafka's `UnifiedLog.read`).
    pub fn read_isolated(
        &self,
        offset: i64,
        max_bytes: u64,
        min_one: bool,
        isolation: Isolation,
    ) -> Result<FetchRead> {
        // The last stable offset first: it is loaded before the high
        // watermark (see txn.rs).
        let lso = self.last_stable_offset();
        let (start, hw) = (self.log_start_offset(), self.high_watermark());
        if offset < start || offset > hw {
            return Err(out_of_range(offset, start, hw));
        }
        let (slice, aborted) = match isolation {
            Isolation::ReadUncommitted if offset == hw => (None, None),
            Isolation::ReadUncommitted => {
                (self.local.fetch_slice(offset, max_bytes, min_one)?, None)
            }
            Isolation::ReadCommitted if offset >= lso => (None, Some(Vec::new())),
            Isolation::ReadCommitted => {
                let slice = self
                    .local
                    .fetch_slice_before(offset, max_bytes, min_one, lso)?;
                let aborted = match slice {
                    Some(_) => self.aborted_transactions(offset, lso)?,
                    None => Vec::new(),
                };
                (slice, Some(aborted))
            }
        };
        Ok(FetchRead {
            high_watermark: hw,
            last_stable_offset: lso.min(hw),
            log_start_offset: start,
            slice,
            aborted,
        })
    }

    /// Kafka's offsetsForTimes: the first offset whose timestamp is >= `timestamp_ms`.
    pub fn offset_for_timestamp(&self, timestamp_ms: i64) -> Result<Option<i64>> {
        Ok(self.timestamp_and_offset(timestamp_ms)?.map(|(o, _)| o))
    }

    /// [`Self::offset_for_timestamp`] with the timestamp of the record
    /// found, a transaction marker's too (ListOffsets answers both, as
    /// Kafka's `TimestampAndOffset`).
    pub fn timestamp_and_offset(&self, timestamp_ms: i64) -> Result<Option<(i64, i64)>> {
        self.check_online()?;
        self.local
            .offset_for_timestamp(timestamp_ms, self.log_start_offset())
    }

    /// Length of the consumer stream (`value\n` per record from the log start).
    pub fn stream_len(&self) -> Result<u64> {
        self.check_online()?;
        let segs = self.local.segment_list();
        let mut stream = self.stream.lock();
        let len = stream.len(&segs, self.log_start_offset(), &self.tally, View::All)?;
        self.save_stream_after_read(&mut stream);
        Ok(len)
    }

    /// Reads the consumer stream at `pos`; returns the bytes copied.
    pub fn read_stream(&self, pos: u64, buf: &mut [u8]) -> Result<usize> {
        self.check_online()?;
        let segs = self.local.segment_list();
        let mut stream = self.stream.lock();
        let n = stream.read(
            &segs,
            self.log_start_offset(),
            pos,
            buf,
            &self.tally,
            View::All,
        )?;
        self.save_stream_after_read(&mut stream);
        Ok(n)
    }

    /// Length of the `read_committed` consumer stream: the records below
    /// the last stable offset, those of aborted transactions left out.
    pub fn committed_len(&self) -> Result<u64> {
        self.with_committed(|stream, segs, log_start, view| {
            stream.len(segs, log_start, &self.tally, view)
        })
    }

    /// Reads the `read_committed` consumer stream at `pos`; returns the
    /// bytes copied.
    pub fn read_committed(&self, pos: u64, buf: &mut [u8]) -> Result<usize> {
        self.with_committed(|stream, segs, log_start, view| {
            stream.read(segs, log_start, pos, buf, &self.tally, view)
        })
    }

    fn with_committed<T>(
        &self,
        f: impl FnOnce(&mut Stream, &[Arc<LogSegment>], i64, View) -> Result<T>,
    ) -> Result<T> {
        self.check_online()?;
        // The bound first: every batch below it, and the `.txnindex` entry
        // of each abort among them, is then in the segments and indexes
        // read after. Records below the log start are not shown anyway.
        let decided = self.first_undecided_offset();
        let aborted = |from: i64| self.aborted_transactions(from, decided);
        let view = View::Committed {
            decided,
            aborted: &aborted,
        };
        let segs = self.local.segment_list();
        let mut stream = self.stream.lock();
        let out = f(&mut stream, &segs, self.log_start_offset(), view)?;
        self.save_stream_after_read(&mut stream);
        Ok(out)
    }

    /// Saves new stream lengths (`commitfs.streamlen`, `commitfs.committedlen`).
    pub(super) fn save_stream(&self, stream: &mut Stream) -> Result<()> {
        if self.local.is_deleted() {
            return Ok(());
        }
        let live: Vec<Live> = self
            .local
            .segment_list()
            .iter()
            .map(|s| Live::of(s))
            .collect();
        stream.save(self.local.dir(), &live, self.local.writable())
    }

    /// [`Self::save_stream`] on a read path: the read has its bytes either
    /// way; a failed write of the file takes the partition offline.
    fn save_stream_after_read(&self, stream: &mut Stream) {
        let saved = self.save_stream(stream);
        let _ = self.health.judge("saving the stream lengths", saved);
    }
}
