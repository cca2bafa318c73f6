//! `groups/` over the memory backend, driven through the tree: what each
//! file reads, what a write to an offsets file commits, and the
//! coordinator's refusals as errnos. The figures come from the memory
//! backend's group model, written apart from the tree.

#[path = "support/access.rs"]
mod access;

use std::ffi::OsStr;
use std::sync::Arc;

use commitfs::backend::Backend;
use commitfs::backend::groups::{Committed, Groups, Member, TopicPartition};
use commitfs::backend::mem::MemBackend;
use commitfs::fs::{NoPassthrough, NodeType, Tree};
use commitfs::record::NewRecord;

use access::{READ, ROOT, WRITE};

fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition {
        topic: topic.into(),
        partition,
    }
}

fn commit(offset: i64, partition: TopicPartition) -> Committed {
    Committed {
        partition,
        offset,
        leader_epoch: Some(3),
        metadata: "from a test".into(),
        commit_timestamp: Some(1_700_000_000_123),
    }
}

/// `t-0` with 10 records, `t-1` with 4; group `g` committed 7 on `t-0`.
fn fixture() -> (Arc<MemBackend>, Tree) {
    let mem = Arc::new(MemBackend::new());
    for (name, n) in [("t-0", 10), ("t-1", 4)] {
        mem.create_partition(name).unwrap();
        let p = mem.partition(name).unwrap();
        for i in 0..n {
            let v = format!("v{i}");
            p.append(&[NewRecord::value(v.as_bytes())]).unwrap();
        }
    }
    mem.group_model().commit("g", commit(7, tp("t", 0)));
    let tree = Tree::new(mem.clone());
    (mem, tree)
}

fn ino(t: &Tree, path: &str) -> Result<u64, i32> {
    let mut at = ROOT;
    for part in path.split('/').filter(|s| !s.is_empty()) {
        at = t
            .lookup(at, OsStr::new(part))
            .map_err(|e| e.errno)?
            .attr
            .ino;
    }
    Ok(at)
}

fn read(t: &Tree, path: &str) -> Result<String, i32> {
    let ino = ino(t, path)?;
    let fh = t.open(ino, READ, &NoPassthrough).map_err(|e| e.errno)?.fh;
    let mut out = Vec::new();
    t.read(fh, 0, 1 << 20, &mut out).map_err(|e| e.errno)?;
    t.release(fh).unwrap();
    Ok(String::from_utf8(out).unwrap())
}

fn write(t: &Tree, path: &str, data: &str) -> Result<(), i32> {
    let ino = ino(t, path)?;
    let fh = t.open(ino, WRITE, &NoPassthrough).map_err(|e| e.errno)?.fh;
    let r = t.write(fh, data.as_bytes()).map_err(|e| e.errno);
    t.release(fh).unwrap();
    r.map(|_| ())
}

struct Names(Vec<(String, NodeType)>);

impl commitfs::fs::DirectoryReplier for Names {
    fn add(&mut self, _ino: u64, _cookie: u64, kind: NodeType, name: &str) -> bool {
        if name != "." && name != ".." {
            self.0.push((name.to_string(), kind));
        }
        false
    }
}

fn ls(t: &Tree, path: &str) -> Vec<String> {
    let ino = ino(t, path).unwrap();
    let fh = t.opendir(ino).unwrap();
    let mut names = Names(Vec::new());
    t.readdir(ino, fh, 0, &mut names).unwrap();
    t.releasedir(fh);
    names.0.into_iter().map(|(n, _)| n).collect()
}

fn committed(mem: &MemBackend, group: &str, p: &str) -> Option<i64> {
    mem.group_model()
        .committed(group)
        .ok()?
        .into_iter()
        .find(|c| c.partition.name() == p)
        .map(|c| c.offset)
}

fn member(id: &str, assignment: Vec<TopicPartition>) -> Member {
    Member {
        member_id: id.into(),
        group_instance_id: None,
        client_id: "client".into(),
        host: "/127.0.0.1".into(),
        assignment,
    }
}

