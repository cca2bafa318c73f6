//! mount(8) and fstab: the helper link in /sbin, a temporary fstab read with
//! `mount -T`, `mount MOUNTPOINT`, `mount -a` and `umount`.
//!
//! The guards unmount, wait for (or at last kill) the daemons and remove the
//! helper link they made, even when the test panics.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::thread::sleep;
use std::time::{Duration, Instant};

use crate::harness::{fuse_or_skip, mounted, run_bounded, sh_timeout, umount};

const BIN: &str = env!("CARGO_BIN_EXE_commitfs");
/// Where mount(8) looks first for the helper of type fuse.commitfs.
const HELPER: &str = "/sbin/mount.fuse.commitfs";
const EXIT_TIMEOUT: Duration = Duration::from_secs(10);

/// The helper link, removed on drop if this test made it.
struct HelperLink {
    made: bool,
}

impl HelperLink {
    /// Links HELPER to this build's binary. Something else already there is
    /// left alone: the test then skips, or fails when `CI` is set.
    fn install() -> Option<HelperLink> {
        let ours = |p: &Path| p.canonicalize().ok() == Path::new(BIN).canonicalize().ok();
        let helper = Path::new(HELPER);
        if helper.symlink_metadata().is_ok() {
            if ours(helper) {
                return Some(HelperLink { made: false });
            }
            let why = format!("{HELPER} exists and is not this build's commitfs; move it aside");
            assert!(
                std::env::var_os("CI").is_none(),
                "{why} (CI is set, so this is a failure, not a skip)"
            );
            eprintln!("skipping fstab test: {why}");
            return None;
        }
        std::os::unix::fs::symlink(BIN, helper)
            .unwrap_or_else(|e| panic!("cannot link {HELPER} to {BIN}: {e}"));
        Some(HelperLink { made: true })
    }
}

impl Drop for HelperLink {
    fn drop(&mut self) {
        // Only our own link: never one another build put there meanwhile.
        if self.made && std::fs::read_link(HELPER).is_ok_and(|t| t == Path::new(BIN)) {
            let _ = std::fs::remove_file(HELPER);
        }
    }
}

/// The mountpoints of the test: unmounted, and their daemons gone, on drop.
struct Mounts {
    points: Vec<PathBuf>,
    data: Vec<PathBuf>,
}

impl Drop for Mounts {
    fn drop(&mut self) {
        for mnt in &self.points {
            for lazy in [false, true] {
                if mounted(mnt) {
                    crate::harness::quiet_umount(if lazy { &["-l"] } else { &[] }, mnt);
                }
            }
        }
        for data in &self.data {
            for pid in daemons(data) {
                if !wait_gone(pid) {
                    // SAFETY: signalling a daemon this test started.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                    wait_gone(pid);
                }
            }
        }
    }
}

/// The pids of `commitfs mount` daemons serving `data`.
fn daemons(data: &Path) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
                return false;
            };
            let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            args.contains(&&b"--foreground"[..])
                && args.contains(&data.as_os_str().as_encoded_bytes())
                && !is_zombie(*pid)
        })
        .collect()
}

fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
    })
}

