//! One partition's log: the segments, the log start and end offsets, the
//! recovery point, and the single writer lock (Kafka's `UnifiedLog` and
//! `LocalLog` in one).
//!
//! Appends, rolls, retention and config changes take the writer lock. Reads
//! take no partition lock beyond a short look at the segment map: a segment
//! only ever exposes bytes below its published size, and the log end offset
//! is published after the batch is indexed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{SystemTime, UNIX_EPOCH};

use log::info;
use parking_lot::{Mutex, RwLock};

use super::append_signal::AppendSignal;
use super::checkpoint::{Checkpoints, write_atomically};
use super::config::{LogConfig, format_properties};
use super::disk;
use super::error::{IoContext, Result, StorageError};
use super::flusher::Flusher;
use super::health::Health;
use super::names::parse_partition_name;
use super::producer_state::ProducerStates;
use super::progress::Progress;
use super::segment::{IndexSettings, LogSegment};
use super::stream::{AppendTally, Stream};

mod append;
mod fetch;
mod files;
mod follow;
mod loader;
mod produce;
mod producers;
mod read;
mod retention;
mod roll;

pub use append::AppendInfo;
pub use fetch::{FetchRead, SegmentSlice};
pub use files::{FileKind, PartitionFile};
pub use produce::{LEADER_EPOCH, NoProducerState, ProducedInfo, ProducerCheck, ProducerStateHook};
pub use producers::IdempotentProducers;
use read::CachedBatch;
pub use read::RecordEntry;

// Read-only partitions following another writer.
use follow::FollowState;
pub(crate) use follow::Followed;

/// Per-partition config overrides, in Java properties format.
pub const PROPERTIES_FILE: &str = "commitfs.properties";

/// What `status` shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionStatus {
    pub log_start_offset: i64,
    pub log_end_offset: i64,
    pub recovery_point: i64,
    pub segments: usize,
    pub size_bytes: u64,
    /// Base offset of the active segment.
    pub active_segment: i64,
    /// Bytes read from segment files for record lookups (not raw file reads).
    pub lookup_bytes_read: u64,
    /// fsync(2) calls on `.log` files.
    pub fsyncs: u64,
    /// Why the partition is offline (fail-stop after an I/O failure), if it is.
    pub offline: Option<String>,
}

struct Writer {
    /// Reused encode buffer: one allocation for the life of the partition.
    buf: Vec<u8>,
    closed: bool,
}

pub struct PartitionLog {
    name: String,
    topic: String,
    partition: u32,
    dir: PathBuf,
    writable: bool,
    defaults: LogConfig,
    config: RwLock<Arc<LogConfig>>,
    overrides: Mutex<BTreeMap<String, String>>,
    writer: Mutex<Writer>,
    segments: RwLock<BTreeMap<i64, Arc<LogSegment>>>,
    log_start_offset: AtomicI64,
    log_end_offset: AtomicI64,
    recovery_point: AtomicI64,
    checkpoints: Arc<Checkpoints>,
    lookup_bytes_read: AtomicU64,
    fsyncs: AtomicU64,
    last_flush_ms: AtomicI64,
    flush_lock: Mutex<()>,
    deleted: AtomicBool,
    /// Read-only: what was seen of the directory another process writes.
    follow: Mutex<FollowState>,
    stream: Mutex<Stream>,
    tally: AppendTally,
    /// The last batch decoded for a lookup. Batches never change once
    /// written, and the offset range check runs before it is used.
    recent_batch: Mutex<Option<Arc<CachedBatch>>>,
    /// Raised once an append is published.
    appends: Arc<AppendSignal>,
    /// The data directory's background flusher (flushes after rolls).
    flusher: Flusher,
    self_ref: Weak<PartitionLog>,
    /// Online, or offline after a failure (fail-stop); shared with the segments.
    health: Arc<Health>,
    /// Idempotent producers' state (`producers.rs`); changed under the
    /// writer lock only.
    producers: Mutex<ProducerStates>,
}

pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn settings(config: &LogConfig) -> IndexSettings {
    IndexSettings {
        offset_index_max_bytes: config.offset_index_max_bytes(),
        time_index_max_bytes: config.time_index_max_bytes(),
        index_interval_bytes: config.index_interval_bytes.max(0) as u64,
    }
}

