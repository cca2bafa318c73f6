//! Directories: listings, `mkdir` and `rmdir` of partitions, and the
//! refusal of every other change to the set of names.

use std::ffi::OsStr;
use std::sync::Arc;

use log::info;

use super::error::{FsError, FsResult};
use super::handle::{Handle, OpenFile};
use super::inode;
use super::node::{GROUPS, NodeKey, SPECIAL_NAMES};
use super::tree::{Attr, NodeType, Tree};

/// Offsets asked of the backend at a time while an `offset/` listing fills
/// a READDIR reply (a 4 KiB reply holds about 130 names; a bigger one asks
/// again).
const OFFSETS_PER_CALL: usize = 192;

/// Takes directory entries until its buffer is full.
pub trait DirectoryReplier {
    /// Adds an entry; returns true when the buffer is full (the entry was not added).
    fn add(&mut self, ino: u64, cookie: u64, kind: NodeType, name: &str) -> bool;
}

impl Tree {
    /// An open directory stream of `ino`.
    pub fn opendir(&self, ino: u64) -> FsResult<u64> {
        let key = self.key(ino)?;
        if !key.is_dir() {
            return Err(FsError::quiet(libc::ENOTDIR));
        }
        Ok(self.handles.insert(OpenFile {
            key,
            handle: Handle::Dir(None),
        }))
    }

    pub fn releasedir(&self, fh: u64) {
        self.handles.remove(fh);
    }

    /// Entries of directory `ino` from `cookie` on, `.` and `..` first.
    /// Cookies are positions in the listing of the stream `fh` (taken at its
    /// first READDIR, or at a rewind); in `offset/` the cookie of offset N is
    /// N + 3, so a listing resumes at the right offset even if retention
    /// moved the log start meanwhile. Without an open stream (`fh` unknown)
    /// the listing is taken afresh each time.
    pub fn readdir(
        &self,
        ino: u64,
        fh: u64,
        cookie: u64,
        out: &mut dyn DirectoryReplier,
    ) -> FsResult<()> {
        let key = self.key(ino)?;
        let parent = self.parent_ino(&key);
        let mut cookie = cookie;
        if cookie == 0 {
            if out.add(ino, 1, NodeType::Directory, ".") {
                return Ok(());
            }
            cookie = 1;
        }
        if cookie == 1 {
            if out.add(parent, 2, NodeType::Directory, "..") {
                return Ok(());
            }
            cookie = 2;
        }
        if let NodeKey::OffsetDir(p) = &key {
            let part = self.partition(p)?;
            let mut from = cookie as i64 - 2;
            loop {
                let offsets = part.record_offsets(from, OFFSETS_PER_CALL).map_err(|e| {
                    FsError::backend(format!("listing the offsets of {}", key.path()), &e)
                })?;
                let Some(&last) = offsets.last() else {
                    return Ok(());
                };
                for n in offsets {
                    let ino = self.inodes.ino(&NodeKey::Offset(p.clone(), n));
                    if out.add(ino, n as u64 + 3, NodeType::RegularFile, &n.to_string()) {
                        return Ok(());
                    }
                }
                from = last + 1;
            }
        }
        let entries = self.listing(&key, fh, cookie == 2)?;
        for (i, (child, name)) in entries.iter().enumerate().skip(cookie as usize - 2) {
            let kind = if child.is_dir() {
                NodeType::Directory
            } else {
                NodeType::RegularFile
            };
            if out.add(self.inodes.ino(child), i as u64 + 3, kind, name) {
                break;
            }
        }
        Ok(())
    }

    /// The listing stream `fh` reads: its own, or a fresh one at its start.
    fn listing(&self, key: &NodeKey, fh: u64, start: bool) -> FsResult<Arc<[(NodeKey, String)]>> {
        let handle = self.handles.get(fh);
        if let Some(h) = &handle
            && let Handle::Dir(Some(listing)) = &h.lock().handle
            && !start
        {
            return Ok(listing.clone());
        }
        let listing: Arc<[(NodeKey, String)]> = self.list(key)?.into();
        if let Some(h) = handle
            && let Handle::Dir(slot) = &mut h.lock().handle
        {
            *slot = Some(listing.clone());
        }
        Ok(listing)
    }

    /// Entries of a directory other than `offset/`, without `.` and `..`.
    fn list(&self, key: &NodeKey) -> FsResult<Vec<(NodeKey, String)>> {
        let listing = |what: &str, e| FsError::backend(format!("listing {what}"), &e);
        Ok(match key {
            NodeKey::Root => {
                let names = self
                    .backend
                    .partition_names()
                    .map_err(|e| listing("the partitions", e))?;
                let mut out: Vec<_> = names
                    .into_iter()
                    .map(|n| (NodeKey::Partition(inode::name(&n)), n))
                    .collect();
                if self.has_groups() {
                    out.push((NodeKey::GroupsDir, GROUPS.to_string()));
                }
                let files = self.root_files()?;
                out.extend(
                    files
                        .into_iter()
                        .map(|f| (NodeKey::RootFile(inode::name(&f.name)), f.name)),
                );
                out
            }
            // Any millisecond can be looked up; none is listed.
            NodeKey::TimeDir(p) => {
                self.partition(p)?;
                Vec::new()
            }
            NodeKey::Partition(p) => {
                let part = self.partition(p)?;
                let files = match part.raw_files() {
                    Some(raw) => raw.files().map_err(|e| listing(p, e))?,
                    None => Vec::new(),
                };
                let mut out: Vec<_> = files
                    .into_iter()
                    .filter(|f| !SPECIAL_NAMES.contains(&f.name.as_str()))
                    .map(|f| (NodeKey::Raw(p.clone(), inode::name(&f.name)), f.name))
                    .collect();
                for s in SPECIAL_NAMES {
                    if let Some(k) = self.special(&*part, p, s) {
                        out.push((k, s.to_string()));
                    }
                }
                out
            }
            NodeKey::ConfigDir(p) => {
                self.partition(p)?;
                self.config_names()
                    .map(|c| (NodeKey::Config(p.clone(), c), c.to_string()))
                    .collect()
            }
            NodeKey::GroupsDir | NodeKey::Group(_) | NodeKey::GroupOffsetsDir(_) => {
                return self.group_listing(key);
            }
            _ => return Err(FsError::quiet(libc::ENOTDIR)),
        })
    }

