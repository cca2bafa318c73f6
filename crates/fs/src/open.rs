//! Open files: what each open of a node gets, and its reads, writes and close.

use std::sync::Arc;

use log::debug;

use super::control;
use super::error::{FsError, FsResult};
use super::handle::{Handle, OpenFile};
use super::lines::{append_held_line, append_lines};
use super::node::{Control, NodeKey};
use super::passthrough::{Backing, BackingFiles, Mode};
use super::tree::Tree;
use commitfs_backend::{FileKind, Partition};

/// What an open asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AccessMode {
    pub read: bool,
    pub write: bool,
}

/// A new handle and how the kernel should treat it.
#[derive(Clone)]
pub struct Opened {
    pub fh: u64,
    /// Every read and write goes to the daemon, and a read's reply length is
    /// authoritative (generated files, `log`, the active `.log`).
    pub direct_io: bool,
    /// Pages cached by an earlier open stay good (an immutable file).
    pub keep_cache: bool,
    /// The kernel reads this backing file itself.
    pub backing: Option<Backing>,
}

impl Opened {
    fn direct(fh: u64) -> Self {
        Opened {
            fh,
            direct_io: true,
            keep_cache: false,
            backing: None,
        }
    }
}

impl Tree {
    pub fn open(&self, ino: u64, mode: AccessMode, kernel: &dyn BackingFiles) -> FsResult<Opened> {
        let key = self.key(ino)?;
        let path = key.path();
        if key.is_dir() {
            return Err(FsError::quiet(libc::EISDIR));
        }
        self.check_access(&key, &path, mode)?;
        if let NodeKey::RootFile(name) = &key {
            self.root_file(name)?;
            // Direct I/O: a rw daemon rewrites checkpoints by rename, so
            // cached pages could show an older file.
            let handle = Handle::RootFile(name.clone());
            return Ok(Opened::direct(
                self.handles.insert(OpenFile { handle, key }),
            ));
        }
        if matches!(key, NodeKey::GroupFile(..) | NodeKey::GroupOffset(..)) {
            return self.open_group_file(key);
        }
        let p = key.partition().ok_or(FsError::quiet(libc::EISDIR))?.clone();
        let part = self.partition(&p)?;
        if let NodeKey::Raw(_, name) = &key {
            return self.open_raw(ino, key.clone(), part, name.clone(), kernel);
        }
        let handle = match &key {
            // Direct I/O for reads too: the stream grows with every append
            // and shifts when the log start moves, so cached pages would go
            // stale, and the reply length must be what ends a read.
            NodeKey::Log(_) => Handle::Log {
                partition: part,
                partial: Vec::new(),
            },
            // Direct I/O as for `log`: it grows as transactions commit.
            NodeKey::Committed(_) => {
                super::tree::committed(&*part, &key)?;
                Handle::Committed(part)
            }
            NodeKey::Time(_, ms) => {
                Handle::Snapshot(self.time_text(&*part, *ms, &key)?.into_bytes())
            }
            NodeKey::Control(_, c) => Handle::Control {
                partition: part,
                control: *c,
            },
            NodeKey::Status(_) => Handle::Snapshot(self.status_text(&*part, &key)?.into_bytes()),
            NodeKey::Offset(_, n) => {
                let r = self.record(&*part, *n, &key)?;
                let value = r.record.value.unwrap_or_default();
                // A record never changes, and its size is exact from the
                // lookup: the kernel may cache its pages and answer the read
                // at the end of the file itself, a round trip less per
                // `cat offset/N`.
                let handle = Handle::Snapshot(value);
                return Ok(Opened {
                    fh: self.handles.insert(OpenFile { key, handle }),
                    direct_io: false,
                    keep_cache: true,
                    backing: None,
                });
            }
            NodeKey::Config(_, name) => Handle::Config {
                snapshot: self.config_text(&*part, name, &key)?.into_bytes(),
                partition: part,
                name,
            },
            _ => return Err(FsError::quiet(libc::EISDIR)),
        };
        Ok(Opened::direct(
            self.handles.insert(OpenFile { key, handle }),
        ))
    }

    /// Refuses a write to what is read-only (or to anything while the tree
    /// is read-only) and a read of a write-only control file.
    fn check_access(&self, key: &NodeKey, path: &str, mode: AccessMode) -> FsResult<()> {
        if mode.write {
            self.check_changeable(key, format_args!("open of {path} for writing"))?;
            if !key.writable() {
                return Err(FsError::refuse(
                    libc::EACCES,
                    format!("open of {path} for writing"),
                    "it is read-only",
                ));
            }
        }
        if mode.read && !key.readable() {
            return Err(FsError::refuse(
                libc::EACCES,
                format!("open of {path} for reading"),
                "control files are write-only",
            ));
        }
        Ok(())
    }

