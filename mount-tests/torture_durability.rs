//! Durability: with `flush.messages=1` every acknowledged write has been
//! fsynced before the write returned.
//!
//! Two honest witnesses: the daemon's own counters (the recovery point only
//! moves after the `.log` fsync returned, and `status` counts `.log` fsyncs),
//! and, where `strace` is installed, the system calls themselves: every
//! `pwrite64` to a `.log` is followed by an `fdatasync` of that file on the
//! same thread before the thread answers the kernel on `/dev/fuse`.

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::mount;
use crate::torture_util::{append, status};

#[test]
fn flush_messages_1_fsyncs_every_acknowledged_write() {
    let m = mount!("flush.messages=1");
    m.ok("mkdir t-0");
    let writes = 50;
    for i in 0..writes {
        let before = status(&m, "t-0", "fsyncs");
        append(&m, "t-0", format!("a-{i}\nb-{i}\nc-{i}\n").as_bytes()).unwrap();
        let leo = status(&m, "t-0", "log_end_offset");
        assert_eq!(leo, 3 * (i + 1));
        // The recovery point moves only after fdatasync of the .log returned.
        assert_eq!(status(&m, "t-0", "recovery_point"), leo, "write {i}");
        assert!(status(&m, "t-0", "fsyncs") > before, "write {i}: no fsync");
        let cp = std::fs::read_to_string(m.data.join("recovery-point-offset-checkpoint")).unwrap();
        assert!(cp.lines().any(|l| l == format!("t 0 {leo}")), "{cp}");
    }
    println!(
        "durability: {writes} writes with flush.messages=1, {} .log fsyncs counted",
        status(&m, "t-0", "fsyncs")
    );
}

#[test]
fn strace_shows_fdatasync_before_each_write_is_answered() {
    if Command::new("strace").arg("-V").output().is_err() {
        println!("skipping: strace is not installed (apt-get install strace)");
        return;
    }
    let m = mount!("flush.messages=1");
    m.ok("mkdir t-0");
    let trace = m.data.parent().unwrap().join("strace.out");
    let mut strace = Command::new("strace")
        .args([
            "-f",
            "-qq",
            "-y",
            "-e",
            "trace=pwrite64,fdatasync,fsync,write,writev",
        ])
        .arg("-o")
        .arg(&trace)
        .arg("-p")
        .arg(m.pid().unwrap().to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("strace");
    // Wait until strace has attached (its output file exists and the daemon is traced).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let status = std::fs::read_to_string(format!("/proc/{}/status", m.pid().unwrap())).unwrap();
        if status
            .lines()
            .any(|l| l.starts_with("TracerPid:") && l.split_whitespace().nth(1) != Some("0"))
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "strace did not attach"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    let writes = 20;
    for i in 0..writes {
        append(&m, "t-0", format!("x-{i}\ny-{i}\n").as_bytes()).unwrap();
    }
    // SAFETY: interrupting our own child; strace detaches on SIGINT.
    unsafe { libc::kill(strace.id() as i32, libc::SIGINT) };
    strace.wait().unwrap();
    let text = std::fs::read_to_string(&trace).unwrap();
    // Per thread: .log paths written and not yet synced.
    let mut dirty: HashMap<String, Vec<String>> = HashMap::new();
    let (mut pwrites, mut syncs, mut replies_checked) = (0, 0, 0);
    for l in text.lines() {
        let Some((tid, call)) = l.split_once(' ') else {
            continue;
        };
        let call = call.trim_start();
        let path = call
            .split_once('<')
            .and_then(|(_, r)| r.split_once('>'))
            .map(|(p, _)| p.to_string())
            .unwrap_or_default();
        if call.starts_with("pwrite64(") && path.ends_with(".log") {
            pwrites += 1;
            dirty.entry(tid.to_string()).or_default().push(path);
        } else if (call.starts_with("fdatasync(") || call.starts_with("fsync("))
            && path.ends_with(".log")
        {
            syncs += 1;
            if let Some(d) = dirty.get_mut(tid) {
                d.retain(|p| *p != path);
            }
        } else if (call.starts_with("write(") || call.starts_with("writev(")) && path == "/dev/fuse"
        {
            let d = dirty.entry(tid.to_string()).or_default();
            assert!(
                d.is_empty(),
                "thread {tid} answered the kernel before syncing {d:?}:\n{text}"
            );
            replies_checked += 1;
        }
    }
    assert!(
        pwrites >= writes,
        "saw {pwrites} pwrite64 calls to .log files:\n{text}"
    );
    println!(
        "durability (strace): {writes} writes, {pwrites} pwrite64 to .log, {syncs} fdatasync/fsync of .log, \
         {replies_checked} replies on /dev/fuse, none before its sync"
    );
}
