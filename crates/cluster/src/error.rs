//! The one place where a Kafka client error becomes a [`BackendError`] of
//! the seam, with its kind (and so, through the tree's table in
//! `fs::error`, an errno). The cluster layer has no error type of its own.
//!
//! librdkafka reports two sorts of code: the broker's (Kafka's own error
//! codes, positive) and its own (negative: transport failures, timeouts,
//! a partition it does not know). Both are mapped here, by what they mean
//! to someone using the tree.

use std::fmt;

use rdkafka::error::{KafkaError, RDKafkaErrorCode as Code};

use commitfs_backend::{BackendError, ErrorKind};

/// A client or broker error code met while doing `what`.
pub fn code(what: impl fmt::Display, code: Code, detail: Option<&str>) -> BackendError {
    let detail = match detail {
        Some(d) if !d.is_empty() => format!(": {d}"),
        _ => String::new(),
    };
    BackendError::new(kind_of(code), format!("{what}: {code}{detail}"))
}

/// A client error met while doing `what`.
pub fn client(what: impl fmt::Display, e: &KafkaError) -> BackendError {
    match client_code(e) {
        Some(c) => code(what, c, None),
        None => BackendError::new(
            match e {
                KafkaError::ClientConfig(..) | KafkaError::AdminOpCreation(_) => ErrorKind::Invalid,
                _ => ErrorKind::Io,
            },
            format!("{what}: {e}"),
        ),
    }
}

/// No answer from the cluster in time.
pub fn timed_out(what: impl fmt::Display, timeout: std::time::Duration) -> BackendError {
    BackendError::new(
        ErrorKind::TimedOut,
        format!(
            "{what}: no answer from the cluster within request.timeout.ms ({} ms)",
            timeout.as_millis()
        ),
    )
}

/// The code inside a client error, admin errors included.
fn client_code(e: &KafkaError) -> Option<Code> {
    match e {
        KafkaError::AdminOp(code) => Some(*code),
        KafkaError::PartitionEOF(_) => Some(Code::PartitionEOF),
        e => e.rdkafka_error_code(),
    }
}

/// What a code means to the tree. Everything transient (a broker down, a
/// leader moving, a request timing out) is EIO or ETIMEDOUT: the operation
/// may work when tried again. Refusals of bad input are EINVAL, as locally.
pub fn kind_of(code: Code) -> ErrorKind {
    match code {
        Code::UnknownTopicOrPartition
        | Code::UnknownTopic
        | Code::UnknownPartition
        | Code::GroupIdNotFound => ErrorKind::NotFound,
        Code::OffsetOutOfRange => ErrorKind::OffsetOutOfRange {
            offset: -1,
            log_start: -1,
            log_end: -1,
        },
        Code::TopicAlreadyExists => ErrorKind::Exists,
        Code::MessageSizeTooLarge | Code::InvalidMessageSize => ErrorKind::RecordTooLarge,
        Code::MessageBatchTooLarge => ErrorKind::BatchTooLarge,
        Code::InvalidTopic => ErrorKind::InvalidName,
        Code::InvalidPartitions => ErrorKind::InvalidPartitions,
        Code::InvalidConfig => ErrorKind::InvalidConfig,
        Code::InvalidRecord => ErrorKind::InvalidRecord,
        Code::InvalidReplicationFactor
        | Code::InvalidReplicaAssignment
        | Code::InvalidRequest
        | Code::InvalidArgument
        | Code::PolicyViolation
        | Code::InvalidTimestamp => ErrorKind::Invalid,
        Code::TopicAuthorizationFailed
        | Code::ClusterAuthorizationFailed
        | Code::GroupAuthorizationFailed
        | Code::TransactionalIdAuthorizationFailed
        | Code::SaslAuthenticationFailed
        | Code::Authentication
        | Code::TopicDeletionDisabled
        | Code::SecurityDisabled => ErrorKind::PermissionDenied,
        Code::UnsupportedVersion
        | Code::UnsupportedFeature
        | Code::UnsupportedForMessageFormat
        | Code::UnsupportedCompressionType
        | Code::NotImplemented => ErrorKind::Unsupported,
        Code::RequestTimedOut
        | Code::MessageTimedOut
        | Code::OperationTimedOut
        | Code::TimedOutQueue => ErrorKind::TimedOut,
        Code::KafkaStorageError => ErrorKind::Io,
        Code::ReassignmentInProgress | Code::ConcurrentTransactions => ErrorKind::Busy,
        Code::NonEmptyGroup => ErrorKind::NotEmpty,
        Code::OutOfOrderSequenceNumber => ErrorKind::OutOfOrderSequence,
        Code::InvalidProducerEpoch | Code::ProducerFenced => ErrorKind::InvalidProducerEpoch,
        Code::InvalidTransactionalState => ErrorKind::InvalidTxnState,
        Code::TransactionCoordinatorFenced => ErrorKind::CoordinatorFenced,
        Code::BadMessage | Code::BadCompression | Code::InvalidMessage => ErrorKind::Corrupt,
        // Transport failures, all brokers down, no leader, not enough
        // replicas, a purged or fenced producer: the machine failed.
        _ => ErrorKind::Io,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What each code means to someone using the tree: a refusal of the
    /// request, or a failure that may pass if tried again.
    #[test]
    fn codes_map_to_kinds_by_what_they_mean() {
        use ErrorKind as K;
        for (code, kind) in [
            (Code::UnknownTopicOrPartition, K::NotFound),
            (Code::TopicAlreadyExists, K::Exists),
            (Code::MessageSizeTooLarge, K::RecordTooLarge),
            (Code::InvalidConfig, K::InvalidConfig),
            (Code::InvalidTopic, K::InvalidName),
            (Code::PolicyViolation, K::Invalid),
            (Code::RequestTimedOut, K::TimedOut),
            (Code::MessageTimedOut, K::TimedOut),
            (Code::AllBrokersDown, K::Io),
            (Code::BrokerTransportFailure, K::Io),
            (Code::NotEnoughReplicas, K::Io),
            (Code::TopicAuthorizationFailed, K::PermissionDenied),
            (Code::UnsupportedVersion, K::Unsupported),
        ] {
            assert_eq!(kind_of(code), kind, "{code:?}");
        }
    }
}
