//! Named background jobs run when they are due (Kafka's `KafkaScheduler`).
//!
//! A data directory has one ([`crate::LogManager::jobs`] names what it
//! runs): the timed duties (`kafka-log-retention`, `kafka-log-flusher`, the
//! cleaner's `kafka-log-cleaner-thread-N`), and the one-off jobs that rolls
//! (`flush-log`) and the cleaner's swaps (`delete-file`) ask for. Whatever
//! else runs on a timer (the coordinators' expiry) is a job of one too: a
//! new duty is one more [`Scheduler::schedule`].
//!
//! Jobs run on a few worker threads, started as jobs fall due with every
//! worker busy, up to the scheduler's cap, so that a long job (a retention
//! pass over many partitions, a cleaning pass) does not hold up the others.
//! Two jobs of the same name never run at once and run in the order they
//! were scheduled, so a job needs no lock against its own next run.
//!
//! [`Scheduler::stop`] ends everything in one call: it tells the long jobs
//! to give up ([`Scheduler::on_stop`]), drops the jobs still waiting (each
//! owner says why that is safe), and joins every worker, so nothing runs
//! after the owner let go of what the jobs touch.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use log::error;
use parking_lot::{Condvar, Mutex};

/// What a periodic job asks for after a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pace {
    /// The next run after the job's period.
    Period,
    /// The next run at once (a cleaner that cleaned a log looks for another
    /// before backing off).
    Now,
}

enum Task {
    Once(Box<dyn FnOnce() + Send>),
    Every {
        period: Duration,
        run: Box<dyn FnMut() -> Pace + Send>,
    },
}

struct Entry {
    name: Arc<str>,
    due: Instant,
    /// The order scheduled, among jobs due at the same time.
    order: u64,
    task: Task,
}

#[derive(Default)]
struct State {
    waiting: Vec<Entry>,
    /// The names of the jobs running.
    running: Vec<Arc<str>>,
    /// The names of the periodic jobs scheduled.
    periodic: Vec<Arc<str>>,
    scheduled: u64,
    workers: Vec<JoinHandle<()>>,
    /// Workers waiting for a job to fall due.
    idle: usize,
    stopped: bool,
    on_stop: Vec<Box<dyn Fn() + Send>>,
}

struct Shared {
    /// The workers' names: `<prefix>-<n>`.
    prefix: &'static str,
    max_workers: usize,
    state: Mutex<State>,
    /// Signalled when a job is scheduled or ends, or the scheduler stops.
    work: Condvar,
    /// Signalled when a job ends or the scheduler stops.
    done: Condvar,
}

/// Why a job was not scheduled.
#[derive(Debug)]
pub enum NotScheduled {
    Stopped,
    /// No worker runs and none could start.
    Spawn(std::io::Error),
}

impl std::fmt::Display for NotScheduled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotScheduled::Stopped => write!(f, "the scheduler has stopped"),
            NotScheduled::Spawn(e) => write!(f, "cannot start a scheduler thread: {e}"),
        }
    }
}

/// A handle to schedule jobs on; cheap to clone.
#[derive(Clone)]
pub struct Scheduler {
    shared: Arc<Shared>,
}

impl Scheduler {
    /// A scheduler whose workers are named `<prefix>-<n>`, `max_workers` of
    /// them at most (at least one). No thread starts before the first job.
    pub fn new(prefix: &'static str, max_workers: usize) -> Scheduler {
        Scheduler {
            shared: Arc::new(Shared {
                prefix,
                max_workers: max_workers.max(1),
                state: Mutex::default(),
                work: Condvar::new(),
                done: Condvar::new(),
            }),
        }
    }

    /// Runs `job` once, after `delay`.
    pub fn schedule_once(
        &self,
        name: &str,
        delay: Duration,
        job: impl FnOnce() + Send + 'static,
    ) -> Result<(), NotScheduled> {
        self.add(name, delay, Task::Once(Box::new(job)))
    }

    /// Runs `job` after `delay`, then `period` after each run ends, until
    /// the scheduler stops.
    pub fn schedule(
        &self,
        name: &str,
        delay: Duration,
        period: Duration,
        mut job: impl FnMut() + Send + 'static,
    ) -> Result<(), NotScheduled> {
        self.schedule_paced(name, delay, period, move || {
            job();
            Pace::Period
        })
    }

    /// [`Scheduler::schedule`], the job saying after each run whether the
    /// next waits for the period.
    pub fn schedule_paced(
        &self,
        name: &str,
        delay: Duration,
        period: Duration,
        job: impl FnMut() -> Pace + Send + 'static,
    ) -> Result<(), NotScheduled> {
        let run = Box::new(job);
        self.add(name, delay, Task::Every { period, run })
    }

