//! The FUSE edge: maps kernel requests onto the storage library and errno.
//!
//! It never opens segment files itself: everything goes through
//! [`LogManager`] and [`PartitionLog`]. Every refusal is an errno plus one log
//! line saying what was refused and why.

mod errno;
mod handle;
mod inode;
mod node;

use std::ffi::OsStr;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    AccessFlags, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation,
    INodeNo, InitFlags, KernelConfig, LockOwner, OpenAccMode, OpenFlags, RenameFlags, ReplyAttr,
    ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs,
    ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use log::{debug, error, info, warn};

use self::errno::{FsResult, refuse};
use self::handle::{Handle, HandleTable, OpenFile, split_lines, to_records};
use self::inode::{InodeTable, ROOT_INO};
use self::node::{
    Control, NodeKey, SPECIAL_NAMES, config_value, parse_delete_records, parse_offset_name,
    status_text,
};
use crate::storage::{
    CONFIG_NAMES, LogManager, PartitionFile, PartitionLog, RecordEntry, StorageError,
    segment_file_name,
};

/// Sizes, `status` and the partition set change with every append, roll or
/// mkdir, so the kernel must ask every time: stale sizes must never show.
const TTL: Duration = Duration::ZERO;
/// Large enough that `cp` and `cat` move 1 MiB per request.
const BLKSIZE: u32 = 1 << 20;
const MAX_WRITE: u32 = 1 << 20;

pub struct CommitFs {
    manager: Arc<LogManager>,
    inodes: InodeTable,
    handles: HandleTable,
    read_only: bool,
    started: SystemTime,
    uid: u32,
    gid: u32,
    on_destroy: parking_lot::Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl CommitFs {
    pub fn new(manager: Arc<LogManager>) -> CommitFs {
        let read_only = manager.read_only();
        CommitFs {
            manager,
            inodes: InodeTable::default(),
            handles: HandleTable::default(),
            read_only,
            started: SystemTime::now(),
            // SAFETY: getuid/getgid cannot fail.
            uid: unsafe { libc::getuid() },
            gid: unsafe { libc::getgid() },
            on_destroy: parking_lot::Mutex::new(None),
        }
    }

    /// Runs `f` when the session ends, after the last request and before
    /// fuser's own clean-up (the daemon uses it to release the mount quietly).
    pub fn on_destroy(self, f: impl FnOnce() + Send + 'static) -> Self {
        *self.on_destroy.lock() = Some(Box::new(f));
        self
    }

    /// Runs a handler body, turning a panic into EIO so that the request is
    /// still answered and the event loop thread survives.
    fn guard<T>(&self, op: &str, f: impl FnOnce() -> FsResult<T>) -> FsResult<T> {
        match std::panic::catch_unwind(AssertUnwindSafe(f)) {
            Ok(r) => r,
            Err(p) => {
                let msg = p
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                error!("{op} panicked: {msg}; answered EIO");
                Err(Errno::EIO)
            }
        }
    }

    fn key(&self, ino: INodeNo) -> FsResult<NodeKey> {
        self.inodes.key(ino.0).ok_or(Errno::ENOENT)
    }

    fn partition(&self, name: &str) -> FsResult<Arc<PartitionLog>> {
        self.manager.partition(name).ok_or(Errno::ENOENT)
    }

    /// Extended attributes of a node: only `offset/N` has any.
    fn xattrs(&self, ino: INodeNo) -> FsResult<Vec<(String, Vec<u8>)>> {
        let key = self.key(ino)?;
        let NodeKey::Offset(p, n) = &key else {
            return Ok(Vec::new());
        };
        let path = key.path();
        let entry = self
            .partition(p)?
            .read_entry(*n)
            .map_err(|e| errno::storage(format!("reading {path}"), &e))?;
        Ok(record_xattrs(&entry, &path))
    }

    fn root_file(&self, name: &str) -> FsResult<PartitionFile> {
        let files = self
            .manager
            .root_files()
            .map_err(|e| errno::storage("listing the data directory", &e))?;
        files
            .into_iter()
            .find(|f| f.name == name)
            .ok_or(Errno::ENOENT)
    }

    /// When `log` last grew: the active segment's mtime. GNU `tail -f` looks
    /// at size and mtime, so this must move with appends.
    fn log_mtime(&self, part: &PartitionLog) -> SystemTime {
        part.segment_bases()
            .last()
            .and_then(|b| part.file(&segment_file_name(*b, "log")).ok())
            .map_or(self.started, |f| f.mtime)
    }

    /// The text of `time/<ms>`: the first offset with a timestamp >= ms and a
    /// newline, or ENOENT past the last timestamp.
    fn time_text(&self, part: &PartitionLog, ms: i64, key: &NodeKey) -> FsResult<String> {
        match part.offset_for_timestamp(ms) {
            Ok(Some(o)) => Ok(format!("{o}\n")),
            Ok(None) => Err(Errno::ENOENT),
            Err(e) => Err(errno::storage(format!("lookup of {}", key.path()), &e)),
        }
    }

    fn attr_of(
        &self,
        ino: u64,
        kind: FileType,
        perm: u16,
        size: u64,
        mtime: SystemTime,
    ) -> FileAttr {
        let perm = if self.read_only { perm & !0o222 } else { perm };
        FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: size.div_ceil(512),
            atime: mtime,
            mtime,
            ctime: mtime,
            crtime: mtime,
            kind,
            perm,
            nlink: if kind == FileType::Directory { 2 } else { 1 },
            uid: self.uid,
            gid: self.gid,
            rdev: 0,
            blksize: BLKSIZE,
            flags: 0,
        }
    }

