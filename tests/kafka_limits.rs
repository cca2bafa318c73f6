//! The listener's limits against a hostile client, one `commitfs serve`
//! daemon per test: idle and half-sent connections closed
//! (`connections.max.idle.ms`), accept paused at `max.connections`, the
//! connection past `max.connections.per.ip` closed, reads paused (not
//! failed) when `queued.max.request.bytes` is spent, file descriptors kept
//! for storage, decompression bombs, and a log flood. Each checks Kafka's
//! answer, that the daemon is alive, its resident memory (VmRSS) where
//! memory is the point, and that every record produced before is intact.
//!
//! No test asserts how fast anything happens: each waits for a state, with
//! a generous bound.

#[path = "support/batch.rs"]
mod batch;
mod kafka_support;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use commitfs::record::{Compression, NewRecord, encode_batch_compressed};
use commitfs::storage::{LogConfig, LogManager, OpenOptions};
use kafka_protocol::messages::api_versions_request::ApiVersionsRequest;
use kafka_protocol::messages::api_versions_response::ApiVersionsResponse;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchRequest, FetchTopic};
use kafka_protocol::messages::fetch_response::FetchResponse;
use kafka_protocol::messages::produce_request::{
    PartitionProduceData, ProduceRequest, TopicProduceData,
};
use kafka_protocol::messages::produce_response::ProduceResponse;
use kafka_protocol::messages::{ApiKey, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_support::{BIN, Conn};

/// Long enough for anything on a loaded 2-core machine; only ever a bound.
const BOUND: Duration = Duration::from_secs(60);

/// A `commitfs serve` daemon whose pid we know (for VmRSS).
struct Daemon {
    child: Option<Child>,
    addr: String,
    log: PathBuf,
}

impl Daemon {
    /// Serves `data` (topic `t` with one partition is created first) with
    /// `opts`; `nofile`: the daemon's RLIMIT_NOFILE, soft and hard.
    fn start(data: &Path, opts: &[&str], nofile: Option<u64>) -> Daemon {
        if !data.exists() {
            let mgr =
                LogManager::open(data, LogConfig::default(), OpenOptions::default()).expect("open");
            mgr.create_partition("t-0").expect("t-0");
            mgr.close().expect("close");
        }
        let log = data.with_extension("serve.log");
        let mut cmd = Command::new(BIN);
        // Port 0, then the port it bound, read from its log: a port picked
        // here could be taken by another test's daemon before this one binds.
        cmd.arg("serve")
            .arg("--listeners")
            .arg("PLAINTEXT://127.0.0.1:0");
        for o in opts {
            cmd.arg("-o").arg(o);
        }
        cmd.arg(data)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log"));
        if let Some(n) = nofile {
            kafka_support::limit_nofile(&mut cmd, n);
        }
        let child = cmd.spawn().expect("start commitfs serve");
        let mut d = Daemon {
            child: Some(child),
            addr: String::new(),
            log,
        };
        let start = Instant::now();
        while d.addr.is_empty() {
            assert!(
                start.elapsed() < BOUND && d.alive(),
                "commitfs serve did not listen:\n{}",
                d.log()
            );
            d.addr = d
                .log()
                .split("Kafka listener on ")
                .nth(1)
                .and_then(|rest| rest.split_whitespace().next())
                .unwrap_or_default()
                .to_string();
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(d.alive());
        d
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn alive(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().ok().flatten().is_none())
    }

    /// Resident memory in KiB.
    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS")
    }

    fn stop(&mut self) -> bool {
        let Some(mut child) = self.child.take() else {
            return false;
        };
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        if let Some(status) = kafka_support::bounded::wait_within(&mut child, BOUND) {
            return status.success();
        }
        let _ = child.kill();
        let _ = child.wait();
        false
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop();
    }
}

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

/// One batch of `values`, encoded by kafka-protocol (not by commitfs's
/// encoder, so what the listener stores is checked against another
/// implementation of the format).
fn batch(values: &[Vec<u8>], codec: Compression) -> Vec<u8> {
    use kafka_protocol::records::Compression as Codec;
    let compression = match codec {
        Compression::None => Codec::None,
        Compression::Gzip => Codec::Gzip,
        Compression::Snappy => Codec::Snappy,
        Compression::Lz4 => Codec::Lz4,
        Compression::Zstd => Codec::Zstd,
    };
    let records = values.iter().map(|v| (None, Some(Bytes::from(v.clone()))));
    batch::encode(
        (-1, -1),
        None,
        false,
        1_700_000_000_000,
        records,
        compression,
    )
    .to_vec()
}

fn produce_req(records: Vec<u8>) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(name("t"))
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(Bytes::from(records))),
                ]),
        ])
}

