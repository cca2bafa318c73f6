//! Produce and consume through `SASL_SSL` against `PLAINTEXT`, same run,
//! same client: one `commitfs serve` with both listeners, and the `rdkafka`
//! crate's client (the librdkafka commitfs bundles) producing 205 MB of
//! records (`acks=all`, idempotent) to a fresh topic and consuming them
//! back (the topic deleted after the trial), once through each listener
//! per trial, in a rotating order, for
//! records of 1 KiB, 100 B and 16 KiB. `SASL_SSL` is SCRAM-SHA-512 over TLS
//! with a certificate from a CA made here (rcgen). The table prints MB/s of
//! each, the ratios SASL_SSL ÷ PLAINTEXT, and the CPU seconds the daemon
//! and the client spent on each.
//!
//! ```sh
//! cargo build --release --bins --example bench_security
//! target/release/examples/bench_security             # 5 trials of 1 KiB, 3 of the others
//! COMMITFS_BENCH_QUICK=1 target/release/examples/bench_security
//! COMMITFS_BENCH_CASES=1024,1024N target/release/examples/bench_security  # those cases only
//! COMMITFS_BENCH_TRIALS=1 target/release/examples/bench_security          # 1 trial of each
//! COMMITFS_BENCH_PIN=1 target/release/examples/bench_security             # client on CPU 0, daemon on CPU 1
//! ```

#[path = "common/mod.rs"]
mod common;

use commitfs::cluster::admin::block_on;
use common::{Deliveries, Serve, assigned_consumer, bulk_idempotent, send, send_all};
use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::Consumer;
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, Producer};

type Res<T> = Result<T, String>;

const PASSWORD: &str = "bench-password";

/// The record each produce step starts with, before its clock starts.
const WARM_UP: &[u8] = b"warm-up";

struct Daemon {
    serve: Serve,
    plain: String,
    secure: String,
    ca: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

/// A CA and a server certificate for 127.0.0.1: (CA PEM, key + chain PEM).
fn certificates() -> Res<(String, String)> {
    let e = |e: rcgen::Error| e.to_string();
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(e)?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "bench_security CA");
    let issuer = CertifiedIssuer::self_signed(ca, KeyPair::generate().map_err(e)?).map_err(e)?;
    let mut server = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
        .map_err(e)?;
    server
        .distinguished_name
        .push(DnType::CommonName, "localhost");
    let key = KeyPair::generate().map_err(e)?;
    let cert = server.signed_by(&key, &issuer).map_err(e)?;
    Ok((
        issuer.pem(),
        format!("{}{}", key.serialize_pem(), cert.pem()),
    ))
}

impl Daemon {
    fn start(bin: &Path) -> Res<Daemon> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let data = dir.path().join("data");
        let log = dir.path().join("serve.log");
        let (ca_pem, keystore) = certificates()?;
        let ca = dir.path().join("ca.pem");
        let ks = dir.path().join("keystore.pem");
        std::fs::write(&ca, ca_pem).map_err(|e| e.to_string())?;
        std::fs::write(&ks, keystore).map_err(|e| e.to_string())?;
        let mut cmd = Command::new(bin);
        if pinned() {
            use std::os::unix::process::CommandExt;
            // SAFETY: sched_setaffinity only, between fork and exec.
            unsafe {
                cmd.pre_exec(|| pin_to(1));
            }
        }
        cmd.args(["serve", "--listeners"])
            .arg("PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0")
            .args(["-o", "sasl.enabled.mechanisms=SCRAM-SHA-512", "-o"])
            .arg(format!("ssl.keystore.location={}", ks.display()))
            .args([
                "-o",
                "num.partitions=1",
                "-o",
                "auto.create.topics.enable=true",
            ])
            .arg("--add-scram")
            .arg(format!("SCRAM-SHA-512=[name=bench,password={PASSWORD}]"))
            .arg(&data);
        common::serve_logging_to(&mut cmd, &log)?;
        let (serve, addrs) = Serve::start(&mut cmd, &log, &["PLAINTEXT", "SASL_SSL"])?;
        let [plain, secure] = <[String; 2]>::try_from(addrs).map_err(|_| "two listeners")?;
        Ok(Daemon {
            serve,
            plain,
            secure,
            ca,
            _dir: dir,
        })
    }

    /// The client settings of a listener: none, or SCRAM over TLS; with
    /// Nagle's algorithm on if `nagle` (librdkafka's default turns it off).
    fn client(&self, secure: bool, nagle: bool) -> ClientConfig {
        let mut c = ClientConfig::new();
        if secure {
            c.set("bootstrap.servers", &self.secure)
                .set("security.protocol", "SASL_SSL")
                .set("sasl.mechanisms", "SCRAM-SHA-512")
                .set("sasl.username", "bench")
                .set("sasl.password", PASSWORD)
                .set("ssl.ca.location", self.ca.display().to_string());
        } else {
            c.set("bootstrap.servers", &self.plain);
        }
        c.set("client.id", "bench_security");
        if nagle {
            c.set("socket.nagle.disable", "false");
        }
        c
    }
}

