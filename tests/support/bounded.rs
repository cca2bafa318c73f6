//! Every outside command a test runs goes through here, bounded: 180 s by
//! default, or `COMMITFS_TEST_CMD_TIMEOUT` seconds. The bound is far more
//! than any command needs, even on a loaded machine, so only a hang (a
//! deadlocked daemon, a client waiting for an answer that never comes)
//! reaches it. Past it the command's whole process group is killed and the
//! test fails saying what hung and where its processes were blocked, instead
//! of hanging the suite.
//!
//! Shared by `tests/` and `mount-tests/` (included with `#[path]`).

#![allow(dead_code)]

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::thread::sleep;
use std::time::{Duration, Instant};

/// How long one command may run (`COMMITFS_TEST_CMD_TIMEOUT` seconds, 180
/// by default).
pub fn cmd_timeout() -> Duration {
    std::env::var("COMMITFS_TEST_CMD_TIMEOUT")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(Duration::from_secs(180), Duration::from_secs)
}

/// Runs `cmd` (stdin from /dev/null, output captured) within
/// [`cmd_timeout`]; a hang fails the test naming `what`.
pub fn run(cmd: &mut Command, what: &str) -> Output {
    run_bounded(cmd, what, cmd_timeout(), String::new)
}

/// [`run`] with `input` on the command's stdin.
pub fn run_with_input(cmd: &mut Command, what: &str, input: &[u8]) -> Output {
    match spawn_and_wait(cmd, Some(input.to_vec()), cmd_timeout()) {
        Ok(out) => out,
        Err(hung) => panic!("{what} {hung}"),
    }
}

/// Runs `cmd` (stdin from /dev/null, output captured) for `limit` at most.
/// Past it, the command's process group is killed and the test fails with
/// `what`, where the command's processes were blocked, and `context()` (the
/// daemon's log, say), instead of hanging.
pub fn run_bounded(
    cmd: &mut Command,
    what: &str,
    limit: Duration,
    context: impl FnOnce() -> String,
) -> Output {
    match spawn_and_wait(cmd, None, limit) {
        Ok(out) => out,
        Err(hung) => panic!("{what} {hung}\n{}", context()),
    }
}

/// [`run_bounded`] that answers a hang (or a command that cannot start)
/// with `Err` instead of failing: for setting up outside tools, where the
/// caller decides between a skip and a failure.
pub fn try_run(cmd: &mut Command, what: &str, limit: Duration) -> Result<Output, String> {
    spawn_and_wait(cmd, None, limit).map_err(|hung| format!("{what} {hung}"))
}

fn spawn_and_wait(
    cmd: &mut Command,
    input: Option<Vec<u8>>,
    limit: Duration,
) -> Result<Output, String> {
    let mut child = cmd
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start: {e}"))?;
    let feeder = input.map(|bytes| {
        let mut stdin = child.stdin.take().expect("piped stdin");
        std::thread::spawn(move || {
            // A command that exits early closes its stdin: not our failure.
            let _ = stdin.write_all(&bytes);
        })
    });
    let out = drain(child.stdout.take().expect("piped stdout"));
    let err = drain(child.stderr.take().expect("piped stderr"));
    let status = match wait_within(&mut child, limit) {
        Some(st) => st,
        None => {
            let blocked = kill_group(&mut child);
            // A process blocked in a FUSE request stays until the daemon
            // answers or dies, which the mount's guard sees to: do not wait
            // for its output here.
            return Err(format!(
                "did not finish within {limit:?}{} (killed)\n{blocked}",
                bound_note(limit)
            ));
        }
    };
    if let Some(f) = feeder {
        let _ = f.join();
    }
    Ok(Output {
        status,
        stdout: collect(out, "stdout")?,
        stderr: collect(err, "stderr")?,
    })
}

/// Where a bound comes from, when the environment sets it.
fn bound_note(limit: Duration) -> &'static str {
    if limit == cmd_timeout() {
        " (COMMITFS_TEST_CMD_TIMEOUT sets the bound)"
    } else {
        ""
    }
}

/// Reads a pipe to its end on a thread of its own, so that a chatty
/// command never blocks on a full pipe.
fn drain(mut r: impl Read + Send + 'static) -> Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = r.read_to_end(&mut v);
        let _ = tx.send(v);
    });
    rx
}

