//! A data directory copied as a crash would leave it: what the tests that
//! "crash" a live session open next; and such directories removed once the
//! test is done.

use std::fs::{self, File};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Copies a directory tree, keeping files sparse (an active index is a
/// 10 MiB preallocation of mostly holes).
pub fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let copied = if entry.file_type()?.is_dir() {
            fs::create_dir(&dst).and_then(|()| copy_tree(&src, &dst))
        } else {
            copy_sparse(&src, &dst)
        };
        match copied {
            // Gone since the listing (a checkpoint's `.tmp` renamed by a
            // thread of the crashed session): a crash could miss it too.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            r => r?,
        }
    }
    Ok(())
}

/// Copies the data regions of a file (SEEK_DATA, SEEK_HOLE), holes as holes.
fn copy_sparse(from: &Path, to: &Path) -> std::io::Result<()> {
    let src = File::open(from)?;
    let len = src.metadata()?.len();
    let dst = File::create(to)?;
    dst.set_len(len)?;
    let fd = src.as_raw_fd();
    let mut pos = 0i64;
    let mut buf = vec![0u8; 1 << 16];
    while (pos as u64) < len {
        // SAFETY: lseek on an open descriptor; ENXIO (no more data) ends it.
        let data = unsafe { libc::lseek(fd, pos, libc::SEEK_DATA) };
        if data < 0 {
            break;
        }
        let hole = unsafe { libc::lseek(fd, data, libc::SEEK_HOLE) };
        let mut at = data as u64;
        while at < hole as u64 {
            let want = buf.len().min((hole as u64 - at) as usize);
            let n = src.read_at(&mut buf[..want], at)?;
            if n == 0 {
                break;
            }
            dst.write_all_at(&buf[..n], at)?;
            at += n as u64;
        }
        pos = hole;
    }
    Ok(())
}

/// Removes a data directory while a roll's background flush of the session
/// just gone may still write to it (a checkpoint created during the
/// removal): removal is retried until it holds.
pub fn remove_tree(dir: &Path) {
    for _ in 0..100 {
        match fs::remove_dir_all(dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                std::thread::sleep(std::time::Duration::from_millis(10))
            }
            _ => break,
        }
    }
}
