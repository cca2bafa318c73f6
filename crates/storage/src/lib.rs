//! Kafka-exact partition storage: segments named by base offset, RecordBatch v2
//! `.log` files, sparse memory-mapped `.index`/`.timeindex`, roll, flush,
//! recovery and retention. No FUSE here: this is a library.

use std::time::{SystemTime, UNIX_EPOCH};

pub mod append_signal;
pub mod batch_reader;
pub mod check;
pub mod checkpoint;
pub mod cleaner;
pub mod config;
mod deleter;
mod dir_watch;
pub mod disk;
pub mod error;
mod flusher;
mod health;
pub mod index;
mod local_log;
mod manager;
pub mod names;
mod partition;
pub mod producer_ids;
pub mod producer_state;
mod progress;
pub mod remote_log_config;
pub mod scheduler;
pub mod segment;
mod stream;
pub mod text_file;
mod topics;

pub use config::{CONFIG_NAMES, CompressionType, ConfigError, LogConfig};
pub use error::{Result, StorageError};
pub use local_log::{FileKind, LocalLog, PartitionFile, RecordEntry, SegmentSlice};
pub use manager::{
    ACLS_FILE, CLEAN_SHUTDOWN_FILE, DEFAULT_MAX_PARTITIONS, DataDirLock, FLUSH_JOB, LOCK_FILE,
    LogManager, OpenOptions, RETENTION_JOB, SCRAM_CREDENTIALS_FILE, TimedJobs, is_locked,
    lock_holder,
};
pub use names::{parse_partition_name, segment_file_name};
pub use partition::{
    AppendInfo, CleanerStatus, FetchRead, Isolation, LEADER_EPOCH, PROPERTIES_FILE, PartitionLog,
    PartitionStatus, ProducedInfo, TxnOutcome,
};
pub use progress::ProgressFn;
pub use scheduler::{NotScheduled, Pace, Scheduler};
pub use stream::{COMMITTED_LENGTHS_FILE, STREAM_LENGTHS_FILE};
pub use topics::{Topic, is_internal_topic};

/// The wall clock, in milliseconds since the epoch: Kafka's timestamps.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