#[test]
fn groups_are_listed_beside_the_partitions() {
    let (mem, t) = fixture();
    assert_eq!(ls(&t, ""), ["t-0", "t-1", "groups"]);
    assert_eq!(ls(&t, "groups"), ["g"]);
    assert_eq!(
        ls(&t, "groups/g"),
        ["describe", "members", "state", "offsets"]
    );
    assert_eq!(ls(&t, "groups/g/offsets"), ["t-0"]);
    mem.group_model().commit("h", commit(1, tp("t", 1)));
    assert_eq!(ls(&t, "groups"), ["g", "h"]);
    assert_eq!(ino(&t, "groups/nope"), Err(libc::ENOENT));
    assert_eq!(ino(&t, "groups/g/nope"), Err(libc::ENOENT));
    // A partition that does not exist has no offsets file to write.
    assert_eq!(ino(&t, "groups/g/offsets/t-9"), Err(libc::ENOENT));
    assert_eq!(ino(&t, "groups/g/offsets/junk"), Err(libc::ENOENT));
}

#[test]
fn an_offsets_file_is_the_commit() {
    let (_mem, t) = fixture();
    assert_eq!(read(&t, "groups/g/offsets/t-0").unwrap(), "7\n");
    let i = ino(&t, "groups/g/offsets/t-0").unwrap();
    let attr = t.getattr(i).unwrap().0;
    assert_eq!(attr.size, 2);
    let ms = attr
        .mtime
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    assert_eq!(ms, 1_700_000_000_123);
    let x = |name: &str| String::from_utf8(t.getxattr(i, OsStr::new(name)).unwrap()).unwrap();
    assert_eq!(x("user.kafka.metadata"), "from a test");
    assert_eq!(x("user.kafka.leader_epoch"), "3");
    assert_eq!(x("user.kafka.commit_timestamp"), "1700000000123");
    // A partition the group never committed reads empty until a reset.
    assert_eq!(read(&t, "groups/g/offsets/t-1").unwrap(), "");
}

#[test]
fn a_write_resets_as_the_tool_does() {
    let (mem, t) = fixture();
    let file = "groups/g/offsets/t-0";
    for (value, want) in [
        ("3\n", 3),
        ("earliest\n", 0),
        ("latest\n", 10),
        // --to-offset outside the log is clamped to its ends.
        ("25\n", 10),
        ("0", 0),
        // --to-datetime: before every record, the first; after, the end.
        ("@0\n", 0),
        ("@99999999999999\n", 10),
    ] {
        write(&t, file, value).unwrap();
        assert_eq!(committed(&mem, "g", "t-0"), Some(want), "{value:?}");
        assert_eq!(read(&t, file).unwrap(), format!("{want}\n"));
    }
    // A partition with no commit yet gets one.
    write(&t, "groups/g/offsets/t-1", "2").unwrap();
    assert_eq!(committed(&mem, "g", "t-1"), Some(2));
    assert_eq!(ls(&t, "groups/g/offsets"), ["t-0", "t-1"]);
    for bad in ["", "-1", "x", "007", "@", "@x", "1 2", "earliest latest"] {
        assert_eq!(write(&t, file, bad), Err(libc::EINVAL), "{bad:?}");
    }
    assert_eq!(committed(&mem, "g", "t-0"), Some(10));
}

/// `--to-datetime` resolves through the partition's timestamps: the first
/// offset whose timestamp is at or after the time.
#[test]
fn a_time_resets_to_the_first_offset_at_or_after_it() {
    let (mem, t) = fixture();
    let ts = |n: i64| -> i64 {
        let i = ino(&t, &format!("t-0/offset/{n}")).unwrap();
        let v = t.getxattr(i, OsStr::new("user.kafka.timestamp")).unwrap();
        String::from_utf8(v).unwrap().parse().unwrap()
    };
    let stamps: Vec<i64> = (0..10).map(ts).collect();
    for n in [0, 4, 9] {
        let at = stamps[n];
        let want = stamps.iter().position(|s| *s >= at).unwrap() as i64;
        write(&t, "groups/g/offsets/t-0", &format!("@{at}\n")).unwrap();
        assert_eq!(committed(&mem, "g", "t-0"), Some(want), "@{at}");
    }
}

