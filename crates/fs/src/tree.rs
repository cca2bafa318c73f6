//! The tree's state and its names: which node a name is (`offset/N` and
//! `time/<ms>` are resolved here, in [`Tree::child`]) and each node's
//! attributes. Everything here is the tree's own semantics over a
//! [`Backend`]; the kernel is the FUSE adapter's business.

use std::ffi::OsStr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::error::{FsError, FsResult};
use super::handle::HandleTable;
use super::inode::{self, InodeTable, ROOT_INO};
use super::node::{Control, GROUPS, NodeKey, outside_partitions, parse_offset_name};
use super::passthrough::Passthrough;
use commitfs_backend::{
    Backend, CommittedStream, ErrorKind, FileInfo, IO_SIZE, LineFormat, Partition, line_format,
};

/// Sizes, `status` and the partition set change with every append, roll or
/// mkdir, so the kernel must ask every time: stale sizes must never show.
pub const TTL: Duration = Duration::ZERO;
/// Nodes whose attributes never change while they exist: directories, sealed
/// segment files and `offset/N`. The kernel may keep their attributes (no GETATTR before
/// each cached read); open still asks the daemon, so a segment deleted by
/// retention or an offset below a new log start fails to open at once. Only
/// `stat` of such a name can show it for up to this long after it went.
pub const IMMUTABLE_TTL: Duration = Duration::from_secs(10);
/// On a read-only mount the directory may belong to a running broker, whose
/// retention deletes sealed segments (and the offsets in them) and whose
/// admin deletes partitions, with no request of ours to tell the kernel:
/// there, nothing is kept longer than this, so a name that went stops
/// showing within about a second.
pub const FOLLOW_TTL: Duration = Duration::from_secs(1);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeType {
    Directory,
    RegularFile,
}

/// A node's attributes, as `stat` shows them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attr {
    pub ino: u64,
    pub kind: NodeType,
    pub perm: u16,
    pub size: u64,
    pub mtime: SystemTime,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub blksize: u32,
}

/// The answer to a lookup: the node's attributes and how long the kernel
/// may keep them and the name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub attr: Attr,
    pub attr_ttl: Duration,
    pub entry_ttl: Duration,
}

pub struct Tree {
    pub(super) backend: Arc<dyn Backend>,
    pub(super) inodes: InodeTable,
    pub(super) handles: HandleTable,
    pub(super) passthrough: Passthrough,
    pub(super) read_only: bool,
    pub(super) started: SystemTime,
    uid: u32,
    gid: u32,
}

impl Tree {
    pub fn new(backend: Arc<dyn Backend>) -> Tree {
        Tree {
            read_only: backend.read_only(),
            backend,
            inodes: InodeTable::default(),
            handles: HandleTable::default(),
            passthrough: Passthrough::default(),
            started: SystemTime::now(),
            // SAFETY: getuid/getgid cannot fail.
            uid: unsafe { libc::getuid() },
            gid: unsafe { libc::getgid() },
        }
    }

    pub fn read_only(&self) -> bool {
        self.read_only
    }

    /// Lets the kernel read immutable raw files itself (the adapter calls
    /// this once the kernel has agreed to passthrough).
    pub fn enable_passthrough(&self) {
        self.passthrough.enable();
    }

    /// How long the kernel may keep what does not change while it exists.
    pub(super) fn lasting_ttl(&self) -> Duration {
        if self.read_only {
            FOLLOW_TTL
        } else {
            IMMUTABLE_TTL
        }
    }

    /// The one refusal of every change on a read-only mount.
    pub(super) fn check_writable(&self, what: impl std::fmt::Display) -> FsResult<()> {
        if self.read_only {
            return Err(FsError::refuse(libc::EROFS, what, "the mount is read-only"));
        }
        Ok(())
    }

