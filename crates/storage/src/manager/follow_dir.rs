//! Read-only mounts of a directory another process writes (a running
//! broker's `log.dir`): the data directory's side of following it.
//! Partitions the broker creates appear, those it deletes go, and the
//! checkpoints it rewrites are read again. Each partition follows its own
//! directory (`local_log/follow_log.rs`). A child of the manager's module, so
//! that the manager's state stays private to the two.
//!
//! Everything is learned on access, from the mtime of a directory: a
//! `stat` per look while nothing changes. Kafka creates, renames and
//! deletes names (a checkpoint is a `.tmp` renamed over the old file), and
//! each of those moves the directory's mtime.

use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use log::{info, warn};

use super::{CLEAN_SHUTDOWN_FILE, LogManager};
use crate::names::parse_partition_name;
use crate::partition::{Followed, PartitionLog};
use crate::{Result, StorageError};

/// The data directory's mtime, or `None` if it cannot be read now.
pub(crate) fn mtime(path: &Path) -> Option<SystemTime> {
    fs::metadata(path).and_then(|m| m.modified()).ok()
}

impl LogManager {
    /// Read-only: brings the set of partitions and the checkpoints up to
    /// what the directory holds now. A stat of the directory when nothing
    /// changed.
    pub(crate) fn follow_root(&self) {
        let mut watch = self.root_watch.lock();
        let Some(mtime) = mtime(&self.dir) else {
            return;
        };
        if !watch.must_list(mtime) {
            return;
        }
        let started = SystemTime::now();
        self.checkpoints.reload();
        match self.reconcile_partitions() {
            Ok(()) => watch.listed(mtime, started),
            Err(e) => {
                warn!("Could not follow {}: {e}", self.dir.display());
                watch.forget();
            }
        }
    }

    /// Loads partitions whose directory appeared, drops those whose
    /// directory went. A partition that cannot be loaded yet (its directory
    /// half made) is tried again at a later look.
    fn reconcile_partitions(&self) -> Result<()> {
        let mut present = Vec::new();
        for entry in fs::read_dir(&self.dir).map_err(|e| StorageError::io(&self.dir, e))? {
            let Ok(entry) = entry else { continue };
            let Some(name) = entry.file_name().to_str().map(str::to_string) else {
                continue;
            };
            if parse_partition_name(&name).is_ok() && entry.file_type().is_ok_and(|t| t.is_dir()) {
                present.push(name);
            }
        }
        present.sort();
        let known: Vec<String> = self.partitions.read().keys().cloned().collect();
        for name in known.iter().filter(|n| present.binary_search(n).is_err()) {
            self.forget_partition(name);
        }
        let clean = self.dir.join(CLEAN_SHUTDOWN_FILE).exists();
        let mut failed = None;
        for name in present.iter().filter(|n| known.binary_search(n).is_err()) {
            match PartitionLog::load(&self.dir.join(name), &self.load_context(clean)) {
                Ok(log) => {
                    info!("Partition {name} appeared in {}", self.dir.display());
                    self.partitions.write().insert(name.clone(), log);
                }
                Err(e) => failed = Some(e),
            }
        }
        failed.map_or(Ok(()), Err)
    }

    /// A partition whose directory is gone: it leaves the tree.
    fn forget_partition(&self, name: &str) {
        if let Some(log) = self.partitions.write().remove(name) {
            log.mark_deleted();
            info!("Partition {name} is gone from {}", self.dir.display());
        }
    }

    /// Read-only: the partition, followed up to what its directory holds
    /// now, or `None` if its directory is gone.
    pub(crate) fn followed_partition(&self, name: &str) -> Option<Arc<PartitionLog>> {
        self.follow_root();
        let log = self.partitions.read().get(name).cloned()?;
        match log.follow() {
            Ok(Followed::Live) => Some(log),
            Ok(Followed::Vanished) => {
                let mut parts = self.partitions.write();
                // Not a partition of the same name that appeared since.
                if parts.get(name).is_some_and(|p| Arc::ptr_eq(p, &log)) {
                    parts.remove(name);
                    log.mark_deleted();
                    info!("Partition {name} is gone from {}", self.dir.display());
                }
                None
            }
            Err(e) => {
                // What was published stays good; the next look tries again.
                warn!("Could not follow partition {name}: {e}");
                Some(log)
            }
        }
    }
}
