//! Faults: a broker that goes away. These stop the mock cluster's broker,
//! which a test can do in-process; the same against our listener, killed
//! and restarted under a mount, is in mount-tests/cluster_e2e.rs.

use std::time::{Duration, Instant};

use crate::fixture::{Kind, fixture, wait_for};

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
    // Everything that needs the cluster fails with an errno, in bounded time.
    let bound = Duration::from_millis(1500 + 1500);
    let failed = |what: &str, r: Result<(), i32>| {
        let t = Instant::now();
        let e = r.unwrap_err();
        assert!([libc::EIO, libc::ETIMEDOUT].contains(&e), "{what}: {e}");
        t.elapsed()
    };
    let t = Instant::now();
    let e = f.size(&format!("{p}/log")).map(drop);
    failed("stat log", e);
    assert!(t.elapsed() < bound, "stat log took {:?}", t.elapsed());
    let t = Instant::now();
    failed("append", f.write(&format!("{p}/log"), b"during\n"));
    assert!(t.elapsed() < bound, "append took {:?}", t.elapsed());
    let t = Instant::now();
    failed("status", f.read(&format!("{p}/status")).map(drop));
    assert!(t.elapsed() < bound * 2, "status took {:?}", t.elapsed());
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

#[test]
fn closing_settles_produces_in_flight() {
    let f = fixture(Kind::Mock, 1, 2000, |_| {});
    let p = f.p(0);
    f.write(&format!("{p}/log"), b"before\n").unwrap();
    let (tree, backend) = (&f.tree, &f.backend);
    let fh = f.open(&format!("{p}/log"), false, true).unwrap();
    f.mock.as_ref().unwrap().broker_down(1).unwrap();
    let t = Instant::now();
    std::thread::scope(|s| {
        let writer = s.spawn(|| tree.write(fh, b"in flight\n").map_err(|e| e.errno));
        std::thread::sleep(Duration::from_millis(300));
        // What umount and SIGTERM do once the session ends.
        backend.close();
        let e = writer.join().unwrap().unwrap_err();
        assert!([libc::EIO, libc::ETIMEDOUT].contains(&e), "{e}");
    });
    tree.release(fh).unwrap();
    assert!(t.elapsed() < Duration::from_secs(6), "{:?}", t.elapsed());
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
