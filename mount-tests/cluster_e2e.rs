//! The cluster mount end to end over our own listener: daemon A mounts a
//! data directory and serves it over the Kafka protocol, daemon B is a
//! cluster mount of A's listener. Both are real daemons; B is started the
//! way a user starts it (daemonised, no `-f`).
//! - shell writes through B read byte-identical through A's `offset/N` and
//!   by kafka-python, and the other way round;
//! - `tail -f` on B follows appends made through A;
//! - `commitfs dump` of A's data directory shows the batches B's producer sent;
//! - faults: A killed with SIGKILL and restarted while B appends in a loop;
//! - B authenticates to A's `SASL_SSL` listener (SCRAM-SHA-512 over TLS
//!   with a test CA) with the client settings a user gives any Kafka.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::kafka_support::{grants_producer_ids, listener_addr, python, require, run_python};

use crate::cluster::Reaped;
use crate::harness::wait_for as wait;
use crate::harness::{Mount, fuse_or_skip, mounted, run_bounded, sh_timeout, umount};

const BIN: &str = env!("CARGO_BIN_EXE_commitfs");

/// Mount A: a fresh data directory with a listener on a port of its own
/// (port 0 asked, the port it got read from its log line) on `host`.
fn listener_mount(host: &str) -> (Mount, String) {
    let opt = format!("listeners=PLAINTEXT://{host}:0");
    let m = Mount::new(&[&opt]);
    let addr = listener_addr(&m.log())
        .unwrap_or_else(|| panic!("the daemon logged no listener:\n{}", m.log()));
    (m, addr)
}

/// A cluster mount started as a user starts it: `commitfs mount
/// --bootstrap-server ADDR MNT`, which daemonises and returns once live.
/// Dropping it unmounts and waits for the daemon to go (killing it past a
/// bound), so no daemon outlives the test.
pub struct Daemonised {
    pub mnt: PathBuf,
    _tmp: tempfile::TempDir,
}

impl Daemonised {
    pub fn start(bootstrap: &str, opts: &[&str]) -> Daemonised {
        let tmp = tempfile::Builder::new()
            .prefix("commitfs-mt-")
            .tempdir()
            .unwrap();
        let mnt = tmp.path().canonicalize().unwrap().join("mnt");
        let mut cmd = Command::new(BIN);
        cmd.args(["mount", "--bootstrap-server", bootstrap]);
        for o in opts {
            cmd.args(["-o", o]);
        }
        cmd.arg(&mnt);
        let d = Daemonised { mnt, _tmp: tmp };
        let out = run_bounded(
            &mut cmd,
            "commitfs mount --bootstrap-server",
            sh_timeout(),
            || d.log(),
        );
        assert!(out.status.success(), "{out:?}\n{}", d.log());
        // Live when the command returns: the next command can use it.
        assert!(mounted(&d.mnt), "not mounted when the command returned");
        d
    }

