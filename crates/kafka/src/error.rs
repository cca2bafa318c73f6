//! The Kafka face's errors: why a connection is closed ([`Refusal`]), and
//! the one place a kind of failure becomes a Kafka error code ([`code`]),
//! with a table per family of APIs ([`Family`]).

use kafka_protocol::ResponseError;
use log::warn;

use commitfs_record::error::ErrorKind;
use commitfs_storage::StorageError;

/// Why a connection is closed rather than answered. Kafka closes the
/// connection for the same things: a frame it will not buffer, a header it
/// cannot parse, an API or version it does not serve, a body that does not
/// decode.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error("request size {size} is larger than socket.request.max.bytes ({max})")]
    FrameTooLarge { size: i64, max: usize },
    /// Kafka's `SaslServerAuthenticator` reads at most this much before
    /// a connection has authenticated.
    #[error(
        "Failing SASL authentication due to invalid receive size: {size} bytes, more than the \
         {max} read before authentication"
    )]
    SaslFrameTooLarge { size: i64, max: usize },
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

/// The families of APIs that answer the same kind of failure with different
/// codes, as Kafka's request handlers do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// Produce: the bytes are the client's, so bytes that do not decode are
    /// its corrupt message.
    Produce,
    /// Fetch, ListOffsets, DeleteRecords: reads of what is stored.
    Read,
    /// CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs,
    /// IncrementalAlterConfigs, and Metadata's auto-creation.
    Admin,
    /// OffsetCommit's append to `__consumer_offsets` (Kafka's
    /// `GroupMetadataManager` mapping of append errors).
    GroupCommit,
    /// InitProducerId's producer id block.
    ProducerId,
    /// The transaction coordinator's appends to `__transaction_state`
    /// (Kafka's `TransactionStateManager.appendTransactionToLog` mapping).
    TxnLog,
    /// What Kafka keeps in the cluster's metadata: the ACLs (CreateAcls,
    /// DeleteAcls) and the users' SCRAM credentials
    /// (AlterUserScramCredentials). Kafka's controller answers a failure it
    /// did not expect UNKNOWN_SERVER_ERROR (`EventHandlerExceptionInfo`'s
    /// catch-all), a store that fails included.
    Metadata,
}

/// The Kafka error code for a kind of failure, in `family`'s table.
pub fn code(family: Family, kind: ErrorKind) -> ResponseError {
    match family {
        Family::Produce => match kind {
            ErrorKind::Corrupt | ErrorKind::InvalidRecord => ResponseError::CorruptMessage,
            k => stored(k),
        },
        Family::Read | Family::Admin => stored(kind),
        Family::GroupCommit => match kind {
            ErrorKind::ReadOnly => ResponseError::GroupAuthorizationFailed,
            ErrorKind::RecordTooLarge | ErrorKind::BatchTooLarge => {
                ResponseError::InvalidCommitOffsetSize
            }
            ErrorKind::NotFound => ResponseError::CoordinatorNotAvailable,
            _ => ResponseError::NotCoordinator,
        },
        // A read-only directory cannot take appends at all; otherwise the
        // id block could not be saved, and the client retries.
        Family::ProducerId => match kind {
            ErrorKind::ReadOnly => ResponseError::ClusterAuthorizationFailed,
            _ => ResponseError::CoordinatorNotAvailable,
        },
        // A record too large, or one that does not encode, is the
        // coordinator's own fault; a read-only directory refuses the
        // cluster's writes.
        Family::TxnLog => match kind {
            ErrorKind::NotFound => ResponseError::CoordinatorNotAvailable,
            ErrorKind::ReadOnly => ResponseError::ClusterAuthorizationFailed,
            ErrorKind::RecordTooLarge | ErrorKind::BatchTooLarge | ErrorKind::InvalidRecord => {
                ResponseError::UnknownServerError
            }
            _ => ResponseError::NotCoordinator,
        },
        // Not an error of Kafka's: a directory served read-only refuses
        // the cluster's writes as Kafka refuses a principal.
        Family::Metadata => match kind {
            ErrorKind::ReadOnly => ResponseError::ClusterAuthorizationFailed,
            _ => ResponseError::UnknownServerError,
        },
    }
}

