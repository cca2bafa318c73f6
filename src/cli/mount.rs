//! `commitfs mount`: open a data directory and serve it over FUSE until unmounted.

use std::io::{Read, Write};
use std::os::fd::{FromRawFd, IntoRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Args;
use commitfs::fs::{CommitFs, LocalBackend};
use commitfs::storage::{CONFIG_NAMES, LogConfig, LogManager, OpenOptions, StorageError};
use fuser::{Config, MountOption, Session, SessionACL};
use log::{error, info, warn};

#[derive(Args, Debug)]
pub struct MountArgs {
    /// The data directory (Kafka's log.dir); created if missing.
    pub data_dir: PathBuf,
    /// Where to mount it; created if missing.
    pub mountpoint: PathBuf,
    /// Stay attached and log to stderr (default: return once mounted, log to
    /// DATA_DIR/commitfs.log, or on a read-only mount, which never writes to
    /// the data directory, to $TMPDIR/commitfs-<data dir path>.log).
    #[arg(short, long)]
    pub foreground: bool,
    /// Options, comma-separated, repeatable: Kafka topic configs as mount-wide
    /// defaults (segment.bytes=1048576, ...), ro, allow_other, allow_root,
    /// log.retention.check.interval.ms=N, and FUSE flags (noatime, nosuid, ...).
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

const LOG_FILE: &str = "commitfs.log";
const DEFAULT_RETENTION_CHECK_MS: u64 = 300_000;
const FLUSH_CHECK: Duration = Duration::from_millis(500);

struct Options {
    defaults: LogConfig,
    read_only: bool,
    acl: SessionACL,
    fuse: Vec<MountOption>,
    retention_check: Duration,
}

fn parse_options(raw: &[String]) -> Result<Options, String> {
    let mut o = Options {
        defaults: LogConfig::default(),
        read_only: false,
        acl: SessionACL::Owner,
        fuse: Vec::new(),
        retention_check: Duration::from_millis(DEFAULT_RETENTION_CHECK_MS),
    };
    let mut fsname = None;
    for tok in raw
        .iter()
        .flat_map(|s| s.split(','))
        .map(str::trim)
        .filter(|t| !t.is_empty())
    {
        if super::helper::is_mount8_option(tok) {
            continue;
        }
        match tok.split_once('=') {
            None => match tok {
                "ro" => o.read_only = true,
                "rw" => o.read_only = false,
                "allow_other" => o.acl = SessionACL::All,
                "allow_root" => o.acl = SessionACL::RootAndOwner,
                "auto_unmount" => o.fuse.push(MountOption::AutoUnmount),
                "default_permissions" => o.fuse.push(MountOption::DefaultPermissions),
                "dev" => o.fuse.push(MountOption::Dev),
                "nodev" => o.fuse.push(MountOption::NoDev),
                "suid" => o.fuse.push(MountOption::Suid),
                "nosuid" => o.fuse.push(MountOption::NoSuid),
                "exec" => o.fuse.push(MountOption::Exec),
                "noexec" => o.fuse.push(MountOption::NoExec),
                "atime" => o.fuse.push(MountOption::Atime),
                "noatime" => o.fuse.push(MountOption::NoAtime),
                "sync" => o.fuse.push(MountOption::Sync),
                "async" => o.fuse.push(MountOption::Async),
                "dirsync" => o.fuse.push(MountOption::DirSync),
                _ => return Err(format!("unknown mount option {tok:?}")),
            },
            Some(("log.retention.check.interval.ms", v)) => {
                let ms: u64 = v
                    .parse()
                    .ok()
                    .filter(|ms| *ms >= 1)
                    .ok_or_else(|| format!("Invalid value {v} for configuration log.retention.check.interval.ms: Value must be at least 1"))?;
                o.retention_check = Duration::from_millis(ms);
            }
            Some(("fsname", v)) => fsname = Some(v.to_string()),
            Some(("subtype", v)) => o.fuse.push(MountOption::Subtype(v.to_string())),
            Some((k, v)) if CONFIG_NAMES.contains(&k) => {
                o.defaults.set(k, v).map_err(|e| e.to_string())?
            }
            Some((k, _)) => return Err(format!("unknown mount option {k:?}")),
        }
    }
    o.fuse.push(MountOption::FSName(
        fsname.unwrap_or_else(|| "commitfs".to_string()),
    ));
    if o.read_only {
        o.fuse.push(MountOption::RO);
    }
    Ok(o)
}

/// Checks `-o` options as a mount would, without mounting.
pub fn check_options(raw: &[String]) -> Result<(), String> {
    parse_options(raw).map(drop)
}

pub fn run(args: MountArgs) -> i32 {
    let opts = match parse_options(&args.options) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("commitfs: {e}");
            return 2;
        }
    };
    if !args.foreground {
        return daemonize(&args, opts.read_only);
    }
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let ready = args.ready_fd.map(|fd| {
        // SAFETY: the parent passed this descriptor open for us alone.
        std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) })
    });
    let mut ready = ready;
    match serve(&args, opts, &mut ready) {
        Ok(()) => 0,
        Err(e) => {
            error!("{e}");
            if let Some(mut r) = ready.take() {
                let _ = writeln!(r, "{e}");
            }
            1
        }
    }
}

