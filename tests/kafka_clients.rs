//! Clients we did not write, against `commitfs serve`: kcat (Debian's, an old
//! librdkafka that checks API versions strictly), kafka-python, and
//! confluent-kafka (a recent librdkafka). A proxy between confluent-kafka and
//! the listener records the Produce requests, so the stored segment is
//! compared with the bytes the client sent.

mod kafka_support;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use commitfs::record::BatchIter;
use kafka_protocol::messages::produce_request::ProduceRequest;
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::Decodable;
use kafka_support::bounded::{run, run_with_input};
use kafka_support::{Server, data_dir, kcat, kcat_consume, python, require, run_python};

#[test]
fn kcat_lists_every_partition() {
    let Some(kcat) = require(kcat()) else { return };
    let (_tmp, data) = data_dir(&["orders-0", "orders-1", "orders-2", "audit-0"]);
    let s = Server::start(&data, &[]);
    let out = run(Command::new(&kcat).args(["-b", &s.addr, "-L"]), "kcat -L");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("1 brokers"), "{text}");
    assert!(
        text.contains("topic \"orders\" with 3 partitions"),
        "{text}"
    );
    assert!(text.contains("topic \"audit\" with 1 partitions"), "{text}");
    for p in 0..3 {
        assert!(text.contains(&format!("partition {p}, leader 0")), "{text}");
    }
}

/// Produce requests seen on the way, per `topic-partition`, in order.
type Captured = Arc<Mutex<BTreeMap<String, Vec<Bytes>>>>;

fn forward_requests(mut client: TcpStream, mut server: TcpStream, cap: &Captured) {
    loop {
        let mut size = [0u8; 4];
        if client.read_exact(&mut size).is_err() {
            return;
        }
        let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
        if client.read_exact(&mut body).is_err() {
            return;
        }
        record_produce(&body, cap);
        if server
            .write_all(&size)
            .and_then(|_| server.write_all(&body))
            .is_err()
        {
            return;
        }
    }
}

fn record_produce(body: &[u8], cap: &Captured) {
    let key = i16::from_be_bytes([body[0], body[1]]);
    let version = i16::from_be_bytes([body[2], body[3]]);
    if key != ApiKey::Produce as i16 {
        return;
    }
    let mut buf = Bytes::copy_from_slice(body);
    RequestHeader::decode(&mut buf, ApiKey::Produce.request_header_version(version)).unwrap();
    let req = ProduceRequest::decode(&mut buf, version).unwrap();
    let mut cap = cap.lock().unwrap();
    for t in req.topic_data {
        for p in t.partition_data {
            let name = format!("{}-{}", t.name.0.as_str(), p.index);
            cap.entry(name)
                .or_default()
                .push(p.records.unwrap_or_default());
        }
    }
}

/// Every batch of a partition's segments, in order.
fn stored_batches(dir: &Path) -> Vec<Vec<u8>> {
    let mut logs: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    let mut out = Vec::new();
    for log in logs {
        let bytes = std::fs::read(log).unwrap();
        for b in BatchIter::new(&bytes) {
            out.push(b.unwrap().1.bytes().to_vec());
        }
    }
    out
}

/// The bytes a broker owns masked: baseOffset and partitionLeaderEpoch.
fn masked(b: &[u8]) -> Vec<u8> {
    let mut m = b.to_vec();
    m[0..8].fill(0);
    m[12..16].fill(0);
    m
}

const PRODUCE: &str = r#"
import sys
from confluent_kafka import Producer
addr, topic, codec, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
p = Producer({'bootstrap.servers': addr, 'compression.type': codec, 'enable.idempotence': False,
              'acks': 'all', 'linger.ms': 20, 'batch.num.messages': 2000})
errors = []
def report(err, msg):
    if err is not None:
        errors.append(str(err))
for i in range(n):
    p.produce(topic, key=b'key-%d' % i, value=b'value-%d-' % i + b'x' * (i % 50),
              headers=[('seq', str(i).encode()), ('codec', codec.encode())],
              partition=0, on_delivery=report)
    if i % 1000 == 0:
        p.poll(0)
left = p.flush(60)
assert left == 0 and not errors, (left, errors[:3])
print('produced', n)
"#;

const CONSUME_CONFLUENT: &str = r#"
import sys, time
from confluent_kafka import Consumer, TopicPartition
addr, topic, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
c = Consumer({'bootstrap.servers': addr, 'group.id': 'commitfs-test', 'enable.auto.commit': False,
              'auto.offset.reset': 'earliest'})
c.assign([TopicPartition(topic, 0, 0)])
seen, deadline = 0, time.time() + 60
while seen < n and time.time() < deadline:
    m = c.poll(0.5)
    if m is None or m.error():
        continue
    i = seen
    assert m.offset() == i, (m.offset(), i)
    assert m.key() == b'key-%d' % i, m.key()
    assert m.value() == b'value-%d-' % i + b'x' * (i % 50)
    assert dict(m.headers())['seq'] == str(i).encode()
    seen += 1
c.close()
print('consumed', seen)
"#;

const CONSUME_KAFKA_PYTHON: &str = r#"
import sys
from kafka import KafkaConsumer, TopicPartition
addr, topic, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
c = KafkaConsumer(bootstrap_servers=addr, enable_auto_commit=False, consumer_timeout_ms=20000)
tp = TopicPartition(topic, 0)
c.assign([tp])
c.seek_to_beginning(tp)
seen = 0
for m in c:
    assert m.offset == seen, (m.offset, seen)
    assert m.key == b'key-%d' % seen
    assert m.value == b'value-%d-' % seen + b'x' * (seen % 50)
    assert dict(m.headers)['seq'] == str(seen).encode()
    seen += 1
    if seen == n:
        break
