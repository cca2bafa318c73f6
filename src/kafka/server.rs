//! The listener, shaped like Kafka's `SocketServer`: an acceptor thread,
//! `num.network.threads` network threads that each poll their connections
//! (non-blocking sockets, epoll through `mio`), and the request handlers
//! (`workers`) that run requests off the network threads.
//!
//! Each connection is a small state machine on its network thread: reading
//! a size, waiting for memory, reading a body, in flight (one request at a
//! time, as Kafka answers a connection in order), writing a response. An
//! idle connection costs its socket and a few hundred bytes, no thread.
//! A TLS or SASL handshake becomes one more state before reading, with the
//! socket wrapped (see [`Conn`]).
//!
//! Limits, with Kafka's names and behaviour (see `config`):
//! - `max.connections`: at the cap the acceptor stops accepting, so new
//!   connections wait in the kernel's backlog, until one closes. The cap in
//!   force is also below `RLIMIT_NOFILE` by the descriptors kept for
//!   storage (a quarter, at least 1,024, or what `max.broker.partitions`
//!   partitions need: `limits::fd_cap`), so a partition
//!   can always roll.
//! - `max.connections.per.ip` (and its overrides): a connection past it is
//!   accepted and closed at once, with a log line.
//! - `connections.max.idle.ms`: a connection with no request in flight that
//!   has read or written nothing for that long is closed, whether it sent
//!   nothing or half a request.
//! - `queued.max.request.bytes`: requests in flight hold their size in a
//!   memory pool; when it is empty, connections stop reading until memory
//!   comes back (`limits::MemoryPool`).
//! - Out of descriptors at `accept` (EMFILE, ENFILE): the connection is
//!   refused (accepted on a spare descriptor and closed), with a log line.

use std::collections::{HashMap, VecDeque};
use std::io::{ErrorKind, Read};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use log::{debug, error, info, warn};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};
use parking_lot::Mutex;

use super::acl::{AclStore, Authorizer, AuthorizerSettings};
use super::auth::CredentialStore;
use super::auth::MAX_RECEIVE_SIZE;
use super::auth::authenticator::{AuthStep, Authenticator};
use super::broker::Broker;
use super::config::{Endpoint, Listener, ListenerConfig, SecurityProtocol};
use super::error::Refusal;
use super::frame::frame_size;
use super::limits::{ConnectionQuotas, Lease, MemoryPool, fd_cap, nofile_limit};
use super::session::{Principal, Session};
use super::splice::{Outgoing, Progress, set_int_option};
use super::tls::{TlsConn, TlsError, TlsSink};
use super::workers::{Completions, Done, Job, Work, Workers};
use crate::storage::LogManager;

/// The waker's token on every poll.
const WAKER: Token = Token(usize::MAX);
/// The largest read into a request body at once (its buffer grows by this).
const READ_CHUNK: usize = 256 * 1024;

/// A running listener. [`KafkaServer::stop`] (or drop) ends it.
pub struct KafkaServer {
    shared: Arc<Shared>,
    /// Each bound address, with the index of its listener.
    addrs: Vec<(SocketAddr, usize)>,
    acceptor: Option<(JoinHandle<()>, Arc<Waker>)>,
    processors: Vec<(JoinHandle<usize>, Arc<ProcessorHandle>)>,
    /// Expires committed offsets and removes empty groups.
    cleaner: Option<super::group::Cleaner>,
    txn_cleaner: Option<super::txn::cleanup::TxnCleaner>,
    stopped: bool,
}

/// What every thread of the listener shares.
struct Shared {
    broker: Arc<Broker>,
    /// Each listener's TLS config (`None`: a plaintext listener).
    tls: Vec<Option<Arc<rustls::ServerConfig>>>,
    /// Each listener's SASL mechanisms (`None`: no SASL).
    sasl: Vec<Option<Vec<String>>>,
    /// `connection.failed.authentication.delay.ms`.
    failed_auth_delay: Duration,
    quotas: ConnectionQuotas,
    pool: Arc<MemoryPool>,
    workers: Arc<Workers>,
    idle: Option<Duration>,
    max_request: usize,
}

