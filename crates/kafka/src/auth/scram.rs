//! SASL/SCRAM (RFC 5802; SCRAM-SHA-256 is RFC 7677) as Kafka's
//! `ScramSaslServer`, `ScramMessages` and `ScramFormatter` compute it: the
//! credential a user's password becomes, and the server side of the
//! exchange.
//!
//! Kafka's choices, kept here: only the gs2 header `n` (no channel
//! binding); extensions are accepted and ignored but `tokenauth`, which
//! asks for a delegation token, and delegation tokens are not served, so
//! it fails as Kafka fails a token it does not know; an unknown user fails
//! at the client's first message with the same text a wrong password gets
//! at its final one (the failure's `reason` differs, for the log only);
//! the auth message is rebuilt from the parsed fields (without a reserved
//! `m=` part), as `ScramFormatter.authMessage` does.
//!
//! The final message's nonce must end with the server-first nonce, as
//! Kafka checks it, not equal it as RFC 5802 asks: librdkafka 2.0 (Debian's
//! kcat) sends its own nonce again before the server's, and Kafka serves
//! it. The proof covers the message as sent, and the server's fresh nonce
//! is still in it, so a replay fails all the same.
//!
//! Where this is stricter than Kafka, as RFC 5802 asks: the final
//! message's channel binding must be the client's own gs2 header (`biws`
//! for `n,,`; Kafka does not look), and an `a=` authzid is decoded (`=2C`,
//! `=3D`) before it is compared with the user.

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use subtle::ConstantTimeEq;

use super::credentials::CredentialStore;
pub use super::formatter::{ScramCredential, ScramMechanism, secure_random_string};
use super::{SaslFailure, SaslServer};

/// `ScramFormatter.username`: a saslname decoded (`=2C` is `,`, `=3D` is
/// `=`); any other `=` is refused.
pub fn username(sasl_name: &str) -> Result<String, String> {
    let commas = sasl_name.replace("=2C", ",");
    if commas.replace("=3D", "").contains('=') {
        return Err(format!("Invalid username: {sasl_name}"));
    }
    Ok(commas.replace("=3D", "="))
}

/// `ScramFormatter.saslName`: the encoding of a user name in a message.
pub fn sasl_name(username: &str) -> String {
    username.replace('=', "=3D").replace(',', "=2C")
}

// The character classes of ScramMessages' patterns.

fn value_char(c: u8) -> bool {
    (0x01..=0x7f).contains(&c) && c != b','
}

fn is_value(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(value_char)
}

fn is_printable(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|c| (0x21..=0x7e).contains(&c) && c != b',')
}

fn is_alpha(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|c| c.is_ascii_alphabetic())
}

/// `(?:[\x01-\x7F&&[^=,]]|=2C|=3D)+`
fn is_sasl_name(s: &str) -> bool {
    let b = s.as_bytes();
    if b.is_empty() {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'=' {
            match b.get(i + 1..i + 3) {
                Some(b"2C") | Some(b"3D") => i += 3,
                _ => return false,
            }
        } else if value_char(b[i]) {
            i += 1;
        } else {
            return false;
        }
    }
    true
}

/// `(?:[a-zA-Z0-9/+]{4})*(?:[a-zA-Z0-9/+]{3}=|[a-zA-Z0-9/+]{2}==)?`, which
/// may be empty.
fn is_base64(s: &str) -> bool {
    let b = s.as_bytes();
    if !b.len().is_multiple_of(4) {
        return false;
    }
    let pad = b.iter().rev().take_while(|&&c| c == b'=').count();
    let chars = |x: &[u8]| {
        x.iter()
            .all(|&c| c.is_ascii_alphanumeric() || c == b'/' || c == b'+')
    };
    pad <= 2 && chars(&b[..b.len() - pad])
}

fn decode_base64(s: &str) -> Option<Vec<u8>> {
    if !is_base64(s) {
        return None;
    }
    B64.decode(s).ok()
}

