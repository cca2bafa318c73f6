//! One pass of the log cleaner over one log (Kafka's `Cleaner`): the
//! offset map of the dirty section, then every segment from the log start
//! up to where the map reached, grouped, each group copied into one
//! cleaned segment with what it keeps, and swapped in.
//!
//! Reads go through a buffer of `log.cleaner.io.buffer.size / threads / 2`
//! bytes at a time, as Kafka's do: what the buffer holds of whole batches is
//! one chunk, and the batches a chunk keeps are appended to the cleaned
//! segment at once (so its index is Kafka's). The reads, CRC checks,
//! batch verdicts and key hashes run on a reader thread a few chunks ahead
//! (`read_ahead.rs`); this thread puts into the map, and filters the chunks
//! the reader does not (see `Sharing`) and writes them all. No lock is
//! held while the segments are read and written; only the swap takes the
//! writer lock.

use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, SyncSender, channel, sync_channel};

use log::info;

use super::CleanerConfig;
use super::cleaned::{Chunk, CleanedSegment, remove_cleaned};
use super::filter::{FilterContext, Filtered, filter_chunk};
use super::manager::{LogToClean, log_segments};
use super::offset_map::OffsetMap;
use super::read_ahead::{Cleaned, DirtyReader, Mapped, MappedChunk, Reading, SegmentReader};
use super::stats::CleanerStats;
use super::throttle::Throttler;
use super::txn::{TxnTracker, collect_aborted};
use crate::error::{IoContext, Result, StorageError};
use crate::partition::PartitionLog;
use crate::segment::LogSegment;

/// What a pass works with besides the log: its thread's map and buffers.
pub(crate) struct Cleaner<'a> {
    pub id: usize,
    pub map: &'a mut OffsetMap,
    pub config: &'a CleanerConfig,
    pub throttler: &'a Throttler,
    /// Fails when the pass must stop (the partition is deleted, the cleaner stops).
    pub check_done: &'a dyn Fn() -> Result<()>,
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

    /// Kafka's `buildOffsetMap` over `[start, end)`: a reader thread reads
    /// and hashes ahead ([`DirtyReader`]); this one puts.
    fn build_offset_map(
        &mut self,
        log: &PartitionLog,
        start: i64,
        end: i64,
        stats: &mut CleanerStats,
    ) -> Result<()> {
        self.map.clear();
        self.map.track(start, end);
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
        let reader = DirtyReader {
            reading: self.reading(log.config().max_message_bytes),
            segs: dirty,
            start,
            end,
            txn,
            hasher: self.map.hasher(),
        };
        let put = |rx: Receiver<Result<Mapped>>, used_tx: &Sender<MappedChunk>| -> Result<()> {
            for mapped in rx.iter() {
                (self.check_done)()?;
                match mapped? {
                    Mapped::Chunk(chunk) => {
                        if put_chunk(self.map, &chunk, max_entries, stats) {
                            return Ok(());
                        }
                        let _ = used_tx.send(chunk);
                    }
                    Mapped::SegmentEnd { next_segment_start } => {
                        self.map.update_latest_offset(next_segment_start - 1)
                    }
                }
            }
            Ok(())
        };
        read_ahead(
            self.id,
            log.local().dir(),
            "the pass panicked",
            move |tx, used| reader.run(tx, used),
            put,
        )?;
        info!(
            "Cleaner {}: Offset map for log {} complete.",
            self.id,
            log.name()
        );
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
        let mut dest = CleanedSegment::create(
            log.local().dir(),
            base,
            config.index_interval_bytes.max(0) as u64,
        )?;
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
                if let Err(r) = remove_cleaned(log.local().dir(), base) {
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

    /// Kafka's `cleanInto`: one source segment, chunk by chunk, read,
    /// judged and hashed ahead by a [`SegmentReader`], filtered by
    /// whichever thread [`Sharing`](super::Sharing) says, and written here in order.
    fn clean_into(
        &mut self,
        seg: &LogSegment,
        dest: &mut CleanedSegment,
        ctx: &FilterContext,
        max_message: i32,
        txn: &mut TxnTracker,
        stats: &mut CleanerStats,
    ) -> Result<()> {
        let map: &OffsetMap = self.map;
        let reader = SegmentReader {
            reading: self.reading(max_message),
            seg,
            map,
            ctx,
            txn,
        };
        let mut out = Vec::new();
        let filter = |rx: Receiver<Result<Cleaned>>, used_tx: &Sender<Vec<u8>>| -> Result<()> {
            for cleaned in rx.iter() {
                (self.check_done)()?;
                match cleaned? {
                    Cleaned::Read(chunk) => {
                        out.clear();
                        let mut res = Filtered::new();
                        filter_chunk(map, &chunk, ctx, &mut out, &mut res)?;
                        let _ = used_tx.send(chunk.bytes);
                        self.write(dest, &out, &res, stats)?;
                    }
                    Cleaned::Filtered { out, res } => {
                        self.write(dest, &out, &res, stats)?;
                        let _ = used_tx.send(out);
                    }
                }
            }
            Ok(())
        };
        read_ahead(
            self.id,
            seg.path(),
            "the pass's reader panicked",
            move |tx, used| reader.run(tx, used),
            filter,
        )
    }

    /// What this pass's readers read a log of `max_message` bytes with.
    fn reading(&self, max_message: i32) -> Reading<'a> {
        Reading {
            id: self.id,
            throttler: self.throttler,
            config: self.config,
            max_message,
        }
    }

    /// One filtered chunk appended to the cleaned segment, and counted.
    fn write(
        &self,
        dest: &mut CleanedSegment,
        out: &[u8],
        res: &Filtered,
        stats: &mut CleanerStats,
    ) -> Result<()> {
        stats.messages_read += res.messages_read;
        stats.bytes_read += res.bytes_read;
        stats.messages_written += res.messages_retained;
        stats.bytes_written += res.bytes_retained;
        stats.invalid_messages_read += res.invalid;
        if !out.is_empty() {
            let written = Chunk {
                bytes_len: out.len(),
                max_offset: res.max_offset,
                max_timestamp: res.max_timestamp,
                offset_of_max_timestamp: res.offset_of_max_timestamp,
            };
            dest.append(out, &written)?;
            self.throttler.maybe_throttle(out.len() as u64);
        }
        Ok(())
    }
}