/// Re-executes this command in the foreground as a new session leader with its
/// log going to the data directory, and returns once it reports the mount live
/// (or its error).
fn daemonize(args: &MountArgs, read_only: bool) -> i32 {
    let prepare = || -> std::io::Result<(PathBuf, PathBuf, PathBuf, std::fs::File)> {
        if !read_only {
            std::fs::create_dir_all(&args.data_dir)?;
        }
        std::fs::create_dir_all(&args.mountpoint)?;
        let data = args.data_dir.canonicalize()?;
        let mnt = args.mountpoint.canonicalize()?;
        let log_path = log_file_path(&data, read_only);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)?;
        Ok((data, mnt, log_path, log))
    };
    let (data, mnt, log_path, log) = match prepare() {
        Ok(x) => x,
        Err(e) => {
            eprintln!("commitfs: {e}");
            return 1;
        }
    };
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills the two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        eprintln!("commitfs: pipe: {}", std::io::Error::last_os_error());
        return 1;
    }
    // SAFETY: both descriptors were just created and are owned here.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("commitfs: cannot find my own executable: {e}");
            return 1;
        }
    };
    let mut cmd = Command::new(exe);
    // Whatever name started us (a mount(8) helper link), the daemon is `commitfs`.
    cmd.arg0("commitfs")
        .arg("mount")
        .arg("--foreground")
        .arg("--threads")
        .arg(args.threads.to_string());
    for o in &args.options {
        cmd.arg("-o").arg(o);
    }
    cmd.arg("--ready-fd").arg("3").arg(&data).arg(&mnt);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .current_dir("/");
    let wfd = w.into_raw_fd();
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            if wfd == 3 {
                libc::fcntl(3, libc::F_SETFD, 0);
            } else if libc::dup2(wfd, 3) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let spawned = cmd.spawn();
    // SAFETY: wfd came from into_raw_fd above; the parent's copy must go so
    // that a dying daemon shows as EOF.
    drop(unsafe { OwnedFd::from_raw_fd(wfd) });
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            eprintln!("commitfs: cannot start the daemon: {e}");
            return 1;
        }
    };
    let mut msg = String::new();
    let _ = std::fs::File::from(r).read_to_string(&mut msg);
    if msg.trim() == "ok" {
        return 0;
    }
    let _ = child.wait();
    let msg = msg.trim();
    if msg.is_empty() {
        eprintln!(
            "commitfs: the daemon exited before mounting; see {}",
            log_path.display()
        );
    } else {
        eprintln!("commitfs: {msg}");
    }
    1
}

/// Where a daemon logs. A read-only mount must leave the data directory
/// untouched, so its log goes to the temp dir, named after the data dir.
fn log_file_path(data: &Path, read_only: bool) -> PathBuf {
    if !read_only {
        return data.join(LOG_FILE);
    }
    let escaped: String = data
        .to_string_lossy()
        .trim_start_matches('/')
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    std::env::temp_dir().join(format!("commitfs-{escaped}.log"))
}

