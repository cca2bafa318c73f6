//! The Kafka face's errors: why a connection is closed ([`Refusal`]), and
//! the one place a storage error becomes a Kafka error code ([`code_for`]).

use kafka_protocol::ResponseError;
use log::warn;

use crate::storage::StorageError;
use crate::storage::producer_state::ProducerRefusal;

/// Why a connection is closed rather than answered. Kafka closes the
/// connection for the same things: a frame it will not buffer, a header it
/// cannot parse, an API or version it does not serve, a body that does not
/// decode.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error("request size {size} is larger than socket.request.max.bytes ({max})")]
    FrameTooLarge { size: i64, max: usize },
    #[error("request size {0} is negative")]
    NegativeSize(i32),
    #[error("request of {0} bytes is shorter than a request header")]
    ShortHeader(usize),
    #[error("unknown API key {0}")]
    UnknownApi(i16),
    #[error("{api} v{version} is not served (served: v{min} to v{max})")]
    UnsupportedVersion {
        api: &'static str,
        version: i16,
        min: i16,
        max: i16,
    },
    #[error("malformed {what}: {reason}")]
    Malformed { what: String, reason: String },
    #[error("{0}")]
    Other(String),
}

/// The Kafka error code for a storage error, logged with what was refused.
pub fn code_for(what: &str, e: &StorageError) -> ResponseError {
    let code = match e {
        StorageError::NoSuchPartition(_) => ResponseError::UnknownTopicOrPartition,
        StorageError::PartitionExists(_) => ResponseError::TopicAlreadyExists,
        StorageError::InvalidPartitionName(..) | StorageError::TopicCollision { .. } => {
            ResponseError::InvalidTopicException
        }
        StorageError::PartitionGap { .. } => ResponseError::InvalidPartitions,
        StorageError::Config(_) => ResponseError::InvalidConfig,
        StorageError::RecordTooLarge { .. } => ResponseError::MessageTooLarge,
        StorageError::BatchLargerThanSegment { .. } => ResponseError::RecordListTooLarge,
        StorageError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
        StorageError::Record(_) | StorageError::EmptyAppend => ResponseError::CorruptMessage,
        // Kafka's own codes; INVALID_PRODUCER_EPOCH (known since 0.11) at every
        // Produce version, as Kafka 2.7+ answers a produce with an old epoch.
        StorageError::Producer { refusal, .. } => match refusal {
            ProducerRefusal::OutOfOrderSequence => ResponseError::OutOfOrderSequenceNumber,
            ProducerRefusal::InvalidProducerEpoch => ResponseError::InvalidProducerEpoch,
            ProducerRefusal::Transactional => ResponseError::TransactionalIdAuthorizationFailed,
        },
        // Not ours to write: the same answer Kafka gives a client it will not
        // let write, so clients stop instead of retrying.
        StorageError::ReadOnly => ResponseError::TopicAuthorizationFailed,
        // Kafka's answer for a log it cannot read or write, offline ones included.
        StorageError::Io { .. }
        | StorageError::Sync { .. }
        | StorageError::Offline { .. }
        | StorageError::IndexFull { .. }
        | StorageError::Corrupt { .. }
        | StorageError::Locked(_)
        | StorageError::NoSuchFile(_)
        | StorageError::RecordNotFound(_) => ResponseError::KafkaStorageError,
    };
    warn!("Kafka: {what} refused with {code:?}: {e}");
    code
}

/// The message a response's `error_message` field carries for a storage error.
pub fn message_for(e: &StorageError) -> String {
    match e {
        StorageError::ReadOnly => {
            "commitfs serves this data directory read-only: writes are refused".to_string()
        }
        e => e.to_string(),
    }
}
