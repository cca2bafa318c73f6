//! One partition's log: the segments, the log start and end offsets, the
//! recovery point, and the single writer lock.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::Path;
use std::time::SystemTime;

use super::config::LogConfig;
use super::error::Result;
use crate::record::{NewRecord, Record};

/// Where an append landed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppendInfo {
    pub first_offset: i64,
    pub last_offset: i64,
    /// How many batches the records were packed into.
    pub batches: usize,
    /// Bytes added to the log.
    pub bytes: u64,
}

/// What `status` shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionStatus {
    pub log_start_offset: i64,
    pub log_end_offset: i64,
    pub recovery_point: i64,
    pub segments: usize,
    pub size_bytes: u64,
    /// Base offset of the active segment.
    pub active_segment: i64,
    /// Bytes read from segment files for record lookups (not raw file reads).
    pub lookup_bytes_read: u64,
    /// fsync(2) calls on `.log` files.
    pub fsyncs: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    Log,
    Index,
    TimeIndex,
    /// Any other file Kafka keeps in a partition dir (`leader-epoch-checkpoint`, ...).
    Other,
}

/// A file in the partition directory, as the mount lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionFile {
    pub name: String,
    pub size: u64,
    pub kind: FileKind,
    pub mtime: SystemTime,
}

pub struct PartitionLog {
    _private: (),
}

impl PartitionLog {
    /// `<topic>-<partition>`.
    pub fn name(&self) -> &str {
        todo!()
    }
    pub fn topic(&self) -> &str {
        todo!()
    }
    pub fn partition(&self) -> u32 {
        todo!()
    }
    pub fn dir(&self) -> &Path {
        todo!()
    }

    /// Appends `records` at the log end offset, packed in order into the fewest
    /// batches that each fit `max.message.bytes`. All or nothing: a record that
    /// fits no batch fails the whole call with `RecordTooLarge` before anything
    /// is written. Returns once the bytes are in the segment file (page cache).
    pub fn append(&self, _records: &[NewRecord]) -> Result<AppendInfo> {
        todo!()
    }

    /// Record `offset`, found through the sparse index.
    /// `OffsetOutOfRange` outside [log start, LEO).
    pub fn read(&self, _offset: i64) -> Result<Record> {
        todo!()
    }

    pub fn log_start_offset(&self) -> i64 {
        todo!()
    }
    pub fn log_end_offset(&self) -> i64 {
        todo!()
    }
    pub fn recovery_point(&self) -> i64 {
        todo!()
    }
    pub fn status(&self) -> PartitionStatus {
        todo!()
    }

    /// Rolls the active segment. Rolling an empty active segment does nothing.
    pub fn roll(&self) -> Result<()> {
        todo!()
    }

    /// fsyncs every segment up to the LEO, advances the recovery point, writes the checkpoint.
    pub fn flush(&self) -> Result<()> {
        todo!()
    }

    /// Flushes when `flush.ms` has passed since the last flush.
    pub fn maybe_flush_on_time(&self, _now_ms: i64) -> Result<()> {
        todo!()
    }

    /// Segment files and Kafka side files, sorted by name, with live sizes.
    pub fn files(&self) -> Result<Vec<PartitionFile>> {
        todo!()
    }

    /// Positioned read of a file from [`PartitionLog::files`].
    pub fn read_file(&self, _name: &str, _offset: u64, _buf: &mut [u8]) -> Result<usize> {
        todo!()
    }

    /// A read-only handle on a file from [`PartitionLog::files`] (for passthrough or mmap).
    pub fn open_file(&self, _name: &str) -> Result<File> {
        todo!()
    }

    pub fn config(&self) -> LogConfig {
        todo!()
    }

    /// The per-partition overrides (persisted in the partition directory).
    pub fn overrides(&self) -> BTreeMap<String, String> {
        todo!()
    }

    /// Validates, applies and persists one override.
    pub fn set_config(&self, _name: &str, _value: &str) -> Result<()> {
        todo!()
    }

    /// Kafka's delete-records: the log start offset becomes `offset`, whole
    /// segments below it are deleted. Returns the new log start offset.
    pub fn delete_records_before(&self, _offset: i64) -> Result<i64> {
        todo!()
    }

    /// Applies retention.ms, retention.bytes and the log start offset; returns
    /// how many segments were deleted.
    pub fn apply_retention(&self, _now_ms: i64) -> Result<usize> {
        todo!()
    }

    /// Kafka's offsetsForTimes: the first offset whose timestamp is >= `timestamp_ms`.
    pub fn offset_for_timestamp(&self, _timestamp_ms: i64) -> Result<Option<i64>> {
        todo!()
    }
}
