//! Read-only: a partition another process writes (a running broker),
//! brought up to date on each access. Its log follows the directory
//! (`local_log/follow_log.rs`); the partition takes from what the log saw the
//! log start offset the writer moved, forgets what it learned of segments
//! whose bytes changed, and replays what the writer appended into its
//! producer state, so that its open transactions and last stable offset
//! are the writer's.

use std::sync::atomic::Ordering;

use super::PartitionLog;
use crate::error::{Result, StorageError};

/// Whether the partition is still there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Followed {
    Live,
    /// Its directory is gone (the broker deleted the partition).
    Vanished,
}

impl PartitionLog {
    /// Brings a read-only partition up to what its directory holds now.
    /// A writable one is its own writer: nothing to follow.
    pub(crate) fn follow(&self) -> Result<Followed> {
        if self.local.writable() {
            return Ok(Followed::Live);
        }
        let Some(mut w) = self.local.writer_if_open() else {
            return Ok(Followed::Live);
        };
        let before = self.log_end_offset();
        let (seen, followed) = w.follow(&self.config(), self.log_start_offset());
        if seen.vanished {
            return Ok(Followed::Vanished);
        }
        // Under the writer lock, so that two readers never replay the same
        // batches.
        let replayed = self.follow_producer_state(before, seen.log_start);
        if seen.tail_moved {
            self.tally.forget();
        }
        self.log_start_offset
            .store(seen.log_start, Ordering::Release);
        drop(w);
        followed.and(replayed).map(|()| Followed::Live)
    }

    /// Producer state after the log followed its writer from `before`: the
    /// new batches replayed, or, when the log was cut below where it was or
    /// its start moved past it (retention deleted batches this view never
    /// replayed, a transaction's marker among them), all of it again from
    /// the snapshots on disk.
    fn follow_producer_state(&self, before: i64, log_start: i64) -> Result<()> {
        let end = self.log_end_offset();
        if end < before || (end > before && log_start > before) {
            self.producers.reset();
            let names = std::fs::read_dir(self.local.dir())
                .map_err(|e| StorageError::io(self.local.dir(), e))?
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .collect::<Vec<_>>();
            self.replay_producer_state(&names, None)?;
        } else if end > before {
            let mut replay = self.producers.replay(before);
            self.local
                .walk_batches_and_markers(before, |header, marker| match marker {
                    Some(marker) => {
                        replay.apply_marker(header, marker);
                    }
                    None if header.is_control() => {}
                    None => replay.apply(header),
                })?;
        }
        self.publish_first_unstable();
        Ok(())
    }

    /// The partition left the tree.
    pub(crate) fn mark_deleted(&self) {
        self.local.mark_deleted();
    }
}