/// Produces `records` to t-0; the partition's error code.
fn produce(addr: &str, records: Vec<u8>) -> i16 {
    let r: ProduceResponse = Conn::new(addr).call(ApiKey::Produce, 9, &produce_req(records));
    r.responses[0].partition_responses[0].error_code
}

/// Every record value of t-0, read back through Fetch.
fn read_back(addr: &str) -> Vec<Vec<u8>> {
    let mut c = Conn::new(addr);
    let mut out = Vec::new();
    let mut offset = 0i64;
    loop {
        let req = FetchRequest::default()
            .with_max_wait_ms(0)
            .with_max_bytes(64 << 20)
            .with_topics(vec![
                FetchTopic::default()
                    .with_topic(name("t"))
                    .with_partitions(vec![
                        FetchPartition::default()
                            .with_fetch_offset(offset)
                            .with_partition_max_bytes(16 << 20),
                    ]),
            ]);
        let r: FetchResponse = c.call(ApiKey::Fetch, 12, &req);
        let p = &r.responses[0].partitions[0];
        assert_eq!(p.error_code, 0, "fetch at {offset}");
        let bytes = p.records.clone().unwrap_or_default();
        if bytes.is_empty() {
            return out;
        }
        // Decoded by kafka-protocol, as a client would.
        let (mut pos, from) = (0, offset);
        while pos + 12 <= bytes.len() {
            let len = i32::from_be_bytes(bytes[pos + 8..pos + 12].try_into().unwrap());
            let size = 12 + len as usize;
            if pos + size > bytes.len() {
                // A batch cut at the fetch's byte limit, as Kafka sends it.
                break;
            }
            let mut frame = bytes.slice(pos..pos + size);
            let set = kafka_protocol::records::RecordBatchDecoder::decode(&mut frame)
                .unwrap_or_else(|e| panic!("a fetched batch at {offset}: {e}"));
            let delta = i32::from_be_bytes(bytes[pos + 23..pos + 27].try_into().unwrap());
            let base = i64::from_be_bytes(bytes[pos..pos + 8].try_into().unwrap());
            for rec in set.records {
                if rec.offset >= offset {
                    out.push(rec.value.map(|v| v.to_vec()).unwrap_or_default());
                }
            }
            offset = base + delta as i64 + 1;
            pos += size;
        }
        // Each fetch moves on, or the loop would never end.
        assert!(offset > from, "no whole batch fetched at {from}");
    }
}

fn values(prefix: &str, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| format!("{prefix}-{i}").into_bytes())
        .collect()
}

/// An ApiVersions round trip on a connection of its own.
fn round_trip(addr: &str) -> bool {
    let mut c = Conn::new(addr);
    let r: ApiVersionsResponse = c.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    r.error_code == 0
}

/// Waits (bounded) until the server closes `s`: EOF or a reset. Data the
/// server sends first is skipped.
fn closed_by_server(s: &mut TcpStream) -> bool {
    s.set_read_timeout(Some(BOUND)).unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => return false,
            Err(_) => return true,
        }
    }
}

