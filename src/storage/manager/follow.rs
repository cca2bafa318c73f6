//! Read-only mounts of a directory another process writes (a running
//! broker's `log.dir`): the data directory's side of following it.
//! Partitions the broker creates appear, those it deletes go, and the
//! checkpoints it rewrites are read again. Each partition follows its own
//! directory (`local_log/follow.rs`). A child of the manager's module, so
//! that the manager's state stays private to the two.
//!
//! Everything is learned on access, from the mtime of a directory: a
//! `stat` per look while nothing changes. Kafka creates, renames and
//! deletes names (a checkpoint is a `.tmp` renamed over the old file), and
//! each of those moves the directory's mtime.

use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use log::{info, warn};

use super::{CLEAN_SHUTDOWN_FILE, LogManager};
use crate::storage::names::parse_partition_name;
use crate::storage::partition::{Followed, PartitionLog};
use crate::storage::{Result, StorageError};

/// A directory timestamp may be coarse (a jiffy, or a second on some
/// filesystems): a change made in the same tick as a listing leaves the
/// mtime where the listing saw it. Until a listing has run this long after
/// the mtime it saw, the directory is listed again now and then.
const SETTLE: Duration = Duration::from_secs(2);
/// How often an unsettled directory is listed again.
const RECHECK: Duration = Duration::from_millis(100);

/// What a directory looked like when it was last listed.
#[derive(Debug)]
pub(crate) struct DirWatch {
    /// The mtime seen just before the last listing.
    seen: Option<SystemTime>,
    /// When that listing started (the wall clock, as mtimes are).
    listed_at: SystemTime,
    checked: Option<Instant>,
}

impl Default for DirWatch {
    fn default() -> Self {
        DirWatch {
            seen: None,
            listed_at: SystemTime::UNIX_EPOCH,
            checked: None,
        }
    }
}

impl DirWatch {
    /// Whether the directory, whose mtime is now `mtime`, must be listed again.
    pub fn must_list(&mut self, mtime: SystemTime) -> bool {
        let Some(seen) = self.seen else {
            return true;
        };
        if seen != mtime {
            return true;
        }
        let settled = self.listed_at >= seen + SETTLE;
        let now = Instant::now();
        if settled || self.checked.is_some_and(|c| now < c + RECHECK) {
            return false;
        }
        self.checked = Some(now);
        true
    }

    /// A listing that started at `at`, when the mtime was `mtime`.
    pub fn listed(&mut self, mtime: SystemTime, at: SystemTime) {
        self.seen = Some(mtime);
        self.listed_at = at;
        self.checked = Some(Instant::now());
    }

    /// The next look lists the directory whatever its mtime.
    pub fn forget(&mut self) {
        self.seen = None;
    }
}

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
