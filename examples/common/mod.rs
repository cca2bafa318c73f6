//! What the benchmarks share: which `commitfs` binary they measure, a
//! `commitfs serve` they start and stop, and the producer's delivery count.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rdkafka::ClientContext;
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, ProducerContext};
use rdkafka::types::RDKafkaErrorCode;

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
