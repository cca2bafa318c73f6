//! Every error kind, injected in memory, reaches the shell as the errno the
//! README's "Errors" table gives, with the log line the table promises. The
//! tree over a `MemBackend` is mounted through FUSE in this process; a real
//! `sh` appends to `log` (`/bin/echo x >> log`) and reads `status` (`cat`) while a fault is armed, and its
//! error text is compared with `strerror` of the README's errno. The
//! README is the oracle: the table is read from it, so it cannot drift from
//! the code. Needs root and /dev/fuse (skipped without, failed in CI).

#[allow(dead_code)]
#[path = "../mount-tests/harness.rs"]
mod harness;
#[path = "kafka_support/mod.rs"]
mod kafka_support;

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

use commitfs::backend::mem::{Call, MemBackend};
use commitfs::backend::{Backend, ErrorKind};
use commitfs::record::NewRecord;

/// One row of the README's table: the kind's name, its errno's name, the
/// log level.
#[derive(Debug)]
struct Row {
    kind: String,
    errno: String,
    level: String,
}

/// The table under "| kind | what it means | errno | log |".
fn readme_table() -> Vec<Row> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("the README");
    let mut lines = readme.lines();
    lines
        .find(|l| l.starts_with("| kind | what it means | errno | log |"))
        .expect("the README has the table of error kinds");
    lines
        .skip(1)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(|c| c.trim().trim_matches('`')).collect();
            Row {
                kind: cells[1].to_string(),
                errno: cells[cells.len() - 3].to_string(),
                level: cells[cells.len() - 2].to_string(),
            }
        })
        .collect()
}

/// Errno names as `errno.h` defines them.
fn errno_named(name: &str) -> i32 {
    match name {
        "ENOENT" => libc::ENOENT,
        "EEXIST" => libc::EEXIST,
        "EINVAL" => libc::EINVAL,
        "EMSGSIZE" => libc::EMSGSIZE,
        "EFBIG" => libc::EFBIG,
        "EOPNOTSUPP" => libc::EOPNOTSUPP,
        "EROFS" => libc::EROFS,
        "EPERM" => libc::EPERM,
        "EACCES" => libc::EACCES,
        "EBUSY" => libc::EBUSY,
        "ENOTEMPTY" => libc::ENOTEMPTY,
        "ENOSPC" => libc::ENOSPC,
        "EDQUOT" => libc::EDQUOT,
        "EMFILE" => libc::EMFILE,
        "EIO" => libc::EIO,
        "ETIMEDOUT" => libc::ETIMEDOUT,
        other => panic!("the README names an errno this test does not know: {other}"),
    }
}

/// What a shell prints for an errno: `strerror`'s text.
fn strerror(errno: i32) -> String {
    let text = std::io::Error::from_raw_os_error(errno).to_string();
    text.split(" (os error")
        .next()
        .unwrap_or_default()
        .to_string()
}

/// A kind's name as the README writes it (no fields).
fn name_of(kind: ErrorKind) -> String {
    let debug = format!("{kind:?}");
    debug
        .split([' ', '{'])
        .next()
        .unwrap_or_default()
        .to_string()
}

/// Every log line of this process, with its level.
static LINES: Mutex<Vec<(log::Level, String)>> = Mutex::new(Vec::new());

struct Capture;

impl log::Log for Capture {
    fn enabled(&self, _: &log::Metadata) -> bool {
        true
    }
    fn log(&self, r: &log::Record) {
        let line = (r.level(), r.args().to_string());
        LINES.lock().unwrap_or_else(|e| e.into_inner()).push(line);
    }
    fn flush(&self) {}
}

/// Lines logged since `from` that mention `needle`.
fn logged(from: usize, needle: &str) -> Vec<(log::Level, String)> {
    let lines = LINES.lock().unwrap_or_else(|e| e.into_inner());
    lines[from..]
        .iter()
        .filter(|(_, l)| l.contains(needle))
        .cloned()
        .collect()
}

fn log_len() -> usize {
    LINES.lock().unwrap_or_else(|e| e.into_inner()).len()
}

/// Runs `script` in `sh`; its exit status must say it failed. Returns stderr.
fn shell_fails(script: &str) -> String {
    let out = Command::new("timeout")
        .args(["20", "sh", "-c", script])
        .output()
        .expect("sh runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !out.status.success() && out.status.code() != Some(124),
        "{script}: {:?}, stderr {stderr:?}",
        out.status
    );
    stderr
}

/// Arms `kind` on `call`, runs `script`, and checks the shell's error text
/// and the log line against the README's row.
fn check(m: &MemBackend, row: &Row, kind: ErrorKind, call: Call, script: &str) {
    let from = log_len();
    m.faults().fail_next_call(call, kind);
    let stderr = shell_fails(script);
    assert_eq!(m.faults().armed(), 0, "{script}: the fault was not met");
    let text = strerror(errno_named(&row.errno));
    assert!(
        stderr.contains(&text),
        "{kind:?} in {call:?}: `{script}` printed {stderr:?}; the README says {} ({text})",
        row.errno
    );
    let injected = format!("injected fault: {kind:?} in {call:?}");
    let lines = logged(from, &injected);
    assert_eq!(lines.len(), 1, "{kind:?}: one log line says why: {lines:?}");
    let (level, line) = &lines[0];
    assert_eq!(
        level.as_str().to_lowercase(),
        row.level,
        "{kind:?}: the level of {line:?}"
    );
    if row.level != "debug" {
        let named = format!("({})", row.errno);
        assert!(line.contains(&named), "{kind:?}: {line:?} names {named}");
    }
}

fn run(mnt: &Path, m: &MemBackend) {
    let table = readme_table();
    let names: Vec<&str> = table.iter().map(|r| r.kind.as_str()).collect();
    let kinds: Vec<String> = ErrorKind::ALL.iter().map(|k| name_of(*k)).collect();
    assert_eq!(
        names, kinds,
        "the README's table lists every kind once, in order"
    );
    let log = mnt.join("t-0/log");
    let status = mnt.join("t-0/status");
    for (kind, row) in ErrorKind::ALL.iter().zip(&table) {
        // coreutils' echo: dash's own prints "I/O error" whatever the errno.
        let append = format!("/bin/echo x >> {}", log.display());
        check(m, row, *kind, Call::Append, &append);
        check(
            m,
            row,
            *kind,
            Call::Status,
            &format!("cat {}", status.display()),
        );
    }
    // Nothing of a refused append landed; the shell sees the log as it was.
    let out = kafka_support::bounded::run(Command::new("cat").arg(&log), "cat of the log");
    assert_eq!(out.stdout, b"first\n");
}

#[test]
fn every_error_kind_reaches_the_shell_as_the_readme_says() {
    if !harness::fuse_or_skip() {
        return;
    }
    log::set_boxed_logger(Box::new(Capture)).expect("the only logger");
    log::set_max_level(log::LevelFilter::Debug);
    let tmp = tempfile::Builder::new()
        .prefix("commitfs-faults-")
        .tempdir()
        .expect("a temp dir");
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir(&mnt).expect("the mountpoint");
    let m = Arc::new(MemBackend::new());
    m.create_partition("t-0").expect("t-0");
    let p = m.partition("t-0").expect("t-0");
    p.append(&[NewRecord::value(b"first")]).expect("a record");
    // Unmounted when dropped, on a failure too (while the panic unwinds).
    let mounted = commitfs::fs::fuse::mount(m.clone(), &mnt).expect("the mount");
    run(&mnt, &m);
    drop(mounted);
    assert!(!harness::mounted(&mnt), "unmounted");
}
