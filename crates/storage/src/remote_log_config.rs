//! The broker's tiered storage settings (Kafka's `RemoteLogManagerConfig`,
//! KIP-405), with Kafka's names, defaults and validators. They are the
//! daemon's: set with `-o` at start.
//!
//! There is no remote store yet: the settings are taken and validated so
//! that a Kafka broker's carry over, and turning the system on is refused.
//! The topic configs of tiered storage (`remote.storage.enable`,
//! `local.retention.*`, ...) are in `storage::config`.

use crate::config::{ConfigError, parse_bool, parse_int, parse_long};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteLogManagerConfig {
    /// `remote.log.storage.system.enable`.
    pub system_enable: bool,
    /// `remote.log.manager.task.interval.ms`.
    pub task_interval_ms: i64,
    /// `remote.log.manager.copy.max.bytes.per.second`.
    pub copy_max_bytes_per_second: i64,
    /// `remote.log.manager.fetch.max.bytes.per.second`.
    pub fetch_max_bytes_per_second: i64,
    /// `remote.log.reader.threads`.
    pub reader_threads: i32,
    /// `remote.log.index.file.cache.total.size.bytes`.
    pub index_file_cache_total_size_bytes: i64,
}

impl Default for RemoteLogManagerConfig {
    fn default() -> Self {
        RemoteLogManagerConfig {
            system_enable: false,
            task_interval_ms: 30_000,
            copy_max_bytes_per_second: i64::MAX,
            fetch_max_bytes_per_second: i64::MAX,
            reader_threads: 10,
            index_file_cache_total_size_bytes: 1024 * 1024 * 1024,
        }
    }
}

/// The settings `-o` takes, in Kafka's order of definition.
pub const REMOTE_LOG_CONFIG_NAMES: &[&str] = &[
    "remote.log.storage.system.enable",
    "remote.log.index.file.cache.total.size.bytes",
    "remote.log.manager.task.interval.ms",
    "remote.log.reader.threads",
    "remote.log.manager.copy.max.bytes.per.second",
    "remote.log.manager.fetch.max.bytes.per.second",
];

/// Why `remote.log.storage.system.enable=true` is refused.
pub const NOT_AVAILABLE: &str = "remote.log.storage.system.enable=true: tiered storage \
     (KIP-405) is not available in this version of commitfs; its configs are accepted and \
     validated, but the remote storage system cannot be turned on";

impl RemoteLogManagerConfig {
    /// Validates and applies one setting; `Ok(false)` for a name that is
    /// not one of [`REMOTE_LOG_CONFIG_NAMES`].
    pub fn set(&mut self, name: &str, value: &str) -> Result<bool, ConfigError> {
        match name {
            "remote.log.storage.system.enable" => self.system_enable = parse_bool(name, value)?,
            "remote.log.index.file.cache.total.size.bytes" => {
                self.index_file_cache_total_size_bytes = parse_long(name, value, 1)?
            }
            "remote.log.manager.task.interval.ms" => {
                self.task_interval_ms = parse_long(name, value, 1)?
            }
            "remote.log.reader.threads" => self.reader_threads = parse_int(name, value, 1)?,
            "remote.log.manager.copy.max.bytes.per.second" => {
                self.copy_max_bytes_per_second = parse_long(name, value, 1)?
            }
            "remote.log.manager.fetch.max.bytes.per.second" => {
                self.fetch_max_bytes_per_second = parse_long(name, value, 1)?
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    pub fn get(&self, name: &str) -> Option<String> {
        Some(match name {
            "remote.log.storage.system.enable" => self.system_enable.to_string(),
            "remote.log.index.file.cache.total.size.bytes" => {
                self.index_file_cache_total_size_bytes.to_string()
            }
            "remote.log.manager.task.interval.ms" => self.task_interval_ms.to_string(),
            "remote.log.reader.threads" => self.reader_threads.to_string(),
            "remote.log.manager.copy.max.bytes.per.second" => {
                self.copy_max_bytes_per_second.to_string()
            }
            "remote.log.manager.fetch.max.bytes.per.second" => {
                self.fetch_max_bytes_per_second.to_string()
            }
            _ => return None,
        })
    }

    /// Refuses what this version cannot do: a remote storage system.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.system_enable {
            return Err(ConfigError::Conflict(NOT_AVAILABLE.to_string()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_defaults_and_refusals() {
        let c = RemoteLogManagerConfig::default();
        for (name, want) in [
            ("remote.log.storage.system.enable", "false"),
            ("remote.log.index.file.cache.total.size.bytes", "1073741824"),
            ("remote.log.manager.task.interval.ms", "30000"),
            ("remote.log.reader.threads", "10"),
            (
                "remote.log.manager.copy.max.bytes.per.second",
                "9223372036854775807",
            ),
            (
                "remote.log.manager.fetch.max.bytes.per.second",
                "9223372036854775807",
            ),
        ] {
            assert_eq!(c.get(name).unwrap(), want, "{name}");
        }
        c.validate().unwrap();
        let mut c = RemoteLogManagerConfig::default();
        for name in REMOTE_LOG_CONFIG_NAMES.iter().skip(1) {
            assert_eq!(
                c.set(name, "0").unwrap_err().to_string(),
                format!("Invalid value 0 for configuration {name}: Value must be at least 1")
            );
            assert!(c.set(name, "1").unwrap(), "{name}");
            assert_eq!(c.get(name).unwrap(), "1", "{name}");
        }
        assert!(c.set("remote.log.reader.threads", "2147483648").is_err());
        assert!(!c.set("log.cleaner.backoff.ms", "1").unwrap());
        assert_eq!(
            c.set("remote.log.storage.system.enable", "on")
                .unwrap_err()
                .to_string(),
            "Invalid value on for configuration remote.log.storage.system.enable: Expected \
             value to be either true or false"
        );
        c.set("remote.log.storage.system.enable", "false").unwrap();
        c.validate().unwrap();
    }

    /// There is no remote store to turn on: refused, in words that say so.
    #[test]
    fn the_remote_storage_system_cannot_be_turned_on() {
        let mut c = RemoteLogManagerConfig::default();
        assert!(c.set("remote.log.storage.system.enable", "TRUE").unwrap());
        let e = c.validate().unwrap_err().to_string();
        assert!(
            e.contains("tiered storage (KIP-405) is not available"),
            "{e}"
        );
    }
}
