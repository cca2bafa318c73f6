//! The listener's settings, with Kafka's broker config names: `listeners`,
//! `advertised.listeners`, `auto.create.topics.enable`, `num.partitions`,
//! `socket.request.max.bytes`, `node.id`, the group coordinator's
//! `offsets.topic.num.partitions` (default 1, where Kafka's 50 would fill the
//! tree), `group.initial.rebalance.delay.ms`, `group.min.session.timeout.ms`,
//! `group.max.session.timeout.ms`, `group.max.size`,
//! `offsets.retention.minutes`, `offsets.retention.check.interval.ms` and
//! `offset.metadata.max.bytes` (Kafka's defaults and validators,
//! `GroupCoordinatorConfig`), the transaction coordinator's
//! `transaction.state.log.num.partitions` (default 1, as for groups),
//! `transaction.max.timeout.ms`,
//! `transaction.abort.timed.out.transaction.cleanup.interval.ms`,
//! `transaction.remove.expired.transaction.cleanup.interval.ms` and
//! `transactional.id.expiration.ms` (`TransactionStateManagerConfig`), and the socket
//! server's limits: `max.connections`, `max.connections.per.ip`,
//! `max.connections.per.ip.overrides`, `connections.max.idle.ms`,
//! `queued.max.request.bytes` and `num.network.threads`, with Kafka's
//! defaults and validators (`SocketServerConfigs`, `KafkaConfig.validateValues`)
//! but one: `queued.max.request.bytes` defaults to `socket.request.max.bytes`
//! rather than Kafka's -1 (no bound), see [`ListenerConfig::queued_max_request_bytes`].

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

mod listeners;
mod settings;

use listeners::csv_list;
pub use listeners::{
    DEFAULT_PROTOCOL_MAP, Endpoint, Listener, SecurityProtocol, parse_listeners, protocol_map,
};

/// Kafka's default `socket.request.max.bytes` (100 MiB).
pub const DEFAULT_SOCKET_REQUEST_MAX_BYTES: usize = 104_857_600;

/// Kafka's default `connections.max.idle.ms` (10 minutes).
pub const DEFAULT_CONNECTIONS_MAX_IDLE_MS: i64 = 600_000;
/// Kafka's default `num.network.threads`.
pub const DEFAULT_NUM_NETWORK_THREADS: u32 = 3;
/// Kafka's default `connection.failed.authentication.delay.ms`: how long a
/// connection whose authentication failed is kept before it is closed, so
/// a client guessing passwords gets on slowly. Kafka requires
/// `connections.max.idle.ms` to exceed it.
pub const FAILED_AUTHENTICATION_DELAY_MS: i64 = 100;

/// The SASL settings (each may also be given listener-prefixed, but the
/// delay, which is the broker's).
pub const SASL_CONFIG_NAMES: &[&str] = &[
    "sasl.enabled.mechanisms",
    "connection.failed.authentication.delay.ms",
];

/// The broker-level names this module understands (besides the topic
/// configs, which storage owns).
pub const BROKER_CONFIG_NAMES: &[&str] = &[
    "listeners",
    "advertised.listeners",
    "listener.security.protocol.map",
    "auto.create.topics.enable",
    "num.partitions",
    "socket.request.max.bytes",
    "node.id",
    "offsets.topic.num.partitions",
    "group.initial.rebalance.delay.ms",
    "group.min.session.timeout.ms",
    "group.max.session.timeout.ms",
    "group.max.size",
    "offsets.retention.minutes",
    "offsets.retention.check.interval.ms",
    "offset.metadata.max.bytes",
    "transaction.state.log.num.partitions",
    "transaction.max.timeout.ms",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms",
    "transaction.remove.expired.transaction.cleanup.interval.ms",
    "transactional.id.expiration.ms",
    "max.connections",
    "max.connections.per.ip",
    "max.connections.per.ip.overrides",
    "connections.max.idle.ms",
    "queued.max.request.bytes",
    "num.network.threads",
    "authorizer.class.name",
];

/// `StandardAuthorizer`'s own settings (the authorizer's, not in Kafka's
/// `KafkaConfig`, so DescribeConfigs does not list them).
pub const AUTHORIZER_CONFIG_NAMES: &[&str] = &["super.users", "allow.everyone.if.no.acl.found"];

/// The one authorizer there is (KRaft's).
pub const STANDARD_AUTHORIZER: &str = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";
/// ZooKeeper's authorizer, gone with ZooKeeper in Kafka 4.0.
pub const ZK_ACL_AUTHORIZER: &str = "kafka.security.authorizer.AclAuthorizer";

