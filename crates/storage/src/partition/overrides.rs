//! A partition's config: the mount-wide defaults, the partition's own
//! overrides (persisted in its directory, in Java properties format), and
//! the effective config that every append, roll and retention pass reads.
//!
//! The same file keeps the partition's *properties*: settings that are not
//! topic configs but belong to a face above storage (the tree's line
//! format). Storage keeps them with the overrides and never interprets them.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::sync::Arc;

use log::{info, warn};
use parking_lot::{Mutex, RwLock};

use super::PartitionLog;
use crate::checkpoint::write_atomically;
use crate::config::{ConfigError, LogConfig, format_properties, is_config_name, parse_properties};
use crate::error::{Result, StorageError};

/// Per-partition config overrides, in Java properties format.
pub const PROPERTIES_FILE: &str = "commitfs.properties";

pub(super) struct PartitionConfig {
    defaults: LogConfig,
    /// The defaults with the overrides applied; swapped whole, so a reader
    /// keeps a consistent config for as long as it holds it.
    effective: RwLock<Arc<LogConfig>>,
    overrides: Mutex<BTreeMap<String, String>>,
}

impl PartitionConfig {
    /// A new partition's: the defaults, no overrides.
    pub fn defaults(defaults: &LogConfig) -> PartitionConfig {
        PartitionConfig {
            defaults: defaults.clone(),
            effective: RwLock::new(Arc::new(defaults.clone())),
            overrides: Mutex::new(BTreeMap::new()),
        }
    }

    /// The config of the partition `name` in `dir`: each persisted override
    /// that is still valid applied; a bad one is logged and skipped.
    pub fn load(dir: &Path, defaults: &LogConfig, name: &str) -> PartitionConfig {
        let overrides: BTreeMap<String, String> = fs::read_to_string(dir.join(PROPERTIES_FILE))
            .map(|t| parse_properties(&t))
            .unwrap_or_default();
        let mut config = defaults.clone();
        for (k, v) in overrides.iter().filter(|(k, _)| is_config_name(k)) {
            if let Err(e) = config.set(k, v) {
                warn!("Ignoring config override of partition {name}: {e}");
            }
        }
        // Kafka refuses to start with such a topic in its store (a topic
        // with remote storage when the system is off, say); one partition's
        // file does not stop the whole directory here, but the log says why
        // its next config change will be refused.
        if let Err(e) = config.validate() {
            warn!("Config overrides of partition {name} do not hold together: {e}");
        }
        PartitionConfig {
            defaults: defaults.clone(),
            effective: RwLock::new(Arc::new(config)),
            overrides: Mutex::new(overrides),
        }
    }

    pub fn current(&self) -> Arc<LogConfig> {
        self.effective.read().clone()
    }

    /// Validates `overrides`, persists them in `dir`, then applies them.
    fn replace_overrides(&self, dir: &Path, overrides: BTreeMap<String, String>) -> Result<()> {
        let config = self.defaults.with_overrides(&overrides)?;
        let path = dir.join(PROPERTIES_FILE);
        write_atomically(&path, format_properties(&overrides).as_bytes())?;
        *self.overrides.lock() = overrides;
        *self.effective.write() = Arc::new(config);
        Ok(())
    }
}

impl PartitionLog {
    pub fn config(&self) -> Arc<LogConfig> {
        self.config.current()
    }

    /// The per-partition overrides (persisted in the partition directory).
    pub fn overrides(&self) -> BTreeMap<String, String> {
        self.config.overrides.lock().clone()
    }

    /// Validates, applies and persists one override.
    pub fn set_config(&self, name: &str, value: &str) -> Result<()> {
        if !is_config_name(name) {
            return Err(ConfigError::UnknownName(name.to_string()).into());
        }
        self.set_override(name, value)
    }

    /// Keeps a property of a face above storage (not a topic config) with
    /// the overrides: persisted, never validated here. Refused for the name
    /// of a topic config, which only [`PartitionLog::set_config`] sets.
    pub fn set_property(&self, name: &str, value: &str) -> Result<()> {
        if is_config_name(name) {
            return Err(ConfigError::InvalidValue {
                name: name.to_string(),
                value: value.to_string(),
                reason: "a topic config is not a property".to_string(),
            }
            .into());
        }
        self.set_override(name, value)
    }

    /// `NoSuchPartition` once the partition is deleted (its handles outlive
    /// it), `Offline` once it failed: what a change would be refused with,
    /// for a caller to learn before it validates a value of its own.
    pub fn check_live(&self) -> Result<()> {
        self.check_online()?;
        if self.local.is_deleted() {
            return Err(StorageError::NoSuchPartition(self.name().to_string()));
        }
        Ok(())
    }

    fn set_override(&self, name: &str, value: &str) -> Result<()> {
        if !self.local.writable() {
            return Err(StorageError::ReadOnly);
        }
        let value = value.trim_end_matches(['\n', '\r']);
        self.health.guard("a config change", || {
            // Its directory may by now be a new partition's of the same name.
            let _w = self.local.writer()?;
            let mut overrides = self.overrides();
            overrides.insert(name.to_string(), value.to_string());
            self.config.replace_overrides(self.local.dir(), overrides)?;
            info!(
                "Updated config {name}={value} for partition {}",
                self.name()
            );
            Ok(())
        })
    }

    /// Sets (`Some`) and removes (`None`) several overrides as one change:
    /// all of them or none, judged together (Kafka's `validateValues`), as
    /// an IncrementalAlterConfigs or a CreateTopics gives them.
    pub fn alter_configs(&self, changes: &[(&str, Option<&str>)]) -> Result<()> {
        if !self.local.writable() {
            return Err(StorageError::ReadOnly);
        }
        for (name, _) in changes {
            if !is_config_name(name) {
                return Err(ConfigError::UnknownName(name.to_string()).into());
            }
        }
        self.health.guard("a config change", || {
            // Its directory may by now be a new partition's of the same name.
            let _w = self.local.writer()?;
            let mut overrides = self.overrides();
            for (name, value) in changes {
                match value {
                    Some(v) => {
                        let v = v.trim_end_matches(['\n', '\r']);
                        overrides.insert(name.to_string(), v.to_string())
                    }
                    None => overrides.remove(*name),
                };
            }
            self.config.replace_overrides(self.local.dir(), overrides)?;
            info!(
                "Updated {} configs of partition {}",
                changes.len(),
                self.name()
            );
            Ok(())
        })
    }

    /// Removes an override, so the mount-wide default applies again.
    pub fn reset_config(&self, name: &str) -> Result<()> {
        if !self.local.writable() {
            return Err(StorageError::ReadOnly);
        }
        self.health.guard("a config change", || {
            if self.config.defaults.get(name).is_none() {
                return Err(ConfigError::UnknownName(name.to_string()).into());
            }
            // Its directory may by now be a new partition's of the same name.
            let _w = self.local.writer()?;
            let mut overrides = self.overrides();
            if overrides.remove(name).is_none() {
                return Ok(());
            }
            self.config.replace_overrides(self.local.dir(), overrides)?;
            info!(
                "Removed config override {name} for partition {}",
                self.name()
            );
            Ok(())
        })
    }
}
