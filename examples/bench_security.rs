//! Produce and consume through `SASL_SSL` against `PLAINTEXT`, same run,
//! same client: one `commitfs serve` with both listeners, and the `rdkafka`
//! crate's client (the librdkafka commitfs bundles) producing N records of
//! 1 KiB (`acks=all`, idempotent) to a fresh topic and consuming them back,
//! once through each listener per trial, in a rotating order. `SASL_SSL` is
//! SCRAM-SHA-512 over TLS with a certificate from a CA made here (rcgen).
//! The table prints MB/s of each and the ratios SASL_SSL ÷ PLAINTEXT.
//!
//! ```sh
//! cargo build --release --bins --example bench_security
//! target/release/examples/bench_security             # 200,000 records, 5 trials
//! COMMITFS_BENCH_QUICK=1 target/release/examples/bench_security
//! ```

#[path = "common/mod.rs"]
mod common;

use common::{Deliveries, Serve};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};

type Res<T> = Result<T, String>;

const RECORD: usize = 1024;
const PASSWORD: &str = "bench-password";

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
            .arg(&data)
            .env("RUST_LOG", "warn,commitfs::kafka::server=info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).map_err(|e| e.to_string())?);
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

    /// The client settings of a listener: none, or SCRAM over TLS.
    fn client(&self, secure: bool) -> ClientConfig {
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
        c
    }
}

/// CPU seconds (user and system) the process `pid` has used.
fn cpu_secs(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    // utime and stime: fields 14 and 15, the 12th and 13th after the name.
    let ticks: f64 = fields
        .get(11..13)
        .map(|f| f.iter().filter_map(|v| v.parse::<f64>().ok()).sum())
        .unwrap_or(0.0);
    // SAFETY: sysconf with a constant name.
    ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

/// Seconds to produce every value to `topic` (deliveries awaited).
fn produce(d: &Daemon, secure: bool, topic: &str, values: &[Vec<u8>]) -> Res<f64> {
    let mut c = d.client(secure);
    c.set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", "5")
        .set("batch.size", "1000000")
        .set("message.timeout.ms", "120000")
        .set("queue.buffering.max.messages", "2000000");
    let p: BaseProducer<Deliveries> = c
        .create_with_context(Deliveries::default())
        .map_err(|e| e.to_string())?;
    let t = Instant::now();
    for (i, v) in values.iter().enumerate() {
        let mut rec = BaseRecord::<(), [u8]>::to(topic)
            .partition(0)
            .payload(&v[..]);
        loop {
            match p.send(rec) {
                Ok(()) => break,
                Err((e, back)) if e.rdkafka_error_code() == Some(RDKafkaErrorCode::QueueFull) => {
                    rec = back;
                    p.poll(Duration::from_millis(1));
                }
                Err((e, _)) => return Err(format!("produce: {e}")),
            }
        }
        if i % 1024 == 1023 {
            p.poll(Duration::ZERO);
        }
    }
    p.flush(Duration::from_secs(120))
        .map_err(|e| format!("flush: {e}"))?;
    let secs = t.elapsed().as_secs_f64();
    let (ok, failed) = (
        p.context().ok.load(Ordering::SeqCst),
        p.context().failed.load(Ordering::SeqCst),
    );
    if ok != values.len() || failed != 0 {
        return Err(format!(
            "{ok} of {} delivered, {failed} failed",
            values.len()
        ));
    }
    Ok(secs)
}

/// Seconds to consume every value of `topic` from offset 0 (each checked).
fn consume(d: &Daemon, secure: bool, topic: &str, values: &[Vec<u8>]) -> Res<f64> {
    let mut c = d.client(secure);
    c.set("group.id", "bench_security")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        .set("fetch.queue.backoff.ms", "10")
        .set("fetch.wait.max.ms", "100");
    let k: BaseConsumer = c.create().map_err(|e| e.to_string())?;
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Offset(0))
        .map_err(|e| e.to_string())?;
    let t = Instant::now();
    k.assign(&tpl).map_err(|e| e.to_string())?;
    let mut got = 0;
    while got < values.len() {
        if t.elapsed() > Duration::from_secs(120) {
            return Err(format!("consumed {got} of {} within 120 s", values.len()));
        }
        match k.poll(Duration::from_millis(100)) {
            None => {}
            Some(Err(e)) => return Err(format!("consume: {e}")),
            Some(Ok(m)) => {
                if m.payload() != Some(&values[got][..]) {
                    return Err(format!("record {got} differs"));
                }
                got += 1;
            }
        }
    }
    Ok(t.elapsed().as_secs_f64())
}

