//! Which batches a stream shows: `log` every data batch (what a
//! `read_uncommitted` consumer prints), `committed` those a
//! `read_committed` consumer prints — below the last stable offset, and
//! not of an aborted transaction.
//!
//! A batch below the first offset of the oldest open transaction (the last
//! stable offset before it is raised to the log start) is decided for
//! good: its transaction's marker is in the log and, for an abort, the
//! `.txnindex` entry was written before the marker was published. So what
//! a view has mapped below that offset never changes, and it only grows at
//! the end as the offset moves up.

use std::collections::HashMap;

use crate::error::Result;
use commitfs_record::BatchHeader;
use commitfs_record::state_files::AbortedTxn;

/// The aborted transactions that end at or after an offset and began below
/// the view's end (`PartitionLog::aborted_transactions`).
pub(crate) type AbortedFrom<'a> = &'a dyn Fn(i64) -> Result<Vec<AbortedTxn>>;

/// A stream's view of the log.
#[derive(Clone, Copy)]
pub(crate) enum View<'a> {
    /// Every data record: `log`.
    All,
    /// What a `read_committed` consumer reads: `committed`.
    /// Below `decided`, the first offset of the oldest open transaction
    /// or the high watermark; a record below the log start is not shown,
    /// which makes the end the last stable offset.
    Committed {
        decided: i64,
        aborted: AbortedFrom<'a>,
    },
}

/// What a view does with a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Admit {
    /// Its records are in the stream.
    Take,
    /// None of its records are (a control batch, an aborted transaction's).
    Skip,
    /// It and every batch after it reach past the view's end.
    Stop,
}

/// Aborted transactions' offset ranges by producer id, sorted by first offset.
type AbortedRanges = HashMap<i64, Vec<(i64, i64)>>;

/// A [`View`] as one walk applies it: the aborted transactions are read
/// once a transactional batch needs them, so a log without transactions
/// never reads a `.txnindex`.
pub(super) struct Filter<'a> {
    view: View<'a>,
    /// The aborted ranges, and the offset they were collected from.
    aborted: Option<(i64, AbortedRanges)>,
}

impl<'a> Filter<'a> {
    pub fn new(view: View<'a>) -> Filter<'a> {
        Filter {
            view,
            aborted: None,
        }
    }

    /// The offset no batch reaching to or past which is shown, if any.
    pub fn end(&self) -> Option<i64> {
        match self.view {
            View::All => None,
            View::Committed { decided, .. } => Some(decided),
        }
    }

    pub fn admit(&mut self, h: &BatchHeader) -> Result<Admit> {
        let View::Committed { decided, aborted } = self.view else {
            return Ok(if h.is_control() {
                Admit::Skip
            } else {
                Admit::Take
            });
        };
        // The end is a batch's first offset (an open transaction's) or the
        // log's end: no batch reaches across it.
        if h.last_offset() >= decided {
            return Ok(Admit::Stop);
        }
        if h.is_control() {
            return Ok(Admit::Skip);
        }
        if !h.is_transactional() {
            return Ok(Admit::Take);
        }
        // Walks go forward, so the set read for the first transactional
        // batch serves the rest; a walk that starts lower reads it again.
        if self
            .aborted
            .as_ref()
            .is_none_or(|(from, _)| *from > h.base_offset)
        {
            let mut by_producer = AbortedRanges::new();
            for t in aborted(h.base_offset)? {
                by_producer
                    .entry(t.producer_id)
                    .or_default()
                    .push((t.first_offset, t.last_offset));
            }
            for ranges in by_producer.values_mut() {
                ranges.sort_unstable();
            }
            self.aborted = Some((h.base_offset, by_producer));
        }
        let (_, by_producer) = self.aborted.as_ref().expect("read above");
        let offset = h.base_offset;
        let in_abort = by_producer.get(&h.producer_id).is_some_and(|ranges| {
            let i = ranges.partition_point(|(first, _)| *first <= offset);
            i > 0 && offset <= ranges[i - 1].1
        });
        Ok(if in_abort { Admit::Skip } else { Admit::Take })
    }
}
