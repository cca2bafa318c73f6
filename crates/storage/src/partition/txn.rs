//! Transactions in a partition (Kafka's `UnifiedLog` parts of them): the
//! last stable offset, the markers the transaction coordinator writes, a
//! client's transactional batches, and the aborted transactions a
//! `read_committed` reader skips.
//!
//! The first unstable offset is kept where readers load it without a
//! lock. An append that opens a transaction lowers it before its batches
//! are published, so no reader sees them without seeing them unstable; an
//! append that ends one raises it only after its marker is published, so
//! no reader takes the transaction's data for stable before the marker
//! that decides it is in the log. A reader loads it before the high
//! watermark.

use std::sync::atomic::Ordering;

use super::PartitionLog;
use super::encoded::{ENCODED, LEADER_EPOCH};
use super::produce::ProducedInfo;
use crate::error::{Result, StorageError};
use crate::now_ms;
use crate::producer_state::{Marker, Origin};
use commitfs_record::ParsedBatches;
use commitfs_record::end_txn_marker::{EndTxnMarker, MarkerBatch, MarkerType, marker_batch_parsed};
use commitfs_record::state_files::AbortedTxn;

/// What became of a transactional record's transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnOutcome {
    Committed,
    Aborted,
    Open,
}

impl TxnOutcome {
    pub fn name(self) -> &'static str {
        match self {
            TxnOutcome::Committed => "committed",
            TxnOutcome::Aborted => "aborted",
            TxnOutcome::Open => "open",
        }
    }
}

impl PartitionLog {
    /// The last stable offset (`UnifiedLog.lastStableOffset`): the high
    /// watermark, or the first offset of the oldest open transaction when
    /// it is lower (never below the log start).
    pub fn last_stable_offset(&self) -> i64 {
        let first_unstable = self.first_unstable.load(Ordering::Acquire);
        let hw = self.high_watermark();
        first_unstable.max(self.log_start_offset()).min(hw)
    }

    /// The first offset not known to be decided: the first offset of the
    /// oldest open transaction, or the high watermark. Unlike the last
    /// stable offset it is not raised to the log start, so every batch
    /// below it is committed, aborted or plain for good.
    pub(crate) fn first_undecided_offset(&self) -> i64 {
        let first_unstable = self.first_unstable.load(Ordering::Acquire);
        first_unstable.min(self.high_watermark())
    }

    /// The open transactions, (first offset, producer id), oldest first.
    pub fn open_transactions(&self) -> Vec<(i64, i64)> {
        self.producers.open_transactions()
    }

    /// Sets the first unstable offset readers see from producer state's
    /// committed transactions.
    pub(super) fn publish_first_unstable(&self) {
        let first = self.producers.first_unstable_offset().unwrap_or(i64::MAX);
        self.first_unstable.store(first, Ordering::Release);
    }

    /// Appends the transaction coordinator's COMMIT or ABORT marker for
    /// `producer_id` (Kafka's `appendAsLeader` of
    /// `MemoryRecords.withEndTransactionMarker`, origin `COORDINATOR`).
    /// Returns the marker's offset. The producer's epoch must not be older
    /// than the one known, nor the coordinator's epoch older than the last
    /// marker's; an abort of a transaction that wrote here is indexed in
    /// the segment's `.txnindex` before the marker is published.
    pub fn append_end_txn_marker(
        &self,
        producer_id: i64,
        epoch: i16,
        coordinator_epoch: i32,
        commit: bool,
    ) -> Result<i64> {
        if !self.local.writable() {
            return Err(StorageError::ReadOnly);
        }
        let timestamp = now_ms();
        ENCODED.with_borrow_mut(|enc| {
            let path = self.health.enter("a transaction marker")?;
            path.finish((|| {
                let w = self.local.writer()?;
                let offset = w.log_end_offset();
                let kind = if commit {
                    MarkerType::Commit
                } else {
                    MarkerType::Abort
                };
                let marker = MarkerBatch {
                    base_offset: offset,
                    partition_leader_epoch: LEADER_EPOCH,
                    producer_id,
                    producer_epoch: epoch,
                    timestamp,
                };
                let (batch, header) = marker_batch_parsed(
                    &marker,
                    EndTxnMarker {
                        kind,
                        coordinator_epoch,
                    },
                );
                self.producers.check_marker(
                    Marker {
                        producer_id,
                        epoch,
                        coordinator_epoch,
                        commit,
                        offset,
                        timestamp,
                    },
                    offset,
                )?;
                enc.control(&batch, header);
                let config = self.config();
                let written = self.append_locked(w, enc, &config)?;
                Ok(written.first_offset)
            })())
        })
    }

    /// [`PartitionLog::append_produced`] for a client whose batches may be
    /// transactional: a producer's first transactional batch opens its
    /// transaction, and a plain batch while it is open is refused
    /// (`InvalidTxnState`).
    pub fn append_transactional<'a>(
        &self,
        batches: impl Into<ParsedBatches<'a>>,
    ) -> Result<ProducedInfo> {
        self.append_produced_from(&batches.into(), Some(Origin::Client))
    }

    /// A transaction coordinator's transactional batches (Kafka's append of
    /// origin `COORDINATOR`: the group coordinator's TxnOffsetCommit
    /// records): the epoch and transaction rules apply, not the sequence.
    pub fn append_from_coordinator<'a>(
        &self,
        batches: impl Into<ParsedBatches<'a>>,
    ) -> Result<ProducedInfo> {
        self.append_produced_from(&batches.into(), Some(Origin::Coordinator))
    }

    /// What became of the transaction of the record at `offset`, of
    /// producer `producer_id` (a transactional batch's record): aborted
    /// when an entry of the `.txnindex` covers it, open while its
    /// producer's transaction from at or before it is, else committed.
    pub fn transaction_of(&self, offset: i64, producer_id: i64) -> Result<TxnOutcome> {
        let aborted = self
            .aborted_transactions(offset, offset + 1)?
            .iter()
            .any(|t| {
                t.producer_id == producer_id && t.first_offset <= offset && offset <= t.last_offset
            });
        if aborted {
            return Ok(TxnOutcome::Aborted);
        }
        let open = self
            .open_transactions()
            .iter()
            .any(|(first, pid)| *pid == producer_id && *first <= offset);
        Ok(if open {
            TxnOutcome::Open
        } else {
            TxnOutcome::Committed
        })
    }

    /// The aborted transactions a `read_committed` fetch from `from` up to
    /// `upper` (exclusive) must skip (Kafka's
    /// `LocalLog.collectAbortedTransactions`): from the segment holding
    /// `from` on, until an entry's last stable offset reaches `upper`.
    pub fn aborted_transactions(&self, from: i64, upper: i64) -> Result<Vec<AbortedTxn>> {
        let mut out = Vec::new();
        for seg in self.local.segments_from(from) {
            let found = seg.txn_index().collect_aborted(from, upper)?;
            out.extend(found.aborted);
            if found.complete {
                break;
            }
        }
        Ok(out)
    }
}
