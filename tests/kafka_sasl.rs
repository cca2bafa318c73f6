//! SASL on the listener (`SASL_PLAINTEXT`, `SASL_SSL`) with PLAIN,
//! SCRAM-SHA-256 and SCRAM-SHA-512: clients we did not write
//! (confluent-kafka, kafka-python, kcat) authenticate, produce and consume,
//! with a first user from `--add-scram` and the others created through
//! AdminClient's `alter_user_scram_credentials`; and bad exchanges over the
//! raw protocol (requests before authentication, an unknown mechanism, out
//! of order, a wrong nonce, a replayed final message, an oversize token,
//! a thousand wrong passwords), each ending its connection with a log
//! line, the daemon serving, and no password in its log.

mod kafka_support;
#[path = "support/test_ca.rs"]
mod test_ca;

use std::io::Write;
use std::path::Path;
use std::process::Command;

use base64::Engine;
use bytes::Bytes;
use hmac::{Hmac, Mac};
use kafka_protocol::messages::api_versions_request::ApiVersionsRequest;
use kafka_protocol::messages::api_versions_response::ApiVersionsResponse;
use kafka_protocol::messages::metadata_request::MetadataRequest;
use kafka_protocol::messages::sasl_authenticate_request::SaslAuthenticateRequest;
use kafka_protocol::messages::sasl_authenticate_response::SaslAuthenticateResponse;
use kafka_protocol::messages::sasl_handshake_request::SaslHandshakeRequest;
use kafka_protocol::messages::sasl_handshake_response::SaslHandshakeResponse;
use kafka_protocol::messages::{ApiKey, ResponseHeader};
use kafka_protocol::protocol::{Decodable, StrBytes};
use kafka_support::bounded::{run, run_with_input};
use kafka_support::{
    Conn, Server, data_dir_with, decode_partition_records, kcat, python, require, run_python,
};
use sha2::{Digest, Sha256};
use test_ca::TestCa;

const ALICE_PASSWORD: &str = "alice-Secret-7fq2";
const BOB_PASSWORD: &str = "bob-Secret-k2m9";
const CAROL_PASSWORD: &str = "carol-Secret-x81z";
const WRONG_PASSWORD: &str = "wrong-Guess-0000";

/// `commitfs serve` with `listeners` and alice made by `--add-scram`.
fn sasl_server(data: &Path, listeners: &str, opts: &[&str]) -> Server {
    let alice = format!("SCRAM-SHA-256=[name=alice,password={ALICE_PASSWORD}]");
    let alice512 = format!("SCRAM-SHA-512=[name=alice,password={ALICE_PASSWORD}]");
    Server::start_with_args(
        data,
        listeners,
        opts,
        "info",
        &["--add-scram", &alice, "--add-scram", &alice512],
    )
}

fn invalid_credentials(mech: &str) -> String {
    format!(
        "Authentication failed during authentication due to invalid credentials with SASL \
         mechanism {mech}"
    )
}

fn assert_no_secret_in_log(s: &Server) {
    let log = s.log();
    for secret in [ALICE_PASSWORD, BOB_PASSWORD, CAROL_PASSWORD, WRONG_PASSWORD] {
        assert!(!log.contains(secret), "the log holds a password:\n{log}");
    }
}

const CREATE_USERS: &str = r#"
from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
    UserScramCredentialUpsertion)
import sys
addr, user, password = sys.argv[1], sys.argv[2], sys.argv[3]
a = AdminClient({"bootstrap.servers": addr, "security.protocol": "SASL_PLAINTEXT",
                 "sasl.mechanisms": "SCRAM-SHA-256", "sasl.username": user, "sasl.password": password})
ups = []
for spec in sys.argv[4:]:
    name, mech, pw = spec.split(":")
    ups.append(UserScramCredentialUpsertion(name, ScramCredentialInfo(getattr(ScramMechanism, mech), 4096), pw.encode()))
for name, f in a.alter_user_scram_credentials(ups).items():
    f.result(timeout=60)
    print("created", name)
"#;

const PRODUCE_CONSUME_CONFLUENT: &str = r#"
from confluent_kafka import Producer, Consumer, TopicPartition
import sys, time
addr, protocol, mech, user, password, ca, topic, n = sys.argv[1:9]
n = int(n)
conf = {"bootstrap.servers": addr, "security.protocol": protocol, "sasl.mechanisms": mech,
        "sasl.username": user, "sasl.password": password}
