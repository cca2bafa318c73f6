//! One partition's log: the segments, the log start and end offsets, the
//! recovery point, and the single writer lock (Kafka's `UnifiedLog` and
//! `LocalLog` in one).
//!
//! Appends, rolls, retention and config changes take the writer lock. Reads
//! take no partition lock beyond a short look at the segment map: a segment
//! only ever exposes bytes below its published size, and the log end offset
//! is published after the batch is indexed.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use log::{error, info, warn};
use parking_lot::{Mutex, RwLock};

use super::checkpoint::{Checkpoints, write_atomically};
use super::config::{LogConfig, format_properties};
use super::error::{IoContext, Result, StorageError};
use super::names::parse_partition_name;
use super::segment::{IndexSettings, LogSegment, SegmentSnapshot};
use super::stream::{AppendTally, STREAM_LENGTHS_FILE, Stream};
use crate::record::{NewRecord, encode_batch_compressed};

mod files;
mod loader;
mod read;
mod retention;

pub use files::{FileKind, PartitionFile};
use read::CachedBatch;
pub use read::RecordEntry;

/// Per-partition config overrides, in Java properties format.
pub const PROPERTIES_FILE: &str = "commitfs.properties";

/// Where an append landed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppendInfo {
    pub first_offset: i64,
    pub last_offset: i64,
    /// How many batches the records were packed into.
    pub batches: usize,
    /// Bytes added to the log.
    pub bytes: u64,
}

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

/// What an append has written so far.
struct Written {
    /// Segments it wrote to, the first being the one active at its start.
    segments: Vec<Arc<LogSegment>>,
    /// Segments it sealed by rolling.
    sealed: Vec<Arc<LogSegment>>,
    next_offset: i64,
    bytes: u64,
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

    /// Appends `records` at the log end offset, packed in order into the fewest
    /// batches that each fit `max.message.bytes`. All or nothing: a record that
    /// fits no batch fails the whole call with `RecordTooLarge` before anything
    /// is written. Returns once the bytes are in the segment file (page cache).
    pub fn append(&self, records: &[NewRecord]) -> Result<AppendInfo> {
        if records.is_empty() {
            return Err(StorageError::EmptyAppend);
        }
        if !self.writable {
            return Err(StorageError::ReadOnly);
        }
        let config = self.config();
        let groups = pack_batches(records, &config)?;
        let timestamp = now_ms();
        let mut w = self.writer.lock();
        if w.closed {
            return Err(StorageError::NoSuchPartition(self.name.clone()));
        }
        // All or nothing: batches are written unpublished and become visible
        // together; if one fails, the ones before it are cut away again.
        let first_offset = self.log_end_offset.load(Ordering::Acquire);
        let first_segment = self
            .active_segment()
            .expect("a writable log has an active segment");
        let snapshot = first_segment.snapshot()?;
        let mut written = Written {
            segments: vec![first_segment.clone()],
            sealed: Vec::new(),
            next_offset: first_offset,
            bytes: 0,
        };
        let result = self.write_batches(&mut w, &config, records, &groups, timestamp, &mut written);
        if let Err(e) = result {
            self.undo_append(&first_segment, &snapshot, &written);
            return Err(e);
        }
        for seg in &written.segments {
            seg.publish();
        }
        self.log_end_offset
            .store(written.next_offset, Ordering::Release);
        drop(w);
        for sealed in &written.sealed {
            sealed.unload_indexes();
        }
        if let Some(last_sealed) = written.segments.last()
            && written.segments.len() > 1
        {
            self.schedule_flush(last_sealed.base_offset);
        }
        let last_offset = written.next_offset - 1;
        if last_offset + 1 - self.recovery_point() >= config.flush_messages {
            self.flush()?;
        }
        Ok(AppendInfo {
            first_offset,
            last_offset,
            batches: groups.len(),
            bytes: written.bytes,
        })
    }

