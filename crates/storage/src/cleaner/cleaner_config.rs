//! The broker's log cleaner settings (Kafka's `CleanerConfig`), with
//! Kafka's names, defaults and validators. They are the daemon's: set with
//! `-o` at start, one set for the whole data directory.
//!
//! The topic configs the cleaner reads per partition (`cleanup.policy`,
//! `min.cleanable.dirty.ratio`, the compaction lags, `delete.retention.ms`)
//! are in `storage::config`; their broker synonyms (`log.cleanup.policy`,
//! `log.cleaner.min.cleanable.ratio`, ...) set those topic defaults.

use super::read_ahead::Sharing;
use crate::config::{ConfigError, invalid, java_double, parse_int, parse_long};

/// Kafka's `KafkaConfig` check: each thread's share of the dedupe buffer
/// must be over 1 MiB.
const MIN_DEDUPE_PER_THREAD: i64 = 1024 * 1024;

#[derive(Clone, Debug, PartialEq)]
pub struct CleanerConfig {
    /// `log.cleaner.enable`: without it no cleaner runs, and compacted
    /// logs are neither cleaned nor subject to retention (Kafka's rule).
    pub enable: bool,
    /// `log.cleaner.threads`.
    pub threads: i32,
    /// `log.cleaner.dedupe.buffer.size`, shared by the threads.
    pub dedupe_buffer_size: i64,
    /// `log.cleaner.io.buffer.load.factor`: how full an offset map may get.
    pub dedupe_buffer_load_factor: f64,
    /// `log.cleaner.io.buffer.size`: read and write buffers of all threads.
    pub io_buffer_size: i32,
    /// `log.cleaner.io.max.bytes.per.second`, read and write together.
    pub io_max_bytes_per_second: f64,
    /// `log.cleaner.backoff.ms`: the sleep when no log needs cleaning.
    pub backoff_ms: i64,
    /// `message.max.bytes`: how far the I/O buffers may grow.
    pub max_message_size: i32,
    /// Not Kafka's: which of a pass's two threads filters a segment's
    /// chunks. Tests pin it; the default suits a daemon.
    pub sharing: Sharing,
}

impl Default for CleanerConfig {
    fn default() -> Self {
        CleanerConfig {
            enable: true,
            threads: 1,
            dedupe_buffer_size: 128 * 1024 * 1024,
            dedupe_buffer_load_factor: 0.9,
            io_buffer_size: 512 * 1024,
            io_max_bytes_per_second: f64::MAX,
            backoff_ms: 15_000,
            max_message_size: 1024 * 1024 + 12,
            sharing: Sharing::default(),
        }
    }
}

/// The settings `-o` takes, in the order the broker's DescribeConfigs lists them.
pub const CLEANER_CONFIG_NAMES: &[&str] = &[
    "log.cleaner.enable",
    "log.cleaner.threads",
    "log.cleaner.dedupe.buffer.size",
    "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.buffer.size",
    "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.backoff.ms",
];

/// Broker names of topic configs (Kafka's `ServerTopicConfigSynonyms`):
/// `-o` with one of them sets the topic default.
pub const TOPIC_SYNONYMS: &[(&str, &str)] = &[
    ("log.cleanup.policy", "cleanup.policy"),
    (
        "log.cleaner.min.cleanable.ratio",
        "min.cleanable.dirty.ratio",
    ),
    ("log.cleaner.min.compaction.lag.ms", "min.compaction.lag.ms"),
    ("log.cleaner.max.compaction.lag.ms", "max.compaction.lag.ms"),
    ("log.cleaner.delete.retention.ms", "delete.retention.ms"),
    ("log.local.retention.ms", "local.retention.ms"),
    ("log.local.retention.bytes", "local.retention.bytes"),
];

fn double(name: &str, value: &str) -> Result<f64, ConfigError> {
    value.trim().parse().map_err(|_| {
        invalid(
            name,
            value,
            "Expected value to be a double, but it was a java.lang.String",
        )
    })
}

