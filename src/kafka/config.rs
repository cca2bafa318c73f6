//! The listener's settings, with Kafka's broker config names: `listeners`,
//! `advertised.listeners`, `auto.create.topics.enable`, `num.partitions`,
//! `socket.request.max.bytes`, `node.id`, and the group coordinator's
//! `offsets.topic.num.partitions` (default 1, where Kafka's 50 would fill the
//! tree), `group.initial.rebalance.delay.ms`, `group.min.session.timeout.ms`
//! and `group.max.session.timeout.ms` (Kafka's defaults).

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use super::group::GroupSettings;

/// Kafka's default `socket.request.max.bytes` (100 MiB).
pub const DEFAULT_SOCKET_REQUEST_MAX_BYTES: usize = 104_857_600;

/// The broker-level names this module understands (besides the topic
/// configs, which storage owns).
pub const BROKER_CONFIG_NAMES: &[&str] = &[
    "listeners",
    "advertised.listeners",
    "auto.create.topics.enable",
    "num.partitions",
    "socket.request.max.bytes",
    "node.id",
    "offsets.topic.num.partitions",
    "group.initial.rebalance.delay.ms",
    "group.min.session.timeout.ms",
    "group.max.session.timeout.ms",
];

/// A count of milliseconds of at least `min`.
fn millis(value: &str, min: u64) -> Option<Duration> {
    value
        .parse::<u64>()
        .ok()
        .filter(|n| *n >= min && *n <= i32::MAX as u64)
        .map(Duration::from_millis)
}

/// One `PLAINTEXT://HOST:PORT`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub host: String,
    pub port: u16,
}

impl Endpoint {
    /// Parses Kafka's listener syntax. Only PLAINTEXT exists here, and the
    /// host must be given: the listener binds exactly what it is told to.
    pub fn parse(text: &str) -> Result<Endpoint, String> {
        let rest = text.strip_prefix("PLAINTEXT://").ok_or_else(|| {
            format!("listener {text:?}: only PLAINTEXT://HOST:PORT is served (no TLS or SASL)")
        })?;
        let (host, port) = rest
            .rsplit_once(':')
            .ok_or_else(|| format!("listener {text:?}: expected PLAINTEXT://HOST:PORT"))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return Err(format!(
                "listener {text:?}: give the address to bind (0.0.0.0 for every IPv4 interface)"
            ));
        }
        let port: u16 = port
            .parse()
            .map_err(|_| format!("listener {text:?}: {port:?} is not a port number"))?;
        Ok(Endpoint {
            host: host.to_string(),
            port,
        })
    }

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
            write!(f, "PLAINTEXT://[{}]:{}", self.host, self.port)
        } else {
            write!(f, "PLAINTEXT://{}:{}", self.host, self.port)
        }
    }
}

/// The Kafka face's settings. Without `listeners` nothing listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListenerConfig {
    pub listener: Option<Endpoint>,
    /// What Metadata tells clients to connect to; the listener by default.
    pub advertised: Option<Endpoint>,
    pub auto_create_topics: bool,
    /// Partitions of a topic created by Metadata's auto-creation.
    pub num_partitions: u32,
    pub socket_request_max_bytes: usize,
    /// This broker's id in Metadata (Kafka's `node.id`).
    pub node_id: i32,
    /// The group coordinator's settings.
    pub groups: GroupSettings,
}

impl Default for ListenerConfig {
    fn default() -> Self {
        ListenerConfig {
            listener: None,
            advertised: None,
            auto_create_topics: false,
            num_partitions: 1,
            socket_request_max_bytes: DEFAULT_SOCKET_REQUEST_MAX_BYTES,
            node_id: 0,
            groups: GroupSettings::default(),
        }
    }
}

impl ListenerConfig {
    /// Applies one `name=value`; `Ok(false)` if the name is not a broker config.
    pub fn set(&mut self, name: &str, value: &str) -> Result<bool, String> {
        let invalid = |why: &str| format!("Invalid value {value} for configuration {name}: {why}");
        match name {
            "listeners" => self.listener = Some(Endpoint::parse(value)?),
            "advertised.listeners" => self.advertised = Some(Endpoint::parse(value)?),
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
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Settings that only mean something with a listener are refused without one.
    pub fn check(&self) -> Result<(), String> {
        if self.listener.is_none() && self.advertised.is_some() {
            return Err("advertised.listeners needs listeners".to_string());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listener_syntax() {
        let e = Endpoint::parse("PLAINTEXT://127.0.0.1:9092").unwrap();
        assert_eq!((e.host.as_str(), e.port), ("127.0.0.1", 9092));
        assert_eq!(e.to_string(), "PLAINTEXT://127.0.0.1:9092");
        let e = Endpoint::parse("PLAINTEXT://[::1]:9092").unwrap();
        assert_eq!(e.host, "::1");
        assert_eq!(e.to_string(), "PLAINTEXT://[::1]:9092");
        for bad in [
            "127.0.0.1:9092",
            "SSL://127.0.0.1:9092",
            "PLAINTEXT://:9092",
            "PLAINTEXT://h:x",
            "PLAINTEXT://h",
        ] {
            assert!(Endpoint::parse(bad).is_err(), "{bad}");
        }
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
}
