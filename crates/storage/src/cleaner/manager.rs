//! Kafka's `LogCleanerManager`: which log is cleaned next, and the state of
//! each partition's cleaning. A partition is cleaned by one thread at a
//! time (`InProgress`); a deletion aborts its pass and waits for it to
//! stop (`Aborted`, then `Paused`); a pass that fails with anything but an
//! I/O error marks the partition uncleanable until it is gone.
//!
//! What is cleanable (`cleanableOffsets`, `calculateCleanableBytes`,
//! `maxCompactionDelay`) is worked out from the partition's segments here,
//! with Kafka's rules; the first dirty offset is the one the
//! `cleaner-offset-checkpoint` keeps.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use log::warn;
use parking_lot::{Condvar, Mutex};

use crate::error::{Result, StorageError};
use crate::partition::PartitionLog;
use crate::segment::LogSegment;

/// Kafka's `LogCleaningState`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CleaningState {
    InProgress,
    Aborted,
    Paused(u32),
}

/// A log chosen for cleaning (Kafka's `LogToClean`).
pub(crate) struct LogToClean {
    pub log: Arc<PartitionLog>,
    pub first_dirty_offset: i64,
    /// The base of the segment holding the first uncleanable offset.
    pub first_uncleanable_offset: i64,
    pub cleanable_bytes: u64,
    pub total_bytes: u64,
    pub needs_compaction_now: bool,
}

impl LogToClean {
    pub fn cleanable_ratio(&self) -> f64 {
        self.cleanable_bytes as f64 / self.total_bytes as f64
    }
}

/// Kafka's `LogSegments.values(from, to)`: from the segment holding `from`
/// (or the first) to the last based below `to`.
pub(crate) fn log_segments(segs: &[Arc<LogSegment>], from: i64, to: i64) -> Vec<Arc<LogSegment>> {
    if from >= to {
        return Vec::new();
    }
    let first = segs
        .iter()
        .rposition(|s| s.base_offset <= from)
        .unwrap_or(0);
    segs[first..]
        .iter()
        .take_while(|s| s.base_offset < to)
        .cloned()
        .collect()
}

/// Kafka's `nonActiveLogSegmentsFrom`.
fn non_active_from(segs: &[Arc<LogSegment>], from: i64) -> Vec<Arc<LogSegment>> {
    match segs.last() {
        Some(active) if from <= active.base_offset => log_segments(segs, from, active.base_offset),
        _ => Vec::new(),
    }
}

fn sizes(segs: &[Arc<LogSegment>]) -> Result<u64> {
    segs.iter().map(|s| s.size()).sum()
}

/// The range a pass may clean (Kafka's `OffsetsToClean`): the first dirty
/// offset, the first uncleanable one, and whether the checkpoint must be
/// written again because it no longer fits the log.
pub(crate) struct OffsetsToClean {
    pub first_dirty_offset: i64,
    pub first_uncleanable_dirty_offset: i64,
    pub force_update_checkpoint: bool,
}

/// Kafka's `cleanableOffsets`: from the checkpoint (reset to the log start
/// where it fell out of the log) to the first of the last stable offset,
/// the active segment, and the first segment newer than
/// `min.compaction.lag.ms`.
pub(crate) fn cleanable_offsets(
    log: &PartitionLog,
    checkpoint: Option<i64>,
    now: i64,
) -> Result<OffsetsToClean> {
    let config = log.config();
    let start = log.log_start_offset();
    let segs = log.cleaner_segments();
    let dirty = checkpoint.unwrap_or(start);
    let compact_delete = config.cleanup_policy.delete_enabled();
    let (first_dirty, force) = if dirty < start {
        if !compact_delete {
            warn!(
                "Resetting first dirty offset of {} to log start offset {start} since the checkpointed offset {dirty} is invalid.",
                log.name()
            );
        }
        (start, true)
    } else if dirty > log.log_end_offset() {
        warn!(
            "The last checkpoint dirty offset for partition {} is {dirty}, which is larger than the log end offset {}. Resetting to the log start offset {start}.",
            log.name(),
            log.log_end_offset()
        );
        (start, true)
    } else {
        (dirty, false)
    };
    // An open transaction's batches are not cleaned: whether they stay
    // depends on how it ends.
    let mut uncleanable = log.last_stable_offset();
    if let Some(active) = segs.last() {
        uncleanable = uncleanable.min(active.base_offset);
    }
    let lag = config.min_compaction_lag_ms.max(0);
    if lag > 0 {
        for s in non_active_from(&segs, first_dirty) {
            if s.largest_timestamp()? > now - lag {
                uncleanable = uncleanable.min(s.base_offset);
                break;
            }
        }
    }
    Ok(OffsetsToClean {
        first_dirty_offset: first_dirty,
        first_uncleanable_dirty_offset: first_dirty.max(uncleanable),
        force_update_checkpoint: force,
    })
}

/// Kafka's `maxCompactionDelay`: how long past `max.compaction.lag.ms` the
/// oldest dirty segment's first batch is (0 when none is).
pub(crate) fn max_compaction_delay(log: &PartitionLog, first_dirty: i64, now: i64) -> Result<i64> {
    let segs = log.cleaner_segments();
    let mut earliest = i64::MAX;
    for s in non_active_from(&segs, first_dirty) {
        if let Some(h) = s.first_batch_header()?
            && h.max_timestamp > 0
        {
            earliest = earliest.min(h.max_timestamp);
        }
    }
    let until = now.saturating_sub(log.config().max_compaction_lag_ms.max(0));
    Ok(if earliest < until {
        until - earliest
    } else {
        0
    })
}

