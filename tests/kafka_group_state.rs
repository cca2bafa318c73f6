//! What the group coordinator keeps, and for how long, against a client
//! that does not play along:
//! - expiry: offsets expire after `offsets.retention.minutes` by Kafka's
//!   rules, Empty groups without offsets go, their tombstones are in
//!   `__consumer_offsets` (decoded by kafka-protocol, not commitfs), and a
//!   restart loads the same state;
//! - `group.max.size`: kafka-python consumers fill a group, a JoinGroup
//!   past it is refused, and a restart with a lower size sheds a member;
//! - group ids past Kafka's 32767-byte strings close the connection;
//! - forged records in `__consumer_offsets` are skipped at load;
//! - a `__consumer_offsets` partition that cannot load makes its groups
//!   NOT_COORDINATOR, never "no committed offset";
//! - DeleteGroups, driven by kafka-python's admin client.
//!
//! Waits are for states, each bounded; nothing asserts on timing.

mod kafka_support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use commitfs::record::NewRecord;
use commitfs::storage::{LogConfig, LogManager, OpenOptions};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::delete_groups_request::DeleteGroupsRequest;
use kafka_protocol::messages::delete_groups_response::DeleteGroupsResponse;
use kafka_protocol::messages::describe_groups_request::DescribeGroupsRequest;
use kafka_protocol::messages::describe_groups_response::DescribeGroupsResponse;
use kafka_protocol::messages::heartbeat_request::HeartbeatRequest;
use kafka_protocol::messages::heartbeat_response::HeartbeatResponse;
use kafka_protocol::messages::join_group_request::{JoinGroupRequest, JoinGroupRequestProtocol};
use kafka_protocol::messages::join_group_response::JoinGroupResponse;
use kafka_protocol::messages::leave_group_request::{LeaveGroupRequest, MemberIdentity};
use kafka_protocol::messages::leave_group_response::LeaveGroupResponse;
use kafka_protocol::messages::list_groups_request::ListGroupsRequest;
use kafka_protocol::messages::list_groups_response::ListGroupsResponse;
use kafka_protocol::messages::metadata_request::MetadataRequest;
use kafka_protocol::messages::metadata_response::MetadataResponse;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_commit_response::OffsetCommitResponse;
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequest, OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::offset_fetch_response::OffsetFetchResponse;
use kafka_protocol::messages::sync_group_request::{SyncGroupRequest, SyncGroupRequestAssignment};
use kafka_protocol::messages::sync_group_response::SyncGroupResponse;
use kafka_protocol::messages::{ApiKey, GroupId, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_support::bounded::{Running, spawn};
use kafka_support::{Conn, Server, python, require, run_python};

const BOUND: Duration = Duration::from_secs(180);
const OFFSETS_DIR: &str = "__consumer_offsets-0";

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// Topics `t` (2 partitions) and `u` (1), each with 10 records.
fn data_dir(tmp: &Path) -> PathBuf {
    let data = tmp.join("data");
    let mgr = LogManager::open(&data, LogConfig::default(), OpenOptions::default()).unwrap();
    for (t, n) in [("t", 2), ("u", 1)] {
        mgr.create_topic(t, n).unwrap();
        for p in 0..n {
            let log = mgr.partition(&format!("{t}-{p}")).unwrap();
            let recs: Vec<NewRecord> = (0..10).map(|_| NewRecord::value(b"x")).collect();
            log.append(&recs).unwrap();
        }
    }
    mgr.close().unwrap();
    data
}

/// A consumer's subscription (ConsumerProtocolSubscription v0).
fn subscription(topics: &[&str]) -> Bytes {
    let mut b = vec![0, 0];
    b.extend((topics.len() as i32).to_be_bytes());
    for t in topics {
        b.extend((t.len() as i16).to_be_bytes());
        b.extend(t.as_bytes());
    }
    b.extend((-1i32).to_be_bytes());
    Bytes::from(b)
}

/// One group's requests over a raw connection.
struct Group {
    conn: Conn,
    id: String,
}

/// A member of a group: its id and generation.
#[derive(Clone, Debug)]
struct Joined {
    member: String,
    generation: i32,
}

impl Group {
    fn new(addr: &str, id: &str) -> Group {
        Group {
            conn: Conn::new(addr),
            id: id.to_string(),
        }
    }

    fn join(&mut self, version: i16, member: &str, topics: &[&str]) -> JoinGroupResponse {
        let protocol = JoinGroupRequestProtocol::default()
            .with_name(sb("range"))
            .with_metadata(subscription(topics));
        let req = JoinGroupRequest::default()
            .with_protocols(vec![protocol])
            .with_protocol_type(sb("consumer"))
            .with_member_id(sb(member))
            .with_rebalance_timeout_ms(10_000)
            .with_session_timeout_ms(10_000)
            .with_group_id(GroupId(sb(&self.id)));
        self.conn.call(ApiKey::JoinGroup, version, &req)
    }

    /// A new member's JoinGroup (asked for its id first, KIP-394), then its
    /// SyncGroup, so the group is Stable. As clients do, a join whose
    /// group vanished meanwhile (an expiry pass removed it while it was
    /// still Empty) starts over.
    fn join_and_sync(&mut self, topics: &[&str]) -> Joined {
        for _ in 0..5 {
            let first = self.join(5, "", topics);
            assert_eq!(first.error_code, ResponseError::MemberIdRequired.code());
            let member = first.member_id.to_string();
            let joined = self.join(5, &member, topics);
            if joined.error_code == ResponseError::UnknownMemberId.code() {
                continue;
            }
            assert_eq!(joined.error_code, 0, "JoinGroup of {}", self.id);
            let j = Joined {
                member,
                generation: joined.generation_id,
            };
            let mine = SyncGroupRequestAssignment::default()
                .with_member_id(sb(&j.member))
                .with_assignment(Bytes::from_static(b"all"));
            let req = SyncGroupRequest::default()
                .with_group_id(GroupId(sb(&self.id)))
                .with_member_id(sb(&j.member))
                .with_generation_id(j.generation)
                .with_assignments(vec![mine]);
            let r: SyncGroupResponse = self.conn.call(ApiKey::SyncGroup, 3, &req);
            assert_eq!(r.error_code, 0, "SyncGroup of {}", self.id);
            return j;
        }
        panic!("{}: the group vanished at every join", self.id)
    }

    fn heartbeat(&mut self, j: &Joined) -> i16 {
        let req = HeartbeatRequest::default()
            .with_member_id(sb(&j.member))
            .with_generation_id(j.generation)
            .with_group_id(GroupId(sb(&self.id)));
        let r: HeartbeatResponse = self.conn.call(ApiKey::Heartbeat, 3, &req);
        r.error_code
    }

    fn leave(&mut self, j: &Joined) -> i16 {
        let req = LeaveGroupRequest::default()
            .with_group_id(GroupId(sb(&self.id)))
            .with_members(vec![
                MemberIdentity::default().with_member_id(sb(&j.member)),
            ]);
        let r: LeaveGroupResponse = self.conn.call(ApiKey::LeaveGroup, 3, &req);
        r.members.first().map_or(r.error_code, |m| m.error_code)
    }

    /// OffsetCommit of `topic`-`partition` at `offset`; `None` for `who`
    /// commits without membership (generation -1). `retention_ms` is sent
    /// at v2, which has it.
    fn commit(&mut self, who: Option<&Joined>, at: (&str, i32, i64), retention_ms: i64) -> i16 {
        let (topic, partition, offset) = at;
        let part = OffsetCommitRequestPartition::default()
            .with_partition_index(partition)
            .with_committed_offset(offset);
        let req = OffsetCommitRequest::default()
            .with_group_id(GroupId(sb(&self.id)))
            .with_generation_id_or_member_epoch(who.map_or(-1, |j| j.generation))
            .with_member_id(sb(who.map_or("", |j| &j.member)))
            .with_retention_time_ms(retention_ms)
            .with_topics(vec![
                OffsetCommitRequestTopic::default()
                    .with_name(TopicName(sb(topic)))
                    .with_partitions(vec![part]),
            ]);
        let version = if retention_ms >= 0 { 2 } else { 8 };
        let r: OffsetCommitResponse = self.conn.call(ApiKey::OffsetCommit, version, &req);
        r.topics[0].partitions[0].error_code
    }

    /// OffsetFetch v8: the group's error, and the committed offset.
    fn committed(&mut self, topic: &str, partition: i32) -> (i16, i64) {
        let asked = OffsetFetchRequestTopics::default()
            .with_name(TopicName(sb(topic)))
            .with_partition_indexes(vec![partition]);
        let g = OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(sb(&self.id)))
            .with_topics(Some(vec![asked]));
        let req = OffsetFetchRequest::default().with_groups(vec![g]);
        let r: OffsetFetchResponse = self.conn.call(ApiKey::OffsetFetch, 8, &req);
        let g = &r.groups[0];
        let offset = g
            .topics
            .first()
            .map_or(-1, |t| t.partitions[0].committed_offset);
        (g.error_code, offset)
    }

    /// DescribeGroups: the error and the state (Dead for an unknown group).
    fn describe(&mut self) -> (i16, String) {
        let req = DescribeGroupsRequest::default().with_groups(vec![GroupId(sb(&self.id))]);
        let r: DescribeGroupsResponse = self.conn.call(ApiKey::DescribeGroups, 5, &req);
        let g = &r.groups[0];
        (g.error_code, g.group_state.to_string())
    }
}

