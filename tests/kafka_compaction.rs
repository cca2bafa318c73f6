//! A compacted topic through the listener, with clients we did not write:
//! kafka-python's AdminClient creates it, confluent-kafka and kafka-python
//! produce keyed records in rounds that each land in a segment of their
//! own, the cleaner thread (backoff 100 ms) cleans it, and consumers from
//! the beginning get the latest value of every key of the cleaned part and
//! everything of the uncleaned tail. A keyless produce gets Kafka's
//! INVALID_RECORD (87), its message and its record errors.

mod kafka_support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use commitfs::record::{NewRecord, encode_batch};
use commitfs::storage::{LogConfig, LogManager, OpenOptions};
use kafka_protocol::messages::ApiKey;
use kafka_protocol::messages::produce_response::ProduceResponse;
use kafka_support::requests::produce_request;
use kafka_support::{Conn, Server, python, require, run_python};

const ADMIN: &str = r#"
import sys
from kafka.admin import KafkaAdminClient, NewTopic, ConfigResource, ConfigResourceType
addr = sys.argv[1]
a = KafkaAdminClient(bootstrap_servers=addr)
a.create_topics([NewTopic('kv', 1, 1, topic_configs={
    'cleanup.policy': 'compact', 'segment.ms': '300',
    'min.cleanable.dirty.ratio': '0.01', 'delete.retention.ms': '0'})])
r = a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, 'kv')])
def value(name):
    # kafka-python 3: {type: {name: {key: {value...}}}}; older: a response list.
    if isinstance(r, dict):
        for names in r.values():
            for configs in names.values():
                v = configs[name]
                return v['value'] if isinstance(v, dict) else v
    return {c[0]: c[1] for c in r[0].resources[0][4]}[name]
print('policy', value('cleanup.policy'), 'ratio', value('min.cleanable.dirty.ratio'))
a.close()
"#;

/// Rounds of keyed records, each round after `segment.ms`, so each lands in
/// a segment of its own; the last round's segment is the active one.
const PRODUCE: &str = r#"
import sys, time
from confluent_kafka import Producer
addr, rounds, keys = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
p = Producer({'bootstrap.servers': addr, 'linger.ms': 0, 'enable.idempotence': True})
for r in range(rounds):
    for k in range(keys):
        p.produce('kv', key=b'k%d' % k, value=b'v%d-%d' % (r, k), partition=0)
    p.flush(30)
    time.sleep(0.4)
print('produced', rounds * keys)
"#;

const PRODUCE_KAFKA_PYTHON: &str = r#"
import sys
from kafka import KafkaProducer
addr = sys.argv[1]
p = KafkaProducer(bootstrap_servers=addr)
for k in range(0, 20, 2):
    p.send('kv', key=b'k%d' % k, value=b'last-%d' % k, partition=0).get(timeout=30)
p.send('kv', key=b'k1', value=None, partition=0).get(timeout=30)
p.flush()
print('produced 11')
"#;

const CONSUME_CONFLUENT: &str = r#"
import sys, time
from confluent_kafka import Consumer, TopicPartition
addr, end = sys.argv[1], int(sys.argv[2])
c = Consumer({'bootstrap.servers': addr, 'group.id': 'g', 'enable.auto.commit': False})
c.assign([TopicPartition('kv', 0, 0)])
deadline = time.time() + 60
while time.time() < deadline:
    m = c.poll(0.5)
    if m is None or m.error():
        continue
    v = m.value()
    print(m.offset(), m.key().decode(), '-' if v is None else v.decode())
    if m.offset() == end - 1:
        break
c.close()
"#;

const CONSUME_KAFKA_PYTHON: &str = r#"
import sys
from kafka import KafkaConsumer, TopicPartition
addr, end = sys.argv[1], int(sys.argv[2])
c = KafkaConsumer(bootstrap_servers=addr, enable_auto_commit=False, consumer_timeout_ms=20000)
tp = TopicPartition('kv', 0)
c.assign([tp])
c.seek_to_beginning(tp)
for m in c:
    print(m.offset, m.key.decode(), '-' if m.value is None else m.value.decode())
    if m.offset == end - 1:
        break
"#;

const KEYLESS: &str = r#"
import sys
from confluent_kafka import Producer, KafkaError
p = Producer({'bootstrap.servers': sys.argv[1], 'enable.idempotence': False, 'retries': 0})
got = []
p.produce('kv', value=b'no key', partition=0, on_delivery=lambda e, m: got.append(e))
p.flush(30)
print('error', got[0].code() == KafkaError.INVALID_RECORD, got[0].code())
"#;