    /// The refusal of every change to a partition of a topic Kafka itself
    /// writes (its internal topics, KRaft's metadata log): clients of a
    /// broker cannot write them either, and a forged record there would be
    /// loaded as the broker's own state. Reading them stays allowed.
    pub(super) fn check_not_kafka_owned(
        &self,
        partition: &str,
        what: impl std::fmt::Display,
    ) -> FsResult<()> {
        match kafka_owned_topic(partition) {
            Some(topic) => Err(FsError::refuse(
                libc::EPERM,
                what,
                format!(
                    "{topic} is Kafka's own topic, written by the broker only (it can be read)"
                ),
            )),
            None => Ok(()),
        }
    }

    /// [`Tree::check_writable`], then [`Tree::check_not_kafka_owned`] for a
    /// node inside a partition.
    pub(super) fn check_changeable(
        &self,
        key: &NodeKey,
        what: impl std::fmt::Display,
    ) -> FsResult<()> {
        self.check_writable(&what)?;
        match key.partition() {
            Some(p) => self.check_not_kafka_owned(p, what),
            None => Ok(()),
        }
    }

    pub(super) fn key(&self, ino: u64) -> FsResult<NodeKey> {
        self.inodes.key(ino).ok_or(FsError::quiet(libc::ENOENT))
    }

    pub(super) fn partition(&self, name: &str) -> FsResult<Arc<dyn Partition>> {
        self.backend.partition(name).map_err(|e| match e.kind {
            ErrorKind::NotFound => FsError::quiet(libc::ENOENT),
            _ => FsError::backend(format!("opening partition {name}"), &e),
        })
    }

    /// The special child `name` of partition `p`, if the partition has it
    /// (`roll` and `flush` only where the backend offers them).
    pub(super) fn special(
        &self,
        part: &dyn Partition,
        p: &Arc<str>,
        name: &str,
    ) -> Option<NodeKey> {
        match NodeKey::special(p, name)? {
            NodeKey::Control(_, Control::Roll | Control::Flush) if part.log_control().is_none() => {
                None
            }
            NodeKey::Control(_, Control::Compact) if part.compaction().is_none() => None,
            NodeKey::Committed(_) if part.committed().is_none() => None,
            key => Some(key),
        }
    }

    /// The root's own files, where the backend has them (else none).
    pub(super) fn root_files(&self) -> FsResult<Vec<FileInfo>> {
        match self.backend.root_files() {
            Some(files) => files
                .list()
                .map_err(|e| FsError::backend("listing the data directory", &e)),
            None => Ok(Vec::new()),
        }
    }

    pub(super) fn root_file(&self, name: &str) -> FsResult<FileInfo> {
        self.root_files()?
            .into_iter()
            .find(|f| f.name == name)
            .ok_or(FsError::quiet(libc::ENOENT))
    }

