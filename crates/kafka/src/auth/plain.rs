//! SASL/PLAIN (RFC 4616) as Kafka's `PlainSaslServer`: one message,
//! `[authzid] NUL authcid NUL passwd`, with Kafka's texts for each refusal.
//!
//! Kafka checks PLAIN passwords against a JAAS file of clear-text
//! passwords. There is none here, and no password is ever stored: a PLAIN
//! password is checked against the user's SCRAM credential. The salted
//! password is computed with the stored salt and iterations and its stored
//! key compared in constant time, with the SCRAM-SHA-512 credential if the
//! user has one, else the SCRAM-SHA-256 one. So a user authenticates with
//! PLAIN once AlterUserScramCredentials (or `--add-scram`) has given it a
//! credential, with the same password. An unknown user costs the same
//! hashing as a known one, so the time taken does not tell which it is.

use std::sync::Arc;

use super::credentials::CredentialStore;
use super::formatter::{ScramCredential, ScramMechanism};
use super::{SaslFailure, SaslServer};

pub const PLAIN_MECHANISM: &str = "PLAIN";

/// The credential of the PLAIN check, preferring SCRAM-SHA-512.
const PREFERENCE: [ScramMechanism; 2] = [ScramMechanism::Sha512, ScramMechanism::Sha256];

pub struct PlainServer {
    store: Arc<CredentialStore>,
    complete: bool,
    authorization_id: Option<String>,
}

impl PlainServer {
    pub fn new(store: Arc<CredentialStore>) -> PlainServer {
        PlainServer {
            store,
            complete: false,
            authorization_id: None,
        }
    }

    fn verify(&self, user: &str, password: &str) -> bool {
        let found = PREFERENCE
            .iter()
            .find_map(|&m| Some((m, self.store.get(user, m)?)));
        match found {
            Some((m, cred)) => cred.matches_password(m, password.as_bytes()),
            None => {
                let m = ScramMechanism::Sha512;
                let decoy = ScramCredential {
                    salt: b"commitfs".to_vec(),
                    stored_key: vec![0; m.hash_len()],
                    server_key: Vec::new(),
                    iterations: m.min_iterations(),
                };
                let _ = decoy.matches_password(m, password.as_bytes());
                false
            }
        }
    }
}

/// `PlainSaslServer.extractTokens`: split at NUL, at most four pieces.
fn tokens(message: &str) -> Result<Vec<&str>, SaslFailure> {
    // Kafka's fourth piece ends at a fourth NUL, this one at the end: only
    // the count is looked at.
    let tokens: Vec<&str> = message.splitn(4, '\0').collect();
    if tokens.len() != 3 {
        return Err(SaslFailure::authentication(
            format!(
                "Invalid SASL/PLAIN response: expected 3 tokens, got {}",
                tokens.len()
            ),
            None,
        ));
    }
    Ok(tokens)
}