if ca:
    conf["ssl.ca.location"] = ca
p = Producer(dict(conf, **{"enable.idempotence": True}))
for i in range(n):
    p.produce(topic, value=("%s-%d" % (mech, i)).encode(), key=str(i).encode())
assert p.flush(60) == 0
c = Consumer(dict(conf, **{"group.id": "readers-" + mech, "auto.offset.reset": "earliest"}))
c.subscribe([topic])
got = []
deadline = time.time() + 90
while len(got) < n and time.time() < deadline:
    m = c.poll(1)
    if m is None:
        continue
    assert m.error() is None, m.error()
    got.append(m.value().decode())
c.close()
assert got == ["%s-%d" % (mech, i) for i in range(n)], got[:5]
print("ok", mech, len(got))
"#;

const CONSUME_KAFKA_PYTHON: &str = r#"
from kafka import KafkaConsumer, TopicPartition
import sys
addr, protocol, mech, user, password, ca, topic, n = sys.argv[1:9]
kw = dict(bootstrap_servers=addr, security_protocol=protocol, sasl_mechanism=mech,
          sasl_plain_username=user, sasl_plain_password=password, consumer_timeout_ms=30000)
if ca:
    kw["ssl_cafile"] = ca
c = KafkaConsumer(**kw)
tp = TopicPartition(topic, 0)
c.assign([tp])
c.seek_to_beginning(tp)
got = 0
for m in c:
    got += 1
    if got == int(n):
        break
c.close()
print("consumed", got)
"#;

const WRONG_PASSWORD_CONFLUENT: &str = r#"
from confluent_kafka import Producer
import sys
addr, mech, user, password = sys.argv[1:5]
errors = []
p = Producer({"bootstrap.servers": addr, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": mech,
              "sasl.username": user, "sasl.password": password,
              "error_cb": lambda e: errors.append(e)})
p.poll(0)
import time
deadline = time.time() + 60
while not errors and time.time() < deadline:
    p.poll(0.2)
assert errors, "no error"
print("error", errors[0].name(), errors[0].str())
"#;

