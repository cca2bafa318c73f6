//! Names in a data directory: partition directories (Kafka's rules, from
//! `crate::names`) and segment files.

use super::error::{Result, StorageError};

pub use crate::names::validate_topic;

/// Splits `<topic>-<partition>` (Kafka's rules, `crate::names`).
pub fn parse_partition_name(name: &str) -> Result<(String, u32)> {
    crate::names::parse_partition_name(name)
        .map(|(t, p)| (t.to_string(), p))
        .map_err(|why| StorageError::InvalidPartitionName(name.to_string(), why))
}

/// A name a user creates (`crate::names::validate_new_partition_name`).
pub fn validate_new_partition_name(name: &str) -> Result<(String, u32)> {
    crate::names::validate_new_partition_name(name)
        .map(|(t, p)| (t.to_string(), p))
        .map_err(|why| StorageError::InvalidPartitionName(name.to_string(), why))
}

/// `00000000000000000680` for base offset 680.
pub fn offset_file_stem(offset: i64) -> String {
    format!("{offset:020}")
}

/// The segment file with the given suffix (`log`, `index`, `timeindex`).
pub fn segment_file_name(base_offset: i64, suffix: &str) -> String {
    format!("{}.{suffix}", offset_file_stem(base_offset))
}

/// The base offset of a segment file name such as `00000000000000000680.log`.
pub fn parse_segment_file_name(name: &str) -> Option<(i64, &str)> {
    let (stem, suffix) = name.split_once('.')?;
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((stem.parse().ok()?, suffix))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_names() {
        assert_eq!(segment_file_name(680, "log"), "00000000000000000680.log");
        assert_eq!(
            parse_segment_file_name("00000000000000000680.timeindex"),
            Some((680, "timeindex"))
        );
        assert_eq!(parse_segment_file_name("680.log"), None);
        assert_eq!(
            parse_segment_file_name("00000000000000000680.log.deleted"),
            Some((680, "log.deleted"))
        );
    }
}
