//! What a mount of a data directory and a mount of a cluster share: the
//! command's arguments, FUSE's and mount(8)'s options, and the FUSE session
//! from mount to unmount.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread;

use clap::Args;
use commitfs::backend::Backend;
use commitfs::fs::CommitFs;
use fuser::{Config, MountOption, Session, SessionACL, SessionUnmounter};
use log::{error, info, warn};

use super::options::is_mount8_option;
use super::signals::{Signals, Stop};

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
    pub(super) fn mnt(&self) -> &Path {
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
        if is_mount8_option(tok) {
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
