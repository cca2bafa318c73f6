//! The seam's promises (`commitfs::backend`), stated once and asserted over
//! every backend through the `Backend` and `Partition` traits: memory, a
//! local data directory, a cluster on librdkafka's mock, a cluster on our
//! own listener. The expectations come from the traits' documentation and
//! Kafka's definitions (offsets, the log start, offsetsForTimes), applied to
//! what each test wrote; never from the backend under test.
//!
//! Where a backend may differ, [`Rules`] says so, per backend, with why.

#[path = "kafka_support/mod.rs"]
mod kafka_support;

use std::sync::Arc;

use commitfs::backend::local::LocalBackend;
use commitfs::backend::mem::MemBackend;
use commitfs::backend::{AppendError, Backend, ErrorKind, Landed, Partition, Status};
use commitfs::cluster::{ClusterBackend, ClusterOptions};
use commitfs::record::NewRecord;
use commitfs::storage::{LogConfig, LogManager, OpenOptions};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::DefaultProducerContext;

use kafka_support::Server;

/// How a backend may legitimately differ from the others.
#[derive(Clone, Copy, Debug)]
struct Rules {
    /// Partitions are made, deleted and configured, records deleted and
    /// looked up by time through it: librdkafka's mock cluster serves no
    /// admin API and answers no lookup by time.
    admin: bool,
    /// Kafka cannot take one partition away from a topic, so a cluster
    /// deletes only a topic's only partition (`NotPermitted` otherwise); a
    /// data directory and memory delete a topic's highest partition.
    kafka_rmdir: bool,
    /// The backend writes the batches itself and says how many and where
    /// each record's starts (a client library hands out records only).
    batches: bool,
}

/// Topics each test uses, one per promise (the mock cluster has them made).
const TOPICS: &[&str] = &[
    "names", "append", "range", "delrec", "times", "configs", "status", "ro",
];

/// One backend under test and what keeps its store alive.
struct Subject {
    what: &'static str,
    backend: Arc<dyn Backend>,
    rules: Rules,
    /// A read-only backend over the same store.
    read_only: Box<dyn Fn() -> Arc<dyn Backend>>,
    /// Cluster backends, closed before the cluster goes.
    clusters: Vec<Arc<ClusterBackend>>,
    _mock: Option<MockCluster<'static, DefaultProducerContext>>,
    _server: Option<Server>,
    _dir: Option<tempfile::TempDir>,
}

impl Drop for Subject {
    fn drop(&mut self) {
        for c in self.clusters.drain(..) {
            c.close();
        }
    }
}

fn mem() -> (Subject, Arc<MemBackend>) {
    let backend = Arc::new(MemBackend::new());
    let ro = backend.clone();
    let subject = Subject {
        what: "memory",
        backend: backend.clone(),
        rules: Rules {
            admin: true,
            kafka_rmdir: false,
            batches: false,
        },
        // The same records; the flag is the backend's, so it is turned back
        // by whoever turned it on.
        read_only: Box::new(move || {
            ro.set_read_only(true);
            ro.clone() as Arc<dyn Backend>
        }),
        clusters: Vec::new(),
        _mock: None,
        _server: None,
        _dir: None,
    };
    (subject, backend)
}

fn local() -> Subject {
    let dir = tempfile::Builder::new()
        .prefix("commitfs-contract-")
        .tempdir()
        .expect("a temp dir");
    let open = |path: &std::path::Path, read_only| {
        let m = LogManager::open(
            path,
            LogConfig::default(),
            OpenOptions {
                read_only,
                ..Default::default()
            },
        );
        Arc::new(LocalBackend::new(Arc::new(
            m.expect("the data directory opens"),
        )))
    };
    let path = dir.path().to_path_buf();
    Subject {
        what: "a local data directory",
        backend: open(dir.path(), false),
        rules: Rules {
            admin: true,
            kafka_rmdir: false,
            batches: true,
        },
        read_only: Box::new(move || open(&path, true) as Arc<dyn Backend>),
        clusters: Vec::new(),
        _mock: None,
        _server: None,
        _dir: Some(dir),
    }
}