/// `COMMITFS_BENCH_PIN=1`: the daemon on CPU 1 and the client on CPU 0, so
/// that neither takes the other's CPU time, as on two machines (loopback
/// still runs the receiver's TCP work in the sender's context).
fn pinned() -> bool {
    std::env::var_os("COMMITFS_BENCH_PIN").is_some()
}

/// Pins the calling thread, and the threads and programs it starts, to `cpu`.
fn pin_to(cpu: usize) -> std::io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET stays within it.
    let r = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    match r {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// CPU seconds (user and system) the process `pid` has used.
fn cpu_secs(pid: u32) -> f64 {
    stat_cpu(&std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default()).1
}

/// A `/proc/…/stat` line's command name and CPU seconds (user and system).
fn stat_cpu(stat: &str) -> (&str, f64) {
    let Some((head, rest)) = stat.rsplit_once(')') else {
        return ("", 0.0);
    };
    let name = head.split_once('(').map_or("", |(_, n)| n);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime: fields 14 and 15, the 12th and 13th after the name.
    let ticks: f64 = fields
        .get(11..13)
        .map(|f| f.iter().filter_map(|v| v.parse::<f64>().ok()).sum())
        .unwrap_or(0.0);
    // SAFETY: sysconf with a constant name.
    (
        name,
        ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64,
    )
}

/// CPU seconds of each of librdkafka's broker threads alive in this process
/// (`rdk:broker…`, the thread that writes and reads the socket, TLS
/// included), by thread id: the busiest one's share of a step's seconds
/// shows whether the client's one socket thread was the limit.
fn broker_threads() -> HashMap<String, f64> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return HashMap::new();
    };
    tasks
        .filter_map(|t| {
            let t = t.ok()?;
            let stat = std::fs::read_to_string(t.path().join("stat")).ok()?;
            let (name, cpu) = stat_cpu(&stat);
            let tid = t.file_name().to_string_lossy().into_owned();
            name.starts_with("rdk:broker").then_some((tid, cpu))
        })
        .collect()
}

