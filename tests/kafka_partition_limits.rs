//! How many partitions a hostile client can make, in raw frames built with
//! `kafka-protocol`, one `commitfs serve` per test:
//! - one CreateTopics or CreatePartitions makes at most 10,000 partitions
//!   (Kafka's `ReplicationControlManager.MAX_PARTITIONS_PER_BATCH`, its
//!   `POLICY_VIOLATION` and message), and a refused request makes none;
//! - `max.broker.partitions` caps them all, auto-created topics included;
//! - a creation that fails half way leaves no partition behind.
//!
//! After each: the daemon is alive, the partitions are exactly the ones
//! asked for that fit (the data directory listed), the record written
//! before is intact, and `commitfs check` is clean. The disk a partition
//! costs is measured on a tmpfs in `mount-tests/partition_disk.rs`.

mod kafka_support;

use std::path::{Path, PathBuf};
use std::process::Command;

use commitfs::record::NewRecord;
use commitfs::storage::{LogConfig, LogManager, OpenOptions};
use kafka_protocol::messages::ApiKey;
use kafka_protocol::messages::metadata_request::{MetadataRequest, MetadataRequestTopic};
use kafka_protocol::messages::metadata_response::MetadataResponse;
use kafka_support::requests::{
    creatable as topic, create_partitions as grow, create_topics as create, subdirs as partitions,
    topic_name,
};
use kafka_support::{BIN, Conn, Server, bounded, decode_partition};

const POLICY_VIOLATION: i16 = 44;
const EXCESSIVE: &str = "Excessively large number of partitions per request.";

fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

/// A data directory with topic `t` holding one record, made through
/// storage before the daemon starts.
fn data_dir() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mgr = LogManager::open(&data, LogConfig::default(), OpenOptions::default()).unwrap();
    let t = mgr.create_partition("t-0").unwrap();
    t.append(&[NewRecord::value(b"first")]).unwrap();
    mgr.close().unwrap();
    (tmp, data)
}

