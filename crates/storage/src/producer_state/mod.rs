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
//!
//! Transactions (Kafka's `ProducerAppendInfo.appendDataBatch` and
//! `appendEndTxnMarker`, `ProducerStateManager.ongoingTxns`): a producer's
//! first transactional batch opens its transaction at that batch's offset;
//! its COMMIT or ABORT marker closes it and, when the transaction held
//! data, completes it ([`CompletedTxn`]). The open transactions, by first
//! offset, give the partition's first unstable offset, below which a
//! `read_committed` reader may read.

use std::collections::{BTreeMap, VecDeque};

use commitfs_record::BatchHeader;
use commitfs_record::state_files::ProducerEntry;

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
    /// A transactional batch outside a transaction coordinator's append.
    Transactional,
    /// A plain batch of a producer whose transaction is open (Kafka's
    /// `InvalidTxnStateException`).
    InvalidTxnState,
    /// A marker from a coordinator older than the one that last wrote one
    /// for the producer (`TransactionCoordinatorFencedException`).
    CoordinatorFenced,
}

/// Who writes a batch (Kafka's `AppendOrigin`): a client's batches are
/// checked in full; the transaction coordinator's (markers, transactional
/// offset commits) have no sequence to check; a batch read back from the
/// log (a load) is checked for nothing, only applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    Client,
    Coordinator,
    Replication,
}

/// A transaction that held data, ended by the marker at `last_offset`
/// (Kafka's `CompletedTxn`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompletedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: i64,
    pub aborted: bool,
}

/// An end-of-transaction marker, as producer state reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Marker {
    pub producer_id: i64,
    pub epoch: i16,
    pub coordinator_epoch: i32,
    pub commit: bool,
    /// The marker batch's offset.
    pub offset: i64,
    /// Its record's timestamp.
    pub timestamp: i64,
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
    /// The first offset of its open transaction.
    pub current_txn_first_offset: Option<i64>,
}

impl Producer {
    fn empty() -> Producer {
        Producer {
            epoch: NO_EPOCH,
            batches: VecDeque::new(),
            coordinator_epoch: -1,
            last_timestamp: -1,
            current_txn_first_offset: None,
        }
    }

    /// `ProducerStateEntry.update(epoch, coordinatorEpoch, timestamp)`, as
    /// a marker leaves the producer: its transaction closed, a new epoch
    /// (a fenced or timed-out abort bumps it) forgetting the old batches.
    fn end_txn(&mut self, epoch: i16, coordinator_epoch: i32, timestamp: i64) {
        if self.epoch != epoch {
            self.batches.clear();
            self.epoch = epoch;
        }
        self.coordinator_epoch = coordinator_epoch;
        self.current_txn_first_offset = None;
        self.last_timestamp = timestamp;
    }