/// Produces every value to `topic` (deliveries awaited), measured from
/// when the producer is ready.
fn produce(d: &Daemon, step: Step, topic: &str, values: &[Vec<u8>]) -> Res<Measured> {
    let mut c = d.client(step.secure, step.nagle);
    bulk_idempotent(&mut c).set("message.timeout.ms", "120000");
    let p: BaseProducer<Deliveries> = c
        .create_with_context(Deliveries::default())
        .map_err(|e| e.to_string())?;
    // The clock starts once the producer is ready: librdkafka's idempotent
    // producer asks for its producer id on a timer (about 0.5 s after it
    // connects, through either listener), a constant that would otherwise
    // sit inside both figures and pull their ratio towards 1.
    send(&p, topic, WARM_UP)?;
    p.flush(Duration::from_secs(60))
        .map_err(|e| format!("flush of the first record: {e}"))?;
    let meter = Meter::start(d);
    send_all(&p, topic, values)?;
    p.flush(Duration::from_secs(120))
        .map_err(|e| format!("flush: {e}"))?;
    let measured = meter.stop(d);
    let (ok, failed) = (
        p.context().ok.load(Ordering::SeqCst),
        p.context().failed.load(Ordering::SeqCst),
    );
    // The warm-up record and the values.
    if ok != values.len() + 1 || failed != 0 {
        return Err(format!(
            "{ok} of {} delivered, {failed} failed",
            values.len() + 1
        ));
    }
    Ok(measured)
}

/// Consumes every value of `topic` from offset 0 (each checked), measured
/// from the warm-up record's arrival.
fn consume(d: &Daemon, step: Step, topic: &str, values: &[Vec<u8>]) -> Res<Measured> {
    let mut c = d.client(step.secure, step.nagle);
    c.set("group.id", "bench_security");
    let (k, tpl) = assigned_consumer(&mut c, topic)?;
    let started = Instant::now();
    k.assign(&tpl).map_err(|e| e.to_string())?;
    // The clock starts at the first record (the producer's warm-up one),
    // once the consumer is connected and fetching, as for produce.
    let mut meter = None;
    let mut got = 0;
    while got < values.len() {
        if started.elapsed() > Duration::from_secs(120) {
            return Err(format!("consumed {got} of {} within 120 s", values.len()));
        }
        match k.poll(Duration::from_millis(100)) {
            None => {}
            Some(Err(e)) => return Err(format!("consume: {e}")),
            Some(Ok(m)) if meter.is_none() => {
                if m.payload() != Some(WARM_UP) {
                    return Err("the first record is not the warm-up one".to_string());
                }
                meter = Some(Meter::start(d));
            }
            Some(Ok(m)) => {
                if m.payload() != Some(&values[got][..]) {
                    return Err(format!("record {got} differs"));
                }
                got += 1;
            }
        }
    }
    Ok(meter.map_or_else(Measured::default, |m| m.stop(d)))
}

/// What a step measured, from the moment its client was ready.
#[derive(Clone, Copy, Default)]
struct Measured {
    secs: f64,
    /// CPU seconds of the daemon, of this process, and of the client's
    /// busiest broker thread.
    daemon: f64,
    client: f64,
    broker: f64,
}

/// CPU counters at the start of a step's clock.
struct Meter {
    at: Instant,
    daemon: f64,
    client: f64,
    broker: HashMap<String, f64>,
}

impl Meter {
    fn start(d: &Daemon) -> Meter {
        Meter {
            daemon: cpu_secs(d.serve.pid()),
            client: cpu_secs(std::process::id()),
            broker: broker_threads(),
            at: Instant::now(),
        }
    }

    fn stop(self, d: &Daemon) -> Measured {
        Measured {
            secs: self.at.elapsed().as_secs_f64(),
            daemon: cpu_secs(d.serve.pid()) - self.daemon,
            client: cpu_secs(std::process::id()) - self.client,
            broker: broker_threads()
                .iter()
                .map(|(tid, cpu)| cpu - self.broker.get(tid).copied().unwrap_or(0.0))
                .fold(0.0, f64::max),
        }
    }
}

/// Which listener a step goes through, and whether the client keeps
/// Nagle's algorithm on.
#[derive(Clone, Copy)]
struct Step {
    secure: bool,
    nagle: bool,
}