/// SASL_PLAINTEXT with each mechanism through confluent-kafka: alice (from
/// `--add-scram`) creates bob and carol with AdminClient; each produces
/// (idempotent) and consumes in a group; kafka-python reads too; a wrong
/// password gets Kafka's SASL_AUTHENTICATION_FAILED text; no password
/// reaches the log.
#[test]
fn clients_authenticate_with_each_mechanism() {
    let Some(py) = require(python()) else { return };
    let tmp = tempfile::tempdir().unwrap();
    let data = data_dir_with(tmp.path(), &["plain-0", "scram256-0", "scram512-0"]);
    let s = sasl_server(
        &data,
        "SASL_PLAINTEXT://127.0.0.1:0",
        &["sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"],
    );
    assert!(
        s.log()
            .contains("(SASL_PLAINTEXT, SASL_PLAINTEXT, SASL PLAIN SCRAM-SHA-256 SCRAM-SHA-512)"),
        "{}",
        s.log()
    );
    let bob = format!("bob:SCRAM_SHA_512:{BOB_PASSWORD}");
    let carol = format!("carol:SCRAM_SHA_256:{CAROL_PASSWORD}");
    let out = run_python(
        &py,
        CREATE_USERS,
        &[&s.addr, "alice", ALICE_PASSWORD, &bob, &carol],
    );
    assert!(
        out.contains("created bob") && out.contains("created carol"),
        "{out}"
    );
    for (mech, user, password, topic) in [
        ("PLAIN", "carol", CAROL_PASSWORD, "plain"),
        ("SCRAM-SHA-256", "carol", CAROL_PASSWORD, "scram256"),
        ("SCRAM-SHA-512", "bob", BOB_PASSWORD, "scram512"),
    ] {
        let args = [
            &s.addr,
            "SASL_PLAINTEXT",
            mech,
            user,
            password,
            "",
            topic,
            "50",
        ];
        let out = run_python(&py, PRODUCE_CONSUME_CONFLUENT, &args);
        assert!(out.contains(&format!("ok {mech} 50")), "{out}");
        s.wait_for_log(&format!("authenticated as User:{user} with SASL"), 1);
        let out = run_python(&py, CONSUME_KAFKA_PYTHON, &args);
        assert!(out.contains("consumed 50"), "{mech}: {out}");
    }
    // kcat's librdkafka (2.0 on Debian) sends its own nonce again before
    // the server's in the final SCRAM message; Kafka takes it, and so must
    // this listener.
    if let Some(kcat) = require(kcat()) {
        for (mech, user, password) in [
            ("SCRAM-SHA-256", "carol", CAROL_PASSWORD),
            ("SCRAM-SHA-512", "bob", BOB_PASSWORD),
        ] {
            let out = run(
                Command::new(&kcat)
                    .args(["-b", &s.addr, "-X", "security.protocol=SASL_PLAINTEXT"])
                    .arg("-X")
                    .arg(format!("sasl.mechanisms={mech}"))
                    .arg("-X")
                    .arg(format!("sasl.username={user}"))
                    .arg("-X")
                    .arg(format!("sasl.password={password}"))
                    .args(["-L", "-t", "scram512"]),
                "kcat -L over SASL_PLAINTEXT",
            );
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success() && text.contains("topic \"scram512\" with 1 partitions"),
                "kcat with {mech}:\n{text}\n{}\n{}",
                String::from_utf8_lossy(&out.stderr),
                s.log()
            );
        }
    }
    // Kafka's texts: PlainSaslServer's own, and SaslServerAuthenticator's
    // for a SCRAM failure (which says nothing of the user).
    for (mech, text) in [
        (
            "PLAIN",
            "Authentication failed: Invalid username or password".to_string(),
        ),
        ("SCRAM-SHA-256", invalid_credentials("SCRAM-SHA-256")),
        ("SCRAM-SHA-512", invalid_credentials("SCRAM-SHA-512")),
    ] {
        let out = run_python(
            &py,
            WRONG_PASSWORD_CONFLUENT,
            &[&s.addr, mech, "bob", WRONG_PASSWORD],
        );
        assert!(out.contains("error _AUTHENTICATION"), "{mech}: {out}");
        assert!(out.contains(&text), "{mech}: {out}");
    }
    let log = s.wait_for_log("failed authentication with", 3);
    assert!(log.contains("user \"bob\" failed to authenticate"), "{log}");
    drop(s);
    let s2 = Server::start_on(&data, "PLAINTEXT://127.0.0.1:0", &[], "info");
    assert_no_secret_in_log(&s2);
    drop(s2);
    assert_eq!(decode_partition_records(&data.join("scram512-0")).len(), 50);
}

/// SASL_SSL: TLS and SCRAM-SHA-512 (confluent-kafka, kafka-python) and
/// PLAIN (kcat) through a test CA.
#[test]
fn sasl_ssl_with_confluent_kafka_kafka_python_and_kcat() {
    let tmp = tempfile::tempdir().unwrap();
    let ca = TestCa::new(&tmp.path().join("ca"));
    let cert = ca.server("broker");
    let data = data_dir_with(tmp.path(), &["secure-0", "kcat-0"]);
    let ks = format!("ssl.keystore.location={}", cert.keystore.display());
    let s = sasl_server(
        &data,
        "SASL_SSL://127.0.0.1:0",
        &["sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512", &ks],
    );
    let ca_pem = ca.ca_pem.to_str().unwrap();
    if let Some(py) = require(python()) {
        let args = [
            &s.addr,
            "SASL_SSL",
            "SCRAM-SHA-512",
            "alice",
            ALICE_PASSWORD,
            ca_pem,
            "secure",
            "100",
        ];
        let out = run_python(&py, PRODUCE_CONSUME_CONFLUENT, &args);
        assert!(out.contains("ok SCRAM-SHA-512 100"), "{out}");
        let out = run_python(&py, CONSUME_KAFKA_PYTHON, &args);
        assert!(out.contains("consumed 100"), "{out}");
    }
    if let Some(kcat) = require(kcat()) {
        let sasl = |cmd: &mut Command| {
            cmd.args([
                "-b",
                &s.addr,
                "-X",
                "security.protocol=SASL_SSL",
                "-X",
                "sasl.mechanisms=PLAIN",
            ])
            .args(["-X", "sasl.username=alice", "-X"])
            .arg(format!("sasl.password={ALICE_PASSWORD}"))
            .arg("-X")
            .arg(format!("ssl.ca.location={ca_pem}"));
        };
        let mut p = Command::new(&kcat);
        sasl(&mut p);
        p.args(["-P", "-t", "kcat", "-p", "0"]);
        let out = run_with_input(&mut p, "kcat -P over SASL_SSL", b"a\nb\n");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut c = Command::new(&kcat);
        sasl(&mut c);
        c.args(["-C", "-t", "kcat", "-p", "0", "-o", "beginning", "-e", "-q"]);
        let out = run(&mut c, "kcat -C over SASL_SSL");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "a\nb\n",
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_no_secret_in_log(&s);
}

// ---- the raw protocol ----

fn handshake(c: &mut Conn, mechanism: &str) -> SaslHandshakeResponse {
    c.call(
        ApiKey::SaslHandshake,
        1,
        &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_string(mechanism.into())),
    )
}

