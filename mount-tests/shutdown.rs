//! The daemon's shutdown: what a SIGTERM leaves behind with many
//! partitions, and the signal mask that lets the waiting thread, and only
//! it, take the signals that end the daemon. How long a shutdown takes is
//! in `tests/failpoints/shutdown.rs`, where the disk's syncs are made slow.

use crate::harness::{Mount, Tmpfs, fuse_or_skip};

/// SIGHUP, SIGINT, SIGUSR1 and SIGTERM, as bits of `/proc/*/status`'s
/// `SigBlk` (signal n is bit n - 1).
const ENDING_SIGNALS: u64 = 1 << (libc::SIGHUP - 1)
    | 1 << (libc::SIGINT - 1)
    | 1 << (libc::SIGUSR1 - 1)
    | 1 << (libc::SIGTERM - 1);

/// A signal sent to the process goes to any thread that does not block
/// it; one that the waiting thread did not take ends the process with the
/// default action, mid-shutdown, leaving no clean-shutdown marker. The
/// daemon sends itself SIGUSR1 when its session ends, while the waiting
/// thread is still busy with the signal before, so every other thread must
/// block them all.
#[test]
fn every_thread_but_the_waiting_one_blocks_the_ending_signals() {
    if !fuse_or_skip() {
        return;
    }
    let mut m = Mount::new(&[]);
    m.ok("mkdir t-0 && echo a >> t-0/log");
    let pid = m.pid().expect("daemon running");
    let mut threads = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let task = task.unwrap().path();
        let tid: u32 = task.file_name().unwrap().to_str().unwrap().parse().unwrap();
        // The main thread waits in sigwait, which unblocks them while it waits.
        if tid == pid {
            continue;
        }
        let status = std::fs::read_to_string(task.join("status")).unwrap_or_default();
        let Some(blocked) = status.lines().find_map(|l| l.strip_prefix("SigBlk:")) else {
            continue; // gone since the listing
        };
        let name = std::fs::read_to_string(task.join("comm")).unwrap_or_default();
        let blocked = u64::from_str_radix(blocked.trim(), 16).unwrap();
        threads.push((
            name.trim().to_string(),
            blocked & ENDING_SIGNALS == ENDING_SIGNALS,
        ));
    }
    assert!(threads.len() >= 2, "{threads:?}");
    let unblocked: Vec<_> = threads.iter().filter(|(_, b)| !b).collect();
    assert!(
        unblocked.is_empty(),
        "threads that would take a SIGTERM: {unblocked:?}"
    );
    assert!(m.signal_and_wait(libc::SIGTERM).success());
    assert!(m.data.join(".kafka_cleanshutdown").exists());
}

const PARTITIONS: usize = 300;

/// Partitions close side by side and the recovery points are written once,
/// after the last: the checkpoint must still hold every partition's.
#[test]
fn sigterm_with_300_partitions_leaves_every_recovery_point_and_the_marker() {
    if !fuse_or_skip() {
        return;
    }
    let tmp = tempfile::Builder::new()
        .prefix("commitfs-shutdown-")
        .tempdir()
        .unwrap();
    // Small preallocated indexes: 300 active segments on a tmpfs.
    let fs = Tmpfs::mount(&tmp.path().join("fs"), "256m");
    let data = fs.0.join("data");
    let mut m = Mount::with(&["segment.index.bytes=4096"], Some(&data), &[]);
    // Partition i gets i % 3 + 1 records, so that each has its own log end.
    m.ok(&format!(
        "for i in $(seq 0 {}); do mkdir t$i-0 && seq $((i % 3 + 1)) >> t$i-0/log || exit 1; done",
        PARTITIONS - 1
    ));
    assert!(m.signal_and_wait(libc::SIGTERM).success(), "{}", m.log());
    assert!(data.join(".kafka_cleanshutdown").exists(), "{}", m.log());
    let checkpoint =
        std::fs::read_to_string(data.join("recovery-point-offset-checkpoint")).unwrap();
    let mut lines = checkpoint.lines();
    assert_eq!(lines.next(), Some("0"));
    assert_eq!(lines.next(), Some(PARTITIONS.to_string().as_str()));
    let mut points: Vec<(usize, i64)> = lines
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            assert_eq!(f.len(), 3, "{l}");
            assert_eq!(f[1], "0", "{l}");
            (f[0][1..].parse().unwrap(), f[2].parse().unwrap())
        })
        .collect();
    points.sort();
    let want: Vec<(usize, i64)> = (0..PARTITIONS).map(|i| (i, (i % 3 + 1) as i64)).collect();
    assert_eq!(points, want);
    // The next start trusts the marker: nothing is recovered, all is there.
    let before = m.log().len();
    m.remount();
    assert!(
        m.log()[before..].contains("since clean shutdown file was found"),
        "{}",
        m.log()
    );
    assert_eq!(m.ok("cat t297-0/log"), "1\n");
    assert_eq!(m.ok("cat t299-0/log"), "1\n2\n3\n");
    m.unmount_clean();
}
