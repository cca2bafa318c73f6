//! The listener: a thread that accepts, a thread per connection with
//! blocking I/O, and a shutdown that closes every socket and waits for every
//! thread before the caller closes the storage.

use std::collections::HashMap;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use log::{debug, error, info, warn};
use parking_lot::Mutex;

use super::broker::Broker;
use super::config::{Endpoint, ListenerConfig};
use super::dispatch::handle_frame;
use super::frame::{Incoming, ReadError, read_frame};
use crate::storage::LogManager;

/// A running listener. [`KafkaServer::stop`] (or drop) ends it.
pub struct KafkaServer {
    broker: Arc<Broker>,
    sockets: Vec<Arc<TcpListener>>,
    accepting: Vec<JoinHandle<()>>,
    conns: Arc<Connections>,
    stopped: bool,
}

#[derive(Default)]
struct Connections {
    next_id: AtomicU64,
    /// A second handle on each open socket, to shut it down from outside.
    open: Mutex<HashMap<u64, TcpStream>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl KafkaServer {
    /// Binds the configured listener and starts serving; `Ok(None)` when no
    /// listener is configured (the default: nothing listens).
    pub fn start(
        mgr: Arc<LogManager>,
        config: ListenerConfig,
    ) -> Result<Option<KafkaServer>, String> {
        config.check()?;
        let Some(endpoint) = config.listener.clone() else {
            return Ok(None);
        };
        let mut sockets: Vec<Arc<TcpListener>> = Vec::new();
        for addr in endpoint.resolve()? {
            // Port 0 binds a free port; every address of a name shares it.
            let addr = match sockets.first() {
                Some(first) if endpoint.port == 0 => {
                    SocketAddr::new(addr.ip(), local_port(first).unwrap_or(0))
                }
                _ => addr,
            };
            let l = TcpListener::bind(addr)
                .map_err(|e| format!("cannot listen on {addr} ({endpoint}): {e}"))?;
            sockets.push(Arc::new(l));
        }
        let port = sockets
            .first()
            .and_then(|s| local_port(s))
            .unwrap_or(endpoint.port);
        let advertised = config.advertised.clone().unwrap_or(Endpoint {
            host: endpoint.host.clone(),
            port,
        });
        let broker = Arc::new(Broker::new(mgr, config, advertised));
        let conns = Arc::new(Connections::default());
        let mut accepting = Vec::new();
        for s in &sockets {
            let (s, broker, conns) = (s.clone(), broker.clone(), conns.clone());
            let h = std::thread::Builder::new()
                .name("kafka-accept".into())
                .spawn(move || accept_loop(&s, &broker, &conns))
                .map_err(|e| format!("cannot start the Kafka accept thread: {e}"))?;
            accepting.push(h);
        }
        for s in &sockets {
            if let Ok(a) = s.local_addr() {
                info!(
                    "Kafka listener on {a} (PLAINTEXT, no authentication), advertised as {}",
                    broker.advertised
                );
            }
        }
        Ok(Some(KafkaServer {
            broker,
            sockets,
            accepting,
            conns,
            stopped: false,
        }))
    }

    /// The addresses actually bound.
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.sockets
            .iter()
            .filter_map(|s| s.local_addr().ok())
            .collect()
    }

    /// Stops accepting, closes every connection and waits for their threads.
    pub fn stop(&mut self) {
        if std::mem::replace(&mut self.stopped, true) {
            return;
        }
        self.broker.stop();
        for s in &self.sockets {
            // SAFETY: shutdown on a listening socket we own wakes its accept().
            unsafe { libc::shutdown(s.as_raw_fd(), libc::SHUT_RDWR) };
        }
        for h in self.accepting.drain(..) {
            let _ = h.join();
        }
        let open: Vec<TcpStream> = self.conns.open.lock().drain().map(|(_, s)| s).collect();
        let n = open.len();
        for s in open {
            let _ = s.shutdown(Shutdown::Both);
        }
        let threads: Vec<_> = self.conns.threads.lock().drain(..).collect();
        for h in threads {
            let _ = h.join();
        }
        info!("Kafka listener stopped; closed {n} connections");
    }
}

impl Drop for KafkaServer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn local_port(l: &TcpListener) -> Option<u16> {
    l.local_addr().ok().map(|a| a.port())
}

fn accept_loop(listener: &TcpListener, broker: &Arc<Broker>, conns: &Arc<Connections>) {
    loop {
        let accepted = listener.accept();
        if broker.stopping() {
            return;
        }
        let (stream, peer) = match accepted {
            Ok(x) => x,
            Err(e) => {
                // EMFILE and friends: back off rather than spin.
                warn!("Kafka listener: accept failed: {e}");
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        let id = conns.next_id.fetch_add(1, Ordering::Relaxed);
        match stream.try_clone() {
            Ok(handle) => {
                conns.open.lock().insert(id, handle);
            }
            Err(e) => {
                warn!("Kafka listener: dropping connection from {peer}: {e}");
                continue;
            }
        }
        let (broker2, conns2) = (broker.clone(), conns.clone());
        let spawned = std::thread::Builder::new()
            .name(format!("kafka-conn-{id}"))
            .spawn(move || {
                serve_connection(&broker2, stream, peer);
                conns2.open.lock().remove(&id);
            });
        let mut threads = conns.threads.lock();
        threads.retain(|h| !h.is_finished());
        match spawned {
            Ok(h) => threads.push(h),
            Err(e) => {
                error!("Kafka listener: cannot start a connection thread for {peer}: {e}");
                conns.open.lock().remove(&id);
            }
        }
    }
}

/// One connection: requests are read and answered in order, one at a time,
/// as Kafka does per connection.
fn serve_connection(broker: &Broker, mut stream: TcpStream, peer: SocketAddr) {
    debug!("Kafka: connection from {peer}");
    super::group::set_peer(&peer);
    let _ = stream.set_nodelay(true);
    let max = broker.config.socket_request_max_bytes;
    loop {
        let frame = match read_frame(&mut stream, max) {
            Ok(Incoming::Frame(f)) => f,
            Ok(Incoming::Closed) => break,
            Err(ReadError::Refused(r)) => {
                warn!("Kafka: closing the connection from {peer}: {r}");
                break;
            }
            Err(ReadError::Io(e)) => {
                if !broker.stopping() {
                    debug!("Kafka: connection from {peer} ended: {e}");
                }
                break;
            }
        };
        // A bug must cost one connection, never the daemon.
        let handled =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handle_frame(broker, frame)));
        match handled {
            Ok(Ok(Some(resp))) => {
                if let Err(e) = resp.body.write_to(&mut stream, &resp.prefix) {
                    debug!("Kafka: writing to {peer} failed: {e}");
                    break;
                }
            }
            Ok(Ok(None)) => {}
            Ok(Err(r)) => {
                warn!("Kafka: closing the connection from {peer}: {r}");
                break;
            }
            Err(_) => {
                error!("Kafka: a request from {peer} panicked; closing its connection");
                break;
            }
        }
    }
    let _ = stream.shutdown(Shutdown::Both);
    debug!("Kafka: connection from {peer} closed");
}
