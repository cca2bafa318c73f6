//! One partition (Kafka's `UnifiedLog`): what is appended and what is kept,
//! over its log on local disk (`local_log/`, Kafka's `LocalLog`), which
//! knows how.
//!
//! The partition owns what Kafka's `UnifiedLog` owns: the config (defaults,
//! overrides, the effective config), the log start offset, producer state
//! (a peer of the local log, `producer_state/`), and what commitfs adds: the
//! consumer stream with its append tally, the signal that wakes long polls,
//! and the partition's health. Every change goes down to the local log
//! under its writer lock ([`LogWriter`]), which the partition holds while it
//! changes its own state with the log's; nothing below calls back up.
//!
//! [`LogWriter`]: super::local_log::LogWriter

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use log::info;
use parking_lot::Mutex;

use super::append_signal::AppendSignal;
use super::checkpoint::Checkpoints;
use super::config::LogConfig;
use super::error::{Result, StorageError};
use super::health::Health;
use super::local_log::{DirContext, LocalLog, LogId, LogWriter, Rolled};
use super::producer_state::ProducerStateManager;
use super::stream::{AppendTally, Stream};

mod append;
mod compact;
mod encoded;
mod follow_writer;
mod load;
mod overrides;
mod produce;
mod read;
mod retention;
mod txn;

pub use append::AppendInfo;
pub use compact::{CleanerStatus, LastPass};
pub(crate) use compact::{Compactor, LastRecord};
pub use encoded::LEADER_EPOCH;
pub(crate) use follow_writer::Followed;
pub use overrides::PROPERTIES_FILE;
pub use produce::ProducedInfo;
pub use read::{FetchRead, Isolation};
pub use txn::TxnOutcome;

use overrides::PartitionConfig;

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

pub struct PartitionLog {
    /// The segments, the log end offset, the recovery point, and the writer lock.
    local: Arc<LocalLog>,
    config: PartitionConfig,
    log_start_offset: AtomicI64,
    /// Idempotent producers' state; changed under the writer lock only.
    producers: ProducerStateManager,
    /// The first offset of the oldest open transaction (`i64::MAX`: none),
    /// as readers may see it (see `txn.rs`).
    first_unstable: AtomicI64,
    stream: Mutex<Stream>,
    /// Stream bytes counted as they are appended, kept apart from the
    /// stream so an append never waits behind a stream read.
    tally: AppendTally,
    /// Raised once an append is published.
    appends: Arc<AppendSignal>,
    /// Online, or offline after a failure (fail-stop); shared with the
    /// local log and its segments.
    health: Arc<Health>,
    checkpoints: Arc<Checkpoints>,
    /// The data directory's log cleaner (a pass asked for runs through it).
    cleaner: Arc<dyn Compactor>,
    /// What the last pass of the log cleaner over it did.
    last_pass: Mutex<Option<LastPass>>,
}

/// How a partition is being opened.
pub(crate) struct LoadContext<'a> {
    pub defaults: &'a LogConfig,
    pub appends: &'a Arc<AppendSignal>,
    pub cleaner: Arc<dyn Compactor>,
    /// What its log on disk is opened with.
    pub log: DirContext<'a>,
}

impl PartitionLog {
    /// `<topic>-<partition>`.
    pub fn name(&self) -> &str {
        self.local.name()
    }

    /// The partition's local log, for what only reads it (where it is,
    /// its files, its offsets and timestamps) or flushes it: through it
    /// nothing is appended, truncated or deleted, since its writer and its
    /// segments are this crate's alone.
    pub fn local(&self) -> &LocalLog {
        &self.local
    }

    fn new_arc(
        local: Arc<LocalLog>,
        ctx: &LoadContext,
        config: PartitionConfig,
        log_start: i64,
        stream: Stream,
        health: Arc<Health>,
    ) -> Arc<PartitionLog> {
        let producers = ProducerStateManager::new(local.dir(), local.name(), local.writable());
        let log = Arc::new(PartitionLog {
            local,
            config,
            log_start_offset: AtomicI64::new(log_start),
            producers,
            first_unstable: AtomicI64::new(i64::MAX),
            stream: Mutex::new(stream),
            tally: AppendTally::default(),
            appends: ctx.appends.clone(),
            health,
            checkpoints: ctx.log.checkpoints.clone(),
            cleaner: ctx.cleaner.clone(),
            last_pass: Mutex::new(None),
        });
        log.init_tally();
        log
    }

    /// Creates a new, empty partition directory with its first segment and
    /// its checkpoint entries. All or nothing: a failure removes the
    /// directory again.
    pub(crate) fn create(dir: &Path, ctx: &LoadContext) -> Result<Arc<PartitionLog>> {
        let id = LogId::of(dir)?;
        let health = Arc::new(Health::new(&id.name));
        let config = PartitionConfig::defaults(ctx.defaults);
        let local = LocalLog::create(dir, &ctx.log, &config.current(), &health)?;
        let log = Self::new_arc(local, ctx, config, 0, Stream::load(dir, Some(0)), health);
        info!(
            "Created log for partition {} in {}",
            log.name(),
            dir.display()
        );
        Ok(log)
    }

