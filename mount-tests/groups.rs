//! `groups/` on a local mount whose listener is the group coordinator,
//! with consumers we did not write: a kafka-python consumer subscribes
//! and commits, `describe`, `members` and `state` show it as the client
//! and `status` see it; while it is a member, a reset and an rmdir are
//! refused; once it left, a reset through the file is where a
//! confluent-kafka consumer of the group starts; then rmdir deletes the
//! group, which kafka-python's admin client no longer lists.
//!
//! The same groups through a cluster mount of that listener (librdkafka's
//! admin API) read byte for byte as through the local mount, and change
//! as they do.
//!
//! Waits are for states, each bounded; nothing asserts on timing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::harness::Mount;
use crate::kafka_listener::mount_with_listener;
use crate::kafka_support::bounded::wait_within;
use crate::kafka_support::consumer_state::{self, CONFLUENT_CONSUMER};
use crate::kafka_support::{python, require, run_python};

const BOUND: Duration = Duration::from_secs(90);

/// A kafka-python consumer of group `g` on topic `t`: commits after each
/// poll until it has read `limit` records (then only reads), and writes
/// what it read and what the coordinator says it committed to
/// `<name>.state` (`key value` lines), until `stop` exists; then closes (leaving the group).
const KAFKA_PYTHON: &str = r#"
import sys, os, time
from kafka import KafkaConsumer
addr, name, work, limit = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
c = KafkaConsumer('t', bootstrap_servers=addr, group_id='g', client_id=name,
                  enable_auto_commit=False, auto_offset_reset='earliest',
                  session_timeout_ms=6000, heartbeat_interval_ms=500)
count = 0
deadline = time.time() + 150
while not os.path.exists(os.path.join(work, 'stop')) and time.time() < deadline:
    polled = c.poll(timeout_ms=200)
    count += sum(len(m) for m in polled.values())
    if polled and count <= limit:
        c.commit()
    lines = ['count %d' % count,
             'assigned %s' % ','.join(str(p) for p in sorted(tp.partition for tp in c.assignment()))]
    lines += ['committed.%d %s' % (tp.partition, c.committed(tp)) for tp in c.assignment()]
    with open(os.path.join(work, name + '.tmp'), 'w') as f:
        f.write('\n'.join(lines) + '\n')
    os.replace(os.path.join(work, name + '.tmp'), os.path.join(work, name + '.state'))
c.close()
"#;

/// The groups kafka-python's admin client lists.
const LIST_GROUPS: &str = r#"
import sys
from kafka.admin import KafkaAdminClient
a = KafkaAdminClient(bootstrap_servers=sys.argv[1], request_timeout_ms=20000)
# kafka-python 3 names it list_groups and answers dicts; 2 answered tuples.
lister = getattr(a, 'list_groups', None) or a.list_consumer_groups
names = [g.get('group_id', g.get('group')) if isinstance(g, dict) else g[0] for g in lister()]
print(sorted(names))
a.close()
"#;

/// A consumer's `key value` lines.
type State = BTreeMap<String, String>;

fn is(s: &State, key: &str, value: &str) -> bool {
    s.get(key).is_some_and(|v| v == value)
}

/// [`CONFLUENT_CONSUMER`]'s JSON state as a [`State`]: `count` and
/// `first.<partition>`.
fn confluent_state(json: &str) -> State {
    let first = consumer_state::pairs(consumer_state::field(json, "first"));
    (first.into_iter())
        .map(|(p, offset)| (format!("first.{p}"), offset.to_string()))
        .chain([("count".to_string(), consumer_state::count(json).to_string())])
        .collect()
}

