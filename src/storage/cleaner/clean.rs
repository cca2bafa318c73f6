//! One pass of the log cleaner over one log (Kafka's `Cleaner`): the
//! offset map of the dirty section, then every segment from the log start
//! up to where the map reached, grouped, each group copied into one
//! cleaned segment with what it keeps, and swapped in.
//!
//! Reads go through a buffer of `log.cleaner.io.buffer.size / threads / 2`
//! bytes at a time, as Kafka's do: what the buffer holds of whole batches is
//! one chunk, and the batches a chunk keeps are appended to the cleaned
//! segment at once (so its index is Kafka's). No lock is held while the
//! segments are read and written; only the swap takes the writer lock.

use std::sync::Arc;

use log::info;

use super::CleanerConfig;
use super::cleaned::{Chunk, CleanedSegment, remove_cleaned};
use super::filter::{FilterContext, Filtered, filter_batch};
use super::manager::{LogToClean, log_segments};
use super::offset_map::{KeyHash, OffsetMap};
use super::stats::CleanerStats;
use super::throttle::Throttler;
use super::txn::{TxnTracker, collect_aborted, control_type};
use crate::record::retain::for_each_record;
use crate::record::{Batch, BatchIter, peek_frame};
use crate::storage::batch_reader::read_full_at;
use crate::storage::error::{IoContext, Result, StorageError};
use crate::storage::partition::PartitionLog;
use crate::storage::segment::LogSegment;

/// What a pass works with besides the log: its thread's map and buffers.
pub(crate) struct Cleaner<'a> {
    pub id: usize,
    pub map: &'a mut OffsetMap,
    pub config: &'a CleanerConfig,
    pub throttler: &'a Throttler,
    /// Fails when the pass must stop (the partition is deleted, the cleaner stops).
    pub check_done: &'a dyn Fn() -> Result<()>,
    /// The read buffer's size now; it grows for a batch larger than it,
    /// and is restored after each segment.
    read_size: usize,
    buf: Vec<u8>,
    /// A batch's keys, hashed: digest, offset, the record's place in the batch.
    keyed: Vec<(KeyHash, i64, u64)>,
}

/// The segments of one pass's groups: size, offset index and time index
/// bytes, base offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SegmentSizes {
    pub base: i64,
    pub log: u64,
    pub offset_index: u64,
    pub time_index: u64,
}

/// Kafka's `groupSegmentsBySize`: consecutive segments whose logs and
/// indexes together fit `segment.bytes` and `segment.index.bytes`, and
/// whose offsets fit a relative offset from the group's base (the last
/// one's end estimated by the next base, or the first uncleanable offset).
pub(crate) fn group_by_size(
    segs: &[SegmentSizes],
    max_size: u64,
    max_index_size: u64,
    first_uncleanable: i64,
) -> Vec<Vec<usize>> {
    let mut groups = Vec::new();
    let mut i = 0;
    while i < segs.len() {
        let mut group = vec![i];
        let (mut log, mut index, mut time) =
            (segs[i].log, segs[i].offset_index, segs[i].time_index);
        i += 1;
        while i < segs.len() {
            let next = &segs[i];
            let last_offset = match segs.get(i + 1) {
                Some(after) => after.base - 1,
                None => first_uncleanable - 1,
            };
            let fits = log + next.log <= max_size
                && index + next.offset_index <= max_index_size
                && time + next.time_index <= max_index_size
                && (next.log == 0 || last_offset - segs[group[0]].base <= i32::MAX as i64);
            if !fits {
                break;
            }
            group.push(i);
            log += next.log;
            index += next.offset_index;
            time += next.time_index;
            i += 1;
        }
        groups.push(group);
    }
    groups
}