fn raise_nofile_limit() {
    // SAFETY: plain syscalls on a local struct.
    unsafe {
        let mut lim: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            let want = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &want) != 0 {
                warn!("could not raise RLIMIT_NOFILE to {}", lim.rlim_max);
            }
        }
    }
}

/// The signals that end the mount, plus SIGUSR1 which the session thread
/// sends itself when the session ends on its own (an external umount).
fn shutdown_signals() -> libc::sigset_t {
    // SAFETY: sigset manipulation on a local set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGUSR1] {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn serve(args: &MountArgs, opts: Options, ready: &mut Option<std::fs::File>) -> Result<(), String> {
    // Before any thread exists (storage may start some), so that every thread
    // inherits the mask and the signals wait for sigwait below.
    let signals = shutdown_signals();
    // SAFETY: blocks signals for this thread; the set is valid.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &signals, std::ptr::null_mut()) };

    // A read-only mount writes nothing to the data dir, not even the dir itself.
    let create: &[&PathBuf] = if opts.read_only {
        &[&args.mountpoint]
    } else {
        &[&args.data_dir, &args.mountpoint]
    };
    for dir in create {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    raise_nofile_limit();
    let data = args
        .data_dir
        .canonicalize()
        .map_err(|e| format!("{}: {e}", args.data_dir.display()))?;
    let mnt = args
        .mountpoint
        .canonicalize()
        .map_err(|e| format!("{}: {e}", args.mountpoint.display()))?;

    if !opts.read_only {
        // A daemon of this directory that is still shutting down (after an
        // umount) is waited for; a live mount is refused.
        super::lock::wait_for_release(&data, "mount")
            .map_err(|e| format!("the data directory is locked: {e}; refusing a second mount"))?;
    }
    let manager = LogManager::open(
        &data,
        opts.defaults.clone(),
        OpenOptions {
            read_only: opts.read_only,
        },
    )
    .map_err(|e| match e {
        StorageError::Locked(_) => format!("{e}: is it mounted already? Refusing a second mount"),
        e => format!("cannot open {}: {e}", data.display()),
    })?;
    let manager = Arc::new(manager);

    let mut config = Config::default();
    config.mount_options = opts.fuse.clone();
    config.acl = opts.acl;
    config.n_threads = Some(args.threads as usize);
    config.clone_fd = true;
    // After an external umount, fuser's own clean-up retries the umount and
    // logs a spurious EINVAL; releasing the mount from destroy() first avoids it.
    let slot: Arc<parking_lot::Mutex<Option<fuser::SessionUnmounter>>> = Arc::default();
    let fs = CommitFs::new(Arc::new(LocalBackend::new(manager.clone()))).on_destroy({
        let slot = slot.clone();
        move || {
            if let Some(mut u) = slot.lock().take()
                && let Err(e) = u.unmount()
            {
                log::debug!("unmount after the session ended: {e}");
            }
        }
    });
    let mut session = match Session::new(fs, &mnt, &config) {
        Ok(s) => s,
        Err(e) => {
            if let Err(ce) = manager.close() {
                error!("closing {} failed: {ce}", data.display());
            }
            return Err(format!("cannot mount on {}: {e}", mnt.display()));
        }
    };
    // Taken before the session moves to its thread: run() keeps the mount in
    // the same shared slot, so this unmounter stays live (unlike after spawn()).
    let mut unmounter = session.unmount_callable();
    *slot.lock() = Some(session.unmount_callable());
    let session_thread = thread::Builder::new()
        .name("fuse-session".into())
        .spawn(move || {
            let r = session.run();
            // SAFETY: wakes the main thread's sigwait.
            unsafe { libc::kill(libc::getpid(), libc::SIGUSR1) };
            r
        })
        .map_err(|e| format!("cannot start the session thread: {e}"))?;

    let (stop_tx, stop_rx) = mpsc::channel::<()>();
    let sched = {
        let manager = manager.clone();
        let every = opts.retention_check;
        let read_only = opts.read_only;
        thread::Builder::new()
            .name("scheduler".into())
            .spawn(move || scheduler(&manager, every, read_only, stop_rx))
            .map_err(|e| format!("cannot start the scheduler thread: {e}"))?
    };

    if let Err(e) = manager.note_holder(&super::lock::mounted_note(&mnt)) {
        warn!("could not note the mount in {}: {e}", data.display());
    }
    info!(
        "Mounted {} on {}{}",
        data.display(),
        mnt.display(),
        if opts.read_only { " read-only" } else { "" }
    );
    if let Some(mut r) = ready.take() {
        let _ = writeln!(r, "ok");
    }

    let mut detached = false;
    let mut forced = false;
    loop {
        let mut sig: libc::c_int = 0;
        // SAFETY: waits on the blocked set.
        if unsafe { libc::sigwait(&signals, &mut sig) } != 0 {
            continue;
        }
        if sig == libc::SIGUSR1 {
            break;
        }
        let name = match sig {
            libc::SIGINT => "SIGINT",
            libc::SIGTERM => "SIGTERM",
            _ => "SIGHUP",
        };
        if detached {
            // Open descriptors keep a lazily detached session alive; a second
            // signal stops waiting for them (they get ENOTCONN at our exit).
            warn!("Received {name} again: shutting down without waiting for open files");
            forced = true;
            break;
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
            lazy_unmount(&mnt);
            detached = true;
        }
    }

    if forced {
        drop(stop_tx);
        let _ = sched.join();
        manager
            .close()
            .map_err(|e| format!("closing {} failed: {e}", data.display()))?;
        info!("Shutdown of {} complete (forced)", data.display());
        // The session thread still blocks on /dev/fuse: leave without it.
        std::process::exit(0);
    }

    let result = match session_thread.join() {
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
    };
    drop(stop_tx);
    let _ = sched.join();
    info!("Unmounted {}; shutting down the log manager", mnt.display());
    manager
        .close()
        .map_err(|e| format!("closing {} failed: {e}", data.display()))?;
    info!("Shutdown of {} complete", data.display());
    result
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

/// Periodic work: `flush.ms` flushes and the retention check. Storage takes
/// its own locks; this thread holds none.
fn scheduler(
    manager: &LogManager,
    retention_every: Duration,
    read_only: bool,
    stop: mpsc::Receiver<()>,
) {
    if read_only {
        let _ = stop.recv();
        return;
    }
    let mut next_retention = Instant::now() + retention_every;
    loop {
        match stop.recv_timeout(FLUSH_CHECK) {
            Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
            Err(RecvTimeoutError::Timeout) => {}
        }
        let guarded = |what: &str, f: &dyn Fn() -> commitfs::storage::Result<()>| {
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
                Ok(Ok(())) => {}
                Ok(Err(e)) => error!("{what} failed: {e}"),
                Err(_) => error!("{what} panicked"),
            }
        };
        guarded("scheduled flush", &|| {
            manager.run_scheduled_flushes(now_ms())
        });
        if Instant::now() >= next_retention {
            guarded("retention check", &|| manager.run_retention(now_ms()));
            next_retention = Instant::now() + retention_every;
        }
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
        assert_eq!(o.defaults.segment_bytes, 1_048_576);
        assert_eq!(o.defaults.index_interval_bytes, 100);
        assert!(o.read_only);
        assert_eq!(o.acl, SessionACL::All);
        assert!(o.fuse.contains(&MountOption::RO));
        let o = opts(&["log.retention.check.interval.ms=1000"]).unwrap();
        assert_eq!(o.retention_check, Duration::from_millis(1000));
        assert_eq!(
            opts(&["segment.bytes=16384"]).err().unwrap(),
            "Invalid value 16384 for configuration segment.bytes: Value must be at least 1048576"
        );
        assert!(opts(&["bogus"]).is_err());
        // mount(8) and systemd options are ignored.
        let o = opts(&["rw,segment.bytes=1048576,nofail,_netdev,x-systemd.automount"]).unwrap();
        assert_eq!(o.defaults.segment_bytes, 1_048_576);
        assert!(!o.read_only);
        assert!(opts(&["bogus=1"]).is_err());
    }
}