    /// Where a cluster daemon logs (README): `$TMPDIR/commitfs-cluster-<path>.log`.
    pub fn log_path(&self) -> PathBuf {
        let escaped: String = self.mnt.to_string_lossy()[1..]
            .chars()
            .map(|c| match c {
                c if c.is_ascii_alphanumeric() || c == '.' || c == '-' => c,
                _ => '_',
            })
            .collect();
        std::env::temp_dir().join(format!("commitfs-cluster-{escaped}.log"))
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// The daemon: the process whose command line names this mountpoint.
    fn pid(&self) -> Option<i32> {
        let want = self.mnt.as_os_str().as_encoded_bytes();
        std::fs::read_dir("/proc").ok()?.find_map(|e| {
            let pid: i32 = e.ok()?.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            (args.contains(&&b"--bootstrap-server"[..]) && args.contains(&want)).then_some(pid)
        })
    }

    /// `sh -c cmd` in the mountpoint, which must succeed; its stdout.
    pub fn ok(&self, cmd: &str) -> String {
        let out = self.sh(cmd);
        assert!(
            out.status.success(),
            "`{cmd}` failed: {}\ndaemon log:\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
        String::from_utf8(out.stdout).unwrap()
    }

    pub fn sh(&self, cmd: &str) -> std::process::Output {
        let mut c = Command::new("sh");
        c.arg("-c").arg(cmd).current_dir(&self.mnt);
        run_bounded(&mut c, &format!("`{cmd}`"), sh_timeout(), || self.log())
    }

    /// `umount`, then the daemon must exit by itself; returns whether it did.
    pub fn unmount(&mut self) -> bool {
        let pid = self.pid();
        if mounted(&self.mnt) {
            umount(&self.mnt).unwrap_or_else(|e| panic!("{e}\n{}", self.log()));
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        while let Some(p) = pid.filter(|p| alive(*p)) {
            if Instant::now() > deadline {
                // SAFETY: a signal to the daemon this test started.
                unsafe { libc::kill(p, libc::SIGKILL) };
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        true
    }
}

/// Running (a zombie has exited; init reaps it).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
    })
}

impl Drop for Daemonised {
    fn drop(&mut self) {
        if !self.unmount() && mounted(&self.mnt) {
            crate::harness::quiet_umount(&["-l"], &self.mnt);
        }
        let _ = std::fs::remove_file(self.log_path());
    }
}

/// B's options: a short request timeout. B's producer is idempotent (the
/// listener hands out producer ids), which the fault test below relies on.
fn b_options(addr: &str) -> Vec<&'static str> {
    assert!(
        grants_producer_ids(addr),
        "the listener must serve InitProducerId: the cluster mount's idempotent producer needs it"
    );
    vec!["request.timeout.ms=5000"]
}

/// Lines with bytes a shell pipeline must not mangle: tabs, CR, a
/// backslash, UTF-8, 0xff, an empty line.
fn awkward_lines(tag: &str) -> Vec<Vec<u8>> {
    vec![
        format!("{tag} plain").into_bytes(),
        format!("{tag}\ttab\\back\rcr").into_bytes(),
        [format!("{tag} é ").as_bytes(), &[0xff, 0x00, 0x7f]].concat(),
        Vec::new(),
    ]
}

fn write_lines(path: &Path, lines: &[Vec<u8>]) {
    let mut all = Vec::new();
    for l in lines {
        all.extend_from_slice(l);
        all.push(b'\n');
    }
    std::fs::write(path, all).unwrap();
}

const KAFKA_PYTHON_HEX: &str = r#"
import sys
from kafka import KafkaConsumer, TopicPartition
c = KafkaConsumer(bootstrap_servers=sys.argv[1], enable_auto_commit=False, consumer_timeout_ms=15000)
tp = TopicPartition(sys.argv[2], 0)
c.assign([tp]); c.seek_to_beginning(tp)
for m in c:
    print(m.offset, (m.value or b'').hex())
    if m.offset + 1 == int(sys.argv[3]):
        break
"#;

/// `offset value-in-hex` lines for records `range` of `lines`.
fn hex_listing(first: usize, lines: &[Vec<u8>]) -> String {
    lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let hex: String = l.iter().map(|b| format!("{b:02x}")).collect();
            format!("{} {hex}\n", first + i)
        })
        .collect()
}

#[test]
fn cluster_mount_over_our_listener_end_to_end() {
    if !fuse_or_skip() {
        return;
    }
    let Some(py) = require(python()) else { return };
    let (a, addr) = listener_mount("127.0.0.1");
    let mut b = Daemonised::start(&addr, &b_options(&addr));
    let scratch = tempfile::tempdir().unwrap();
    // mkdir through B: CreateTopics on the listener; A sees the partition.
    b.ok("mkdir t-0");
    assert_eq!(a.ok("ls"), "groups\nt-0\n");
    // B's writes, read through A and by kafka-python.
    let from_b = awkward_lines("b");
    let file = scratch.path().join("from_b");
    write_lines(&file, &from_b);
    b.ok(&format!("cat {} >> t-0/log", file.display()));
    for (n, want) in from_b.iter().enumerate() {
        let got = std::fs::read(a.mnt.join(format!("t-0/offset/{n}"))).unwrap();
        assert_eq!(&got, want, "A's offset/{n}");
    }
    let n = from_b.len();
    let py_out = run_python(&py, KAFKA_PYTHON_HEX, &[&addr, "t", &n.to_string()]);
    assert_eq!(py_out, hex_listing(0, &from_b));
    // A's writes, read through B and by kafka-python.
    let from_a = awkward_lines("a");
    let file = scratch.path().join("from_a");
    write_lines(&file, &from_a);
    a.ok(&format!("cat {} >> t-0/log", file.display()));
    for (i, want) in from_a.iter().enumerate() {
        let got = std::fs::read(b.mnt.join(format!("t-0/offset/{}", n + i))).unwrap();
        assert_eq!(&got, want, "B's offset/{}", n + i);
    }
    let all: Vec<Vec<u8>> = from_b.iter().chain(&from_a).cloned().collect();
    let py_out = run_python(&py, KAFKA_PYTHON_HEX, &[&addr, "t", &all.len().to_string()]);
    assert_eq!(py_out, hex_listing(0, &all));
    let stream: Vec<u8> = all.iter().flat_map(|l| [&l[..], b"\n"].concat()).collect();
    assert_eq!(std::fs::read(b.mnt.join("t-0/log")).unwrap(), stream);
    assert_eq!(std::fs::read(a.mnt.join("t-0/log")).unwrap(), stream);
    tail_follows(&a, &b, &stream);
    dump_shows_bs_batches(&a, &addr, n);
    assert!(
        b.unmount(),
        "B's daemon did not exit after umount:\n{}",
        b.log()
    );
    drop(b);
    let mut a = a;
    a.unmount_clean();
}