/// Every group ListGroups shows.
fn listed(addr: &str) -> BTreeSet<String> {
    let r: ListGroupsResponse =
        Conn::new(addr).call(ApiKey::ListGroups, 4, &ListGroupsRequest::default());
    assert_eq!(r.error_code, 0);
    r.groups.iter().map(|g| g.group_id.to_string()).collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| n.to_string()).collect()
}

/// A coordinator record of `__consumer_offsets`: its key type, group,
/// topic and partition (the last two for offsets), and whether its value
/// is null (a tombstone).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Written {
    kind: i16,
    group: String,
    topic: String,
    partition: i32,
    tombstone: bool,
}

/// The records of `__consumer_offsets-0`, decoded by kafka-protocol's
/// `RecordBatchDecoder` (CRC checked), keys read by hand from Kafka's
/// layout: a type, then the group, then the topic and partition for type 1.
fn written(data: &Path) -> Vec<Written> {
    use kafka_protocol::records::RecordBatchDecoder;
    let dir = data.join(OFFSETS_DIR);
    let mut logs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    logs.sort();
    let mut out = Vec::new();
    for log in logs {
        let mut bytes = Bytes::from(std::fs::read(&log).unwrap());
        let sets = RecordBatchDecoder::decode_all(&mut bytes)
            .unwrap_or_else(|e| panic!("{}: {e}", log.display()));
        for r in sets.iter().flat_map(|s| &s.records) {
            let key = r.key.as_ref().expect("a coordinator record has a key");
            out.push(parse_key(key, r.value.is_none()));
        }
    }
    out
}