/// (offset, key, value) lines a consumer printed.
fn lines(out: &str) -> Vec<(i64, String, Option<String>)> {
    out.lines()
        .map(|l| {
            let mut f = l.splitn(3, ' ');
            let o = f.next().unwrap().parse().unwrap();
            let k = f.next().unwrap().to_string();
            let v = f.next().unwrap();
            (o, k, (v != "-").then(|| v.to_string()))
        })
        .collect()
}

fn cleaner_checkpoint(data: &std::path::Path) -> Option<i64> {
    let text = std::fs::read_to_string(data.join("cleaner-offset-checkpoint")).ok()?;
    text.lines().nth(2)?.split_whitespace().nth(2)?.parse().ok()
}

#[test]
fn python_clients_on_a_compacted_topic() {
    let Some(py) = require(python()) else { return };
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let s = Server::start(&data, &["log.cleaner.backoff.ms=100"]);
    let out = run_python(&py, ADMIN, &[&s.addr]);
    assert_eq!(out.trim(), "policy compact ratio 0.01");
    let out = run_python(&py, PRODUCE, &[&s.addr, "3", "20"]);
    assert!(out.contains("produced 60"), "{out}");
    let out = run_python(&py, PRODUCE_KAFKA_PYTHON, &[&s.addr]);
    assert!(out.contains("produced 11"), "{out}");
    // The cleaner thread cleans up to the active segment (the kafka-python
    // round): wait, bounded, for its checkpoint to get there.
    let deadline = Instant::now() + Duration::from_secs(60);
    while cleaner_checkpoint(&data).is_none_or(|c| c < 60) {
        assert!(Instant::now() < deadline, "no pass: {}", s.log());
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        s.log().contains("cleaned log kv-0 (dirty section = [0, "),
        "{}",
        s.log()
    );
    let end = 71;
    let mut latest: BTreeMap<String, Option<String>> = BTreeMap::new();
    for k in 0..20 {
        latest.insert(format!("k{k}"), Some(format!("v2-{k}")));
    }
    for k in (0..20).step_by(2) {
        latest.insert(format!("k{k}"), Some(format!("last-{k}")));
    }
    latest.insert("k1".into(), None);
    for script in [CONSUME_CONFLUENT, CONSUME_KAFKA_PYTHON] {
        let got = lines(&run_python(&py, script, &[&s.addr, &end.to_string()]));
        let offsets: Vec<i64> = got.iter().map(|(o, _, _)| *o).collect();
        assert!(offsets.windows(2).all(|w| w[0] < w[1]), "{offsets:?}");
        assert!(
            got.len() < end as usize,
            "compaction removed records: {got:?}"
        );
        // The uncleaned tail (the kafka-python round) is whole.
        assert_eq!(
            got.iter().filter(|(o, _, _)| *o >= 60).count(),
            11,
            "{got:?}"
        );
        let mut seen: BTreeMap<String, Option<String>> = BTreeMap::new();
        for (o, k, v) in &got {
            // Below the tail, only the latest value of a key of the cleaned part.
            if *o < 60 {
                assert_eq!(
                    v.as_deref(),
                    Some(format!("v2-{}", &k[1..]).as_str()),
                    "{got:?}"
                );
            }
            seen.insert(k.clone(), v.clone());
        }
        assert_eq!(seen, latest, "{got:?}");
    }
    let out = run_python(&py, KEYLESS, &[&s.addr]);
    assert!(out.starts_with("error True"), "{out}");
}

