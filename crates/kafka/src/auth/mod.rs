//! SASL on the Kafka listener, the pieces the connection's authenticator
//! calls: the mechanisms (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) as Kafka's
//! `PlainSaslServer` and `ScramSaslServer` answer, the users' SCRAM
//! credentials in the data directory, and the admin APIs that change them.
//!
//! - [`scram`]: the SCRAM mechanisms, credentials and server exchange;
//! - [`plain`]: PLAIN, checked against the SCRAM credentials;
//! - [`credentials`]: the credential store (`commitfs.scram-credentials`)
//!   and kafka-storage's `--add-scram` syntax;
//! - [`admin`]: AlterUserScramCredentials and DescribeUserScramCredentials.

pub mod admin;
pub mod authenticator;
pub mod credentials;
pub mod formatter;
pub mod plain;
pub mod scram;

use std::sync::Arc;

use kafka_protocol::ResponseError;

pub use credentials::{CredentialStore, SCRAM_CREDENTIALS_FILE, parse_add_scram};
pub use formatter::{ScramCredential, ScramMechanism};

/// What `sasl.enabled.mechanisms` may name.
pub const MECHANISMS: [&str; 3] = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"];

/// Kafka's `DEFAULT_SASL_SERVER_MAX_RECEIVE_SIZE` (`sasl.server.max.receive.size`):
/// the largest frame an unauthenticated connection may send, before and
/// during authentication. Kafka refuses a larger one at the frame, before
/// any SASL server sees it ("Failing SASL authentication due to invalid
/// receive size", and the connection closes without a response); the
/// mechanisms refuse a larger token too.
pub const MAX_RECEIVE_SIZE: usize = 524288;

/// The server side of one mechanism's exchange on one connection: Kafka's
/// `javax.security.sasl.SaslServer` as its authenticator uses it.
pub trait SaslServer: Send {
    /// The SASL name (`getMechanismName`).
    fn mechanism_name(&self) -> &'static str;
    /// One token from the client (SaslAuthenticate's `auth_bytes`); the
    /// token to send back (empty when there is nothing to say).
    fn evaluate(&mut self, token: &[u8]) -> Result<Vec<u8>, SaslFailure>;
    fn is_complete(&self) -> bool;
    /// The authenticated user, once complete.
    fn authorization_id(&self) -> Option<&str>;
}

/// Why an exchange failed, as Kafka's `SaslServerAuthenticator` tells it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SaslFailure {
    /// What the client is told (SaslAuthenticate's `error_message`).
    /// Kafka passes a `SaslAuthenticationException`'s text on; for any
    /// other `SaslException` it sends [`invalid_credentials_message`]
    /// instead, so a client cannot learn, say, that a user exists.
    pub message: String,
    /// Kafka's exception text, for the broker's log. Never a password or
    /// a proof.
    pub reason: String,
    /// Who the client said it was, once known, for the log line.
    pub user: Option<String>,
    /// Kafka's `IllegalSaslStateException` (a token after the exchange
    /// ended): ILLEGAL_SASL_STATE, and Kafka closes the connection without
    /// a SaslAuthenticate response. Otherwise SASL_AUTHENTICATION_FAILED,
    /// sent with `message`, then the connection closes.
    pub illegal_state: bool,
}

/// The text `SaslServerAuthenticator.handleSaslToken` sends for a failure
/// whose own text it keeps from the client.
pub fn invalid_credentials_message(mechanism: &str) -> String {
    format!(
        "Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}"
    )
}

impl SaslFailure {
    /// A `SaslException`: the client gets the standard text.
    pub fn invalid_credentials(
        mechanism: &str,
        reason: impl Into<String>,
        user: Option<&str>,
    ) -> SaslFailure {
        SaslFailure {
            message: invalid_credentials_message(mechanism),
            reason: reason.into(),
            user: user.map(str::to_string),
            illegal_state: false,
        }
    }

    /// A `SaslAuthenticationException`: the client gets its text.
    pub fn authentication(message: impl Into<String>, user: Option<&str>) -> SaslFailure {
        let message = message.into();
        SaslFailure {
            reason: message.clone(),
            message,
            user: user.map(str::to_string),
            illegal_state: false,
        }
    }

    /// An `IllegalSaslStateException`.
    pub fn illegal_state(message: impl Into<String>, user: Option<&str>) -> SaslFailure {
        SaslFailure {
            illegal_state: true,
            ..SaslFailure::authentication(message, user)
        }
    }

    fn too_large(len: usize) -> SaslFailure {
        SaslFailure {
            reason: format!(
                "a SASL token of {len} bytes is larger than sasl.server.max.receive.size ({MAX_RECEIVE_SIZE})"
            ),
            ..SaslFailure::authentication(
                "Failing SASL authentication due to invalid receive size",
                None,
            )
        }
    }

    /// The error code of the SaslAuthenticate response.
    pub fn error_code(&self) -> i16 {
        if self.illegal_state {
            ResponseError::IllegalSaslState.code()
        } else {
            ResponseError::SaslAuthenticationFailed.code()
        }
    }
}

/// A new exchange of `mechanism` (a name from [`MECHANISMS`]), or `None`
/// for a mechanism not served (Kafka answers the handshake
/// UNSUPPORTED_SASL_MECHANISM).
pub fn server_for(mechanism: &str, store: &Arc<CredentialStore>) -> Option<Box<dyn SaslServer>> {
    if mechanism == plain::PLAIN_MECHANISM {
        return Some(Box::new(plain::PlainServer::new(store.clone())));
    }
    let m = ScramMechanism::from_mechanism_name(mechanism)?;
    Some(Box::new(scram::ScramServer::new(m, store.clone())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mechanism_has_a_server() {
        let store = CredentialStore::in_memory();
        for m in MECHANISMS {
            let s = server_for(m, &store).unwrap();
            assert_eq!(s.mechanism_name(), m);
            assert!(!s.is_complete());
            assert_eq!(s.authorization_id(), None);
        }
        assert!(server_for("GSSAPI", &store).is_none());
        assert!(server_for("OAUTHBEARER", &store).is_none());
        assert!(server_for("scram-sha-256", &store).is_none());
    }

    #[test]
    fn failures_carry_kafka_codes() {
        let f = SaslFailure::invalid_credentials("PLAIN", "x", Some("alice"));
        assert_eq!(f.error_code(), 58);
        assert_eq!(SaslFailure::illegal_state("x", None).error_code(), 34);
        assert_eq!(
            SaslFailure::too_large(MAX_RECEIVE_SIZE + 1).error_code(),
            58
        );
    }
}