impl KafkaServer {
    /// Binds the configured listener and starts serving; `Ok(None)` when no
    /// listener is configured (the default: nothing listens).
    pub fn start(
        mgr: Arc<LogManager>,
        config: ListenerConfig,
    ) -> Result<Option<KafkaServer>, String> {
        config.check()?;
        let listeners = config.listeners()?;
        if listeners.is_empty() {
            return Ok(None);
        }
        let given_advertised = config.advertised_listeners()?;
        let tls = listeners
            .iter()
            .map(|l| config.tls_config(l))
            .collect::<Result<Vec<_>, String>>()?;
        let sasl = listeners
            .iter()
            .map(|l| config.sasl_mechanisms(l))
            .collect::<Result<Vec<_>, String>>()?;
        let failed_auth_delay = Duration::from_millis(config.failed_auth_delay_ms().max(0) as u64);
        // Every socket, with the index of its listener.
        let mut sockets: Vec<(std::net::TcpListener, usize)> = Vec::new();
        let mut advertised = Vec::new();
        for (i, listener) in listeners.iter().enumerate() {
            let endpoint = &listener.endpoint;
            let mut bound: Option<u16> = None;
            for addr in endpoint.resolve()? {
                // Port 0 binds a free port; every address of a name shares it.
                let addr = match bound {
                    Some(port) if endpoint.port == 0 => SocketAddr::new(addr.ip(), port),
                    _ => addr,
                };
                let l = std::net::TcpListener::bind(addr)
                    .map_err(|e| format!("cannot listen on {addr} ({listener}): {e}"))?;
                l.set_nonblocking(true)
                    .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
                bound = bound.or_else(|| l.local_addr().ok().map(|a| a.port()));
                sockets.push((l, i));
            }
            // A listener `advertised.listeners` does not name advertises
            // what it bound.
            let own = given_advertised
                .iter()
                .find(|a| a.name == listener.name)
                .cloned();
            advertised.push(own.unwrap_or_else(|| Listener {
                endpoint: Endpoint {
                    host: endpoint.host.clone(),
                    port: bound.unwrap_or(endpoint.port),
                },
                ..listener.clone()
            }));
        }
        let addrs: Vec<(SocketAddr, usize)> = sockets
            .iter()
            .filter_map(|(s, i)| Some((s.local_addr().ok()?, *i)))
            .collect();
        let nofile = nofile_limit();
        let max_partitions = mgr.max_partitions() as u64;
        let quotas = ConnectionQuotas::new(&config, fd_cap(nofile, max_partitions));
        let pool = MemoryPool::new(config.queued_max_request_bytes());
        let idle = config.idle_timeout();
        let max_request = config.socket_request_max_bytes;
        let threads = config.num_network_threads as usize;
        let scram = if mgr.read_only() {
            CredentialStore::open_read_only(mgr.dir())?
        } else {
            CredentialStore::open(mgr.dir())?
        };
        for text in &config.add_scram {
            let (user, mechanism, credential) = super::auth::parse_add_scram(text)?;
            scram
                .upsert(&user, mechanism, credential)
                .map_err(|e| format!("cannot store the SCRAM credential of {user}: {e}"))?;
            info!(
                "SCRAM credential of user {user:?} ({}) set from --add-scram",
                mechanism.mechanism_name()
            );
        }
        let authorizer = if config.authorizer {
            let settings = AuthorizerSettings {
                super_users: config.super_users.iter().cloned().collect(),
                allow_everyone_if_no_acl: config.allow_everyone_if_no_acl,
            };
            let store = AclStore::open(mgr.dir(), mgr.read_only())?;
            info!(
                "Kafka: ACLs enforced (StandardAuthorizer): {} ACLs, super users [{}], \
                 allow.everyone.if.no.acl.found={}",
                store.snapshot().len(),
                config.super_users.join(";"),
                settings.allow_everyone_if_no_acl
            );
            Some(Authorizer::new(settings, store))
        } else {
            None
        };
        let mut broker = Broker::new(mgr, config, advertised, scram);
        broker.authorizer = authorizer;
        let broker = Arc::new(broker);
        let workers = Workers::new(broker.clone())?;
        let cleaner = super::group::Cleaner::start(broker.clone())?;
        let txn_cleaner = super::txn::cleanup::TxnCleaner::start(broker.clone())?;
        let shared = Arc::new(Shared {
            broker,
            tls,
            sasl,
            failed_auth_delay,
            quotas,
            pool,
            workers,
            idle,
            max_request,
        });
        let mut server = KafkaServer {
            shared: shared.clone(),
            addrs,
            acceptor: None,
            processors: Vec::new(),
            cleaner: Some(cleaner),
            txn_cleaner: Some(txn_cleaner),
            stopped: false,
        };
        for i in 0..threads {
            let poll = Poll::new().map_err(|e| format!("cannot create a poller: {e}"))?;
            let waker = Waker::new(poll.registry(), WAKER)
                .map_err(|e| format!("cannot create a poll waker: {e}"))?;
            let handle = Arc::new(ProcessorHandle {
                waker,
                inbox: Mutex::new(Inbox::default()),
            });
            let h2 = handle.clone();
            shared.pool.on_release(Arc::new(move || {
                h2.inbox.lock().memory = true;
                let _ = h2.waker.wake();
            }));
            let mut p = Processor {
                poll,
                handle: handle.clone(),
                shared: shared.clone(),
                conns: HashMap::new(),
                next_id: 0,
                waiting_memory: VecDeque::new(),
                closing: VecDeque::new(),
            };
            let t = std::thread::Builder::new()
                .name(format!("kafka-network-{i}"))
                .spawn(move || p.run())
                .map_err(|e| format!("cannot start a Kafka network thread: {e}"))?;
            server.processors.push((t, handle));
        }
        let poll = Poll::new().map_err(|e| format!("cannot create a poller: {e}"))?;
        let waker = Arc::new(
            Waker::new(poll.registry(), WAKER)
                .map_err(|e| format!("cannot create a poll waker: {e}"))?,
        );
        let w2 = waker.clone();
        shared.quotas.set_acceptor(Arc::new(move || {
            let _ = w2.wake();
        }));
        let listeners_shown = listeners.clone();
        let mut listeners = Vec::new();
        for (token, (s, i)) in sockets.into_iter().enumerate() {
            let mut l = TcpListener::from_std(s);
            poll.registry()
                .register(&mut l, Token(token), Interest::READABLE)
                .map_err(|e| format!("cannot poll the listener: {e}"))?;
            listeners.push((l, i));
        }
        let mut acceptor = Acceptor {
            poll,
            listeners,
            shared: shared.clone(),
            processors: server.processors.iter().map(|(_, h)| h.clone()).collect(),
            next: 0,
            spare: spare_fd(),
        };
        let t = std::thread::Builder::new()
            .name("kafka-acceptor".into())
            .spawn(move || acceptor.run())
            .map_err(|e| format!("cannot start the Kafka accept thread: {e}"))?;
        server.acceptor = Some((t, waker));
        for (a, i) in &server.addrs {
            let l = &shared.broker.advertised[*i];
            let mut security = match &shared.tls[*i] {
                None => "no authentication".to_string(),
                Some(_) => format!(
                    "TLS, client certificates {}",
                    client_auth_shown(&shared.broker.config, &listeners_shown[*i])
                ),
            };
            if let Some(mechanisms) = &shared.sasl[*i] {
                let sasl = format!("SASL {}", mechanisms.join(" "));
                security = match &shared.tls[*i] {
                    None => sasl,
                    Some(_) => format!("{sasl}, {security}"),
                };
            }
            info!(
                "Kafka listener on {a} ({}, {}, {security}), advertised as {}",
                l.name,
                l.protocol.name(),
                l.endpoint
            );
        }
        let queued = match shared.pool.size() {
            Some(n) => format!("{n} bytes"),
            None => "no bound".to_string(),
        };
        info!(
            "Kafka listener limits: {} connections at most (max.connections={}, and \
             RLIMIT_NOFILE={nofile} less {} descriptors kept for storage), max.connections.per.ip={}, \
             connections.max.idle.ms={}, queued.max.request.bytes: {queued}, {threads} network threads",
            shared.quotas.max_total(),
            shared.broker.config.max_connections,
            super::limits::storage_fds(nofile, shared.broker.mgr.max_partitions() as u64),
            shared.broker.config.max_connections_per_ip,
            shared.broker.config.connections_max_idle_ms,
        );
        Ok(Some(server))
    }

