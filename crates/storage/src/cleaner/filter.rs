//! What a batch keeps (Kafka's `cleanInto` filter over
//! `MemoryRecords.filterTo`): per batch, whether it goes whole, stays even
//! empty, or stays only if a record does; per record, whether it is the
//! latest of its key and, for a tombstone, whether its delete horizon has
//! passed. The output is the batch unchanged, rebuilt with the records it
//! keeps (and a delete horizon where a tombstone or a marker needs one),
//! or a bare header.

use std::collections::HashMap;

use super::offset_map::{KeyHash, OffsetMap};
use super::txn::{TxnTracker, control_type};
use crate::error::Result;
use crate::partition::LastRecord;
use commitfs_record::retain::{RecordView, empty_header, for_each_record, rebuild_batch};
use commitfs_record::{Batch, BatchHeader, BatchIter, RecordError};

/// One chunk of a segment to clean: its bytes (whole batches first, CRCs
/// checked), each batch's verdict, and its records as read.
pub(super) struct CleanChunk {
    pub bytes: Vec<u8>,
    /// The chunk's length that was read (`bytes` may hold more: a buffer
    /// used again).
    pub len: usize,
    /// Each whole batch, in order.
    pub batches: Vec<Scanned>,
    /// Every record of every whole batch that does not go whole, in order,
    /// with the hash of each key it looks up (see [`Verdict::looks_up`]; a
    /// record past the map's latest offset is kept without one).
    pub records: Vec<ReadRecord>,
}

/// One whole batch of a [`CleanChunk`], as the reader judged it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Scanned {
    pub verdict: Verdict,
    /// One past the batch's last record in [`CleanChunk::records`].
    pub records_end: usize,
    /// Each of the batch's offsets was put into the map, and each put
    /// replaced by a later one of its key: every record goes, and the
    /// batch was not decoded (none of its records are in `records`).
    pub superseded: bool,
}

/// What stays the same for every batch of a pass.
pub(super) struct FilterContext<'a> {
    pub now: i64,
    pub delete_retention_ms: i64,
    pub producers: &'a HashMap<i64, LastRecord>,
    /// The round's first uncleanable offset: its last batch stays.
    pub upper_bound: i64,
}

/// Kafka's `BatchRetention`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Retention {
    Delete,
    RetainEmpty,
    DeleteEmpty,
}

/// Counts of one chunk, as `FilterResult` keeps them.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Filtered {
    pub messages_read: u64,
    pub bytes_read: u64,
    pub messages_retained: u64,
    pub bytes_retained: u64,
    pub max_offset: i64,
    pub max_timestamp: i64,
    pub offset_of_max_timestamp: i64,
    /// Records without a key, dropped (`invalidMessagesRead`).
    pub invalid: u64,
}

impl Filtered {
    pub fn new() -> Filtered {
        Filtered {
            max_offset: -1,
            max_timestamp: -1,
            offset_of_max_timestamp: -1,
            ..Filtered::default()
        }
    }

    fn retained(&mut self, max_ts: i64, shallow: i64, max_offset: i64, msgs: u64, bytes: u64) {
        if max_ts > self.max_timestamp {
            self.max_timestamp = max_ts;
            self.offset_of_max_timestamp = shallow;
        }
        self.max_offset = self.max_offset.max(max_offset);
        self.messages_retained += msgs;
        self.bytes_retained += bytes;
    }
}

/// Kafka's `isBatchLastRecordOfProducer`: the batch holds the producer's
/// last sequence, or is the marker with its latest epoch (fencing).
fn is_last_of_producer(h: &BatchHeader, producers: &HashMap<i64, LastRecord>) -> bool {
    producers
        .get(&h.producer_id)
        .is_some_and(|last| match last.last_data_offset {
            Some(offset) => h.last_offset() == offset,
            None => h.is_control() && h.producer_epoch == last.epoch,
        })
}

/// What [`batch_verdict`] decided of one batch, in log order, before its
/// records are filtered (by either thread of a pass).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Verdict {
    pub retention: Retention,
    /// Every record goes (an aborted transaction's, or a marker past its horizon).
    pub discard_records: bool,
    /// A marker whose transaction left nothing behind: it gets a delete horizon.
    pub marker_for_empty_txn: bool,
}

