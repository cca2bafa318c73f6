//! A partition's log on local disk (Kafka's `LocalLog`, with its
//! `LogLoader`): the segments, the log end offset and the recovery point,
//! and everything that touches their files. The partition above it
//! (`partition/`, Kafka's `UnifiedLog`) decides what is appended and what is
//! deleted; this module knows how.
//!
//! Why apart from the partition: compaction and transactions change how
//! segments are replaced and how a Produce is checked. The first lands here
//! (segments leave the log in one place, `segments.rs`), the second above,
//! and neither has to read the other.
//!
//! **The writer lock.** Every change to the segment map or the log end
//! (an append, a roll, segments deleted, a directory followed, the close)
//! is a method of [`LogWriter`], the guard of the writer lock, so the
//! compiler sees that it is held. The partition holds the guard while it
//! changes its own state with the log's (its log start offset, producer
//! state), so the two move together. Reads take no lock beyond a short look
//! at the segment map: a segment only ever exposes bytes below its
//! published size, and the log end offset is published after the batch is
//! indexed. Flushes take a lock of their own, not the writer lock, so a
//! background flush does not hold up appends.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Weak};

use log::info;
use parking_lot::{Mutex, MutexGuard};

use super::checkpoint::Checkpoints;
use super::config::LogConfig;
use super::deleter::Deleter;
use super::disk;
use super::error::{IoContext, Result, StorageError};
use super::flusher::Flusher;
use super::health::Health;
use super::names::parse_partition_name;
use super::segment::{IndexSettings, LogSegment};

mod append;
mod fetch;
mod files;
mod follow_log;
mod loader;
mod lookup;
mod roll;
mod segments;
mod swap;

pub(crate) use append::{Landed, Rolled, Written};
pub use commitfs_record::names::FileKind;
pub use fetch::SegmentSlice;
pub use files::PartitionFile;
pub(crate) use loader::DirContext;
pub use lookup::RecordEntry;

use follow_log::FollowState;
use lookup::Lookups;
use roll::Flushes;
use segments::LogSegments;

/// Which partition a log is: its directory's name, `<topic>-<partition>`.
pub(crate) struct LogId {
    pub name: String,
    pub topic: String,
    pub partition: u32,
}

impl LogId {
    pub fn of(dir: &Path) -> Result<LogId> {
        let name = dir
            .file_name()
            .and_then(|n| n.to_str())
            .map(str::to_string)
            .ok_or_else(|| {
                StorageError::InvalidPartitionName(dir.display().to_string(), "not UTF-8")
            })?;
        let (topic, partition) = parse_partition_name(&name)?;
        Ok(LogId {
            name,
            topic,
            partition,
        })
    }
}

pub struct LocalLog {
    dir: PathBuf,
    id: LogId,
    writable: bool,
    segments: LogSegments,
    log_end_offset: AtomicI64,
    recovery_point: AtomicI64,
    writer: Mutex<WriterState>,
    flushes: Flushes,
    lookups: Lookups,
    checkpoints: Arc<Checkpoints>,
    /// The data directory's background flusher (flushes after rolls).
    flusher: Flusher,
    /// The data directory's removal of replaced segments' files.
    deleter: Deleter,
    /// The partition's: a failure here takes it offline.
    health: Arc<Health>,
    /// The directory is gone (deleted, or a followed writer deleted it):
    /// nothing more is written, not even a checkpoint.
    deleted: AtomicBool,
    /// For the flush a roll schedules, which may outlive the log.
    self_ref: Weak<LocalLog>,
}

/// What the writer lock guards besides the right to change the log.
#[derive(Default)]
struct WriterState {
    /// Closed or deleted: its directory may by now be a new partition's of
    /// the same name, so nothing more is changed through this log.
    closed: bool,
    /// Read-only: what was seen of the directory another process writes.
    follow: FollowState,
}

/// The writer lock, held: the one way to change a [`LocalLog`].
pub(crate) struct LogWriter<'a> {
    log: &'a LocalLog,
    state: MutexGuard<'a, WriterState>,
}

/// Index sizing for a segment, from the partition's config.
fn settings(config: &LogConfig) -> IndexSettings {
    IndexSettings {
        offset_index_max_bytes: config.offset_index_max_bytes(),
        time_index_max_bytes: config.time_index_max_bytes(),
        index_interval_bytes: config.index_interval_bytes.max(0) as u64,
    }
}

