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
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use super::group::GroupSettings;

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
    super::tls::SSL_CONFIG_NAMES.contains(&base) || SASL_CONFIG_NAMES.contains(&base)
}

/// `ssl.keystore.location` of `listener.name.secure.ssl.keystore.location`.
fn security_base_name(name: &str) -> &str {
    match name.strip_prefix("listener.name.") {
        Some(rest) => rest.split_once('.').map_or(rest, |(_, base)| base),
        None => name,
    }
}

/// A count of milliseconds of at least `min`.
fn millis(value: &str, min: u64) -> Option<Duration> {
    value
        .parse::<u64>()
        .ok()
        .filter(|n| *n >= min && *n <= i32::MAX as u64)
        .map(Duration::from_millis)
}

/// Kafka's `SecurityProtocol`: how a listener's connections are secured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    pub const ALL: [SecurityProtocol; 4] = [
        SecurityProtocol::Plaintext,
        SecurityProtocol::Ssl,
        SecurityProtocol::SaslPlaintext,
        SecurityProtocol::SaslSsl,
    ];

    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    /// `SecurityProtocol.forName`: the name in any case.
    pub fn for_name(name: &str) -> Option<SecurityProtocol> {
        let upper = name.to_ascii_uppercase();
        Self::ALL.into_iter().find(|p| p.name() == upper)
    }
}

/// Where a listener binds or is advertised: a host and a port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub host: String,
    pub port: u16,
}

impl Endpoint {
    /// Every address the host resolves to, IPv4 first, without repeats.
    pub fn resolve(&self) -> Result<Vec<SocketAddr>, String> {
        let mut addrs: Vec<SocketAddr> = (self.host.as_str(), self.port)
            .to_socket_addrs()
            .map_err(|e| format!("cannot resolve listener host {}: {e}", self.host))?
            .collect();
        addrs.sort_by_key(|a| (a.is_ipv6(), *a));
        addrs.dedup();
        if addrs.is_empty() {
            return Err(format!("listener host {} resolves to nothing", self.host));
        }
        Ok(addrs)
    }
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// One entry of `listeners` or `advertised.listeners`: `NAME://HOST:PORT`,
/// its security protocol from `listener.security.protocol.map`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listener {
    /// Upper case, as Kafka's `ListenerName.normalised`.
    pub name: String,
    pub protocol: SecurityProtocol,
    pub endpoint: Endpoint,
}

impl std::fmt::Display for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}://{}", self.name, self.endpoint)
    }
}

/// Kafka's default `listener.security.protocol.map`: each protocol is a
/// listener name of its own.
pub const DEFAULT_PROTOCOL_MAP: &str =
    "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL";

/// Kafka's `Csv.parseCsvList`: split at commas with the blanks around them,
/// empty entries dropped.
fn csv_list(text: &str) -> Vec<&str> {
    text.split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .collect()
}

/// `listener.security.protocol.map` (`KafkaConfig.effectiveListenerSecurityProtocolMap`):
/// `NAME:PROTOCOL` pairs split at the last `:`, names upper-cased; a given
/// map replaces the default one.
pub fn protocol_map(text: &str) -> Result<Vec<(String, SecurityProtocol)>, String> {
    const NAME: &str = "listener.security.protocol.map";
    let mut out: Vec<(String, SecurityProtocol)> = Vec::new();
    if text.is_empty() {
        return Ok(out);
    }
    for pair in text.split(',').map(str::trim) {
        let Some((name, protocol)) = pair.rsplit_once(':') else {
            // What Java's `substring(0, -1)` says.
            return Err(format!(
                "Error parsing configuration property '{NAME}': begin 0, end -1, length {}",
                pair.encode_utf16().count()
            ));
        };
        let protocol = protocol.trim();
        let protocol = SecurityProtocol::for_name(protocol)
            .ok_or_else(|| format!("Invalid security protocol `{protocol}` defined in {NAME}"))?;
        let name = name.trim();
        if name.is_empty() {
            return Err("The provided listener name is null or empty string".to_string());
        }
        let name = name.to_ascii_uppercase();
        out.retain(|(n, _)| *n != name);
        out.push((name, protocol));
    }
    Ok(out)
}

