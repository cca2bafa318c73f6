//! TLS on the listener (`SSL`): clients we did not write (confluent-kafka,
//! kafka-python, kcat) produce and consume through a certificate made by
//! a test CA; client certificates (`ssl.client.auth`) and the principal
//! Kafka derives from them (checked against `openssl x509 -nameopt
//! RFC2253`); bad handshakes that leave the daemon serving; and settings
//! that refuse to start with a message that says what is wrong.

mod kafka_support;
#[path = "support/test_ca.rs"]
mod test_ca;

use std::io::Write;
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use kafka_protocol::messages::ApiKey;
use kafka_protocol::messages::api_versions_request::ApiVersionsRequest;
use kafka_protocol::messages::api_versions_response::ApiVersionsResponse;
use kafka_protocol::protocol::StrBytes;
use kafka_support::bounded::{cmd_timeout, run};
use kafka_support::{
    BIN, Conn, Server, data_dir_with, decode_partition_records, kcat, kcat_consume, python,
    require, run_python,
};
use rcgen::DnType;
use test_ca::TestCa;

/// Debug lines of the network threads: the principal a handshake set.
const TLS_LOG: &str = "info,commitfs_kafka::network=debug";

fn ssl_server(data: &Path, keystore: &Path, extra: &[&str]) -> Server {
    let ks = format!("ssl.keystore.location={}", keystore.display());
    let mut opts = vec!["ssl.keystore.type=PEM", ks.as_str()];
    opts.extend_from_slice(extra);
    Server::start_on(data, "SSL://127.0.0.1:0", &opts, TLS_LOG)
}

fn api_versions(c: &mut Conn) -> ApiVersionsResponse {
    c.call(
        ApiKey::ApiVersions,
        3,
        &ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("commitfs-test"))
            .with_client_software_version(StrBytes::from_static_str("1")),
    )
}

const PRODUCE_CONFLUENT: &str = r#"
from confluent_kafka import Producer
import sys
addr, ca, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
p = Producer({"bootstrap.servers": addr, "security.protocol": "SSL", "ssl.ca.location": ca,
              "enable.idempotence": True, "linger.ms": 5})
errors = []
def done(err, msg):
    if err is not None:
        errors.append(str(err))
for i in range(n):
    p.produce("secure", value=("record-%d" % i).encode() * 40, key=str(i).encode(), callback=done)
left = p.flush(60)
assert left == 0 and not errors, (left, errors)
print("produced", n)
"#;

const CONSUME_KAFKA_PYTHON: &str = r#"
from kafka import KafkaConsumer, TopicPartition
import sys
addr, ca, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
c = KafkaConsumer(bootstrap_servers=addr, security_protocol="SSL", ssl_cafile=ca,
                  ssl_check_hostname=True, consumer_timeout_ms=30000)
tp = TopicPartition("secure", 0)
c.assign([tp])
c.seek_to_beginning(tp)
got = []
for m in c:
    got.append(m.value.decode())
    if len(got) == n:
        break
c.close()
assert got == [("record-%d" % i) * 40 for i in range(n)], got[:3]
print("consumed", len(got))
"#;

const CONSUME_CONFLUENT_WITH_CERT: &str = r#"
from confluent_kafka import Consumer, TopicPartition
import sys
addr, ca, cert, key, n = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
conf = {"bootstrap.servers": addr, "security.protocol": "SSL", "ssl.ca.location": ca,
        "group.id": "tls-readers", "enable.auto.commit": False}
if cert:
    conf["ssl.certificate.location"] = cert
    conf["ssl.key.location"] = key
c = Consumer(conf)
c.assign([TopicPartition("secure", 0, 0)])
got = 0
import time
deadline = time.time() + 60
while got < n and time.time() < deadline:
    m = c.poll(1)
    if m is None:
        continue
    assert m.error() is None, m.error()
    got += 1
c.close()
assert got == n, got
print("consumed", got)
"#;