    /// Attributes of `key`, or ENOENT when the node no longer exists.
    fn attr(&self, key: &NodeKey) -> FsResult<FileAttr> {
        let ino = self.inodes.ino(key);
        let dir = |perm| self.attr_of(ino, FileType::Directory, perm, 0, self.started);
        let file = |perm, size, mtime| self.attr_of(ino, FileType::RegularFile, perm, size, mtime);
        if let NodeKey::RootFile(name) = key {
            let f = self.root_file(name)?;
            return Ok(file(0o444, f.size, f.mtime));
        }
        if let Some(p) = key.partition() {
            let part = self.partition(p)?;
            return Ok(match key {
                NodeKey::Partition(_) | NodeKey::ConfigDir(_) => dir(0o755),
                NodeKey::OffsetDir(_) | NodeKey::TimeDir(_) => dir(0o555),
                NodeKey::Raw(_, name) => {
                    let files = part
                        .files()
                        .map_err(|e| errno::storage(format!("listing {p}"), &e))?;
                    let f = files
                        .iter()
                        .find(|f| *f.name == **name)
                        .ok_or(Errno::ENOENT)?;
                    file(0o444, f.size, f.mtime)
                }
                NodeKey::Log(_) => {
                    let len = part
                        .stream_len()
                        .map_err(|e| errno::storage(format!("sizing {}", key.path()), &e))?;
                    file(0o600, len, self.log_mtime(&part))
                }
                NodeKey::Control(..) => file(0o200, 0, self.started),
                NodeKey::Time(_, ms) => {
                    let text = self.time_text(&part, *ms, key)?;
                    file(0o444, text.len() as u64, self.started)
                }
                NodeKey::Offset(_, n) => {
                    let r = part
                        .read(*n)
                        .map_err(|e| errno::storage(format!("reading {}", key.path()), &e))?;
                    let len = r.value.as_ref().map_or(0, |v| v.len()) as u64;
                    file(0o444, len, timestamp(r.timestamp))
                }
                NodeKey::Status(_) => file(
                    0o444,
                    status_text(&part.status()).len() as u64,
                    SystemTime::now(),
                ),
                NodeKey::Config(_, name) => {
                    let len = part.config().get(name).map_or(0, |v| v.len() + 1);
                    file(0o644, len as u64, self.started)
                }
                NodeKey::Root | NodeKey::RootFile(_) => {
                    unreachable!("root nodes have no partition")
                }
            });
        }
        Ok(dir(0o755))
    }

    /// The child `name` of `parent`, if it exists.
    fn child(&self, parent: &NodeKey, name: &str) -> FsResult<NodeKey> {
        match parent {
            NodeKey::Root => {
                if self.partition(name).is_ok() {
                    return Ok(NodeKey::Partition(inode::name(name)));
                }
                if self.read_only {
                    self.root_file(name)?;
                    return Ok(NodeKey::RootFile(inode::name(name)));
                }
                Err(Errno::ENOENT)
            }
            NodeKey::Partition(p) => {
                if let Some(k) = NodeKey::special(p, name) {
                    return Ok(k);
                }
                let part = self.partition(p)?;
                let files = part
                    .files()
                    .map_err(|e| errno::storage(format!("listing {p}"), &e))?;
                if files.iter().any(|f| f.name == name) {
                    Ok(NodeKey::Raw(p.clone(), inode::name(name)))
                } else {
                    Err(Errno::ENOENT)
                }
            }
            NodeKey::OffsetDir(p) => {
                let n = parse_offset_name(name).ok_or(Errno::ENOENT)?;
                let part = self.partition(p)?;
                if n < part.log_start_offset() || n >= part.log_end_offset() {
                    return Err(Errno::ENOENT);
                }
                Ok(NodeKey::Offset(p.clone(), n))
            }
            NodeKey::TimeDir(p) => {
                // Same canonical-decimal rule as offsets: one name per millisecond.
                let ms = parse_offset_name(name).ok_or(Errno::ENOENT)?;
                let part = self.partition(p)?;
                let key = NodeKey::Time(p.clone(), ms);
                self.time_text(&part, ms, &key)?;
                Ok(key)
            }
            NodeKey::ConfigDir(p) => CONFIG_NAMES
                .iter()
                .find(|c| **c == name)
                .map(|c| NodeKey::Config(p.clone(), c))
                .ok_or(Errno::ENOENT),
            _ => Err(Errno::ENOTDIR),
        }
    }

