//! The data directory (Kafka's `log.dir`): partitions, checkpoints, the
//! clean-shutdown marker and the lock.

use std::path::Path;
use std::sync::Arc;

use super::config::LogConfig;
use super::error::Result;
use super::log::PartitionLog;

#[derive(Clone, Debug, Default)]
pub struct OpenOptions {
    /// Never write to the data directory: no marker, no checkpoint, indexes
    /// that need rebuilding are rebuilt in memory only.
    pub read_only: bool,
}

pub struct LogManager {
    _private: (),
}

impl LogManager {
    /// Opens (creating if missing) a data directory: takes the lock, loads every
    /// partition, recovering them if the clean-shutdown marker is absent.
    pub fn open(_dir: &Path, _defaults: LogConfig, _opts: OpenOptions) -> Result<LogManager> {
        todo!()
    }
    pub fn dir(&self) -> &Path {
        todo!()
    }
    pub fn defaults(&self) -> &LogConfig {
        todo!()
    }
    pub fn read_only(&self) -> bool {
        todo!()
    }
    /// All partitions, sorted by name.
    pub fn partitions(&self) -> Vec<Arc<PartitionLog>> {
        todo!()
    }
    pub fn partition(&self, _name: &str) -> Option<Arc<PartitionLog>> {
        todo!()
    }
    /// Creates `<topic>-<partition>`; `InvalidPartitionName` or `PartitionExists`.
    pub fn create_partition(&self, _name: &str) -> Result<Arc<PartitionLog>> {
        todo!()
    }
    /// Deletes a partition and all its files.
    pub fn delete_partition(&self, _name: &str) -> Result<()> {
        todo!()
    }
    pub fn flush_all(&self) -> Result<()> {
        todo!()
    }
    /// One retention pass over every partition.
    pub fn run_retention(&self, _now_ms: i64) -> Result<()> {
        todo!()
    }
    /// `flush.ms` flushes due by `now_ms`.
    pub fn run_scheduled_flushes(&self, _now_ms: i64) -> Result<()> {
        todo!()
    }
    /// Flushes and closes every partition, writes the checkpoints and the
    /// clean-shutdown marker. Idempotent.
    pub fn close(&self) -> Result<()> {
        todo!()
    }
}
