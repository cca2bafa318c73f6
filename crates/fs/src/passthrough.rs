//! FUSE passthrough of raw segment files: the kernel reads the backing file
//! itself (Linux ≥ 6.9, a privileged daemon), so `cat`, `cp` and `mmap` of a
//! sealed `.log` or an index run at the backing filesystem's speed with no
//! request reaching the daemon.
//!
//! The kernel wants one backing file per inode while any handle of it is open
//! in passthrough mode, and refuses (EIO at open) an inode open in both cached
//! and passthrough mode at once. So each inode's mode is fixed by its first
//! open and kept while handles are open: a `.log` opened cached while active
//! stays cached for new opens until those handles close, even after a roll.
//!
//! Registering a backing file is the kernel's business: it sits behind
//! [`BackingFiles`], so that the tree can be driven without one.

use std::any::Any;
use std::collections::HashMap;
use std::fs::File;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use log::warn;
use parking_lot::Mutex;

use super::error::FsResult;

/// A registered backing file; it stays registered while a clone is alive.
/// The FUSE adapter keeps the kernel's backing id in it.
pub type Backing = Arc<dyn Any + Send + Sync>;

/// Registers files with the kernel for passthrough.
pub trait BackingFiles {
    fn register(&self, file: &File) -> std::io::Result<Backing>;
}

/// For callers without a kernel: every registration fails, so every open is
/// served by the daemon.
pub struct NoPassthrough;

impl BackingFiles for NoPassthrough {
    fn register(&self, _file: &File) -> std::io::Result<Backing> {
        Err(std::io::Error::from_raw_os_error(libc::EOPNOTSUPP))
    }
}

#[derive(Default)]
pub struct Passthrough {
    enabled: AtomicBool,
    inodes: Mutex<HashMap<u64, Slot>>,
}

#[derive(Default)]
struct Slot {
    backing: Option<Weak<dyn Any + Send + Sync>>,
    /// Handles of this inode open in cached mode.
    cached: usize,
}

impl Slot {
    fn live(&self) -> Option<Backing> {
        self.backing.as_ref().and_then(Weak::upgrade)
    }
}

/// How one open of a raw file is served.
pub enum Mode {
    /// The kernel reads the backing file; the handle keeps it registered.
    Passthrough(Backing),
    /// Reads come to the daemon (positioned reads through the backend).
    Cached,
}

impl Passthrough {
    pub fn enable(&self) {
        self.enabled.store(true, Ordering::Relaxed);
    }

    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    /// The mode of a new open of `ino`. `want` says whether the file may be
    /// passed through (immutable, or changed only in place); `create`
    /// registers its backing file: the outer error is the open's failure
    /// (the file is gone), the inner one means "no passthrough".
    pub fn open(
        &self,
        ino: u64,
        want: bool,
        create: impl FnOnce() -> FsResult<std::io::Result<Backing>>,
    ) -> FsResult<Mode> {
        let mut inodes = self.inodes.lock();
        let slot = inodes.entry(ino).or_default();
        if let Some(id) = slot.live() {
            return Ok(Mode::Passthrough(id));
        }
        if slot.cached == 0 && want && self.enabled() {
            match create() {
                Ok(Ok(id)) => {
                    slot.backing = Some(Arc::downgrade(&id));
                    return Ok(Mode::Passthrough(id));
                }
                Ok(Err(e)) => self.failed(&e),
                Err(e) => {
                    if slot.cached == 0 && slot.live().is_none() {
                        inodes.remove(&ino);
                    }
                    return Err(e);
                }
            }
        }
        slot.cached += 1;
        Ok(Mode::Cached)
    }

    fn failed(&self, e: &std::io::Error) {
        let permanent = matches!(
            e.raw_os_error(),
            Some(
                libc::EPERM
                    | libc::EACCES
                    | libc::ENOTTY
                    | libc::EINVAL
                    | libc::EOPNOTSUPP
                    | libc::ENOSYS
                    | libc::ELOOP
            )
        );
        if permanent {
            self.enabled.store(false, Ordering::Relaxed);
            warn!(
                "FUSE passthrough is unavailable ({e}): raw files are served by the daemon from now on"
            );
        } else {
            warn!("FUSE passthrough of one open failed ({e}): served by the daemon");
        }
    }

    /// The close of a handle opened in `mode`.
    pub fn release(&self, ino: u64, mode: Mode) {
        let mut inodes = self.inodes.lock();
        let Some(s) = inodes.get_mut(&ino) else {
            return;
        };
        match mode {
            // Dropped under the lock, so that an open racing with this
            // release either reuses the id or finds it gone, never half-closed.
            Mode::Passthrough(id) => drop(id),
            Mode::Cached => s.cached = s.cached.saturating_sub(1),
        }
        if s.cached == 0 && s.live().is_none() {
            inodes.remove(&ino);
        }
    }
}