    fn parent_ino(&self, key: &NodeKey) -> u64 {
        match key {
            NodeKey::Root | NodeKey::Partition(_) => ROOT_INO,
            other => other.partition().map_or(ROOT_INO, |p| {
                self.inodes.ino(&NodeKey::Partition(p.clone()))
            }),
        }
    }

    /// Entries of a directory other than `offset/`, without `.` and `..`.
    fn list(&self, key: &NodeKey) -> FsResult<Vec<(NodeKey, String)>> {
        Ok(match key {
            NodeKey::Root => {
                let mut out: Vec<_> = self
                    .manager
                    .partitions()
                    .iter()
                    .map(|p| {
                        (
                            NodeKey::Partition(inode::name(p.name())),
                            p.name().to_string(),
                        )
                    })
                    .collect();
                if self.read_only {
                    let files = self
                        .manager
                        .root_files()
                        .map_err(|e| errno::storage("listing the data directory", &e))?;
                    out.extend(
                        files
                            .into_iter()
                            .map(|f| (NodeKey::RootFile(inode::name(&f.name)), f.name)),
                    );
                }
                out
            }
            // Any millisecond can be looked up; none is listed.
            NodeKey::TimeDir(p) => {
                self.partition(p)?;
                Vec::new()
            }
            NodeKey::Partition(p) => {
                let part = self.partition(p)?;
                let files = part
                    .files()
                    .map_err(|e| errno::storage(format!("listing {p}"), &e))?;
                let mut out: Vec<_> = files
                    .into_iter()
                    .filter(|f| !SPECIAL_NAMES.contains(&f.name.as_str()))
                    .map(|f| (NodeKey::Raw(p.clone(), inode::name(&f.name)), f.name))
                    .collect();
                for s in SPECIAL_NAMES {
                    out.push((NodeKey::special(p, s).expect("special name"), s.to_string()));
                }
                out
            }
            NodeKey::ConfigDir(p) => {
                self.partition(p)?;
                CONFIG_NAMES
                    .iter()
                    .map(|c| (NodeKey::Config(p.clone(), c), c.to_string()))
                    .collect()
            }
            _ => return Err(Errno::ENOTDIR),
        })
    }

    fn do_readdir(&self, ino: INodeNo, offset: u64, reply: &mut ReplyDirectory) -> FsResult<()> {
        let key = self.key(ino)?;
        let parent = self.parent_ino(&key);
        let mut cookie = offset;
        if cookie == 0 {
            if reply.add(ino, 1, FileType::Directory, ".") {
                return Ok(());
            }
            cookie = 1;
        }
        if cookie == 1 {
            if reply.add(INodeNo(parent), 2, FileType::Directory, "..") {
                return Ok(());
            }
            cookie = 2;
        }
        if let NodeKey::OffsetDir(p) = &key {
            // The cookie of offset N is N + 3, so a listing resumes at the
            // right offset even if retention moved the log start meanwhile.
            let part = self.partition(p)?;
            let start = (cookie as i64 - 2).max(part.log_start_offset());
            for n in start..part.log_end_offset() {
                let ino = self.inodes.ino(&NodeKey::Offset(p.clone(), n));
                if reply.add(
                    INodeNo(ino),
                    n as u64 + 3,
                    FileType::RegularFile,
                    n.to_string(),
                ) {
                    break;
                }
            }
            return Ok(());
        }
        let entries = self.list(&key)?;
        for (i, (child, name)) in entries.iter().enumerate().skip(cookie as usize - 2) {
            let kind = if child.is_dir() {
                FileType::Directory
            } else {
                FileType::RegularFile
            };
            if reply.add(INodeNo(self.inodes.ino(child)), i as u64 + 3, kind, name) {
                break;
            }
        }
        Ok(())
    }

