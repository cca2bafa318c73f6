//! Reading like a consumer: `log` as the consumer stream (`cat`, `tail`, `dd`,
//! `tail -f`), `offset/N` xattrs through `getfattr`, and `time/<ms>`.

use std::ffi::CString;
use std::io::{BufRead, BufReader};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::mount;

/// The whole stream of records `0..n` written as `value-<i>` lines.
fn stream(n: usize) -> String {
    (0..n).map(|i| format!("value-{i}\n")).collect()
}

#[test]
fn log_reads_as_the_consumer_stream() {
    let m = mount!();
    m.ok("mkdir t-0");
    m.ok("for i in $(seq 0 9); do echo value-$i; done >> t-0/log");
    m.ok("echo x > t-0/roll");
    m.ok("for i in $(seq 10 19); do echo value-$i; done >> t-0/log");
    let all = stream(20);
    assert_eq!(m.ok("cat t-0/log"), all);
    assert_eq!(
        m.ok("stat -c %s t-0/log").trim(),
        all.len().to_string(),
        "st_size is the stream length"
    );
    assert_eq!(m.ok("tail -n 3 t-0/log"), "value-17\nvalue-18\nvalue-19\n");
    assert_eq!(m.ok("head -n 2 t-0/log"), "value-0\nvalue-1\n");
    assert_eq!(m.ok("tail -c 9 t-0/log"), "value-19\n");
    // Positioned reads anywhere, across the segment boundary too.
    let at = all.find("value-9").unwrap();
    assert_eq!(
        m.ok(&format!(
            "dd if=t-0/log bs=1 skip={at} count=16 status=none"
        )),
        &all[at..at + 16]
    );
    assert_eq!(
        m.ok("dd if=t-0/log bs=7 skip=2 count=1 status=none"),
        &all[14..21]
    );
    // less as a pager reads the same bytes.
    if m.sh("command -v less").status.success() {
        assert_eq!(m.ok("less -F t-0/log"), all);
    }
    // Empty records are empty lines; a partition with nothing reads as nothing.
    m.ok("printf '\\n\\n' >> t-0/log");
    assert_eq!(m.ok("tail -n 3 t-0/log"), "value-19\n\n\n");
    m.ok("mkdir e-0");
    assert_eq!(m.ok("cat e-0/log"), "");
    assert_eq!(m.ok("stat -c %s e-0/log").trim(), "0");
    // Mode: readable like every record, writable by the owner.
    assert_eq!(m.ok("stat -c %a t-0/log").trim(), "644");
    // One descriptor open read-write can append and read back.
    m.ok("exec 3<>t-0/log && echo rw-line >&3 && exec 3>&-");
    assert_eq!(m.ok("tail -n 1 t-0/log"), "rw-line\n");
}

/// A child process killed and reaped on drop, so no `tail -f` outlives its test
/// or holds the mount busy (declare it after the mount: it drops first).
pub(crate) struct Reaped(pub Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `tail -n FROM -f path`, reaped on drop, and each line it prints with
/// when it came, read on a thread of its own so that a test can bound its
/// wait for the next.
pub(crate) fn tail_f(from: &str, path: &Path) -> (Reaped, mpsc::Receiver<(String, Instant)>) {
    let mut tail = Reaped(
        Command::new("tail")
            .args(["-n", from, "-f"])
            .arg(path)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn tail -f"),
    );
    let out = tail.0.stdout.take().expect("tail stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { return };
            if tx.send((line, Instant::now())).is_err() {
                return;
            }
        }
    });
    (tail, rx)
}

