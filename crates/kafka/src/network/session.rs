//! Who a request came from: the listener it came in on (whose advertised
//! address Metadata and FindCoordinator answer, as Kafka answers from
//! `request.context.listenerName`), the peer's address, and the principal
//! the connection authenticated as (Kafka's `KafkaPrincipal`).

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

/// Kafka's `KafkaPrincipal`: a type and a name, written `User:alice`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Principal {
    pub principal_type: Arc<str>,
    pub name: Arc<str>,
}

impl Principal {
    /// `KafkaPrincipal.USER_TYPE`.
    pub const USER_TYPE: &'static str = "User";

    pub fn user(name: &str) -> Principal {
        Principal {
            principal_type: Self::USER_TYPE.into(),
            name: name.into(),
        }
    }

    /// `KafkaPrincipal.ANONYMOUS`: who a PLAINTEXT connection, or a TLS
    /// connection without a client certificate, is.
    pub fn anonymous() -> Principal {
        Principal::user("ANONYMOUS")
    }

    /// `SecurityUtils.parseKafkaPrincipal`: `TYPE:NAME`, split at the first colon.
    pub fn parse(text: &str) -> Result<Principal, String> {
        match text.split_once(':') {
            Some((t, n)) if !t.is_empty() => Ok(Principal {
                principal_type: t.into(),
                name: n.into(),
            }),
            _ => Err(format!(
                "expected a string in format principalType:principalName but got {text}"
            )),
        }
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.principal_type, self.name)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Session {
    /// The index of the listener in the broker's list.
    pub listener: usize,
    pub peer: SocketAddr,
    pub principal: Principal,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn principals() {
        assert_eq!(Principal::anonymous().to_string(), "User:ANONYMOUS");
        let p = Principal::parse("User:CN=a,O=b:c").unwrap();
        assert_eq!(&*p.principal_type, "User");
        assert_eq!(&*p.name, "CN=a,O=b:c");
        assert!(Principal::parse("alice").is_err());
        assert!(Principal::parse(":alice").is_err());
    }
}
