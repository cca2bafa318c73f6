//! The data directory's timed duties (Kafka's `LogManager.startup`):
//! retention every `log.retention.check.interval.ms`
//! (`kafka-log-retention`), the `flush.ms` check (`kafka-log-flusher`) and
//! the log cleaner's rounds, all jobs of the directory's [`Scheduler`],
//! started by the open and stopped first at the close.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use log::error;
use parking_lot::RwLock;

use crate::cleaner::{CleanerCore, LogCleaner, LogPool};
use crate::error::Result;
use crate::now_ms;
use crate::partition::PartitionLog;
use crate::scheduler::Scheduler;

/// Kafka's default `log.retention.check.interval.ms`.
pub const DEFAULT_RETENTION_CHECK: Duration = Duration::from_millis(300_000);
/// How often the `flush.ms` of every partition is looked at.
pub const DEFAULT_FLUSH_CHECK: Duration = Duration::from_millis(500);
/// Kafka's `background.threads`: the scheduler's workers, besides one per
/// cleaner job (a cleaning pass holds its worker for long).
const BACKGROUND_THREADS: usize = 10;

/// Retention's job (Kafka's).
pub const RETENTION_JOB: &str = "kafka-log-retention";
/// The `flush.ms` job (Kafka's).
pub const FLUSH_JOB: &str = "kafka-log-flusher";

/// How often the timed duties run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimedJobs {
    /// `log.retention.check.interval.ms`.
    pub retention_check: Duration,
    /// How often partitions whose `flush.ms` passed are flushed.
    pub flush_check: Duration,
}

impl Default for TimedJobs {
    fn default() -> Self {
        TimedJobs {
            retention_check: DEFAULT_RETENTION_CHECK,
            flush_check: DEFAULT_FLUSH_CHECK,
        }
    }
}

/// The partitions of the directory, as the manager holds them.
pub(super) type Partitions = Arc<RwLock<BTreeMap<String, Arc<PartitionLog>>>>;

/// A scheduler for a directory whose cleaner runs `cleaner_threads` jobs.
pub(super) fn scheduler(cleaner_threads: i32) -> Scheduler {
    Scheduler::new(
        "kafka-scheduler",
        BACKGROUND_THREADS + cleaner_threads.max(0) as usize,
    )
}

/// Schedules the timed duties of a writable directory (`timed`: `None`,
/// retention and `flush.ms` run only when asked for) and the cleaner's
/// jobs. A read-only directory runs none: every one of them writes.
pub(super) fn start(
    scheduler: &Scheduler,
    partitions: &Partitions,
    cleaner: &Arc<CleanerCore>,
    timed: Option<&TimedJobs>,
    read_only: bool,
) {
    if read_only {
        return;
    }
    if let Some(t) = timed {
        let p = partitions.clone();
        let retention = move || {
            let logs: Vec<_> = p.read().values().cloned().collect();
            let _ = retention_pass(&logs, now_ms());
        };
        let every = t.retention_check;
        if let Err(e) = scheduler.schedule(RETENTION_JOB, every, every, retention) {
            error!("Could not schedule the retention check: {e}");
        }
        let p = partitions.clone();
        let flushes = move || {
            let logs: Vec<_> = p.read().values().cloned().collect();
            let _ = flush_pass(&logs, now_ms());
        };
        let every = t.flush_check;
        if let Err(e) = scheduler.schedule(FLUSH_JOB, every, every, flushes) {
            error!("Could not schedule the flush.ms check: {e}");
        }
    }
    let pool = partitions.clone();
    let logs: LogPool = Arc::new(move || pool.read().values().cloned().collect());
    LogCleaner::start(cleaner, logs, scheduler);
}

/// One retention pass over `logs` (offline ones are skipped). With the log
/// cleaner enabled, compacted partitions are left to it, as Kafka's
/// `cleanupLogs` leaves them; without it they keep everything (Kafka's
/// rule too).
pub(super) fn retention_pass(logs: &[Arc<PartitionLog>], now_ms: i64) -> Result<()> {
    let mut first_error = None;
    for p in logs {
        if p.config().cleanup_policy.compact() {
            continue;
        }
        if let Err(e) = p.apply_retention(now_ms) {
            error!("Retention of {} failed: {e}", p.name());
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// `flush.ms` flushes due by `now_ms` (offline partitions are skipped).
pub(super) fn flush_pass(logs: &[Arc<PartitionLog>], now_ms: i64) -> Result<()> {
    let mut first_error = None;
    for p in logs {
        if let Err(e) = p.maybe_flush_on_time(now_ms) {
            error!("Scheduled flush of {} failed: {e}", p.name());
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}
