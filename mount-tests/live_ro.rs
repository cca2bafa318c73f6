//! Item 8: `mount -o ro` of a directory a broker is writing follows it. The
//! writer (`kafka_writer.rs`) runs in the test process, apart from the
//! daemon, and does what Kafka does in Kafka's order: batches to the `.log`
//! then entries to the preallocated indexes; a roll trims the indexes, then
//! creates the next segment; retention renames segments `.deleted`, then
//! deletes them; checkpoints are `.tmp` files renamed over the old ones.
//!
//! Each change must show within about 2 s: the tests wait for the state,
//! with a bound of 5 s, and never for a time.

use std::fs;
use std::io::Read;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::consumer::tail_f;
use crate::harness::{Mount, fuse_or_skip};
use crate::kafka_writer::{BASE_TS, KafkaWriter, seg_name, stream, value, write_meta};

/// How long a change may take to show, at most, before a test fails.
const BOUND: Duration = Duration::from_secs(5);

/// Runs `sh -c cmd` in the mount until its stdout is `want`.
pub fn wait_output(m: &Mount, cmd: &str, want: &str) {
    let deadline = Instant::now() + BOUND;
    loop {
        let out = m.sh(cmd);
        let got = String::from_utf8_lossy(&out.stdout);
        if out.status.success() && got == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "`{cmd}` never printed {want:?}; last: {got:?} {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            m.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `sh -c cmd` until it fails with `errtext` on stderr.
pub fn wait_failure(m: &Mount, cmd: &str, errtext: &str) {
    let deadline = Instant::now() + BOUND;
    loop {
        let out = m.sh(cmd);
        if !out.status.success() && String::from_utf8_lossy(&out.stderr).contains(errtext) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "`{cmd}` never failed with {errtext:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A log.dir with partition `t-0` (an index entry per 200 bytes) and
/// `records` records in batches of 3, mounted read-only.
pub fn live_mount(records: usize) -> Option<(tempfile::TempDir, KafkaWriter, Mount)> {
    live_mount_with(records, &[])
}

/// As [`live_mount`], with extra environment for the daemon.
pub fn live_mount_with(
    records: usize,
    env: &[(&str, &str)],
) -> Option<(tempfile::TempDir, KafkaWriter, Mount)> {
    if !fuse_or_skip() {
        return None;
    }
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    write_meta(&data);
    let mut w = KafkaWriter::create(&data, "t", 0, 200);
    for _ in 0..records / 3 {
        w.append(3);
    }
    w.write_checkpoints(0);
    let m = Mount::with(&["ro"], Some(&data), env);
    Some((tmp, w, m))
}

fn size_of(m: &Mount, name: &str) -> String {
    m.ok(&format!("stat -c %s t-0/{name}"))
}

#[test]
fn appends_and_a_half_written_batch() {
    let Some((_tmp, mut w, m)) = live_mount(30) else {
        return;
    };
    assert_eq!(m.ok("cat t-0/log"), stream(0, 30));
    for _ in 0..20 {
        w.append(3);
    }
    wait_output(&m, "cat t-0/log", &stream(0, 90));
    assert_eq!(m.status("t-0", "log_end_offset"), 90);
    assert_eq!(
        size_of(&m, &seg_name(0, "log")),
        format!("{}\n", w.active_size())
    );
    assert_eq!(m.ok("cat t-0/offset/89"), value(89));
    assert_eq!(
        m.ok("getfattr --only-values -n user.kafka.timestamp t-0/offset/88"),
        (BASE_TS + 87).to_string()
    );
    assert_eq!(m.ok(&format!("cat t-0/time/{}", BASE_TS + 80)), "81\n");

    // A batch caught half copied is not shown, however often one looks.
    let whole = w.active_size();
    w.append_torn(3, 40);
    for _ in 0..10 {
        assert_eq!(m.status("t-0", "log_end_offset"), 90);
        assert_eq!(size_of(&m, &seg_name(0, "log")), format!("{whole}\n"));
        assert_eq!(m.ok("cat t-0/log"), stream(0, 90));
        let tail = m.ok(&format!(
            "dd if=t-0/{} bs=1 skip={whole} status=none | wc -c",
            seg_name(0, "log")
        ));
        assert_eq!(tail.trim(), "0");
        m.fails("cat t-0/offset/90", "No such file or directory");
    }
    w.finish_torn();
    wait_output(&m, "cat t-0/offset/92", &value(92));
    assert_eq!(m.ok("cat t-0/log"), stream(0, 93));
    assert!(!m.log().contains("panicked"), "{}", m.log());
}

#[test]
fn rolls_retention_and_checkpoints() {
    let Some((_tmp, mut w, m)) = live_mount(30) else {
        return;
    };
    let index0 = seg_name(0, "index");
    // The active index shows its preallocation, as on disk.
    assert_eq!(size_of(&m, &index0), "10485760\n");
    // Roll: the indexes are trimmed, the next segment appears.
    w.roll();
    for _ in 0..5 {
        w.append(3);
    }
    wait_output(&m, "cat t-0/status | grep segments", "segments: 2\n");
    let entries = fs::metadata(w.path(0, "index")).unwrap().len();
    assert!(entries > 0 && entries < 10485760);
    wait_output(
        &m,
        &format!("stat -c %s t-0/{index0}"),
        &format!("{entries}\n"),
    );
    m.ok(&format!(
        "cmp t-0/{index0} {}",
        w.path(0, "index").display()
    ));
    let ls = m.ok("ls t-0");
    for base in [0, 30] {
        for suffix in ["log", "index", "timeindex"] {
            assert!(ls.contains(&seg_name(base, suffix)), "{ls}");
        }
    }
    assert_eq!(m.ok("cat t-0/offset/44"), value(44));
    assert_eq!(m.ok("cat t-0/log"), stream(0, 45));
    assert_eq!(m.status("t-0", "active_segment"), 30);

    // Retention: renamed `.deleted`, gone from the tree, then deleted.
    w.roll();
    w.append(3);
    let doomed = w.retain(1);
    wait_failure(
        &m,
        &format!("cat t-0/{}", seg_name(0, "log")),
        "No such file",
    );
    let ls = m.ok("ls t-0");
    assert!(!ls.contains(&seg_name(0, "")), "{ls}");
    assert!(!ls.contains("deleted"), "{ls}");
    m.fails("cat t-0/offset/3", "No such file or directory");
    assert_eq!(m.status("t-0", "log_start_offset"), 30);
    assert_eq!(m.ok("cat t-0/log"), stream(30, 48));
    wait_failure(&m, &format!("stat t-0/{index0}"), "No such file");
    w.purge(&doomed);
    assert_eq!(m.ok("cat t-0/log"), stream(30, 48));

    // Checkpoints: the broker's delete-records reaches the log start.
    w.delete_records(40);
    wait_output(&m, "cat log-start-offset-checkpoint", "0\n1\nt 0 40\n");
    wait_output(&m, "cat t-0/log", &stream(40, 48));
    m.fails("cat t-0/offset/39", "No such file or directory");
    assert_eq!(m.ok("cat t-0/offset/40"), value(40));
    w.write_checkpoints(45);
    wait_output(&m, "cat t-0/status | grep recovery", "recovery_point: 45\n");
}

#[test]
fn tail_f_follows_the_broker() {
    let Some((_tmp, mut w, m)) = live_mount(3) else {
        return;
    };
    let (tail, rx) = tail_f("1", &m.mnt.join("t-0/log"));
    let next = || rx.recv_timeout(BOUND).expect("tail -f printed nothing").0;
    assert_eq!(next(), value(2));
    for round in 0..3 {
        let first = w.append(2);
        assert_eq!(next(), value(first));
        assert_eq!(next(), value(first + 1));
        if round == 1 {
            w.roll();
        }
    }
    drop(tail);
}

#[test]
fn partitions_appear_and_go() {
    let Some((_tmp, w, m)) = live_mount(3) else {
        return;
    };
    let root = w.root.clone();
    let mut u = KafkaWriter::create(&root, "u", 7, 4096);
    u.append(4);
    let files =
        "groups\nlog-start-offset-checkpoint\nmeta.properties\nrecovery-point-offset-checkpoint\n";
    wait_output(&m, "ls", &format!("{files}t-0\nu-7\n"));
    wait_output(&m, "cat u-7/log", &stream(0, 4));
    // Kafka deletes a partition: its directory is renamed, then removed.
    let gone = root.join("u-7.9f3c1d5e8b2a4c6d8e0f1a2b3c4d5e6f-delete");
    fs::rename(root.join("u-7"), &gone).unwrap();
    wait_output(&m, "ls", &format!("{files}t-0\n"));
    wait_failure(&m, "cat u-7/status", "No such file or directory");
    fs::remove_dir_all(&gone).unwrap();
    wait_failure(&m, "stat u-7", "No such file or directory");
}

/// Reads a file of the mount with one read(2): one consistent answer.
fn read_once(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut f = fs::File::open(path)?;
    let mut buf = vec![0u8; 1 << 20];
    let n = f.read(&mut buf)?;
    buf.truncate(n);
    Ok(buf)
}

/// Checks a consumer stream read in one go: `v-k` lines, k consecutive,
/// nothing torn. Returns the first and last offsets it held.
fn check_stream(bytes: &[u8]) -> Option<(i64, i64)> {
    let text = std::str::from_utf8(bytes).expect("the stream is the values written");
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "torn stream: {text:?}"
    );
    let mut range: Option<(i64, i64)> = None;
    for line in text.lines() {
        let k: i64 = line
            .strip_prefix("v-")
            .and_then(|k| k.parse().ok())
            .unwrap_or_else(|| panic!("not a value written: {line:?}"));
        range = match range {
            None => Some((k, k)),
            Some((first, last)) => {
                assert_eq!(k, last + 1, "a gap in the stream after v-{last}");
                Some((first, k))
            }
        };
    }
    range
}

/// Checks a raw `.log` read through the mount: whole batches, each with a
/// good CRC, and nothing after the last.
fn check_segment(bytes: &[u8]) {
    use commitfs::storage::batch_reader::{BatchReader, Stop};
    let mut walk = BatchReader::over(bytes);
    let stop = walk
        .for_each_batch(|_, b| {
            assert!(b.is_valid(), "a batch with a bad CRC was served");
            Ok(true)
        })
        .unwrap();
    assert!(
        matches!(stop, Some(Stop::End)),
        "the served .log does not end on a whole batch: {stop:?}"
    );
}

/// The broker appends (some batches caught half copied), rolls, and deletes
/// old segments while readers read the stream, records and raw segments:
/// every answer is right or ENOENT, never stale or torn bytes, and the
/// daemon lives through it.
#[test]
fn readers_never_see_torn_or_stale_bytes_while_a_broker_writes() {
    readers_while_a_broker_writes(&[]);
}

/// The same with every raw file read served by the daemon (as when it does
/// not run as root), not passed through to the kernel.
#[test]
fn readers_never_see_torn_or_stale_bytes_served_by_the_daemon() {
    readers_while_a_broker_writes(&[("COMMITFS_PASSTHROUGH", "0")]);
}

fn readers_while_a_broker_writes(env: &[(&str, &str)]) {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
    let Some((_tmp, mut w, mut m)) = live_mount_with(30, env) else {
        return;
    };
    let stop = Arc::new(AtomicBool::new(false));
    let next = Arc::new(AtomicI64::new(w.next_offset));
    let writer = {
        let (stop, next) = (stop.clone(), next.clone());
        std::thread::spawn(move || {
            let mut i = 0u64;
            let mut doomed = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                if i.is_multiple_of(7) {
                    w.append_torn(2, (i % 50) as usize + 1);
                    std::thread::sleep(Duration::from_millis(2));
                    w.finish_torn();
                } else {
                    w.append((i % 4) as usize + 1);
                }
                next.store(w.next_offset, Ordering::Release);
                if i.is_multiple_of(40) {
                    w.roll();
                }
                if w.segments.len() > 4 {
                    w.purge(&doomed);
                    doomed = w.retain(1);
                    w.write_checkpoints(0);
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            w
        })
    };
    let deadline = Instant::now() + Duration::from_secs(2);
    let (mut streams, mut records, mut segments) = (0, 0, 0);
    let mut seed = 7u64;
    while Instant::now() < deadline {
        let stream = read_once(&m.mnt.join("t-0/log")).expect("read log");
        if check_stream(&stream).is_some() {
            streams += 1;
        }
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let n = (seed >> 33) as i64 % next.load(Ordering::Acquire).max(1);
        match fs::read(m.mnt.join(format!("t-0/offset/{n}"))) {
            Ok(v) => {
                assert_eq!(String::from_utf8_lossy(&v), value(n));
                records += 1;
            }
            Err(e) => assert_eq!(e.raw_os_error(), Some(libc::ENOENT), "offset/{n}: {e}"),
        }
        let active = m.status("t-0", "active_segment");
        match fs::read(m.mnt.join(format!("t-0/{}", seg_name(active, "log")))) {
            Ok(bytes) => {
                check_segment(&bytes);
                segments += 1;
            }
            // Rolled and deleted between the two reads.
            Err(e) => assert_eq!(e.raw_os_error(), Some(libc::ENOENT), "{e}"),
        }
    }
    stop.store(true, Ordering::Relaxed);
    let w = writer.join().unwrap();
    assert!(streams > 0 && records > 0 && segments > 0);
    assert!(!m.exited(), "the daemon died:\n{}", m.log());
    // Once the broker stops, the view settles on exactly what it wrote.
    let start = w.log_start.max(w.segments[0]);
    wait_output(&m, "cat t-0/log", &stream(start, w.next_offset));
    assert!(!m.log().contains("panicked"), "{}", m.log());
    m.unmount_clean();
}