impl CleanerConfig {
    /// Validates and applies one setting; `Ok(false)` for a name that is
    /// not one of [`CLEANER_CONFIG_NAMES`].
    pub fn set(&mut self, name: &str, value: &str) -> Result<bool, ConfigError> {
        match name {
            "log.cleaner.enable" => {
                self.enable = match value.trim().to_lowercase().as_str() {
                    "true" => true,
                    "false" => false,
                    _ => {
                        return Err(invalid(
                            name,
                            value,
                            "Expected value to be either true or false",
                        ));
                    }
                }
            }
            "log.cleaner.threads" => self.threads = parse_int(name, value, 0)?,
            "log.cleaner.dedupe.buffer.size" => {
                self.dedupe_buffer_size = parse_long(name, value, i64::MIN)?
            }
            "log.cleaner.io.buffer.load.factor" => {
                self.dedupe_buffer_load_factor = double(name, value)?
            }
            "log.cleaner.io.buffer.size" => self.io_buffer_size = parse_int(name, value, 0)?,
            "log.cleaner.io.max.bytes.per.second" => {
                self.io_max_bytes_per_second = double(name, value)?
            }
            "log.cleaner.backoff.ms" => self.backoff_ms = parse_long(name, value, 0)?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    pub fn get(&self, name: &str) -> Option<String> {
        Some(match name {
            "log.cleaner.enable" => self.enable.to_string(),
            "log.cleaner.threads" => self.threads.to_string(),
            "log.cleaner.dedupe.buffer.size" => self.dedupe_buffer_size.to_string(),
            "log.cleaner.io.buffer.load.factor" => java_double(self.dedupe_buffer_load_factor),
            "log.cleaner.io.buffer.size" => self.io_buffer_size.to_string(),
            "log.cleaner.io.max.bytes.per.second" => java_double(self.io_max_bytes_per_second),
            "log.cleaner.backoff.ms" => self.backoff_ms.to_string(),
            _ => return None,
        })
    }

    /// What no single value shows: Kafka's `KafkaConfig` check of the
    /// dedupe buffer per thread, and the `Cleaner` constructor's check
    /// that the offset map holds at least one key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !self.enable || self.threads == 0 {
            return Ok(());
        }
        if self.dedupe_buffer_size / self.threads as i64 <= MIN_DEDUPE_PER_THREAD {
            return Err(ConfigError::Conflict(
                "log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner thread."
                    .to_string(),
            ));
        }
        let slots = self.map_memory() / super::offset_map::BYTES_PER_ENTRY;
        if slots as f64 * self.dedupe_buffer_load_factor <= 1.0 {
            return Err(ConfigError::Conflict(
                "offset map is too small to fit in even a single message, so log cleaning will never make progress. You can increase log.cleaner.dedupe.buffer.size or decrease log.cleaner.threads".to_string(),
            ));
        }
        Ok(())
    }

    /// One thread's offset map: its share of the dedupe buffer, at most
    /// 2 GiB (Kafka's `Int.MaxValue` cap).
    pub fn map_memory(&self) -> usize {
        let share = self.dedupe_buffer_size / (self.threads.max(1) as i64);
        share.clamp(0, i32::MAX as i64) as usize
    }

    /// One thread's read (and write) buffer: `io.buffer.size / threads / 2`.
    pub fn io_buffer_per_thread(&self) -> usize {
        (self.io_buffer_size.max(0) as usize / self.threads.max(1) as usize / 2).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_defaults_and_refusals() {
        let c = CleanerConfig::default();
        assert_eq!(c.get("log.cleaner.backoff.ms").unwrap(), "15000");
        assert_eq!(
            c.get("log.cleaner.dedupe.buffer.size").unwrap(),
            "134217728"
        );
        assert_eq!(c.get("log.cleaner.io.buffer.load.factor").unwrap(), "0.9");
        assert_eq!(
            c.get("log.cleaner.io.max.bytes.per.second").unwrap(),
            "1.7976931348623157E308"
        );
        assert_eq!(c.map_memory() / 24, 5_592_405);
        assert_eq!(c.io_buffer_per_thread(), 262_144);
        c.validate().unwrap();
        for name in CLEANER_CONFIG_NAMES {
            let mut d = CleanerConfig::default();
            assert!(d.set(name, &c.get(name).unwrap()).unwrap(), "{name}");
            assert_eq!(d, c, "{name} round-trips");
        }
        let mut c = CleanerConfig::default();
        assert_eq!(
            c.set("log.cleaner.backoff.ms", "-1")
                .unwrap_err()
                .to_string(),
            "Invalid value -1 for configuration log.cleaner.backoff.ms: Value must be at least 0"
        );
        assert!(!c.set("log.retention.ms", "1").unwrap());
        c.set("log.cleaner.dedupe.buffer.size", "1048576").unwrap();
        assert_eq!(
            c.validate().unwrap_err().to_string(),
            "log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner thread."
        );
        c.set("log.cleaner.dedupe.buffer.size", "4194304").unwrap();
        c.set("log.cleaner.threads", "4").unwrap();
        assert!(c.validate().is_err(), "1 MiB per thread is not over 1 MiB");
        c.set("log.cleaner.threads", "2").unwrap();
        c.validate().unwrap();
    }
}