fn parse_key(key: &[u8], tombstone: bool) -> Written {
    let mut k = key;
    let mut take = |n: usize| {
        let (a, b) = k.split_at(n);
        k = b;
        a.to_vec()
    };
    let kind = i16::from_be_bytes(take(2).try_into().unwrap());
    let mut text = || {
        let len = i16::from_be_bytes(take(2).try_into().unwrap()) as usize;
        String::from_utf8(take(len)).unwrap()
    };
    let group = text();
    let (topic, partition) = if kind < 2 {
        let topic = text();
        (topic, i32::from_be_bytes(take(4).try_into().unwrap()))
    } else {
        (String::new(), -1)
    };
    Written {
        kind,
        group,
        topic,
        partition,
        tombstone,
    }
}

fn tombstone(kind: i16, group: &str, topic: &str, partition: i32) -> Written {
    Written {
        kind,
        group: group.into(),
        topic: topic.into(),
        partition,
        tombstone: true,
    }
}

/// Heartbeats for a member until told to stop, so its group stays Stable.
fn keep_alive(
    addr: &str,
    group: &str,
    j: &Joined,
) -> (Arc<AtomicBool>, std::thread::JoinHandle<()>) {
    let stop = Arc::new(AtomicBool::new(false));
    let (flag, addr, group, j) = (stop.clone(), addr.to_string(), group.to_string(), j.clone());
    let t = std::thread::spawn(move || {
        let mut g = Group::new(&addr, &group);
        while !flag.load(Ordering::Relaxed) {
            assert_eq!(g.heartbeat(&j), 0, "the kept member's heartbeat");
            std::thread::sleep(Duration::from_millis(500));
        }
    });
    (stop, t)
}

