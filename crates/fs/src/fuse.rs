//! The FUSE adapter: a thin layer that turns kernel requests into calls on
//! the [`Tree`] and its answers into replies. The rules of the tree are not
//! here; what is here is the kernel's side: capabilities negotiated at init,
//! fuser's types, and the one place ([`CommitFs::run`]) where an error is
//! logged and answered.

use std::ffi::OsStr;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use fuser::{
    AccessFlags, BackingId, Config, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags,
    Generation, INodeNo, InitFlags, IoctlFlags, KernelConfig, LockOwner, MountOption, OpenAccMode,
    OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyIoctl, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, Session,
    SessionUnmounter, TimeOrNow, WriteFlags,
};
use log::{info, warn};

use super::dir::DirectoryReplier;
use super::error::{FsError, FsResult};
use super::open::{AccessMode, Opened};
use super::passthrough::{Backing, BackingFiles};
use super::tree::{Attr, Entry, NodeType, SetAttr, TTL, Tree};
use commitfs_backend::{Backend, StatFs};

const MAX_WRITE: u32 = 1 << 20;

pub struct CommitFs {
    tree: Tree,
    on_destroy: parking_lot::Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl CommitFs {
    pub fn new(backend: Arc<dyn Backend>) -> CommitFs {
        CommitFs {
            tree: Tree::new(backend),
            on_destroy: parking_lot::Mutex::new(None),
        }
    }

    /// Runs `f` when the session ends, after the last request and before
    /// fuser's own clean-up (the daemon uses it to release the mount quietly).
    pub fn on_destroy(self, f: impl FnOnce() + Send + 'static) -> Self {
        *self.on_destroy.lock() = Some(Box::new(f));
        self
    }

    /// Runs a request on the tree: an error is logged here and only here,
    /// and a panic becomes EIO so that the request is still answered and the
    /// event loop thread survives. A panic on a storage write path has
    /// already taken its partition offline (storage's guard), so serving on
    /// cannot publish what it left half done.
    fn run<T>(&self, op: &str, f: impl FnOnce() -> FsResult<T>) -> Result<T, Errno> {
        let r = match std::panic::catch_unwind(AssertUnwindSafe(f)) {
            Ok(r) => r,
            Err(p) => {
                let msg = p
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                Err(FsError::failed(libc::EIO, op, format!("panicked: {msg}")))
            }
        };
        r.map_err(|e| {
            e.log_line();
            Errno::from_i32(e.errno)
        })
    }

    /// A request the tree always refuses (creating or renaming names, xattr
    /// changes): the refusal, logged.
    fn refusal(&self, f: impl FnOnce() -> FsError) -> Errno {
        let e = f();
        e.log_line();
        Errno::from_i32(e.errno)
    }
}

/// A tree mounted by this process (tests drive a backend through the
/// kernel with it): unmounted, and its session thread joined, on drop.
pub struct Mounted {
    unmounter: SessionUnmounter,
    session: Option<std::thread::JoinHandle<std::io::Result<()>>>,
}

/// Mounts the tree over `backend` on `mnt` (root, or `fusermount3`), with
/// its requests served on a thread of this process.
pub fn mount(backend: Arc<dyn Backend>, mnt: &std::path::Path) -> std::io::Result<Mounted> {
    let mut config = Config::default();
    config.mount_options = vec![MountOption::FSName("commitfs".to_string())];
    let mut session = Session::new(CommitFs::new(backend), mnt, &config)?;
    let unmounter = session.unmount_callable();
    let thread = std::thread::Builder::new()
        .name("fuse-session".into())
        .spawn(move || session.run())?;
    Ok(Mounted {
        unmounter,
        session: Some(thread),
    })
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if let Err(e) = self.unmounter.unmount() {
            warn!("unmount failed: {e}");
        }
        if let Some(t) = self.session.take()
            && let Ok(Err(e)) = t.join()
        {
            warn!("the FUSE session ended with {e}");
        }
    }
}

/// Each fuser reply answers one kind of result.
trait Answer<T> {
    fn answer(self, r: Result<T, Errno>);
}