fn cluster_backend(bootstrap: &str, read_only: bool) -> Arc<ClusterBackend> {
    let mut o = ClusterOptions::new(bootstrap);
    o.set("request.timeout.ms", "10000").expect("an option");
    o.set("fetch.wait.max.ms", "5").expect("an option");
    o.read_only = read_only;
    let b = Arc::new(ClusterBackend::new(o).expect("the clients start"));
    b.check().expect("the cluster answers");
    b
}

fn cluster(mock: bool) -> Subject {
    let (mock, server, dir, bootstrap) = if mock {
        let m = MockCluster::new(1).expect("a mock cluster");
        for t in TOPICS {
            m.create_topic(t, 1, 1).expect("a topic");
        }
        let b = m.bootstrap_servers();
        (Some(m), None, None, b)
    } else {
        let dir = tempfile::Builder::new()
            .prefix("commitfs-contract-")
            .tempdir()
            .expect("a temp dir");
        let s = Server::start(&dir.path().join("data"), &[]);
        let b = s.addr.clone();
        (None, Some(s), Some(dir), b)
    };
    let backend = cluster_backend(&bootstrap, false);
    Subject {
        what: if mock.is_some() {
            "a cluster on librdkafka's mock"
        } else {
            "a cluster on our listener"
        },
        backend: backend.clone(),
        rules: Rules {
            admin: mock.is_none(),
            kafka_rmdir: true,
            batches: false,
        },
        read_only: Box::new(move || cluster_backend(&bootstrap, true) as Arc<dyn Backend>),
        clusters: vec![backend],
        _mock: mock,
        _server: server,
        _dir: dir,
    }
}

/// The error kind of a result that must be an error.
fn kind<T>(r: Result<T, commitfs::backend::BackendError>) -> ErrorKind {
    match r {
        Ok(_) => panic!("no error where one was due"),
        Err(e) => e.kind,
    }
}

impl Subject {
    /// Partition 0 of `topic`, made for the test where the backend makes
    /// partitions (the mock cluster has it made).
    fn fresh(&self, topic: &str) -> Arc<dyn Partition> {
        let name = format!("{topic}-0");
        if self.rules.admin {
            self.backend
                .create_partition(&name)
                .unwrap_or_else(|e| panic!("{}: create {name}: {e}", self.what));
        }
        self.backend.partition(&name).expect("the partition")
    }

    /// Appends `values` and checks the promise of `Appended`: the offsets
    /// follow the log end, contiguous.
    fn append(&self, p: &dyn Partition, values: &[&str]) -> (i64, i64) {
        let end = p.offsets().expect("offsets").log_end;
        let recs: Vec<NewRecord> = values
            .iter()
            .map(|v| NewRecord::value(v.as_bytes()))
            .collect();
        let a = p
            .append(&recs)
            .unwrap_or_else(|e| panic!("{}: append: {e:?}", self.what));
        let want = (end, end + values.len() as i64 - 1);
        assert_eq!(
            (a.first_offset, a.last_offset),
            want,
            "{}: Appended",
            self.what
        );
        assert_eq!(
            a.batches.is_some(),
            self.rules.batches,
            "{}: batches",
            self.what
        );
        want
    }

    /// The consumer stream as `read_stream` gives it, `chunk` bytes a call.
    fn stream(&self, p: &dyn Partition, chunk: usize) -> Vec<u8> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; chunk];
        loop {
            let n = p.read_stream(out.len() as u64, &mut buf).expect("a read");
            if n == 0 {
                return out;
            }
            out.extend_from_slice(&buf[..n]);
        }
    }

    fn status(&self, p: &dyn Partition) -> (i64, i64, i64) {
        match p.status().expect("status") {
            Status::Serving {
                log_start_offset,
                log_end_offset,
                high_watermark,
                ..
            } => (log_start_offset, log_end_offset, high_watermark),
            s => panic!("{}: {s:?}", self.what),
        }
    }
}