/// Kafka's expiry rules end to end, with a minute's retention (the least
/// `offsets.retention.minutes` takes): a standalone consumer's offset and
/// an Empty group's go; a Stable consumer group keeps its subscribed
/// topic's offset and loses the other's; an offset committed with its own
/// retention goes at its expire time; a group that never had more than a
/// pending member goes at the first check, with no tombstone (nothing of
/// it was written).
#[test]
fn offsets_expire_and_empty_groups_go_with_tombstones_and_a_restart_agrees() {
    let tmp = tempfile::tempdir().unwrap();
    let data = data_dir(tmp.path());
    let opts = [
        "offsets.retention.minutes=1",
        "offsets.retention.check.interval.ms=200",
        "group.initial.rebalance.delay.ms=0",
        "group.min.session.timeout.ms=500",
    ];
    // First a week's retention (Kafka's default): what has a retention of
    // its own goes, and nothing else can yet, however slow the machine.
    // Then a restart with a minute's, counted from the same commits.
    let week = ["offsets.retention.minutes=10080", opts[1], opts[2], opts[3]];
    let mut s = Server::start(&data, &week);
    assert_eq!(Group::new(&s.addr, "solo").commit(None, ("t", 0, 5), -1), 0);
    assert_eq!(
        Group::new(&s.addr, "own").commit(None, ("t", 0, 6), 1000),
        0
    );
    let ghost = Group::new(&s.addr, "ghost").join(4, "", &["t"]);
    assert_eq!(ghost.error_code, ResponseError::MemberIdRequired.code());
    let mut left = Group::new(&s.addr, "left");
    let l = left.join_and_sync(&["t"]);
    assert_eq!(left.commit(Some(&l), ("t", 1, 9), -1), 0);
    assert_eq!(left.leave(&l), 0);
    let mut kept = Group::new(&s.addr, "kept");
    let k = kept.join_and_sync(&["t"]);
    assert_eq!(kept.commit(Some(&k), ("t", 0, 7), -1), 0);
    assert_eq!(kept.commit(Some(&k), ("u", 0, 3), -1), 0);
    let (stop, beats) = keep_alive(&s.addr, "kept", &k);

    s.wait_until("the own-retention group and the ghost to go", BOUND, || {
        let l = listed(&s.addr);
        !l.contains("own") && !l.contains("ghost")
    });
    // Within a week of the commits: the others are all there.
    assert_eq!(listed(&s.addr), set(&["kept", "left", "solo"]));
    assert_eq!(Group::new(&s.addr, "solo").committed("t", 0), (0, 5));
    assert_eq!(kept.committed("u", 0), (0, 3));
    stop.store(true, Ordering::Relaxed);
    beats.join().unwrap();
    assert!(s.stop(), "a clean stop:\n{}", s.log());

    // A minute's retention: the member's session starts again at the load,
    // and its heartbeats go on to the new address.
    let mut s = Server::start(&data, &opts);
    let mut kept = Group::new(&s.addr, "kept");
    let mut left = Group::new(&s.addr, "left");
    let (stop, beats) = keep_alive(&s.addr, "kept", &k);
    s.wait_until("a minute's retention to expire the rest", BOUND, || {
        listed(&s.addr) == set(&["kept"]) && kept.committed("u", 0) == (0, -1)
    });
    assert_eq!(
        kept.committed("t", 0),
        (0, 7),
        "a subscribed topic's offset stays"
    );
    assert_eq!(kept.describe(), (0, "Stable".to_string()));
    assert_eq!(Group::new(&s.addr, "solo").committed("t", 0), (0, -1));
    assert_eq!(left.committed("t", 1), (0, -1));
    assert_eq!(left.describe(), (0, "Dead".to_string()));
    let log = s.log();
    assert!(
        log.contains("Group left transitioned to Dead in generation 2"),
        "{log}"
    );
    assert!(log.contains("expired offsets in"), "{log}");
    stop.store(true, Ordering::Relaxed);
    beats.join().unwrap();
    assert!(s.stop(), "a clean stop:\n{}", s.log());

    expired_tombstones_written(&data);

    // A restart loads the same state.
    let s = Server::start(&data, &opts);
    assert_eq!(listed(&s.addr), set(&["kept"]));
    let mut kept = Group::new(&s.addr, "kept");
    assert_eq!(kept.committed("t", 0), (0, 7));
    assert_eq!(kept.committed("u", 0), (0, -1));
    assert_eq!(kept.describe(), (0, "Stable".to_string()));
    for (g, t, p) in [("solo", "t", 0), ("own", "t", 0), ("left", "t", 1)] {
        assert_eq!(Group::new(&s.addr, g).committed(t, p), (0, -1), "{g}");
    }
}

/// The expiry's tombstones, and only them: each expired offset's, and the
/// group's own only for `left`, the one group a record was written of.
fn expired_tombstones_written(data: &Path) {
    let all = written(data);
    let tombstones: BTreeSet<Written> = all.iter().filter(|w| w.tombstone).cloned().collect();
    let want: BTreeSet<Written> = [
        tombstone(1, "solo", "t", 0),
        tombstone(1, "own", "t", 0),
        tombstone(1, "left", "t", 1),
        tombstone(1, "kept", "u", 0),
        tombstone(2, "left", "", -1),
    ]
    .into_iter()
    .collect();
    assert_eq!(tombstones, want, "every record: {all:#?}");
    assert!(
        !all.iter().any(|w| w.group == "ghost"),
        "nothing of the ghost was written"
    );
}