    fn do_open(&self, ino: INodeNo, flags: OpenFlags) -> FsResult<(u64, FopenFlags)> {
        let key = self.key(ino)?;
        let mode = flags.acc_mode();
        let wants_write = mode != OpenAccMode::O_RDONLY;
        let wants_read = mode != OpenAccMode::O_WRONLY;
        let path = key.path();
        if key.is_dir() {
            return Err(Errno::EISDIR);
        }
        if wants_write && self.read_only {
            return Err(refuse(
                Errno::EROFS,
                format!("open of {path} for writing"),
                "the mount is read-only",
            ));
        }
        if wants_write && !key.writable() {
            return Err(refuse(
                Errno::EACCES,
                format!("open of {path} for writing"),
                "it is read-only",
            ));
        }
        if wants_read && !key.readable() {
            return Err(refuse(
                Errno::EACCES,
                format!("open of {path} for reading"),
                "control files are write-only",
            ));
        }
        if let NodeKey::RootFile(name) = &key {
            self.root_file(name)?;
            // Direct I/O: a rw daemon rewrites checkpoints by rename, so
            // cached pages could show an older file.
            let fh = self.handles.insert(OpenFile {
                handle: Handle::RootFile(name.clone()),
                key,
            });
            return Ok((fh, FopenFlags::FOPEN_DIRECT_IO));
        }
        let p = key.partition().ok_or(Errno::EISDIR)?.clone();
        let part = self.partition(&p)?;
        let direct = FopenFlags::FOPEN_DIRECT_IO;
        let (handle, fopen) = match &key {
            NodeKey::Raw(_, name) => {
                // Existence check; reads go through storage's positioned reads.
                let files = part
                    .files()
                    .map_err(|e| errno::storage(format!("listing {p}"), &e))?;
                if !files.iter().any(|f| *f.name == **name) {
                    return Err(Errno::ENOENT);
                }
                // Cached mode keeps read-only mmap working; no KEEP_CACHE, so
                // each open drops pages that an index write made stale.
                (
                    Handle::Raw {
                        partition: part,
                        name: name.clone(),
                    },
                    FopenFlags::empty(),
                )
            }
            // Direct I/O for reads too: the stream grows with every append
            // and shifts when the log start moves, so cached pages would go
            // stale, and the reply length must be what ends a read.
            NodeKey::Log(_) => (
                Handle::Log {
                    partition: part,
                    partial: Vec::new(),
                },
                direct,
            ),
            NodeKey::Time(_, ms) => {
                let text = self.time_text(&part, *ms, &key)?;
                (Handle::Snapshot(text.into_bytes()), direct)
            }
            NodeKey::Control(_, c) => (
                Handle::Control {
                    partition: part,
                    control: *c,
                },
                direct,
            ),
            NodeKey::Status(_) => (
                Handle::Snapshot(status_text(&part.status()).into_bytes()),
                direct,
            ),
            NodeKey::Offset(_, n) => {
                let r = part
                    .read(*n)
                    .map_err(|e| errno::storage(format!("reading {path}"), &e))?;
                (Handle::Snapshot(r.value.unwrap_or_default()), direct)
            }
            NodeKey::Config(_, name) => {
                let text = part
                    .config()
                    .get(name)
                    .map(|v| v + "\n")
                    .unwrap_or_default();
                (
                    Handle::Config {
                        partition: part,
                        name,
                        snapshot: text.into_bytes(),
                    },
                    direct,
                )
            }
            _ => return Err(Errno::EISDIR),
        };
        Ok((self.handles.insert(OpenFile { key, handle }), fopen))
    }

    fn do_read(&self, fh: FileHandle, offset: u64, size: u32) -> FsResult<Vec<u8>> {
        let f = self.handles.get(fh.0).ok_or(Errno::EBADF)?;
        let f = f.lock();
        let slice = |b: &[u8]| {
            let start = (offset as usize).min(b.len());
            let end = start.saturating_add(size as usize).min(b.len());
            b[start..end].to_vec()
        };
        match &f.handle {
            Handle::Snapshot(b) | Handle::Config { snapshot: b, .. } => Ok(slice(b)),
            Handle::Raw { partition, name } => {
                let mut buf = vec![0u8; size as usize];
                let mut got = 0;
                // Cached mode zero-fills a short reply, so read until EOF or full.
                while got < buf.len() {
                    let n = partition
                        .read_file(name, offset + got as u64, &mut buf[got..])
                        .map_err(|e| errno::storage(format!("read of {}", f.key.path()), &e))?;
                    if n == 0 {
                        break;
                    }
                    got += n;
                }
                buf.truncate(got);
                Ok(buf)
            }
            Handle::Log { partition, .. } => {
                let mut buf = vec![0u8; size as usize];
                let mut got = 0;
                while got < buf.len() {
                    let n = partition
                        .read_stream(offset + got as u64, &mut buf[got..])
                        .map_err(|e| errno::storage(format!("read of {}", f.key.path()), &e))?;
                    if n == 0 {
                        break;
                    }
                    got += n;
                }
                buf.truncate(got);
                Ok(buf)
            }
            Handle::RootFile(name) => {
                let mut buf = vec![0u8; size as usize];
                let n = self
                    .manager
                    .read_root_file(name, offset, &mut buf)
                    .map_err(|e| errno::storage(format!("read of {name}"), &e))?;
                buf.truncate(n);
                Ok(buf)
            }
            Handle::Control { .. } => Err(Errno::EBADF),
        }
    }

