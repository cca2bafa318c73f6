//! The tree over a Kafka cluster, driven through its API (no kernel).
//!
//! Against librdkafka's in-process mock cluster (`rdkafka::mocking`), which
//! serves the data plane (Metadata, Produce, Fetch, ListOffsets,
//! InitProducerId) but none of the admin APIs.
//!
//! With `COMMITFS_TEST_BOOTSTRAP=host:port` the same checks, and the admin
//! ones (mkdir, rmdir, delete-records, config read and write), run against
//! that broker instead.

use std::ffi::OsStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use commitfs::cluster::{ClusterBackend, ClusterOptions};
use commitfs::fs::{AccessMode, NoPassthrough, Tree};
use rdkafka::ClientConfig;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{BaseProducer, BaseRecord, DefaultProducerContext, Producer};

const ROOT: u64 = 1;

/// The broker given by `COMMITFS_TEST_BOOTSTRAP`, if any.
fn external() -> Option<String> {
    std::env::var("COMMITFS_TEST_BOOTSTRAP")
        .ok()
        .filter(|s| !s.is_empty())
}

struct Fixture {
    mock: Option<MockCluster<'static, DefaultProducerContext>>,
    bootstrap: String,
    backend: Arc<ClusterBackend>,
    tree: Tree,
    /// This test's topic.
    topic: String,
}

fn options(bootstrap: &str, timeout_ms: u64) -> ClusterOptions {
    let mut o = ClusterOptions::new(bootstrap);
    o.set("request.timeout.ms", &timeout_ms.to_string())
        .unwrap();
    o
}

/// A unique topic name on an outside broker.
fn unique_topic() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("ct{}x{nanos}", std::process::id())
}

/// A tree over a cluster with a topic of `partitions` partitions: a mock
/// cluster of one broker, or the outside broker (the topic made by mkdir).
fn fixture(partitions: i32, timeout_ms: u64, tweak: impl Fn(&mut ClusterOptions)) -> Fixture {
    let (mock, bootstrap, topic) = match external() {
        Some(b) => (None, b, unique_topic()),
        None => {
            let mock = MockCluster::new(1).expect("mock cluster");
            mock.create_topic("t", partitions, 1).expect("mock topic");
            let b = mock.bootstrap_servers();
            (Some(mock), b, "t".to_string())
        }
    };
    let mut opts = options(&bootstrap, timeout_ms);
    tweak(&mut opts);
    let backend = Arc::new(ClusterBackend::new(opts).unwrap());
    backend.check().expect("the cluster answers");
    let tree = Tree::new(backend.clone());
    let f = Fixture {
        mock,
        bootstrap,
        backend,
        tree,
        topic,
    };
    if f.mock.is_none() {
        for p in 0..partitions {
            f.mkdir(&f.p(p)).expect("mkdir on the outside broker");
        }
    }
    f
}

fn mock_or_broker(partitions: i32) -> Fixture {
    fixture(partitions, 5000, |_| {})
}

impl Fixture {
    /// The name of partition `n` of this test's topic.
    fn p(&self, n: i32) -> String {
        format!("{}-{n}", self.topic)
    }

    /// Whether the cluster serves the admin APIs and lookups by time (the
    /// mock cluster serves neither).
    fn full(&self) -> bool {
        self.mock.is_none()
    }

