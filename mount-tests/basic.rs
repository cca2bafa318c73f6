use std::time::{Duration, Instant};

use crate::mount;

#[test]
fn append_then_read() {
    let m = mount!();
    m.ok("mkdir t-0");
    assert_eq!(m.ok("ls"), "groups\nt-0\n");
    m.ok("printf 'a\\nb\\nc\\n' >> t-0/log");
    m.ok("echo hello >> t-0/log");
    // `>` is taken as `>>`: the truncate that precedes the write changes nothing.
    m.ok("echo world > t-0/log");
    let values = ["a", "b", "c", "hello", "world"];
    assert_eq!(m.ok("ls t-0/offset"), "0\n1\n2\n3\n4\n");
    for (i, v) in values.iter().enumerate() {
        assert_eq!(m.ok(&format!("cat t-0/offset/{i}")), *v, "offset {i}");
        assert_eq!(
            m.ok(&format!("stat -c %s t-0/offset/{i}")).trim(),
            v.len().to_string()
        );
    }
    assert_eq!(m.status("t-0", "log_end_offset"), 5);
    assert_eq!(m.status("t-0", "log_start_offset"), 0);

    // Binary-safe values; an empty line is an empty record.
    m.ok("printf 'x\\001\\377y\\n\\n' >> t-0/log");
    assert_eq!(
        m.ok("od -A n -t x1 t-0/offset/5")
            .split_whitespace()
            .collect::<Vec<_>>(),
        ["78", "01", "ff", "79"]
    );
    assert_eq!(m.ok("stat -c %s t-0/offset/6").trim(), "0");

    // The record's mtime is its timestamp: now, give or take.
    let mtime: u64 = m.ok("stat -c %Y t-0/offset/0").trim().parse().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(now.abs_diff(mtime) < 60, "mtime {mtime} vs now {now}");

    // Non-canonical or out-of-range names do not exist.
    for bad in ["007", "+1", "-1", "1e3", "7", "00"] {
        m.fails(
            &format!("cat t-0/offset/{bad}"),
            "No such file or directory",
        );
    }
}

#[test]
fn unterminated_line_is_appended_at_close() {
    let m = mount!();
    m.ok("mkdir t-0");
    m.ok("printf 'one\\ntw' >> t-0/log");
    // RELEASE reaches the daemon asynchronously after close(2) returns.
    let deadline = Instant::now() + Duration::from_secs(5);
    while m.status("t-0", "log_end_offset") < 2 {
        assert!(
            Instant::now() < deadline,
            "the held line was never appended"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(m.ok("cat t-0/offset/0"), "one");
    assert_eq!(m.ok("cat t-0/offset/1"), "tw");
    // A line cut across two writes on one descriptor is one record.
    m.ok("{ printf 'thr'; printf 'ee\\nfour\\n'; } >> t-0/log");
    assert_eq!(m.ok("cat t-0/offset/2"), "three");
    assert_eq!(m.ok("cat t-0/offset/3"), "four");
}

#[test]
fn sizes_are_fresh_after_every_write() {
    let m = mount!();
    m.ok("mkdir t-0");
    let size = || -> u64 {
        m.ok("stat -c %s t-0/00000000000000000000.log")
            .trim()
            .parse()
            .unwrap()
    };
    assert_eq!(size(), 0);
    let mut last = 0;
    for i in 0..5 {
        m.ok(&format!("echo value-{i} >> t-0/log"));
        let now = size();
        assert!(
            now > last,
            "size did not grow after write {i}: {last} -> {now}"
        );
        last = now;
        assert_eq!(m.status("t-0", "size_bytes") as u64, now);
    }
}

#[test]
fn rmdir_deletes_and_mkdir_recreates() {
    let m = mount!();
    m.ok("mkdir t-0 u-0");
    m.ok("echo a >> t-0/log");
    assert_eq!(m.ok("ls"), "groups\nt-0\nu-0\n");
    m.ok("rmdir t-0");
    assert_eq!(m.ok("ls"), "groups\nu-0\n");
    assert!(!m.data.join("t-0").exists());
    m.ok("mkdir t-0");
    assert_eq!(m.status("t-0", "log_end_offset"), 0);
    m.fails("cat t-0/offset/0", "No such file or directory");
}

#[test]
fn large_writes_split_into_requests_keep_every_line_whole() {
    let m = mount!();
    m.ok("mkdir t-0");
    let src = m.data.parent().unwrap().join("lines.txt");
    let text: String = (0..300_000).map(|i| format!("line-{i:06}\n")).collect();
    std::fs::write(&src, &text).unwrap();
    // One 3.6 MB write(2): the kernel cuts it into 1 MiB requests mid-line.
    m.ok(&format!(
        "dd if={} of=t-0/log bs=4M oflag=append conv=notrunc status=none",
        src.display()
    ));
    assert_eq!(m.status("t-0", "log_end_offset"), 300_000);
    for i in [0, 87_381, 87_382, 174_762, 299_999] {
        assert_eq!(m.ok(&format!("cat t-0/offset/{i}")), format!("line-{i:06}"));
    }
}
