//! The FUSE edge: maps kernel requests onto the storage library and errno.
//!
//! It never opens segment files itself: everything goes through
//! [`LogManager`] and [`PartitionLog`]. Every refusal is an errno plus one log
//! line saying what was refused and why.

mod errno;
mod handle;
mod inode;
mod node;
mod passthrough;

use std::collections::HashMap;
use std::ffi::OsStr;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    AccessFlags, BackingId, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags,
    Generation, INodeNo, InitFlags, KernelConfig, LockOwner, OpenAccMode, OpenFlags, RenameFlags,
    ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen,
    ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use log::{debug, error, info, warn};

use self::errno::{FsResult, refuse};
use self::handle::{Handle, HandleTable, OpenFile, push_lines, to_records};
use self::inode::{InodeTable, ROOT_INO};
use self::node::{
    Control, NodeKey, SPECIAL_NAMES, config_value, parse_delete_records, parse_offset_name,
    status_text,
};
use self::passthrough::{Mode, Passthrough};
use crate::storage::names::parse_segment_file_name;
use crate::storage::{
    CONFIG_NAMES, LogManager, PartitionFile, PartitionLog, RecordEntry, StorageError,
    segment_file_name,
};

/// Sizes, `status` and the partition set change with every append, roll or
/// mkdir, so the kernel must ask every time: stale sizes must never show.
const TTL: Duration = Duration::ZERO;
/// Nodes whose attributes never change while they exist: directories, sealed
/// segment files and `offset/N`. The kernel may keep their attributes (no GETATTR before
/// each cached read); open still asks the daemon, so a segment deleted by
/// retention or an offset below a new log start fails to open at once. Only
/// `stat` of such a name can show it for up to this long after it went.
const IMMUTABLE_TTL: Duration = Duration::from_secs(10);
/// Large enough that `cp` and `cat` move 1 MiB per request.
const BLKSIZE: u32 = 1 << 20;
const MAX_WRITE: u32 = 1 << 20;

