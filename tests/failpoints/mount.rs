//! Faults at run time, seen through a real mount: the daemon is this
//! package's `commitfs` built with the `failpoints` feature, which takes
//! its failpoints from FAILPOINTS. An I/O error in a write, and a panic in
//! the handler of a write, each reach the shell as EIO; the partition goes
//! offline (reads refused too, `status` says why), the daemon and the other
//! partitions carry on, and a remount recovers it. Needs root and
//! /dev/fuse, as the mount tests do.

use crate::harness::{Mount, fuse_or_skip, umount};

/// A mount whose daemon has `failpoints` set, with partitions t-0 and u-0.
fn mount_with(failpoints: &str) -> Mount {
    let m = Mount::with(&[], None, &[("FAILPOINTS", failpoints)]);
    m.ok("mkdir t-0 u-0");
    m
}

/// After the fault on t-0: every operation on it is EIO, `status` names
/// the cause, u-0 carries on; then a remount without faults recovers t-0
/// with nothing of the failed write and keeps u-0's record.
fn offline_then_recovered(mut m: Mount, cause: &str) {
    let status = m.ok("cat t-0/status");
    assert!(
        status.starts_with("offline: ") && status.contains(cause),
        "status: {status}"
    );
    m.fails("cat t-0/log", "Input/output error");
    m.fails(
        "/usr/bin/printf 'again\\n' >> t-0/log",
        "Input/output error",
    );
    m.ok("echo b >> u-0/log");
    assert_eq!(m.ok("cat u-0/offset/0"), "b");
    assert!(!m.exited(), "the daemon died:\n{}", m.log());
    // The unmount leaves no clean-shutdown marker: the remount recovers.
    if let Err(e) = umount(&m.mnt) {
        panic!("{e}\n{}", m.log());
    }
    m.wait();
    assert!(!m.data.join(".kafka_cleanshutdown").exists());
    m.env.clear();
    m.remount();
    assert_eq!(
        m.status("t-0", "log_end_offset"),
        0,
        "nothing of the failed write"
    );
    m.ok("echo c >> t-0/log");
    assert_eq!(m.ok("cat t-0/log"), "c\n");
    assert_eq!(m.ok("cat u-0/log"), "b\n");
    m.unmount_clean();
}

#[test]
fn an_io_error_in_a_write_is_eio_at_the_shell() {
    if !fuse_or_skip() {
        return;
    }
    let m = mount_with("segment.append.write=1*return");
    // Coreutils' printf says what write(2) returned.
    m.fails("/usr/bin/printf 'a\\n' >> t-0/log", "Input/output error");
    let log = m.log();
    assert!(
        log.contains("Stopping serving partition t-0") && log.contains("segment.append.write"),
        "one log line names the cause:\n{log}"
    );
    offline_then_recovered(m, "segment.append.write");
}

#[test]
fn a_panic_in_a_write_handler_is_eio_at_the_shell() {
    if !fuse_or_skip() {
        return;
    }
    let m = mount_with("segment.append.write=1*panic");
    // Coreutils' printf says what write(2) returned.
    m.fails("/usr/bin/printf 'a\\n' >> t-0/log", "Input/output error");
    let log = m.log();
    assert!(
        log.contains("panicked") && log.contains("failpoint segment.append.write panic"),
        "the panic is logged:\n{log}"
    );
    offline_then_recovered(m, "a panic");
}