/// Kafka's `SocketServerConfigs.listenerListToEndPoints`, whose messages
/// `CoreUtils` wraps: `NAME://HOST:PORT` entries, each name's protocol from
/// the map. The host must be given here: the listener binds exactly what
/// it is told to (Kafka binds every interface for an empty one).
pub fn parse_listeners(
    text: &str,
    map: &[(String, SecurityProtocol)],
) -> Result<Vec<Listener>, String> {
    let fail = |why: String| format!("Error creating broker listeners from '{text}': {why}");
    let mut out = Vec::new();
    for entry in csv_list(text.trim()) {
        let unparsable = || fail(format!("Unable to parse {entry} to a broker endpoint"));
        let (name, rest) = entry.split_once("://").ok_or_else(unparsable)?;
        let (host, port) = rest.rsplit_once(':').ok_or_else(unparsable)?;
        let host = host.strip_prefix('[').unwrap_or(host);
        let host = host.strip_suffix(']').unwrap_or(host);
        let host_ok = host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-%._:".contains(c));
        let digits = port.strip_prefix('-').unwrap_or(port);
        if !host_ok || digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
            return Err(unparsable());
        }
        if name.trim().is_empty() {
            return Err(fail(
                "The provided listener name is null or empty string".into(),
            ));
        }
        let name = name.to_ascii_uppercase();
        let protocol = map
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, p)| *p)
            .ok_or_else(|| fail(format!("No security protocol defined for listener {name}")))?;
        let port: u16 = port
            .parse()
            .map_err(|_| format!("listener {entry}: {port} is not a port number (0 to 65535)"))?;
        if host.is_empty() {
            return Err(format!(
                "listener {entry}: give the address to bind (0.0.0.0 for every IPv4 interface)"
            ));
        }
        out.push(Listener {
            name,
            protocol,
            endpoint: Endpoint {
                host: host.to_string(),
                port,
            },
        });
    }
    Ok(out)
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
            txn_max_timeout_ms: crate::kafka::txn::coordinator::MAX_TIMEOUT_MS,
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

/// Kafka's INT parse and `atLeast(min)`, with its messages.
fn int_at_least(name: &str, value: &str, min: i64, max: i64) -> Result<i64, String> {
    let n: i64 = value.trim().parse().map_err(|_| {
        format!(
            "Invalid value {value} for configuration {name}: Not a number of type {}",
            if max == i32::MAX as i64 {
                "INT"
            } else {
                "LONG"
            }
        )
    })?;
    if n > max {
        return Err(format!(
            "Invalid value {value} for configuration {name}: Not a number of type {}",
            if max == i32::MAX as i64 {
                "INT"
            } else {
                "LONG"
            }
        ));
    }
    if n < min {
        return Err(format!(
            "Invalid value {value} for configuration {name}: Value must be at least {min}"
        ));
    }
    Ok(n)
}

/// Kafka's `max.connections.per.ip.overrides`: `host:count` pairs, comma
/// separated (`-o` splits options at commas, so give them with `;` there or
/// in one `-o` of their own; both separators are read). Hosts are resolved
/// once, here, as Kafka's `InetAddress.getByName` does at start.
fn parse_overrides(value: &str) -> Result<HashMap<IpAddr, u32>, String> {
    let name = "max.connections.per.ip.overrides";
    let mut out = HashMap::new();
    for pair in value
        .split([',', ';'])
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        let (host, count) = pair.rsplit_once(':').ok_or_else(|| {
            format!(
                "Invalid value {value} for configuration {name}: expected HOST:COUNT pairs, e.g. \"hostName:100,127.0.0.1:200\""
            )
        })?;
        let host = host.trim().trim_start_matches('[').trim_end_matches(']');
        let count = int_at_least(name, count.trim(), 0, i32::MAX as i64)? as u32;
        let ip: IpAddr = match host.parse() {
            Ok(ip) => ip,
            Err(_) => (host, 0)
                .to_socket_addrs()
                .ok()
                .and_then(|mut a| a.next())
                .map(|a| a.ip())
                .ok_or_else(|| format!("{name} contains invalid addresses : {host}"))?,
        };
        out.insert(ip, count);
    }
    Ok(out)
}

