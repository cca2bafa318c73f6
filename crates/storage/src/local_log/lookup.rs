//! Reads through the index: one record, the batch that holds it (the last
//! one kept, since lookups come in runs), offsets by timestamp, and a walk
//! of batch headers. Which offsets may be read (the log start offset) is
//! the partition's to say.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use super::LocalLog;
use crate::batch_reader::{BatchReader, read_full_at};
use crate::error::{Result, StorageError};
use crate::segment::ReadBatch;
use commitfs_record::end_txn_marker::{EndTxnMarker, marker_of_batch};
use commitfs_record::values::record_end;
use commitfs_record::{Batch, BatchHeader, BatchIter, Record, TimestampType, decode_record_at};

/// Bytes read at a time when batch headers are walked.
const WALK_CHUNK: usize = 1 << 20;
/// Bytes read at a time when listing the offsets that hold records: a
/// listing asks for a few hundred offsets at a time.
const OFFSETS_CHUNK: usize = 8 << 10;

/// A record plus where it sits in the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordEntry {
    pub record: Record,
    pub batch_base_offset: i64,
    /// File position of the record's batch in its segment's `.log`.
    pub position: u64,
    pub segment_base_offset: i64,
    pub timestamp_type: TimestampType,
    /// The batch's producer id (-1: none) and whether it is transactional.
    pub producer_id: i64,
    pub transactional: bool,
}

/// What lookups keep between two of them.
#[derive(Default)]
pub(super) struct Lookups {
    /// The last batch decoded for a lookup. Batches never change once
    /// written, and the offset range check runs before it is used.
    recent: Mutex<Option<Arc<CachedBatch>>>,
    /// Bytes read from segment files for record lookups (not raw file reads).
    bytes_read: AtomicU64,
}

pub(super) struct CachedBatch {
    segment_base_offset: i64,
    /// The [`LogSegment::id`](crate::segment::LogSegment::id) it
    /// was read from: a batch of a segment since replaced (a cleaned one
    /// swapped in, a followed writer's file read again) is not served for
    /// the one now at its base, whichever path replaced it.
    segment_id: u64,
    batch: ReadBatch,
    /// The record last decoded from it: a path lookup of `offset/N` and
    /// the open that follows ask for the same record twice.
    last: Mutex<Option<Record>>,
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

impl LocalLog {
    /// Bytes read from segment files for record lookups so far.
    pub fn lookup_bytes_read(&self) -> u64 {
        self.lookups.bytes_read.load(Ordering::Relaxed)
    }

    pub(super) fn lookup_counter(&self) -> &AtomicU64 {
        &self.lookups.bytes_read
    }