/// Names: Kafka's rules refuse, on every backend, before anything is asked
/// of a cluster; made partitions are listed, sorted; a second is `Exists`.
fn names(s: &Subject) {
    for bad in ["t", "t-01", "t--1", ".-0", "a/b-0", "t-2147483648"] {
        let e = kind(s.backend.create_partition(bad));
        assert_eq!(e, ErrorKind::InvalidName, "{}: create {bad}", s.what);
    }
    if !s.rules.admin {
        return;
    }
    s.fresh("names");
    s.backend.create_partition("names-1").expect("names-1");
    let listed = s.backend.partition_names().expect("names");
    let ours: Vec<&String> = listed.iter().filter(|n| n.starts_with("names-")).collect();
    assert_eq!(ours, ["names-0", "names-1"], "{}: listing", s.what);
    let mut sorted = listed.clone();
    sorted.sort();
    assert_eq!(listed, sorted, "{}: sorted", s.what);
    assert_eq!(
        kind(s.backend.create_partition("names-1")),
        ErrorKind::Exists
    );
    let gap = kind(s.backend.create_partition("names-3"));
    assert_eq!(gap, ErrorKind::InvalidPartitions, "{}: a hole", s.what);
    assert_eq!(kind(s.backend.partition("names-7")), ErrorKind::NotFound);
    deletes(s);
}

/// `rmdir`: the backend's rule, then the partition is gone, and a handle
/// kept from before refuses every change with `NotFound` (the tree's
/// handles of the old partition must never reach a new one of its name).
fn deletes(s: &Subject) {
    let old = s.backend.partition("names-1").expect("names-1");
    let refused = kind(s.backend.delete_partition("names-0"));
    match s.rules.kafka_rmdir {
        true => {
            assert_eq!(refused, ErrorKind::NotPermitted, "{}", s.what);
            return;
        }
        false => assert_eq!(refused, ErrorKind::InvalidPartitions, "{}", s.what),
    }
    s.backend
        .delete_partition("names-1")
        .expect("the highest goes");
    assert_eq!(
        kind(s.backend.delete_partition("names-1")),
        ErrorKind::NotFound
    );
    assert_eq!(kind(s.backend.partition("names-1")), ErrorKind::NotFound);
    s.backend
        .create_partition("names-1")
        .expect("a new names-1");
    let a = old.append(&[NewRecord::value(b"x")]).expect_err("gone");
    assert_eq!(a.error.kind, ErrorKind::NotFound, "{}: kept handle", s.what);
    let changes = [
        old.set_config("retention.ms", "1000"),
        old.set_line_format("parse.key", "true"),
        old.delete_records(0).map(drop),
    ];
    for c in changes {
        assert_eq!(kind(c), ErrorKind::NotFound, "{}: kept handle", s.what);
    }
    let new = s.backend.partition("names-1").expect("names-1");
    assert_eq!(new.offsets().expect("offsets").log_end, 0, "{}", s.what);
    assert!(!new.line_format().parse_key, "{}", s.what);
}

/// Records read back as written: values, keys, headers, null values, the
/// stream (`value\n` each) and its length, `contains`.
fn appends(s: &Subject) {
    let p = s.fresh("append");
    s.append(&*p, &["a", "bb"]);
    let headers: &[(&str, Option<&[u8]>)] = &[("h", Some(b"v")), ("n", None)];
    let keyed = NewRecord {
        key: Some(b"k"),
        value: None,
        headers,
    };
    let a = p.append(&[keyed]).expect("a keyed record");
    assert_eq!((a.first_offset, a.last_offset), (2, 2), "{}", s.what);
    s.append(&*p, &["ccc"]);
    let r = p.record(2).expect("record 2").record;
    assert_eq!(
        (r.offset, r.key.as_deref(), r.value.as_deref()),
        (2, Some(&b"k"[..]), None)
    );
    let hs: Vec<(&str, Option<&[u8]>)> = r
        .headers
        .iter()
        .map(|h| (h.key.as_str(), h.value.as_deref()))
        .collect();
    assert_eq!(hs, headers, "{}: headers", s.what);
    assert_eq!(
        p.record(3).expect("record 3").record.value.as_deref(),
        Some(&b"ccc"[..])
    );
    let want = b"a\nbb\n\nccc\n";
    assert_eq!(
        p.stream_len().expect("len"),
        want.len() as u64,
        "{}",
        s.what
    );
    for chunk in [1, 3, 64] {
        assert_eq!(s.stream(&*p, chunk), want, "{}: stream by {chunk}", s.what);
    }
    let contained: Vec<bool> = (0..5).map(|o| p.contains(o).expect("contains")).collect();
    assert_eq!(contained, [true, true, true, true, false], "{}", s.what);
    let e = kind(p.append(&[]).map_err(|e: AppendError| e.error));
    assert_eq!(e, ErrorKind::InvalidRecord, "{}: an empty append", s.what);
    let batch = p.record(1).expect("record 1").batch_base_offset;
    assert_eq!(batch, s.rules.batches.then_some(0), "{}: batch", s.what);
}