impl ListenerConfig {
    /// Applies one `name=value`; `Ok(false)` if the name is not a broker config.
    pub fn set(&mut self, name: &str, value: &str) -> Result<bool, String> {
        let invalid = |why: &str| format!("Invalid value {value} for configuration {name}: {why}");
        match name {
            // Checked together (`check`): each needs the others.
            "listeners" => self.listeners_text = Some(value.to_string()),
            "advertised.listeners" => self.advertised_text = Some(value.to_string()),
            "listener.security.protocol.map" => self.protocol_map_text = Some(value.to_string()),
            "auto.create.topics.enable" => {
                self.auto_create_topics = match value {
                    "true" => true,
                    "false" => false,
                    _ => return Err(invalid("Expected value to be either true or false")),
                }
            }
            "num.partitions" => {
                self.num_partitions = value
                    .parse()
                    .ok()
                    .filter(|n| (1..=i32::MAX as u32).contains(n))
                    .ok_or_else(|| invalid("Value must be at least 1"))?
            }
            "socket.request.max.bytes" => {
                self.socket_request_max_bytes = value
                    .parse()
                    .ok()
                    .filter(|n| (1..=i32::MAX as usize).contains(n))
                    .ok_or_else(|| invalid("Value must be at least 1"))?
            }
            "node.id" => {
                self.node_id = value
                    .parse()
                    .ok()
                    .filter(|n| *n >= 0)
                    .ok_or_else(|| invalid("Value must be at least 0"))?
            }
            "offsets.topic.num.partitions" => {
                self.groups.offsets_partitions = value
                    .parse()
                    .ok()
                    .filter(|n| (1..=i32::MAX as u32).contains(n))
                    .ok_or_else(|| invalid("Value must be at least 1"))?
            }
            "group.initial.rebalance.delay.ms" => {
                self.groups.initial_delay =
                    millis(value, 0).ok_or_else(|| invalid("Value must be at least 0"))?
            }
            "group.min.session.timeout.ms" => {
                self.groups.min_session =
                    millis(value, 0).ok_or_else(|| invalid("Value must be at least 0"))?
            }
            "group.max.session.timeout.ms" => {
                self.groups.max_session =
                    millis(value, 0).ok_or_else(|| invalid("Value must be at least 0"))?
            }
            "max.connections" => {
                self.max_connections = int_at_least(name, value, 0, i32::MAX as i64)? as u32
            }
            "max.connections.per.ip" => {
                self.max_connections_per_ip = int_at_least(name, value, 0, i32::MAX as i64)? as u32
            }
            "max.connections.per.ip.overrides" => {
                self.max_connections_per_ip_overrides = parse_overrides(value)?;
                self.max_connections_per_ip_overrides_text = value.to_string();
            }
            "connections.max.idle.ms" => {
                self.connections_max_idle_ms = int_at_least(name, value, i64::MIN, i64::MAX)?
            }
            "queued.max.request.bytes" => {
                self.queued_max_request_bytes_set =
                    Some(int_at_least(name, value, i64::MIN, i64::MAX)?)
            }
            "num.network.threads" => {
                self.num_network_threads = int_at_least(name, value, 1, i32::MAX as i64)? as u32
            }
            "transaction.state.log.num.partitions" => {
                self.txn_state_partitions = int_at_least(name, value, 1, i32::MAX as i64)? as u32
            }
            "transaction.max.timeout.ms" => {
                self.txn_max_timeout_ms = int_at_least(name, value, 1, i32::MAX as i64)? as i32
            }
            "transaction.abort.timed.out.transaction.cleanup.interval.ms" => {
                self.txn_abort_interval_ms = int_at_least(name, value, 1, i32::MAX as i64)? as u64
            }
            "transaction.remove.expired.transaction.cleanup.interval.ms" => {
                self.txn_expire_interval_ms = int_at_least(name, value, 1, i32::MAX as i64)? as u64
            }
            "transactional.id.expiration.ms" => {
                self.txn_id_expiration_ms = int_at_least(name, value, 1, i32::MAX as i64)? as u64
            }
            "authorizer.class.name" => {
                self.authorizer = match value.trim() {
                    "" => false,
                    STANDARD_AUTHORIZER => true,
                    ZK_ACL_AUTHORIZER => {
                        return Err(invalid(&format!(
                            "{ZK_ACL_AUTHORIZER} was ZooKeeper's authorizer and is gone from \
                             Kafka 4.0; use {STANDARD_AUTHORIZER}, which takes the same ACLs"
                        )));
                    }
                    other => return Err(invalid(&format!("Class {other} could not be found."))),
                }
            }
            // `StandardAuthorizer.getConfiguredSuperUsers`.
            "super.users" => {
                self.super_users = (value.split(';').map(str::trim))
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect()
            }
            // Java's `Boolean.parseBoolean`: anything but "true" is false.
            "allow.everyone.if.no.acl.found" => {
                self.allow_everyone_if_no_acl = value.trim().eq_ignore_ascii_case("true")
            }
            "connection.failed.authentication.delay.ms" => {
                int_at_least(name, value, 0, i32::MAX as i64)?;
                self.security
                    .insert(name.to_string(), value.trim().to_string());
            }
            _ if is_security_name(name) => {
                let plain = security_base_name(name);
                super::tls::check_value(plain, value)?;
                self.security.insert(name.to_string(), value.to_string());
            }
            _ => return self.set_group_limit(name, value),
        }
        Ok(true)
    }

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
        let served = super::auth::MECHANISMS.join(", ");
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
            if !super::auth::MECHANISMS.contains(&m.as_str()) {
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
        let lookup = super::tls::Lookup {
            listener: &l.name,
            shown: &shown,
            get: &get,
        };
        super::tls::server_config(&lookup, l.protocol).map(Some)
    }