    /// The names under `config/`: the backend's topic configs, then the
    /// tree's own line format settings.
    pub(super) fn config_names(&self) -> impl Iterator<Item = &'static str> {
        let topic = self.backend.config_names().iter().copied();
        topic.chain(line_format::NAMES.iter().copied())
    }

    /// A raw file of the partition, or ENOENT (quietly: shells probe names).
    pub(super) fn raw_file(
        &self,
        part: &dyn Partition,
        name: &str,
        key: &NodeKey,
    ) -> FsResult<FileInfo> {
        let files = part.raw_files().ok_or(FsError::quiet(libc::ENOENT))?;
        files.file(name).map_err(|e| match e.kind {
            ErrorKind::NotFound => FsError::quiet(libc::ENOENT),
            _ => FsError::backend(format!("stat of {}", key.path()), &e),
        })
    }

    /// The text of `time/<ms>`: the first offset with a timestamp >= ms and a
    /// newline, or ENOENT past the last timestamp.
    pub(super) fn time_text(
        &self,
        part: &dyn Partition,
        ms: i64,
        key: &NodeKey,
    ) -> FsResult<String> {
        match part.offset_for_timestamp(ms) {
            Ok(Some(o)) => Ok(format!("{o}\n")),
            Ok(None) => Err(FsError::quiet(libc::ENOENT)),
            Err(e) => Err(FsError::backend(format!("lookup of {}", key.path()), &e)),
        }
    }

    pub(super) fn status_text(&self, part: &dyn Partition, key: &NodeKey) -> FsResult<String> {
        let status = part
            .status()
            .map_err(|e| FsError::backend(format!("reading {}", key.path()), &e))?;
        Ok(status.text())
    }

    pub(super) fn config_text(
        &self,
        part: &dyn Partition,
        name: &str,
        key: &NodeKey,
    ) -> FsResult<String> {
        let value = match LineFormat::is_setting(name) {
            true => part.line_format().get(name),
            false => part
                .config(name)
                .map_err(|e| FsError::backend(format!("reading {}", key.path()), &e))?,
        };
        Ok(value.map(|v| v + "\n").unwrap_or_default())
    }

    /// The node `name` in `parent`, with its attributes.
    pub fn lookup(&self, parent: u64, name: &OsStr) -> FsResult<Entry> {
        let pkey = self.key(parent)?;
        let name = name.to_str().ok_or(FsError::quiet(libc::ENOENT))?;
        let key = self.child(&pkey, name)?;
        let (attr, attr_ttl) = self.attr_ttl(&key)?;
        self.inodes.looked_up(&key, attr.ino);
        Ok(Entry {
            attr,
            attr_ttl,
            entry_ttl: entry_ttl(&key, attr_ttl, self.lasting_ttl()),
        })
    }

    /// The kernel dropped `n` lookups of `ino`.
    pub fn forget(&self, ino: u64, n: u64) {
        self.inodes.forget(ino, n);
    }

    /// Inode numbers the tree keeps (computed ones, as of `offset/N`, take none).
    pub fn inodes_in_use(&self) -> usize {
        self.inodes.in_use()
    }

    /// Attributes of a node and how long the kernel may keep them.
    pub fn getattr(&self, ino: u64) -> FsResult<(Attr, Duration)> {
        self.attr_ttl(&self.key(ino)?)
    }

    /// The child `name` of `parent`, if it exists.
    pub(super) fn child(&self, parent: &NodeKey, name: &str) -> FsResult<NodeKey> {
        let enoent = || FsError::quiet(libc::ENOENT);
        match parent {
            NodeKey::Root => {
                if name == GROUPS && self.has_groups() {
                    return Ok(NodeKey::GroupsDir);
                }
                if self.partition(name).is_ok() {
                    return Ok(NodeKey::Partition(inode::name(name)));
                }
                self.root_file(name)?;
                Ok(NodeKey::RootFile(inode::name(name)))
            }
            NodeKey::Partition(p) => {
                let part = self.partition(p)?;
                if let Some(k) = self.special(&*part, p, name) {
                    return Ok(k);
                }
                let key = NodeKey::Raw(p.clone(), inode::name(name));
                self.raw_file(&*part, name, &key)?;
                Ok(key)
            }
            NodeKey::OffsetDir(p) => {
                let n = parse_offset_name(name).ok_or_else(enoent)?;
                let part = self.partition(p)?;
                let contains = part.contains(n).map_err(|e| {
                    FsError::backend(format!("reading the offsets of {}", parent.path()), &e)
                })?;
                if !contains {
                    return Err(enoent());
                }
                Ok(NodeKey::Offset(p.clone(), n))
            }
            NodeKey::TimeDir(p) => {
                // Same canonical-decimal rule as offsets: one name per millisecond.
                let ms = parse_offset_name(name).ok_or_else(enoent)?;
                let part = self.partition(p)?;
                let key = NodeKey::Time(p.clone(), ms);
                self.time_text(&*part, ms, &key)?;
                Ok(key)
            }
            NodeKey::ConfigDir(p) => self
                .config_names()
                .find(|c| *c == name)
                .map(|c| NodeKey::Config(p.clone(), c))
                .ok_or_else(enoent),
            NodeKey::GroupsDir | NodeKey::Group(_) | NodeKey::GroupOffsetsDir(_) => {
                self.group_child(parent, name)
            }
            _ => Err(FsError::quiet(libc::ENOTDIR)),
        }
    }

    pub(super) fn attr(&self, key: &NodeKey) -> FsResult<Attr> {
        self.attr_ttl(key).map(|(a, _)| a)
    }

    /// Attributes of `key` and how long the kernel may keep them, or ENOENT
    /// when the node no longer exists.
    pub(super) fn attr_ttl(&self, key: &NodeKey) -> FsResult<(Attr, Duration)> {
        let ino = self.inodes.ino(key);
        let (kind, perm) = self.mode(key);
        let attr = |size, mtime| self.attr_of(ino, kind, perm, size, mtime);
        let lasting = self.lasting_ttl();
        let dir = || (attr(0, self.started), lasting);
        let Some(p) = key.partition() else {
            return Ok(match key {
                NodeKey::RootFile(name) => {
                    let f = self.root_file(name)?;
                    (attr(f.size, f.mtime), TTL)
                }
                NodeKey::GroupFile(..) | NodeKey::GroupOffset(..) => {
                    let (bytes, mtime) = self.group_file(key)?;
                    (attr(bytes.len() as u64, mtime), TTL)
                }
                // A group comes and goes with its members and commits.
                NodeKey::Group(_) | NodeKey::GroupOffsetsDir(_) => {
                    self.group_listing(key)?;
                    (attr(0, self.started), TTL)
                }
                _ => (attr(0, self.started), TTL),
            });
        };
        let part = self.partition(p)?;
        Ok(match key {
            // A directory's attributes never change.
            NodeKey::Partition(_)
            | NodeKey::ConfigDir(_)
            | NodeKey::OffsetDir(_)
            | NodeKey::TimeDir(_) => dir(),
            NodeKey::Raw(_, name) => {
                let f = self.raw_file(&*part, name, key)?;
                let ttl = if f.sealed { lasting } else { TTL };
                (attr(f.size, f.mtime), ttl)
            }
            NodeKey::Log(_) => {
                let len = part
                    .stream_len()
                    .map_err(|e| FsError::backend(format!("sizing {}", key.path()), &e))?;
                (attr(len, part.log_mtime().unwrap_or(self.started)), TTL)
            }
            // A transaction's records join it when its marker is appended:
            // the log's mtime moves then too.
            NodeKey::Committed(_) => {
                let len = committed(&*part, key)?
                    .committed_len()
                    .map_err(|e| FsError::backend(format!("sizing {}", key.path()), &e))?;
                (attr(len, part.log_mtime().unwrap_or(self.started)), TTL)
            }
            NodeKey::Control(..) => (attr(0, self.started), TTL),
            NodeKey::Time(_, ms) => {
                let text = self.time_text(&*part, *ms, key)?;
                (attr(text.len() as u64, self.started), TTL)
            }
            NodeKey::Offset(_, n) => {
                let r = self.record(&*part, *n, key)?;
                let len = r.record.value.as_ref().map_or(0, |v| v.len()) as u64;
                (attr(len, timestamp(r.record.timestamp)), lasting)
            }
            NodeKey::Status(_) => {
                let len = self.status_text(&*part, key)?.len() as u64;
                (attr(len, SystemTime::now()), TTL)
            }
            NodeKey::Config(_, name) => {
                let len = self.config_text(&*part, name, key)?.len() as u64;
                (attr(len, self.started), TTL)
            }
            // Answered above: `key.partition()` is `None` exactly for these.
            outside_partitions!() => unreachable!("root and group nodes have no partition"),
        })
    }

    /// A node's type and permission bits: everything is readable but the
    /// control files, which are write-only; only what takes writes is
    /// writable, and nothing on a read-only mount.
    pub(super) fn mode(&self, key: &NodeKey) -> (NodeType, u16) {
        let (kind, perm) = match key {
            NodeKey::Root
            | NodeKey::Partition(_)
            | NodeKey::ConfigDir(_)
            | NodeKey::GroupsDir
            | NodeKey::Group(_) => (NodeType::Directory, 0o755),
            NodeKey::OffsetDir(_) | NodeKey::TimeDir(_) | NodeKey::GroupOffsetsDir(_) => {
                (NodeType::Directory, 0o555)
            }
            NodeKey::Log(_) | NodeKey::Config(..) | NodeKey::GroupOffset(..) => {
                (NodeType::RegularFile, 0o644)
            }
            NodeKey::Control(..) => (NodeType::RegularFile, 0o200),
            NodeKey::RootFile(_)
            | NodeKey::Raw(..)
            | NodeKey::Committed(_)
            | NodeKey::Time(..)
            | NodeKey::Offset(..)
            | NodeKey::Status(_)
            | NodeKey::GroupFile(..) => (NodeType::RegularFile, 0o444),
        };
        let owned = key
            .partition()
            .is_some_and(|p| kafka_owned_topic(p).is_some());
        let perm = if self.read_only || owned {
            perm & !0o222
        } else {
            perm
        };
        (kind, perm)
    }

    pub(super) fn record(
        &self,
        part: &dyn Partition,
        n: i64,
        key: &NodeKey,
    ) -> FsResult<commitfs_backend::RecordEntry> {
        part.record(n)
            .map_err(|e| FsError::backend(format!("reading {}", key.path()), &e))
    }

    fn attr_of(&self, ino: u64, kind: NodeType, perm: u16, size: u64, mtime: SystemTime) -> Attr {
        Attr {
            ino,
            kind,
            perm,
            size,
            mtime,
            nlink: if kind == NodeType::Directory { 2 } else { 1 },
            uid: self.uid,
            gid: self.gid,
            blksize: IO_SIZE,
        }
    }

    pub(super) fn parent_ino(&self, key: &NodeKey) -> u64 {
        match key {
            NodeKey::Root | NodeKey::Partition(_) | NodeKey::GroupsDir => ROOT_INO,
            NodeKey::Group(_) => self.inodes.ino(&NodeKey::GroupsDir),
            NodeKey::GroupFile(g, _) | NodeKey::GroupOffsetsDir(g) => {
                self.inodes.ino(&NodeKey::Group(g.clone()))
            }
            NodeKey::GroupOffset(g, _) => self.inodes.ino(&NodeKey::GroupOffsetsDir(g.clone())),
            other => other.partition().map_or(ROOT_INO, |p| {
                self.inodes.ino(&NodeKey::Partition(p.clone()))
            }),
        }
    }
}

