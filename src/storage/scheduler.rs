//! A background thread of a data directory that runs jobs when they are
//! due (Kafka's `KafkaScheduler`): the flushes rolls ask for
//! ([`super::flusher`]) and the removal of replaced segments' files
//! ([`super::deleter`]) each have one.
//!
//! The thread starts at the first job and ends at [`Scheduler::stop`].
//! Jobs still waiting then are dropped (each owner says why that is safe);
//! a job already running is waited for, so nothing runs after the owner
//! let go of the directory. Jobs due at the same time run in the order
//! they were scheduled.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

type Job = Box<dyn FnOnce() + Send>;

#[derive(Default)]
struct State {
    /// (due, order scheduled, job).
    jobs: Vec<(Instant, u64, Job)>,
    scheduled: u64,
    /// A job is running (taken off the list, not finished).
    running: bool,
    stopped: bool,
    thread: Option<JoinHandle<()>>,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    /// Signalled when a job is scheduled or the scheduler stops.
    work: Condvar,
    /// Signalled when no job is left or running.
    idle: Condvar,
}

/// Why a job was not scheduled.
pub(crate) enum NotScheduled {
    Stopped,
    /// The thread could not start.
    Spawn(std::io::Error),
}

/// A handle to schedule jobs on; cheap to clone.
#[derive(Clone)]
pub(crate) struct Scheduler {
    /// The thread's name.
    name: &'static str,
    shared: Arc<Shared>,
}

impl Scheduler {
    pub(crate) fn new(name: &'static str) -> Scheduler {
        Scheduler {
            name,
            shared: Arc::default(),
        }
    }

    /// Runs `job` on the thread after `delay`, starting the thread if
    /// needed.
    pub(crate) fn schedule(
        &self,
        delay: Duration,
        job: impl FnOnce() + Send + 'static,
    ) -> Result<(), NotScheduled> {
        let mut st = self.shared.state.lock();
        if st.stopped {
            return Err(NotScheduled::Stopped);
        }
        if st.thread.is_none() {
            let shared = self.shared.clone();
            let thread = std::thread::Builder::new()
                .name(self.name.into())
                .spawn(move || run(&shared))
                .map_err(NotScheduled::Spawn)?;
            st.thread = Some(thread);
        }
        let order = st.scheduled;
        st.scheduled += 1;
        st.jobs.push((Instant::now() + delay, order, Box::new(job)));
        self.shared.work.notify_one();
        Ok(())
    }

    /// Waits until every job scheduled so far has run, `timeout` at most.
    /// Returns whether the scheduler is idle.
    pub(crate) fn wait_idle(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut st = self.shared.state.lock();
        while !st.jobs.is_empty() || st.running {
            if self.shared.idle.wait_until(&mut st, deadline).timed_out() {
                return st.jobs.is_empty() && !st.running;
            }
        }
        true
    }

    /// Drops the waiting jobs, waits for a running one, and ends the
    /// thread. Later jobs are refused. Idempotent.
    pub(crate) fn stop(&self) {
        let thread = {
            let mut st = self.shared.state.lock();
            st.stopped = true;
            st.jobs.clear();
            self.shared.work.notify_all();
            st.thread.take()
        };
        // A job that stops its own owner cannot wait for itself.
        if let Some(h) = thread
            && h.thread().id() != std::thread::current().id()
        {
            let _ = h.join();
        }
    }
}

fn run(shared: &Shared) {
    let mut st = shared.state.lock();
    while !st.stopped {
        let now = Instant::now();
        let next = (st.jobs.iter().enumerate())
            .min_by_key(|(_, (due, order, _))| (*due, *order))
            .map(|(i, (due, _, _))| (i, *due));
        match next {
            Some((i, due)) if due <= now => {
                let (_, _, job) = st.jobs.remove(i);
                st.running = true;
                drop(st);
                // A panicking job must not leave `running` set, or waiters hanging.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                st = shared.state.lock();
                st.running = false;
                if st.jobs.is_empty() {
                    shared.idle.notify_all();
                }
            }
            Some((_, due)) => {
                shared.work.wait_until(&mut st, due);
            }
            None => shared.work.wait(&mut st),
        }
    }
    st.running = false;
    shared.idle.notify_all();
}