/// How a partition is being opened.
pub(crate) struct LoadContext<'a> {
    pub defaults: &'a LogConfig,
    pub checkpoints: &'a Arc<Checkpoints>,
    pub clean_shutdown: bool,
    pub writable: bool,
    pub appends: &'a Arc<AppendSignal>,
    pub flusher: &'a Flusher,
    pub progress: Progress<'a>,
}

impl PartitionLog {
    /// `<topic>-<partition>`.
    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn topic(&self) -> &str {
        &self.topic
    }
    pub fn partition(&self) -> u32 {
        self.partition
    }
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    #[allow(clippy::too_many_arguments)]
    fn new_arc(
        dir: &Path,
        ctx: &LoadContext,
        overrides: BTreeMap<String, String>,
        config: LogConfig,
        segments: BTreeMap<i64, Arc<LogSegment>>,
        offsets: (i64, i64, i64),
        stream: Stream,
        health: Arc<Health>,
    ) -> Result<Arc<PartitionLog>> {
        let name = dir_name(dir)?;
        let (topic, partition) = parse_partition_name(&name)?;
        let (log_start, log_end, recovery_point) = offsets;
        Ok(Arc::new_cyclic(|me| PartitionLog {
            name,
            topic,
            partition,
            dir: dir.to_path_buf(),
            writable: ctx.writable,
            defaults: ctx.defaults.clone(),
            config: RwLock::new(Arc::new(config)),
            overrides: Mutex::new(overrides),
            writer: Mutex::new(Writer {
                buf: Vec::new(),
                closed: false,
            }),
            segments: RwLock::new(segments),
            log_start_offset: AtomicI64::new(log_start),
            log_end_offset: AtomicI64::new(log_end),
            recovery_point: AtomicI64::new(recovery_point),
            checkpoints: ctx.checkpoints.clone(),
            lookup_bytes_read: AtomicU64::new(0),
            fsyncs: AtomicU64::new(0),
            last_flush_ms: AtomicI64::new(now_ms()),
            flush_lock: Mutex::new(()),
            deleted: AtomicBool::new(false),
            follow: Mutex::new(FollowState::default()),
            stream: Mutex::new(stream),
            tally: AppendTally::default(),
            recent_batch: Mutex::new(None),
            appends: ctx.appends.clone(),
            flusher: ctx.flusher.clone(),
            self_ref: me.clone(),
            health,
            producers: Mutex::new(ProducerStates::default()),
        })
        .init_tally())
    }

    /// Creates a new, empty partition directory with its first segment and
    /// its checkpoint entries. All or nothing: a failure removes the
    /// directory again.
    pub(crate) fn create(dir: &Path, ctx: &LoadContext) -> Result<Arc<PartitionLog>> {
        let name = dir_name(dir)?;
        let (topic, partition) = parse_partition_name(&name)?;
        disk::create_dir("partition.create.mkdir", dir).at(dir)?;
        let health = Arc::new(Health::new(&name));
        let config = ctx.defaults.clone();
        let made = (|| {
            let seg = LogSegment::create(dir, 0, settings(&config), health.clone())?;
            ctx.checkpoints.set_recovery_point(&topic, partition, 0)?;
            ctx.checkpoints.set_log_start_offset(&topic, partition, 0)?;
            Ok::<_, StorageError>(seg)
        })();
        let seg = match made {
            Ok(seg) => seg,
            Err(e) => {
                // Left behind, the directory would load at the next mount
                // as a partition whose mkdir failed.
                if let Err(r) = disk::remove_dir_all("partition.create.cleanup", dir) {
                    log::error!(
                        "Could not remove {} after a failed create ({e}): {r}",
                        dir.display()
                    );
                    return Err(StorageError::io(dir, r));
                }
                return Err(e);
            }
        };
        let mut segments = BTreeMap::new();
        segments.insert(0, Arc::new(seg));
        let log = Self::new_arc(
            dir,
            ctx,
            BTreeMap::new(),
            config,
            segments,
            (0, 0, 0),
            Stream::load(dir, Some(0)),
            health,
        )?;
        info!(
            "Created log for partition {} in {}",
            log.name,
            dir.display()
        );
        Ok(log)
    }

