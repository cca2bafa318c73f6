//! What the benchmarks share: which `commitfs` binary they measure, a
//! `commitfs serve` they start and stop, the producer's settings and
//! delivery count, and the shell commands they time.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use commitfs::storage::{LogConfig, LogManager, OpenOptions};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::BaseConsumer;
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, ProducerContext};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{ClientContext, Offset, TopicPartitionList};

/// The `commitfs` built beside the running example (`target/release/`), or
/// `COMMITFS_BIN` when set.
pub fn commitfs_bin() -> PathBuf {
    if let Some(b) = std::env::var_os("COMMITFS_BIN") {
        return PathBuf::from(b);
    }
    std::env::current_exe()
        .ok()
        .and_then(|p| Some(p.parent()?.parent()?.join("commitfs")))
        .filter(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from("target/release/commitfs"))
}

/// Gives `cmd` (a `commitfs serve`) no stdin or stdout and `log` for its
/// stderr, at a level that keeps the listener lines `Serve::start` waits for
/// and the warnings, and nothing that would cost time in the measured path.
pub fn serve_logging_to(cmd: &mut Command, log: &Path) -> Result<(), String> {
    let file = std::fs::File::create(log).map_err(|e| e.to_string())?;
    cmd.env(
        "RUST_LOG",
        "warn,commitfs_kafka::server=info,commitfs_kafka::network=info",
    )
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(file);
    Ok(())
}

/// `sh -c cmd`, which must succeed; returns its wall time.
pub fn sh(cmd: &str) -> Result<f64, String> {
    let t = Instant::now();
    let out = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("sh: {e}"))?;
    let s = t.elapsed().as_secs_f64();
    if !out.status.success() {
        return Err(format!(
            "`{cmd}` failed with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(s)
}

/// A `commitfs serve` on one PLAINTEXT listener (port 0) over a new data dir
/// in `dir` holding `partitions`, its stderr going to the returned log.
pub fn plaintext_serve(
    bin: &Path,
    dir: &Path,
    partitions: &[&str],
) -> Result<(Command, PathBuf), String> {
    let data = dir.join("data");
    let log = dir.join("serve.log");
    let mgr = LogManager::open(&data, LogConfig::default(), OpenOptions::default())
        .map_err(|e| e.to_string())?;
    for p in partitions {
        mgr.create_partition(p).map_err(|e| e.to_string())?;
    }
    mgr.close().map_err(|e| e.to_string())?;
    let mut cmd = Command::new(bin);
    cmd.args(["serve", "--listeners", "PLAINTEXT://127.0.0.1:0"])
        .arg(&data);
    serve_logging_to(&mut cmd, &log)?;
    Ok((cmd, log))
}

/// A `commitfs serve` a benchmark started, stopped on drop as an operator
/// would: SIGTERM, then SIGKILL if it has not ended within 60 s.
pub struct Serve {
    pub child: Child,
}

impl Serve {
    /// Spawns `cmd` (a `commitfs serve` on ports 0, its stderr going to
    /// `log`) and waits, 30 s at most, until the log names a listener for
    /// each of `names` (`PLAINTEXT`, `SASL_SSL`, ...): their addresses, in
    /// that order.
    pub fn start(
        cmd: &mut Command,
        log: &Path,
        names: &[&str],
    ) -> Result<(Serve, Vec<String>), String> {
        // The daemon ends with the thread that started it, even when the
        // bench is killed (a `timeout`, ^C) and its destructors never run.
        // SAFETY: prctl only, between fork and exec.
        unsafe {
            use std::os::unix::process::CommandExt;
            cmd.pre_exec(|| {
                match libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong) {
                    0 => Ok(()),
                    _ => Err(std::io::Error::last_os_error()),
                }
            });
        }
        let child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {:?}: {e}", cmd.get_program()))?;
        let serve = Serve { child };
        let t = Instant::now();
        loop {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            let addr = |name: &str| {
                text.lines().find_map(|l| {
                    let (addr, rest) = l.split_once("Kafka listener on ")?.1.split_once(' ')?;
                    rest.starts_with(&format!("({name}, "))
                        .then(|| addr.to_string())
                })
            };
            let found: Vec<String> = names.iter().filter_map(|n| addr(n)).collect();
            if found.len() == names.len() {
                return Ok((serve, found));
            }
            if t.elapsed() > Duration::from_secs(30) {
                return Err(format!("{:?} did not listen:\n{text}", cmd.get_program()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(60) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Counts a producer's deliveries: acknowledged, and failed (the first
/// error kept).
#[derive(Default)]
pub struct Deliveries {
    pub ok: AtomicUsize,
    pub failed: AtomicUsize,
    pub first_error: Mutex<Option<String>>,
}

impl ClientContext for Deliveries {}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = ();

    fn delivery(&self, r: &DeliveryResult<'_>, _: ()) {
        match r {
            Ok(_) => {
                self.ok.fetch_add(1, Ordering::Relaxed);
            }
            Err((e, _)) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
                let mut first = self.first_error.lock().unwrap();
                first.get_or_insert_with(|| e.to_string());
            }
        }
    }
}

/// Sets `c` up for bulk idempotent produce: large batches, and a queue that
/// holds every record so that sends are not turned back while the first
/// batches are in flight (as commitfs's own producer,
/// crates/cluster/src/config.rs).
pub fn bulk_idempotent(c: &mut ClientConfig) -> &mut ClientConfig {
    c.set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", "5")
        .set("batch.size", "1000000")
        .set("queue.buffering.max.messages", "2000000")
}

/// Sends each of `values` with [`send`], serving delivery reports every 1024
/// sends; the caller's flush waits for the rest.
pub fn send_all(
    p: &BaseProducer<Deliveries>,
    topic: &str,
    values: &[Vec<u8>],
) -> Result<(), String> {
    for (i, v) in values.iter().enumerate() {
        send(p, topic, v)?;
        if i % 1024 == 1023 {
            p.poll(Duration::ZERO);
        }
    }
    Ok(())
}

/// A consumer of partition 0 of `topic` from offset 0, set up by `c` and
/// then as a reader that is assigned by hand, and the assignment to give it
/// once the caller's clock runs. The group is never joined and nothing is
/// committed, but librdkafka's assign needs a group.id (without one,
/// "Unknown group"), which `c` names. librdkafka waits
/// fetch.queue.backoff.ms (1 s) before fetching again once its prefetch
/// thresholds are met; 10 ms as in crates/cluster/src/config.rs.
pub fn assigned_consumer(
    c: &mut ClientConfig,
    topic: &str,
) -> Result<(BaseConsumer, TopicPartitionList), String> {
    c.set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        .set("fetch.queue.backoff.ms", "10")
        .set("fetch.wait.max.ms", "100");
    let k: BaseConsumer = c.create().map_err(|e| e.to_string())?;
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Offset(0))
        .map_err(|e| e.to_string())?;
    Ok((k, tpl))
}

/// Produces `value` to partition 0 of `topic`, polling (1 ms at a time)
/// while librdkafka's queue is full.
pub fn send(p: &BaseProducer<Deliveries>, topic: &str, value: &[u8]) -> Result<(), String> {
    let mut rec = BaseRecord::<(), [u8]>::to(topic)
        .partition(0)
        .payload(value);
    loop {
        match p.send(rec) {
            Ok(()) => return Ok(()),
            Err((e, back)) if e.rdkafka_error_code() == Some(RDKafkaErrorCode::QueueFull) => {
                rec = back;
                p.poll(Duration::from_millis(1));
            }
            Err((e, _)) => return Err(format!("produce: {e}")),
        }
    }
}
