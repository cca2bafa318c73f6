//! Every call in storage that changes the data directory goes through here,
//! under a name of its own: a write, an fsync, a rename, a truncate, an
//! allocation, an msync, a removal, a file or directory created. With the
//! `failpoints` feature each name is a failpoint (the `fail` crate) that
//! `tests/failpoints/` turns into an error (`return`, or `return(ENOSPC)`)
//! or a panic (`panic`), in the manner of raft-engine's I/O error tests.
//! Without it the names cost nothing.
//!
//! [`SITES`] lists them all; a test below fails when a call site in storage
//! writes without a name, or a name is missing from the list, so the
//! failpoint matrix cannot miss a new one.
//!
//! Calls that a signal may interrupt without the standard library retrying
//! them (`fallocate`, `flock`) are retried on `EINTR` here.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::Path;

use memmap2::MmapMut;

/// Every failpoint name, one per call site.
pub const SITES: &[&str] = &[
    // A segment's `.log` (segment/mod.rs).
    "segment.create",
    "segment.append.write",
    "segment.append.cut_back",
    "segment.rollback.truncate",
    "segment.flush.fdatasync",
    "segment.recover.truncate",
    "segment.delete.remove",
    "segment.delete.remove_txnindex",
    // The indexes (index.rs).
    "index.create",
    "index.fallocate",
    "index.set_len",
    "index.resize.truncate",
    "index.msync",
    "index.push",
    "index.install",
    "index.discard",
    // A segment's `.txnindex` (index/txn.rs).
    "txnindex.append.open",
    "txnindex.append.write",
    "txnindex.truncate",
    "txnindex.flush",
    // A partition's directory (local_log/).
    "partition.create.mkdir",
    "partition.create.cleanup",
    "partition.delete.remove",
    "partition.flush.dir_fsync",
    "loader.stray.remove",
    "loader.swap.rename",
    "loader.swap.remove_replaced",
    "loader.swap.remove_doomed",
    "loader.orphan_index.remove",
    // The log cleaner (cleaner/cleaned.rs, local_log/segments.rs).
    "cleaner.cleaned.create",
    "cleaner.cleaned.write",
    "cleaner.cleaned.fsync",
    "cleaner.cleaned.create_index",
    "cleaner.cleaned.write_index",
    "cleaner.cleaned.fsync_index",
    "cleaner.cleaned.remove",
    "cleaner.swap.to_swap",
    "cleaner.swap.to_deleted",
    "cleaner.swap.from_swap",
    "cleaner.swap.dir_fsync",
    "cleaner.deleted.remove",
    // Producer snapshots (producer_state/manager.rs).
    "producer.snapshot.remove",
    // Files replaced whole: checkpoints, the clean-shutdown marker,
    // commitfs.properties, commitfs.streamlen, commitfs.committedlen,
    // commitfs.acls, commitfs.scram-credentials (checkpoint.rs).
    "atomic.create",
    "atomic.write",
    "atomic.fsync",
    "atomic.rename",
    "atomic.dir_fsync",
    // The data directory (manager.rs).
    "manager.mkdir",
    "manager.lock.open",
    "manager.lock.truncate",
    "manager.lock.write",
    "manager.marker.remove",
    "manager.marker.dir_fsync",
    // `check --repair` (check.rs).
    "repair.remove_index",
    "repair.remove_marker",
    "repair.remove_snapshot",
    "repair.remove_stream_lengths",
    // A read, for the failure whose handling it tests: a segment's size
    // learned from the file (segment/mod.rs).
    "segment.size.stat",
];

/// The injected failure at `site`: `return` gives EIO, `return(ENOSPC)`
/// (or any errno by name or number) that errno. The site is in the message,
/// so a test sees which call failed.
#[cfg(feature = "failpoints")]
fn injected(site: &str, arg: Option<String>) -> io::Error {
    let errno = match arg.as_deref() {
        None | Some("") | Some("EIO") => libc::EIO,
        Some("ENOSPC") => libc::ENOSPC,
        Some("EDQUOT") => libc::EDQUOT,
        Some("EFBIG") => libc::EFBIG,
        Some("EINTR") => libc::EINTR,
        Some(n) => n.parse().unwrap_or(libc::EIO),
    };
    let os = io::Error::from_raw_os_error(errno);
    io::Error::new(
        os.kind(),
        InjectedError {
            site: site.to_string(),
            os,
        },
    )
}