    /// A partition whose load failed: listed, offline from the start (its
    /// health names the failure), with no segments.
    pub(crate) fn offline_placeholder(
        dir: &Path,
        ctx: &LoadContext,
        health: Arc<Health>,
    ) -> Result<Arc<PartitionLog>> {
        Self::new_arc(
            dir,
            ctx,
            BTreeMap::new(),
            ctx.defaults.clone(),
            BTreeMap::new(),
            (0, 0, 0),
            Stream::empty(),
            health,
        )
    }

    /// `Offline` if an earlier failure took the partition offline.
    pub fn check_online(&self) -> Result<()> {
        self.health.check()
    }

    /// Why the partition is offline, if it is.
    pub fn offline_cause(&self) -> Option<String> {
        self.health.cause().map(str::to_string)
    }

    /// The active segment, which a writable log always has once loaded (an
    /// offline one may have none, and is refused before it gets here).
    fn writable_active(&self) -> Result<Arc<LogSegment>> {
        self.active_segment()
            .ok_or_else(|| StorageError::NoSuchPartition(self.name.clone()))
    }

    /// Starts counting the active segment's stream bytes when they are known:
    /// an empty segment, or one whose length was saved at a clean close.
    fn init_tally(self: Arc<Self>) -> Arc<Self> {
        if let Some(active) = self.active_segment() {
            match active.known_size() {
                Some(0) => self.tally.start_segment(active.base_offset),
                Some(size) => {
                    if let Some(len) = self.stream.lock().known_len(active.base_offset) {
                        self.tally.resume(active.base_offset, size, len);
                    }
                }
                // Not known: the stream computes the length when asked.
                None => {}
            }
        }
        self
    }

    fn active_segment(&self) -> Option<Arc<LogSegment>> {
        self.segments.read().values().last().cloned()
    }

    fn segment_for(&self, offset: i64) -> Option<Arc<LogSegment>> {
        self.segments
            .read()
            .range(..=offset)
            .next_back()
            .map(|(_, s)| s.clone())
    }