    /// A group's files are read whole at open, so that a read sees one
    /// state of the group.
    fn open_group_file(&self, key: NodeKey) -> FsResult<Opened> {
        let handle = match &key {
            NodeKey::GroupOffset(g, p) => Handle::GroupOffset {
                group: g.clone(),
                partition: p.clone(),
                snapshot: self.group_file(&key)?.0,
            },
            _ => Handle::Snapshot(self.group_file(&key)?.0),
        };
        Ok(Opened::direct(
            self.handles.insert(OpenFile { key, handle }),
        ))
    }

    /// Sealed segments and indexes (of any segment: an active index changes
    /// only in place) are passed through. The active `.log` is not: the
    /// kernel would read past its published size, into a batch still being
    /// written.
    fn open_raw(
        &self,
        ino: u64,
        key: NodeKey,
        part: Arc<dyn Partition>,
        name: Arc<str>,
        kernel: &dyn BackingFiles,
    ) -> FsResult<Opened> {
        let path = key.path();
        let info = self.raw_file(&*part, &name, &key)?;
        let want = info.sealed || matches!(info.kind, FileKind::Index | FileKind::TimeIndex);
        let mode = self.passthrough.open(ino, want, || {
            let files = part.raw_files().ok_or(FsError::quiet(libc::ENOENT))?;
            let file = files.open_file(&name).map_err(|e| match e.kind {
                commitfs_backend::ErrorKind::NotFound => FsError::quiet(libc::ENOENT),
                _ => FsError::backend(format!("open of {path}"), &e),
            })?;
            Ok(kernel.register(&file))
        })?;
        let backing = match mode {
            Mode::Passthrough(id) => Some(id),
            Mode::Cached => None,
        };
        debug!(
            "open of {path}: {}",
            if backing.is_some() {
                "passed through"
            } else {
                "served by the daemon"
            }
        );
        // A sealed `.log` served by the daemon never changes, so its pages
        // may outlive the open. The active one is read with direct I/O: under
        // concurrent GETATTRs the kernel can keep a page it zero-filled past
        // an older end (a page it could not drop while another reader held
        // it), and a reader would see zeros where batches are.
        // `FUSE_DIRECT_IO_ALLOW_MMAP` keeps read-only mmap working there.
        // Other files drop their pages at each open (an index write in place
        // may have made them stale).
        let is_log = info.kind == FileKind::Log;
        let daemon_served = backing.is_none();
        let fh = self.handles.insert(OpenFile {
            key,
            handle: Handle::Raw {
                partition: part,
                name,
                ino,
                backing: backing.clone(),
            },
        });
        Ok(Opened {
            fh,
            direct_io: daemon_served && is_log && !info.sealed,
            keep_cache: daemon_served && is_log && info.sealed,
            backing,
        })
    }

    /// Reads into `out`, which then holds exactly the bytes read.
    pub fn read(&self, fh: u64, offset: u64, size: u32, out: &mut Vec<u8>) -> FsResult<()> {
        let n = self.read_into(fh, offset, size, out)?;
        out.truncate(n);
        Ok(())
    }

