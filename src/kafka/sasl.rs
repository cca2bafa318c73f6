//! SASL: not served. A handshake is answered UNSUPPORTED_SASL_MECHANISM
//! with no mechanism enabled; the listener is PLAINTEXT only.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::sasl_handshake_response::SaslHandshakeResponse;
use log::warn;

pub fn handshake() -> SaslHandshakeResponse {
    warn!("Kafka: a SASL handshake refused: the listener is PLAINTEXT, without authentication");
    SaslHandshakeResponse::default()
        .with_error_code(ResponseError::UnsupportedSaslMechanism.code())
        .with_mechanisms(Vec::new())
}
