//! SASL: no listener authenticates yet. A handshake that reaches the
//! request handlers comes on a listener without SASL, which Kafka's
//! `KafkaApis.handleSaslHandshakeRequest` answers ILLEGAL_SASL_STATE.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::sasl_handshake_response::SaslHandshakeResponse;
use log::warn;

pub fn handshake() -> SaslHandshakeResponse {
    warn!("Kafka: a SASL handshake refused: the listener it came on does not authenticate");
    SaslHandshakeResponse::default()
        .with_error_code(ResponseError::IllegalSaslState.code())
        .with_mechanisms(Vec::new())
}
