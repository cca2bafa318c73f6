//! The reading half of a pass, on a thread of its own beside the cleaner
//! thread: segments chunk by chunk (`log.cleaner.io.buffer.size / threads
//! / 2` bytes, grown for a larger batch as Kafka's `growBuffersOrFail`
//! does), each record's key hashed.
//!
//! - [`DirtyReader`], for Kafka's `buildOffsetMap`: the dirty section's
//!   batches through the transaction rules, each key with its offset. The
//!   cleaner thread puts them into the map in the records' order.
//! - [`SegmentReader`], for `cleanInto`: a segment's chunks, their CRCs
//!   checked, each batch judged in order (its retention, the transaction
//!   rules: Kafka's `checkBatchRetention`), its records decoded once into
//!   their offsets, tombstone flags and, for each key it looks up, what
//!   the map's puts already tell of it or else the key's hash. Filtering a chunk then needs only the chunk and the map, so either
//!   thread may do it ([`Sharing`]); it decodes (and inflates) a batch
//!   again only to rebuild it. The cleaner thread writes the chunks in log
//!   order.
//!
//! Reading, checking and hashing took as long as the rest; one after the
//! other, they made a pass twice as long. A pass now takes two cores for
//! as long as it runs. While the map is built, the puts must follow the
//! records' order and stay on the cleaner thread; while segments are
//! cleaned, the reader also filters a chunk whenever the cleaner thread
//! has fallen behind, so neither core waits for the other.
//!
//! A channel holds 16 chunks, so a reader is never more than that ahead.
//! When the map fills, or the pass stops, the cleaner thread drops its end
//! and the reader stops at its next send.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};

use log::info;

use super::CleanerConfig;
use super::filter::{
    CleanChunk, FilterContext, Filtered, ReadKey, ReadRecord, Retention, Scanned, batch_verdict,
    filter_chunk,
};
use super::offset_map::{KeyHash, KeyHasher, OffsetMap};
use super::throttle::Throttler;
use super::txn::{TxnTracker, control_type};
use crate::batch_reader::read_full_at;
use crate::error::{IoContext, Result, StorageError};
use crate::segment::LogSegment;
use commitfs_record::retain::for_each_record;
use commitfs_record::{BatchIter, peek_frame};

/// What the reader sends, in log order.
pub(super) enum Mapped {
    Chunk(MappedChunk),
    /// A segment read to its end: the map's latest offset is then the one
    /// before the next segment's base (or the section's end).
    SegmentEnd {
        next_segment_start: i64,
    },
}

/// One chunk's whole batches, read.
#[derive(Default)]
pub(super) struct MappedChunk {
    /// Every record at or past the section's start with a key, in order.
    pub keyed: Vec<Keyed>,
    pub batches: Vec<MappedBatch>,
    /// Bytes of the chunk's whole batches.
    pub valid: u64,
}

pub(super) struct Keyed {
    pub hash: KeyHash,
    pub offset: i64,
    /// The record's place in its batch: the records read before it, had
    /// the map filled there.
    pub at: u64,
}

pub(super) struct MappedBatch {
    pub base_offset: i64,
    /// One past the batch's last entry in [`MappedChunk::keyed`].
    pub keyed_end: usize,
    /// Records the batch counts as read (a marker counts one).
    pub records: u64,
    /// The batch's last offset, when it is at or past the section's start.
    pub last_offset: Option<i64>,
}

/// The dirty section `[start, end)` of one log, to read.
pub(super) struct DirtyReader<'a> {
    pub reading: Reading<'a>,
    pub segs: Vec<Arc<LogSegment>>,
    pub start: i64,
    pub end: i64,
    pub txn: TxnTracker,
    pub hasher: KeyHasher,
}

