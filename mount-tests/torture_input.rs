//! R4: bad input. Every row is one refusal: the errno (as the shell or libc
//! reports it), the daemon's log line saying what and why, and a data dir
//! that is byte-for-byte unchanged. Rows the kernel refuses before the daemon
//! sees them (empty names, `.`, `..`, `a/b`, over-long names, rmdir of a file)
//! have no daemon line; nor do misses of `offset/N`, which shells probe all
//! the time and the daemon logs at debug level only. They say so (`None`).
//! `utimes` was accepted silently before this suite; it is refused now.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::harness::Mount;
use crate::torture_util::{log_since, mapped};

const OPTS: &str = "segment.index.bytes=4096";

/// Every file of the data dir (but the lock and the daemon's own log) with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = p.strip_prefix(dir).unwrap().display().to_string();
            if e.file_type().unwrap().is_dir() {
                out.insert(rel + "/", Vec::new());
                stack.push(p);
            } else if rel != ".lock" && rel != "commitfs.log" {
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

struct Table<'a> {
    m: &'a Mount,
    before: BTreeMap<String, Vec<u8>>,
    rows: usize,
    /// Rows that did not hold, all reported at the end.
    failed: Vec<String>,
}

impl Table<'_> {
    /// `cmd` fails with `err` on stderr, the daemon logs `line` (None: the
    /// kernel refuses it before the daemon sees it), and nothing changes.
    fn row(&mut self, cmd: &str, err: &str, line: Option<&str>) {
        let from = self.m.log().len();
        let out = self.m.sh(cmd);
        let stderr = String::from_utf8_lossy(&out.stderr);
        self.rows += 1;
        if out.status.success() {
            self.failed.push(format!("`{cmd}` should have failed"));
        } else if !stderr.contains(err) {
            self.failed
                .push(format!("`{cmd}`: want {err:?}, got {:?}", stderr.trim()));
        }
        self.expect_line(cmd, from, line);
    }

    /// A row driven from Rust: `r` is the result of the call.
    fn call(
        &mut self,
        what: &str,
        from: usize,
        r: std::io::Result<()>,
        errno: i32,
        line: Option<&str>,
    ) {
        self.rows += 1;
        match r {
            Ok(()) => self.failed.push(format!("{what} should have failed")),
            Err(e) if e.raw_os_error() != Some(errno) => self.failed.push(format!("{what}: {e}")),
            Err(_) => {}
        }
        self.expect_line(what, from, line);
    }

    fn expect_line(&mut self, what: &str, from: usize, line: Option<&str>) {
        // The daemon may log after it replied: wait for the line, with a
        // bound that only a missing line reaches, even on a loaded machine.
        let mut log = log_since(self.m, from);
        if let Some(l) = line {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while !log.contains(l) && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(10));
                log = log_since(self.m, from);
            }
            if !log.contains(l) {
                self.failed
                    .push(format!("`{what}`: no daemon line {l:?} in: {}", log.trim()));
            }
        }
        assert!(!log.contains("panicked"), "`{what}`:\n{log}");
        let now = snapshot(&self.m.data);
        if now != self.before {
            self.failed.push(format!("`{what}` changed the data dir"));
            self.before = now;
        }
    }

    fn finish(&self) {
        assert!(
            self.failed.is_empty(),
            "{} of {} rows failed:\n{}",
            self.failed.len(),
            self.rows,
            self.failed.join("\n")
        );
    }
}

