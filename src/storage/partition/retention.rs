//! Retention (Kafka's `UnifiedLog.deleteOldSegments`) and delete-records:
//! each pass deletes a prefix of sealed segments and moves the log start
//! offset up to what remains.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use log::info;

use super::PartitionLog;
use crate::storage::error::{Result, StorageError};
use crate::storage::segment::LogSegment;

impl PartitionLog {
    /// Kafka's delete-records: the log start offset becomes `offset`, whole
    /// segments below it are deleted. Returns the new log start offset.
    pub fn delete_records_before(&self, offset: i64) -> Result<i64> {
        if !self.writable {
            return Err(StorageError::ReadOnly);
        }
        self.health
            .guard("a delete-records", || self.delete_records_now(offset))
    }

    fn delete_records_now(&self, offset: i64) -> Result<i64> {
        let w = self.writer.lock();
        // Its segments' paths may by now be a new partition's of the same name.
        if w.closed {
            return Err(StorageError::NoSuchPartition(self.name.clone()));
        }
        let (start, end) = (self.log_start_offset(), self.log_end_offset());
        if offset < 0 || offset > end {
            return Err(StorageError::OffsetOutOfRange {
                offset,
                log_start_offset: start,
                log_end_offset: end,
            });
        }
        if offset <= start {
            return Ok(start);
        }
        // The checkpoint first: a failed write leaves the log start where it
        // was, in memory as on disk.
        self.checkpoints
            .set_log_start_offset(&self.topic, self.partition, offset)?;
        self.log_start_offset.store(offset, Ordering::Release);
        info!(
            "Incremented log start offset to {offset} of partition {} due to client delete records request",
            self.name
        );
        let doomed = self.take_prefix(|_, next| next.is_some_and(|n| n <= offset));
        drop(w);
        self.delete_segments(doomed, "log start offset breach")?;
        Ok(offset)
    }

    /// Removes from the map the longest prefix of sealed segments for which
    /// `pred(segment, next segment's base)` holds. Writer lock held by caller.
    fn take_prefix(
        &self,
        mut pred: impl FnMut(&LogSegment, Option<i64>) -> bool,
    ) -> Vec<Arc<LogSegment>> {
        let mut segs = self.segments.write();
        let bases: Vec<i64> = segs.keys().copied().collect();
        let mut doomed = Vec::new();
        for (i, base) in bases.iter().enumerate() {
            let Some(next) = bases.get(i + 1).copied() else {
                break; // never the active segment
            };
            if !pred(&segs[base], Some(next)) {
                break;
            }
            if let Some(seg) = segs.remove(base) {
                doomed.push(seg);
            }
        }
        if let Some(first) = segs.keys().next().copied()
            && first > self.log_start_offset()
        {
            self.log_start_offset.store(first, Ordering::Release);
        }
        doomed
    }

    /// Deletes segments already taken out of the map. The log start offset
    /// checkpoint is written before the files go, so that it is never below
    /// the first segment left on disk.
    fn delete_segments(&self, doomed: Vec<Arc<LogSegment>>, reason: &str) -> Result<()> {
        if doomed.is_empty() {
            return Ok(());
        }
        self.checkpoints.set_log_start_offset(
            &self.topic,
            self.partition,
            self.log_start_offset(),
        )?;
        for seg in &doomed {
            info!(
                "Deleting segment {} of partition {} due to {reason}",
                seg.base_offset, self.name
            );
            seg.delete_files()?;
        }
        Ok(())
    }

    /// Applies the log start offset, retention.bytes and retention.ms (in
    /// Kafka's order); returns how many segments were deleted. Never deletes
    /// the active segment: when every segment qualifies, it rolls first.
    pub fn apply_retention(&self, now_ms: i64) -> Result<usize> {
        // An offline partition is skipped: the failure was logged once.
        if !self.writable || self.health.cause().is_some() {
            return Ok(0);
        }
        self.health
            .guard("a retention pass", || self.apply_retention_now(now_ms))
    }

    fn apply_retention_now(&self, now_ms: i64) -> Result<usize> {
        let config = self.config();
        if config.retention_ms >= 0 {
            // Loading a sealed segment's time index is I/O: do it before taking
            // the lock appends wait on. A segment's largest timestamp never
            // changes once sealed, so the values stay good.
            for seg in self.segment_list() {
                let _ = seg.largest_timestamp();
            }
        }
        let w = self.writer.lock();
        if w.closed {
            return Ok(0);
        }
        self.expire_producers(now_ms);
        let mut deleted = 0;
        let start = self.log_start_offset();
        let doomed = self.take_prefix(|_, next| next.is_some_and(|n| n <= start));
        deleted += doomed.len();
        self.delete_segments(doomed, "log start offset breach")?;

        if config.retention_bytes >= 0 {
            // Sizes learned first: a segment whose size cannot be read is
            // an error, not a segment of 0 bytes.
            let mut sizes = std::collections::BTreeMap::new();
            for s in self.segment_list() {
                sizes.insert(s.base_offset, s.size()? as i64);
            }
            let size_of = |s: &LogSegment| sizes.get(&s.base_offset).copied().unwrap_or(0);
            let total: i64 = sizes.values().sum();
            let mut diff = total - config.retention_bytes;
            let all_qualify = {
                let mut d = diff;
                sizes.values().all(|size| {
                    let ok = d - size >= 0;
                    d -= size;
                    ok
                })
            };
            if all_qualify {
                self.roll_now(&config)?;
            }
            let doomed = self.take_prefix(|s, _| {
                if diff - size_of(s) >= 0 {
                    diff -= size_of(s);
                    true
                } else {
                    false
                }
            });
            deleted += doomed.len();
            self.delete_segments(
                doomed,
                &format!("retention size {} breach", config.retention_bytes),
            )?;
        }

        if config.retention_ms >= 0 {
            let expired = |s: &LogSegment| {
                s.size().is_ok_and(|size| size > 0)
                    && s.largest_timestamp()
                        .is_ok_and(|t| now_ms - t > config.retention_ms)
            };
            let all_qualify = self.segments.read().values().all(|s| expired(s));
            if all_qualify {
                self.roll_now(&config)?;
            }
            let doomed = self.take_prefix(|s, _| expired(s));
            deleted += doomed.len();
            self.delete_segments(
                doomed,
                &format!("retention time {}ms breach", config.retention_ms),
            )?;
        }
        drop(w);
        Ok(deleted)
    }
}
