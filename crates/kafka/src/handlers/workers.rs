//! Where requests are handled, off the network threads: a pool of handler
//! threads (Kafka's `KafkaRequestHandlerPool`) and the fetch purgatory.
//!
//! Handlers block (storage I/O, a JoinGroup waiting for its rebalance), so
//! the pool grows while every thread is busy, up to [`MAX_WORKERS`], and
//! shrinks back when threads stay idle. A Fetch long poll holds no thread:
//! it is parked in the [`Purgatory`] and handed back to the pool after an
//! append to any partition, or at its deadline.

use std::collections::VecDeque;

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use log::error;
use parking_lot::{Condvar, Mutex};

use crate::auth::authenticator::{AuthStep, Authenticator};
use crate::broker::Broker;
use crate::error::Refusal;
use crate::handlers::dispatch::{Encoded, Handled, Parked, handle_frame};
use crate::network::limits::Lease;
use crate::network::session::Session;

/// Threads kept even when idle.
const MIN_WORKERS: usize = 2;
/// At most this many requests are handled at once; more wait their turn.
pub const MAX_WORKERS: usize = 512;
/// An idle thread above [`MIN_WORKERS`] exits after this long.
const IDLE_EXIT: Duration = Duration::from_secs(30);

/// What became of a request, for its connection's network thread.
pub enum Done {
    Reply(Option<Encoded>),
    /// A frame of a SASL exchange, and the exchange to go on with.
    Sasl(Box<Authenticator>, AuthStep),
    Refused(Refusal),
    Panicked,
}

/// Where a finished request goes back to: its network thread.
pub trait Completions: Send + Sync {
    fn complete(&self, conn: usize, done: Done);
}

/// One request on its way through the handlers.
pub struct Job {
    pub back: Arc<dyn Completions>,
    pub conn: usize,
    /// The connection's listener and peer.
    pub session: Session,
    pub work: Work,
    /// The request's bytes in the memory pool, given back when it is done.
    pub lease: Option<Lease>,
}

pub enum Work {
    Frame(Bytes),
    /// A frame of a connection still authenticating (see `auth::authenticator`).
    Sasl(Bytes, Box<Authenticator>),
    Retry(Parked),
}

struct Queue {
    jobs: VecDeque<Job>,
    idle: usize,
    total: usize,
    stopping: bool,
}

pub struct Workers {
    broker: Arc<Broker>,
    queue: Mutex<Queue>,
    ready: Condvar,
    threads: Mutex<Vec<JoinHandle<()>>>,
    purgatory: Arc<Purgatory>,
}

impl Workers {
    pub fn new(broker: Arc<Broker>) -> Result<Arc<Workers>, String> {
        let purgatory = Purgatory::new();
        let w = Arc::new(Workers {
            broker,
            queue: Mutex::new(Queue {
                jobs: VecDeque::new(),
                idle: 0,
                total: 0,
                stopping: false,
            }),
            ready: Condvar::new(),
            threads: Mutex::new(Vec::new()),
            purgatory,
        });
        Purgatory::start(&w)?;
        Ok(w)
    }

    /// Queues a request; a thread is started if none is free.
    pub fn submit(self: &Arc<Self>, job: Job) {
        let mut q = self.queue.lock();
        if q.stopping {
            return;
        }
        q.jobs.push_back(job);
        if q.jobs.len() > q.idle && q.total < MAX_WORKERS {
            q.total += 1;
            let me = self.clone();
            let spawned = std::thread::Builder::new()
                .name("kafka-handler".into())
                .spawn(move || me.run());
            match spawned {
                Ok(h) => {
                    let mut threads = self.threads.lock();
                    threads.retain(|t| !t.is_finished());
                    threads.push(h);
                }
                Err(e) => {
                    q.total -= 1;
                    error!("Kafka: cannot start a request handler thread: {e}");
                }
            }
        }
        self.ready.notify_one();
    }

    fn run(self: Arc<Self>) {
        let mut q = self.queue.lock();
        loop {
            if q.stopping {
                q.total -= 1;
                return;
            }
            if let Some(job) = q.jobs.pop_front() {
                drop(q);
                self.handle(job);
                q = self.queue.lock();
                continue;
            }
            q.idle += 1;
            let timed_out = self.ready.wait_for(&mut q, IDLE_EXIT).timed_out();
            q.idle -= 1;
            if timed_out && q.jobs.is_empty() && q.total > MIN_WORKERS {
                q.total -= 1;
                return;
            }
        }
    }

