//! The project's one vocabulary of what went wrong.
//!
//! Each layer has its own error type with its own details (`StorageError`
//! names paths and offsets, a backend's error carries the cluster's words),
//! and each says once which [`ErrorKind`] it is. The edges translate a
//! kind, and only a kind, into what their caller understands: the tree into
//! an errno (`fs::error`, one table), the listener into a Kafka error code
//! (`kafka::error`, one table per API family). So a new failure is
//! classified in one place, and an errno or a Kafka code is never chosen
//! deep inside a layer.

/// What kind of thing went wrong, in the words of Kafka and of a filesystem.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    // Something asked for is not there.
    /// No such partition, topic or file.
    NotFound,
    /// An offset outside `[log start, log end)`.
    OffsetOutOfRange {
        offset: i64,
        log_start: i64,
        log_end: i64,
    },
    /// The offset exists but holds no user record (a transaction marker).
    NoRecord,
    /// The partition or topic exists already.
    Exists,

    // Input refused; nothing was changed.
    /// A bad topic or partition name (Kafka's `InvalidTopicException`).
    InvalidName,
    /// A partition number that would leave a hole (`InvalidPartitionsException`).
    InvalidPartitions,
    /// A config name or value the validators refuse (`InvalidConfigurationException`).
    InvalidConfig,
    /// Record bytes a client sent that do not validate, or an empty append
    /// (`CorruptRecordException`).
    InvalidRecord,
    /// A record without a key for a compacted topic (Kafka's
    /// `InvalidRecordException` from its validator).
    KeyRequired,
    /// Any other bad argument (a value the tree cannot parse).
    Invalid,
    /// A record larger than `max.message.bytes` (`RecordTooLargeException`).
    RecordTooLarge,
    /// A batch that no segment can hold (`RecordBatchTooLargeException`).
    BatchTooLarge,
    /// A producer's sequence number with a gap (`OutOfOrderSequenceException`).
    OutOfOrderSequence,
    /// A producer epoch older than the one known (`InvalidProducerEpochException`).
    InvalidProducerEpoch,
    /// A transactional batch where no transaction coordinator checked it
    /// (any append but the listener's transactional produce).
    TransactionsNotServed,
    /// A producer's plain batch while its transaction is open (Kafka's
    /// `InvalidTxnStateException`).
    InvalidTxnState,
    /// A transaction marker from a coordinator older than the last one
    /// (`TransactionCoordinatorFencedException`).
    CoordinatorFenced,
    /// Nothing may be written: the mount or data directory is read-only.
    ReadOnly,
    /// A change the backend's rules forbid (a cluster cannot remove one
    /// partition of a topic).
    NotPermitted,
    /// The cluster or the operating system refused the caller's rights.
    PermissionDenied,
    /// Something this backend cannot do at all.
    Unsupported,
    /// Locked by another process, or in use.
    Busy,
    /// A consumer group that still has members (Kafka's `NON_EMPTY_GROUP`).
    NotEmpty,
    /// A limit this daemon is configured with would be passed (the
    /// partitions it holds, `max.broker.partitions`).
    LimitReached,

    // The machine failed, or ran out of something.
    /// The disk is full.
    NoSpace,
    /// A disk quota is exhausted.
    QuotaExceeded,
    /// The operating system's file size limit.
    FileTooLarge,
    /// The process ran out of file descriptors.
    TooManyOpenFiles,
    /// An I/O failure, or a cluster that failed to answer properly.
    Io,
    /// Stored bytes that do not decode.
    Corrupt,
    /// The partition stopped after an I/O failure (fail-stop); the failure
    /// itself was logged once, when it happened.
    Offline,
    /// No answer in time.
    TimedOut,
}

impl ErrorKind {
    /// The kind of an operating-system error met reading or writing files:
    /// running out of something is named, anything else is an I/O failure
    /// (a disk that turned read-only or a directory whose rights changed
    /// underneath is a failure of the machine, not the caller's doing).
    pub fn of_errno(errno: i32) -> ErrorKind {
        match errno {
            libc::ENOSPC => ErrorKind::NoSpace,
            libc::EDQUOT => ErrorKind::QuotaExceeded,
            libc::EFBIG => ErrorKind::FileTooLarge,
            libc::EMFILE | libc::ENFILE => ErrorKind::TooManyOpenFiles,
            _ => ErrorKind::Io,
        }
    }

