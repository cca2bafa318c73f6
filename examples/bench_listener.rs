//! The listener at scale: 10,000 idle connections held by one `commitfs
//! serve`, its resident memory (VmRSS) and threads, and the round trip of
//! an active client (a one-record Produce with acks=1, then a Fetch of it)
//! before the idle connections are opened (the baseline) and while they are
//! held. Prints a table.
//!
//! `COMMITFS_BENCH_BASELINE_BIN=/path/to/commitfs` measures another build
//! beside it, in the same run (BENCHMARKS.md compares the thread-per-
//! connection listener of 64844f9 this way). Both daemons get an
//! `RLIMIT_NOFILE` of 65,536 where root may raise the hard limit (else
//! their hard limit), and so does this process, which holds the client ends.
//!
//! ```sh
//! cargo build --release --bins --example bench_listener
//! target/release/examples/bench_listener          # 10,000 idle connections
//! COMMITFS_BENCH_QUICK=1 target/release/examples/bench_listener   # 500
//! COMMITFS_BENCH_IDLE=9000 target/release/examples/bench_listener   # any count
//! ```

#[path = "common/mod.rs"]
mod common;

use common::Serve;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use commitfs::record::{Compression, NewRecord, encode_batch_compressed};
use kafka_protocol::messages::api_versions_request::ApiVersionsRequest;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchRequest, FetchTopic};
use kafka_protocol::messages::fetch_response::FetchResponse;
use kafka_protocol::messages::produce_request::{
    PartitionProduceData, ProduceRequest, TopicProduceData,
};
use kafka_protocol::messages::produce_response::ProduceResponse;
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader, TopicName};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

type Res<T> = Result<T, String>;

const NOFILE: u64 = 65_536;

/// Raises RLIMIT_NOFILE to `n` (soft and hard; root may), or else the soft
/// limit to the hard one. Returns the soft limit in force.
fn set_nofile(n: u64) -> std::io::Result<u64> {
    let lim = libc::rlimit {
        rlim_cur: n,
        rlim_max: n,
    };
    // SAFETY: getrlimit/setrlimit with local structs.
    unsafe {
        if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) == 0 {
            return Ok(n);
        }
        let mut cur: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut cur) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        cur.rlim_cur = cur.rlim_max;
        if libc::setrlimit(libc::RLIMIT_NOFILE, &cur) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(cur.rlim_cur)
    }
}

struct Daemon {
    serve: Serve,
    addr: String,
    _dir: tempfile::TempDir,
}

impl Daemon {
    fn start(bin: &Path) -> Res<Daemon> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let (mut cmd, log) = common::plaintext_serve(bin, dir.path(), &["b-0"])?;
        // SAFETY: setrlimit only, between fork and exec.
        unsafe { cmd.pre_exec(|| set_nofile(NOFILE).map(drop)) };
        let (serve, mut addrs) = Serve::start(&mut cmd, &log, &["PLAINTEXT"])?;
        Ok(Daemon {
            serve,
            addr: addrs.remove(0),
            _dir: dir,
        })
    }

    fn status(&self, key: &str) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.serve.pid()))
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    }
}

/// A client connection speaking the protocol.
struct Client {
    s: TcpStream,
    id: i32,
}

impl Client {
    fn new(addr: &str) -> Res<Client> {
        let s = TcpStream::connect(addr).map_err(|e| e.to_string())?;
        s.set_read_timeout(Some(Duration::from_secs(60)))
            .map_err(|e| e.to_string())?;
        s.set_nodelay(true).map_err(|e| e.to_string())?;
        Ok(Client { s, id: 0 })
    }

    fn frame<R: Encodable>(&mut self, key: ApiKey, v: i16, req: &R) -> Vec<u8> {
        self.id += 1;
        let mut buf = BytesMut::new();
        RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(v)
            .with_correlation_id(self.id)
            .with_client_id(Some(StrBytes::from_static_str("bench")))
            .encode(&mut buf, key.request_header_version(v))
            .expect("header");
        req.encode(&mut buf, v).expect("request");
        let mut f = (buf.len() as i32).to_be_bytes().to_vec();
        f.extend_from_slice(&buf);
        f
    }

    fn call<R: Encodable, T: Decodable>(&mut self, key: ApiKey, v: i16, req: &R) -> Res<T> {
        let f = self.frame(key, v, req);
        self.s.write_all(&f).map_err(|e| e.to_string())?;
        let mut size = [0u8; 4];
        self.s.read_exact(&mut size).map_err(|e| e.to_string())?;
        let mut body = vec![0u8; i32::from_be_bytes(size).max(0) as usize];
        self.s.read_exact(&mut body).map_err(|e| e.to_string())?;
        let mut b = Bytes::from(body);
        ResponseHeader::decode(&mut b, key.response_header_version(v))
            .map_err(|e| e.to_string())?;
        T::decode(&mut b, v).map_err(|e| e.to_string())
    }