/// Offsets outside `[log start, log end)` are `OffsetOutOfRange`.
fn range(s: &Subject) {
    let p = s.fresh("range");
    s.append(&*p, &["a", "b"]);
    for outside in [2, 3, 100] {
        let e = kind(p.record(outside));
        let ok = matches!(e, ErrorKind::OffsetOutOfRange { .. });
        assert!(ok, "{}: record({outside}): {e:?}", s.what);
    }
}

/// DeleteRecords moves the log start up (never down, never past the end).
fn delete_records(s: &Subject) {
    if !s.rules.admin {
        return;
    }
    let p = s.fresh("delrec");
    s.append(&*p, &["a", "b", "c"]);
    assert_eq!(p.delete_records(2).expect("to 2"), 2, "{}", s.what);
    assert_eq!(
        p.delete_records(1).expect("below"),
        2,
        "{}: never down",
        s.what
    );
    let e = kind(p.delete_records(4));
    assert!(
        matches!(e, ErrorKind::OffsetOutOfRange { .. }),
        "{}: {e:?}",
        s.what
    );
    assert_eq!(p.offsets().expect("offsets").log_start, 2);
    assert!(matches!(
        kind(p.record(1)),
        ErrorKind::OffsetOutOfRange { .. }
    ));
    assert!(!p.contains(1).expect("contains"), "{}", s.what);
    assert_eq!(s.stream(&*p, 7), b"c\n", "{}", s.what);
    assert_eq!(s.status(&*p), (2, 3, 3), "{}: status", s.what);
}

/// offsetsForTimes: the first live offset whose timestamp is at or after
/// the one asked, by the timestamps the records read back with.
fn times(s: &Subject) {
    if !s.rules.admin {
        return;
    }
    let p = s.fresh("times");
    for v in ["a", "b", "c", "d"] {
        s.append(&*p, &[v]);
    }
    p.delete_records(1).expect("delete-records");
    let ts: Vec<i64> = (1..4)
        .map(|o| p.record(o).expect("a record").record.timestamp)
        .collect();
    let kafka = |ms: i64| (1..4).find(|o| ts[*o as usize - 1] >= ms);
    let mut asks = vec![0, i64::MAX / 2];
    for t in &ts {
        asks.extend([t - 1, *t, t + 1]);
    }
    for ms in asks {
        let got = p.offset_for_timestamp(ms).expect("a lookup");
        assert_eq!(got, kafka(ms), "{}: time {ms} over {ts:?}", s.what);
    }
}

/// Topic configs and the line format read back as set; bad values are
/// `InvalidConfig`.
fn configs(s: &Subject) {
    let p = s.fresh("configs");
    p.set_line_format("parse.key", "true").expect("parse.key");
    p.set_line_format("key.separator", ":")
        .expect("key.separator");
    let f = p.line_format();
    assert_eq!(
        (f.parse_key, f.key_separator.as_str()),
        (true, ":"),
        "{}",
        s.what
    );
    for (name, bad) in [
        ("parse.key", "yes"),
        ("key.separator", ""),
        ("retention.ms", "1"),
    ] {
        let e = kind(p.set_line_format(name, bad));
        assert_eq!(
            e,
            ErrorKind::InvalidConfig,
            "{}: line format {name}={bad:?}",
            s.what
        );
    }
    if !s.rules.admin {
        return;
    }
    assert!(
        s.backend.config_names().contains(&"retention.ms"),
        "{}",
        s.what
    );
    p.set_config("retention.ms", "3600000")
        .expect("retention.ms");
    let got = p.config("retention.ms").expect("a config");
    assert_eq!(got.as_deref(), Some("3600000"), "{}", s.what);
    let e = kind(p.set_config("retention.ms", "soon"));
    assert_eq!(e, ErrorKind::InvalidConfig, "{}: a bad value", s.what);
    assert_eq!(
        p.config("retention.ms").expect("kept").as_deref(),
        Some("3600000")
    );
}

