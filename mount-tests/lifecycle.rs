use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::harness::{mounted, run_bounded, sh_timeout, stop_daemonised, umount};
use crate::mount;

#[test]
fn clean_umount_then_remount_skips_recovery() {
    let mut m = mount!();
    m.ok("mkdir t-0 && printf 'a\\nb\\n' >> t-0/log");
    m.unmount_clean();
    assert!(m.data.join(".kafka_cleanshutdown").exists());
    let before = m.log().len();
    m.remount();
    let log = m.log()[before..].to_string();
    assert!(log.contains("Skipping recovery of"), "{log}");
    assert!(
        !log.contains("since no clean shutdown file was found"),
        "{log}"
    );
    assert_eq!(m.ok("cat t-0/offset/1"), "b");
    assert_eq!(m.status("t-0", "recovery_point"), 2);
}

#[test]
fn sigterm_and_sigint_unmount_cleanly() {
    let mut m = mount!();
    m.ok("mkdir t-0 && echo a >> t-0/log");
    let st = m.signal_and_wait(libc::SIGTERM);
    assert!(st.success(), "exit status {st}");
    assert!(!mounted(&m.mnt));
    assert!(m.data.join(".kafka_cleanshutdown").exists());
    m.remount();
    assert_eq!(m.ok("cat t-0/offset/0"), "a");
    let st = m.signal_and_wait(libc::SIGINT);
    assert!(st.success(), "exit status {st}");
    assert!(!mounted(&m.mnt));
    assert!(m.data.join(".kafka_cleanshutdown").exists());
}