    fn handle(self: &Arc<Self>, job: Job) {
        let Job {
            back,
            conn,
            session,
            work,
            lease,
        } = job;
        let peer = session.peer;
        crate::group::set_peer(&peer);
        let broker = &*self.broker;
        let work = match work {
            Work::Sasl(frame, mut auth) => {
                let step = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    auth.handle(broker, &session, frame)
                }));
                let done = match step {
                    Ok(step) => Done::Sasl(auth, step),
                    Err(_) => {
                        error!(
                            "Kafka: a SASL exchange with {peer} panicked; closing its connection"
                        );
                        Done::Panicked
                    }
                };
                drop(lease);
                back.complete(conn, done);
                return;
            }
            other => other,
        };
        // A bug must cost one connection, never the daemon.
        let handled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match work {
            Work::Frame(frame) => handle_frame(broker, &session, frame),
            Work::Retry(parked) => parked.retry(broker),
            Work::Sasl(..) => unreachable!("a SASL frame is handled above"),
        }));
        let done = match handled {
            Ok(Ok(Handled::Reply(r))) => Done::Reply(r),
            Ok(Ok(Handled::Parked(parked))) => {
                self.purgatory.park(Job {
                    back,
                    conn,
                    session,
                    work: Work::Retry(parked),
                    lease,
                });
                return;
            }
            Ok(Err(r)) => Done::Refused(r),
            Err(_) => {
                error!("Kafka: a request from {peer} panicked; closing its connection");
                Done::Panicked
            }
        };
        // The request's memory goes back before the response is written:
        // the response holds none of it.
        drop(lease);
        back.complete(conn, done);
    }

    /// Stops the pool and the purgatory: queued and parked requests are
    /// dropped, running ones finish (long waits see the broker stopping),
    /// and every thread is joined.
    pub fn stop(&self) {
        self.purgatory.stop();
        {
            let mut q = self.queue.lock();
            q.stopping = true;
            q.jobs.clear();
        }
        self.ready.notify_all();
        let threads: Vec<_> = self.threads.lock().drain(..).collect();
        for t in threads {
            let _ = t.join();
        }
    }
}

/// Parked Fetch requests (Kafka's `DelayedFetch` purgatory), each handed
/// back to the pool once an append happened after its last read, or at its
/// deadline.
pub struct Purgatory {
    state: Mutex<Parking>,
    changed: Condvar,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

struct Parking {
    parked: Vec<Job>,
    /// An append happened since the purgatory last looked.
    appended: bool,
    stopping: bool,
}

fn parked(job: &Job) -> Option<&Parked> {
    match &job.work {
        Work::Retry(p) => Some(p),
        Work::Frame(_) | Work::Sasl(..) => None,
    }
}

impl Purgatory {
    fn new() -> Arc<Purgatory> {
        Arc::new(Purgatory {
            state: Mutex::new(Parking {
                parked: Vec::new(),
                appended: false,
                stopping: false,
            }),
            changed: Condvar::new(),
            threads: Mutex::new(Vec::new()),
        })
    }

    fn start(workers: &Arc<Workers>) -> Result<(), String> {
        let p = workers.purgatory.clone();
        let w = workers.clone();
        let sweeper = std::thread::Builder::new()
            .name("kafka-purgatory".into())
            .spawn(move || w.purgatory.run(&w))
            .map_err(|e| format!("cannot start the Kafka purgatory thread: {e}"))?;
        let broker = workers.broker.clone();
        let p2 = p.clone();
        let watcher = std::thread::Builder::new()
            .name("kafka-appends".into())
            .spawn(move || p2.watch(&broker))
            .map_err(|e| format!("cannot start the Kafka append watcher: {e}"))?;
        p.threads.lock().extend([sweeper, watcher]);
        Ok(())
    }

    fn park(&self, job: Job) {
        let mut s = self.state.lock();
        if s.stopping {
            return;
        }
        s.parked.push(job);
        // The line tests wait for: a fetch is parked, holding no thread.
        log::debug!(
            "Kafka: a Fetch parked until an append or its max_wait_ms ({} parked)",
            s.parked.len()
        );
        self.changed.notify_one();
    }

    /// Wakes the purgatory after every append (the storage's append signal).
    fn watch(&self, broker: &Broker) {
        let appends = broker.mgr.appends();
        let mut seen = appends.generation();
        loop {
            appends.wait_past(seen, Instant::now() + Duration::from_secs(1));
            let now = appends.generation();
            let mut s = self.state.lock();
            if s.stopping {
                return;
            }
            if now != seen {
                seen = now;
                s.appended = true;
                self.changed.notify_one();
            }
        }
    }

    fn run(&self, workers: &Arc<Workers>) {
        let appends = workers.broker.mgr.appends();
        let mut s = self.state.lock();
        loop {
            if s.stopping {
                s.parked.clear();
                return;
            }
            s.appended = false;
            let generation = appends.generation();
            let now = Instant::now();
            let stopping = workers.broker.stopping();
            let (due, kept): (Vec<Job>, Vec<Job>) =
                std::mem::take(&mut s.parked).into_iter().partition(|j| {
                    parked(j)
                        .is_none_or(|p| stopping || p.seen() != generation || p.deadline() <= now)
                });
            s.parked = kept;
            if !due.is_empty() {
                drop(s);
                for j in due {
                    workers.submit(j);
                }
                s = self.state.lock();
                continue;
            }
            if s.appended {
                continue;
            }
            let next = s
                .parked
                .iter()
                .filter_map(parked)
                .map(Parked::deadline)
                .min()
                .unwrap_or(now + Duration::from_secs(1))
                .min(now + Duration::from_secs(1));
            self.changed.wait_until(&mut s, next);
        }
    }

    fn stop(&self) {
        {
            let mut s = self.state.lock();
            s.stopping = true;
            s.parked.clear();
        }
        self.changed.notify_all();
        let threads: Vec<_> = self.threads.lock().drain(..).collect();
        for t in threads {
            let _ = t.join();
        }
    }
}