#[test]
fn an_active_group_refuses_resets_and_deletes() {
    let (mem, t) = fixture();
    mem.group_model()
        .join("g", "range", member("m-1", vec![tp("t", 0)]));
    assert_eq!(write(&t, "groups/g/offsets/t-0", "0"), Err(libc::EBUSY));
    assert_eq!(committed(&mem, "g", "t-0"), Some(7));
    let groups = ino(&t, "groups").unwrap();
    assert_eq!(
        t.rmdir(groups, OsStr::new("g")).map_err(|e| e.errno),
        Err(libc::ENOTEMPTY)
    );
    assert_eq!(ls(&t, "groups"), ["g"]);
    mem.group_model().leave("g", "m-1");
    write(&t, "groups/g/offsets/t-0", "0").unwrap();
    assert_eq!(committed(&mem, "g", "t-0"), Some(0));
    t.rmdir(groups, OsStr::new("g")).unwrap();
    assert!(ls(&t, "groups").is_empty());
    assert_eq!(ino(&t, "groups/g"), Err(libc::ENOENT));
    assert_eq!(
        t.rmdir(groups, OsStr::new("g")).map_err(|e| e.errno),
        Err(libc::ENOENT)
    );
    assert!(mem.group_model().list().unwrap().is_empty());
}

#[test]
fn a_read_only_mount_reads_groups_and_changes_nothing() {
    let (mem, _) = fixture();
    mem.set_read_only(true);
    let t = Tree::new(mem.clone());
    assert_eq!(read(&t, "groups/g/offsets/t-0").unwrap(), "7\n");
    assert_eq!(write(&t, "groups/g/offsets/t-0", "0"), Err(libc::EROFS));
    let groups = ino(&t, "groups").unwrap();
    assert_eq!(
        t.rmdir(groups, OsStr::new("g")).map_err(|e| e.errno),
        Err(libc::EROFS)
    );
    assert_eq!(committed(&mem, "g", "t-0"), Some(7));
    let perm = t
        .getattr(ino(&t, "groups/g/offsets/t-0").unwrap())
        .unwrap()
        .0
        .perm;
    assert_eq!(perm & 0o222, 0);
}

#[test]
fn groups_cannot_be_made_or_removed_as_a_whole() {
    let (_mem, t) = fixture();
    assert_eq!(
        t.rmdir(ROOT, OsStr::new("groups")).map_err(|e| e.errno),
        Err(libc::EPERM)
    );
    assert_eq!(
        t.mkdir(ROOT, OsStr::new("groups")).map_err(|e| e.errno),
        Err(libc::EEXIST)
    );
}

/// The tables as the tool's format strings lay them out (the expected
/// text is written from `ConsumerGroupCommand`'s formats, not from ours).
#[test]
fn describe_is_the_tools_table() {
    let (mem, t) = fixture();
    // An Empty group: only the partitions it committed, no member.
    assert_eq!(
        read(&t, "groups/g/describe").unwrap(),
        "\nGROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG             CONSUMER-ID     HOST            CLIENT-ID\
         \ng               t               0          7               10              3               -               -               -\n"
    );
    assert_eq!(
        read(&t, "groups/g/members").unwrap(),
        "\nGROUP           CONSUMER-ID     HOST            CLIENT-ID       #PARTITIONS     \n"
    );
    assert_eq!(
        read(&t, "groups/g/state").unwrap(),
        "\nGROUP                     COORDINATOR (ID)          ASSIGNMENT-STRATEGY  STATE           #MEMBERS\
         \ng                         -                                              Empty           0\n"
    );
    // A member holding both partitions; t-1 has no commit: no lag.
    let long_id = "consumer-g-1-0123456789abcdef";
    mem.group_model()
        .join("g", "range", member(long_id, vec![tp("t", 0), tp("t", 1)]));
    let describe = read(&t, "groups/g/describe").unwrap();
    let lines: Vec<&str> = describe.lines().collect();
    assert_eq!(lines[0], "");
    assert_eq!(
        lines[1],
        "GROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG             CONSUMER-ID                   HOST            CLIENT-ID"
    );
    let mut rows = lines[2..].to_vec();
    rows.sort();
    assert_eq!(
        rows,
        [
            "g               t               0          7               10              3               consumer-g-1-0123456789abcdef /127.0.0.1      client",
            "g               t               1          -               4               -               consumer-g-1-0123456789abcdef /127.0.0.1      client",
        ]
    );
    assert_eq!(
        read(&t, "groups/g/members").unwrap(),
        "\nGROUP           CONSUMER-ID                   HOST            CLIENT-ID       #PARTITIONS     \
         \ng               consumer-g-1-0123456789abcdef /127.0.0.1      client          2               \n"
    );
    let state = read(&t, "groups/g/state").unwrap();
    assert!(
        state.ends_with("range                Stable          1\n"),
        "{state:?}"
    );
    // Sizes are the texts' (a `cat` reads to the size the kernel saw).
    let i = ino(&t, "groups/g/describe").unwrap();
    assert_eq!(t.getattr(i).unwrap().0.size, describe.len() as u64);
}