#[test]
fn sigterm_with_open_files_detaches_then_exits_at_last_close() {
    let mut m = mount!();
    m.ok("mkdir t-0 && echo a >> t-0/log");
    let held = std::fs::File::open(m.mnt.join("t-0/offset/0")).unwrap();
    m.signal(libc::SIGTERM);
    let deadline = Instant::now() + Duration::from_secs(10);
    while mounted(&m.mnt) {
        assert!(Instant::now() < deadline, "still mounted after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    assert!(!m.exited(), "the daemon left while a file was still open");
    drop(held);
    let st = m.wait();
    assert!(st.success(), "exit status {st}:\n{}", m.log());
    assert!(m.data.join(".kafka_cleanshutdown").exists());
    assert!(m.log().contains("detached it lazily"), "{}", m.log());

    // A second signal does not wait for open files.
    m.remount();
    let held = std::fs::File::open(m.mnt.join("t-0/status")).unwrap();
    m.signal(libc::SIGTERM);
    let deadline = Instant::now() + Duration::from_secs(10);
    while mounted(&m.mnt) {
        assert!(Instant::now() < deadline, "still mounted after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    }
    m.signal(libc::SIGTERM);
    let st = m.wait();
    assert!(st.success(), "exit status {st}");
    assert!(m.data.join(".kafka_cleanshutdown").exists());
    drop(held);
}

#[test]
fn second_mount_of_a_data_dir_is_refused() {
    let m = mount!();
    let other = m.mnt.parent().unwrap().join("mnt2");
    let out = run_bounded(
        &mut m.command(&other),
        "second mount",
        sh_timeout(),
        String::new,
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("locked"), "{err}");
    assert!(!mounted(&other));
    // The first mount is unharmed.
    m.ok("mkdir t-0");
}

/// Unmounts a daemonised mount (of data dir `.0` on `.1`) even if the test
/// fails, and waits (bounded) for its daemon to let go of the data dir,
/// killing it by its pid if it does not.
struct DaemonGuard<'a>(&'a Path, &'a Path);

impl Drop for DaemonGuard<'_> {
    fn drop(&mut self) {
        stop_daemonised(self.0, self.1);
    }
}

#[test]
fn default_mode_daemonises_and_returns_when_mounted() {
    if !crate::harness::fuse_or_skip() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let (data, mnt) = (root.join("data"), root.join("mnt"));
    let out = run_bounded(
        Command::new(env!("CARGO_BIN_EXE_commitfs"))
            .args(["mount", "-o", "segment.bytes=1048576"])
            .arg(&data)
            .arg(&mnt),
        "commitfs mount",
        sh_timeout(),
        || std::fs::read_to_string(data.join("commitfs.log")).unwrap_or_default(),
    );
    let _guard = DaemonGuard(&data, &mnt);
    assert!(out.status.success(), "{out:?}");
    // Live at once: the next command can use it.
    assert!(mounted(&mnt));
    std::fs::create_dir(mnt.join("t-0")).unwrap();
    std::fs::write(mnt.join("t-0/log"), "x\n").unwrap();
    assert_eq!(std::fs::read(mnt.join("t-0/offset/0")).unwrap(), b"x");
    assert!(data.join("commitfs.log").exists());
    umount(&mnt).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !data.join(".kafka_cleanshutdown").exists() {
        assert!(
            Instant::now() < deadline,
            "the daemon did not shut down cleanly"
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    // Bad options fail in the foreground process, with Kafka's wording.
    let out = run_bounded(
        Command::new(env!("CARGO_BIN_EXE_commitfs"))
            .args(["mount", "-o", "segment.bytes=16384"])
            .arg(&data)
            .arg(&mnt),
        "commitfs mount",
        sh_timeout(),
        String::new,
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains(
        "Invalid value 16384 for configuration segment.bytes: Value must be at least 1048576"
    ));
    assert!(!mounted(&mnt));
}

#[test]
fn read_only_mount() {
    let mut m = mount!();
    m.ok("mkdir t-0 && echo a >> t-0/log");
    m.unmount_clean();
    m.opts.push("ro".to_string());
    m.remount();
    assert_eq!(m.ok("cat t-0/offset/0"), "a");
    for cmd in [
        "echo b >> t-0/log",
        "mkdir t-1",
        "echo x > t-0/roll",
        "echo 2097152 > t-0/config/segment.bytes",
        "rmdir t-0",
    ] {
        m.fails(cmd, "Read-only file system");
    }
    assert_eq!(m.status("t-0", "log_end_offset"), 1);
}

/// The README's sequence: `umount`, then at once `check` and a new mount of
/// the same directory. `umount` returns before the daemon has flushed and
/// released the lock; `check` and `mount` wait for that (saying so).
#[test]
fn umount_then_check_and_mount_at_once() {
    let mut m = mount!();
    m.ok("mkdir t-0 t-1 && seq 1 400000 >> t-0/log && seq 1 400000 >> t-1/log");
    let bin = env!("CARGO_BIN_EXE_commitfs");
    let (data_dir, mnt_dir) = (m.data.clone(), m.mnt.clone());
    let (data, mnt) = (data_dir.display(), mnt_dir.display());
    let out = m.sh_in(
        Path::new("/"),
        &format!("umount {mnt} && {bin} check {data} && {bin} mount {data} {mnt}"),
    );
    let first = m.wait();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Whatever happens next, the daemon the last command started must go.
    let _unmount = Unmount(&mnt_dir, &data_dir);
    assert!(
        out.status.success(),
        "stdout: {stdout}\nstderr: {stderr}\n{}",
        m.log()
    );
    assert!(first.success(), "first daemon: {first}");
    assert!(stdout.contains(": 0 problems"), "{stdout}");
    assert!(mounted(&mnt_dir));
    assert_eq!(
        std::fs::read_to_string(mnt_dir.join("t-1/offset/399999")).unwrap(),
        "400000"
    );
    // A live mount is refused at once, and says where it is mounted.
    let out = m.sh_in(Path::new("/"), &format!("{bin} check {data}"));
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("mounted on {mnt}")), "{stderr}");
}

/// Unmounts a daemonised mount (on `.0`, of data dir `.1`) and waits
/// (bounded) for its daemon to let go of the data dir, killing it by its
/// pid if it does not.
struct Unmount<'a>(&'a Path, &'a Path);

impl Drop for Unmount<'_> {
    fn drop(&mut self) {
        stop_daemonised(self.1, self.0);
    }
}

/// A mount that recovers returns only once live, and while it waits prints
/// the load's progress in Kafka's wording on stderr. The daemon shows it
/// after about a second; `COMMITFS_PROGRESS_AFTER_MS=0` shows it from the
/// start, so the test does not depend on how fast this machine recovers.
#[test]
fn a_recovering_mount_prints_its_progress() {
    if !crate::harness::fuse_or_skip() {
        return;
    }
    use commitfs::record::NewRecord;
    use commitfs::storage::{LogConfig, LogManager, OpenOptions};
    let tmp = tempfile::tempdir().unwrap();
    let (data, mnt) = (tmp.path().join("data"), tmp.path().join("mnt"));
    let mut config = LogConfig::default();
    config.set("segment.index.bytes", "4096").unwrap();
    {
        let mgr = LogManager::open(&data, config.clone(), OpenOptions::default()).unwrap();
        for p in ["a-0", "a-1", "b-0"] {
            let log = mgr.create_partition(p).unwrap();
            for i in 0..5 {
                log.append(&[NewRecord::value(format!("{p} {i}").as_bytes())])
                    .unwrap();
                log.roll().unwrap();
            }
        }
        // Dropped without close: no clean-shutdown marker, a recovery at mount.
    }
    assert!(!data.join(".kafka_cleanshutdown").exists());
    // Nothing counts as flushed: every segment is recovered.
    std::fs::write(
        data.join("recovery-point-offset-checkpoint"),
        "0\n3\na 0 0\na 1 0\nb 0 0\n",
    )
    .unwrap();
    let out = run_bounded(
        Command::new(env!("CARGO_BIN_EXE_commitfs"))
            .args(["mount", "-o", "segment.index.bytes=4096"])
            .arg(&data)
            .arg(&mnt)
            .env("COMMITFS_PROGRESS_AFTER_MS", "0"),
        "commitfs mount of a data dir to recover",
        sh_timeout(),
        String::new,
    );
    let _unmount = Unmount(&mnt, &data);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // Live when the command returns.
    assert!(mounted(&mnt));
    assert_eq!(
        std::fs::read_to_string(mnt.join("b-0/offset/4")).unwrap(),
        "b-0 4"
    );
    let lines: Vec<&str> = stderr.lines().collect();
    let canonical = data.canonicalize().unwrap();
    assert!(
        lines.contains(
            &format!(
                "commitfs: Recovering 3 logs from {} since no clean shutdown file was found",
                canonical.display()
            )
            .as_str()
        ),
        "{stderr}"
    );
    for (i, p) in ["a-0", "a-1", "b-0"].iter().enumerate() {
        // The empty active segment the last roll made is dropped by recovery.
        let done = format!(
            "commitfs: Completed load of log {p} with 5 segments, local-log-start-offset 0 and log-end-offset 5 ({}/3 completed in ",
            i + 1
        );
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with(&done) && l.ends_with(" ms)")),
            "{done}\n{stderr}"
        );
        for s in 0..6 {
            let segment =
                format!("commitfs: Recovering unflushed segment {s}. {s}/6 recovered for {p} in ");
            assert!(
                lines.iter().any(|l| l.starts_with(&segment)),
                "{segment}\n{stderr}"
            );
        }
    }
}