/// Whether `name` is a TLS setting: `ssl.*`, or `listener.name.<name>.ssl.*`.
pub fn is_security_name(name: &str) -> bool {
    let base = security_base_name(name);
    crate::network::tls::SSL_CONFIG_NAMES.contains(&base) || SASL_CONFIG_NAMES.contains(&base)
}

/// `ssl.keystore.location` of `listener.name.secure.ssl.keystore.location`.
fn security_base_name(name: &str) -> &str {
    match name.strip_prefix("listener.name.") {
        Some(rest) => rest.split_once('.').map_or(rest, |(_, base)| base),
        None => name,
    }
}

/// The group coordinator's settings, with Kafka's broker config names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupSettings {
    /// `offsets.topic.num.partitions` (Kafka's default is 50; 1 here).
    pub offsets_partitions: u32,
    /// `group.initial.rebalance.delay.ms` (Kafka's default 3000).
    pub initial_delay: Duration,
    /// `group.min.session.timeout.ms` and `group.max.session.timeout.ms`.
    pub min_session: Duration,
    pub max_session: Duration,
    /// `group.max.size` (Kafka's default `i32::MAX`): a JoinGroup past it
    /// is refused with GROUP_MAX_SIZE_REACHED.
    pub max_size: u32,
    /// `offsets.retention.minutes` (Kafka's default 10080, 7 days).
    pub retention_minutes: u32,
    /// `offsets.retention.check.interval.ms` (Kafka's default 600000).
    pub retention_check: Duration,
    /// `offset.metadata.max.bytes` (Kafka's default 4096); an INT with no
    /// validator in Kafka, so a negative one refuses every metadata.
    pub metadata_max_bytes: i32,
}

impl GroupSettings {
    /// `offsets.retention.minutes` in milliseconds, as Kafka's
    /// `offsetsRetentionMs`.
    pub fn retention_ms(&self) -> i64 {
        self.retention_minutes as i64 * 60 * 1000
    }
}

impl Default for GroupSettings {
    fn default() -> Self {
        GroupSettings {
            offsets_partitions: 1,
            initial_delay: Duration::from_millis(3000),
            min_session: Duration::from_millis(6000),
            max_session: Duration::from_millis(1_800_000),
            max_size: i32::MAX as u32,
            retention_minutes: 7 * 24 * 60,
            retention_check: Duration::from_millis(600_000),
            metadata_max_bytes: 4096,
        }
    }
}

