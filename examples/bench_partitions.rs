//! Partitions at scale: one daemonised `commitfs mount` (with a Kafka
//! listener) of a data directory on a tmpfs this program mounts, holding
//! 10,000 partitions (100 topics of 100, made by one CreateTopics: the most
//! one request may make), one record produced to each. Measures the disk
//! they use (`du`, while mounted and after a clean unmount), the time to
//! create them, to mount them again, the daemon's RSS and descriptors, the
//! Metadata answer for every topic, and `ls` of the root. Prints a table.
//!
//! Needs root and /dev/fuse (the tmpfs and the mount); unmounts both,
//! whatever happens.
//!
//! ```sh
//! cargo build --release --bins --example bench_partitions
//! target/release/examples/bench_partitions                       # 10,000
//! COMMITFS_BENCH_QUICK=1 target/release/examples/bench_partitions  # 500
//! COMMITFS_BENCH_PARTITIONS=2000 target/release/examples/bench_partitions
//! ```

#[path = "common/mod.rs"]
mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use commitfs::record::{NewRecord, encode_batch};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreateTopicsRequest};
use kafka_protocol::messages::create_topics_response::CreateTopicsResponse;
use kafka_protocol::messages::metadata_request::MetadataRequest;
use kafka_protocol::messages::metadata_response::MetadataResponse;
use kafka_protocol::messages::produce_request::{
    PartitionProduceData, ProduceRequest, TopicProduceData,
};
use kafka_protocol::messages::produce_response::ProduceResponse;
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader, TopicName};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

type Res<T> = Result<T, String>;

/// Partitions per topic: 100 topics of 100 make 10,000.
const PER_TOPIC: usize = 100;

