//! A network thread, as Kafka's `Processor`: it polls its connections,
//! takes new ones from the acceptor and finished requests from the
//! handlers, hands whole requests to the handlers, and closes connections
//! that are idle, refused or failed their authentication.

use std::collections::{HashMap, VecDeque};
use std::io::ErrorKind;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use log::{debug, error, info, warn};
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token, Waker};
use parking_lot::Mutex;

use super::connection::{Closing, Conn, Phase, Sasl, Step, advance};
use super::shared::{Shared, WAKER};
use crate::auth::authenticator::{AuthStep, Authenticator};
use crate::handlers::workers::{Completions, Done, Job, Work};
use crate::network::session::Session;
use crate::network::splice::Outgoing;
use crate::network::tls::TlsConn;

/// A network thread's mailbox: new connections from the acceptor, finished
/// requests from the handlers, and word that pool memory came back.
#[derive(Default)]
pub(crate) struct Inbox {
    pub(crate) new_conns: Vec<(TcpStream, SocketAddr, usize)>,
    pub(crate) done: Vec<(usize, Done)>,
    pub(crate) memory: bool,
}

pub(crate) struct ProcessorHandle {
    pub(crate) waker: Waker,
    pub(crate) inbox: Mutex<Inbox>,
}

impl Completions for ProcessorHandle {
    fn complete(&self, conn: usize, done: Done) {
        self.inbox.lock().done.push((conn, done));
        let _ = self.waker.wake();
    }
}

pub(crate) struct Processor {
    pub(crate) poll: Poll,
    pub(crate) handle: Arc<ProcessorHandle>,
    pub(crate) shared: Arc<Shared>,
    pub(crate) conns: HashMap<usize, Conn>,
    pub(crate) next_id: usize,
    /// Connections waiting for pool memory, in the order they asked.
    pub(crate) waiting_memory: VecDeque<usize>,
    /// Connections whose authentication failed, with when they close
    /// (in that order: the delay is the same for all).
    pub(crate) closing: VecDeque<(Instant, usize)>,
}

impl Processor {
    /// Serves until the listener stops; returns how many connections it closed then.
    pub(crate) fn run(&mut self) -> usize {
        let mut events = Events::with_capacity(1024);
        let sweep_every = self
            .shared
            .idle
            .map(|d| (d / 4).clamp(Duration::from_millis(10), Duration::from_secs(1)));
        let mut next_sweep = sweep_every.map(|d| Instant::now() + d);
        loop {
            let wake_at = match (next_sweep, self.closing.front()) {
                (Some(a), Some((b, _))) => Some(a.min(*b)),
                (a, b) => a.or(b.map(|(at, _)| *at)),
            };
            let timeout = wake_at.map(|t| t.saturating_duration_since(Instant::now()));
            if let Err(e) = self.poll.poll(&mut events, timeout)
                && e.kind() != ErrorKind::Interrupted
            {
                error!("Kafka listener: poll failed: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
            if self.shared.broker.stopping() {
                let n = self.conns.len();
                for id in self.conns.keys().copied().collect::<Vec<_>>() {
                    self.close(id, Closing::Peer);
                }
                return n;
            }
            for ev in events.iter() {
                if ev.token() == WAKER {
                    continue;
                }
                self.pump(ev.token().0);
            }
            self.drain_inbox();
            let now = Instant::now();
            while self.closing.front().is_some_and(|(at, _)| *at <= now) {
                let (_, id) = self.closing.pop_front().expect("looked at");
                self.close(id, Closing::AuthenticationFailed);
            }
            if let (Some(every), Some(at)) = (sweep_every, next_sweep)
                && Instant::now() >= at
            {
                self.close_idle();
                next_sweep = Some(Instant::now() + every);
            }
        }
    }

    fn drain_inbox(&mut self) {
        let (new_conns, done, memory) = {
            let mut inbox = self.handle.inbox.lock();
            (
                std::mem::take(&mut inbox.new_conns),
                std::mem::take(&mut inbox.done),
                std::mem::take(&mut inbox.memory),
            )
        };
        for (stream, peer, listener) in new_conns {
            self.add(stream, peer, listener);
        }
        for (id, done) in done {
            self.complete(id, done);
        }
        if memory {
            // Memory came back: the paused connections read again, oldest first.
            let waiting = std::mem::take(&mut self.waiting_memory);
            for id in waiting {
                self.pump(id);
            }
        }
    }

    /// Takes a connection from the acceptor: polls it, and starts its TLS
    /// and SASL states as its listener asks.
    fn add(&mut self, mut stream: TcpStream, peer: SocketAddr, listener: usize) {
        let id = self.next_id;
        self.next_id += 1;
        let registered = self.poll.registry().register(
            &mut stream,
            Token(id),
            Interest::READABLE | Interest::WRITABLE,
        );
        if let Err(e) = registered {
            warn!("Kafka: dropping the connection from {peer}: {e}");
            self.shared.quotas.dec(peer.ip());
            return;
        }
        let tls = match &self.shared.tls[listener] {
            None => None,
            Some(config) => match TlsConn::new(config.clone()) {
                Ok(t) => Some(Box::new(t)),
                Err(e) => {
                    warn!("Kafka: dropping the connection from {peer}: cannot start TLS: {e}");
                    let _ = self.poll.registry().deregister(&mut stream);
                    self.shared.quotas.dec(peer.ip());
                    return;
                }
            },
        };
        let sasl = match &self.shared.sasl[listener] {
            None => Sasl::Off,
            Some(mechanisms) => Sasl::Waiting(Box::new(Authenticator::new(
                mechanisms.clone(),
                self.shared.broker.scram.clone(),
            ))),
        };
        debug!("Kafka: connection from {peer}");
        self.conns
            .insert(id, Conn::new(stream, peer, listener, tls, sasl));
        // Bytes may have come before the registration.
        self.pump(id);
    }

    /// Takes a handler's answer to connection `id`'s request.
    fn complete(&mut self, id: usize, done: Done) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return; // closed meanwhile
        };
        conn.active = Instant::now();
        match done {
            Done::Reply(Some(enc)) => {
                conn.phase = Phase::Writing(Outgoing::new(enc.prefix, enc.body));
            }
            Done::Reply(None) => {
                conn.phase = Phase::Size {
                    buf: [0; 4],
                    got: 0,
                }
            }
            Done::Refused(r) => {
                self.close(id, Closing::Refused(r));
                return;
            }
            Done::Sasl(auth, step) => match step {
                AuthStep::Continue(reply) => {
                    conn.sasl = Sasl::Waiting(auth);
                    conn.phase = Phase::Writing(Outgoing::new(reply.prefix, reply.body));
                }
                AuthStep::Authenticated { reply, principal } => {
                    info!(
                        "Kafka: {} authenticated as {principal} with SASL",
                        conn.peer
                    );
                    conn.principal = principal;
                    conn.sasl = Sasl::Off;
                    conn.phase = Phase::Writing(Outgoing::new(reply.prefix, reply.body));
                }
                AuthStep::Failed { reply, log } => {
                    warn!("Kafka: failed authentication with {} ({log})", conn.peer);
                    conn.sasl = Sasl::Failed;
                    // Kafka's delay: a client guessing passwords gets
                    // its answer, then waits for the close.
                    let at = Instant::now() + self.shared.failed_auth_delay;
                    self.closing.push_back((at, id));
                    match reply {
                        Some(r) => conn.phase = Phase::Writing(Outgoing::new(r.prefix, r.body)),
                        None => conn.phase = Phase::InFlight,
                    }
                }
            },
            Done::Panicked => {
                self.close(id, Closing::Io("a request panicked".to_string()));
                return;
            }
        }
        self.pump(id);
    }