fn authenticate(c: &mut Conn, token: &[u8]) -> Option<SaslAuthenticateResponse> {
    let frame = c.encode(
        ApiKey::SaslAuthenticate,
        2,
        &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::copy_from_slice(token)),
    );
    c.send_raw(&frame);
    let mut resp = c.recv_raw()?;
    ResponseHeader::decode(
        &mut resp,
        ApiKey::SaslAuthenticate.response_header_version(2),
    )
    .unwrap();
    Some(SaslAuthenticateResponse::decode(&mut resp, 2).unwrap())
}

/// A SCRAM-SHA-256 client (RFC 5802), written here with RustCrypto.
struct Scram {
    client_nonce: String,
    salted: Vec<u8>,
    auth_message: String,
}

fn hmac(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut m = Hmac::<Sha256>::new_from_slice(key).unwrap();
    m.update(data);
    m.finalize().into_bytes().to_vec()
}

fn b64(b: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(b)
}

impl Scram {
    fn first(user: &str, nonce: &str) -> (Scram, String) {
        let bare = format!("n={user},r={nonce}");
        (
            Scram {
                client_nonce: nonce.to_string(),
                salted: Vec::new(),
                auth_message: bare.clone(),
            },
            format!("n,,{bare}"),
        )
    }

    /// The client-final message for `password`, after `server_first`;
    /// `nonce` overrides the combined nonce (to send a wrong one).
    fn last(&mut self, server_first: &str, password: &str, nonce: Option<&str>) -> String {
        let field = |k: &str| {
            server_first
                .split(',')
                .find_map(|f| f.strip_prefix(&format!("{k}=")))
                .unwrap()
                .to_string()
        };
        let (r, s, i) = (field("r"), field("s"), field("i"));
        assert!(r.starts_with(&self.client_nonce));
        let salt = base64::engine::general_purpose::STANDARD.decode(s).unwrap();
        let mut salted = [0u8; 32];
        pbkdf2::pbkdf2_hmac::<Sha256>(password.as_bytes(), &salt, i.parse().unwrap(), &mut salted);
        self.salted = salted.to_vec();
        let without_proof = format!("c=biws,r={}", nonce.unwrap_or(&r));
        self.auth_message = format!("{},{server_first},{without_proof}", self.auth_message);
        let client_key = hmac(&self.salted, b"Client Key");
        let stored = Sha256::digest(&client_key);
        let signature = hmac(&stored, self.auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(a, b)| a ^ b)
            .collect();
        format!("{without_proof},p={}", b64(&proof))
    }
}

/// A connection through ApiVersions and SaslHandshake v1 for `mechanism`.
fn start_exchange(addr: &str, mechanism: &str) -> Conn {
    let mut c = Conn::new(addr);
    let v: ApiVersionsResponse = c.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    assert_eq!(v.error_code, 0);
    let h = handshake(&mut c, mechanism);
    assert_eq!(h.error_code, 0);
    c
}