/// The same log through TLS: confluent-kafka (idempotent) produces, the
/// segment holds the records, kafka-python reads them back, and a large
/// fetch (file bytes read and encrypted, not sent with sendfile) arrives
/// whole.
#[test]
fn clients_produce_and_consume_over_ssl() {
    let Some(py) = require(python()) else { return };
    let tmp = tempfile::tempdir().unwrap();
    let ca = TestCa::new(&tmp.path().join("ca"));
    let server_cert = ca.server("broker");
    let data = data_dir_with(tmp.path(), &["secure-0"]);
    let s = ssl_server(&data, &server_cert.keystore, &[]);
    let ca_pem = ca.ca_pem.to_str().unwrap();
    let n = 3000;
    let out = run_python(&py, PRODUCE_CONFLUENT, &[&s.addr, ca_pem, &n.to_string()]);
    assert!(out.contains("produced 3000"), "{out}");
    let out = run_python(
        &py,
        CONSUME_KAFKA_PYTHON,
        &[&s.addr, ca_pem, &n.to_string()],
    );
    assert!(out.contains("consumed 3000"), "{out}");
    drop(s);
    let records = decode_partition_records(&data.join("secure-0"));
    assert_eq!(records.len(), n);
    // (offset, key): the keys are the record numbers, in order.
    assert_eq!(records[7], (7, Some(b"7".to_vec())));
}