fn main() {
    let _ = env_logger::Builder::from_default_env().try_init();
    let quick = std::env::var_os("COMMITFS_BENCH_QUICK").is_some();
    let (n, trials) = if quick { (2_000, 1) } else { (200_000, 5) };
    let bin = common::commitfs_bin();
    let values: Vec<Vec<u8>> = (0..n)
        .map(|i| {
            let head = format!("record-{i:010}-");
            format!("{head}{}", "x".repeat(RECORD - head.len())).into_bytes()
        })
        .collect();
    let mb = (n * RECORD) as f64 / 1e6;
    println!(
        "rdkafka (librdkafka {}), {n} records of {RECORD} bytes ({mb:.0} MB) a trial, acks=all, \
         idempotent; SASL_SSL is SCRAM-SHA-512 over TLS",
        rdkafka::util::get_rdkafka_version().1
    );
    println!(
        "{:>5} {:>16} {:>16} {:>8} {:>16} {:>16} {:>8} {:>24}",
        "trial",
        "produce PLAIN",
        "produce SASL_SSL",
        "ratio",
        "consume PLAIN",
        "consume SASL_SSL",
        "ratio",
        "daemon CPU s: P/S, C/S"
    );
    let daemon = match Daemon::start(&bin) {
        Ok(d) => d,
        Err(e) => {
            println!("bench_security: {e}");
            std::process::exit(1);
        }
    };
    let (mut produce_ratios, mut consume_ratios) = (Vec::new(), Vec::new());
    for trial in 0..trials {
        let mut cpu = [0.0; 4];
        let mut run = || -> Res<[f64; 4]> {
            let mut secs = [0.0; 4];
            let pid = daemon.serve.pid();
            // A rotating order, so that neither always goes first.
            for k in 0..2 {
                let secure = (trial + k) % 2 == 1;
                let topic = format!("t{trial}-{}", if secure { "sasl-ssl" } else { "plaintext" });
                let at = if secure { 1 } else { 0 };
                let c0 = cpu_secs(pid);
                secs[at] = produce(&daemon, secure, &topic, &values)?;
                let c1 = cpu_secs(pid);
                secs[2 + at] = consume(&daemon, secure, &topic, &values)?;
                cpu[at] = c1 - c0;
                cpu[2 + at] = cpu_secs(pid) - c1;
            }
            Ok(secs)
        };
        match run() {
            Ok([p_plain, p_secure, c_plain, c_secure]) => {
                let rate = |s: f64| mb / s;
                produce_ratios.push(p_plain / p_secure);
                consume_ratios.push(c_plain / c_secure);
                println!(
                    "{:>5} {:>11.1} MB/s {:>11.1} MB/s {:>8.2} {:>11.1} MB/s {:>11.1} MB/s {:>8.2} \
                     {:>6.2}/{:<6.2} {:>5.2}/{:<5.2}",
                    trial + 1,
                    rate(p_plain),
                    rate(p_secure),
                    p_plain / p_secure,
                    rate(c_plain),
                    rate(c_secure),
                    c_plain / c_secure,
                    cpu[0],
                    cpu[1],
                    cpu[2],
                    cpu[3]
                );
            }
            Err(e) => {
                println!("bench_security: trial {} failed: {e}", trial + 1);
                std::process::exit(1);
            }
        }
    }
    let med = |mut v: Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        (v[v.len() / 2], v[0], v[v.len() - 1])
    };
    let (m, lo, hi) = med(produce_ratios);
    println!("produce SASL_SSL ÷ PLAINTEXT (MB/s): median {m:.2} (min {lo:.2}, max {hi:.2})");
    let (m, lo, hi) = med(consume_ratios);
    println!("consume SASL_SSL ÷ PLAINTEXT (MB/s): median {m:.2} (min {lo:.2}, max {hi:.2})");
}
