//! Topic-level configs with Kafka's names, defaults and validators.

use std::collections::BTreeMap;
use std::fmt;

/// A refused config, worded as Kafka's `ConfigException`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("Invalid value {value} for configuration {name}: {reason}")]
    InvalidValue {
        name: String,
        value: String,
        reason: String,
    },
    #[error("Unknown topic config name: {0}")]
    UnknownName(String),
    /// Values that are each valid but not together (Kafka's
    /// `InvalidConfigurationException` from `validateValues`).
    #[error("{0}")]
    Conflict(String),
}

/// Codec applied to appended batches (`compression.type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompressionType {
    /// Kafka's default: keep what the producer sent. Our producer (the mount)
    /// sends uncompressed batches, so this writes uncompressed.
    Producer,
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl CompressionType {
    pub fn name(self) -> &'static str {
        match self {
            CompressionType::Producer => "producer",
            CompressionType::None => "none",
            CompressionType::Gzip => "gzip",
            CompressionType::Snappy => "snappy",
            CompressionType::Lz4 => "lz4",
            CompressionType::Zstd => "zstd",
        }
    }

    /// The codec appended batches get. `producer` keeps what the producer
    /// sent, and the mount's producer sends uncompressed batches.
    pub fn codec(self) -> commitfs_record::Compression {
        use commitfs_record::Compression;
        match self {
            CompressionType::Producer | CompressionType::None => Compression::None,
            CompressionType::Gzip => Compression::Gzip,
            CompressionType::Snappy => Compression::Snappy,
            CompressionType::Lz4 => Compression::Lz4,
            CompressionType::Zstd => Compression::Zstd,
        }
    }

    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "producer" => CompressionType::Producer,
            "none" | "uncompressed" => CompressionType::None,
            "gzip" => CompressionType::Gzip,
            "snappy" => CompressionType::Snappy,
            "lz4" => CompressionType::Lz4,
            "zstd" => CompressionType::Zstd,
            _ => return None,
        })
    }
}

/// The effective configuration of one partition log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogConfig {
    pub segment_bytes: i32,
    pub segment_ms: i64,
    pub segment_jitter_ms: i64,
    pub segment_index_bytes: i32,
    pub index_interval_bytes: i32,
    pub retention_ms: i64,
    pub retention_bytes: i64,
    /// `i64::MAX` means off, as in Kafka.
    pub flush_messages: i64,
    /// `i64::MAX` means off, as in Kafka.
    pub flush_ms: i64,
    pub max_message_bytes: i32,
    pub file_delete_delay_ms: i64,
    pub compression_type: CompressionType,
    /// Kafka's `message.timestamp.type`: with `LogAppendTime` every appended
    /// batch carries the broker's append time.
    pub message_timestamp_type: commitfs_record::TimestampType,
    /// `cleanup.policy`: delete (retention), compact (the log cleaner), both.
    pub cleanup_policy: CleanupPolicy,
    /// `min.cleanable.dirty.ratio`.
    pub min_cleanable_dirty_ratio: Ratio,
    /// `min.compaction.lag.ms`.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`.
    pub max_compaction_lag_ms: i64,
    /// `delete.retention.ms`: how long a tombstone outlives the first clean
    /// that keeps it.
    pub delete_retention_ms: i64,
    /// `remote.storage.enable` (KIP-405). Kept and validated as Kafka does
    /// so a topic's settings carry over; there is no remote store yet.
    pub remote_storage_enable: bool,
    /// `local.retention.ms`; [`LOCAL_RETENTION_FROM_RETENTION`] means
    /// `retention.ms`.
    pub local_retention_ms: i64,
    /// `local.retention.bytes`; [`LOCAL_RETENTION_FROM_RETENTION`] means
    /// `retention.bytes`.
    pub local_retention_bytes: i64,
    /// `remote.log.copy.disable`.
    pub remote_log_copy_disable: bool,
    /// `remote.log.delete.on.disable`.
    pub remote_log_delete_on_disable: bool,
}

/// Kafka's default of `local.retention.ms` and `local.retention.bytes`:
/// the local log keeps what `retention.ms` and `retention.bytes` keep.
pub const LOCAL_RETENTION_FROM_RETENTION: i64 = -2;

