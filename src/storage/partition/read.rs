//! Reads: one record through the sparse index, the consumer stream, and
//! lookups by timestamp.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::PartitionLog;
use crate::record::values::record_end;
use crate::record::{Record, TimestampType, decode_record_at};
use crate::storage::error::{Result, StorageError};
use crate::storage::segment::{LogSegment, ReadBatch};
use crate::storage::stream::Stream;

/// A record plus where it sits in the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordEntry {
    pub record: Record,
    pub batch_base_offset: i64,
    /// File position of the record's batch in its segment's `.log`.
    pub position: u64,
    pub segment_base_offset: i64,
    pub timestamp_type: TimestampType,
}

pub(super) struct CachedBatch {
    segment_base_offset: i64,
    batch: ReadBatch,
    /// The record last decoded from it: a path lookup of `offset/N` and
    /// the open that follows ask for the same record twice.
    last: parking_lot::Mutex<Option<Record>>,
}

impl CachedBatch {
    /// Whether the bytes read hold record `offset` (a batch read only up to
    /// an earlier record may not).
    fn holds(&self, offset: i64) -> bool {
        let b = &self.batch;
        b.complete || record_end(&b.header, b.section(), offset).is_some()
    }

    fn record(&self, offset: i64) -> Result<Option<Record>> {
        if let Some(r) = self.last.lock().as_ref()
            && r.offset == offset
        {
            return Ok(Some(r.clone()));
        }
        let b = &self.batch;
        let record = decode_record_at(&b.header, b.section(), offset)?;
        self.last.lock().clone_from(&record);
        Ok(record)
    }
}

impl PartitionLog {
    /// Record `offset`, found through the sparse index.
    /// `OffsetOutOfRange` outside [log start, LEO).
    pub fn read(&self, offset: i64) -> Result<Record> {
        self.read_entry(offset).map(|e| e.record)
    }

    /// Record `offset` with where it sits: its batch and file position.
    pub fn read_entry(&self, offset: i64) -> Result<RecordEntry> {
        self.check_online()?;
        let (start, end) = (self.log_start_offset(), self.log_end_offset());
        if offset < start || offset >= end {
            return Err(StorageError::OffsetOutOfRange {
                offset,
                log_start_offset: start,
                log_end_offset: end,
            });
        }
        let batch = self.batch_for(offset)?;
        // Control records (transaction markers) hold no user record.
        let cached = &batch.batch;
        if cached.header.is_control() {
            return Err(StorageError::RecordNotFound(offset));
        }
        let record = batch
            .record(offset)?
            .ok_or(StorageError::RecordNotFound(offset))?;
        Ok(RecordEntry {
            record,
            batch_base_offset: cached.header.base_offset,
            position: cached.position,
            segment_base_offset: batch.segment_base_offset,
            timestamp_type: cached.header.timestamp_type(),
        })
    }

    /// The batch holding `offset`. The last one is kept: `stat` then `cat` of
    /// `offset/N`, or a consumer walking offsets, reads it once (its start
    /// first, then, if a later offset needs it, all of it), and each lookup
    /// decodes only the record it wants.
    fn batch_for(&self, offset: i64) -> Result<Arc<CachedBatch>> {
        let recent = self.recent_batch.lock().clone();
        let mut whole = false;
        if let Some(c) = &recent
            && c.batch.header.base_offset <= offset
            && offset <= c.batch.header.last_offset()
        {
            if c.holds(offset) {
                return Ok(c.clone());
            }
            whole = true;
        }
        // The last batch's buffer, if nobody holds it any more: its pages
        // are mapped already.
        let buf = recent
            .and_then(|c| {
                let mut slot = self.recent_batch.lock();
                let same = slot.as_ref().is_some_and(|s| Arc::ptr_eq(s, &c));
                let taken = if same { slot.take() } else { None };
                drop((slot, c));
                taken.and_then(|t| Arc::try_unwrap(t).ok())
            })
            .map(|c| c.batch.bytes)
            .unwrap_or_default();
        let seg = self
            .segment_for(offset)
            .ok_or(StorageError::RecordNotFound(offset))?;
        let read = seg
            .read_batch_section(offset, &self.lookup_bytes_read, whole, buf)?
            .ok_or(StorageError::RecordNotFound(offset))?;
        let batch = Arc::new(CachedBatch {
            segment_base_offset: seg.base_offset,
            batch: read,
            last: parking_lot::Mutex::new(None),
        });
        *self.recent_batch.lock() = Some(batch.clone());
        Ok(batch)
    }

    /// Length of the consumer stream (`value\n` per record from the log start).
    pub fn stream_len(&self) -> Result<u64> {
        self.check_online()?;
        let segs = self.segment_list();
        let mut stream = self.stream.lock();
        let len = stream.len(&segs, self.log_start_offset(), &self.tally)?;
        self.save_stream_after_read(&mut stream, &segs);
        Ok(len)
    }

    /// Reads the consumer stream at `pos`; returns the bytes copied.
    pub fn read_stream(&self, pos: u64, buf: &mut [u8]) -> Result<usize> {
        self.check_online()?;
        let segs = self.segment_list();
        let mut stream = self.stream.lock();
        let n = stream.read(&segs, self.log_start_offset(), pos, buf, &self.tally)?;
        self.save_stream_after_read(&mut stream, &segs);
        Ok(n)
    }

    /// Saves new stream lengths (`commitfs.streamlen`).
    pub(super) fn save_stream(&self, stream: &mut Stream, segs: &[Arc<LogSegment>]) -> Result<()> {
        if self.deleted.load(Ordering::Acquire) {
            return Ok(());
        }
        let live: Vec<i64> = segs.iter().map(|s| s.base_offset).collect();
        stream.save(&self.dir, &live, self.writable)
    }

    /// [`Self::save_stream`] on a read path: the read has its bytes either
    /// way; a failed write of the file takes the partition offline.
    fn save_stream_after_read(&self, stream: &mut Stream, segs: &[Arc<LogSegment>]) {
        let saved = self.save_stream(stream, segs);
        let _ = self.health.judge("saving the stream lengths", saved);
    }

    /// Kafka's offsetsForTimes: the first offset whose timestamp is >= `timestamp_ms`.
    pub fn offset_for_timestamp(&self, timestamp_ms: i64) -> Result<Option<i64>> {
        self.check_online()?;
        let start = self.log_start_offset();
        for seg in self.segment_list() {
            if seg.size()? == 0 || seg.largest_timestamp()? < timestamp_ms {
                continue;
            }
            if let Some(o) = seg.find_offset_by_timestamp(timestamp_ms, start)? {
                return Ok(Some(o));
            }
        }
        Ok(None)
    }
}
