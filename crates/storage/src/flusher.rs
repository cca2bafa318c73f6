//! The flushes that rolls ask for (Kafka flushes a sealed segment
//! asynchronously, its `flush-log` job), on the data directory's
//! [`Scheduler`], one at a time in the order they were asked for.
//!
//! Jobs still waiting when the scheduler stops are dropped: a close flushes
//! every partition itself, and a manager dropped without closing is a
//! crash, when flushes not yet run are lost.

use std::time::Duration;

use log::warn;

use super::scheduler::{NotScheduled, Scheduler};

/// The job's name (Kafka's).
const FLUSH_LOG: &str = "flush-log";

/// A handle to queue flushes on; cheap to clone (each partition keeps one).
#[derive(Clone)]
pub(crate) struct Flusher(Scheduler);

impl Flusher {
    pub(crate) fn new(scheduler: Scheduler) -> Flusher {
        Flusher(scheduler)
    }

    /// Queues `job`. After the scheduler stopped, or if it has no thread to
    /// run it, the job is dropped with a warning: what it would have
    /// flushed is flushed by the next flush of its partition.
    pub(crate) fn schedule(&self, what: &str, job: impl FnOnce() + Send + 'static) {
        match self.0.schedule_once(FLUSH_LOG, Duration::ZERO, job) {
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
        self.0.wait_idle(FLUSH_LOG, timeout)
    }
}
