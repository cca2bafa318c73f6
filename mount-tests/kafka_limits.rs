//! The daemonised mount's own log, `DATA/commitfs.log`, against a client
//! that makes it write: rotated by size into `commitfs.log.1 ..`, and
//! paused rather than allowed to take the last of the data directory's
//! disk. The data directory is a small tmpfs the test mounts.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use kafka_protocol::messages::ApiKey;
use kafka_protocol::messages::api_versions_request::ApiVersionsRequest;

use crate::harness::{Tmpfs, fuse_or_skip, stop_daemonised};
use crate::kafka_support::Conn;

const BIN: &str = env!("CARGO_BIN_EXE_commitfs");

/// A tmpfs mounted for the test, and a daemonised `commitfs mount` of a data
/// directory on it; both undone when dropped, each command bounded, the
/// daemon killed by its pid if it does not go after the unmount.
struct Setup {
    mnt: PathBuf,
    data: PathBuf,
    /// Unmounted after the daemon went (fields drop after `drop`).
    tmpfs: Tmpfs,
    _tmp: tempfile::TempDir,
}

impl Setup {
    fn start(size: &str, opts: &str) -> (Setup, String) {
        let tmp = tempfile::tempdir().unwrap();
        let tmpfs = Tmpfs::mount(&tmp.path().join("fs"), size);
        let mnt = tmp.path().join("mnt");
        let s = Setup {
            data: tmpfs.0.join("data"),
            mnt: mnt.clone(),
            tmpfs,
            _tmp: tmp,
        };
        // Without --foreground: the daemon logs to DATA/commitfs.log.
        let out = crate::kafka_support::bounded::run(
            Command::new(BIN)
                .arg("mount")
                .arg("-o")
                .arg(format!("listeners=PLAINTEXT://127.0.0.1:0,{opts}"))
                .arg(&s.data)
                .arg(&mnt)
                .env("RUST_LOG", "debug"),
            "commitfs mount",
        );
        assert!(
            out.status.success(),
            "mount failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // The daemon bound a free port and says which in its log, written
        // before the mount reports itself live.
        let log = std::fs::read_to_string(s.data().join("commitfs.log")).unwrap_or_default();
        let addr = crate::kafka_support::listener_addr(&log)
            .unwrap_or_else(|| panic!("no listener address in the daemon's log:\n{log}"));
        (s, addr)
    }

    fn data(&self) -> PathBuf {
        self.data.clone()
    }

    /// The log files and their sizes.
    fn logs(&self) -> Vec<(String, u64)> {
        let mut v: Vec<(String, u64)> = std::fs::read_dir(self.data())
            .unwrap()
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                name.starts_with("commitfs.log")
                    .then(|| (name, e.metadata().map_or(0, |m| m.len())))
            })
            .collect();
        v.sort();
        v
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        stop_daemonised(&self.data, &self.mnt);
    }
}

/// `n` requests on one connection: each writes debug lines to the log.
fn chatter(addr: &str, n: usize) {
    let mut c = Conn::new(addr);
    for _ in 0..n {
        let _: kafka_protocol::messages::ApiVersionsResponse =
            c.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    }
}

fn free_bytes(path: &Path) -> u64 {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: statvfs fills a local struct from a valid C string.
    unsafe {
        let mut s: libc::statvfs = std::mem::zeroed();
        assert_eq!(libc::statvfs(c.as_ptr(), &mut s), 0);
        s.f_bavail as u64 * s.f_frsize as u64
    }
}

#[test]
fn kafka_daemon_log_is_rotated_by_size() {
    if !fuse_or_skip() {
        return;
    }
    let (s, addr) = Setup::start(
        "32m",
        "daemon.log.max.bytes=16384,daemon.log.backup.count=2",
    );
    chatter(&addr, 3000);
    let logs = s.logs();
    let names: Vec<&str> = logs.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["commitfs.log", "commitfs.log.1", "commitfs.log.2"],
        "{logs:?}"
    );
    for (name, len) in &logs {
        // A file goes past the size by at most the line that crossed it.
        assert!(*len <= 16384 + 1024, "{name}: {len}");
    }
    let text = std::fs::read_to_string(s.data().join("commitfs.log.1")).unwrap();
    assert!(text.contains("ApiVersions v3"), "{text}");
}

#[test]
fn kafka_daemon_log_leaves_the_last_of_the_disk_to_the_partitions() {
    if !fuse_or_skip() {
        return;
    }
    // The default size (10 MiB) is more than the disk has left below.
    let (s, addr) = Setup::start("32m", "segment.bytes=1048576,segment.index.bytes=65536");
    std::fs::create_dir(s.mnt.join("t-0")).unwrap();
    // Fill the tmpfs to 3 MiB free: below the 4 MiB the log leaves alone.
    let filler = s.tmpfs.0.join("filler");
    let free = free_bytes(&s.tmpfs.0);
    let mut f = std::fs::File::create(&filler).unwrap();
    let chunk = vec![0u8; 1 << 20];
    let mut left = free - (3 << 20);
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        f.write_all(&chunk[..n]).unwrap();
        left -= n as u64;
    }
    f.sync_all().unwrap();
    drop(f);
    let before: u64 = s.logs().iter().map(|(_, l)| l).sum();
    // 30,000 requests would write a few MiB of debug lines: the log stops.
    chatter(&addr, 30_000);
    let after: u64 = s.logs().iter().map(|(_, l)| l).sum();
    assert!(
        after - before < 256 << 10,
        "the log grew by {} bytes on a nearly full disk",
        after - before
    );
    assert!(free_bytes(&s.tmpfs.0) > 2 << 20);
    // The partition can still take 1 MiB of appends.
    let line = format!("{}\n", "v".repeat(1023));
    let mut log = std::fs::OpenOptions::new()
        .append(true)
        .open(s.mnt.join("t-0/log"))
        .unwrap();
    for _ in 0..1024 {
        log.write_all(line.as_bytes()).unwrap();
    }
    drop(log);
    // Room again: the log says what it dropped.
    std::fs::remove_file(&filler).unwrap();
    let start = Instant::now();
    loop {
        chatter(&addr, 200);
        let text = std::fs::read_to_string(s.data().join("commitfs.log")).unwrap_or_default();
        if text.contains("log lines were dropped") {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no note of the dropped lines"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}
