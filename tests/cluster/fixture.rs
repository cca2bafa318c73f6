//! A tree over a cluster: the mock cluster, our own listener, or an outside
//! broker, with a fresh topic.

use std::ffi::OsStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use commitfs::cluster::admin::block_on;
use commitfs::cluster::{ClusterBackend, ClusterOptions};
use commitfs::fs::{AccessMode, NoPassthrough, Tree};
use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{BaseProducer, DefaultProducerContext};

use crate::kafka_support::{Server, grants_producer_ids};

pub const ROOT: u64 = 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// librdkafka's in-process mock cluster.
    Mock,
    /// Our listener, or `COMMITFS_TEST_BOOTSTRAP`.
    Broker,
}

/// The broker given by `COMMITFS_TEST_BOOTSTRAP`, if any.
pub fn external() -> Option<String> {
    std::env::var("COMMITFS_TEST_BOOTSTRAP")
        .ok()
        .filter(|s| !s.is_empty())
}

/// Fields drop in order: the tree and its clients before the cluster.
pub struct Fixture {
    pub tree: Tree,
    pub backend: Arc<ClusterBackend>,
    pub mock: Option<MockCluster<'static, DefaultProducerContext>>,
    /// Our listener, stopped (SIGTERM, then reaped) on drop.
    _server: Option<Server>,
    _dir: Option<tempfile::TempDir>,
    pub kind: Kind,
    pub bootstrap: String,
    /// This test's topic.
    pub topic: String,
}

/// A unique topic name (an outside broker is shared between tests and runs).
pub fn unique_topic() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("ct{}x{nanos}", std::process::id())
}

/// `request.timeout.ms`, then `COMMITFS_TEST_OPTIONS`.
pub fn options(bootstrap: &str, timeout_ms: u64) -> ClusterOptions {
    let mut o = ClusterOptions::new(bootstrap);
    o.set("request.timeout.ms", &timeout_ms.to_string())
        .unwrap();
    if let Ok(extra) = std::env::var("COMMITFS_TEST_OPTIONS") {
        for kv in extra.split(',').filter(|s| !s.is_empty()) {
            let (k, v) = kv.split_once('=').expect("COMMITFS_TEST_OPTIONS: k=v,k=v");
            o.set(k, v).unwrap();
        }
    }
    o
}

/// A broker for one test: the outside one, or our listener on a fresh data
/// directory. Our listener hands out producer ids, so the mount's producer
/// is idempotent there; an outside broker without InitProducerId needs
/// `COMMITFS_TEST_OPTIONS=enable.idempotence=false`.
pub fn broker() -> (Option<Server>, Option<tempfile::TempDir>, String) {
    if let Some(b) = external() {
        return (None, None, b);
    }
    let dir = tempfile::Builder::new()
        .prefix("commitfs-cluster-")
        .tempdir()
        .unwrap();
    let server = Server::start(&dir.path().join("data"), &[]);
    assert!(
        grants_producer_ids(&server.addr),
        "the listener must serve InitProducerId"
    );
    let addr = server.addr.clone();
    (Some(server), Some(dir), addr)
}

/// Creates `topic` with `partitions` partitions through a client of our
/// own (not through the tree, which may be read-only).
pub fn create_topic(bootstrap: &str, topic: &str, partitions: i32) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap();
    let new = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    let r = block_on(admin.create_topics([&new], &opts), Duration::from_secs(15))
        .expect("CreateTopics answered")
        .expect("CreateTopics");
    assert!(r.iter().all(Result::is_ok), "CreateTopics {topic}: {r:?}");
}

/// A tree over a cluster with a topic of `partitions` partitions.
pub fn fixture(
    kind: Kind,
    partitions: i32,
    timeout_ms: u64,
    tweak: impl Fn(&mut ClusterOptions),
) -> Fixture {
    let (mock, server, dir, bootstrap, topic) = match kind {
        Kind::Mock => {
            let mock = MockCluster::new(1).expect("mock cluster");
            mock.create_topic("t", partitions, 1).expect("mock topic");
            let b = mock.bootstrap_servers();
            (Some(mock), None, None, b, "t".to_string())
        }
        Kind::Broker => {
            let (server, dir, b) = broker();
            let topic = unique_topic();
            create_topic(&b, &topic, partitions);
            (None, server, dir, b, topic)
        }
    };
    let mut opts = options(&bootstrap, timeout_ms);
    tweak(&mut opts);
    let backend = Arc::new(ClusterBackend::new(opts).unwrap());
    backend.check().expect("the cluster answers");
    let tree = Tree::new(backend.clone());
    let f = Fixture {
        tree,
        backend,
        mock,
        _server: server,
        _dir: dir,
        kind,
        bootstrap,
        topic,
    };
    let last = f.p(partitions - 1);
    wait_for(
        "the new topic's partitions",
        Duration::from_secs(10),
        || f.ino(&last).is_ok(),
    );
    f
}