/// Debian's kcat (its librdkafka built with OpenSSL) through TLS.
#[test]
fn kcat_over_ssl() {
    let Some(kcat) = require(kcat()) else { return };
    let tmp = tempfile::tempdir().unwrap();
    let ca = TestCa::new(&tmp.path().join("ca"));
    let server_cert = ca.server("broker");
    let data = data_dir_with(tmp.path(), &["secure-0"]);
    let s = ssl_server(&data, &server_cert.keystore, &[]);
    let tls = |cmd: &mut Command| {
        cmd.args(["-b", &s.addr, "-X", "security.protocol=ssl", "-X"])
            .arg(format!("ssl.ca.location={}", ca.ca_pem.display()));
    };
    let mut p = Command::new(&kcat);
    tls(&mut p);
    p.args(["-P", "-t", "secure", "-p", "0"]);
    let out =
        kafka_support::bounded::run_with_input(&mut p, "kcat -P over SSL", b"one\ntwo\nthree\n");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut c = Command::new(&kcat);
    tls(&mut c);
    let out = kcat_consume(&mut c, "secure", &[], "kcat -C over SSL");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "one\ntwo\nthree\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `ssl.client.auth=required`: a client with a certificate from the
/// truststore's CA gets in, as the principal Kafka's DEFAULT mapping rule
/// gives (the subject in RFC 2253 form, which `openssl` prints too); a
/// client without one, or with one from another CA, is refused in the
/// handshake, with a log line, and the daemon goes on serving.
#[test]
fn client_certificates_are_required_and_name_the_principal() {
    let tmp = tempfile::tempdir().unwrap();
    let ca = TestCa::new(&tmp.path().join("ca"));
    let other_ca = TestCa::new(&tmp.path().join("other-ca"));
    let server_cert = ca.server("broker");
    let alice = ca.client(
        "alice",
        &[
            (DnType::CountryName, "NO"),
            (DnType::OrganizationName, "Example, Inc."),
            (DnType::OrganizationalUnitName, "streams"),
            (DnType::CommonName, "alice"),
        ],
    );
    let mallory = other_ca.client("mallory", &[(DnType::CommonName, "mallory")]);
    let data = data_dir_with(tmp.path(), &["secure-0"]);
    let truststore = format!("ssl.truststore.location={}", ca.ca_pem.display());
    let s = ssl_server(
        &data,
        &server_cert.keystore,
        &["ssl.client.auth=required", &truststore],
    );
    assert!(
        s.log()
            .contains("(SSL, SSL, TLS, client certificates required)"),
        "{}",
        s.log()
    );

    let mut c = Conn::tls(&s.addr, &ca.ca_pem, Some((&alice.cert_pem, &alice.key_pem)))
        .expect("a TLS handshake with a client certificate");
    assert_eq!(api_versions(&mut c).error_code, 0);
    let expected = openssl_subject(&alice.cert_pem);
    assert!(expected.contains("O=Example\\, Inc."), "{expected}");
    s.wait_for_log(&format!("established as User:{expected}"), 1);

    // rustls's client learns of a refused certificate only when it reads
    // the server's alert, so the refusal shows as a closed connection.
    for (who, client) in [
        ("no certificate", None),
        (
            "a certificate of another CA",
            Some((mallory.cert_pem.as_path(), mallory.key_pem.as_path())),
        ),
    ] {
        let before = s.log().matches("SSL handshake failed").count();
        if let Ok(mut c) = Conn::tls(&s.addr, &ca.ca_pem, client) {
            let frame = c.encode(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
            c.send_raw(&frame);
            assert!(c.recv_raw().is_none(), "{who}: the request was served");
        }
        let start = Instant::now();
        while s.log().matches("SSL handshake failed").count() == before {
            assert!(
                start.elapsed() < cmd_timeout(),
                "{who}: no log line:\n{}",
                s.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let mut c = Conn::tls(&s.addr, &ca.ca_pem, Some((&alice.cert_pem, &alice.key_pem))).unwrap();
    assert_eq!(
        api_versions(&mut c).error_code,
        0,
        "served after the refusals"
    );

    // confluent-kafka with and without its certificate.
    if let Some(py) = require(python()) {
        let ca_pem = ca.ca_pem.to_str().unwrap();
        let out = run_python(
            &py,
            CONSUME_CONFLUENT_WITH_CERT,
            &[
                &s.addr,
                ca_pem,
                alice.cert_pem.to_str().unwrap(),
                alice.key_pem.to_str().unwrap(),
                "0",
            ],
        );
        assert!(out.contains("consumed 0"), "{out}");
    }
}

/// `requested`: a client certificate is taken when offered, and a client
/// without one is `User:ANONYMOUS`.
#[test]
fn client_certificates_requested_are_optional() {
    let tmp = tempfile::tempdir().unwrap();
    let ca = TestCa::new(&tmp.path().join("ca"));
    let server_cert = ca.server("broker");
    let bob = ca.client("bob", &[(DnType::CommonName, "bob")]);
    let data = data_dir_with(tmp.path(), &[]);
    let truststore = format!("ssl.truststore.location={}", ca.ca_pem.display());
    let s = ssl_server(
        &data,
        &server_cert.keystore,
        &["ssl.client.auth=requested", &truststore],
    );
    let mut anon = Conn::tls(&s.addr, &ca.ca_pem, None).unwrap();
    assert_eq!(api_versions(&mut anon).error_code, 0);
    s.wait_for_log("established as User:ANONYMOUS", 1);
    let mut c = Conn::tls(&s.addr, &ca.ca_pem, Some((&bob.cert_pem, &bob.key_pem))).unwrap();
    assert_eq!(api_versions(&mut c).error_code, 0);
    s.wait_for_log("established as User:CN=bob", 1);
}

/// What `openssl x509 -subject -nameopt RFC2253` prints of a certificate:
/// the same form as Java's `X500Principal.getName()`.
fn openssl_subject(cert: &Path) -> String {
    let out = run(
        Command::new("openssl")
            .args(["x509", "-noout", "-subject", "-nameopt", "RFC2253", "-in"])
            .arg(cert),
        "openssl x509 -subject",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .trim_start_matches("subject=")
        .to_string()
}

/// A ClientHello of garbage, a Kafka request sent in plaintext to the TLS
/// port, and a handshake that stops halfway: each ends its connection with
/// a log line (the stalled one after `connections.max.idle.ms`), and the
/// daemon serves a good client after each.
#[test]
fn bad_handshakes_end_their_connection_only() {
    let tmp = tempfile::tempdir().unwrap();
    let ca = TestCa::new(&tmp.path().join("ca"));
    let server_cert = ca.server("broker");
    let data = data_dir_with(tmp.path(), &[]);
    let mut s = ssl_server(
        &data,
        &server_cert.keystore,
        &["connections.max.idle.ms=1000"],
    );
    let mut plaintext = Conn::from_stream(TcpStream::connect(&s.addr).unwrap());
    let frame = plaintext.encode(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "garbage",
            // A whole handshake record whose ClientHello is 4 bytes of junk.
            b"\x16\x03\x01\x00\x08\x01\x00\x00\x04junk".to_vec(),
        ),
        ("not TLS at all", {
            let mut f = (frame.len() as i32).to_be_bytes().to_vec();
            f.extend_from_slice(&frame);
            f
        }),
        (
            "random bytes",
            (0..4096u32)
                .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
                .collect(),
        ),
    ];
    for (what, bytes) in cases {
        let before = s.log().matches("SSL handshake failed").count();
        let mut raw = TcpStream::connect(&s.addr).unwrap();
        let _ = raw.write_all(&bytes);
        expect_alert_then_close(raw, what);
        let start = Instant::now();
        while s.log().matches("SSL handshake failed").count() == before {
            assert!(
                start.elapsed() < cmd_timeout(),
                "{what}: no log line:\n{}",
                s.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut good = Conn::tls(&s.addr, &ca.ca_pem, None).unwrap();
        assert_eq!(api_versions(&mut good).error_code, 0, "after {what}");
    }

    // Half a ClientHello, then silence: closed once idle, with a line.
    let mut stalled = TcpStream::connect(&s.addr).unwrap();
    stalled
        .write_all(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
        .unwrap();
    expect_alert_then_close(stalled, "a stalled handshake");
    s.wait_for_log(
        "its TLS handshake did not go on for connections.max.idle.ms",
        1,
    );
    let mut good = Conn::tls(&s.addr, &ca.ca_pem, None).unwrap();
    assert_eq!(api_versions(&mut good).error_code, 0);
    assert!(s.alive());
    assert!(!s.log().contains("panicked"), "{}", s.log());
}

/// Reads what the server sends until it closes: nothing, or a TLS alert
/// record (content type 21). A hang fails.
fn expect_alert_then_close(mut raw: TcpStream, what: &str) {
    use std::io::Read;
    raw.set_read_timeout(Some(kafka_support::READ_TIMEOUT))
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 256];
    loop {
        match raw.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("{what}: the server neither closed nor finished answering: {e}"),
        }
    }
    assert!(
        got.is_empty() || (got[0] == 21 && got.len() <= 64),
        "{what}: the server sent {got:?}, not an alert"
    );
}

/// Settings that cannot serve TLS stop the daemon at start, saying why.
#[test]
fn bad_tls_settings_refuse_to_start() {
    let tmp = tempfile::tempdir().unwrap();
    let ca = TestCa::new(&tmp.path().join("ca"));
    let server_cert = ca.server("broker");
    let other = ca.server("other");
    let data = data_dir_with(tmp.path(), &[]);
    let dir = tmp.path();
    let write = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    };
    let no_key = write("no-key.pem", &server_cert.cert_text);
    let no_cert = write("no-cert.pem", &server_cert.key_text);
    let mismatched = write(
        "mismatched.pem",
        &format!("{}{}", other.key_text, server_cert.cert_text),
    );
    let encrypted = write(
        "encrypted.pem",
        &format!(
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIB\n-----END ENCRYPTED PRIVATE KEY-----\n{}",
            server_cert.cert_text
        ),
    );
    let good = server_cert.keystore.display().to_string();
    let missing = dir.join("missing.pem").display().to_string();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![],
            "a TLS listener needs a key and a certificate: set ssl.keystore.location",
        ),
        (
            vec![format!("ssl.keystore.location={missing}")],
            "cannot read ssl.keystore.location",
        ),
        (
            vec![format!("ssl.keystore.location={no_key}")],
            "holds no readable private key",
        ),
        (
            vec![format!("ssl.keystore.location={no_cert}")],
            "holds no readable certificate",
        ),
        (
            vec![format!("ssl.keystore.location={mismatched}")],
            "the keystore's private key and certificate cannot serve TLS",
        ),
        (
            vec![format!("ssl.keystore.location={encrypted}")],
            "holds an encrypted private key, which is not supported",
        ),
        (
            vec![
                format!("ssl.keystore.location={good}"),
                "ssl.keystore.type=JKS".into(),
            ],
            "ssl.keystore.type=JKS is not supported: only PEM key and trust stores are read",
        ),
        (
            vec![
                format!("ssl.keystore.location={good}"),
                "ssl.client.auth=always".into(),
            ],
            "Invalid value always for configuration ssl.client.auth: String must be one of: \
             required, requested, none",
        ),
        (
            vec![
                format!("ssl.keystore.location={good}"),
                "ssl.client.auth=required".into(),
            ],
            "ssl.client.auth asks for client certificates, so it needs the certificates they \
             chain to",
        ),
        (
            vec![
                format!("ssl.keystore.location={good}"),
                "ssl.enabled.protocols=TLSv1.1".into(),
            ],
            "Invalid value TLSv1.1 for configuration ssl.enabled.protocols",
        ),
    ];
    for (opts, message) in cases {
        let mut cmd = Command::new(BIN);
        cmd.args(["serve", "--listeners", "SSL://127.0.0.1:0"]);
        for o in &opts {
            cmd.arg("-o").arg(o);
        }
        let out = run(cmd.arg(&data), "commitfs serve with bad TLS settings");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{opts:?}: it started:\n{err}");
        assert!(
            err.contains(message),
            "{opts:?}: expected {message:?} in:\n{err}"
        );
    }
}

/// Listener-prefixed settings win over plain ones, and one `-o` carries a
/// list (`ssl.enabled.protocols=TLSv1.3,TLSv1.2`).
#[test]
fn listener_prefixed_settings_and_lists() {
    let tmp = tempfile::tempdir().unwrap();
    let ca = TestCa::new(&tmp.path().join("ca"));
    let server_cert = ca.server("broker");
    let data = data_dir_with(tmp.path(), &[]);
    let good = format!(
        "listener.name.secure.ssl.keystore.location={}",
        server_cert.keystore.display()
    );
    let s = Server::start_on(
        &data,
        "SECURE://127.0.0.1:0",
        &[
            "listener.security.protocol.map=SECURE:SSL",
            "ssl.keystore.location=/nonexistent/plain-setting-is-not-read.pem",
            &good,
            "ssl.enabled.protocols=TLSv1.3,TLSv1.2",
        ],
        TLS_LOG,
    );
    let mut c = Conn::tls(&s.addr, &ca.ca_pem, None).unwrap();
    assert_eq!(api_versions(&mut c).error_code, 0);
}

/// `ssl.enabled.protocols=TLSv1.2`: a client that offers both gets TLS 1.2;
/// the default serves TLS 1.3.
#[test]
fn enabled_protocols_choose_the_version() {
    let tmp = tempfile::tempdir().unwrap();
    let ca = TestCa::new(&tmp.path().join("ca"));
    let server_cert = ca.server("broker");
    let data = data_dir_with(tmp.path(), &[]);
    for (opts, want) in [
        (
            vec!["ssl.enabled.protocols=TLSv1.2"],
            rustls::ProtocolVersion::TLSv1_2,
        ),
        (vec![], rustls::ProtocolVersion::TLSv1_3),
    ] {
        let s = ssl_server(&data, &server_cert.keystore, &opts);
        let mut c = Conn::tls(&s.addr, &ca.ca_pem, None).unwrap();
        assert_eq!(api_versions(&mut c).error_code, 0);
        let got = c.tls.as_ref().unwrap().protocol_version();
        assert_eq!(got, Some(want), "{opts:?}");
    }
}