fn c(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

fn os(r: i32) -> std::io::Result<()> {
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[test]
fn bad_input_is_refused_logged_and_changes_nothing() {
    let mut m = crate::mount!(OPTS);
    m.ok("mkdir t-0 t-1 && printf 'a\\nb\\n' >> t-0/log && echo x > t-0/roll && echo c >> t-0/log");
    m.ok("echo 200 > t-1/config/max.message.bytes && echo small >> t-1/log");
    // Settle the checkpoints (the roll's flush runs in the background).
    m.ok("echo 1 > t-0/flush && echo 1 > t-1/flush");
    std::thread::sleep(std::time::Duration::from_millis(100));
    let seg = "t-0/00000000000000000000.log";
    let active = "t-0/00000000000000000002.log";
    let mut t = Table {
        before: snapshot(&m.data),
        m: &m,
        rows: 0,
        failed: Vec::new(),
    };
    let einval = "Invalid argument";
    let eperm = "Operation not permitted";
    let eacces = "Permission denied";
    let enoent = "No such file or directory";

    // Partition names.
    t.row("mkdir ''", enoent, None);
    t.row("mkdir .", "File exists", None);
    t.row("mkdir ..", "File exists", None);
    t.row("mkdir a/b", enoent, None);
    let too_long = format!("{}-0", "x".repeat(300));
    t.row(
        &format!("mkdir {too_long}"),
        einval,
        Some(&format!("refused mkdir of {too_long}")),
    );
    let long = format!("{}-0", "x".repeat(250));
    t.row(
        &format!("mkdir {long}"),
        einval,
        Some(&format!("refused mkdir of {long}")),
    );
    for name in [
        "é-0",
        "t",
        "t-",
        "-0",
        "t-01",
        "t-00",
        "t--1",
        "t-+1",
        "t-1e3",
        "t-4294967296",
        "t-0 ",
        "t:x-0",
        "t-0x1",
    ] {
        t.row(
            &format!("mkdir -- '{name}'"),
            einval,
            Some(&format!("refused mkdir of {name}")),
        );
    }
    t.row("mkdir t-0", "File exists", None);

    // Writes to segment files, indexes, status and offset/N.
    for f in [
        seg,
        "t-0/00000000000000000000.index",
        "t-0/00000000000000000000.timeindex",
        "t-0/status",
        "t-0/offset/0",
    ] {
        t.row(
            &format!("echo x >> {f}"),
            eacces,
            Some(&format!("refused open of {f} for writing")),
        );
    }

    // Creating files and directories.
    for f in [
        "t-0/newfile",
        "newfile",
        "t-0/offset/99",
        "t-0/00000000000000000009.log",
        "t-0/config/no.such.key",
    ] {
        t.row(
            &format!("touch {f}"),
            eperm,
            Some(&format!("refused create of {f}")),
        );
    }
    t.row("mkfifo t-0/fifo", eperm, Some("t-0/fifo"));
    t.row("mkdir t-0/sub", eperm, Some("refused mkdir of t-0/sub"));

    // rename, unlink, link, symlink, chmod, chown, utimes on reserved names and segments.
    for f in [
        "t-0/log",
        seg,
        active,
        "t-0/status",
        "t-0/roll",
        "t-0/offset/0",
        "t-0/config/segment.bytes",
        "t-0/offset",
    ] {
        t.row(
            &format!("mv {f} t-0/moved"),
            eperm,
            Some(&format!("refused rename of {f}")),
        );
        t.row(
            &format!("chmod 600 {f}"),
            eperm,
            Some(&format!("refused chmod of {f}")),
        );
        t.row(
            &format!("chown 1:1 {f}"),
            eperm,
            Some(&format!("refused chown of {f}")),
        );
        // -c: no open for writing first, so touch reports utimensat's own errno.
        t.row(
            &format!("touch -c -m -d @0 {f}"),
            eperm,
            Some(&format!("refused utimes of {f}")),
        );
        t.row(
            &format!("touch -c {f}"),
            eperm,
            Some(&format!("refused utimes of {f}")),
        );
    }
    t.row("mv t-0 t-9", eperm, Some("refused rename of t-0"));
    t.row("chmod 700 t-0", eperm, Some("refused chmod of t-0"));
    for f in [
        "t-0/log",
        seg,
        "t-0/status",
        "t-0/offset/0",
        "t-0/config/segment.bytes",
    ] {
        t.row(
            &format!("rm -f {f}"),
            eperm,
            Some(&format!("refused unlink of {f}")),
        );
        t.row(&format!("ln {f} t-0/hard"), eperm, Some("refused link"));
    }
    t.row("ln -s status t-0/soft", eperm, Some("refused symlink"));
    t.row("ln -s t-0 t-5", eperm, Some("refused symlink"));
    for f in [seg, "t-0/log", "t-0/status", "t-0"] {
        let from = m.log().len();
        let p = c(&m.mnt.join(f));
        // SAFETY: valid C strings and buffer.
        let r = os(unsafe {
            libc::setxattr(p.as_ptr(), c"user.x".as_ptr(), b"1".as_ptr().cast(), 1, 0)
        });
        t.call(
            &format!("setxattr on {f}"),
            from,
            r,
            libc::EPERM,
            Some("refused setxattr"),
        );
    }

    // A record over max.message.bytes (200 on t-1): nothing of the write goes in.
    t.row(
        "env printf 'ok\\n%0300d\\n' 0 >> t-1/log",
        "Message too long",
        Some("refused append of 2 records to t-1/log"),
    );

    // Bad config values: non-numeric, negative, below the minimum, empty, out of range, bad enum.
    for (name, value, kafka) in [
        (
            "segment.bytes",
            "lots",
            "Invalid value lots for configuration segment.bytes",
        ),
        (
            "segment.bytes",
            "16384",
            "Invalid value 16384 for configuration segment.bytes: Value must be at least 1048576",
        ),
        (
            "retention.ms",
            "-5",
            "Invalid value -5 for configuration retention.ms: Value must be at least -1",
        ),
        (
            "segment.ms",
            "0",
            "Invalid value 0 for configuration segment.ms: Value must be at least 1",
        ),
        (
            "flush.messages",
            "0",
            "Invalid value 0 for configuration flush.messages",
        ),
        (
            "index.interval.bytes",
            "1.5",
            "Invalid value 1.5 for configuration index.interval.bytes",
        ),
        (
            "segment.bytes",
            "99999999999999999999",
            "Invalid value 99999999999999999999 for configuration segment.bytes",
        ),
        (
            "compression.type",
            "brotli",
            "Invalid value brotli for configuration compression.type",
        ),
    ] {
        t.row(
            &format!("env echo {value} > t-0/config/{name}"),
            einval,
            Some(kafka),
        );
    }
    t.row(
        "env printf '' > t-0/config/retention.ms; env echo > t-0/config/retention.ms",
        einval,
        Some("retention.ms"),
    );

    // Offsets in every wrong spelling, and past either end: ENOENT.
    for n in [
        "007",
        "00",
        "+1",
        "-1",
        "1e3",
        "0x1",
        "1.0",
        " 1",
        "1 ",
        "٣",
        "99999999999999999999",
        "3",
        "18446744073709551615",
    ] {
        t.row(&format!("cat 't-0/offset/{n}'"), enoent, None);
    }

    // rmdir of what is not a partition.
    t.row(
        "rmdir t-0/offset",
        eperm,
        Some("refused rmdir of t-0/offset"),
    );
    t.row(
        "rmdir t-0/config",
        eperm,
        Some("refused rmdir of t-0/config"),
    );
    t.row("rmdir t-0/status", "Not a directory", None);
    t.row("rmdir nosuch-0", enoent, None);

    // mmap of a raw segment works read-only; a writable shared map is refused.
    let f = std::fs::File::open(m.mnt.join(seg)).unwrap();
    let bytes = std::fs::read(m.mnt.join(seg)).unwrap();
    let len = bytes.len();
    assert_eq!(mapped(&f, len), bytes, "a read-only mmap");
    // SAFETY: a map of a file we hold open, never read or written through.
    unsafe {
        use std::os::fd::AsRawFd;
        let from = m.log().len();
        let p = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        );
        let r = if p == libc::MAP_FAILED {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(())
        };
        t.call("writable mmap of a segment", from, r, libc::EACCES, None);
    }
    drop(f);
    t.finish();
    let rows = t.rows;

    // Writes after -o ro.
    m.unmount_clean();
    m.opts.push("ro".to_string());
    m.remount();
    let mut t = Table {
        before: snapshot(&m.data),
        m: &m,
        rows: 0,
        failed: Vec::new(),
    };
    let erofs = "Read-only file system";
    // The mount itself is read-only (MS_RDONLY): the kernel answers EROFS
    // before the daemon sees these, so there is no daemon line to find.
    t.row("echo b >> t-0/log", erofs, None);
    t.row("echo x > t-0/roll", erofs, None);
    t.row("echo 2097152 > t-0/config/segment.bytes", erofs, None);
    t.row("mkdir t-7", erofs, None);
    t.row("rmdir t-0", erofs, None);
    t.row("touch t-0/new", erofs, None);
    t.row("chmod 600 t-0/log", erofs, None);
    t.row("rm -f t-0/status", erofs, None);
    t.finish();
    println!(
        "bad_input: {} rows refused with their errno, a log line where the daemon sees them, nothing changed",
        rows + t.rows
    );
}
