//! The files of a partition directory: segment files with their published
//! sizes, Kafka's side files and commitfs's own, and positioned reads of any
//! of them. Which of them a face shows is its own business.

use std::fs::{self, File};
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use super::LocalLog;
use crate::batch_reader::read_full_at;
use crate::error::{IoContext, Result, StorageError};
use crate::names::parse_segment_file_name;
use commitfs_record::names::FileKind;

/// A file in the partition directory, as the mount lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionFile {
    pub name: String,
    pub size: u64,
    pub kind: FileKind,
    pub mtime: SystemTime,
}

impl LocalLog {
    /// Every regular file of the partition directory, sorted by name, the
    /// `.log` files with their published sizes.
    pub fn files(&self) -> Result<Vec<PartitionFile>> {
        self.check_online()?;
        let mut out = Vec::new();
        for entry in fs::read_dir(&self.dir).at(&self.dir)? {
            let entry = entry.at(&self.dir)?;
            let Some(name) = entry.file_name().to_str().map(str::to_string) else {
                continue;
            };
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_file() {
                out.push(self.describe(name, &meta)?);
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// One file from [`LocalLog::files`], without listing the directory.
    pub fn file(&self, name: &str) -> Result<PartitionFile> {
        self.check_online()?;
        let path = self.checked_name(name)?;
        let meta = match fs::metadata(&path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(StorageError::NoSuchFile(name.to_string()));
            }
            Err(e) => return Err(StorageError::io(&path, e)),
        };
        if !meta.is_file() {
            return Err(StorageError::NoSuchFile(name.to_string()));
        }
        self.describe(name.to_string(), &meta)
    }

    /// A file as listed, a segment's `.log` with its shown size.
    fn describe(&self, name: String, meta: &fs::Metadata) -> Result<PartitionFile> {
        let (kind, size) = match parse_segment_file_name(&name) {
            Some((base, "log")) => (FileKind::Log, self.log_len(base, meta.len())?),
            _ => (FileKind::of(&name), meta.len()),
        };
        Ok(PartitionFile {
            name,
            size,
            kind,
            mtime: meta.modified().unwrap_or(UNIX_EPOCH),
        })
    }

    /// The path of a name in the partition directory (not whether it exists).
    fn checked_name(&self, name: &str) -> Result<PathBuf> {
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            return Err(StorageError::NoSuchFile(name.to_string()));
        }
        Ok(self.dir.join(name))
    }

    fn file_path(&self, name: &str) -> Result<PathBuf> {
        let path = self.checked_name(name)?;
        if !path.is_file() {
            return Err(StorageError::NoSuchFile(name.to_string()));
        }
        Ok(path)
    }

    /// Positioned read of a file from [`LocalLog::files`].
    pub fn read_file(&self, name: &str, offset: u64, buf: &mut [u8]) -> Result<usize> {
        self.check_online()?;
        let seg = match parse_segment_file_name(name) {
            Some((base, "log")) => self.segments.get(base),
            _ => None,
        };
        if let Some(seg) = seg {
            // Only published bytes: never half a batch.
            let end = seg.size()?;
            if offset >= end {
                return Ok(0);
            }
            let want = buf.len().min((end - offset) as usize);
            return read_full_at(seg.log_file()?, &mut buf[..want], offset).at(seg.path());
        }
        let path = self.file_path(name)?;
        if let Some((base, "log")) = parse_segment_file_name(name)
            && self.unfollowed_len(base, u64::MAX) == 0
        {
            return Ok(0);
        }
        let f = File::open(&path).at(&path)?;
        read_full_at(&f, buf, offset).at(&path)
    }

    /// The size shown of segment `base`'s `.log` (`file_len` bytes on
    /// disk): its published size, since bytes past it may be half a batch.
    fn log_len(&self, base: i64, file_len: u64) -> Result<u64> {
        let seg = self.segments.get(base);
        match seg {
            Some(s) => s.size(),
            None => Ok(self.unfollowed_len(base, file_len)),
        }
    }

    /// The size shown of a `.log` that is not one of the log's segments
    /// (`file_len` bytes on disk). On a read-only mount, one past the active
    /// segment is a segment the writer created since the last look: none
    /// of its bytes are known to be whole batches yet, so none are shown
    /// until it is followed.
    fn unfollowed_len(&self, base: i64, file_len: u64) -> u64 {
        let newer = self
            .active_segment_base()
            .is_none_or(|active| base > active);
        if !self.writable && newer { 0 } else { file_len }
    }

    /// A read-only handle on a file from [`LocalLog::files`] (for passthrough or mmap).
    pub fn open_file(&self, name: &str) -> Result<File> {
        self.check_online()?;
        let path = self.file_path(name)?;
        File::open(&path).at(&path)
    }
}
