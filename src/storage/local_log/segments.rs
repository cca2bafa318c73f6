//! The segment map (Kafka's `LogSegments`), and the one place where
//! segments leave a live log.
//!
//! Why one place: retention, delete-records and an undone append each
//! delete segments, and the log cleaner will swap cleaned segments in for
//! old ones. Going through [`LogWriter::delete_segments`], each takes a
//! segment out of the map before its files go (readers that hold it keep
//! their open descriptor), under the writer lock.

use std::collections::BTreeMap;
use std::sync::Arc;

use log::info;
use parking_lot::RwLock;

use super::LogWriter;
use crate::storage::error::Result;
use crate::storage::segment::LogSegment;

/// Segments by base offset; the last one is active. Each look takes the
/// map's lock only for as long as it takes to copy what it wants.
pub(super) struct LogSegments(RwLock<BTreeMap<i64, Arc<LogSegment>>>);

impl LogSegments {
    pub fn new(map: BTreeMap<i64, Arc<LogSegment>>) -> LogSegments {
        LogSegments(RwLock::new(map))
    }

    pub fn active(&self) -> Option<Arc<LogSegment>> {
        self.0.read().values().next_back().cloned()
    }

    pub fn active_base(&self) -> Option<i64> {
        self.0.read().keys().next_back().copied()
    }

    pub fn first_base(&self) -> Option<i64> {
        self.0.read().keys().next().copied()
    }

    pub fn get(&self, base: i64) -> Option<Arc<LogSegment>> {
        self.0.read().get(&base).cloned()
    }

    /// The segment that would hold `offset`: the last one based at or below it.
    pub fn floor(&self, offset: i64) -> Option<Arc<LogSegment>> {
        self.0
            .read()
            .range(..=offset)
            .next_back()
            .map(|(_, s)| s.clone())
    }

    /// The segments from the one that would hold `offset` on (all of them
    /// when none would).
    pub fn from(&self, offset: i64) -> Vec<Arc<LogSegment>> {
        let map = self.0.read();
        let first = map
            .range(..=offset)
            .next_back()
            .map_or(i64::MIN, |(b, _)| *b);
        map.range(first..).map(|(_, s)| s.clone()).collect()
    }

    /// The segments based below `offset`.
    pub fn below(&self, offset: i64) -> Vec<Arc<LogSegment>> {
        self.0
            .read()
            .range(..offset)
            .map(|(_, s)| s.clone())
            .collect()
    }

    pub fn list(&self) -> Vec<Arc<LogSegment>> {
        self.0.read().values().cloned().collect()
    }

    pub fn bases(&self) -> Vec<i64> {
        self.0.read().keys().copied().collect()
    }

    /// Adds a segment, or puts one in the place of the segment at its base.
    /// Writer lock held.
    pub(super) fn insert(&self, segment: Arc<LogSegment>) {
        self.0.write().insert(segment.base_offset, segment);
    }

    /// Takes segment `base` out of the map (its files stay). Writer lock held.
    pub(super) fn remove(&self, base: i64) -> Option<Arc<LogSegment>> {
        self.0.write().remove(&base)
    }
}

impl LogWriter<'_> {
    /// The segments, as they stay while the lock is held.
    pub fn segments(&self) -> Vec<Arc<LogSegment>> {
        self.log.segments.list()
    }

    /// Takes `doomed` out of the log and deletes their files (with the
    /// producer snapshot at each base). The caller has moved the log start
    /// offset past them first, where they were a prefix.
    pub fn delete_segments(&mut self, doomed: &[Arc<LogSegment>], reason: &str) -> Result<()> {
        for seg in doomed {
            self.log.segments.remove(seg.base_offset);
            info!(
                "Deleting segment {} of partition {} due to {reason}",
                seg.base_offset,
                self.log.name()
            );
            seg.delete_files()?;
        }
        Ok(())
    }
}
