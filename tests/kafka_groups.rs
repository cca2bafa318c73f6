//! Consumer groups with `commitfs serve` as the coordinator, driven by
//! clients we did not write, in processes of their own:
//! - kafka-python: two consumers split a 4-partition topic, a third joins
//!   and the partitions rebalance, the group commits; after a restart a new
//!   consumer of the group resumes at the committed offsets. The records the
//!   coordinator wrote decode with `commitfs dump --offsets-decoder` as
//!   kafka-dump-log prints them.
//! - confluent-kafka's `subscribe` (a recent librdkafka): two consumers
//!   split the topic and commit each record; the coordinator is killed with
//!   SIGKILL and restarted, and every acknowledged commit is there. The
//!   group's dead members are restored and expire; then kcat's balanced
//!   consumer (`kcat -G`, Debian's old librdkafka) joins the group, resumes
//!   at the committed offsets and commits as it closes.
//!
//! Waits are for states, each bounded; nothing asserts on timing.

mod kafka_support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use commitfs::record::NewRecord;
use commitfs::storage::{LogConfig, LogManager, OpenOptions};
use kafka_protocol::messages::list_groups_request::ListGroupsRequest;
use kafka_protocol::messages::list_groups_response::ListGroupsResponse;
use kafka_protocol::messages::offset_fetch_request::{OffsetFetchRequest, OffsetFetchRequestTopic};
use kafka_protocol::messages::offset_fetch_response::OffsetFetchResponse;
use kafka_protocol::messages::{ApiKey, GroupId, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_support::bounded::{cmd_timeout, run, wait_within};
use kafka_support::consumer_state::{CONFLUENT_CONSUMER, count, field, pairs};
use kafka_support::requests::produce_request;
use kafka_support::{BIN, Conn, Server, python, require};

const PARTITIONS: i32 = 4;
const BOUND: Duration = Duration::from_secs(90);

/// A consumer of the group: polls, commits what it read, and writes its
/// assignment and the first offset it read per partition to `<name>.json`
/// until `stop` exists (then closes, leaving the group).
const CONSUMER: &str = r#"
import sys, os, time, json
from kafka import KafkaConsumer
addr, topic, group, name, work = sys.argv[1:6]
c = KafkaConsumer(topic, bootstrap_servers=addr, group_id=group, client_id=name,
                  enable_auto_commit=False, auto_offset_reset='earliest',
                  session_timeout_ms=6000, heartbeat_interval_ms=500)
first, count = {}, 0
deadline = time.time() + 150
while not os.path.exists(os.path.join(work, 'stop')) and time.time() < deadline:
    polled = c.poll(timeout_ms=200)
    for tp, msgs in polled.items():
        for m in msgs:
            first.setdefault(str(tp.partition), m.offset)
            count += 1
    if polled:
        c.commit()
    state = {'assigned': sorted(tp.partition for tp in c.assignment()), 'first': first, 'count': count}
    with open(os.path.join(work, name + '.tmp'), 'w') as f:
        json.dump(state, f)
    os.replace(os.path.join(work, name + '.tmp'), os.path.join(work, name + '.json'))
c.close()
"#;

struct Consumer {
    child: Child,
    state: PathBuf,
    log: PathBuf,
}

impl Consumer {
    /// A kafka-python consumer of group `g`.
    fn start(py: &Path, addr: &str, name: &str, work: &Path) -> Consumer {
        Consumer::run(py, CONSUMER, addr, "g", name, work)
    }

    /// A consumer process running `script` (see [`CONSUMER`]).
    fn run(py: &Path, script: &str, addr: &str, group: &str, name: &str, work: &Path) -> Consumer {
        let log_path = work.join(format!("{name}.log"));
        let log = std::fs::File::create(&log_path).unwrap();
        let child = Command::new(py)
            .args(["-c", script, addr, "t", group, name])
            .arg(work)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start a Python consumer");
        Consumer {
            child,
            state: work.join(format!("{name}.json")),
            log: log_path,
        }
    }

    /// (assigned partitions, first offsets read, records read).
    fn state(&self) -> (BTreeSet<i32>, Vec<(i32, i64)>, usize) {
        let Ok(text) = std::fs::read_to_string(&self.state) else {
            return (BTreeSet::new(), Vec::new(), 0);
        };
        let assigned = field(&text, "assigned")
            .split(',')
            .filter_map(|p| p.trim().parse().ok())
            .collect();
        let first = pairs(field(&text, "first"));
        (assigned, first, count(&text))
    }

    /// Waits (bounded) for the process to end by itself, as it must once
    /// told to stop, and to end well (it closed the consumer, leaving the
    /// group); fails with its output otherwise.
    fn finish(mut self) {
        let log = || std::fs::read_to_string(&self.log).unwrap_or_default();
        match wait_within(&mut self.child, cmd_timeout()) {
            Some(st) => assert!(st.success(), "a consumer exited with {st}:\n{}", log()),
            None => panic!(
                "a consumer told to stop still ran after {:?}:\n{}",
                cmd_timeout(),
                log()
            ),
        }
    }
}

impl Drop for Consumer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Consumer {
    /// The offsets the coordinator acknowledged, per partition (confluent
    /// consumers only).
    fn acked(&self) -> Vec<(i32, i64)> {
        let text = std::fs::read_to_string(&self.state).unwrap_or_default();
        pairs(field(&text, "acked"))
    }
}

fn wait_until(what: &str, server: &Server, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < BOUND,
            "gave up waiting for {what}; the daemon's log:\n{}",
            server.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `per` records appended to each partition of `t`, made if missing.
fn fill(data: &Path, per: usize) {
    let mgr = LogManager::open(data, LogConfig::default(), OpenOptions::default()).unwrap();
    if mgr.topic("t").is_none() {
        mgr.create_topic("t", PARTITIONS as u32).unwrap();
    }
    for p in 0..PARTITIONS {
        let log = mgr.partition(&format!("t-{p}")).unwrap();
        for i in 0..per {
            let v = format!("p{p}-{i}");
            log.append(&[NewRecord::value(v.as_bytes())]).unwrap();
        }
    }
    mgr.close().unwrap();
}

/// Group `g`'s committed offsets of `t`, by raw OffsetFetch.
fn committed(addr: &str) -> Vec<i64> {
    committed_by(addr, "g")
}

/// A group's committed offsets of `t`, by raw OffsetFetch.
fn committed_by(addr: &str, group: &str) -> Vec<i64> {
    let mut c = Conn::new(addr);
    let req = OffsetFetchRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
        .with_topics(Some(vec![
            OffsetFetchRequestTopic::default()
                .with_name(TopicName(StrBytes::from_static_str("t")))
                .with_partition_indexes((0..PARTITIONS).collect()),
        ]));
    let r: OffsetFetchResponse = c.call(ApiKey::OffsetFetch, 5, &req);
    r.topics[0]
        .partitions
        .iter()
        .map(|p| p.committed_offset)
        .collect()
}

fn group_state(addr: &str) -> Option<String> {
    group_state_of(addr, "g")
}

fn group_state_of(addr: &str, group: &str) -> Option<String> {
    let mut c = Conn::new(addr);
    let r: ListGroupsResponse = c.call(ApiKey::ListGroups, 4, &ListGroupsRequest::default());
    r.groups
        .iter()
        .find(|g| g.group_id.0.as_str() == group)
        .map(|g| g.group_state.as_str().to_string())
}

/// Whether the consumers' assignments split every partition among them,
/// each holding at least one.
fn split(consumers: &[&Consumer]) -> bool {
    let sets: Vec<BTreeSet<i32>> = consumers.iter().map(|c| c.state().0).collect();
    let total: usize = sets.iter().map(|s| s.len()).sum();
    let union: BTreeSet<i32> = sets.iter().flatten().copied().collect();
    sets.iter().all(|s| !s.is_empty()) && total == PARTITIONS as usize && union.len() == total
}

#[test]
fn kafka_python_group_splits_rebalances_and_resumes_after_a_restart() {
    let Some(py) = require(python()) else { return };
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let work = tmp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    fill(&data, 10);
    let opts = ["group.initial.rebalance.delay.ms=500"];
    let mut s = Server::start(&data, &opts);

    let a = Consumer::start(&py, &s.addr, "a", &work);
    let b = Consumer::start(&py, &s.addr, "b", &work);
    wait_until("two consumers to split t", &s, || split(&[&a, &b]));
    let c = Consumer::start(&py, &s.addr, "c", &work);
    // The consumers see their split when their SyncGroup answers; the
    // group is Stable from then on unless a consumer under load misses
    // its heartbeats and the group rebalances again: wait for the state.
    wait_until("three consumers to split t in a Stable group", &s, || {
        split(&[&a, &b, &c]) && group_state(&s.addr).as_deref() == Some("Stable")
    });
    wait_until("every record committed", &s, || {
        committed(&s.addr) == vec![10; PARTITIONS as usize]
    });
    std::fs::write(work.join("stop"), b"").unwrap();
    for consumer in [a, b, c] {
        consumer.finish();
    }
    wait_until("the group to be empty", &s, || {
        group_state(&s.addr).as_deref() == Some("Empty")
    });
    assert!(s.stop(), "a clean stop:\n{}", s.log());

    // More records while the daemon is down; a new member resumes at 10.
    fill(&data, 5);
    std::fs::remove_file(work.join("stop")).unwrap();
    let s = Server::start(&data, &opts);
    assert_eq!(committed(&s.addr), vec![10; PARTITIONS as usize]);
    let d = Consumer::start(&py, &s.addr, "d", &work);
    wait_until("the new consumer to read the new records", &s, || {
        d.state().2 >= 5 * PARTITIONS as usize
    });
    let (assigned, first, count) = d.state();
    assert_eq!(assigned.len(), PARTITIONS as usize);
    assert_eq!(count, 5 * PARTITIONS as usize, "nothing read twice");
    assert_eq!(
        first.iter().map(|(p, _)| *p).collect::<BTreeSet<i32>>(),
        (0..PARTITIONS).collect(),
        "the new consumer read every partition"
    );
    for (p, offset) in first {
        assert_eq!(offset, 10, "partition {p} resumed at the committed offset");
    }
    std::fs::write(work.join("stop"), b"").unwrap();
    d.finish();
    drop(s);

    // The coordinator's records, as kafka-dump-log decodes them.
    let seg = data.join("__consumer_offsets-0/00000000000000000000.log");
    let out = run(
        Command::new(BIN)
            .args([
                "dump",
                "--offsets-decoder",
                "--deep-iteration",
                "--print-data-log",
            ])
            .arg(&seg),
        "commitfs dump --offsets-decoder",
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains(
            r#"key: {"type":"1","data":{"group":"g","topic":"t","partition":0}} payload: {"version":"3","data":{"offset":10,"leaderEpoch":"#
        ),
        "{text}"
    );
    assert!(
        text.contains(r#"key: {"type":"2","data":{"group":"g"}} payload: {"version":"3","data":{"protocolType":"consumer","generation":"#),
        "{text}"
    );
    assert!(text.contains(r#""subscription":{"topics":["t"]"#), "{text}");
}

/// Records `from..to` of each partition of `t` (values `p{p}-{i}`), one
/// batch per partition, produced through the listener with acks=-1.
fn produce_more(addr: &str, from: usize, to: usize) {
    use bytes::Bytes;
    use kafka_protocol::messages::produce_response::ProduceResponse;
    let mut c = Conn::new(addr);
    for p in 0..PARTITIONS {
        let values: Vec<String> = (from..to).map(|i| format!("p{p}-{i}")).collect();
        let recs: Vec<NewRecord> = values
            .iter()
            .map(|v| NewRecord::value(v.as_bytes()))
            .collect();
        let mut batch = Vec::new();
        commitfs::record::encode_batch(&mut batch, 0, 1_700_000_000_000, &recs);
        let req = produce_request("t", p, Bytes::from(batch));
        let r: ProduceResponse = c.call(ApiKey::Produce, 9, &req);
        let part = &r.responses[0].partition_responses[0];
        assert_eq!(part.error_code, 0, "produce to t-{p}");
        assert_eq!(part.base_offset, from as i64, "produce to t-{p}");
    }
}

#[test]
fn confluent_group_commits_survive_a_kill9_and_kcat_g_resumes_there() {
    let Some(py) = require(python()) else { return };
    let Some(kcat) = require(kafka_support::kcat()) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let work = tmp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    fill(&data, 10);
    let opts = [
        "group.initial.rebalance.delay.ms=500",
        "group.min.session.timeout.ms=1000",
    ];
    let mut s = Server::start(&data, &opts);
    let a = Consumer::run(&py, CONFLUENT_CONSUMER, &s.addr, "cg", "a", &work);
    let b = Consumer::run(&py, CONFLUENT_CONSUMER, &s.addr, "cg", "b", &work);
    wait_until("two confluent consumers to split t", &s, || {
        split(&[&a, &b])
    });
    // Every record read, and its commit acknowledged by the coordinator.
    let acked = || {
        let mut all: Vec<(i32, i64)> = a.acked().into_iter().chain(b.acked()).collect();
        all.sort();
        all
    };
    let want: Vec<(i32, i64)> = (0..PARTITIONS).map(|p| (p, 10)).collect();
    wait_until("every commit acknowledged", &s, || acked() == want);
    assert_eq!(a.state().2 + b.state().2, 40, "each record read once");

    // A crash of the coordinator: no clean shutdown, then a restart (on a
    // port of its own; the consumers die with it).
    s.kill();
    drop((a, b));
    let s = Server::start(&data, &opts);
    assert_eq!(
        committed_by(&s.addr, "cg"),
        vec![10; PARTITIONS as usize],
        "the acknowledged commits survived the kill"
    );
    // The dead members come back with the group; kcat can join once their
    // sessions expire.
    wait_until("the dead members to expire", &s, || {
        group_state_of(&s.addr, "cg").as_deref() == Some("Empty")
    });

    // kcat's balanced consumer joins the group and starts at the commits:
    // it reads exactly the records produced since. With auto.offset.reset
    // earliest, commits lost would show as old records, not as a hang.
    produce_more(&s.addr, 10, 15);
    let out = run(
        Command::new(&kcat)
            .args(["-b", &s.addr, "-G", "cg", "t", "-c", "20", "-q"])
            .args([
                "-X",
                "auto.offset.reset=earliest",
                "-X",
                "session.timeout.ms=6000",
            ])
            .args(["-f", "%p %o %s\\n"]),
        "kcat -G cg",
    );
    assert!(
        out.status.success(),
        "kcat -G: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut got: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    got.sort();
    let mut want: Vec<String> = (0..PARTITIONS)
        .flat_map(|p| (10..15).map(move |i| format!("{p} {i} p{p}-{i}")))
        .collect();
    want.sort();
    assert_eq!(got, want, "kcat -G resumed at the committed offsets");
    // kcat commits what it read as it closes.
    assert_eq!(committed_by(&s.addr, "cg"), vec![15; PARTITIONS as usize]);
}

mod protocol {
    //! The coordinator's answers to raw requests, state by state.
    use super::*;
    use crate::kafka_support::requests::txn_coordinator;
    use bytes::Bytes;
    use kafka_protocol::ResponseError;
    use kafka_protocol::messages::describe_groups_request::DescribeGroupsRequest;
    use kafka_protocol::messages::describe_groups_response::DescribeGroupsResponse;
    use kafka_protocol::messages::find_coordinator_request::FindCoordinatorRequest;
    use kafka_protocol::messages::find_coordinator_response::FindCoordinatorResponse;
    use kafka_protocol::messages::heartbeat_request::HeartbeatRequest;
    use kafka_protocol::messages::heartbeat_response::HeartbeatResponse;
    use kafka_protocol::messages::join_group_request::{
        JoinGroupRequest, JoinGroupRequestProtocol,
    };
    use kafka_protocol::messages::join_group_response::JoinGroupResponse;
    use kafka_protocol::messages::leave_group_request::{LeaveGroupRequest, MemberIdentity};
    use kafka_protocol::messages::leave_group_response::LeaveGroupResponse;
    use kafka_protocol::messages::offset_commit_request::{
        OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    };
    use kafka_protocol::messages::offset_commit_response::OffsetCommitResponse;
    use kafka_protocol::messages::sync_group_request::{
        SyncGroupRequest, SyncGroupRequestAssignment,
    };
    use kafka_protocol::messages::sync_group_response::SyncGroupResponse;

    fn sb(s: &str) -> StrBytes {
        StrBytes::from_string(s.to_string())
    }

    fn join(c: &mut Conn, member: &str, session_ms: i32) -> JoinGroupResponse {
        let req = JoinGroupRequest::default()
            .with_group_id(GroupId(sb("p")))
            .with_session_timeout_ms(session_ms)
            .with_rebalance_timeout_ms(10_000)
            .with_member_id(sb(member))
            .with_protocol_type(sb("consumer"))
            .with_protocols(vec![
                JoinGroupRequestProtocol::default()
                    .with_name(sb("range"))
                    .with_metadata(Bytes::from_static(b"sub")),
            ]);
        c.call(ApiKey::JoinGroup, 5, &req)
    }

    fn heartbeat(c: &mut Conn, member: &str, generation: i32) -> i16 {
        let req = HeartbeatRequest::default()
            .with_group_id(GroupId(sb("p")))
            .with_generation_id(generation)
            .with_member_id(sb(member));
        let r: HeartbeatResponse = c.call(ApiKey::Heartbeat, 3, &req);
        r.error_code
    }

    fn commit(c: &mut Conn, member: &str, generation: i32) -> i16 {
        let req = OffsetCommitRequest::default()
            .with_group_id(GroupId(sb("p")))
            .with_generation_id_or_member_epoch(generation)
            .with_member_id(sb(member))
            .with_topics(vec![
                OffsetCommitRequestTopic::default()
                    .with_name(TopicName(sb("t")))
                    .with_partitions(vec![
                        OffsetCommitRequestPartition::default()
                            .with_partition_index(1)
                            .with_committed_offset(3),
                    ]),
            ]);
        let r: OffsetCommitResponse = c.call(ApiKey::OffsetCommit, 8, &req);
        r.topics[0].partitions[0].error_code
    }

    fn state(c: &mut Conn) -> String {
        let req = DescribeGroupsRequest::default().with_groups(vec![GroupId(sb("p"))]);
        let r: DescribeGroupsResponse = c.call(ApiKey::DescribeGroups, 5, &req);
        r.groups[0].group_state.as_str().to_string()
    }

    #[test]
    fn answers_in_each_state() {
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("data");
        fill(&data, 1);
        let opts = [
            "group.initial.rebalance.delay.ms=0",
            "group.min.session.timeout.ms=200",
        ];
        let s = Server::start(&data, &opts);
        let mut c = Conn::new(&s.addr);
        assert_eq!(
            txn_coordinator(&mut c, "tx"),
            (0, 0),
            "this broker coordinates transactions too"
        );
        let find = FindCoordinatorRequest::default().with_key(sb("p"));
        let r: FindCoordinatorResponse = c.call(ApiKey::FindCoordinator, 2, &find);
        assert_eq!((r.error_code, r.node_id.0), (0, 0));
        assert_eq!(state(&mut c), "Dead", "an unknown group");

        let first = join(&mut c, "", 1000);
        assert_eq!(first.error_code, ResponseError::MemberIdRequired.code());
        let me = first.member_id.as_str().to_string();
        assert!(me.starts_with("commitfs-test-"), "{me}");
        assert_eq!(
            heartbeat(&mut c, &me, 0),
            ResponseError::UnknownMemberId.code()
        );
        let joined = join(&mut c, &me, 1000);
        assert_eq!(joined.error_code, 0);
        assert_eq!(
            (joined.generation_id, joined.leader.as_str()),
            (1, me.as_str())
        );
        assert_eq!(joined.members.len(), 1);
        assert_eq!(state(&mut c), "CompletingRebalance");
        assert_eq!(
            commit(&mut c, &me, 1),
            ResponseError::RebalanceInProgress.code()
        );
        let sync = SyncGroupRequest::default()
            .with_group_id(GroupId(sb("p")))
            .with_generation_id(1)
            .with_member_id(sb(&me))
            .with_assignments(vec![
                SyncGroupRequestAssignment::default()
                    .with_member_id(sb(&me))
                    .with_assignment(Bytes::from_static(b"mine")),
            ]);
        let r: SyncGroupResponse = c.call(ApiKey::SyncGroup, 3, &sync);
        assert_eq!((r.error_code, &r.assignment[..]), (0, &b"mine"[..]));
        assert_eq!(state(&mut c), "Stable");
        assert_eq!(heartbeat(&mut c, &me, 1), 0);
        assert_eq!(
            heartbeat(&mut c, &me, 2),
            ResponseError::IllegalGeneration.code()
        );
        assert_eq!(
            heartbeat(&mut c, "nobody", 1),
            ResponseError::UnknownMemberId.code()
        );
        assert_eq!(commit(&mut c, &me, 1), 0);
        assert_eq!(
            commit(&mut c, &me, 7),
            ResponseError::IllegalGeneration.code()
        );
        assert_eq!(
            commit(&mut c, "", -1),
            ResponseError::UnknownMemberId.code()
        );

        // Silence past the session timeout: the member is removed, the group empties.
        wait_until("the silent member to expire", &s, || {
            state(&mut c) == "Empty"
        });
        assert_eq!(
            heartbeat(&mut c, &me, 1),
            ResponseError::UnknownMemberId.code()
        );
        // An empty group takes commits without membership (generation -1).
        assert_eq!(commit(&mut c, "", -1), 0);
        let leave = LeaveGroupRequest::default()
            .with_group_id(GroupId(sb("p")))
            .with_members(vec![MemberIdentity::default().with_member_id(sb(&me))]);
        let r: LeaveGroupResponse = c.call(ApiKey::LeaveGroup, 3, &leave);
        assert_eq!(
            r.members[0].error_code,
            ResponseError::UnknownMemberId.code()
        );
    }
}
