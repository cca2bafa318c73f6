//! Refusals and their errnos, and the admin side (mkdir, rmdir,
//! delete-records, configs): positive on a broker that serves the admin
//! APIs, a bounded failure on the mock cluster, which serves none.

use std::ffi::OsStr;

use crate::fixture::{Kind, ROOT, fixture, unique_topic};

on_every_cluster!(
    refusals_and_their_errnos,
    admin_operations,
    a_read_only_mount_refuses_every_change,
);

fn refusals_and_their_errnos(kind: Kind) {
    let f = fixture(kind, 1, 5000, |_| {});
    let p = f.p(0);
    f.write(&format!("{p}/log"), b"x\n").unwrap();
    let dir = f.ino(&p).unwrap();
    let names = f.names(dir);
    assert_eq!(
        names,
        [
            ".",
            "..",
            "log",
            "offset",
            "time",
            "delete-records",
            "config",
            "status"
        ],
        "no raw files, roll or flush over a cluster"
    );
    for absent in ["roll", "flush", "00000000000000000000.log"] {
        assert_eq!(
            f.ino(&format!("{p}/{absent}")),
            Err(libc::ENOENT),
            "{absent}"
        );
    }
    assert_eq!(f.ino(&format!("{p}/offset/007")), Err(libc::ENOENT));
    assert_eq!(f.ino(&format!("{p}/offset/1")), Err(libc::ENOENT));
    assert_eq!(
        f.open(&format!("{p}/status"), false, true),
        Err(libc::EACCES)
    );
    assert_eq!(
        f.open(&format!("{p}/offset/0"), false, true),
        Err(libc::EACCES)
    );
    assert_eq!(
        f.open(&format!("{p}/delete-records"), true, false),
        Err(libc::EACCES)
    );
    let dr = format!("{p}/delete-records");
    assert_eq!(f.write(&dr, b"abc\n"), Err(libc::EINVAL));
    assert_eq!(f.write(&dr, b"99\n"), Err(libc::EINVAL), "past the log end");
    let e = f.tree.unlink("unlink", dir, OsStr::new("log"));
    assert_eq!(e.errno, libc::EPERM);
    let o0 = f.ino(&format!("{p}/offset/0")).unwrap();
    let e = f
        .tree
        .refuse_xattr_change("setxattr", o0, OsStr::new("user.x"));
    assert_eq!(e.errno, libc::EPERM);
    // A record over message.max.bytes (the client's, 1000000 by default).
    let big = vec![b'a'; 1_000_001];
    assert_eq!(
        f.write(&format!("{p}/log"), &[&big[..], b"\n"].concat()),
        Err(libc::EMSGSIZE)
    );
    // mkdir: bad names, existing partitions, holes.
    assert_eq!(f.mkdir("no_partition"), Err(libc::EINVAL));
    assert_eq!(f.mkdir(&format!("{}--1", f.topic)), Err(libc::EINVAL));
    assert_eq!(f.mkdir(&p), Err(libc::EEXIST));
    assert_eq!(f.mkdir(&f.p(5)), Err(libc::EINVAL), "a hole");
    assert_eq!(
        f.mkdir(&format!("{}-1", unique_topic())),
        Err(libc::EINVAL),
        "a hole"
    );
    // rmdir: a cluster cannot take one partition away.
    if f.full() {
        f.mkdir(&f.p(1)).unwrap();
        assert_eq!(f.rmdir(&f.p(1)), Err(libc::EPERM));
        assert_eq!(f.rmdir(&p), Err(libc::EPERM));
        let e = f.write(&format!("{p}/config/retention.ms"), b"-7\n");
        assert_eq!(e, Err(libc::EINVAL));
    }
    assert_eq!(f.rmdir(&format!("{}-0", unique_topic())), Err(libc::ENOENT));
}

fn admin_operations(kind: Kind) {
    // The mock cluster's refusals come at the timeout: keep it short there.
    let timeout = if kind == Kind::Mock { 1500 } else { 10_000 };
    let f = fixture(kind, 1, timeout, |_| {});
    let p = f.p(0);
    f.write(&format!("{p}/log"), b"a\nb\nc\nd\n").unwrap();
    let new_topic = format!("{}-0", unique_topic());
    if !f.full() {
        // The mock cluster serves none of the admin APIs. librdkafka says so
        // for the requests it sends to a partition's leader (EOPNOTSUPP) and
        // waits for a controller that serves them for the others, until the
        // request timeout (ETIMEDOUT). Either way a log line says what.
        let refused = |what: &str, r: Result<(), i32>| {
            let e = r.unwrap_err();
            assert!(
                [libc::ETIMEDOUT, libc::EOPNOTSUPP].contains(&e),
                "{what}: {e}"
            );
        };
        refused("mkdir of a topic", f.mkdir(&new_topic));
        refused("mkdir of a partition", f.mkdir(&f.p(1)));
        refused(
            "delete-records",
            f.write(&format!("{p}/delete-records"), b"2\n"),
        );
        refused(
            "config read",
            f.read(&format!("{p}/config/retention.ms")).map(drop),
        );
        refused(
            "config write",
            f.write(&format!("{p}/config/retention.ms"), b"1\n"),
        );
        return;
    }
    // delete-records moves the log start; the stream loses its front.
    f.write(&format!("{p}/delete-records"), b"2\n").unwrap();
    assert_eq!(f.status(&p, "log_start_offset"), 2);
    assert_eq!(f.ino(&format!("{p}/offset/1")), Err(libc::ENOENT));
    assert_eq!(f.text(&format!("{p}/offset/2")), "c");
    assert_eq!(f.text(&format!("{p}/log")), "c\nd\n");
    assert_eq!(f.size(&format!("{p}/log")), Ok(4));
    f.write(&format!("{p}/delete-records"), b"-1\n").unwrap();
    assert_eq!(f.status(&p, "log_start_offset"), 4);
    assert_eq!(f.text(&format!("{p}/log")), "");
    // Configs: DescribeConfigs and IncrementalAlterConfigs on the topic.
    let rt = format!("{p}/config/retention.ms");
    f.write(&rt, b"86400000\n").unwrap();
    assert_eq!(f.text(&rt), "86400000\n");
    // mkdir of the next partition: every client of the mount learns it.
    let p1 = f.p(1);
    f.mkdir(&p1).unwrap();
    f.write(&format!("{p1}/log"), b"one\n").unwrap();
    assert_eq!(f.text(&format!("{p1}/offset/0")), "one");
    assert_eq!(f.size(&format!("{p1}/log")), Ok(4));
    // mkdir: a new topic, its next partition; rmdir of a one-partition topic.
    f.mkdir(&new_topic).unwrap();
    f.write(&format!("{new_topic}/log"), b"z\n").unwrap();
    assert_eq!(f.text(&format!("{new_topic}/offset/0")), "z");
    let root = f.names(ROOT);
    assert!(root.contains(&new_topic), "{root:?}");
    f.rmdir(&new_topic).unwrap();
    assert_eq!(f.ino(&new_topic), Err(libc::ENOENT));
}

fn a_read_only_mount_refuses_every_change(kind: Kind) {
    let f = fixture(kind, 1, 5000, |o| o.read_only = true);
    let p = f.p(0);
    assert_eq!(f.open(&format!("{p}/log"), false, true), Err(libc::EROFS));
    assert_eq!(f.mkdir(&f.p(1)), Err(libc::EROFS));
    assert_eq!(f.text(&format!("{p}/log")), "");
}