/// Puts one chunk's keys into the map in order, as Kafka's
/// `buildOffsetMapForSegment` does; whether the map filled (the rest of the
/// chunk is then left to the next pass). Each slot is asked for a few keys
/// ahead of its put, so that the cache misses overlap.
fn put_chunk(
    map: &mut OffsetMap,
    chunk: &MappedChunk,
    max_entries: usize,
    stats: &mut CleanerStats,
) -> bool {
    const AHEAD: usize = 16;
    let keyed = &chunk.keyed;
    for k in keyed.iter().take(AHEAD) {
        map.prefetch(&k.hash);
    }
    let mut i = 0;
    for batch in &chunk.batches {
        map.batch_read(batch.base_offset);
        while i < batch.keyed_end {
            if let Some(ahead) = keyed.get(i + AHEAD) {
                map.prefetch(&ahead.hash);
            }
            let k = &keyed[i];
            if map.size() >= max_entries {
                stats.map_messages_read += k.at;
                return true;
            }
            map.put_hashed(&k.hash, k.offset);
            i += 1;
        }
        stats.map_messages_read += batch.records;
        if let Some(last) = batch.last_offset {
            map.update_latest_offset(last);
        }
    }
    stats.map_bytes_read += chunk.valid;
    false
}

/// What a pass that panicked answers.
/// Runs `read` on a reader thread of its own, a few chunks ahead of
/// `consume` on this one, which hands buffers back for `read` to use again.
/// `consume` owns the receiver so that it is dropped before the join: a
/// reader blocked on a full channel then gets an error and stops. A panic
/// of the reader is a corrupt `path`, for `reason`.
fn read_ahead<T: Send, U: Send>(
    id: usize,
    path: &Path,
    reason: &str,
    read: impl FnOnce(SyncSender<Result<T>>, Receiver<U>) + Send,
    consume: impl FnOnce(Receiver<Result<T>>, &Sender<U>) -> Result<()>,
) -> Result<()> {
    let (tx, rx) = sync_channel(16);
    let (used_tx, used_rx) = channel();
    std::thread::scope(|scope| {
        let thread = std::thread::Builder::new()
            .name(format!("cleaner-{id}-reader"))
            .spawn_scoped(scope, move || read(tx, used_rx))
            .at(path)?;
        let consumed = consume(rx, &used_tx);
        match thread.join() {
            Ok(()) => consumed,
            Err(_) => Err(StorageError::Corrupt {
                path: path.to_path_buf(),
                position: 0,
                reason: reason.to_string(),
            }),
        }
    })
}

pub(super) fn panicked(log: &PartitionLog) -> StorageError {
    StorageError::Corrupt {
        path: log.local().dir().to_path_buf(),
        position: 0,
        reason: "the pass panicked".to_string(),
    }
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
