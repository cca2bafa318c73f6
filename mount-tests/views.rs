//! Every view of a compacted partition tells one truth: after a pass of
//! the log cleaner, `cat log`, its size, `tail -c`, reads at any position
//! and `ls offset/` of the writer's mount, of a read-only mount following
//! it and of a cluster mount of its listener equal what a new consumer
//! (confluent-kafka, from the beginning, read_uncommitted) reads; so do
//! they after a clean remount and after a kill -9, and `commitfs check`
//! reports a saved stream length that is wrong.

use std::os::unix::fs::FileExt;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::harness::{Mount, fuse_or_skip};
use crate::kafka_listener::{bound_listener, mount_with_listener};
use crate::kafka_support::{BIN, bounded, python, require, run_python};

/// Creates topic `c` as the issue's user did (compacted, 1 MiB segments,
/// a time roll after 100 ms, any dirt cleanable), then produces 4,000
/// records over 40 keys, waits past `segment.ms` and produces one more, so
/// that the time roll seals segment 0 and the background cleaner cleans it.
const PRODUCE_COMPACTED: &str = r#"
import sys, time
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
bs = sys.argv[1]
a = AdminClient({'bootstrap.servers': bs})
configs = {'cleanup.policy': 'compact', 'segment.bytes': '1048576',
           'min.cleanable.dirty.ratio': '0.01', 'segment.ms': '100',
           'min.compaction.lag.ms': '0'}
for f in a.create_topics([NewTopic('c', 1, 1, config=configs)]).values():
    f.result(30)
p = Producer({'bootstrap.servers': bs})
for n in range(4000):
    p.produce('c', key='k%d' % (n % 40), value='k%d-v%d' % (n % 40, n))
    if n % 500 == 0:
        p.poll(0)
assert p.flush(30) == 0
time.sleep(0.3)
p.produce('c', key='kroll', value='roll')
assert p.flush(30) == 0
"#;

/// Every record of partition 0 of topic `argv[2]` from the beginning, as a
/// read_uncommitted consumer reads it: `offset value` lines, until the end.
const CONSUME_ALL: &str = r#"
import sys, time
from confluent_kafka import Consumer, TopicPartition
c = Consumer({'bootstrap.servers': sys.argv[1], 'group.id': 'views',
              'enable.auto.commit': False, 'enable.partition.eof': True,
              'isolation.level': 'read_uncommitted'})
c.assign([TopicPartition(sys.argv[2], 0, 0)])
deadline = time.time() + 60
while time.time() < deadline:
    m = c.poll(0.5)
    if m is None:
        continue
    if m.error():
        if m.error().code() == -191:  # _PARTITION_EOF
            break
        raise SystemExit(str(m.error()))
    print(m.offset(), (m.value() or b'').decode())
else:
    raise SystemExit('no end of partition within 60 s')
c.close()
"#;

/// What a new consumer reads: (offset, value) of each record.
fn consumed(py: &std::path::Path, addr: &str, topic: &str) -> Vec<(i64, String)> {
    run_python(py, CONSUME_ALL, &[addr, topic])
        .lines()
        .map(|l| {
            let (o, v) = l.split_once(' ').unwrap_or((l, ""));
            (o.parse().unwrap(), v.to_string())
        })
        .collect()
}