    /// Record `offset` (below the log end, at or after the log start) with
    /// where it sits: its batch and file position.
    pub fn read_entry(&self, offset: i64) -> Result<RecordEntry> {
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
            producer_id: cached.header.producer_id,
            transactional: cached.header.is_transactional(),
        })
    }

    /// The batch holding `offset`. The last one is kept: `stat` then `cat` of
    /// `offset/N`, or a consumer walking offsets, reads it once (its start
    /// first, then, if a later offset needs it, all of it), and each lookup
    /// decodes only the record it wants.
    fn batch_for(&self, offset: i64) -> Result<Arc<CachedBatch>> {
        let seg = self
            .segments
            .floor(offset)
            .ok_or(StorageError::RecordNotFound(offset))?;
        let recent = self.lookups.recent.lock().clone();
        let mut whole = false;
        if let Some(c) = &recent
            && c.segment_id == seg.id()
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
                let mut slot = self.lookups.recent.lock();
                let same = slot.as_ref().is_some_and(|s| Arc::ptr_eq(s, &c));
                let taken = if same { slot.take() } else { None };
                drop((slot, c));
                taken.and_then(|t| Arc::try_unwrap(t).ok())
            })
            .map(|c| c.batch.bytes)
            .unwrap_or_default();
        let read = seg
            .read_batch_section(offset, self.lookup_counter(), whole, buf)?
            .ok_or(StorageError::RecordNotFound(offset))?;
        let batch = Arc::new(CachedBatch {
            segment_base_offset: seg.base_offset,
            segment_id: seg.id(),
            batch: read,
            last: Mutex::new(None),
        });
        *self.lookups.recent.lock() = Some(batch.clone());
        Ok(batch)
    }

    /// Kafka's offsetsForTimes: the first offset at or after `min_offset`
    /// whose timestamp is >= `timestamp_ms`, with that timestamp.
    pub fn offset_for_timestamp(
        &self,
        timestamp_ms: i64,
        min_offset: i64,
    ) -> Result<Option<(i64, i64)>> {
        for seg in self.segments.list() {
            if seg.size()? == 0 || seg.largest_timestamp()? < timestamp_ms {
                continue;
            }
            if let Some(o) = seg.find_offset_by_timestamp(timestamp_ms, min_offset)? {
                return Ok(Some(o));
            }
        }
        Ok(None)
    }

    /// The largest timestamp in the log (ListOffsets' MAX_TIMESTAMP), from
    /// each segment's time index; `None` for an empty log.
    pub fn max_timestamp(&self) -> Result<Option<i64>> {
        let mut max = None;
        for seg in self.segments.list() {
            if seg.size()? > 0 {
                max = max.max(Some(seg.largest_timestamp()?));
            }
        }
        Ok(max)
    }

    /// The offsets from `from` on, below the log end, that hold a record
    /// (those [`LocalLog::read_entry`] finds), at most `max` of them. A
    /// batch whose records fill its offset range gives the range from its
    /// header alone; one with gaps (the log cleaner's: records removed,
    /// offsets kept) is decoded for its records' offsets; a control batch
    /// holds none. So it costs a walk of the batch headers from the index
    /// entry at `from`, and a decode of each batch the cleaner thinned.
    pub fn record_offsets(&self, from: i64, max: usize) -> Result<Vec<i64>> {
        let end = self.log_end_offset();
        let mut out = Vec::new();
        // One segment at a time: a listing asks a page at a time, and a
        // page seldom needs a second segment of thousands.
        let mut next = self.segments.first_from(from);
        while let Some(seg) = next.take() {
            if out.len() >= max {
                break;
            }
            next = self.segments.after(seg.base_offset);
            let file = seg.log_file()?;
            let size = seg.size()?;
            let start = match from > seg.base_offset {
                true => u64::from(seg.lookup(from)?.position).min(size),
                false => 0,
            };
            let mut walk = BatchReader::new(file, seg.path(), start, size, OFFSETS_CHUNK);
            walk.try_for_each_header(|position, h| {
                if h.base_offset >= end || out.len() >= max {
                    return Ok(false);
                }
                if h.is_control() || h.last_offset() < from {
                    return Ok(true);
                }
                let last = h.last_offset().min(end - 1);
                if i64::from(h.record_count) == i64::from(h.last_offset_delta) + 1 {
                    let first = h.base_offset.max(from);
                    let n = ((last - first + 1) as usize).min(max - out.len());
                    out.extend(first..first + n as i64);
                    return Ok(true);
                }
                let bytes = seg.read_batch(position, h.size())?;
                let offsets = Batch::parse(&bytes)?
                    .records()?
                    .into_iter()
                    .map(|r| r.offset);
                let left = max - out.len();
                out.extend(offsets.filter(|o| *o >= from && *o <= last).take(left));
                Ok(true)
            })?;
        }
        Ok(out)
    }

    /// [`LocalLog::walk_batch_headers`], with the marker of each control
    /// batch read from its record (none for an empty one), as producer
    /// state replays a log at load. A marker that does not decode stops
    /// the walk as corrupt.
    pub fn walk_batches_and_markers(
        &self,
        from: i64,
        mut f: impl FnMut(&BatchHeader, Option<EndTxnMarker>),
    ) -> Result<()> {
        let end = self.log_end_offset();
        for seg in self.segments.from(from) {
            let file = seg.log_file()?;
            let size = seg.size()?;
            // The segment holding `from` is walked from its index entry:
            // a replay after a snapshot, or of what a followed writer
            // appended, reads no more than the batches it needs.
            let start = match from > seg.base_offset {
                true => u64::from(seg.lookup(from)?.position).min(size),
                false => 0,
            };
            let mut walk = BatchReader::new(file, seg.path(), start, size, WALK_CHUNK);
            walk.try_for_each_header(|position, h| {
                if h.base_offset >= end {
                    return Ok(false);
                }
                let marker = match h.is_control() {
                    true => read_marker_at(file, position, h).map_err(|reason| {
                        StorageError::Corrupt {
                            path: seg.path().to_path_buf(),
                            position,
                            reason,
                        }
                    })?,
                    false => None,
                };
                f(h, marker);
                Ok(true)
            })?;
        }
        Ok(())
    }
}

/// The marker of the control batch `h` at `position` of `file`.
fn read_marker_at(
    file: &std::fs::File,
    position: u64,
    h: &BatchHeader,
) -> std::result::Result<Option<EndTxnMarker>, String> {
    let mut buf = vec![0u8; h.size()];
    let n = read_full_at(file, &mut buf, position).map_err(|e| e.to_string())?;
    let (_, batch) = BatchIter::new(&buf[..n])
        .next()
        .ok_or_else(|| "a control batch cut short".to_string())?
        .map_err(|e| e.to_string())?;
    marker_of_batch(&batch)
}
