//! The segment map (Kafka's `LogSegments`), and the one place where
//! segments leave a live log.
//!
//! Why one place: retention, delete-records and an undone append each
//! delete segments, and the log cleaner swaps cleaned segments in for old
//! ones. Going through [`LogWriter::delete_segments`] or
//! [`LogWriter::replace_segments`], each takes a segment out of the map
//! before its files go (readers that hold it keep their open descriptor),
//! under the writer lock.

use std::collections::BTreeMap;
use std::sync::Arc;

use log::{error, info};
use parking_lot::RwLock;

use super::{LogWriter, settings};
use crate::config::LogConfig;
use crate::deleter::delay_of;
use crate::disk;
use crate::error::{IoContext, Result, StorageError};
use crate::segment::LogSegment;

/// The suffixes of a segment's files, in the order Kafka renames them
/// (`LogSegment.changeFileSuffixes`: log, offset index, time index, txn index).
const SEGMENT_FILES: [&str; 4] = ["log", "index", "timeindex", "txnindex"];

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

    /// The segment that would hold `offset`, or the first one when none
    /// would: the first of [`LogSegments::from`], alone.
    pub fn first_from(&self, offset: i64) -> Option<Arc<LogSegment>> {
        let map = self.0.read();
        let mut at = map.range(..=offset).next_back();
        if at.is_none() {
            at = map.iter().next();
        }
        at.map(|(_, s)| s.clone())
    }

    /// The segment after the one based at `base`.
    pub fn after(&self, base: i64) -> Option<Arc<LogSegment>> {
        use std::ops::Bound::{Excluded, Unbounded};
        let map = self.0.read();
        map.range((Excluded(base), Unbounded))
            .next()
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

    /// Puts `new` in the place of `old`, in one step for readers. Writer lock held.
    fn replace(&self, new: Arc<LogSegment>, old: &[Arc<LogSegment>]) {
        let mut map = self.0.write();
        for seg in old {
            map.remove(&seg.base_offset);
        }
        map.insert(new.base_offset, new);
    }
}

/// The renames of a swap, in their order.
#[derive(Clone, Copy)]
enum Step {
    /// The cleaned segment's files, `.cleaned` to `.swap`.
    ToSwap,
    /// The replaced segments' files, to `.deleted`.
    ToDeleted,
    /// The cleaned segment's files, `.swap` to their names.
    FromSwap,
}

impl Step {
    fn suffixes(self) -> (&'static str, &'static str) {
        match self {
            Step::ToSwap => (".cleaned", ".swap"),
            Step::ToDeleted => ("", ".deleted"),
            Step::FromSwap => (".swap", ""),
        }
    }

    fn rename(self, src: &std::path::Path, dst: &std::path::Path) -> std::io::Result<()> {
        match self {
            Step::ToSwap => disk::rename("cleaner.swap.to_swap", src, dst),
            Step::ToDeleted => disk::rename("cleaner.swap.to_deleted", src, dst),
            Step::FromSwap => disk::rename("cleaner.swap.from_swap", src, dst),
        }
    }
}

/// Renames each existing file of segment `base` in `dir` as `step` does
/// (a `.txnindex` is made only when needed, so it may be missing).
fn change_suffixes(dir: &std::path::Path, base: i64, step: Step) -> Result<()> {
    let (from, to) = step.suffixes();
    for kind in SEGMENT_FILES {
        let name = crate::names::segment_file_name(base, kind);
        let src = dir.join(format!("{name}{from}"));
        let dst = dir.join(format!("{name}{to}"));
        match step.rename(&src, &dst) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && kind != "log" => {}
            r => r.at(&dst)?,
        }
    }
    Ok(())
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

    /// Kafka's `LocalLog.replaceSegments`: the cleaned segment at `new_base`
    /// (its files `*.cleaned`) takes the place of `old`, in the order that
    /// makes a crash at any step recoverable by the loader: the new files
    /// renamed `.swap`, the old ones `.deleted`, the new ones to their
    /// names, the directory synced. The old files go after
    /// `file.delete.delay.ms`. Refused, with nothing renamed, when `old` is
    /// no longer what the log holds (a segment went, became active, or grew
    /// since the cleaner read it). Returns the new segment.
    pub fn replace_segments(
        &mut self,
        new_base: i64,
        old: &[Arc<LogSegment>],
        config: &LogConfig,
    ) -> Result<Arc<LogSegment>> {
        let dir = self.log.dir.clone();
        let active = self.log.segments.active_base();
        for seg in old {
            let held = self.log.segments.get(seg.base_offset);
            if !held.is_some_and(|h| Arc::ptr_eq(&h, seg)) || Some(seg.base_offset) == active {
                return Err(StorageError::SegmentsChanged(self.log.name().to_string()));
            }
            // Opened before their names change: a reader holding one reads on.
            seg.log_file()?;
            drop(seg.indexes()?);
        }
        change_suffixes(&dir, new_base, Step::ToSwap)?;
        for seg in old {
            change_suffixes(&dir, seg.base_offset, Step::ToDeleted)?;
        }
        change_suffixes(&dir, new_base, Step::FromSwap)?;
        disk::sync_dir("cleaner.swap.dir_fsync", &dir).synced(&dir)?;
        let path = LogSegment::log_path(&dir, new_base);
        let new = LogSegment::open(
            path,
            new_base,
            settings(config),
            true,
            self.log.health.clone(),
        );
        new.log_file()?;
        drop(new.indexes()?);
        let new = Arc::new(new);
        self.log.segments.replace(new.clone(), old);
        self.delete_replaced(old, config);
        Ok(new)
    }

    /// The `.deleted` files of replaced segments, removed now or after
    /// `file.delete.delay.ms`. Their removal failing is logged: they are
    /// out of the log already, and the next load removes what is left.
    fn delete_replaced(&self, old: &[Arc<LogSegment>], config: &LogConfig) {
        let dir = self.log.dir.clone();
        let bases: Vec<i64> = old.iter().map(|s| s.base_offset).collect();
        let name = self.log.name().to_string();
        let job = move || {
            for base in bases {
                for kind in SEGMENT_FILES {
                    let file = crate::names::segment_file_name(base, kind);
                    let path = dir.join(format!("{file}.deleted"));
                    match disk::remove_file("cleaner.deleted.remove", &path) {
                        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                            error!(
                                "Error while deleting segments for {name}: {}: {e}",
                                path.display()
                            );
                        }
                        _ => {}
                    }
                }
            }
            info!("Deleted the segment files {name} replaced");
        };
        match config.file_delete_delay_ms {
            0 => job(),
            ms => self.log.deleter.schedule(delay_of(ms), job),
        }
    }
}