    fn do_write(&self, fh: FileHandle, data: &[u8]) -> FsResult<u32> {
        let f = self.handles.get(fh.0).ok_or(Errno::EBADF)?;
        let mut f = f.lock();
        let f = &mut *f;
        let path = f.key.path();
        if self.read_only {
            return Err(refuse(
                Errno::EROFS,
                format!("write to {path}"),
                "the mount is read-only",
            ));
        }
        match &mut f.handle {
            Handle::Log { partition, partial } => append_lines(partition, partial, data, &path)?,
            Handle::Control { partition, control } => {
                let r = match control {
                    Control::Roll => partition.roll(),
                    Control::Flush => partition.flush(),
                    Control::DeleteRecords => {
                        delete_records(partition, data, &path)?;
                        return Ok(data.len() as u32);
                    }
                };
                r.map_err(|e| {
                    errno::storage(format!("{} of {}", control.name(), partition.name()), &e)
                })?;
                info!("{} of {} done on request", control.name(), partition.name());
            }
            Handle::Config {
                partition, name, ..
            } => {
                let value = config_value(name, data).map_err(|_| {
                    refuse(
                        Errno::EINVAL,
                        format!("write to {path}"),
                        "the value is not UTF-8",
                    )
                })?;
                partition
                    .set_config(name, value)
                    .map_err(|e| errno::storage(format!("write to {path}"), &e))?;
                info!("{}: set {name}={value}", partition.name());
            }
            Handle::Snapshot(_) | Handle::Raw { .. } | Handle::RootFile(_) => {
                return Err(refuse(
                    Errno::EBADF,
                    format!("write to {path}"),
                    "not open for writing",
                ));
            }
        }
        Ok(data.len() as u32)
    }

    /// The close of a `log` handle: the held unterminated line becomes the last record.
    fn finish(&self, f: &mut OpenFile) {
        if let Handle::Log { partition, partial } = &mut f.handle
            && !partial.is_empty()
        {
            let line = std::mem::take(partial);
            let cfg = partition.config();
            let path = f.key.path();
            match to_records(&[&line], cfg.parse_key, cfg.key_separator.as_bytes()) {
                Err(why) => {
                    refuse(Errno::EINVAL, format!("append at close of {path}"), why);
                }
                Ok(records) => {
                    if let Err(e) = partition.append(&records) {
                        errno::storage(
                            format!("append of the unterminated last line at close of {path}"),
                            &e,
                        );
                    }
                }
            }
        }
    }

    fn do_setattr(
        &self,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        times: bool,
    ) -> FsResult<FileAttr> {
        let key = self.key(ino)?;
        let path = key.path();
        // Times go with a truncate (`echo x > log`); alone they are utimes(2).
        let utimes = times && size.is_none();
        let changes_something =
            mode.is_some() || uid.is_some() || gid.is_some() || size.is_some() || utimes;
        if changes_something && self.read_only {
            return Err(refuse(
                Errno::EROFS,
                format!("setattr of {path}"),
                "the mount is read-only",
            ));
        }
        if mode.is_some() {
            return Err(refuse(
                Errno::EPERM,
                format!("chmod of {path}"),
                "modes are fixed",
            ));
        }
        if uid.is_some() || gid.is_some() {
            return Err(refuse(
                Errno::EPERM,
                format!("chown of {path}"),
                "owners are fixed",
            ));
        }
        if utimes {
            return Err(refuse(
                Errno::EPERM,
                format!("utimes of {path}"),
                "times are fixed: a file's mtime is its data's (the last record's timestamp)",
            ));
        }
        match size {
            None => {}
            Some(_) if key.is_dir() => return Err(Errno::EISDIR),
            // `echo x > log` truncates before it writes: `>` is taken as `>>`.
            Some(0) if key.writable() => {
                debug!("truncate of {path} to 0 accepted, nothing changed")
            }
            Some(n) => {
                return Err(refuse(
                    Errno::EPERM,
                    format!("truncate of {path} to {n} bytes"),
                    "partition files are append-only (only a no-op truncate to 0 of log, control and config files is accepted)",
                ));
            }
        }
        self.attr(&key)
    }