/// [`KAFKA_PYTHON`]'s state: its `key value` lines.
fn lines_state(text: &str) -> State {
    text.lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

struct Consumer {
    child: Child,
    state: PathBuf,
    parse: fn(&str) -> State,
    log: PathBuf,
}

impl Consumer {
    /// A kafka-python consumer of group `g` on topic `t` (see
    /// [`KAFKA_PYTHON`]), committing until it has read `limit` records.
    fn kafka_python(py: &Path, addr: &str, name: &str, work: &Path, limit: &str) -> Consumer {
        let args = [addr, name, work.to_str().unwrap(), limit];
        let state = work.join(format!("{name}.state"));
        Consumer::start(py, KAFKA_PYTHON, &args, name, work, (state, lines_state))
    }

    /// A confluent-kafka consumer of group `g` on topic `t`.
    fn confluent(py: &Path, addr: &str, name: &str, work: &Path) -> Consumer {
        let args = [addr, "t", "g", name, work.to_str().unwrap()];
        let state = work.join(format!("{name}.json"));
        Consumer::start(
            py,
            CONFLUENT_CONSUMER,
            &args,
            name,
            work,
            (state, confluent_state),
        )
    }

    /// `script` run with `args`; it writes its state to `state.0`, read
    /// with `state.1`.
    fn start(
        py: &Path,
        script: &str,
        args: &[&str],
        name: &str,
        work: &Path,
        (state, parse): (PathBuf, fn(&str) -> State),
    ) -> Consumer {
        let log = work.join(format!("{name}.log"));
        let child = Command::new(py)
            .arg("-c")
            .arg(script)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start a Python consumer");
        Consumer {
            child,
            state,
            parse,
            log,
        }
    }

    /// The consumer's last state, once `ready` holds of it.
    fn wait(&mut self, what: &str, ready: impl Fn(&State) -> bool) -> State {
        let deadline = Instant::now() + BOUND;
        loop {
            let state = (std::fs::read_to_string(&self.state).ok()).map(|s| (self.parse)(&s));
            if let Some(s) = state.filter(|s| ready(s)) {
                return s;
            }
            if Instant::now() > deadline || self.child.try_wait().ok().flatten().is_some() {
                let _ = self.child.kill();
                panic!(
                    "the consumer never got to {what}; its log:\n{}",
                    std::fs::read_to_string(&self.log).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Stops it through the `stop` file and waits for it to close.
    fn stop(mut self, work: &Path) {
        std::fs::write(work.join("stop"), "").unwrap();
        let status = wait_within(&mut self.child, BOUND);
        let _ = std::fs::remove_file(work.join("stop"));
        assert!(
            status.is_some_and(|s| s.success()),
            "the consumer did not close: {status:?}\n{}",
            std::fs::read_to_string(&self.log).unwrap_or_default()
        );
    }
}

impl Drop for Consumer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `describe`'s rows by partition: the columns after GROUP and TOPIC.
fn rows(describe: &str) -> BTreeMap<i32, Vec<String>> {
    let mut lines = describe.lines().filter(|l| !l.is_empty());
    // kafka-consumer-groups.sh --describe's header.
    let want = "GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID";
    let header: Vec<&str> = lines.next().expect("a header").split_whitespace().collect();
    assert_eq!(header, want.split(' ').collect::<Vec<_>>());
    lines
        .map(|l| {
            let cols: Vec<String> = l.split_whitespace().map(String::from).collect();
            assert_eq!(cols.len(), 9, "{l:?}");
            assert_eq!((cols[0].as_str(), cols[1].as_str()), ("g", "t"));
            (cols[2].parse().unwrap(), cols[3..].to_vec())
        })
        .collect()
}

/// Waits until `file` reads as `ready` says.
fn wait_for_file(m: &Mount, file: &str, what: &str, ready: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + BOUND;
    loop {
        let text = m.ok(&format!("cat {file}"));
        if ready(&text) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "{file} never showed {what}:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn groups_of_the_listeners_coordinator() {
    if !crate::harness::fuse_or_skip() {
        return;
    }
    let Some(py) = require(python()) else { return };
    let (m, addr) = mount_with_listener(&[]);
    let work = tempfile::tempdir().unwrap();
    let work = work.path();
    m.ok("mkdir t-0 t-1 && seq 0 9 >> t-0/log && seq 0 3 >> t-1/log");
    assert_eq!(m.ok("ls groups"), "");

    let mut py_consumer = Consumer::kafka_python(&py, &addr, "py", work, "14");
    let state = py_consumer.wait("its 14 records committed", |s| {
        is(s, "count", "14") && is(s, "committed.0", "10") && is(s, "committed.1", "4")
    });
    assert_eq!(state["assigned"], "0,1");
    // Past its limit it reads but no longer commits: a lag of 5 on t-0.
    m.ok("seq 10 14 >> t-0/log");
    py_consumer.wait("the 5 new records read", |s| is(s, "count", "19"));
    assert_eq!(m.ok("ls groups"), "g\n");
    assert_eq!(m.ok("ls groups/g/offsets"), "t-0\nt-1\n");
    assert_eq!(m.ok("cat groups/g/offsets/t-0"), "10\n");

    let table = rows(&m.ok("cat groups/g/describe"));
    assert_eq!(table.keys().copied().collect::<Vec<_>>(), [0, 1]);
    let member_id = table[&0][3].clone();
    assert!(member_id.starts_with("py-"), "{member_id}");
    for (p, committed) in [(0, 10), (1, 4)] {
        let hw = m.status(&format!("t-{p}"), "high_watermark");
        let row = &table[&p];
        assert_eq!(
            row,
            &[
                committed.to_string(),
                hw.to_string(),
                (hw - committed).to_string(),
                member_id.clone(),
                "/127.0.0.1".to_string(),
                "py".to_string(),
            ],
            "partition {p}"
        );
    }
    let members = m.ok("cat groups/g/members");
    let member_line: Vec<&str> = members.lines().nth(2).unwrap().split_whitespace().collect();
    assert_eq!(
        member_line,
        ["g", member_id.as_str(), "/127.0.0.1", "py", "2"]
    );
    let state = m.ok("cat groups/g/state");
    let state_line: Vec<&str> = state.lines().nth(2).unwrap().split_whitespace().collect();
    let port = addr.rsplit(':').next().unwrap();
    assert_eq!(
        state_line,
        [
            "g",
            &format!("127.0.0.1:{port}"),
            "(0)",
            "range",
            "Stable",
            "1"
        ]
    );

    // A member holds the group: the tool's refusals.
    // `env echo`: dash's own echo reports any failed write as an I/O error.
    m.fails(
        "env echo 0 > groups/g/offsets/t-0",
        "Device or resource busy",
    );
    m.fails("rmdir groups/g", "Directory not empty");
    assert_eq!(m.ok("cat groups/g/offsets/t-0"), "10\n");

    py_consumer.stop(work);
    wait_for_file(&m, "groups/g/state", "Empty", |t| t.contains(" Empty "));
    m.ok("echo 3 > groups/g/offsets/t-0 && echo earliest > groups/g/offsets/t-1");
    assert_eq!(
        m.ok("cat groups/g/offsets/t-0 groups/g/offsets/t-1"),
        "3\n0\n"
    );

    // The next consumer of the group starts where the files say.
    let mut confluent = Consumer::confluent(&py, &addr, "ck", work);
    let state = confluent.wait("all 16 records from the reset offsets", |s| {
        is(s, "count", "16")
    });
    assert_eq!((&*state["first.0"], &*state["first.1"]), ("3", "0"));
    confluent.stop(work);
    let describe = wait_for_file(&m, "groups/g/describe", "its commits", |t| {
        let r = rows(t);
        r.get(&0).is_some_and(|r| r[0] == "15") && r.get(&1).is_some_and(|r| r[0] == "4")
    });
    assert!(
        rows(&describe).values().all(|r| r[2] == "0" && r[3] == "-"),
        "{describe}"
    );

    assert_eq!(run_python(&py, LIST_GROUPS, &[&addr]).trim(), "['g']");
    m.ok("rmdir groups/g");
    assert_eq!(m.ok("ls groups"), "");
    assert_eq!(run_python(&py, LIST_GROUPS, &[&addr]).trim(), "[]");
}

#[test]
fn groups_through_a_cluster_mount_are_the_coordinators() {
    if !crate::harness::fuse_or_skip() {
        return;
    }
    let Some(py) = require(python()) else { return };
    let (a, addr) = mount_with_listener(&[]);
    let work = tempfile::tempdir().unwrap();
    let work = work.path();
    a.ok("mkdir t-0 t-1 && seq 0 9 >> t-0/log && seq 0 3 >> t-1/log");
    let b = Mount::cluster(&addr, &["request.timeout.ms=10000"]);
    assert_eq!(b.ok("ls groups"), "");
    let consumer = Consumer::kafka_python(&py, &addr, "py", work, "14");
    let mut consumer = consumer;
    consumer.wait("its 14 records committed", |s| {
        is(s, "count", "14") && is(s, "committed.0", "10") && is(s, "committed.1", "4")
    });
    assert_eq!(b.ok("ls groups"), "g\n");
    assert_eq!(b.ok("ls groups/g/offsets"), "t-0\nt-1\n");
    for file in ["describe", "members", "state", "offsets/t-0", "offsets/t-1"] {
        let path = format!("groups/g/{file}");
        assert_eq!(
            b.ok(&format!("cat {path}")),
            a.ok(&format!("cat {path}")),
            "{path}"
        );
    }
    b.fails(
        "env echo 0 > groups/g/offsets/t-0",
        "Device or resource busy",
    );
    b.fails("rmdir groups/g", "Directory not empty");
    consumer.stop(work);
    wait_for_file(&b, "groups/g/state", "Empty", |t| t.contains(" Empty "));
    b.ok("echo 2 > groups/g/offsets/t-0 && echo latest > groups/g/offsets/t-1");
    assert_eq!(
        a.ok("cat groups/g/offsets/t-0 groups/g/offsets/t-1"),
        "2\n4\n"
    );
    assert_eq!(b.ok("cat groups/g/describe"), a.ok("cat groups/g/describe"));
    b.ok("rmdir groups/g");
    assert_eq!(a.ok("ls groups"), "");
    assert_eq!(b.ok("ls groups"), "");
}