/// A kafka-python consumer of group `g` subscribed to `t`, writing its
/// assignment to `<name>.assigned` until `stop` exists.
const MEMBER: &str = r#"
import sys, os, time
from kafka import KafkaConsumer
addr, group, name, work = sys.argv[1:5]
c = KafkaConsumer('t', bootstrap_servers=addr, group_id=group, client_id=name,
                  enable_auto_commit=False, session_timeout_ms=30000,
                  heartbeat_interval_ms=1000)
deadline = time.time() + 150
while not os.path.exists(os.path.join(work, 'stop')) and time.time() < deadline:
    c.poll(timeout_ms=200)
    with open(os.path.join(work, name + '.tmp'), 'w') as f:
        f.write(','.join(str(tp.partition) for tp in c.assignment()))
    os.replace(os.path.join(work, name + '.tmp'), os.path.join(work, name + '.assigned'))
c.close()
"#;

/// A running consumer (killed, without leaving its group, when dropped).
struct Member {
    _process: Running,
    assigned: PathBuf,
}

impl Member {
    fn start(py: &Path, addr: &str, name: &str, work: &Path) -> Member {
        let stderr = std::fs::File::create(work.join(format!("{name}.log"))).unwrap();
        let mut cmd = Command::new(py);
        cmd.args(["-c", MEMBER, addr, "full", name]).arg(work);
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr);
        Member {
            _process: spawn(&mut cmd, "a kafka-python consumer"),
            assigned: work.join(format!("{name}.assigned")),
        }
    }

    fn partitions(&self) -> usize {
        std::fs::read_to_string(&self.assigned)
            .unwrap_or_default()
            .split(',')
            .filter(|p| !p.is_empty())
            .count()
    }
}

/// `group.max.size=2`: two kafka-python consumers fill group `full`, and a
/// third JoinGroup is refused with GROUP_MAX_SIZE_REACHED (and no member
/// id). Restarted with `group.max.size=1`, the group read back is over
/// capacity and rebalances: of its two members rejoining, one is refused.
#[test]
fn a_join_past_group_max_size_is_refused_and_a_lower_size_sheds_a_member() {
    let Some(py) = require(python()) else { return };
    let tmp = tempfile::tempdir().unwrap();
    let data = data_dir(tmp.path());
    let work = tmp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let opts = ["group.max.size=2", "group.initial.rebalance.delay.ms=0"];
    let s = Server::start(&data, &opts);
    let a = Member::start(&py, &s.addr, "a", &work);
    let b = Member::start(&py, &s.addr, "b", &work);
    let mut full = Group::new(&s.addr, "full");
    s.wait_until("two consumers to share t", BOUND, || {
        a.partitions() == 1 && b.partitions() == 1 && full.describe().1 == "Stable"
    });
    for version in [5, 3] {
        let third = full.join(version, "", &["t"]);
        assert_eq!(
            (third.error_code, third.member_id.as_str()),
            (ResponseError::GroupMaxSizeReached.code(), ""),
            "JoinGroup v{version}"
        );
    }
    let members: Vec<String> = {
        let req = DescribeGroupsRequest::default().with_groups(vec![GroupId(sb("full"))]);
        let r: DescribeGroupsResponse = full.conn.call(ApiKey::DescribeGroups, 5, &req);
        r.groups[0]
            .members
            .iter()
            .map(|m| m.member_id.to_string())
            .collect()
    };
    assert_eq!(members.len(), 2);
    // The consumers die without leaving: the group's record keeps both.
    drop((a, b));
    drop(s);

    let s = Server::start(
        &data,
        &["group.max.size=1", "group.initial.rebalance.delay.ms=0"],
    );
    assert!(s.log().contains("is over capacity 1"), "{}", s.log());
    // Read back over capacity, it rebalances: its members must rejoin. (Its
    // restored members' 30 s sessions run from the start: the rejoins below
    // come well before they end.)
    let state = Group::new(&s.addr, "full").describe();
    assert_eq!(state, (0, "PreparingRebalance".to_string()));
    let rejoin = |m: String| {
        let addr = s.addr.clone();
        std::thread::spawn(move || Group::new(&addr, "full").join(5, &m, &["t"]))
    };
    let answers: Vec<JoinGroupResponse> = members
        .into_iter()
        .map(rejoin)
        .collect::<Vec<_>>()
        .into_iter()
        .map(|t| t.join().unwrap())
        .collect();
    let codes: BTreeSet<i16> = answers.iter().map(|r| r.error_code).collect();
    assert_eq!(
        codes,
        BTreeSet::from([0, ResponseError::GroupMaxSizeReached.code()]),
        "one member stays, one is shed: {answers:?}"
    );
    let stayed = answers.iter().find(|r| r.error_code == 0).unwrap();
    assert_eq!(stayed.members.len(), 1, "it leads a group of one");
}

