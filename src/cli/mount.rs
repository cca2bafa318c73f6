//! `commitfs mount`: open a data directory and serve it over FUSE until unmounted.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread;

use clap::Args;
use commitfs::backend::Backend;
use commitfs::backend::local::LocalBackend;
use commitfs::fs::CommitFs;
use fuser::{Config, MountOption, Session, SessionACL, SessionUnmounter};
use log::{error, info, warn};

use super::daemon::{self, Daemon, DaemonSpec, Ready, Signals, Stop};
use super::options::{DaemonOptions, tokens};

#[derive(Args, Debug)]
pub struct MountArgs {
    /// The data directory (Kafka's log.dir); created if missing. With
    /// --bootstrap-server there is none, and the one path given is the
    /// mountpoint.
    pub data_dir: PathBuf,
    /// Where to mount it; created if missing.
    pub mountpoint: Option<PathBuf>,
    /// Mount a Kafka cluster instead of a data directory: the same tree over
    /// the cluster's topics, through a Kafka client. `-o` then also takes
    /// client properties (security.protocol, sasl.*, client.id,
    /// request.timeout.ms, ...) and cache.bytes, replication.factor.
    #[arg(long, value_name = "HOST:PORT[,HOST:PORT...]")]
    pub bootstrap_server: Option<String>,
    /// Stay attached and log to stderr (default: return once mounted, log to
    /// DATA_DIR/commitfs.log, or on a read-only mount, which never writes to
    /// the data directory, to $TMPDIR/commitfs-<data dir path>.log; a cluster
    /// mount logs to $TMPDIR/commitfs-cluster-<mountpoint path>.log).
    #[arg(short, long)]
    pub foreground: bool,
    /// Options, comma-separated, repeatable: Kafka topic configs as mount-wide
    /// defaults (segment.bytes=1048576, ...), ro, allow_other, allow_root,
    /// log.retention.check.interval.ms=N, max.broker.partitions=N (default: what the
    /// descriptors hold, at most 10000), and FUSE flags (noatime, nosuid, ...).
    ///
    /// listeners=PLAINTEXT://HOST:PORT also serves the partitions over the
    /// Kafka protocol (no authentication), with advertised.listeners,
    /// auto.create.topics.enable, num.partitions, socket.request.max.bytes,
    /// node.id, and for consumer groups offsets.topic.num.partitions
    /// (default 1), group.initial.rebalance.delay.ms,
    /// group.min.session.timeout.ms, group.max.session.timeout.ms,
    /// group.max.size, offsets.retention.minutes,
    /// offsets.retention.check.interval.ms and offset.metadata.max.bytes, for
    /// transactions transaction.state.log.num.partitions (default 1),
    /// transaction.max.timeout.ms,
    /// transaction.abort.timed.out.transaction.cleanup.interval.ms,
    /// transaction.remove.expired.transaction.cleanup.interval.ms and
    /// transactional.id.expiration.ms, and
    /// the listener's limits max.connections, max.connections.per.ip,
    /// max.connections.per.ip.overrides, connections.max.idle.ms,
    /// queued.max.request.bytes and num.network.threads, as in Kafka.
    /// Without listeners nothing listens.
    ///
    /// The daemon's log (DATA_DIR/commitfs.log) is rotated past
    /// daemon.log.max.bytes (default 10485760) into daemon.log.backup.count
    /// older files (default 5, commitfs.log.1 ...).
    ///
    /// Options of mount(8), fstab and systemd (defaults, nofail, _netdev,
    /// x-systemd.*, ...) are accepted and ignored.
    #[arg(short = 'o', value_name = "OPT[,OPT...]", action = clap::ArgAction::Append)]
    pub options: Vec<String>,
    /// FUSE event-loop threads.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub threads: u16,
    /// Internal: the descriptor on which a daemon reports that it is mounted.
    #[arg(long, hide = true)]
    pub ready_fd: Option<i32>,
}

impl MountArgs {
    /// The mountpoint of a data-directory mount (checked present by `run`).
    fn mnt(&self) -> &Path {
        self.mountpoint.as_deref().unwrap_or(&self.data_dir)
    }
}

/// The options every mount shares: FUSE's, mount(8)'s.
pub(super) struct FuseOptions {
    pub read_only: bool,
    pub acl: SessionACL,
    pub fuse: Vec<MountOption>,
    pub fsname: Option<String>,
    /// The filesystem type is `fuse.<subtype>` (`findmnt -t fuse.commitfs`).
    pub subtype: String,
}

impl Default for FuseOptions {
    fn default() -> Self {
        FuseOptions {
            read_only: false,
            acl: SessionACL::Owner,
            fuse: Vec::new(),
            fsname: None,
            subtype: "commitfs".to_string(),
        }
    }
}

