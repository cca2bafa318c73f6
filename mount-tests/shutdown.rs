//! The daemon's shutdown: the signal mask that lets the waiting thread,
//! and only it, take the signals that end the daemon.

use crate::harness::{Mount, fuse_or_skip};

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
