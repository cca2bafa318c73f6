//! `listeners`, `advertised.listeners` and `listener.security.protocol.map`:
//! their syntax and Kafka's checks, with its messages.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};

use super::ListenerConfig;

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
pub(super) fn csv_list(text: &str) -> Vec<&str> {
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

impl ListenerConfig {
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
}
