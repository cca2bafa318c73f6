//! The tree's semantics driven directly, without FUSE: rules that a mount
//! test cannot pin down because they depend on how the kernel interleaves
//! requests (directory streams across a change, inode numbers the kernel
//! forgets) or that are plainest asked of the tree itself (access).

#[path = "support/batch.rs"]
mod batch;

use std::ffi::OsStr;
use std::sync::Arc;

use commitfs::backend::local::LocalBackend;
use commitfs::fs::{NodeType, Tree};
use commitfs::record::NewRecord;
use commitfs::storage::{LogConfig, LogManager, OpenOptions};

const ROOT: u64 = 1;

struct Fixture {
    _tmp: tempfile::TempDir,
    manager: Arc<LogManager>,
    tree: Tree,
}

fn fixture(read_only: bool) -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let mut config = LogConfig::default();
    config.set("segment.index.bytes", "4096").unwrap();
    if read_only {
        let mgr = LogManager::open(tmp.path(), config.clone(), OpenOptions::default()).unwrap();
        mgr.create_partition("t-0").unwrap();
        mgr.close().unwrap();
    }
    let manager = Arc::new(
        LogManager::open(
            tmp.path(),
            config,
            OpenOptions {
                read_only,
                ..Default::default()
            },
        )
        .unwrap(),
    );
    let tree = Tree::new(Arc::new(LocalBackend::new(manager.clone())));
    Fixture {
        _tmp: tmp,
        manager,
        tree,
    }
}

/// Takes at most `room` entries per READDIR, as a small kernel buffer does.
struct Page {
    room: usize,
    got: Vec<(u64, String)>,
}

impl commitfs::fs::DirectoryReplier for Page {
    fn add(&mut self, _ino: u64, cookie: u64, _kind: NodeType, name: &str) -> bool {
        if self.got.len() == self.room {
            return true;
        }
        self.got.push((cookie, name.to_string()));
        false
    }
}

/// Reads a whole directory stream `fh` of `ino`, `room` entries at a time,
/// calling `between` after the first page.
fn read_stream(t: &Tree, ino: u64, fh: u64, room: usize, mut between: impl FnMut()) -> Vec<String> {
    let mut names = Vec::new();
    let mut cookie = 0;
    loop {
        let mut page = Page {
            room,
            got: Vec::new(),
        };
        t.readdir(ino, fh, cookie, &mut page).unwrap();
        let Some((last, _)) = page.got.last() else {
            return names;
        };
        if cookie == 0 {
            between();
        }
        cookie = *last;
        names.extend(page.got.into_iter().map(|(_, n)| n));
    }
}

#[test]
fn a_directory_stream_neither_skips_nor_repeats_when_retention_deletes() {
    let f = fixture(false);
    let log = f.manager.create_partition("t-0").unwrap();
    for i in 0..20 {
        log.append(&[NewRecord::value(format!("r{i}").as_bytes())])
            .unwrap();
        log.roll().unwrap();
    }
    let dir = f.tree.lookup(ROOT, OsStr::new("t-0")).unwrap().attr.ino;
    let fh = f.tree.opendir(dir).unwrap();
    let before = read_stream(&f.tree, dir, fh, usize::MAX, || {});
    assert!(before.iter().any(|n| n == "00000000000000000000.log"));
    let fh = f.tree.opendir(dir).unwrap();
    let listed = read_stream(&f.tree, dir, fh, 7, || {
        log.delete_records_before(12).unwrap();
        f.manager.run_retention(0).unwrap();
    });
    f.tree.releasedir(fh);
    assert_eq!(listed, before, "one stream shows one listing");
    // A new stream sees the segments gone.
    let fh = f.tree.opendir(dir).unwrap();
    let after = read_stream(&f.tree, dir, fh, 7, || {});
    assert!(!after.iter().any(|n| n == "00000000000000000000.log"));
    assert!(after.iter().any(|n| n == "00000000000000000012.log"));
}

#[test]
fn forgotten_lookups_free_their_numbers() {
    let f = fixture(false);
    let log = f.manager.create_partition("t-0").unwrap();
    for i in 0..50 {
        log.append(&[NewRecord::value(format!("r{i}").as_bytes())])
            .unwrap();
        log.roll().unwrap();
    }
    let dir = f.tree.lookup(ROOT, OsStr::new("t-0")).unwrap().attr.ino;
    let base = f.tree.inodes_in_use();
    let names: Vec<String> = (0..50)
        .flat_map(|i| ["log", "index", "timeindex"].map(|s| format!("{i:020}.{s}")))
        .collect();
    let mut inos = Vec::new();
    for _ in 0..3 {
        for n in &names {
            inos.push(f.tree.lookup(dir, OsStr::new(n)).unwrap().attr.ino);
        }
    }
    assert_eq!(f.tree.inodes_in_use(), base + names.len());
    for ino in inos {
        f.tree.forget(ino, 1);
    }
    assert_eq!(f.tree.inodes_in_use(), base);
}