/// `local.retention.<unit>` against `retention.<unit>` where the latter
/// bounds it (`bounded`: Kafka tests bytes with `> -1`, ms with `!= -1`),
/// in Kafka's words.
fn local_within_retention(
    unit: &str,
    local: i64,
    retention: i64,
    bounded: bool,
) -> Result<(), ConfigError> {
    if !bounded || local == LOCAL_RETENTION_FROM_RETENTION {
        return Ok(());
    }
    let why = if local == -1 {
        format!("Value must not be -1 as retention.{unit} value is set as {retention}.")
    } else if local > retention {
        format!("Value must not be more than retention.{unit} property value: {retention}")
    } else {
        return Ok(());
    };
    Err(invalid(
        &format!("local.retention.{unit}"),
        &local.to_string(),
        why,
    ))
}

/// `cleanup.policy`, a list of `delete` and `compact` as written (Kafka
/// keeps the list; its flags are what the log obeys).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CleanupPolicy {
    items: Vec<String>,
}

impl CleanupPolicy {
    pub fn delete() -> CleanupPolicy {
        CleanupPolicy {
            items: vec!["delete".to_string()],
        }
    }

    /// Kafka's `LogConfig.compact`: the lower-cased list names `compact`.
    pub fn compact(&self) -> bool {
        self.items.iter().any(|i| i.to_lowercase() == "compact")
    }

    /// Kafka's `LogConfig.delete`.
    pub fn delete_enabled(&self) -> bool {
        self.items.iter().any(|i| i.to_lowercase() == "delete")
    }

    /// Kafka's LIST parsing (`ConfigDef.parseType`: split at commas with
    /// the blanks around them; an empty value is the empty list), then
    /// `ValidList.in("compact", "delete")`, case-sensitive, on each item.
    fn parse(name: &str, value: &str) -> Result<CleanupPolicy, ConfigError> {
        let trimmed = value.trim();
        let items: Vec<String> = if trimmed.is_empty() {
            Vec::new()
        } else {
            trimmed.split(',').map(|i| i.trim().to_string()).collect()
        };
        for item in &items {
            if item != "compact" && item != "delete" {
                return Err(invalid(
                    name,
                    item,
                    "String must be one of: compact, delete",
                ));
            }
        }
        Ok(CleanupPolicy { items })
    }

    /// The list as Kafka prints it (`ConfigDef.convertToString`).
    pub fn text(&self) -> String {
        self.items.join(",")
    }

    pub fn items(&self) -> &[String] {
        &self.items
    }
}

/// A DOUBLE config between 0 and 1, compared bit for bit so configs stay `Eq`.
#[derive(Clone, Copy, Debug)]
pub struct Ratio(pub f64);

impl PartialEq for Ratio {
    fn eq(&self, other: &Ratio) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}
impl Eq for Ratio {}

/// A double as Java's `Double.toString` prints it, which is what Kafka's
/// DescribeConfigs shows: `0.5`, `1.0`, `1.0E-4`.
pub fn java_double(v: f64) -> String {
    if v == 0.0 || (1e-3..1e7).contains(&v.abs()) {
        let s = format!("{v}");
        if s.contains('.') { s } else { format!("{s}.0") }
    } else {
        let s = format!("{v:E}");
        let (m, e) = s.split_once('E').unwrap_or((&s, "0"));
        let m = if m.contains('.') {
            m.to_string()
        } else {
            format!("{m}.0")
        };
        format!("{m}E{e}")
    }
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1 << 30,
            segment_ms: 7 * 24 * 60 * 60 * 1000,
            segment_jitter_ms: 0,
            segment_index_bytes: 10 * 1024 * 1024,
            index_interval_bytes: 4096,
            retention_ms: 7 * 24 * 60 * 60 * 1000,
            retention_bytes: -1,
            flush_messages: i64::MAX,
            flush_ms: i64::MAX,
            max_message_bytes: 1024 * 1024 + 12,
            file_delete_delay_ms: 60_000,
            compression_type: CompressionType::Producer,
            message_timestamp_type: commitfs_record::TimestampType::CreateTime,
            cleanup_policy: CleanupPolicy::delete(),
            min_cleanable_dirty_ratio: Ratio(0.5),
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            delete_retention_ms: 86_400_000,
            remote_storage_enable: false,
            local_retention_ms: LOCAL_RETENTION_FROM_RETENTION,
            local_retention_bytes: LOCAL_RETENTION_FROM_RETENTION,
            remote_log_copy_disable: false,
            remote_log_delete_on_disable: false,
        }
    }
}