    /// The group coordinator, as the tree's `groups/` shows it.
    pub fn groups(&self) -> super::group::admin::CoordinatorGroups {
        let b = &self.shared.broker;
        let first = b.advertised(0);
        let id = crate::backend::groups::Coordinator {
            id: b.node_id(),
            host: first.host.clone(),
            port: first.port as i32,
        };
        super::group::admin::CoordinatorGroups::new(b.groups.clone(), b.mgr.clone(), Some(id))
    }

    /// The addresses actually bound, of every listener.
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.addrs.iter().map(|(a, _)| *a).collect()
    }

    /// Stops accepting, closes every connection and waits for every thread
    /// (handlers included), so the caller may close the storage.
    pub fn stop(&mut self) {
        if std::mem::replace(&mut self.stopped, true) {
            return;
        }
        self.shared.broker.stop();
        if let Some(mut cleaner) = self.txn_cleaner.take() {
            cleaner.stop();
        }
        if let Some(mut cleaner) = self.cleaner.take() {
            cleaner.stop();
        }
        if let Some((t, waker)) = self.acceptor.take() {
            let _ = waker.wake();
            let _ = t.join();
        }
        // Handlers first: a running one may still produce; its response is
        // dropped with its connection.
        self.shared.workers.stop();
        let mut closed = 0;
        for (t, h) in self.processors.drain(..) {
            let _ = h.waker.wake();
            if let Ok(n) = t.join() {
                closed += n;
            }
            // Responses that arrived after the thread ended hold segment
            // files: drop them before the storage closes.
            h.inbox.lock().done.clear();
        }
        info!("Kafka listener stopped; closed {closed} connections");
    }
}