impl Verdict {
    /// Whether the batch's keys are looked up in the map.
    pub fn looks_up(&self, h: &BatchHeader) -> bool {
        self.retention != Retention::Delete && !self.discard_records && !h.is_control()
    }
}

/// Kafka's `checkBatchRetention`: what the batch may lose, whether its
/// records all go, and whether it is a marker of a transaction left empty.
/// It moves the transaction state on, so it runs once per batch, in order.
pub(super) fn batch_verdict(
    batch: &Batch,
    ctx: &FilterContext,
    txn: &mut TxnTracker,
) -> Result<Verdict> {
    let h = &batch.header;
    let can_discard = if h.is_control() {
        txn.on_control_batch_read(h, control_type(batch)?)
    } else {
        txn.on_batch_read(h)
    };
    let discard_records = if h.is_control() {
        can_discard && h.has_delete_horizon() && h.base_timestamp <= ctx.now
    } else {
        can_discard
    };
    // A producer's last batch keeps its sequence for fencing; the round's
    // last batch keeps the offset the round cleaned up to.
    let retention = if (h.producer_id >= 0 && is_last_of_producer(h, ctx.producers))
        || h.next_offset() == ctx.upper_bound
    {
        Retention::RetainEmpty
    } else if discard_records {
        Retention::Delete
    } else {
        Retention::DeleteEmpty
    };
    Ok(Verdict {
        retention,
        discard_records,
        marker_for_empty_txn: can_discard && h.is_control(),
    })
}

