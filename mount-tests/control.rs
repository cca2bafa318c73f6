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

#[test]
fn fsync_on_log_flushes_the_partition() {
    let m = mount!();
    m.ok("mkdir t-0 && printf 'a\\nb\\n' >> t-0/log");
    assert_eq!(m.status("t-0", "recovery_point"), 0);
    m.ok("printf 'c\\n' | dd of=t-0/log oflag=append conv=notrunc,fsync status=none");
    assert_eq!(m.status("t-0", "log_end_offset"), 3);
    assert_eq!(m.status("t-0", "recovery_point"), 3);
}

#[test]
fn scheduler_applies_retention() {
    let m = mount!(
        "segment.bytes=1048576",
        "log.retention.check.interval.ms=200,file.delete.delay.ms=0"
    );
    m.ok("mkdir t-0");
    let src = m.data.parent().unwrap().join("bulk.txt");
    crate::write_bulk(&src, 0, 1500);
    m.ok(&crate::dd_bulk(&src, "t-0"));
    assert_eq!(m.status("t-0", "segments"), 3);
    // 2,281,650 bytes in segments of 1,034,348, 1,034,348 and 212,954: with
    // 200,000 allowed both sealed ones go (Kafka deletes while the excess is
    // at least the segment's size), never the active one.
    assert_eq!(m.status("t-0", "size_bytes"), 2_281_650);
    m.ok("echo 200000 > t-0/config/retention.bytes");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while m.status("t-0", "log_start_offset") != 1360 {
        assert!(
            std::time::Instant::now() < deadline,
            "retention never ran:\n{}",
            m.log()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(m.status("t-0", "segments"), 1);
    m.fails("cat t-0/offset/0", "No such file or directory");
    assert_eq!(m.ok("ls t-0/offset | head -1"), "1360\n");
    assert_eq!(m.ok("cat t-0/offset/1360"), crate::bulk_value(1360));
    assert_eq!(m.status("t-0", "log_end_offset"), 1500);
}
