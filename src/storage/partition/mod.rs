//! One partition's log: the segments, the log start and end offsets, the
//! recovery point, and the single writer lock (Kafka's `UnifiedLog` and
//! `LocalLog` in one).
//!
//! Appends, rolls, retention and config changes take the writer lock. Reads
//! take no partition lock beyond a short look at the segment map: a segment
//! only ever exposes bytes below its published size, and the log end offset
//! is published after the batch is indexed.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{SystemTime, UNIX_EPOCH};

use log::info;
use parking_lot::{Mutex, RwLock};

use super::appends::AppendSignal;
use super::checkpoint::{Checkpoints, write_atomically};
use super::config::{LogConfig, format_properties};
use super::error::{IoContext, Result, StorageError};
use super::names::parse_partition_name;
use super::segment::{IndexSettings, LogSegment};
use super::stream::{AppendTally, Stream};

mod append;
mod fetch;
mod files;
mod loader;
mod produce;
mod read;
mod retention;
mod roll;

pub use append::AppendInfo;
pub use fetch::{FetchRead, SegmentSlice};
pub use files::{FileKind, PartitionFile};
pub use produce::{LEADER_EPOCH, NoProducerState, ProducedInfo, ProducerCheck, ProducerStateHook};
use read::CachedBatch;
pub use read::RecordEntry;

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
    stream: Mutex<Stream>,
    tally: AppendTally,
    /// The last batch decoded for a lookup. Batches never change once
    /// written, and the offset range check runs before it is used.
    recent_batch: Mutex<Option<Arc<CachedBatch>>>,
    /// Raised once an append is published.
    appends: Arc<AppendSignal>,
    self_ref: Weak<PartitionLog>,
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

    fn new_arc(
        dir: &Path,
        ctx: &LoadContext,
        overrides: BTreeMap<String, String>,
        config: LogConfig,
        segments: BTreeMap<i64, Arc<LogSegment>>,
        offsets: (i64, i64, i64),
        stream: Stream,
    ) -> Result<Arc<PartitionLog>> {
        let name = dir
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| {
                StorageError::InvalidPartitionName(dir.display().to_string(), "not UTF-8")
            })?
            .to_string();
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
            stream: Mutex::new(stream),
            tally: AppendTally::default(),
            recent_batch: Mutex::new(None),
            appends: ctx.appends.clone(),
            self_ref: me.clone(),
        })
        .init_tally())
    }

    /// Creates a new, empty partition directory with its first segment.
    pub(crate) fn create(dir: &Path, ctx: &LoadContext) -> Result<Arc<PartitionLog>> {
        fs::create_dir(dir).at(dir)?;
        let config = ctx.defaults.clone();
        let seg = match LogSegment::create(dir, 0, settings(&config)) {
            Ok(s) => s,
            Err(e) => {
                let _ = fs::remove_dir_all(dir);
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
        )?;
        log.checkpoints
            .set_recovery_point(&log.topic, log.partition, 0)?;
        log.checkpoints
            .set_log_start_offset(&log.topic, log.partition, 0)?;
        info!(
            "Created log for partition {} in {}",
            log.name,
            dir.display()
        );
        Ok(log)
    }

    /// Starts counting the active segment's stream bytes when they are known:
    /// an empty segment, or one whose length was saved at a clean close.
    fn init_tally(self: Arc<Self>) -> Arc<Self> {
        if let Some(active) = self.active_segment() {
            if active.size() == 0 {
                self.tally.start_segment(active.base_offset);
            } else if let Some(len) = self.stream.lock().known_len(active.base_offset) {
                self.tally.resume(active.base_offset, active.size(), len);
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

    pub fn status(&self) -> PartitionStatus {
        let segs = self.segments.read();
        PartitionStatus {
            log_start_offset: self.log_start_offset(),
            log_end_offset: self.log_end_offset(),
            recovery_point: self.recovery_point(),
            segments: segs.len(),
            size_bytes: segs.values().map(|s| s.size()).sum(),
            active_segment: segs.keys().last().copied().unwrap_or(0),
            lookup_bytes_read: self.lookup_bytes_read.load(Ordering::Relaxed),
            fsyncs: self.fsyncs.load(Ordering::Relaxed),
        }
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
        let value = value.trim_end_matches(['\n', '\r']);
        let _w = self.writer.lock();
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
        if self.defaults.get(name).is_none() {
            return Err(super::config::ConfigError::UnknownName(name.to_string()).into());
        }
        let _w = self.writer.lock();
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
    /// indexes) and refuses further appends.
    pub(crate) fn close(&self) -> Result<()> {
        let mut w = self.writer.lock();
        if w.closed {
            return Ok(());
        }
        w.closed = true;
        drop(w);
        if !self.writable {
            return Ok(());
        }
        self.flush()?;
        if let Some(active) = self.active_segment() {
            active.seal()?;
            // Saved so the next clean start knows the active segment's stream length.
            self.tally.sealed(active.base_offset, active.size());
            let segs = self.segment_list();
            let mut stream = self.stream.lock();
            stream.absorb(&self.tally);
            self.save_stream(&mut stream, &segs);
        }
        Ok(())
    }

    /// Closes the partition for good and removes its directory.
    pub(crate) fn delete(&self) -> Result<()> {
        self.writer.lock().closed = true;
        self.deleted.store(true, Ordering::Release);
        fs::remove_dir_all(&self.dir).at(&self.dir)?;
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