/// Every config name a partition understands, in the order `config/` lists them.
pub const CONFIG_NAMES: &[&str] = &[
    "segment.bytes",
    "segment.ms",
    "segment.jitter.ms",
    "segment.index.bytes",
    "index.interval.bytes",
    "retention.ms",
    "retention.bytes",
    "flush.messages",
    "flush.ms",
    "max.message.bytes",
    "file.delete.delay.ms",
    "compression.type",
    "message.timestamp.type",
    "cleanup.policy",
    "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms",
    "max.compaction.lag.ms",
    "delete.retention.ms",
    "remote.storage.enable",
    "local.retention.ms",
    "local.retention.bytes",
    "remote.log.copy.disable",
    "remote.log.delete.on.disable",
];

/// Whether `name` is a topic config. A partition's properties file may
/// hold other names too: settings of the faces above storage (the tree's
/// line format), kept and never interpreted here.
pub fn is_config_name(name: &str) -> bool {
    CONFIG_NAMES.contains(&name)
}

pub(crate) fn invalid(name: &str, value: &str, reason: impl fmt::Display) -> ConfigError {
    ConfigError::InvalidValue {
        name: name.to_string(),
        value: value.to_string(),
        reason: reason.to_string(),
    }
}

pub(crate) fn parse_long(name: &str, value: &str, min: i64) -> Result<i64, ConfigError> {
    let v: i64 = value.trim().parse().map_err(|_| {
        invalid(
            name,
            value,
            "Expected value to be a 64-bit integer (long), but it was a java.lang.String",
        )
    })?;
    if v < min {
        return Err(invalid(
            name,
            value,
            format!("Value must be at least {min}"),
        ));
    }
    Ok(v)
}

pub(crate) fn parse_int(name: &str, value: &str, min: i64) -> Result<i32, ConfigError> {
    let v: i32 = value.trim().parse().map_err(|_| {
        invalid(
            name,
            value,
            "Expected value to be a 32-bit integer, but it was a java.lang.String",
        )
    })?;
    if (v as i64) < min {
        return Err(invalid(
            name,
            value,
            format!("Value must be at least {min}"),
        ));
    }
    Ok(v)
}

/// Kafka's BOOLEAN: `true` or `false` in any case.
pub(crate) fn parse_bool(name: &str, value: &str) -> Result<bool, ConfigError> {
    match value.trim().to_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(invalid(
            name,
            value,
            "Expected value to be either true or false",
        )),
    }
}

/// Kafka's `Range.between(0, 1)` on a DOUBLE.
fn parse_ratio(name: &str, value: &str) -> Result<Ratio, ConfigError> {
    let v: f64 = value.trim().parse().map_err(|_| {
        invalid(
            name,
            value,
            "Expected value to be a double, but it was a java.lang.String",
        )
    })?;
    if v.is_nan() || v < 0.0 {
        return Err(invalid(name, value, "Value must be at least 0"));
    }
    if v > 1.0 {
        return Err(invalid(name, value, "Value must be no more than 1"));
    }
    Ok(Ratio(v))
}