/// Waits (bounded) for a process to exit; a zombie has exited. Returns
/// whether it did.
fn wait_gone(pid: i32) -> bool {
    let deadline = Instant::now() + EXIT_TIMEOUT;
    loop {
        if !Path::new(&format!("/proc/{pid}")).exists() || is_zombie(pid) {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        sleep(Duration::from_millis(20));
    }
}

fn run(cmd: &str, args: &[&Path]) -> Output {
    let mut parts = cmd.split(' ');
    let mut c = Command::new(parts.next().unwrap());
    c.args(parts).args(args);
    run_bounded(
        &mut c,
        &format!("`{cmd} {args:?}`"),
        sh_timeout(),
        String::new,
    )
}

fn ok(cmd: &str, args: &[&Path]) -> String {
    let out = run(cmd, args);
    assert!(
        out.status.success(),
        "`{cmd} {args:?}` failed with {}: {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The source column of `mnt` in /proc/self/mountinfo.
fn mount_source(mnt: &Path) -> Option<String> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines().find_map(|l| {
        let fields: Vec<&str> = l.split(' ').collect();
        let sep = fields.iter().position(|f| *f == "-")?;
        (fields.get(4) == Some(&mnt.to_str()?))
            .then(|| fields.get(sep + 2).map(|s| s.to_string()))?
    })
}

/// `umount mnt`, then waits for the daemon of `data` to exit and checks that
/// it shut down cleanly.
fn umount_and_wait(mnt: &Path, data: &Path) {
    let pids = daemons(data);
    assert_eq!(pids.len(), 1, "one daemon for {}", data.display());
    umount(mnt).unwrap();
    assert!(!mounted(mnt));
    assert!(
        wait_gone(pids[0]),
        "the daemon did not exit within {EXIT_TIMEOUT:?} of umount"
    );
    assert!(data.join(".kafka_cleanshutdown").exists());
}

#[test]
fn fstab_line_mounts_with_mount_t_mount_a_and_umount() {
    if !fuse_or_skip() {
        return;
    }
    let tmp = tempfile::Builder::new()
        .prefix("commitfs-fstab-")
        .tempdir()
        .unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let (data, mnt) = (root.join("data"), root.join("mnt"));
    let (data2, mnt2) = (root.join("data2"), root.join("mnt2"));
    let (data3, mnt3) = (root.join("data3"), root.join("mnt3"));
    // The data directories exist, as a disk's mounted directory does: the
    // helper refuses a missing one (below).
    for m in [&mnt, &mnt2, &mnt3, &data, &data2, &data3] {
        std::fs::create_dir(m).unwrap();
    }
    let (missing, mnt4) = (root.join("missing"), root.join("mnt4"));
    std::fs::create_dir(&mnt4).unwrap();
    let fstab = root.join("fstab");
    std::fs::write(
        &fstab,
        format!(
            "# a temporary fstab for mount -T\n\
             {} {} fuse.commitfs defaults,segment.bytes=1048576,nofail,_netdev,x-systemd.automount 0 0\n\
             {} {} fuse.commitfs noauto,user,retention.ms=-1 0 0\n\
             {} {} fuse.commitfs segment.bytes=16384 0 0\n\
             {} {} fuse.commitfs noauto,nofail 0 0\n",
            data.display(),
            mnt.display(),
            data2.display(),
            mnt2.display(),
            data3.display(),
            mnt3.display(),
            missing.display(),
            mnt4.display(),
        ),
    )
    .unwrap();
    let _mounts = Mounts {
        points: vec![mnt.clone(), mnt2.clone(), mnt3.clone(), mnt4.clone()],
        data: vec![data.clone(), data2.clone(), data3.clone()],
    };
    let Some(_helper) = HelperLink::install() else {
        return;
    };
    let fstab = fstab.as_path();

    // mount MOUNTPOINT: mount(8) finds the line and runs the helper, which
    // returns once the mount is live, with the line's options.
    ok("mount -T", &[fstab, &mnt]);
    assert!(mounted(&mnt));
    assert_eq!(mount_source(&mnt).as_deref(), data.to_str());
    std::fs::create_dir(mnt.join("t-0")).unwrap();
    std::fs::write(mnt.join("t-0/log"), "hello\n").unwrap();
    assert_eq!(std::fs::read(mnt.join("t-0/offset/0")).unwrap(), b"hello");
    assert_eq!(
        std::fs::read_to_string(mnt.join("t-0/config/segment.bytes")).unwrap(),
        "1048576\n"
    );

    // mount -a: the mounted line is left alone (its source is the data dir),
    // the noauto line is skipped, the bad line fails.
    let out = run("mount -a -T", &[fstab]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the bad line must fail mount -a");
    assert!(
        err.contains("Invalid value 16384 for configuration segment.bytes"),
        "{err}"
    );
    assert_eq!(daemons(&data).len(), 1, "mount -a mounted the line twice");
    assert!(!mounted(&mnt2) && !mounted(&mnt3));
    let made: Vec<_> = std::fs::read_dir(&data3).unwrap().collect();
    assert!(
        made.is_empty(),
        "a refused mount wrote its data dir: {made:?}"
    );

    // A data directory that is not there (its disk not mounted yet) is
    // refused with mount(8)'s "mount failure", even with nofail, and is not
    // created.
    let out = run("mount -T", &[fstab, &mnt4]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(32), "{err}");
    assert!(err.contains("does not exist"), "{err}");
    assert!(!missing.exists() && !mounted(&mnt4));

    // umount; the daemon finishes its shutdown on its own, then exits.
    umount_and_wait(&mnt, &data);

    // mount -a mounts the line again; an explicit mount of the noauto line
    // works (user is accepted and ignored when root mounts).
    run("mount -a -T", &[fstab]);
    assert!(mounted(&mnt));
    assert!(!mounted(&mnt2));
    assert_eq!(std::fs::read(mnt.join("t-0/offset/0")).unwrap(), b"hello");
    ok("mount -T", &[fstab, &mnt2]);
    assert!(mounted(&mnt2));
    std::fs::create_dir(mnt2.join("u-0")).unwrap();
    assert_eq!(
        std::fs::read_to_string(mnt2.join("u-0/config/retention.ms")).unwrap(),
        "-1\n"
    );
    umount_and_wait(&mnt2, &data2);
    umount_and_wait(&mnt, &data);
}
