//! Storage errors and refusals as errno, each with one log line that says what
//! was refused and why: a shell only ever shows the errno's text, so the log is
//! where a person finds the reason.

use fuser::Errno;

use crate::storage::StorageError;

pub type FsResult<T> = Result<T, Errno>;

/// The symbolic name, for log lines.
pub fn name(e: Errno) -> &'static str {
    match e.code() {
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
        _ => "errno",
    }
}

/// Logs a refusal of `what` (e.g. "write to t-0/status") with its reason.
pub fn refuse(errno: Errno, what: impl std::fmt::Display, why: impl std::fmt::Display) -> Errno {
    log::warn!("refused {what}: {why} ({})", name(errno));
    errno
}

/// The errno for a storage error, with no logging.
pub fn errno_of(e: &StorageError) -> Errno {
    match e {
        StorageError::Io { .. } => Errno::from_i32(e.raw_os_error().unwrap_or(libc::EIO)),
        StorageError::Config(_) => Errno::EINVAL,
        StorageError::InvalidPartitionName(..) => Errno::EINVAL,
        StorageError::PartitionExists(_) => Errno::EEXIST,
        StorageError::NoSuchPartition(_) => Errno::ENOENT,
        StorageError::RecordTooLarge { .. } => Errno::EMSGSIZE,
        StorageError::BatchLargerThanSegment { .. } => Errno::EFBIG,
        StorageError::OffsetOutOfRange { .. } => Errno::ENOENT,
        StorageError::RecordNotFound(_) => Errno::ENOENT,
        StorageError::Corrupt { .. } => Errno::EIO,
        StorageError::Record(_) => Errno::EIO,
        StorageError::ReadOnly => Errno::EROFS,
        StorageError::Locked(_) => Errno::EBUSY,
        StorageError::NoSuchFile(_) => Errno::ENOENT,
        StorageError::EmptyAppend => Errno::EINVAL,
    }
}

/// Maps a storage error to its errno and logs it: a refusal (bad input) at
/// warn level, a failure of the machine (I/O, corruption) at error level.
pub fn storage(what: impl std::fmt::Display, e: &StorageError) -> Errno {
    let errno = errno_of(e);
    match e {
        StorageError::Io { .. } | StorageError::Corrupt { .. } | StorageError::Record(_) => {
            log::error!("{what} failed: {e} ({})", name(errno))
        }
        // Lookups of missing things are routine (shells probe names): no noise.
        StorageError::OffsetOutOfRange { .. }
        | StorageError::RecordNotFound(_)
        | StorageError::NoSuchFile(_)
        | StorageError::NoSuchPartition(_) => log::debug!("{what}: {e}"),
        _ => log::warn!("refused {what}: {e} ({})", name(errno)),
    }
    errno
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_errors_pass_through() {
        let e = StorageError::io("/x", std::io::Error::from_raw_os_error(libc::ENOSPC));
        assert_eq!(errno_of(&e), Errno::ENOSPC);
        let e = StorageError::io("/x", std::io::Error::other("no errno"));
        assert_eq!(errno_of(&e), Errno::EIO);
        let e = StorageError::RecordTooLarge { size: 10, max: 5 };
        assert_eq!(errno_of(&e), Errno::EMSGSIZE);
    }
}