    /// Called at [`Scheduler::stop`], before the workers are joined, so that
    /// a long job under way can give up rather than hold the stop.
    pub fn on_stop(&self, hook: impl Fn() + Send + 'static) {
        self.shared.state.lock().on_stop.push(Box::new(hook));
    }

    fn add(&self, name: &str, delay: Duration, task: Task) -> Result<(), NotScheduled> {
        let mut st = self.shared.state.lock();
        if st.stopped {
            return Err(NotScheduled::Stopped);
        }
        let order = st.scheduled;
        st.scheduled += 1;
        let name: Arc<str> = name.into();
        if matches!(task, Task::Every { .. }) {
            st.periodic.push(name.clone());
        }
        st.waiting.push(Entry {
            name,
            due: Instant::now() + delay,
            order,
            task,
        });
        if let Err(e) = self.shared.more_workers(&mut st)
            && st.workers.is_empty()
        {
            if let Some(Entry {
                task: Task::Every { .. },
                ..
            }) = st.waiting.pop()
            {
                st.periodic.pop();
            }
            return Err(NotScheduled::Spawn(e));
        }
        self.shared.work.notify_one();
        Ok(())
    }

    /// The names of the periodic jobs, sorted: what runs on a timer.
    pub fn periodic_jobs(&self) -> Vec<String> {
        let st = self.shared.state.lock();
        let mut names: Vec<String> = st.periodic.iter().map(|n| n.to_string()).collect();
        names.sort();
        names.dedup();
        names
    }

    /// Waits until no job named `name` is waiting or running, `timeout` at
    /// most. Returns whether none is. (A periodic job always waits: ask
    /// about one-off jobs.)
    pub fn wait_idle(&self, name: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut st = self.shared.state.lock();
        let busy = |st: &State| {
            st.waiting.iter().any(|e| &*e.name == name) || st.running.iter().any(|n| &**n == name)
        };
        while busy(&st) {
            if self.shared.done.wait_until(&mut st, deadline).timed_out() {
                return !busy(&st);
            }
        }
        true
    }

    /// Whether [`Scheduler::stop`] was called.
    pub fn is_stopped(&self) -> bool {
        self.shared.state.lock().stopped
    }

    /// Tells the long jobs to give up, drops the waiting jobs, waits for the
    /// running ones and ends every worker. Later jobs are refused. Idempotent.
    pub fn stop(&self) {
        let (dropped, hooks, workers) = {
            let mut st = self.shared.state.lock();
            st.stopped = true;
            st.periodic.clear();
            self.shared.work.notify_all();
            self.shared.done.notify_all();
            (
                std::mem::take(&mut st.waiting),
                std::mem::take(&mut st.on_stop),
                std::mem::take(&mut st.workers),
            )
        };
        // Dropped unlocked: a job may hold what schedules on drop, or the
        // last handle of what owns another scheduler.
        drop(dropped);
        for hook in hooks {
            hook();
        }
        let me = std::thread::current().id();
        for w in workers {
            // A job that stops its own scheduler cannot wait for itself.
            if w.thread().id() != me {
                let _ = w.join();
            }
        }
    }
}

impl Shared {
    /// Starts a worker when jobs wait and none is idle, below the cap.
    fn more_workers(self: &Arc<Shared>, st: &mut State) -> std::io::Result<()> {
        if st.idle > 0 || st.waiting.is_empty() || st.workers.len() >= self.max_workers {
            return Ok(());
        }
        let shared = self.clone();
        let worker = std::thread::Builder::new()
            .name(format!("{}-{}", self.prefix, st.workers.len()))
            .spawn(move || shared.work())?;
        st.workers.push(worker);
        Ok(())
    }

    /// The waiting job to run next: the earliest due (first scheduled among
    /// equals) whose name is not running.
    fn next(st: &State) -> Option<(usize, Instant)> {
        (st.waiting.iter().enumerate())
            .filter(|(_, e)| !st.running.contains(&e.name))
            .min_by_key(|(_, e)| (e.due, e.order))
            .map(|(i, e)| (i, e.due))
    }

