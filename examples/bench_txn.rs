//! Transactional produce against idempotent produce of the same records
//! through the listener, in the same run: the `rdkafka` crate's producer
//! (the librdkafka commitfs bundles) sends N 100-byte records to a fresh
//! `commitfs serve` three ways, `acks=all`:
//! - idempotent, streamed (`linger.ms=5`, deliveries awaited at the end);
//! - idempotent, every 100 records sent and awaited before the next 100
//!   (`linger.ms=0`): the same points of waiting as a transaction's;
//! - transactional, 100 records per transaction (begin, send, commit;
//!   `linger.ms=0`).
//!
//! Each trial runs the three on one daemon, in a rotating order; the table
//! prints records per second and the ratios transactional ÷ each
//! idempotent way. Every record's delivery is checked, and a read_committed
//! consumer reads all the transactional ones.
//!
//! ```sh
//! cargo build --release --bins --example bench_txn
//! target/release/examples/bench_txn                 # 100,000 records, 5 trials
//! COMMITFS_BENCH_QUICK=1 target/release/examples/bench_txn
//! ```

#[path = "common/mod.rs"]
mod common;

use common::{Deliveries, Serve, send};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, Producer};
use rdkafka::{Offset, TopicPartitionList};

type Res<T> = Result<T, String>;

/// Records per transaction, as the issue's figure asks.
const PER_TXN: usize = 100;

/// The record an idempotent producer sends before its clock starts.
const WARM_UP: &[u8] = b"warm-up";

struct Daemon {
    _serve: Serve,
    addr: String,
    _dir: tempfile::TempDir,
}

impl Daemon {
    fn start(bin: &Path) -> Res<Daemon> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let (mut cmd, log) =
            common::plaintext_serve(bin, dir.path(), &["streamed-0", "awaited-0", "txn-0"])?;
        let (serve, mut addrs) = Serve::start(&mut cmd, &log, &["PLAINTEXT"])?;
        Ok(Daemon {
            _serve: serve,
            addr: addrs.remove(0),
            _dir: dir,
        })
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Way {
    Streamed,
    Awaited,
    Transactional,
}

fn producer(
    addr: &str,
    transactional: Option<&str>,
    linger: &str,
) -> Res<BaseProducer<Deliveries>> {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", addr)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", linger)
        .set("message.timeout.ms", "60000");
    if let Some(id) = transactional {
        c.set("transactional.id", id);
    }
    // librdkafka's own log of what it sends and waits for, to see where
    // time goes: COMMITFS_BENCH_RDKAFKA_DEBUG=eos,protocol.
    if let Ok(d) = std::env::var("COMMITFS_BENCH_RDKAFKA_DEBUG") {
        c.set("debug", d);
    }
    c.create_with_context(Deliveries::default())
        .map_err(|e| e.to_string())
}

/// Sends what lingers and waits for every delivery with short polls: the
/// rdkafka crate's flush (and the flush a commit starts with) polls in
/// steps of 100 ms, which would time the client's wait, not the broker.
fn drain(p: &BaseProducer<Deliveries>, timeout: Duration) {
    // A flush with no wait: librdkafka sends what lingers at once.
    let _ = p.flush(Duration::ZERO);
    let t = Instant::now();
    while p.in_flight_count() > 0 && t.elapsed() < timeout {
        p.poll(Duration::from_millis(1));
    }
}

/// Seconds to produce `values` to `topic`, idempotent or in transactions
/// of [`PER_TXN`]; every delivery checked.
fn produce(addr: &str, topic: &str, values: &[Vec<u8>], way: Way) -> Res<f64> {
    let timeout = Duration::from_secs(60);
    let txn = way == Way::Transactional;
    let linger = if way == Way::Streamed { "5" } else { "0" };
    let p = producer(addr, txn.then_some("bench-txn"), linger)?;
    // Connected, with the topic's metadata and a producer id, before the
    // clock starts. An idempotent producer has no call that waits for its
    // id, and librdkafka asks for it on a 500 ms timer when no broker was
    // up as it started (rdkafka_idempotence.c), so it sends one record
    // first and waits for it; a transactional one has init_transactions.
    p.client()
        .fetch_metadata(Some(topic), timeout)
        .map_err(|e| e.to_string())?;
    let warm_up = match txn {
        true => {
            p.init_transactions(timeout).map_err(|e| e.to_string())?;
            0
        }
        false => {
            send(&p, topic, WARM_UP)?;
            drain(&p, timeout);
            1
        }
    };
    let t = Instant::now();
    for chunk in values.chunks(PER_TXN) {
        if txn {
            p.begin_transaction().map_err(|e| e.to_string())?;
        }
        for v in chunk {
            send(&p, topic, v)?;
        }
        match way {
            Way::Transactional => {
                drain(&p, timeout);
                p.commit_transaction(timeout).map_err(|e| e.to_string())?;
            }
            Way::Awaited => drain(&p, timeout),
            Way::Streamed => {
                p.poll(Duration::ZERO);
            }
        }
    }
    drain(&p, timeout);
    p.flush(timeout).map_err(|e| format!("flush: {e}"))?;
    let secs = t.elapsed().as_secs_f64();
    let ctx = p.context();
    let (ok, failed) = (
        ctx.ok.load(Ordering::SeqCst),
        ctx.failed.load(Ordering::SeqCst),
    );
    if ok != values.len() + warm_up || failed != 0 {
        return Err(format!(
            "{topic}: {ok} of {} delivered, {failed} failed",
            values.len() + warm_up
        ));
    }
    Ok(secs)
}