/// `ClientFirstMessage`:
/// `n,(a=SASLNAME)?,(m=VALUE,)?n=SASLNAME,r=PRINTABLE(,ALPHA=VALUE)*`.
#[derive(Debug, PartialEq, Eq)]
struct ClientFirst {
    /// The raw gs2 header, `n,,` or `n,a=NAME,`.
    gs2_header: String,
    /// The authzid as sent (a saslname), or empty.
    authzid: String,
    sasl_name: String,
    nonce: String,
    extensions: Vec<(String, String)>,
}

impl ClientFirst {
    fn parse(message: &str) -> Option<ClientFirst> {
        let parts: Vec<&str> = message.split(',').collect();
        if parts.len() < 4 || parts[0] != "n" {
            return None;
        }
        let authzid = if parts[1].is_empty() {
            ""
        } else {
            let a = parts[1].strip_prefix("a=")?;
            if !is_sasl_name(a) {
                return None;
            }
            a
        };
        let mut i = 2;
        if let Some(m) = parts[i].strip_prefix("m=") {
            if !is_value(m) {
                return None;
            }
            i += 1;
        }
        let sasl_name = parts.get(i)?.strip_prefix("n=")?;
        let nonce = parts.get(i + 1)?.strip_prefix("r=")?;
        if !is_sasl_name(sasl_name) || !is_printable(nonce) {
            return None;
        }
        let extensions = parse_extensions(&parts[i + 2..])?;
        Some(ClientFirst {
            gs2_header: format!("{},{},", parts[0], parts[1]),
            authzid: authzid.to_string(),
            sasl_name: sasl_name.to_string(),
            nonce: nonce.to_string(),
            extensions,
        })
    }

    /// `clientFirstMessageBare()`, rebuilt from the fields as Kafka does.
    fn bare(&self) -> String {
        let mut s = format!("n={},r={}", self.sasl_name, self.nonce);
        for (k, v) in &self.extensions {
            s.push_str(&format!(",{k}={v}"));
        }
        s
    }

    /// `ScramExtensions.tokenAuthenticated()`: `Boolean.parseBoolean`.
    fn token_authenticated(&self) -> bool {
        // Utils.parseMap: a later key replaces an earlier one.
        (self.extensions.iter().rev())
            .find(|(k, _)| k == "tokenauth")
            .is_some_and(|(_, v)| v.eq_ignore_ascii_case("true"))
    }
}

/// `(,ALPHA=VALUE)*`, already split at the commas.
fn parse_extensions(parts: &[&str]) -> Option<Vec<(String, String)>> {
    parts
        .iter()
        .map(|p| {
            let (k, v) = p.split_once('=')?;
            (is_alpha(k) && is_value(v)).then(|| (k.to_string(), v.to_string()))
        })
        .collect()
}

/// `ClientFinalMessage`: `c=BASE64,r=PRINTABLE(,ALPHA=VALUE)*,p=BASE64`.
struct ClientFinal {
    channel_binding: Vec<u8>,
    nonce: String,
    proof: Vec<u8>,
}

impl ClientFinal {
    fn parse(message: &str) -> Option<ClientFinal> {
        let parts: Vec<&str> = message.split(',').collect();
        if parts.len() < 3 {
            return None;
        }
        let channel = parts[0].strip_prefix("c=")?;
        let nonce = parts[1].strip_prefix("r=")?;
        let proof = parts[parts.len() - 1].strip_prefix("p=")?;
        if !is_printable(nonce) {
            return None;
        }
        parse_extensions(&parts[2..parts.len() - 1])?;
        Some(ClientFinal {
            channel_binding: decode_base64(channel)?,
            nonce: nonce.to_string(),
            proof: decode_base64(proof)?,
        })
    }

    /// `clientFinalMessageWithoutProof()`, rebuilt as Kafka does.
    fn without_proof(&self) -> String {
        format!("c={},r={}", B64.encode(&self.channel_binding), self.nonce)
    }
}

/// What the client's first message and the answer to it left for the
/// final message.
struct Exchange {
    user: String,
    client_first: ClientFirst,
    server_first: String,
    nonce: String,
    credential: ScramCredential,
}

