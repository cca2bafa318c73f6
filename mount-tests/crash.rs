use crate::{bulk_value, dd_bulk, mount, write_bulk};

#[test]
fn kill9_then_remount_recovers() {
    let mut m = mount!("segment.bytes=1048576");
    m.ok("mkdir t-0");
    let src = m.data.parent().unwrap().join("bulk.txt");
    write_bulk(&src, 0, 1500);
    m.ok(&dd_bulk(&src, "t-0"));
    m.ok("for i in 1 2 3 4 5; do echo tail-$i >> t-0/log; done");
    assert_eq!(m.status("t-0", "log_end_offset"), 1505);
    let sealed = m.data.join("t-0/00000000000000000680.index");
    let before = std::fs::read(&sealed).expect("sealed index");
    assert_eq!(before.len(), 67 * 8);
    let sealed_time = m.data.join("t-0/00000000000000000000.timeindex");
    let before_time = std::fs::read(&sealed_time).expect("sealed time index");

    m.kill9();
    assert!(!m.data.join(".kafka_cleanshutdown").exists());
    std::fs::remove_file(&sealed).unwrap();
    std::fs::remove_file(&sealed_time).unwrap();
    m.remount();

    let log = m.log();
    assert!(log.contains("Recovering"), "{log}");
    assert!(
        log.contains("since no clean shutdown file was found"),
        "{log}"
    );
    assert!(log.contains("Could not find offset index file"), "{log}");
    assert_eq!(m.status("t-0", "log_end_offset"), 1505);
    for i in [0, 679, 680, 700, 1499] {
        assert_eq!(
            m.ok(&format!("cat t-0/offset/{i}")),
            bulk_value(i),
            "offset {i}"
        );
    }
    for i in 1..=5 {
        assert_eq!(
            m.ok(&format!("cat t-0/offset/{}", 1499 + i)),
            format!("tail-{i}")
        );
    }
    assert_eq!(
        std::fs::read(&sealed).expect("rebuilt index"),
        before,
        "rebuilt index differs"
    );
    assert_eq!(
        std::fs::read(&sealed_time).expect("rebuilt time index"),
        before_time,
        "rebuilt time index differs"
    );
    // And the log goes on from where it was.
    m.ok("echo after >> t-0/log");
    assert_eq!(m.ok("cat t-0/offset/1505"), "after");
}
