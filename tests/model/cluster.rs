//! The model's sequences over the cluster backend (`commitfs::cluster`): the
//! same tree, driven the same way, compared with the same model after every
//! step, on librdkafka's in-process mock cluster and on our own listener
//! (`commitfs serve` of a fresh data directory).
//!
//! On our listener, which serves the admin APIs and lookups by time,
//! `mkdir`, `delete-records` and `time/<ms>` run and are compared too; what
//! it still skips is `rmdir` (Kafka's rule differs, see below), configs and
//! retention. On the mock cluster the model skips, and why:
//! - `mkdir`, `rmdir` and `rmdir && mkdir`: the mock serves no admin API
//!   (CreateTopics, CreatePartitions, DeleteTopics); the sequence's
//!   partition `t-0` is made in the mock before it starts. Kafka's rule for
//!   rmdir (only a topic's only partition) differs from a data directory's
//!   in any case; tests/cluster covers both on a broker that has them.
//! - writes to `delete-records` and `config/<name>`: no DeleteRecords,
//!   DescribeConfigs or IncrementalAlterConfigs on the mock; probes of
//!   `config/` and `time/` nodes, whose lookups ask those APIs or a lookup
//!   by time, which the mock answers with "none" whatever the timestamps;
//!   for the same reason `time/<ms>` and `config/` are not compared.
//! - retention passes: a cluster's retention is its brokers', not the tree's.
//! - `roll` and `flush` do not exist over a cluster, nor raw files, nor a
//!   record's batch base offset and position (a client sees records, not
//!   batches): the model knows that from the profile.
//!
//! A clean remount closes the tree (held lines are appended) and the
//! clients, then connects new ones; a crash drops the tree without a close
//! (held lines are lost). The records are the cluster's and survive both.

use std::sync::Arc;

use commitfs::cluster::{ClusterBackend, ClusterOptions};
use commitfs::fs::Tree;
use rdkafka::mocking::MockCluster;
use rdkafka::producer::DefaultProducerContext;

use super::ops::{Node, Op, Probe, Target};
use super::system::{Profile, System};
use crate::kafka_support::{Server, grants_producer_ids};

pub struct ClusterSystem {
    /// The tree and its clients go before the cluster (see `Drop`).
    mounted: Option<(Arc<ClusterBackend>, Tree)>,
    bootstrap: String,
    /// Client properties beyond the defaults.
    extra: Vec<(&'static str, &'static str)>,
    cluster: Cluster,
}

/// What keeps the cluster up while the system lives.
enum Cluster {
    Mock {
        _mock: MockCluster<'static, DefaultProducerContext>,
    },
    /// Our listener and its data directory.
    Listener {
        _server: Server,
        _dir: tempfile::TempDir,
    },
}

fn open(bootstrap: &str, extra: &[(&str, &str)]) -> (Arc<ClusterBackend>, Tree) {
    let mut o = ClusterOptions::new(bootstrap);
    o.set("request.timeout.ms", "10000").expect("an option");
    for (k, v) in extra {
        o.set(k, v).expect("an option");
    }
    // Reads here mostly go to the log end just written: a short long poll
    // keeps each of the many comparisons from waiting 100 ms there.
    o.set("fetch.wait.max.ms", "5").expect("an option");
    o.set("linger.ms", "0").expect("an option");
    let backend = Arc::new(ClusterBackend::new(o).expect("the clients start"));
    backend.check().expect("the cluster answers");
    let tree = Tree::new(backend.clone());
    (backend, tree)
}

impl ClusterSystem {
    /// A mock cluster of one broker with topic `t` of one partition.
    pub fn mock() -> ClusterSystem {
        let mock = MockCluster::new(1).expect("a mock cluster");
        mock.create_topic("t", 1, 1).expect("topic t");
        let bootstrap = mock.bootstrap_servers();
        ClusterSystem {
            mounted: Some(open(&bootstrap, &[])),
            bootstrap,
            extra: Vec::new(),
            cluster: Cluster::Mock { _mock: mock },
        }
    }

    /// Our listener over a fresh data directory, with no partition yet.
    pub fn listener() -> ClusterSystem {
        let dir = tempfile::Builder::new()
            .prefix("commitfs-model-")
            .tempdir()
            .expect("a temp dir");
        let server = Server::start(&dir.path().join("data"), &[]);
        let bootstrap = server.addr.clone();
        // The mount's producer is idempotent: the listener hands out
        // producer ids.
        assert!(
            grants_producer_ids(&bootstrap),
            "the listener must serve InitProducerId"
        );
        let extra = Vec::new();
        ClusterSystem {
            mounted: Some(open(&bootstrap, &extra)),
            bootstrap,
            extra,
            cluster: Cluster::Listener {
                _server: server,
                _dir: dir,
            },
        }
    }

    fn full(&self) -> bool {
        matches!(self.cluster, Cluster::Listener { .. })
    }
}

/// The node a probe is about.
fn probed(p: &Probe) -> Option<Node> {
    match p {
        Probe::OpenWrite(n)
        | Probe::OpenRead(n)
        | Probe::Setattr(n, _)
        | Probe::XattrChange(n, _)
        | Probe::GetxattrAbsent(n)
        | Probe::NameChange(n, _, _)
        | Probe::Lookup(n, _) => Some(*n),
        _ => None,
    }
}

impl System for ClusterSystem {
    fn tree(&self) -> &Tree {
        &self.mounted.as_ref().expect("mounted").1
    }

    fn profile(&self) -> Profile {
        Profile {
            raw_files: false,
            log_control: false,
            compaction: false,
            committed: false,
            times: self.full(),
            configs: false,
            groups: true,
        }
    }

    fn clean_remount(&mut self, _intact: &[String]) {
        let (backend, tree) = self.mounted.take().expect("mounted");
        tree.destroy();
        drop(tree);
        backend.close();
        drop(backend);
        self.mounted = Some(open(&self.bootstrap, &self.extra));
    }

    fn crash(&mut self) {
        // No destroy: lines held by open handles are lost, as when the
        // daemon dies. Acknowledged records are the cluster's.
        self.mounted = None;
        self.mounted = Some(open(&self.bootstrap, &self.extra));
    }

    fn retention_tick(&mut self, _now_ms: i64) -> bool {
        false
    }

    fn runs(&self, op: &Op) -> bool {
        let full = self.full();
        match op {
            Op::Rmdir(_) | Op::Recreate(_) | Op::RetentionTick(_) => false,
            Op::Mkdir(_) => full,
            Op::Open { target, .. } | Op::Echo { target, .. } => match target {
                Target::DeleteRecords => full,
                Target::Config(_) => false,
                _ => true,
            },
            Op::Probe { probe, .. } => match probed(probe) {
                Some(Node::Time(_) | Node::TimeDir) => full,
                Some(Node::Config(_) | Node::ConfigDir) => false,
                _ => true,
            },
            _ => true,
        }
    }

    fn diagnostics(&self) -> String {
        match &self.cluster {
            Cluster::Listener { _server: s, .. } => {
                format!("the listener at {}, its log:\n{}", s.addr, s.log())
            }
            Cluster::Mock { .. } => format!("the mock cluster at {}", self.bootstrap),
        }
    }

    fn premade(&self) -> Vec<String> {
        if self.full() {
            Vec::new()
        } else {
            vec!["t-0".to_string()]
        }
    }
}

impl Drop for ClusterSystem {
    fn drop(&mut self) {
        if let Some((backend, tree)) = self.mounted.take() {
            drop(tree);
            backend.close();
        }
    }
}
