//! Read-only: a partition another process writes (a running broker),
//! brought up to date on each access. Its log follows the directory
//! (`local_log/follow.rs`); the partition takes from what the log saw the
//! log start offset the writer moved, and forgets what it learned of
//! segments whose bytes changed.

use std::sync::atomic::Ordering;

use super::PartitionLog;
use crate::storage::error::Result;

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
        let (seen, followed) = w.follow(&self.config(), self.log_start_offset());
        if seen.vanished {
            return Ok(Followed::Vanished);
        }
        if !seen.stale.is_empty() {
            let mut stream = self.stream.lock();
            for base in &seen.stale {
                stream.forget(*base);
            }
        }
        if seen.tail_moved {
            self.tally.forget();
        }
        self.log_start_offset
            .store(seen.log_start, Ordering::Release);
        followed.map(|()| Followed::Live)
    }

    /// The partition left the tree.
    pub(crate) fn mark_deleted(&self) {
        self.local.mark_deleted();
    }
}