/// Kafka's decoder refuses strings over 32767 bytes, the compact strings
/// of flexible versions too; a group id past that closes the connection,
/// and the daemon carries on.
#[test]
fn group_ids_past_kafkas_string_bound_close_the_connection() {
    let tmp = tempfile::tempdir().unwrap();
    let data = data_dir(tmp.path());
    let s = Server::start(&data, &[]);
    let longest = "g".repeat(32767);
    let r = Group::new(&s.addr, &longest).join(9, "", &["t"]);
    assert_eq!(r.error_code, ResponseError::MemberIdRequired.code());
    let mut c = Conn::new(&s.addr);
    let req = JoinGroupRequest::default()
        .with_group_id(GroupId(sb(&"g".repeat(32768))))
        .with_session_timeout_ms(10_000)
        .with_protocol_type(sb("consumer"));
    let frame = c.encode(ApiKey::JoinGroup, 9, &req);
    c.send_raw(&frame);
    c.expect_closed("JoinGroup v9 with a 32768-byte group id");
    let mut c = Conn::new(&s.addr);
    let req =
        DeleteGroupsRequest::default().with_groups_names(vec![GroupId(sb(&"d".repeat(40000)))]);
    let frame = c.encode(ApiKey::DeleteGroups, 2, &req);
    c.send_raw(&frame);
    c.expect_closed("DeleteGroups v2 with a 40000-byte group id");
    assert!(
        s.log().contains("Kafka's strings hold at most 32767"),
        "{}",
        s.log()
    );
    assert!(!listed(&s.addr).iter().any(|g| g.len() > 32767));
}

/// A record's key and value.
type KeyValue = (Vec<u8>, Vec<u8>);

/// Records anyone can append to `__consumer_offsets` (a shell's
/// `>> __consumer_offsets-0/log` would do), written here through storage
/// before the daemon starts: each to its group's partition, or with
/// `wrong:GROUP` to the other one.
fn forge(data: &Path, records: &[(String, KeyValue)]) {
    use commitfs::kafka::group::records::partition_for;
    let mgr = LogManager::open(data, LogConfig::default(), OpenOptions::default()).unwrap();
    if mgr.topic("__consumer_offsets").is_none() {
        mgr.create_topic("__consumer_offsets", 2).unwrap();
    }
    for (at, (k, v)) in records {
        let home = match at.strip_prefix("wrong:") {
            Some(g) => 1 - partition_for(g, 2),
            None => partition_for(at, 2),
        };
        let log = mgr
            .partition(&format!("__consumer_offsets-{home}"))
            .unwrap();
        log.append(&[NewRecord {
            key: Some(k),
            value: Some(v),
            headers: &[],
        }])
        .unwrap();
    }
    mgr.close().unwrap();
}

/// A commit of `t-0` made now (an older one would expire at the first
/// check: its group has no protocol type).
fn stored_commit(group: &str, offset: i64, metadata: usize) -> KeyValue {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    commitfs::record::internal::OffsetCommit {
        group: group.into(),
        topic: "t".into(),
        partition: 0,
        offset,
        leader_epoch: -1,
        metadata: "m".repeat(metadata),
        commit_timestamp: now,
        expire_timestamp: -1,
    }
    .to_record()
    .unwrap()
}

fn stored_group(group: &str, session_ms: i32, leader: &str) -> KeyValue {
    use commitfs::kafka::group::records::{StoredGroup, StoredMember};
    StoredGroup {
        group: group.into(),
        protocol_type: "consumer".into(),
        generation: 5,
        protocol: Some("range".into()),
        leader: Some(leader.into()),
        state_timestamp: 1_700_000_000_000,
        members: vec![StoredMember {
            member_id: "ghost".into(),
            client_id: "forger".into(),
            client_host: "/10.0.0.1".into(),
            rebalance_timeout_ms: i32::MAX,
            session_timeout_ms: session_ms,
            subscription: subscription(&["t"]).to_vec(),
            assignment: Vec::new(),
        }],
    }
    .to_record()
    .unwrap()
}

