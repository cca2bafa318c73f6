//! Kafka's naming rules, in one place: topics and partitions (the data
//! directory, the listener, the tree and the cluster mount all name
//! partitions `<topic>-<partition>` and refuse the same names), and the
//! files of a partition directory (segments named by base offset). Pure: no
//! I/O, no error type but the reason, which each layer wraps in its own.

/// Kafka's `Topic.validate`: 1-249 characters of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn validate_topic(topic: &str) -> Result<(), &'static str> {
    if topic.is_empty() {
        return Err("the topic name is empty");
    }
    if topic == "." || topic == ".." {
        return Err("the topic name cannot be '.' or '..'");
    }
    if topic.len() > 249 {
        return Err("the topic name is longer than 249 characters");
    }
    if !topic
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        return Err("the topic name may contain only ASCII alphanumerics, '.', '_' and '-'");
    }
    Ok(())
}

/// KRaft's metadata log (Kafka's `Topic.CLUSTER_METADATA_TOPIC_NAME`). Not
/// a topic to Kafka's clients: no Metadata lists it, no API but the
/// controllers' own reaches it.
pub const CLUSTER_METADATA_TOPIC: &str = "__cluster_metadata";

/// Kafka's `Topic.isInternal`: the topics its coordinators write
/// (`INTERNAL_TOPICS`). Clients may not append to them or delete their
/// records.
pub fn is_internal_topic(topic: &str) -> bool {
    matches!(
        topic,
        "__consumer_offsets" | "__transaction_state" | "__share_group_state"
    )
}

/// Whether Kafka itself writes `topic`: an internal topic, or KRaft's
/// metadata log. Only the broker writes these; users read them.
pub fn is_kafka_owned_topic(topic: &str) -> bool {
    is_internal_topic(topic) || topic == CLUSTER_METADATA_TOPIC
}

/// Splits `<topic>-<partition>` at the last `-`, validating both halves:
/// the partition is a canonical decimal (no sign, no leading zero) that
/// fits Kafka's `int32`.
pub fn parse_partition_name(name: &str) -> Result<(&str, u32), &'static str> {
    let (topic, partition) = name
        .rsplit_once('-')
        .ok_or("expected <topic>-<partition>")?;
    validate_topic(topic)?;
    if partition.is_empty() || !partition.bytes().all(|b| b.is_ascii_digit()) {
        return Err("the partition must be a non-negative integer");
    }
    if partition.len() > 1 && partition.starts_with('0') {
        return Err("the partition number has a leading zero");
    }
    let p: u32 = partition
        .parse()
        .ok()
        .filter(|p| *p <= i32::MAX as u32)
        .ok_or("the partition number is too large")?;
    Ok((topic, p))
}

/// The stricter rule for names a user creates: `orders--1` parses as topic
/// `orders-` partition 1, but reads as a negative partition, so refuse it.
pub fn validate_new_partition_name(name: &str) -> Result<(&str, u32), &'static str> {
    let (topic, partition) = parse_partition_name(name)?;
    if topic.ends_with('-') {
        return Err("the partition number cannot be negative (a topic ending in '-' reads as one)");
    }
    Ok((topic, partition))
}

/// `00000000000000000680` for base offset 680.
pub fn offset_file_stem(offset: i64) -> String {
    format!("{offset:020}")
}

/// The segment file with the given suffix (`log`, `index`, `timeindex`).
pub fn segment_file_name(base_offset: i64, suffix: &str) -> String {
    format!("{}.{suffix}", offset_file_stem(base_offset))
}

/// The base offset and suffix of a segment file name such as
/// `00000000000000000680.log`.
pub fn parse_segment_file_name(name: &str) -> Option<(i64, &str)> {
    let (stem, suffix) = name.split_once('.')?;
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((stem.parse().ok()?, suffix))
}

/// What a file of a partition directory is, by its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    Log,
    Index,
    TimeIndex,
    /// Any other file Kafka keeps there (`leader-epoch-checkpoint`, ...).
    Other,
}

impl FileKind {
    pub fn of(name: &str) -> FileKind {
        match parse_segment_file_name(name) {
            Some((_, "log")) => FileKind::Log,
            Some((_, "index")) => FileKind::Index,
            Some((_, "timeindex")) => FileKind::TimeIndex,
            _ => FileKind::Other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_names() {
        assert_eq!(parse_partition_name("orders-0"), Ok(("orders", 0)));
        assert_eq!(parse_partition_name("a-b.c_d-12"), Ok(("a-b.c_d", 12)));
        assert_eq!(
            parse_partition_name("__consumer_offsets-49"),
            Ok(("__consumer_offsets", 49))
        );
        let long = "t".repeat(249);
        assert!(parse_partition_name(&format!("{long}-0")).is_ok());
        for bad in [
            "",
            "-0",
            ".-0",
            "..-0",
            "orders",
            "orders-",
            "orders-01",
            "a/b-0",
            "ördërs-0",
            "orders-x",
            "orders-+1",
            "orders-99999999999",
            "t/x-0",
        ] {
            assert!(
                parse_partition_name(bad).is_err(),
                "{bad:?} must be refused"
            );
        }
        assert!(parse_partition_name(&format!("{}-0", "t".repeat(250))).is_err());
        assert_eq!(parse_partition_name("orders--1"), Ok(("orders-", 1)));
        assert!(validate_new_partition_name("orders--1").is_err());
        assert!(validate_new_partition_name("orders-1").is_ok());
    }

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
        assert_eq!(FileKind::of("00000000000000000680.index"), FileKind::Index);
        assert_eq!(
            FileKind::of("00000000000000000680.log.swap"),
            FileKind::Other
        );
        assert_eq!(FileKind::of("leader-epoch-checkpoint"), FileKind::Other);
    }
}