impl LogConfig {
    /// Validates and applies one `name=value`, leaving `self` untouched on error.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), ConfigError> {
        let value = value.trim_end_matches(['\n', '\r']);
        match name {
            "segment.bytes" => self.segment_bytes = parse_int(name, value, 1_048_576)?,
            "segment.ms" => self.segment_ms = parse_long(name, value, 1)?,
            "segment.jitter.ms" => self.segment_jitter_ms = parse_long(name, value, 0)?,
            "segment.index.bytes" => self.segment_index_bytes = parse_int(name, value, 4)?,
            "index.interval.bytes" => self.index_interval_bytes = parse_int(name, value, 0)?,
            "retention.ms" => self.retention_ms = parse_long(name, value, -1)?,
            "retention.bytes" => self.retention_bytes = parse_long(name, value, i64::MIN)?,
            "flush.messages" => self.flush_messages = parse_long(name, value, 1)?,
            "flush.ms" => self.flush_ms = parse_long(name, value, 0)?,
            "max.message.bytes" => self.max_message_bytes = parse_int(name, value, 0)?,
            "file.delete.delay.ms" => self.file_delete_delay_ms = parse_long(name, value, 0)?,
            "compression.type" => {
                self.compression_type = CompressionType::parse(value.trim()).ok_or_else(|| {
                    invalid(
                        name,
                        value,
                        "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer",
                    )
                })?
            }
            "message.timestamp.type" => {
                use commitfs_record::TimestampType;
                self.message_timestamp_type = match value.trim() {
                    "CreateTime" => TimestampType::CreateTime,
                    "LogAppendTime" => TimestampType::LogAppendTime,
                    _ => {
                        return Err(invalid(
                            name,
                            value,
                            "String must be one of: CreateTime, LogAppendTime",
                        ));
                    }
                }
            }
            "cleanup.policy" => self.cleanup_policy = CleanupPolicy::parse(name, value)?,
            "min.cleanable.dirty.ratio" => {
                self.min_cleanable_dirty_ratio = parse_ratio(name, value)?
            }
            "min.compaction.lag.ms" => self.min_compaction_lag_ms = parse_long(name, value, 0)?,
            "max.compaction.lag.ms" => self.max_compaction_lag_ms = parse_long(name, value, 1)?,
            "delete.retention.ms" => self.delete_retention_ms = parse_long(name, value, 0)?,
            "remote.storage.enable" => self.remote_storage_enable = parse_bool(name, value)?,
            "local.retention.ms" => {
                self.local_retention_ms = parse_long(name, value, LOCAL_RETENTION_FROM_RETENTION)?
            }
            "local.retention.bytes" => {
                self.local_retention_bytes =
                    parse_long(name, value, LOCAL_RETENTION_FROM_RETENTION)?
            }
            "remote.log.copy.disable" => self.remote_log_copy_disable = parse_bool(name, value)?,
            "remote.log.delete.on.disable" => {
                self.remote_log_delete_on_disable = parse_bool(name, value)?
            }
            _ => return Err(ConfigError::UnknownName(name.to_string())),
        }
        Ok(())
    }

    /// Kafka's `LogConfig.validateValues`: what no single value shows.
    /// Then its topic checks of tiered storage, with the remote storage
    /// system off: there is no remote store to turn on (the daemon refuses
    /// `remote.log.storage.system.enable=true`).
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms {
            return Err(ConfigError::Conflict(format!(
                "conflict topic config setting min.compaction.lag.ms ({}) > max.compaction.lag.ms ({})",
                self.min_compaction_lag_ms, self.max_compaction_lag_ms
            )));
        }
        self.validate_remote_storage(false)
    }

    /// Kafka's `validateTopicLogConfigValues` for a topic with
    /// `remote.storage.enable=true`, in Kafka's order, so the first
    /// refusal is Kafka's. Without remote storage nothing is checked:
    /// Kafka keeps `local.retention.*` inert then, whatever their values.
    pub fn validate_remote_storage(&self, system_enabled: bool) -> Result<(), ConfigError> {
        if !self.remote_storage_enable {
            return Ok(());
        }
        if !system_enabled {
            return Err(ConfigError::Conflict(
                "Tiered Storage functionality is disabled in the broker. Topic cannot be \
                 configured with remote log storage."
                    .to_string(),
            ));
        }
        if self.cleanup_policy.compact() {
            return Err(ConfigError::Conflict(
                "Remote log storage is unsupported for the compacted topics".to_string(),
            ));
        }
        self.validate_local_retention_bytes()?;
        self.validate_local_retention_ms()?;
        self.validate_retention_when_copy_disabled()
    }

    /// Kafka's `validateRemoteStorageRetentionSize`.
    fn validate_local_retention_bytes(&self) -> Result<(), ConfigError> {
        let retention = self.retention_bytes;
        let local = self.local_retention_bytes;
        local_within_retention("bytes", local, retention, retention > -1)
    }

    /// Kafka's `validateRemoteStorageRetentionTime`.
    fn validate_local_retention_ms(&self) -> Result<(), ConfigError> {
        let retention = self.retention_ms;
        let local = self.local_retention_ms;
        local_within_retention("ms", local, retention, retention != -1)
    }

    /// Kafka's `validateRetentionConfigsWhenRemoteCopyDisabled`: with no
    /// more copies to the remote store, the local log is the whole log.
    fn validate_retention_when_copy_disabled(&self) -> Result<(), ConfigError> {
        if !self.remote_log_copy_disable {
            return Ok(());
        }
        let from_retention = LOCAL_RETENTION_FROM_RETENTION;
        if self.local_retention_bytes != from_retention
            && self.local_retention_bytes != self.retention_bytes
        {
            return Err(ConfigError::Conflict(
                "When `remote.log.copy.disable` is set to true, the `local.retention.bytes` and \
                 `retention.bytes` must be set to the identical value because there will be no \
                 more logs copied to the remote storage."
                    .to_string(),
            ));
        }
        if self.local_retention_ms != from_retention && self.local_retention_ms != self.retention_ms
        {
            return Err(ConfigError::Conflict(
                "When `remote.log.copy.disable` is set to true, the `local.retention.ms` and \
                 `retention.ms` must be set to the identical value because there will be no \
                 more logs copied to the remote storage."
                    .to_string(),
            ));
        }
        Ok(())
    }

    /// Kafka's `LogConfig.localRetentionMs`: what the local log keeps by time.
    pub fn effective_local_retention_ms(&self) -> i64 {
        match self.local_retention_ms {
            LOCAL_RETENTION_FROM_RETENTION => self.retention_ms,
            ms => ms,
        }
    }

    /// Kafka's `LogConfig.localRetentionBytes`.
    pub fn effective_local_retention_bytes(&self) -> i64 {
        match self.local_retention_bytes {
            LOCAL_RETENTION_FROM_RETENTION => self.retention_bytes,
            bytes => bytes,
        }
    }

    /// Kafka's `LogConfig.maxSegmentMs`: a compacted log rolls by
    /// `max.compaction.lag.ms` too, so its head becomes cleanable in time.
    pub fn max_segment_ms(&self) -> i64 {
        if self.cleanup_policy.compact() && self.max_compaction_lag_ms > 0 {
            self.segment_ms.min(self.max_compaction_lag_ms)
        } else {
            self.segment_ms
        }
    }

    /// The effective value of `name` as text, or `None` for an unknown name.
    pub fn get(&self, name: &str) -> Option<String> {
        Some(match name {
            "segment.bytes" => self.segment_bytes.to_string(),
            "segment.ms" => self.segment_ms.to_string(),
            "segment.jitter.ms" => self.segment_jitter_ms.to_string(),
            "segment.index.bytes" => self.segment_index_bytes.to_string(),
            "index.interval.bytes" => self.index_interval_bytes.to_string(),
            "retention.ms" => self.retention_ms.to_string(),
            "retention.bytes" => self.retention_bytes.to_string(),
            "flush.messages" => self.flush_messages.to_string(),
            "flush.ms" => self.flush_ms.to_string(),
            "max.message.bytes" => self.max_message_bytes.to_string(),
            "file.delete.delay.ms" => self.file_delete_delay_ms.to_string(),
            "compression.type" => self.compression_type.name().to_string(),
            "message.timestamp.type" => self.message_timestamp_type.name().to_string(),
            "cleanup.policy" => self.cleanup_policy.text(),
            "min.cleanable.dirty.ratio" => java_double(self.min_cleanable_dirty_ratio.0),
            "min.compaction.lag.ms" => self.min_compaction_lag_ms.to_string(),
            "max.compaction.lag.ms" => self.max_compaction_lag_ms.to_string(),
            "delete.retention.ms" => self.delete_retention_ms.to_string(),
            "remote.storage.enable" => self.remote_storage_enable.to_string(),
            "local.retention.ms" => self.local_retention_ms.to_string(),
            "local.retention.bytes" => self.local_retention_bytes.to_string(),
            "remote.log.copy.disable" => self.remote_log_copy_disable.to_string(),
            "remote.log.delete.on.disable" => self.remote_log_delete_on_disable.to_string(),
            _ => return None,
        })
    }

    /// Applies the topic configs among `overrides` on top of `self`,
    /// stopping at the first bad one.
    pub fn with_overrides(
        &self,
        overrides: &BTreeMap<String, String>,
    ) -> Result<LogConfig, ConfigError> {
        let mut c = self.clone();
        for (k, v) in overrides.iter().filter(|(k, _)| is_config_name(k)) {
            c.set(k, v)?;
        }
        c.validate()?;
        Ok(c)
    }

    /// The largest batch an append writes: `max.message.bytes`, or
    /// `segment.bytes` where that is smaller.
    pub fn batch_limit(&self) -> usize {
        self.max_message_bytes.min(self.segment_bytes).max(0) as usize
    }

    /// Entries an offset index holds: `segment.index.bytes` rounded down to 8.
    pub fn offset_index_max_bytes(&self) -> u64 {
        (self.segment_index_bytes as u64 / 8) * 8
    }

    /// Entries a time index holds: `segment.index.bytes` rounded down to 12.
    pub fn time_index_max_bytes(&self) -> u64 {
        (self.segment_index_bytes as u64 / 12) * 12
    }
}

