//! The storage layer's errors, each with its [`ErrorKind`]: the one place a
//! storage failure is classified. The tree, the listener and the backend
//! seam translate the kind, never the error itself.

use std::io;
use std::path::PathBuf;

use super::config::{ConfigError, LogConfig};
use commitfs_record::RecordError;
use commitfs_record::error::ErrorKind;

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// An fsync or msync that failed: what it was to make durable may be
    /// lost from the page cache, whatever the errno (never a refusal).
    #[error("fsync of {path} failed: {source}")]
    Sync {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// Refused because an earlier failure took the partition offline
    /// (Kafka's `KafkaStorageException` for an offline log dir).
    #[error("partition {partition} is offline: {cause}")]
    Offline { partition: String, cause: String },
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("invalid partition name {0:?}: {1}")]
    InvalidPartitionName(String, &'static str),
    #[error("partition {name}: {reason}")]
    PartitionGap { name: String, reason: String },
    #[error(
        "topic {topic} collides with existing topic {existing} ('.' and '_' are taken as equal)"
    )]
    TopicCollision { topic: String, existing: String },
    #[error("partition {0} already exists")]
    PartitionExists(String),
    /// More partitions than the broker may hold (`max.broker.partitions`).
    #[error(
        "creating {new} partition(s) would make {} on this broker, more than \
         max.broker.partitions ({max})",
        held + new
    )]
    PartitionLimit { new: usize, held: usize, max: usize },
    #[error("partition {0} does not exist")]
    NoSuchPartition(String),
    #[error("the record is {size} bytes when serialized, larger than max.message.bytes ({max})")]
    RecordTooLarge { size: usize, max: usize },
    #[error("the batch is {size} bytes, larger than segment.bytes ({max})")]
    BatchLargerThanSegment { size: usize, max: usize },
    #[error("offset {offset} is out of range [{log_start_offset}, {log_end_offset})")]
    OffsetOutOfRange {
        offset: i64,
        log_start_offset: i64,
        log_end_offset: i64,
    },
    #[error("offset {0} holds no record (a gap or a control record)")]
    RecordNotFound(i64),
    #[error("corrupt log {path} at position {position}: {reason}")]
    Corrupt {
        path: PathBuf,
        position: u64,
        reason: String,
    },
    #[error(transparent)]
    Record(#[from] RecordError),
    #[error("the data directory is open read-only")]
    ReadOnly,
    #[error("the data directory {0} is locked by another process")]
    Locked(PathBuf),
    #[error("no such file {0:?} in the partition directory")]
    NoSuchFile(String),
    #[error("an append needs at least one record")]
    EmptyAppend,
    /// A producer's batch that its producer state refuses (a sequence gap,
    /// an old epoch, a transaction): Kafka's error of the same name.
    #[error("{message}")]
    Producer {
        refusal: super::producer_state::ProducerRefusal,
        message: String,
    },
    /// The log cleaner's swap found the segments it cleaned changed (one
    /// went or became active meanwhile): nothing was swapped in.
    #[error("the segments of {0} changed while they were cleaned")]
    SegmentsChanged(String),
    /// A pass of the log cleaner stopped because it was asked to (the
    /// partition is being deleted, or the cleaner stops).
    #[error("the cleaning of {0} was aborted")]
    CleaningAborted(String),
    /// The log cleaner was asked to clean a partition that is not compacted.
    #[error("partition {0} is not compacted (cleanup.policy={1})")]
    NotCompacted(String, String),
    /// Kafka's `RecordValidationException` for keyless records sent to a
    /// compacted topic: nothing of the request is appended.
    #[error("{}", keyless_message(.partition, .indexes))]
    KeylessRecords {
        partition: String,
        /// The index within its batch of each keyless record.
        indexes: Vec<i32>,
    },
    /// Kafka's `AbstractIndex.append` refusal.
    #[error("Attempt to append to a full index {path} (size = {entries})")]
    IndexFull { path: PathBuf, entries: usize },
}

