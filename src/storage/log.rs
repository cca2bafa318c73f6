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
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use log::{error, info, warn};
use parking_lot::{Mutex, RwLock};

use super::checkpoint::{Checkpoints, write_atomically};
use super::config::{LogConfig, format_properties, parse_properties};
use super::error::{IoContext, Result, StorageError};
use super::names::{parse_partition_name, parse_segment_file_name, segment_file_name};
use super::segment::{IndexSettings, LogSegment, ReadBatch, SegmentSnapshot};
use super::stream::{AppendTally, STREAM_LENGTHS_FILE, Stream};
use crate::record::{NewRecord, Record, TimestampType, decode_record_at, encode_batch_compressed};

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

/// A record plus where it sits in the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordEntry {
    pub record: Record,
    pub batch_base_offset: i64,
    /// File position of the record's batch in its segment's `.log`.
    pub position: u64,
    pub segment_base_offset: i64,
    pub timestamp_type: TimestampType,
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    Log,
    Index,
    TimeIndex,
    /// Any other file Kafka keeps in a partition dir (`leader-epoch-checkpoint`, ...).
    Other,
}

/// A file in the partition directory, as the mount lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionFile {
    pub name: String,
    pub size: u64,
    pub kind: FileKind,
    pub mtime: SystemTime,
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

struct CachedBatch {
    segment_base_offset: i64,
    batch: ReadBatch,
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