    /// Encodes and writes each batch of an append, rolling where Kafka would.
    fn write_batches(
        &self,
        w: &mut Writer,
        config: &LogConfig,
        records: &[NewRecord],
        groups: &[std::ops::Range<usize>],
        timestamp: i64,
        written: &mut Written,
    ) -> Result<()> {
        let codec = config.compression_type.codec();
        for range in groups {
            let base = written.next_offset;
            let recs = &records[range.clone()];
            let last = base + recs.len() as i64 - 1;
            w.buf.clear();
            encode_batch_compressed(&mut w.buf, base, timestamp, recs, codec);
            if let Some(sealed) =
                self.maybe_roll(config, w.buf.len() as u64, timestamp, last, base)?
            {
                written.sealed.push(sealed);
                written
                    .segments
                    .push(self.active_segment().expect("just rolled"));
            }
            let seg = self
                .active_segment()
                .expect("a writable log has an active segment");
            let pos = seg.write_pos();
            seg.append(&w.buf)?;
            let stream_bytes: u64 = recs
                .iter()
                .map(|r| r.value.map_or(0, |v| v.len() as u64) + 1)
                .sum();
            self.tally
                .appended(seg.base_offset, pos, w.buf.len() as u64, stream_bytes);
            written.bytes += w.buf.len() as u64;
            written.next_offset = last + 1;
        }
        Ok(())
    }

    /// Removes every trace of a failed append: segments it rolled to are
    /// deleted, the first one is cut back and made active again.
    fn undo_append(&self, first: &Arc<LogSegment>, snapshot: &SegmentSnapshot, written: &Written) {
        for seg in &written.segments[1..] {
            self.segments.write().remove(&seg.base_offset);
            seg.delete_files();
        }
        if let Err(e) = first.rollback(snapshot) {
            error!(
                "Could not undo a failed append to {}: {e}; the unpublished bytes stay past the log end until recovery",
                first.path().display()
            );
        }
        self.tally.forget();
        warn!(
            "Append to {} failed; nothing of it was kept (log end offset stays {})",
            self.name,
            self.log_end_offset()
        );
    }

    /// Kafka's `maybeRoll`, called with the writer lock held. Returns the
    /// segment it sealed, if it rolled.
    fn maybe_roll(
        &self,
        config: &LogConfig,
        batch_size: u64,
        max_timestamp: i64,
        last_offset: i64,
        new_base: i64,
    ) -> Result<Option<Arc<LogSegment>>> {
        let active = self.active_segment().expect("active segment");
        if active.write_pos() == 0 {
            return Ok(None);
        }
        let segment_ms = config.segment_ms.saturating_sub(config.segment_jitter_ms);
        if active.should_roll(
            batch_size,
            max_timestamp,
            config.segment_bytes as u64,
            segment_ms,
        )? || !active.can_convert_to_relative(last_offset)
        {
            return self.roll_locked(config, new_base);
        }
        Ok(None)
    }

    /// Rolls the active segment. Rolling an empty active segment does nothing.
    pub fn roll(&self) -> Result<()> {
        if !self.writable {
            return Err(StorageError::ReadOnly);
        }
        let config = self.config();
        let w = self.writer.lock();
        if w.closed {
            return Err(StorageError::NoSuchPartition(self.name.clone()));
        }
        self.roll_now(&config)
    }

    /// A roll outside an append: at the log end, with nothing unpublished.
    fn roll_now(&self, config: &LogConfig) -> Result<()> {
        let new_base = self.log_end_offset();
        if let Some(sealed) = self.roll_locked(config, new_base)? {
            sealed.unload_indexes();
            self.schedule_flush(new_base);
        }
        Ok(())
    }

    /// Seals the active segment and starts one at `new_base`. The caller
    /// unloads the sealed segment's indexes and schedules its flush once
    /// what it wrote is published.
    fn roll_locked(&self, config: &LogConfig, new_base: i64) -> Result<Option<Arc<LogSegment>>> {
        let started = Instant::now();
        let active = self.active_segment().expect("active segment");
        if active.write_pos() == 0 {
            return Ok(None);
        }
        // Create first: if the disk is full the old segment stays active, untouched.
        let segment = Arc::new(LogSegment::create(&self.dir, new_base, settings(config))?);
        active.seal()?;
        self.tally.sealed(active.base_offset, active.write_pos());
        self.tally.start_segment(new_base);
        self.segments.write().insert(new_base, segment);
        info!(
            "[Log partition={}, dir={}] Rolled new log segment at offset {new_base} in {} ms.",
            self.name,
            self.dir.parent().unwrap_or(&self.dir).display(),
            started.elapsed().as_millis()
        );
        Ok(Some(active))
    }