    /// Reads into `out[..n]` and returns `n`. `out` is the caller's buffer,
    /// kept from request to request: it is neither allocated nor zeroed per
    /// request (zeroing 1 MiB before each `cat log` read cost as much as a
    /// tenth of it). The handle's lock is held only to see what it is, so
    /// that the kernel's parallel readahead requests on one handle run in
    /// parallel.
    pub fn read_into(&self, fh: u64, offset: u64, size: u32, out: &mut Vec<u8>) -> FsResult<usize> {
        enum Source {
            Raw(Arc<dyn Partition>, Arc<str>),
            Stream(Arc<dyn Partition>),
            Committed(Arc<dyn Partition>),
            RootFile(Arc<str>),
        }
        let size = size as usize;
        if out.len() < size {
            out.resize(size, 0);
        }
        let (source, key) = {
            let f = self.handles.get(fh).ok_or(FsError::quiet(libc::EBADF))?;
            let f = f.lock();
            let source = match &f.handle {
                Handle::Snapshot(b)
                | Handle::Config { snapshot: b, .. }
                | Handle::GroupOffset { snapshot: b, .. } => {
                    let start = (offset as usize).min(b.len());
                    let end = start.saturating_add(size).min(b.len());
                    out[..end - start].copy_from_slice(&b[start..end]);
                    return Ok(end - start);
                }
                Handle::Raw {
                    partition, name, ..
                } => Source::Raw(partition.clone(), name.clone()),
                Handle::Log { partition, .. } => Source::Stream(partition.clone()),
                Handle::Committed(partition) => Source::Committed(partition.clone()),
                Handle::RootFile(name) => Source::RootFile(name.clone()),
                Handle::Control { .. } | Handle::Dir(_) => {
                    return Err(FsError::quiet(libc::EBADF));
                }
            };
            (source, f.key.clone())
        };
        let mut got = 0;
        // Cached mode zero-fills a short reply, so read until EOF or full.
        while got < size {
            let at = offset + got as u64;
            let to = &mut out[got..size];
            let n = match &source {
                Source::Raw(partition, name) => match partition.raw_files() {
                    Some(files) => files.read_file(name, at, to),
                    None => return Err(FsError::quiet(libc::ENOENT)),
                },
                Source::Stream(partition) => partition.read_stream(at, to),
                Source::Committed(partition) => match partition.committed() {
                    Some(view) => view.read_committed(at, to),
                    None => return Err(FsError::quiet(libc::ENOENT)),
                },
                Source::RootFile(name) => match self.backend.root_files() {
                    Some(files) => files.read(name, at, to),
                    None => return Err(FsError::quiet(libc::ENOENT)),
                },
            }
            .map_err(|e| FsError::backend(format!("read of {}", key.path()), &e))?;
            if n == 0 {
                break;
            }
            got += n;
        }
        Ok(got)
    }

    /// A write: lines to `log`, a command to a control file, a value to a
    /// config file. The offset is not asked for: `log` is append-only and the
    /// kernel's offset is only its cached idea of the size.
    pub fn write(&self, fh: u64, data: &[u8]) -> FsResult<u32> {
        let f = self.handles.get(fh).ok_or(FsError::quiet(libc::EBADF))?;
        let mut f = f.lock();
        let f = &mut *f;
        let path = f.key.path();
        self.check_changeable(&f.key, format_args!("write to {path}"))?;
        match &mut f.handle {
            Handle::Log { partition, partial } => append_lines(&**partition, partial, data, &path)?,
            Handle::Control { partition, control } => {
                let part = &**partition;
                match control {
                    Control::DeleteRecords => control::delete_records(part, data, &path)?,
                    Control::Roll => control::roll(part)?,
                    Control::Flush => control::flush(part)?,
                    Control::Compact => control::compact(part)?,
                }
            }
            Handle::Config {
                partition, name, ..
            } => control::set_config(&**partition, name, data, &path)?,
            Handle::GroupOffset {
                group, partition, ..
            } => self.reset_group_offset(group, partition, data, &path)?,
            Handle::Snapshot(_)
            | Handle::Raw { .. }
            | Handle::RootFile(_)
            | Handle::Committed(_)
            | Handle::Dir(_) => {
                return Err(FsError::refuse(
                    libc::EBADF,
                    format!("write to {path}"),
                    "not open for writing",
                ));
            }
        }
        Ok(data.len() as u32)
    }

    /// The close of a handle: a `log` handle's held line is appended.
    pub fn release(&self, fh: u64) -> FsResult<()> {
        if let Some(f) = self.handles.remove(fh) {
            let mut f = f.lock();
            finish(&mut f);
            if let Handle::Raw { ino, backing, .. } = &mut f.handle {
                let mode = backing.take().map_or(Mode::Cached, Mode::Passthrough);
                self.passthrough.release(*ino, mode);
            }
        }
        Ok(())
    }

    /// fsync(2) of a `log` handle flushes the partition.
    pub fn fsync(&self, fh: u64) -> FsResult<()> {
        let f = self.handles.get(fh).ok_or(FsError::quiet(libc::EBADF))?;
        let f = f.lock();
        // Where the backend has no flush, every acknowledged write is
        // already as durable as it makes one (a cluster's acks=all).
        if let Handle::Log { partition, .. } = &f.handle
            && let Some(control) = partition.log_control()
        {
            control
                .flush()
                .map_err(|e| FsError::backend(format!("fsync of {}", f.key.path()), &e))?;
        }
        Ok(())
    }

    /// The end of the session: every open handle is closed.
    pub fn destroy(&self) {
        for f in self.handles.drain() {
            finish(&mut f.lock());
        }
    }
}

fn finish(f: &mut OpenFile) {
    if let Handle::Log { partition, partial } = &mut f.handle {
        append_held_line(&**partition, partial, &f.key.path());
    }
}