/// The table every family starts from: Kafka's code for each kind of
/// failure of a log it stores.
fn stored(kind: ErrorKind) -> ResponseError {
    match kind {
        ErrorKind::NotFound => ResponseError::UnknownTopicOrPartition,
        ErrorKind::Exists => ResponseError::TopicAlreadyExists,
        ErrorKind::InvalidName => ResponseError::InvalidTopicException,
        ErrorKind::InvalidPartitions => ResponseError::InvalidPartitions,
        ErrorKind::InvalidConfig => ResponseError::InvalidConfig,
        ErrorKind::RecordTooLarge => ResponseError::MessageTooLarge,
        ErrorKind::BatchTooLarge => ResponseError::RecordListTooLarge,
        ErrorKind::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
        ErrorKind::InvalidRecord => ResponseError::CorruptMessage,
        ErrorKind::KeyRequired => ResponseError::InvalidRecord,
        ErrorKind::Invalid => ResponseError::InvalidRequest,
        // Kafka's own codes; INVALID_PRODUCER_EPOCH (known since 0.11) at
        // every Produce version, as Kafka 2.7+ answers an old epoch.
        ErrorKind::OutOfOrderSequence => ResponseError::OutOfOrderSequenceNumber,
        ErrorKind::InvalidProducerEpoch => ResponseError::InvalidProducerEpoch,
        ErrorKind::TransactionsNotServed => ResponseError::TransactionalIdAuthorizationFailed,
        ErrorKind::InvalidTxnState => ResponseError::InvalidTxnState,
        ErrorKind::CoordinatorFenced => ResponseError::TransactionCoordinatorFenced,
        // Not ours to write: the answer Kafka gives a client it will not let
        // write, so clients stop instead of retrying.
        ErrorKind::ReadOnly | ErrorKind::PermissionDenied | ErrorKind::NotPermitted => {
            ResponseError::TopicAuthorizationFailed
        }
        ErrorKind::Unsupported => ResponseError::UnsupportedVersion,
        ErrorKind::NotEmpty => ResponseError::NonEmptyGroup,
        // Kafka has no code of its own for a broker's partition limit
        // (KIP-578's RESOURCE_LIMIT_REACHED was never added); a creation a
        // policy refuses is POLICY_VIOLATION, which clients report as such.
        ErrorKind::LimitReached => ResponseError::PolicyViolation,
        // Kafka's answer for a log it cannot read or write, offline ones
        // and full disks included.
        ErrorKind::NoRecord
        | ErrorKind::Busy
        | ErrorKind::NoSpace
        | ErrorKind::QuotaExceeded
        | ErrorKind::FileTooLarge
        | ErrorKind::TooManyOpenFiles
        | ErrorKind::Io
        | ErrorKind::Corrupt
        | ErrorKind::Offline => ResponseError::KafkaStorageError,
        ErrorKind::TimedOut => ResponseError::RequestTimedOut,
    }
}

/// The code for a storage error in `family`, logged with what was refused.
pub fn code_for(family: Family, what: &str, e: &StorageError) -> ResponseError {
    let code = code(family, e.kind());
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

#[cfg(test)]
mod tests {
    use super::*;

    /// What Kafka answers: a record over max.message.bytes, a stored log
    /// that fails, a client's corrupt batch, a commit to a read-only log.
    #[test]
    fn each_family_answers_as_kafka() {
        use ErrorKind as K;
        use Family as F;
        use ResponseError as R;
        for (family, kind, want) in [
            (F::Produce, K::RecordTooLarge, R::MessageTooLarge),
            (F::Produce, K::Corrupt, R::CorruptMessage),
            (F::Read, K::Corrupt, R::KafkaStorageError),
            (F::Produce, K::NoSpace, R::KafkaStorageError),
            (F::GroupCommit, K::ReadOnly, R::GroupAuthorizationFailed),
            (F::ProducerId, K::Io, R::CoordinatorNotAvailable),
            (F::Admin, K::InvalidPartitions, R::InvalidPartitions),
            (F::TxnLog, K::NotFound, R::CoordinatorNotAvailable),
            (F::TxnLog, K::InvalidRecord, R::UnknownServerError),
            (F::TxnLog, K::Io, R::NotCoordinator),
            (F::Metadata, K::ReadOnly, R::ClusterAuthorizationFailed),
            (F::Metadata, K::NoSpace, R::UnknownServerError),
        ] {
            assert_eq!(code(family, kind), want, "{family:?} {kind:?}");
        }
    }
}