impl StorageError {
    pub fn io(path: impl Into<PathBuf>, source: io::Error) -> Self {
        StorageError::Io {
            path: path.into(),
            source,
        }
    }

    /// The OS error behind this one, if any (ENOSPC, EIO, ...).
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            StorageError::Io { source, .. } | StorageError::Sync { source, .. } => {
                super::disk::raw_os_error(source)
            }
            StorageError::Offline { .. } => Some(libc::EIO),
            _ => None,
        }
    }

    /// Whether a record whose batch of its own is `size` bytes fits
    /// `config` ([`LogConfig::batch_limit`]); if not, the refusal naming the
    /// limit it breaks.
    pub fn check_batch_size(config: &LogConfig, size: usize) -> Result<()> {
        let max = config.max_message_bytes.max(0) as usize;
        if size > max {
            return Err(StorageError::RecordTooLarge { size, max });
        }
        if size > config.batch_limit() {
            return Err(StorageError::BatchLargerThanSegment {
                size,
                max: config.segment_bytes.max(0) as usize,
            });
        }
        Ok(())
    }

    /// Kafka's `LogValidator.validateKey`: a compacted partition (`config`)
    /// takes no record without a key; the refusal names each one's index.
    pub fn check_keys(
        config: &LogConfig,
        partition: &str,
        records: &[commitfs_record::NewRecord],
    ) -> Result<()> {
        if !config.cleanup_policy.compact() {
            return Ok(());
        }
        let indexes: Vec<i32> = records
            .iter()
            .enumerate()
            .filter(|(_, r)| r.key.is_none())
            .map(|(i, _)| i as i32)
            .collect();
        if indexes.is_empty() {
            return Ok(());
        }
        Err(StorageError::KeylessRecords {
            partition: partition.to_string(),
            indexes,
        })
    }

    /// What kind of error this is: storage's one classification, from
    /// which the errno, the Kafka code and [`StorageError::is_refusal`] follow.
    pub fn kind(&self) -> ErrorKind {
        use super::producer_state::ProducerRefusal as P;
        match self {
            StorageError::Io { source, .. } => {
                super::disk::raw_os_error(source).map_or(ErrorKind::Io, ErrorKind::of_errno)
            }
            // Whatever the errno: what it was to make durable may be lost.
            StorageError::Sync { .. } | StorageError::IndexFull { .. } => ErrorKind::Io,
            StorageError::Offline { .. } => ErrorKind::Offline,
            StorageError::Config(_) => ErrorKind::InvalidConfig,
            StorageError::InvalidPartitionName(..) | StorageError::TopicCollision { .. } => {
                ErrorKind::InvalidName
            }
            StorageError::PartitionGap { .. } => ErrorKind::InvalidPartitions,
            StorageError::PartitionExists(_) => ErrorKind::Exists,
            StorageError::PartitionLimit { .. } => ErrorKind::LimitReached,
            StorageError::NoSuchPartition(_) | StorageError::NoSuchFile(_) => ErrorKind::NotFound,
            StorageError::RecordTooLarge { .. } => ErrorKind::RecordTooLarge,
            StorageError::BatchLargerThanSegment { .. } => ErrorKind::BatchTooLarge,
            StorageError::OffsetOutOfRange {
                offset,
                log_start_offset,
                log_end_offset,
            } => ErrorKind::OffsetOutOfRange {
                offset: *offset,
                log_start: *log_start_offset,
                log_end: *log_end_offset,
            },
            StorageError::RecordNotFound(_) => ErrorKind::NoRecord,
            StorageError::Corrupt { .. } | StorageError::Record(_) => ErrorKind::Corrupt,
            StorageError::ReadOnly => ErrorKind::ReadOnly,
            StorageError::Locked(_) => ErrorKind::Busy,
            StorageError::EmptyAppend => ErrorKind::InvalidRecord,
            StorageError::KeylessRecords { .. } => ErrorKind::KeyRequired,
            StorageError::SegmentsChanged(_) | StorageError::CleaningAborted(_) => ErrorKind::Busy,
            StorageError::NotCompacted(..) => ErrorKind::Invalid,
            StorageError::Producer { refusal, .. } => match refusal {
                P::OutOfOrderSequence => ErrorKind::OutOfOrderSequence,
                P::InvalidProducerEpoch => ErrorKind::InvalidProducerEpoch,
                P::Transactional => ErrorKind::TransactionsNotServed,
                P::InvalidTxnState => ErrorKind::InvalidTxnState,
                P::CoordinatorFenced => ErrorKind::CoordinatorFenced,
            },
        }
    }

    /// Whether the error leaves the files as they were before the call: bad
    /// input, or a full disk (or a quota, or a file size limit) met by a
    /// call that allocates, whose caller undid what it had done. Any other
    /// error on a write path (a failure of the machine, see
    /// [`ErrorKind::is_failure`]) takes the partition offline (see
    /// `storage::health`).
    pub fn is_refusal(&self) -> bool {
        !self.kind().is_failure()
    }
}