    /// Refusal for operations that would change the set of names in a
    /// directory: EROFS on a read-only mount, else EPERM (or ENOENT if `name`
    /// is not there and `must_exist`).
    fn refuse_change(&self, op: &str, parent: INodeNo, name: &OsStr, must_exist: bool) -> Errno {
        let Ok(pkey) = self.key(parent) else {
            return Errno::ENOENT;
        };
        let path = format!(
            "{}/{}",
            pkey.path().trim_end_matches('/'),
            name.to_string_lossy()
        );
        let path = path.trim_start_matches('/');
        let exists = name.to_str().is_some_and(|n| self.child(&pkey, n).is_ok());
        if must_exist && !exists {
            return Errno::ENOENT;
        }
        if self.read_only {
            return refuse(
                Errno::EROFS,
                format!("{op} of {path}"),
                "the mount is read-only",
            );
        }
        let why = if exists {
            "the tree's names are fixed: partitions are removed with rmdir, segments by retention"
        } else {
            "only mkdir of a <topic>-<partition> in the root creates anything"
        };
        refuse(Errno::EPERM, format!("{op} of {path}"), why)
    }

    fn do_mkdir(&self, parent: INodeNo, name: &OsStr) -> FsResult<FileAttr> {
        let pkey = self.key(parent)?;
        let Some(name) = name.to_str() else {
            return Err(refuse(Errno::EINVAL, "mkdir", "the name is not UTF-8"));
        };
        if pkey != NodeKey::Root {
            if self.child(&pkey, name).is_ok() {
                return Err(Errno::EEXIST);
            }
            return Err(refuse(
                Errno::EPERM,
                format!("mkdir of {}/{name}", pkey.path()),
                "partitions live in the root only",
            ));
        }
        if self.read_only {
            return Err(refuse(
                Errno::EROFS,
                format!("mkdir of {name}"),
                "the mount is read-only",
            ));
        }
        let p = self
            .manager
            .create_partition(name)
            .map_err(|e| errno::storage(format!("mkdir of {name}"), &e))?;
        info!("Created partition {}", p.name());
        self.attr(&NodeKey::Partition(inode::name(name)))
    }

    fn do_rmdir(&self, parent: INodeNo, name: &OsStr) -> FsResult<()> {
        let pkey = self.key(parent)?;
        if pkey != NodeKey::Root {
            return Err(self.refuse_change("rmdir", parent, name, true));
        }
        let name = name.to_str().ok_or(Errno::ENOENT)?;
        self.partition(name)?;
        if self.read_only {
            return Err(refuse(
                Errno::EROFS,
                format!("rmdir of {name}"),
                "the mount is read-only",
            ));
        }
        self.manager
            .delete_partition(name)
            .map_err(|e| errno::storage(format!("rmdir of {name}"), &e))?;
        self.inodes.forget_partition(name);
        info!("Deleted partition {name}");
        Ok(())
    }

    fn do_statfs(&self) -> FsResult<libc::statvfs> {
        let path = std::ffi::CString::new(self.manager.dir().as_os_str().as_encoded_bytes())
            .map_err(|_| Errno::EIO)?;
        // SAFETY: statvfs writes into the zeroed struct it is given.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        if unsafe { libc::statvfs(path.as_ptr(), &mut st) } != 0 {
            return Err(Errno::from(std::io::Error::last_os_error()));
        }
        Ok(st)
    }
}

/// One WRITE on `log`: its complete lines (with any held start of line) become
/// one append; the unterminated rest is held. Nothing of a refused write is
/// appended or held.
fn append_lines(
    partition: &PartitionLog,
    partial: &mut Vec<u8>,
    data: &[u8],
    path: &str,
) -> FsResult<()> {
    let cfg = partition.config();
    let held = partial.len();
    partial.extend_from_slice(data);
    let outcome = (|| {
        let (lines, rest) = split_lines(partial);
        if rest.len() > cfg.max_message_bytes.max(0) as usize {
            return Err(refuse(
                Errno::EMSGSIZE,
                format!("write to {path}"),
                format!(
                    "an unterminated line of {} bytes is already larger than max.message.bytes ({}); nothing of this write was appended",
                    rest.len(),
                    cfg.max_message_bytes
                ),
            ));
        }
        let rest_len = rest.len();
        if lines.is_empty() {
            return Ok(rest_len);
        }
        let records = to_records(&lines, cfg.parse_key, cfg.key_separator.as_bytes())
            .map_err(|why| refuse(Errno::EINVAL, format!("write to {path}"), why))?;
        match partition.append(&records) {
            Ok(info) => {
                debug!(
                    "{path}: appended {} records at {}..={} in {} batches",
                    records.len(),
                    info.first_offset,
                    info.last_offset,
                    info.batches
                );
                Ok(rest_len)
            }
            Err(e) => Err(errno::storage(
                format!(
                    "append of {} records to {path} (nothing of this write was appended)",
                    records.len()
                ),
                &e,
            )),
        }
    })();
    match outcome {
        Ok(rest_len) => {
            let keep_from = partial.len() - rest_len;
            partial.drain(..keep_from);
            Ok(())
        }
        Err(e) => {
            partial.truncate(held);
            Err(e)
        }
    }
}