    fn segment_list(&self) -> Vec<Arc<LogSegment>> {
        self.segments.read().values().cloned().collect()
    }

    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset.load(Ordering::Acquire)
    }
    pub fn log_end_offset(&self) -> i64 {
        self.log_end_offset.load(Ordering::Acquire)
    }
    pub fn recovery_point(&self) -> i64 {
        self.recovery_point.load(Ordering::Acquire)
    }

    /// What `status` shows. An offline partition's sizes are those known,
    /// read from no file.
    pub fn status(&self) -> Result<PartitionStatus> {
        let segs = self.segment_list();
        let offline = self.offline_cause();
        let mut size_bytes = 0;
        for s in &segs {
            size_bytes += match offline {
                Some(_) => s.known_size().unwrap_or(0),
                None => s.size()?,
            };
        }
        Ok(PartitionStatus {
            log_start_offset: self.log_start_offset(),
            log_end_offset: self.log_end_offset(),
            recovery_point: self.recovery_point(),
            segments: segs.len(),
            size_bytes,
            active_segment: segs.last().map_or(0, |s| s.base_offset),
            lookup_bytes_read: self.lookup_bytes_read.load(Ordering::Relaxed),
            fsyncs: self.fsyncs.load(Ordering::Relaxed),
            offline,
        })
    }

    /// Base offset of the active segment.
    pub fn active_segment_base(&self) -> Option<i64> {
        self.segments.read().keys().next_back().copied()
    }

    pub fn config(&self) -> Arc<LogConfig> {
        self.config.read().clone()
    }

    /// The per-partition overrides (persisted in the partition directory).
    pub fn overrides(&self) -> BTreeMap<String, String> {
        self.overrides.lock().clone()
    }

    /// Validates, applies and persists one override.
    pub fn set_config(&self, name: &str, value: &str) -> Result<()> {
        if !self.writable {
            return Err(StorageError::ReadOnly);
        }
        self.health
            .guard("a config change", || self.set_config_now(name, value))
    }

    fn set_config_now(&self, name: &str, value: &str) -> Result<()> {
        let value = value.trim_end_matches(['\n', '\r']);
        let w = self.writer.lock();
        // Its directory may by now be a new partition's of the same name.
        if w.closed {
            return Err(StorageError::NoSuchPartition(self.name.clone()));
        }
        let mut overrides = self.overrides.lock().clone();
        overrides.insert(name.to_string(), value.to_string());
        let config = self.defaults.with_overrides(&overrides)?;
        let path = self.dir.join(PROPERTIES_FILE);
        write_atomically(&path, format_properties(&overrides).as_bytes())?;
        *self.overrides.lock() = overrides;
        *self.config.write() = Arc::new(config);
        info!("Updated config {name}={value} for partition {}", self.name);
        Ok(())
    }

    /// Removes an override, so the mount-wide default applies again.
    pub fn reset_config(&self, name: &str) -> Result<()> {
        if !self.writable {
            return Err(StorageError::ReadOnly);
        }
        self.health
            .guard("a config change", || self.reset_config_now(name))
    }

    fn reset_config_now(&self, name: &str) -> Result<()> {
        if self.defaults.get(name).is_none() {
            return Err(super::config::ConfigError::UnknownName(name.to_string()).into());
        }
        let w = self.writer.lock();
        // Its directory may by now be a new partition's of the same name.
        if w.closed {
            return Err(StorageError::NoSuchPartition(self.name.clone()));
        }
        let mut overrides = self.overrides.lock().clone();
        if overrides.remove(name).is_none() {
            return Ok(());
        }
        let config = self.defaults.with_overrides(&overrides)?;
        let path = self.dir.join(PROPERTIES_FILE);
        write_atomically(&path, format_properties(&overrides).as_bytes())?;
        *self.overrides.lock() = overrides;
        *self.config.write() = Arc::new(config);
        info!("Removed config override {name} for partition {}", self.name);
        Ok(())
    }

    /// Flushes, seals the active segment (final time index entry, trimmed
    /// indexes) and refuses further appends. An offline partition is left
    /// as it is, and its `Offline` error keeps the clean-shutdown marker
    /// from being written, so the next start recovers it.
    pub(crate) fn close(&self) -> Result<()> {
        let mut w = self.writer.lock();
        if w.closed {
            return self.check_online();
        }
        w.closed = true;
        drop(w);
        if !self.writable {
            return Ok(());
        }
        self.health.guard("the close", || self.close_now())
    }

    fn close_now(&self) -> Result<()> {
        self.flush()?;
        self.take_producer_snapshot(self.log_end_offset())?;
        if let Some(active) = self.active_segment() {
            active.seal()?;
            // Saved so the next clean start knows the active segment's stream length.
            self.tally.sealed(active.base_offset, active.size()?);
            let segs = self.segment_list();
            let mut stream = self.stream.lock();
            stream.absorb(&self.tally);
            self.save_stream(&mut stream, &segs)?;
        }
        Ok(())
    }

    /// Closes the partition for good and removes its directory.
    pub(crate) fn delete(&self) -> Result<()> {
        self.check_online()?;
        self.writer.lock().closed = true;
        self.deleted.store(true, Ordering::Release);
        self.health.guard("the delete", || {
            disk::remove_dir_all("partition.delete.remove", &self.dir).at(&self.dir)
        })?;
        self.checkpoints.remove(&self.topic, self.partition)?;
        info!(
            "Deleted log for partition {} in {}",
            self.name,
            self.dir.display()
        );
        Ok(())
    }

    /// Every segment's base offset and index entries, for checks and tools.
    pub fn segment_bases(&self) -> Vec<i64> {
        self.segments.read().keys().copied().collect()
    }
}

/// `<topic>-<partition>`, the directory's name.
fn dir_name(dir: &Path) -> Result<String> {
    dir.file_name()
        .and_then(|n| n.to_str())
        .map(str::to_string)
        .ok_or_else(|| StorageError::InvalidPartitionName(dir.display().to_string(), "not UTF-8"))
}
