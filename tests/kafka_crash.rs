//! `commitfs serve` killed with SIGKILL under a producer we did not write
//! (confluent-kafka, plain: no idempotence, acks=all): after a restart
//! (recovery), every record the producer was told is written is in the
//! partition at the offset it was told, read by kafka-protocol's decoder
//! from the segment files, and by kcat through the restarted listener.

mod kafka_support;

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use commitfs::storage::{LogConfig, LogManager, OpenOptions};
use kafka_support::bounded::{cmd_timeout, spawn};
use kafka_support::{Server, decode_partition, kcat, kcat_consume, python, require};

/// Produces `v0`, `v1`, ... to partition 0 until killed; each delivery the
/// broker acknowledged is appended to the acks file as `offset value`, one
/// write per line, before the next poll.
const PRODUCER: &str = r#"
import sys, os
from confluent_kafka import Producer
addr, topic, acks_path = sys.argv[1], sys.argv[2], sys.argv[3]
p = Producer({'bootstrap.servers': addr, 'enable.idempotence': False, 'acks': 'all',
              'linger.ms': 2, 'batch.num.messages': 100, 'message.timeout.ms': 30000})
fd = os.open(acks_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
def report(err, msg):
    if err is None:
        os.write(fd, b'%d %s\n' % (msg.offset(), msg.value()))
i = 0
while True:
    try:
        p.produce(topic, value=b'v%d' % i, partition=0, on_delivery=report)
        i += 1
    except BufferError:
        p.poll(0.05)
    p.poll(0)
"#;

/// The acknowledged `(offset, value)` pairs written so far (a line the kill
/// cut short is not one).
fn acked(path: &std::path::Path) -> Vec<(i64, Vec<u8>)> {
    let text = std::fs::read(path).unwrap_or_default();
    let whole = text
        .iter()
        .rposition(|b| *b == b'\n')
        .map_or(&text[..0], |i| &text[..=i]);
    whole
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| {
            let l = std::str::from_utf8(l).expect("utf-8 ack line");
            let (o, v) = l.split_once(' ').expect("`offset value`");
            (o.parse().expect("offset"), v.as_bytes().to_vec())
        })
        .collect()
}

#[test]
fn every_acknowledged_record_survives_a_kill9_of_the_listener() {
    let Some(py) = require(python()) else { return };
    let Some(kcat) = require(kcat()) else { return };
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mgr = LogManager::open(&data, LogConfig::default(), OpenOptions::default()).unwrap();
    mgr.create_partition("t-0").unwrap();
    mgr.close().unwrap();
    // Small segments, so that the kill can land around a roll too.
    let mut s = Server::start(&data, &["segment.bytes=1048576"]);
    let acks = tmp.path().join("acks");
    let mut producer = spawn(
        Command::new(&py)
            .arg("-c")
            .arg(PRODUCER)
            .args([s.addr.as_str(), "t"])
            .arg(&acks)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
        "the confluent-kafka producer",
    );
    // The kill lands while the producer is sending: at least 20,000
    // records acknowledged, and more still coming.
    let start = Instant::now();
    while acked(&acks).len() < 20_000 {
        assert!(producer.running(), "the producer exited:\n{}", s.log());
        assert!(
            start.elapsed() < cmd_timeout(),
            "the producer got {} acknowledgements in {:?}",
            acked(&acks).len(),
            cmd_timeout()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    s.kill();
    // The producer goes too, so the acknowledgements are all in the file.
    producer.kill();
    let acked = acked(&acks);

    // The restart recovers the log (no clean-shutdown marker).
    let mut s = Server::start(&data, &["segment.bytes=1048576"]);
    let log = s.log();
    let second_run = &log[log
        .find("Kafka listener on")
        .expect("the first run listened")..];
    assert!(
        second_run.contains("no clean shutdown file was found"),
        "the restart recovered:\n{second_run}"
    );
    // kcat reads through the restarted listener at least every record the
    // producer was told is written.
    let out = kcat_consume(
        Command::new(&kcat).args(["-b", &s.addr]),
        "t",
        &["-f", "%o %s\\n"],
        "kcat -C after the restart",
    );
    let read: BTreeMap<i64, Vec<u8>> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let (o, v) = l.split_once(' ').expect("`offset value`");
            (o.parse().unwrap(), v.as_bytes().to_vec())
        })
        .collect();
    assert!(s.stop(), "a clean stop:\n{}", s.log());

    // The segment files, by kafka-protocol's decoder.
    let decoded: BTreeMap<i64, Vec<u8>> = decode_partition(&data.join("t-0"))
        .into_iter()
        .flat_map(|b| b.records)
        .map(|(o, v)| (o, v.expect("a value")))
        .collect();
    assert_eq!(read, decoded, "kcat and the decoder read the same log");
    for (o, v) in &acked {
        assert_eq!(
            decoded.get(o),
            Some(v),
            "acknowledged offset {o} ({}) is not in the log as acknowledged",
            String::from_utf8_lossy(v)
        );
    }
    // Nothing is there that the producer did not send.
    for v in decoded.values() {
        assert!(
            v.starts_with(b"v")
                && std::str::from_utf8(&v[1..]).is_ok_and(|n| n.parse::<u64>().is_ok()),
            "a value nobody sent: {v:?}"
        );
    }
    println!(
        "kill -9 under acks=all: {} acknowledged, {} in the log after recovery",
        acked.len(),
        decoded.len()
    );
}