    fn ino(&self, path: &str) -> Result<u64, i32> {
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

    fn size(&self, path: &str) -> Result<u64, i32> {
        let ino = self.ino(path)?;
        Ok(self.tree.getattr(ino).map_err(|e| e.errno)?.0.size)
    }

    fn open(&self, path: &str, read: bool, write: bool) -> Result<u64, i32> {
        let ino = self.ino(path)?;
        let mode = AccessMode { read, write };
        Ok(self
            .tree
            .open(ino, mode, &NoPassthrough)
            .map_err(|e| e.errno)?
            .fh)
    }

    fn write(&self, path: &str, data: &[u8]) -> Result<(), i32> {
        let fh = self.open(path, false, true)?;
        let r = self.tree.write(fh, data).map(drop).map_err(|e| e.errno);
        self.tree.release(fh).unwrap();
        r
    }

    fn read_at(&self, fh: u64, pos: u64, size: u32) -> Result<Vec<u8>, i32> {
        let mut buf = Vec::new();
        self.tree
            .read(fh, pos, size, &mut buf)
            .map_err(|e| e.errno)?;
        Ok(buf)
    }

    fn read(&self, path: &str) -> Result<Vec<u8>, i32> {
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

    fn text(&self, path: &str) -> String {
        String::from_utf8(self.read(path).unwrap()).unwrap()
    }

    fn xattr(&self, path: &str, name: &str) -> Result<Vec<u8>, i32> {
        let ino = self.ino(path)?;
        self.tree
            .getxattr(ino, OsStr::new(name))
            .map_err(|e| e.errno)
    }

    fn mkdir(&self, name: &str) -> Result<(), i32> {
        self.tree
            .mkdir(ROOT, OsStr::new(name))
            .map(drop)
            .map_err(|e| e.errno)
    }

    fn rmdir(&self, name: &str) -> Result<(), i32> {
        self.tree.rmdir(ROOT, OsStr::new(name)).map_err(|e| e.errno)
    }

    fn status(&self, partition: &str, key: &str) -> i64 {
        let text = self.text(&format!("{partition}/status"));
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{key}: ")))
            .unwrap_or_else(|| panic!("no {key} in {text}"))
            .parse()
            .unwrap()
    }

    /// A plain rdkafka producer, as another client of the cluster.
    fn other_producer(&self) -> BaseProducer {
        ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .set("acks", "all")
            .create()
            .unwrap()
    }

    fn names(&self, ino: u64) -> Vec<String> {
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
fn wait_for(what: &str, bound: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + bound;
    while !f() {
        assert!(Instant::now() < deadline, "{what}: not within {bound:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn append_then_read_every_way() {
    let f = mock_or_broker(1);
    let p = f.p(0);
    f.write(&format!("{p}/log"), b"hello\n").unwrap();
    f.write(&format!("{p}/log"), b"a\nb\nc\n").unwrap();
    assert_eq!(f.text(&format!("{p}/offset/0")), "hello");
    assert_eq!(f.text(&format!("{p}/offset/3")), "c");
    assert_eq!(f.read(&format!("{p}/offset/4")), Err(libc::ENOENT));
    assert_eq!(f.text(&format!("{p}/log")), "hello\na\nb\nc\n");
    assert_eq!(f.size(&format!("{p}/log")), Ok(12));
    let o1 = format!("{p}/offset/1");
    let ts: i64 = String::from_utf8(f.xattr(&o1, "user.kafka.timestamp").unwrap())
        .unwrap()
        .parse()
        .unwrap();
    assert!(ts > 1_600_000_000_000, "{ts}");
    assert_eq!(
        f.xattr(&o1, "user.kafka.timestamp_type").unwrap(),
        b"CreateTime"
    );
    assert_eq!(f.xattr(&o1, "user.kafka.key"), Err(libc::ENODATA));
    // The cluster hands out records, not batches: no batch or file position.
    assert_eq!(
        f.xattr(&o1, "user.kafka.batch_base_offset"),
        Err(libc::ENODATA)
    );
    assert_eq!(f.xattr(&o1, "user.kafka.position"), Err(libc::ENODATA));
    assert_eq!(f.status(&p, "log_end_offset"), 4);
    assert_eq!(f.status(&p, "log_start_offset"), 0);
    assert!(f.status(&p, "leader") >= 0);
    let past = format!("{p}/time/{}", ts + 3_600_000);
    assert_eq!(f.read(&past), Err(libc::ENOENT));
    if f.full() {
        // The mock cluster answers every lookup by time with "none".
        assert_eq!(f.text(&format!("{p}/time/{ts}")), "1\n");
        assert_eq!(f.text(&format!("{p}/time/0")), "0\n");
    }
}

#[test]
fn keys_headers_and_null_values_from_another_client() {
    let f = mock_or_broker(1);
    let p = f.p(0);
    let producer = f.other_producer();
    let headers = OwnedHeaders::new()
        .insert(Header {
            key: "h1",
            value: Some("one"),
        })
        .insert(Header {
            key: "h1",
            value: Some("uno"),
        })
        .insert(Header {
            key: "empty",
            value: None::<&str>,
        });
    producer
        .send(
            BaseRecord::to(&f.topic)
                .partition(0)
                .key("k\x00ey")
                .payload("v1")
                .headers(headers),
        )
        .unwrap();
    producer
        .send(
            BaseRecord::<str, str>::to(&f.topic)
                .partition(0)
                .key("nothing"),
        )
        .unwrap();
    producer.flush(Duration::from_secs(10)).unwrap();
    let o0 = format!("{p}/offset/0");
    assert_eq!(f.text(&o0), "v1");
    assert_eq!(f.xattr(&o0, "user.kafka.key").unwrap(), b"k\x00ey");
    assert_eq!(f.xattr(&o0, "user.kafka.header.h1").unwrap(), b"uno");
    assert_eq!(f.xattr(&o0, "user.kafka.header.empty").unwrap(), b"");
    let list = f.tree.listxattr(f.ino(&o0).unwrap()).unwrap();
    let names: Vec<&[u8]> = list.split(|b| *b == 0).filter(|n| !n.is_empty()).collect();
    assert_eq!(
        names,
        [
            &b"user.kafka.timestamp"[..],
            b"user.kafka.timestamp_type",
            b"user.kafka.key",
            b"user.kafka.header.h1",
            b"user.kafka.header.empty"
        ]
    );
    assert_eq!(f.text(&format!("{p}/offset/1")), "");
    assert_eq!(f.text(&format!("{p}/log")), "v1\n\n");
}

#[test]
fn parse_key_lines_become_keyed_records() {
    let f = mock_or_broker(1);
    let p = f.p(0);
    f.write(&format!("{p}/config/parse.key"), b"true\n")
        .unwrap();
    f.write(&format!("{p}/config/key.separator"), b":\n")
        .unwrap();
    assert_eq!(f.text(&format!("{p}/config/parse.key")), "true\n");
    f.write(&format!("{p}/log"), b"k1:v1\nk2:v:2\n").unwrap();
    assert_eq!(
        f.xattr(&format!("{p}/offset/1"), "user.kafka.key").unwrap(),
        b"k2"
    );
    assert_eq!(f.text(&format!("{p}/offset/1")), "v:2");
    // A line without the separator: the whole write is refused.
    assert_eq!(
        f.write(&format!("{p}/log"), b"k3:v3\nnokey\n"),
        Err(libc::EINVAL)
    );
    assert_eq!(f.status(&p, "log_end_offset"), 2);
}

#[test]
fn a_stream_of_many_writes_reads_whole_and_at_any_place() {
    let f = fixture(1, 5000, |o| o.set("cache.bytes", "20000").unwrap());
    let p = f.p(0);
    let mut want = Vec::new();
    for w in 0..20 {
        let mut data = Vec::new();
        for i in 0..150 {
            data.extend_from_slice(format!("w{w}-r{i}-{}\n", "x".repeat(i % 40)).as_bytes());
        }
        f.write(&format!("{p}/log"), &data).unwrap();
        want.extend_from_slice(&data);
    }
    let log = format!("{p}/log");
    assert_eq!(f.size(&log), Ok(want.len() as u64));
    assert_eq!(f.read(&log).unwrap(), want);
    let fh = f.open(&log, true, false).unwrap();
    for pos in [0usize, 1, 4095, 33333, want.len() - 10, want.len()] {
        let got = f.read_at(fh, pos as u64, 100).unwrap();
        assert_eq!(got, want[pos..(pos + 100).min(want.len())], "at {pos}");
    }
    f.tree.release(fh).unwrap();
    // The cache stays within cache.bytes.
    assert!(f.status(&p, "cache_bytes") <= 20000);
    assert!(f.status(&p, "stream_spans") >= 1);
}

#[test]
fn a_second_read_near_the_first_costs_no_round_trip() {
    let f = mock_or_broker(1);
    let p = f.p(0);
    f.write(&format!("{p}/log"), b"1\n2\n3\n4\n").unwrap();
    assert_eq!(f.text(&format!("{p}/offset/0")), "1");
    let fetches = f.status(&p, "fetches");
    assert_eq!(f.text(&format!("{p}/offset/2")), "3");
    assert_eq!(f.text(&format!("{p}/offset/0")), "1");
    assert_eq!(f.status(&p, "fetches"), fetches, "served from the cache");
    assert!(f.status(&p, "cache_hits") > 0);
}

#[test]
fn tail_sees_appends_of_another_client() {
    let f = mock_or_broker(1);
    let p = f.p(0);
    let log = format!("{p}/log");
    f.write(&log, b"first\n").unwrap();
    assert_eq!(f.size(&log), Ok(6));
    let fh = f.open(&log, true, false).unwrap();
    assert_eq!(f.read_at(fh, 0, 100).unwrap(), b"first\n");
    let producer = f.other_producer();
    producer
        .send(
            BaseRecord::<str, str>::to(&f.topic)
                .partition(0)
                .payload("second"),
        )
        .unwrap();
    producer.flush(Duration::from_secs(10)).unwrap();
    // What tail -f does: fstat until the size grows, then read from there.
    wait_for("the size grows", Duration::from_secs(5), || {
        f.size(&log) == Ok(13)
    });
    assert_eq!(f.read_at(fh, 6, 100).unwrap(), b"second\n");
    assert_eq!(f.read_at(fh, 13, 100).unwrap(), b"");
    f.tree.release(fh).unwrap();
}

#[test]
fn refusals_and_their_errnos() {
    let f = mock_or_broker(1);
    let p = f.p(0);
    f.write(&format!("{p}/log"), b"x\n").unwrap();
    let dir = f.ino(&p).unwrap();
    let names = f.names(dir);
    assert_eq!(
        names,
        [
            ".",
            "..",
            "log",
            "offset",
            "time",
            "delete-records",
            "config",
            "status"
        ],
        "no raw files, roll or flush over a cluster"
    );
    for absent in ["roll", "flush", "00000000000000000000.log"] {
        assert_eq!(
            f.ino(&format!("{p}/{absent}")),
            Err(libc::ENOENT),
            "{absent}"
        );
    }
    assert_eq!(f.ino(&format!("{p}/offset/007")), Err(libc::ENOENT));
    assert_eq!(f.ino(&format!("{p}/offset/1")), Err(libc::ENOENT));
    assert_eq!(
        f.open(&format!("{p}/status"), false, true),
        Err(libc::EACCES)
    );
    assert_eq!(
        f.open(&format!("{p}/offset/0"), false, true),
        Err(libc::EACCES)
    );
    assert_eq!(
        f.open(&format!("{p}/delete-records"), true, false),
        Err(libc::EACCES)
    );
    let dr = format!("{p}/delete-records");
    assert_eq!(f.write(&dr, b"abc\n"), Err(libc::EINVAL));
    assert_eq!(f.write(&dr, b"99\n"), Err(libc::EINVAL), "past the log end");
    let e = f.tree.unlink("unlink", dir, OsStr::new("log"));
    assert_eq!(e.errno, libc::EPERM);
    let o0 = f.ino(&format!("{p}/offset/0")).unwrap();
    let e = f
        .tree
        .refuse_xattr_change("setxattr", o0, OsStr::new("user.x"));
    assert_eq!(e.errno, libc::EPERM);
    // A record over message.max.bytes (the client's, 1000000 by default).
    let big = vec![b'a'; 1_000_001];
    assert_eq!(
        f.write(&format!("{p}/log"), &[&big[..], b"\n"].concat()),
        Err(libc::EMSGSIZE)
    );
    // mkdir: bad names, existing partitions, holes.
    assert_eq!(f.mkdir("no_partition"), Err(libc::EINVAL));
    assert_eq!(f.mkdir(&format!("{}--1", f.topic)), Err(libc::EINVAL));
    assert_eq!(f.mkdir(&p), Err(libc::EEXIST));
    assert_eq!(f.mkdir(&f.p(5)), Err(libc::EINVAL), "a hole");
    assert_eq!(
        f.mkdir(&format!("{}-1", unique_topic())),
        Err(libc::EINVAL),
        "a hole"
    );
    // rmdir: a cluster cannot take one partition away.
    if f.full() {
        f.mkdir(&f.p(1)).unwrap();
        assert_eq!(f.rmdir(&f.p(1)), Err(libc::EPERM));
        assert_eq!(f.rmdir(&p), Err(libc::EPERM));
        let e = f.write(&format!("{p}/config/retention.ms"), b"-7\n");
        assert_eq!(e, Err(libc::EINVAL));
    }
    assert_eq!(f.rmdir(&format!("{}-0", unique_topic())), Err(libc::ENOENT));
}

#[test]
fn admin_operations() {
    let f = fixture(1, 1500, |_| {});
    let p = f.p(0);
    f.write(&format!("{p}/log"), b"a\nb\nc\nd\n").unwrap();
    let new_topic = format!("{}-0", unique_topic());
    if !f.full() {
        // The mock cluster serves none of the admin APIs. librdkafka says so
        // for the requests it sends to a partition's leader (EOPNOTSUPP) and
        // waits for a controller that serves them for the others, until the
        // request timeout (ETIMEDOUT). Either way a log line says what.
        let refused = |what: &str, r: Result<(), i32>| {
            let e = r.unwrap_err();
            assert!(
                [libc::ETIMEDOUT, libc::EOPNOTSUPP].contains(&e),
                "{what}: {e}"
            );
        };
        refused("mkdir of a topic", f.mkdir(&new_topic));
        refused("mkdir of a partition", f.mkdir(&f.p(1)));
        refused(
            "delete-records",
            f.write(&format!("{p}/delete-records"), b"2\n"),
        );
        refused(
            "config read",
            f.read(&format!("{p}/config/retention.ms")).map(drop),
        );
        refused(
            "config write",
            f.write(&format!("{p}/config/retention.ms"), b"1\n"),
        );
        return;
    }
    // delete-records moves the log start; the stream loses its front.
    f.write(&format!("{p}/delete-records"), b"2\n").unwrap();
    assert_eq!(f.status(&p, "log_start_offset"), 2);
    assert_eq!(f.ino(&format!("{p}/offset/1")), Err(libc::ENOENT));
    assert_eq!(f.text(&format!("{p}/offset/2")), "c");
    assert_eq!(f.text(&format!("{p}/log")), "c\nd\n");
    assert_eq!(f.size(&format!("{p}/log")), Ok(4));
    f.write(&format!("{p}/delete-records"), b"-1\n").unwrap();
    assert_eq!(f.status(&p, "log_start_offset"), 4);
    assert_eq!(f.text(&format!("{p}/log")), "");
    // Configs: DescribeConfigs and IncrementalAlterConfigs on the topic.
    let rt = format!("{p}/config/retention.ms");
    f.write(&rt, b"86400000\n").unwrap();
    assert_eq!(f.text(&rt), "86400000\n");
    // mkdir: a new topic, its next partition; rmdir of a one-partition topic.
    f.mkdir(&new_topic).unwrap();
    f.write(&format!("{new_topic}/log"), b"z\n").unwrap();
    assert_eq!(f.text(&format!("{new_topic}/offset/0")), "z");
    let root = f.names(ROOT);
    assert!(root.contains(&new_topic), "{root:?}");
    f.rmdir(&new_topic).unwrap();
    assert_eq!(f.ino(&new_topic), Err(libc::ENOENT));
}

#[test]
fn an_unreachable_cluster_fails_within_the_timeout_and_recovers() {
    let Some(f) = Some(fixture(1, 1500, |_| {})).filter(|f| !f.full()) else {
        eprintln!("skipping: needs the mock cluster, whose broker the test can stop");
        return;
    };
    let p = f.p(0);
    f.write(&format!("{p}/log"), b"before\n").unwrap();
    f.write(&format!("{p}/log"), b"more\n").unwrap();
    assert_eq!(f.text(&format!("{p}/offset/0")), "before");
    let mock = f.mock.as_ref().unwrap();
    mock.broker_down(1).unwrap();
    // Records fetched before stay readable: they cannot change.
    assert_eq!(f.text(&format!("{p}/offset/0")), "before");
    // Everything that needs the cluster fails with an errno, in bounded time.
    let bound = Duration::from_millis(1500 + 1500);
    let failed = |what: &str, r: Result<(), i32>| {
        let t = Instant::now();
        let e = r.unwrap_err();
        assert!([libc::EIO, libc::ETIMEDOUT].contains(&e), "{what}: {e}");
        t.elapsed()
    };
    let t = Instant::now();
    let e = f.size(&format!("{p}/log")).map(drop);
    failed("stat log", e);
    assert!(t.elapsed() < bound, "stat log took {:?}", t.elapsed());
    let t = Instant::now();
    failed("append", f.write(&format!("{p}/log"), b"during\n"));
    assert!(t.elapsed() < bound, "append took {:?}", t.elapsed());
    let t = Instant::now();
    failed("status", f.read(&format!("{p}/status")).map(drop));
    assert!(t.elapsed() < bound * 2, "status took {:?}", t.elapsed());
    mock.broker_up(1).unwrap();
    wait_for("writes work again", Duration::from_secs(20), || {
        f.write(&format!("{p}/log"), b"after\n").is_ok()
    });
    let log = f.text(&format!("{p}/log"));
    assert!(
        log.starts_with("before\n") && log.ends_with("after\n"),
        "{log}"
    );
    assert!(
        !log.contains("during") || log.matches("during").count() == 1,
        "{log}"
    );
}

#[test]
fn a_read_only_mount_refuses_every_change() {
    let f = fixture(1, 5000, |o| o.read_only = true);
    let p = f.p(0);
    assert_eq!(f.open(&format!("{p}/log"), false, true), Err(libc::EROFS));
    assert_eq!(f.mkdir(&f.p(1)), Err(libc::EROFS));
    assert_eq!(f.text(&format!("{p}/log")), "");
}

#[test]
fn closing_settles_produces_in_flight() {
    let Some(f) = Some(fixture(1, 2000, |_| {})).filter(|f| !f.full()) else {
        eprintln!("skipping: needs the mock cluster, whose broker the test can stop");
        return;
    };
    let p = f.p(0);
    f.write(&format!("{p}/log"), b"before\n").unwrap();
    let (tree, backend) = (&f.tree, &f.backend);
    let fh = f.open(&format!("{p}/log"), false, true).unwrap();
    f.mock.as_ref().unwrap().broker_down(1).unwrap();
    let t = Instant::now();
    std::thread::scope(|s| {
        let writer = s.spawn(|| tree.write(fh, b"in flight\n").map_err(|e| e.errno));
        std::thread::sleep(Duration::from_millis(300));
        // What umount and SIGTERM do once the session ends.
        backend.close();
        let e = writer.join().unwrap().unwrap_err();
        assert!([libc::EIO, libc::ETIMEDOUT].contains(&e), "{e}");
    });
    tree.release(fh).unwrap();
    assert!(t.elapsed() < Duration::from_secs(6), "{:?}", t.elapsed());
}
