//! Retention (Kafka's `UnifiedLog.deleteOldSegments`) and delete-records:
//! each pass picks a prefix of sealed segments (Kafka's
//! `deletableSegments`), moves the log start offset up to what remains, and
//! has the local log delete them.

use std::sync::Arc;

use log::info;

use super::PartitionLog;
use crate::config::LogConfig;
use crate::error::{Result, StorageError};
use crate::local_log::LogWriter;
use crate::segment::LogSegment;

/// How many of `segs`, from the first, may be deleted: the longest prefix
/// for which `pred(segment, next segment's base)` holds, never the active
/// (last) segment.
fn deletable(segs: &[Arc<LogSegment>], mut pred: impl FnMut(&LogSegment, i64) -> bool) -> usize {
    segs.windows(2)
        .take_while(|pair| pred(&pair[0], pair[1].base_offset))
        .count()
}

impl PartitionLog {
    /// Kafka's delete-records: the log start offset becomes `offset`, whole
    /// segments below it are deleted. Returns the new log start offset.
    pub fn delete_records_before(&self, offset: i64) -> Result<i64> {
        if !self.local.writable() {
            return Err(StorageError::ReadOnly);
        }
        self.health
            .guard("a delete-records", || self.delete_records_now(offset))
    }

    fn delete_records_now(&self, offset: i64) -> Result<i64> {
        // Its segments' paths may by now be a new partition's of the same name.
        let mut w = self.local.writer()?;
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
        self.move_log_start(offset)?;
        info!(
            "Incremented log start offset to {offset} of partition {} due to client delete records request",
            self.name()
        );
        self.delete_breached(&mut w, |_, next| next <= offset, "log start offset breach")?;
        Ok(offset)
    }

    /// Moves the log start offset up to `offset`. The checkpoint first: a
    /// failed write leaves the log start where it was, in memory as on
    /// disk, and it is never below the first segment left on disk.
    fn move_log_start(&self, offset: i64) -> Result<()> {
        let offset = offset.max(self.log_start_offset());
        self.checkpoints.set_log_start_offset(
            self.local.topic(),
            self.local.partition(),
            offset,
        )?;
        self.log_start_offset
            .store(offset, std::sync::atomic::Ordering::Release);
        Ok(())
    }

    /// Deletes the prefix of sealed segments that `pred` picks (see
    /// [`deletable`]), the log start offset moved up to the first segment
    /// left; returns how many went.
    fn delete_breached(
        &self,
        w: &mut LogWriter,
        pred: impl FnMut(&LogSegment, i64) -> bool,
        reason: &str,
    ) -> Result<usize> {
        let segs = w.segments();
        let n = deletable(&segs, pred);
        if n == 0 {
            return Ok(0);
        }
        self.move_log_start(segs[n].base_offset)?;
        w.delete_segments(&segs[..n], reason)?;
        Ok(n)
    }

    /// Applies the log start offset, then, where `cleanup.policy` has
    /// `delete`, retention.bytes and retention.ms (in Kafka's order);
    /// returns how many segments were deleted. Never deletes the active
    /// segment: when every segment qualifies, it rolls first.
    pub fn apply_retention(&self, now_ms: i64) -> Result<usize> {
        // An offline partition is skipped: the failure was logged once.
        if !self.local.writable() || self.health.cause().is_some() {
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
            for seg in self.local.segment_list() {
                let _ = seg.largest_timestamp();
            }
        }
        let Some(mut w) = self.local.writer_if_open() else {
            return Ok(0);
        };
        self.producers.expire(now_ms);
        let start = self.log_start_offset();
        let mut deleted =
            self.delete_breached(&mut w, |_, next| next <= start, "log start offset breach")?;
        // Kafka's `deleteOldSegments`: size and time only where the policy
        // says `delete`; a compacted log keeps what the cleaner keeps.
        if !config.cleanup_policy.delete_enabled() {
            return Ok(deleted);
        }
        if config.retention_bytes >= 0 {
            deleted += self.delete_size_breached(&mut w, &config)?;
        }
        if config.retention_ms >= 0 {
            deleted += self.delete_time_breached(&mut w, &config, now_ms)?;
        }
        Ok(deleted)
    }

    /// retention.bytes: the oldest segments go while what is left stays at
    /// or above it.
    fn delete_size_breached(&self, w: &mut LogWriter, config: &LogConfig) -> Result<usize> {
        // Sizes learned first: a segment whose size cannot be read is
        // an error, not a segment of 0 bytes.
        let mut sizes = std::collections::BTreeMap::new();
        for s in w.segments() {
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
            self.roll_locked(w, config)?;
        }
        let reason = format!("retention size {} breach", config.retention_bytes);
        let breached = |s: &LogSegment, _| {
            let ok = diff - size_of(s) >= 0;
            if ok {
                diff -= size_of(s);
            }
            ok
        };
        self.delete_breached(w, breached, &reason)
    }

    /// retention.ms: the oldest segments go while their largest timestamp
    /// is older than it.
    fn delete_time_breached(
        &self,
        w: &mut LogWriter,
        config: &LogConfig,
        now_ms: i64,
    ) -> Result<usize> {
        let expired = |s: &LogSegment| {
            s.size().is_ok_and(|size| size > 0)
                && s.largest_timestamp()
                    .is_ok_and(|t| now_ms - t > config.retention_ms)
        };
        if w.segments().iter().all(|s| expired(s)) {
            self.roll_locked(w, config)?;
        }
        let reason = format!("retention time {}ms breach", config.retention_ms);
        self.delete_breached(w, |s, _| expired(s), &reason)
    }
}
