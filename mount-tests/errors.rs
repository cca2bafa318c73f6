//! The error table: each refusal has its errno (seen through the shell's
//! message), a log line saying why, and changes nothing.

use crate::mount;

#[test]
fn error_table() {
    let m = mount!();
    m.ok("mkdir t-0 && printf 'a\\nb\\n' >> t-0/log && echo x > t-0/roll && echo c >> t-0/log");
    // Sizes of the segment files and the names in the partition (status itself
    // changes: it counts lookups).
    let snapshot = "ls t-0 && stat -c '%n %s %Y' t-0/0*";
    let listing = m.ok(snapshot);
    let seg = "t-0/00000000000000000000.log";

    // Bad partition name on mkdir: EINVAL; existing one: EEXIST.
    m.fails("mkdir bad_name", "Invalid argument");
    m.fails("mkdir t-01", "Invalid argument");
    m.fails("mkdir t-0", "File exists");
    assert_eq!(m.ok("ls"), "groups\nt-0\n");

    // Writes to segment files, status and offset/N: EACCES.
    m.fails(&format!("echo x >> {seg}"), "Permission denied");
    m.fails("echo x > t-0/status", "Permission denied");
    m.fails("echo x > t-0/offset/0", "Permission denied");
    // Control files are write-only.
    m.fails("cat t-0/roll", "Permission denied");

    // unlink, rename, chmod, chown, truncate, link, symlink, setxattr: EPERM.
    m.fails(&format!("rm -f {seg}"), "Operation not permitted");
    m.fails("rm -f t-0/status", "Operation not permitted");
    m.fails("rm -f t-0/offset/0", "Operation not permitted");
    m.fails("mv t-0/log t-0/log2", "Operation not permitted");
    m.fails(&format!("mv {seg} t-0/x.log"), "Operation not permitted");
    m.fails("chmod 666 t-0/log", "Operation not permitted");
    m.fails(&format!("chmod 644 {seg}"), "Operation not permitted");
    m.fails("chown 1:1 t-0/status", "Operation not permitted");
    m.fails("truncate -s 5 t-0/log", "Operation not permitted");
    m.fails(
        "truncate -s 1 t-0/config/segment.bytes",
        "Operation not permitted",
    );
    // Opening a segment for the truncate is already refused.
    m.fails(&format!("truncate -s 0 {seg}"), "Permission denied");
    m.fails("ln t-0/status t-0/s2", "Operation not permitted");
    m.fails("ln -s status t-0/s3", "Operation not permitted");
    m.fails("rmdir t-0/offset", "Operation not permitted");
    if m.sh("command -v setfattr").status.success() {
        m.fails(
            &format!("setfattr -n user.x -v 1 {seg}"),
            "Operation not permitted",
        );
    }

    // create of an unknown name: EPERM, in a partition or the root.
    m.fails("touch t-0/newfile", "Operation not permitted");
    m.fails("echo x > t-0/newfile", "Operation not permitted");
    m.fails("touch newfile", "Operation not permitted");

    // A record over max.message.bytes: EMSGSIZE, and nothing of the write goes in.
    m.ok("echo 200 > t-0/config/max.message.bytes");
    // `env`: coreutils names the errno of a failed write, dash says "I/O error".
    m.fails(
        "env printf 'small\\n%0300d\\n' 0 >> t-0/log",
        "Message too long",
    );
    assert_eq!(m.status("t-0", "log_end_offset"), 3);

    // A bad config value: EINVAL, Kafka's message in the log, value kept.
    m.fails("env echo -5 > t-0/config/retention.ms", "Invalid argument");
    m.fails(
        "env echo lots > t-0/config/segment.bytes",
        "Invalid argument",
    );
    assert_eq!(m.ok("cat t-0/config/retention.ms"), "604800000\n");
    let log = m.log();
    assert!(
        log.contains("Invalid value -5 for configuration retention.ms: Value must be at least -1"),
        "{log}"
    );

    // Nothing changed.
    assert_eq!(m.ok(snapshot), listing);
    assert_eq!(m.ok("cat t-0/offset/0 t-0/offset/1 t-0/offset/2"), "abc");
    assert_eq!(m.status("t-0", "log_end_offset"), 3);

    // Every refusal above left a line saying what and why.
    for what in [
        "refused open of t-0/status for writing",
        "refused unlink of t-0/00000000000000000000.log",
        "refused rename of t-0/log",
        "refused chmod of t-0/log",
        "refused truncate of t-0/log to 5 bytes",
        "refused create of t-0/newfile",
        "refused mkdir of bad_name",
        "refused append of 2 records to t-0/log",
    ] {
        assert!(log.contains(what), "no log line for {what:?}:\n{log}");
    }
}

/// `access(2)` (`test -r/-w/-x`) answers what the tree does, for root too.
#[test]
fn access_follows_the_modes() {
    let m = crate::mount!();
    m.ok("mkdir t-0");
    for yes in [
        "test -r t-0/status",
        "test -w t-0/log && test -r t-0/log",
        "test -w t-0/roll",
        "test -w t-0/config/segment.bytes",
        "test -x t-0/offset",
    ] {
        m.ok(yes);
    }
    for no in [
        "test -w t-0/status",
        "test -r t-0/roll",
        "test -w t-0/00000000000000000000.log",
        "test -w t-0/offset",
        "test -x t-0/log",
    ] {
        m.fails(no, "");
    }
    assert_eq!(
        m.ok("stat -c %a t-0/log t-0/status t-0/roll")
            .split_whitespace()
            .collect::<Vec<_>>(),
        ["644", "444", "200"]
    );
}
