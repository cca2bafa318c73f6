//! The seam between the tree and where partitions live.
//!
//! The tree's rules (names, modes, errnos, line framing, handles) are the
//! same whatever holds the records: a local data directory ([`local`]), a
//! Kafka cluster reached through a client library (`commitfs_cluster`), or
//! memory ([`mem`], for tests, with injectable faults). These traits are
//! what the tree needs of any of them. They speak in the project's own
//! types, never in storage's or a client library's, so that each backend
//! fits without changing their shape.
//!
//! What only some backends can do is a capability, offered or not, and
//! checked by the compiler: [`Partition::raw_files`] (segment and index
//! files), [`Partition::log_control`] (`roll`, `flush`),
//! [`Backend::root_files`] (a data directory's own files) and
//! [`Backend::groups`] (consumer groups). A backend that
//! lacks one implements nothing for it, and the tree leaves those nodes out.
//!
//! Errors are [`BackendError`]s: an [`ErrorKind`] from the project's one
//! vocabulary, and the message the log shows. The tree turns the kind into
//! an errno in one table (`fs::error`).

pub mod groups;
pub mod line_format;
pub mod local;
pub mod mem;
pub mod mem_groups;

use std::fs::File;
use std::sync::Arc;
use std::time::SystemTime;

pub use commitfs_record::error::ErrorKind;
pub use commitfs_record::names::FileKind;
pub use line_format::LineFormat;

use commitfs_record::{NewRecord, Record, TimestampType};

pub type BackendResult<T> = Result<T, BackendError>;

/// The preferred I/O size a backend reports (`st_blksize`, `f_bsize`):
/// large enough that `cp` and `cat` move 1 MiB per request.
pub const IO_SIZE: u32 = 1 << 20;

/// Partitions by name: `<topic>-<partition>`.
pub trait Backend: Send + Sync {
    /// Nothing may be written: every change is refused with `ReadOnly`.
    fn read_only(&self) -> bool;
    /// Every partition's name, sorted.
    fn partition_names(&self) -> BackendResult<Vec<String>>;
    /// The partition, or `NotFound`.
    fn partition(&self, name: &str) -> BackendResult<Arc<dyn Partition>>;
    fn create_partition(&self, name: &str) -> BackendResult<()>;
    fn delete_partition(&self, name: &str) -> BackendResult<()>;
    /// The topic configs under `config/` (the tree adds its own line format).
    fn config_names(&self) -> &'static [&'static str];
    fn statfs(&self) -> BackendResult<StatFs>;
    /// Files shown beside the partitions (a Kafka data directory's own
    /// files, on a read-only local mount), where the backend has them.
    fn root_files(&self) -> Option<&dyn RootFiles> {
        None
    }
    /// Consumer groups (`groups/`), where the backend can see a coordinator's.
    fn groups(&self) -> Option<&dyn groups::Groups> {
        None
    }
}

/// The files of the root: a Kafka data directory's checkpoints and
/// `meta.properties`.
pub trait RootFiles: Send + Sync {
    /// Sorted by name.
    fn list(&self) -> BackendResult<Vec<FileInfo>>;
    fn read(&self, name: &str, pos: u64, buf: &mut [u8]) -> BackendResult<usize>;
}

/// One partition. Handles keep it after an rmdir; it then refuses every
/// change (`NotFound`).
pub trait Partition: Send + Sync {
    fn name(&self) -> &str;
    /// The log start offset and the log end offset (high watermark).
    fn offsets(&self) -> BackendResult<Offsets>;
    /// Appends `records` in order and returns once they are as durable as
    /// the backend promises an acknowledged write to be. On an error,
    /// [`AppendError::landed`] says which of them are in the log anyway: a
    /// local data directory appends all or nothing (never any); a cluster
    /// can only say which records it acknowledged.
    fn append(&self, records: &[NewRecord]) -> Result<Appended, AppendError>;
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
    /// The offsets from `from` on (at least the log start), below the log
    /// end, that name a record: `ls offset/` lists these, at most `max` at a
    /// call, so that readdir lists exactly what lookup finds. A backend
    /// that cannot see gaps lists the whole range.
    fn record_offsets(&self, from: i64, max: usize) -> BackendResult<Vec<i64>> {
        let o = self.offsets()?;
        let first = from.max(o.log_start);
        let n = (o.log_end - first).clamp(0, max as i64);
        Ok((first..first + n).collect())
    }
    /// Length of the consumer stream (`value\n` per record from the log start).
    fn stream_len(&self) -> BackendResult<u64>;
    /// Copies stream bytes at `pos` into `buf`; returns how many (0 at the end).
    fn read_stream(&self, pos: u64, buf: &mut [u8]) -> BackendResult<usize>;
    /// When the log last grew, if known (`tail -f` watches it).
    fn log_mtime(&self) -> Option<SystemTime>;
    /// Kafka's offsetsForTimes: the first offset with a timestamp >= `ms`.
    fn offset_for_timestamp(&self, ms: i64) -> BackendResult<Option<i64>>;
    /// What `status` shows.
    fn status(&self) -> BackendResult<Status>;
    /// The effective value of a topic config, `None` if it has none.
    fn config(&self, name: &str) -> BackendResult<Option<String>>;
    fn set_config(&self, name: &str, value: &str) -> BackendResult<()>;
    /// How lines written to `log` become records: the tree's own setting,
    /// kept per partition by each backend as it can.
    fn line_format(&self) -> LineFormat;
    /// Sets one of the line format's settings ([`line_format::NAMES`]) from
    /// its text ([`LineFormat::set`]); a bad value is `InvalidConfig`.
    fn set_line_format(&self, name: &str, value: &str) -> BackendResult<()>;
    /// Whether `record` could be appended at all, alone: `RecordTooLarge`
    /// (or `BatchTooLarge`) if not, by the rule the append itself applies.
    /// Lets the tree refuse a line before it acknowledges any of it.
    fn check_record_size(&self, record: &NewRecord) -> BackendResult<()>;
    /// Kafka's DeleteRecords: moves the log start offset up to `offset`
    /// (at most the log end offset); returns the new log start offset.
    fn delete_records(&self, offset: i64) -> BackendResult<i64>;
    /// The partition's segment and index files, where it has them.
    fn raw_files(&self) -> Option<&dyn RawFiles> {
        None
    }
    /// The `read_committed` view of the log (`committed`), where the
    /// backend can tell what is committed.
    fn committed(&self) -> Option<&dyn CommittedStream> {
        None
    }
    /// Rolling and flushing by request, where the log is the backend's to roll.
    /// A pass of the log cleaner asked for (`compact`), where the backend
    /// cleans its partitions itself.
    fn compaction(&self) -> Option<&dyn Compaction> {
        None
    }
    fn log_control(&self) -> Option<&dyn LogControl> {
        None
    }
}

