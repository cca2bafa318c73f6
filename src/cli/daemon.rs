//! What every long-running commitfs process shares, whatever face it serves:
//! starting as a daemon that reports when it is live, the signals that end
//! it, and the [`Daemon`]: the data directory (which runs its own timed
//! jobs) and the services over it, started and stopped as one.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{FromRawFd, IntoRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use commitfs::backend::groups::Groups;
use commitfs::backend::local::DAEMON_LOG_FILE;
use commitfs::kafka::KafkaServer;
use commitfs::kafka::group::admin::CoordinatorGroups;
use commitfs::storage::{LogManager, OpenOptions, StorageError, TimedJobs};
use log::{error, info, warn};

use super::options::DaemonOptions;

/// Re-executes this program with `args` (a foreground command taking
/// `--ready-fd`) as a new session leader logging to `log`, and returns its
/// exit code once the daemon reports itself live (0) or fails (1).
pub fn spawn(args: &[OsString], log: std::fs::File, log_path: &Path) -> i32 {
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
    cmd.arg0("commitfs").args(args).arg("--ready-fd").arg("3");
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
    // The daemon says "ok" once live; before that it may report progress
    // (a long recovery), and anything else is why it failed.
    let mut failure = String::new();
    for line in BufReader::new(std::fs::File::from(r)).lines() {
        let Ok(line) = line else { break };
        if line == "ok" {
            return 0;
        }
        match line.strip_prefix(PROGRESS) {
            Some(p) => eprintln!("commitfs: {p}"),
            None => {
                failure.push_str(&line);
                failure.push('\n');
            }
        }
    }
    let _ = child.wait();
    let msg = failure.trim();
    if msg.is_empty() {
        eprintln!(
            "commitfs: the daemon exited before it was live; see {}",
            log_path.display()
        );
    } else {
        eprintln!("commitfs: {msg}");
    }
    1
}

/// Marks a progress line on the ready pipe.
const PROGRESS: &str = "progress: ";

/// The daemon's side of [`spawn`]: where it says it is live, or why not,
/// and on the way how a long load is going.
pub struct Ready {
    pipe: parking_lot::Mutex<Option<std::fs::File>>,
    started: Instant,
}

impl Ready {
    pub fn from_fd(fd: Option<i32>) -> Ready {
        // SAFETY: the parent passed this descriptor open for us alone.
        let pipe = fd.map(|fd| std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) }));
        Ready {
            pipe: parking_lot::Mutex::new(pipe),
            started: Instant::now(),
        }
    }

    pub fn live(&mut self) {
        if let Some(mut r) = self.pipe.lock().take() {
            let _ = writeln!(r, "ok");
        }
    }

    pub fn failed(&mut self, why: &str) {
        if let Some(mut r) = self.pipe.lock().take() {
            let _ = writeln!(r, "{why}");
        }
    }

    /// A progress line of the load, shown by the waiting parent once the
    /// daemon has been starting for longer than [`progress_after`].
    pub fn progress(&self, line: &str) {
        if self.started.elapsed() < progress_after() {
            return;
        }
        if let Some(r) = self.pipe.lock().as_mut() {
            let _ = writeln!(r, "{PROGRESS}{line}");
        }
    }
}

