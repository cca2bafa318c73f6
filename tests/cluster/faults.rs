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