/// One record as the reader found it: enough to decide whether it stays
/// without decoding it again (a batch is decoded again only when it keeps
/// some of its records and loses others, or needs a delete horizon).
#[derive(Clone, Copy, Debug)]
pub(super) struct ReadRecord {
    pub offset: i64,
    pub key: ReadKey,
    pub is_tombstone: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ReadKey {
    /// A data record without a key that would be looked up: dropped,
    /// counted as invalid.
    Missing,
    /// Not looked up: a marker's record, one past the map's latest offset,
    /// or one of a batch whose records all go.
    Unlooked,
    /// The key's hash, as the map hashes it.
    Hashed(KeyHash),
    /// Put into the map at this offset while it was built, and its key's
    /// latest there: what a lookup would answer, without one.
    Latest,
    /// Put into the map at this offset, then replaced by a later record
    /// of its key.
    Superseded,
}

/// The whole batches of one chunk through the filter into `out`.
pub(super) fn filter_chunk(
    map: &OffsetMap,
    chunk: &CleanChunk,
    ctx: &FilterContext,
    out: &mut Vec<u8>,
    res: &mut Filtered,
) -> Result<()> {
    let batches = BatchIter::new(&chunk.bytes[..chunk.len]).map_while(|item| item.ok());
    let mut keep = Vec::new();
    let mut start = 0;
    for ((_, batch), scanned) in batches.zip(&chunk.batches) {
        let records = &chunk.records[start..scanned.records_end];
        start = scanned.records_end;
        filter_batch(&batch, scanned, ctx, map, records, &mut keep, out, res)?;
    }
    Ok(())
}

/// Filters one batch into `out`, counting it in `res`. `records` holds
/// each of the batch's records, in order, as the reader found them (none
/// for a batch that goes whole or was superseded whole); `keep` is a
/// buffer for their verdicts.
#[allow(clippy::too_many_arguments)]
fn filter_batch(
    batch: &Batch,
    scanned: &Scanned,
    ctx: &FilterContext,
    map: &OffsetMap,
    records: &[ReadRecord],
    keep: &mut Vec<bool>,
    out: &mut Vec<u8>,
    res: &mut Filtered,
) -> Result<()> {
    let h = &batch.header;
    let Verdict {
        retention,
        discard_records,
        marker_for_empty_txn,
    } = scanned.verdict;
    res.bytes_read += batch.size() as u64;
    if retention == Retention::Delete {
        return Ok(());
    }
    res.messages_read += if scanned.superseded {
        h.record_count as u64
    } else {
        records.len() as u64
    };
    let (kept, tombstones) = if discard_records || scanned.superseded {
        // Nothing stays.
        keep.clear();
        (0, false)
    } else {
        judge_records(h, records, ctx, map, keep, res)
    };
    if kept == 0 {
        if retention == Retention::RetainEmpty {
            empty_header(h, out);
            res.retained(h.max_timestamp, h.last_offset(), h.last_offset(), 0, 61);
        }
        return Ok(());
    }
    let set_horizon = (tombstones || marker_for_empty_txn) && !h.has_delete_horizon();
    if kept == records.len() && !set_horizon {
        out.extend_from_slice(batch.bytes());
        res.retained(
            h.max_timestamp,
            h.last_offset(),
            h.last_offset(),
            kept as u64,
            batch.size() as u64,
        );
        return Ok(());
    }
    let section = batch.uncompressed_section()?;
    let mut views: Vec<RecordView> = Vec::with_capacity(kept);
    let mut at = 0;
    for_each_record(h, &section, |r| {
        if keep.get(at).copied().unwrap_or(false) {
            views.push(r);
        }
        at += 1;
        true
    })?;
    if views.len() != kept || at != records.len() {
        return Err(RecordError::Corrupt(format!(
            "batch {}: {at} records where the reader found {}",
            h.base_offset,
            records.len()
        ))
        .into());
    }
    rebuild_retained(batch, &views, set_horizon, ctx, out, res)
}

/// Which of a batch's records stay (into `keep`, in order), how many, and
/// whether a tombstone is among them: a control batch keeps every record; a
/// data batch a record whose key's latest offset it holds, and a tombstone
/// only until the batch's delete horizon.
fn judge_records(
    h: &BatchHeader,
    records: &[ReadRecord],
    ctx: &FilterContext,
    map: &OffsetMap,
    keep: &mut Vec<bool>,
    res: &mut Filtered,
) -> (usize, bool) {
    keep.clear();
    if h.is_control() {
        keep.resize(records.len(), true);
        return (records.len(), records.iter().any(|r| r.is_tombstone));
    }
    // Every slot is asked for before the first lookup, so that the
    // batch's cache misses overlap.
    for r in records {
        if let ReadKey::Hashed(hash) = &r.key {
            map.prefetch(hash);
        }
    }
    let retain_deletes = !h.has_delete_horizon() || ctx.now < h.base_timestamp;
    let (mut kept, mut tombstones) = (0usize, false);
    for r in records {
        let stays = match &r.key {
            ReadKey::Unlooked => true,
            ReadKey::Hashed(hash) => {
                r.offset >= map.get_hashed(hash) && (!r.is_tombstone || retain_deletes)
            }
            ReadKey::Latest => !r.is_tombstone || retain_deletes,
            ReadKey::Superseded => false,
            ReadKey::Missing => {
                res.invalid += 1;
                false
            }
        };
        keep.push(stays);
        if stays {
            kept += 1;
            tombstones |= r.is_tombstone;
        }
    }
    (kept, tombstones)
}

/// `filterTo` for a batch that keeps some of its records, or needs a
/// delete horizon: the batch rebuilt.
fn rebuild_retained(
    batch: &Batch,
    kept: &[RecordView],
    set_horizon: bool,
    ctx: &FilterContext,
    out: &mut Vec<u8>,
    res: &mut Filtered,
) -> Result<()> {
    let h = &batch.header;
    let n = kept.len() as u64;
    let horizon = if set_horizon {
        Some(ctx.now.saturating_add(ctx.delete_retention_ms))
    } else if h.has_delete_horizon() {
        Some(h.base_timestamp)
    } else {
        None
    };
    let start = out.len();
    let built = rebuild_batch(h, kept, horizon, out)?;
    let size = (out.len() - start) as u64;
    res.retained(
        built.max_timestamp,
        h.last_offset(),
        built.max_record_offset,
        n,
        size,
    );
    Ok(())
}
