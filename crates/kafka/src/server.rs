//! The broker, as Kafka's `BrokerServer`: what `commitfs serve` and
//! `commitfs mount` start and stop. It checks the settings, binds the
//! listeners, opens the credentials and the ACLs, and starts the network
//! layer (`network`), the request handlers (`handlers::workers`) and the
//! coordinators' expiry threads.

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use log::info;
use mio::Waker;

use crate::acl::{AclStore, Authorizer, AuthorizerSettings};
use crate::auth::CredentialStore;
use crate::broker::Broker;
use crate::config::{Endpoint, Listener, ListenerConfig, SecurityProtocol};
use crate::handlers::workers::Workers;
use crate::network::limits::{ConnectionQuotas, MemoryPool, fd_cap, nofile_limit};
use crate::network::processor::ProcessorHandle;
use crate::network::shared::Shared;
use crate::network::socket_server::{spawn_acceptor, spawn_processor};
use commitfs_storage::LogManager;

/// A running listener. [`KafkaServer::stop`] (or drop) ends it.
pub struct KafkaServer {
    shared: Arc<Shared>,
    /// Each bound address, with the index of its listener.
    addrs: Vec<(SocketAddr, usize)>,
    acceptor: Option<(JoinHandle<()>, Arc<Waker>)>,
    processors: Vec<(JoinHandle<usize>, Arc<ProcessorHandle>)>,
    /// Expires committed offsets and removes empty groups.
    cleaner: Option<crate::group::Cleaner>,
    txn_cleaner: Option<crate::txn::cleanup::TxnCleaner>,
    stopped: bool,
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
        let (sockets, advertised) = bind(&listeners, &given_advertised)?;
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
        let scram = open_scram(&mgr, &config)?;
        let authorizer = open_authorizer(&mgr, &config)?;
        let mut broker = Broker::new(mgr, config, advertised, scram);
        broker.authorizer = authorizer;
        let broker = Arc::new(broker);
        let workers = Workers::new(broker.clone())?;
        let cleaner = crate::group::Cleaner::start(broker.clone())?;
        let txn_cleaner = crate::txn::cleanup::TxnCleaner::start(broker.clone())?;
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
            server.processors.push(spawn_processor(&shared, i)?);
        }
        let handles = server.processors.iter().map(|(_, h)| h.clone()).collect();
        server.acceptor = Some(spawn_acceptor(&shared, sockets, handles)?);
        server.log_started(&listeners, nofile, threads);
        Ok(Some(server))
    }

    /// The listeners' log lines: each bound address with its security, then
    /// the limits in force.
    fn log_started(&self, listeners: &[Listener], nofile: u64, threads: usize) {
        let shared = &self.shared;
        for (a, i) in &self.addrs {
            let l = &shared.broker.advertised[*i];
            let mut security = match &shared.tls[*i] {
                None => "no authentication".to_string(),
                Some(_) => format!(
                    "TLS, client certificates {}",
                    client_auth_shown(&shared.broker.config, &listeners[*i])
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
            crate::network::limits::storage_fds(nofile, shared.broker.mgr.max_partitions() as u64),
            shared.broker.config.max_connections_per_ip,
            shared.broker.config.connections_max_idle_ms,
        );
    }

    /// The group coordinator, as the tree's `groups/` shows it.
    pub fn groups(&self) -> crate::group::admin::CoordinatorGroups {
        let b = &self.shared.broker;
        let first = b.advertised(0);
        let id = commitfs_backend::groups::Coordinator {
            id: b.node_id(),
            host: first.host.clone(),
            port: first.port as i32,
        };
        crate::group::admin::CoordinatorGroups::new(b.groups.clone(), b.mgr.clone(), Some(id))
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

/// Every listener's sockets, with the index of their listener, and what
/// each listener advertises.
type Bound = (Vec<(std::net::TcpListener, usize)>, Vec<Listener>);

/// Binds every address of every listener.
fn bind(listeners: &[Listener], given_advertised: &[Listener]) -> Result<Bound, String> {
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
    Ok((sockets, advertised))
}

/// The users' SCRAM credentials, with `--add-scram`'s set.
fn open_scram(mgr: &LogManager, config: &ListenerConfig) -> Result<Arc<CredentialStore>, String> {
    let scram = if mgr.read_only() {
        CredentialStore::open_read_only(mgr.dir())?
    } else {
        CredentialStore::open(mgr.dir())?
    };
    for text in &config.add_scram {
        let (user, mechanism, credential) = crate::auth::parse_add_scram(text)?;
        scram
            .upsert(&user, mechanism, credential)
            .map_err(|e| format!("cannot store the SCRAM credential of {user}: {e}"))?;
        info!(
            "SCRAM credential of user {user:?} ({}) set from --add-scram",
            mechanism.mechanism_name()
        );
    }
    Ok(scram)
}

/// The authorizer, when `authorizer.class.name` is set.
fn open_authorizer(
    mgr: &LogManager,
    config: &ListenerConfig,
) -> Result<Option<Authorizer>, String> {
    Ok(if config.authorizer {
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
    })
}
