//! A compacted partition through the shell: `compact` asks for a pass,
//! `cat log` then reads what a consumer from the beginning reads,
//! `offset/N` of a record that went is ENOENT, `status` shows the cleaner,
//! keyless lines are refused, and the daemon logs Kafka's summary. The
//! cleaner's own threads are off (`log.cleaner.threads=0`) so that only the
//! passes asked for run.

use crate::mount;

#[test]
fn a_compacted_partition_through_the_shell() {
    let m = mount!("log.cleaner.threads=0", "parse.key=true", "key.separator=:");
    m.ok("mkdir t-0");
    m.ok("echo compact > t-0/config/cleanup.policy");
    m.ok("echo 0 > t-0/config/file.delete.delay.ms");
    // Three writes, two segments sealed: a=1 b=1 | a=2 c=1 | b=2, then a=3 active.
    for write in [
        "printf 'a:1\\nb:1\\n' >> t-0/log",
        "printf 'a:2\\nc:1\\n' >> t-0/log && echo 1 > t-0/roll",
        "printf 'b:2\\n' >> t-0/log && echo 1 > t-0/roll",
        "printf 'a:3\\n' >> t-0/log",
    ] {
        m.ok(write);
    }
    assert_eq!(m.ok("cat t-0/log"), "1\n1\n2\n1\n2\n3\n");
    let status = m.ok("cat t-0/status");
    assert!(status.contains("cleaner_checkpoint: none"), "{status}");

    m.ok("echo 1 > t-0/compact");
    // a=2 stays: a=3 is in the active segment, which is never cleaned.
    assert_eq!(m.ok("cat t-0/log"), "2\n1\n2\n3\n");
    assert_eq!(
        m.ok("wc -c < t-0/log").trim(),
        "8",
        "the stream's size is its bytes"
    );
    assert_eq!(m.ok("cat t-0/offset/4"), "2");
    assert_eq!(
        m.ok("getfattr --only-values -n user.kafka.key t-0/offset/4"),
        "b"
    );
    m.fails("cat t-0/offset/0", "No such file");
    m.fails("cat t-0/offset/1", "No such file");
    // `ls offset/` lists the offsets that hold a record, as lookup finds them.
    assert_eq!(m.ok("ls t-0/offset"), "2\n3\n4\n5\n");
    assert_eq!(m.status("t-0", "cleaner_checkpoint"), 5);
    let status = m.ok("cat t-0/status");
    assert!(
        status.contains("last_clean: [0, 5) 5 -> 3 messages"),
        "{status}"
    );
    assert!(status.contains("dirty_ratio: 0.000"), "{status}");
    let log = m.log();
    assert!(
        log.contains("Log cleaner thread 0 cleaned log t-0 (dirty section = [0, 5])"),
        "{log}"
    );
    assert!(log.contains("\tStart size: "), "{log}");
    assert!(log.contains("% size reduction ("), "{log}");

    // Without parse.key every line would be a record without a key.
    m.ok("echo false > t-0/config/parse.key");
    m.fails("env echo x >> t-0/log", "Invalid argument");
    m.fails("env printf x >> t-0/log", "Invalid argument");
    assert!(
        m.log()
            .contains("Compacted topic cannot accept message without key in topic partition t-0"),
        "{}",
        m.log()
    );
    assert_eq!(m.status("t-0", "log_end_offset"), 6, "nothing appended");

    // A partition that is not compacted has nothing for the cleaner.
    m.ok("mkdir u-0");
    m.fails("env echo 1 > u-0/compact", "Invalid argument");
    assert!(
        m.log()
            .contains("partition u-0 is not compacted (cleanup.policy=delete)")
    );
}