/// Forged records are skipped at load with a log line each: a Stable group
/// holding a member whose timeouts are 2^31-1 ms (it would keep every real
/// member waiting for weeks), a group whose leader is no member, offset
/// metadata over `offset.metadata.max.bytes`, a record in the partition
/// its group does not hash to. The honest record beside them loads, and a
/// real consumer joins the ghost's group at once.
#[test]
fn forged_records_in_consumer_offsets_are_skipped_at_load() {
    let tmp = tempfile::tempdir().unwrap();
    let data = data_dir(tmp.path());
    let records = [
        (
            "ghosted".to_string(),
            stored_group("ghosted", i32::MAX, "ghost"),
        ),
        (
            "headless".to_string(),
            stored_group("headless", 10_000, "nobody"),
        ),
        ("honest".to_string(), stored_commit("honest", 4, 0)),
        ("fat".to_string(), stored_commit("fat", 4, 5000)),
        ("wrong:stray".to_string(), stored_commit("stray", 4, 0)),
    ];
    forge(&data, &records);
    let opts = [
        "offsets.topic.num.partitions=2",
        "group.initial.rebalance.delay.ms=0",
    ];
    let s = Server::start(&data, &opts);
    let log = s.log();
    for why in [
        "has a session timeout of 2147483647 ms, outside group.min.session.timeout.ms",
        "group headless's leader Some(\"nobody\") is not one of its members",
        "metadata of 5000 bytes is over offset.metadata.max.bytes (4096)",
        "a record of group stray, whose records go to partition",
    ] {
        assert!(log.contains(why), "no log line saying {why:?}:\n{log}");
    }
    assert_eq!(log.matches("record skipped").count(), 4, "{log}");
    assert_eq!(Group::new(&s.addr, "honest").committed("t", 0), (0, 4));
    for g in ["fat", "stray"] {
        assert_eq!(Group::new(&s.addr, g).committed("t", 0), (0, -1), "{g}");
    }
    let mut ghosted = Group::new(&s.addr, "ghosted");
    assert_eq!(ghosted.describe(), (0, "Dead".to_string()));
    let j = ghosted.join_and_sync(&["t"]);
    assert_eq!(j.generation, 1, "a new group, not the forged generation 5");
    assert_eq!(ghosted.describe(), (0, "Stable".to_string()));
}

/// Two ways `__consumer_offsets-0` fails to load as root can make them:
/// its active segment replaced by a directory (the partition is offline),
/// and a flipped byte in a batch after a clean shutdown (the read stops at
/// a CRC mismatch). Either way each group API answers NOT_COORDINATOR for
/// the group, with a log line, where "no committed offset" would send its
/// consumers back to `auto.offset.reset`; the daemon serves the rest.
#[test]
fn a_consumer_offsets_partition_that_cannot_load_answers_not_coordinator() {
    for (how, break_it) in [
        (
            "a directory in place of its segment",
            replace_with_dir as fn(&Path),
        ),
        ("a flipped byte", flip_a_byte as fn(&Path)),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let data = data_dir(tmp.path());
        let s = Server::start(&data, &[]);
        assert_eq!(Group::new(&s.addr, "g").commit(None, ("t", 0, 5), -1), 0);
        drop(s);
        break_it(&data.join(OFFSETS_DIR).join("00000000000000000000.log"));
        let mut s = Server::start(&data, &[]);
        assert!(
            s.log()
                .contains("Failed to load metadata from __consumer_offsets-0"),
            "{how}: {}",
            s.log()
        );
        refused_everywhere(&s.addr, how);
        assert!(
            s.log()
                .contains("OffsetFetch of group g refused with NOT_COORDINATOR"),
            "{how}: {}",
            s.log()
        );
        let r: MetadataResponse = Conn::new(&s.addr).call(
            ApiKey::Metadata,
            12,
            &MetadataRequest::default().with_topics(None),
        );
        assert!(r.topics.len() >= 2, "{how}: the daemon serves the rest");
        assert!(s.alive(), "{how}");
    }
}

fn replace_with_dir(seg: &Path) {
    std::fs::remove_file(seg).unwrap();
    std::fs::create_dir(seg).unwrap();
}

/// A byte of the commit's timestamp, the last field of the segment's last
/// record but its header count: the record still decodes, only the CRC
/// tells, and a clean shutdown lets the partition load unchecked.
fn flip_a_byte(seg: &Path) {
    let mut bytes = std::fs::read(seg).unwrap();
    let at = bytes.len() - 2;
    bytes[at] ^= 0xff;
    std::fs::write(seg, bytes).unwrap();
}