fn fixture_bytes(name: &str) -> Vec<u8> {
    std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/kafka/konsumer-offsets")
            .join(name),
    )
    .unwrap()
}

/// A read-only mount of `dir`, its groups from the tree's own coordinator.
fn read_only_tree(dir: &std::path::Path) -> Tree {
    use commitfs::backend::local::LocalBackend;
    use commitfs::kafka::group::admin::CoordinatorGroups;
    use commitfs::kafka::group::coordinator::GroupSettings;
    use commitfs::storage::{LogConfig, LogManager, OpenOptions};
    let ro = OpenOptions {
        read_only: true,
        ..Default::default()
    };
    let mgr = Arc::new(LogManager::open(dir, LogConfig::default(), ro).unwrap());
    let groups = Arc::new(CoordinatorGroups::standalone(
        mgr.clone(),
        GroupSettings::default(),
    ));
    Tree::new(Arc::new(LocalBackend::new(mgr).with_groups(groups)))
}

/// A read-only mount of a directory whose `__consumer_offsets` holds a
/// Kafka cluster's own records (`tests/fixtures/kafka/konsumer-offsets`).
fn broker_directory(records: &[(&str, bool)]) -> (tempfile::TempDir, Tree) {
    use commitfs::storage::{LogConfig, LogManager, OpenOptions};
    let tmp = tempfile::tempdir().unwrap();
    let mgr = LogManager::open(tmp.path(), LogConfig::default(), OpenOptions::default()).unwrap();
    for name in ["t01-0", "t01-1", "t01-2", "__consumer_offsets-0"] {
        mgr.create_partition(name).unwrap();
    }
    let log = mgr.partition("__consumer_offsets-0").unwrap();
    for (name, tombstone) in records {
        let key = fixture_bytes(&format!("{name}.key"));
        let value = fixture_bytes(&format!("{name}.payload"));
        log.append(&[NewRecord {
            key: Some(&key),
            value: (!tombstone).then_some(&value[..]),
            headers: &[],
        }])
        .unwrap();
    }
    drop(log);
    mgr.close().unwrap();
    let tree = read_only_tree(tmp.path());
    (tmp, tree)
}

/// A fixture record's value, read field by field by Kafka's own schemas
/// (`OffsetCommitValue` v3 and `GroupMetadataValue` v3 of the group
/// coordinator's JSON specs, non-flexible), here and not by commitfs's
/// decoder, whose output would make the test its own oracle.
struct Fields(std::collections::BTreeMap<&'static str, String>);

impl Fields {
    fn get(&self, name: &str) -> String {
        self.0
            .get(name)
            .unwrap_or_else(|| panic!("no {name}"))
            .clone()
    }
}

/// A big-endian reader of Kafka's non-flexible types.
struct Wire<'a>(&'a [u8]);

impl Wire<'_> {
    fn take(&mut self, n: usize) -> &[u8] {
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        a
    }
    fn int16(&mut self) -> i16 {
        i16::from_be_bytes(self.take(2).try_into().unwrap())
    }
    fn int32(&mut self) -> i32 {
        i32::from_be_bytes(self.take(4).try_into().unwrap())
    }
    fn int64(&mut self) -> i64 {
        i64::from_be_bytes(self.take(8).try_into().unwrap())
    }
    /// STRING or NULLABLE_STRING ("-" for null).
    fn string(&mut self) -> String {
        match self.int16() {
            -1 => "-".to_string(),
            n => String::from_utf8(self.take(n as usize).to_vec()).unwrap(),
        }
    }
    fn bytes(&mut self) {
        let n = self.int32();
        if n > 0 {
            self.take(n as usize);
        }
    }
}