/// The exchange's state, Kafka's `ScramSaslServer.State` with what each
/// step keeps.
enum ScramState {
    ReceiveClientFirst,
    ReceiveClientFinal(Box<Exchange>),
    Complete,
    Failed,
}

impl ScramState {
    fn name(&self) -> &'static str {
        match self {
            ScramState::ReceiveClientFirst => "RECEIVE_CLIENT_FIRST_MESSAGE",
            ScramState::ReceiveClientFinal(_) => "RECEIVE_CLIENT_FINAL_MESSAGE",
            ScramState::Complete => "COMPLETE",
            ScramState::Failed => "FAILED",
        }
    }
}

/// The server side of one SCRAM exchange (one connection's).
pub struct ScramServer {
    mechanism: ScramMechanism,
    store: Arc<CredentialStore>,
    state: ScramState,
    authorization_id: Option<String>,
    /// Tests fix the server's part of the nonce to compute known answers.
    fixed_nonce: Option<String>,
}

impl ScramServer {
    pub fn new(mechanism: ScramMechanism, store: Arc<CredentialStore>) -> ScramServer {
        ScramServer {
            mechanism,
            store,
            state: ScramState::ReceiveClientFirst,
            authorization_id: None,
            fixed_nonce: None,
        }
    }

    #[cfg(test)]
    fn with_server_nonce(
        mechanism: ScramMechanism,
        store: Arc<CredentialStore>,
        nonce: &str,
    ) -> ScramServer {
        let mut s = ScramServer::new(mechanism, store);
        s.fixed_nonce = Some(nonce.to_string());
        s
    }

    fn invalid(&self, reason: impl Into<String>, user: Option<&str>) -> SaslFailure {
        SaslFailure::invalid_credentials(self.mechanism.mechanism_name(), reason, user)
    }

    fn client_first(&mut self, token: &[u8]) -> Result<Vec<u8>, SaslFailure> {
        let text = String::from_utf8_lossy(token);
        let Some(first) = ClientFirst::parse(&text) else {
            return Err(self.invalid(
                format!("Invalid SCRAM client first message format: {text}"),
                None,
            ));
        };
        let user = username(&first.sasl_name).map_err(|e| {
            self.invalid(
                format!("Authentication failed: Credentials could not be obtained ({e})"),
                None,
            )
        })?;
        let who = Some(user.as_str());
        if first.token_authenticated() {
            // DelegationTokenCredentialCallback finds no token: none is served.
            return Err(self.invalid(
                format!("Token Authentication failed: Invalid tokenId : {user}"),
                who,
            ));
        }
        let Some(credential) = self.store.get(&user, self.mechanism) else {
            return Err(self.invalid("Authentication failed: Invalid user credentials", who));
        };
        if !first.authzid.is_empty() && username(&first.authzid).ok().as_deref() != Some(&user) {
            return Err(SaslFailure::authentication(
                "Authentication failed: Client requested an authorization id that is different from username",
                who,
            ));
        }
        let min = self.mechanism.min_iterations();
        if credential.iterations < min {
            return Err(self.invalid(
                format!(
                    "Iterations {} is less than the minimum {min} for {}",
                    credential.iterations,
                    self.mechanism.enum_name()
                ),
                who,
            ));
        }
        let server_nonce = match &self.fixed_nonce {
            Some(n) => n.clone(),
            None => secure_random_string().map_err(|e| {
                self.invalid(
                    format!("Authentication failed: Credentials could not be obtained ({e})"),
                    who,
                )
            })?,
        };
        let nonce = format!("{}{server_nonce}", first.nonce);
        let server_first = format!(
            "r={nonce},s={},i={}",
            B64.encode(&credential.salt),
            credential.iterations
        );
        let reply = server_first.clone().into_bytes();
        self.state = ScramState::ReceiveClientFinal(Box::new(Exchange {
            user,
            client_first: first,
            server_first,
            nonce,
            credential,
        }));
        Ok(reply)
    }

