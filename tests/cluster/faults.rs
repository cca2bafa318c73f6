//! Faults: a broker that goes away. These stop the mock cluster's broker,
//! which a test can do in-process; the same against our listener, killed
//! and restarted under a mount, is in mount-tests/cluster_e2e.rs.

use std::io::Write;
use std::sync::mpsc::{RecvTimeoutError, channel};
use std::time::Duration;

use crate::fixture::{Kind, fixture, wait_for};

/// How long a call may take before it counts as hung: far past any
/// `request.timeout.ms` here, so that a loaded machine never trips it.
const HUNG: Duration = Duration::from_secs(60);

/// Runs `f`; if it has not returned after [`HUNG`], the call is hung and
/// cannot be interrupted: the test binary aborts, saying which.
fn no_hang<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let (done, wait) = channel::<()>();
    let what = what.to_string();
    let dog = std::thread::spawn(move || {
        if wait.recv_timeout(HUNG) == Err(RecvTimeoutError::Timeout) {
            // Past the test harness's capture, which an abort would lose.
            let _ = writeln!(
                std::io::stderr(),
                "{what}: hung, not returned after {HUNG:?}"
            );
            std::process::abort();
        }
    });
    let out = f();
    drop(done);
    dog.join().unwrap();
    out
}

#[test]
fn an_unreachable_cluster_fails_within_the_timeout_and_recovers() {
    let f = fixture(Kind::Mock, 1, 1500, |_| {});
    let p = f.p(0);
    f.write(&format!("{p}/log"), b"before\n").unwrap();
    f.write(&format!("{p}/log"), b"more\n").unwrap();
    assert_eq!(f.text(&format!("{p}/offset/0")), "before");
    let mock = f.mock.as_ref().unwrap();
    mock.broker_down(1).unwrap();
    // Records fetched before stay readable: they cannot change.
    assert_eq!(f.text(&format!("{p}/offset/0")), "before");
    // Everything that needs the cluster fails with an errno, and returns
    // (bounded by request.timeout.ms; what is checked is only that it is
    // not hung, not how long it took).
    let failed = |what: &str, r: Result<(), i32>| {
        let e = r.unwrap_err();
        assert!([libc::EIO, libc::ETIMEDOUT].contains(&e), "{what}: {e}");
    };
    let e = no_hang("stat log", || f.size(&format!("{p}/log")).map(drop));
    failed("stat log", e);
    let e = no_hang("append", || f.write(&format!("{p}/log"), b"during\n"));
    failed("append", e);
    let e = no_hang("status", || f.read(&format!("{p}/status")).map(drop));
    failed("status", e);
    mock.broker_up(1).unwrap();
    wait_for("writes work again", Duration::from_secs(20), || {
        f.write(&format!("{p}/log"), b"after\n").is_ok()
    });
    let log = f.text(&format!("{p}/log"));
    assert!(
        log.starts_with("before\n") && log.ends_with("after\n"),
        "{log}"
    );
    assert!(
        !log.contains("during") || log.matches("during").count() == 1,
        "{log}"
    );
}

/// A write whose records the producer holds (the broker is down) when the
/// backend closes gets its errno, and neither hangs.
#[test]
fn closing_settles_produces_in_flight() {
    let f = fixture(Kind::Mock, 1, 2000, |_| {});
    let p = f.p(0);
    f.write(&format!("{p}/log"), b"before\n").unwrap();
    let (tree, backend) = (&f.tree, &f.backend);
    let fh = f.open(&format!("{p}/log"), false, true).unwrap();
    f.mock.as_ref().unwrap().broker_down(1).unwrap();
    // The first write's record reported on: only the next one can count.
    wait_for("no record in flight", HUNG, || {
        backend.produces_in_flight() == 0
    });
    no_hang("a close with a write in flight", || {
        std::thread::scope(|s| {
            let writer = s.spawn(|| tree.write(fh, b"in flight\n").map_err(|e| e.errno));
            wait_for("the write's record in flight", HUNG, || {
                backend.produces_in_flight() > 0 || writer.is_finished()
            });
            assert!(
                !writer.is_finished(),
                "the write returned before its record was in flight: {:?}",
                writer.join()
            );
            // What umount and SIGTERM do once the session ends.
            backend.close();
            let e = writer.join().unwrap().unwrap_err();
            assert!([libc::EIO, libc::ETIMEDOUT].contains(&e), "{e}");
        });
    });
    tree.release(fh).unwrap();
}

/// Reads below a log start this mount has not seen move: each one is a
/// fetch that the cluster refuses (OffsetOutOfRange), back to back, and
/// each is ENOENT; the reader's consumer is assigned anew every time.
#[test]
fn reads_below_a_log_start_moved_elsewhere_fail_cleanly_back_to_back() {
    let f = fixture(Kind::Broker, 1, 3000, |_| {});
    let p = f.p(0);
    for i in 0..5 {
        f.write(&format!("{p}/log"), format!("r{i}\n").as_bytes())
            .unwrap();
    }
    // Another mount of the same cluster moves the log start to 3.
    let other = f.another_mount(3000);
    other.write(&format!("{p}/delete-records"), b"3\n").unwrap();
    for n in 0..60 {
        // offset/1 was never fetched here, so it is asked of the cluster.
        let e = f.read(&format!("{p}/offset/{}", 1 + n % 2));
        assert_eq!(e, Err(libc::ENOENT), "read {n}");
    }
    assert_eq!(f.text(&format!("{p}/offset/3")), "r3");
    assert_eq!(f.text(&format!("{p}/log")), "r3\nr4\n");
}
