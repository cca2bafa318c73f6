//! The mount and the Kafka listener in one daemon, over the same partitions:
//! shell writes read by kcat, kafka-python and confluent-kafka; Kafka
//! produces read with cat and getfattr; the tree's roll, retention and
//! delete-records seen through ListOffsets and Fetch, and the reverse; a
//! read-only mount's listener; Kafka producers and shell appends to one
//! partition at once.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::kafka_support;
use crate::kafka_support::bounded::{cmd_timeout, finish, finish_within, spawn};
use crate::kafka_support::{
    Conn, kcat, kcat_consume, listener_addr, python, require, run_python, spawn_python,
};
use bytes::Bytes;
use commitfs::record::NewRecord;
use commitfs::storage::{LogConfig, LogManager, OpenOptions};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreateTopicsRequest};
use kafka_protocol::messages::create_topics_response::CreateTopicsResponse;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsRequest, DeleteRecordsTopic,
};
use kafka_protocol::messages::delete_records_response::DeleteRecordsResponse;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchRequest, FetchTopic};
use kafka_protocol::messages::fetch_response::FetchResponse;
use kafka_protocol::messages::list_offsets_request::{
    ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic,
};
use kafka_protocol::messages::list_offsets_response::ListOffsetsResponse;
use kafka_protocol::messages::produce_request::{
    PartitionProduceData, ProduceRequest, TopicProduceData,
};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, ProduceResponse};
use kafka_protocol::messages::{ApiKey, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::harness::{Mount, fuse_or_skip, wait_for};

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

/// The services a daemon logged it runs (`Daemon services: ...`), waited
/// for: the line comes once the listener is up, which the caller saw.
fn daemon_services(log: impl Fn() -> String) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = log();
        let line = text.lines().find_map(|l| l.split_once("Daemon services: "));
        if let Some((_, services)) = line {
            return services.to_string();
        }
        assert!(Instant::now() < deadline, "no services line:\n{text}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `serve` and `mount` are one daemon: whichever face, the same services
/// start (the storage with its timed jobs, the listener), and both stop
/// cleanly.
#[test]
fn serve_and_mount_run_the_same_services() {
    if !fuse_or_skip() {
        return;
    }
    let opts = ["log.retention.check.interval.ms=1000"];
    let (mut m, _) = mount_with_listener(&opts);
    let tmp = tempfile::tempdir().unwrap();
    let mut served = kafka_support::Server::start(&tmp.path().join("data"), &opts);
    let mounted = daemon_services(|| m.log());
    assert_eq!(daemon_services(|| served.log()), mounted);
    for job in [
        "kafka-log-retention",
        "kafka-log-flusher",
        "kafka-log-cleaner-thread-0",
    ] {
        assert!(mounted.contains(job), "{job} is not in {mounted}");
    }
    assert!(mounted.ends_with("kafka-listener"), "{mounted}");
    assert!(served.stop(), "serve stops cleanly:\n{}", served.log());
    m.unmount_clean();
    assert!(tmp.path().join("data/.kafka_cleanshutdown").exists());
    assert!(m.data.join(".kafka_cleanshutdown").exists());
}

/// A mount with a listener on a port of its own (port 0, the port taken
/// from the daemon's log line); returns it and the address.
pub fn mount_with_listener(extra: &[&str]) -> (Mount, String) {
    let mut opts = vec!["listeners=PLAINTEXT://127.0.0.1:0"];
    opts.extend_from_slice(extra);
    // Parked fetches are logged, for the long-poll test to see one.
    let m = Mount::with(&opts, None, &[("RUST_LOG", kafka_support::PARK_LOG)]);
    let addr = bound_listener(&m);
    (m, addr)
}

/// The venv's Python and a mount with a listener and an empty `t-0`; `None`
/// when the test skips.
fn python_and_t0() -> Option<(PathBuf, Mount, String)> {
    if !fuse_or_skip() {
        return None;
    }
    let py = require(python())?;
    let (m, addr) = mount_with_listener(&[]);
    m.ok("mkdir t-0");
    Some((py, m, addr))
}

/// The listener address a mount's daemon logged: it binds before it
/// mounts, so the line is there once the mount is live.
pub fn bound_listener(m: &Mount) -> String {
    listener_addr(&m.log()).unwrap_or_else(|| panic!("the daemon logged no listener:\n{}", m.log()))
}

fn offset_at(c: &mut Conn, t: &str, ts: i64) -> (i16, i64) {
    let req = ListOffsetsRequest::default().with_topics(vec![
        ListOffsetsTopic::default()
            .with_name(name(t))
            .with_partitions(vec![ListOffsetsPartition::default().with_timestamp(ts)]),
    ]);
    let r: ListOffsetsResponse = c.call(ApiKey::ListOffsets, 7, &req);
    let p = &r.topics[0].partitions[0];
    (p.error_code, p.offset)
}

fn fetch_at(c: &mut Conn, t: &str, offset: i64) -> (i16, usize) {
    let req = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(name(t))
                .with_partitions(vec![
                    FetchPartition::default()
                        .with_fetch_offset(offset)
                        .with_partition_max_bytes(1 << 20),
                ]),
        ]);
    let r: FetchResponse = c.call(ApiKey::Fetch, 12, &req);
    let p = &r.responses[0].partitions[0];
    (p.error_code, p.records.as_ref().map_or(0, |r| r.len()))
}

