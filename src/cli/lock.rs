//! A data directory another commitfs process holds: refused if it is in
//! use, waited for if its daemon is only finishing a shutdown.
//!
//! `umount` returns as soon as the kernel lets go of the mount; the daemon
//! then flushes, writes `.kafka_cleanshutdown` and releases `.lock`. So
//! `umount M && commitfs check D` would find `D` locked for a moment. A
//! command that needs the directory waits for that, with a bound, and says
//! it is waiting.

use std::path::Path;
use std::time::{Duration, Instant};

use commitfs::storage::lock_holder;

/// Longest wait for a daemon's shutdown.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(30);
/// The note a mounting daemon leaves in `.lock`.
const MOUNTED_ON: &str = "mounted on ";

/// The note `commitfs mount` leaves in the lock it holds.
pub fn mounted_note(mountpoint: &Path) -> String {
    format!("{MOUNTED_ON}{}", mountpoint.display())
}

/// Returns once nobody holds `dir`; `Err` when it is in use (a live mount or
/// another holder) or still held after [`SHUTDOWN_WAIT`].
pub fn wait_for_release(dir: &Path, command: &str) -> Result<(), String> {
    let deadline = Instant::now() + SHUTDOWN_WAIT;
    let mut said = false;
    while let Some(holder) = lock_holder(dir) {
        let pid = holder.lines().next().unwrap_or("another process");
        let mountpoint = holder.lines().find_map(|l| l.strip_prefix(MOUNTED_ON));
        match mountpoint {
            Some(mnt) if is_mount_point(mnt) => {
                return Err(format!(
                    "{} is in use: mounted on {mnt} ({pid}); unmount it first",
                    dir.display()
                ));
            }
            // Unmounted, and its daemon is finishing its shutdown: wait.
            Some(_) => {}
            // Held by something that is not a mount (the library, a daemon
            // still starting): in use.
            None => {
                let what = holder.lines().nth(1).unwrap_or("not by a mount");
                return Err(format!("{} is in use ({pid}, {what})", dir.display()));
            }
        }
        if Instant::now() > deadline {
            return Err(format!(
                "{} is still locked by {pid} after {} s",
                dir.display(),
                SHUTDOWN_WAIT.as_secs()
            ));
        }
        if !said {
            eprintln!(
                "commitfs {command}: waiting for the daemon holding {} ({pid}) to finish its shutdown",
                dir.display()
            );
            said = true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// Whether `path` is a mount point now (`/proc/self/mountinfo`).
fn is_mount_point(path: &str) -> bool {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    info.lines()
        .filter_map(|l| l.split(' ').nth(4))
        .any(|mp| unescape(mp) == path)
}

/// mountinfo escapes space, tab, newline and backslash as octal.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|o| o.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (b[i], octal) {
            (b'\\', Some(o)) => {
                out.push(o.iter().fold(0u8, |n, c| n.wrapping_mul(8) + (c - b'0')));
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes() {
        assert_eq!(unescape("/tmp/a\\040b"), "/tmp/a b");
        assert_eq!(unescape("/plain"), "/plain");
        assert!(is_mount_point("/proc"));
        assert!(!is_mount_point("/proc/self"));
    }
}