/// Whether a response arrives within `wait`; used only where none may
/// arrive yet, so a slow machine cannot make it fail.
fn answered_within(s: &mut TcpStream, wait: Duration) -> bool {
    s.set_read_timeout(Some(wait)).unwrap();
    let mut b = [0u8; 1];
    let r = s.peek(&mut b);
    s.set_read_timeout(Some(BOUND)).unwrap();
    matches!(r, Ok(n) if n > 0)
}

fn api_versions_frame(c: &mut Conn) -> Vec<u8> {
    let body = c.encode(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    frame
}

#[test]
fn idle_and_half_sent_connections_are_closed() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mut d = Daemon::start(&data, &["connections.max.idle.ms=1000"], None);
    let before = values("before", 50);
    assert_eq!(produce(&d.addr, batch(&before, Compression::None)), 0);
    // One connection says nothing; one sends the size of a request and a
    // few of its bytes; one sends half of a size.
    let mut silent = TcpStream::connect(&d.addr).unwrap();
    let mut half = TcpStream::connect(&d.addr).unwrap();
    half.write_all(&1000i32.to_be_bytes()).unwrap();
    half.write_all(&[0u8; 10]).unwrap();
    let mut torn = TcpStream::connect(&d.addr).unwrap();
    torn.write_all(&[0u8, 0]).unwrap();
    for s in [&mut silent, &mut half, &mut torn] {
        assert!(closed_by_server(s), "an idle connection was kept");
    }
    // A client that keeps talking is served throughout, and after.
    assert!(round_trip(&d.addr));
    assert!(d.alive());
    assert_eq!(read_back(&d.addr), before);
    assert!(d.stop(), "clean shutdown");
}

#[test]
fn max_connections_blocks_accept_until_one_closes() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mut d = Daemon::start(&data, &["max.connections=4"], None);
    let before = values("before", 10);
    assert_eq!(produce(&d.addr, batch(&before, Compression::None)), 0);
    let mut held: Vec<Conn> = (0..4).map(|_| Conn::new(&d.addr)).collect();
    for c in &mut held {
        let r: ApiVersionsResponse = c.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
        assert_eq!(r.error_code, 0);
    }
    // The fifth connects (the kernel's backlog takes it) but is not
    // accepted: its request waits, unanswered and not refused.
    let mut fifth = Conn::new(&d.addr);
    let frame = api_versions_frame(&mut fifth);
    fifth.stream.write_all(&frame).unwrap();
    assert!(
        !answered_within(&mut fifth.stream, Duration::from_secs(2)),
        "a connection past max.connections was served"
    );
    // One closes: the fifth is accepted and answered.
    drop(held.pop());
    assert!(
        fifth.recv_raw().is_some(),
        "the waiting connection was not served"
    );
    assert!(d.alive());
    drop(held);
    drop(fifth);
    let start = Instant::now();
    while !round_trip_or_closed(&d.addr) {
        assert!(start.elapsed() < BOUND);
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(read_back(&d.addr), before);
}