/// Produce v9 (acks 1) of one record to partition 0 of `t`: the
/// partition's answer.
fn produce_one(c: &mut Conn, value: &[u8]) -> PartitionProduceResponse {
    let mut batch = Vec::new();
    commitfs::record::encode_batch(&mut batch, 0, 1, &[NewRecord::value(value)]);
    let produce = ProduceRequest::default().with_acks(1).with_topic_data(vec![
        TopicProduceData::default()
            .with_name(name("t"))
            .with_partition_data(vec![
                PartitionProduceData::default().with_records(Some(Bytes::from(batch))),
            ]),
    ]);
    let r: ProduceResponse = c.call(ApiKey::Produce, 9, &produce);
    r.responses[0].partition_responses[0].clone()
}

/// CreateTopics v7 of `t` with `partitions` partitions, replication 1: its
/// code.
fn create_topic(c: &mut Conn, t: &str, partitions: i32) -> i16 {
    let create = CreateTopicsRequest::default().with_topics(vec![
        CreatableTopic::default()
            .with_name(name(t))
            .with_num_partitions(partitions)
            .with_replication_factor(1),
    ]);
    let r: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 7, &create);
    r.topics[0].error_code
}

const KAFKA_PYTHON_READ: &str = r#"
import sys
from kafka import KafkaConsumer, TopicPartition
c = KafkaConsumer(bootstrap_servers=sys.argv[1], enable_auto_commit=False, consumer_timeout_ms=15000)
tp = TopicPartition(sys.argv[2], 0)
c.assign([tp]); c.seek_to_beginning(tp)
for m in c:
    print(m.offset, m.value.decode())
    if m.offset + 1 == int(sys.argv[3]):
        break
"#;

const CONFLUENT_READ: &str = r#"
import sys, time
from confluent_kafka import Consumer, TopicPartition
c = Consumer({'bootstrap.servers': sys.argv[1], 'group.id': 'g', 'enable.auto.commit': False})
c.assign([TopicPartition(sys.argv[2], 0, 0)])
n, deadline = int(sys.argv[3]), time.time() + 30
while n > 0 and time.time() < deadline:
    m = c.poll(0.5)
    if m is None or m.error():
        continue
    print(m.offset(), m.value().decode())
    n -= 1
c.close()
"#;