impl Drop for KafkaServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Whether a TLS listener asks for client certificates, for its log line.
fn client_auth_shown(config: &ListenerConfig, l: &Listener) -> &'static str {
    let prefixed = format!(
        "listener.name.{}.ssl.client.auth",
        l.name.to_ascii_lowercase()
    );
    let v = config.security.get(&prefixed).or(match l.protocol {
        SecurityProtocol::SaslSsl => None,
        _ => config.security.get("ssl.client.auth"),
    });
    match v.map(|v| v.trim()) {
        Some("required") => "required",
        Some("requested") => "requested",
        _ => "not asked for",
    }
}

/// A descriptor kept open to be given up when `accept` runs out of them, so
/// the connection waiting can be accepted and refused rather than left hanging.
fn spare_fd() -> Option<OwnedFd> {
    // SAFETY: open(2) of a constant path; the result is checked.
    let fd = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    // SAFETY: a descriptor we just opened and own.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
}

fn out_of_fds(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE))
}

struct Acceptor {
    poll: Poll,
    /// Each socket, with the index of its listener.
    listeners: Vec<(TcpListener, usize)>,
    shared: Arc<Shared>,
    processors: Vec<Arc<ProcessorHandle>>,
    next: usize,
    spare: Option<OwnedFd>,
}