/// Every group API's answer for group `g` is NOT_COORDINATOR.
fn refused_everywhere(addr: &str, how: &str) {
    let nc = ResponseError::NotCoordinator.code();
    let mut g = Group::new(addr, "g");
    assert_eq!(g.committed("t", 0).0, nc, "{how}: OffsetFetch v8");
    let req = OffsetFetchRequest::default()
        .with_group_id(GroupId(sb("g")))
        .with_topics(Some(vec![
            OffsetFetchRequestTopic::default()
                .with_name(TopicName(sb("t")))
                .with_partition_indexes(vec![0]),
        ]));
    let r: OffsetFetchResponse = g.conn.call(ApiKey::OffsetFetch, 5, &req);
    assert_eq!(r.error_code, nc, "{how}: OffsetFetch v5");
    let r: OffsetFetchResponse = g.conn.call(ApiKey::OffsetFetch, 1, &req);
    assert_eq!(
        r.topics[0].partitions[0].error_code, nc,
        "{how}: OffsetFetch v1"
    );
    assert_eq!(g.commit(None, ("t", 0, 6), -1), nc, "{how}: OffsetCommit");
    assert_eq!(g.join(5, "", &["t"]).error_code, nc, "{how}: JoinGroup");
    let someone = Joined {
        member: "m".into(),
        generation: 1,
    };
    assert_eq!(g.heartbeat(&someone), nc, "{how}: Heartbeat");
    assert_eq!(g.leave(&someone), nc, "{how}: LeaveGroup");
    assert_eq!(g.describe().0, nc, "{how}: DescribeGroups");
    let req = DeleteGroupsRequest::default().with_groups_names(vec![GroupId(sb("g"))]);
    let r: DeleteGroupsResponse = g.conn.call(ApiKey::DeleteGroups, 2, &req);
    assert_eq!(r.results[0].error_code, nc, "{how}: DeleteGroups");
}

/// kafka-python's admin client deletes groups (DeleteGroups): an Empty
/// group and its offsets go, with tombstones (the group's own only if it
/// was ever written), a group with members is refused, an unknown one is
/// not found; a restart agrees.
#[test]
fn delete_groups_as_kafka_python_sees_it() {
    let Some(py) = require(python()) else { return };
    let tmp = tempfile::tempdir().unwrap();
    let data = data_dir(tmp.path());
    let opts = ["group.initial.rebalance.delay.ms=0"];
    let mut s = Server::start(&data, &opts);
    assert_eq!(Group::new(&s.addr, "idle").commit(None, ("t", 0, 3), -1), 0);
    let mut done = Group::new(&s.addr, "done");
    let d = done.join_and_sync(&["t"]);
    assert_eq!(done.commit(Some(&d), ("u", 0, 2), -1), 0);
    assert_eq!(done.leave(&d), 0);
    let mut busy = Group::new(&s.addr, "busy");
    busy.join_and_sync(&["t"]);
    let script = r#"
import sys
from kafka import KafkaAdminClient
a = KafkaAdminClient(bootstrap_servers=sys.argv[1], request_timeout_ms=30000)
delete = getattr(a, 'delete_consumer_groups', None) or a.delete_groups
r = delete(['idle', 'done', 'busy', 'nobody'])
for g, e in sorted(dict(r).items()):
    print(g, e if isinstance(e, str) else type(e).__name__)
a.close()
"#;
    let out = run_python(&py, script, &[&s.addr]);
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "busy NonEmptyGroupError",
            "done OK",
            "idle OK",
            "nobody GroupIdNotFoundError"
        ],
        "{out}"
    );
    assert_eq!(Group::new(&s.addr, "idle").committed("t", 0), (0, -1));
    assert_eq!(done.describe(), (0, "Dead".to_string()));
    assert_eq!(listed(&s.addr), set(&["busy"]));
    assert!(s.stop(), "a clean stop:\n{}", s.log());
    let tombstones: BTreeSet<Written> =
        written(&data).into_iter().filter(|w| w.tombstone).collect();
    let want = [
        tombstone(1, "idle", "t", 0),
        tombstone(1, "done", "u", 0),
        tombstone(2, "done", "", -1),
    ];
    assert_eq!(tombstones, want.into_iter().collect());
    let s = Server::start(&data, &opts);
    assert_eq!(listed(&s.addr), set(&["busy"]));
    assert_eq!(Group::new(&s.addr, "done").committed("u", 0), (0, -1));
}