pub struct CommitFs {
    manager: Arc<LogManager>,
    inodes: InodeTable,
    handles: HandleTable,
    passthrough: Passthrough,
    /// The highest active segment base seen per partition name.
    active_bases: parking_lot::Mutex<HashMap<String, (Weak<PartitionLog>, i64)>>,
    read_only: bool,
    started: SystemTime,
    uid: u32,
    gid: u32,
    on_destroy: parking_lot::Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl CommitFs {
    /// Attributes of the tree are derived from records, never stored.
    fn refuse_xattr_change(&self, op: &str, ino: INodeNo, name: &OsStr) -> Errno {
        let what = self.key(ino).map(|k| k.path()).unwrap_or_default();
        let e = if self.read_only {
            Errno::EROFS
        } else {
            Errno::EPERM
        };
        refuse(
            e,
            format!("{op} {name:?} on {what}"),
            "extended attributes are not kept",
        )
    }

    pub fn new(manager: Arc<LogManager>) -> CommitFs {
        let read_only = manager.read_only();
        CommitFs {
            manager,
            inodes: InodeTable::default(),
            handles: HandleTable::default(),
            passthrough: Passthrough::default(),
            active_bases: parking_lot::Mutex::default(),
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
        part.active_segment_base()
            .and_then(|b| part.file(&segment_file_name(b, "log")).ok())
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
        self.attr_ttl(key).map(|(a, _)| a)
    }

    /// Attributes of `key` and how long the kernel may keep them.
    fn attr_ttl(&self, key: &NodeKey) -> FsResult<(FileAttr, Duration)> {
        let mut ttl = TTL;
        let attr = self.attr_with(key, &mut ttl)?;
        Ok((attr, ttl))
    }

    fn attr_with(&self, key: &NodeKey, ttl: &mut Duration) -> FsResult<FileAttr> {
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
                // A directory's attributes never change.
                NodeKey::Partition(_) | NodeKey::ConfigDir(_) => {
                    *ttl = IMMUTABLE_TTL;
                    dir(0o755)
                }
                NodeKey::OffsetDir(_) | NodeKey::TimeDir(_) => {
                    *ttl = IMMUTABLE_TTL;
                    dir(0o555)
                }
                NodeKey::Raw(_, name) => {
                    // Sealed before sized: a segment sealed now has its final size.
                    if self.is_sealed(&part, name) {
                        *ttl = IMMUTABLE_TTL;
                    }
                    let f = raw_file(&part, name, key)?;
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
                    *ttl = IMMUTABLE_TTL;
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
                let key = NodeKey::Raw(p.clone(), inode::name(name));
                raw_file(&part, name, &key)?;
                Ok(key)
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

    /// A file of a sealed segment (not the active one): its bytes never change
    /// while it exists. The active base only grows, so a base below the last
    /// one seen is sealed without asking storage for every base (an `ls -l` of
    /// a partition with 10,000 segments would copy the list 30,000 times).
    fn is_sealed(&self, part: &Arc<PartitionLog>, name: &str) -> bool {
        let Some((base, "log" | "index" | "timeindex")) = parse_segment_file_name(name) else {
            return false;
        };
        // The Weak tells this partition from a later one of the same name
        // (it keeps the allocation, so the address is not reused meanwhile).
        let this = |(p, _): &(Weak<PartitionLog>, i64)| std::ptr::eq(p.as_ptr(), Arc::as_ptr(part));
        if let Some(seen) = self.active_bases.lock().get(part.name())
            && this(seen)
            && base < seen.1
        {
            return true;
        }
        let Some(active) = part.active_segment_base() else {
            return false;
        };
        let mut bases = self.active_bases.lock();
        match bases.get_mut(part.name()) {
            Some(seen) if this(seen) => seen.1 = seen.1.max(active),
            _ => {
                bases.insert(part.name().to_string(), (Arc::downgrade(part), active));
            }
        }
        base < active
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

    fn do_open(&self, ino: INodeNo, flags: OpenFlags, reply: &ReplyOpen) -> FsResult<Opened> {
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
            return Ok((fh, FopenFlags::FOPEN_DIRECT_IO, None));
        }
        let p = key.partition().ok_or(Errno::EISDIR)?.clone();
        let part = self.partition(&p)?;
        let direct = FopenFlags::FOPEN_DIRECT_IO;
        let (handle, fopen) = match &key {
            NodeKey::Raw(_, name) => {
                // Sealed segments and indexes (of any segment: an active index
                // changes only in place) are passed through. The active `.log`
                // is not: the kernel would read past its published size, into
                // a batch still being written.
                let sealed = self.is_sealed(&part, name);
                let want = sealed
                    || matches!(
                        parse_segment_file_name(name),
                        Some((_, "index" | "timeindex"))
                    );
                let mode = self.passthrough.open(ino.0, want, || {
                    let file = part
                        .open_file(name)
                        .map_err(|e| match errno::errno_of(&e) {
                            Errno::ENOENT => Errno::ENOENT,
                            _ => errno::storage(format!("open of {path}"), &e),
                        })?;
                    Ok(reply.open_backing(&file))
                })?;
                if let Mode::Cached = mode {
                    // Existence check; reads go through storage's positioned reads.
                    if let Err(e) = raw_file(&part, name, &key) {
                        self.passthrough.release(ino.0, mode);
                        return Err(e);
                    }
                }
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
                // A sealed `.log` served by the daemon never changes, so its
                // pages may outlive the open. The active one is read with
                // direct I/O: under concurrent GETATTRs the kernel can keep a
                // page it zero-filled past an older end (a page it could not
                // drop while another reader held it), and a reader would see
                // zeros where batches are. `FUSE_DIRECT_IO_ALLOW_MMAP` keeps
                // read-only mmap working there. Other files drop their pages
                // at each open (an index write in place may have made them stale).
                let active_log =
                    backing.is_none() && name.ends_with(".log") && !self.is_sealed(&part, name);
                let fopen = if active_log {
                    FopenFlags::FOPEN_DIRECT_IO
                } else if backing.is_none() && name.ends_with(".log") {
                    FopenFlags::FOPEN_KEEP_CACHE
                } else {
                    FopenFlags::empty()
                };
                let fh = self.handles.insert(OpenFile {
                    key: key.clone(),
                    handle: Handle::Raw {
                        partition: part,
                        name: name.clone(),
                        ino: ino.0,
                        backing: backing.clone(),
                    },
                });
                return Ok((fh, fopen, backing));
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
        Ok((self.handles.insert(OpenFile { key, handle }), fopen, None))
    }

    /// Reads into `out` (a per-thread buffer: no allocation or zeroing per
    /// request). The handle's lock is held only to see what it is, so that
    /// the kernel's parallel readahead requests on one handle run in parallel.
    fn do_read(&self, fh: FileHandle, offset: u64, size: u32, out: &mut Vec<u8>) -> FsResult<()> {
        enum Source {
            Raw(Arc<PartitionLog>, Arc<str>),
            Stream(Arc<PartitionLog>),
            RootFile(Arc<str>),
        }
        out.clear();
        let (source, path) = {
            let f = self.handles.get(fh.0).ok_or(Errno::EBADF)?;
            let f = f.lock();
            let source = match &f.handle {
                Handle::Snapshot(b) | Handle::Config { snapshot: b, .. } => {
                    let start = (offset as usize).min(b.len());
                    let end = start.saturating_add(size as usize).min(b.len());
                    out.extend_from_slice(&b[start..end]);
                    return Ok(());
                }
                Handle::Raw {
                    partition, name, ..
                } => Source::Raw(partition.clone(), name.clone()),
                Handle::Log { partition, .. } => Source::Stream(partition.clone()),
                Handle::RootFile(name) => Source::RootFile(name.clone()),
                Handle::Control { .. } => return Err(Errno::EBADF),
            };
            (source, f.key.clone())
        };
        out.resize(size as usize, 0);
        let mut got = 0;
        // Cached mode zero-fills a short reply, so read until EOF or full.
        while got < out.len() {
            let at = offset + got as u64;
            let n = match &source {
                Source::Raw(partition, name) => partition.read_file(name, at, &mut out[got..]),
                Source::Stream(partition) => partition.read_stream(at, &mut out[got..]),
                Source::RootFile(name) => self.manager.read_root_file(name, at, &mut out[got..]),
            }
            .map_err(|e| errno::storage(format!("read of {}", path.path()), &e))?;
            if n == 0 {
                break;
            }
            got += n;
        }
        out.truncate(got);
        Ok(())
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
        self.active_bases.lock().remove(name);
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
    let max = cfg.max_message_bytes.max(0) as usize;
    let too_long = |len: usize| {
        refuse(
            Errno::EMSGSIZE,
            format!("write to {path}"),
            format!(
                "an unterminated line of {len} bytes is already larger than max.message.bytes ({}); nothing of this write was appended",
                cfg.max_message_bytes
            ),
        )
    };
    // No newline: the whole write joins the held start of a line.
    let Some(first_nl) = memchr::memchr(b'\n', data) else {
        if partial.len() + data.len() > max {
            return Err(too_long(partial.len() + data.len()));
        }
        partial.extend_from_slice(data);
        return Ok(());
    };
    // Only the first line (held start + this write's first piece) is copied;
    // the other records point into the request's own buffer.
    let held = partial.len();
    partial.extend_from_slice(&data[..first_nl]);
    let mut lines = Vec::with_capacity(data.len() / 64 + 1);
    lines.push(&partial[..]);
    let rest = push_lines(&data[first_nl + 1..], &mut lines);
    let outcome = (|| {
        if rest.len() > max {
            return Err(too_long(rest.len()));
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
                Ok(())
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
    drop(lines);
    match outcome {
        Ok(()) => {
            partial.clear();
            partial.extend_from_slice(rest);
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

/// How long the kernel may trust that `key`'s name exists. The names inside a
/// partition directory other than its raw files, and the partition itself,
/// are fixed for the life of the partition, which only an rmdir through this
/// mount ends (the kernel then drops the entries itself); so a path like
/// `t-0/offset/N` costs one LOOKUP, not three. Other names (raw files, the
/// data dir's own files) last as long as their attributes. `log` is not
/// cached either: every path lookup of it sizes the stream, which is also when
/// storage saves its stream-length cache (the torture tests count on that).
fn entry_ttl(key: &NodeKey, attr_ttl: Duration) -> Duration {
    match key {
        NodeKey::Partition(_)
        | NodeKey::OffsetDir(_)
        | NodeKey::TimeDir(_)
        | NodeKey::Control(..)
        | NodeKey::Status(_)
        | NodeKey::ConfigDir(_)
        | NodeKey::Config(..) => IMMUTABLE_TTL,
        _ => attr_ttl,
    }
}

/// A raw file of the partition, or ENOENT (quietly: shells probe names).
fn raw_file(part: &PartitionLog, name: &str, key: &NodeKey) -> FsResult<PartitionFile> {
    part.file(name).map_err(|e| match errno::errno_of(&e) {
        Errno::ENOENT => Errno::ENOENT,
        _ => errno::storage(format!("stat of {}", key.path()), &e),
    })
}

fn timestamp(ms: i64) -> SystemTime {
    if ms >= 0 {
        UNIX_EPOCH + Duration::from_millis(ms as u64)
    } else {
        UNIX_EPOCH
    }
}

/// A new handle: its number, open flags, and the backing file the kernel
/// reads instead of asking the daemon.
type Opened = (u64, FopenFlags, Option<Arc<BackingId>>);

impl Filesystem for CommitFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        if let Err(max) = config.set_max_write(MAX_WRITE) {
            warn!("the kernel caps write requests at {max} bytes");
        }
        // Passthrough needs CAP_SYS_ADMIN for its ioctl: only root asks. Depth
        // 2 lets the data dir sit on a stacked filesystem (overlayfs).
        // SAFETY: geteuid cannot fail.
        let root = unsafe { libc::geteuid() } == 0;
        // COMMITFS_PASSTHROUGH=0 turns it off (to test or compare the fallback).
        let allowed = std::env::var_os("COMMITFS_PASSTHROUGH").is_none_or(|v| v != "0");
        if root
            && allowed
            && config.add_capabilities(InitFlags::FUSE_PASSTHROUGH).is_ok()
            && config.set_max_stack_depth(2).is_ok()
        {
            self.passthrough.enable();
            info!("FUSE passthrough on: the kernel reads sealed segments and indexes itself");
        } else {
            info!("FUSE passthrough off: the daemon serves every raw file read");
        }
        // Direct I/O on the active `.log` must not cost read-only mmap.
        if config
            .add_capabilities(InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP)
            .is_err()
        {
            warn!(
                "the kernel cannot mmap direct-I/O files: mmap of an active .log fails with ENODEV"
            );
        }
        // No FUSE_AUTO_INVAL_DATA: it makes every cached read() ask GETATTR
        // first, a round trip per read of a raw file. Size changes drop stale
        // pages without it; files that change in place (indexes, Kafka's side
        // files) are opened without FOPEN_KEEP_CACHE, so each open drops theirs.
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
            let (attr, ttl) = self.attr_ttl(&key)?;
            Ok((attr, ttl, entry_ttl(&key, ttl)))
        });
        match r {
            Ok((attr, ttl, entry)) => reply.entry_with_ttls(&ttl, &entry, &attr, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.guard("getattr", || self.attr_ttl(&self.key(ino)?)) {
            Ok((attr, ttl)) => reply.attr(&ttl, &attr),
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
        match self.guard("open", || self.do_open(ino, flags, &reply)) {
            Ok((fh, fopen, Some(id))) => reply.opened_passthrough(FileHandle(fh), fopen, &id),
            Ok((fh, fopen, None)) => reply.opened(FileHandle(fh), fopen),
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
        thread_local! {
            static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        BUF.with_borrow_mut(|buf| {
            match self.guard("read", || self.do_read(fh, offset, size, buf)) {
                Ok(()) => reply.data(buf),
                Err(e) => reply.error(e),
            }
            // A rare huge read does not pin its buffer for the life of the thread.
            if buf.capacity() > 4 * MAX_WRITE as usize {
                *buf = Vec::new();
            }
        });
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
        // once per shell redirect: it is never a commit point. ENOSYS tells
        // the kernel so once: it sends no FLUSH again, a round trip less per close.
        reply.error(Errno::ENOSYS);
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
                let mut f = f.lock();
                self.finish(&mut f);
                if let Handle::Raw { ino, backing, .. } = &mut f.handle {
                    let mode = backing.take().map_or(Mode::Cached, Mode::Passthrough);
                    self.passthrough.release(*ino, mode);
                }
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
        reply.error(self.refuse_xattr_change("setxattr", ino, name));
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
        reply.error(self.refuse_xattr_change("removexattr", ino, name));
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