#[test]
fn shell_appends_reach_every_kafka_client() {
    if !fuse_or_skip() {
        return;
    }
    let Some(kcat) = require(kcat()) else { return };
    let Some(py) = require(python()) else { return };
    let (m, addr) = mount_with_listener(&[]);
    m.ok("mkdir t-0");
    // /usr/bin/printf writes both lines at once: one batch of two records.
    m.ok("/usr/bin/printf 'a\\nb\\n' >> t-0/log");
    let out = kcat_consume(
        Command::new(&kcat).args(["-b", &addr]),
        "t",
        &["-f", "%o %s\\n"],
        "kcat -C -o beginning",
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "0 a\n1 b\n");
    assert_eq!(
        run_python(&py, KAFKA_PYTHON_READ, &[&addr, "t", "2"]),
        "0 a\n1 b\n"
    );
    assert_eq!(
        run_python(&py, CONFLUENT_READ, &[&addr, "t", "2"]),
        "0 a\n1 b\n"
    );

    // A consumer at the end gets a later shell append: the append wakes
    // its fetch. The fetch is seen parked in the daemon before the append
    // (so kcat already asked from offset 2), and it may wait 240 s, past
    // the 120 s kcat is given: kcat printing the record at all is the
    // wake-up, and a fetch left to expire fails the test.
    let parked_before = kafka_support::parked_fetches(&m.log());
    let waiting = spawn(
        Command::new(&kcat)
            .args([
                "-b", &addr, "-C", "-t", "t", "-p", "0", "-o", "end", "-c", "1", "-q",
            ])
            .args([
                "-X",
                "fetch.wait.max.ms=240000",
                "-X",
                "socket.timeout.ms=300000",
            ])
            .args(["-f", "%o %s\\n"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
        "kcat -C -o end",
    );
    kafka_support::wait_for_parked_fetch(|| m.log(), parked_before, "kcat -o end");
    m.ok("echo c >> t-0/log");
    let out = finish_within(
        waiting,
        "kcat -o end, waiting for the append to wake its fetch",
        Duration::from_secs(120),
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "2 c\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

const PRODUCE: &str = r#"
import sys
from confluent_kafka import Producer
addr, topic, codec, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
p = Producer({'bootstrap.servers': addr, 'compression.type': codec, 'enable.idempotence': False, 'linger.ms': 20})
for i in range(n):
    p.produce(topic, key=b'key-%d' % i, value=b'%s-value-%d' % (codec.encode(), i),
              headers=[('seq', str(i).encode())], partition=0)
    if i % 1000 == 0:
        p.poll(0)
assert p.flush(60) == 0
"#;

#[test]
fn kafka_produces_read_with_cat_and_getfattr() {
    if !fuse_or_skip() {
        return;
    }
    let Some(py) = require(python()) else { return };
    let (m, addr) = mount_with_listener(&[]);
    let n = 10_000;
    for codec in ["gzip", "snappy", "lz4", "zstd"] {
        let p = format!("{codec}-0");
        m.ok(&format!("mkdir {p}"));
        run_python(&py, PRODUCE, &[&addr, codec, codec, &n.to_string()]);
        assert_eq!(m.status(&p, "log_end_offset"), n as i64);
        for i in (0..n).step_by(997).chain([n - 1]) {
            assert_eq!(
                m.ok(&format!("cat {p}/offset/{i}")),
                format!("{codec}-value-{i}")
            );
            let attr = |a: &str| {
                m.ok(&format!(
                    "getfattr --only-values -n user.kafka.{a} {p}/offset/{i}"
                ))
            };
            assert_eq!(attr("key"), format!("key-{i}"));
            assert_eq!(attr("header.seq"), i.to_string());
        }
        let stream = m.ok(&format!("cat {p}/log"));
        let want: String = (0..n).map(|i| format!("{codec}-value-{i}\n")).collect();
        assert!(
            stream == want,
            "{codec}: cat log does not stream the produced values"
        );
        let dump = m.ok(&format!(
            "{} dump {p}/00000000000000000000.log",
            kafka_support::BIN
        ));
        assert!(dump.contains(&format!("compresscodec: {codec}")), "{dump}");
    }
}

#[test]
fn tree_and_listener_see_each_others_changes() {
    if !fuse_or_skip() {
        return;
    }
    let (m, addr) = mount_with_listener(&["log.retention.check.interval.ms=100"]);
    let mut c = Conn::new(&addr);
    m.ok("mkdir t-0");
    for i in 0..5 {
        m.ok(&format!(
            "/usr/bin/printf 'x{i}\\ny{i}\\n' >> t-0/log && echo 1 > t-0/roll"
        ));
    }
    assert_eq!(offset_at(&mut c, "t", -1), (0, 10));
    // The tree's delete-records, seen by ListOffsets and Fetch.
    m.ok("echo 3 > t-0/delete-records");
    assert_eq!(offset_at(&mut c, "t", -2), (0, 3));
    assert_eq!(
        fetch_at(&mut c, "t", 0).0,
        1,
        "OFFSET_OUT_OF_RANGE below the log start"
    );
    assert!(fetch_at(&mut c, "t", 3).1 > 0);
    // Kafka's DeleteRecords, seen by the tree.
    let req = DeleteRecordsRequest::default().with_topics(vec![
        DeleteRecordsTopic::default()
            .with_name(name("t"))
            .with_partitions(vec![DeleteRecordsPartition::default().with_offset(6)]),
    ]);
    let r: DeleteRecordsResponse = c.call(ApiKey::DeleteRecords, 2, &req);
    assert_eq!(r.topics[0].partitions[0].low_watermark, 6);
    assert_eq!(m.status("t-0", "log_start_offset"), 6);
    m.fails("cat t-0/offset/5", "No such file");
    // Retention by the tree's config: everything but the active segment goes.
    m.ok("echo 0 > t-0/config/retention.bytes");
    wait_for("retention", Duration::from_secs(30), || {
        offset_at(&mut c, "t", -2).1 == 10
    });
    assert_eq!(fetch_at(&mut c, "t", 10), (0, 0));
    // A Kafka produce, then CreateTopics: both seen in the tree.
    assert_eq!(produce_one(&mut c, b"from kafka").base_offset, 10);
    assert_eq!(m.ok("cat t-0/offset/10"), "from kafka");
    assert_eq!(create_topic(&mut c, "k", 2), 0);
    assert_eq!(m.ok("ls -d k-*"), "k-0\nk-1\n");
    m.fails("rmdir k-0", "Invalid argument");
    m.fails("mkdir k-3", "Invalid argument");
    m.ok("rmdir k-1 && rmdir k-0");
}

#[test]
fn a_read_only_mount_serves_kafka_reads_only() {
    if !fuse_or_skip() {
        return;
    }
    let Some(kcat) = require(kcat()) else { return };
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mgr = LogManager::open(&data, LogConfig::default(), OpenOptions::default()).unwrap();
    let log = mgr.create_partition("t-0").unwrap();
    log.append(&[NewRecord::value(b"one"), NewRecord::value(b"two")])
        .unwrap();
    drop(log);
    mgr.close().unwrap();
    let before = kafka_support::snapshot(&data);
    let mut m = Mount::with(
        &["ro", "listeners=PLAINTEXT://127.0.0.1:0"],
        Some(&data),
        &[],
    );
    let addr = bound_listener(&m);
    let out = kcat_consume(
        Command::new(&kcat).args(["-b", &addr]),
        "t",
        &[],
        "kcat -C of a read-only mount",
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "one\ntwo\n");
    let mut c = Conn::new(&addr);
    assert_eq!(offset_at(&mut c, "t", -1), (0, 2));
    assert_eq!(produce_one(&mut c, b"three").error_code, 29);
    assert_eq!(create_topic(&mut c, "n", 1), 29);
    assert!(m.log().contains("refused with TopicAuthorizationFailed"));
    m.unmount_clean();
    assert_eq!(kafka_support::snapshot(&data), before);
}

#[test]
fn the_coordinators_records_decode_in_the_tree() {
    use crate::kafka_support::requests::standalone_commit;
    if !fuse_or_skip() {
        return;
    }
    let (m, addr) = mount_with_listener(&[]);
    m.ok("mkdir t-0");
    m.ok("echo a >> t-0/log");
    // A commit of a group without members (generation -1), as assign() users make.
    let code = standalone_commit(&mut Conn::new(&addr), "g", "t", 1, Some("m"));
    assert_eq!(code, 0);
    // The internal topic is in the tree, and its record reads decoded.
    assert_eq!(m.ok("ls -d __consumer_offsets-*"), "__consumer_offsets-0\n");
    let decoded =
        m.ok("getfattr --only-values -n user.kafka.decoded __consumer_offsets-0/offset/0");
    assert!(
        decoded.starts_with(
            r#"key: {"type":"1","data":{"group":"g","topic":"t","partition":0}} payload: {"version":"3","data":{"offset":1,"leaderEpoch":-1,"metadata":"m","commitTimestamp":"#
        ),
        "{decoded}"
    );
}

/// Produces `<name>-0`, `<name>-1`, ... to partition 0 of `t` until the
/// stop file exists, idempotently with acks=all; each delivery is written
/// to `<name>.acks` as `offset value`; exits 0 once every record is
/// acknowledged.
const PRODUCE_UNTIL_STOPPED: &str = r#"
import sys, os
from confluent_kafka import Producer
addr, name, work = sys.argv[1], sys.argv[2], sys.argv[3]
p = Producer({'bootstrap.servers': addr, 'enable.idempotence': True, 'acks': 'all',
              'linger.ms': 5, 'batch.num.messages': 50})
acks = open(os.path.join(work, name + '.acks'), 'w')
errors = []
def report(err, msg):
    if err is None:
        acks.write('%d %s\n' % (msg.offset(), msg.value().decode()))
        acks.flush()
    else:
        errors.append(str(err))
i = 0
while not os.path.exists(os.path.join(work, 'stop')):
    try:
        p.produce('t', value=('%s-%d' % (name, i)).encode(), partition=0, on_delivery=report)
        i += 1
    except BufferError:
        pass
    p.poll(0.001 if i % 20 == 0 else 0)
assert p.flush(60) == 0 and not errors, errors[:3]
"#;

/// Kafka producers and shell appends to one partition at the same time:
/// the partition's `.log` files, read by kafka-protocol's decoder, hold
/// every shell write as one batch of its lines, every produced record once
/// at the offset its producer was told, and no batch mixing two writers.
#[test]
fn producers_and_shell_appends_never_interleave_within_a_batch() {
    let Some((py, m, addr)) = python_and_t0() else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let producers: Vec<_> = ["k0", "k1"]
        .iter()
        .map(|name| {
            spawn_python(
                &py,
                PRODUCE_UNTIL_STOPPED,
                &[&addr, name, work.path().to_str().unwrap()],
                "a confluent-kafka producer",
            )
        })
        .collect();
    let acks = |name: &str| -> Vec<(i64, String)> {
        std::fs::read_to_string(work.path().join(format!("{name}.acks")))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| {
                let (o, v) = l.split_once(' ')?;
                Some((o.parse().ok()?, v.to_string()))
            })
            .collect()
    };
    // The shell writes start once both producers are producing, and they
    // produce until the shell is done: the two overlap.
    wait_for("the producers starting", cmd_timeout(), || {
        acks("k0").len() >= 100 && acks("k1").len() >= 100
    });
    const WRITES: usize = 200;
    let writers: Vec<_> = ["s0", "s1"]
        .iter()
        .map(|w| {
            let script = format!(
                "i=0; while [ $i -lt {WRITES} ]; do \
                 /usr/bin/printf '{w}-%d-0\\n{w}-%d-1\\n{w}-%d-2\\n' $i $i $i >> t-0/log || exit 1; \
                 i=$((i+1)); done"
            );
            spawn(
                Command::new("sh")
                    .arg("-c")
                    .arg(script)
                    .current_dir(&m.mnt)
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped()),
                "a shell writer",
            )
        })
        .collect();
    for w in writers {
        let out = finish(w, "a shell writer appending to t-0/log");
        assert!(out.status.success(), "{out:?}\n{}", m.log());
    }
    std::fs::write(work.path().join("stop"), "").unwrap();
    for p in producers {
        let out = finish(p, "a confluent-kafka producer");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    let batches = kafka_support::decode_partition(&m.data.join("t-0"));
    let source = |v: &str| v.split('-').next().unwrap().to_string();
    let mut by_source: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    let mut switches = 0;
    let mut last_source = String::new();
    for b in &batches {
        let values: Vec<String> = b
            .records
            .iter()
            .map(|(_, v)| String::from_utf8(v.clone().expect("a value")).unwrap())
            .collect();
        let src = source(&values[0]);
        assert!(
            values.iter().all(|v| source(v) == src),
            "a batch at offset {} mixes writers: {values:?}",
            b.base_offset
        );
        if src.starts_with('s') {
            // One write(2), one batch, all its lines.
            let i = values[0].split('-').nth(1).unwrap();
            let want: Vec<String> = (0..3).map(|j| format!("{src}-{i}-{j}")).collect();
            assert_eq!(values, want, "a shell write's batch at {}", b.base_offset);
            assert_eq!(b.producer_id, -1, "a shell batch carries no producer id");
        } else {
            assert!(b.producer_id >= 0, "an idempotent producer's batch");
        }
        switches += usize::from(src != last_source);
        last_source = src.clone();
        by_source.entry(src).or_default().extend(values);
    }
    // Every shell write once, in its writer's order.
    for w in ["s0", "s1"] {
        let want: Vec<String> = (0..WRITES)
            .flat_map(|i| (0..3).map(move |j| format!("{w}-{i}-{j}")))
            .collect();
        assert!(
            by_source[w] == want,
            "{w}'s writes are not all there once, in order"
        );
    }
    // Every produced record once, in order, where its producer was told.
    let offsets: std::collections::BTreeMap<i64, String> = batches
        .iter()
        .flat_map(|b| b.records.iter())
        .map(|(o, v)| (*o, String::from_utf8(v.clone().unwrap()).unwrap()))
        .collect();
    for k in ["k0", "k1"] {
        let acked = acks(k);
        let want: Vec<String> = (0..acked.len()).map(|i| format!("{k}-{i}")).collect();
        assert!(
            by_source[k] == want,
            "{k}'s records are not all there once, in order"
        );
        for (o, v) in &acked {
            assert_eq!(offsets.get(o), Some(v), "{k}: acknowledged at {o}");
        }
    }
    assert!(
        switches > 4,
        "the writers did not overlap ({switches} switches between writers)"
    );
}

/// A transactional confluent-kafka producer: a transaction of two records,
/// flushed and left open until the test says so (the file `commit` in the
/// signal directory), then committed; then one of one record, aborted.
const TXN_OPEN_THEN_COMMIT: &str = r#"
import os, sys, time
from confluent_kafka import Producer
addr, signals = sys.argv[1], sys.argv[2]
def mark(name):
    open(os.path.join(signals, name), 'w').close()
def wait_for(name):
    end = time.time() + 120
    while not os.path.exists(os.path.join(signals, name)):
        if time.time() > end:
            sys.exit('the test never wrote ' + name)
        time.sleep(0.05)
p = Producer({'bootstrap.servers': addr, 'transactional.id': 'committed-view'})
p.init_transactions(60)
p.begin_transaction()
p.produce('t', b'txn-a1', partition=0)
p.produce('t', b'txn-a2', partition=0)
assert p.flush(60) == 0
mark('open')
wait_for('commit')
p.commit_transaction(60)
p.begin_transaction()
p.produce('t', b'txn-b1', partition=0)
assert p.flush(60) == 0
p.abort_transaction(60)
"#;

/// `committed` is the log as a `read_committed` consumer reads it: an open
/// transaction's records, and everything after them, wait for its commit
/// (a shell append lands in `log` at once, and in `committed` when the
/// transaction before it ends, as in a read_committed consumer); `tail -f
/// committed` prints them then; an aborted transaction's never show.
#[test]
fn committed_shows_a_transaction_when_it_commits() {
    use crate::consumer::tail_f;
    let Some((py, m, addr)) = python_and_t0() else {
        return;
    };
    m.ok("echo plain-1 >> t-0/log");
    assert_eq!(m.ok("stat -c %a t-0/committed").trim(), "444");
    m.fails("echo x >> t-0/committed", "Permission denied");

    let (tail, rx) = tail_f("+1", &m.mnt.join("t-0/committed"));
    // A bound only for a tail that never sees the growth.
    let next = |what: &str| -> String {
        rx.recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("tail -f committed printed nothing for {what} in 60 s"))
            .0
    };
    assert_eq!(next("the first line"), "plain-1");

    let signals = tempfile::tempdir().unwrap();
    let producer = spawn_python(
        &py,
        TXN_OPEN_THEN_COMMIT,
        &[&addr, signals.path().to_str().unwrap()],
        "the transactional producer",
    );
    let open = signals.path().join("open");
    wait_for(
        "the producer flushing its open transaction",
        Duration::from_secs(120),
        || open.exists(),
    );
    m.ok("echo plain-2 >> t-0/log");
    assert_eq!(m.ok("cat t-0/log"), "plain-1\ntxn-a1\ntxn-a2\nplain-2\n");
    assert_eq!(m.ok("cat t-0/committed"), "plain-1\n");
    assert_eq!(m.ok("stat -c %s t-0/committed").trim(), "8");
    let status = m.ok("cat t-0/status");
    assert!(
        status.contains("last_stable_offset: 1\n"),
        "an open transaction from offset 1:\n{status}"
    );

    std::fs::write(signals.path().join("commit"), b"").unwrap();
    let out = finish_within(
        producer,
        "the transactional producer",
        Duration::from_secs(180),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for want in ["txn-a1", "txn-a2", "plain-2"] {
        assert_eq!(next(want), want);
    }
    // Offsets: plain-1 0, txn-a1 1, txn-a2 2, plain-2 3, COMMIT 4,
    // txn-b1 5, ABORT 6.
    assert_eq!(
        m.ok("cat t-0/log"),
        "plain-1\ntxn-a1\ntxn-a2\nplain-2\ntxn-b1\n"
    );
    assert_eq!(
        m.ok("cat t-0/committed"),
        "plain-1\ntxn-a1\ntxn-a2\nplain-2\n"
    );
    assert_eq!(
        m.ok("getfattr --only-values -n user.kafka.transaction t-0/offset/5"),
        "aborted"
    );
    // Lines after the aborted transaction show at once.
    m.ok("echo plain-3 >> t-0/log");
    assert_eq!(next("plain-3"), "plain-3");
    drop(tail);
}