    /// Moves connection `id` on as far as its socket allows.
    fn pump(&mut self, id: usize) {
        let step = match self.conns.get_mut(&id) {
            None => return,
            Some(conn) => advance(conn, &self.shared),
        };
        match step {
            Step::Wait => {}
            Step::NeedMemory => self.waiting_memory.push_back(id),
            Step::Request(frame, lease) => {
                let Some(conn) = self.conns.get(&id) else {
                    return;
                };
                let session = Session {
                    listener: conn.listener,
                    peer: conn.peer,
                    principal: conn.principal.clone(),
                };
                let Some(conn) = self.conns.get_mut(&id) else {
                    return;
                };
                let work = match std::mem::replace(&mut conn.sasl, Sasl::Busy) {
                    Sasl::Off => {
                        conn.sasl = Sasl::Off;
                        Work::Frame(frame)
                    }
                    Sasl::Waiting(auth) => Work::Sasl(frame, auth),
                    Sasl::Busy | Sasl::Failed => {
                        // Never: a request is read only after the last one's answer.
                        self.close(id, Closing::Io("a frame out of turn".to_string()));
                        return;
                    }
                };
                let job = Job {
                    back: self.handle.clone(),
                    conn: id,
                    session,
                    work,
                    lease: Some(lease),
                };
                self.shared.workers.submit(job);
            }
            Step::Close(why) => self.close(id, why),
        }
    }

    fn close_idle(&mut self) {
        let Some(idle) = self.shared.idle else {
            return;
        };
        let now = Instant::now();
        let expired: Vec<usize> = self
            .conns
            .iter()
            .filter(|(_, c)| {
                !matches!(c.phase, Phase::InFlight) && now.duration_since(c.active) > idle
            })
            .map(|(id, _)| *id)
            .collect();
        for id in expired {
            let handshaking = self.conns[&id]
                .tls
                .as_ref()
                .is_some_and(|t| t.handshaking());
            self.close(
                id,
                if handshaking {
                    Closing::Handshake
                } else {
                    Closing::Idle
                },
            );
        }
    }

    fn close(&mut self, id: usize, why: Closing) {
        let Some(mut conn) = self.conns.remove(&id) else {
            return;
        };
        let peer = conn.peer;
        match why {
            Closing::Peer => debug!("Kafka: connection from {peer} closed"),
            Closing::Io(e) => {
                if !self.shared.broker.stopping() {
                    debug!("Kafka: connection from {peer} ended: {e}");
                }
            }
            Closing::Refused(r) => warn!("Kafka: closing the connection from {peer}: {r}"),
            Closing::Idle => debug!(
                "Kafka: closing the connection from {peer}: idle for more than \
                 connections.max.idle.ms"
            ),
            Closing::AuthenticationFailed => {
                debug!("Kafka: closing the connection from {peer}: its authentication failed")
            }
            Closing::Handshake => info!(
                "Kafka: closing the connection from {peer}: its TLS handshake did not go on \
                 for connections.max.idle.ms"
            ),
        }
        if let Some(tls) = &mut conn.tls {
            tls.close(&mut conn.stream);
        }
        let _ = self.poll.registry().deregister(&mut conn.stream);
        let _ = conn.stream.shutdown(std::net::Shutdown::Both);
        drop(conn);
        self.shared.quotas.dec(peer.ip());
    }
}