/// The size-probe protocol of getxattr/listxattr: size 0 asks for the length,
/// a buffer too small gets ERANGE.
fn reply_xattr(reply: ReplyXattr, size: u32, value: &[u8]) {
    if size == 0 {
        reply.size(value.len() as u32);
    } else if value.len() > size as usize {
        reply.error(Errno::ERANGE);
    } else {
        reply.data(value);
    }
}

/// Longest xattr name the kernel passes (XATTR_NAME_MAX).
const XATTR_NAME_MAX: usize = 255;

/// A record's extended attributes, in listing order.
fn record_xattrs(e: &RecordEntry, path: &str) -> Vec<(String, Vec<u8>)> {
    let r = &e.record;
    let mut out = vec![
        (
            "user.kafka.timestamp".to_string(),
            r.timestamp.to_string().into_bytes(),
        ),
        (
            "user.kafka.timestamp_type".to_string(),
            e.timestamp_type.name().as_bytes().to_vec(),
        ),
    ];
    if let Some(k) = &r.key {
        out.push(("user.kafka.key".to_string(), k.clone()));
    }
    for h in &r.headers {
        let name = format!("user.kafka.header.{}", h.key);
        if name.len() > XATTR_NAME_MAX || name.contains('\0') {
            debug!(
                "{path}: header {:?} cannot be an xattr name; not shown",
                h.key
            );
            continue;
        }
        let value = h.value.clone().unwrap_or_default();
        // Kafka allows repeated header keys; an xattr name is unique, so the
        // last value wins, as Kafka's Headers.lastHeader() reads it.
        match out.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = value,
            None => out.push((name, value)),
        }
    }
    out.push((
        "user.kafka.batch_base_offset".to_string(),
        e.batch_base_offset.to_string().into_bytes(),
    ));
    out.push((
        "user.kafka.position".to_string(),
        e.position.to_string().into_bytes(),
    ));
    out
}

/// A write to `delete-records`: Kafka's DeleteRecords on this partition.
fn delete_records(partition: &PartitionLog, data: &[u8], path: &str) -> FsResult<()> {
    let what = || format!("write to {path}");
    let Some(mut offset) = parse_delete_records(data) else {
        return Err(refuse(
            Errno::EINVAL,
            what(),
            format!(
                "{:?} is not an offset (write one canonical decimal offset, or -1 for the log end offset)",
                String::from_utf8_lossy(data).trim()
            ),
        ));
    };
    if offset == -1 {
        offset = partition.log_end_offset();
    }
    match partition.delete_records_before(offset) {
        Ok(start) => {
            info!(
                "{}: delete-records to {offset} done, log start offset is {start}",
                partition.name()
            );
            Ok(())
        }
        Err(StorageError::OffsetOutOfRange {
            log_start_offset,
            log_end_offset,
            ..
        }) => Err(refuse(
            Errno::EINVAL,
            what(),
            format!(
                "offset {offset} is out of range: the log holds {log_start_offset}..{log_end_offset} \
                 and the log start offset can move up to the log end offset {log_end_offset}"
            ),
        )),
        Err(e) => Err(errno::storage(what(), &e)),
    }
}

fn timestamp(ms: i64) -> SystemTime {
    if ms >= 0 {
        UNIX_EPOCH + Duration::from_millis(ms as u64)
    } else {
        UNIX_EPOCH
    }
}