/// Holds every view of `part` in the mount `m` to `records`: `cat log`,
/// `stat -c %s`, `tail -c`, preads at positions across the stream and
/// past its end, `ls offset/` and `offset/N` of each record.
fn views_match(m: &Mount, part: &str, records: &[(i64, String)], what: &str) {
    let stream: String = records.iter().map(|(_, v)| format!("{v}\n")).collect();
    let offsets: String = records.iter().map(|(o, _)| format!("{o}\n")).collect();
    assert_eq!(m.ok(&format!("cat {part}/log")), stream, "{what}: cat log");
    assert_eq!(
        m.ok(&format!("stat -c %s {part}/log")).trim(),
        stream.len().to_string(),
        "{what}: the size of log"
    );
    let tail = &stream[stream.len().saturating_sub(23)..];
    assert_eq!(
        m.ok(&format!("tail -c 23 {part}/log")),
        tail,
        "{what}: tail -c"
    );
    let f = std::fs::File::open(m.mnt.join(part).join("log")).unwrap();
    let len = stream.len();
    for (pos, n) in [
        (0, 7),
        (len / 3, 50),
        (len / 2, 4096),
        (len - 1, 10),
        (len, 10),
    ] {
        let mut buf = vec![0u8; n];
        let got = f.read_at(&mut buf, pos as u64).unwrap();
        let want = &stream.as_bytes()[pos.min(len)..(pos + n).min(len)];
        assert_eq!(&buf[..got], want, "{what}: pread of {n} at {pos}");
    }
    for pos in [len + 1, len + 4096, len * 10] {
        let got = f.read_at(&mut [0u8; 64], pos as u64).unwrap();
        assert_eq!(got, 0, "{what}: pread past the end at {pos}");
    }
    drop(f);
    assert_eq!(
        m.ok(&format!("ls {part}/offset")),
        offsets,
        "{what}: ls offset/"
    );
    for (o, v) in records {
        assert_eq!(
            &m.ok(&format!("cat {part}/offset/{o}")),
            v,
            "{what}: offset/{o}"
        );
    }
}

/// Waits, bounded, until `cat log` of `part` in `m` prints `stream`.
fn wait_for_stream(m: &Mount, part: &str, stream: &str, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = m.sh(&format!("cat {part}/log"));
        if out.status.success() && out.stdout == stream.as_bytes() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: cat log never showed the {} bytes a consumer reads; last {} bytes\n{}",
            stream.len(),
            out.stdout.len(),
            m.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// 3000 lines `k<n % 20>\tk<n % 20>-v<n>` appended to `c-0` of `w` in
/// writes of 64 KiB: several batches, twenty keys.
fn append_keyed_lines(w: &Mount) {
    let lines: String = (0..3000)
        .map(|n| format!("k{}\tk{}-v{n}\n", n % 20, n % 20))
        .collect();
    let file = w.mnt.parent().unwrap().join("lines");
    std::fs::write(&file, &lines).unwrap();
    w.ok(&format!(
        "dd if={} of=c-0/log bs=65536 oflag=append conv=notrunc status=none",
        file.display()
    ));
}

/// The issue's first sequence, in full: a background pass after a time
/// roll, with no read of `log` in between, through a Kafka client.
#[test]
fn a_background_pass_after_a_time_roll_leaves_every_view_right() {
    if !fuse_or_skip() {
        return;
    }
    let Some(py) = require(python()) else { return };
    let (mut m, addr) = mount_with_listener(&["log.cleaner.backoff.ms=200"]);
    run_python(&py, PRODUCE_COMPACTED, &[&addr]);
    // The background cleaner, not a pass asked for: wait for its summary.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let status = m.ok("cat c-0/status");
        if status.contains("last_clean: [0, 4000) 4000 -> 40 messages") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the cleaner never cleaned [0, 4000):\n{status}\n{}",
            m.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let records = consumed(&py, &addr, "c");
    assert_eq!(records.len(), 41, "{records:?}");
    assert_eq!(records.last().unwrap(), &(4000, "roll".to_string()));
    views_match(&m, "c-0", &records, "after the pass");

    m.unmount_clean();
    m.remount();
    let addr = bound_listener(&m);
    assert_eq!(consumed(&py, &addr, "c"), records);
    views_match(&m, "c-0", &records, "after a clean remount");

    m.kill9();
    m.remount();
    let addr = bound_listener(&m);
    assert_eq!(consumed(&py, &addr, "c"), records);
    views_match(&m, "c-0", &records, "after a kill -9");

    // A saved length its segment's records do not make: `check` names it.
    m.unmount_clean();
    let lengths = m.data.join("c-0").join("commitfs.streamlen");
    let saved = std::fs::read_to_string(&lengths).unwrap();
    let first = saved.lines().next().expect("a saved length").to_string();
    let fields: Vec<&str> = first.split(' ').collect();
    assert_eq!(fields.len(), 4, "base length size inode: {saved}");
    let wrong = format!("{} 37895 {} {}", fields[0], fields[2], fields[3]);
    std::fs::write(&lengths, saved.replacen(&first, &wrong, 1)).unwrap();
    let out = bounded::run(
        Command::new(BIN).arg("check").arg(&m.data),
        "commitfs check",
    );
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains(&format!(
            "segment {}'s saved length is 37895 bytes",
            fields[0]
        )),
        "{text}"
    );
    m.remount();
}