    /// `isProducerExpired`: an open transaction keeps a producer.
    fn expired(&self, now_ms: i64) -> bool {
        self.current_txn_first_offset.is_none()
            && now_ms - self.last_timestamp >= PRODUCER_ID_EXPIRATION_MS
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
enum Staged {
    Data {
        producer_id: i64,
        epoch: i16,
        meta: BatchMeta,
        /// The batch opens its producer's transaction.
        opens_txn: bool,
    },
    Marker {
        marker: Marker,
        completed: Option<CompletedTxn>,
    },
}

impl Staged {
    fn producer_id(&self) -> i64 {
        match self {
            Staged::Data { producer_id, .. } => *producer_id,
            Staged::Marker { marker, .. } => marker.producer_id,
        }
    }

    /// The staged item's effect on its producer.
    fn apply_to(&self, p: &mut Producer) {
        match *self {
            Staged::Data {
                epoch,
                meta,
                opens_txn,
                ..
            } => {
                p.add(epoch, meta);
                if opens_txn {
                    p.current_txn_first_offset = Some(meta.first_offset());
                }
            }
            Staged::Marker { marker, .. } => {
                p.end_txn(marker.epoch, marker.coordinator_epoch, marker.timestamp)
            }
        }
    }

    /// Its last offset, for a snapshot that holds what is below an offset.
    fn last_offset(&self) -> i64 {
        match self {
            Staged::Data { meta, .. } => meta.last_offset,
            Staged::Marker { marker, .. } => marker.offset,
        }
    }
}

fn staged_of(h: &BatchHeader, base_offset: i64) -> Staged {
    Staged::Data {
        producer_id: h.producer_id,
        epoch: h.producer_epoch,
        meta: BatchMeta {
            last_seq: h.last_sequence(),
            last_offset: base_offset + h.last_offset_delta as i64,
            offset_delta: h.last_offset_delta,
            timestamp: h.max_timestamp,
        },
        opens_txn: false,
    }
}

/// A partition's producers.
#[derive(Clone, Debug, Default)]
pub struct ProducerStates {
    producers: BTreeMap<i64, Producer>,
    /// Open transactions: first offset → producer (`ongoingTxns`).
    ongoing: BTreeMap<i64, i64>,
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
            let mut p = Producer::empty();
            p.epoch = e.epoch;
            p.coordinator_epoch = e.coordinator_epoch;
            p.last_timestamp = e.timestamp;
            p.current_txn_first_offset =
                (e.current_txn_first_offset >= 0).then_some(e.current_txn_first_offset);
            if p.expired(now_ms) {
                continue;
            }
            if let Some(first) = p.current_txn_first_offset {
                s.ongoing.insert(first, e.producer_id);
            }
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
        for s in self.staged.iter().filter(|s| s.last_offset() < offset) {
            s.apply_to(
                producers
                    .entry(s.producer_id())
                    .or_insert_with(Producer::empty),
            );
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
                    current_txn_first_offset: p.current_txn_first_offset.unwrap_or(-1),
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
        let p = self
            .producers
            .entry(s.producer_id())
            .or_insert_with(Producer::empty);
        let open_before = p.current_txn_first_offset;
        s.apply_to(p);
        match s {
            Staged::Data {
                opens_txn, meta, ..
            } if opens_txn => {
                self.ongoing.insert(meta.first_offset(), s.producer_id());
            }
            Staged::Marker { .. } => {
                if let Some(first) = open_before {
                    self.ongoing.remove(&first);
                }
            }
            Staged::Data { .. } => {}
        }
    }

    /// A data batch read back from the log at load (Kafka's replication
    /// origin: no checks, the batch is in the log).
    pub fn replay(&mut self, h: &BatchHeader) {
        if h.producer_id >= 0 && !h.is_control() {
            let mut staged = staged_of(h, h.base_offset);
            if let Staged::Data { opens_txn, .. } = &mut staged {
                *opens_txn = h.is_transactional()
                    && self
                        .producers
                        .get(&h.producer_id)
                        .is_none_or(|p| p.current_txn_first_offset.is_none());
            }
            self.apply(staged);
        }
    }

    /// A marker read back from the log at load: the transaction it
    /// completes, if it held data, with its last stable offset (the index
    /// entry of an abort is rebuilt from them).
    pub fn replay_marker(&mut self, marker: Marker) -> Option<(CompletedTxn, i64)> {
        let completed = self.completed_by(&marker);
        let done = completed.map(|c| (c, self.last_stable_offset_of(&c)));
        self.apply(Staged::Marker { marker, completed });
        done
    }

    /// Kafka's `lastStableOffset(completedTxn)` on the committed state: the
    /// oldest open transaction of another producer, or past the marker.
    fn last_stable_offset_of(&self, c: &CompletedTxn) -> i64 {
        self.ongoing
            .iter()
            .find(|(_, p)| **p != c.producer_id)
            .map_or(c.last_offset + 1, |(first, _)| *first)
    }

    /// Forgets producers whose last batch is older than the expiration
    /// and that have no transaction open (`removeExpiredProducers`).
    /// Returns how many went.
    pub fn expire(&mut self, now_ms: i64) -> usize {
        let before = self.producers.len();
        self.producers.retain(|_, p| !p.expired(now_ms));
        before - self.producers.len()
    }

    /// The first offset of the oldest open transaction: a `read_committed`
    /// reader may read only below it (`firstUnstableOffset`).
    pub fn first_unstable_offset(&self) -> Option<i64> {
        self.ongoing.keys().next().copied()
    }

    /// The first offset of the oldest transaction the staged batches open.
    pub fn staged_txn_start(&self) -> Option<i64> {
        self.staged
            .iter()
            .filter_map(|s| match s {
                Staged::Data {
                    opens_txn: true,
                    meta,
                    ..
                } => Some(meta.first_offset()),
                _ => None,
            })
            .min()
    }

    /// The open transactions, as (first offset, producer id), oldest first.
    pub fn open_transactions(&self) -> impl Iterator<Item = (i64, i64)> + '_ {
        self.ongoing.iter().map(|(first, pid)| (*first, *pid))
    }

    /// The transactions the staged markers complete, each with the last
    /// stable offset its `.txnindex` entry records (Kafka's
    /// `lastStableOffset(completedTxn)`): the first offset of the oldest
    /// transaction of another producer still open once the staged batches
    /// before it are applied, or the offset after the marker.
    pub fn staged_completions(&self) -> Vec<(CompletedTxn, i64)> {
        if !self.staged.iter().any(|s| {
            matches!(
                s,
                Staged::Marker {
                    completed: Some(_),
                    ..
                }
            )
        }) {
            return Vec::new();
        }
        let mut ongoing = self.ongoing.clone();
        let mut open: BTreeMap<i64, Option<i64>> = BTreeMap::new();
        let mut out = Vec::new();
        for s in &self.staged {
            let pid = s.producer_id();
            let current = *open.entry(pid).or_insert_with(|| {
                self.producers
                    .get(&pid)
                    .and_then(|p| p.current_txn_first_offset)
            });
            match *s {
                Staged::Data {
                    opens_txn: true,
                    meta,
                    ..
                } => {
                    ongoing.insert(meta.first_offset(), pid);
                    open.insert(pid, Some(meta.first_offset()));
                }
                Staged::Data { .. } => {}
                Staged::Marker { completed, .. } => {
                    if let Some(c) = completed {
                        let lso = ongoing
                            .iter()
                            .find(|(_, p)| **p != c.producer_id)
                            .map_or(c.last_offset + 1, |(first, _)| *first);
                        out.push((c, lso));
                    }
                    if let Some(first) = current {
                        ongoing.remove(&first);
                    }
                    open.insert(pid, None);
                }
            }
        }
        out
    }

    /// Checks a client's batch about to be stored at `base_offset`, and
    /// stages it when it is to be appended. Batches without a producer id
    /// need no state. A transactional batch is refused: only an append the
    /// transaction coordinator has checked (`check_batch` with an origin)
    /// may open a transaction.
    pub fn check(
        &mut self,
        h: &BatchHeader,
        base_offset: i64,
    ) -> Result<Checked, (ProducerRefusal, String)> {
        if h.is_transactional() {
            return Err((
                ProducerRefusal::Transactional,
                format!(
                    "a transactional batch of producer {}: only a Kafka producer of a transactional id writes one, through the listener",
                    h.producer_id
                ),
            ));
        }
        self.check_batch(h, base_offset, Origin::Client)
    }

    /// Kafka's `ProducerAppendInfo.appendDataBatch` for a batch from
    /// `origin` about to be stored at `base_offset`: the epoch, the
    /// sequence (a client's only), and the transaction rules; staged when
    /// it is to be appended.
    pub fn check_batch(
        &mut self,
        h: &BatchHeader,
        base_offset: i64,
        origin: Origin,
    ) -> Result<Checked, (ProducerRefusal, String)> {
        if h.producer_id < 0 {
            return Ok(Checked::Append);
        }
        if origin == Origin::Client
            && let Some(d) = self.duplicate(h)
        {
            return Ok(Checked::Duplicate {
                first_offset: d.first_offset(),
                last_offset: d.last_offset,
            });
        }
        let mut staged = staged_of(h, base_offset);
        self.check_epoch(h.producer_id, h.producer_epoch, base_offset, origin)?;
        if origin == Origin::Client {
            self.check_sequence(h, base_offset)?;
        }
        let open = self.updated(h.producer_id).current_txn_first_offset;
        match (open, h.is_transactional()) {
            (Some(_), false) => {
                return Err((
                    ProducerRefusal::InvalidTxnState,
                    format!(
                        "Expected transactional write from producer {} at offset {base_offset}",
                        h.producer_id
                    ),
                ));
            }
            (None, true) => {
                if let Staged::Data { opens_txn, .. } = &mut staged {
                    *opens_txn = true;
                }
            }
            _ => {}
        }
        self.staged.push(staged);
        Ok(Checked::Append)
    }

    /// Kafka's `appendEndTxnMarker`: the marker's epoch and coordinator
    /// epoch checked (a coordinator's marker; one read back is only
    /// applied), staged, and the transaction it completes, if it held data.
    pub fn check_marker(
        &mut self,
        marker: Marker,
        origin: Origin,
    ) -> Result<Option<CompletedTxn>, (ProducerRefusal, String)> {
        let id = marker.producer_id;
        self.check_epoch(id, marker.epoch, marker.offset, origin)?;
        let current = self.updated(id).coordinator_epoch;
        if current > marker.coordinator_epoch && origin != Origin::Replication {
            return Err((
                ProducerRefusal::CoordinatorFenced,
                format!(
                    "Invalid coordinator epoch for producerId {id} at offset {}: {} (zombie), {current} (current)",
                    marker.offset, marker.coordinator_epoch
                ),
            ));
        }
        let completed = self.completed_by(&marker);
        self.staged.push(Staged::Marker { marker, completed });
        Ok(completed)
    }

    /// The transaction `marker` completes: its producer's open one, if any
    /// (a marker of a transaction that wrote nothing here completes none).
    fn completed_by(&self, marker: &Marker) -> Option<CompletedTxn> {
        let first = self.updated(marker.producer_id).current_txn_first_offset?;
        Some(CompletedTxn {
            producer_id: marker.producer_id,
            first_offset: first,
            last_offset: marker.offset,
            aborted: !marker.commit,
        })
    }

    /// `checkProducerEpoch`: an older epoch than the producer's is refused
    /// (read back from the log, it is applied all the same).
    fn check_epoch(
        &self,
        id: i64,
        epoch: i16,
        offset: i64,
        origin: Origin,
    ) -> Result<(), (ProducerRefusal, String)> {
        let current = self.updated(id).epoch;
        if epoch < current && origin != Origin::Replication {
            return Err((
                ProducerRefusal::InvalidProducerEpoch,
                format!(
                    "epoch of producer {id} at offset {offset} is {epoch}, which is smaller than the last seen epoch {current}"
                ),
            ));
        }
        Ok(())
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
        for s in self.staged.iter().filter(|s| s.producer_id() == id) {
            s.apply_to(&mut p);
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

    /// Kafka's `ProducerStateManagerTest` cases of transactions.
    mod txn {
        use super::*;

        const PID: i64 = 1;

        /// `appendEntry`: one record of producer `pid` at `epoch` with
        /// sequence `seq`, at `offset`, committed at once.
        fn data(
            s: &mut ProducerStates,
            (pid, epoch, seq): (i64, i16, i32),
            offset: i64,
            transactional: bool,
            origin: Origin,
        ) -> Result<Checked, ProducerRefusal> {
            let mut h = batch(pid, epoch, seq, 1);
            h.base_offset = offset;
            if transactional {
                h.attributes |= 0x10;
            }
            let r = s.check_batch(&h, offset, origin).map_err(|(r, _)| r);
            s.commit_staged();
            r
        }

        fn client(
            s: &mut ProducerStates,
            pid: i64,
            epoch: i16,
            seq: i32,
            offset: i64,
            transactional: bool,
        ) -> Result<Checked, ProducerRefusal> {
            data(s, (pid, epoch, seq), offset, transactional, Origin::Client)
        }

        /// Client appends of `PID` in turn, each `(epoch, seq, offset)`
        /// with the answer it gets; then the last sequence kept.
        fn tries<const N: usize>(
            s: &mut ProducerStates,
            transactional: bool,
            appends: [(i16, i32, i64, Result<Checked, ProducerRefusal>); N],
            last_seq: i32,
        ) {
            for (epoch, seq, offset, answer) in appends {
                let got = client(s, PID, epoch, seq, offset, transactional);
                assert_eq!(got, answer, "epoch {epoch} seq {seq}");
            }
            assert_eq!(s.producer(PID).unwrap().last_seq(), Some(last_seq));
        }

        /// States holding `PID`'s first append (epoch 0, sequence 0, at
        /// offset 0), accepted.
        fn first_append(transactional: bool) -> ProducerStates {
            let mut s = ProducerStates::default();
            client(&mut s, PID, 0, 0, 0, transactional).unwrap();
            s
        }

        fn marker(pid: i64, epoch: i16, commit: bool, offset: i64, coordinator: i32) -> Marker {
            Marker {
                producer_id: pid,
                epoch,
                coordinator_epoch: coordinator,
                commit,
                offset,
                timestamp: 1_000,
            }
        }

        /// `appendEndTxnMarker`, committed at once.
        fn end(s: &mut ProducerStates, m: Marker) -> Result<Option<CompletedTxn>, ProducerRefusal> {
            let r = s.check_marker(m, Origin::Coordinator).map_err(|(r, _)| r);
            s.commit_staged();
            r
        }

        fn open_txn(s: &ProducerStates, pid: i64) -> Option<i64> {
            s.producer(pid).unwrap().current_txn_first_offset
        }

        #[test]
        fn append_txn_marker_with_no_producer_state() {
            let mut s = ProducerStates::default();
            assert_eq!(end(&mut s, marker(PID, 2, true, 27, 0)), Ok(None));
            let p = s.producer(PID).unwrap();
            assert_eq!((p.epoch, p.last_seq()), (2, None));
            // Fencing works when the marker is all that is left.
            let appends = [
                (0, 0, 4, Err(ProducerRefusal::InvalidProducerEpoch)),
                (2, 17, 4, Err(ProducerRefusal::OutOfOrderSequence)),
                (2, 0, 39, Ok(Checked::Append)),
            ];
            tries(&mut s, false, appends, 0);
        }

        #[test]
        fn a_control_record_bumps_the_producer_epoch() {
            let mut s = first_append(false);
            assert_eq!(end(&mut s, marker(PID, 1, false, 1, 0)), Ok(None));
            let p = s.producer(PID).unwrap();
            assert_eq!(
                (p.epoch, p.current_txn_first_offset, p.last_seq()),
                (1, None, None)
            );
            assert_eq!(client(&mut s, PID, 1, 0, 2, false), Ok(Checked::Append));
        }

        #[test]
        fn out_of_sequence_after_a_control_record_epoch_bump() {
            let mut s = first_append(true);
            client(&mut s, PID, 0, 1, 1, true).unwrap();
            assert!(end(&mut s, marker(PID, 1, false, 2, 0)).unwrap().is_some());
            let appends = [
                (1, 2, 3, Err(ProducerRefusal::OutOfOrderSequence)),
                (2, 2, 3, Err(ProducerRefusal::OutOfOrderSequence)),
                (1, 0, 3, Ok(Checked::Append)),
            ];
            tries(&mut s, true, appends, 0);
        }

        #[test]
        fn a_plain_append_while_a_transaction_is_open_is_refused() {
            let mut s = first_append(true);
            assert_eq!(
                client(&mut s, PID, 0, 1, 1, false),
                Err(ProducerRefusal::InvalidTxnState)
            );
            // Nothing of the refused batch stays.
            assert_eq!(s.producer(PID).unwrap().last_seq(), Some(0));
        }

        #[test]
        fn a_snapshot_keeps_an_unfinished_transaction_open() {
            let mut s = first_append(true);
            client(&mut s, PID, 0, 1, 1, true).unwrap();
            let entries = s.snapshot_entries(3);
            assert_eq!(entries[0].current_txn_first_offset, 0);
            let mut back = ProducerStates::from_snapshot(&entries, 1_000);
            let p = back.producer(PID).unwrap();
            assert_eq!(p.batches.back().unwrap().first_offset(), 1);
            assert_eq!(p.last_seq(), Some(1));
            assert_eq!(p.current_txn_first_offset, Some(0));
            assert_eq!(back.first_unstable_offset(), Some(0));
            assert_eq!(client(&mut back, PID, 0, 2, 2, true), Ok(Checked::Append));
            assert_eq!(
                back.check_marker(marker(PID, 0, false, 3, 0), Origin::Coordinator),
                Ok(Some(CompletedTxn {
                    producer_id: PID,
                    first_offset: 0,
                    last_offset: 3,
                    aborted: true
                }))
            );
        }

        #[test]
        fn a_snapshot_of_a_finished_or_empty_transaction_holds_none() {
            let mut s = first_append(true);
            client(&mut s, PID, 0, 1, 1, true).unwrap();
            end(&mut s, marker(PID, 0, false, 2, 0)).unwrap();
            let back = ProducerStates::from_snapshot(&s.snapshot_entries(3), 1_000);
            let p = back.producer(PID).unwrap();
            assert_eq!((p.last_seq(), p.current_txn_first_offset), (Some(1), None));
            assert_eq!(back.first_unstable_offset(), None);

            let mut s = ProducerStates::default();
            let mut m = marker(PID, 0, false, 0, 0);
            m.timestamp = 777;
            end(&mut s, m).unwrap();
            let back = ProducerStates::from_snapshot(&s.snapshot_entries(1), 777);
            let p = back.producer(PID).unwrap();
            assert_eq!((p.last_timestamp, p.current_txn_first_offset), (777, None));
        }

        #[test]
        fn a_fencing_abort_marker_closes_the_transaction_and_keeps_the_epoch() {
            let mut s = first_append(true);
            assert!(end(&mut s, marker(PID, 1, false, 1, 0)).unwrap().is_some());
            let p = s.producer(PID).unwrap();
            assert_eq!((p.current_txn_first_offset, p.batches.len()), (None, 0));
            assert_eq!(s.expire(1_000), 0);
            assert!(s.producer(PID).is_some());
        }

        #[test]
        fn first_unstable_offset() {
            let mut s = ProducerStates::default();
            assert_eq!(s.first_unstable_offset(), None);
            client(&mut s, PID, 5, 0, 99, true).unwrap();
            assert_eq!(s.first_unstable_offset(), Some(99));
            client(&mut s, 2, 5, 0, 105, true).unwrap();
            assert_eq!(s.first_unstable_offset(), Some(99));
            end(&mut s, marker(PID, 5, true, 109, 0)).unwrap();
            assert_eq!(s.first_unstable_offset(), Some(105));
            end(&mut s, marker(2, 5, false, 112, 0)).unwrap();
            assert_eq!(s.first_unstable_offset(), None);
        }

        #[test]
        fn producers_with_open_transactions_do_not_expire() {
            let mut s = ProducerStates::default();
            client(&mut s, PID, 5, 0, 99, true).unwrap();
            client(&mut s, 2, 5, 0, 100, false).unwrap();
            assert_eq!(s.expire(1_000 + PRODUCER_ID_EXPIRATION_MS + 1), 1);
            assert!(s.producer(PID).is_some());
            assert_eq!(s.first_unstable_offset(), Some(99));
            // Nor do they leave a snapshot when it is loaded late.
            let back = ProducerStates::from_snapshot(
                &s.snapshot_entries(101),
                1_000 + 2 * PRODUCER_ID_EXPIRATION_MS,
            );
            assert_eq!(back.first_unstable_offset(), Some(99));
        }

        #[test]
        fn a_coordinators_batches_have_no_sequence_to_check() {
            let mut s = ProducerStates::default();
            for offset in [99, 100] {
                assert_eq!(
                    data(&mut s, (PID, 0, -1), offset, true, Origin::Coordinator),
                    Ok(Checked::Append)
                );
            }
        }

        #[test]
        fn a_marker_of_an_older_epoch_is_refused() {
            let mut s = ProducerStates::default();
            client(&mut s, PID, 5, 0, 99, true).unwrap();
            assert_eq!(
                end(&mut s, marker(PID, 3, true, 100, 0)),
                Err(ProducerRefusal::InvalidProducerEpoch)
            );
            // Read back from the log, it is applied all the same.
            assert!(
                s.replay_marker(marker(PID, 3, true, 100, 0)).is_some(),
                "the open transaction completes"
            );
        }

        #[test]
        fn coordinator_fencing() {
            let mut s = ProducerStates::default();
            client(&mut s, PID, 5, 0, 99, true).unwrap();
            end(&mut s, marker(PID, 5, true, 100, 1)).unwrap();
            assert_eq!(s.producer(PID).unwrap().coordinator_epoch, 1);
            assert_eq!(end(&mut s, marker(PID, 5, true, 101, 1)), Ok(None));
            assert_eq!(end(&mut s, marker(PID, 5, true, 102, 2)), Ok(None));
            assert_eq!(
                end(&mut s, marker(PID, 5, true, 103, 1)),
                Err(ProducerRefusal::CoordinatorFenced)
            );
            // And after a load from a snapshot.
            let mut back = ProducerStates::from_snapshot(&s.snapshot_entries(103), 1_000);
            assert_eq!(
                end(&mut back, marker(PID, 5, true, 103, 1)),
                Err(ProducerRefusal::CoordinatorFenced)
            );
        }

        #[test]
        fn last_stable_offset_of_a_completed_transaction() {
            let mut s = ProducerStates::default();
            let (p1, p2, p3) = (PID, PID + 1, PID + 2);
            let start1 = 992_342;
            let (start2, start3) = (start1 + 25, start1 + 57);
            for (pid, start) in [(p1, start1), (p2, start2), (p3, start3)] {
                client(&mut s, pid, 0, 0, start, true).unwrap();
            }
            let last1 = start3 + 15;
            s.check_marker(marker(p1, 0, true, last1, 0), Origin::Coordinator)
                .unwrap();
            let done = |s: &ProducerStates| s.staged_completions();
            let c1 = CompletedTxn {
                producer_id: p1,
                first_offset: start1,
                last_offset: last1,
                aborted: false,
            };
            assert_eq!(done(&s), vec![(c1, start2)]);
            s.commit_staged();
            assert_eq!(s.first_unstable_offset(), Some(start2));
            let last3 = last1 + 20;
            s.check_marker(marker(p3, 0, true, last3, 0), Origin::Coordinator)
                .unwrap();
            assert_eq!(done(&s)[0].1, start2);
            s.commit_staged();
            assert_eq!(s.first_unstable_offset(), Some(start2));
            let last2 = last3 + 78;
            s.check_marker(marker(p2, 0, true, last2, 0), Origin::Coordinator)
                .unwrap();
            assert_eq!(done(&s)[0].1, last2 + 1);
            s.commit_staged();
            assert_eq!(s.first_unstable_offset(), None);
        }

        #[test]
        fn empty_transactions_complete_nothing() {
            let mut s = ProducerStates::default();
            let mut seq = 0;
            let mut stage = |s: &mut ProducerStates, first: i64, last: i64| {
                for offset in first..=last {
                    let mut h = batch(PID, 0, seq, 1);
                    h.attributes |= 0x10;
                    s.check_batch(&h, offset, Origin::Client).unwrap();
                    seq += 1;
                }
            };
            stage(&mut s, 16, 20);
            s.commit_staged();
            assert_eq!(s.first_unstable_offset(), Some(16));
            // One append: the open transaction committed, empty ones, one
            // that holds data and aborts, and one left open.
            let m = |commit, offset| marker(PID, 0, commit, offset, 0);
            let first = s.check_marker(m(true, 21), Origin::Coordinator).unwrap();
            assert_eq!(
                first,
                Some(CompletedTxn {
                    producer_id: PID,
                    first_offset: 16,
                    last_offset: 21,
                    aborted: false
                })
            );
            assert_eq!(s.check_marker(m(true, 22), Origin::Coordinator), Ok(None));
            assert_eq!(s.check_marker(m(false, 23), Origin::Coordinator), Ok(None));
            stage(&mut s, 24, 27);
            let second = s.check_marker(m(false, 28), Origin::Coordinator).unwrap();
            assert_eq!(
                second.map(|c| (c.first_offset, c.aborted)),
                Some((24, true))
            );
            assert_eq!(s.check_marker(m(false, 29), Origin::Coordinator), Ok(None));
            stage(&mut s, 30, 31);
            let done = s.staged_completions();
            assert_eq!(
                done.iter()
                    .map(|(c, lso)| (c.first_offset, *lso))
                    .collect::<Vec<_>>(),
                vec![(16, 22), (24, 29)]
            );
            s.commit_staged();
            assert_eq!(s.first_unstable_offset(), Some(30));
            assert_eq!(open_txn(&s, PID), Some(30));
            assert_eq!(s.open_transactions().collect::<Vec<_>>(), vec![(30, PID)]);
        }

        #[test]
        fn a_discarded_append_leaves_no_transaction() {
            let mut s = ProducerStates::default();
            let mut h = batch(PID, 0, 0, 1);
            h.attributes |= 0x10;
            s.check_batch(&h, 5, Origin::Client).unwrap();
            s.discard_staged();
            assert_eq!(s.first_unstable_offset(), None);
            assert!(s.producer(PID).is_none());
        }

        #[test]
        fn replay_opens_and_completes_transactions() {
            let mut s = ProducerStates::default();
            let mut h = batch(PID, 0, 0, 2);
            h.attributes |= 0x10;
            h.base_offset = 10;
            s.replay(&h);
            h.base_offset = 12;
            h.base_sequence = 2;
            s.replay(&h);
            assert_eq!(s.first_unstable_offset(), Some(10));
            assert_eq!(
                s.replay_marker(marker(PID, 0, false, 14, 0)),
                Some((
                    CompletedTxn {
                        producer_id: PID,
                        first_offset: 10,
                        last_offset: 14,
                        aborted: true
                    },
                    15
                ))
            );
            assert_eq!(s.first_unstable_offset(), None);
            assert_eq!(s.replay_marker(marker(PID, 0, false, 15, 0)), None);
        }
    }
}