pub type Result<T, E = StorageError> = std::result::Result<T, E>;

/// Kafka's message for one keyless record of a compacted topic
/// (`LogValidator.validateKey`).
pub fn keyless_record_message(partition: &str) -> String {
    format!("Compacted topic cannot accept message without key in topic partition {partition}")
}

/// Kafka's `RecordValidationException` message: how many records were
/// refused, and the first three of them (`ReplicaManager`'s wording).
fn keyless_message(partition: &str, indexes: &[i32]) -> String {
    let shown: Vec<String> = indexes
        .iter()
        .take(3)
        .map(|i| {
            format!(
                "RecordError(batchIndex={i}, message='{}')",
                keyless_record_message(partition)
            )
        })
        .collect();
    format!(
        "One or more records have been rejected due to {} record errors in total, and only showing the first three errors at most: [{}]",
        indexes.len(),
        shown.join(", ")
    )
}

/// Adds the path to an `io::Result`.
pub(crate) trait IoContext<T> {
    fn at(self, path: &std::path::Path) -> Result<T>;
    /// The same, for an fsync or msync ([`StorageError::Sync`]).
    fn synced(self, path: &std::path::Path) -> Result<T>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn at(self, path: &std::path::Path) -> Result<T> {
        self.map_err(|e| StorageError::io(path, e))
    }
    fn synced(self, path: &std::path::Path) -> Result<T> {
        self.map_err(|source| StorageError::Sync {
            path: path.to_path_buf(),
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_follow_kafka_and_the_os() {
        let os = |errno| StorageError::io("/x", io::Error::from_raw_os_error(errno));
        assert_eq!(os(libc::ENOSPC).kind(), ErrorKind::NoSpace);
        assert!(os(libc::ENOSPC).is_refusal(), "an undone allocation");
        assert_eq!(os(libc::EIO).kind(), ErrorKind::Io);
        assert!(!os(libc::EIO).is_refusal());
        let sync = StorageError::Sync {
            path: "/x".into(),
            source: io::Error::from_raw_os_error(libc::ENOSPC),
        };
        assert_eq!(
            sync.kind(),
            ErrorKind::Io,
            "a failed fsync may have lost data"
        );
        assert!(!sync.is_refusal());
        let e = StorageError::io("/x", io::Error::other("no errno"));
        assert_eq!(e.kind(), ErrorKind::Io);
        let e = StorageError::RecordTooLarge { size: 10, max: 5 };
        assert_eq!(e.kind(), ErrorKind::RecordTooLarge);
        assert!(e.is_refusal());
        let e = StorageError::Offline {
            partition: "t-0".into(),
            cause: "x".into(),
        };
        assert!(e.is_refusal(), "refused because offline: no second failure");
    }
}
