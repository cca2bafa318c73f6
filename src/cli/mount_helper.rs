//! mount(8) and fstab: the `mount.fuse.commitfs` helper calling convention,
//! and the mount(8) and systemd options that `-o` accepts and ignores.
//!
//! For a filesystem of type `fuse.commitfs` (an fstab line, or `mount -t
//! fuse.commitfs`), util-linux mount(8) runs the first helper it finds among
//! `/sbin/mount.fuse.commitfs`, then `/sbin/mount.fuse` (fuse3's, if
//! installed), then the same names under `/sbin/fs.d` and `/sbin/fs`. For
//! type `commitfs` it looks for `mount.commitfs`. It calls the helper as
//!
//! ```text
//! mount.fuse.commitfs SOURCE MOUNTPOINT [-s] [-f] [-n] [-v] [-o OPTIONS] [-t TYPE] [-N NS]
//! ```
//!
//! and its exit status is mount(8)'s. OPTIONS start with `rw` or `ro`;
//! mount(8) itself drops `defaults`, `noauto`, `comment=`, `x-*` and `X-*`
//! but passes `nofail`, `_netdev`, `user` (adding `noexec,nosuid,nodev`),
//! `users` and `helper=`. A symlink named `mount.fuse.commitfs` (or
//! `mount.commitfs`) pointing to the `commitfs` binary turns such a call into
//! `commitfs mount -o OPTIONS SOURCE MOUNTPOINT`, which daemonises and
//! returns once the mount is live, as mount(8) expects.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::{ArgAction, Parser};

use super::{Cli, Command, mount};

/// The names under which mount(8) runs commitfs as its helper.
pub const HELPER_NAMES: &[&str] = &["mount.fuse.commitfs", "mount.commitfs"];

/// The usual place of the helper symlink: the first directory mount(8) searches.
pub const HELPER_PATH: &str = "/sbin/mount.fuse.commitfs";

/// The fstab part of `commitfs mount --help` and of its man page.
pub const FSTAB_HELP: &str = "\
fstab and mount(8):
  Install the mount(8) helper once:
    ln -s \"$(command -v commitfs)\" /sbin/mount.fuse.commitfs
  Then a line such as
    /var/lib/commitfs  /mnt/logs  fuse.commitfs  segment.bytes=1048576,nofail  0 0
  in /etc/fstab works with `mount /mnt/logs`, `mount -a` and `umount /mnt/logs`, and so
  does `mount -t fuse.commitfs DATA_DIR MOUNTPOINT -o OPTIONS`. Options of mount(8), fstab
  and systemd (defaults, noauto, nofail, user, _netdev, x-systemd.*, ...) are accepted
  and ignored.";

/// mount(8)'s exit codes (see its EXIT STATUS).
const EX_USAGE: i32 = 1;
const EX_FAIL: i32 = 32;

/// Whether this process was started under a helper name (argv[0]).
pub fn invoked_as_helper(argv0: Option<&OsString>) -> bool {
    argv0
        .and_then(|a| Path::new(a).file_name())
        .and_then(|n| n.to_str())
        .is_some_and(|n| HELPER_NAMES.contains(&n))
}

/// The mount(8) helper calling convention.
#[derive(Parser, Debug)]
#[command(
    name = "mount.fuse.commitfs",
    about = "mount(8) helper for commitfs: mounts DATA_DIR on MOUNTPOINT as `commitfs mount` does",
    disable_version_flag = true
)]
struct HelperArgs {
    /// The data directory (the fstab source).
    source: PathBuf,
    /// Where to mount it.
    mountpoint: PathBuf,
    /// Options, comma-separated, as `commitfs mount -o` takes them.
    #[arg(short = 'o', value_name = "OPTIONS", action = ArgAction::Append)]
    options: Vec<String>,
    /// Sloppy: accepted; an unknown option still fails.
    #[arg(short = 's')]
    sloppy: bool,
    /// Fake: check the options and do not mount.
    #[arg(short = 'f')]
    fake: bool,
    /// No mtab: accepted (commitfs writes none).
    #[arg(short = 'n')]
    no_mtab: bool,
    /// Verbose: say what is mounted where.
    #[arg(short = 'v')]
    verbose: bool,
    /// Mount read-only (as -o ro).
    #[arg(short = 'r')]
    read_only: bool,
    /// Mount read-write (as -o rw).
    #[arg(short = 'w')]
    read_write: bool,
    /// The filesystem type: fuse.commitfs or commitfs.
    #[arg(short = 't', value_name = "TYPE")]
    fstype: Option<String>,
    /// A mount namespace: not supported.
    #[arg(short = 'N', value_name = "NS")]
    namespace: Option<String>,
}