    fn client_final(&mut self, token: &[u8]) -> Result<Vec<u8>, SaslFailure> {
        let ScramState::ReceiveClientFinal(exchange) =
            std::mem::replace(&mut self.state, ScramState::Failed)
        else {
            unreachable!("called in RECEIVE_CLIENT_FINAL_MESSAGE only");
        };
        let Exchange {
            user,
            client_first,
            server_first,
            nonce,
            credential,
        } = *exchange;
        let who = Some(user.as_str());
        let Some(last) = std::str::from_utf8(token).ok().and_then(ClientFinal::parse) else {
            // Kafka quotes the message; the proof in it is not logged here.
            return Err(self.invalid("Invalid SCRAM client final message format", who));
        };
        if !last.nonce.ends_with(&nonce) {
            return Err(self.invalid("Invalid client nonce in the final client message.", who));
        }
        if last.channel_binding != client_first.gs2_header.as_bytes() {
            return Err(self.invalid(
                "Invalid channel binding in the final client message: it is not the client's gs2 header",
                who,
            ));
        }
        let auth_message = format!(
            "{},{server_first},{}",
            client_first.bare(),
            last.without_proof()
        );
        let m = self.mechanism;
        let client_signature = m.hmac(&credential.stored_key, auth_message.as_bytes());
        let proven = last.proof.len() == client_signature.len() && {
            let client_key: Vec<u8> = (client_signature.iter().zip(&last.proof))
                .map(|(a, b)| a ^ b)
                .collect();
            bool::from(m.hash(&client_key).ct_eq(&credential.stored_key))
        };
        if !proven {
            return Err(self.invalid("Invalid client credentials", who));
        }
        let server_signature = m.hmac(&credential.server_key, auth_message.as_bytes());
        self.authorization_id = Some(user);
        self.state = ScramState::Complete;
        Ok(format!("v={}", B64.encode(server_signature)).into_bytes())
    }
}