/// A tmpfs mounted for the run, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path) -> Res<Tmpfs> {
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        run("mount", &["-t", "tmpfs", "-o", "size=2g", "tmpfs", &s(dir)])?;
        Ok(Tmpfs(dir.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    /// Retried for a while: a daemon that is still exiting holds the tmpfs
    /// busy, and a tmpfs left mounted would outlive the run.
    fn drop(&mut self) {
        let start = Instant::now();
        while run("umount", &[&s(&self.0)]).is_err() && start.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// A daemonised `commitfs mount`: `umount` when dropped, then a bounded
/// wait for the daemon to exit.
struct Mounted {
    mnt: PathBuf,
    pid: u32,
    addr: String,
    took: Duration,
}

impl Mounted {
    fn start(bin: &Path, data: &Path, mnt: &Path, max: usize) -> Res<Mounted> {
        std::fs::create_dir_all(mnt).map_err(|e| e.to_string())?;
        let t = Instant::now();
        let out = Command::new(bin)
            .arg("mount")
            .args(["-o", "listeners=PLAINTEXT://127.0.0.1:0"])
            .args(["-o", &format!("max.broker.partitions={max}")])
            .arg(data)
            .arg(mnt)
            .env(
                "RUST_LOG",
                "warn,commitfs_kafka::server=info,commitfs_kafka::network=info",
            )
            .stdin(Stdio::null())
            .output()
            .map_err(|e| e.to_string())?;
        let took = t.elapsed();
        if !out.status.success() {
            return Err(format!("mount: {}", String::from_utf8_lossy(&out.stderr)));
        }
        let holder = commitfs::storage::lock_holder(data).ok_or("no daemon holds the data dir")?;
        let pid = holder
            .lines()
            .find_map(|l| l.strip_prefix("pid "))
            .and_then(|p| p.trim().parse().ok())
            .ok_or("no pid in .lock")?;
        let log = std::fs::read_to_string(data.join("commitfs.log")).unwrap_or_default();
        let addr = log
            .rsplit("Kafka listener on ")
            .next()
            .and_then(|r| r.split_whitespace().next())
            .filter(|_| log.contains("Kafka listener on "))
            .ok_or("the daemon logged no listener")?
            .to_string();
        Ok(Mounted {
            mnt: mnt.to_path_buf(),
            pid,
            addr,
            took,
        })
    }

    /// Whether the daemon still runs: its process is there and not a
    /// zombie (it is no child of ours, so whoever reaps it may take a while).
    fn running(&self) -> bool {
        std::fs::read_to_string(format!("/proc/{}/stat", self.pid))
            .ok()
            .and_then(|st| st.rsplit_once(") ").map(|(_, rest)| !rest.starts_with('Z')))
            .unwrap_or(false)
    }

    /// Unmounts and waits for the daemon to exit; returns how long it took.
    fn unmount(&mut self) -> Duration {
        let t = Instant::now();
        let _ = run("umount", &[&s(&self.mnt)]);
        while self.running() && t.elapsed().as_secs() < 120 {
            std::thread::sleep(Duration::from_millis(5));
        }
        t.elapsed()
    }

    /// VmRSS in MiB, and open descriptors.
    fn rss_and_fds(&self) -> (f64, usize) {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.pid)).unwrap_or_default();
        let kib: f64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0.0);
        let fds = std::fs::read_dir(format!("/proc/{}/fd", self.pid)).map_or(0, |d| d.count());
        (kib / 1024.0, fds)
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if self.running() {
            self.unmount();
        }
    }
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

fn run(cmd: &str, args: &[&str]) -> Res<String> {
    let out = Command::new("timeout")
        .arg("300")
        .arg(cmd)
        .args(args)
        .output()
        .map_err(|e| format!("{cmd}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `du -sk`: KiB of blocks held.
fn du_kib(p: &Path) -> Res<u64> {
    run("du", &["-sk", &s(p)])?
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| "du printed nothing".to_string())
}

/// One request and its decoded response, on a fresh connection.
fn call<R: Encodable, T: Decodable>(addr: &str, key: ApiKey, version: i16, req: &R) -> Res<T> {
    let mut buf = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(1)
        .encode(&mut buf, key.request_header_version(version))
        .map_err(|e| e.to_string())?;
    req.encode(&mut buf, version).map_err(|e| e.to_string())?;
    let mut c = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    c.set_read_timeout(Some(Duration::from_secs(120)))
        .map_err(|e| e.to_string())?;
    c.write_all(&(buf.len() as i32).to_be_bytes())
        .and_then(|()| c.write_all(&buf))
        .map_err(|e| e.to_string())?;
    let mut size = [0u8; 4];
    c.read_exact(&mut size).map_err(|e| e.to_string())?;
    let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
    c.read_exact(&mut body).map_err(|e| e.to_string())?;
    let mut body = Bytes::from(body);
    ResponseHeader::decode(&mut body, key.response_header_version(version))
        .map_err(|e| e.to_string())?;
    T::decode(&mut body, version).map_err(|e| e.to_string())
}

fn topic(i: usize) -> TopicName {
    TopicName(StrBytes::from_string(format!("bench{i:03}")))
}

/// One CreateTopics of `topics` topics of [`PER_TOPIC`] partitions.
fn create(addr: &str, topics: usize) -> Res<()> {
    let req = CreateTopicsRequest::default().with_topics(
        (0..topics)
            .map(|i| {
                CreatableTopic::default()
                    .with_name(topic(i))
                    .with_num_partitions(PER_TOPIC as i32)
                    .with_replication_factor(-1)
            })
            .collect(),
    );
    let r: CreateTopicsResponse = call(addr, ApiKey::CreateTopics, 7, &req)?;
    match r.topics.iter().find(|t| t.error_code != 0) {
        Some(t) => Err(format!(
            "CreateTopics: {} {:?}",
            t.error_code, t.error_message
        )),
        None => Ok(()),
    }
}

/// One Produce of a one-record batch to every partition.
fn produce_everywhere(addr: &str, topics: usize) -> Res<()> {
    let mut batch = Vec::new();
    encode_batch(
        &mut batch,
        0,
        1_700_000_000_000,
        &[NewRecord::value(b"hello")],
    );
    let batch = Bytes::from(batch);
    let data = (0..topics)
        .map(|i| {
            TopicProduceData::default()
                .with_name(topic(i))
                .with_partition_data(
                    (0..PER_TOPIC as i32)
                        .map(|p| {
                            PartitionProduceData::default()
                                .with_index(p)
                                .with_records(Some(batch.clone()))
                        })
                        .collect(),
                )
        })
        .collect();
    let req = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(60_000)
        .with_topic_data(data);
    let r: ProduceResponse = call(addr, ApiKey::Produce, 9, &req)?;
    let failed = r
        .responses
        .iter()
        .flat_map(|t| &t.partition_responses)
        .filter(|p| p.error_code != 0)
        .count();
    match failed {
        0 => Ok(()),
        n => Err(format!("Produce failed for {n} partitions")),
    }
}

/// The median of `n` timings of `f`.
fn median(n: usize, mut f: impl FnMut() -> Res<()>) -> Res<Duration> {
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        f()?;
        v.push(t.elapsed());
    }
    v.sort();
    Ok(v[n / 2])
}

/// Metadata of every topic; checks every partition is listed.
fn metadata(addr: &str, want: usize) -> Res<()> {
    let req = MetadataRequest::default().with_topics(None);
    let r: MetadataResponse = call(addr, ApiKey::Metadata, 12, &req)?;
    let n: usize = r.topics.iter().map(|t| t.partitions.len()).sum();
    match n == want {
        true => Ok(()),
        false => Err(format!("Metadata listed {n} partitions, not {want}")),
    }
}

/// `ls -f` of the mount's root; checks every partition is listed.
fn ls(mnt: &Path, want: usize) -> Res<()> {
    let n = run("ls", &["-f", &s(mnt)])?.lines().count();
    // `ls -f` lists `.`, `..` and `groups` too.
    match n == want + 3 {
        true => Ok(()),
        false => Err(format!("ls listed {n} names, not {want} partitions")),
    }
}

/// What is measured in one mount's life.
struct Life {
    rss_mib: f64,
    fds: usize,
    metadata: Duration,
    ls: Duration,
}

fn measure(m: &Mounted, partitions: usize) -> Res<Life> {
    let metadata = median(5, || metadata(&m.addr, partitions))?;
    let ls = median(3, || ls(&m.mnt, partitions))?;
    let (rss_mib, fds) = m.rss_and_fds();
    Ok(Life {
        rss_mib,
        fds,
        metadata,
        ls,
    })
}

fn bench(bin: &Path, root: &Path, partitions: usize) -> Res<Vec<(String, String)>> {
    let topics = partitions / PER_TOPIC;
    let fs = Tmpfs::mount(&root.join("fs"))?;
    let data = fs.0.join("data");
    let mnt = root.join("mnt");
    let mut m = Mounted::start(bin, &data, &mnt, partitions)?;
    let empty = m.rss_and_fds();
    let t = Instant::now();
    create(&m.addr, topics)?;
    let created = t.elapsed();
    let t = Instant::now();
    produce_everywhere(&m.addr, topics)?;
    let produced = t.elapsed();
    let live = measure(&m, partitions)?;
    let du_live = du_kib(&data)?;
    let unmounted = m.unmount();
    let du_after = du_kib(&data)?;
    drop(m);
    let m = Mounted::start(bin, &data, &mnt, partitions)?;
    let again = measure(&m, partitions)?;
    let ms = |d: Duration| format!("{:.1} ms", d.as_secs_f64() * 1e3);
    let kib = |k: u64| {
        format!(
            "{k} KiB ({:.1} KiB a partition)",
            k as f64 / partitions as f64
        )
    };
    Ok(vec![
        (
            "partitions (topics x partitions)".into(),
            format!("{partitions} ({topics} x {PER_TOPIC})"),
        ),
        ("create them (one CreateTopics)".into(), ms(created)),
        ("one record to each (one Produce)".into(), ms(produced)),
        ("disk used while mounted (du)".into(), kib(du_live)),
        ("disk used after a clean unmount".into(), kib(du_after)),
        (
            "RSS / descriptors, no partition".into(),
            format!("{:.1} MiB / {}", empty.0, empty.1),
        ),
        (
            "RSS / descriptors, live".into(),
            format!("{:.1} MiB / {}", live.rss_mib, live.fds),
        ),
        (
            "Metadata of every topic (median of 5)".into(),
            ms(live.metadata),
        ),
        ("ls of the root (median of 3)".into(), ms(live.ls)),
        ("clean unmount".into(), ms(unmounted)),
        ("mount again (until live)".into(), ms(m.took)),
        (
            "RSS / descriptors after the mount".into(),
            format!("{:.1} MiB / {}", again.rss_mib, again.fds),
        ),
        ("Metadata after the mount".into(), ms(again.metadata)),
        ("ls of the root after the mount".into(), ms(again.ls)),
    ])
}

fn main() {
    let quick = std::env::var_os("COMMITFS_BENCH_QUICK").is_some();
    let partitions = std::env::var("COMMITFS_BENCH_PARTITIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if quick { 500 } else { 10_000 });
    let partitions = (partitions / PER_TOPIC).max(1) * PER_TOPIC;
    if !Path::new("/dev/fuse").exists() || unsafe { libc::geteuid() } != 0 {
        eprintln!("bench_partitions: needs root and /dev/fuse");
        std::process::exit(2);
    }
    let bin = common::commitfs_bin();
    let scratch = tempfile::tempdir().expect("a scratch directory");
    println!("# {partitions} partitions on a tmpfs, one daemonised mount with a listener\n");
    match bench(&bin, scratch.path(), partitions) {
        Ok(rows) => {
            println!("| measure | {} |\n|---|---|", bin.display());
            for (k, v) in rows {
                println!("| {k} | {v} |");
            }
        }
        Err(e) => {
            println!("bench_partitions: {e}");
            std::process::exit(1);
        }
    }
}
