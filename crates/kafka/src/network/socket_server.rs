//! The listener's threads, shaped like Kafka's `SocketServer`: an acceptor
//! thread (`acceptor`), `num.network.threads` network threads that each poll their
//! connections (`processor`, non-blocking sockets, epoll through `mio`), and
//! the request handlers (`handlers::workers`) that run requests off the
//! network threads. Each connection is a small state machine on its network
//! thread (`connection`).
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
use std::sync::Arc;
use std::thread::JoinHandle;

use mio::net::TcpListener;
use mio::{Interest, Poll, Token, Waker};
use parking_lot::Mutex;

use super::acceptor::{Acceptor, spare_fd};
use super::processor::{Inbox, Processor, ProcessorHandle};
use super::shared::{Shared, WAKER};

/// Starts network thread `i`.
pub(crate) fn spawn_processor(
    shared: &Arc<Shared>,
    i: usize,
) -> Result<(JoinHandle<usize>, Arc<ProcessorHandle>), String> {
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
    Ok((t, handle))
}

/// Starts the acceptor over the bound sockets.
pub(crate) fn spawn_acceptor(
    shared: &Arc<Shared>,
    sockets: Vec<(std::net::TcpListener, usize)>,
    processors: Vec<Arc<ProcessorHandle>>,
) -> Result<(JoinHandle<()>, Arc<Waker>), String> {
    let poll = Poll::new().map_err(|e| format!("cannot create a poller: {e}"))?;
    let waker = Arc::new(
        Waker::new(poll.registry(), WAKER)
            .map_err(|e| format!("cannot create a poll waker: {e}"))?,
    );
    let w2 = waker.clone();
    shared.quotas.set_acceptor(Arc::new(move || {
        let _ = w2.wake();
    }));
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
        processors,
        next: 0,
        spare: spare_fd(),
    };
    let t = std::thread::Builder::new()
        .name("kafka-acceptor".into())
        .spawn(move || acceptor.run())
        .map_err(|e| format!("cannot start the Kafka accept thread: {e}"))?;
    Ok((t, waker))
}
