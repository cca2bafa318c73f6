//! One transactional id's state at the transaction coordinator (Kafka's
//! `TransactionMetadata`, `TxnTransitMetadata`, `TransactionState`): a
//! pure state machine. Every change is prepared (the metadata takes a
//! pending state, which blocks any other change), written to
//! `__transaction_state` by the caller, and then completed, or, if the
//! write failed, abandoned.
//!
//! Transactions version 2 (KIP-890 part 2: an epoch bump at every end of a
//! transaction) is not served, so the client's transaction version is
//! always 0 here and the epoch moves only at InitProducerId and fencing.
//!
//! What Kafka throws as `IllegalStateException` ("should not happen": a
//! transition from a state that does not allow it) is an error here, with
//! Kafka's message; the coordinator logs it and answers the request with
//! an error, never a panic.

use std::collections::BTreeSet;

use commitfs_record::txn_log::{TxnLogEntry, TxnState};

/// `RecordBatch.NO_PRODUCER_ID` and `NO_PRODUCER_EPOCH`.
pub const NO_PRODUCER_ID: i64 = -1;
pub const NO_PRODUCER_EPOCH: i16 = -1;

/// A partition of a transaction.
pub type TopicPartition = (String, i32);

/// Kafka's `TransactionState.validPreviousStates`.
pub fn valid_previous(state: TxnState) -> &'static [TxnState] {
    use TxnState::*;
    match state {
        Empty => &[Empty, CompleteCommit, CompleteAbort],
        Ongoing => &[Ongoing, Empty, CompleteCommit, CompleteAbort],
        PrepareCommit => &[Ongoing],
        PrepareAbort => &[Ongoing, PrepareEpochFence],
        CompleteCommit => &[PrepareCommit],
        CompleteAbort => &[PrepareAbort],
        Dead => &[Empty, CompleteAbort, CompleteCommit],
        PrepareEpochFence => &[Ongoing],
    }
}

/// Kafka's `isExpirationAllowed`: an id in this state may expire.
pub fn expirable(state: TxnState) -> bool {
    matches!(
        state,
        TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
    )
}

/// `TransactionMetadata.isEpochExhausted`: the last epoch is kept for
/// fencing, so the one before it is the last a producer gets.
pub fn epoch_exhausted(epoch: i16) -> bool {
    epoch >= i16::MAX - 1
}

/// A transition that should not happen (Kafka's `IllegalStateException`),
/// in Kafka's words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IllegalState(pub String);

impl std::fmt::Display for IllegalState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why an epoch bump was refused (Kafka's `Errors.PRODUCER_FENCED`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProducerFenced;

/// A transactional id's state as Kafka's `TxnTransitMetadata` carries it:
/// a prepared change (what the metadata becomes once it is written), and
/// the metadata's own state as it stands (`TxnMetadata::current`, what
/// `prepareNoTransit` returns).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transit {
    pub producer_id: i64,
    pub prev_producer_id: i64,
    pub producer_epoch: i16,
    /// Not in the log: -1 after a load (Kafka's quirk, kept).
    pub last_producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    pub partitions: BTreeSet<TopicPartition>,
    /// When the transaction began (its first partition), -1 when none.
    pub start_ms: i64,
    pub last_update_ms: i64,
}

impl Transit {
    /// The `__transaction_state` record of the change.
    pub fn log_entry(&self, transactional_id: &str) -> TxnLogEntry {
        let mut by_topic: Vec<(String, Vec<i32>)> = Vec::new();
        for (topic, partition) in &self.partitions {
            match by_topic.last_mut() {
                Some((t, ids)) if t == topic => ids.push(*partition),
                _ => by_topic.push((topic.clone(), vec![*partition])),
            }
        }
        TxnLogEntry {
            transactional_id: transactional_id.to_string(),
            producer_id: self.producer_id,
            producer_epoch: self.producer_epoch,
            timeout_ms: self.timeout_ms,
            state: self.state,
            partitions: by_topic,
            last_update_ms: self.last_update_ms,
            start_ms: self.start_ms,
        }
    }
}