impl SaslServer for PlainServer {
    fn mechanism_name(&self) -> &'static str {
        PLAIN_MECHANISM
    }

    fn evaluate(&mut self, token: &[u8]) -> Result<Vec<u8>, SaslFailure> {
        if token.len() > super::MAX_RECEIVE_SIZE {
            return Err(SaslFailure::too_large(token.len()));
        }
        if self.complete {
            // Kafka's authenticator never hands PLAIN a second token; its
            // SCRAM server's words for the same thing.
            return Err(SaslFailure::illegal_state(
                "Unexpected challenge in Sasl server state COMPLETE",
                self.authorization_id.as_deref(),
            ));
        }
        // As Kafka's `new String(bytes, UTF_8)`: bad bytes become U+FFFD.
        let message = String::from_utf8_lossy(token);
        let t = tokens(&message)?;
        let (authzid, user, password) = (t[0], t[1], t[2]);
        let fail = |text: &str| SaslFailure::authentication(text, Some(user));
        if user.is_empty() {
            return Err(SaslFailure::authentication(
                "Authentication failed: username not specified",
                None,
            ));
        }
        if password.is_empty() {
            return Err(fail("Authentication failed: password not specified"));
        }
        if !self.verify(user, password) {
            return Err(fail("Authentication failed: Invalid username or password"));
        }
        if !authzid.is_empty() && authzid != user {
            return Err(fail(
                "Authentication failed: Client requested an authorization id that is different from username",
            ));
        }
        self.authorization_id = Some(user.to_string());
        self.complete = true;
        Ok(Vec::new())
    }

    fn is_complete(&self) -> bool {
        self.complete
    }

    fn authorization_id(&self) -> Option<&str> {
        self.authorization_id.as_deref().filter(|_| self.complete)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> Arc<CredentialStore> {
        let store = CredentialStore::in_memory();
        let m = ScramMechanism::Sha256;
        let c = ScramCredential::generate(m, "alice-secret", 4096).unwrap();
        store.upsert("alice", m, c).unwrap();
        store
    }

    fn refused(store: &Arc<CredentialStore>, token: &[u8]) -> SaslFailure {
        let mut s = PlainServer::new(store.clone());
        let e = s.evaluate(token).unwrap_err();
        assert!(!s.is_complete() && s.authorization_id().is_none());
        assert!(!e.illegal_state);
        assert_eq!(e.message, e.reason, "PLAIN's failures are told as they are");
        e
    }

    #[test]
    fn a_user_with_a_scram_credential_authenticates() {
        let store = store();
        for token in [&b"\0alice\0alice-secret"[..], b"alice\0alice\0alice-secret"] {
            let mut s = PlainServer::new(store.clone());
            assert_eq!(s.evaluate(token).unwrap(), b"");
            assert!(s.is_complete());
            assert_eq!(s.authorization_id(), Some("alice"));
            let e = s.evaluate(token).unwrap_err();
            assert!(e.illegal_state);
        }
    }

    #[test]
    fn sha512_is_checked_first() {
        let store = store();
        let m = ScramMechanism::Sha512;
        let c = ScramCredential::generate(m, "newer", 4096).unwrap();
        store.upsert("alice", m, c).unwrap();
        let mut s = PlainServer::new(store.clone());
        s.evaluate(b"\0alice\0newer").unwrap();
        let e = refused(&store, b"\0alice\0alice-secret");
        assert_eq!(
            e.message,
            "Authentication failed: Invalid username or password"
        );
    }

    #[test]
    fn every_refusal_has_kafkas_text() {
        let store = store();
        for (token, text) in [
            (
                &b""[..],
                "Invalid SASL/PLAIN response: expected 3 tokens, got 1",
            ),
            (
                b"alice",
                "Invalid SASL/PLAIN response: expected 3 tokens, got 1",
            ),
            (
                b"\0alice",
                "Invalid SASL/PLAIN response: expected 3 tokens, got 2",
            ),
            (
                b"\0alice\0pw\0x",
                "Invalid SASL/PLAIN response: expected 3 tokens, got 4",
            ),
            (
                b"\0alice\0pw\0x\0y",
                "Invalid SASL/PLAIN response: expected 3 tokens, got 4",
            ),
            (b"\0\0pw", "Authentication failed: username not specified"),
            (
                b"\0alice\0",
                "Authentication failed: password not specified",
            ),
            (
                b"\0alice\0wrong",
                "Authentication failed: Invalid username or password",
            ),
            (
                b"\0bob\0alice-secret",
                "Authentication failed: Invalid username or password",
            ),
            (
                b"\0al\xffice\0alice-secret",
                "Authentication failed: Invalid username or password",
            ),
            (
                b"admin\0alice\0alice-secret",
                "Authentication failed: Client requested an authorization id that is different from username",
            ),
        ] {
            assert_eq!(
                refused(&store, token).message,
                text,
                "{:?}",
                String::from_utf8_lossy(token)
            );
        }
        let e = refused(&store, b"\0alice\0wrong");
        assert_eq!(e.user.as_deref(), Some("alice"));
        assert!(!format!("{e:?}").contains("wrong"));
    }
}