    /// Every kind, one of each (the offset fields zero): for tables and tests.
    pub const ALL: &'static [ErrorKind] = &[
        ErrorKind::NotFound,
        ErrorKind::OffsetOutOfRange {
            offset: 0,
            log_start: 0,
            log_end: 0,
        },
        ErrorKind::NoRecord,
        ErrorKind::Exists,
        ErrorKind::InvalidName,
        ErrorKind::InvalidPartitions,
        ErrorKind::InvalidConfig,
        ErrorKind::InvalidRecord,
        ErrorKind::KeyRequired,
        ErrorKind::Invalid,
        ErrorKind::RecordTooLarge,
        ErrorKind::BatchTooLarge,
        ErrorKind::OutOfOrderSequence,
        ErrorKind::InvalidProducerEpoch,
        ErrorKind::TransactionsNotServed,
        ErrorKind::InvalidTxnState,
        ErrorKind::CoordinatorFenced,
        ErrorKind::ReadOnly,
        ErrorKind::NotPermitted,
        ErrorKind::PermissionDenied,
        ErrorKind::Unsupported,
        ErrorKind::Busy,
        ErrorKind::NotEmpty,
        ErrorKind::LimitReached,
        ErrorKind::NoSpace,
        ErrorKind::QuotaExceeded,
        ErrorKind::FileTooLarge,
        ErrorKind::TooManyOpenFiles,
        ErrorKind::Io,
        ErrorKind::Corrupt,
        ErrorKind::Offline,
        ErrorKind::TimedOut,
    ];

    /// A failure of the machine rather than a refusal of the request: what
    /// the caller asked may work when tried again, and the logs say why.
    pub fn is_failure(self) -> bool {
        matches!(
            self,
            ErrorKind::Io | ErrorKind::Corrupt | ErrorKind::TimedOut | ErrorKind::TooManyOpenFiles
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ALL` names each kind once: a new kind that is not added there fails
    /// to compile here, and so cannot be left out of the edges' tables.
    #[test]
    fn all_lists_every_kind_once() {
        fn index(k: ErrorKind) -> usize {
            match k {
                ErrorKind::NotFound => 0,
                ErrorKind::OffsetOutOfRange { .. } => 1,
                ErrorKind::NoRecord => 2,
                ErrorKind::Exists => 3,
                ErrorKind::InvalidName => 4,
                ErrorKind::InvalidPartitions => 5,
                ErrorKind::InvalidConfig => 6,
                ErrorKind::InvalidRecord => 7,
                ErrorKind::KeyRequired => 8,
                ErrorKind::Invalid => 9,
                ErrorKind::RecordTooLarge => 10,
                ErrorKind::BatchTooLarge => 11,
                ErrorKind::OutOfOrderSequence => 12,
                ErrorKind::InvalidProducerEpoch => 13,
                ErrorKind::TransactionsNotServed => 14,
                ErrorKind::InvalidTxnState => 15,
                ErrorKind::CoordinatorFenced => 16,
                ErrorKind::ReadOnly => 17,
                ErrorKind::NotPermitted => 18,
                ErrorKind::PermissionDenied => 19,
                ErrorKind::Unsupported => 20,
                ErrorKind::Busy => 21,
                ErrorKind::NotEmpty => 22,
                ErrorKind::LimitReached => 23,
                ErrorKind::NoSpace => 24,
                ErrorKind::QuotaExceeded => 25,
                ErrorKind::FileTooLarge => 26,
                ErrorKind::TooManyOpenFiles => 27,
                ErrorKind::Io => 28,
                ErrorKind::Corrupt => 29,
                ErrorKind::Offline => 30,
                ErrorKind::TimedOut => 31,
            }
        }
        let seen: Vec<usize> = ErrorKind::ALL.iter().map(|k| index(*k)).collect();
        assert_eq!(seen, (0..=31).collect::<Vec<_>>());
    }
}