#[test]
fn a_connection_past_the_per_ip_cap_is_closed() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mut d = Daemon::start(&data, &["max.connections.per.ip=3"], None);
    let held: Vec<Conn> = (0..3).map(|_| Conn::new(&d.addr)).collect();
    for _ in 0..3 {
        // Each of these is accepted, counted, and closed by the server.
        let mut extra = TcpStream::connect(&d.addr).unwrap();
        assert!(
            closed_by_server(&mut extra),
            "a 4th connection was kept:\n{}",
            d.log()
        );
    }
    assert!(
        d.log()
            .contains("Rejected connection from 127.0.0.1, address already has the configured maximum of 3 connections."),
        "{}",
        d.log()
    );
    drop(held);
    // The held ones gone, the address is served again.
    let start = Instant::now();
    while !round_trip_or_closed(&d.addr) {
        assert!(
            start.elapsed() < BOUND,
            "the address was never served again"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(d.alive());
}

/// `max.connections.per.ip.overrides`: the override for 127.0.0.1 is the
/// cap that applies to it, below `max.connections.per.ip`, above it, and
/// with `max.connections.per.ip=0`; an override for another address leaves
/// 127.0.0.1 at `max.connections.per.ip`. Two overrides in one `-o` are
/// separated with `;`. Every connection within the cap is served; the
/// next is closed, logged with the cap in force.
#[test]
fn a_per_ip_override_is_the_cap_of_its_address() {
    for (per_ip, overrides, cap) in [
        (3, "127.0.0.2:5;127.0.0.1:1", 1),
        (1, "127.0.0.1:3", 3),
        (0, "127.0.0.1:2", 2),
        (2, "127.0.0.2:1", 2),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("data");
        let per_ip = format!("max.connections.per.ip={per_ip}");
        let overrides = format!("max.connections.per.ip.overrides={overrides}");
        let mut d = Daemon::start(&data, &[&per_ip, &overrides], None);
        let mut held: Vec<Conn> = (0..cap).map(|_| Conn::new(&d.addr)).collect();
        for c in &mut held {
            let r: ApiVersionsResponse =
                c.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
            assert_eq!(r.error_code, 0, "{overrides}");
        }
        let mut extra = TcpStream::connect(&d.addr).unwrap();
        assert!(
            closed_by_server(&mut extra),
            "{per_ip} {overrides}: connection {} was kept:\n{}",
            cap + 1,
            d.log()
        );
        let rejected = format!(
            "Rejected connection from 127.0.0.1, address already has the configured maximum of {cap} connections."
        );
        assert!(d.log().contains(&rejected), "{overrides}:\n{}", d.log());
        // The held ones are still served.
        for c in &mut held {
            let r: ApiVersionsResponse =
                c.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
            assert_eq!(r.error_code, 0, "{overrides}");
        }
        drop(held);
        assert!(d.alive());
        assert!(d.stop(), "{overrides}: the daemon did not stop cleanly");
    }
}

/// A round trip, or `false` if the server closed the connection (its
/// closes of the held connections may not have been counted yet).
fn round_trip_or_closed(addr: &str) -> bool {
    let mut c = Conn::new(addr);
    let frame = api_versions_frame(&mut c);
    c.stream.write_all(&frame).is_ok() && c.recv_raw().is_some()
}

#[test]
fn requests_in_flight_are_bounded_by_the_memory_pool() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    const MAX: usize = 16 << 20;
    let max = format!("socket.request.max.bytes={MAX}");
    let mut d = Daemon::start(&data, &[&max], None);
    let before = values("before", 100);
    assert_eq!(produce(&d.addr, batch(&before, Compression::None)), 0);
    let baseline = d.rss_kib();
    // 20 clients each send a request of MAX bytes but its last byte: 320
    // MiB if every one were buffered. The pool (queued.max.request.bytes,
    // by default socket.request.max.bytes) lets one be read; the others'
    // bytes wait in their sockets.
    let streams: Vec<TcpStream> = (0..20)
        .map(|_| TcpStream::connect(&d.addr).unwrap())
        .collect();
    let ends: Vec<TcpStream> = streams.iter().map(|s| s.try_clone().unwrap()).collect();
    let clients: Vec<_> = streams
        .into_iter()
        .map(|mut s| {
            std::thread::spawn(move || {
                s.set_write_timeout(Some(BOUND)).unwrap();
                let _ = s.write_all(&(MAX as i32).to_be_bytes());
                let chunk = vec![0u8; 1 << 20];
                let mut sent = 0;
                while sent < MAX - 1 {
                    let n = chunk.len().min(MAX - 1 - sent);
                    if s.write_all(&chunk[..n]).is_err() {
                        break;
                    }
                    sent += n;
                }
                sent
            })
        })
        .collect();
    // Wait until some client has sent its whole request but a byte (the
    // pool let it in); the others stay stuck, so their threads are not
    // joined until the sockets are shut down below.
    let mut peak = 0;
    let start = Instant::now();
    while !clients.iter().any(|c| c.is_finished()) {
        assert!(start.elapsed() < BOUND, "no request was read in whole");
        peak = peak.max(d.rss_kib());
        std::thread::sleep(Duration::from_millis(100));
    }
    for _ in 0..20 {
        peak = peak.max(d.rss_kib());
        std::thread::sleep(Duration::from_millis(50));
    }
    // Another client is paused too, not refused: its request is answered
    // once the held memory comes back (the clients go away).
    let mut waiting = Conn::new(&d.addr);
    let frame = api_versions_frame(&mut waiting);
    waiting.stream.write_all(&frame).unwrap();
    let growth = peak.saturating_sub(baseline);
    assert!(
        growth < 64 * 1024,
        "RSS grew by {growth} KiB with 20 clients holding {MAX}-byte requests"
    );
    // The clients go: the stuck writes end, the held request is dropped.
    for e in &ends {
        let _ = e.shutdown(std::net::Shutdown::Both);
    }
    for c in clients {
        let _ = c.join();
    }
    assert!(
        waiting.recv_raw().is_some(),
        "a paused connection was dropped"
    );
    assert!(d.alive());
    assert_eq!(read_back(&d.addr), before);
}

