//! The seam between the tree and where partitions live.
//!
//! The tree's rules (names, modes, errno, line framing, handles) are the
//! same whatever holds the records: a local data directory today, a Kafka
//! cluster reached through a client library next. This trait is what the
//! tree needs of either. It speaks in the project's own types and never in
//! storage's, so that a backend with no segment files fits without changing
//! its shape: what a backend cannot do it says in [`Features`], and the tree
//! leaves those nodes out.

pub mod local;

use std::fs::File;
use std::sync::Arc;
use std::time::SystemTime;

use crate::record::{NewRecord, Record, TimestampType};

pub type BackendResult<T> = Result<T, BackendError>;

/// Partitions by name: `<topic>-<partition>`.
pub trait Backend: Send + Sync {
    /// Nothing may be written: every change is refused with EROFS.
    fn read_only(&self) -> bool;
    fn features(&self) -> Features;
    /// Every partition's name, sorted.
    fn partition_names(&self) -> BackendResult<Vec<String>>;
    /// The partition, or `NotFound`.
    fn partition(&self, name: &str) -> BackendResult<Arc<dyn Partition>>;
    fn create_partition(&self, name: &str) -> BackendResult<()>;
    fn delete_partition(&self, name: &str) -> BackendResult<()>;
    /// Files the backend shows beside the partitions (a Kafka data dir's own
    /// files on a read-only local mount), sorted by name.
    fn root_files(&self) -> BackendResult<Vec<FileInfo>>;
    fn read_root_file(&self, name: &str, pos: u64, buf: &mut [u8]) -> BackendResult<usize>;
    /// The names under `config/`.
    fn config_names(&self) -> &'static [&'static str];
    fn statfs(&self) -> BackendResult<StatFs>;
}

/// One partition. Handles keep it after an rmdir; it then refuses everything.
pub trait Partition: Send + Sync {
    fn name(&self) -> &str;
    /// The log start offset and the log end offset (high watermark).
    fn offsets(&self) -> BackendResult<Offsets>;
    /// Appends `records` in order, all or nothing, and returns once they are
    /// as durable as the backend promises an acknowledged write to be.
    fn append(&self, records: &[NewRecord]) -> BackendResult<Appended>;
    /// Whether `offset` lies in `[log start, log end)`: the name `offset/N`
    /// exists. A backend for which `offsets` costs a round trip may answer
    /// from what it knows for sure (a record it has fetched is below the log
    /// end for good).
    fn contains(&self, offset: i64) -> BackendResult<bool> {
        let o = self.offsets()?;
        Ok(o.log_start <= offset && offset < o.log_end)
    }
    /// Record `offset`: `OffsetOutOfRange` outside the log, `NoRecord` for an
    /// offset that holds none (a control record).
    fn record(&self, offset: i64) -> BackendResult<RecordEntry>;
    /// Length of the consumer stream (`value\n` per record from the log start).
    fn stream_len(&self) -> BackendResult<u64>;
    /// Copies stream bytes at `pos` into `buf`; returns how many (0 at the end).
    fn read_stream(&self, pos: u64, buf: &mut [u8]) -> BackendResult<usize>;
    /// When the log last grew, if known (`tail -f` watches it).
    fn log_mtime(&self) -> Option<SystemTime>;
    /// Kafka's offsetsForTimes: the first offset with a timestamp >= `ms`.
    fn offset_for_timestamp(&self, ms: i64) -> BackendResult<Option<i64>>;
    /// The lines of `status`, in order.
    fn status(&self) -> BackendResult<Vec<(&'static str, String)>>;
    /// The effective value of a config, `None` if it has none.
    fn config(&self, name: &str) -> BackendResult<Option<String>>;
    fn set_config(&self, name: &str, value: &str) -> BackendResult<()>;
    /// How lines written to `log` become records.
    fn line_format(&self) -> LineFormat;
    /// Kafka's DeleteRecords: moves the log start offset up to `offset`
    /// (at most the log end offset); returns the new log start offset.
    fn delete_records(&self, offset: i64) -> BackendResult<i64>;
    fn roll(&self) -> BackendResult<()>;
    fn flush(&self) -> BackendResult<()>;
    /// The partition's raw files (segments, indexes, side files), sorted by
    /// name; empty where the backend has none.
    fn files(&self) -> BackendResult<Vec<FileInfo>>;
    fn file(&self, name: &str) -> BackendResult<FileInfo>;
    fn read_file(&self, name: &str, pos: u64, buf: &mut [u8]) -> BackendResult<usize>;
    /// A read-only descriptor of a raw file, for the kernel to read itself.
    fn open_file(&self, name: &str) -> BackendResult<File>;
}

/// What a backend can do beyond the nodes every backend has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Features {
    /// Segment and index files exist to be listed and read.
    pub raw_files: bool,
    /// `roll` and `flush` mean something.
    pub roll: bool,
    pub flush: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Offsets {
    pub log_start: i64,
    pub log_end: i64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Appended {
    pub first_offset: i64,
    pub last_offset: i64,
    pub batches: usize,
}

/// A record and where it sits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordEntry {
    pub record: Record,
    /// The base offset of the record's batch, where the backend knows it (a
    /// Kafka client library hands out records, not batches).
    pub batch_base_offset: Option<i64>,
    /// The batch's file position in its segment, where the backend knows it.
    pub position: Option<u64>,
    pub timestamp_type: TimestampType,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineFormat {
    /// `key<sep>value` lines, as kafka-console-producer's `parse.key`.
    pub parse_key: bool,
    pub key_separator: String,
    /// No record (and so no unterminated line) may be larger.
    pub max_message_bytes: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    Log,
    Index,
    TimeIndex,
    Other,
}

/// A raw file as the tree shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileInfo {
    pub name: String,
    pub size: u64,
    pub kind: FileKind,
    pub mtime: SystemTime,
    /// Its bytes never change again while it exists (a sealed segment's files).
    pub sealed: bool,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatFs {
    pub blocks: u64,
    pub bfree: u64,
    pub bavail: u64,
    pub files: u64,
    pub ffree: u64,
    pub bsize: u32,
    pub frsize: u32,
}

/// Why a backend refused or failed. `message` is what the log shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackendError {
    pub kind: ErrorKind,
    pub message: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// No such partition, file or record.
    NotFound,
    OffsetOutOfRange {
        offset: i64,
        log_start: i64,
        log_end: i64,
    },
    /// The offset exists but holds no user record (a transaction marker).
    NoRecord,
    Exists,
    /// A bad name or value (partition name, config value, empty append).
    Invalid,
    /// A record over `max.message.bytes`.
    RecordTooLarge,
    /// A batch that no segment can hold.
    BatchTooLarge,
    ReadOnly,
    /// A change the backend's rules forbid (a cluster cannot remove one
    /// partition of a topic).
    NotPermitted,
    /// Something this backend cannot do at all.
    Unsupported,
    /// An operating-system error, with its errno.
    Io(i32),
    /// Bytes that do not decode.
    Corrupt,
    /// The partition stopped after an I/O failure (fail-stop); the failure
    /// itself was logged once, when it happened.
    Offline,
    Busy,
    TimedOut,
}

impl BackendError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        BackendError {
            kind,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for BackendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for BackendError {}