    /// Kafka flushes a sealed segment asynchronously, advancing the recovery point.
    fn schedule_flush(&self, up_to: i64) {
        let me = self.self_ref.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("flush-{}", self.name))
            .spawn(move || {
                if let Some(log) = me.upgrade()
                    && !log.deleted.load(Ordering::Acquire)
                    && let Err(e) = log.flush_up_to(up_to)
                {
                    error!("Error flushing {} after roll: {e}", log.name);
                }
            });
        if let Err(e) = spawned {
            warn!(
                "Could not start the flush after roll of {}: {e}; it runs at the next flush",
                self.name
            );
        }
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

    /// fsyncs every segment up to the LEO, advances the recovery point, writes the checkpoint.
    pub fn flush(&self) -> Result<()> {
        self.flush_up_to(self.log_end_offset())
    }

    fn flush_up_to(&self, offset: i64) -> Result<()> {
        if !self.writable {
            return Ok(());
        }
        let _f = self.flush_lock.lock();
        let segs: Vec<_> = self
            .segments
            .read()
            .range(..offset)
            .map(|(_, s)| s.clone())
            .collect();
        for seg in segs {
            if seg.flush()? {
                self.fsyncs.fetch_add(1, Ordering::Relaxed);
            }
        }
        // New segment files are durable only once the directory entry is.
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .at(&self.dir)?;
        self.last_flush_ms.store(now_ms(), Ordering::Relaxed);
        if offset > self.recovery_point() {
            self.recovery_point.fetch_max(offset, Ordering::AcqRel);
            if !self.deleted.load(Ordering::Acquire) {
                self.checkpoints.set_recovery_point(
                    &self.topic,
                    self.partition,
                    self.recovery_point(),
                )?;
            }
        }
        Ok(())
    }

    /// Flushes when `flush.ms` has passed since the last flush.
    pub fn maybe_flush_on_time(&self, now_ms: i64) -> Result<()> {
        let flush_ms = self.config().flush_ms;
        if flush_ms == i64::MAX || self.log_end_offset() == self.recovery_point() {
            return Ok(());
        }
        if now_ms - self.last_flush_ms.load(Ordering::Relaxed) >= flush_ms {
            self.flush()?;
        }
        Ok(())
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

/// Files of ours and transient files that the tree does not show.
fn is_hidden(name: &str) -> bool {
    name == PROPERTIES_FILE
        || name == STREAM_LENGTHS_FILE
        || name.ends_with(".tmp")
        || name.starts_with('.')
}

/// Splits records, in order, into the fewest batches that each fit
/// `max.message.bytes` (greedy packing is optimal for contiguous groups).
fn pack_batches(records: &[NewRecord], config: &LogConfig) -> Result<Vec<std::ops::Range<usize>>> {
    let max = config.max_message_bytes.max(0) as usize;
    let segment_bytes = config.segment_bytes as usize;
    let mut groups = Vec::with_capacity(1);
    let mut start = 0;
    let mut size = crate::record::HEADER_LEN;
    let check_segment = |size: usize| {
        if size > segment_bytes {
            return Err(StorageError::BatchLargerThanSegment {
                size,
                max: segment_bytes,
            });
        }
        Ok(())
    };
    for (i, r) in records.iter().enumerate() {
        let add = r.encoded_size((i - start) as i32);
        if i > start && size + add > max {
            check_segment(size)?;
            groups.push(start..i);
            start = i;
            size = crate::record::HEADER_LEN + r.encoded_size(0);
        } else {
            size += add;
        }
        if i == start && size > max {
            return Err(StorageError::RecordTooLarge { size, max });
        }
    }
    check_segment(size)?;
    groups.push(start..records.len());
    Ok(groups)
}
