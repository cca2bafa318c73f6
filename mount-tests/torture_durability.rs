//! Durability: with `flush.messages=1` every acknowledged write has been
//! fsynced before the write returned.
//!
//! Two honest witnesses: the daemon's own counters (the recovery point only
//! moves after the `.log` fsync returned, and `status` counts `.log` fsyncs),
//! and the system calls themselves, traced with `strace` (which CI installs):
//! for each write, the request read from `/dev/fuse`, the `pwrite64` of its
//! batch, an `fdatasync` of that `.log`, then the reply to that request, in
//! that order, whichever threads make them.

use std::collections::HashMap;
use std::process::Command;

use crate::mount;
use crate::torture_util::{append, status};

#[test]
fn flush_messages_1_fsyncs_every_acknowledged_write() {
    let m = mount!("flush.messages=1");
    m.ok("mkdir t-0");
    let writes = 50;
    for i in 0..writes {
        let before = status(&m, "t-0", "fsyncs");
        append(&m, "t-0", format!("a-{i}\nb-{i}\nc-{i}\n").as_bytes()).unwrap();
        let leo = status(&m, "t-0", "log_end_offset");
        assert_eq!(leo, 3 * (i + 1));
        // The recovery point moves only after fdatasync of the .log returned.
        assert_eq!(status(&m, "t-0", "recovery_point"), leo, "write {i}");
        assert!(status(&m, "t-0", "fsyncs") > before, "write {i}: no fsync");
        let cp = std::fs::read_to_string(m.data.join("recovery-point-offset-checkpoint")).unwrap();
        assert!(cp.lines().any(|l| l == format!("t 0 {leo}")), "{cp}");
    }
    println!(
        "durability: {writes} writes with flush.messages=1, {} .log fsyncs counted",
        status(&m, "t-0", "fsyncs")
    );
}

/// One system call of the daemon as `strace -f -tt -y -xx` showed it, its
/// `<unfinished ...>` and `<... resumed>` halves joined.
#[derive(Debug)]
struct Call {
    tid: String,
    name: String,
    /// The path of its first argument, when that is a descriptor.
    path: String,
    /// Its string arguments (or iovecs), decoded and concatenated.
    data: Vec<u8>,
    result: Option<i64>,
    /// Trace lines of its entry and of its return: strace prints the events
    /// of all threads in the order it saw them, and a thread stopped at a
    /// call's return cannot make its next call before strace let it go on.
    entry: usize,
    exit: usize,
    /// Times of entry and return, for messages.
    at: (String, String),
}