    /// Loads a partition directory (Kafka's `LogLoader`).
    pub(crate) fn load(dir: &Path, ctx: &LoadContext) -> Result<Arc<PartitionLog>> {
        let name = dir
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        let (topic, partition) = parse_partition_name(&name)?;
        let overrides = read_overrides(dir);
        let config = effective_config(ctx.defaults, &overrides, &name);
        // One listing serves the whole load: a clean mount of many segments
        // costs a stat per segment and opens nothing.
        let mut names = list_dir(dir)?;
        if ctx.writable && remove_stray_files(dir, &names)? {
            names = list_dir(dir)?;
        }
        // Each name is parsed once: a partition may hold thousands of segments.
        let mut logs: Vec<(i64, String)> = Vec::new();
        let mut indexed = std::collections::HashSet::new();
        for name in names {
            match parse_segment_file_name(&name) {
                Some((base, "log")) => logs.push((base, name)),
                Some((base, "index")) => {
                    indexed.insert(base);
                }
                _ => {}
            }
        }
        logs.sort_unstable_by_key(|(base, _)| *base);
        let s = settings(&config);
        let mut segments = BTreeMap::new();
        for (base, name) in logs {
            let seg = LogSegment::open(dir.join(name), base, s, ctx.writable);
            segments.insert(base, Arc::new(seg));
        }
        if segments.is_empty() && ctx.writable {
            let start = ctx
                .checkpoints
                .log_start_offset(&topic, partition)
                .unwrap_or(0)
                .max(0);
            segments.insert(start, Arc::new(LogSegment::create(dir, start, s)?));
            indexed.insert(start);
        }
        // A missing index is rebuilt at load, as Kafka does (the rest load lazily).
        for seg in segments.values() {
            if !indexed.contains(&seg.base_offset) {
                drop(seg.indexes()?);
            }
        }
        let first_base = segments.keys().next().copied().unwrap_or(0);
        let mut log_start = ctx
            .checkpoints
            .log_start_offset(&topic, partition)
            .unwrap_or(first_base)
            .max(first_base);
        let mut recovery_point = ctx
            .checkpoints
            .recovery_point(&topic, partition)
            .unwrap_or(0);
        if let Some(active) = segments.values().last() {
            active.mark_active();
        }
        // Stream lengths of segments that recovery may change are recomputed.
        let mut invalid_from = None;
        if !ctx.clean_shutdown {
            invalid_from = Some(
                segments
                    .range(..=recovery_point)
                    .next_back()
                    .map_or(i64::MIN, |(b, _)| *b),
            );
            recover_segments(&name, &mut segments, recovery_point)?;
        }
        let stream = Stream::load(dir, invalid_from);
        let log_end = match segments.values().last() {
            Some(active) => {
                active.activate()?;
                active.read_next_offset()?
            }
            None => log_start,
        };
        log_start = log_start.min(log_end);
        recovery_point = recovery_point.min(log_end);
        if ctx.clean_shutdown {
            recovery_point = log_end;
        }
        let log = Self::new_arc(
            dir,
            ctx,
            overrides,
            config,
            segments,
            (log_start, log_end, recovery_point),
            stream,
        )?;
        info!(
            "Completed load of log {} with {} segments, local-log-start-offset {log_start} and log-end-offset {log_end}",
            log.name,
            log.segments.read().len()
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

    /// Record `offset`, found through the sparse index.
    /// `OffsetOutOfRange` outside [log start, LEO).
    pub fn read(&self, offset: i64) -> Result<Record> {
        self.read_entry(offset).map(|e| e.record)
    }

    /// Record `offset` with where it sits: its batch and file position.
    pub fn read_entry(&self, offset: i64) -> Result<RecordEntry> {
        let (start, end) = (self.log_start_offset(), self.log_end_offset());
        if offset < start || offset >= end {
            return Err(StorageError::OffsetOutOfRange {
                offset,
                log_start_offset: start,
                log_end_offset: end,
            });
        }
        let batch = self.batch_for(offset)?;
        // Control records (transaction markers) hold no user record.
        let cached = &batch.batch;
        if cached.header.is_control() {
            return Err(StorageError::RecordNotFound(offset));
        }
        let record = decode_record_at(&cached.header, cached.section(), offset)?
            .ok_or(StorageError::RecordNotFound(offset))?;
        Ok(RecordEntry {
            record,
            batch_base_offset: cached.header.base_offset,
            position: cached.position,
            segment_base_offset: batch.segment_base_offset,
            timestamp_type: cached.header.timestamp_type(),
        })
    }

    /// The batch holding `offset`. The last one is kept: `stat` then `cat` of
    /// `offset/N`, or a consumer walking offsets, reads it once, and each
    /// lookup decodes only the record it wants.
    fn batch_for(&self, offset: i64) -> Result<Arc<CachedBatch>> {
        if let Some(c) = self.recent_batch.lock().clone()
            && c.batch.header.base_offset <= offset
            && offset <= c.batch.header.last_offset()
        {
            return Ok(c);
        }
        let seg = self
            .segment_for(offset)
            .ok_or(StorageError::RecordNotFound(offset))?;
        let read = seg
            .read_batch_section(offset, &self.lookup_bytes_read)?
            .ok_or(StorageError::RecordNotFound(offset))?;
        let batch = Arc::new(CachedBatch {
            segment_base_offset: seg.base_offset,
            batch: read,
        });
        *self.recent_batch.lock() = Some(batch.clone());
        Ok(batch)
    }

    /// Length of the consumer stream (`value\n` per record from the log start).
    pub fn stream_len(&self) -> Result<u64> {
        let segs = self.segment_list();
        let mut stream = self.stream.lock();
        let len = stream.len(&segs, self.log_start_offset(), &self.tally)?;
        self.save_stream(&mut stream, &segs);
        Ok(len)
    }

    /// Reads the consumer stream at `pos`; returns the bytes copied.
    pub fn read_stream(&self, pos: u64, buf: &mut [u8]) -> Result<usize> {
        let segs = self.segment_list();
        let mut stream = self.stream.lock();
        let n = stream.read(&segs, self.log_start_offset(), pos, buf, &self.tally)?;
        self.save_stream(&mut stream, &segs);
        Ok(n)
    }

    fn save_stream(&self, stream: &mut Stream, segs: &[Arc<LogSegment>]) {
        if self.deleted.load(Ordering::Acquire) {
            return;
        }
        let live: Vec<i64> = segs.iter().map(|s| s.base_offset).collect();
        stream.save(&self.dir, &live, self.writable);
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
    /// A deleted partition (still held by an open handle) refuses: `NoSuchPartition`.
    pub fn flush(&self) -> Result<()> {
        if self.deleted.load(Ordering::Acquire) {
            return Err(StorageError::NoSuchPartition(self.name.clone()));
        }
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

    /// Segment files and Kafka side files, sorted by name, with live sizes.
    pub fn files(&self) -> Result<Vec<PartitionFile>> {
        let published: BTreeMap<i64, u64> = self
            .segments
            .read()
            .iter()
            .map(|(b, s)| (*b, s.size()))
            .collect();
        let mut out = Vec::new();
        for entry in fs::read_dir(&self.dir).at(&self.dir)? {
            let entry = entry.at(&self.dir)?;
            let Some(name) = entry.file_name().to_str().map(str::to_string) else {
                continue;
            };
            if is_hidden(&name) {
                continue;
            }
            let Ok(meta) = entry.metadata() else { continue };
            if !meta.is_file() {
                continue;
            }
            let (kind, size) = match parse_segment_file_name(&name) {
                Some((base, "log")) => (
                    FileKind::Log,
                    published.get(&base).copied().unwrap_or(meta.len()),
                ),
                Some((_, "index")) => (FileKind::Index, meta.len()),
                Some((_, "timeindex")) => (FileKind::TimeIndex, meta.len()),
                _ => (FileKind::Other, meta.len()),
            };
            out.push(PartitionFile {
                name,
                size,
                kind,
                mtime: meta.modified().unwrap_or(UNIX_EPOCH),
            });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Base offset of the active segment.
    pub fn active_segment_base(&self) -> Option<i64> {
        self.segments.read().keys().next_back().copied()
    }

    /// One file from [`PartitionLog::files`], without listing the directory.
    pub fn file(&self, name: &str) -> Result<PartitionFile> {
        let path = self.checked_name(name)?;
        let meta = match fs::metadata(&path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(StorageError::NoSuchFile(name.to_string()));
            }
            Err(e) => return Err(StorageError::io(&path, e)),
        };
        if !meta.is_file() {
            return Err(StorageError::NoSuchFile(name.to_string()));
        }
        let (kind, size) = match parse_segment_file_name(name) {
            Some((base, "log")) => (
                FileKind::Log,
                self.segments
                    .read()
                    .get(&base)
                    .map_or(meta.len(), |s| s.size()),
            ),
            Some((_, "index")) => (FileKind::Index, meta.len()),
            Some((_, "timeindex")) => (FileKind::TimeIndex, meta.len()),
            _ => (FileKind::Other, meta.len()),
        };
        Ok(PartitionFile {
            name: name.to_string(),
            size,
            kind,
            mtime: meta.modified().unwrap_or(UNIX_EPOCH),
        })
    }

    /// The path of a name that may be in the tree (not whether it exists).
    fn checked_name(&self, name: &str) -> Result<PathBuf> {
        if name.is_empty() || name.contains('/') || name == "." || name == ".." || is_hidden(name) {
            return Err(StorageError::NoSuchFile(name.to_string()));
        }
        Ok(self.dir.join(name))
    }

    fn file_path(&self, name: &str) -> Result<PathBuf> {
        let path = self.checked_name(name)?;
        if !path.is_file() {
            return Err(StorageError::NoSuchFile(name.to_string()));
        }
        Ok(path)
    }

    /// Positioned read of a file from [`PartitionLog::files`].
    pub fn read_file(&self, name: &str, offset: u64, buf: &mut [u8]) -> Result<usize> {
        if let Some((base, "log")) = parse_segment_file_name(name)
            && let Some(seg) = self.segments.read().get(&base).cloned()
        {
            // Only published bytes: never half a batch.
            let end = seg.size();
            if offset >= end {
                return Ok(0);
            }
            let want = buf.len().min((end - offset) as usize);
            return read_full_at(seg.log_file()?, &mut buf[..want], offset).at(seg.path());
        }
        let path = self.file_path(name)?;
        let f = File::open(&path).at(&path)?;
        read_full_at(&f, buf, offset).at(&path)
    }

    /// A read-only handle on a file from [`PartitionLog::files`] (for passthrough or mmap).
    pub fn open_file(&self, name: &str) -> Result<File> {
        let path = self.file_path(name)?;
        File::open(&path).at(&path)
    }

    pub fn config(&self) -> Arc<LogConfig> {
        self.config.read().clone()
    }

    /// The per-partition overrides (persisted in the partition directory).
    pub fn overrides(&self) -> BTreeMap<String, String> {
        self.overrides.lock().clone()
    }

    /// Validates, applies and persists one override. A closed or deleted
    /// partition refuses (`NoSuchPartition`): its directory may by now be a
    /// new partition's of the same name.
    pub fn set_config(&self, name: &str, value: &str) -> Result<()> {
        if !self.writable {
            return Err(StorageError::ReadOnly);
        }
        let value = value.trim_end_matches(['\n', '\r']);
        let w = self.writer.lock();
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

    /// Removes an override, so the mount-wide default applies again. A closed
    /// or deleted partition refuses (`NoSuchPartition`).
    pub fn reset_config(&self, name: &str) -> Result<()> {
        if !self.writable {
            return Err(StorageError::ReadOnly);
        }
        if self.defaults.get(name).is_none() {
            return Err(super::config::ConfigError::UnknownName(name.to_string()).into());
        }
        let w = self.writer.lock();
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

    /// Kafka's delete-records: the log start offset becomes `offset`, whole
    /// segments below it are deleted. Returns the new log start offset.
    /// A closed or deleted partition refuses (`NoSuchPartition`): its segment
    /// paths and checkpoint entry may by now be a new partition's.
    pub fn delete_records_before(&self, offset: i64) -> Result<i64> {
        if !self.writable {
            return Err(StorageError::ReadOnly);
        }
        let w = self.writer.lock();
        if w.closed {
            return Err(StorageError::NoSuchPartition(self.name.clone()));
        }
        let (start, end) = (self.log_start_offset(), self.log_end_offset());
        if offset < 0 || offset > end {
            return Err(StorageError::OffsetOutOfRange {
                offset,
                log_start_offset: start,
                log_end_offset: end,
            });
        }
        if offset <= start {
            return Ok(start);
        }
        self.log_start_offset.store(offset, Ordering::Release);
        self.checkpoints
            .set_log_start_offset(&self.topic, self.partition, offset)?;
        info!(
            "Incremented log start offset to {offset} of partition {} due to client delete records request",
            self.name
        );
        let doomed = self.take_prefix(|_, next| next.is_some_and(|n| n <= offset));
        drop(w);
        self.delete_segments(doomed, "log start offset breach");
        Ok(offset)
    }

    /// Removes from the map the longest prefix of sealed segments for which
    /// `pred(segment, next segment's base)` holds. Writer lock held by caller.
    fn take_prefix(
        &self,
        mut pred: impl FnMut(&LogSegment, Option<i64>) -> bool,
    ) -> Vec<Arc<LogSegment>> {
        let mut segs = self.segments.write();
        let bases: Vec<i64> = segs.keys().copied().collect();
        let mut doomed = Vec::new();
        for (i, base) in bases.iter().enumerate() {
            let Some(next) = bases.get(i + 1).copied() else {
                break; // never the active segment
            };
            if !pred(&segs[base], Some(next)) {
                break;
            }
            doomed.push(segs.remove(base).expect("present"));
        }
        if let Some(first) = segs.keys().next().copied()
            && first > self.log_start_offset()
        {
            self.log_start_offset.store(first, Ordering::Release);
        }
        doomed
    }

    fn delete_segments(&self, doomed: Vec<Arc<LogSegment>>, reason: &str) {
        for seg in &doomed {
            info!(
                "Deleting segment {} of partition {} due to {reason}",
                seg.base_offset, self.name
            );
            seg.delete_files();
        }
        if !doomed.is_empty()
            && let Err(e) = self.checkpoints.set_log_start_offset(
                &self.topic,
                self.partition,
                self.log_start_offset(),
            )
        {
            error!(
                "Could not write the log start offset checkpoint for {}: {e}",
                self.name
            );
        }
    }

    /// Applies the log start offset, retention.bytes and retention.ms (in
    /// Kafka's order); returns how many segments were deleted. Never deletes
    /// the active segment: when every segment qualifies, it rolls first.
    pub fn apply_retention(&self, now_ms: i64) -> Result<usize> {
        if !self.writable {
            return Ok(0);
        }
        let config = self.config();
        if config.retention_ms >= 0 {
            // Loading a sealed segment's time index is I/O: do it before taking
            // the lock appends wait on. A segment's largest timestamp never
            // changes once sealed, so the values stay good.
            for seg in self.segment_list() {
                let _ = seg.largest_timestamp();
            }
        }
        let w = self.writer.lock();
        if w.closed {
            return Ok(0);
        }
        let mut deleted = 0;
        let start = self.log_start_offset();
        let doomed = self.take_prefix(|_, next| next.is_some_and(|n| n <= start));
        deleted += doomed.len();
        self.delete_segments(doomed, "log start offset breach");

        if config.retention_bytes >= 0 {
            let total: u64 = self.segments.read().values().map(|s| s.size()).sum();
            let mut diff = total as i64 - config.retention_bytes;
            let all_qualify = {
                let segs = self.segments.read();
                let mut d = diff;
                segs.values().all(|s| {
                    let ok = d - s.size() as i64 >= 0;
                    d -= s.size() as i64;
                    ok
                })
            };
            if all_qualify {
                self.roll_now(&config)?;
            }
            let doomed = self.take_prefix(|s, _| {
                if diff - s.size() as i64 >= 0 {
                    diff -= s.size() as i64;
                    true
                } else {
                    false
                }
            });
            deleted += doomed.len();
            self.delete_segments(
                doomed,
                &format!("retention size {} breach", config.retention_bytes),
            );
        }

        if config.retention_ms >= 0 {
            let expired = |s: &LogSegment| {
                s.size() > 0
                    && s.largest_timestamp()
                        .is_ok_and(|t| now_ms - t > config.retention_ms)
            };
            let all_qualify = self.segments.read().values().all(|s| expired(s));
            if all_qualify {
                self.roll_now(&config)?;
            }
            let doomed = self.take_prefix(|s, _| expired(s));
            deleted += doomed.len();
            self.delete_segments(
                doomed,
                &format!("retention time {}ms breach", config.retention_ms),
            );
        }
        drop(w);
        Ok(deleted)
    }

    /// Kafka's offsetsForTimes: the first offset whose timestamp is >= `timestamp_ms`.
    pub fn offset_for_timestamp(&self, timestamp_ms: i64) -> Result<Option<i64>> {
        let start = self.log_start_offset();
        for seg in self.segment_list() {
            if seg.size() == 0 || seg.largest_timestamp()? < timestamp_ms {
                continue;
            }
            if let Some(o) = seg.find_offset_by_timestamp(timestamp_ms, start)? {
                return Ok(Some(o));
            }
        }
        Ok(None)
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

fn read_full_at(f: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match f.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// Files of ours and transient files that the tree does not show.
fn is_hidden(name: &str) -> bool {
    name == PROPERTIES_FILE
        || name == STREAM_LENGTHS_FILE
        || name.ends_with(".tmp")
        || name.starts_with('.')
}

fn read_overrides(dir: &Path) -> BTreeMap<String, String> {
    fs::read_to_string(dir.join(PROPERTIES_FILE))
        .map(|t| parse_properties(&t))
        .unwrap_or_default()
}

/// Applies each persisted override that is still valid; a bad one is logged and skipped.
fn effective_config(
    defaults: &LogConfig,
    overrides: &BTreeMap<String, String>,
    name: &str,
) -> LogConfig {
    let mut config = defaults.clone();
    for (k, v) in overrides {
        if let Err(e) = config.set(k, v) {
            warn!("Ignoring config override of partition {name}: {e}");
        }
    }
    config
}

/// Kafka's `LogLoader.removeTempFilesAndCollectSwapFiles`: drop `.deleted`,
/// `.cleaned` and `.tmp` files, finish `.swap` renames, and delete index files
/// whose `.log` is gone.
fn remove_stray_files(dir: &Path, names: &[String]) -> Result<bool> {
    let mut changed = false;
    // Bases that have a `.log`, or one about to be completed from `.log.swap`.
    let mut logs = std::collections::HashSet::new();
    for name in names {
        if let Some((base, "log" | "log.swap")) = parse_segment_file_name(name) {
            logs.insert(base);
        }
    }
    for name in names {
        let path = dir.join(name);
        if name.ends_with(".deleted") || name.ends_with(".cleaned") || name.ends_with(".tmp") {
            info!("Deleting stray temporary file {}", path.display());
            fs::remove_file(&path).at(&path)?;
            changed = true;
        } else if let Some(real) = name.strip_suffix(".swap") {
            info!("Completing swap of {}", path.display());
            let target = dir.join(real);
            fs::rename(&path, &target).at(&target)?;
            if let Some((base, "log")) = parse_segment_file_name(real) {
                for suffix in ["index", "timeindex"] {
                    let _ = fs::remove_file(dir.join(segment_file_name(base, suffix)));
                }
            }
            changed = true;
        } else if let Some((base, "index" | "timeindex")) = parse_segment_file_name(name)
            && !logs.contains(&base)
        {
            info!("Deleting index file {} with no log file", path.display());
            fs::remove_file(&path).at(&path)?;
            changed = true;
        }
    }
    Ok(changed)
}

fn list_dir(dir: &Path) -> Result<Vec<String>> {
    Ok(fs::read_dir(dir)
        .at(dir)?
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect())
}

/// Kafka's unclean-shutdown recovery: every segment from the one holding the
/// recovery point onward is validated and re-indexed; after a truncation,
/// every later segment is deleted.
fn recover_segments(
    name: &str,
    segments: &mut BTreeMap<i64, Arc<LogSegment>>,
    recovery_point: i64,
) -> Result<()> {
    let first = segments
        .range(..=recovery_point)
        .next_back()
        .map(|(b, _)| *b)
        .unwrap_or(i64::MIN);
    let bases: Vec<i64> = segments.range(first..).map(|(b, _)| *b).collect();
    let mut min_offset = segments
        .range(..first)
        .next_back()
        .map_or(i64::MIN, |(_, s)| s.base_offset);
    let mut truncated_at: Option<usize> = None;
    for (i, base) in bases.iter().enumerate() {
        let seg = &segments[base];
        info!(
            "Recovering unflushed segment {base}. {i}/{} recovered for {name}.",
            bases.len()
        );
        let result = seg.recover(min_offset)?;
        if result.truncated_bytes > 0 {
            warn!(
                "Found invalid messages in log segment {} at byte offset {}: truncated {} bytes during recovery of {name}",
                seg.path().display(),
                seg.size(),
                result.truncated_bytes
            );
            truncated_at = Some(i);
            break;
        }
        min_offset = result.next_offset.unwrap_or(*base);
    }
    if let Some(i) = truncated_at {
        for base in &bases[i + 1..] {
            let seg = segments.remove(base).expect("present");
            warn!(
                "Deleting segment {} of {name} as it comes after a truncated segment",
                seg.base_offset
            );
            seg.delete_files();
        }
    }
    // An emptied segment after the first is dropped, so the active one holds the log end.
    while segments.len() > 1 {
        let (&base, last) = segments.iter().next_back().expect("non-empty");
        if last.size() > 0 {
            break;
        }
        let seg = segments.remove(&base).expect("present");
        seg.delete_files();
    }
    if let Some(active) = segments.values().last() {
        active.mark_active();
        if active.size() == 0 && active.base_offset > 0 {
            // Kafka recreates the active segment's indexes preallocated.
            drop(active.indexes()?);
        }
    }
    Ok(())
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