/// How long a start may take before its progress is shown: about a second,
/// or `COMMITFS_PROGRESS_AFTER_MS` (tests set 0, so that showing progress
/// does not depend on how fast this machine recovers).
fn progress_after() -> Duration {
    std::env::var("COMMITFS_PROGRESS_AFTER_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(Duration::from_secs(1), Duration::from_millis)
}

/// Where a daemon logs. A read-only daemon must leave the data directory
/// untouched, so its log goes to the temp dir, named after the data dir.
pub fn log_file_path(data: &Path, read_only: bool) -> PathBuf {
    if !read_only {
        return data.join(DAEMON_LOG_FILE);
    }
    temp_log_path("commitfs", data)
}

/// `$TMPDIR/<prefix>-<path, escaped>.log`: a daemon's log outside any data
/// directory, named after the directory it serves.
pub fn temp_log_path(prefix: &str, path: &Path) -> PathBuf {
    let escaped: String = path
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
    std::env::temp_dir().join(format!("{prefix}-{escaped}.log"))
}

/// Opens the log file a daemon writes, creating it.
pub fn open_log(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
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

/// Opens the data directory for a daemon: a daemon of the same directory
/// still finishing its shutdown is waited for; a live one is refused.
fn open_storage(
    data: &Path,
    d: &DaemonOptions,
    command: &str,
    ready: &Ready,
) -> Result<Arc<LogManager>, String> {
    let (defaults, read_only) = (&d.defaults, d.read_only);
    if !read_only {
        super::lock::wait_for_release(data, command).map_err(|e| {
            format!("the data directory is locked: {e}; refusing a second {command}")
        })?;
    }
    let opts = OpenOptions {
        read_only,
        cleaner: d.cleaner.clone(),
        timed: Some(TimedJobs {
            retention_check: d.retention_check,
            ..TimedJobs::default()
        }),
    };
    let progress = |line: &str| ready.progress(line);
    let manager = LogManager::open_with_progress(data, defaults.clone(), opts, &progress).map_err(
        |e| match e {
            StorageError::Locked(_) => {
                format!("{e}: is it in use already? Refusing a second {command}")
            }
            e => format!("cannot open {}: {e}", data.display()),
        },
    )?;
    Ok(Arc::new(manager))
}

/// Sets `max.broker.partitions` on the data directory: `configured`, or
/// as many partitions as the daemon's descriptors hold (call after
/// [`raise_nofile_limit`]). Logged, since past it creations are refused.
fn limit_partitions(manager: &LogManager, configured: Option<usize>) {
    use commitfs::kafka::limits::{default_max_partitions, nofile_limit, partition_fds};
    let nofile = nofile_limit();
    let max = configured.unwrap_or_else(|| default_max_partitions(nofile));
    manager.set_max_partitions(max);
    if partition_fds(max as u64) >= nofile {
        warn!(
            "max.broker.partitions={max} needs {} descriptors and RLIMIT_NOFILE is {nofile}: \
             creations and rolls past what the descriptors hold will fail",
            partition_fds(max as u64)
        );
    } else {
        info!("max.broker.partitions={max} (RLIMIT_NOFILE {nofile})");
    }
}

/// What a data directory's daemon runs, whatever face it shows (`serve`
/// shows only the listener; `mount` adds its FUSE session on top): the
/// storage with its timed jobs, the Kafka listener with its coordinators,
/// and the group coordinator the tree shows. A service to come (metrics,
/// remote storage) is one more field and one more step of
/// [`Daemon::start`] and of [`Daemon::stop`].
///
/// Started in one order, each service on those before it; stopped in the
/// reverse order in one call, so the listener and its connections end
/// before the storage closes. A start that fails stops what it started.
pub struct Daemon {
    data: PathBuf,
    storage: Arc<LogManager>,
    /// `None`: nothing listens (a mount without `listeners`).
    kafka: Option<KafkaServer>,
    /// The listener's group coordinator, or without one the tree's own.
    groups: Arc<dyn Groups>,
    stopped: bool,
}

/// What [`Daemon::start`] needs.
pub struct DaemonSpec<'a> {
    /// The data directory, canonical.
    pub data: &'a Path,
    pub options: &'a DaemonOptions,
    /// The command, for messages: `mount`, `serve`.
    pub command: &'static str,
    /// Whether a daemon without a listener is refused (`serve`).
    pub needs_listener: bool,
    pub ready: &'a Ready,
}

impl Daemon {
    /// Opens the storage (which starts its jobs), then the listener.
    pub fn start(spec: &DaemonSpec) -> Result<Daemon, String> {
        let d = spec.options;
        raise_nofile_limit();
        let storage = open_storage(spec.data, d, spec.command, spec.ready)?;
        limit_partitions(&storage, d.max_partitions);
        // A coordinator of the tree's own until a listener brings its own.
        let groups: Arc<dyn Groups> = Arc::new(CoordinatorGroups::standalone(
            storage.clone(),
            d.kafka.groups.clone(),
        ));
        let mut daemon = Daemon {
            data: spec.data.to_path_buf(),
            storage,
            kafka: None,
            groups,
            stopped: false,
        };
        let started = KafkaServer::start(daemon.storage.clone(), d.kafka.clone());
        match started {
            Ok(Some(k)) => {
                daemon.groups = Arc::new(k.groups());
                daemon.kafka = Some(k);
            }
            Ok(None) if spec.needs_listener => {
                return Err(daemon.fail("no listener is configured".to_string()));
            }
            Ok(None) => {}
            Err(e) => return Err(daemon.fail(e)),
        }
        info!("Daemon services: {}", daemon.services().join(", "));
        Ok(daemon)
    }

    /// Stops what started, for a start that failed with `e`.
    fn fail(mut self, e: String) -> String {
        if let Err(ce) = self.shutdown() {
            error!("{ce}");
        }
        e
    }

    pub fn storage(&self) -> &Arc<LogManager> {
        &self.storage
    }

    pub fn kafka(&self) -> Option<&KafkaServer> {
        self.kafka.as_ref()
    }

    /// The group coordinator the tree's `groups/` shows.
    pub fn groups(&self) -> Arc<dyn Groups> {
        self.groups.clone()
    }

    /// What runs, in the order it started: the storage with each of its
    /// timed jobs, then the listener.
    pub fn services(&self) -> Vec<String> {
        let mut out = vec![format!("storage [{}]", self.storage.jobs().join(" "))];
        if self.kafka.is_some() {
            out.push("kafka-listener".to_string());
        }
        out
    }

    /// Stops every service, in the reverse order of the start. Idempotent.
    pub fn stop(mut self) -> Result<(), String> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<(), String> {
        if std::mem::replace(&mut self.stopped, true) {
            return Ok(());
        }
        if let Some(mut k) = self.kafka.take() {
            k.stop();
        }
        self.storage
            .close()
            .map_err(|e| format!("closing {} failed: {e}", self.data.display()))
    }
}

/// A daemon dropped unstopped (a start that failed later, in the face's own
/// steps) still stops in order.
impl Drop for Daemon {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            error!("{e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec<'a>(data: &'a Path, options: &'a DaemonOptions, ready: &'a Ready) -> DaemonSpec<'a> {
        DaemonSpec {
            data,
            options,
            command: "test",
            needs_listener: false,
            ready,
        }
    }

    #[test]
    fn a_daemon_runs_the_storage_jobs_and_stops_in_one_call() {
        let tmp = tempfile::tempdir().unwrap();
        let (options, ready) = (DaemonOptions::default(), Ready::from_fd(None));
        let daemon = Daemon::start(&spec(tmp.path(), &options, &ready)).unwrap();
        assert_eq!(
            daemon.services(),
            ["storage [kafka-log-cleaner-thread-0 kafka-log-flusher kafka-log-retention]"]
        );
        let storage = daemon.storage().clone();
        daemon.stop().unwrap();
        assert!(storage.jobs().is_empty());
        assert!(
            tmp.path()
                .join(commitfs::storage::CLEAN_SHUTDOWN_FILE)
                .exists()
        );
    }

    /// A start that fails after the storage opened closes it: the
    /// directory is left clean and unlocked.
    #[test]
    fn a_failed_start_closes_what_it_opened() {
        let tmp = tempfile::tempdir().unwrap();
        let (options, ready) = (DaemonOptions::default(), Ready::from_fd(None));
        let mut s = spec(tmp.path(), &options, &ready);
        s.needs_listener = true;
        let err = Daemon::start(&s).err().expect("no listener is refused");
        assert_eq!(err, "no listener is configured");
        assert!(
            tmp.path()
                .join(commitfs::storage::CLEAN_SHUTDOWN_FILE)
                .exists()
        );
        assert!(!commitfs::storage::is_locked(tmp.path()));
    }
}