/// A whole SCRAM-SHA-256 exchange as `user`: the server's answers.
fn scram_login(
    addr: &str,
    user: &str,
    password: &str,
    nonce: &str,
) -> (Conn, SaslAuthenticateResponse) {
    let mut c = start_exchange(addr, "SCRAM-SHA-256");
    let (mut scram, first) = Scram::first(user, nonce);
    let r = authenticate(&mut c, first.as_bytes()).expect("server-first");
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    let last = scram.last(std::str::from_utf8(&r.auth_bytes).unwrap(), password, None);
    let r = authenticate(&mut c, last.as_bytes()).expect("server-final or failure");
    (c, r)
}

fn metadata_works(c: &mut Conn) {
    let m: kafka_protocol::messages::metadata_response::MetadataResponse =
        c.call(ApiKey::Metadata, 12, &MetadataRequest::default());
    assert!(m.brokers.len() == 1);
}

/// Requests before authentication, an unknown mechanism, a token before
/// the handshake, a wrong nonce, a replayed final message, an oversize
/// token: each connection ends (answered as Kafka answers, or closed), a
/// line is logged, and a good login still works.
#[test]
fn bad_exchanges_end_their_connection_only() {
    let tmp = tempfile::tempdir().unwrap();
    let data = data_dir_with(tmp.path(), &["t-0"]);
    let mut s = sasl_server(
        &data,
        "SASL_PLAINTEXT://127.0.0.1:0",
        &["sasl.enabled.mechanisms=SCRAM-SHA-256"],
    );
    let addr = s.addr.clone();
    let failures = |s: &Server| s.log().matches("failed authentication with").count();

    // Metadata before authenticating: closed, nothing served.
    let mut c = Conn::new(&addr);
    let frame = c.encode(ApiKey::Metadata, 12, &MetadataRequest::default());
    c.send_raw(&frame);
    c.expect_closed("Metadata before authentication");
    s.wait_for_log(
        "Unexpected Kafka request of type Metadata during SASL handshake.",
        1,
    );

    // An unknown mechanism: UNSUPPORTED_SASL_MECHANISM (33) and the list.
    let mut c = Conn::new(&addr);
    let h = handshake(&mut c, "GSSAPI");
    assert_eq!(h.error_code, 33);
    assert_eq!(
        h.mechanisms,
        vec![StrBytes::from_static_str("SCRAM-SHA-256")]
    );
    c.expect_closed("an unknown mechanism");

    // A SaslAuthenticate before the handshake.
    let mut c = Conn::new(&addr);
    let frame = c.encode(
        ApiKey::SaslAuthenticate,
        2,
        &SaslAuthenticateRequest::default(),
    );
    c.send_raw(&frame);
    c.expect_closed("SaslAuthenticate before SaslHandshake");
    s.wait_for_log(
        "Unexpected Kafka request of type SaslAuthenticate during SASL handshake.",
        1,
    );

    // A wrong nonce in the final message.
    let before = failures(&s);
    let mut c = start_exchange(&addr, "SCRAM-SHA-256");
    let (mut scram, first) = Scram::first("alice", "clientnonce1");
    let r = authenticate(&mut c, first.as_bytes()).unwrap();
    let last = scram.last(
        std::str::from_utf8(&r.auth_bytes).unwrap(),
        ALICE_PASSWORD,
        Some("clientnonce1-not-the-servers"),
    );
    let r = authenticate(&mut c, last.as_bytes()).expect("an answer");
    assert_eq!(r.error_code, 58, "SASL_AUTHENTICATION_FAILED");
    c.expect_closed("a wrong nonce");
    assert!(failures(&s) > before);

    // A good login; then its final message replayed on a new connection.
    let mut c = start_exchange(&addr, "SCRAM-SHA-256");
    let (mut scram, first) = Scram::first("alice", "clientnonce2");
    let r = authenticate(&mut c, first.as_bytes()).unwrap();
    let last = scram.last(
        std::str::from_utf8(&r.auth_bytes).unwrap(),
        ALICE_PASSWORD,
        None,
    );
    let r = authenticate(&mut c, last.as_bytes()).unwrap();
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    assert!(
        std::str::from_utf8(&r.auth_bytes)
            .unwrap()
            .starts_with("v=")
    );
    metadata_works(&mut c);
    // After authentication, SaslAuthenticate is ILLEGAL_SASL_STATE (34).
    let again = authenticate(&mut c, last.as_bytes()).unwrap();
    assert_eq!(again.error_code, 34);
    let mut replay = start_exchange(&addr, "SCRAM-SHA-256");
    let _ = authenticate(&mut replay, first.as_bytes()).unwrap();
    let r = authenticate(&mut replay, last.as_bytes()).expect("an answer");
    assert_eq!(r.error_code, 58, "a replayed final message");
    replay.expect_closed("a replayed final message");

    // An oversize token (Kafka reads at most 524288 bytes before authentication).
    let mut c = start_exchange(&addr, "SCRAM-SHA-256");
    let mut frame = (600_000i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&[b'x'; 4096]);
    let _ = c.stream.write_all(&frame);
    c.expect_closed("an oversize token");
    s.wait_for_log("Failing SASL authentication due to invalid receive size", 1);

    assert!(s.alive());
    let (mut c, r) = scram_login(&addr, "alice", ALICE_PASSWORD, "clientnonce3");
    assert_eq!(r.error_code, 0);
    metadata_works(&mut c);
    assert_no_secret_in_log(&s);
}