print('consumed', seen)
"#;

#[test]
fn confluent_kafka_batches_are_stored_as_sent_and_every_client_reads_them() {
    let Some(py) = require(python()) else { return };
    let Some(kcat) = require(kcat()) else { return };
    let codecs = ["gzip", "snappy", "lz4", "zstd"];
    let parts: Vec<String> = codecs.iter().map(|c| format!("{c}-0")).collect();
    let (_tmp, data) = data_dir(&parts.iter().map(String::as_str).collect::<Vec<_>>());
    // The proxy's port is bound first and held: the listener advertises it,
    // so every connection the client makes goes through the proxy.
    let proxy = TcpListener::bind("127.0.0.1:0").unwrap();
    let via_proxy = proxy.local_addr().unwrap().to_string();
    let advertised = format!("advertised.listeners=PLAINTEXT://{via_proxy}");
    let s = Server::start(&data, &[&advertised]);
    let captured = recording_proxy(proxy, s.addr.clone());
    let n = 10_000;
    for codec in codecs {
        let out = run_python(&py, PRODUCE, &[&via_proxy, codec, codec, &n.to_string()]);
        assert!(out.contains("produced 10000"), "{out}");
    }
    let cap = captured.lock().unwrap().clone();
    for codec in codecs {
        let part = format!("{codec}-0");
        let sent: Vec<Vec<u8>> = cap[&part]
            .iter()
            .flat_map(|r| {
                BatchIter::new(r)
                    .map(|b| b.unwrap().1.bytes().to_vec())
                    .collect::<Vec<_>>()
            })
            .collect();
        let stored = stored_batches(&data.join(&part));
        assert_eq!(sent.len(), stored.len(), "{codec}: batches sent vs stored");
        for (i, (a, b)) in sent.iter().zip(&stored).enumerate() {
            assert_eq!(
                masked(a),
                masked(b),
                "{codec}: batch {i} is not stored as sent"
            );
        }
        let codec_id = match codec {
            "gzip" => 1,
            "snappy" => 2,
            "lz4" => 3,
            _ => 4,
        };
        // librdkafka sends a batch plain when compressing it would not
        // shrink it: that happens to a batch of one small record (the
        // first one, sent alone before the linger fills the next).
        let records = |b: &Vec<u8>| i32::from_be_bytes(b[57..61].try_into().unwrap());
        for b in &stored {
            let (got, count) = (b[22] & 7, records(b));
            assert!(
                got == codec_id || (got == 0 && count == 1),
                "{codec}: a batch of {count} records with codec {got}"
            );
        }
        assert!(
            stored
                .iter()
                .filter(|b| b[22] & 7 == codec_id)
                .map(records)
                .sum::<i32>()
                >= n as i32 - 2,
            "{codec}: the records are in compressed batches"
        );
        let out = run_python(&py, CONSUME_CONFLUENT, &[&s.addr, codec, &n.to_string()]);
        assert!(
            out.contains("consumed 10000"),
            "confluent-kafka {codec}: {out}"
        );
        let out = run_python(&py, CONSUME_KAFKA_PYTHON, &[&s.addr, codec, &n.to_string()]);
        assert!(
            out.contains("consumed 10000"),
            "kafka-python {codec}: {out}"
        );
        let out = kcat_consume(
            Command::new(&kcat).args(["-b", &s.addr]),
            codec,
            &["-f", "%o %k %s\n"],
            &format!("kcat -C -t {codec}"),
        );
        let text = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines.len(),
            n,
            "kcat {codec}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            lines[9_999],
            format!("9999 key-9999 value-9999-{}", "x".repeat(9_999 % 50))
        );
    }
}

/// A TCP proxy from `listener` (the address the listener advertises) to
/// `upstream`, recording the record batches of the Produce requests it
/// forwards.
fn recording_proxy(listener: TcpListener, upstream: String) -> Captured {
    let captured: Captured = Arc::default();
    let cap = captured.clone();
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let Ok(server) = TcpStream::connect(&upstream) else {
                return;
            };
            let (mut s2, mut c2) = (server.try_clone().unwrap(), client.try_clone().unwrap());
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut s2, &mut c2);
            });
            let cap = cap.clone();
            std::thread::spawn(move || forward_requests(client, server, &cap));
        }
    });
    captured
}

#[test]
fn kcat_produces_and_consumes_lines() {
    let Some(kcat) = require(kcat()) else { return };
    let (_tmp, data) = data_dir(&["lines-0"]);
    let s = Server::start(&data, &[]);
    for codec in ["none", "gzip", "snappy", "lz4"] {
        let text: String = (0..100)
            .map(|i| format!("{codec} line {i} {}\n", "y".repeat(40)))
            .collect();
        let out = run_with_input(
            Command::new(&kcat).args(["-b", &s.addr, "-P", "-t", "lines", "-p", "0", "-z", codec]),
            &format!("kcat -P -z {codec}"),
            text.as_bytes(),
        );
        assert!(
            out.status.success(),
            "kcat -P -z {codec}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = kcat_consume(
        Command::new(&kcat).args(["-b", &s.addr]),
        "lines",
        &[],
        "kcat -C -t lines",
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.lines().count(), 400);
    assert!(
        text.lines()
            .nth(250)
            .unwrap()
            .starts_with("snappy line 50 ")
    );
    let stored = stored_batches(&data.join("lines-0"));
    assert!(
        stored.iter().any(|b| b[22] & 7 == 1),
        "old librdkafka kept gzip on"
    );
}