/// The daemon is up, `t`'s record intact, and after a clean stop the data
/// directory checks clean.
fn finish(mut server: Server, data: &Path) {
    assert!(server.alive(), "the daemon is alive");
    let t: Vec<_> = decode_partition(&data.join("t-0"))
        .into_iter()
        .flat_map(|b| b.records)
        .collect();
    assert_eq!(t, [(0, Some(b"first".to_vec()))]);
    assert!(server.stop(), "a clean stop");
    let out = bounded::run(Command::new(BIN).arg("check").arg(data), "commitfs check");
    assert!(
        out.status.success(),
        "commitfs check:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn one_request_makes_at_most_ten_thousand_partitions() {
    let (_tmp, data) = data_dir();
    let server = Server::start(&data, &[]);
    let mut c = Conn::new(&server.addr);
    let refused = |n: usize| vec![(POLICY_VIOLATION, Some(EXCESSIVE.to_string())); n];
    // Kafka's validateTotalNumberOfPartitions: the sum over the request,
    // every topic refused, validate-only too.
    assert_eq!(create(&mut c, vec![topic("a", 10_001)], false), refused(1));
    assert_eq!(create(&mut c, vec![topic("a", i32::MAX)], true), refused(1));
    let two = vec![topic("a", 5_000), topic("b", 5_001), topic("c", 1)];
    assert_eq!(create(&mut c, two, false), refused(3));
    // CreatePartitions: the same bound on the partitions one request adds.
    assert_eq!(grow(&mut c, &[("t", i32::MAX)], false), refused(1));
    assert_eq!(grow(&mut c, &[("t", 10_002)], false), refused(1));
    assert_eq!(partitions(&data), ["t-0"], "nothing was made");
    // At the bound (one topic grows, the request is counted whole).
    assert_eq!(grow(&mut c, &[("t", 3)], false), [(0, None)]);
    assert_eq!(partitions(&data), names("t", 3));
    finish(server, &data);
}

#[test]
fn max_broker_partitions_caps_every_way_of_making_one() {
    let (_tmp, data) = data_dir();
    let opts = [
        "max.broker.partitions=12",
        "auto.create.topics.enable=true",
        "num.partitions=3",
    ];
    let server = Server::start(&data, &opts);
    let mut c = Conn::new(&server.addr);
    let limit = |new: usize, held: usize| {
        (
            POLICY_VIOLATION,
            Some(format!(
                "creating {new} partition(s) would make {} on this broker, more than \
                 max.broker.partitions (12)",
                held + new
            )),
        )
    };
    assert_eq!(create(&mut c, vec![topic("a", 8)], false)[0].0, 0);
    assert_eq!(create(&mut c, vec![topic("b", 4)], true), [limit(4, 9)]);
    assert_eq!(create(&mut c, vec![topic("b", 4)], false), [limit(4, 9)]);
    assert_eq!(grow(&mut c, &[("a", 12)], false), [limit(4, 9)]);
    assert!(!data.join("b-0").exists() && !data.join("a-8").exists());
    // Auto-creation (3 partitions a topic) takes the last room, then stops.
    let req = MetadataRequest::default()
        .with_topics(Some(
            ["x", "y"]
                .iter()
                .map(|t| MetadataRequestTopic::default().with_name(Some(topic_name(t))))
                .collect(),
        ))
        .with_allow_auto_topic_creation(true);
    let r: MetadataResponse = c.call(ApiKey::Metadata, 12, &req);
    let codes: Vec<i16> = r.topics.iter().map(|t| t.error_code).collect();
    assert_eq!(codes, [0, POLICY_VIOLATION]);
    let mut want = names("a", 8);
    want.extend(["t-0".to_string()]);
    want.extend(names("x", 3));
    want.sort();
    assert_eq!(partitions(&data), want);
    finish(server, &data);
}

#[test]
fn a_creation_that_fails_half_way_leaves_nothing_behind() {
    let (_tmp, data) = data_dir();
    // Files where the fourth partition of `h`, and the third of `t`, go.
    std::fs::write(data.join("h-3"), b"in the way").unwrap();
    std::fs::write(data.join("t-2"), b"in the way").unwrap();
    let server = Server::start(&data, &[]);
    let mut c = Conn::new(&server.addr);
    let r = create(&mut c, vec![topic("h", 6)], false);
    assert_ne!(r[0].0, 0, "{r:?}");
    let r = grow(&mut c, &[("t", 5)], false);
    assert_ne!(r[0].0, 0, "{r:?}");
    assert_eq!(
        partitions(&data),
        ["t-0"],
        "no partition of either request stayed"
    );
    std::fs::remove_file(data.join("h-3")).unwrap();
    std::fs::remove_file(data.join("t-2")).unwrap();
    finish(server, &data);
}

/// One Produce of a batch stamped `ts` to every partition of `topics`:
/// each partition's code.
fn produce_all(c: &mut Conn, topics: &[(&str, i32)], ts: i64) -> Vec<i16> {
    use bytes::Bytes;
    use kafka_protocol::messages::produce_request::{
        PartitionProduceData, ProduceRequest, TopicProduceData,
    };
    use kafka_protocol::messages::produce_response::ProduceResponse;
    let mut batch = Vec::new();
    commitfs::record::encode_batch(&mut batch, 0, ts, &[NewRecord::value(b"v")]);
    let data = topics
        .iter()
        .map(|(t, n)| {
            let parts = (0..*n).map(|i| {
                PartitionProduceData::default()
                    .with_index(i)
                    .with_records(Some(Bytes::from(batch.clone())))
            });
            TopicProduceData::default()
                .with_name(topic_name(t))
                .with_partition_data(parts.collect())
        })
        .collect();
    let req = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(30_000)
        .with_topic_data(data);
    let r: ProduceResponse = c.call(ApiKey::Produce, 9, &req);
    r.responses
        .iter()
        .flat_map(|t| t.partition_responses.iter().map(|p| p.error_code))
        .collect()
}

/// Under 1,024 descriptors the default `max.broker.partitions` is what
/// they hold (256: one each for the active `.log`, as many again for the
/// rest): a creation past it is refused whole, where three descriptors a
/// partition once met EMFILE half way, and every partition there rolls.
#[test]
fn descriptors_bound_the_default_partition_count_and_every_partition_rolls() {
    let (_tmp, data) = data_dir();
    // Every produce below rolls (its timestamp is past segment.ms).
    let server = Server::start_limited(&data, &["segment.ms=1"], 1024);
    assert!(
        server
            .log()
            .contains("max.broker.partitions=256 (RLIMIT_NOFILE 1024)"),
        "{}",
        server.log()
    );
    let mut c = Conn::new(&server.addr);
    assert_eq!(
        create(&mut c, vec![topic("p", 300)], false)[0].0,
        POLICY_VIOLATION
    );
    assert_eq!(partitions(&data), ["t-0"], "nothing of it was made");
    assert_eq!(create(&mut c, vec![topic("p", 255)], false)[0].0, 0);
    assert_eq!(
        create(&mut c, vec![topic("q", 1)], false)[0].0,
        POLICY_VIOLATION
    );
    let all = [("p", 255)];
    for round in 0..3 {
        let codes = produce_all(&mut c, &all, 1_700_000_000_000 + round * 1000);
        assert!(codes.iter().all(|c| *c == 0), "round {round}: {codes:?}");
    }
    let p0 = decode_partition(&data.join("p-254"));
    assert_eq!(p0.len(), 3, "three batches, one a segment");
    assert!(
        p0.windows(2).all(|w| w[0].segment < w[1].segment),
        "each produce rolled"
    );
    finish(server, &data);
}
