//! The system under test behind a small trait, so that the same sequences
//! run over every backend (a data directory, memory, a Kafka cluster, all
//! through the same `Backend` trait): how to get the tree, remount it
//! cleanly, crash it, and run a retention pass, and its [`Profile`].

use std::path::Path;
use std::sync::Arc;

use crate::copy_tree::{copy_tree, remove_tree};

use super::ops::Op;
use commitfs::backend::local::LocalBackend;
use commitfs::backend::mem::MemBackend;
use commitfs::fs::Tree;
use commitfs::storage::check::check_data_dir;
use commitfs::storage::{LogConfig, LogManager, OpenOptions};

/// What the model is told of a system rather than learning it from the
/// implementation: what its backend offers, and what of it the model's
/// rules cover. Everything else (`status`'s common fields, the nodes a
/// capability brings, a record's batch and position) follows from these
/// and from the seam's types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Profile {
    /// Segment and index files (the `RawFiles` capability). The model's
    /// batches are those files' batches: without them no file is listed and
    /// no record shows its batch's base offset or position.
    pub raw_files: bool,
    /// `roll` and `flush` (the `LogControl` capability).
    pub log_control: bool,
    /// `compact` (the `Compaction` capability): a backend with a log cleaner.
    pub compaction: bool,
    /// `committed` (the `CommittedStream` capability). The model's appends
    /// are never transactional, so it reads as `log` does.
    pub committed: bool,
    /// `time/<ms>` is answered from the records' timestamps: librdkafka's
    /// mock cluster answers every lookup by time with "none".
    pub times: bool,
    /// `config/` is the model's table, Kafka's topic configs as a data
    /// directory lists and validates them: a cluster lists its brokers'
    /// configs (another table), and the mock cluster serves none.
    pub configs: bool,
    /// `groups/` (the `Groups` capability); the model holds no groups, so
    /// the directory is only listed (`tests/groups.rs` drives it).
    pub groups: bool,
}

pub trait System {
    fn tree(&self) -> &Tree;
    fn profile(&self) -> Profile;
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
    /// A client of `group` commits `offset` for `partition`, as a
    /// consumer's OffsetCommit would; false where the system cannot (the
    /// model's group operations are then skipped).
    fn commit(&self, _group: &str, _partition: &str, _offset: i64) -> bool {
        false
    }
    /// Whether [`System::commit`] works here.
    fn commits(&self) -> bool {
        false
    }
    /// What to print beside a mismatch (a server's log).
    fn diagnostics(&self) -> String {
        String::new()
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

fn open(dir: &Path) -> (Arc<LogManager>, Tree) {
    let manager = Arc::new(
        // No cleaner thread: a pass would change compacted partitions behind
        // the model's back (the model has no passes; tests/compaction.rs has).
        LogManager::open(
            dir,
            LogConfig::default(),
            OpenOptions::without_cleaner_threads(),
        )
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

    fn profile(&self) -> Profile {
        Profile {
            raw_files: true,
            log_control: true,
            compaction: true,
            committed: true,
            times: true,
            configs: true,
            groups: false,
        }
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
                "check of {name} after a clean close: {:?} {:?}",
                report.problems,
                report.notes
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
            remove_tree(dir.path());
        }
    }
}

/// Partitions in memory (`commitfs::backend::mem`): the tree's own rules
/// with nothing slow under them, so the most cases run here. The backend
/// outlives a session as a cluster does: a remount or a crash starts a new
/// tree over the same records.
pub struct MemSystem {
    backend: Arc<MemBackend>,
    tree: Tree,
    log_control: bool,
}

impl MemSystem {
    /// With or without `roll` and `flush`, so that both shapes of the tree
    /// are compared.
    pub fn new(log_control: bool) -> MemSystem {
        let backend = Arc::new(match log_control {
            true => MemBackend::new(),
            false => MemBackend::without_log_control(),
        });
        MemSystem {
            tree: Tree::new(backend.clone()),
            backend,
            log_control,
        }
    }
}

impl System for MemSystem {
    fn tree(&self) -> &Tree {
        &self.tree
    }

    fn profile(&self) -> Profile {
        Profile {
            raw_files: false,
            log_control: self.log_control,
            compaction: false,
            committed: true,
            times: true,
            configs: true,
            groups: true,
        }
    }

    fn clean_remount(&mut self, _intact: &[String]) {
        self.tree.destroy();
        self.tree = Tree::new(self.backend.clone());
    }

    fn crash(&mut self) {
        // No destroy: lines held by open handles are lost.
        self.tree = Tree::new(self.backend.clone());
    }

    /// Retention is a data directory's scheduler's; memory keeps all.
    fn retention_tick(&mut self, _now_ms: i64) -> bool {
        false
    }

    fn commit(&self, group: &str, partition: &str, offset: i64) -> bool {
        let (topic, p) = partition.rsplit_once('-').expect("a partition name");
        self.backend.group_model().commit(
            group,
            commitfs::backend::groups::Committed {
                partition: commitfs::backend::groups::TopicPartition {
                    topic: topic.into(),
                    partition: p.parse().expect("a partition number"),
                },
                offset,
                leader_epoch: None,
                metadata: String::new(),
                commit_timestamp: None,
            },
        );
        true
    }

    fn commits(&self) -> bool {
        true
    }
}

fn temp_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("commitfs-model-")
        .tempdir()
        .expect("a temp dir")
}
