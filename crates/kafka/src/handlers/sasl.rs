//! SASL requests that reach the request handlers: those of a connection
//! that needs no authentication (a PLAINTEXT or SSL listener) or that has
//! already authenticated; the exchange itself is `auth::authenticator`'s.
//! As Kafka's `KafkaApis.handleSaslHandshakeRequest` and
//! `handleSaslAuthenticateRequest`, both are answered ILLEGAL_SASL_STATE.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::sasl_authenticate_response::SaslAuthenticateResponse;
use kafka_protocol::messages::sasl_handshake_response::SaslHandshakeResponse;
use kafka_protocol::protocol::StrBytes;
use log::warn;

pub fn handshake() -> SaslHandshakeResponse {
    warn!(
        "Kafka: a SASL handshake refused: the connection needs no authentication or has \
         authenticated"
    );
    SaslHandshakeResponse::default()
        .with_error_code(ResponseError::IllegalSaslState.code())
        .with_mechanisms(Vec::new())
}

pub fn authenticate() -> SaslAuthenticateResponse {
    warn!(
        "Kafka: a SaslAuthenticate refused: the connection needs no authentication or has \
         authenticated"
    );
    SaslAuthenticateResponse::default()
        .with_error_code(ResponseError::IllegalSaslState.code())
        .with_error_message(Some(StrBytes::from_static_str(
            "SaslAuthenticate request received after successful authentication",
        )))
}