/// The Kafka face's settings. Without `listeners` nothing listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListenerConfig {
    /// `listeners` as given.
    pub listeners_text: Option<String>,
    /// `advertised.listeners` as given: what Metadata tells the clients of
    /// each listener to connect to; the bound address by default.
    pub advertised_text: Option<String>,
    /// `listener.security.protocol.map` as given.
    pub protocol_map_text: Option<String>,
    pub auto_create_topics: bool,
    /// Partitions of a topic created by Metadata's auto-creation.
    pub num_partitions: u32,
    pub socket_request_max_bytes: usize,
    /// This broker's id in Metadata (Kafka's `node.id`).
    pub node_id: i32,
    /// The group coordinator's settings.
    pub groups: GroupSettings,
    /// `transaction.state.log.num.partitions`: 1 by default here (Kafka's
    /// 50 would add 50 directories to the tree), as for groups.
    pub txn_state_partitions: u32,
    /// `transaction.max.timeout.ms`: the longest transaction timeout a
    /// producer may ask for.
    pub txn_max_timeout_ms: i32,
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms`: how
    /// often timed-out transactions are looked for.
    pub txn_abort_interval_ms: u64,
    /// `transaction.remove.expired.transaction.cleanup.interval.ms`: how
    /// often idle transactional ids are looked for.
    pub txn_expire_interval_ms: u64,
    /// `transactional.id.expiration.ms`: how long an id with no transaction
    /// open is kept without a change.
    pub txn_id_expiration_ms: u64,
    /// `max.connections`: past it the listener stops accepting until a
    /// connection closes (Kafka's default: `i32::MAX`).
    pub max_connections: u32,
    /// `max.connections.per.ip`: a connection past it is accepted and closed.
    pub max_connections_per_ip: u32,
    /// `max.connections.per.ip.overrides`, resolved to addresses.
    pub max_connections_per_ip_overrides: HashMap<IpAddr, u32>,
    /// The text it was given, for DescribeConfigs and messages.
    pub max_connections_per_ip_overrides_text: String,
    /// `connections.max.idle.ms`; negative: connections are never closed for idleness.
    pub connections_max_idle_ms: i64,
    /// `queued.max.request.bytes` as given; `None`: not given (see
    /// [`ListenerConfig::queued_max_request_bytes`]).
    pub queued_max_request_bytes_set: Option<i64>,
    /// `num.network.threads`: the threads that read requests and write responses.
    pub num_network_threads: u32,
    /// The TLS settings (`ssl.*`, and `listener.name.<name>.ssl.*` for one
    /// listener), as given; read by [`ListenerConfig::tls_config`].
    pub security: BTreeMap<String, String>,
    /// SCRAM users to set at start, in kafka-storage's `--add-scram` form.
    pub add_scram: Vec<String>,
    /// `authorizer.class.name` is [`STANDARD_AUTHORIZER`]: ACLs are enforced.
    pub authorizer: bool,
    /// `super.users`, split at `;` and trimmed, as `StandardAuthorizer` does.
    pub super_users: Vec<String>,
    /// `allow.everyone.if.no.acl.found`.
    pub allow_everyone_if_no_acl: bool,
}

impl Default for ListenerConfig {
    fn default() -> Self {
        ListenerConfig {
            listeners_text: None,
            advertised_text: None,
            protocol_map_text: None,
            auto_create_topics: false,
            num_partitions: 1,
            socket_request_max_bytes: DEFAULT_SOCKET_REQUEST_MAX_BYTES,
            node_id: 0,
            groups: GroupSettings::default(),
            txn_state_partitions: 1,
            txn_max_timeout_ms: crate::txn::coordinator::MAX_TIMEOUT_MS,
            txn_abort_interval_ms: 10_000,
            txn_expire_interval_ms: 3_600_000,
            txn_id_expiration_ms: 604_800_000,
            max_connections: i32::MAX as u32,
            max_connections_per_ip: i32::MAX as u32,
            max_connections_per_ip_overrides: HashMap::new(),
            max_connections_per_ip_overrides_text: String::new(),
            connections_max_idle_ms: DEFAULT_CONNECTIONS_MAX_IDLE_MS,
            queued_max_request_bytes_set: None,
            num_network_threads: DEFAULT_NUM_NETWORK_THREADS,
            security: BTreeMap::new(),
            add_scram: Vec::new(),
            authorizer: false,
            super_users: Vec::new(),
            allow_everyone_if_no_acl: false,
        }
    }
}

/// A broker config's type in Kafka's `ConfigDef`, as DescribeConfigs says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigKind {
    Boolean,
    String,
    Int,
    Long,
}

/// One broker setting as DescribeConfigs shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerSetting {
    pub name: &'static str,
    /// The value in force (`None`: null).
    pub value: Option<String>,
    /// What applies when it is not given (`None`: null).
    pub default: Option<String>,
    /// Given with `-o` (Kafka's STATIC_BROKER_CONFIG).
    pub given: bool,
    pub kind: ConfigKind,
}

impl ListenerConfig {
    /// `connection.failed.authentication.delay.ms` (Kafka's INT, at least 0).
    pub fn failed_auth_delay_ms(&self) -> i64 {
        self.security
            .get("connection.failed.authentication.delay.ms")
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(FAILED_AUTHENTICATION_DELAY_MS)
    }

    /// `sasl.enabled.mechanisms` of listener `l` (listener-prefixed first),
    /// `None` when it is not a SASL listener. Kafka's default, GSSAPI, is
    /// not served, so a SASL listener must name its mechanisms.
    pub fn sasl_mechanisms(&self, l: &Listener) -> Result<Option<Vec<String>>, String> {
        if !matches!(
            l.protocol,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        ) {
            return Ok(None);
        }
        let prefixed = format!(
            "listener.name.{}.sasl.enabled.mechanisms",
            l.name.to_ascii_lowercase()
        );
        let served = crate::auth::MECHANISMS.join(", ");
        let Some(text) = self
            .security
            .get(&prefixed)
            .or_else(|| self.security.get("sasl.enabled.mechanisms"))
        else {
            return Err(format!(
                "listener {l}: set sasl.enabled.mechanisms to the mechanisms it serves ({served}); \
                 Kafka's default, GSSAPI, is not served here"
            ));
        };
        let mechanisms: Vec<String> = csv_list(text).into_iter().map(str::to_string).collect();
        if mechanisms.is_empty() {
            return Err(format!(
                "listener {l}: sasl.enabled.mechanisms is empty; give some of {served}"
            ));
        }
        for m in &mechanisms {
            if !crate::auth::MECHANISMS.contains(&m.as_str()) {
                return Err(format!(
                    "listener {l}: sasl.enabled.mechanisms names {m}, which is not served; \
                     {served} are"
                ));
            }
        }
        Ok(Some(mechanisms))
    }

    /// The TLS server config of listener `l`, `None` when it is not a TLS
    /// listener, or what is wrong with its settings.
    pub fn tls_config(&self, l: &Listener) -> Result<Option<Arc<rustls::ServerConfig>>, String> {
        if !matches!(
            l.protocol,
            SecurityProtocol::Ssl | SecurityProtocol::SaslSsl
        ) {
            return Ok(None);
        }
        let get = |name: &str| self.security.get(name).cloned();
        let shown = l.to_string();
        let lookup = crate::network::tls::Lookup {
            listener: &l.name,
            shown: &shown,
            get: &get,
        };
        let sasl = l.protocol == SecurityProtocol::SaslSsl;
        crate::network::tls::server_config(&lookup, sasl).map(Some)
    }

    /// Settings that only mean something with a listener are refused without one.
    /// And Kafka's cross-checks (`KafkaConfig.validateValues`), with its messages.
    pub fn check(&self) -> Result<(), String> {
        if self.listeners_text.is_none() && self.advertised_text.is_some() {
            return Err("advertised.listeners needs listeners".to_string());
        }
        let listeners = self.listeners()?;
        for l in &listeners {
            self.sasl_mechanisms(l)?;
            self.tls_config(l)?;
        }
        self.advertised_listeners()?;
        let queued = self.queued_max_request_bytes();
        if queued > 0 && queued < self.socket_request_max_bytes as i64 {
            return Err(
                "queued.max.request.bytes must be larger or equal to socket.request.max.bytes"
                    .to_string(),
            );
        }
        if self.max_connections_per_ip == 0 && self.max_connections_per_ip_overrides.is_empty() {
            return Err("max.connections.per.ip can be set to zero only if \
                 max.connections.per.ip.overrides property is set."
                .to_string());
        }
        if self.connections_max_idle_ms >= 0
            && self.failed_auth_delay_ms() >= self.connections_max_idle_ms
        {
            return Err(format!(
                "connection.failed.authentication.delay.ms={} should \
                 always be less than connections.max.idle.ms={} to prevent failed authentication \
                 responses from timing out",
                self.failed_auth_delay_ms(),
                self.connections_max_idle_ms
            ));
        }
        Ok(())
    }

    /// Every setting of [`BROKER_CONFIG_NAMES`], in its order, with its
    /// value in force. Given means set to a value other than the default
    /// (a default given explicitly reads as not given, as no record of the
    /// options is kept).
    pub fn described(&self) -> Vec<BrokerSetting> {
        let defaults = ListenerConfig::default().values();
        self.values()
            .into_iter()
            .zip(defaults)
            .map(|((name, value, kind), (_, default, _))| {
                let (given, default) = match name {
                    // Its default follows socket.request.max.bytes.
                    "queued.max.request.bytes" => (
                        self.queued_max_request_bytes_set.is_some(),
                        Some(self.socket_request_max_bytes.to_string()),
                    ),
                    _ => (value != default, default),
                };
                BrokerSetting {
                    name,
                    value,
                    default,
                    given,
                    kind,
                }
            })
            .collect()
    }

    /// `queued.max.request.bytes` in force: what was given, else
    /// `socket.request.max.bytes` (100 MiB by default). Kafka's default is -1
    /// (no bound), which its JVM heap (1 GiB in `kafka-server-start.sh`)
    /// bounds instead; this daemon has no heap limit and shares its machine
    /// with a filesystem, so it bounds requests in flight by default, with
    /// the smallest pool Kafka's own check allows. Zero or less: no bound,
    /// as in Kafka.
    pub fn queued_max_request_bytes(&self) -> i64 {
        self.queued_max_request_bytes_set
            .unwrap_or(self.socket_request_max_bytes as i64)
    }

    /// `connections.max.idle.ms` as a duration; `None`: never.
    pub fn idle_timeout(&self) -> Option<Duration> {
        u64::try_from(self.connections_max_idle_ms)
            .ok()
            .map(Duration::from_millis)
    }

    /// The connection cap for `ip`.
    pub fn max_connections_for(&self, ip: IpAddr) -> u32 {
        self.max_connections_per_ip_overrides
            .get(&ip)
            .copied()
            .unwrap_or(self.max_connections_per_ip)
    }
}

#[cfg(test)]
mod tests;
