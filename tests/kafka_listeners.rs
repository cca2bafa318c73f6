//! Several listeners in one daemon (Kafka's `listeners`,
//! `listener.security.protocol.map`, `advertised.listeners`): each binds
//! its own port, and Metadata and FindCoordinator answer a client with the
//! advertised address of the listener it came in on, as Kafka answers from
//! the request's listener name. kcat (librdkafka) reads the brokers list;
//! the raw client checks the exact fields. Bad listener configs stop the
//! daemon at start with Kafka's messages.

mod kafka_support;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kafka_protocol::messages::ApiKey;
use kafka_protocol::messages::find_coordinator_request::FindCoordinatorRequest;
use kafka_protocol::messages::find_coordinator_response::FindCoordinatorResponse;
use kafka_protocol::messages::metadata_request::MetadataRequest;
use kafka_protocol::messages::metadata_response::MetadataResponse;
use kafka_protocol::protocol::StrBytes;
use kafka_support::bounded::{cmd_timeout, run};
use kafka_support::{BIN, Conn, kcat, require};

/// A `commitfs serve` killed when dropped.
struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `commitfs serve` with `args` and waits (bounded) until it has
/// logged a listener line for each of `names`; returns each one's address.
fn serve(data: &Path, args: &[&str], names: &[&str]) -> (Daemon, Vec<String>) {
    let log_path = data.with_extension("serve.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let child = Command::new(BIN)
        .arg("serve")
        .args(args)
        .arg(data)
        .env("RUST_LOG", "info,commitfs_kafka::network=debug")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start commitfs serve");
    let mut d = Daemon(child);
    let start = Instant::now();
    loop {
        let text = std::fs::read_to_string(&log_path).unwrap_or_default();
        let addr = |name: &str| {
            text.lines().find_map(|l| {
                let rest = l.split_once("Kafka listener on ")?.1;
                let (addr, rest) = rest.split_once(' ')?;
                rest.starts_with(&format!("({name}, "))
                    .then(|| addr.to_string())
            })
        };
        let found: Vec<Option<String>> = names.iter().map(|n| addr(n)).collect();
        if found.iter().all(Option::is_some) {
            return (d, found.into_iter().flatten().collect());
        }
        if let Ok(Some(st)) = d.0.try_wait() {
            panic!("the daemon exited with {st} before it listened:\n{text}");
        }
        assert!(
            start.elapsed() < cmd_timeout(),
            "the daemon did not log every listener:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn port(addr: &str) -> i32 {
    addr.rsplit_once(':').unwrap().1.parse().unwrap()
}

/// (host, port) of the one broker in a Metadata answer, and of the
/// coordinator in a FindCoordinator answer, asked on `addr`.
fn answered(addr: &str) -> ((String, i32), (String, i32)) {
    let mut c = Conn::new(addr);
    let m: MetadataResponse = c.call(ApiKey::Metadata, 12, &MetadataRequest::default());
    assert_eq!(m.brokers.len(), 1);
    let b = &m.brokers[0];
    let f: FindCoordinatorResponse = c.call(
        ApiKey::FindCoordinator,
        4,
        &FindCoordinatorRequest::default()
            .with_key_type(0)
            .with_coordinator_keys(vec![StrBytes::from_static_str("g")]),
    );
    let k = &f.coordinators[0];
    assert_eq!(k.error_code, 0);
    ((b.host.to_string(), b.port), (k.host.to_string(), k.port))
}

#[test]
fn each_listener_advertises_its_own_address() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let (_d, addrs) = serve(
        &data,
        &[
            "--listeners",
            "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0,replication://127.0.0.1:0",
            // `-o` splits at commas: a list's items are given with `;`.
            "-o",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT;INTERNAL:PLAINTEXT;REPLICATION:PLAINTEXT",
            "-o",
            "advertised.listeners=INTERNAL://kafka-internal.example:9999",
        ],
        &["PLAINTEXT", "INTERNAL", "REPLICATION"],
    );
    let (plain, internal, replication) = (&addrs[0], &addrs[1], &addrs[2]);
    assert_ne!(port(plain), port(internal));
    assert_ne!(port(plain), port(replication));
    // Not advertised explicitly: the address it bound.
    let own = |a: &str| ("127.0.0.1".to_string(), port(a));
    assert_eq!(answered(plain), (own(plain), own(plain)));
    assert_eq!(answered(replication), (own(replication), own(replication)));
    let advertised = ("kafka-internal.example".to_string(), 9999);
    assert_eq!(answered(internal), (advertised.clone(), advertised));

    // librdkafka's view of the brokers list, through each listener.
    let Some(kcat) = require(kcat()) else { return };
    for (addr, want) in [
        (plain, format!("broker 0 at 127.0.0.1:{}", port(plain))),
        (
            internal,
            "broker 0 at kafka-internal.example:9999".to_string(),
        ),
    ] {
        // `-m` bounds how long kcat waits for a broker to answer: a hang
        // bound, far above what an answer takes even on a loaded machine
        // (10 s was once not enough in a full run).
        let out = run(
            Command::new(&kcat).args(["-b", addr, "-L", "-m", "120"]),
            "kcat -L",
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains(&want),
            "kcat -L on {addr} ({}):\n{text}\n{}\nthe daemon's log:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(data.with_extension("serve.log")).unwrap_or_default()
        );
    }
}

#[test]
fn bad_listener_configs_stop_the_daemon_in_kafkas_words() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    for (args, want) in [
        (
            vec![
                "--listeners",
                "PLAINTEXT://127.0.0.1:0,plaintext://127.0.0.1:0",
            ],
            "requirement failed: Each listener must have a different name, listeners: \
             PLAINTEXT://127.0.0.1:0,plaintext://127.0.0.1:0",
        ),
        (
            vec![
                "--listeners",
                "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
            ],
            "Error creating broker listeners from 'PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0': \
             No security protocol defined for listener INTERNAL",
        ),
        (
            vec!["--listeners", "SASL_SSL://127.0.0.1:0"],
            "listener SASL_SSL://127.0.0.1:0: set sasl.enabled.mechanisms to the mechanisms it \
             serves (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512); Kafka's default, GSSAPI, is not served \
             here",
        ),
        (
            vec![
                "--listeners",
                "PLAINTEXT://127.0.0.1:0",
                "-o",
                "advertised.listeners=OTHER://h:1",
                "-o",
                "listener.security.protocol.map=PLAINTEXT:PLAINTEXT;OTHER:PLAINTEXT",
            ],
            "requirement failed: advertised.listeners listener names must be equal to or a \
             subset of the ones defined in listeners. Found OTHER. The valid options based on \
             the current configuration are PLAINTEXT",
        ),
    ] {
        let out = run(
            Command::new(BIN).arg("serve").args(&args).arg(&data),
            "commitfs serve with a bad listener config",
        );
        assert!(!out.status.success(), "{args:?} started");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{args:?}:\n{err}");
    }
}
