//! `commitfs mount`: open a data directory and serve it over FUSE until unmounted.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use commitfs::backend::local::LocalBackend;
use fuser::{MountOption, SessionACL};
use log::{error, info, warn};

use super::daemon::{self, Daemon, DaemonSpec, Ready};
use super::options::{DaemonOptions, tokens};
pub use super::session::MountArgs;
use super::session::{FuseOptions, SessionSpec, mount_session, session_end, wait_for_unmount};
use super::signals::Signals;

struct Options {
    daemon: DaemonOptions,
    acl: SessionACL,
    fuse: Vec<MountOption>,
}

fn parse_options(raw: &[String]) -> Result<Options, String> {
    let mut f = FuseOptions::default();
    let mut daemon = DaemonOptions::default();
    for tok in tokens(raw) {
        // `ro` and `rw` are both FUSE's and the storage's.
        if f.take(tok) {
            daemon.read_only = f.read_only;
            continue;
        }
        if !daemon.take(tok)? {
            return Err(format!("unknown mount option {tok:?}"));
        }
    }
    daemon.check()?;
    Ok(Options {
        daemon,
        acl: f.acl,
        fuse: f.mount_options("commitfs"),
    })
}

/// Checks `-o` options as a mount would, without mounting.
pub fn check_options(raw: &[String]) -> Result<(), String> {
    parse_options(raw).map(drop)
}

pub fn run(args: MountArgs) -> i32 {
    if let Some(bootstrap) = args.bootstrap_server.clone() {
        if args.mountpoint.is_some() {
            eprintln!(
                "commitfs: a cluster mount takes no data directory: commitfs mount --bootstrap-server HOST:PORT MOUNTPOINT"
            );
            return 2;
        }
        return super::cluster_mount::run(&args, &bootstrap);
    }
    if args.mountpoint.is_none() {
        eprintln!(
            "commitfs: mount needs DATA_DIR and MOUNTPOINT (or --bootstrap-server and MOUNTPOINT)"
        );
        return 2;
    }
    let opts = match parse_options(&args.options) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("commitfs: {e}");
            return 2;
        }
    };
    if !args.foreground {
        return daemonize(&args, opts.daemon.read_only);
    }
    // Started by `daemonize`: stderr is the log file, which is then rotated.
    let file = args.ready_fd.is_some().then(|| {
        (
            daemon::log_file_path(&args.data_dir, opts.daemon.read_only),
            opts.daemon.log.clone(),
        )
    });
    super::logging::init(file);
    let mut ready = Ready::from_fd(args.ready_fd);
    match serve(&args, opts, &mut ready) {
        Ok(()) => 0,
        Err(e) => {
            error!("{e}");
            ready.failed(&e);
            1
        }
    }
}

/// Re-executes this command in the foreground as a daemon with its log going
/// to the data directory, and returns once it reports the mount live (or its
/// error).
fn daemonize(args: &MountArgs, read_only: bool) -> i32 {
    let prepare = || -> std::io::Result<(PathBuf, PathBuf, PathBuf, std::fs::File)> {
        if !read_only {
            std::fs::create_dir_all(&args.data_dir)?;
        }
        std::fs::create_dir_all(args.mnt())?;
        let data = args.data_dir.canonicalize()?;
        let mnt = args.mnt().canonicalize()?;
        let log_path = daemon::log_file_path(&data, read_only);
        let log = daemon::open_log(&log_path)?;
        Ok((data, mnt, log_path, log))
    };
    let (data, mnt, log_path, log) = match prepare() {
        Ok(x) => x,
        Err(e) => {
            eprintln!("commitfs: {e}");
            return 1;
        }
    };
    let mut cmd: Vec<OsString> = ["mount", "--foreground", "--threads"]
        .map(OsString::from)
        .into();
    cmd.push(args.threads.to_string().into());
    for o in &args.options {
        cmd.push("-o".into());
        cmd.push(o.into());
    }
    cmd.push(data.into());
    cmd.push(mnt.into());
    daemon::spawn(&cmd, log, &log_path)
}