impl DirtyReader<'_> {
    /// Reads the whole section into `tx`, taking chunks the cleaner thread
    /// is done with back from `used`; an error ends it, sent as the last item.
    pub fn run(mut self, tx: SyncSender<Result<Mapped>>, used: Receiver<MappedChunk>) {
        if let Err(e) = self.read_all(&tx, &used) {
            let _ = tx.send(Err(e));
        }
    }

    fn read_all(
        &mut self,
        tx: &SyncSender<Result<Mapped>>,
        used: &Receiver<MappedChunk>,
    ) -> Result<()> {
        let mut buf = Vec::new();
        for (i, seg) in self.segs.iter().enumerate() {
            let next_segment_start = self.segs.get(i + 1).map_or(self.end, |s| s.base_offset);
            let mut position = seg.lookup(self.start)?.position as u64;
            let size = seg.size()?;
            let mut read_size = self.reading.config.io_buffer_per_thread();
            while position < size {
                let n = self.reading.read(seg, position, read_size, &mut buf)?;
                // A chunk's vectors used again: grown anew for each chunk,
                // they were pages faulted in on this thread and read cold
                // on the other.
                let mut chunk = used.try_recv().unwrap_or_default();
                map_chunk(
                    &buf[..n],
                    self.start,
                    &mut self.txn,
                    &self.hasher,
                    &mut chunk,
                )?;
                let valid = chunk.valid;
                if tx.send(Ok(Mapped::Chunk(chunk))).is_err() {
                    return Ok(());
                }
                position += valid;
                if valid == 0 {
                    read_size = self.reading.grown(&buf[..n], read_size, seg, position)?;
                }
            }
            if tx
                .send(Ok(Mapped::SegmentEnd { next_segment_start }))
                .is_err()
            {
                return Ok(());
            }
        }
        Ok(())
    }
}

/// The whole batches of one chunk into `chunk`: what Kafka's
/// `buildOffsetMapForSegment` puts of each, but the puts.
fn map_chunk(
    bytes: &[u8],
    start: i64,
    txn: &mut TxnTracker,
    hasher: &KeyHasher,
    chunk: &mut MappedChunk,
) -> Result<()> {
    chunk.keyed.clear();
    chunk.batches.clear();
    chunk.valid = 0;
    for item in BatchIter::new(bytes) {
        let Ok((_, batch)) = item else { break };
        let h = batch.header;
        let records = if h.is_control() {
            txn.on_control_batch_read(&h, control_type(&batch)?);
            1
        } else if txn.on_batch_read(&h) {
            h.record_count.max(0) as u64
        } else {
            let section = batch.uncompressed_section()?;
            let keyed = &mut chunk.keyed;
            let mut at = 0u64;
            for_each_record(&h, &section, |r| {
                if let Some(key) = r.key
                    && r.offset >= start
                {
                    keyed.push(Keyed {
                        hash: hasher.hash(key),
                        offset: r.offset,
                        at,
                    });
                }
                at += 1;
                true
            })?;
            at
        };
        chunk.batches.push(MappedBatch {
            base_offset: h.base_offset,
            keyed_end: chunk.keyed.len(),
            records,
            last_offset: (h.last_offset() >= start).then(|| h.last_offset()),
        });
        chunk.valid += batch.size() as u64;
    }
    Ok(())
}

/// Reads up to `read_size` bytes of `seg` at `position` into `buf`; returns
/// how many.
fn read_chunk(
    seg: &LogSegment,
    position: u64,
    read_size: usize,
    buf: &mut Vec<u8>,
) -> Result<usize> {
    let size = seg.size()?;
    let want = (size - position).min(read_size as u64) as usize;
    buf.resize(want, 0);
    let n = read_full_at(seg.log_file()?, buf, position).at(seg.path())?;
    Ok(n)
}

/// What both readers of a pass read a segment with: the I/O limit, and the
/// bounds its buffer grows within.
#[derive(Clone, Copy)]
pub(super) struct Reading<'a> {
    /// The cleaner thread's, for its log lines.
    pub id: usize,
    pub throttler: &'a Throttler,
    pub config: &'a CleanerConfig,
    /// The log's `max.message.bytes`.
    pub max_message: i32,
}

