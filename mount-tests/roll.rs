use crate::{bulk_value, dd_bulk, mount, write_bulk};

#[test]
fn roll_at_one_mib() {
    let m = mount!("segment.bytes=1048576");
    m.ok("mkdir t-0");
    let src = m.data.parent().unwrap().join("bulk.txt");
    write_bulk(&src, 0, 3000);
    m.ok(&dd_bulk(&src, "t-0"));

    assert_eq!(m.status("t-0", "log_end_offset"), 3000);
    assert_eq!(m.status("t-0", "segments"), 5);
    assert_eq!(m.status("t-0", "active_segment"), 2720);
    let logs = m.ok("ls t-0 | grep '\\.log$'");
    assert_eq!(
        logs,
        "00000000000000000000.log\n00000000000000000680.log\n00000000000000001360.log\n\
         00000000000000002040.log\n00000000000000002720.log\n"
    );
    // 68 batches of 15,211 bytes per segment; every batch but the first is
    // indexed (15,211 > 4,096), so a sealed index trims to 67 entries.
    for base in [0, 680, 1360, 2040] {
        let size = |suffix: &str| {
            m.ok(&format!("stat -c %s t-0/{base:020}.{suffix}"))
                .trim()
                .to_string()
        };
        assert_eq!(size("log"), (68 * 15211).to_string(), "segment {base}");
        assert_eq!(size("index"), (67 * 8).to_string(), "segment {base}");
    }
    let ls = m.ok("ls -l t-0/00000000000000002720.index");
    assert_eq!(ls.split_whitespace().nth(4), Some("10485760"), "{ls}");
    assert_eq!(
        m.ok("stat -c %s t-0/00000000000000002720.log").trim(),
        (28 * 15211).to_string()
    );

    for i in [0, 679, 680, 1361, 2999] {
        assert_eq!(
            m.ok(&format!("cat t-0/offset/{i}")),
            bulk_value(i),
            "offset {i}"
        );
    }
    assert!(
        m.log().contains("Rolled new log segment at offset 680"),
        "{}",
        m.log()
    );
}

/// The README walkthrough's `segment.bytes=1048576` with the default
/// `max.message.bytes` (1048588): `cat` of a big file sends 1 MiB writes,
/// whose lines are packed into batches that fit a segment.
#[test]
fn big_writes_fit_one_mib_segments() {
    let m = mount!("segment.bytes=1048576");
    m.ok("mkdir t-0");
    let src = m.data.parent().unwrap().join("seq.txt");
    m.ok(&format!("seq 1 2000000 > {}", src.display()));
    m.ok(&format!("cat {} >> t-0/log", src.display()));
    assert_eq!(m.status("t-0", "log_end_offset"), 2_000_000);
    assert_eq!(m.ok("cat t-0/offset/1999999"), "2000000");
    assert_eq!(
        m.ok("cat t-0/log | md5sum"),
        m.ok(&format!("md5sum < {}", src.display()))
    );
}