/// A transactional id's state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnMetadata {
    pub transactional_id: String,
    pub current: Transit,
    pub pending: Option<TxnState>,
    pub has_failed_epoch_fence: bool,
}

impl TxnMetadata {
    /// A new id at `producer_id`, epoch -1 (InitProducerId bumps it to 0).
    pub fn new(transactional_id: &str, producer_id: i64, timeout_ms: i32, now: i64) -> Self {
        TxnMetadata {
            transactional_id: transactional_id.to_string(),
            current: Transit {
                producer_id,
                prev_producer_id: NO_PRODUCER_ID,
                producer_epoch: NO_PRODUCER_EPOCH,
                last_producer_epoch: NO_PRODUCER_EPOCH,
                timeout_ms,
                state: TxnState::Empty,
                partitions: BTreeSet::new(),
                start_ms: -1,
                last_update_ms: now,
            },
            pending: None,
            has_failed_epoch_fence: false,
        }
    }

    /// The metadata a `__transaction_state` record holds (a load).
    pub fn from_log(e: &TxnLogEntry) -> Self {
        TxnMetadata {
            transactional_id: e.transactional_id.clone(),
            current: Transit {
                producer_id: e.producer_id,
                prev_producer_id: NO_PRODUCER_ID,
                producer_epoch: e.producer_epoch,
                last_producer_epoch: NO_PRODUCER_EPOCH,
                timeout_ms: e.timeout_ms,
                state: e.state,
                partitions: e
                    .partitions
                    .iter()
                    .flat_map(|(t, ids)| ids.iter().map(move |p| (t.clone(), *p)))
                    .collect(),
                start_ms: e.start_ms,
                last_update_ms: e.last_update_ms,
            },
            pending: None,
            has_failed_epoch_fence: false,
        }
    }

    pub fn epoch_exhausted(&self) -> bool {
        epoch_exhausted(self.current.producer_epoch)
    }

    fn has_pending_transaction(&self) -> bool {
        matches!(
            self.current.state,
            TxnState::Ongoing | TxnState::PrepareAbort | TxnState::PrepareCommit
        )
    }

    /// `prepareFenceProducerEpoch`: the open transaction is to be aborted
    /// under a new epoch (a second fence after a failed one keeps it).
    pub fn prepare_fence_epoch(&mut self) -> Result<Transit, IllegalState> {
        if self.current.producer_epoch == i16::MAX {
            return Err(IllegalState(
                "Cannot fence producer with epoch equal to Short.MaxValue since this would overflow"
                    .to_string(),
            ));
        }
        let bumped = if self.has_failed_epoch_fence {
            self.current.producer_epoch
        } else {
            self.current.producer_epoch + 1
        };
        self.prepare(
            TxnState::PrepareEpochFence,
            self.current.producer_id,
            bumped,
            NO_PRODUCER_EPOCH,
            self.current.timeout_ms,
            self.current.partitions.clone(),
            self.current.start_ms,
            self.current.last_update_ms,
        )
    }

    /// What Kafka's `endTransaction` does with a pending fence before the
    /// abort it leads to: the pending state goes, and the fenced epoch is
    /// the producer's (never returned to any client).
    pub fn take_fence(&mut self, fence: &Transit) {
        self.pending = None;
        self.current.producer_epoch = fence.producer_epoch;
        self.current.last_producer_epoch = NO_PRODUCER_EPOCH;
    }

    /// `prepareIncrementProducerEpoch`: InitProducerId of an existing id;
    /// `expected` is the epoch the producer says it has (KIP-360), if any.
    /// An `Err(Ok(..))` is a producer fenced.
    pub fn prepare_increment_epoch(
        &mut self,
        timeout_ms: i32,
        expected: Option<i16>,
        now: i64,
    ) -> Result<Result<Transit, ProducerFenced>, IllegalState> {
        if self.epoch_exhausted() {
            return Err(IllegalState(format!(
                "Cannot allocate any more producer epochs for producerId {}",
                self.current.producer_id
            )));
        }
        let (epoch, last_epoch) = (
            self.current.producer_epoch,
            self.current.last_producer_epoch,
        );
        let bumped = epoch + 1;
        let (next, last) = match expected {
            None => (bumped, NO_PRODUCER_EPOCH),
            Some(e) if epoch == NO_PRODUCER_EPOCH || e == epoch => (bumped, epoch),
            Some(e) if e == last_epoch => (epoch, last_epoch),
            Some(_) => return Ok(Err(ProducerFenced)),
        };
        self.prepare(
            TxnState::Empty,
            self.current.producer_id,
            next,
            last,
            timeout_ms,
            BTreeSet::new(),
            -1,
            now,
        )
        .map(Ok)
    }

