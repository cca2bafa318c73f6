//! Transactions as one pass of the cleaner sees them (Kafka's
//! `CleanedTransactionMetadata`): which batches belong to aborted
//! transactions (dropped whatever their keys), and when a transaction's
//! marker may go (once no batch of it is left). The aborted transactions
//! come from the segments' `.txnindex` files; an ABORT marker that stays
//! has its entry written again into the cleaned segment's index.
//!
//! commitfs refuses transactional produces, so only a Kafka data directory
//! mounted read-write brings transactions here; the rules are Kafka's all
//! the same, so its logs are cleaned as Kafka would clean them.

use std::collections::{HashMap, HashSet, VecDeque};

use crate::error::Result;
use crate::segment::LogSegment;
use commitfs_record::BatchHeader;
use commitfs_record::state_files::AbortedTxn;

/// ABORT and COMMIT, the control record types that end a transaction.
const ABORT: i16 = 0;
const COMMIT: i16 = 1;

/// An aborted transaction met in the pass, and whether a batch of it was.
struct Ongoing {
    txn: AbortedTxn,
    observed_batch: bool,
}

#[derive(Default)]
pub(super) struct TxnTracker {
    /// Aborted transactions not reached yet, by first offset (Kafka's
    /// min-heap; a pass adds them in offset order, segment by segment).
    queued: VecDeque<AbortedTxn>,
    ongoing_aborted: HashMap<i64, Ongoing>,
    ongoing_committed: HashSet<i64>,
    /// Entries for the cleaned segment's `.txnindex`, in marker order.
    pub retained: Vec<AbortedTxn>,
}

impl TxnTracker {
    pub fn add_aborted(&mut self, txns: Vec<AbortedTxn>) {
        self.queued.extend(txns);
        self.queued
            .make_contiguous()
            .sort_by_key(|t| t.first_offset);
    }

    fn consume_up_to(&mut self, offset: i64) {
        while let Some(txn) = self.queued.front().copied()
            && txn.first_offset <= offset
        {
            self.queued.pop_front();
            self.ongoing_aborted
                .entry(txn.producer_id)
                .or_insert(Ongoing {
                    txn,
                    observed_batch: false,
                });
        }
    }

    /// A data batch read: whether it belongs to an aborted transaction.
    pub fn on_batch_read(&mut self, h: &BatchHeader) -> bool {
        self.consume_up_to(h.last_offset());
        if !h.is_transactional() {
            return false;
        }
        match self.ongoing_aborted.get_mut(&h.producer_id) {
            Some(o) => {
                o.observed_batch = true;
                true
            }
            None => {
                self.ongoing_committed.insert(h.producer_id);
                false
            }
        }
    }

    /// A control batch read, with the type of its first record (`None`
    /// for a batch the cleaner emptied before): whether it may go.
    pub fn on_control_batch_read(&mut self, h: &BatchHeader, kind: Option<i16>) -> bool {
        self.consume_up_to(h.last_offset());
        let Some(kind) = kind else {
            return true;
        };
        match kind {
            ABORT => match self.ongoing_aborted.remove(&h.producer_id) {
                Some(o) if o.observed_batch => {
                    self.retained.push(o.txn);
                    false
                }
                _ => true,
            },
            COMMIT => !self.ongoing_committed.remove(&h.producer_id),
            _ => false,
        }
    }
}

/// The type of a control batch's first record (bytes 2..4 of its key).
pub(super) fn control_type(batch: &commitfs_record::Batch) -> Result<Option<i16>> {
    let mut kind = None;
    let section = batch.uncompressed_section()?;
    commitfs_record::retain::for_each_record(&batch.header, &section, |r| {
        kind = r
            .key
            .and_then(|k| commitfs_record::end_txn_marker::control_type_of(k).ok());
        false
    })?;
    Ok(kind)
}

/// Kafka's `LocalLog.collectAbortedTransactions(logStartOffset, base,
/// upper)`: from the segment holding `base` on, the index entries that end
/// at or after the log start and begin below `upper`, until an entry whose
/// stable offset reaches `upper`.
pub(super) fn collect_aborted(
    segments: &[std::sync::Arc<LogSegment>],
    log_start: i64,
    base: i64,
    upper: i64,
) -> Result<Vec<AbortedTxn>> {
    let first = segments
        .iter()
        .rposition(|s| s.base_offset <= base)
        .unwrap_or(0);
    let mut out = Vec::new();
    for seg in &segments[first..] {
        let found = seg.txn_index().collect_aborted(log_start, upper)?;
        out.extend(found.aborted);
        if found.complete {
            break;
        }
    }
    Ok(out)
}