/// How many records a read_committed consumer reads from `topic`-0.
fn count_committed(addr: &str, topic: &str, want: usize) -> Res<usize> {
    let k: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", addr)
        .set("group.id", "bench_txn")
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        .set("fetch.wait.max.ms", "100")
        .create()
        .map_err(|e| e.to_string())?;
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Offset(0))
        .map_err(|e| e.to_string())?;
    k.assign(&tpl).map_err(|e| e.to_string())?;
    let (t, mut got) = (Instant::now(), 0);
    while got < want && t.elapsed() < Duration::from_secs(120) {
        if let Some(m) = k.poll(Duration::from_millis(100)) {
            m.map_err(|e| e.to_string())?;
            got += 1;
        }
    }
    Ok(got)
}

fn main() {
    // librdkafka's log lines go through `log` (RUST_LOG=rdkafka=debug).
    let _ = env_logger::Builder::from_default_env()
        .format_timestamp_micros()
        .try_init();
    let quick = std::env::var_os("COMMITFS_BENCH_QUICK").is_some();
    let (n, trials) = if quick { (2_000, 1) } else { (100_000, 5) };
    let bin = common::commitfs_bin();
    let values: Vec<Vec<u8>> = (0..n)
        .map(|i| {
            let head = format!("record-{i:010}-");
            format!("{head}{}", "x".repeat(100 - head.len())).into_bytes()
        })
        .collect();
    println!(
        "rdkafka (librdkafka {}), {n} records of 100 bytes a trial, acks=all; \
         transactional: {PER_TXN} records per transaction",
        rdkafka::util::get_rdkafka_version().1
    );
    println!(
        "{:>6} {:>14} {:>14} {:>14} {:>12} {:>12}",
        "trial", "streamed rec/s", "awaited rec/s", "txn rec/s", "txn÷streamed", "txn÷awaited"
    );
    let mut ratios = Vec::new();
    let mut fair = Vec::new();
    for trial in 0..trials {
        let run = || -> Res<[f64; 3]> {
            let d = Daemon::start(&bin)?;
            let ways = [
                (Way::Streamed, "streamed"),
                (Way::Awaited, "awaited"),
                (Way::Transactional, "txn"),
            ];
            let mut secs = [0.0; 3];
            // A rotating order, so that none always meets a warm daemon.
            for k in 0..3 {
                let w = (trial + k) % 3;
                secs[w] = produce(&d.addr, ways[w].1, &values, ways[w].0)?;
            }
            let read = count_committed(&d.addr, "txn", n)?;
            if read != n {
                return Err(format!("read_committed read {read} of {n} records"));
            }
            Ok(secs)
        };
        match run() {
            Ok([streamed, awaited, txn]) => {
                ratios.push(streamed / txn);
                fair.push(awaited / txn);
                println!(
                    "{:>6} {:>14.0} {:>14.0} {:>14.0} {:>12.2} {:>12.2}",
                    trial + 1,
                    n as f64 / streamed,
                    n as f64 / awaited,
                    n as f64 / txn,
                    streamed / txn,
                    awaited / txn
                );
            }
            Err(e) => {
                println!("bench_txn: trial {} failed: {e}", trial + 1);
                std::process::exit(1);
            }
        }
    }
    let med = |mut v: Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        (v[v.len() / 2], v[0], v[v.len() - 1])
    };
    let (m, lo, hi) = med(ratios);
    println!("transactional ÷ idempotent streamed: median {m:.2} (min {lo:.2}, max {hi:.2})");
    let (m, lo, hi) = med(fair);
    println!(
        "transactional ÷ idempotent awaited every {PER_TXN}: median {m:.2} (min {lo:.2}, max {hi:.2})"
    );
}