#[test]
fn tail_f_follows_appends() {
    let m = mount!();
    m.ok("mkdir t-0");
    m.ok("printf 'old-1\\nold-2\\n' >> t-0/log");
    let (tail, rx) = tail_f("1", &m.mnt.join("t-0/log"));
    // GNU tail polls fstat once a second, and a loaded machine can delay it
    // by more: the bound is only for a tail that never sees the growth (a
    // cached size would hide it for good). That the size tail polls is fresh
    // at once is checked right after each append, without timing.
    let next = |what: &str| -> (String, Instant) {
        rx.recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("tail -f printed nothing for {what} in 30 s"))
    };
    assert_eq!(next("the last old line").0, "old-2");
    let mut size = "old-1\nold-2\n".len();
    for i in 0..3 {
        let line = format!("new-{i}");
        let sent = Instant::now();
        m.ok(&format!("echo {line} >> t-0/log"));
        size += line.len() + 1;
        assert_eq!(m.ok("stat -c %s t-0/log").trim(), size.to_string());
        let (got, at) = next(&line);
        assert_eq!(got, line);
        println!(
            "tail -f printed {line} {:?} after the append",
            at.duration_since(sent)
        );
    }
    // Several records in one write arrive together.
    m.ok("printf 'b-1\\nb-2\\n' >> t-0/log");
    assert_eq!(next("b-1").0, "b-1");
    assert_eq!(next("b-2").0, "b-2");
    drop(tail);
}

/// `getxattr(2)` with a buffer of `size` bytes: the value, or the errno.
pub fn getxattr(path: &Path, name: &str, size: usize) -> Result<Vec<u8>, i32> {
    let p = CString::new(path.as_os_str().as_bytes()).unwrap();
    let n = CString::new(name).unwrap();
    let mut buf = vec![0u8; size];
    // SAFETY: the buffer is `size` bytes long; the strings are NUL-terminated.
    let r = unsafe { libc::getxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), size) };
    if r < 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
    }
    buf.truncate(r as usize);
    Ok(buf)
}

fn listxattr(path: &Path, size: usize) -> Result<Vec<u8>, i32> {
    let p = CString::new(path.as_os_str().as_bytes()).unwrap();
    let mut buf = vec![0u8; size];
    // SAFETY: as above.
    let r = unsafe { libc::listxattr(p.as_ptr(), buf.as_mut_ptr().cast(), size) };
    if r < 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
    }
    buf.truncate(r as usize);
    Ok(buf)
}

