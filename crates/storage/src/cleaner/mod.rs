//! Log compaction (Kafka's `LogCleaner`): `log.cleaner.threads` jobs of
//! the data directory's scheduler (`kafka-log-cleaner-thread-N`), each
//! cleaning the dirtiest compacted log in turn, waiting
//! `log.cleaner.backoff.ms` when none needs it, and applying retention to
//! compacted logs (which the scheduler's retention check leaves to them).
//!
//! - `manager.rs` (Kafka's `LogCleanerManager`): which log, in what state,
//!   and the checkpoint of each log's first dirty offset;
//! - `offset_map.rs` (`SkimpyOffsetMap`): key hash → latest offset, in a
//!   fixed buffer;
//! - `clean.rs` (`Cleaner`): one pass: the map, the groups, the copy, the swap;
//! - `read_ahead.rs`: the map's dirty section read and hashed on a thread
//!   of its own, ahead of the puts;
//! - `filter.rs`, `txn.rs`: what a batch and a record keep;
//! - `cleaned.rs`: the `.cleaned` files a group is written to;
//! - `stats.rs`, `throttle.rs`: the summary each pass logs; the I/O limit.
//!
//! A pass can also be asked for one partition at once (the tree's
//! `compact` file): it runs on the asking thread, with a map of its own.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use log::{error, info, warn};
use parking_lot::Mutex;

mod clean;
mod cleaned;
mod cleaner_config;
mod filter;
mod manager;
mod offset_map;
mod read_ahead;
mod stats;
#[cfg(test)]
mod tests;
mod throttle;
mod txn;

pub use cleaner_config::{CLEANER_CONFIG_NAMES, CleanerConfig, TOPIC_SYNONYMS};
pub use offset_map::OffsetMap;
pub use read_ahead::Sharing;
pub use stats::CleanerStats;

use clean::Cleaner;
pub(crate) use manager::{
    CleanerManager, LogToClean, cleanable_offsets, log_to_clean, max_compaction_delay,
};
use throttle::Throttler;

use crate::error::{Result, StorageError};
use crate::now_ms;
pub use crate::partition::LastPass;
use crate::partition::{Compactor, PartitionLog};
use crate::scheduler::{Pace, Scheduler};

/// The partitions a cleaner thread looks at, as the data directory has them.
pub(crate) type LogPool = Arc<dyn Fn() -> Vec<Arc<PartitionLog>> + Send + Sync>;

/// What the cleaner threads have done so far, for whoever waits on them
/// (a test, say): counters that only grow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CleanerCounters {
    /// Rounds the threads ended: each one pick (and maybe a pass), then
    /// retention over every compacted log not busy.
    pub rounds: u64,
    /// Passes a partition's deletion aborted while they ran (their
    /// checkpoint not written).
    pub passes_aborted: u64,
}

/// What every cleaner thread, and a pass asked for, share.
pub(crate) struct CleanerCore {
    pub config: CleanerConfig,
    pub manager: CleanerManager,
    throttler: Throttler,
    stopping: AtomicBool,
    /// The offset map of passes asked for at once, made at the first one.
    asked_map: Mutex<Option<OffsetMap>>,
    rounds: AtomicU64,
}

impl CleanerCore {
    pub fn new(config: CleanerConfig) -> Arc<CleanerCore> {
        Arc::new(CleanerCore {
            throttler: Throttler::new(config.io_max_bytes_per_second),
            config,
            manager: CleanerManager::default(),
            stopping: AtomicBool::new(false),
            asked_map: Mutex::new(None),
            rounds: AtomicU64::new(0),
        })
    }

    pub fn counters(&self) -> CleanerCounters {
        CleanerCounters {
            rounds: self.rounds.load(Ordering::Acquire),
            passes_aborted: self.manager.passes_aborted(),
        }
    }

    fn check_done(&self, name: &str) -> Result<()> {
        if self.stopping.load(Ordering::Acquire) {
            return Err(StorageError::CleaningAborted(name.to_string()));
        }
        self.manager.check_aborted(name)
    }

    /// Kafka's `grabFilthiestCompactedLog`, marking the winner in progress.
    fn grab_filthiest(&self, logs: &[Arc<PartitionLog>], now: i64) -> Option<LogToClean> {
        let mut candidates = Vec::new();
        for log in logs {
            if !log.cleanable_now() || !self.manager.is_free(log.name()) {
                continue;
            }
            match candidate(log, now) {
                Ok(Some(ltc)) => candidates.push(ltc),
                Ok(None) => {}
                Err(e) => {
                    warn!(
                        "Failed to calculate log cleaning stats for partition {}: {e}",
                        log.name()
                    );
                    self.manager.mark_uncleanable(log.name());
                }
            }
        }
        let min_ratio = |l: &LogToClean| l.log.config().min_cleanable_dirty_ratio.0;
        let best = candidates
            .into_iter()
            .filter(|l| {
                (l.needs_compaction_now && l.cleanable_bytes > 0)
                    || l.cleanable_ratio() > min_ratio(l)
            })
            .max_by(|a, b| a.cleanable_ratio().total_cmp(&b.cleanable_ratio()))?;
        self.manager.try_begin(best.log.name()).then_some(best)
    }

