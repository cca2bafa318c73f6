//! The background flusher of a data directory: one long-lived thread per
//! `LogManager` runs the flushes that rolls schedule (Kafka flushes a sealed
//! segment asynchronously), in the order they were asked for.
//!
//! A [`Scheduler`] stopped when the manager closes or is dropped. Jobs still
//! queued then are dropped: a close flushes every partition itself, and a
//! manager dropped without closing is a crash, when flushes not yet run are
//! lost. A job already running is waited for, so no flush touches the
//! directory after the manager let go of it.

use std::time::Duration;

use log::warn;

use super::scheduler::{NotScheduled, Scheduler};

/// A handle to queue flushes on; cheap to clone (each partition keeps one).
#[derive(Clone)]
pub(crate) struct Flusher(Scheduler);

impl Default for Flusher {
    fn default() -> Self {
        Flusher(Scheduler::new("log-flusher"))
    }
}

impl Flusher {
    /// Queues `job` for the flusher thread, starting it if needed. After the
    /// flusher stopped, or if its thread cannot start, the job is dropped
    /// with a warning: what it would have flushed is flushed by the next
    /// flush of its partition.
    pub(crate) fn schedule(&self, what: &str, job: impl FnOnce() + Send + 'static) {
        match self.0.schedule(Duration::ZERO, job) {
            Ok(()) => {}
            Err(NotScheduled::Stopped) => warn!(
                "The flusher has stopped; the flush after roll of {what} runs at the next flush"
            ),
            Err(NotScheduled::Spawn(e)) => warn!(
                "Could not start the flusher thread for {what}: {e}; it runs at the next flush"
            ),
        }
    }

    /// Waits until every job queued so far has run, `timeout` at most.
    /// Returns whether the flusher is idle.
    pub(crate) fn wait_idle(&self, timeout: Duration) -> bool {
        self.0.wait_idle(timeout)
    }

    /// Drops the queued jobs, waits for a running one, and ends the thread.
    /// Later jobs are refused. Idempotent.
    pub(crate) fn stop(&self) {
        self.0.stop()
    }
}
