//! Producer state, as Kafka's `ProducerStateManager` keeps it per partition:
//! for each producer id, its epoch and its last five batches (first and last
//! sequence, last offset, timestamp). An idempotent producer's retry of one
//! of those batches is answered with the offsets it was stored at; a gap in
//! sequence numbers or an older epoch is refused (`ProducerAppendInfo`).
//!
//! This module is the pure state, so that Kafka's rules can be tested
//! without a file; `manager.rs` keeps it for a partition, behind its lock,
//! with its files (`<offset>.snapshot`, Kafka's `ProducerSnapshot` format).
//!
//! An append is checked batch by batch against the committed state plus the
//! batches of the same append checked before it (Kafka's `updatedEntry`);
//! those are *staged*, and become committed only once the append is
//! published, so an append that fails leaves no trace here. A duplicate is
//! looked for in the committed state only, as Kafka does.

use std::collections::{BTreeMap, VecDeque};

use crate::record::BatchHeader;
use crate::record::state_files::ProducerEntry;

mod manager;

pub(crate) use manager::{Duplicate, ProducerStateManager};

/// `ProducerStateEntry.NUM_BATCHES_TO_RETAIN`.
pub const BATCHES_RETAINED: usize = 5;
/// Kafka's default `producer.id.expiration.ms` (one day): a producer whose
/// last batch is older is forgotten.
pub const PRODUCER_ID_EXPIRATION_MS: i64 = 86_400_000;
const NO_EPOCH: i16 = -1;

/// Why a batch is refused (Kafka's exceptions of the same names).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProducerRefusal {
    OutOfOrderSequence,
    InvalidProducerEpoch,
    /// A transactional batch: transactions are not served.
    Transactional,
}

/// One of the retained batches (`BatchMetadata`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchMeta {
    pub last_seq: i32,
    pub last_offset: i64,
    pub offset_delta: i32,
    pub timestamp: i64,
}

impl BatchMeta {
    pub fn first_seq(&self) -> i32 {
        decrement_sequence(self.last_seq, self.offset_delta)
    }
    pub fn first_offset(&self) -> i64 {
        self.last_offset - self.offset_delta as i64
    }
}

/// One producer's state (`ProducerStateEntry`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Producer {
    pub epoch: i16,
    pub batches: VecDeque<BatchMeta>,
    pub coordinator_epoch: i32,
    pub last_timestamp: i64,
}

impl Producer {
    fn empty() -> Producer {
        Producer {
            epoch: NO_EPOCH,
            batches: VecDeque::new(),
            coordinator_epoch: -1,
            last_timestamp: -1,
        }
    }

    fn last_seq(&self) -> Option<i32> {
        self.batches.back().map(|b| b.last_seq)
    }

    /// `addBatch`: a new epoch forgets the old epoch's batches.
    fn add(&mut self, epoch: i16, meta: BatchMeta) {
        if self.epoch != epoch {
            self.batches.clear();
            self.epoch = epoch;
        }
        if self.batches.len() == BATCHES_RETAINED {
            self.batches.pop_front();
        }
        self.batches.push_back(meta);
        self.last_timestamp = meta.timestamp;
    }
}

/// A batch as producer state sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Staged {
    producer_id: i64,
    epoch: i16,
    meta: BatchMeta,
}

fn staged_of(h: &BatchHeader, base_offset: i64) -> Staged {
    Staged {
        producer_id: h.producer_id,
        epoch: h.producer_epoch,
        meta: BatchMeta {
            last_seq: h.last_sequence(),
            last_offset: base_offset + h.last_offset_delta as i64,
            offset_delta: h.last_offset_delta,
            timestamp: h.max_timestamp,
        },
    }
}

/// A partition's producers.
#[derive(Clone, Debug, Default)]
pub struct ProducerStates {
    producers: BTreeMap<i64, Producer>,
    staged: Vec<Staged>,
    /// Whether the partition keeps producer state: it has `.snapshot` files
    /// (or had an idempotent batch since it was loaded). A partition only
    /// ever written without producer ids has none, and writes none.
    pub tracking: bool,
}