#[test]
fn access_answers_from_the_mode() {
    let f = fixture(false);
    f.manager.create_partition("t-0").unwrap();
    let t = &f.tree;
    let ino = |path: &str| {
        path.split('/').fold(ROOT, |dir, name| {
            t.lookup(dir, OsStr::new(name)).unwrap().attr.ino
        })
    };
    let (r, w, x) = (libc::R_OK, libc::W_OK, libc::X_OK);
    let eacces = Err(libc::EACCES);
    let access = |path: &str, mask| t.access(ino(path), mask).map_err(|e| e.errno);
    assert_eq!(access("t-0/status", w), eacces);
    assert_eq!(access("t-0/status", r), Ok(()));
    assert_eq!(access("t-0/log", r | w), Ok(()));
    assert_eq!(access("t-0/roll", r), eacces);
    assert_eq!(access("t-0/roll", w), Ok(()));
    assert_eq!(access("t-0/offset", w), eacces);
    assert_eq!(access("t-0/offset", r | x), Ok(()));
    assert_eq!(access("t-0/config/segment.bytes", w), Ok(()));
    assert_eq!(access("t-0/00000000000000000000.log", w), eacces);
    assert_eq!(access("t-0/log", x), eacces);
    assert_eq!(access("t-0", 0), Ok(()));
}

#[test]
fn a_read_only_tree_is_readable_and_never_writable() {
    let f = fixture(true);
    let t = &f.tree;
    let dir = t.lookup(ROOT, OsStr::new("t-0")).unwrap().attr.ino;
    for name in ["log", "status", "00000000000000000000.log"] {
        let attr = t.lookup(dir, OsStr::new(name)).unwrap().attr;
        assert_eq!(attr.perm, 0o444, "{name}");
        assert_eq!(
            t.access(attr.ino, libc::W_OK).map_err(|e| e.errno),
            Err(libc::EACCES)
        );
    }
    let cfg = t.lookup(dir, OsStr::new("config")).unwrap().attr.ino;
    let attr = t.lookup(cfg, OsStr::new("segment.bytes")).unwrap().attr;
    assert_eq!(attr.perm, 0o444);
}

/// commitfs's own bookkeeping, the daemon's log, dot files and `*.tmp` are
/// not part of the tree; Kafka's files are.
#[test]
fn the_tree_shows_kafka_files_only() {
    let f = fixture(true);
    let data = f.manager.dir().to_path_buf();
    std::fs::write(data.join("meta.properties"), "version=1\n").unwrap();
    std::fs::write(data.join("commitfs.log"), "daemon log\n").unwrap();
    std::fs::write(data.join("x.tmp"), "").unwrap();
    std::fs::write(data.join("t-0/commitfs.properties"), "").unwrap();
    std::fs::write(data.join("t-0/leader-epoch-checkpoint"), "0\n0\n").unwrap();
    let t = &f.tree;
    let names = |ino| {
        let fh = t.opendir(ino).unwrap();
        read_stream(t, ino, fh, usize::MAX, || {})
    };
    let root = names(ROOT);
    assert!(root.contains(&"meta.properties".to_string()), "{root:?}");
    for hidden in [".lock", "commitfs.log", "x.tmp", ".kafka_cleanshutdown"] {
        assert!(!root.contains(&hidden.to_string()), "{hidden}: {root:?}");
        let e = t.lookup(ROOT, OsStr::new(hidden)).unwrap_err();
        assert_eq!(e.errno, libc::ENOENT, "{hidden}");
    }
    let dir = t.lookup(ROOT, OsStr::new("t-0")).unwrap().attr.ino;
    let part = names(dir);
    assert!(
        part.contains(&"leader-epoch-checkpoint".to_string()),
        "{part:?}"
    );
    for hidden in ["commitfs.properties", "commitfs.streamlen"] {
        assert!(!part.contains(&hidden.to_string()), "{hidden}: {part:?}");
        let e = t.lookup(dir, OsStr::new(hidden)).unwrap_err();
        assert_eq!(e.errno, libc::ENOENT, "{hidden}");
    }
}