impl FuseOptions {
    /// Takes `tok` if it is a FUSE or mount(8) option; false if it is not.
    pub fn take(&mut self, tok: &str) -> bool {
        if super::mount_helper::is_mount8_option(tok) {
            return true;
        }
        let flag = match tok {
            "ro" => {
                self.read_only = true;
                return true;
            }
            "rw" => {
                self.read_only = false;
                return true;
            }
            "allow_other" => {
                self.acl = SessionACL::All;
                return true;
            }
            "allow_root" => {
                self.acl = SessionACL::RootAndOwner;
                return true;
            }
            "auto_unmount" => MountOption::AutoUnmount,
            "default_permissions" => MountOption::DefaultPermissions,
            "dev" => MountOption::Dev,
            "nodev" => MountOption::NoDev,
            "suid" => MountOption::Suid,
            "nosuid" => MountOption::NoSuid,
            "exec" => MountOption::Exec,
            "noexec" => MountOption::NoExec,
            "atime" => MountOption::Atime,
            "noatime" => MountOption::NoAtime,
            "sync" => MountOption::Sync,
            "async" => MountOption::Async,
            "dirsync" => MountOption::DirSync,
            _ => match tok.split_once('=') {
                Some(("fsname", v)) => {
                    self.fsname = Some(v.to_string());
                    return true;
                }
                Some(("subtype", v)) => {
                    self.subtype = v.to_string();
                    return true;
                }
                _ => return false,
            },
        };
        self.fuse.push(flag);
        true
    }

    /// The FUSE mount options, named `default_fsname` unless `fsname=` said.
    pub fn mount_options(&self, default_fsname: &str) -> Vec<MountOption> {
        let mut out = self.fuse.clone();
        out.push(MountOption::FSName(
            self.fsname
                .clone()
                .unwrap_or_else(|| default_fsname.to_string()),
        ));
        // A kernel option, so that a direct mount(2) gets it too (fuser
        // hands `Subtype` only to fusermount).
        out.push(MountOption::CUSTOM(format!("subtype={}", self.subtype)));
        if self.read_only {
            out.push(MountOption::RO);
        }
        out
    }
}

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

pub(super) type SessionThread = thread::JoinHandle<std::io::Result<()>>;

/// How the FUSE session is set up.
pub(super) struct SessionSpec {
    pub threads: u16,
    pub options: Vec<MountOption>,
    pub acl: SessionACL,
}

/// Mounts the tree over `backend` and runs the FUSE session on its own thread.
pub(super) fn mount_session(
    spec: &SessionSpec,
    backend: Arc<dyn Backend>,
    mnt: &Path,
) -> Result<(SessionUnmounter, SessionThread), String> {
    let mut config = Config::default();
    config.mount_options = spec.options.clone();
    config.acl = spec.acl;
    config.n_threads = Some(spec.threads as usize);
    config.clone_fd = true;
    // After an external umount, fuser's own clean-up retries the umount and
    // logs a spurious EINVAL; releasing the mount from destroy() first avoids it.
    let slot: Arc<parking_lot::Mutex<Option<SessionUnmounter>>> = Arc::default();
    let fs = CommitFs::new(backend).on_destroy({
        let slot = slot.clone();
        move || {
            if let Some(mut u) = slot.lock().take()
                && let Err(e) = u.unmount()
            {
                log::debug!("unmount after the session ended: {e}");
            }
        }
    });
    let mut session = Session::new(fs, mnt, &config)
        .map_err(|e| format!("cannot mount on {}: {e}", mnt.display()))?;
    // Taken before the session moves to its thread: run() keeps the mount in
    // the same shared slot, so this unmounter stays live (unlike after spawn()).
    let unmounter = session.unmount_callable();
    *slot.lock() = Some(session.unmount_callable());
    let thread = thread::Builder::new()
        .name("fuse-session".into())
        .spawn(move || {
            let r = session.run();
            Signals::wake();
            r
        })
        .map_err(|e| format!("cannot start the session thread: {e}"))?;
    Ok((unmounter, thread))
}

/// Waits until the session ends (an external umount, or one a signal asked
/// for). Returns true when a second signal forced the end while open files
/// kept a lazily detached mount alive.
pub(super) fn wait_for_unmount(
    signals: &Signals,
    mut unmounter: SessionUnmounter,
    mnt: &Path,
) -> bool {
    let mut detached = false;
    loop {
        let name = match signals.wait() {
            Stop::Ended => return false,
            Stop::Asked(name) => name,
        };
        if detached {
            // Open descriptors keep a lazily detached session alive; a second
            // signal stops waiting for them (they get ENOTCONN at our exit).
            warn!("Received {name} again: shutting down without waiting for open files");
            return true;
        }
        info!("Received {name}, unmounting {}", mnt.display());
        if let Err(e) = unmounter.unmount() {
            // EBUSY while a descriptor is open: detach now; the session ends
            // when the last one closes.
            warn!(
                "unmount of {} failed ({e}); detached it lazily: the daemon exits when the last open file \
                 on it is closed, or at the next signal",
                mnt.display()
            );
            lazy_unmount(mnt);
            detached = true;
        }
    }
}

pub(super) fn session_end(session: SessionThread) -> Result<(), String> {
    match session.join() {
        Ok(Ok(())) => Ok(()),
        // A loop that had just taken a request (often the RELEASE that let a
        // lazily detached mount go) when the kernel tore the connection down
        // reads ECONNABORTED: the same end as ENODEV, only raced.
        Ok(Err(e)) if e.raw_os_error() == Some(libc::ECONNABORTED) => {
            info!("The FUSE connection was closed while a request was being read");
            Ok(())
        }
        Ok(Err(e)) => Err(format!("the FUSE session ended with an error: {e}")),
        Err(_) => Err("the FUSE session thread panicked".to_string()),
    }
}

fn lazy_unmount(mnt: &Path) {
    let Ok(c) = std::ffi::CString::new(mnt.as_os_str().as_encoded_bytes()) else {
        return;
    };
    // SAFETY: a plain syscall on a valid C string.
    if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } != 0 {
        error!(
            "lazy unmount of {} failed: {}",
            mnt.display(),
            std::io::Error::last_os_error()
        );
    }
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
