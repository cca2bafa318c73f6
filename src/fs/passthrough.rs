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

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use fuser::BackingId;
use log::warn;
use parking_lot::Mutex;

use super::errno::FsResult;

#[derive(Default)]
pub struct Passthrough {
    enabled: AtomicBool,
    inodes: Mutex<HashMap<u64, Slot>>,
}

#[derive(Default)]
struct Slot {
    backing: Weak<BackingId>,
    /// Handles of this inode open in cached mode.
    cached: usize,
}

/// How one open of a raw file is served.
pub enum Mode {
    /// The kernel reads the backing file; the handle keeps the id registered.
    Passthrough(Arc<BackingId>),
    /// Reads come to the daemon (positioned reads through storage).
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
    /// registers its backing file with the kernel: the outer error is the
    /// open's failure (the file is gone), the inner one means "no passthrough".
    pub fn open(
        &self,
        ino: u64,
        want: bool,
        create: impl FnOnce() -> FsResult<std::io::Result<BackingId>>,
    ) -> FsResult<Mode> {
        let mut inodes = self.inodes.lock();
        let slot = inodes.entry(ino).or_default();
        if let Some(id) = slot.backing.upgrade() {
            return Ok(Mode::Passthrough(id));
        }
        if slot.cached == 0 && want && self.enabled() {
            match create() {
                Ok(Ok(id)) => {
                    let id = Arc::new(id);
                    slot.backing = Arc::downgrade(&id);
                    return Ok(Mode::Passthrough(id));
                }
                Ok(Err(e)) => {
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
                Err(e) => {
                    if slot.cached == 0 && slot.backing.strong_count() == 0 {
                        inodes.remove(&ino);
                    }
                    return Err(e);
                }
            }
        }
        slot.cached += 1;
        Ok(Mode::Cached)
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
        if s.cached == 0 && s.backing.strong_count() == 0 {
            inodes.remove(&ino);
        }
    }
}