/// What is measured: record size, trials, and whether the client keeps
/// Nagle's algorithm on. 1 KiB first (the headline figure), then small and
/// large records, whose ratios differ because librdkafka's TLS writes do,
/// then 1 KiB from a client with Nagle on (`socket.nagle.disable=false`,
/// the default of older librdkafka), which the listener's quick ACKs serve
/// (see BENCHMARKS.md).
const CASES: [(usize, usize, bool); 4] = [
    (1024, 5, false),
    (100, 3, false),
    (16384, 3, false),
    (1024, 3, true),
];

fn label(size: usize, nagle: bool) -> String {
    format!("{size}{}", if nagle { " N" } else { "" })
}

fn main() {
    let _ = env_logger::Builder::from_default_env().try_init();
    let quick = std::env::var_os("COMMITFS_BENCH_QUICK").is_some();
    if pinned()
        && let Err(e) = pin_to(0)
    {
        println!("bench_security: cannot pin the client to CPU 0: {e}");
        std::process::exit(1);
    }
    let bin = common::commitfs_bin();
    println!(
        "rdkafka (librdkafka {}), 205 MB a trial, acks=all, idempotent; SASL_SSL is \
         SCRAM-SHA-512 over TLS; CPU s: the daemon's (D) and the client's (C), PLAINTEXT/SASL_SSL; \
         busy: the CPU of the client's busiest broker thread ÷ the step's seconds, PLAINTEXT/SASL_SSL; \
         N: the client with Nagle's algorithm on; the clock starts once the client is connected \
         and ready{}",
        rdkafka::util::get_rdkafka_version().1,
        if pinned() {
            "; pinned: the client on CPU 0, the daemon on CPU 1"
        } else {
            ""
        }
    );
    println!(
        "{:>7} {:>5} {:>14} {:>14} {:>6} {:>14} {:>14} {:>6} {:>20} {:>20} {:>16}",
        "record",
        "trial",
        "produce PLAIN",
        "SASL_SSL",
        "ratio",
        "consume PLAIN",
        "SASL_SSL",
        "ratio",
        "produce CPU s: D, C",
        "consume CPU s: D, C",
        "busy: prod, cons"
    );
    // `COMMITFS_BENCH_CASES=1024,1024N`: only those cases (labels without spaces).
    let only = std::env::var("COMMITFS_BENCH_CASES").ok();
    // `COMMITFS_BENCH_TRIALS=N`: N trials of each case.
    let trials_override = std::env::var("COMMITFS_BENCH_TRIALS")
        .ok()
        .and_then(|t| t.parse::<usize>().ok())
        .filter(|t| *t > 0);
    let mut summary = Vec::new();
    for (size, trials, nagle) in CASES {
        if let Some(only) = &only
            && !only
                .split(',')
                .any(|c| c == label(size, nagle).replace(' ', ""))
        {
            continue;
        }
        let (n, trials) = match quick {
            true => (2_000, 1),
            false => (205_000_000 / size, trials_override.unwrap_or(trials)),
        };
        // A daemon per case, and each trial's topics deleted after it: no
        // more than one trial's records (about 410 MB) are on disk at once.
        let daemon = match Daemon::start(&bin) {
            Ok(d) => d,
            Err(e) => {
                println!("bench_security: {e}");
                std::process::exit(1);
            }
        };
        match run_case(&daemon, size, nagle, n, trials) {
            Ok(ratios) => summary.push((label(size, nagle), ratios)),
            Err(e) => {
                println!("bench_security: {}-byte records: {e}", label(size, nagle));
                // exit() runs no destructors: the daemon and its data go first.
                drop(daemon);
                std::process::exit(1);
            }
        }
    }
    let med = |mut v: Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        (v[v.len() / 2], v[0], v[v.len() - 1])
    };
    for (size, (produce, consume)) in summary {
        let (pm, plo, phi) = med(produce);
        let (cm, clo, chi) = med(consume);
        println!(
            "{size:>7} B records, SASL_SSL ÷ PLAINTEXT (MB/s): produce median {pm:.2} \
             (min {plo:.2}, max {phi:.2}), consume median {cm:.2} (min {clo:.2}, max {chi:.2})"
        );
    }
}