impl SaslServer for ScramServer {
    fn mechanism_name(&self) -> &'static str {
        self.mechanism.mechanism_name()
    }

    fn evaluate(&mut self, token: &[u8]) -> Result<Vec<u8>, SaslFailure> {
        let result = match self.state {
            _ if token.len() > super::MAX_RECEIVE_SIZE => Err(SaslFailure::too_large(token.len())),
            ScramState::ReceiveClientFirst => self.client_first(token),
            ScramState::ReceiveClientFinal(_) => self.client_final(token),
            ScramState::Complete | ScramState::Failed => Err(SaslFailure::illegal_state(
                format!(
                    "Unexpected challenge in Sasl server state {}",
                    self.state.name()
                ),
                self.authorization_id.as_deref(),
            )),
        };
        if result.is_err() {
            // As Kafka: any failure ends the exchange, and the keys go.
            self.state = ScramState::Failed;
        }
        result
    }

    fn is_complete(&self) -> bool {
        matches!(self.state, ScramState::Complete)
    }

    fn authorization_id(&self) -> Option<&str> {
        if self.is_complete() {
            self.authorization_id.as_deref()
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::formatter::to_base36;

    fn b64(s: &str) -> Vec<u8> {
        B64.decode(s).unwrap()
    }

    fn store_with(user: &str, m: ScramMechanism, cred: ScramCredential) -> Arc<CredentialStore> {
        let store = CredentialStore::in_memory();
        store.upsert(user, m, cred).unwrap();
        store
    }

    /// RFC 7677 section 3: user "user", password "pencil".
    const RFC7677_CLIENT_FIRST: &str = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
    const RFC7677_SERVER_NONCE: &str = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
    const RFC7677_SERVER_FIRST: &str =
        "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
    const RFC7677_CLIENT_FINAL: &str = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
    const RFC7677_SERVER_FINAL: &str = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";

    fn rfc7677_server() -> ScramServer {
        let m = ScramMechanism::Sha256;
        let cred =
            ScramCredential::from_password(m, "pencil", &b64("W22ZaJ0SNY7soEsUEjb6gQ=="), 4096);
        ScramServer::with_server_nonce(m, store_with("user", m, cred), RFC7677_SERVER_NONCE)
    }

    #[test]
    fn rfc7677_sha256_exchange() {
        let mut s = rfc7677_server();
        let first = s.evaluate(RFC7677_CLIENT_FIRST.as_bytes()).unwrap();
        assert_eq!(std::str::from_utf8(&first).unwrap(), RFC7677_SERVER_FIRST);
        assert!(!s.is_complete());
        assert_eq!(s.authorization_id(), None);
        let last = s.evaluate(RFC7677_CLIENT_FINAL.as_bytes()).unwrap();
        assert_eq!(std::str::from_utf8(&last).unwrap(), RFC7677_SERVER_FINAL);
        assert!(s.is_complete());
        assert_eq!(s.authorization_id(), Some("user"));
        // A replayed final message: the exchange is over.
        let e = s.evaluate(RFC7677_CLIENT_FINAL.as_bytes()).unwrap_err();
        assert!(e.illegal_state);
        assert_eq!(
            e.message,
            "Unexpected challenge in Sasl server state COMPLETE"
        );
        assert!(!s.is_complete());
    }

    /// A client computing its proof as RFC 5802 section 3 says, to drive
    /// the exchange for mechanisms and users RFC 7677 has no example of.
    fn client_final(
        m: ScramMechanism,
        password: &str,
        client_first_bare: &str,
        server_first: &str,
        gs2: &str,
    ) -> (String, String) {
        let nonce = server_first.split(',').next().unwrap();
        let nonce = nonce.strip_prefix("r=").unwrap();
        client_final_with_nonce(m, password, client_first_bare, server_first, gs2, nonce)
    }

    /// [`client_final`] sending `nonce` in place of the server-first one.
    fn client_final_with_nonce(
        m: ScramMechanism,
        password: &str,
        client_first_bare: &str,
        server_first: &str,
        gs2: &str,
        nonce: &str,
    ) -> (String, String) {
        let fields: Vec<&str> = server_first.split(',').collect();
        let salt = b64(fields[1].strip_prefix("s=").unwrap());
        let iterations: i32 = fields[2].strip_prefix("i=").unwrap().parse().unwrap();
        let salted = m.salted_password(password.as_bytes(), &salt, iterations);
        let client_key = m.hmac(&salted, b"Client Key");
        let stored_key = m.hash(&client_key);
        let without_proof = format!("c={},r={nonce}", B64.encode(gs2));
        let auth = format!("{client_first_bare},{server_first},{without_proof}");
        let sig = m.hmac(&stored_key, auth.as_bytes());
        let proof: Vec<u8> = client_key.iter().zip(&sig).map(|(a, b)| a ^ b).collect();
        let server_sig = m.hmac(&m.hmac(&salted, b"Server Key"), auth.as_bytes());
        (
            format!("{without_proof},p={}", B64.encode(proof)),
            format!("v={}", B64.encode(server_sig)),
        )
    }

    fn exchange(
        m: ScramMechanism,
        store: &Arc<CredentialStore>,
        first: &str,
        password: &str,
    ) -> (ScramServer, Result<Vec<u8>, SaslFailure>, String) {
        let mut s = ScramServer::new(m, store.clone());
        let sf = match s.evaluate(first.as_bytes()) {
            Ok(sf) => String::from_utf8(sf).unwrap(),
            Err(e) => return (s, Err(e), String::new()),
        };
        let (gs2, bare) = first.split_at(first.find("n=").unwrap());
        let bare = bare.to_string();
        let (cf, sig) = client_final(m, password, &bare, &sf, gs2);
        let r = s.evaluate(cf.as_bytes());
        (s, r, sig)
    }

    #[test]
    fn both_mechanisms_authenticate_with_a_random_nonce() {
        for m in ScramMechanism::ALL {
            let store = store_with(
                "alice",
                m,
                ScramCredential::generate(m, "alice-secret", 4096).unwrap(),
            );
            let (s, r, sig) = exchange(m, &store, "n,,n=alice,r=abcdefgh", "alice-secret");
            assert_eq!(String::from_utf8(r.unwrap()).unwrap(), sig, "{m:?}");
            assert_eq!(s.authorization_id(), Some("alice"));
            // The other mechanism has no credential for alice.
            let other = ScramMechanism::ALL.into_iter().find(|&o| o != m).unwrap();
            let e = ScramServer::new(other, store.clone())
                .evaluate(b"n,,n=alice,r=abcdefgh")
                .unwrap_err();
            assert_eq!(e.reason, "Authentication failed: Invalid user credentials");
        }
    }

    /// librdkafka 2.0 (Debian's kcat) sends its own nonce, then the whole
    /// server-first nonce; Kafka takes any nonce that ends with the
    /// server's. One that does not end with it still fails.
    #[test]
    fn a_final_nonce_that_ends_with_the_servers_is_taken_as_kafka_takes_it() {
        let m = ScramMechanism::Sha512;
        let store = store_with(
            "alice",
            m,
            ScramCredential::generate(m, "secret", 4096).unwrap(),
        );
        let first = "n,,n=alice,r=clientnonce";
        for (prefix, suffix, ok) in [("clientnonce", "", true), ("", "x", false)] {
            let mut s = ScramServer::new(m, store.clone());
            let sf = String::from_utf8(s.evaluate(first.as_bytes()).unwrap()).unwrap();
            let combined = sf.split(',').next().unwrap().strip_prefix("r=").unwrap();
            let sent = format!("{prefix}{combined}{suffix}");
            let (cf, sig) =
                client_final_with_nonce(m, "secret", "n=alice,r=clientnonce", &sf, "n,,", &sent);
            match s.evaluate(cf.as_bytes()) {
                Ok(reply) => {
                    assert!(ok, "{sent} was taken");
                    assert_eq!(String::from_utf8(reply).unwrap(), sig);
                    assert_eq!(s.authorization_id(), Some("alice"));
                }
                Err(e) => {
                    assert!(!ok, "{sent}: {e:?}");
                    assert_eq!(
                        e.reason,
                        "Invalid client nonce in the final client message."
                    );
                }
            }
        }
    }

    #[test]
    fn server_nonces_are_fresh() {
        let a = secure_random_string().unwrap();
        let b = secure_random_string().unwrap();
        assert_ne!(a, b);
        assert!(a.len() <= 26 && a.bytes().all(|c| c.is_ascii_alphanumeric()));
        assert_eq!(to_base36(vec![0, 0]), "0");
        assert_eq!(to_base36(vec![1, 0]), "74");
        let mut max = vec![0xffu8; 17];
        max[0] = 3;
        assert_eq!(to_base36(max), "1omfro7zwmumr3umxudzyj6scf");
    }

    #[test]
    fn wrong_password_and_unknown_user_tell_the_client_the_same() {
        let m = ScramMechanism::Sha512;
        let store = store_with(
            "alice",
            m,
            ScramCredential::generate(m, "right", 4096).unwrap(),
        );
        let (s, r, _) = exchange(m, &store, "n,,n=alice,r=abc", "wrong");
        let bad_password = r.unwrap_err();
        assert_eq!(bad_password.reason, "Invalid client credentials");
        assert_eq!(bad_password.user.as_deref(), Some("alice"));
        assert!(!s.is_complete() && s.authorization_id().is_none());
        let (_, r, _) = exchange(m, &store, "n,,n=bob,r=abc", "right");
        let unknown = r.unwrap_err();
        assert_eq!(
            unknown.reason,
            "Authentication failed: Invalid user credentials"
        );
        let text = "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512";
        assert_eq!(bad_password.message, text);
        assert_eq!(unknown.message, text);
        assert!(!bad_password.illegal_state && !unknown.illegal_state);
    }

    #[test]
    fn names_are_decoded_and_authzid_must_be_the_user() {
        let m = ScramMechanism::Sha256;
        let store = store_with(
            "a,b=c",
            m,
            ScramCredential::generate(m, "pw", 4096).unwrap(),
        );
        let (s, r, _) = exchange(m, &store, "n,,n=a=2Cb=3Dc,r=x", "pw");
        r.unwrap();
        assert_eq!(s.authorization_id(), Some("a,b=c"));
        let (s, r, _) = exchange(m, &store, "n,a=a=2Cb=3Dc,n=a=2Cb=3Dc,r=x", "pw");
        r.unwrap();
        assert_eq!(s.authorization_id(), Some("a,b=c"));
        let (_, r, _) = exchange(m, &store, "n,a=admin,n=a=2Cb=3Dc,r=x", "pw");
        let e = r.unwrap_err();
        assert_eq!(
            e.message,
            "Authentication failed: Client requested an authorization id that is different from username"
        );
        assert!(!e.illegal_state);
        assert_eq!(sasl_name("a,b=c"), "a=2Cb=3Dc");
        assert_eq!(username("a=2Cb=3Dc").unwrap(), "a,b=c");
        assert!(username("a=41").is_err());
    }

    #[test]
    fn extensions_are_ignored_but_tokenauth_fails() {
        let m = ScramMechanism::Sha256;
        let store = store_with(
            "alice",
            m,
            ScramCredential::generate(m, "pw", 4096).unwrap(),
        );
        let (s, r, _) = exchange(
            m,
            &store,
            "n,,n=alice,r=x,foo=bar=baz,tokenauth=false",
            "pw",
        );
        r.unwrap();
        assert!(s.is_complete());
        let (_, r, _) = exchange(m, &store, "n,,n=alice,r=x,tokenauth=TRUE", "pw");
        let e = r.unwrap_err();
        assert_eq!(
            e.reason,
            "Token Authentication failed: Invalid tokenId : alice"
        );
        assert!(
            e.message.starts_with(
                "Authentication failed during authentication due to invalid credentials"
            )
        );
    }

    #[test]
    fn iterations_below_the_minimum_are_refused() {
        let m = ScramMechanism::Sha256;
        let store = store_with(
            "alice",
            m,
            ScramCredential::from_password(m, "pw", b"salt", 4095),
        );
        let e = ScramServer::new(m, store)
            .evaluate(b"n,,n=alice,r=x")
            .unwrap_err();
        assert_eq!(
            e.reason,
            "Iterations 4095 is less than the minimum 4096 for SCRAM_SHA_256"
        );
    }

    #[test]
    fn malformed_first_messages_fail_without_panicking() {
        let m = ScramMechanism::Sha256;
        let store = store_with(
            "alice",
            m,
            ScramCredential::generate(m, "pw", 4096).unwrap(),
        );
        for bad in [
            &b""[..],
            b"n",
            b"y,,n=alice,r=x",
            b"p=tls-unique,,n=alice,r=x",
            b"n,,n=alice",
            b"n,,r=x,n=alice",
            b"n,,n=,r=x",
            b"n,,n=alice,r=",
            b"n,,n=al=ice,r=x",
            b"n,,n=alice,r=x,",
            b"n,,n=alice,r=x,1=2",
            b"n,,n=alice,r=x,k=",
            b"n,b=alice,n=alice,r=x",
            b"n,,m=,n=alice,r=x",
            b"n,,n=al\xc3\xa9,r=x",
            b"n,,n=alice,r=x y",
            b"\xff\xfe",
        ] {
            let mut s = ScramServer::new(m, store.clone());
            let e = s.evaluate(bad).unwrap_err();
            assert!(
                e.reason
                    .starts_with("Invalid SCRAM client first message format: "),
                "{:?}: {}",
                String::from_utf8_lossy(bad),
                e.reason
            );
            assert!(!e.illegal_state);
            let again = s.evaluate(b"n,,n=alice,r=x").unwrap_err();
            assert!(again.illegal_state);
            assert_eq!(
                again.message,
                "Unexpected challenge in Sasl server state FAILED"
            );
        }
        // A reserved m= part is accepted (and left out of the auth message).
        let mut s = ScramServer::new(m, store.clone());
        assert!(s.evaluate(b"n,,m=ext,n=alice,r=x").is_ok());
    }

    #[test]
    fn malformed_or_mismatched_final_messages_fail() {
        let finals = [
            "".to_string(),
            "c=biws".to_string(),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0".to_string(),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=***".to_string(),
            "c=biw,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=".to_string(),
            RFC7677_CLIENT_FINAL.replace("p=dHz", "p=eHz"),
            RFC7677_CLIENT_FINAL.replace(",p=", ",x=y,p=").replace("p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=", "p=AAAA"),
            RFC7677_CLIENT_FINAL.replace("$k0", "$k1"),
            format!("x{RFC7677_CLIENT_FINAL}"),
            RFC7677_CLIENT_FINAL.replace("r=rOpr", "r=XrOpr"),
            RFC7677_CLIENT_FINAL.replace("c=biws", "c=eSws"),
            RFC7677_CLIENT_FINAL.replace("c=biws", "c="),
        ];
        for bad in finals {
            let mut s = rfc7677_server();
            s.evaluate(RFC7677_CLIENT_FIRST.as_bytes()).unwrap();
            let e = s.evaluate(bad.as_bytes()).unwrap_err();
            assert!(!e.illegal_state, "{bad}");
            assert_eq!(e.user.as_deref(), Some("user"));
            assert_eq!(
                e.message,
                "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"
            );
            assert!(!s.is_complete() && s.authorization_id().is_none());
            // The right final message cannot follow a failed one.
            assert!(
                s.evaluate(RFC7677_CLIENT_FINAL.as_bytes())
                    .unwrap_err()
                    .illegal_state
            );
        }
        let mut s = rfc7677_server();
        s.evaluate(RFC7677_CLIENT_FIRST.as_bytes()).unwrap();
        let nonce = RFC7677_CLIENT_FINAL.replace("$k0", "$k1");
        assert_eq!(
            s.evaluate(nonce.as_bytes()).unwrap_err().reason,
            "Invalid client nonce in the final client message."
        );
    }

    #[test]
    fn an_oversize_token_is_refused() {
        let mut s = rfc7677_server();
        let e = s
            .evaluate(&vec![b'n'; super::super::MAX_RECEIVE_SIZE + 1])
            .unwrap_err();
        assert_eq!(
            e.message,
            "Failing SASL authentication due to invalid receive size"
        );
    }

    #[test]
    fn rfc5802_messages_parse() {
        // RFC 5802 section 5's example is SCRAM-SHA-1, which Kafka does not
        // serve: its messages still parse as any mechanism's.
        let first = ClientFirst::parse("n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL").unwrap();
        assert_eq!(first.sasl_name, "user");
        assert_eq!(first.nonce, "fyko+d2lbbFgONRv9qkxdawL");
        assert_eq!(first.gs2_header, "n,,");
        assert_eq!(first.bare(), "n=user,r=fyko+d2lbbFgONRv9qkxdawL");
        let last = ClientFinal::parse(
            "c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
        )
        .unwrap();
        assert_eq!(last.channel_binding, b"n,,");
        assert_eq!(last.nonce, "fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j");
        assert_eq!(last.proof.len(), 20);
        assert_eq!(
            last.without_proof(),
            "c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j"
        );
    }

    #[test]
    fn credentials_from_salted_passwords_match_passwords() {
        let m = ScramMechanism::Sha256;
        let salt = b64("W22ZaJ0SNY7soEsUEjb6gQ==");
        let salted = m.salted_password(b"pencil", &salt, 4096);
        let a = ScramCredential::from_salted_password(m, &salt, &salted, 4096);
        assert_eq!(a, ScramCredential::from_password(m, "pencil", &salt, 4096));
        assert!(a.matches_password(m, b"pencil"));
        assert!(!a.matches_password(m, b"pencil "));
        assert!(!format!("{a:?}").contains(&B64.encode(&a.stored_key)));
        for m in ScramMechanism::ALL {
            assert_eq!(
                ScramMechanism::from_mechanism_name(m.mechanism_name()),
                Some(m)
            );
            assert_eq!(ScramMechanism::from_type(m.type_id()), Some(m));
        }
        assert_eq!(ScramMechanism::from_type(0), None);
        assert_eq!(ScramMechanism::from_mechanism_name("SCRAM-SHA-1"), None);
    }
}