impl<'a> Cleaner<'a> {
    pub fn new(
        id: usize,
        map: &'a mut OffsetMap,
        config: &'a CleanerConfig,
        throttler: &'a Throttler,
        check_done: &'a dyn Fn() -> Result<()>,
    ) -> Cleaner<'a> {
        Cleaner {
            id,
            map,
            config,
            throttler,
            check_done,
            read_size: config.io_buffer_per_thread(),
            buf: Vec::new(),
            keyed: Vec::new(),
        }
    }

    /// Kafka's `doClean` at `now`: returns the next dirty offset (where the
    /// map stopped) and what the pass counted.
    pub fn clean(&mut self, ltc: &LogToClean, now: i64) -> Result<(i64, CleanerStats)> {
        let log = &ltc.log;
        info!(
            "Cleaner {}: Beginning cleaning of log {}",
            self.id,
            log.name()
        );
        let mut stats = CleanerStats::default();
        info!(
            "Cleaner {}: Building offset map for {}...",
            self.id,
            log.name()
        );
        let upper = ltc.first_uncleanable_offset;
        self.build_offset_map(log, ltc.first_dirty_offset, upper, &mut stats)?;
        let end = self.map.latest_offset() + 1;
        stats.index_done();
        info!(
            "Cleaner {}: Cleaning log {} (cleaning prior to {upper}, discarding tombstones whose delete horizon passed by {now})...",
            self.id,
            log.name()
        );
        let segs = log.cleaner_segments();
        let cleaned = log_segments(&segs, 0, end);
        let config = log.config();
        let sizes = cleaned.iter().map(sizes_of).collect::<Result<Vec<_>>>()?;
        let groups = group_by_size(
            &sizes,
            config.segment_bytes.max(0) as u64,
            config.segment_index_bytes.max(0) as u64,
            upper,
        );
        let mut txn = TxnTracker::default();
        for group in groups {
            let group: Vec<Arc<LogSegment>> = group.iter().map(|i| cleaned[*i].clone()).collect();
            self.clean_segments(log, &group, now, upper, &mut txn, &mut stats)?;
        }
        stats.buffer_utilization = self.map.utilization();
        stats.all_done();
        Ok((end, stats))
    }

    /// Kafka's `buildOffsetMap` over `[start, end)`.
    fn build_offset_map(
        &mut self,
        log: &PartitionLog,
        start: i64,
        end: i64,
        stats: &mut CleanerStats,
    ) -> Result<()> {
        self.map.clear();
        let segs = log.cleaner_segments();
        let dirty = log_segments(&segs, start, end);
        info!(
            "Cleaner {}: Building offset map for log {} for {} segments in offset range [{start}, {end}).",
            self.id,
            log.name(),
            dirty.len()
        );
        let mut txn = TxnTracker::default();
        txn.add_aborted(collect_aborted(&segs, log.log_start_offset(), start, end)?);
        let max_entries =
            (self.map.slots() as f64 * self.config.dedupe_buffer_load_factor) as usize;
        for (i, seg) in dirty.iter().enumerate() {
            (self.check_done)()?;
            let next = dirty.get(i + 1).map_or(end, |s| s.base_offset);
            let full = self.map_segment(log, seg, start, next, max_entries, &mut txn, stats)?;
            if full {
                break;
            }
        }
        info!(
            "Cleaner {}: Offset map for log {} complete.",
            self.id,
            log.name()
        );
        Ok(())
    }

    /// Kafka's `buildOffsetMapForSegment`: whether the map filled.
    #[allow(clippy::too_many_arguments)]
    fn map_segment(
        &mut self,
        log: &PartitionLog,
        seg: &LogSegment,
        start: i64,
        next_segment_start: i64,
        max_entries: usize,
        txn: &mut TxnTracker,
        stats: &mut CleanerStats,
    ) -> Result<bool> {
        let mut position = seg.lookup(start)?.position as u64;
        let size = seg.size()?;
        let max_message = log.config().max_message_bytes;
        while position < size {
            (self.check_done)()?;
            let (valid, full) = self.map_chunk(seg, position, start, max_entries, txn, stats)?;
            if full {
                return Ok(true);
            }
            position += valid;
            stats.map_bytes_read += valid;
            if valid == 0 {
                self.grow(seg, position, max_message)?;
            }
        }
        self.map.update_latest_offset(next_segment_start - 1);
        self.read_size = self.config.io_buffer_per_thread();
        Ok(false)
    }

    /// One chunk of [`Self::map_segment`]: its whole batches' bytes, and
    /// whether the map filled in it.
    fn map_chunk(
        &mut self,
        seg: &LogSegment,
        position: u64,
        start: i64,
        max_entries: usize,
        txn: &mut TxnTracker,
        stats: &mut CleanerStats,
    ) -> Result<(u64, bool)> {
        let n = self.read_chunk(seg, position)?;
        self.throttler.maybe_throttle(n as u64);
        let buf = std::mem::take(&mut self.buf);
        let mut valid = 0u64;
        let mut full = false;
        for item in BatchIter::new(&buf[..n]) {
            let Ok((_, batch)) = item else { break };
            let h = batch.header;
            if h.is_control() {
                txn.on_control_batch_read(&h, control_type(&batch)?);
                stats.map_messages_read += 1;
            } else if txn.on_batch_read(&h) {
                stats.map_messages_read += h.record_count as u64;
            } else {
                let section = batch.uncompressed_section()?;
                // The batch's keys are hashed and their slots asked for
                // first; the puts then follow in the records' order.
                let map = &mut *self.map;
                let keyed = &mut self.keyed;
                keyed.clear();
                let mut records = 0u64;
                for_each_record(&h, &section, |r| {
                    if let Some(key) = r.key
                        && r.offset >= start
                    {
                        let hash = map.hash(key);
                        map.prefetch(&hash);
                        keyed.push((hash, r.offset, records));
                    }
                    records += 1;
                    true
                })?;
                let mut read = records;
                for (hash, offset, at) in keyed.iter() {
                    if map.size() >= max_entries {
                        full = true;
                        read = *at;
                        break;
                    }
                    map.put_hashed(hash, *offset);
                }
                stats.map_messages_read += read;
                if full {
                    break;
                }
            }
            if h.last_offset() >= start {
                self.map.update_latest_offset(h.last_offset());
            }
            valid += batch.size() as u64;
        }
        self.buf = buf;
        Ok((valid, full))
    }

    /// Reads the chunk at `position` into the buffer; returns its length.
    fn read_chunk(&mut self, seg: &LogSegment, position: u64) -> Result<usize> {
        let size = seg.size()?;
        let want = (size - position).min(self.read_size as u64) as usize;
        self.buf.resize(want, 0);
        let n = read_full_at(seg.log_file()?, &mut self.buf, position).at(seg.path())?;
        Ok(n)
    }

    /// Kafka's `growBuffersOrFail`: a batch larger than the buffer doubles
    /// it, up to the largest batch the log may hold.
    fn grow(&mut self, seg: &LogSegment, position: u64, max_message: i32) -> Result<()> {
        let cap = self.read_size;
        let max_message = max_message.max(0) as usize;
        let corrupt = |reason: String| StorageError::Corrupt {
            path: seg.path().to_path_buf(),
            position,
            reason,
        };
        let max_size = if cap >= max_message {
            let declared = peek_frame(&self.buf)
                .map_err(|e| corrupt(format!("Could not determine next batch size: {e}")))?
                .size;
            let left = seg.size()? - position;
            if declared as u64 > left {
                return Err(corrupt(format!(
                    "Log segment may be corrupt, batch size {declared} > {left} bytes left in segment"
                )));
            }
            declared
        } else {
            max_message
        };
        let max_buffer = max_size.max(self.config.max_message_size.max(0) as usize);
        if cap >= max_buffer {
            return Err(corrupt(format!(
                "This log contains a message larger than maximum allowable size of {max_buffer}."
            )));
        }
        let new = (cap * 2).min(max_buffer);
        info!(
            "Cleaner {}: Growing cleaner I/O buffers from {cap} bytes to {new} bytes.",
            self.id
        );
        self.read_size = new;
        Ok(())
    }

    /// Kafka's `cleanSegments`: the group into one cleaned segment, swapped in.
    fn clean_segments(
        &mut self,
        log: &PartitionLog,
        group: &[Arc<LogSegment>],
        now: i64,
        upper: i64,
        txn: &mut TxnTracker,
        stats: &mut CleanerStats,
    ) -> Result<()> {
        let config = log.config();
        let base = group[0].base_offset;
        let mut dest =
            CleanedSegment::create(log.dir(), base, config.index_interval_bytes.max(0) as u64)?;
        // A failure (or a panic) while the cleaned segment is written
        // leaves the log as it was: its files go.
        let producers = log.last_records_of_active_producers();
        let ctx = FilterContext {
            now,
            delete_retention_ms: config.delete_retention_ms,
            producers: &producers,
            upper_bound: upper,
        };
        let written = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.copy_group(log, group, &mut dest, &ctx, txn, stats)?;
            dest.txns = std::mem::take(&mut txn.retained);
            let mtime = group
                .last()
                .and_then(|s| s.log_file().ok()?.metadata().ok()?.modified().ok());
            dest.finish(mtime)
        }))
        .unwrap_or_else(|_| Err(panicked(log)));
        let swapped = written.and_then(|_| {
            let olds: Vec<String> = group.iter().map(|s| s.base_offset.to_string()).collect();
            info!(
                "Cleaner {}: Swapping in cleaned segment {base} for segment(s) {} in log {}",
                self.id,
                olds.join(","),
                log.name()
            );
            log.replace_segments(base, group)
        });
        match swapped {
            // A swap that failed part way took the partition offline; the
            // next load completes it or rolls it back from its files.
            Err(e) if log.offline_cause().is_some() => Err(e),
            Err(e) => {
                if let Err(r) = remove_cleaned(log.dir(), base) {
                    log::error!(
                        "Could not remove the cleaned segment {base} of {}: {r}",
                        log.name()
                    );
                }
                Err(e)
            }
            Ok(()) => Ok(()),
        }
    }

    /// Every source segment of the group through the filter into `dest`.
    fn copy_group(
        &mut self,
        log: &PartitionLog,
        group: &[Arc<LogSegment>],
        dest: &mut CleanedSegment,
        ctx: &FilterContext,
        txn: &mut TxnTracker,
        stats: &mut CleanerStats,
    ) -> Result<()> {
        let config = log.config();
        let segs = log.cleaner_segments();
        for (i, seg) in group.iter().enumerate() {
            let seg_upper = match group.get(i + 1) {
                Some(next) => next.base_offset,
                None => seg.read_next_offset()?,
            };
            txn.add_aborted(collect_aborted(
                &segs,
                log.log_start_offset(),
                seg.base_offset,
                seg_upper,
            )?);
            info!(
                "Cleaner {}: Cleaning segment {} in log {} into {} with an upper bound deletion horizon {} computed from the pass's start,retaining deletes whose horizon is later.",
                self.id,
                seg.base_offset,
                log.name(),
                dest.base,
                ctx.now
            );
            self.clean_into(seg, dest, ctx, config.max_message_bytes, txn, stats)?;
        }
        Ok(())
    }

    /// Kafka's `cleanInto`: one source segment, chunk by chunk.
    fn clean_into(
        &mut self,
        seg: &LogSegment,
        dest: &mut CleanedSegment,
        ctx: &FilterContext,
        max_message: i32,
        txn: &mut TxnTracker,
        stats: &mut CleanerStats,
    ) -> Result<()> {
        let size = seg.size()?;
        let mut position = 0u64;
        let mut out = Vec::new();
        while position < size {
            (self.check_done)()?;
            let n = self.read_chunk(seg, position)?;
            self.throttler.maybe_throttle(n as u64);
            out.clear();
            let mut res = Filtered::new();
            let buf = std::mem::take(&mut self.buf);
            let filtered =
                self.filter_chunk(&buf[..n], seg, position, ctx, txn, &mut out, &mut res);
            self.buf = buf;
            filtered?;
            stats.messages_read += res.messages_read;
            stats.bytes_read += res.bytes_read;
            stats.messages_written += res.messages_retained;
            stats.bytes_written += res.bytes_retained;
            stats.invalid_messages_read += res.invalid;
            position += res.bytes_read;
            if !out.is_empty() {
                let chunk = Chunk {
                    bytes_len: out.len(),
                    max_offset: res.max_offset,
                    max_timestamp: res.max_timestamp,
                    offset_of_max_timestamp: res.offset_of_max_timestamp,
                };
                dest.append(&out, &chunk)?;
                self.throttler.maybe_throttle(out.len() as u64);
            }
            if n > 0 && res.bytes_read == 0 {
                self.grow(seg, position, max_message)?;
            }
        }
        self.read_size = self.config.io_buffer_per_thread();
        Ok(())
    }

    /// The whole batches of one chunk through the filter.
    #[allow(clippy::too_many_arguments)]
    fn filter_chunk(
        &mut self,
        bytes: &[u8],
        seg: &LogSegment,
        position: u64,
        ctx: &FilterContext,
        txn: &mut TxnTracker,
        out: &mut Vec<u8>,
        res: &mut Filtered,
    ) -> Result<()> {
        for item in BatchIter::new(bytes) {
            let Ok((at, batch)) = item else { break };
            check_crc(&batch, seg, position + at as u64)?;
            filter_batch(&batch, ctx, self.map, txn, out, res)?;
        }
        Ok(())
    }
}

/// What a pass that panicked answers.
pub(super) fn panicked(log: &PartitionLog) -> StorageError {
    StorageError::Corrupt {
        path: log.dir().to_path_buf(),
        position: 0,
        reason: "the pass panicked".to_string(),
    }
}

/// A batch whose CRC does not match is not copied on: the pass stops, and
/// the partition is left as it is (Kafka's cleaner does not look).
fn check_crc(batch: &Batch, seg: &LogSegment, position: u64) -> Result<()> {
    batch.verify_crc().map_err(|e| StorageError::Corrupt {
        path: seg.path().to_path_buf(),
        position,
        reason: e.to_string(),
    })
}

fn sizes_of(seg: &Arc<LogSegment>) -> Result<SegmentSizes> {
    let ix = seg.indexes()?;
    Ok(SegmentSizes {
        base: seg.base_offset,
        log: seg.size()?,
        offset_index: (ix.offset.entries() * 8) as u64,
        time_index: (ix.time.entries() * 12) as u64,
    })
}