    /// A partition whose load failed: listed, offline from the start (its
    /// health names the failure), with no segments.
    fn offline_placeholder(
        dir: &Path,
        ctx: &LoadContext,
        health: Arc<Health>,
    ) -> Result<Arc<PartitionLog>> {
        let local = LocalLog::offline(dir, &ctx.log, health.clone())?;
        let config = PartitionConfig::defaults(ctx.defaults);
        Ok(Self::new_arc(
            local,
            ctx,
            config,
            0,
            Stream::empty(),
            health,
        ))
    }

    /// `Offline` if an earlier failure took the partition offline.
    pub fn check_online(&self) -> Result<()> {
        self.health.check()
    }

    /// Why the partition is offline, if it is.
    pub fn offline_cause(&self) -> Option<String> {
        self.health.cause().map(str::to_string)
    }

    /// Starts counting the active segment's stream bytes when they are known:
    /// an empty segment, or one whose length was saved at a clean close.
    fn init_tally(&self) {
        let Some(active) = self.local.active_segment() else {
            return;
        };
        match active.known_size() {
            Some(0) => self.tally.start_segment(active.base_offset),
            Some(size) => {
                if let Some(len) = self.stream.lock().known_len(active.base_offset, size) {
                    self.tally.resume(active.base_offset, size, len);
                }
            }
            // Not known: the stream computes the length when asked.
            None => {}
        }
    }

    /// A roll, as the stream tally counts it.
    fn count_roll(&self, rolled: &Rolled) {
        self.tally
            .sealed(rolled.sealed, rolled.sealed_id, rolled.sealed_size);
        self.tally.start_segment(rolled.new_base);
    }

    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset.load(Ordering::Acquire)
    }
    pub fn log_end_offset(&self) -> i64 {
        self.local.log_end_offset()
    }

    /// What `status` shows. An offline partition's sizes are those known,
    /// read from no file.
    pub fn status(&self) -> Result<PartitionStatus> {
        let segs = self.local.segment_list();
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
            recovery_point: self.local.recovery_point(),
            segments: segs.len(),
            size_bytes,
            active_segment: segs.last().map_or(0, |s| s.base_offset),
            lookup_bytes_read: self.local.lookup_bytes_read(),
            fsyncs: self.local.fsyncs(),
            offline,
        })
    }

    /// Every segment's base offset, for checks and tools.
    pub fn segment_bases(&self) -> Vec<i64> {
        self.local.segment_bases()
    }

    /// Rolls the active segment. Rolling an empty active segment does nothing.
    pub fn roll(&self) -> Result<()> {
        if !self.local.writable() {
            return Err(StorageError::ReadOnly);
        }
        self.health.guard("a roll", || {
            let config = self.config();
            let mut w = self.local.writer()?;
            self.roll_locked(&mut w, &config)
        })
    }

    /// A roll outside an append, counted in the stream tally.
    fn roll_locked(&self, w: &mut LogWriter, config: &LogConfig) -> Result<()> {
        if let Some(rolled) = w.roll(config, &self.producers)? {
            self.count_roll(&rolled);
        }
        Ok(())
    }

    /// fsyncs every segment up to the log end offset, advances the recovery
    /// point, writes the checkpoint. A deleted partition (still held by an
    /// open handle) refuses: `NoSuchPartition`.
    pub fn flush(&self) -> Result<()> {
        self.local.flush()
    }

    /// Flushes when `flush.ms` has passed since the last flush.
    /// An offline partition is skipped: the failure was logged once.
    pub fn maybe_flush_on_time(&self, now_ms: i64) -> Result<()> {
        self.local.flush_on_time(now_ms, self.config().flush_ms)
    }

    /// Flushes, seals the active segment (final time index entry, trimmed
    /// indexes) and refuses further appends. An offline partition is left
    /// as it is, and its `Offline` error keeps the clean-shutdown marker
    /// from being written, so the next start recovers it.
    pub(crate) fn close(&self) -> Result<()> {
        let Some(mut w) = self.local.writer_if_open() else {
            return self.check_online();
        };
        w.close();
        if !self.local.writable() {
            return Ok(());
        }
        self.health.guard("the close", || self.close_now(&mut w))
    }

    fn close_now(&self, w: &mut LogWriter) -> Result<()> {
        self.local.flush()?;
        self.producers.take_snapshot(self.log_end_offset())?;
        if let Some((base, id, size)) = w.seal_active()? {
            // Saved so the next clean start knows the active segment's stream length.
            self.tally.sealed(base, id, size);
            let mut stream = self.stream.lock();
            stream.absorb(&self.tally);
            self.save_stream(&mut stream)?;
        }
        Ok(())
    }

    /// Closes the partition for good and removes its directory.
    pub(crate) fn delete(&self) -> Result<()> {
        self.check_online()?;
        self.local.delete()
    }
}