/// The bytes of every `"\xHH..."` string in `s` (strace -xx prints all bytes so).
fn strings(s: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut in_str = false;
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => in_str = !in_str,
            b'\\' if in_str && b.get(i + 1) == Some(&b'x') && i + 4 <= b.len() => {
                out.push(u8::from_str_radix(&s[i + 2..i + 4], 16).expect("hex byte"));
                i += 3;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// `<\x2f...>` after the first descriptor argument, decoded.
fn fd_path(args: &str) -> String {
    let Some((_, rest)) = args.split_once('<') else {
        return String::new();
    };
    let Some((hex, _)) = rest.split_once('>') else {
        return String::new();
    };
    String::from_utf8_lossy(&strings(&format!("\"{hex}\""))).into_owned()
}

fn parse_trace(text: &str) -> Vec<Call> {
    let mut calls = Vec::new();
    // Per thread: (name, entry text, entry line, entry time) of an unfinished call.
    let mut open: HashMap<String, (String, String, usize, String)> = HashMap::new();
    for (n, l) in text.lines().enumerate() {
        // `TID TIME CALL...`, the TID column padded with spaces.
        let Some((tid, rest)) = l.trim_start().split_once(' ') else {
            continue;
        };
        let Some((at, rest)) = rest.trim_start().split_once(' ') else {
            continue;
        };
        let (name, args, entry, entry_at, tail) = if let Some(r) = rest.strip_prefix("<... ") {
            let Some((name, tail)) = r.split_once(" resumed>") else {
                continue;
            };
            let Some((oname, args, entry, entry_at)) = open.remove(tid) else {
                panic!("line {n}: a return without its call: {l}");
            };
            assert_eq!(oname, name, "line {n}: resumed another call: {l}");
            (name.to_string(), args, entry, entry_at, tail.to_string())
        } else {
            let Some((name, args)) = rest.split_once('(') else {
                continue;
            };
            if let Some(args) = args.strip_suffix(" <unfinished ...>") {
                open.insert(
                    tid.to_string(),
                    (name.to_string(), args.to_string(), n, at.to_string()),
                );
                continue;
            }
            (
                name.to_string(),
                args.to_string(),
                n,
                at.to_string(),
                String::new(),
            )
        };
        let whole = args + &tail;
        let result = whole
            .rsplit_once(" = ")
            .and_then(|(_, r)| r.split(' ').next()?.parse().ok());
        calls.push(Call {
            tid: tid.to_string(),
            path: fd_path(&whole),
            data: strings(&whole),
            name,
            result,
            entry,
            exit: n,
            at: (entry_at, at.to_string()),
        });
    }
    calls
}

/// Whether `strace` can be run; in CI it must be (`.ci/run` installs it).
fn strace_or_skip() -> bool {
    let found = crate::kafka_support::bounded::try_run(
        Command::new("strace").arg("-V"),
        "strace -V",
        crate::harness::sh_timeout(),
    );
    if found.is_ok_and(|o| o.status.success()) {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "strace is not installed (CI is set, so this is a failure, not a skip)"
    );
    println!("skipping: strace is not installed (apt-get install strace)");
    false
}

/// The strongest witness: for each acknowledged write, whichever threads do
/// the work, the trace shows the FUSE WRITE request read from /dev/fuse, then
/// the `pwrite64` of its batch to a `.log`, then an `fdatasync` (or `fsync`)
/// of that `.log` that returned 0, and only then the successful reply to that
/// request (matched by its unique id) written to /dev/fuse.
#[test]
fn strace_shows_fdatasync_before_each_write_is_answered() {
    if !crate::harness::fuse_or_skip() || !strace_or_skip() {
        return;
    }
    // The daemon runs under strace from its start: attaching to a running
    // daemon leaves a moment where a thread is held but not yet traced.
    let mut trace = std::path::PathBuf::new();
    let mut m = crate::harness::Mount::wrapped(&["flush.messages=1"], |work| {
        trace = work.join("strace.out");
        [
            "strace",
            "-f",
            "-qq",
            "-tt",
            "-y",
            "-xx",
            "-s",
            "4096",
            "-e",
            "trace=read,pwrite64,fdatasync,fsync,writev",
            "-o",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([trace.display().to_string()])
        .collect()
    });
    m.ok("mkdir t-0");
    let writes = 20;
    // Each write's length is its own, so its reply (which says how many
    // bytes were written) is known by its content too.
    let marker = |i: usize| format!("dur-{i:04}-x");
    let data = |i: usize| format!("{}\ndur-{i:04}-y{}\n", marker(i), "y".repeat(i));
    for i in 0..writes {
        append(&m, "t-0", data(i).as_bytes()).unwrap();
    }
    // The daemon exits at the unmount, and strace with it, its trace complete.
    m.unmount_clean();
    let text = std::fs::read_to_string(&trace).unwrap();
    let calls = parse_trace(&text);
    let has = |hay: &[u8], needle: &[u8]| hay.windows(needle.len()).any(|w| w == needle);
    let u32_at = |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
    let u64_at = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
    let mut handed_over = 0;
    for i in 0..writes {
        let mk = marker(i);
        fn one<'a>(i: usize, what: &str, found: Vec<&'a Call>) -> &'a Call {
            assert_eq!(found.len(), 1, "write {i}: {what}: {found:#?}");
            found[0]
        }
        const FUSE_WRITE: u32 = 16;
        let request = one(
            i,
            "the WRITE request read from /dev/fuse",
            calls
                .iter()
                .filter(|c| c.name == "read" && c.path == "/dev/fuse" && c.result > Some(0))
                .filter(|c| c.data.len() >= 16 && has(&c.data, format!("{mk}\n").as_bytes()))
                .collect(),
        );
        assert_eq!(u32_at(&request.data, 4), FUSE_WRITE, "write {i}: opcode");
        let unique = u64_at(&request.data, 8);
        let pwrite = one(
            i,
            "the pwrite64 of its batch",
            calls
                .iter()
                .filter(|c| c.name == "pwrite64" && c.path.ends_with(".log"))
                .filter(|c| has(&c.data, mk.as_bytes()))
                .collect(),
        );
        assert!(
            pwrite.entry > request.exit && pwrite.result > Some(0),
            "write {i}: {pwrite:?} after {request:?}"
        );
        let sync = calls
            .iter()
            .filter(|c| c.name == "fdatasync" || c.name == "fsync")
            .find(|c| c.path == pwrite.path && c.entry > pwrite.exit && c.result == Some(0))
            .unwrap_or_else(|| panic!("write {i}: no sync of {} after {pwrite:?}", pwrite.path));
        let reply = one(
            i,
            "the reply to its request on /dev/fuse",
            calls
                .iter()
                .filter(|c| c.name == "writev" && c.path == "/dev/fuse" && c.data.len() >= 16)
                .filter(|c| u64_at(&c.data, 8) == unique)
                .collect(),
        );
        assert_eq!(
            u32_at(&reply.data, 4),
            0,
            "write {i}: the reply is an error"
        );
        assert_eq!(
            u32_at(&reply.data, 16) as usize,
            data(i).len(),
            "write {i}: the reply does not acknowledge its bytes"
        );
        assert!(
            reply.entry > sync.exit,
            "write {i}: request {unique} answered at {} (thread {}) before {} of {} returned at {} (thread {})",
            reply.at.0,
            reply.tid,
            sync.name,
            sync.path,
            sync.at.1,
            sync.tid
        );
        if [&pwrite.tid, &sync.tid, &reply.tid]
            .iter()
            .any(|t| **t != request.tid)
        {
            handed_over += 1;
        }
    }
    println!(
        "durability (strace): {writes} writes, each read from /dev/fuse, its batch written with pwrite64, \
         the .log synced, then answered; {handed_over} of them with the work on more than one thread"
    );
}