impl Fixture {
    /// A second mount of the same cluster and topic (the broker stays the
    /// first fixture's).
    pub fn another_mount(&self, timeout_ms: u64) -> Fixture {
        let backend = Arc::new(ClusterBackend::new(options(&self.bootstrap, timeout_ms)).unwrap());
        Fixture {
            tree: Tree::new(backend.clone()),
            backend,
            mock: None,
            _server: None,
            _dir: None,
            kind: self.kind,
            bootstrap: self.bootstrap.clone(),
            topic: self.topic.clone(),
        }
    }

    /// The name of partition `n` of this test's topic.
    pub fn p(&self, n: i32) -> String {
        format!("{}-{n}", self.topic)
    }

    /// Whether the cluster serves the admin APIs and lookups by time (the
    /// mock cluster serves neither).
    pub fn full(&self) -> bool {
        self.kind == Kind::Broker
    }

    pub fn ino(&self, path: &str) -> Result<u64, i32> {
        let mut ino = ROOT;
        for name in path.split('/').filter(|n| !n.is_empty()) {
            ino = self
                .tree
                .lookup(ino, OsStr::new(name))
                .map_err(|e| e.errno)?
                .attr
                .ino;
        }
        Ok(ino)
    }

    pub fn size(&self, path: &str) -> Result<u64, i32> {
        let ino = self.ino(path)?;
        Ok(self.tree.getattr(ino).map_err(|e| e.errno)?.0.size)
    }

    pub fn open(&self, path: &str, read: bool, write: bool) -> Result<u64, i32> {
        let ino = self.ino(path)?;
        let mode = AccessMode { read, write };
        Ok(self
            .tree
            .open(ino, mode, &NoPassthrough)
            .map_err(|e| e.errno)?
            .fh)
    }

    pub fn write(&self, path: &str, data: &[u8]) -> Result<(), i32> {
        let fh = self.open(path, false, true)?;
        let r = self.tree.write(fh, data).map(drop).map_err(|e| e.errno);
        self.tree.release(fh).unwrap();
        r
    }

    pub fn read_at(&self, fh: u64, pos: u64, size: u32) -> Result<Vec<u8>, i32> {
        let mut buf = Vec::new();
        self.tree
            .read(fh, pos, size, &mut buf)
            .map_err(|e| e.errno)?;
        Ok(buf)
    }

    pub fn read(&self, path: &str) -> Result<Vec<u8>, i32> {
        let fh = self.open(path, true, false)?;
        let mut out = Vec::new();
        let r = loop {
            match self.read_at(fh, out.len() as u64, 7000) {
                Err(e) => break Err(e),
                Ok(b) if b.is_empty() => break Ok(out),
                Ok(b) => out.extend_from_slice(&b),
            }
        };
        self.tree.release(fh).unwrap();
        r
    }

    pub fn text(&self, path: &str) -> String {
        String::from_utf8(self.read(path).unwrap()).unwrap()
    }

    pub fn xattr(&self, path: &str, name: &str) -> Result<Vec<u8>, i32> {
        let ino = self.ino(path)?;
        self.tree
            .getxattr(ino, OsStr::new(name))
            .map_err(|e| e.errno)
    }

    pub fn mkdir(&self, name: &str) -> Result<(), i32> {
        self.tree
            .mkdir(ROOT, OsStr::new(name))
            .map(drop)
            .map_err(|e| e.errno)
    }

    pub fn rmdir(&self, name: &str) -> Result<(), i32> {
        self.tree.rmdir(ROOT, OsStr::new(name)).map_err(|e| e.errno)
    }

    pub fn status(&self, partition: &str, key: &str) -> i64 {
        let text = self.text(&format!("{partition}/status"));
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{key}: ")))
            .unwrap_or_else(|| panic!("no {key} in {text}"))
            .parse()
            .unwrap()
    }

    /// A plain rdkafka producer, as another client of the cluster.
    pub fn other_producer(&self) -> BaseProducer {
        ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .set("acks", "all")
            .create()
            .unwrap()
    }

    pub fn names(&self, ino: u64) -> Vec<String> {
        struct All(Vec<String>);
        impl commitfs::fs::DirectoryReplier for All {
            fn add(&mut self, _: u64, _: u64, _: commitfs::fs::NodeType, name: &str) -> bool {
                self.0.push(name.to_string());
                false
            }
        }
        let fh = self.tree.opendir(ino).unwrap();
        let mut all = All(Vec::new());
        self.tree.readdir(ino, fh, 0, &mut all).unwrap();
        self.tree.releasedir(fh);
        all.0
    }
}

/// Waits for `f` to hold, for at most `bound`.
pub fn wait_for(what: &str, bound: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + bound;
    while !f() {
        assert!(Instant::now() < deadline, "{what}: not within {bound:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}