/// `status`'s common fields: log start, log end, and the high watermark,
/// which for one copy of each record is the log end.
fn status(s: &Subject) {
    let p = s.fresh("status");
    assert_eq!(s.status(&*p), (0, 0, 0), "{}", s.what);
    s.append(&*p, &["a", "b"]);
    assert_eq!(s.status(&*p), (0, 2, 2), "{}", s.what);
    let o = p.offsets().expect("offsets");
    assert_eq!((o.log_start, o.log_end), (0, 2), "{}", s.what);
    if let Some(control) = p.log_control() {
        control.roll().expect("roll");
        control.flush().expect("flush");
        s.append(&*p, &["c"]);
        assert_eq!(s.status(&*p), (0, 3, 3), "{}: after a roll", s.what);
    }
}

/// A read-only backend refuses every change with `ReadOnly` and reads.
fn read_only(s: &Subject) {
    let p = s.fresh("ro");
    s.append(&*p, &["a"]);
    let ro = (s.read_only)();
    let refuse = |what: &str, e: ErrorKind| {
        assert_eq!(e, ErrorKind::ReadOnly, "{}: read-only {what}", s.what);
    };
    let rp = ro.partition("ro-0").expect("ro-0");
    assert_eq!(
        rp.record(0).expect("a read").record.value.as_deref(),
        Some(&b"a"[..])
    );
    refuse(
        "append",
        rp.append(&[NewRecord::value(b"x")])
            .expect_err("read-only")
            .error
            .kind,
    );
    if s.rules.admin {
        refuse("create", kind(ro.create_partition("ro-1")));
        refuse("delete", kind(ro.delete_partition("ro-0")));
        refuse("delete-records", kind(rp.delete_records(1)));
        refuse("set_config", kind(rp.set_config("retention.ms", "1000")));
    }
}

/// Memory's own: a partial append says which records landed, and they are
/// in the log; a transaction marker's offset holds no record.
fn memory_faults(m: &MemBackend, s: &Subject) {
    let p = s.fresh("partial");
    s.append(&*p, &["a"]);
    m.faults().fail_append_partway(2, ErrorKind::TimedOut);
    let recs = [b"b", b"c", b"d"].map(|v| NewRecord::value(v));
    let e = p.append(&recs).expect_err("a fault");
    assert_eq!(e.error.kind, ErrorKind::TimedOut);
    let landed = Landed {
        records: 2,
        first_offset: 1,
        last_offset: 2,
    };
    assert_eq!(e.landed, Some(landed));
    assert_eq!(s.stream(&*p, 5), b"a\nb\nc\n");
    assert_eq!(
        m.append_transaction_marker("partial-0").expect("a marker"),
        3
    );
    assert_eq!(kind(p.record(3)), ErrorKind::NoRecord);
    assert!(p.contains(3).expect("contains"), "a marker's offset exists");
    assert_eq!(s.stream(&*p, 5), b"a\nb\nc\n", "a marker has no line");
    assert_eq!(s.status(&*p), (0, 4, 4));
}

fn all(s: &Subject) {
    names(s);
    appends(s);
    range(s);
    delete_records(s);
    times(s);
    configs(s);
    status(s);
    read_only(s);
}

#[test]
fn memory_keeps_the_contract() {
    let (s, m) = mem();
    all(&s);
    m.set_read_only(false);
    memory_faults(&m, &s);
}

#[test]
fn a_local_data_directory_keeps_the_contract() {
    all(&local());
}

#[test]
fn a_cluster_on_the_mock_keeps_the_contract() {
    all(&cluster(true));
}

#[test]
fn a_cluster_on_our_listener_keeps_the_contract() {
    all(&cluster(false));
}
