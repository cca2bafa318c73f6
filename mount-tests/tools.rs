//! What system tools see of a mount: its filesystem type, and the quiet
//! answer to the ioctls programs send to any file they open.

use crate::mount;

/// `findmnt -t fuse.commitfs`, `mount -l -t fuse.commitfs` and `umount -a
/// -t fuse.commitfs` find commitfs mounts by their type.
#[test]
fn the_filesystem_type_is_fuse_commitfs() {
    let m = mount!();
    let mnt = m.mnt.display().to_string();
    let mounts = std::fs::read_to_string("/proc/mounts").expect("/proc/mounts");
    let line = mounts
        .lines()
        .find(|l| l.split(' ').nth(1) == Some(mnt.as_str()))
        .unwrap_or_else(|| panic!("{mnt} is not in /proc/mounts:\n{mounts}"));
    assert_eq!(line.split(' ').nth(2), Some("fuse.commitfs"), "{line}");
    let found = m.ok(&format!("findmnt -n -t fuse.commitfs -o TARGET {mnt}"));
    assert_eq!(found.trim(), mnt);
}

/// Python's `open()` asks every file whether it is a terminal (TCGETS):
/// the answer is a regular file's, ENOTTY, and the log stays quiet.
#[test]
fn a_terminal_probe_is_answered_quietly() {
    let m = mount!();
    m.ok("mkdir t-0 && echo a >> t-0/log");
    let before = m.log().lines().count();
    // `stty -F` sends TCGETS on the file and reports the errno.
    let err = m.fails("stty -F t-0/log", "Inappropriate ioctl for device");
    assert!(!err.is_empty());
    for _ in 0..20 {
        m.ok("stty -F t-0/status 2>/dev/null || true");
    }
    let log = m.log();
    let added: Vec<&str> = log.lines().skip(before).collect();
    assert!(
        !added.iter().any(|l| l.contains("ioctl")),
        "ioctls logged: {added:?}"
    );
}