#[test]
fn offset_xattrs_through_getfattr() {
    let m = mount!();
    m.ok("mkdir t-0");
    m.ok("printf 'plain-a\\nplain-b\\n' >> t-0/log");
    m.ok("echo true > t-0/config/parse.key");
    // A binary key: 'k', 0x01, 0xff, then the tab separator.
    m.ok("printf 'k\\001\\377\\tkeyed-value\\n' >> t-0/log");
    assert_eq!(m.ok("cat t-0/offset/2"), "keyed-value");

    let dump = m.ok("getfattr -d -m - -e hex t-0/offset/2");
    let attrs: Vec<(&str, &str)> = dump.lines().filter_map(|l| l.split_once('=')).collect();
    let names: Vec<&str> = attrs.iter().map(|(n, _)| *n).collect();
    assert_eq!(
        names,
        [
            "user.kafka.batch_base_offset",
            "user.kafka.key",
            "user.kafka.position",
            "user.kafka.timestamp",
            "user.kafka.timestamp_type",
        ],
        "getfattr lists exactly these (sorted):\n{dump}"
    );
    let get = |name: &str| m.ok(&format!("getfattr --only-values -n {name} t-0/offset/2"));
    assert_eq!(
        m.ok("getfattr -e hex -n user.kafka.key t-0/offset/2 | grep key"),
        "user.kafka.key=0x6b01ff\n"
    );
    assert_eq!(get("user.kafka.timestamp_type"), "CreateTime");
    assert_eq!(get("user.kafka.batch_base_offset"), "2");
    let ts: i64 = get("user.kafka.timestamp").parse().unwrap();
    let mtime: i64 = m.ok("stat -c %Y t-0/offset/2").trim().parse().unwrap();
    assert_eq!(ts / 1000, mtime, "the timestamp is the mtime, in ms");
    // The position is where the batch starts in the segment: a batch header
    // with base offset 2 sits there.
    let pos: u64 = get("user.kafka.position").parse().unwrap();
    let head = m.ok(&format!(
        "dd if=t-0/00000000000000000000.log bs=1 skip={pos} count=8 status=none | od -A n -t x1"
    ));
    assert_eq!(
        head.split_whitespace().collect::<String>(),
        "0000000000000002"
    );

    // Null key: no user.kafka.key at all.
    let plain = m.ok("getfattr -d -m - t-0/offset/0");
    assert!(!plain.contains("user.kafka.key"), "{plain}");
    assert!(
        plain.contains("user.kafka.timestamp_type=\"CreateTime\""),
        "{plain}"
    );
    m.fails(
        "getfattr -n user.kafka.key t-0/offset/0",
        "No such attribute",
    );
    // Other nodes have none.
    assert_eq!(m.ok("getfattr -d -m - t-0/log t-0/status"), "");

    // The size-probe protocol, ERANGE and ENODATA, with the syscalls themselves.
    let p = m.mnt.join("t-0/offset/2");
    assert_eq!(getxattr(&p, "user.kafka.key", 0), Ok(vec![]));
    let probe = {
        let c = CString::new(p.as_os_str().as_bytes()).unwrap();
        let n = CString::new("user.kafka.key").unwrap();
        // SAFETY: a size-0 probe writes nothing.
        unsafe { libc::getxattr(c.as_ptr(), n.as_ptr(), std::ptr::null_mut(), 0) }
    };
    assert_eq!(probe, 3, "a size-0 getxattr returns the value's length");
    assert_eq!(getxattr(&p, "user.kafka.key", 2), Err(libc::ERANGE));
    assert_eq!(getxattr(&p, "user.kafka.key", 3), Ok(vec![b'k', 1, 0xff]));
    assert_eq!(getxattr(&p, "user.kafka.nope", 64), Err(libc::ENODATA));
    let list = listxattr(&p, 4096).unwrap();
    assert_eq!(listxattr(&p, 3), Err(libc::ERANGE));
    let names: Vec<&[u8]> = list.split(|b| *b == 0).filter(|n| !n.is_empty()).collect();
    assert_eq!(names.len(), 5);
    assert_eq!(*list.last().unwrap(), 0, "every name NUL-terminated");

    // Still refused: setting or removing.
    m.fails(
        "setfattr -n user.kafka.key -v x t-0/offset/2",
        "Operation not permitted",
    );
    m.fails(
        "setfattr -x user.kafka.key t-0/offset/2",
        "Operation not permitted",
    );
}

#[test]
fn time_dir_finds_offsets_by_timestamp() {
    let m = mount!();
    m.ok("mkdir t-0");
    let mut stamps = Vec::new();
    for i in 0..4 {
        m.ok(&format!("echo at-{i} >> t-0/log"));
        stamps.push(
            m.ok(&format!(
                "getfattr --only-values -n user.kafka.timestamp t-0/offset/{i}"
            ))
            .parse::<i64>()
            .unwrap(),
        );
        std::thread::sleep(Duration::from_millis(15));
    }
    assert!(stamps.windows(2).all(|w| w[0] < w[1]), "{stamps:?}");
    assert_eq!(m.ok("cat t-0/time/0"), "0\n");
    for (i, ts) in stamps.iter().enumerate() {
        assert_eq!(m.ok(&format!("cat t-0/time/{ts}")), format!("{i}\n"));
        // Between two records' timestamps: the later one.
        if i > 0 {
            assert_eq!(
                m.ok(&format!("cat t-0/time/{}", stamps[i - 1] + 1)),
                format!("{i}\n")
            );
        }
    }
    assert_eq!(
        m.ok(&format!("stat -c %s t-0/time/{}", stamps[3])).trim(),
        "2"
    );
    let past = stamps[3] + 1;
    m.fails(&format!("cat t-0/time/{past}"), "No such file or directory");
    for bad in ["007", "+1", "-1", "1e3", "x"] {
        m.fails(&format!("cat t-0/time/{bad}"), "No such file or directory");
    }
    assert_eq!(m.ok("ls t-0/time"), "");
    // A later record makes a past-the-end timestamp resolve.
    std::thread::sleep(Duration::from_millis(5));
    m.ok("echo late >> t-0/log");
    assert_eq!(m.ok(&format!("cat t-0/time/{past}")), "4\n");
}
