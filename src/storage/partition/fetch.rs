//! Reads for a Kafka Fetch (Kafka's `UnifiedLog.read` for a consumer): whole
//! batches straight from a segment's bytes, never decoded, handed out as a
//! file range so the listener can send them with `sendfile(2)`.
//!
//! **The high watermark.** On this single replica it is the log end offset
//! as published: an append (a tree write or a Kafka produce) publishes its
//! batches once they are in the segment file (the page cache), the same
//! point at which a shell write returns and a Produce is acknowledged. A
//! consumer never sees bytes past it, and an acknowledged produce is visible
//! at once. It is not a durability promise: see `flush.messages` and the
//! README's durability section for what survives power loss.

use std::fs::File;
use std::sync::Arc;

use super::PartitionLog;
use crate::record::BatchHeader;
use crate::storage::batch_reader::read_full_into;
use crate::storage::error::{IoContext, Result, StorageError};
use crate::storage::segment::{Located, LogSegment};

/// A range of one segment's `.log`: whole batches, but for the last one,
/// which may be cut where the size limit falls (as Kafka sends it; clients
/// drop a partial batch at the end).
pub struct SegmentSlice {
    segment: Arc<LogSegment>,
    pub position: u64,
    pub len: u64,
}

impl SegmentSlice {
    /// The `.log` file. The slice holds its segment, so the file stays
    /// readable even if retention deletes the segment meanwhile.
    pub fn file(&self) -> std::io::Result<&File> {
        self.segment
            .log_file()
            .map_err(|e| std::io::Error::other(e.to_string()))
    }

    /// The bytes, copied (where they cannot be sent from the file).
    pub fn read(&self) -> Result<Vec<u8>> {
        let mut buf = Vec::new();
        let f = self.segment.log_file()?;
        read_full_into(f, &mut buf, self.len as usize, self.position).at(self.segment.path())?;
        Ok(buf)
    }
}

/// What a fetch of one partition found.
pub struct FetchRead {
    pub high_watermark: i64,
    pub log_start_offset: i64,
    /// `None` when there is nothing at or after the offset yet.
    pub slice: Option<SegmentSlice>,
}

impl PartitionLog {
    /// The high watermark: the published log end offset (see the module doc).
    pub fn high_watermark(&self) -> i64 {
        self.log_end_offset()
    }

    /// The largest timestamp in the log (ListOffsets' MAX_TIMESTAMP), from
    /// each segment's time index; `None` for an empty log.
    pub fn max_timestamp(&self) -> Result<Option<i64>> {
        let mut max = None;
        for seg in self.segment_list() {
            if seg.size()? > 0 {
                max = max.max(Some(seg.largest_timestamp()?));
            }
        }
        Ok(max)
    }

    /// Batches from the one holding `offset`, at most `max_bytes` of them;
    /// with `min_one`, the first batch whole even if it is larger (Kafka's
    /// `minOneMessage`, so a consumer always makes progress). An offset
    /// inside a batch returns that whole batch: the client skips what it
    /// did not ask for. `OffsetOutOfRange` outside [log start, high watermark].
    pub fn read_for_fetch(&self, offset: i64, max_bytes: u64, min_one: bool) -> Result<FetchRead> {
        let (start, hw) = (self.log_start_offset(), self.high_watermark());
        if offset < start || offset > hw {
            return Err(StorageError::OffsetOutOfRange {
                offset,
                log_start_offset: start,
                log_end_offset: hw,
            });
        }
        let mut read = FetchRead {
            high_watermark: hw,
            log_start_offset: start,
            slice: None,
        };
        if offset == hw {
            return Ok(read);
        }
        let first = self.segment_for(offset).map_or(i64::MIN, |s| s.base_offset);
        let segments: Vec<Arc<LogSegment>> = self
            .segments
            .read()
            .range(first..)
            .map(|(_, s)| s.clone())
            .collect();
        for seg in segments {
            let Some((pos, header)) = self.first_batch_from(&seg, offset)? else {
                continue;
            };
            let available = seg.size()?.saturating_sub(pos);
            let want = if min_one {
                max_bytes.max(header.size() as u64)
            } else {
                max_bytes
            };
            let len = want.min(available);
            if len > 0 {
                read.slice = Some(SegmentSlice {
                    segment: seg,
                    position: pos,
                    len,
                });
            }
            break;
        }
        Ok(read)
    }

    /// The first batch of `seg` whose last offset is at or after `offset`:
    /// the one holding it, or the next one after a gap.
    fn first_batch_from(
        &self,
        seg: &LogSegment,
        offset: i64,
    ) -> Result<Option<(u64, BatchHeader)>> {
        if seg.size()? == 0 {
            return Ok(None);
        }
        if offset >= seg.base_offset
            && let Located::Found(pos, h, _) = seg.find_batch(offset, &self.lookup_bytes_read)?
        {
            return Ok(Some((pos, h)));
        }
        // Below this segment, or in a gap of it: walk to the next batch.
        let from = if offset >= seg.base_offset {
            seg.lookup(offset)?.position as u64
        } else {
            0
        };
        let mut found = None;
        seg.scan(from, |pos, h| {
            if h.last_offset() >= offset {
                found = Some((pos, *h));
                return false;
            }
            true
        })?;
        Ok(found)
    }
}
