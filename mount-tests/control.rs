use crate::mount;

#[test]
fn roll_and_flush_files() {
    let m = mount!();
    m.ok("mkdir t-0");
    m.ok("printf 'a\\nb\\nc\\n' >> t-0/log");
    assert_eq!(m.status("t-0", "segments"), 1);
    assert_eq!(m.status("t-0", "recovery_point"), 0);

    m.ok("echo x > t-0/roll");
    assert_eq!(m.status("t-0", "segments"), 2);
    assert_eq!(m.status("t-0", "active_segment"), 3);
    assert!(m.ok("ls t-0").contains("00000000000000000003.log"));
    // The sealed segment's indexes are trimmed at once.
    assert_eq!(
        m.ok("stat -c %s t-0/00000000000000000000.index").trim(),
        "0"
    );

    m.ok("echo d >> t-0/log");
    let fsyncs = m.status("t-0", "fsyncs");
    m.ok("echo x > t-0/flush");
    assert_eq!(m.status("t-0", "recovery_point"), 4);
    assert_eq!(m.status("t-0", "log_end_offset"), 4);
    assert!(m.status("t-0", "fsyncs") > fsyncs);

    // Rolling an empty active segment does nothing.
    m.ok("echo x > t-0/roll");
    m.ok("echo x > t-0/roll");
    assert_eq!(m.status("t-0", "segments"), 3);
}

#[test]
fn config_files() {
    let mut m = mount!();
    m.ok("mkdir t-0");
    assert_eq!(m.ok("cat t-0/config/segment.bytes"), "1073741824\n");
    assert_eq!(m.ok("cat t-0/config/max.message.bytes"), "1048588\n");
    let names = m.ok("ls t-0/config");
    for n in [
        "segment.bytes",
        "segment.ms",
        "retention.ms",
        "retention.bytes",
        "index.interval.bytes",
        "flush.ms",
    ] {
        assert!(names.lines().any(|l| l == n), "{n} missing from {names}");
    }

    // dash reports every write error as "I/O error"; coreutils echo names the errno.
    m.fails(
        "env echo 16384 > t-0/config/segment.bytes",
        "Invalid argument",
    );
    assert!(
        m.log().contains(
            "Invalid value 16384 for configuration segment.bytes: Value must be at least 1048576"
        ),
        "{}",
        m.log()
    );
    assert_eq!(m.ok("cat t-0/config/segment.bytes"), "1073741824\n");

    m.ok("echo 2097152 > t-0/config/segment.bytes");
    assert_eq!(m.ok("cat t-0/config/segment.bytes"), "2097152\n");
    m.unmount_clean();
    m.remount();
    assert_eq!(m.ok("cat t-0/config/segment.bytes"), "2097152\n");
}

#[test]
fn mount_options_set_defaults() {
    let m = mount!(
        "segment.bytes=1048576,index.interval.bytes=100",
        "retention.ms=-1"
    );
    m.ok("mkdir t-0");
    assert_eq!(m.ok("cat t-0/config/segment.bytes"), "1048576\n");
    assert_eq!(m.ok("cat t-0/config/index.interval.bytes"), "100\n");
    assert_eq!(m.ok("cat t-0/config/retention.ms"), "-1\n");
}