impl Filesystem for CommitFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        if let Err(max) = config.set_max_write(MAX_WRITE) {
            warn!("the kernel caps write requests at {max} bytes");
        }
        // Size/mtime changes seen by getattr drop stale cached pages of raw files.
        let _ = config.add_capabilities(InitFlags::FUSE_AUTO_INVAL_DATA);
        Ok(())
    }

    fn destroy(&mut self) {
        for f in self.handles.drain() {
            self.finish(&mut f.lock());
        }
        if let Some(f) = self.on_destroy.lock().take() {
            f();
        }
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let r = self.guard("lookup", || {
            let pkey = self.key(parent)?;
            let key = self.child(&pkey, name.to_str().ok_or(Errno::ENOENT)?)?;
            self.attr(&key)
        });
        match r {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.guard("getattr", || self.attr(&self.key(ino)?)) {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        match self.guard("setattr", || {
            let times = atime.is_some() || mtime.is_some();
            self.do_setattr(ino, mode, uid, gid, size, times)
        }) {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(e) => reply.error(e),
        }
    }

    fn mknod(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        reply.error(self.refuse_create("mknod", parent, name));
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        match self.guard("mkdir", || self.do_mkdir(parent, name)) {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        reply.error(self.refuse_change("unlink", parent, name, true));
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.guard("rmdir", || self.do_rmdir(parent, name)) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn symlink(
        &self,
        _req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        _target: &std::path::Path,
        reply: ReplyEntry,
    ) {
        reply.error(self.refuse_create("symlink", parent, link_name));
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _newparent: INodeNo,
        _newname: &OsStr,
        _flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        reply.error(self.refuse_change("rename", parent, name, true));
    }

    fn link(
        &self,
        _req: &Request,
        _ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        reply.error(self.refuse_create("link", newparent, newname));
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        match self.guard("open", || self.do_open(ino, flags)) {
            Ok((fh, fopen)) => reply.opened(FileHandle(fh), fopen),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        match self.guard("read", || self.do_read(fh, offset, size)) {
            Ok(data) => reply.data(&data),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        // The offset is ignored: `log` is append-only and the kernel's offset
        // is only its cached idea of the size.
        match self.guard("write", || self.do_write(fh, data)) {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(e),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        // FLUSH comes on every close of every dup of a descriptor, more than
        // once per shell redirect: it is never a commit point.
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let r = self.guard("release", || {
            if let Some(f) = self.handles.remove(fh.0) {
                self.finish(&mut f.lock());
            }
            Ok(())
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let r = self.guard("fsync", || {
            let f = self.handles.get(fh.0).ok_or(Errno::EBADF)?;
            let f = f.lock();
            if let Handle::Log { partition, .. } = &f.handle {
                partition
                    .flush()
                    .map_err(|e| errno::storage(format!("fsync of {}", f.key.path()), &e))?;
            }
            Ok(())
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        match self.guard("readdir", || self.do_readdir(ino, offset, &mut reply)) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        match self.guard("statfs", || self.do_statfs()) {
            Ok(st) => reply.statfs(
                st.f_blocks,
                st.f_bfree,
                st.f_bavail,
                st.f_files,
                st.f_ffree,
                st.f_bsize as u32,
                255,
                st.f_frsize as u32,
            ),
            Err(e) => reply.error(e),
        }
    }

    fn setxattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        name: &OsStr,
        _value: &[u8],
        _flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        let what = self.key(ino).map(|k| k.path()).unwrap_or_default();
        let e = if self.read_only {
            Errno::EROFS
        } else {
            Errno::EPERM
        };
        reply.error(refuse(
            e,
            format!("setxattr {name:?} on {what}"),
            "extended attributes are not kept",
        ));
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let r = self.guard("getxattr", || {
            let attrs = self.xattrs(ino)?;
            let want = name.as_encoded_bytes();
            attrs
                .into_iter()
                .find(|(n, _)| n.as_bytes() == want)
                .map(|(_, v)| v)
                .ok_or(Errno::NO_XATTR)
        });
        match r {
            Ok(v) => reply_xattr(reply, size, &v),
            Err(e) => reply.error(e),
        }
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let r = self.guard("listxattr", || {
            let mut list = Vec::new();
            for (n, _) in self.xattrs(ino)? {
                list.extend_from_slice(n.as_bytes());
                list.push(0);
            }
            Ok(list)
        });
        match r {
            Ok(list) => reply_xattr(reply, size, &list),
            Err(e) => reply.error(e),
        }
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let what = self.key(ino).map(|k| k.path()).unwrap_or_default();
        let e = if self.read_only {
            Errno::EROFS
        } else {
            Errno::EPERM
        };
        reply.error(refuse(
            e,
            format!("removexattr {name:?} on {what}"),
            "extended attributes are not kept",
        ));
    }

    fn access(&self, _req: &Request, ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        match self.key(ino) {
            Ok(_) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        reply.error(self.refuse_create("create", parent, name));
    }
}

impl CommitFs {
    /// create, mknod, symlink, link: nothing but mkdir adds names to the tree.
    fn refuse_create(&self, op: &str, parent: INodeNo, name: &OsStr) -> Errno {
        let exists = self
            .key(parent)
            .ok()
            .zip(name.to_str())
            .is_some_and(|(p, n)| self.child(&p, n).is_ok());
        if exists {
            return Errno::EEXIST;
        }
        self.refuse_change(op, parent, name, false)
    }
}