impl Acceptor {
    fn run(&mut self) {
        let mut events = Events::with_capacity(64);
        let mut retry: Option<Duration> = None;
        loop {
            if let Err(e) = self.poll.poll(&mut events, retry)
                && e.kind() != ErrorKind::Interrupted
            {
                error!("Kafka listener: poll failed: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
            if self.shared.broker.stopping() {
                return;
            }
            // Edge-triggered: every listener is drained (or the cap is met)
            // whatever woke us, a freed slot included.
            retry = None;
            for i in 0..self.listeners.len() {
                if let Some(r) = self.accept_from(i) {
                    retry = Some(r);
                }
            }
        }
    }

    /// Accepts from listener `i` until it would block or the cap is met;
    /// `Some(wait)` to try again after `wait` whatever happens.
    fn accept_from(&mut self, i: usize) -> Option<Duration> {
        loop {
            if !self.shared.quotas.slot_available() {
                // max.connections: the acceptor waits for a close (its waker).
                return None;
            }
            match self.listeners[i].0.accept() {
                Ok((stream, peer)) => self.admit(stream, peer, self.listeners[i].1),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return None,
                Err(e) if out_of_fds(&e) => {
                    if !self.refuse_one(i, &e) {
                        return Some(Duration::from_millis(100));
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::ConnectionAborted => {}
                Err(e) => {
                    warn!("Kafka listener: accept failed: {e}");
                    return Some(Duration::from_millis(100));
                }
            }
        }
    }

    /// Out of descriptors: gives up the spare, accepts the waiting
    /// connection on it and closes it, then takes the spare back. Returns
    /// whether a connection was refused that way.
    fn refuse_one(&mut self, i: usize, e: &std::io::Error) -> bool {
        let Some(spare) = self.spare.take() else {
            warn!("Kafka listener: cannot accept a connection: {e}; retrying");
            self.spare = spare_fd();
            return false;
        };
        drop(spare);
        let refused = match self.listeners[i].0.accept() {
            Ok((stream, peer)) => {
                drop(stream);
                warn!(
                    "Kafka listener: refused a connection from {peer}: the daemon is out of file \
                     descriptors ({e}); raise RLIMIT_NOFILE or lower max.connections"
                );
                true
            }
            Err(_) => false,
        };
        self.spare = spare_fd();
        refused
    }

    fn admit(&mut self, stream: TcpStream, peer: SocketAddr, listener: usize) {
        let ip = peer.ip();
        if let Err(too_many) = self.shared.quotas.inc(ip) {
            info!(
                "Rejected connection from {}, address already has the configured maximum of {} \
                 connections.",
                too_many.ip, too_many.max
            );
            drop(stream);
            self.shared.quotas.dec(ip);
            return;
        }
        let _ = stream.set_nodelay(true);
        set_keepalive(&stream);
        let p = &self.processors[self.next % self.processors.len()];
        self.next = self.next.wrapping_add(1);
        p.inbox.lock().new_conns.push((stream, peer, listener));
        let _ = p.waker.wake();
    }
}

fn set_keepalive(s: &TcpStream) {
    set_int_option(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1);
}

/// Acknowledges what was read now rather than after the delayed-ACK
/// timer. Kafka's request-and-answer rhythm puts a socket in Linux's
/// interactive mode, which holds ACKs back to ride on the answer; a TLS
/// client sends a request as many small records, and one that keeps
/// Nagle's algorithm on (librdkafka with `socket.nagle.disable=false`, the
/// default of its older releases) then waits for an ACK before each small
/// record: produce through TLS fell to a seventh of PLAINTEXT (bench_security,
/// BENCHMARKS.md). Linux leaves quick-ACK mode by itself, so it is asked
/// again after each read.
fn quick_ack(s: &TcpStream) {
    set_int_option(s.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_QUICKACK, 1);
}

/// A network thread's mailbox: new connections from the acceptor, finished
/// requests from the handlers, and word that pool memory came back.
#[derive(Default)]
struct Inbox {
    new_conns: Vec<(TcpStream, SocketAddr, usize)>,
    done: Vec<(usize, Done)>,
    memory: bool,
}

struct ProcessorHandle {
    waker: Waker,
    inbox: Mutex<Inbox>,
}

impl Completions for ProcessorHandle {
    fn complete(&self, conn: usize, done: Done) {
        self.inbox.lock().done.push((conn, done));
        let _ = self.waker.wake();
    }
}

/// Where a connection is in its request cycle.
enum Phase {
    /// Reading the 4-byte size of the next request.
    Size { buf: [u8; 4], got: usize },
    /// The size is known; the memory pool is empty, so nothing is read.
    NeedMemory { size: usize },
    /// Reading the request's bytes into memory taken from the pool.
    Body {
        /// Zeroed ahead of `filled` by at most [`READ_CHUNK`], once: a TLS
        /// read brings one record (16 KiB) at a time, and zeroing a whole
        /// chunk before each would cost more than the bytes.
        buf: Vec<u8>,
        /// Bytes of `buf` read so far.
        filled: usize,
        size: usize,
        lease: Lease,
    },
    /// A handler (or the purgatory) has the request; nothing is read.
    InFlight,
    /// Writing the response.
    Writing(Outgoing),
}

/// One connection: its socket, and its TLS state on a TLS listener.
struct Conn {
    stream: TcpStream,
    tls: Option<Box<TlsConn>>,
    peer: SocketAddr,
    /// The index of the listener it came in on.
    listener: usize,
    /// Who the connection authenticated as.
    principal: Principal,
    /// Where its SASL exchange is, on a SASL listener.
    sasl: Sasl,
    phase: Phase,
    /// Last read or write, for `connections.max.idle.ms`.
    active: Instant,
}

impl Conn {
    fn new(
        stream: TcpStream,
        peer: SocketAddr,
        listener: usize,
        tls: Option<Box<TlsConn>>,
        sasl: Sasl,
    ) -> Conn {
        Conn {
            stream,
            tls,
            peer,
            listener,
            principal: Principal::anonymous(),
            sasl,
            phase: Phase::Size {
                buf: [0; 4],
                got: 0,
            },
            active: Instant::now(),
        }
    }
}

/// A connection's SASL exchange.
enum Sasl {
    /// No SASL on its listener, or authenticated: requests are served.
    Off,
    /// Authenticating: its next frame goes to the exchange.
    Waiting(Box<Authenticator>),
    /// A frame of the exchange is with a handler.
    Busy,
    /// Failed: the connection closes once its answer is out and the delay passed.
    Failed,
}

/// What pumping a connection came to.
enum Step {
    /// Nothing more to do until the next event.
    Wait,
    /// A whole request was read: hand it to the handlers.
    Request(Bytes, Lease),
    /// The pool is empty: park the connection until memory comes back.
    NeedMemory,
    Close(Closing),
}

/// Why a connection is closed, and how loudly.
enum Closing {
    /// The peer closed between requests: normal.
    Peer,
    /// An I/O error or a close inside a request.
    Io(String),
    /// Refused: logged as a warning.
    Refused(Refusal),
    Idle,
    /// Idle in the middle of its TLS handshake.
    Handshake,
    /// Its SASL authentication failed (logged then) and the delay passed.
    AuthenticationFailed,
}

struct Processor {
    poll: Poll,
    handle: Arc<ProcessorHandle>,
    shared: Arc<Shared>,
    conns: HashMap<usize, Conn>,
    next_id: usize,
    /// Connections waiting for pool memory, in the order they asked.
    waiting_memory: VecDeque<usize>,
    /// Connections whose authentication failed, with when they close
    /// (in that order: the delay is the same for all).
    closing: VecDeque<(Instant, usize)>,
}

impl Processor {
    /// Serves until the listener stops; returns how many connections it closed then.
    fn run(&mut self) -> usize {
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
        for (mut stream, peer, listener) in new_conns {
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
                continue;
            }
            let tls = match &self.shared.tls[listener] {
                None => None,
                Some(config) => match TlsConn::new(config.clone()) {
                    Ok(t) => Some(Box::new(t)),
                    Err(e) => {
                        warn!("Kafka: dropping the connection from {peer}: cannot start TLS: {e}");
                        let _ = self.poll.registry().deregister(&mut stream);
                        self.shared.quotas.dec(peer.ip());
                        continue;
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
        for (id, done) in done {
            let Some(conn) = self.conns.get_mut(&id) else {
                continue; // closed meanwhile
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
                    continue;
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
                    continue;
                }
            }
            self.pump(id);
        }
        if memory {
            // Memory came back: the paused connections read again, oldest first.
            let waiting = std::mem::take(&mut self.waiting_memory);
            for id in waiting {
                self.pump(id);
            }
        }
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

/// Reads and writes what the connection's phase calls for, until the
/// socket would block or a request is whole.
fn advance(conn: &mut Conn, shared: &Shared) -> Step {
    // What TLS holds for the socket goes first: the socket may have become
    // writable for it alone.
    if let Some(tls) = &mut conn.tls {
        match tls.flush(&mut conn.stream) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) => return Step::Close(Closing::Io(format!("writing failed: {e}"))),
        }
    }
    loop {
        match &mut conn.phase {
            Phase::InFlight => return Step::Wait,
            Phase::Writing(out) => match match &mut conn.tls {
                None => out.write_to(&mut conn.stream),
                Some(tls) => out.write_into(&mut TlsSink {
                    tls,
                    sock: &mut conn.stream,
                }),
            } {
                Ok(Progress::Done) => {
                    conn.active = Instant::now();
                    if matches!(conn.sasl, Sasl::Failed) {
                        // Nothing more is read: the close is on its way.
                        conn.phase = Phase::InFlight;
                        return Step::Wait;
                    }
                    conn.phase = Phase::Size {
                        buf: [0; 4],
                        got: 0,
                    };
                }
                Ok(Progress::Blocked) => {
                    conn.active = Instant::now();
                    return Step::Wait;
                }
                Err(e) => return Step::Close(Closing::Io(format!("writing failed: {e}"))),
            },
            Phase::Size { buf, got } => match read(
                &mut conn.stream,
                &mut conn.tls,
                &mut conn.principal,
                conn.peer,
                &mut buf[*got..],
            ) {
                Ok(0) if *got == 0 => return Step::Close(Closing::Peer),
                Ok(0) => {
                    return Step::Close(Closing::Io(
                        "connection closed inside a request size".to_string(),
                    ));
                }
                Ok(n) => {
                    conn.active = Instant::now();
                    *got += n;
                    if *got < 4 {
                        continue;
                    }
                    // Before authentication, Kafka reads no more than
                    // sasl.server.max.receive.size.
                    let authenticating = !matches!(conn.sasl, Sasl::Off);
                    let max = match authenticating {
                        true => shared.max_request.min(MAX_RECEIVE_SIZE),
                        false => shared.max_request,
                    };
                    let size = match frame_size(*buf, max) {
                        Ok(size) => size,
                        Err(Refusal::FrameTooLarge { size, max }) if authenticating => {
                            let r = Refusal::SaslFrameTooLarge { size, max };
                            return Step::Close(Closing::Refused(r));
                        }
                        Err(r) => return Step::Close(Closing::Refused(r)),
                    };
                    conn.phase = Phase::NeedMemory { size };
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Step::Wait,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Step::Close(Closing::Io(e.to_string())),
            },
            Phase::NeedMemory { size } => {
                let size = *size;
                // Kafka takes the whole size from the pool at once, so a
                // request that got its memory can always be read to its end.
                let Some(lease) = shared.pool.try_allocate(size.max(1)) else {
                    return Step::NeedMemory;
                };
                // The buffer's pages are touched only as bytes arrive.
                conn.phase = Phase::Body {
                    buf: Vec::with_capacity(size),
                    filled: 0,
                    size,
                    lease,
                };
            }
            Phase::Body {
                buf, filled, size, ..
            } => {
                if *filled == *size {
                    let Phase::Body {
                        mut buf,
                        size,
                        lease,
                        ..
                    } = std::mem::replace(&mut conn.phase, Phase::InFlight)
                    else {
                        unreachable!("the phase was just matched as Body");
                    };
                    buf.truncate(size);
                    return Step::Request(Bytes::from(buf), lease);
                }
                let start = *filled;
                let want = (*size - start).min(READ_CHUNK);
                if buf.len() < start + want {
                    buf.resize(start + want, 0);
                }
                let r = read(
                    &mut conn.stream,
                    &mut conn.tls,
                    &mut conn.principal,
                    conn.peer,
                    &mut buf[start..start + want],
                );
                match r {
                    Ok(0) => {
                        return Step::Close(Closing::Io(format!(
                            "connection closed after {start} of a {size}-byte request"
                        )));
                    }
                    Ok(n) => {
                        *filled += n;
                        conn.active = Instant::now();
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => return Step::Wait,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) => return Step::Close(Closing::Io(e.to_string())),
                }
            }
        }
    }
}

/// Reads a connection's bytes: through TLS on a TLS listener, where the end
/// of the handshake sets the connection's principal and a failed handshake
/// is logged (with the alert sent) and ends the connection.
fn read(
    stream: &mut TcpStream,
    tls: &mut Option<Box<TlsConn>>,
    principal: &mut Principal,
    peer: SocketAddr,
    buf: &mut [u8],
) -> std::io::Result<usize> {
    let Some(tls) = tls else {
        return stream.read(buf);
    };
    let handshaking = tls.handshaking();
    let r = tls.read(stream, buf);
    if matches!(&r, Ok(1..))
        || matches!(&r, Err(TlsError::Io(e)) if e.kind() == ErrorKind::WouldBlock)
    {
        quick_ack(stream);
    }
    if let Some(p) = tls.take_principal() {
        debug!("Kafka: TLS connection from {peer} established as {p}");
        *principal = p;
    }
    match r {
        Ok(n) => Ok(n),
        Err(TlsError::Io(e)) => Err(e),
        Err(TlsError::Protocol(e)) => {
            tls.send_alert(stream);
            if handshaking {
                warn!("Kafka: failed authentication with {peer} (SSL handshake failed: {e})");
            } else {
                warn!("Kafka: closing the connection from {peer}: a TLS error: {e}");
            }
            Err(std::io::Error::new(
                ErrorKind::InvalidData,
                format!("TLS: {e}"),
            ))
        }
    }
}