#[test]
fn clients_cannot_take_the_descriptors_a_partition_needs_to_roll() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    // 256 descriptors: at most 96 connections (128 kept for storage, 32 for
    // the listener's own).
    let mut d = Daemon::start(&data, &["segment.bytes=1048576"], Some(256));
    assert!(d.log().contains("96 connections at most"), "{}", d.log());
    // 300 idle clients try to stay connected while the partition rolls (1
    // MiB segments: each roll opens segment and index files); a client
    // among the first 96 produces. Those past the cap wait in the backlog,
    // or time out connecting.
    let mut producer = Conn::new(&d.addr);
    let r: ApiVersionsResponse =
        producer.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    assert_eq!(r.error_code, 0);
    let target: std::net::SocketAddr = d.addr.parse().unwrap();
    let idle: Vec<TcpStream> = (0..300)
        .filter_map(|_| TcpStream::connect_timeout(&target, Duration::from_millis(300)).ok())
        .collect();
    let mut expected = Vec::new();
    for round in 0..5 {
        let more = values(&format!("{round}{}", "c".repeat(2000)), 300);
        let r: ProduceResponse = producer.call(
            ApiKey::Produce,
            9,
            &produce_req(batch(&more, Compression::None)),
        );
        assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
        expected.extend(more);
    }
    assert!(d.alive());
    assert!(
        !d.log().contains("Stopping serving partition"),
        "{}",
        d.log()
    );
    drop(idle);
    drop(producer);
    let start = Instant::now();
    while !round_trip_or_closed(&d.addr) {
        assert!(start.elapsed() < BOUND);
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(read_back(&d.addr), expected);
}

