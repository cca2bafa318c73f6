//! Fail-stop, per partition, as Kafka's `LogDirFailureChannel` does it for a
//! log dir: after an I/O failure on a write path (a write, fsync, rename,
//! truncate, index or checkpoint write, or an undo of any of these) or a
//! panic on one, what the partition holds in memory may no longer match its
//! files. So it stops: every later operation on it is refused with
//! [`StorageError::Offline`] (EIO at the mount), nothing more is written to
//! it, and the cause is logged once. Other partitions carry on. A remount
//! finds no clean-shutdown marker and recovers it as after a crash.
//!
//! A refusal ([`StorageError::is_refusal`]: bad input, or a full disk met by
//! a call that allocates and then undone) leaves the files as they were and
//! does not stop the partition.
//!
//! [`Health::enter`] is the one way into a write path, whoever calls it
//! ([`Health::guard`] runs a closure as one); [`Health::fail`] the one
//! place a failure takes the partition offline.

use std::fmt::Display;
use std::sync::OnceLock;

use log::error;

use super::error::{Result, StorageError};

pub(crate) struct Health {
    partition: String,
    /// What took the partition offline; set once.
    cause: OnceLock<String>,
}

impl Health {
    pub fn new(partition: &str) -> Health {
        Health {
            partition: partition.to_string(),
            cause: OnceLock::new(),
        }
    }

    /// What took the partition offline, if it is.
    pub fn cause(&self) -> Option<&str> {
        self.cause.get().map(String::as_str)
    }

    /// `Offline` once the partition is offline.
    pub fn check(&self) -> Result<()> {
        match self.cause.get() {
            None => Ok(()),
            Some(cause) => Err(StorageError::Offline {
                partition: self.partition.clone(),
                cause: cause.clone(),
            }),
        }
    }

    /// Takes the partition offline, naming what failed during what. Only
    /// the first cause is kept and logged.
    pub fn fail(&self, during: &str, cause: &dyn Display) {
        let text = format!("{during} failed: {cause}");
        if self.cause.set(text).is_ok() {
            error!(
                "Stopping serving partition {}: {during} failed: {cause}. Every operation on it \
                 fails with EIO until a remount recovers it",
                self.partition
            );
        }
    }

    /// Passes `r` on; an error that is not a refusal takes the partition offline.
    pub fn judge<T>(&self, during: &str, r: Result<T>) -> Result<T> {
        if let Err(e) = &r
            && !e.is_refusal()
        {
            self.fail(during, e);
        }
        r
    }

    /// Enters a write path: refused while offline. A panic before the
    /// returned [`WritePath`] is finished takes the partition offline.
    pub fn enter(&self, during: &'static str) -> Result<WritePath<'_>> {
        self.check()?;
        Ok(WritePath {
            health: self,
            during,
        })
    }

    /// Runs a write path: refused while offline; an error that is not a
    /// refusal, or a panic, takes the partition offline.
    pub fn guard<T>(&self, during: &'static str, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let path = self.enter(during)?;
        path.finish(f())
    }
}

/// A write path under way. Dropped by a panic, it takes the partition
/// offline: a panic between a segment write and its publish or undo leaves
/// unpublished bytes behind an advanced write position, which the next
/// append would publish.
pub(crate) struct WritePath<'a> {
    health: &'a Health,
    during: &'static str,
}

impl WritePath<'_> {
    /// The write path's result, passed on; an error that is not a refusal
    /// takes the partition offline.
    pub fn finish<T>(self, r: Result<T>) -> Result<T> {
        let (health, during) = (self.health, self.during);
        std::mem::forget(self);
        health.judge(during, r)
    }
}

impl Drop for WritePath<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.health
                .fail(self.during, &"a panic (see the panic message)");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_failure_takes_it_offline_for_good() {
        let h = Health::new("t-0");
        let refused: Result<()> = h.guard("append", || Err(StorageError::EmptyAppend));
        assert!(refused.is_err());
        assert!(h.check().is_ok(), "a refusal does not stop the partition");
        let eio = std::io::Error::from_raw_os_error(libc::EIO);
        let failed: Result<()> = h.guard("flush", || Err(StorageError::io("/x", eio)));
        assert!(failed.is_err());
        let eio = std::io::Error::from_raw_os_error(libc::EIO);
        h.fail("roll", &StorageError::io("/y", eio));
        assert_eq!(
            h.cause(),
            Some("flush failed: I/O error on /x: Input/output error (os error 5)")
        );
        let e = h.guard("append", || Ok(())).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EIO));
    }

    #[test]
    fn a_panic_on_a_write_path_takes_it_offline() {
        let h = Health::new("t-0");
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _: Result<()> = h.guard("append", || panic!("between write and publish"));
        }));
        assert!(r.is_err());
        assert!(h.cause().unwrap().starts_with("append failed: a panic"));
        assert!(matches!(h.check(), Err(StorageError::Offline { .. })));
    }
}