/// Kafka's `LogToClean` figures: the first uncleanable offset snapped to
/// its segment's base, and the clean and cleanable bytes (a segment that
/// straddles the first dirty offset counts in both, as in Kafka).
pub(crate) fn log_to_clean(
    log: &Arc<PartitionLog>,
    first_dirty: i64,
    uncleanable: i64,
    needs_compaction_now: bool,
) -> Result<LogToClean> {
    let segs = log.cleaner_segments();
    let first_uncleanable = non_active_from(&segs, uncleanable)
        .first()
        .or(segs.last())
        .map_or(uncleanable, |s| s.base_offset);
    let cleanable = sizes(&log_segments(
        &segs,
        first_dirty.min(first_uncleanable),
        first_uncleanable,
    ))?;
    let clean = sizes(&log_segments(&segs, -1, first_dirty))?;
    Ok(LogToClean {
        log: log.clone(),
        first_dirty_offset: first_dirty,
        first_uncleanable_offset: first_uncleanable,
        cleanable_bytes: cleanable,
        total_bytes: clean + cleanable,
        needs_compaction_now,
    })
}

/// The cleaning states and the uncleanable partitions, under one lock.
#[derive(Default)]
pub(crate) struct CleanerManager {
    state: Mutex<ManagerState>,
    paused: Condvar,
    /// Passes found aborted when they ended, counted before the deletion
    /// that aborted them is let go.
    passes_aborted: AtomicU64,
}

#[derive(Default)]
struct ManagerState {
    in_progress: BTreeMap<String, CleaningState>,
    uncleanable: HashSet<String>,
}

impl CleanerManager {
    /// Whether the partition may be picked (not being cleaned, paused or
    /// marked uncleanable).
    pub fn is_free(&self, name: &str) -> bool {
        let st = self.state.lock();
        !st.in_progress.contains_key(name) && !st.uncleanable.contains(name)
    }

    /// Marks `name` in progress if it is free; whether it was.
    pub fn try_begin(&self, name: &str) -> bool {
        let mut st = self.state.lock();
        if st.in_progress.contains_key(name) || st.uncleanable.contains(name) {
            return false;
        }
        st.in_progress
            .insert(name.to_string(), CleaningState::InProgress);
        true
    }

    /// Kafka's `checkCleaningAborted`.
    pub fn check_aborted(&self, name: &str) -> Result<()> {
        match self.state.lock().in_progress.get(name) {
            Some(CleaningState::Aborted) => Err(StorageError::CleaningAborted(name.to_string())),
            _ => Ok(()),
        }
    }

    /// Kafka's `doneCleaning` (and `doneDeleting`): whether the pass may
    /// write its checkpoint (it was not aborted meanwhile).
    pub fn done(&self, name: &str) -> bool {
        self.end(name, false)
    }

    /// [`CleanerManager::done`] at the end of a cleaning pass, counting it
    /// when it was aborted.
    pub fn done_pass(&self, name: &str) -> bool {
        self.end(name, true)
    }

    pub fn passes_aborted(&self) -> u64 {
        self.passes_aborted.load(Ordering::Acquire)
    }

    fn end(&self, name: &str, pass: bool) -> bool {
        let mut st = self.state.lock();
        match st.in_progress.get(name) {
            Some(CleaningState::Aborted) => {
                if pass {
                    self.passes_aborted.fetch_add(1, Ordering::AcqRel);
                }
                st.in_progress
                    .insert(name.to_string(), CleaningState::Paused(1));
                self.paused.notify_all();
                false
            }
            _ => {
                st.in_progress.remove(name);
                true
            }
        }
    }

    /// Kafka's `abortAndPauseCleaning`: blocks until no pass runs on `name`.
    pub fn abort_and_pause(&self, name: &str) {
        let mut st = self.state.lock();
        let next = match st.in_progress.get(name) {
            None => CleaningState::Paused(1),
            Some(CleaningState::InProgress) => CleaningState::Aborted,
            Some(CleaningState::Paused(n)) => CleaningState::Paused(n + 1),
            Some(CleaningState::Aborted) => CleaningState::Aborted,
        };
        st.in_progress.insert(name.to_string(), next);
        while !matches!(st.in_progress.get(name), Some(CleaningState::Paused(_))) {
            self.paused.wait(&mut st);
        }
    }

    /// Forgets a partition that is gone (Kafka's
    /// `maintainUncleanablePartitions`, and the pause its deletion took).
    pub fn forget(&self, name: &str) {
        let mut st = self.state.lock();
        st.in_progress.remove(name);
        st.uncleanable.remove(name);
    }

    /// Kafka's `maintainUncleanablePartitions`: partitions no longer in
    /// the pool leave the uncleanable set.
    pub fn keep_uncleanable(&self, live: &HashSet<String>) {
        self.state.lock().uncleanable.retain(|n| live.contains(n));
    }

    pub fn mark_uncleanable(&self, name: &str) {
        self.state.lock().uncleanable.insert(name.to_string());
    }

    pub fn is_uncleanable(&self, name: &str) -> bool {
        self.state.lock().uncleanable.contains(name)
    }

    #[cfg(test)]
    pub fn state_of(&self, name: &str) -> Option<CleaningState> {
        self.state.lock().in_progress.get(name).copied()
    }
}