/// Out of descriptors at `accept` (the README's "Limits"): partitions
/// already in the directory all load, however many, so 200 of them, each
/// holding its active segment open once written, under 256 descriptors
/// leave fewer than the `max.connections` in force for connections. Each connection past what is left is refused: accepted on
/// the spare descriptor and closed at once, with a log line, never left
/// hanging; the ones accepted before are served, no partition goes
/// offline, and once they close new connections are served again.
#[test]
fn out_of_descriptors_connections_are_closed_and_served_again_later() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    {
        let mgr = LogManager::open(&data, LogConfig::default(), OpenOptions::default()).unwrap();
        mgr.create_partition("t-0").unwrap();
        for p in 0..200 {
            mgr.create_partition(&format!("many-{p}")).unwrap();
        }
        mgr.close().unwrap();
    }
    let mut d = Daemon::start(&data, &[], Some(256));
    let log = d.log();
    let cap: usize = log
        .split(" connections at most")
        .next()
        .and_then(|before| before.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no cap logged:\n{log}"));
    let fds = || {
        std::fs::read_dir(format!("/proc/{}/fd", d.pid()))
            .unwrap()
            .count()
    };
    // A record in each partition: each holds its active segment open.
    let one = batch(&values("p", 1), Compression::None);
    let req = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(name("many"))
                .with_partition_data(
                    (0..200)
                        .map(|p| {
                            PartitionProduceData::default()
                                .with_index(p)
                                .with_records(Some(Bytes::from(one.clone())))
                        })
                        .collect(),
                ),
        ]);
    let r: ProduceResponse = Conn::new(&d.addr).call(ApiKey::Produce, 9, &req);
    for p in &r.responses[0].partition_responses {
        assert_eq!(p.error_code, 0, "partition {}", p.index);
    }
    let held = fds();
    assert!(
        held > 200,
        "{held} descriptors after writing 200 partitions"
    );
    let target: std::net::SocketAddr = d.addr.parse().unwrap();
    let (mut served, mut refused) = (Vec::new(), 0);
    for i in 0..cap {
        let s = TcpStream::connect_timeout(&target, BOUND)
            .unwrap_or_else(|e| panic!("connection {i} not even connected: {e}"));
        let mut c = Conn::from_stream(s.try_clone().unwrap());
        let frame = api_versions_frame(&mut c);
        let mut s = s;
        // An answer, or a close (EOF or a reset); nothing within the
        // bound is a hang.
        let _ = s.write_all(&frame);
        s.set_read_timeout(Some(BOUND)).unwrap();
        match s.peek(&mut [0u8; 1]) {
            Ok(n) if n > 0 => {
                c.recv_for("ApiVersions").expect("the answer");
                served.push(c);
            }
            Ok(_) => refused += 1,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                panic!("connection {i} neither answered nor closed: it hangs")
            }
            Err(_) => refused += 1,
        }
    }
    eprintln!("cap {cap}: {} served, {refused} refused", served.len());
    assert!(refused > 0, "all {cap} were served:\n{}", d.log());
    assert!(
        d.log().contains("the daemon is out of file descriptors"),
        "{}",
        d.log()
    );
    // The ones accepted are still served.
    for c in &mut served {
        let r: ApiVersionsResponse = c.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
        assert_eq!(r.error_code, 0);
    }
    drop(served);
    let start = Instant::now();
    while !round_trip_or_closed(&d.addr) {
        assert!(start.elapsed() < BOUND, "never served again");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Several at once again.
    let mut again: Vec<Conn> = (0..5).map(|_| Conn::new(&d.addr)).collect();
    for c in &mut again {
        let r: ApiVersionsResponse = c.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
        assert_eq!(r.error_code, 0);
    }
    assert_eq!(
        produce(&d.addr, batch(&values("x", 3), Compression::None)),
        0
    );
    assert!(d.alive());
    assert!(
        !d.log().contains("Stopping serving partition"),
        "{}",
        d.log()
    );
    drop(again);
    assert!(d.stop());
}

/// A raw snappy block (librdkafka's framing) whose preamble claims
/// `claimed` bytes, followed by `tail` bytes of garbage.
fn lying_snappy(claimed: u32, tail: usize) -> Vec<u8> {
    let mut block = Vec::new();
    let mut n = claimed;
    while n >= 0x80 {
        block.push((n as u8) | 0x80);
        n >>= 7;
    }
    block.push(n as u8);
    block.extend(std::iter::repeat_n(0u8, tail));
    block
}

/// Snappy's codec id in a batch's attributes.
const SNAPPY: u8 = 2;

