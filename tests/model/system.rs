//! The system under test behind a small trait, so that the same sequences
//! can run over another backend (a Kafka cluster through the same
//! `Backend` trait): how to get the tree, remount it cleanly, crash it, and
//! run a retention pass, and which nodes the backend has.

use std::fs::{self, File};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use super::ops::Op;
use commitfs::backend::local::LocalBackend;
use commitfs::fs::Tree;
use commitfs::storage::check::check_data_dir;
use commitfs::storage::{LogConfig, LogManager, OpenOptions};

/// The optional nodes a backend offers (its capabilities).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Features {
    /// Segment and index files.
    pub raw_files: bool,
    pub roll: bool,
    pub flush: bool,
}

pub trait System {
    fn tree(&self) -> &Tree;
    /// The backend's optional nodes (raw segment files, `roll`, `flush`).
    fn features(&self) -> Features;
    /// The fields of `status`, in order.
    fn status_fields(&self) -> &'static [&'static str];
    /// Whether `offset/N` has `user.kafka.position`.
    fn has_positions(&self) -> bool;
    /// Ends the session as an unmount does (`destroy`: open handles are
    /// closed) and shuts the backend down cleanly, then starts again.
    /// `intact` lists the partitions whose on-disk format an offline check
    /// can hold to the mount-wide defaults.
    fn clean_remount(&mut self, intact: &[String]);
    /// Ends the session with no shutdown at all, then starts again.
    fn crash(&mut self);
    /// One retention pass at `now_ms`; false when this backend's retention
    /// is not the tree's to drive (then the model skips it too).
    fn retention_tick(&mut self, now_ms: i64) -> bool;
    /// Whether the sequence's `op` runs here; one that does not is skipped
    /// by the tree and the model alike (an operation the backend cannot do).
    fn runs(&self, _op: &Op) -> bool {
        true
    }
    /// Partitions made outside the tree before the sequence starts.
    fn premade(&self) -> Vec<String> {
        Vec::new()
    }
    /// Whether `time/<ms>` lookups are compared (the backend answers them).
    fn compares_times(&self) -> bool {
        true
    }
    /// Whether `config/` (its listing and every file) is compared.
    fn compares_configs(&self) -> bool {
        true
    }
    /// Whether `offset/N` has `user.kafka.batch_base_offset`.
    fn has_batch_offsets(&self) -> bool {
        true
    }
}

/// A data directory under the system temp dir, through the storage library.
pub struct LocalSystem {
    dir: tempfile::TempDir,
    /// The manager (for retention and close) and the tree over it.
    mounted: Option<(Arc<LogManager>, Tree)>,
    /// Directories left by crashes, which threads of the crashed session
    /// may still write to; removed with the system.
    crashed: Vec<tempfile::TempDir>,
}

const STATUS_FIELDS: &[&str] = &[
    "log_start_offset",
    "log_end_offset",
    "high_watermark",
    "recovery_point",
    "segments",
    "size_bytes",
    "active_segment",
    "lookup_bytes_read",
    "fsyncs",
];

fn open(dir: &Path) -> (Arc<LogManager>, Tree) {
    let manager = Arc::new(
        LogManager::open(dir, LogConfig::default(), OpenOptions::default())
            .expect("the data directory opens"),
    );
    let tree = Tree::new(Arc::new(LocalBackend::new(manager.clone())));
    (manager, tree)
}

impl LocalSystem {
    pub fn new() -> LocalSystem {
        let dir = temp_dir();
        let mounted = Some(open(dir.path()));
        LocalSystem {
            dir,
            mounted,
            crashed: Vec::new(),
        }
    }
}

impl System for LocalSystem {
    fn tree(&self) -> &Tree {
        &self.mounted.as_ref().expect("mounted").1
    }

    fn features(&self) -> Features {
        Features {
            raw_files: true,
            roll: true,
            flush: true,
        }
    }

    fn status_fields(&self) -> &'static [&'static str] {
        STATUS_FIELDS
    }

    fn has_positions(&self) -> bool {
        true
    }

    fn clean_remount(&mut self, intact: &[String]) {
        let (manager, tree) = self.mounted.take().expect("mounted");
        tree.destroy();
        drop(tree);
        manager.close().expect("a clean close");
        drop(manager);
        // While unmounted: the offline check finds nothing wrong.
        for name in intact {
            let report = check_data_dir(self.dir.path(), &LogConfig::default(), Some(name))
                .expect("the check runs");
            assert!(
                report.is_clean(),
                "check of {name} after a clean close: {:?}",
                report.problems
            );
        }
        self.mounted = Some(open(self.dir.path()));
    }

    fn crash(&mut self) {
        // No destroy, no close: no clean-shutdown marker, held lines lost.
        // A crash also stops the session's threads (a roll's background
        // flush), which a test cannot do: so the next session starts on a
        // copy of the directory as it is now (the page cache's view, as a
        // new process would find it), and what those threads still write
        // goes to the old one.
        self.mounted = None;
        let copy = temp_dir();
        copy_tree(self.dir.path(), copy.path()).expect("a copy of the data directory");
        self.crashed.push(std::mem::replace(&mut self.dir, copy));
        self.mounted = Some(open(self.dir.path()));
    }

    fn retention_tick(&mut self, now_ms: i64) -> bool {
        let manager = &self.mounted.as_ref().expect("mounted").0;
        manager.run_retention(now_ms).expect("retention runs");
        true
    }
}

impl Drop for LocalSystem {
    /// The tree and the manager go first; what may still write then is a
    /// roll's background flush (a checkpoint created while the directory is
    /// being removed), so removal is retried until it holds.
    fn drop(&mut self) {
        self.mounted = None;
        for dir in std::iter::once(&self.dir).chain(&self.crashed) {
            for _ in 0..100 {
                match fs::remove_dir_all(dir.path()) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                        std::thread::sleep(std::time::Duration::from_millis(10))
                    }
                    _ => break,
                }
            }
        }
    }
}

fn temp_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("commitfs-model-")
        .tempdir()
        .expect("a temp dir")
}

/// Copies a directory tree, keeping files sparse (an active index is a
/// 10 MiB preallocation of mostly holes).
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
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

/// Copies the data regions of a file (found with SEEK_DATA and SEEK_HOLE)
/// and leaves its holes as holes.
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