    /// The group coordinator's limits, with `GroupCoordinatorConfig`'s
    /// types and validators; `Ok(false)` for any other name.
    fn set_group_limit(&mut self, name: &str, value: &str) -> Result<bool, String> {
        let g = &mut self.groups;
        match name {
            "group.max.size" => g.max_size = int_at_least(name, value, 1, i32::MAX as i64)? as u32,
            "offsets.retention.minutes" => {
                g.retention_minutes = int_at_least(name, value, 1, i32::MAX as i64)? as u32
            }
            "offsets.retention.check.interval.ms" => {
                let ms = int_at_least(name, value, 1, i64::MAX)?;
                g.retention_check = Duration::from_millis(ms as u64)
            }
            "offset.metadata.max.bytes" => {
                let (min, max) = (i32::MIN as i64, i32::MAX as i64);
                g.metadata_max_bytes = int_at_least(name, value, min, max)? as i32
            }
            _ => return Ok(false),
        }
        Ok(true)
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

    fn values(&self) -> Vec<(&'static str, Option<String>, ConfigKind)> {
        use ConfigKind::{Boolean, Int, Long, String as Text};
        let g = &self.groups;
        let ms = |d: Duration| Some(d.as_millis().to_string());
        let n = |v: &dyn ToString| Some(v.to_string());
        vec![
            ("listeners", self.listeners_text.clone(), Text),
            ("advertised.listeners", self.advertised_text.clone(), Text),
            (
                "listener.security.protocol.map",
                Some(
                    self.protocol_map_text
                        .clone()
                        .unwrap_or_else(|| DEFAULT_PROTOCOL_MAP.to_string()),
                ),
                Text,
            ),
            (
                "auto.create.topics.enable",
                n(&self.auto_create_topics),
                Boolean,
            ),
            ("num.partitions", n(&self.num_partitions), Int),
            (
                "socket.request.max.bytes",
                n(&self.socket_request_max_bytes),
                Int,
            ),
            ("node.id", n(&self.node_id), Int),
            (
                "offsets.topic.num.partitions",
                n(&g.offsets_partitions),
                Int,
            ),
            ("group.initial.rebalance.delay.ms", ms(g.initial_delay), Int),
            ("group.min.session.timeout.ms", ms(g.min_session), Int),
            ("group.max.session.timeout.ms", ms(g.max_session), Int),
            ("group.max.size", n(&g.max_size), Int),
            ("offsets.retention.minutes", n(&g.retention_minutes), Int),
            (
                "offsets.retention.check.interval.ms",
                ms(g.retention_check),
                Long,
            ),
            ("offset.metadata.max.bytes", n(&g.metadata_max_bytes), Int),
            (
                "transaction.state.log.num.partitions",
                n(&self.txn_state_partitions),
                Int,
            ),
            (
                "transaction.max.timeout.ms",
                n(&self.txn_max_timeout_ms),
                Int,
            ),
            (
                "transaction.abort.timed.out.transaction.cleanup.interval.ms",
                n(&self.txn_abort_interval_ms),
                Int,
            ),
            (
                "transaction.remove.expired.transaction.cleanup.interval.ms",
                n(&self.txn_expire_interval_ms),
                Int,
            ),
            (
                "transactional.id.expiration.ms",
                n(&self.txn_id_expiration_ms),
                Int,
            ),
            ("max.connections", n(&self.max_connections), Int),
            (
                "max.connections.per.ip",
                n(&self.max_connections_per_ip),
                Int,
            ),
            (
                "max.connections.per.ip.overrides",
                n(&self.max_connections_per_ip_overrides_text),
                Text,
            ),
            (
                "connections.max.idle.ms",
                n(&self.connections_max_idle_ms),
                Long,
            ),
            (
                "queued.max.request.bytes",
                n(&self.queued_max_request_bytes()),
                Long,
            ),
            ("num.network.threads", n(&self.num_network_threads), Int),
            (
                "authorizer.class.name",
                Some(
                    if self.authorizer {
                        STANDARD_AUTHORIZER
                    } else {
                        ""
                    }
                    .to_string(),
                ),
                Text,
            ),
        ]
    }

    /// Whether `listeners` was given: without it nothing listens.
    pub fn has_listeners(&self) -> bool {
        self.listeners_text.is_some()
    }

    fn protocols(&self) -> Result<Vec<(String, SecurityProtocol)>, String> {
        protocol_map(
            self.protocol_map_text
                .as_deref()
                .unwrap_or(DEFAULT_PROTOCOL_MAP),
        )
    }

    /// `listeners`, parsed and checked as `KafkaConfig` does: names and
    /// ports distinct (port 0, a free port, may repeat; two listeners may
    /// share a port when one binds an IPv4 and the other an IPv6 address).
    pub fn listeners(&self) -> Result<Vec<Listener>, String> {
        let Some(text) = &self.listeners_text else {
            return Ok(Vec::new());
        };
        let listeners = parse_listeners(text, &self.protocols()?)?;
        // Scala's `require`, as `CoreUtils.listenerListToEndPoints` checks.
        let fail = |why: String| format!("requirement failed: {why}");
        let mut names: Vec<&str> = listeners.iter().map(|l| l.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        if names.len() != listeners.len() {
            return Err(fail(format!(
                "Each listener must have a different name, listeners: {text}"
            )));
        }
        let mut ports: Vec<u16> = listeners
            .iter()
            .map(|l| l.endpoint.port)
            .filter(|p| *p != 0)
            .collect();
        ports.sort_unstable();
        ports.dedup();
        for port in ports {
            let on: Vec<&str> = listeners
                .iter()
                .filter(|l| l.endpoint.port == port)
                .map(|l| l.endpoint.host.as_str())
                .collect();
            if on.len() < 2 {
                continue;
            }
            let ip = |h: &str| h.parse::<IpAddr>().ok();
            let (with_ip, without_ip): (Vec<&str>, Vec<&str>) =
                on.iter().partition(|h| ip(h).is_some());
            if without_ip.len() > 1 {
                return Err(fail(format!(
                    "Each listener must have a different port, listeners: {text}"
                )));
            }
            let two = format!(
                "If you have two listeners on the same port then one needs to be IPv4 and the \
                 other IPv6, listeners: {text}, port: {port}"
            );
            match with_ip.as_slice() {
                [] => {}
                [a, b] => {
                    let v4_and_v6 = matches!(
                        (ip(a), ip(b)),
                        (Some(IpAddr::V4(_)), Some(IpAddr::V6(_)))
                            | (Some(IpAddr::V6(_)), Some(IpAddr::V4(_)))
                    );
                    if !v4_and_v6 {
                        return Err(fail(two));
                    }
                    if !without_ip.is_empty() {
                        return Err(two);
                    }
                }
                _ => {
                    return Err(format!(
                        "Each listener must have a different port unless exactly one listener \
                         has an IPv4 address and the other IPv6 address, listeners: {text}, port: {port}"
                    ));
                }
            }
        }
        Ok(listeners)
    }

    /// `advertised.listeners`, checked against `listeners` as `KafkaConfig`
    /// does; a listener it does not name advertises its bound address.
    pub fn advertised_listeners(&self) -> Result<Vec<Listener>, String> {
        let Some(text) = &self.advertised_text else {
            return Ok(Vec::new());
        };
        let advertised = parse_listeners(text, &self.protocols()?)?;
        let listeners = self.listeners()?;
        let known = |n: &str| listeners.iter().any(|l| l.name == n);
        if !advertised.iter().all(|a| known(&a.name)) {
            let names = |v: &[Listener]| {
                v.iter()
                    .map(|l| l.name.as_str())
                    .collect::<Vec<_>>()
                    .join(",")
            };
            return Err(format!(
                "requirement failed: advertised.listeners listener names must be equal to or a subset of the ones \
                 defined in listeners. Found {}. The valid options based on the current \
                 configuration are {}",
                names(&advertised),
                names(&listeners)
            ));
        }
        if advertised.iter().any(|a| a.endpoint.host == "0.0.0.0") {
            return Err("requirement failed: advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. \
                 Use a routable IP address."
                .to_string());
        }
        Ok(advertised)
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
mod tests {
    use super::*;

    #[test]
    fn listener_syntax() {
        let map = protocol_map(DEFAULT_PROTOCOL_MAP).unwrap();
        let l = parse_listeners("PLAINTEXT://127.0.0.1:9092", &map).unwrap();
        assert_eq!(l[0].name, "PLAINTEXT");
        assert_eq!(l[0].protocol, SecurityProtocol::Plaintext);
        assert_eq!(l[0].endpoint.host, "127.0.0.1");
        assert_eq!(l[0].to_string(), "PLAINTEXT://127.0.0.1:9092");
        let l = parse_listeners(" plaintext://[::1]:9092 , SSL://h:1", &map).unwrap();
        assert_eq!(l[0].endpoint.host, "::1");
        assert_eq!(l[0].to_string(), "PLAINTEXT://[::1]:9092");
        assert_eq!(l[1].protocol, SecurityProtocol::Ssl);
        let bad = |text: &str| parse_listeners(text, &map).unwrap_err();
        assert_eq!(
            bad("127.0.0.1:9092"),
            "Error creating broker listeners from '127.0.0.1:9092': Unable to parse \
             127.0.0.1:9092 to a broker endpoint"
        );
        assert_eq!(
            bad("PLAINTEXT://h:x"),
            "Error creating broker listeners from 'PLAINTEXT://h:x': Unable to parse \
             PLAINTEXT://h:x to a broker endpoint"
        );
        assert_eq!(
            bad("INTERNAL://h:1"),
            "Error creating broker listeners from 'INTERNAL://h:1': No security protocol \
             defined for listener INTERNAL"
        );
        assert!(bad("PLAINTEXT://:9092").contains("give the address to bind"));
        assert!(bad("PLAINTEXT://h:70000").contains("not a port number"));
    }

    #[test]
    fn listener_checks_in_kafkas_words() {
        let config = |pairs: &[(&str, &str)]| {
            let mut c = ListenerConfig::default();
            for (k, v) in pairs {
                c.set(k, v).unwrap();
            }
            c
        };
        let two = "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0";
        let map = "PLAINTEXT:PLAINTEXT,internal:plaintext";
        let c = config(&[("listeners", two), ("listener.security.protocol.map", map)]);
        c.check().unwrap();
        let names: Vec<String> = c.listeners().unwrap().into_iter().map(|l| l.name).collect();
        assert_eq!(names, ["PLAINTEXT", "INTERNAL"]);
        // A given map replaces the default one.
        let c = config(&[
            ("listeners", "PLAINTEXT://h:1"),
            ("listener.security.protocol.map", "INTERNAL:PLAINTEXT"),
        ]);
        assert_eq!(
            c.check().unwrap_err(),
            "Error creating broker listeners from 'PLAINTEXT://h:1': No security protocol \
             defined for listener PLAINTEXT"
        );
        let err = |pairs: &[(&str, &str)]| config(pairs).check().unwrap_err();
        assert_eq!(
            err(&[
                ("listeners", "PLAINTEXT://h:1"),
                ("listener.security.protocol.map", "PLAINTEXT:TLS")
            ]),
            "Invalid security protocol `TLS` defined in listener.security.protocol.map"
        );
        assert_eq!(
            err(&[
                ("listeners", "PLAINTEXT://h:1"),
                ("listener.security.protocol.map", "PLAINTEXT")
            ]),
            "Error parsing configuration property 'listener.security.protocol.map': begin 0, \
             end -1, length 9"
        );
        assert_eq!(
            err(&[("listeners", "PLAINTEXT://a:1,plaintext://b:2")]),
            "requirement failed: Each listener must have a different name, listeners: \
             PLAINTEXT://a:1,plaintext://b:2"
        );
        assert_eq!(
            err(&[("listeners", "PLAINTEXT://a:1,SSL://b:1")]),
            "requirement failed: Each listener must have a different port, listeners: \
             PLAINTEXT://a:1,SSL://b:1"
        );
        assert_eq!(
            err(&[("listeners", "PLAINTEXT://127.0.0.1:1,SSL://127.0.0.2:1")]),
            "requirement failed: If you have two listeners on the same port then one needs \
             to be IPv4 and the other IPv6, listeners: PLAINTEXT://127.0.0.1:1,SSL://127.0.0.2:1, \
             port: 1"
        );
        // One IPv4 and one IPv6 address may share a port: then only the
        // missing keystore stops it.
        assert_eq!(
            err(&[("listeners", "PLAINTEXT://127.0.0.1:1,SSL://[::1]:1")]),
            "listener SSL://[::1]:1: a TLS listener needs a key and a certificate: set \
             ssl.keystore.location (with ssl.keystore.type=PEM) or \
             ssl.keystore.certificate.chain and ssl.keystore.key"
        );
        assert_eq!(
            err(&[
                ("listeners", "PLAINTEXT://h:1"),
                ("advertised.listeners", "PLAINTEXT://h:1,OTHER://h:2"),
                (
                    "listener.security.protocol.map",
                    "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT"
                )
            ]),
            "requirement failed: advertised.listeners listener names must be equal to or a \
             subset of the ones defined in listeners. Found PLAINTEXT,OTHER. The valid options \
             based on the current configuration are PLAINTEXT"
        );
        assert_eq!(
            err(&[
                ("listeners", "PLAINTEXT://0.0.0.0:1"),
                ("advertised.listeners", "PLAINTEXT://0.0.0.0:1")
            ]),
            "requirement failed: advertised.listeners cannot use the nonroutable meta-address \
             0.0.0.0. Use a routable IP address."
        );
        // Advertised ports may repeat.
        config(&[
            ("listeners", two),
            ("listener.security.protocol.map", map),
            (
                "advertised.listeners",
                "PLAINTEXT://h:9092,INTERNAL://h:9092",
            ),
        ])
        .check()
        .unwrap();
    }

    #[test]
    fn broker_configs() {
        let mut c = ListenerConfig::default();
        assert!(c.set("auto.create.topics.enable", "true").unwrap());
        assert!(c.auto_create_topics);
        assert!(c.set("num.partitions", "0").is_err());
        assert!(!c.set("segment.bytes", "1").unwrap());
        c.set("advertised.listeners", "PLAINTEXT://h:1").unwrap();
        assert!(c.check().is_err());
        c.set("listeners", "PLAINTEXT://127.0.0.1:0").unwrap();
        assert!(c.check().is_ok());
    }

    #[test]
    fn socket_server_limits() {
        let c = ListenerConfig::default();
        assert_eq!(c.max_connections, 2_147_483_647);
        assert_eq!(c.max_connections_per_ip, 2_147_483_647);
        assert_eq!(c.connections_max_idle_ms, 600_000);
        assert_eq!(c.num_network_threads, 3);
        assert_eq!(c.queued_max_request_bytes(), 104_857_600);
        let err = |name: &str, value: &str| {
            let mut c = ListenerConfig::default();
            match c.set(name, value) {
                Err(e) => e,
                Ok(_) => c.check().expect_err(&format!("{name}={value} refused")),
            }
        };
        assert_eq!(
            err("max.connections", "-1"),
            "Invalid value -1 for configuration max.connections: Value must be at least 0"
        );
        assert_eq!(
            err("max.connections", "x"),
            "Invalid value x for configuration max.connections: Not a number of type INT"
        );
        assert_eq!(
            err("max.connections", "2147483648"),
            "Invalid value 2147483648 for configuration max.connections: Not a number of type INT"
        );
        assert!(err("max.connections.per.ip", "0").contains("can be set to zero only if"));
        assert!(err("num.network.threads", "0").contains("Value must be at least 1"));
        assert!(err("connections.max.idle.ms", "100").contains("should always be less than"));
        assert!(err("queued.max.request.bytes", "1000").contains("must be larger or equal"));
        assert!(err("max.connections.per.ip.overrides", "nocount").contains("HOST:COUNT"));
        let mut c = ListenerConfig::default();
        c.set("connections.max.idle.ms", "-1").unwrap();
        c.set("queued.max.request.bytes", "-1").unwrap();
        c.set("max.connections.per.ip", "0").unwrap();
        c.set("max.connections.per.ip.overrides", "127.0.0.1:5;[::1]:7")
            .unwrap();
        assert!(c.check().is_ok());
        assert_eq!(c.idle_timeout(), None);
        assert_eq!(c.queued_max_request_bytes(), -1);
        assert_eq!(c.max_connections_for("127.0.0.1".parse().unwrap()), 5);
        assert_eq!(c.max_connections_for("::1".parse().unwrap()), 7);
        assert_eq!(c.max_connections_for("10.0.0.1".parse().unwrap()), 0);
        // The pool may equal the frame limit, and follows it when not given.
        let mut c = ListenerConfig::default();
        c.set("socket.request.max.bytes", "200000000").unwrap();
        assert!(c.check().is_ok());
        assert_eq!(c.queued_max_request_bytes(), 200_000_000);
    }
    /// The group coordinator's limits: Kafka's defaults, and its
    /// validators' messages (`GroupCoordinatorConfig`).
    #[test]
    fn group_limits() {
        let c = ListenerConfig::default();
        assert_eq!(c.groups.max_size, 2_147_483_647);
        assert_eq!(c.groups.retention_minutes, 10_080);
        assert_eq!(c.groups.retention_ms(), 604_800_000);
        assert_eq!(c.groups.retention_check, Duration::from_millis(600_000));
        assert_eq!(c.groups.metadata_max_bytes, 4096);
        let err = |name: &str, value: &str| ListenerConfig::default().set(name, value).unwrap_err();
        assert_eq!(
            err("group.max.size", "0"),
            "Invalid value 0 for configuration group.max.size: Value must be at least 1"
        );
        assert_eq!(
            err("offsets.retention.minutes", "0"),
            "Invalid value 0 for configuration offsets.retention.minutes: Value must be at least 1"
        );
        assert_eq!(
            err("offsets.retention.check.interval.ms", "0"),
            "Invalid value 0 for configuration offsets.retention.check.interval.ms: Value must be at least 1"
        );
        assert_eq!(
            err("offsets.retention.minutes", "2147483648"),
            "Invalid value 2147483648 for configuration offsets.retention.minutes: Not a number of type INT"
        );
        assert!(err("offset.metadata.max.bytes", "x").contains("Not a number of type INT"));
        let mut c = ListenerConfig::default();
        for (k, v) in [
            ("group.max.size", "3"),
            ("offsets.retention.minutes", "1"),
            ("offsets.retention.check.interval.ms", "250"),
            ("offset.metadata.max.bytes", "-1"),
        ] {
            assert!(c.set(k, v).unwrap(), "{k}");
            assert!(BROKER_CONFIG_NAMES.contains(&k), "{k}");
        }
        assert_eq!(c.groups.max_size, 3);
        assert_eq!(c.groups.retention_ms(), 60_000);
        assert_eq!(c.groups.retention_check, Duration::from_millis(250));
        assert_eq!(c.groups.metadata_max_bytes, -1);
    }
    #[test]
    fn authorizer_settings() {
        let mut c = ListenerConfig::default();
        assert!(!c.authorizer);
        c.set("authorizer.class.name", STANDARD_AUTHORIZER).unwrap();
        assert!(c.authorizer);
        c.set("authorizer.class.name", "").unwrap();
        assert!(!c.authorizer);
        let e = c
            .set("authorizer.class.name", ZK_ACL_AUTHORIZER)
            .unwrap_err();
        assert!(e.starts_with("Invalid value kafka.security.authorizer.AclAuthorizer for configuration authorizer.class.name: "), "{e}");
        assert!(e.contains(STANDARD_AUTHORIZER), "{e}");
        assert_eq!(
            c.set("authorizer.class.name", "x.Y").unwrap_err(),
            "Invalid value x.Y for configuration authorizer.class.name: Class x.Y could not be found."
        );
        c.set("super.users", " User:admin ;User:CN=a,O=b;; ")
            .unwrap();
        assert_eq!(c.super_users, ["User:admin", "User:CN=a,O=b"]);
        c.set("allow.everyone.if.no.acl.found", "TRUE").unwrap();
        assert!(c.allow_everyone_if_no_acl);
        c.set("allow.everyone.if.no.acl.found", "yes").unwrap();
        assert!(!c.allow_everyone_if_no_acl);
        for k in AUTHORIZER_CONFIG_NAMES {
            assert!(!BROKER_CONFIG_NAMES.contains(k));
        }
    }

    /// DescribeConfigs lists every broker setting, in order, and says which
    /// were given.
    #[test]
    fn every_broker_setting_is_described() {
        let mut c = ListenerConfig::default();
        c.set("listeners", "PLAINTEXT://127.0.0.1:0").unwrap();
        c.set("max.connections", "7").unwrap();
        c.set("socket.request.max.bytes", "200000000").unwrap();
        let d = c.described();
        let names: Vec<&str> = d.iter().map(|s| s.name).collect();
        assert_eq!(names, BROKER_CONFIG_NAMES);
        let get = |n: &str| d.iter().find(|s| s.name == n).unwrap().clone();
        let m = get("max.connections");
        assert!(m.given);
        assert_eq!(m.value.as_deref(), Some("7"));
        assert_eq!(m.default.as_deref(), Some("2147483647"));
        let q = get("queued.max.request.bytes");
        assert!(!q.given, "its default follows socket.request.max.bytes");
        assert_eq!(q.value.as_deref(), Some("200000000"));
        assert_eq!(q.default.as_deref(), Some("200000000"));
        assert!(!get("num.network.threads").given);
        assert_eq!(get("advertised.listeners").value, None);
        assert_eq!(get("group.max.size").kind, ConfigKind::Int);
        assert_eq!(get("connections.max.idle.ms").kind, ConfigKind::Long);
    }
}