/// `trials` trials of `n` records of `size` bytes, a row each: the
/// produce and consume ratios, SASL_SSL ÷ PLAINTEXT.
fn run_case(
    d: &Daemon,
    size: usize,
    nagle: bool,
    n: usize,
    trials: usize,
) -> Res<(Vec<f64>, Vec<f64>)> {
    let values: Vec<Vec<u8>> = (0..n)
        .map(|i| {
            let head = format!("r{i:09}-");
            format!("{head}{}", "x".repeat(size - head.len())).into_bytes()
        })
        .collect();
    let mb = (n * size) as f64 / 1e6;
    let (mut produce_ratios, mut consume_ratios) = (Vec::new(), Vec::new());
    for trial in 0..trials {
        // Produce PLAINTEXT, produce SASL_SSL, consume PLAINTEXT, consume SASL_SSL.
        let mut m = [Measured::default(); 4];
        // A rotating order, so that neither always goes first.
        for k in 0..2 {
            let secure = (trial + k) % 2 == 1;
            let topic = topic_of(size, trial, secure);
            for (at, consuming) in [(secure as usize, false), (2 + secure as usize, true)] {
                m[at] = match consuming {
                    false => produce(d, Step { secure, nagle }, &topic, &values)?,
                    true => consume(d, Step { secure, nagle }, &topic, &values)?,
                };
            }
        }
        // The trial's topics go, so that the next trial's records land in
        // page-cache pages just freed: in this VM memory left free for a
        // while is slow to touch again, which put some trials (of either
        // listener) in a slow mode (BENCHMARKS.md).
        for secure in [false, true] {
            delete_topic(d, &topic_of(size, trial, secure))?;
        }
        let secs = m.map(|m| m.secs);
        let rate = |s: f64| mb / s;
        produce_ratios.push(secs[0] / secs[1]);
        consume_ratios.push(secs[2] / secs[3]);
        let cpu = |i: usize| {
            format!(
                "{:.2}/{:.2} {:.2}/{:.2}",
                m[i].daemon,
                m[i + 1].daemon,
                m[i].client,
                m[i + 1].client
            )
        };
        let busy = |i: usize| {
            format!(
                "{:.0}%/{:.0}%",
                100.0 * m[i].broker / secs[i],
                100.0 * m[i + 1].broker / secs[i + 1]
            )
        };
        println!(
            "{:>7} {:>5} {:>9.1} MB/s {:>9.1} MB/s {:>6.2} {:>9.1} MB/s {:>9.1} MB/s {:>6.2} {:>20} {:>20} {:>16}",
            label(size, nagle),
            trial + 1,
            rate(secs[0]),
            rate(secs[1]),
            secs[0] / secs[1],
            rate(secs[2]),
            rate(secs[3]),
            secs[2] / secs[3],
            cpu(0),
            cpu(2),
            format!("{} {}", busy(0), busy(2))
        );
    }
    Ok((produce_ratios, consume_ratios))
}

fn topic_of(size: usize, trial: usize, secure: bool) -> String {
    let listener = if secure { "sasl-ssl" } else { "plaintext" };
    format!("s{size}-t{trial}-{listener}")
}

/// Deletes `topic` through the PLAINTEXT listener (DeleteTopics).
fn delete_topic(d: &Daemon, topic: &str) -> Res<()> {
    let admin: AdminClient<DefaultClientContext> =
        d.client(false, false).create().map_err(|e| e.to_string())?;
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let results = block_on(
        admin.delete_topics(&[topic], &options),
        Duration::from_secs(60),
    )
    .ok_or_else(|| format!("delete {topic}: no answer within 60 s"))?
    .map_err(|e| format!("delete {topic}: {e}"))?;
    for r in results {
        r.map_err(|(t, e)| format!("delete {t}: {e}"))?;
    }
    Ok(())
}
