//! One connection's state machine on its network thread: reading a size,
//! waiting for memory, reading a body, in flight (one request at a time, as
//! Kafka answers a connection in order), writing a response. An idle
//! connection costs its socket and a few hundred bytes, no thread. A TLS or
//! SASL handshake becomes one more state before reading, with the socket
//! wrapped (see [`Conn`]).

use std::io::{ErrorKind, Read};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::time::Instant;

use bytes::Bytes;
use log::{debug, warn};
use mio::net::TcpStream;

use super::shared::Shared;
use crate::auth::MAX_RECEIVE_SIZE;
use crate::auth::authenticator::Authenticator;
use crate::error::Refusal;
use crate::network::frame::frame_size;
use crate::network::limits::Lease;
use crate::network::session::Principal;
use crate::network::splice::{Outgoing, Progress, set_int_option};
use crate::network::tls::{TlsConn, TlsError, TlsSink};

/// The largest read into a request body at once (its buffer grows by this).
pub(crate) const READ_CHUNK: usize = 256 * 1024;

/// Acknowledges what was read now rather than after the delayed-ACK
/// timer. Kafka's request-and-answer rhythm puts a socket in Linux's
/// interactive mode, which holds ACKs back to ride on the answer; a TLS
/// client sends a request as many small records, and one that keeps
/// Nagle's algorithm on (librdkafka with `socket.nagle.disable=false`, the
/// default of its older releases) then waits for an ACK before each small
/// record: produce through TLS fell to a seventh of PLAINTEXT (bench_security,
/// BENCHMARKS.md). Linux leaves quick-ACK mode by itself, so it is asked
/// again after each read.
pub(crate) fn quick_ack(s: &TcpStream) {
    set_int_option(s.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_QUICKACK, 1);
}

/// Where a connection is in its request cycle.
pub(crate) enum Phase {
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
pub(crate) struct Conn {
    pub(crate) stream: TcpStream,
    pub(crate) tls: Option<Box<TlsConn>>,
    pub(crate) peer: SocketAddr,
    /// The index of the listener it came in on.
    pub(crate) listener: usize,
    /// Who the connection authenticated as.
    pub(crate) principal: Principal,
    /// Where its SASL exchange is, on a SASL listener.
    pub(crate) sasl: Sasl,
    pub(crate) phase: Phase,
    /// Last read or write, for `connections.max.idle.ms`.
    pub(crate) active: Instant,
}

impl Conn {
    pub(crate) fn new(
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
pub(crate) enum Sasl {
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
pub(crate) enum Step {
    /// Nothing more to do until the next event.
    Wait,
    /// A whole request was read: hand it to the handlers.
    Request(Bytes, Lease),
    /// The pool is empty: park the connection until memory comes back.
    NeedMemory,
    Close(Closing),
}

/// Why a connection is closed, and how loudly.
pub(crate) enum Closing {
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
/// Reads and writes what the connection's phase calls for, until the
/// socket would block or a request is whole.
pub(crate) fn advance(conn: &mut Conn, shared: &Shared) -> Step {
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
        let step = match &conn.phase {
            Phase::InFlight => Some(Step::Wait),
            Phase::Writing(_) => write(conn),
            Phase::Size { .. } => read_size(conn, shared),
            Phase::NeedMemory { size } => {
                let size = *size;
                // Kafka takes the whole size from the pool at once, so a
                // request that got its memory can always be read to its end.
                match shared.pool.try_allocate(size.max(1)) {
                    None => Some(Step::NeedMemory),
                    Some(lease) => {
                        // The buffer's pages are touched only as bytes arrive.
                        conn.phase = Phase::Body {
                            buf: Vec::with_capacity(size),
                            filled: 0,
                            size,
                            lease,
                        };
                        None
                    }
                }
            }
            Phase::Body { .. } => read_body(conn),
        };
        if let Some(step) = step {
            return step;
        }
    }
}

/// Writes the response; `None` when it is out and the next request may be
/// read.
fn write(conn: &mut Conn) -> Option<Step> {
    let Phase::Writing(out) = &mut conn.phase else {
        unreachable!("called in the Writing phase");
    };
    let written = match &mut conn.tls {
        None => out.write_to(&mut conn.stream),
        Some(tls) => out.write_into(&mut TlsSink {
            tls,
            sock: &mut conn.stream,
        }),
    };
    match written {
        Ok(Progress::Done) => {
            conn.active = Instant::now();
            if matches!(conn.sasl, Sasl::Failed) {
                // Nothing more is read: the close is on its way.
                conn.phase = Phase::InFlight;
                return Some(Step::Wait);
            }
            conn.phase = Phase::Size {
                buf: [0; 4],
                got: 0,
            };
            None
        }
        Ok(Progress::Blocked) => {
            conn.active = Instant::now();
            Some(Step::Wait)
        }
        Err(e) => Some(Step::Close(Closing::Io(format!("writing failed: {e}")))),
    }
}

/// Reads the request's size; `None` to go on (more to read, or the size is
/// known).
fn read_size(conn: &mut Conn, shared: &Shared) -> Option<Step> {
    let Phase::Size { buf, got } = &mut conn.phase else {
        unreachable!("called in the Size phase");
    };
    let r = read(
        &mut conn.stream,
        &mut conn.tls,
        &mut conn.principal,
        conn.peer,
        &mut buf[*got..],
    );
    match r {
        Ok(0) if *got == 0 => Some(Step::Close(Closing::Peer)),
        Ok(0) => Some(Step::Close(Closing::Io(
            "connection closed inside a request size".to_string(),
        ))),
        Ok(n) => {
            conn.active = Instant::now();
            *got += n;
            if *got < 4 {
                return None;
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
                    return Some(Step::Close(Closing::Refused(r)));
                }
                Err(r) => return Some(Step::Close(Closing::Refused(r))),
            };
            conn.phase = Phase::NeedMemory { size };
            None
        }
        Err(e) if e.kind() == ErrorKind::WouldBlock => Some(Step::Wait),
        Err(e) if e.kind() == ErrorKind::Interrupted => None,
        Err(e) => Some(Step::Close(Closing::Io(e.to_string()))),
    }
}

/// Reads the request's body; the request once it is whole, `None` to go on.
fn read_body(conn: &mut Conn) -> Option<Step> {
    let Phase::Body {
        buf, filled, size, ..
    } = &mut conn.phase
    else {
        unreachable!("called in the Body phase");
    };
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
        return Some(Step::Request(Bytes::from(buf), lease));
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
        Ok(0) => Some(Step::Close(Closing::Io(format!(
            "connection closed after {start} of a {size}-byte request"
        )))),
        Ok(n) => {
            *filled += n;
            conn.active = Instant::now();
            None
        }
        Err(e) if e.kind() == ErrorKind::WouldBlock => Some(Step::Wait),
        Err(e) if e.kind() == ErrorKind::Interrupted => None,
        Err(e) => Some(Step::Close(Closing::Io(e.to_string()))),
    }
}

/// Reads a connection's bytes: through TLS on a TLS listener, where the end
/// of the handshake sets the connection's principal and a failed handshake
/// is logged (with the alert sent) and ends the connection.
pub(crate) fn read(
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