/// What the check of one batch found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Checked {
    Append,
    Duplicate { first_offset: i64, last_offset: i64 },
}

impl ProducerStates {
    /// The state a snapshot holds (`readSnapshot`): one batch per producer
    /// with a last offset. Producers expired at `now_ms` are left out.
    pub fn from_snapshot(entries: &[ProducerEntry], now_ms: i64) -> ProducerStates {
        let mut s = ProducerStates {
            tracking: true,
            ..ProducerStates::default()
        };
        for e in entries {
            if now_ms - e.timestamp >= PRODUCER_ID_EXPIRATION_MS {
                continue;
            }
            let mut p = Producer::empty();
            p.epoch = e.epoch;
            p.coordinator_epoch = e.coordinator_epoch;
            p.last_timestamp = e.timestamp;
            if e.last_offset >= 0 {
                p.batches.push_back(BatchMeta {
                    last_seq: e.last_sequence,
                    last_offset: e.last_offset,
                    offset_delta: e.offset_delta,
                    timestamp: e.timestamp,
                });
            }
            s.producers.insert(e.producer_id, p);
        }
        s
    }

    /// The entries of a snapshot at `offset` (`writeSnapshot`): the
    /// committed state plus the staged batches below `offset`, each producer
    /// with its last batch, in producer id order.
    pub fn snapshot_entries(&self, offset: i64) -> Vec<ProducerEntry> {
        let mut producers = self.producers.clone();
        for s in self.staged.iter().filter(|s| s.meta.last_offset < offset) {
            producers
                .entry(s.producer_id)
                .or_insert_with(Producer::empty)
                .add(s.epoch, s.meta);
        }
        producers
            .iter()
            .map(|(&id, p)| {
                let last = p.batches.back();
                ProducerEntry {
                    producer_id: id,
                    epoch: p.epoch,
                    last_sequence: last.map_or(-1, |b| b.last_seq),
                    last_offset: last.map_or(-1, |b| b.last_offset),
                    offset_delta: last.map_or(0, |b| b.offset_delta),
                    timestamp: p.last_timestamp,
                    coordinator_epoch: p.coordinator_epoch,
                    current_txn_first_offset: -1,
                }
            })
            .collect()
    }

    /// Each producer's last data offset (none when it has no batch left)
    /// and epoch: Kafka's `lastRecordsOfActiveProducers`, whose batches the
    /// log cleaner keeps.
    pub fn last_records(&self) -> Vec<(i64, Option<i64>, i16)> {
        self.producers
            .iter()
            .map(|(id, p)| (*id, p.batches.back().map(|b| b.last_offset), p.epoch))
            .collect()
    }

    pub fn producer(&self, id: i64) -> Option<&Producer> {
        self.producers.get(&id)
    }