/// A helper call turned into a `commitfs mount` command line.
#[derive(Debug, PartialEq)]
struct Translated {
    argv: Vec<OsString>,
    fake: bool,
    verbose: bool,
}

fn translate(h: HelperArgs) -> Result<Translated, String> {
    if h.namespace.is_some() {
        return Err("-N (mount in another namespace) is not supported".to_string());
    }
    if let Some(t) = h.fstype.as_deref()
        && !matches!(t, "fuse.commitfs" | "commitfs")
    {
        return Err(format!(
            "cannot mount type {t:?}: this is the helper for fuse.commitfs"
        ));
    }
    let mut opts = Vec::new();
    // The mount's source is the data directory, resolved as mount(8) resolves
    // the fstab source, so that `mount -a` knows the line is mounted already.
    let source = h.source.canonicalize().unwrap_or_else(|_| h.source.clone());
    if let Some(s) = source.to_str().filter(|s| !s.contains(',')) {
        opts.push(format!("fsname={s}"));
    }
    opts.extend(h.options.iter().cloned());
    if h.read_only {
        opts.push("ro".to_string());
    }
    if h.read_write {
        opts.push("rw".to_string());
    }
    let mut argv: Vec<OsString> = vec!["commitfs".into(), "mount".into()];
    for o in opts {
        argv.push("-o".into());
        argv.push(o.into());
    }
    argv.push("--".into());
    argv.push(h.source.into_os_string());
    argv.push(h.mountpoint.into_os_string());
    Ok(Translated {
        argv,
        fake: h.fake,
        verbose: h.verbose,
    })
}

/// Runs a helper call (`args` is the whole argv) and returns mount(8)'s exit
/// code: 0 mounted, 1 bad usage or options, 32 the mount failed.
pub fn main(args: Vec<OsString>) -> i32 {
    let name = args
        .first()
        .and_then(|a| Path::new(a).file_name())
        .map_or_else(
            || HELPER_NAMES[0].into(),
            |n| n.to_string_lossy().into_owned(),
        );
    let h = match HelperArgs::try_parse_from(&args) {
        Ok(h) => h,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { EX_USAGE } else { 0 };
        }
    };
    let t = match translate(h) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{name}: {e}");
            return EX_USAGE;
        }
    };
    let margs = match Cli::try_parse_from(&t.argv).map(|c| c.command) {
        Ok(Command::Mount(m)) => m,
        Ok(_) => unreachable!("the translated command line is a mount"),
        Err(e) => {
            let _ = e.print();
            return EX_USAGE;
        }
    };
    if t.fake {
        return match mount::check_options(&margs.options) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("{name}: {e}");
                EX_USAGE
            }
        };
    }
    // mount(8) mounts what exists; `commitfs mount` creating a missing data
    // directory would, for an fstab line whose disk is not mounted yet,
    // serve an empty directory of the root filesystem instead.
    if margs.bootstrap_server.is_none() && !margs.data_dir.is_dir() {
        eprintln!(
            "{name}: data directory {} does not exist (mount(8) does not create it; \
             `commitfs mount` does)",
            margs.data_dir.display()
        );
        return EX_FAIL;
    }
    if t.verbose {
        eprintln!(
            "{name}: mounting {} on {}",
            margs.data_dir.display(),
            margs
                .mountpoint
                .as_deref()
                .unwrap_or(&margs.data_dir)
                .display()
        );
    }
    match mount::run(margs) {
        0 => 0,
        2 => EX_USAGE,
        _ => EX_FAIL,
    }
}