/// The resident set size of a process, in kB.
fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// A thousand wrong passwords in a row, on as many connections: each
/// refused with Kafka's answer and a line naming the user; meanwhile an
/// authenticated connection is served (it waits for no failed one); the
/// daemon's memory does not grow with them; the password is never logged.
#[test]
fn a_thousand_wrong_passwords() {
    let tmp = tempfile::tempdir().unwrap();
    let data = data_dir_with(tmp.path(), &["t-0"]);
    let s = sasl_server(
        &data,
        "SASL_PLAINTEXT://127.0.0.1:0",
        &["sasl.enabled.mechanisms=SCRAM-SHA-256"],
    );
    let addr = s.addr.clone();
    let (mut good, r) = scram_login(&addr, "alice", ALICE_PASSWORD, "goodnonce");
    assert_eq!(r.error_code, 0);
    let mut rss_after_100 = 0;
    for i in 0..1000 {
        let (c, r) = scram_login(&addr, "alice", WRONG_PASSWORD, &format!("n{i}"));
        assert_eq!(r.error_code, 58, "attempt {i}");
        let _ = c.stream.shutdown(std::net::Shutdown::Both);
        if i % 100 == 0 {
            // The authenticated connection is served between failures.
            metadata_works(&mut good);
        }
        if i == 100 {
            rss_after_100 = rss_kb(s.pid());
        }
    }
    // One line per refusal, but for the daemon's rate limit on repeats
    // (a burst per call site and window, then a count).
    s.wait_for_log("user \"alice\" failed to authenticate", 10);
    let rss_after_1000 = rss_kb(s.pid());
    assert!(
        rss_after_1000 < rss_after_100 + 8 * 1024,
        "memory grew with failed logins: {rss_after_100} kB after 100, {rss_after_1000} kB after 1000"
    );
    metadata_works(&mut good);
    let (mut c, r) = scram_login(&addr, "alice", ALICE_PASSWORD, "after");
    assert_eq!(r.error_code, 0);
    metadata_works(&mut c);
    assert_no_secret_in_log(&s);
}

/// Settings a SASL listener cannot serve stop the daemon at start.
#[test]
fn bad_sasl_settings_refuse_to_start() {
    let tmp = tempfile::tempdir().unwrap();
    let data = data_dir_with(tmp.path(), &[]);
    for (opts, message) in [
        (
            vec![],
            "set sasl.enabled.mechanisms to the mechanisms it serves (PLAIN, SCRAM-SHA-256, \
             SCRAM-SHA-512); Kafka's default, GSSAPI, is not served here",
        ),
        (
            vec!["sasl.enabled.mechanisms=GSSAPI"],
            "sasl.enabled.mechanisms names GSSAPI, which is not served",
        ),
        (
            vec![
                "sasl.enabled.mechanisms=PLAIN",
                "connection.failed.authentication.delay.ms=-1",
            ],
            "Invalid value -1 for configuration connection.failed.authentication.delay.ms: Value \
             must be at least 0",
        ),
    ] {
        let mut cmd = Command::new(kafka_support::BIN);
        cmd.args(["serve", "--listeners", "SASL_PLAINTEXT://127.0.0.1:0"]);
        for o in &opts {
            cmd.arg("-o").arg(o);
        }
        let out = run(cmd.arg(&data), "commitfs serve with bad SASL settings");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{opts:?}: it started:\n{err}");
        assert!(
            err.contains(message),
            "{opts:?}: expected {message:?} in:\n{err}"
        );
    }
    let out = run(
        Command::new(kafka_support::BIN)
            .args(["serve", "--listeners", "SASL_PLAINTEXT://127.0.0.1:0"])
            .args([
                "-o",
                "sasl.enabled.mechanisms=PLAIN",
                "--add-scram",
                "SCRAM-SHA-256=[name=x]",
            ])
            .arg(&data),
        "commitfs serve --add-scram without a password",
    );
    assert!(!out.status.success());
}