/// The topic of partition `name` if Kafka itself writes it.
/// The `committed` view of a partition, which lookup offers only where the
/// backend has one.
pub(super) fn committed<'p>(
    part: &'p dyn Partition,
    key: &NodeKey,
) -> FsResult<&'p dyn CommittedStream> {
    part.committed().ok_or_else(|| {
        log::debug!("{}: the backend has no read_committed view", key.path());
        FsError::quiet(libc::ENOENT)
    })
}

fn kafka_owned_topic(name: &str) -> Option<&str> {
    commitfs_record::names::parse_partition_name(name)
        .ok()
        .map(|(topic, _)| topic)
        .filter(|topic| commitfs_record::names::is_kafka_owned_topic(topic))
}

/// How long the kernel may trust that `key`'s name exists. The names inside a
/// partition directory other than its raw files, and the partition itself,
/// are fixed for the life of the partition, which only an rmdir through this
/// mount ends (the kernel then drops the entries itself); so a path like
/// `t-0/offset/N` costs one LOOKUP, not three. On a read-only mount another
/// process may delete the partition, so `lasting` is short there. Other names (raw files, the
/// data dir's own files) last as long as their attributes. `log` is not
/// cached either: every path lookup of it sizes the stream, which is also when
/// storage saves its stream-length cache (the torture tests count on that).
fn entry_ttl(key: &NodeKey, attr_ttl: Duration, lasting: Duration) -> Duration {
    match key {
        NodeKey::Partition(_)
        | NodeKey::OffsetDir(_)
        | NodeKey::TimeDir(_)
        | NodeKey::Control(..)
        | NodeKey::Status(_)
        | NodeKey::ConfigDir(_)
        | NodeKey::Config(..) => lasting,
        _ => attr_ttl,
    }
}