/// fuse3's `mount.fuse`, which mount(8) falls back to when no
/// `mount.fuse.commitfs` is installed, runs `commitfs SOURCE MOUNTPOINT -o
/// OPTIONS`. commitfs does not take that form; say what to install instead.
pub fn mount_fuse_hint(args: &[OsString]) -> Option<String> {
    let looks_like = args.len() == 5
        && args[3] == "-o"
        && args[1..3]
            .iter()
            .all(|a| !a.to_string_lossy().starts_with('-'));
    looks_like.then(|| {
        format!(
            "commitfs: this looks like fuse's mount.fuse calling convention (an fstab line of \
             type fuse.commitfs). Install the helper so that mount(8) runs commitfs directly:\n  \
             ln -s \"$(command -v commitfs)\" {HELPER_PATH}"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::super::options::is_mount8_option;
    use super::*;

    fn helper(args: &[&str]) -> Result<Translated, String> {
        let h = HelperArgs::try_parse_from(
            std::iter::once("mount.fuse.commitfs").chain(args.iter().copied()),
        )
        .map_err(|e| e.to_string())?;
        translate(h)
    }

    fn argv(t: &Translated) -> Vec<&str> {
        t.argv.iter().map(|a| a.to_str().unwrap()).collect()
    }

    #[test]
    fn mount8_calling_convention_becomes_commitfs_mount() {
        // What util-linux 2.38 passes for `/nonexistent/d /mnt/x fuse.commitfs
        // segment.bytes=1048576,nofail 0 0`.
        let t = helper(&[
            "/nonexistent/d",
            "/mnt/x",
            "-o",
            "rw,segment.bytes=1048576,nofail",
        ])
        .unwrap();
        assert_eq!(
            argv(&t),
            [
                "commitfs",
                "mount",
                "-o",
                "fsname=/nonexistent/d",
                "-o",
                "rw,segment.bytes=1048576,nofail",
                "--",
                "/nonexistent/d",
                "/mnt/x"
            ]
        );
        assert!(!t.fake && !t.verbose);
        let t = helper(&[
            "/d",
            "/m",
            "-s",
            "-n",
            "-v",
            "-f",
            "-o",
            "ro",
            "-t",
            "fuse.commitfs",
        ]);
        let t = t.unwrap();
        assert!(t.fake && t.verbose);
        assert!(argv(&t).contains(&"ro"));
        assert!(helper(&["/d", "/m", "-t", "fuse.sshfs"]).is_err());
        assert!(helper(&["/d", "/m", "-N", "/proc/1/ns/mnt"]).is_err());
        assert!(helper(&["/d"]).is_err());
        // The translated line is one the main parser takes.
        let t = helper(&["/d", "/m", "-o", "rw"]).unwrap();
        assert!(matches!(
            Cli::try_parse_from(&t.argv).unwrap().command,
            Command::Mount(_)
        ));
    }

    #[test]
    fn names_and_ignored_options() {
        let name = |s: &str| invoked_as_helper(Some(&OsString::from(s)));
        assert!(name("/sbin/mount.fuse.commitfs"));
        assert!(name("mount.commitfs"));
        assert!(!name("/usr/bin/commitfs"));
        assert!(!name("mount.fuse"));
        assert!(!invoked_as_helper(None));
        for o in [
            "defaults",
            "noauto",
            "nofail",
            "_netdev",
            "user",
            "user=alice",
            "users",
            "x-systemd.automount",
            "x-systemd.requires=network-online.target",
            "X-mount.mkdir",
            "comment=systemd.automount",
            "helper=commitfs",
        ] {
            assert!(is_mount8_option(o), "{o}");
        }
        for o in ["ro", "rw", "segment.bytes=1048576", "usermode", "nofailx"] {
            assert!(!is_mount8_option(o), "{o}");
        }
    }

    #[test]
    fn mount_fuse_form_gets_a_hint() {
        let a = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
        assert!(mount_fuse_hint(&a(&["commitfs", "/d", "/m", "-o", "rw,dev,suid"])).is_some());
        assert!(mount_fuse_hint(&a(&["commitfs", "mount", "/d", "/m"])).is_none());
        assert!(mount_fuse_hint(&a(&["commitfs", "-o", "/d", "/m", "x"])).is_none());
    }
}
