//! Reads for a Kafka Fetch (Kafka's `LocalLog.read`): whole batches
//! straight from a segment's bytes, never decoded, handed out as a file
//! range so the listener can send them with `sendfile(2)`.

use std::fs::File;
use std::sync::Arc;

use super::LocalLog;
use crate::batch_reader::read_full_into;
use crate::error::{IoContext, Result};
use crate::segment::{Located, LogSegment};
use commitfs_record::BatchHeader;

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

impl LocalLog {
    /// Batches from the one holding `offset` (below the log end), at most
    /// `max_bytes` of them; with `min_one`, the first batch whole even if it
    /// is larger (Kafka's `minOneMessage`, so a consumer always makes
    /// progress). An offset inside a batch returns that whole batch: the
    /// client skips what it did not ask for. `None` when no batch ends at or
    /// after `offset`.
    pub fn fetch_slice(
        &self,
        offset: i64,
        max_bytes: u64,
        min_one: bool,
    ) -> Result<Option<SegmentSlice>> {
        for seg in self.segments.from(offset) {
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
            return Ok((len > 0).then_some(SegmentSlice {
                segment: seg,
                position: pos,
                len,
            }));
        }
        Ok(None)
    }

    /// [`LocalLog::fetch_slice`] of the batches below `end` only (a batch
    /// boundary: the last stable offset), as Kafka's `LocalLog.read` bounds
    /// a `read_committed` fetch by its position: the size limit and
    /// `min_one` never reach past it.
    pub fn fetch_slice_before(
        &self,
        offset: i64,
        max_bytes: u64,
        min_one: bool,
        end: i64,
    ) -> Result<Option<SegmentSlice>> {
        let segs = self.segments.from(offset);
        for (i, seg) in segs.iter().enumerate() {
            let Some((pos, header)) = self.first_batch_from(seg, offset)? else {
                continue;
            };
            if header.base_offset >= end {
                return Ok(None);
            }
            let next_base = segs.get(i + 1).map_or(i64::MAX, |s| s.base_offset);
            let limit = if end >= next_base {
                seg.size()?
            } else {
                match self.first_batch_from(seg, end)? {
                    Some((p, _)) => p,
                    None => seg.size()?,
                }
            };
            let available = limit.saturating_sub(pos);
            let want = if min_one {
                max_bytes.max(header.size() as u64)
            } else {
                max_bytes
            };
            let len = want.min(available);
            return Ok((len > 0).then(|| SegmentSlice {
                segment: seg.clone(),
                position: pos,
                len,
            }));
        }
        Ok(None)
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
            && let Located::Found(pos, h, _) = seg.find_batch(offset, self.lookup_counter())?
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
