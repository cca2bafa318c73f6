//! The cluster mount from the shell: `commitfs mount --bootstrap-server`
//! over librdkafka's mock cluster, started in this test process (its
//! brokers listen on loopback ports, so the daemon reaches them as it would
//! a real cluster).

use std::time::Duration;

use rdkafka::mocking::MockCluster;

use crate::harness::{Mount, fuse_or_skip, wait_for};

fn mock() -> MockCluster<'static, rdkafka::producer::DefaultProducerContext> {
    let m = MockCluster::new(1).expect("mock cluster");
    m.create_topic("t", 2, 1).expect("topic");
    m
}

/// A child process killed and reaped when the test ends, however it ends.
pub struct Reaped(pub std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn cluster_mount_from_the_shell() {
    if !fuse_or_skip() {
        return;
    }
    let m = mock();
    let mut b = Mount::cluster(&m.bootstrap_servers(), &["request.timeout.ms=3000"]);
    assert_eq!(b.ok("ls"), "groups\nt-0\nt-1\n");
    // The mock cluster answers no ListGroups (librdkafka's mock broker).
    b.fails("ls groups", "Operation not supported");
    assert_eq!(
        b.ok("ls t-0"),
        "config\ndelete-records\nlog\noffset\nstatus\ntime\n"
    );
    b.ok("echo hello >> t-0/log; printf 'a\\nb\\n' >> t-0/log");
    assert_eq!(b.ok("cat t-0/offset/0"), "hello");
    assert_eq!(b.ok("cat t-0/log"), "hello\na\nb\n");
    assert_eq!(b.ok("stat -c %s t-0/log"), "10\n");
    assert_eq!(b.ok("ls t-0/offset"), "0\n1\n2\n");
    let attrs = b.ok("getfattr -d --absolute-names t-0/offset/1");
    assert!(attrs.contains("user.kafka.timestamp="), "{attrs}");
    assert!(
        attrs.contains("user.kafka.timestamp_type=\"CreateTime\""),
        "{attrs}"
    );
    assert_eq!(b.status("t-0", "log_end_offset"), 3);
    assert_eq!(b.status("t-0", "leader"), 1);
    // What a cluster cannot do, and the errnos of refusals.
    for (cmd, errtext) in [
        ("echo 1 > t-0/roll", "Operation not permitted"),
        ("cat t-0/offset/3", "No such file"),
        ("echo x > t-0/status", "Permission denied"),
        (
            "env printf 'abc\\n' > t-0/delete-records",
            "Invalid argument",
        ),
        ("mkdir t-5", "Invalid argument"),
        ("rm t-0/log", "Operation not permitted"),
    ] {
        b.fails(cmd, errtext);
    }
    // tail -f follows appends made by another writer.
    let mut tail = Reaped(
        std::process::Command::new("tail")
            .args(["-f", "-n", "+1"])
            .arg(b.mnt.join("t-0/log"))
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let out = tail.0.stdout.take().unwrap();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let reader = {
        let seen = seen.clone();
        std::thread::spawn(move || {
            use std::io::Read;
            let mut out = out;
            let mut buf = [0u8; 256];
            while let Ok(n) = out.read(&mut buf) {
                if n == 0 {
                    break;
                }
                seen.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        })
    };
    wait_for("tail prints the log", Duration::from_secs(5), || {
        seen.lock().unwrap().ends_with("b\n")
    });
    b.ok("echo later >> t-0/log");
    wait_for("tail shows the append", Duration::from_secs(5), || {
        seen.lock().unwrap().ends_with("later\n")
    });
    drop(tail);
    let _ = reader.join();
    b.unmount_clean();
    drop(m);
}