/// A v2 batch header around an arbitrary (compressed) records section.
fn batch_around(section: &[u8], codec: u8, count: i32) -> Vec<u8> {
    let mut b = batch(&[b"x".to_vec()], Compression::None);
    b.truncate(61);
    b[21..23].copy_from_slice(&(codec as i16).to_be_bytes());
    b[23..27].copy_from_slice(&(count - 1).to_be_bytes());
    b[57..61].copy_from_slice(&count.to_be_bytes());
    b.extend_from_slice(section);
    let len = (b.len() - 12) as i32;
    b[8..12].copy_from_slice(&len.to_be_bytes());
    let crc = commitfs::record::compute_crc(&b);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

#[test]
fn decompression_bombs_are_refused_or_bounded() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mut d = Daemon::start(&data, &["max.message.bytes=8388608"], None);
    let before = values("before", 100);
    assert_eq!(produce(&d.addr, batch(&before, Compression::Lz4)), 0);
    let baseline = d.rss_kib();

    // 1. 48 clients at once, each a 117-byte-ish produce whose snappy block
    // claims 64 MiB: CORRUPT_MESSAGE (Kafka's answer for a batch that does
    // not decompress), nothing allocated for the claim.
    let bomb = batch_around(&lying_snappy(64 << 20, 40), SNAPPY, 1);
    let bombers: Vec<_> = (0..48)
        .map(|_| {
            let (addr, bomb) = (d.addr.clone(), bomb.clone());
            std::thread::spawn(move || produce(&addr, bomb))
        })
        .collect();
    let mut peak = 0;
    let start = Instant::now();
    while !bombers.iter().all(|t| t.is_finished()) {
        assert!(start.elapsed() < 3 * BOUND, "the bombs' produces hung");
        peak = peak.max(d.rss_kib());
        std::thread::sleep(Duration::from_millis(5));
    }
    let answers: Vec<i16> = bombers.into_iter().map(|t| t.join().unwrap()).collect();
    assert!(answers.iter().all(|c| *c == 2), "{answers:?}");
    let growth = peak.max(d.rss_kib()).saturating_sub(baseline);
    assert!(
        growth < 64 * 1024,
        "48 lying snappy blocks cost {growth} KiB"
    );

    // 2. Honest batches that inflate to 48 MiB each (a raw snappy block of
    // about 2.3 MiB), 16 clients at once: 768 MiB if every one were inflated
    // at the same time. The decompression budget (128 MiB) lets a few at a
    // time; all are stored.
    let value = vec![0u8; 1 << 20];
    let big_values: Vec<Vec<u8>> = (0..48).map(|_| value.clone()).collect();
    let mut raw_section = Vec::new();
    let recs: Vec<NewRecord> = big_values.iter().map(|v| NewRecord::value(v)).collect();
    {
        // The records section uncompressed, then one raw snappy block of it.
        let mut plain = Vec::new();
        encode_batch_compressed(&mut plain, 0, 1_700_000_000_000, &recs, Compression::None);
        raw_section.extend_from_slice(
            &snap::raw::Encoder::new()
                .compress_vec(&plain[61..])
                .unwrap(),
        );
    }
    let honest = batch_around(&raw_section, SNAPPY, 48);
    assert!(honest.len() < 8 << 20, "{}", honest.len());
    peak = 0;
    let start = Instant::now();
    let producers: Vec<_> = (0..16)
        .map(|_| {
            let (addr, honest) = (d.addr.clone(), honest.clone());
            std::thread::spawn(move || produce(&addr, honest))
        })
        .collect();
    while !producers.iter().all(|t| t.is_finished()) {
        assert!(start.elapsed() < 3 * BOUND, "the honest produces hung");
        peak = peak.max(d.rss_kib());
        std::thread::sleep(Duration::from_millis(20));
    }
    let codes: Vec<i16> = producers.into_iter().map(|t| t.join().unwrap()).collect();
    assert!(codes.iter().all(|c| *c == 0), "{codes:?}");
    let growth = peak.saturating_sub(baseline);
    assert!(
        growth < 400 * 1024,
        "16 batches inflating to 48 MiB each cost {growth} KiB at once"
    );

    // 3. max.message.bytes is checked on the batch as sent, before its CRC
    // or its records: a batch over it with a broken CRC is MESSAGE_TOO_LARGE.
    let mut over = batch_around(&lying_snappy(1000, 9 << 20), SNAPPY, 1);
    over[20] ^= 0xff;
    assert_eq!(produce(&d.addr, over), 10, "MESSAGE_TOO_LARGE");

    assert!(d.alive());
    let back = read_back(&d.addr);
    assert_eq!(back.len(), 100 + 16 * 48);
    assert_eq!(back[..100], before[..]);
    assert!(back[100..].iter().all(|v| *v == value));
    assert!(d.stop());
}