fn decoded(name: &str) -> Fields {
    let bytes = fixture_bytes(&format!("{name}.payload"));
    let mut w = Wire(&bytes);
    let version = w.int16();
    let mut f = std::collections::BTreeMap::new();
    if name.starts_with("offset_commit") {
        assert_eq!(version, 3, "{name}: the fixtures are OffsetCommitValue v3");
        f.insert("offset", w.int64().to_string());
        f.insert("leaderEpoch", w.int32().to_string());
        f.insert("metadata", w.string());
        f.insert("commitTimestamp", w.int64().to_string());
    } else {
        assert_eq!(version, 3, "{name}: the fixtures are GroupMetadataValue v3");
        f.insert("protocolType", w.string());
        f.insert("generation", w.int32().to_string());
        f.insert("protocol", w.string());
        f.insert("leader", w.string());
        f.insert("currentStateTimestamp", w.int64().to_string());
        let members = w.int32();
        assert_eq!(members, 1, "{name}: one member");
        f.insert("memberId", w.string());
        f.insert("groupInstanceId", w.string());
        f.insert("clientId", w.string());
        f.insert("clientHost", w.string());
        f.insert("rebalanceTimeout", w.int32().to_string());
        f.insert("sessionTimeout", w.int32().to_string());
        w.bytes();
        w.bytes();
    }
    assert!(w.0.is_empty(), "{name}: {} bytes left over", w.0.len());
    Fields(f)
}

/// What a broker loads from its `__consumer_offsets`: the latest commit
/// of each partition, a group whose only commit a tombstone deleted gone,
/// a group's metadata with its member and assignment.
#[test]
fn a_read_only_broker_directory_shows_what_the_broker_loads() {
    let (_tmp, t) = broker_directory(&[
        ("offset_commit-01", false),
        ("offset_commit-03", false),
        ("group_metadata-01", false),
        ("offset_commit-05", false),
        // The only partition the other group committed, deleted.
        ("offset_commit-01", true),
    ]);
    let g = "kafkesc-devcluster-group-id";
    assert_eq!(ls(&t, "groups"), [g]);
    assert_eq!(ls(&t, &format!("groups/{g}/offsets")), ["t01-0"]);
    let commit = decoded("offset_commit-05");
    let offset = commit.get("offset");
    assert_eq!(
        read(&t, &format!("groups/{g}/offsets/t01-0")).unwrap(),
        format!("{offset}\n")
    );
    let i = ino(&t, &format!("groups/{g}/offsets/t01-0")).unwrap();
    let x = |n: &str| {
        t.getxattr(i, OsStr::new(n))
            .map(|v| String::from_utf8(v).unwrap())
    };
    assert_eq!(
        x("user.kafka.commit_timestamp").unwrap(),
        commit.get("commitTimestamp")
    );
    assert_eq!(x("user.kafka.metadata").unwrap(), commit.get("metadata"));
    // leaderEpoch -1: none.
    assert_eq!(commit.get("leaderEpoch"), "-1");
    assert_eq!(
        x("user.kafka.leader_epoch").map_err(|e| e.errno),
        Err(libc::ENODATA)
    );

    let metadata = decoded("group_metadata-01");
    let member = metadata.get("memberId");
    let host = metadata.get("clientHost");
    let client = metadata.get("clientId");
    let members = read(&t, &format!("groups/{g}/members")).unwrap();
    let row: Vec<&str> = members.lines().nth(2).unwrap().split_whitespace().collect();
    assert_eq!(row, [g, &member, &host, &client, "3"]);
    let state = read(&t, &format!("groups/{g}/state")).unwrap();
    let row: Vec<&str> = state.lines().nth(2).unwrap().split_whitespace().collect();
    assert_eq!(row, [g, "-", &metadata.get("protocol"), "Stable", "1"]);
    // The member's three partitions in the tool's order (Java's HashMap
    // buckets of TopicPartition("t01", p): 4, 5 and 7), the log end
    // offsets of this directory's empty partitions.
    let describe = read(&t, &format!("groups/{g}/describe")).unwrap();
    let rows: Vec<Vec<&str>> = describe
        .lines()
        .skip(2)
        .map(|l| l.split_whitespace().collect())
        .collect();
    let lag = format!("-{offset}");
    assert_eq!(
        rows,
        [
            vec![g, "t01", "1", "-", "0", "-", &member, &host, &client],
            vec![g, "t01", "2", "-", "0", "-", &member, &host, &client],
            vec![g, "t01", "0", &offset, "0", &lag, &member, &host, &client],
        ]
    );
    // Read-only: nothing changes.
    assert_eq!(
        write(&t, &format!("groups/{g}/offsets/t01-0"), "0"),
        Err(libc::EROFS)
    );
}