/// `tail -f B/t-0/log` prints what is there, then appends made through A
/// within 2 s each.
fn tail_follows(a: &Mount, b: &Daemonised, before: &[u8]) {
    let mut tail = Reaped(
        Command::new("tail")
            .args(["-f", "-c", "+1"])
            .arg(b.mnt.join("t-0/log"))
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let out = tail.0.stdout.take().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let reader = {
        let seen = seen.clone();
        std::thread::spawn(move || {
            let mut out = out;
            let mut buf = [0u8; 4096];
            while let Ok(n) = out.read(&mut buf) {
                if n == 0 {
                    break;
                }
                seen.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        })
    };
    let has = |what: &[u8]| seen.lock().unwrap().ends_with(what);
    crate::harness::wait_for("tail prints the log", Duration::from_secs(10), || {
        has(before)
    });
    for i in 0..3 {
        let line = format!("from A {i}\n");
        a.ok(&format!("printf '{line}' >> t-0/log"));
        crate::harness::wait_for(
            "tail -f on B shows the append made through A",
            Duration::from_secs(2),
            || has(line.as_bytes()),
        );
    }
    drop(tail);
    let _ = reader.join();
}

/// A's data directory holds B's write as one batch that B's producer sent:
/// its records, and its producer id when the producer is idempotent.
fn dump_shows_bs_batches(a: &Mount, addr: &str, records: usize) {
    let segment = a.data.join("t-0/00000000000000000000.log");
    let out = run_bounded(
        Command::new(BIN)
            .args(["dump", "--print-data-log"])
            .arg(&segment),
        "commitfs dump",
        sh_timeout(),
        String::new,
    );
    assert!(out.status.success(), "{out:?}");
    let dump = String::from_utf8_lossy(&out.stdout);
    let first = dump
        .lines()
        .find(|l| l.starts_with("baseOffset: 0 "))
        .unwrap_or_else(|| panic!("no batch at 0:\n{dump}"));
    let want = format!("lastOffset: {} count: {records} ", records - 1);
    assert!(first.contains(&want), "B's write is not one batch: {first}");
    assert!(first.contains("isvalid: true"), "{first}");
    if grants_producer_ids(addr) {
        assert!(
            first.contains("baseSequence: 0 ") && !first.contains("producerId: -1 "),
            "an idempotent producer's batch carries its id and sequence: {first}"
        );
    }
    assert!(dump.contains("payload: b plain"), "{dump}");
}

/// Lines of a file the appender writes (missing: none yet).
fn lines_of(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(String::from)
        .collect()
}

/// A shell loop in B appending `v1`, `v2`, ... one write each, noting in
/// `acked` the values whose write succeeded and in `failed` the others,
/// until `stop` exists (or 100,000 writes).
fn appender(b: &Daemonised, dir: &Path) -> Reaped {
    let (acked, failed, stop) = (dir.join("acked"), dir.join("failed"), dir.join("stop"));
    let script = format!(
        "i=0; while [ $i -lt 100000 ] && [ ! -e {stop} ]; do i=$((i+1)); \
         if echo v$i >> t-0/log 2>/dev/null; then echo v$i >> {acked}; else echo v$i >> {failed}; fi; done",
        stop = stop.display(),
        acked = acked.display(),
        failed = failed.display()
    );
    Reaped(
        Command::new("sh")
            .arg("-c")
            .arg(script)
            .current_dir(&b.mnt)
            .stdin(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

#[test]
fn the_listener_killed_and_restarted_under_an_appending_cluster_mount() {
    if !fuse_or_skip() {
        return;
    }
    // A is restarted on the same port, which B keeps asking for: so the
    // listener binds a loopback address no other test uses, where no
    // other server can take the port while A is down.
    let (mut a, addr) = listener_mount("127.0.19.1");
    a.opts = vec![format!("listeners=PLAINTEXT://{addr}")];
    // Without producer ids there is no idempotent producer, and the promise
    // under test (no duplicates across retries) is its.
    assert!(
        grants_producer_ids(&addr),
        "the listener must serve InitProducerId"
    );
    let timeout = Duration::from_millis(3000);
    let mut b = Daemonised::start(&addr, &["request.timeout.ms=3000"]);
    b.ok("mkdir t-0");
    let dir = tempfile::tempdir().unwrap();
    let (acked, failed) = (dir.path().join("acked"), dir.path().join("failed"));
    let mut writer = appender(&b, dir.path());
    wait("appends through B", Duration::from_secs(30), || {
        lines_of(&acked).len() >= 20
    });
    a.kill9();
    // While the listener is down: a record never fetched fails with an
    // errno, within the request timeout (and a margin for the kernel).
    let t = Instant::now();
    let out = b.sh("cat t-0/offset/0");
    let took = t.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "cat of offset/0 with the listener down"
    );
    assert!(
        err.contains("Input/output error") || err.contains("timed out"),
        "{err}"
    );
    assert!(took < timeout * 3, "cat took {took:?}");
    wait(
        "a write fails while the listener is down",
        Duration::from_secs(30),
        || !lines_of(&failed).is_empty(),
    );
    let logged = a.log().len();
    a.remount();
    assert_eq!(
        listener_addr(&a.log()[logged..]).as_deref(),
        Some(addr.as_str()),
        "A is back on the address B knows"
    );
    let at_restart = lines_of(&acked).len();
    wait(
        "B appends again without a remount",
        Duration::from_secs(60),
        || lines_of(&acked).len() >= at_restart + 20,
    );
    std::fs::write(dir.path().join("stop"), "").unwrap();
    wait("the appender stops", Duration::from_secs(60), || {
        writer.0.try_wait().ok().flatten().is_some()
    });
    // Every acknowledged write is in A's data directory, once; no value
    // is there twice, acknowledged or not.
    let log = String::from_utf8(std::fs::read(a.mnt.join("t-0/log")).unwrap()).unwrap();
    let mut seen = std::collections::HashSet::new();
    for v in log.lines() {
        assert!(seen.insert(v), "{v} is in the log twice");
    }
    for v in lines_of(&acked) {
        assert!(
            seen.contains(v.as_str()),
            "acknowledged {v} is not in the log"
        );
    }
    assert!(
        b.unmount(),
        "B's daemon did not exit after umount:\n{}",
        b.log()
    );
    drop(b);
    a.unmount_clean();
}

const CREATE_USER: &str = r#"
from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
import sys
a = AdminClient({"bootstrap.servers": sys.argv[1]})
up = UserScramCredentialUpsertion(sys.argv[2], ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), sys.argv[3].encode())
for f in a.alter_user_scram_credentials([up]).values():
    f.result(timeout=60)
print("created")
"#;

/// The address of A's listener named `name`, from its log line.
fn named_listener(log: &str, name: &str) -> String {
    log.lines()
        .find_map(|l| {
            let (addr, rest) = l.split_once("Kafka listener on ")?.1.split_once(' ')?;
            rest.starts_with(&format!("({name}, "))
                .then(|| addr.to_string())
        })
        .unwrap_or_else(|| panic!("no {name} listener in the log:\n{log}"))
}

/// B mounts A's `SASL_SSL` listener as bob (made through AdminClient on
/// A's PLAINTEXT listener): writes through B arrive in A, A's log names
/// bob, and neither daemon's log holds the password.
#[test]
fn cluster_mount_over_a_sasl_ssl_listener() {
    if !fuse_or_skip() {
        return;
    }
    let Some(py) = require(python()) else { return };
    let certs = tempfile::tempdir().unwrap();
    let ca = crate::test_ca::TestCa::new(&certs.path().join("ca"));
    let cert = ca.server("broker");
    let ks = format!("ssl.keystore.location={}", cert.keystore.display());
    let a = Mount::new(&[
        "listeners=PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "sasl.enabled.mechanisms=SCRAM-SHA-512",
        &ks,
    ]);
    let plain = named_listener(&a.log(), "PLAINTEXT");
    let secure = named_listener(&a.log(), "SASL_SSL");
    let password = "bob-Mount-Secret-93";
    let out = run_python(&py, CREATE_USER, &[&plain, "bob", password]);
    assert!(out.contains("created"), "{out}");
    let pw = format!("sasl.password={password}");
    let ca_loc = format!("ssl.ca.location={}", ca.ca_pem.display());
    let mut b = Daemonised::start(
        &secure,
        &[
            "security.protocol=SASL_SSL",
            "sasl.mechanisms=SCRAM-SHA-512",
            "sasl.username=bob",
            &pw,
            &ca_loc,
            "request.timeout.ms=5000",
        ],
    );
    b.ok("mkdir s-0");
    b.ok("printf 'one\\ntwo\\n' >> s-0/log");
    assert_eq!(std::fs::read(a.mnt.join("s-0/offset/0")).unwrap(), b"one");
    assert_eq!(std::fs::read(a.mnt.join("s-0/offset/1")).unwrap(), b"two");
    assert_eq!(b.ok("cat s-0/log"), "one\ntwo\n");
    assert!(
        a.log().contains("authenticated as User:bob with SASL"),
        "{}",
        a.log()
    );
    assert!(!a.log().contains(password), "A's log holds the password");
    assert!(!b.log().contains(password), "B's log holds the password");
    assert!(b.unmount(), "B did not exit after umount:\n{}", b.log());
    drop(b);
    let mut a = a;
    a.unmount_clean();
}
