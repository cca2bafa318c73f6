//! Files removed after `file.delete.delay.ms` (Kafka's `delete-file`
//! job): the segments the log cleaner replaced are renamed `.deleted` at
//! once, so they are out of the log, and removed later, so that a reader
//! that found them just before keeps reading.
//!
//! Jobs of the data directory's [`Scheduler`]; those still waiting when it
//! stops are dropped: their files end in `.deleted`, which the next load
//! removes (Kafka's `LogLoader`).

use std::time::Duration;

use log::warn;

use super::scheduler::{NotScheduled, Scheduler};

/// The job's name (Kafka's).
const DELETE_FILE: &str = "delete-file";

/// A handle to schedule removals on; cheap to clone.
#[derive(Clone)]
pub(crate) struct Deleter(Scheduler);

impl Deleter {
    pub(crate) fn new(scheduler: Scheduler) -> Deleter {
        Deleter(scheduler)
    }

    /// Runs `job` after `delay`. Stopped, it is dropped (see the module doc).
    pub(crate) fn schedule(&self, delay: Duration, job: impl FnOnce() + Send + 'static) {
        if let Err(NotScheduled::Spawn(e)) = self.0.schedule_once(DELETE_FILE, delay, job) {
            warn!(
                "Could not start the file deleter ({e}): the next load removes the .deleted files"
            );
        }
    }
}

/// How long `file.delete.delay.ms` is, as a duration.
pub(crate) fn delay_of(ms: i64) -> Duration {
    Duration::from_millis(ms.max(0) as u64)
}