/// An injected error that still answers `raw_os_error` through its source.
#[cfg(feature = "failpoints")]
#[derive(Debug)]
struct InjectedError {
    site: String,
    os: io::Error,
}

#[cfg(feature = "failpoints")]
impl std::fmt::Display for InjectedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (injected at {})", self.os, self.site)
    }
}

#[cfg(feature = "failpoints")]
impl std::error::Error for InjectedError {}

/// The errno of an error, injected or not.
pub fn raw_os_error(e: &io::Error) -> Option<i32> {
    #[cfg(feature = "failpoints")]
    if let Some(inj) = e.get_ref().and_then(|i| i.downcast_ref::<InjectedError>()) {
        return inj.os.raw_os_error();
    }
    e.raw_os_error()
}

#[inline]
fn inject(site: &'static str) -> io::Result<()> {
    #[cfg(feature = "failpoints")]
    fail::fail_point!(site, |arg| Err(injected(site, arg)));
    let _ = site;
    Ok(())
}

/// Retries a call a signal interrupted.
pub(crate) fn retry_eintr<T>(mut f: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    loop {
        match f() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

/// Creates (or empties) a file for reading and writing.
pub(crate) fn create_file(site: &'static str, path: &Path) -> io::Result<File> {
    inject(site)?;
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
}

/// Opens a file for reading and writing, creating it if missing, keeping
/// what it holds.
pub(crate) fn open_or_create(site: &'static str, path: &Path) -> io::Result<File> {
    inject(site)?;
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
}

pub(crate) fn write_all_at(site: &'static str, f: &File, buf: &[u8], pos: u64) -> io::Result<()> {
    inject(site)?;
    f.write_all_at(buf, pos)
}

pub(crate) fn write_all(site: &'static str, f: &mut File, buf: &[u8]) -> io::Result<()> {
    inject(site)?;
    f.write_all(buf)
}

pub(crate) fn set_len(site: &'static str, f: &File, len: u64) -> io::Result<()> {
    inject(site)?;
    f.set_len(len)
}

/// Real blocks for `len` bytes at `offset` (`fallocate(2)`, mode 0: the
/// file's length does not change), so that later stores through a mapping
/// of the range cannot meet a full disk, which the kernel answers with
/// SIGBUS. Where the filesystem has no `fallocate`, zeros are written over
/// the range instead: callers allocate only ranges that hold zeros.
pub(crate) fn allocate(site: &'static str, f: &File, offset: u64, len: u64) -> io::Result<()> {
    inject(site)?;
    let done = retry_eintr(|| {
        // SAFETY: plain syscall on an owned fd.
        let rc =
            unsafe { libc::fallocate(f.as_raw_fd(), 0, offset as libc::off_t, len as libc::off_t) };
        if rc == 0 {
            return Ok(true);
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EOPNOTSUPP) {
            return Ok(false);
        }
        Err(err)
    })?;
    if !done {
        f.write_all_at(&vec![0u8; len as usize], offset)?;
    }
    Ok(())
}

pub(crate) fn sync_data(site: &'static str, f: &File) -> io::Result<()> {
    inject(site)?;
    f.sync_data()
}

pub(crate) fn sync_all(site: &'static str, f: &File) -> io::Result<()> {
    inject(site)?;
    f.sync_all()
}

/// fsync of a directory, so the entries created or removed in it are durable.
pub(crate) fn sync_dir(site: &'static str, dir: &Path) -> io::Result<()> {
    inject(site)?;
    File::open(dir)?.sync_all()
}

/// msync of a mapping.
pub(crate) fn msync(site: &'static str, m: &MmapMut) -> io::Result<()> {
    inject(site)?;
    m.flush()
}

/// A write into a mapping: it cannot fail as a call, but a test can make
/// it fail (or panic) to reach what follows a failed index write.
pub(crate) fn map_write(site: &'static str) -> io::Result<()> {
    inject(site)
}

pub(crate) fn rename(site: &'static str, from: &Path, to: &Path) -> io::Result<()> {
    inject(site)?;
    fs::rename(from, to)
}

pub(crate) fn remove_file(site: &'static str, path: &Path) -> io::Result<()> {
    inject(site)?;
    fs::remove_file(path)
}

pub(crate) fn remove_dir_all(site: &'static str, path: &Path) -> io::Result<()> {
    inject(site)?;
    fs::remove_dir_all(path)
}

pub(crate) fn create_dir(site: &'static str, path: &Path) -> io::Result<()> {
    inject(site)?;
    fs::create_dir(path)
}

pub(crate) fn create_dir_all(site: &'static str, path: &Path) -> io::Result<()> {
    inject(site)?;
    fs::create_dir_all(path)
}

/// The metadata of a path (a stat, retried on EINTR).
pub(crate) fn metadata(site: &'static str, path: &Path) -> io::Result<fs::Metadata> {
    inject(site)?;
    retry_eintr(|| fs::metadata(path))
}

/// `flock(2)` without blocking.
pub(crate) fn flock(f: &File, op: libc::c_int) -> io::Result<()> {
    retry_eintr(|| {
        // SAFETY: plain syscall on an owned fd.
        if unsafe { libc::flock(f.as_raw_fd(), op) } == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The storage sources, but for this file and test modules of their
    /// own (`tests.rs`, as a `#[cfg(test)]` section is left out below).
    fn sources() -> Vec<(String, String)> {
        fn walk(dir: &Path, out: &mut Vec<(String, String)>) {
            for e in fs::read_dir(dir).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    walk(&p, out);
                } else if p.extension().is_some_and(|x| x == "rs")
                    && !p.ends_with("src/disk.rs")
                    && !p.ends_with("tests.rs")
                {
                    out.push((p.display().to_string(), fs::read_to_string(&p).unwrap()));
                }
            }
        }
        let mut out = Vec::new();
        walk(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut out);
        out
    }

    /// The code of a source file, without its tests module and comments,
    /// and without lines marked as calls on something that is not a file
    /// (`Vec::set_len`), by a comment `// not a file`.
    fn code(text: &str) -> String {
        let text = text.split("#[cfg(test)]").next().unwrap_or(text);
        text.lines()
            .filter(|l| !l.trim_start().starts_with("//") && !l.contains("// not a file"))
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn every_call_that_writes_goes_through_a_named_site() {
        // Calls that change the data directory, but here.
        let forbidden = [
            ".write_all_at(",
            ".write_all(",
            ".sync_data(",
            ".sync_all(",
            ".set_len(",
            "fs::rename(",
            "fs::remove_file(",
            "fs::remove_dir_all(",
            "fs::create_dir",
            "libc::fallocate",
            "libc::flock",
            "File::create(",
            ".truncate(true)",
            ".create(true)",
            "m.flush()",
            ".flush_async(",
        ];
        let mut used = Vec::new();
        for (path, text) in sources() {
            let code = code(&text);
            for f in forbidden {
                // At a word boundary: `IndexFile::create(` is not `File::create(`.
                let direct = code.match_indices(f).any(|(i, _)| {
                    f.starts_with('.')
                        || !code[..i]
                            .chars()
                            .next_back()
                            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                });
                assert!(
                    !direct,
                    "{path} calls {f} directly: route it through storage::disk with a site name"
                );
            }
            // Each `disk::call("site", ...)`.
            for (i, _) in code.match_indices("disk::") {
                let rest = &code[i + "disk::".len()..];
                let Some(open) = rest.find('(') else { continue };
                if !rest[..open]
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_')
                {
                    continue;
                }
                let args = rest[open + 1..].trim_start();
                if let Some(lit) = args.strip_prefix('"') {
                    used.push(lit[..lit.find('"').unwrap()].to_string());
                }
            }
        }
        let mut sorted = used.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(
            sorted.len(),
            used.len(),
            "a site name is used twice: {used:?}"
        );
        let mut listed: Vec<String> = SITES.iter().map(|s| s.to_string()).collect();
        listed.sort();
        assert_eq!(sorted, listed, "SITES and the call sites differ");
    }

    #[test]
    fn interrupted_calls_are_retried() {
        let mut n = 0;
        let r = retry_eintr(|| {
            n += 1;
            if n < 3 {
                Err(io::Error::from_raw_os_error(libc::EINTR))
            } else {
                Ok(n)
            }
        });
        assert_eq!(r.unwrap(), 3);
        let e = retry_eintr(|| Err::<(), _>(io::Error::from_raw_os_error(libc::EIO)));
        assert_eq!(e.unwrap_err().raw_os_error(), Some(libc::EIO));
    }
}