/// What a pipe held once the command exited. A process the command left
/// behind (a daemon) may hold the pipe open: that is waited for a moment,
/// then it is an error rather than a hang.
fn collect(rx: Receiver<Vec<u8>>, which: &str) -> Result<Vec<u8>, String> {
    rx.recv_timeout(Duration::from_secs(10)).map_err(|_| {
        format!("exited, but its {which} stayed open: a process it started still holds it")
    })
}

/// Waits for `child` to exit, `limit` at most; `None` past it.
pub fn wait_within(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(st) = child.try_wait().expect("try_wait") {
            return Some(st);
        }
        if Instant::now() > deadline {
            return None;
        }
        sleep(Duration::from_millis(5));
    }
}

/// Kills the process group of a child started with `process_group(0)`;
/// returns where its threads were blocked, read before the kill.
fn kill_group(child: &mut Child) -> String {
    let pid = child.id();
    let blocked = group_stacks(pid);
    // SAFETY: signalling the process group of our own child.
    unsafe { libc::kill(-(pid as i32), libc::SIGKILL) };
    blocked
}

/// A command started by [`spawn`], in a process group of its own. Dropped
/// before [`finish`], it kills the whole group and reaps it: a test that
/// fails half way leaves nothing running.
pub struct Running {
    child: Option<Child>,
}

impl Running {
    pub fn child(&mut self) -> &mut Child {
        self.child.as_mut().expect("running")
    }

    /// Whether it still runs.
    pub fn running(&mut self) -> bool {
        self.child().try_wait().expect("try_wait").is_none()
    }

    /// SIGKILL to the whole group, then a bounded wait for the command.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: signalling the process group of our own child.
            unsafe { libc::kill(-(c.id() as i32), libc::SIGKILL) };
            let _ = wait_within(&mut c, Duration::from_secs(10));
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Starts `cmd` in a process group of its own, so that [`finish`] and a
/// drop of the [`Running`] reach everything it started.
pub fn spawn(cmd: &mut Command, what: &str) -> Running {
    let child = cmd
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    Running { child: Some(child) }
}

/// Waits, within [`cmd_timeout`], for a command started by [`spawn`] with
/// its stdout and stderr piped, and returns its output; a hang kills its
/// group and fails the test naming `what`.
pub fn finish(running: Running, what: &str) -> Output {
    finish_within(running, what, cmd_timeout())
}

/// [`finish`] with a bound of its own, for a test whose point is that
/// the command ends well before something else could end it.
pub fn finish_within(mut running: Running, what: &str, limit: Duration) -> Output {
    let mut child = running.child.take().expect("running");
    let out = child.stdout.take().map(drain);
    let err = child.stderr.take().map(drain);
    let collect = |rx: Option<Receiver<Vec<u8>>>, which: &str| {
        rx.map(|rx| collect(rx, which).unwrap_or_else(|e| panic!("{what} {e}")))
            .unwrap_or_default()
    };
    let Some(status) = wait_within(&mut child, limit) else {
        let blocked = kill_group(&mut child);
        panic!(
            "{what} did not finish within {limit:?}{} (killed)\n{blocked}",
            bound_note(limit)
        );
    };
    Output {
        status,
        stdout: collect(out, "stdout"),
        stderr: collect(err, "stderr"),
    }
}

/// Where every process of the process group `pgid` is blocked: the command
/// and whatever it started (a shell's `cat`, a client's helpers).
pub fn group_stacks(pgid: u32) -> String {
    let mut members: Vec<(u32, String)> = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid pgrp ...: comm may hold spaces, so split after ')'.
        let Some((head, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let comm = head.split_once('(').map_or("", |(_, c)| c).to_string();
        if rest.split_whitespace().nth(2).and_then(|g| g.parse().ok()) == Some(pgid) {
            members.push((pid, comm));
        }
    }
    if members.is_empty() {
        return stacks("command", pgid);
    }
    members.sort();
    members
        .iter()
        .map(|(pid, comm)| stacks(&format!("command {comm:?}"), *pid))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Where each thread of process `pid` is blocked, from /proc (root reads the
/// kernel stacks).
pub fn stacks(who: &str, pid: u32) -> String {
    let mut text = format!("{who} {pid}, per thread:");
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return format!("{text} (gone)");
    };
    for t in tasks.filter_map(|t| t.ok()) {
        let p = t.path();
        let read = |f: &str| std::fs::read_to_string(p.join(f)).unwrap_or_default();
        text += &format!(
            "\n  {} {} wchan={}\n{}",
            t.file_name().to_string_lossy(),
            read("comm").trim(),
            read("wchan").trim(),
            read("stack")
                .lines()
                .map(|l| format!("    {l}"))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    text
}