    /// Creates partition `name` in the root.
    pub fn mkdir(&self, parent: u64, name: &OsStr) -> FsResult<Attr> {
        let pkey = self.key(parent)?;
        let Some(name) = name.to_str() else {
            return Err(FsError::refuse(
                libc::EINVAL,
                "mkdir",
                "the name is not UTF-8",
            ));
        };
        if pkey != NodeKey::Root {
            if self.child(&pkey, name).is_ok() {
                return Err(FsError::quiet(libc::EEXIST));
            }
            return Err(FsError::refuse(
                libc::EPERM,
                format!("mkdir of {}/{name}", pkey.path()),
                "partitions live in the root only",
            ));
        }
        if name == GROUPS && self.has_groups() {
            return Err(FsError::quiet(libc::EEXIST));
        }
        self.check_writable(format_args!("mkdir of {name}"))?;
        self.check_not_kafka_owned(name, format_args!("mkdir of {name}"))?;
        self.backend
            .create_partition(name)
            .map_err(|e| FsError::backend(format!("mkdir of {name}"), &e))?;
        info!("Created partition {name}");
        let key = NodeKey::Partition(inode::name(name));
        let attr = self.attr(&key)?;
        // The kernel takes the reply as a lookup.
        self.inodes.looked_up(&key, attr.ino);
        Ok(attr)
    }

    /// Deletes partition `name` with all its records.
    pub fn rmdir(&self, parent: u64, name: &OsStr) -> FsResult<()> {
        let pkey = self.key(parent)?;
        if pkey == NodeKey::GroupsDir {
            let name = name.to_str().ok_or(FsError::quiet(libc::ENOENT))?;
            self.group_child(&pkey, name)?;
            return self.rmdir_group(name);
        }
        if pkey == NodeKey::Root && name == GROUPS && self.has_groups() {
            return Err(FsError::refuse(
                libc::EPERM,
                "rmdir of groups",
                "groups/ is the coordinator's: its groups are removed one by one",
            ));
        }
        if pkey != NodeKey::Root {
            return Err(self.refuse_change("rmdir", parent, name, true));
        }
        let name = name.to_str().ok_or(FsError::quiet(libc::ENOENT))?;
        self.partition(name)?;
        self.check_writable(format_args!("rmdir of {name}"))?;
        self.check_not_kafka_owned(name, format_args!("rmdir of {name}"))?;
        self.backend
            .delete_partition(name)
            .map_err(|e| FsError::backend(format!("rmdir of {name}"), &e))?;
        self.inodes.forget_partition(name);
        info!("Deleted partition {name}");
        Ok(())
    }

    /// `unlink` and `rename`: the tree's names are fixed.
    pub fn unlink(&self, op: &str, parent: u64, name: &OsStr) -> FsError {
        self.refuse_change(op, parent, name, true)
    }

    /// create, mknod, symlink, link: nothing but mkdir adds names to the tree.
    pub fn refuse_create(&self, op: &str, parent: u64, name: &OsStr) -> FsError {
        let exists = self
            .key(parent)
            .ok()
            .zip(name.to_str())
            .is_some_and(|(p, n)| self.child(&p, n).is_ok());
        if exists {
            return FsError::quiet(libc::EEXIST);
        }
        self.refuse_change(op, parent, name, false)
    }

    /// Refusal for operations that would change the set of names in a
    /// directory: EROFS on a read-only mount, else EPERM (or ENOENT if `name`
    /// is not there and `must_exist`).
    fn refuse_change(&self, op: &str, parent: u64, name: &OsStr, must_exist: bool) -> FsError {
        let Ok(pkey) = self.key(parent) else {
            return FsError::quiet(libc::ENOENT);
        };
        let path = format!(
            "{}/{}",
            pkey.path().trim_end_matches('/'),
            name.to_string_lossy()
        );
        let path = path.trim_start_matches('/');
        let exists = name.to_str().is_some_and(|n| self.child(&pkey, n).is_ok());
        if must_exist && !exists {
            return FsError::quiet(libc::ENOENT);
        }
        let what = format!("{op} of {path}");
        if let Err(e) = self.check_writable(&what) {
            return e;
        }
        let why = if exists {
            "the tree's names are fixed: partitions are removed with rmdir, segments by retention"
        } else {
            "only mkdir of a <topic>-<partition> in the root creates anything"
        };
        FsError::refuse(libc::EPERM, what, why)
    }
}
