//! The system under test: one data directory, with the tree over it
//! (`commitfs::fs::Tree`, driven as the kernel would, without FUSE), the
//! Kafka listener over the same `LogManager` on 127.0.0.1:0 with a raw
//! protocol client, and a read-only `LogManager` opened on the same
//! directory that follows the writer. A clean remount closes all three
//! and opens them again; a crash drops the writer without a close and goes
//! on from a copy of the directory as it is (the threads of the crashed
//! session, which a test cannot stop, keep the old one), with a new
//! follower there.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::copy_tree::{copy_tree, remove_tree};

use commitfs::backend::local::LocalBackend;
use commitfs::fs::Tree;
use commitfs::kafka::{KafkaServer, ListenerConfig};
use commitfs::storage::cleaner::CleanerConfig;
use commitfs::storage::{LogConfig, LogManager, OpenOptions, PartitionLog};

use super::kafka_support::Conn;

pub const PART: &str = "t-0";
pub const TOPIC: &str = "t";

pub struct Mounted {
    pub mgr: Arc<LogManager>,
    pub tree: Tree,
    pub server: KafkaServer,
    pub conn: Conn,
}

pub struct Sys {
    pub dir: tempfile::TempDir,
    crashed: Vec<tempfile::TempDir>,
    pub mounted: Option<Mounted>,
    pub follower: Option<LogManager>,
    config: LogConfig,
    /// After a crash, the follower opens before the writer's recovery.
    pub early_follower: bool,
}

/// No cleaner thread (a pass runs when `compact` is written) and a small
/// offset map: every key of a case fits in it.
fn options() -> OpenOptions {
    let mut cleaner = CleanerConfig::default();
    cleaner.set("log.cleaner.threads", "0").unwrap();
    cleaner
        .set("log.cleaner.dedupe.buffer.size", "1048576")
        .unwrap();
    // Retention and flushes run only when the model's steps ask for them.
    OpenOptions {
        read_only: false,
        cleaner,
        timed: None,
    }
}

/// The mount-wide defaults: Kafka's, but for `segment.bytes` if given.
pub fn config(segment_bytes: Option<u32>) -> LogConfig {
    let mut c = LogConfig::default();
    if let Some(b) = segment_bytes {
        c.segment_bytes = b as i32;
    }
    c
}

fn mount(dir: &Path, config: &LogConfig) -> Mounted {
    let mgr = Arc::new(
        LogManager::open(dir, config.clone(), options()).expect("the data directory opens"),
    );
    let tree = Tree::new(Arc::new(LocalBackend::new(mgr.clone())));
    let config = ListenerConfig {
        listeners_text: Some("PLAINTEXT://127.0.0.1:0".to_string()),
        num_network_threads: 1,
        ..ListenerConfig::default()
    };
    let server = KafkaServer::start(mgr.clone(), config)
        .expect("the listener starts")
        .expect("a listener is configured");
    let addr = server.local_addrs()[0].to_string();
    let conn = Conn::new(&addr);
    Mounted {
        mgr,
        tree,
        server,
        conn,
    }
}

pub fn open_follower(dir: &Path, config: &LogConfig) -> LogManager {
    LogManager::open(
        dir,
        config.clone(),
        OpenOptions {
            read_only: true,
            ..Default::default()
        },
    )
    .expect("a read-only open")
}

impl Sys {
    pub fn new(segment_bytes: Option<u32>) -> Sys {
        let dir = temp_dir();
        let config = config(segment_bytes);
        let mounted = Some(mount(dir.path(), &config));
        Sys {
            dir,
            crashed: Vec::new(),
            mounted,
            follower: None,
            config,
            early_follower: false,
        }
    }

    pub fn m(&self) -> &Mounted {
        self.mounted.as_ref().expect("mounted")
    }

    pub fn tree(&self) -> &Tree {
        &self.m().tree
    }

    pub fn conn(&mut self) -> &mut Conn {
        &mut self.mounted.as_mut().expect("mounted").conn
    }

    pub fn log(&self) -> Arc<PartitionLog> {
        self.m().mgr.partition(PART).expect("the partition")
    }

    pub fn part_dir(&self) -> PathBuf {
        self.dir.path().join(PART)
    }

    pub fn start_follower(&mut self) {
        self.follower = Some(open_follower(self.dir.path(), &self.config));
    }

    /// The session down to its tree and manager: its connection dropped,
    /// its listener stopped.
    fn stop_listener(&mut self) -> (Tree, Arc<LogManager>) {
        let Mounted {
            mgr,
            tree,
            server,
            conn,
        } = self.mounted.take().expect("mounted");
        drop(conn);
        stop(server, &mgr);
        (tree, mgr)
    }

    /// An unmount and a mount: the listener stops, `destroy`, a clean close.
    pub fn remount(&mut self) {
        let (tree, mgr) = self.stop_listener();
        tree.destroy();
        drop(tree);
        mgr.close().expect("a clean close");
        drop(mgr);
        self.mounted = Some(mount(self.dir.path(), &self.config));
    }

    /// No destroy, no close: the session is dropped, and the next one
    /// starts on a copy of the directory (the page cache's view, as a new
    /// process would find it); the follower starts again on the copy.
    pub fn crash(&mut self) {
        // The listener's threads hold the manager: they go, as the
        // process's would, but nothing is closed.
        let (tree, mgr) = self.stop_listener();
        drop(tree);
        drop(mgr);
        let copy = temp_dir();
        copy_tree(self.dir.path(), copy.path()).expect("a copy of the data directory");
        self.crashed.push(std::mem::replace(&mut self.dir, copy));
        // The follower opens on the recovered directory, or (`early`)
        // on the crashed one, before the writer's recovery.
        let follower = self.follower.take();
        if let Some(f) = &follower {
            f.close().expect("the follower closes");
        }
        if follower.is_some() && self.early_follower {
            self.start_follower();
        }
        self.mounted = Some(mount(self.dir.path(), &self.config));
        if follower.is_some() && !self.early_follower {
            self.start_follower();
        }
    }

    /// The clean end of a case.
    pub fn finish(&mut self) {
        if let Some(Mounted {
            mgr,
            tree,
            server,
            conn,
        }) = self.mounted.take()
        {
            drop(conn);
            stop(server, &mgr);
            tree.destroy();
            drop(tree);
            mgr.close().expect("a clean close");
        }
        if let Some(f) = self.follower.take() {
            f.close().expect("the follower closes");
        }
    }
}

impl Drop for Sys {
    /// What may still write after the session is gone is a roll's
    /// background flush (a checkpoint created while the directory is being
    /// removed), so removal is retried until it holds.
    fn drop(&mut self) {
        self.mounted = None;
        self.follower = None;
        for dir in std::iter::once(&self.dir).chain(&self.crashed) {
            remove_tree(dir.path());
        }
    }
}

fn temp_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("commitfs-all-ops-")
        .tempdir()
        .expect("a temp dir")
}

/// Stops the listener. Its thread that waits for appends (to wake parked
/// fetches) looks at the stop only when an append comes or after a
/// second: the append signal is raised while the stop runs, so a stop
/// takes milliseconds, not a second, per remount.
fn stop(server: KafkaServer, mgr: &LogManager) {
    std::thread::scope(|s| {
        let h = s.spawn(move || {
            let mut server = server;
            server.stop();
        });
        while !h.is_finished() {
            mgr.appends().notify();
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    });
}

/// `OsStr` of a `&str`, for the tree's calls.
pub fn os(s: &str) -> &OsStr {
    OsStr::new(s)
}
