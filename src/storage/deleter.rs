//! Files removed after `file.delete.delay.ms` (Kafka's `delete-file`
//! task): the segments the log cleaner replaced are renamed `.deleted` at
//! once, so they are out of the log, and removed later, so that a reader
//! that found them just before keeps reading.
//!
//! One thread per data directory, started at the first job, stopped when
//! the directory closes. Jobs still waiting then are dropped: their files
//! end in `.deleted`, which the next load removes (Kafka's `LogLoader`).

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use log::warn;
use parking_lot::{Condvar, Mutex};

type Job = Box<dyn FnOnce() + Send>;

#[derive(Default)]
struct State {
    jobs: Vec<(Instant, Job)>,
    stopped: bool,
    thread: Option<JoinHandle<()>>,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    work: Condvar,
}

/// A handle to schedule removals on; cheap to clone.
#[derive(Clone, Default)]
pub(crate) struct Deleter {
    shared: Arc<Shared>,
}

impl Deleter {
    /// Runs `job` after `delay`. Stopped, it is dropped (see the module doc).
    pub(crate) fn schedule(&self, delay: Duration, job: impl FnOnce() + Send + 'static) {
        let mut st = self.shared.state.lock();
        if st.stopped {
            return;
        }
        let shared = self.shared.clone();
        if let Err(e) =
            super::flusher::start_once(&mut st.thread, "delete-file", move || run(&shared))
        {
            warn!(
                "Could not start the file deleter ({e}): the next load removes the .deleted files"
            );
            return;
        }
        st.jobs.push((Instant::now() + delay, Box::new(job)));
        self.shared.work.notify_one();
    }

    /// Drops the waiting jobs and ends the thread. Idempotent.
    pub(crate) fn stop(&self) {
        let thread = {
            let mut st = self.shared.state.lock();
            st.stopped = true;
            st.jobs.clear();
            self.shared.work.notify_all();
            st.thread.take()
        };
        super::flusher::join_unless_current(thread);
    }
}

fn run(shared: &Shared) {
    let mut st = shared.state.lock();
    while !st.stopped {
        let now = Instant::now();
        if let Some(i) = st.jobs.iter().position(|(due, _)| *due <= now) {
            let (_, job) = st.jobs.swap_remove(i);
            drop(st);
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
            st = shared.state.lock();
            continue;
        }
        match st.jobs.iter().map(|(due, _)| *due).min() {
            Some(due) => {
                shared.work.wait_until(&mut st, due);
            }
            None => shared.work.wait(&mut st),
        }
    }
}

/// How long `file.delete.delay.ms` is, as a duration.
pub(crate) fn delay_of(ms: i64) -> Duration {
    Duration::from_millis(ms.max(0) as u64)
}
