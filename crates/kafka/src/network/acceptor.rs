//! The acceptor thread, as Kafka's `Acceptor`: it takes connections from
//! every listening socket, applies the connection quotas, and hands each to
//! a network thread in turn.

use std::io::ErrorKind;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

use log::{error, info, warn};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Poll};

use super::processor::ProcessorHandle;
use super::shared::Shared;
use crate::network::splice::set_int_option;

/// A descriptor kept open to be given up when `accept` runs out of them, so
/// the connection waiting can be accepted and refused rather than left hanging.
pub(crate) fn spare_fd() -> Option<OwnedFd> {
    // SAFETY: open(2) of a constant path; the result is checked.
    let fd = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    // SAFETY: a descriptor we just opened and own.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
}

fn out_of_fds(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE))
}

pub(crate) struct Acceptor {
    pub(crate) poll: Poll,
    /// Each socket, with the index of its listener.
    pub(crate) listeners: Vec<(TcpListener, usize)>,
    pub(crate) shared: Arc<Shared>,
    pub(crate) processors: Vec<Arc<ProcessorHandle>>,
    pub(crate) next: usize,
    pub(crate) spare: Option<OwnedFd>,
}

impl Acceptor {
    pub(crate) fn run(&mut self) {
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

pub(crate) fn set_keepalive(s: &TcpStream) {
    set_int_option(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1);
}