impl Reading<'_> {
    /// One chunk read into `buf`, counted against the I/O limit.
    fn read(
        &self,
        seg: &LogSegment,
        position: u64,
        size: usize,
        buf: &mut Vec<u8>,
    ) -> Result<usize> {
        let n = read_chunk(seg, position, size, buf)?;
        self.throttler.maybe_throttle(n as u64);
        Ok(n)
    }

    /// Kafka's `growBuffersOrFail`: a batch larger than the buffer (`chunk`
    /// holds none whole) doubles it, up to the largest batch the log may hold.
    /// Returns the new read size.
    fn grown(&self, chunk: &[u8], cap: usize, seg: &LogSegment, position: u64) -> Result<usize> {
        let max_message = self.max_message.max(0) as usize;
        let corrupt = |reason: String| StorageError::Corrupt {
            path: seg.path().to_path_buf(),
            position,
            reason,
        };
        let max_size = if cap >= max_message {
            let declared = peek_frame(chunk)
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
        Ok(new)
    }
}

/// A chunk as the reader sends it, in log order: to filter, or filtered
/// by the reader itself.
pub(super) enum Cleaned {
    Read(CleanChunk),
    Filtered { out: Vec<u8>, res: Filtered },
}

/// Which thread of a pass filters a segment's chunks. Filtering is most
/// of a pass's work past the map, and it needs nothing but the chunk, its
/// verdicts and the map, so either thread may do it; the cleaner thread
/// then writes the chunks in order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Sharing {
    /// The reader filters a chunk when the cleaner thread is behind (the
    /// channel is full), and hands it over otherwise: both cores stay busy
    /// whichever thread's work is the larger.
    #[default]
    WhenBehind,
    /// The cleaner thread filters every chunk.
    CleanerThread,
    /// The reader filters every chunk.
    Reader,
    /// Every other chunk each, to test that chunks filtered by either
    /// thread come out in order.
    Alternate,
}

/// A segment to clean, read, checked, judged and hashed ahead of Kafka's
/// `cleanInto` on a thread of its own.
pub(super) struct SegmentReader<'a> {
    pub reading: Reading<'a>,
    pub seg: &'a LogSegment,
    pub map: &'a OffsetMap,
    pub ctx: &'a FilterContext<'a>,
    /// The pass's transaction state: the reader judges each batch in order.
    pub txn: &'a mut TxnTracker,
}