    fn work(self: &Arc<Shared>) {
        let mut st = self.state.lock();
        while !st.stopped {
            match Self::next(&st) {
                Some((i, due)) if due <= Instant::now() => {
                    let entry = st.waiting.swap_remove(i);
                    let name = entry.name.clone();
                    st.running.push(name.clone());
                    // Another job may fall due while this one runs.
                    if let Err(e) = self.more_workers(&mut st) {
                        error!("Could not start another scheduler thread: {e}");
                    }
                    drop(st);
                    let again = run(entry);
                    st = self.state.lock();
                    if let Some(at) = st.running.iter().position(|n| *n == name) {
                        st.running.swap_remove(at);
                    }
                    let dropped = match again {
                        Some(e) if !st.stopped => {
                            st.waiting.push(e);
                            None
                        }
                        again => again,
                    };
                    self.work.notify_all();
                    self.done.notify_all();
                    if dropped.is_some() {
                        // Unlocked, as at the stop.
                        drop(st);
                        drop(dropped);
                        st = self.state.lock();
                    }
                }
                due => {
                    st.idle += 1;
                    match due {
                        Some((_, due)) => drop(self.work.wait_until(&mut st, due)),
                        None => self.work.wait(&mut st),
                    }
                    st.idle -= 1;
                }
            }
        }
    }
}

/// Runs a job; a periodic one comes back to wait for its next run. A job
/// that panics is logged; a periodic one runs again all the same.
fn run(entry: Entry) -> Option<Entry> {
    let Entry {
        name, order, task, ..
    } = entry;
    let caught = |f: &mut dyn FnMut()| {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        if r.is_err() {
            error!("The scheduled job {name} panicked");
        }
    };
    match task {
        Task::Once(job) => {
            let mut job = Some(job);
            caught(&mut || (job.take().expect("run once"))());
            None
        }
        Task::Every { period, mut run } => {
            let mut pace = Pace::Period;
            caught(&mut || pace = run());
            let wait = if pace == Pace::Now {
                Duration::ZERO
            } else {
                period
            };
            Some(Entry {
                name,
                due: Instant::now() + wait,
                order,
                task: Task::Every { period, run },
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    const WAIT: Duration = Duration::from_secs(60);

    #[test]
    fn jobs_of_one_name_run_one_at_a_time_in_order() {
        let s = Scheduler::new("test-scheduler", 4);
        let seen = Arc::new(Mutex::new(Vec::new()));
        for i in 0..20 {
            let seen = seen.clone();
            s.schedule_once("one", Duration::ZERO, move || seen.lock().push(i))
                .unwrap();
        }
        assert!(s.wait_idle("one", WAIT));
        assert_eq!(*seen.lock(), (0..20).collect::<Vec<_>>());
        s.stop();
    }

    #[test]
    fn periodic_jobs_run_until_the_stop_which_joins_them() {
        let s = Scheduler::new("test-scheduler", 2);
        let runs = Arc::new(AtomicUsize::new(0));
        let r = runs.clone();
        s.schedule(
            "tick",
            Duration::ZERO,
            Duration::from_millis(1),
            move || {
                r.fetch_add(1, Ordering::SeqCst);
            },
        )
        .unwrap();
        assert_eq!(s.periodic_jobs(), ["tick"]);
        let deadline = Instant::now() + WAIT;
        while runs.load(Ordering::SeqCst) < 3 {
            assert!(Instant::now() < deadline, "the job ran {runs:?} times");
            std::thread::sleep(Duration::from_millis(1));
        }
        let stopped = Arc::new(AtomicUsize::new(0));
        let hook = stopped.clone();
        s.on_stop(move || {
            hook.fetch_add(1, Ordering::SeqCst);
        });
        s.stop();
        let after = runs.load(Ordering::SeqCst);
        assert_eq!(stopped.load(Ordering::SeqCst), 1);
        assert!(s.periodic_jobs().is_empty());
        assert!(matches!(
            s.schedule_once("late", Duration::ZERO, || {}),
            Err(NotScheduled::Stopped)
        ));
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(
            runs.load(Ordering::SeqCst),
            after,
            "nothing runs after the stop"
        );
    }

    #[test]
    fn a_stop_drops_the_waiting_jobs_and_a_panic_is_survived() {
        let s = Scheduler::new("test-scheduler", 1);
        s.schedule_once("boom", Duration::ZERO, || panic!("a job's panic"))
            .unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        let r = ran.clone();
        s.schedule_once("after", Duration::ZERO, move || {
            r.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
        assert!(s.wait_idle("after", WAIT));
        assert_eq!(ran.load(Ordering::SeqCst), 1);
        let r = ran.clone();
        s.schedule_once("later", Duration::from_secs(3600), move || {
            r.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
        s.stop();
        assert!(s.wait_idle("later", Duration::ZERO));
        assert_eq!(ran.load(Ordering::SeqCst), 1);
    }
}