    pub fn len(&self) -> usize {
        self.producers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    /// Forgets what was staged (an append that failed, or a new one).
    pub fn discard_staged(&mut self) {
        self.staged.clear();
    }

    /// Makes the staged batches committed (the append is published).
    pub fn commit_staged(&mut self) {
        for s in std::mem::take(&mut self.staged) {
            self.apply(s);
        }
    }

    fn apply(&mut self, s: Staged) {
        self.producers
            .entry(s.producer_id)
            .or_insert_with(Producer::empty)
            .add(s.epoch, s.meta);
    }

    /// A batch read back from the log at load (Kafka's replication origin:
    /// no checks, the batch is in the log).
    pub fn replay(&mut self, h: &BatchHeader) {
        if h.producer_id >= 0 && !h.is_control() {
            self.apply(staged_of(h, h.base_offset));
        }
    }

    /// Forgets producers whose last batch is older than the expiration
    /// (`removeExpiredProducers`). Returns how many went.
    pub fn expire(&mut self, now_ms: i64) -> usize {
        let before = self.producers.len();
        self.producers
            .retain(|_, p| now_ms - p.last_timestamp < PRODUCER_ID_EXPIRATION_MS);
        before - self.producers.len()
    }

    /// Checks a client's batch about to be stored at `base_offset`, and
    /// stages it when it is to be appended. Batches without a producer id
    /// need no state.
    pub fn check(
        &mut self,
        h: &BatchHeader,
        base_offset: i64,
    ) -> Result<Checked, (ProducerRefusal, String)> {
        if h.is_transactional() {
            return Err((
                ProducerRefusal::Transactional,
                format!(
                    "a transactional batch of producer {}: transactions are not served",
                    h.producer_id
                ),
            ));
        }
        if h.producer_id < 0 {
            return Ok(Checked::Append);
        }
        if let Some(d) = self.duplicate(h) {
            return Ok(Checked::Duplicate {
                first_offset: d.first_offset(),
                last_offset: d.last_offset,
            });
        }
        let staged = staged_of(h, base_offset);
        self.check_sequence(h, base_offset)?;
        self.staged.push(staged);
        Ok(Checked::Append)
    }

    /// `ProducerStateEntry.findDuplicateBatch` on the committed state.
    fn duplicate(&self, h: &BatchHeader) -> Option<BatchMeta> {
        let p = self.producers.get(&h.producer_id)?;
        if p.epoch != h.producer_epoch {
            return None;
        }
        let (first, last) = (h.base_sequence, h.last_sequence());
        p.batches
            .iter()
            .find(|b| b.first_seq() == first && b.last_seq == last)
            .copied()
    }

    /// The producer as the next batch of this append meets it: committed,
    /// plus what this append staged for it.
    fn updated(&self, id: i64) -> Producer {
        let mut p = self
            .producers
            .get(&id)
            .cloned()
            .unwrap_or_else(Producer::empty);
        for s in self.staged.iter().filter(|s| s.producer_id == id) {
            p.add(s.epoch, s.meta);
        }
        p
    }

    /// `ProducerAppendInfo.checkProducerEpoch` and `checkSequence` (Kafka
    /// 2.5 and later: a producer with no state, e.g. one whose batches
    /// retention removed, may start at any sequence).
    fn check_sequence(
        &self,
        h: &BatchHeader,
        offset: i64,
    ) -> Result<(), (ProducerRefusal, String)> {
        let id = h.producer_id;
        let current = self.producers.get(&id);
        let current_epoch = current.map_or(NO_EPOCH, |p| p.epoch);
        let updated = self.updated(id);
        let (epoch, first) = (h.producer_epoch, h.base_sequence);
        if epoch < updated.epoch {
            return Err((
                ProducerRefusal::InvalidProducerEpoch,
                format!(
                    "epoch of producer {id} at offset {offset} is {epoch}, which is smaller than the last seen epoch {}",
                    updated.epoch
                ),
            ));
        }
        let out_of_order = |expected: String| {
            Err((
                ProducerRefusal::OutOfOrderSequence,
                format!(
                    "out of order sequence number for producer {id} at offset {offset}: {first} (incoming seq. number), {expected}"
                ),
            ))
        };
        if epoch != updated.epoch {
            if first != 0 && updated.epoch != NO_EPOCH {
                return out_of_order(format!(
                    "a new epoch {epoch} must start at sequence 0 (current epoch {})",
                    updated.epoch
                ));
            }
            return Ok(());
        }
        let last = match updated.last_seq() {
            Some(s) => s,
            None if current_epoch == epoch => current.and_then(Producer::last_seq).unwrap_or(-1),
            None => -1,
        };
        if current_epoch == NO_EPOCH || in_sequence(last, first) {
            return Ok(());
        }
        out_of_order(format!("{last} (current end sequence number)"))
    }
}

fn in_sequence(last: i32, next: i32) -> bool {
    next as i64 == last as i64 + 1 || (next == 0 && last == i32::MAX)
}

/// `DefaultRecordBatch.decrementSequence`: sequences wrap at `i32::MAX`.
fn decrement_sequence(sequence: i32, decrement: i32) -> i32 {
    if sequence < decrement {
        (i32::MAX - (decrement - sequence)).wrapping_add(1)
    } else {
        sequence - decrement
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(pid: i64, epoch: i16, seq: i32, count: i32) -> BatchHeader {
        BatchHeader {
            base_offset: 0,
            batch_length: 0,
            partition_leader_epoch: 0,
            magic: 2,
            crc: 0,
            attributes: 0,
            last_offset_delta: count - 1,
            base_timestamp: 1_000,
            max_timestamp: 1_000,
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: seq,
            record_count: count,
        }
    }

    fn append(
        s: &mut ProducerStates,
        h: &BatchHeader,
        at: i64,
    ) -> Result<Checked, ProducerRefusal> {
        let r = s.check(h, at).map_err(|(r, _)| r);
        s.commit_staged();
        r
    }

    #[test]
    fn sequences_duplicates_and_epochs() {
        let mut s = ProducerStates::default();
        assert_eq!(append(&mut s, &batch(7, 0, 0, 3), 0), Ok(Checked::Append));
        assert_eq!(append(&mut s, &batch(7, 0, 3, 2), 3), Ok(Checked::Append));
        // A retry of the first batch gets its offsets back.
        assert_eq!(
            append(&mut s, &batch(7, 0, 0, 3), 5),
            Ok(Checked::Duplicate {
                first_offset: 0,
                last_offset: 2
            })
        );
        assert_eq!(
            append(&mut s, &batch(7, 0, 6, 1), 5),
            Err(ProducerRefusal::OutOfOrderSequence)
        );
        assert_eq!(
            append(&mut s, &batch(7, 1, 4, 1), 5),
            Err(ProducerRefusal::OutOfOrderSequence),
            "a new epoch starts at 0"
        );
        assert_eq!(append(&mut s, &batch(7, 1, 0, 1), 5), Ok(Checked::Append));
        assert_eq!(
            append(&mut s, &batch(7, 0, 5, 1), 6),
            Err(ProducerRefusal::InvalidProducerEpoch)
        );
        // An unknown producer may start anywhere (Kafka 2.5+).
        assert_eq!(append(&mut s, &batch(8, 0, 42, 1), 6), Ok(Checked::Append));
        // No producer id: no state.
        assert_eq!(
            append(&mut s, &batch(-1, -1, -1, 4), 7),
            Ok(Checked::Append)
        );
        assert_eq!(s.len(), 2);
    }

    #[test]
    fn only_five_batches_are_kept_and_staging_can_be_undone() {
        let mut s = ProducerStates::default();
        for i in 0..7 {
            assert_eq!(
                append(&mut s, &batch(1, 0, i, 1), i as i64),
                Ok(Checked::Append)
            );
        }
        assert_eq!(s.producer(1).unwrap().batches.len(), BATCHES_RETAINED);
        assert_eq!(
            append(&mut s, &batch(1, 0, 0, 1), 7),
            Err(ProducerRefusal::OutOfOrderSequence)
        );
        // Two batches of one append: the second follows the staged first.
        assert!(s.check(&batch(1, 0, 7, 2), 7).is_ok());
        assert!(s.check(&batch(1, 0, 9, 1), 9).is_ok());
        let snap = s.snapshot_entries(9);
        assert_eq!(
            snap[0].last_sequence, 8,
            "a snapshot at 9 holds what is below 9"
        );
        s.discard_staged();
        assert_eq!(s.producer(1).unwrap().last_seq(), Some(6));
        let entries = s.snapshot_entries(i64::MAX);
        let back = ProducerStates::from_snapshot(&entries, 1_000);
        assert_eq!(back.producer(1).unwrap().last_seq(), Some(6));
        assert_eq!(back.producer(1).unwrap().batches.len(), 1);
        assert_eq!(
            ProducerStates::from_snapshot(&entries, 1_000 + PRODUCER_ID_EXPIRATION_MS).len(),
            0
        );
    }

    #[test]
    fn transactional_batches_are_refused() {
        let mut s = ProducerStates::default();
        let mut h = batch(3, 0, 0, 1);
        h.attributes |= 0x10;
        assert_eq!(append(&mut s, &h, 0), Err(ProducerRefusal::Transactional));
    }
}
