//! The background flusher of a data directory: one long-lived thread per
//! `LogManager` runs the flushes that rolls schedule (Kafka flushes a sealed
//! segment asynchronously), in the order they were asked for.
//!
//! The thread starts at the first job and ends when the manager closes or is
//! dropped. Jobs still queued then are dropped: a close flushes every
//! partition itself, and a manager dropped without closing is a crash, when
//! flushes not yet run are lost. A job already running is waited for, so no
//! flush touches the directory after the manager let go of it.

use std::collections::VecDeque;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use log::warn;
use parking_lot::{Condvar, Mutex};

type Job = Box<dyn FnOnce() + Send>;

#[derive(Default)]
struct State {
    jobs: VecDeque<Job>,
    /// A job is running (taken off the queue, not finished).
    running: bool,
    stopped: bool,
    thread: Option<JoinHandle<()>>,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    /// Signalled when a job is queued or the flusher stops.
    work: Condvar,
    /// Signalled when the flusher becomes idle.
    idle: Condvar,
}

/// A handle to queue flushes on; cheap to clone (each partition keeps one).
#[derive(Clone, Default)]
pub(crate) struct Flusher {
    shared: Arc<Shared>,
}

impl Flusher {
    /// Queues `job` for the flusher thread, starting it if needed. After the
    /// flusher stopped, or if its thread cannot start, the job is dropped
    /// with a warning: what it would have flushed is flushed by the next
    /// flush of its partition.
    pub(crate) fn schedule(&self, what: &str, job: impl FnOnce() + Send + 'static) {
        let mut st = self.shared.state.lock();
        if st.stopped {
            warn!("The flusher has stopped; the flush after roll of {what} runs at the next flush");
            return;
        }
        let shared = self.shared.clone();
        if let Err(e) = start_once(&mut st.thread, "log-flusher", move || run(&shared)) {
            warn!("Could not start the flusher thread for {what}: {e}; it runs at the next flush");
            return;
        }
        st.jobs.push_back(Box::new(job));
        self.shared.work.notify_one();
    }

    /// Waits until every job queued so far has run, `timeout` at most.
    /// Returns whether the flusher is idle.
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

    /// Drops the queued jobs, waits for a running one, and ends the thread.
    /// Later jobs are refused. Idempotent.
    pub(crate) fn stop(&self) {
        let thread = {
            let mut st = self.shared.state.lock();
            st.stopped = true;
            st.jobs.clear();
            self.shared.work.notify_all();
            st.thread.take()
        };
        join_unless_current(thread);
    }
}

/// Starts `run` on a thread named `name` into `slot`, unless one is there.
pub(crate) fn start_once(
    slot: &mut Option<JoinHandle<()>>,
    name: &str,
    run: impl FnOnce() + Send + 'static,
) -> std::io::Result<()> {
    if slot.is_none() {
        *slot = Some(std::thread::Builder::new().name(name.into()).spawn(run)?);
    }
    Ok(())
}

/// Waits for a background thread to end, unless it is the caller (a job
/// that stops its own owner cannot wait for itself).
pub(crate) fn join_unless_current(thread: Option<JoinHandle<()>>) {
    if let Some(h) = thread
        && h.thread().id() != std::thread::current().id()
    {
        let _ = h.join();
    }
}

fn run(shared: &Shared) {
    let mut st = shared.state.lock();
    loop {
        if st.stopped {
            break;
        }
        let Some(job) = st.jobs.pop_front() else {
            shared.work.wait(&mut st);
            continue;
        };
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
    st.running = false;
    shared.idle.notify_all();
}