#[test]
fn a_flood_of_missing_partitions_writes_a_few_log_lines() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mut d = Daemon::start(&data, &[], None);
    let before = values("before", 10);
    assert_eq!(produce(&d.addr, batch(&before, Compression::None)), 0);
    let log_before = d.log().len();
    let mut c = Conn::new(&d.addr);
    let partitions: Vec<FetchPartition> = (0..100_000)
        .map(|i| FetchPartition::default().with_partition(i + 1))
        .collect();
    let req = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(name("t"))
                .with_partitions(partitions),
        ]);
    for _ in 0..10 {
        let r: FetchResponse = c.call(ApiKey::Fetch, 12, &req);
        assert_eq!(r.responses[0].partitions.len(), 100_000);
        assert_eq!(r.responses[0].partitions[0].error_code, 3);
    }
    // The held-back lines are counted in one line once the window is over.
    let start = Instant::now();
    while !d.log().contains("more like it in the last") {
        assert!(start.elapsed() < BOUND, "no count of held-back lines");
        std::thread::sleep(Duration::from_millis(200));
    }
    let written = d.log().len() - log_before;
    assert!(
        written < 16 * 1024,
        "1,000,000 refusals wrote {written} bytes of log"
    );
    assert!(d.alive());
    assert_eq!(read_back(&d.addr), before);
}

#[test]
fn many_idle_connections_and_an_active_client() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mut d = Daemon::start(&data, &[], Some(8192));
    // This process holds the client ends.
    raise_own_nofile(8192);
    let before = values("before", 10);
    assert_eq!(produce(&d.addr, batch(&before, Compression::None)), 0);
    let baseline = d.rss_kib();
    let mut idle = Vec::new();
    for _ in 0..3000 {
        idle.push(TcpStream::connect(&d.addr).expect("connect"));
    }
    // The last one is served.
    let frame = api_versions_frame(&mut Conn::new(&d.addr));
    let answer = |i: usize, s: &mut TcpStream| {
        s.set_read_timeout(Some(BOUND)).unwrap();
        let mut size = [0u8; 4];
        s.read_exact(&mut size)
            .unwrap_or_else(|e| panic!("idle connection {i}: no answer: {e}"));
        let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
        s.read_exact(&mut body)
            .unwrap_or_else(|e| panic!("idle connection {i}: a cut answer: {e}"));
    };
    let last = idle.last_mut().unwrap();
    last.write_all(&frame).unwrap();
    answer(2999, last);
    let more = values("more", 10);
    assert_eq!(produce(&d.addr, batch(&more, Compression::None)), 0);
    let growth = d.rss_kib().saturating_sub(baseline);
    assert!(
        growth < 32 * 1024,
        "3000 idle connections cost {growth} KiB of RSS"
    );
    assert!(d.alive());
    // Every one of the 3000 was accepted and is still open: each answers.
    for (i, s) in idle.iter_mut().enumerate() {
        s.write_all(&frame)
            .unwrap_or_else(|e| panic!("idle connection {i}: {e}"));
    }
    for (i, s) in idle.iter_mut().enumerate() {
        answer(i, s);
    }
    let mut all = before;
    all.extend(more);
    assert_eq!(read_back(&d.addr), all);
}

fn raise_own_nofile(n: u64) {
    // SAFETY: getrlimit/setrlimit on local structs.
    unsafe {
        let mut lim: libc::rlimit = std::mem::zeroed();
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        if lim.rlim_cur < n {
            lim.rlim_cur = n.min(lim.rlim_max);
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}