    /// One pass over `ltc` (marked in progress), its checkpoint written
    /// unless it was aborted. Returns the pass's figures when it ran whole.
    fn run_pass(
        &self,
        id: usize,
        map: &mut OffsetMap,
        ltc: &LogToClean,
    ) -> Result<Option<LastPass>> {
        let log = &ltc.log;
        let name = log.name().to_string();
        let check = || self.check_done(&name);
        let mut cleaner = Cleaner::new(id, map, &self.config, &self.throttler, &check);
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            cleaner.clean(ltc, now_ms())
        }))
        .unwrap_or_else(|_| Err(clean::panicked(log)));
        let end = match &result {
            Ok((end, _)) => *end,
            Err(_) => ltc.first_dirty_offset,
        };
        if self.manager.done_pass(&name) && !log.is_gone() {
            log.set_cleaner_checkpoint(end)?;
        }
        let (end, stats) = match result {
            Ok(r) => r,
            Err(StorageError::CleaningAborted(_) | StorageError::SegmentsChanged(_)) => {
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        info!("{}", stats.summary(id, &name, ltc.first_dirty_offset, end));
        if stats.invalid_messages_read > 0 {
            warn!(
                "\tFound {} invalid messages during compaction.",
                stats.invalid_messages_read
            );
        }
        let pass = LastPass {
            ended_ms: now_ms(),
            first_dirty_offset: ltc.first_dirty_offset,
            end_offset: end,
            bytes_read: stats.bytes_read,
            bytes_written: stats.bytes_written,
            messages_read: stats.messages_read,
            messages_written: stats.messages_written,
            elapsed_secs: stats.elapsed_secs(),
        };
        log.record_pass(pass.clone());
        Ok(Some(pass))
    }

    /// A failed pass: an I/O failure has taken the partition offline
    /// already; anything else makes it uncleanable (Kafka's
    /// `LogCleaningException`), until it is deleted.
    fn pass_failed(&self, log: &PartitionLog, e: &StorageError) {
        if log.offline_cause().is_some() {
            error!("Failed to clean up log for {} due to {e}", log.name());
        } else {
            warn!(
                "Unexpected exception thrown when cleaning log {}. Marking its partition ({}) as uncleanable: {e}",
                log.name(),
                log.name()
            );
            self.manager.mark_uncleanable(log.name());
        }
    }

    /// Kafka's `cleanFilthiestLog`: cleans one log if one needs it, then
    /// applies retention to every compacted log not busy. Whether a log was cleaned.
    fn clean_filthiest(
        &self,
        id: usize,
        map: &mut Option<OffsetMap>,
        logs: &[Arc<PartitionLog>],
    ) -> bool {
        let now = now_ms();
        let cleaned = match self.grab_filthiest(logs, now) {
            None => false,
            Some(ltc) => {
                // Made at the first pass: a daemon with no compacted log
                // never maps the dedupe buffer.
                let map = map.get_or_insert_with(|| OffsetMap::new(self.config.map_memory()));
                if let Err(e) = self.run_pass(id, map, &ltc) {
                    self.pass_failed(&ltc.log, &e);
                }
                true
            }
        };
        for log in logs.iter().filter(|l| l.cleanable_now()) {
            if self.manager.try_begin(log.name()) {
                if let Err(e) = log.apply_retention(now) {
                    error!("Retention of {} failed: {e}", log.name());
                }
                self.manager.done(log.name());
            }
        }
        self.rounds.fetch_add(1, Ordering::AcqRel);
        cleaned
    }

    /// A pass over `log` now, whatever its dirty ratio (the tree's
    /// `compact`): waits for a pass already running on it, then cleans
    /// what is cleanable. `None` when nothing was.
    pub fn clean_now(&self, log: &Arc<PartitionLog>) -> Result<Option<LastPass>> {
        let config = log.config();
        if !config.cleanup_policy.compact() {
            return Err(StorageError::NotCompacted(
                log.name().to_string(),
                config.cleanup_policy.text(),
            ));
        }
        while !self.manager.try_begin(log.name()) {
            if self.manager.is_uncleanable(log.name()) {
                // Asked for by hand: a try again, as after a remount.
                self.manager.forget(log.name());
                continue;
            }
            log.check_live()?;
            std::thread::sleep(Duration::from_millis(10));
        }
        let ltc = match candidate(log, now_ms()) {
            Ok(Some(ltc)) if ltc.cleanable_bytes > 0 => ltc,
            Ok(_) => {
                self.manager.done(log.name());
                return Ok(None);
            }
            Err(e) => {
                self.manager.done(log.name());
                return Err(e);
            }
        };
        let mut slot = self.asked_map.lock();
        let map = slot.get_or_insert_with(|| OffsetMap::new(self.config.map_memory()));
        let threads = self.config.threads.max(0) as usize;
        let pass = self.run_pass(threads, map, &ltc);
        if let Err(e) = &pass {
            self.pass_failed(log, e);
        }
        pass
    }
}