pub(super) fn timestamp(ms: i64) -> SystemTime {
    if ms >= 0 {
        UNIX_EPOCH + Duration::from_millis(ms as u64)
    } else {
        UNIX_EPOCH
    }
}

/// The changes a setattr asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SetAttr {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    /// atime or mtime is set.
    pub times: bool,
}

impl Tree {
    /// chmod, chown, utimes and truncate: all refused, but the truncate to 0
    /// that `echo x > log` sends before it writes.
    pub fn setattr(&self, ino: u64, set: SetAttr) -> FsResult<Attr> {
        let key = self.key(ino)?;
        let path = key.path();
        // Times go with a truncate (`echo x > log`); alone they are utimes(2).
        let utimes = set.times && set.size.is_none();
        let changes_something = set.mode.is_some()
            || set.uid.is_some()
            || set.gid.is_some()
            || set.size.is_some()
            || utimes;
        if changes_something {
            self.check_changeable(&key, format_args!("setattr of {path}"))?;
        }
        let refuse = |what: &str, why: &str| {
            Err(FsError::refuse(
                libc::EPERM,
                format!("{what} of {path}"),
                why,
            ))
        };
        if set.mode.is_some() {
            return refuse("chmod", "modes are fixed");
        }
        if set.uid.is_some() || set.gid.is_some() {
            return refuse("chown", "owners are fixed");
        }
        if utimes {
            return refuse(
                "utimes",
                "times are fixed: a file's mtime is its data's (the last record's timestamp)",
            );
        }
        match set.size {
            None => {}
            Some(_) if key.is_dir() => return Err(FsError::quiet(libc::EISDIR)),
            // `echo x > log` truncates before it writes: `>` is taken as `>>`.
            Some(0) if key.writable() => {
                log::debug!("truncate of {path} to 0 accepted, nothing changed")
            }
            Some(n) => {
                return Err(FsError::refuse(
                    libc::EPERM,
                    format!("truncate of {path} to {n} bytes"),
                    "partition files are append-only (only a no-op truncate to 0 of log, control and config files is accepted)",
                ));
            }
        }
        self.attr(&key)
    }

    /// `statfs` of the mount: the backend's space.
    pub fn statfs(&self) -> FsResult<commitfs_backend::StatFs> {
        self.backend
            .statfs()
            .map_err(|e| FsError::backend("statfs", &e))
    }

    /// `access(2)`, answered from the node's mode. The daemon serves every
    /// caller alike, so the owner's bits say what anyone may do; and since
    /// the tree refuses writes whatever the caller, root gets the same
    /// answer (`test -w status` is false for root too).
    pub fn access(&self, ino: u64, mask: i32) -> FsResult<()> {
        let (_, perm) = self.mode(&self.key(ino)?);
        let denied = [
            (libc::R_OK, 0o400),
            (libc::W_OK, 0o200),
            (libc::X_OK, 0o100),
        ]
        .iter()
        .any(|&(want, bit)| mask & want != 0 && perm & bit == 0);
        if denied {
            return Err(FsError::quiet(libc::EACCES));
        }
        Ok(())
    }
}