/// A partition whose load fails is listed offline: its `status` says why,
/// everything else on it is EIO (logged once, when it failed), and the
/// other partitions mount.
#[test]
fn a_partition_that_fails_to_load_is_offline_and_the_others_mount() {
    use commitfs::backend::{Backend, Status};
    let tmp = tempfile::tempdir().unwrap();
    let mgr = LogManager::open(tmp.path(), LogConfig::default(), OpenOptions::default()).unwrap();
    for p in ["t-0", "u-0"] {
        let log = mgr.create_partition(p).unwrap();
        log.append(&[NewRecord::value(b"x")]).unwrap();
    }
    mgr.close().unwrap();
    // t-0's active segment cannot be opened: a directory stands in its place.
    let seg = tmp.path().join("t-0").join("00000000000000000000.log");
    std::fs::remove_file(&seg).unwrap();
    std::fs::create_dir(&seg).unwrap();
    let manager = Arc::new(
        LogManager::open(tmp.path(), LogConfig::default(), OpenOptions::default()).unwrap(),
    );
    let backend = LocalBackend::new(manager.clone());
    let t0 = backend.partition("t-0").unwrap();
    let status = t0.status().unwrap();
    let Status::Offline { cause } = &status else {
        panic!("t-0 must be offline: {status:?}");
    };
    assert!(cause.starts_with("loading the log failed"), "{status:?}");
    let tree = Tree::new(Arc::new(LocalBackend::new(manager.clone())));
    let dir = tree.lookup(ROOT, OsStr::new("t-0")).unwrap().attr.ino;
    let log = tree.lookup(dir, OsStr::new("log"));
    assert_eq!(log.map(|_| ()).map_err(|e| e.errno), Err(libc::EIO));
    assert!(tree.lookup(dir, OsStr::new("status")).is_ok());
    let u0 = backend.partition("u-0").unwrap();
    assert_eq!(u0.offsets().unwrap().log_end, 1);
    u0.append(&[NewRecord::value(b"y")]).unwrap();
    assert!(
        manager.close().is_err(),
        "no clean shutdown with an offline partition"
    );
    assert!(!tmp.path().join(".kafka_cleanshutdown").exists());
}

/// One transactional batch of producer 7 holding `values`, encoded by kafka-protocol.
fn transactional(values: &[&str]) -> bytes::BytesMut {
    let records = (values.iter().enumerate()).map(|(i, v)| {
        let key = Some(format!("t{i}").into_bytes().into());
        (key, Some(v.to_string().into_bytes().into()))
    });
    batch::encode(
        (7, 0),
        Some(0),
        true,
        1_700_000_000_000,
        records,
        kafka_protocol::records::Compression::None,
    )
}

/// `ls offset/` lists exactly the names lookup finds: on a compacted
/// partition the offsets the cleaner removed (inside batches it kept and
/// between them) and the transaction markers are not listed, whatever
/// the size of the kernel's READDIR buffer; a new stream after a pass
/// lists what survived.
#[test]
fn an_offset_listing_names_what_lookup_finds() {
    let f = fixture(false);
    let log = f.manager.create_partition("c-0").unwrap();
    log.set_config("cleanup.policy", "compact").unwrap();
    log.set_config("file.delete.delay.ms", "0").unwrap();
    for n in 0..300 {
        let (k, v) = (format!("k{}", n % 7), format!("v{n}"));
        let batch: Vec<NewRecord> = (0..3)
            .map(|_| NewRecord::keyed(k.as_bytes(), v.as_bytes()))
            .collect();
        log.append(&batch).unwrap();
    }
    log.append_transactional(&transactional(&["a", "b"]))
        .unwrap();
    log.append_end_txn_marker(7, 0, 0, true).unwrap();
    log.roll().unwrap();
    log.append(&[NewRecord::keyed(b"last", b"x")]).unwrap();
    let part = f.tree.lookup(ROOT, OsStr::new("c-0")).unwrap().attr.ino;
    let dir = f.tree.lookup(part, OsStr::new("offset")).unwrap().attr.ino;
    let listing = |room| {
        let fh = f.tree.opendir(dir).unwrap();
        let names = read_stream(&f.tree, dir, fh, room, || {});
        f.tree.releasedir(fh);
        names[2..].to_vec()
    };
    let found = || -> Vec<String> {
        (0..log.log_end_offset())
            .filter(|n| f.tree.lookup(dir, OsStr::new(&n.to_string())).is_ok())
            .map(|n| n.to_string())
            .collect()
    };
    let before = found();
    assert_eq!(
        before.len(),
        903,
        "900 keyed, 2 transactional, 1 after the roll"
    );
    assert_eq!(listing(usize::MAX), before);
    log.clean_now().unwrap().expect("a pass ran");
    let after = found();
    // The latest of each key: k0..k6 (the last record of their last
    // batch), t0 and t1, and `last` in the active segment.
    assert_eq!(after.len(), 10, "{after:?}");
    assert!(
        !after.contains(&"902".to_string()),
        "the marker is no record"
    );
    for room in [usize::MAX, 1, 3, 600] {
        assert_eq!(listing(room), after, "{room} entries a READDIR");
    }
}