/// What a `read_committed` console consumer prints: the consumer stream of
/// the records below the last stable offset, those of aborted transactions
/// left out.
pub trait CommittedStream: Send + Sync {
    /// Its length from the log start.
    fn committed_len(&self) -> BackendResult<u64>;
    /// Copies its bytes at `pos` into `buf`; returns how many (0 at the end).
    fn read_committed(&self, pos: u64, buf: &mut [u8]) -> BackendResult<usize>;
}

/// The files of a partition directory: segments, indexes, side files.
pub trait RawFiles: Send + Sync {
    /// Sorted by name.
    fn files(&self) -> BackendResult<Vec<FileInfo>>;
    fn file(&self, name: &str) -> BackendResult<FileInfo>;
    fn read_file(&self, name: &str, pos: u64, buf: &mut [u8]) -> BackendResult<usize>;
    /// A read-only descriptor of a file, for the kernel to read itself.
    fn open_file(&self, name: &str) -> BackendResult<File>;
}

/// `roll` and `flush`.
/// The log cleaner of a backend that keeps compacted partitions itself.
pub trait Compaction: Send + Sync {
    /// Cleans what is cleanable of a compacted partition now, whatever its
    /// dirty ratio; a partition that is not compacted is refused (`Invalid`).
    fn compact(&self) -> BackendResult<()>;
}

pub trait LogControl: Send + Sync {
    /// Seals the active segment and starts a new one.
    fn roll(&self) -> BackendResult<()>;
    /// Makes everything appended durable (fsync).
    fn flush(&self) -> BackendResult<()>;
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Offsets {
    pub log_start: i64,
    pub log_end: i64,
}

/// Where an append landed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Appended {
    pub first_offset: i64,
    pub last_offset: i64,
    /// How many batches the records were stored in, where the backend
    /// knows (a client library hands out offsets, not batches).
    pub batches: Option<usize>,
}

/// A failed append, and what of it is in the log all the same.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppendError {
    pub error: BackendError,
    /// The records that landed: `records` of them, at `first..=last`.
    pub landed: Option<Landed>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Landed {
    pub records: usize,
    pub first_offset: i64,
    pub last_offset: i64,
}

impl From<BackendError> for AppendError {
    /// Nothing of the append landed.
    fn from(error: BackendError) -> Self {
        AppendError {
            error,
            landed: None,
        }
    }
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
    /// For a record of a transaction, what became of it (`committed`,
    /// `aborted`, `open`), where the backend knows.
    pub transaction: Option<&'static str>,
}

/// A partition's `status`: the figures every backend has, then its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    Serving {
        log_start_offset: i64,
        log_end_offset: i64,
        /// The last offset consumers may read, plus one.
        high_watermark: i64,
        /// This backend's own fields, in the order shown.
        detail: Vec<(&'static str, String)>,
    },
    /// Stopped after a failure (fail-stop): its figures may no longer match
    /// its files, so the cause is all there is to show.
    Offline { cause: String },
}

impl Status {
    /// The lines of the `status` file.
    pub fn text(&self) -> String {
        match self {
            Status::Offline { cause } => format!("offline: {cause}\n"),
            Status::Serving {
                log_start_offset,
                log_end_offset,
                high_watermark,
                detail,
            } => {
                let mut out = format!(
                    "log_start_offset: {log_start_offset}\nlog_end_offset: {log_end_offset}\n\
                     high_watermark: {high_watermark}\n"
                );
                for (k, v) in detail {
                    match v.is_empty() {
                        true => out.push_str(&format!("{k}:\n")),
                        false => out.push_str(&format!("{k}: {v}\n")),
                    }
                }
                out
            }
        }
    }
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

/// Why a backend refused or failed: the kind, and what the log shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackendError {
    pub kind: ErrorKind,
    pub message: String,
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

impl From<commitfs_storage::StorageError> for BackendError {
    fn from(e: commitfs_storage::StorageError) -> Self {
        BackendError::new(e.kind(), e.to_string())
    }
}