impl Compactor for CleanerCore {
    fn clean_now(&self, log: &Arc<PartitionLog>) -> Result<Option<LastPass>> {
        CleanerCore::clean_now(self, log)
    }

    fn dirty_ratio(&self, log: &Arc<PartitionLog>, checkpoint: Option<i64>) -> Result<f64> {
        let offsets = cleanable_offsets(log, checkpoint, now_ms())?;
        let ltc = log_to_clean(
            log,
            offsets.first_dirty_offset,
            offsets.first_uncleanable_dirty_offset,
            false,
        )?;
        Ok(if ltc.total_bytes == 0 {
            0.0
        } else {
            ltc.cleanable_ratio()
        })
    }

    fn is_uncleanable(&self, name: &str) -> bool {
        self.manager.is_uncleanable(name)
    }
}

/// The log's cleanable range, its checkpoint written again where it no
/// longer fits the log; `None` for an empty log.
fn candidate(log: &Arc<PartitionLog>, now: i64) -> Result<Option<LogToClean>> {
    let offsets = cleanable_offsets(log, log.cleaner_checkpoint(), now)?;
    if offsets.force_update_checkpoint {
        log.set_cleaner_checkpoint(offsets.first_dirty_offset)?;
    }
    let delay = max_compaction_delay(log, offsets.first_dirty_offset, now)?;
    let ltc = log_to_clean(
        log,
        offsets.first_dirty_offset,
        offsets.first_uncleanable_dirty_offset,
        delay > 0,
    )?;
    Ok((ltc.total_bytes > 0).then_some(ltc))
}

/// The cleaner's jobs (Kafka's `LogCleaner` threads), started with the
/// data directory and stopped with its scheduler.
///
/// A round is a job rather than a thread's loop, so that the cleaner's
/// wake-ups are the scheduler's and one stop ends them with every other
/// job; a pass under way is long, so the stop first tells it to give up
/// (its `.cleaned` files are removed, the log stays as it was).
pub(crate) struct LogCleaner;

impl LogCleaner {
    /// Schedules `log.cleaner.threads` jobs over `logs` (none when the
    /// cleaner is disabled).
    pub fn start(core: &Arc<CleanerCore>, logs: LogPool, scheduler: &Scheduler) {
        let threads = core.config.threads.max(0) as usize;
        if !core.config.enable || threads == 0 {
            return;
        }
        info!("Starting the log cleaner");
        let stopping = core.clone();
        scheduler.on_stop(move || {
            info!("Shutting down the log cleaner.");
            stopping.stopping.store(true, Ordering::Release);
        });
        let backoff = Duration::from_millis(core.config.backoff_ms.max(0) as u64);
        for id in 0..threads {
            let (core, logs) = (core.clone(), logs.clone());
            let mut map: Option<OffsetMap> = None;
            let round = move || match run_round(&core, id, &mut map, &logs) {
                true => Pace::Now,
                false => Pace::Period,
            };
            let name = format!("kafka-log-cleaner-thread-{id}");
            if let Err(e) = scheduler.schedule_paced(&name, Duration::ZERO, backoff, round) {
                error!("Could not start log cleaner thread {id}: {e}");
            }
        }
    }
}

/// One round of a cleaner job; whether it cleaned a log (then the next
/// round need not back off).
fn run_round(core: &CleanerCore, id: usize, map: &mut Option<OffsetMap>, logs: &LogPool) -> bool {
    if core.stopping.load(Ordering::Acquire) {
        return false;
    }
    let pool = logs();
    let cleaned = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        core.clean_filthiest(id, map, &pool)
    }))
    .unwrap_or_else(|_| {
        error!("Log cleaner thread {id}: a pass panicked");
        false
    });
    let live = pool.iter().map(|l| l.name().to_string()).collect();
    core.manager.keep_uncleanable(&live);
    cleaned
}