/// The refusal on the wire, decoded by kafka-protocol: Kafka's code, its
/// message, one record error per keyless record with its index, and
/// nothing appended.
#[test]
fn a_keyless_produce_to_a_compacted_topic_is_invalid_record() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mgr = LogManager::open(&data, LogConfig::default(), OpenOptions::default()).unwrap();
    let t = mgr.create_partition("kv-0").unwrap();
    t.set_config("cleanup.policy", "compact").unwrap();
    drop(t);
    mgr.close().unwrap();
    let s = Server::start(&data, &[]);
    let mut batch = Vec::new();
    let recs = [
        NewRecord::keyed(b"a", b"1"),
        NewRecord::value(b"no key"),
        NewRecord::value(b"none either"),
    ];
    encode_batch(&mut batch, 0, 1_700_000_000_000, &recs);
    let req = produce_request("kv", 0, Bytes::from(batch));
    let r: ProduceResponse = Conn::new(&s.addr).call(ApiKey::Produce, 9, &req);
    let p = &r.responses[0].partition_responses[0];
    assert_eq!(p.error_code, 87, "INVALID_RECORD");
    let one = "Compacted topic cannot accept message without key in topic partition kv-0";
    assert_eq!(
        p.error_message.as_deref(),
        Some(
            format!(
                "One or more records have been rejected due to 2 record errors in total, and only showing the first three errors at most: [RecordError(batchIndex=1, message='{one}'), RecordError(batchIndex=2, message='{one}')]"
            )
            .as_str()
        )
    );
    let errors: Vec<(i32, Option<&str>)> = p
        .record_errors
        .iter()
        .map(|e| (e.batch_index, e.batch_index_error_message.as_deref()))
        .collect();
    assert_eq!(errors, vec![(1, Some(one)), (2, Some(one))]);
    let decoded = kafka_support::decode_partition(&data.join("kv-0"));
    assert!(decoded.is_empty(), "nothing appended: {decoded:?}");
}

const COMMIT: &str = r#"
import sys, time
from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata
addr, n = sys.argv[1], int(sys.argv[2])
c = KafkaConsumer(bootstrap_servers=addr, group_id='billing', enable_auto_commit=False)
tp = TopicPartition('orders', 0)
c.assign([tp])
for i in range(1, n + 1):
    c.commit({tp: OffsetAndMetadata(i, '', -1)})
    if i % 10 == 0:
        time.sleep(0.4)
c.close()
print('committed', n)
"#;

const COMMITTED: &str = r#"
import sys
from kafka import KafkaConsumer, TopicPartition
c = KafkaConsumer(bootstrap_servers=sys.argv[1], group_id='billing', enable_auto_commit=False)
print('committed', c.committed(TopicPartition('orders', 0)))
c.close()
"#;

/// `__consumer_offsets` is compacted as Kafka makes it: after a pass it
/// holds the latest commit of the group's partition (and the tail), and a
/// restarted coordinator loads that commit.
#[test]
fn consumer_offsets_are_compacted_and_loaded_back() {
    let Some(py) = require(python()) else { return };
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mgr = LogManager::open(&data, LogConfig::default(), OpenOptions::default()).unwrap();
    mgr.create_partition("orders-0").unwrap();
    mgr.close().unwrap();
    let opts = [
        "log.cleaner.backoff.ms=100",
        "log.cleaner.min.cleanable.ratio=0.01",
        "segment.ms=300",
    ];
    let mut s = Server::start(&data, &opts);
    let out = run_python(&py, COMMIT, &[&s.addr, "50"]);
    assert!(out.contains("committed 50"), "{out}");
    let part = data.join("__consumer_offsets-0");
    let props = std::fs::read_to_string(part.join("commitfs.properties")).unwrap();
    assert!(props.contains("cleanup.policy=compact"), "{props}");
    // Every commit is a record of the same key: once a pass went over the
    // sealed segments, one commit is left of them (below the cleaner's
    // checkpoint), the latest; the commits of the tail stay as they are.
    let commits = || -> Vec<i64> {
        kafka_support::decode_partition_records(&part)
            .into_iter()
            .filter(|(_, k)| k.as_deref().is_some_and(|k| k.starts_with(&[0, 1])))
            .map(|(o, _)| o)
            .collect()
    };
    let cleaned = |cp: i64, offsets: &[i64]| offsets.iter().filter(|o| **o < cp).count();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let cp = cleaner_checkpoint(&data);
        let offsets = commits();
        if cp.is_some_and(|cp| cleaned(cp, &offsets) == 1) && offsets.len() < 50 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no pass left one commit below the checkpoint {cp:?}: {offsets:?}\n{}",
            s.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(s.stop(), "a clean stop");
    // Stopped: the checkpoint and the segments no longer move.
    let cp = cleaner_checkpoint(&data).unwrap();
    let offsets = commits();
    assert_eq!(
        cleaned(cp, &offsets),
        1,
        "one commit left below the checkpoint {cp}: {offsets:?}"
    );
    assert!(offsets.len() < 50, "{offsets:?}");
    let s = Server::start(&data, &opts);
    let out = run_python(&py, COMMITTED, &[&s.addr]);
    assert_eq!(out.trim(), "committed 50");
}
