//! Each broker setting's parse, with Kafka's validators and messages, and
//! the values in force as DescribeConfigs shows them.

use std::collections::HashMap;
use std::net::{IpAddr, ToSocketAddrs};
use std::time::Duration;

use super::*;

/// A count of milliseconds of at least `min`.
fn millis(value: &str, min: u64) -> Option<Duration> {
    value
        .parse::<u64>()
        .ok()
        .filter(|n| *n >= min && *n <= i32::MAX as u64)
        .map(Duration::from_millis)
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

/// Settings' names, values in force and types.
type Settings = Vec<(&'static str, Option<String>, ConfigKind)>;

impl ListenerConfig {
    /// Applies one `name=value`; `Ok(false)` if the name is not a broker config.
    pub fn set(&mut self, name: &str, value: &str) -> Result<bool, String> {
        Ok(self.set_listener(name, value)?
            || self.set_group(name, value)?
            || self.set_socket_server(name, value)?
            || self.set_txn(name, value)?
            || self.set_security(name, value)?
            || self.set_group_limit(name, value)?)
    }

    /// The listeners and the topics' defaults.
    fn set_listener(&mut self, name: &str, value: &str) -> Result<bool, String> {
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
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The group coordinator's topic and timeouts.
    fn set_group(&mut self, name: &str, value: &str) -> Result<bool, String> {
        let invalid = |why: &str| format!("Invalid value {value} for configuration {name}: {why}");
        match name {
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
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The socket server's limits (`SocketServerConfigs`).
    fn set_socket_server(&mut self, name: &str, value: &str) -> Result<bool, String> {
        match name {
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
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The transaction coordinator's (`TransactionStateManagerConfig`).
    fn set_txn(&mut self, name: &str, value: &str) -> Result<bool, String> {
        match name {
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
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The authorizer, authentication and TLS.
    fn set_security(&mut self, name: &str, value: &str) -> Result<bool, String> {
        let invalid = |why: &str| format!("Invalid value {value} for configuration {name}: {why}");
        match name {
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
                crate::network::tls::check_value(plain, value)?;
                self.security.insert(name.to_string(), value.to_string());
            }
            _ => return Ok(false),
        }
        Ok(true)
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

    /// Every setting's value in force and type, in [`BROKER_CONFIG_NAMES`]' order.
    pub(super) fn values(&self) -> Settings {
        let mut all = self.listener_values();
        all.extend(self.group_values());
        all.extend(self.txn_values());
        all.extend(self.socket_server_values());
        all
    }

    /// The listeners' and the topics' defaults.
    fn listener_values(&self) -> Settings {
        use ConfigKind::{Boolean, Int, String as Text};
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
        ]
    }

    /// The group coordinator's.
    fn group_values(&self) -> Settings {
        use ConfigKind::{Int, Long};
        let g = &self.groups;
        let ms = |d: Duration| Some(d.as_millis().to_string());
        let n = |v: &dyn ToString| Some(v.to_string());
        vec![
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
        ]
    }

    /// The transaction coordinator's.
    fn txn_values(&self) -> Settings {
        use ConfigKind::Int;
        let n = |v: &dyn ToString| Some(v.to_string());
        vec![
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
        ]
    }

    /// The socket server's limits, and the authorizer.
    fn socket_server_values(&self) -> Settings {
        use ConfigKind::{Int, Long, String as Text};
        let n = |v: &dyn ToString| Some(v.to_string());
        vec![
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
}
