//! One connection's SASL exchange on a `SASL_PLAINTEXT` or `SASL_SSL`
//! listener, as Kafka's `SaslServerAuthenticator`: every frame the
//! connection sends before it has authenticated comes here, and nothing
//! else is served until it has.
//!
//! The states: ApiVersions or SaslHandshake first (ApiVersions at most
//! once, then SaslHandshake); after SaslHandshake v1, SaslAuthenticate
//! requests carry the mechanism's tokens; after v0, the tokens come bare
//! (size-prefixed, no request header). Any other request is an illegal
//! state: the connection is closed without an answer. A failed exchange
//! is answered (SASL_AUTHENTICATION_FAILED with Kafka's message, or
//! UNSUPPORTED_SASL_MECHANISM) and the connection closed after
//! `connection.failed.authentication.delay.ms`.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::sasl_authenticate_response::SaslAuthenticateResponse;
use kafka_protocol::messages::sasl_handshake_response::SaslHandshakeResponse;
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseKind};
use kafka_protocol::protocol::{Decodable, StrBytes};

use super::{CredentialStore, SaslServer, server_for};
use crate::broker::Broker;
use crate::handlers::dispatch::{Encoded, Handled, encode_response, handle_frame};
use crate::handlers::versions::served;
use crate::network::session::{Principal, Session};

/// Where the exchange is.
enum AuthState {
    /// Nothing yet: ApiVersions or SaslHandshake.
    HandshakeOrVersions,
    /// ApiVersions came: SaslHandshake now.
    Handshake,
    /// The mechanism's tokens: in SaslAuthenticate requests (`headers`) or bare.
    Authenticate { headers: bool },
}

/// How a SASL answer is encoded, with the request's key, version and
/// correlation id.
type Encode<'a> = dyn Fn(ResponseKind) -> Result<Encoded, String> + 'a;

/// What one frame came to.
pub enum AuthStep {
    /// Send this and go on authenticating.
    Continue(Encoded),
    /// Authenticated: send this and serve the connection as `principal`.
    Authenticated {
        reply: Encoded,
        principal: Principal,
    },
    /// Send this (if anything), then close after the failed-authentication
    /// delay. `log` says what was refused and why, naming the user if
    /// known and never a password.
    Failed { reply: Option<Encoded>, log: String },
}

pub struct Authenticator {
    state: AuthState,
    /// `sasl.enabled.mechanisms` of the listener, in its order.
    enabled: Vec<String>,
    store: Arc<CredentialStore>,
    server: Option<Box<dyn SaslServer>>,
}

impl Authenticator {
    pub fn new(enabled: Vec<String>, store: Arc<CredentialStore>) -> Authenticator {
        Authenticator {
            state: AuthState::HandshakeOrVersions,
            enabled,
            store,
            server: None,
        }
    }

    /// One frame of the connection, before it has authenticated.
    pub fn handle(&mut self, broker: &Broker, session: &Session, frame: Bytes) -> AuthStep {
        let failed = |log: String| AuthStep::Failed { reply: None, log };
        if let AuthState::Authenticate { headers: false } = self.state {
            return self.bare_token(&frame);
        }
        if frame.len() < 4 {
            return failed(format!(
                "a request of {} bytes during SASL authentication",
                frame.len()
            ));
        }
        let raw_key = i16::from_be_bytes([frame[0], frame[1]]);
        let version = i16::from_be_bytes([frame[2], frame[3]]);
        let key = ApiKey::try_from(raw_key).ok();
        let in_handshake = !matches!(self.state, AuthState::Authenticate { .. });
        match key {
            Some(ApiKey::ApiVersions) if matches!(self.state, AuthState::HandshakeOrVersions) => {
                return match handle_frame(broker, session, frame) {
                    Ok(Handled::Reply(Some(reply))) => {
                        // A version too new is answered UNSUPPORTED_VERSION
                        // at v0, and the client asks again (Kafka's
                        // `handleApiVersionsRequest` stays in this state).
                        let newest = served(ApiKey::ApiVersions).map_or(0, |a| a.max);
                        if version <= newest {
                            self.state = AuthState::Handshake;
                        }
                        AuthStep::Continue(reply)
                    }
                    Ok(_) => failed("an ApiVersions request with no answer".to_string()),
                    Err(r) => failed(format!("a malformed ApiVersions request: {r}")),
                };
            }
            Some(ApiKey::SaslHandshake) if in_handshake => {}
            Some(ApiKey::SaslAuthenticate) if !in_handshake => {}
            _ => {
                let name = key.map_or_else(|| format!("{raw_key}"), |k| format!("{k:?}"));
                let during = if in_handshake {
                    "SASL handshake"
                } else {
                    "SASL authentication"
                };
                return failed(format!(
                    "Unexpected Kafka request of type {name} during {during}."
                ));
            }
        }
        let key = key.expect("matched above");
        let mut buf = frame;
        let header = match RequestHeader::decode(&mut buf, key.request_header_version(version)) {
            Ok(h) => h,
            Err(e) => return failed(format!("a malformed {key:?} header: {e}")),
        };
        let max = if key == ApiKey::SaslHandshake { 1 } else { 2 };
        if !(0..=max).contains(&version) {
            return failed(format!(
                "Version {version} is not supported for apiKey {key:?}"
            ));
        }
        let request = match RequestKind::decode(key, &mut buf, version) {
            Ok(r) => r,
            Err(e) => return failed(format!("a malformed {key:?} v{version} request: {e}")),
        };
        let encode = |body: ResponseKind| {
            encode_response(key, version, header.correlation_id, body)
                .map_err(|r| format!("cannot answer {key:?}: {r}"))
        };
        match request {
            RequestKind::SaslHandshake(r) => self.handshake(&r.mechanism, version, &encode),
            RequestKind::SaslAuthenticate(r) => self.authenticate(&r.auth_bytes, &encode),
            _ => failed(format!("Unexpected Kafka request of type {key:?}")),
        }
    }