/// SaslHandshake v0 (Kafka 0.10's clients): the tokens then come bare,
/// size-prefixed with no request header, and so do the answers; a wrong
/// password closes the connection without one.
#[test]
fn handshake_v0_takes_bare_tokens() {
    let tmp = tempfile::tempdir().unwrap();
    let data = data_dir_with(tmp.path(), &["t-0"]);
    let s = sasl_server(
        &data,
        "SASL_PLAINTEXT://127.0.0.1:0",
        &["sasl.enabled.mechanisms=PLAIN"],
    );
    let v0 = |c: &mut Conn| {
        let h: SaslHandshakeResponse = c.call(
            ApiKey::SaslHandshake,
            0,
            &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN")),
        );
        assert_eq!(h.error_code, 0);
    };
    let mut c = Conn::new(&s.addr);
    v0(&mut c);
    c.send_raw(format!("\0alice\0{ALICE_PASSWORD}").as_bytes());
    let answer = c.recv_raw().expect("an answer to the token");
    assert!(answer.is_empty(), "PLAIN's server sends no token back");
    metadata_works(&mut c);
    s.wait_for_log("authenticated as User:alice with SASL", 1);

    let mut c = Conn::new(&s.addr);
    v0(&mut c);
    c.send_raw(format!("\0alice\0{WRONG_PASSWORD}").as_bytes());
    c.expect_closed("a wrong password after SaslHandshake v0");
    s.wait_for_log("user \"alice\" failed to authenticate", 1);
    assert_no_secret_in_log(&s);
}

/// `connection.failed.authentication.delay.ms`: a wrong PLAIN password gets
/// Kafka's SASL_AUTHENTICATION_FAILED, and its connection is closed no
/// sooner than the delay after the token was sent (the lower bound the
/// setting promises); with 0 it is closed with no wait, and never left open.
#[test]
fn a_failed_login_is_closed_after_the_configured_delay() {
    let tmp = tempfile::tempdir().unwrap();
    let data = data_dir_with(tmp.path(), &["t-0"]);
    for delay_ms in [1500u64, 0] {
        let delay = format!("connection.failed.authentication.delay.ms={delay_ms}");
        let mut s = sasl_server(
            &data,
            "SASL_PLAINTEXT://127.0.0.1:0",
            &["sasl.enabled.mechanisms=PLAIN", &delay],
        );
        let mut c = start_exchange(&s.addr, "PLAIN");
        let sent = std::time::Instant::now();
        let r = authenticate(&mut c, format!("\0alice\0{WRONG_PASSWORD}").as_bytes())
            .expect("an answer to a wrong password");
        assert_eq!(r.error_code, 58, "SASL_AUTHENTICATION_FAILED");
        // PlainSaslServer's message.
        assert_eq!(
            r.error_message.as_deref(),
            Some("Authentication failed: Invalid username or password")
        );
        c.expect_closed("a failed login");
        let waited = sent.elapsed();
        assert!(
            waited >= std::time::Duration::from_millis(delay_ms),
            "closed {waited:?} after the token, before the {delay_ms} ms delay"
        );
        // A good login on a connection of its own is served meanwhile and after.
        let mut c = start_exchange(&s.addr, "PLAIN");
        let r = authenticate(&mut c, format!("\0alice\0{ALICE_PASSWORD}").as_bytes())
            .expect("an answer to the right password");
        assert_eq!(r.error_code, 0);
        metadata_works(&mut c);
        s.stop();
        assert_no_secret_in_log(&s);
    }
}