    /// `prepareProducerIdRotation`: a new producer id, epoch 0 (the epochs
    /// of the old one are exhausted).
    pub fn prepare_rotate_producer_id(
        &mut self,
        new_producer_id: i64,
        timeout_ms: i32,
        now: i64,
        record_last_epoch: bool,
    ) -> Result<Transit, IllegalState> {
        if self.has_pending_transaction() {
            return Err(IllegalState(
                "Cannot rotate producer ids while a transaction is still pending".to_string(),
            ));
        }
        let last = if record_last_epoch {
            self.current.producer_epoch
        } else {
            NO_PRODUCER_EPOCH
        };
        self.prepare(
            TxnState::Empty,
            new_producer_id,
            0,
            last,
            timeout_ms,
            BTreeSet::new(),
            -1,
            now,
        )
    }

    /// `prepareAddPartitions`: the transaction takes these partitions (and
    /// begins, from a state with none open).
    pub fn prepare_add_partitions(
        &mut self,
        added: &BTreeSet<TopicPartition>,
        now: i64,
    ) -> Result<Transit, IllegalState> {
        let start = match self.current.state {
            TxnState::Empty | TxnState::CompleteAbort | TxnState::CompleteCommit => now,
            _ => self.current.start_ms,
        };
        let partitions = self.current.partitions.union(added).cloned().collect();
        self.prepare(
            TxnState::Ongoing,
            self.current.producer_id,
            self.current.producer_epoch,
            self.current.last_producer_epoch,
            self.current.timeout_ms,
            partitions,
            start,
            now,
        )
    }

    /// `prepareAbortOrCommit` (transactions version 0): `PrepareCommit` or
    /// `PrepareAbort`.
    pub fn prepare_abort_or_commit(
        &mut self,
        state: TxnState,
        now: i64,
    ) -> Result<Transit, IllegalState> {
        self.prepare(
            state,
            self.current.producer_id,
            self.current.producer_epoch,
            self.current.last_producer_epoch,
            self.current.timeout_ms,
            self.current.partitions.clone(),
            self.current.start_ms,
            now,
        )
    }

    /// `prepareComplete`: the markers are written.
    pub fn prepare_complete(&mut self, now: i64) -> Result<Transit, IllegalState> {
        let state = if self.current.state == TxnState::PrepareCommit {
            TxnState::CompleteCommit
        } else {
            TxnState::CompleteAbort
        };
        self.has_failed_epoch_fence = false;
        self.prepare(
            state,
            self.current.producer_id,
            self.current.producer_epoch,
            self.current.producer_epoch,
            self.current.timeout_ms,
            BTreeSet::new(),
            self.current.start_ms,
            now,
        )
    }

    /// `prepareDead`: the id expires (its tombstone is written).
    pub fn prepare_dead(&mut self) -> Result<Transit, IllegalState> {
        self.prepare(
            TxnState::Dead,
            self.current.producer_id,
            self.current.producer_epoch,
            self.current.last_producer_epoch,
            self.current.timeout_ms,
            BTreeSet::new(),
            self.current.start_ms,
            self.current.last_update_ms,
        )
    }

    /// `prepareNoTransit`: the state as it is (a retried EndTxn answered
    /// from the current state).
    pub fn prepare_no_transit(&self) -> Transit {
        self.current.clone()
    }