/// Creates what a mount needs and returns the canonical data dir and mountpoint.
fn prepare_dirs(args: &MountArgs, read_only: bool) -> Result<(PathBuf, PathBuf), String> {
    // A read-only mount writes nothing to the data dir, not even the dir itself.
    let create: &[&Path] = if read_only {
        &[args.mnt()]
    } else {
        &[&args.data_dir, args.mnt()]
    };
    for dir in create {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let canonical = |p: &Path| {
        p.canonicalize()
            .map_err(|e| format!("{}: {e}", p.display()))
    };
    Ok((canonical(&args.data_dir)?, canonical(args.mnt())?))
}

fn serve(args: &MountArgs, opts: Options, ready: &mut Ready) -> Result<(), String> {
    let signals = Signals::block();
    let Options {
        daemon: d,
        acl,
        fuse,
    } = opts;
    let (data, mnt) = prepare_dirs(args, d.read_only)?;
    let spec = DaemonSpec {
        data: &data,
        options: &d,
        command: "mount",
        needs_listener: false,
        ready,
    };
    // The listener binds before the mount, so one that cannot bind fails
    // the mount with nothing to undo but what the daemon started.
    let daemon = Daemon::start(&spec)?;
    let manager = daemon.storage().clone();
    let backend = Arc::new(
        LocalBackend::new(manager.clone())
            .with_line_format(d.line_format.clone())
            .with_groups(daemon.groups()),
    );
    let session = SessionSpec {
        threads: args.threads,
        options: fuse,
        acl,
    };
    // Failed, the daemon's drop stops what it started.
    let (unmounter, session) = mount_session(&session, backend, &mnt)?;
    if let Err(e) = manager.note_holder(&super::lock::mounted_note(&mnt)) {
        warn!("could not note the mount in {}: {e}", data.display());
    }
    info!(
        "Mounted {} on {}{}",
        data.display(),
        mnt.display(),
        if d.read_only { " read-only" } else { "" }
    );
    ready.live();
    let forced = wait_for_unmount(&signals, unmounter, &mnt);
    let result = if forced { Ok(()) } else { session_end(session) };
    info!("Unmounted {}; shutting down the log manager", mnt.display());
    drop(manager);
    daemon.stop()?;
    info!(
        "Shutdown of {} complete{}",
        data.display(),
        if forced { " (forced)" } else { "" }
    );
    if forced {
        // The session thread still blocks on /dev/fuse: leave without it.
        std::process::exit(0);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(s: &[&str]) -> Result<Options, String> {
        parse_options(&s.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn options() {
        let o = opts(&[
            "segment.bytes=1048576,index.interval.bytes=100",
            "ro",
            "allow_other",
        ])
        .unwrap();
        assert_eq!(o.daemon.defaults.segment_bytes, 1_048_576);
        assert_eq!(o.daemon.defaults.index_interval_bytes, 100);
        assert!(o.daemon.read_only);
        assert_eq!(o.acl, SessionACL::All);
        assert!(o.fuse.contains(&MountOption::RO));
        let o = opts(&["log.retention.check.interval.ms=1000"]).unwrap();
        assert_eq!(
            o.daemon.retention_check,
            std::time::Duration::from_millis(1000)
        );
        assert_eq!(
            opts(&["segment.bytes=16384"]).err().unwrap(),
            "Invalid value 16384 for configuration segment.bytes: Value must be at least 1048576"
        );
        assert!(opts(&["bogus"]).is_err());
        // mount(8) and systemd options are ignored.
        let o = opts(&["rw,segment.bytes=1048576,nofail,_netdev,x-systemd.automount"]).unwrap();
        assert_eq!(o.daemon.defaults.segment_bytes, 1_048_576);
        assert!(!o.daemon.read_only);
        assert!(opts(&["bogus=1"]).is_err());
    }
}
