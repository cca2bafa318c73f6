//! The tree's one error type: an errno, and the log line that says what was
//! refused and why. A shell only ever shows the errno's text, so the log is
//! where a person finds the reason. Every errno the tree answers is chosen
//! here, from an error kind in one table ([`errno_of`], the README's table)
//! or by the rule that refused ([`FsError::refuse`]); the FUSE adapter logs
//! and replies in one place.

use log::Level;

use commitfs_backend::{BackendError, ErrorKind};

pub type FsResult<T> = Result<T, FsError>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FsError {
    pub errno: i32,
    /// The line to log when the error is answered; `None` for the routine
    /// misses that shells probe all the time.
    pub log: Option<(Level, String)>,
}

impl FsError {
    /// An answer with no log line.
    pub fn quiet(errno: i32) -> Self {
        FsError { errno, log: None }
    }

    /// A refusal of `what` (e.g. "write to t-0/status") because `why`.
    pub fn refuse(errno: i32, what: impl std::fmt::Display, why: impl std::fmt::Display) -> Self {
        FsError {
            errno,
            log: Some((
                Level::Warn,
                format!("refused {what}: {why} ({})", name(errno)),
            )),
        }
    }

    /// A failure of the machine while doing `what`.
    pub fn failed(errno: i32, what: impl std::fmt::Display, why: impl std::fmt::Display) -> Self {
        FsError {
            errno,
            log: Some((
                Level::Error,
                format!("{what} failed: {why} ({})", name(errno)),
            )),
        }
    }

    /// A backend's error while doing `what`: a refusal (bad input) at warn
    /// level, a failure of the machine (I/O, corruption) at error level, and
    /// a lookup of something absent at debug level.
    pub fn backend(what: impl std::fmt::Display, e: &BackendError) -> Self {
        let errno = errno_of(e.kind);
        let log = match e.kind {
            k if k.is_failure() => (
                Level::Error,
                format!("{what} failed: {e} ({})", name(errno)),
            ),
            // An offline partition's cause was logged once, when it failed.
            ErrorKind::NotFound
            | ErrorKind::OffsetOutOfRange { .. }
            | ErrorKind::NoRecord
            | ErrorKind::Offline => (Level::Debug, format!("{what}: {e}")),
            _ => (
                Level::Warn,
                format!("refused {what}: {e} ({})", name(errno)),
            ),
        };
        FsError {
            errno,
            log: Some(log),
        }
    }

    /// Logs the line, if any. Called once, where the error is answered.
    pub fn log_line(&self) {
        if let Some((level, line)) = &self.log {
            log::log!(*level, "{line}");
        }
    }
}

/// The errno of each kind of error: the tree's errno table (the README's
/// "Errors" table lists it).
pub fn errno_of(kind: ErrorKind) -> i32 {
    match kind {
        ErrorKind::NotFound | ErrorKind::OffsetOutOfRange { .. } | ErrorKind::NoRecord => {
            libc::ENOENT
        }
        ErrorKind::Exists => libc::EEXIST,
        ErrorKind::InvalidName
        | ErrorKind::InvalidPartitions
        | ErrorKind::InvalidConfig
        | ErrorKind::InvalidRecord
        | ErrorKind::KeyRequired
        | ErrorKind::Invalid
        | ErrorKind::OutOfOrderSequence
        | ErrorKind::InvalidProducerEpoch
        | ErrorKind::InvalidTxnState
        | ErrorKind::CoordinatorFenced => libc::EINVAL,
        ErrorKind::RecordTooLarge => libc::EMSGSIZE,
        ErrorKind::BatchTooLarge | ErrorKind::FileTooLarge => libc::EFBIG,
        ErrorKind::ReadOnly => libc::EROFS,
        ErrorKind::NotPermitted => libc::EPERM,
        ErrorKind::PermissionDenied => libc::EACCES,
        ErrorKind::Unsupported | ErrorKind::TransactionsNotServed => libc::EOPNOTSUPP,
        ErrorKind::Busy => libc::EBUSY,
        ErrorKind::NotEmpty => libc::ENOTEMPTY,
        ErrorKind::NoSpace => libc::ENOSPC,
        // A count the operator set, as a quota is: the disk may have room.
        ErrorKind::QuotaExceeded | ErrorKind::LimitReached => libc::EDQUOT,
        ErrorKind::TooManyOpenFiles => libc::EMFILE,
        ErrorKind::Io | ErrorKind::Corrupt | ErrorKind::Offline => libc::EIO,
        ErrorKind::TimedOut => libc::ETIMEDOUT,
    }
}

/// The symbolic name, for log lines.
pub fn name(errno: i32) -> &'static str {
    match errno {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::EIO => "EIO",
        libc::EBADF => "EBADF",
        libc::EACCES => "EACCES",
        libc::EBUSY => "EBUSY",
        libc::EEXIST => "EEXIST",
        libc::ENOTDIR => "ENOTDIR",
        libc::EISDIR => "EISDIR",
        libc::EINVAL => "EINVAL",
        libc::EFBIG => "EFBIG",
        libc::ENOSPC => "ENOSPC",
        libc::EROFS => "EROFS",
        libc::EMSGSIZE => "EMSGSIZE",
        libc::ENOTEMPTY => "ENOTEMPTY",
        libc::EDQUOT => "EDQUOT",
        libc::ENODATA => "ENODATA",
        libc::ERANGE => "ERANGE",
        libc::ETIMEDOUT => "ETIMEDOUT",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::EMFILE => "EMFILE",
        _ => "errno",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_out_of_something_keeps_its_errno() {
        let errno = |errno| {
            let e = BackendError::new(ErrorKind::of_errno(errno), "x");
            FsError::backend("x", &e).errno
        };
        assert_eq!(errno(libc::ENOSPC), libc::ENOSPC);
        assert_eq!(errno(libc::EDQUOT), libc::EDQUOT);
        assert_eq!(errno(libc::EMFILE), libc::EMFILE);
        assert_eq!(errno(libc::EIO), libc::EIO);
        assert_eq!(
            errno(libc::EACCES),
            libc::EIO,
            "a failure of the disk, not a refusal"
        );
    }

    #[test]
    fn refusals_say_what_and_why() {
        let e = FsError::refuse(libc::EACCES, "write to t-0/status", "it is read-only");
        assert_eq!(e.errno, libc::EACCES);
        assert_eq!(
            e.log,
            Some((
                Level::Warn,
                "refused write to t-0/status: it is read-only (EACCES)".to_string()
            ))
        );
    }
}