impl LocalLog {
    fn new(
        dir: &Path,
        ctx: &DirContext,
        segments: LogSegments,
        (log_end, recovery_point): (i64, i64),
        health: Arc<Health>,
    ) -> Result<Arc<LocalLog>> {
        let id = LogId::of(dir)?;
        Ok(Arc::new_cyclic(|me| LocalLog {
            dir: dir.to_path_buf(),
            id,
            writable: ctx.writable,
            segments,
            log_end_offset: AtomicI64::new(log_end),
            recovery_point: AtomicI64::new(recovery_point),
            writer: Mutex::new(WriterState::default()),
            flushes: Flushes::new(),
            lookups: Lookups::default(),
            checkpoints: ctx.checkpoints.clone(),
            flusher: ctx.flusher.clone(),
            deleter: ctx.deleter.clone(),
            health,
            deleted: AtomicBool::new(false),
            self_ref: me.clone(),
        }))
    }

    /// `<topic>-<partition>`.
    pub fn name(&self) -> &str {
        &self.id.name
    }
    pub fn topic(&self) -> &str {
        &self.id.topic
    }
    pub fn partition(&self) -> u32 {
        self.id.partition
    }
    pub fn dir(&self) -> &Path {
        &self.dir
    }
    pub fn writable(&self) -> bool {
        self.writable
    }
    pub fn log_end_offset(&self) -> i64 {
        self.log_end_offset.load(Ordering::Acquire)
    }
    pub fn recovery_point(&self) -> i64 {
        self.recovery_point.load(Ordering::Acquire)
    }
    pub fn is_deleted(&self) -> bool {
        self.deleted.load(Ordering::Acquire)
    }

    /// `Offline` if an earlier failure took the partition offline.
    pub fn check_online(&self) -> Result<()> {
        self.health.check()
    }

    pub(crate) fn active_segment(&self) -> Option<Arc<LogSegment>> {
        self.segments.active()
    }
    pub fn active_segment_base(&self) -> Option<i64> {
        self.segments.active_base()
    }
    pub(crate) fn segment_list(&self) -> Vec<Arc<LogSegment>> {
        self.segments.list()
    }
    pub fn segment_bases(&self) -> Vec<i64> {
        self.segments.bases()
    }
    /// The segment holding `offset` (the first one, below it) and those after.
    pub(crate) fn segments_from(&self, offset: i64) -> Vec<Arc<LogSegment>> {
        self.segments.from(offset)
    }
    pub fn first_segment_base(&self) -> Option<i64> {
        self.segments.first_base()
    }

    /// The writer lock, or `NoSuchPartition` once the log is closed.
    pub(crate) fn writer(&self) -> Result<LogWriter<'_>> {
        self.writer_if_open()
            .ok_or_else(|| StorageError::NoSuchPartition(self.id.name.clone()))
    }

    /// The writer lock, unless the log is closed.
    pub(crate) fn writer_if_open(&self) -> Option<LogWriter<'_>> {
        let state = self.writer.lock();
        (!state.closed).then_some(LogWriter { log: self, state })
    }

    /// Closes the log for good and removes its directory and its
    /// checkpoint entries.
    pub(crate) fn delete(&self) -> Result<()> {
        self.writer.lock().closed = true;
        self.deleted.store(true, Ordering::Release);
        self.health.guard("the delete", || {
            disk::remove_dir_all("partition.delete.remove", &self.dir).at(&self.dir)
        })?;
        self.checkpoints.remove(&self.id.topic, self.id.partition)?;
        info!(
            "Deleted log for partition {} in {}",
            self.id.name,
            self.dir.display()
        );
        Ok(())
    }

    /// The directory left the tree (a followed writer deleted it).
    pub(crate) fn mark_deleted(&self) {
        self.deleted.store(true, Ordering::Release);
    }
}

impl LogWriter<'_> {
    pub fn log_end_offset(&self) -> i64 {
        self.log.log_end_offset()
    }

    /// Refuses every later change: the partition is closing.
    pub fn close(&mut self) {
        self.state.closed = true;
    }

    /// Makes the active segment inactive (final time index entry, trimmed
    /// indexes), at a close. Returns its base offset, id and size.
    pub fn seal_active(&mut self) -> Result<Option<(i64, u64, u64)>> {
        let Some(active) = self.log.active_segment() else {
            return Ok(None);
        };
        active.seal()?;
        Ok(Some((active.base_offset, active.id(), active.size()?)))
    }

    /// The active segment, which a writable log always has once loaded (an
    /// offline one may have none, and is refused before it gets here).
    fn active(&self) -> Result<Arc<LogSegment>> {
        self.log
            .active_segment()
            .ok_or_else(|| StorageError::NoSuchPartition(self.log.id.name.clone()))
    }
}