/// A group deleted behind the tree's back (a client's DeleteGroups) is
/// gone for the inodes the kernel kept too.
#[test]
fn a_group_deleted_elsewhere_is_gone_from_kept_inodes() {
    use commitfs::backend::local::LocalBackend;
    use commitfs::kafka::group::admin::CoordinatorGroups;
    use commitfs::kafka::group::coordinator::GroupSettings;
    use commitfs::storage::{LogConfig, LogManager, OpenOptions};
    let tmp = tempfile::tempdir().unwrap();
    let mgr = Arc::new(
        LogManager::open(tmp.path(), LogConfig::default(), OpenOptions::default()).unwrap(),
    );
    mgr.create_partition("t-0").unwrap();
    let groups = Arc::new(CoordinatorGroups::standalone(
        mgr.clone(),
        GroupSettings::default(),
    ));
    let t = Tree::new(Arc::new(
        LocalBackend::new(mgr.clone()).with_groups(groups.clone()),
    ));
    groups
        .reset(
            "g",
            &[commitfs::backend::groups::Reset {
                partition: tp("t", 0),
                offset: 0,
            }],
        )
        .unwrap();
    let g = ino(&t, "groups/g").unwrap();
    let offsets = ino(&t, "groups/g/offsets").unwrap();
    assert_eq!(read(&t, "groups/g/offsets/t-0").unwrap(), "0\n");
    groups.delete("g").unwrap();
    for i in [g, offsets] {
        assert_eq!(
            t.getattr(i).map(|_| ()).map_err(|e| e.errno),
            Err(libc::ENOENT)
        );
    }
    mgr.close().unwrap();
}

/// A read-only mount of a directory a broker keeps writing: `groups/`
/// follows its commits (within the tree's follow interval), as `status`
/// follows its appends.
#[test]
fn a_read_only_mount_follows_new_commits() {
    use commitfs::storage::{LogConfig, LogManager, OpenOptions};
    let tmp = tempfile::tempdir().unwrap();
    let writer =
        LogManager::open(tmp.path(), LogConfig::default(), OpenOptions::default()).unwrap();
    for name in ["t01-0", "__consumer_offsets-0"] {
        writer.create_partition(name).unwrap();
    }
    let offsets = writer.partition("__consumer_offsets-0").unwrap();
    let append = |name: &str| {
        let (k, v) = (
            fixture_bytes(&format!("{name}.key")),
            fixture_bytes(&format!("{name}.payload")),
        );
        offsets
            .append(&[NewRecord {
                key: Some(&k),
                value: Some(&v),
                headers: &[],
            }])
            .unwrap();
        offsets.flush().unwrap();
    };
    append("offset_commit-03");
    let t = read_only_tree(tmp.path());
    let file = "groups/kafkesc-devcluster-group-id/offsets/t01-0";
    let first = decoded("offset_commit-03").get("offset");
    assert_eq!(read(&t, file).unwrap(), format!("{first}\n"));
    append("offset_commit-05");
    let later = decoded("offset_commit-05").get("offset");
    assert_ne!(first, later);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while read(&t, file).unwrap() != format!("{later}\n") {
        assert!(
            std::time::Instant::now() < deadline,
            "the later commit never showed"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    drop(offsets);
    writer.close().unwrap();
}