    /// SaslHandshake: the mechanism, if it is enabled and served.
    fn handshake(&mut self, mechanism: &StrBytes, version: i16, encode: &Encode) -> AuthStep {
        let failed = |log: String| AuthStep::Failed { reply: None, log };
        let mechanism = mechanism.to_string();
        let mechanisms: Vec<StrBytes> = self
            .enabled
            .iter()
            .map(|m| StrBytes::from_string(m.clone()))
            .collect();
        let known = self.enabled.contains(&mechanism);
        let server = known.then(|| server_for(&mechanism, &self.store)).flatten();
        let code = match server {
            Some(_) => 0,
            None => ResponseError::UnsupportedSaslMechanism.code(),
        };
        let reply = match encode(ResponseKind::SaslHandshake(
            SaslHandshakeResponse::default()
                .with_error_code(code)
                .with_mechanisms(mechanisms),
        )) {
            Ok(e) => e,
            Err(why) => return failed(why),
        };
        match server {
            Some(server) => {
                self.server = Some(server);
                self.state = AuthState::Authenticate {
                    headers: version >= 1,
                };
                AuthStep::Continue(reply)
            }
            None => AuthStep::Failed {
                reply: Some(reply),
                log: format!("Unsupported SASL mechanism {mechanism}"),
            },
        }
    }

    /// SaslAuthenticate: one token of the mechanism's exchange.
    fn authenticate(&mut self, token: &[u8], encode: &Encode) -> AuthStep {
        let failed = |log: String| AuthStep::Failed { reply: None, log };
        let Some(server) = self.server.as_mut() else {
            return failed("a SaslAuthenticate before a handshake".to_string());
        };
        match server.evaluate(token) {
            Ok(token) => {
                let body = SaslAuthenticateResponse::default()
                    .with_auth_bytes(Bytes::from(token))
                    .with_session_lifetime_ms(0);
                let reply = match encode(ResponseKind::SaslAuthenticate(body)) {
                    Ok(e) => e,
                    Err(why) => return failed(why),
                };
                self.after_token(reply)
            }
            Err(f) => {
                let log = failure_log(server.mechanism_name(), &f);
                if f.illegal_state {
                    return failed(log);
                }
                let body = SaslAuthenticateResponse::default()
                    .with_error_code(f.error_code())
                    .with_error_message(Some(StrBytes::from_string(f.message.clone())));
                AuthStep::Failed {
                    reply: encode(ResponseKind::SaslAuthenticate(body)).ok(),
                    log,
                }
            }
        }
    }

    /// After SaslHandshake v0: the token is the whole frame, and so is the
    /// answer.
    fn bare_token(&mut self, frame: &[u8]) -> AuthStep {
        let Some(server) = self.server.as_mut() else {
            return AuthStep::Failed {
                reply: None,
                log: "a SASL token before a handshake".to_string(),
            };
        };
        match server.evaluate(frame) {
            Ok(token) => {
                let size = token.len() as i32;
                let reply = Encoded {
                    prefix: size.to_be_bytes(),
                    body: crate::network::splice::SpliceBuf::from_bytes(token),
                };
                self.after_token(reply)
            }
            Err(f) => AuthStep::Failed {
                reply: None,
                log: failure_log(server.mechanism_name(), &f),
            },
        }
    }

    fn after_token(&mut self, reply: Encoded) -> AuthStep {
        let server = self.server.as_ref().expect("a token was evaluated");
        if !server.is_complete() {
            return AuthStep::Continue(reply);
        }
        match server.authorization_id() {
            Some(user) => AuthStep::Authenticated {
                reply,
                principal: Principal::user(user),
            },
            None => AuthStep::Failed {
                reply: Some(reply),
                log: "the SASL exchange completed without a user".to_string(),
            },
        }
    }
}

fn failure_log(mechanism: &str, f: &super::SaslFailure) -> String {
    match &f.user {
        Some(user) => format!(
            "user {user:?} failed to authenticate with {mechanism}: {}",
            f.reason
        ),
        None => format!("failed to authenticate with {mechanism}: {}", f.reason),
    }
}