/// Reads a Java-style properties text (`name=value` lines, `#` comments).
pub fn parse_properties(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .map(str::trim_start)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('!'))
        .filter_map(|l| {
            l.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.to_string()))
        })
        .collect()
}

/// Writes `name=value` lines in name order.
pub fn format_properties(props: &BTreeMap<String, String>) -> String {
    props.iter().map(|(k, v)| format!("{k}={v}\n")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_defaults() {
        let c = LogConfig::default();
        assert_eq!(c.segment_bytes, 1_073_741_824);
        assert_eq!(c.offset_index_max_bytes(), 10_485_760);
        assert_eq!(c.time_index_max_bytes(), 10_485_756);
        assert_eq!(c.max_message_bytes, 1_048_588);
        for name in CONFIG_NAMES {
            let v = c.get(name).unwrap();
            let mut d = LogConfig::default();
            d.set(name, &v).unwrap();
            assert_eq!(d, c, "{name} round-trips");
        }
    }

    #[test]
    fn kafka_wording_for_refusals() {
        let mut c = LogConfig::default();
        let e = c.set("segment.bytes", "16384").unwrap_err();
        assert_eq!(
            e.to_string(),
            "Invalid value 16384 for configuration segment.bytes: Value must be at least 1048576"
        );
        assert!(c.set("segment.bytes", "abc").is_err());
        assert!(c.set("retention.ms", "-2").is_err());
        c.set("retention.ms", "-1").unwrap();
        assert!(c.set("flush.messages", "0").is_err());
        assert!(c.set("compression.type", "brotli").is_err());
        assert_eq!(
            c.set("no.such", "1").unwrap_err().to_string(),
            "Unknown topic config name: no.such"
        );
        assert_eq!(c.segment_bytes, 1 << 30, "a refusal changes nothing");
    }

    /// Kafka's `LogConfig` definitions: `cleanup.policy` a LIST of
    /// `compact` and `delete` (case-sensitive, the empty list allowed),
    /// `min.cleanable.dirty.ratio` a DOUBLE in [0, 1], the lags and
    /// `delete.retention.ms` LONGs, and `validateValues`' cross-check.
    #[test]
    fn compaction_configs_as_kafka_defines_them() {
        let c = LogConfig::default();
        for (name, want) in [
            ("cleanup.policy", "delete"),
            ("min.cleanable.dirty.ratio", "0.5"),
            ("min.compaction.lag.ms", "0"),
            ("max.compaction.lag.ms", "9223372036854775807"),
            ("delete.retention.ms", "86400000"),
        ] {
            assert_eq!(c.get(name).unwrap(), want, "{name}");
        }
        let mut c = LogConfig::default();
        c.set("cleanup.policy", " compact , delete ").unwrap();
        assert_eq!(c.get("cleanup.policy").unwrap(), "compact,delete");
        assert!(c.cleanup_policy.compact() && c.cleanup_policy.delete_enabled());
        c.set("cleanup.policy", "").unwrap();
        assert!(!c.cleanup_policy.compact() && !c.cleanup_policy.delete_enabled());
        assert_eq!(
            c.set("cleanup.policy", "compact,Delete")
                .unwrap_err()
                .to_string(),
            "Invalid value Delete for configuration cleanup.policy: String must be one of: compact, delete"
        );
        c.set("min.cleanable.dirty.ratio", "1").unwrap();
        assert_eq!(c.get("min.cleanable.dirty.ratio").unwrap(), "1.0");
        assert_eq!(
            c.set("min.cleanable.dirty.ratio", "1.5")
                .unwrap_err()
                .to_string(),
            "Invalid value 1.5 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"
        );
        assert!(c.set("min.cleanable.dirty.ratio", "-0.1").is_err());
        assert!(c.set("max.compaction.lag.ms", "0").is_err(), "at least 1");
        let mut m = BTreeMap::new();
        m.insert("min.compaction.lag.ms".to_string(), "10".to_string());
        m.insert("max.compaction.lag.ms".to_string(), "5".to_string());
        assert_eq!(
            LogConfig::default()
                .with_overrides(&m)
                .unwrap_err()
                .to_string(),
            "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"
        );
        assert_eq!(java_double(1.0e-4), "1.0E-4");
        assert_eq!(java_double(0.25), "0.25");
    }

    /// Kafka's tiered storage topic configs: BOOLEANs and LONGs of at
    /// least -2, -2 standing for `retention.*`, all accepted while remote
    /// storage is off.
    #[test]
    fn tiered_storage_configs_as_kafka_defines_them() {
        let c = LogConfig::default();
        for (name, want) in [
            ("remote.storage.enable", "false"),
            ("local.retention.ms", "-2"),
            ("local.retention.bytes", "-2"),
            ("remote.log.copy.disable", "false"),
            ("remote.log.delete.on.disable", "false"),
        ] {
            assert_eq!(c.get(name).unwrap(), want, "{name}");
        }
        assert_eq!(c.effective_local_retention_ms(), c.retention_ms);
        assert_eq!(c.effective_local_retention_bytes(), c.retention_bytes);
        let mut c = LogConfig::default();
        c.set("remote.storage.enable", " FALSE ").unwrap();
        assert_eq!(c.get("remote.storage.enable").unwrap(), "false");
        assert_eq!(
            c.set("remote.log.copy.disable", "yes")
                .unwrap_err()
                .to_string(),
            "Invalid value yes for configuration remote.log.copy.disable: Expected value to be \
             either true or false"
        );
        assert_eq!(
            c.set("local.retention.ms", "-3").unwrap_err().to_string(),
            "Invalid value -3 for configuration local.retention.ms: Value must be at least -2"
        );
        assert!(c.set("local.retention.bytes", "-3").is_err());
        c.set("local.retention.ms", "1000").unwrap();
        assert_eq!(c.effective_local_retention_ms(), 1000);
        // Inert without remote storage, as in Kafka: above `retention.*`,
        // or -1, is accepted.
        c.set("retention.ms", "500").unwrap();
        c.set("local.retention.bytes", "-1").unwrap();
        c.set("retention.bytes", "100").unwrap();
        c.set("remote.log.copy.disable", "true").unwrap();
        c.set("remote.log.delete.on.disable", "true").unwrap();
        c.set("cleanup.policy", "compact").unwrap();
        c.validate().unwrap();
    }

    /// `remote.storage.enable=true` with the remote storage system off
    /// (always, for now): Kafka's `validateRemoteStorageOnlyIfSystemEnabled`.
    #[test]
    fn remote_storage_is_refused_while_the_system_is_off() {
        let mut m = BTreeMap::new();
        m.insert("remote.storage.enable".to_string(), "true".to_string());
        let want = "Tiered Storage functionality is disabled in the broker. Topic cannot be \
                    configured with remote log storage.";
        let e = LogConfig::default().with_overrides(&m).unwrap_err();
        assert_eq!(e.to_string(), want);
        let mut c = LogConfig::default();
        c.set("remote.storage.enable", "true").unwrap();
        assert_eq!(c.validate().unwrap_err().to_string(), want);
        c.validate_remote_storage(true).unwrap();
    }

    /// Kafka's checks of a topic with remote storage, in its order, each
    /// with its words (the system taken as on, as Kafka's would be).
    #[test]
    fn remote_storage_checks_in_kafka_words() {
        let remote = |pairs: &[(&str, &str)]| {
            let mut c = LogConfig::default();
            c.set("remote.storage.enable", "true").unwrap();
            for (k, v) in pairs {
                c.set(k, v).unwrap();
            }
            c.validate_remote_storage(true).err().map(|e| e.to_string())
        };
        assert_eq!(
            remote(&[("cleanup.policy", "delete,compact")]).unwrap(),
            "Remote log storage is unsupported for the compacted topics"
        );
        assert_eq!(
            remote(&[("retention.ms", "1000"), ("local.retention.ms", "2000")]).unwrap(),
            "Invalid value 2000 for configuration local.retention.ms: Value must not be more \
             than retention.ms property value: 1000"
        );
        assert_eq!(
            remote(&[("local.retention.ms", "-1")]).unwrap(),
            "Invalid value -1 for configuration local.retention.ms: Value must not be -1 as \
             retention.ms value is set as 604800000."
        );
        assert_eq!(
            remote(&[("retention.bytes", "100"), ("local.retention.bytes", "200")]).unwrap(),
            "Invalid value 200 for configuration local.retention.bytes: Value must not be more \
             than retention.bytes property value: 100"
        );
        assert_eq!(
            remote(&[("retention.bytes", "100"), ("local.retention.bytes", "-1")]).unwrap(),
            "Invalid value -1 for configuration local.retention.bytes: Value must not be -1 as \
             retention.bytes value is set as 100."
        );
        // Unlimited `retention.*` bounds nothing; -2 follows it.
        assert_eq!(
            remote(&[("retention.ms", "-1"), ("local.retention.ms", "5000")]),
            None
        );
        assert_eq!(remote(&[("local.retention.bytes", "5000")]), None);
        assert_eq!(
            remote(&[("retention.ms", "1000"), ("local.retention.ms", "1000")]),
            None
        );
        assert_eq!(
            remote(&[
                ("remote.log.copy.disable", "true"),
                ("retention.bytes", "100"),
                ("local.retention.bytes", "50"),
            ])
            .unwrap(),
            "When `remote.log.copy.disable` is set to true, the `local.retention.bytes` and \
             `retention.bytes` must be set to the identical value because there will be no more \
             logs copied to the remote storage."
        );
        assert_eq!(
            remote(&[
                ("remote.log.copy.disable", "true"),
                ("retention.ms", "1000"),
                ("local.retention.ms", "500"),
            ])
            .unwrap(),
            "When `remote.log.copy.disable` is set to true, the `local.retention.ms` and \
             `retention.ms` must be set to the identical value because there will be no more \
             logs copied to the remote storage."
        );
        assert_eq!(remote(&[("remote.log.copy.disable", "true")]), None);
    }

    /// A compacted log rolls by `max.compaction.lag.ms` when that comes
    /// first (Kafka's `maxSegmentMs`), so its head becomes cleanable in time.
    #[test]
    fn a_compacted_log_rolls_by_its_max_compaction_lag() {
        let mut c = LogConfig::default();
        c.set("max.compaction.lag.ms", "1000").unwrap();
        assert_eq!(c.max_segment_ms(), c.segment_ms, "not compacted");
        c.set("cleanup.policy", "compact").unwrap();
        assert_eq!(c.max_segment_ms(), 1000);
    }

    #[test]
    fn overrides_apply_topic_configs_and_keep_the_rest() {
        let mut m = BTreeMap::new();
        m.insert("segment.bytes".to_string(), "1048576".to_string());
        m.insert("parse.key".to_string(), "true".to_string());
        let c = LogConfig::default().with_overrides(&m).unwrap();
        assert_eq!(c.segment_bytes, 1_048_576);
        assert_eq!(c.get("parse.key"), None, "not a topic config");
    }

    #[test]
    fn properties_round_trip() {
        let mut m = BTreeMap::new();
        m.insert("segment.bytes".to_string(), "1048576".to_string());
        m.insert("key.separator".to_string(), "\\t".to_string());
        assert_eq!(parse_properties(&format_properties(&m)), m);
    }
}