/// The issue's second sequence: a read-only mount of the data directory,
/// following the writer from before the pass (it read the log before the
/// roll), shows the cleaned log as a new consumer reads it.
#[test]
fn a_read_only_follower_shows_a_forced_pass() {
    if !fuse_or_skip() {
        return;
    }
    let Some(py) = require(python()) else { return };
    let (w, addr) = mount_with_listener(&["parse.key=true"]);
    w.ok("mkdir c-0 && echo compact > c-0/config/cleanup.policy");
    let ro = Mount::with(&["ro"], Some(&w.data), &[]);
    append_keyed_lines(&w);
    let before = consumed(&py, &addr, "c");
    assert_eq!(before.len(), 3000);
    let stream: String = before.iter().map(|(_, v)| format!("{v}\n")).collect();
    wait_for_stream(&ro, "c-0", &stream, "the follower before the roll");
    w.ok("echo 1 > c-0/roll");
    w.ok("printf 'kx\\tlast\\n' >> c-0/log");
    w.ok("echo 1 > c-0/compact");
    let after = consumed(&py, &addr, "c");
    assert_eq!(after.len(), 21, "{after:?}");
    views_match(&w, "c-0", &after, "the writer after the pass");
    let stream: String = after.iter().map(|(_, v)| format!("{v}\n")).collect();
    wait_for_stream(&ro, "c-0", &stream, "the follower after the pass");
    views_match(&ro, "c-0", &after, "the follower after the pass");
}

/// The issue's third sequence: a cluster mount of the writer's listener
/// that read the partition before a pass shows the cleaned log once what
/// it fetched of the compacted topic has expired (`cache.compacted.ms`,
/// 1 s here), as a new consumer through the same listener reads it.
#[test]
fn a_cluster_mount_shows_a_pass_behind_its_cache() {
    if !fuse_or_skip() {
        return;
    }
    let Some(py) = require(python()) else { return };
    let (w, addr) = mount_with_listener(&["parse.key=true"]);
    w.ok("mkdir c-0 && echo compact > c-0/config/cleanup.policy");
    append_keyed_lines(&w);
    w.ok("echo 1 > c-0/roll");
    w.ok("printf 'kx\\tlast\\n' >> c-0/log");
    let cm = Mount::cluster(&addr, &["cache.compacted.ms=1000"]);
    let before = consumed(&py, &addr, "c");
    assert_eq!(before.len(), 3001);
    let stream: String = before.iter().map(|(_, v)| format!("{v}\n")).collect();
    assert_eq!(
        cm.ok("cat c-0/log"),
        stream,
        "the cluster mount before the pass"
    );
    w.ok("echo 1 > c-0/compact");
    let after = consumed(&py, &addr, "c");
    assert_eq!(after.len(), 21, "{after:?}");
    let stream: String = after.iter().map(|(_, v)| format!("{v}\n")).collect();
    wait_for_stream(&cm, "c-0", &stream, "the cluster mount after the pass");
    assert_eq!(cm.ok("stat -c %s c-0/log").trim(), stream.len().to_string());
    for (o, v) in &after {
        assert_eq!(&cm.ok(&format!("cat c-0/offset/{o}")), v, "offset/{o}");
    }
}
