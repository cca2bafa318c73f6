//! Names in a data directory (Kafka's rules, from `commitfs_record::names`), with
//! storage's error for a bad partition name.

use super::error::{Result, StorageError};

pub use commitfs_record::names::validate_topic;

/// Splits `<topic>-<partition>` (Kafka's rules, `commitfs_record::names`).
pub fn parse_partition_name(name: &str) -> Result<(String, u32)> {
    commitfs_record::names::parse_partition_name(name)
        .map(|(t, p)| (t.to_string(), p))
        .map_err(|why| StorageError::InvalidPartitionName(name.to_string(), why))
}

/// A name a user creates (`commitfs_record::names::validate_new_partition_name`).
pub fn validate_new_partition_name(name: &str) -> Result<(String, u32)> {
    commitfs_record::names::validate_new_partition_name(name)
        .map(|(t, p)| (t.to_string(), p))
        .map_err(|why| StorageError::InvalidPartitionName(name.to_string(), why))
}

pub use commitfs_record::names::{offset_file_stem, parse_segment_file_name, segment_file_name};