impl Answer<Entry> for ReplyEntry {
    fn answer(self, r: Result<Entry, Errno>) {
        match r {
            Ok(e) => self.entry_with_ttls(
                &e.attr_ttl,
                &e.entry_ttl,
                &file_attr(&e.attr),
                Generation(0),
            ),
            Err(e) => self.error(e),
        }
    }
}

/// mkdir's answer: a new directory, never cached by name beyond `TTL`.
impl Answer<Attr> for ReplyEntry {
    fn answer(self, r: Result<Attr, Errno>) {
        match r {
            Ok(a) => self.entry(&TTL, &file_attr(&a), Generation(0)),
            Err(e) => self.error(e),
        }
    }
}

impl Answer<(Attr, Duration)> for ReplyAttr {
    fn answer(self, r: Result<(Attr, Duration), Errno>) {
        match r {
            Ok((a, ttl)) => self.attr(&ttl, &file_attr(&a)),
            Err(e) => self.error(e),
        }
    }
}

impl Answer<()> for ReplyEmpty {
    fn answer(self, r: Result<(), Errno>) {
        match r {
            Ok(()) => self.ok(),
            Err(e) => self.error(e),
        }
    }
}

impl Answer<()> for ReplyDirectory {
    fn answer(self, r: Result<(), Errno>) {
        match r {
            Ok(()) => self.ok(),
            Err(e) => self.error(e),
        }
    }
}

impl Answer<u32> for ReplyWrite {
    fn answer(self, r: Result<u32, Errno>) {
        match r {
            Ok(n) => self.written(n),
            Err(e) => self.error(e),
        }
    }
}

impl Answer<Opened> for ReplyOpen {
    fn answer(self, r: Result<Opened, Errno>) {
        let o = match r {
            Ok(o) => o,
            Err(e) => return self.error(e),
        };
        let mut flags = FopenFlags::empty();
        if o.direct_io {
            flags |= FopenFlags::FOPEN_DIRECT_IO;
        }
        if o.keep_cache {
            flags |= FopenFlags::FOPEN_KEEP_CACHE;
        }
        match o
            .backing
            .as_ref()
            .and_then(|b| b.downcast_ref::<BackingId>())
        {
            Some(id) => self.opened_passthrough(FileHandle(o.fh), flags, id),
            None => self.opened(FileHandle(o.fh), flags),
        }
    }
}

impl Answer<StatFs> for ReplyStatfs {
    fn answer(self, r: Result<StatFs, Errno>) {
        match r {
            Ok(s) => self.statfs(
                s.blocks, s.bfree, s.bavail, s.files, s.ffree, s.bsize, 255, s.frsize,
            ),
            Err(e) => self.error(e),
        }
    }
}

/// The size-probe protocol of getxattr/listxattr: size 0 asks for the length,
/// a buffer too small gets ERANGE.
impl Answer<(u32, Vec<u8>)> for ReplyXattr {
    fn answer(self, r: Result<(u32, Vec<u8>), Errno>) {
        match r {
            Ok((0, v)) => self.size(v.len() as u32),
            Ok((size, v)) if v.len() > size as usize => self.error(Errno::ERANGE),
            Ok((_, v)) => self.data(&v),
            Err(e) => self.error(e),
        }
    }
}

impl DirectoryReplier for ReplyDirectory {
    fn add(&mut self, ino: u64, cookie: u64, kind: NodeType, name: &str) -> bool {
        ReplyDirectory::add(self, INodeNo(ino), cookie, file_type(kind), name)
    }
}

impl BackingFiles for ReplyOpen {
    fn register(&self, file: &std::fs::File) -> std::io::Result<Backing> {
        Ok(Arc::new(self.open_backing(file)?))
    }
}

fn file_type(kind: NodeType) -> FileType {
    match kind {
        NodeType::Directory => FileType::Directory,
        NodeType::RegularFile => FileType::RegularFile,
    }
}