    /// Produce one record, then fetch it: the round trip, and its offset.
    fn round_trip(&mut self, i: usize) -> Res<Duration> {
        let value = format!("record-{i}");
        let mut batch = Vec::new();
        encode_batch_compressed(
            &mut batch,
            0,
            1_700_000_000_000,
            &[NewRecord::value(value.as_bytes())],
            Compression::None,
        );
        let topic = TopicName(StrBytes::from_static_str("b"));
        let produce = ProduceRequest::default()
            .with_acks(1)
            .with_timeout_ms(30_000)
            .with_topic_data(vec![
                TopicProduceData::default()
                    .with_name(topic.clone())
                    .with_partition_data(vec![
                        PartitionProduceData::default()
                            .with_index(0)
                            .with_records(Some(Bytes::from(batch))),
                    ]),
            ]);
        let t = Instant::now();
        let r: ProduceResponse = self.call(ApiKey::Produce, 9, &produce)?;
        let p = &r.responses[0].partition_responses[0];
        if p.error_code != 0 {
            return Err(format!("produce: error {}", p.error_code));
        }
        let fetch = FetchRequest::default()
            .with_max_wait_ms(0)
            .with_topics(vec![
                FetchTopic::default()
                    .with_topic(topic)
                    .with_partitions(vec![
                        FetchPartition::default()
                            .with_fetch_offset(p.base_offset)
                            .with_partition_max_bytes(1 << 20),
                    ]),
            ]);
        let r: FetchResponse = self.call(ApiKey::Fetch, 12, &fetch)?;
        let elapsed = t.elapsed();
        let records = r.responses[0].partitions[0]
            .records
            .clone()
            .unwrap_or_default();
        if !records.windows(value.len()).any(|w| w == value.as_bytes()) {
            return Err(format!("fetch at {} did not return {value}", p.base_offset));
        }
        Ok(elapsed)
    }
}

/// Median and 99th percentile of `n` round trips, in µs.
fn round_trips(addr: &str, n: usize, from: usize) -> Res<(u64, u64)> {
    let mut c = Client::new(addr)?;
    let mut times: Vec<u64> = (0..n)
        .map(|i| c.round_trip(from + i).map(|d| d.as_micros() as u64))
        .collect::<Res<_>>()?;
    times.sort_unstable();
    Ok((times[n / 2], times[(n * 99 / 100).min(n - 1)]))
}

struct Row {
    name: String,
    idle: usize,
    rss_mib: f64,
    threads: u64,
    base: (u64, u64),
    loaded: (u64, u64),
    base_rss_mib: f64,
}

fn measure(name: &str, bin: &Path, idle_n: usize, trips: usize) -> Res<Row> {
    let d = Daemon::start(bin)?;
    // Warm up (creates nothing: b-0 exists), then the baseline.
    round_trips(&d.addr, 10, 0)?;
    let base = round_trips(&d.addr, trips, 10)?;
    let base_rss = d.status("VmRSS:");
    let mut idle = Vec::with_capacity(idle_n);
    for i in 0..idle_n {
        let s = TcpStream::connect(&d.addr).map_err(|e| format!("idle connection {i}: {e}"))?;
        idle.push(s);
    }
    // The last one answered means all are accepted (in order).
    if let Some(last) = idle.last_mut() {
        let mut c = Client {
            s: last.try_clone().map_err(|e| e.to_string())?,
            id: 0,
        };
        c.call::<_, kafka_protocol::messages::ApiVersionsResponse>(
            ApiKey::ApiVersions,
            3,
            &ApiVersionsRequest::default(),
        )
        .map_err(|e| format!("the last idle connection was not served: {e}"))?;
    }
    let loaded = round_trips(&d.addr, trips, 10 + trips)?;
    let rss = d.status("VmRSS:");
    let threads = d.status("Threads:");
    drop(idle);
    Ok(Row {
        name: name.to_string(),
        idle: idle_n,
        rss_mib: rss as f64 / 1024.0,
        threads,
        base,
        loaded,
        base_rss_mib: base_rss as f64 / 1024.0,
    })
}

fn main() {
    let quick = std::env::var_os("COMMITFS_BENCH_QUICK").is_some();
    let (idle, trips) = if quick { (500, 20) } else { (10_000, 200) };
    let idle = std::env::var("COMMITFS_BENCH_IDLE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(idle);
    let bin = common::commitfs_bin();
    let nofile = match set_nofile(NOFILE) {
        Ok(n) => n,
        Err(e) => {
            println!("bench_listener: cannot raise RLIMIT_NOFILE ({e}); nothing measured");
            return;
        }
    };
    println!("RLIMIT_NOFILE {nofile} for this process and each daemon");
    let mut builds = vec![("this build".to_string(), bin)];
    if let Some(b) = std::env::var_os("COMMITFS_BENCH_BASELINE_BIN") {
        builds.push(("baseline build".to_string(), PathBuf::from(b)));
    }
    println!(
        "{:<16} {:>8} {:>10} {:>9} {:>8} {:>22} {:>22}",
        "listener",
        "idle",
        "RSS MiB",
        "(no idle)",
        "threads",
        "round trip µs, no idle",
        "with idle (p50/p99)"
    );
    let mut failed = false;
    for (name, bin) in builds {
        match measure(&name, &bin, idle, trips) {
            Ok(r) => println!(
                "{:<16} {:>8} {:>10.1} {:>9.1} {:>8} {:>22} {:>22}",
                r.name,
                r.idle,
                r.rss_mib,
                r.base_rss_mib,
                r.threads,
                format!("{} / {}", r.base.0, r.base.1),
                format!("{} / {}", r.loaded.0, r.loaded.1),
            ),
            Err(e) => {
                println!("{name}: {e}");
                failed = true;
            }
        }
    }
    if failed {
        std::process::exit(1);
    }
}