    #[allow(clippy::too_many_arguments)]
    fn prepare(
        &mut self,
        state: TxnState,
        producer_id: i64,
        epoch: i16,
        last_epoch: i16,
        timeout_ms: i32,
        partitions: BTreeSet<TopicPartition>,
        start_ms: i64,
        now: i64,
    ) -> Result<Transit, IllegalState> {
        if let Some(pending) = self.pending {
            return Err(IllegalState(format!(
                "Preparing transaction state transition to {} while it already a pending state {}",
                state.name(),
                pending.name()
            )));
        }
        if producer_id < 0 {
            return Err(IllegalState(format!(
                "Illegal new producer id {producer_id}"
            )));
        }
        if state != TxnState::Dead && epoch < 0 {
            return Err(IllegalState(format!("Illegal new producer epoch {epoch}")));
        }
        if !valid_previous(state).contains(&self.current.state) {
            return Err(IllegalState(format!(
                "Preparing transaction state transition to {} failed since the target state {} is not a valid previous state of the current state {}",
                state.name(),
                state.name(),
                self.current.state.name()
            )));
        }
        self.pending = Some(state);
        Ok(Transit {
            producer_id,
            prev_producer_id: self.current.producer_id,
            producer_epoch: epoch,
            last_producer_epoch: last_epoch,
            timeout_ms,
            state,
            partitions,
            start_ms,
            last_update_ms: now,
        })
    }

    /// The write of a prepared change failed: the pending state goes.
    pub fn abandon(&mut self) {
        self.pending = None;
    }

    /// `completeTransitionTo`: the prepared change is written; checked
    /// against the state it was prepared from.
    pub fn complete(&mut self, t: &Transit) -> Result<(), IllegalState> {
        let Some(to) = self.pending else {
            return Err(IllegalState(format!(
                "TransactionalId {} completing transaction state transition while it does not have a pending state",
                self.transactional_id
            )));
        };
        let fail = || {
            Err(IllegalState(format!(
                "TransactionalId {} failed transition to state {:?} due to unexpected metadata",
                self.transactional_id, t
            )))
        };
        let cur = &mut self.current;
        if to != t.state {
            return fail();
        }
        let same_producer =
            t.producer_epoch == cur.producer_epoch && t.producer_id == cur.producer_id;
        match to {
            TxnState::Empty => {
                let bump = t.producer_epoch == cur.producer_epoch.wrapping_add(1)
                    || (t.producer_epoch == 0 && t.producer_id != cur.producer_id);
                if (cur.producer_epoch != t.producer_epoch && !bump)
                    || !t.partitions.is_empty()
                    || t.start_ms != -1
                {
                    return fail();
                }
                cur.timeout_ms = t.timeout_ms;
                cur.producer_epoch = t.producer_epoch;
                cur.last_producer_epoch = t.last_producer_epoch;
                cur.producer_id = t.producer_id;
                cur.prev_producer_id = t.prev_producer_id;
            }
            TxnState::Ongoing => {
                if !same_producer
                    || !cur.partitions.is_subset(&t.partitions)
                    || cur.timeout_ms != t.timeout_ms
                {
                    return fail();
                }
                cur.start_ms = t.start_ms;
                cur.partitions.extend(t.partitions.iter().cloned());
            }
            TxnState::PrepareAbort | TxnState::PrepareCommit => {
                if !same_producer
                    || cur.partitions != t.partitions
                    || cur.timeout_ms != t.timeout_ms
                    || cur.start_ms != t.start_ms
                {
                    return fail();
                }
            }
            TxnState::CompleteAbort | TxnState::CompleteCommit => {
                if !same_producer || cur.timeout_ms != t.timeout_ms || t.start_ms == -1 {
                    return fail();
                }
                cur.start_ms = t.start_ms;
                cur.partitions.clear();
            }
            TxnState::PrepareEpochFence => return fail(),
            TxnState::Dead => {
                return Err(IllegalState(format!(
                    "TransactionalId {} is trying to complete a transition to Dead. This means that the transactionalId was being expired, and the only acceptable completion of this operation is to remove the transaction metadata from the cache, not to persist the Dead in the log.",
                    self.transactional_id
                )));
            }
        }
        cur.last_update_ms = t.last_update_ms;
        self.pending = None;
        cur.state = to;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