fn file_attr(a: &Attr) -> FileAttr {
    FileAttr {
        ino: INodeNo(a.ino),
        size: a.size,
        blocks: a.size.div_ceil(512),
        atime: a.mtime,
        mtime: a.mtime,
        ctime: a.mtime,
        crtime: a.mtime,
        kind: file_type(a.kind),
        perm: a.perm,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: 0,
        blksize: a.blksize,
        flags: 0,
    }
}

fn access_mode(flags: OpenFlags) -> AccessMode {
    let mode = flags.acc_mode();
    AccessMode {
        read: mode != OpenAccMode::O_WRONLY,
        write: mode != OpenAccMode::O_RDONLY,
    }
}

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
            self.tree.enable_passthrough();
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
        self.tree.destroy();
        if let Some(f) = self.on_destroy.lock().take() {
            f();
        }
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        reply.answer(self.run("lookup", || self.tree.lookup(parent.0, name)));
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.tree.forget(ino.0, nlookup);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        reply.answer(self.run("getattr", || self.tree.getattr(ino.0)));
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
        let times = atime.is_some() || mtime.is_some();
        let set = SetAttr {
            mode,
            uid,
            gid,
            size,
            times,
        };
        let r = self.run("setattr", || self.tree.setattr(ino.0, set));
        reply.answer(r.map(|a| (a, TTL)));
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
        reply.error(self.refusal(|| self.tree.refuse_create("mknod", parent.0, name)));
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
        reply.answer(self.run("mkdir", || self.tree.mkdir(parent.0, name)));
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        reply.error(self.refusal(|| self.tree.unlink("unlink", parent.0, name)));
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        reply.answer(self.run("rmdir", || self.tree.rmdir(parent.0, name)));
    }

    fn symlink(
        &self,
        _req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        _target: &std::path::Path,
        reply: ReplyEntry,
    ) {
        reply.error(self.refusal(|| self.tree.refuse_create("symlink", parent.0, link_name)));
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
        reply.error(self.refusal(|| self.tree.unlink("rename", parent.0, name)));
    }

    fn link(
        &self,
        _req: &Request,
        _ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        reply.error(self.refusal(|| self.tree.refuse_create("link", newparent.0, newname)));
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let r = self.run("open", || self.tree.open(ino.0, access_mode(flags), &reply));
        reply.answer(r);
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
            match self.run("read", || self.tree.read_into(fh.0, offset, size, buf)) {
                Ok(n) => reply.data(&buf[..n]),
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
        reply.answer(self.run("write", || self.tree.write(fh.0, data)));
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
        reply.answer(self.run("release", || self.tree.release(fh.0)));
    }

    /// No node takes an ioctl. Programs ask any file whether it is a
    /// terminal (`TCGETS` from every Python `open`): the answer is the one a
    /// regular file gives, with no log line.
    fn ioctl(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: IoctlFlags,
        _cmd: u32,
        _in_data: &[u8],
        _out_size: u32,
        reply: ReplyIoctl,
    ) {
        reply.error(Errno::ENOTTY);
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        reply.answer(self.run("fsync", || self.tree.fsync(fh.0)));
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.run("opendir", || self.tree.opendir(ino.0)) {
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let r = self.run("readdir", || {
            self.tree.readdir(ino.0, fh.0, offset, &mut reply)
        });
        reply.answer(r);
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.tree.releasedir(fh.0);
        reply.ok();
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
        reply.answer(self.run("statfs", || self.tree.statfs()));
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
        reply.error(self.refusal(|| self.tree.refuse_xattr_change("setxattr", ino.0, name)));
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        reply.answer(self.run("getxattr", || Ok((size, self.tree.getxattr(ino.0, name)?))));
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        reply.answer(self.run("listxattr", || Ok((size, self.tree.listxattr(ino.0)?))));
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        reply.error(self.refusal(|| self.tree.refuse_xattr_change("removexattr", ino.0, name)));
    }

    fn access(&self, _req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        reply.answer(self.run("access", || self.tree.access(ino.0, mask.bits())));
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
        reply.error(self.refusal(|| self.tree.refuse_create("create", parent.0, name)));
    }
}