impl SegmentReader<'_> {
    /// Reads the whole segment into `tx`, taking buffers back from `used`;
    /// an error ends it, sent as the last item.
    pub fn run(mut self, tx: SyncSender<Result<Cleaned>>, used: Receiver<Vec<u8>>) {
        if let Err(e) = self.read_all(&tx, &used) {
            let _ = tx.send(Err(e));
        }
    }

    fn read_all(
        &mut self,
        tx: &SyncSender<Result<Cleaned>>,
        used: &Receiver<Vec<u8>>,
    ) -> Result<()> {
        let seg = self.seg;
        let size = seg.size()?;
        let mut position = 0u64;
        let mut read_size = self.reading.config.io_buffer_per_thread();
        // Buffers this thread is done with, before the cleaner thread's.
        let mut spare: Vec<Vec<u8>> = Vec::new();
        let mut n = 0u64;
        let mut records_cap = 0;
        while position < size {
            let mut bytes = take_buffer(&mut spare, used);
            let len = self.reading.read(seg, position, read_size, &mut bytes)?;
            let mut chunk = CleanChunk {
                bytes,
                len,
                batches: Vec::new(),
                records: Vec::with_capacity(records_cap),
            };
            let valid = self.scan_chunk(&mut chunk, position)?;
            records_cap = records_cap.max(chunk.records.len());
            if valid == 0 {
                read_size = self
                    .reading
                    .grown(&chunk.bytes[..len], read_size, seg, position)?;
            }
            position += valid;
            let here = match self.reading.config.sharing {
                Sharing::WhenBehind => None,
                Sharing::CleanerThread => Some(false),
                Sharing::Reader => Some(true),
                Sharing::Alternate => Some(n % 2 == 1),
            };
            n += 1;
            let chunk = match here {
                Some(true) => chunk,
                Some(false) => {
                    if tx.send(Ok(Cleaned::Read(chunk))).is_err() {
                        return Ok(());
                    }
                    continue;
                }
                None => match tx.try_send(Ok(Cleaned::Read(chunk))) {
                    Ok(()) => continue,
                    Err(TrySendError::Full(Ok(Cleaned::Read(chunk)))) => chunk,
                    // The cleaner thread stopped.
                    Err(_) => return Ok(()),
                },
            };
            let mut out = take_buffer(&mut spare, used);
            out.clear();
            let mut res = Filtered::new();
            filter_chunk(self.map, &chunk, self.ctx, &mut out, &mut res)?;
            spare.push(chunk.bytes);
            if tx.send(Ok(Cleaned::Filtered { out, res })).is_err() {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Checks each whole batch's CRC, judges it, and reads the records
    /// of each batch that does not go whole, hashing the keys it looks up;
    /// returns the whole batches' length.
    fn scan_chunk(&mut self, chunk: &mut CleanChunk, position: u64) -> Result<u64> {
        let mut valid = 0u64;
        let latest = self.map.latest_offset();
        for item in BatchIter::new(&chunk.bytes[..chunk.len]) {
            let Ok((at, batch)) = item else { break };
            // A batch whose CRC does not match is not copied on: the pass
            // stops, and the partition is left as it is (Kafka's cleaner
            // does not look).
            batch.verify_crc().map_err(|e| StorageError::Corrupt {
                path: self.seg.path().to_path_buf(),
                position: position + at as u64,
                reason: e.to_string(),
            })?;
            let verdict = batch_verdict(&batch, self.ctx, self.txn)?;
            let h = batch.header;
            // A batch the map's puts already replaced record by record:
            // one offset a record (the count spans its offsets), each put
            // and replaced. Its records were decoded while the map was
            // built; they need not be again.
            let superseded = verdict.looks_up(&h)
                && h.last_offset() <= latest
                && h.record_count > 0
                && h.record_count as i64 == h.last_offset() - h.base_offset + 1
                && self.map.all_superseded(h.base_offset, h.last_offset());
            if verdict.retention != Retention::Delete && !superseded {
                let looks_up = verdict.looks_up(&h);
                let section = batch.uncompressed_section()?;
                let records = &mut chunk.records;
                let map = self.map;
                for_each_record(&h, &section, |r| {
                    let key = match r.key {
                        _ if !looks_up || r.offset > latest => ReadKey::Unlooked,
                        Some(key) => match map.superseded(r.offset) {
                            Some(true) => ReadKey::Superseded,
                            Some(false) => ReadKey::Latest,
                            None => ReadKey::Hashed(map.hash(key)),
                        },
                        None => ReadKey::Missing,
                    };
                    records.push(ReadRecord {
                        offset: r.offset,
                        key,
                        is_tombstone: r.is_tombstone,
                    });
                    true
                })?;
            }
            chunk.batches.push(Scanned {
                verdict,
                records_end: chunk.records.len(),
                superseded,
            });
            valid += batch.size() as u64;
        }
        Ok(valid)
    }
}

/// A buffer to read or filter into: one this thread is done with, else one
/// the cleaner thread gave back, else a new one.
fn take_buffer(spare: &mut Vec<Vec<u8>>, used: &Receiver<Vec<u8>>) -> Vec<u8> {
    spare
        .pop()
        .or_else(|| used.try_recv().ok())
        .unwrap_or_default()
}
