//! The data directory (Kafka's `log.dir`): partitions, checkpoints, the
//! clean-shutdown marker and the lock.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

use log::{error, info, warn};
use parking_lot::{Mutex, RwLock};

use super::append_signal::AppendSignal;
use super::batch_reader::read_full_at;
use super::checkpoint::{Checkpoints, write_atomically};
use super::cleaner::{CleanerConfig, CleanerCore, CleanerCounters};
use super::config::LogConfig;
use super::deleter::Deleter;
use super::disk;
use super::error::{IoContext, Result, StorageError};
use super::flusher::Flusher;
use super::local_log::{DirContext, FileKind, PartitionFile};
use super::names::{parse_partition_name, validate_new_partition_name};
use super::partition::{LoadContext, PartitionLog};
use super::progress::{Progress, ProgressFn};
use super::scheduler::Scheduler;

// The timed duties the scheduler runs.
mod jobs;
pub use jobs::{FLUSH_JOB, RETENTION_JOB, TimedJobs};

// Read-only mounts following the directory another process writes.
pub(super) mod follow_dir;
use super::dir_watch::DirWatch;

/// Written at a clean close, deleted at start-up (Kafka's `CleanShutdownFileHandler`).
pub const CLEAN_SHUTDOWN_FILE: &str = ".kafka_cleanshutdown";
/// Held with `flock` while the directory is open, as Kafka's `.lock`.
pub const LOCK_FILE: &str = ".lock";
/// The listener's users' SCRAM credentials, kept in the data directory so
/// that they move with it; the tree never shows the file.
pub const SCRAM_CREDENTIALS_FILE: &str = "commitfs.scram-credentials";
/// The listener's ACLs, changed only through CreateAcls and DeleteAcls.
pub const ACLS_FILE: &str = "commitfs.acls";

/// How many partitions a data directory holds at most unless told
/// otherwise (`max.broker.partitions`, see [`LogManager::set_max_partitions`]).
pub const DEFAULT_MAX_PARTITIONS: usize = 10_000;

#[derive(Clone, Debug)]
pub struct OpenOptions {
    /// Never write to the data directory: no marker, no checkpoint, indexes
    /// indexes that need rebuilding are rebuilt in memory only, and no
    /// timed job runs.
    pub read_only: bool,
    /// The log cleaner's settings (Kafka's `log.cleaner.*`).
    pub cleaner: CleanerConfig,
    /// How often retention and the `flush.ms` check run; `None`: never on
    /// their own, only when asked for ([`LogManager::run_retention`],
    /// [`LogManager::run_scheduled_flushes`]).
    pub timed: Option<TimedJobs>,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            read_only: false,
            cleaner: CleanerConfig::default(),
            timed: Some(TimedJobs::default()),
        }
    }
}

pub struct LogManager {
    dir: PathBuf,
    /// Read-only: the data directory as last listed (see `manager/follow_dir.rs`).
    root_watch: Mutex<DirWatch>,
    defaults: LogConfig,
    read_only: bool,
    checkpoints: Arc<Checkpoints>,
    pub(super) partitions: Arc<RwLock<BTreeMap<String, Arc<PartitionLog>>>>,
    /// Serialises partition creation and deletion.
    pub(super) admin: Mutex<()>,
    /// Raised after every append to any partition (long-polling fetches wait on it).
    appends: Arc<AppendSignal>,
    /// Released at close, so the directory can be opened again.
    lock: Mutex<Option<DataDirLock>>,
    closed: AtomicBool,
    /// Runs every background job of the directory; stopped first at close
    /// and at drop.
    scheduler: Scheduler,
    /// Queues the flushes that rolls ask for on the scheduler.
    flusher: Flusher,
    /// No partition is created past this many (`max.broker.partitions`).
    max_partitions: AtomicUsize,
    /// What the log cleaner's jobs and the partitions share.
    cleaner_core: Arc<CleanerCore>,
    /// Removes replaced segments' files after `file.delete.delay.ms`.
    deleter: Deleter,
}

impl OpenOptions {
    /// Read-write, the cleaner's settings Kafka's but no cleaner thread: a
    /// pass runs only when asked for (`PartitionLog::clean_now`), for tools
    /// and tests that must know when one runs.
    pub fn without_cleaner_threads() -> OpenOptions {
        OpenOptions {
            cleaner: CleanerConfig {
                threads: 0,
                ..CleanerConfig::default()
            },
            ..OpenOptions::default()
        }
    }
}

impl LogManager {
    /// Opens (creating if missing) a data directory: takes the lock, loads every
    /// partition, recovering them if the clean-shutdown marker is absent.
    pub fn open(dir: &Path, defaults: LogConfig, opts: OpenOptions) -> Result<LogManager> {
        Self::open_with_progress(dir, defaults, opts, &|_| {})
    }

    /// [`LogManager::open`], handing each progress line of the load (a
    /// partition loaded, a segment recovered) to `progress` as it happens.
    pub fn open_with_progress(
        dir: &Path,
        defaults: LogConfig,
        opts: OpenOptions,
        progress: ProgressFn,
    ) -> Result<LogManager> {
        if !opts.read_only {
            disk::create_dir_all("manager.mkdir", dir).at(dir)?;
        }
        let dir = fs::canonicalize(dir).at(dir)?;
        let lock = if opts.read_only {
            None
        } else {
            Some(DataDirLock::acquire(&dir)?)
        };
        Self::open_locked(&dir, defaults, opts, lock, Progress::to(progress))
    }

    /// [`LogManager::open`] with the lock already held, for a caller that
    /// changes files of the directory before it opens it (`check --repair`).
    pub fn open_with_lock(
        dir: &Path,
        defaults: LogConfig,
        opts: OpenOptions,
        lock: DataDirLock,
    ) -> Result<LogManager> {
        let dir = fs::canonicalize(dir).at(dir)?;
        Self::open_locked(&dir, defaults, opts, Some(lock), Progress::default())
    }

    fn open_locked(
        dir: &Path,
        defaults: LogConfig,
        opts: OpenOptions,
        lock: Option<DataDirLock>,
        progress: Progress,
    ) -> Result<LogManager> {
        let started = Instant::now();
        let dir = dir.to_path_buf();
        let marker = dir.join(CLEAN_SHUTDOWN_FILE);
        let clean = marker.exists();
        if clean && !opts.read_only {
            // Gone before loading starts, so a crash while loading counts as unclean.
            disk::remove_file("manager.marker.remove", &marker).at(&marker)?;
            disk::sync_dir("manager.marker.dir_fsync", &dir).synced(&dir)?;
        }
        let checkpoints = Arc::new(Checkpoints::load(&dir, opts.read_only));
        let scheduler = jobs::scheduler(opts.cleaner.threads);
        let flusher = Flusher::new(scheduler.clone());
        let deleter = Deleter::new(scheduler.clone());
        let names = partition_dirs(&dir)?;
        progress.report(&if clean {
            format!(
                "Skipping recovery of {} logs from {} since clean shutdown file was found",
                names.len(),
                dir.display()
            )
        } else {
            format!(
                "Recovering {} logs from {} since no clean shutdown file was found",
                names.len(),
                dir.display()
            )
        });
        let appends = Arc::new(AppendSignal::default());
        opts.cleaner.validate().map_err(StorageError::Config)?;
        let cleaner_core = CleanerCore::new(opts.cleaner.clone());
        let ctx = LoadContext {
            defaults: &defaults,
            appends: &appends,
            cleaner: cleaner_core.clone(),
            log: DirContext {
                checkpoints: &checkpoints,
                flusher: &flusher,
                deleter: &deleter,
                clean_shutdown: clean,
                writable: !opts.read_only,
                progress,
            },
        };
        let loaded = load_partitions(&names, &ctx, started);
        let partitions = Arc::new(RwLock::new(loaded.inspect_err(|_| scheduler.stop())?));
        let timed = opts.timed.as_ref();
        jobs::start(
            &scheduler,
            &partitions,
            &cleaner_core,
            timed,
            opts.read_only,
        );
        info!(
            "Loaded {} logs in {} ms from {}",
            partitions.read().len(),
            started.elapsed().as_millis(),
            dir.display()
        );
        Ok(LogManager {
            dir,
            root_watch: Mutex::new(DirWatch::default()),
            defaults,
            read_only: opts.read_only,
            checkpoints,
            partitions,
            admin: Mutex::new(()),
            appends,
            lock: Mutex::new(lock),
            closed: AtomicBool::new(false),
            scheduler,
            flusher,
            max_partitions: AtomicUsize::new(DEFAULT_MAX_PARTITIONS),
            deleter,
            cleaner_core,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Notes in the held `.lock` what holds the directory (e.g. "mounted on
    /// /mnt"), so that another command finding it locked can say so.
    pub fn note_holder(&self, note: &str) -> Result<()> {
        if let Some(l) = self.lock.lock().as_ref() {
            write_holder(&l.file, &format!("{note}\n")).at(&self.dir.join(LOCK_FILE))?;
        }
        Ok(())
    }
    pub fn defaults(&self) -> &LogConfig {
        &self.defaults
    }
    pub fn read_only(&self) -> bool {
        self.read_only
    }

    /// All partitions, sorted by name. Read-only, those the directory
    /// holds now (another process may create and delete them).
    pub fn partitions(&self) -> Vec<Arc<PartitionLog>> {
        if self.read_only {
            self.follow_root();
        }
        self.partitions.read().values().cloned().collect()
    }

    /// The partition. Read-only, brought up to what its directory holds
    /// now, and `None` once its directory is gone.
    pub fn partition(&self, name: &str) -> Option<Arc<PartitionLog>> {
        if self.read_only {
            return self.followed_partition(name);
        }
        self.partitions.read().get(name).cloned()
    }

    /// Caps the partitions the directory may hold (`max.broker.partitions`):
    /// a creation past it is refused (`PartitionLimit`). Partitions already
    /// there, more than that or not, all load and stay.
    pub fn set_max_partitions(&self, max: usize) {
        self.max_partitions.store(max, Ordering::Relaxed);
    }

    pub fn max_partitions(&self) -> usize {
        self.max_partitions.load(Ordering::Relaxed)
    }

    /// Room for `new` more partitions under `max.broker.partitions`. The
    /// creations check it with the admin lock held, so that two cannot both
    /// take the last room; without it (a validate-only request) it is advice.
    pub fn check_room(&self, new: usize) -> Result<()> {
        let held = self.partitions.read().len();
        let max = self.max_partitions();
        if held.saturating_add(new) > max {
            return Err(StorageError::PartitionLimit { new, held, max });
        }
        Ok(())
    }

    /// The signal raised after every append to any partition.
    pub fn appends(&self) -> &AppendSignal {
        &self.appends
    }

    /// Creates `<topic>-<partition>`; `InvalidPartitionName`, `PartitionExists`,
    /// or `PartitionGap` if a lower partition of the topic is missing (see
    /// [`super::topics`]).
    pub fn create_partition(&self, name: &str) -> Result<Arc<PartitionLog>> {
        validate_new_partition_name(name)?;
        if self.read_only {
            return Err(StorageError::ReadOnly);
        }
        let _admin = self.admin.lock();
        self.check_create(name)?;
        self.check_room(1)?;
        self.create_partition_locked(name)
    }

    /// Creates a partition whose name and place were checked; admin lock held.
    pub(super) fn create_partition_locked(&self, name: &str) -> Result<Arc<PartitionLog>> {
        let path = self.dir.join(name);
        if self.partitions.read().contains_key(name) || path.exists() {
            return Err(StorageError::PartitionExists(name.to_string()));
        }
        let log = PartitionLog::create(&path, &self.load_context(true))?;
        self.partitions
            .write()
            .insert(name.to_string(), log.clone());
        Ok(log)
    }

    /// What a partition is opened with after the data directory's open:
    /// `clean_shutdown` says whether the directory was closed cleanly.
    fn load_context(&self, clean_shutdown: bool) -> LoadContext<'_> {
        LoadContext {
            defaults: &self.defaults,
            appends: &self.appends,
            cleaner: self.cleaner_core.clone(),
            log: DirContext {
                checkpoints: &self.checkpoints,
                flusher: &self.flusher,
                deleter: &self.deleter,
                clean_shutdown,
                writable: !self.read_only,
                progress: Progress::default(),
            },
        }
    }

    /// Deletes a partition and all its files; `PartitionGap` if a higher
    /// partition of the topic exists (see [`super::topics`]).
    pub fn delete_partition(&self, name: &str) -> Result<()> {
        if self.read_only {
            return Err(StorageError::ReadOnly);
        }
        let _admin = self.admin.lock();
        self.check_delete(name)?;
        self.delete_partition_locked(name)
    }

    /// Deletes a partition whose place was checked; admin lock held.
    pub(super) fn delete_partition_locked(&self, name: &str) -> Result<()> {
        if !self.partitions.read().contains_key(name) {
            return Err(StorageError::NoSuchPartition(name.to_string()));
        }
        // Kafka's `abortAndPauseCleaning` before a log goes: no pass may
        // write into a directory being removed.
        self.cleaner_core.manager.abort_and_pause(name);
        let log = self.partitions.write().remove(name);
        let deleted = log.map_or(Ok(()), |l| l.delete());
        self.cleaner_core.manager.forget(name);
        deleted
    }

    /// The regular files of the data-directory root (Kafka's
    /// `meta.properties`, the checkpoints, ...), sorted by name.
    pub fn root_files(&self) -> Result<Vec<PartitionFile>> {
        let mut out = Vec::new();
        for e in fs::read_dir(&self.dir)
            .at(&self.dir)?
            .filter_map(|e| e.ok())
        {
            let Some(name) = e.file_name().to_str().map(str::to_string) else {
                continue;
            };
            let Ok(meta) = e.metadata() else { continue };
            if !meta.is_file() {
                continue;
            }
            out.push(PartitionFile {
                name,
                size: meta.len(),
                kind: FileKind::Other,
                mtime: meta.modified().unwrap_or(std::time::UNIX_EPOCH),
            });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Positioned read of a file from [`LogManager::root_files`].
    pub fn read_root_file(&self, name: &str, offset: u64, buf: &mut [u8]) -> Result<usize> {
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            return Err(StorageError::NoSuchFile(name.to_string()));
        }
        let path = self.dir.join(name);
        if !path.is_file() {
            return Err(StorageError::NoSuchFile(name.to_string()));
        }
        let f = File::open(&path).at(&path)?;
        read_full_at(&f, buf, offset).at(&path)
    }

    /// The scheduler of the directory's background jobs, for a duty of a
    /// program using it (an uploader, a sampler): one more job, stopped
    /// with the others at the close.
    pub fn scheduler(&self) -> &Scheduler {
        &self.scheduler
    }

    /// The names of the timed jobs running (`kafka-log-retention`, ...).
    pub fn jobs(&self) -> Vec<String> {
        self.scheduler.periodic_jobs()
    }

    /// Waits, `timeout` at most, until the background flushes that rolls
    /// scheduled so far have run. Returns whether they have.
    pub fn wait_for_flushes(&self, timeout: std::time::Duration) -> bool {
        self.flusher.wait_idle(timeout)
    }

    pub fn flush_all(&self) -> Result<()> {
        for p in self.partitions() {
            p.flush()?;
        }
        Ok(())
    }

    /// The log cleaner's settings.
    pub fn cleaner_config(&self) -> &CleanerConfig {
        &self.cleaner_core.config
    }

    /// What the log cleaner's threads have done so far.
    pub fn cleaner_counters(&self) -> CleanerCounters {
        self.cleaner_core.counters()
    }

    /// One retention pass over every partition (offline ones are skipped).
    /// With the log cleaner enabled, compacted partitions are left to it,
    /// as Kafka's `cleanupLogs` leaves them; without it they keep
    /// everything (Kafka's rule too).
    pub fn run_retention(&self, now_ms: i64) -> Result<()> {
        jobs::retention_pass(&self.partitions(), now_ms)
    }

    /// `flush.ms` flushes due by `now_ms` (offline partitions are skipped).
    pub fn run_scheduled_flushes(&self, now_ms: i64) -> Result<()> {
        jobs::flush_pass(&self.partitions(), now_ms)
    }

    /// Flushes and closes every partition, writes the checkpoints and the
    /// clean-shutdown marker. Idempotent. The marker is written only when
    /// everything before it succeeded, so a failed close counts as unclean.
    pub fn close(&self) -> Result<()> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        // Each partition flushes everything below; no background job may
        // run after the directory is let go.
        self.scheduler.stop();
        // Written once, after every partition closed.
        self.checkpoints.defer_writes();
        let closed = self.close_partitions();
        // Released whatever happened: nothing more is written through this
        // manager, and a failed close leaves no marker, so the next open recovers.
        self.lock.lock().take();
        closed
    }

    fn close_partitions(&self) -> Result<()> {
        let partitions = self.partitions();
        let mut first_error = None;
        for (p, result) in partitions.iter().zip(close_all(&partitions)) {
            match result {
                Ok(()) => {}
                // Its failure was logged when it went offline.
                Err(e @ StorageError::Offline { .. }) => {
                    info!(
                        "Leaving offline log {} to recovery at the next start",
                        p.name()
                    );
                    first_error.get_or_insert(e);
                }
                Err(e) => {
                    error!("Error closing log {}: {e}", p.name());
                    first_error.get_or_insert(e);
                }
            }
        }
        if let Some(e) = first_error {
            return Err(e);
        }
        if self.read_only {
            return Ok(());
        }
        self.checkpoints.rewrite_all()?;
        write_atomically(
            &self.dir.join(CLEAN_SHUTDOWN_FILE),
            br#"{"version":0,"brokerEpoch":0}"#,
        )?;
        info!(
            "Shutdown complete: wrote the clean shutdown file in {}",
            self.dir.display()
        );
        Ok(())
    }
}

/// Partitions closed at once at shutdown. A close is mostly waiting for the
/// disk (the syncs of its `.log`, indexes and side files), and concurrent
/// syncs share the filesystem's journal commits, so the partitions of a
/// directory close side by side (Kafka closes its logs on a pool too) and
/// the close takes about as long as the partitions with the most to flush,
/// not the sum over every partition.
const CLOSE_THREADS: usize = 16;

/// Closes each partition, [`CLOSE_THREADS`] at a time; the results are in
/// the order of `partitions`. The calling thread closes partitions too, so a
/// thread that cannot start only makes the close less parallel.
fn close_all(partitions: &[Arc<PartitionLog>]) -> Vec<Result<()>> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<Mutex<Option<Result<()>>>> =
        partitions.iter().map(|_| Mutex::new(None)).collect();
    let work = || {
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(p) = partitions.get(i) else { break };
            *results[i].lock() = Some(p.close());
        }
    };
    std::thread::scope(|s| {
        for _ in 1..CLOSE_THREADS.min(partitions.len()) {
            let started = std::thread::Builder::new()
                .name("log-close".into())
                .spawn_scoped(s, work);
            if let Err(e) = started {
                warn!("Closing the logs on fewer threads: {e}");
                break;
            }
        }
        work();
    });
    // The scope returns once every partition was taken and closed (a panic
    // in a close would have ended it with that panic).
    results
        .into_iter()
        .map(|r| r.into_inner().expect("every partition closed"))
        .collect()
}

/// Dropped without `close` (a crash, as tests make one): the background
/// flushes not yet run are lost, and none runs once the drop returns.
impl Drop for LogManager {
    fn drop(&mut self) {
        self.scheduler.stop();
    }
}

/// The partition directories of a data directory, sorted.
fn partition_dirs(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut names: Vec<PathBuf> = fs::read_dir(dir)
        .at(dir)?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| parse_partition_name(n).is_ok())
        })
        .map(|e| e.path())
        .collect();
    names.sort();
    Ok(names)
}

/// Loads each partition, reporting each one done with Kafka's line. One
/// that fails to load is offline; the others load.
fn load_partitions(
    names: &[PathBuf],
    ctx: &LoadContext,
    started: Instant,
) -> Result<BTreeMap<String, Arc<PartitionLog>>> {
    let mut partitions = BTreeMap::new();
    for (i, path) in names.iter().enumerate() {
        let log = PartitionLog::load(path, ctx)?;
        ctx.log.progress.report(&format!(
            "Completed load of log {} with {} segments, local-log-start-offset {} and log-end-offset {} ({}/{} completed in {} ms)",
            log.name(),
            log.segment_bases().len(),
            log.log_start_offset(),
            log.log_end_offset(),
            i + 1,
            names.len(),
            started.elapsed().as_millis()
        ));
        partitions.insert(log.name().to_string(), log);
    }
    Ok(partitions)
}

/// The data directory's `.lock`, held with `flock` (Kafka's `.lock`): one
/// writer of a directory at a time. Released when dropped.
pub struct DataDirLock {
    file: File,
}

impl DataDirLock {
    /// Takes the lock of `dir`, or `Locked` when another holder has it.
    pub fn acquire(dir: &Path) -> Result<DataDirLock> {
        let path = dir.join(LOCK_FILE);
        let f = disk::open_or_create("manager.lock.open", &path).at(&path)?;
        if let Err(err) = disk::flock(&f, libc::LOCK_EX | libc::LOCK_NB) {
            if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
                return Err(StorageError::Locked(dir.to_path_buf()));
            }
            return Err(StorageError::io(&path, err));
        }
        write_holder(&f, "").at(&path)?;
        Ok(DataDirLock { file: f })
    }
}

impl Drop for DataDirLock {
    /// Unlocks before the descriptor closes. A flock belongs to the open
    /// file, not to one descriptor: a child process forked by another
    /// thread holds a copy until it execs, and while it does, closing ours
    /// alone leaves the directory locked (a remount in that window found it
    /// `Locked`). Unlocking through any copy releases it for all.
    fn drop(&mut self) {
        let _ = disk::flock(&self.file, libc::LOCK_UN);
    }
}

/// Says who holds the lock, for whoever finds the directory in use (Kafka
/// never reads `.lock`'s content).
fn write_holder(f: &File, note: &str) -> std::io::Result<()> {
    let text = format!("pid {}\n{note}", std::process::id());
    disk::set_len("manager.lock.truncate", f, 0)?;
    disk::write_all_at("manager.lock.write", f, text.as_bytes(), 0)
}

/// Who holds `dir`'s lock, as the holder described itself (`pid N` and the
/// holder's note), or `None` if nobody holds it.
pub fn lock_holder(dir: &Path) -> Option<String> {
    if !is_locked(dir) {
        return None;
    }
    Some(fs::read_to_string(dir.join(LOCK_FILE)).unwrap_or_default())
}

/// Whether another process holds the data directory (a live mount).
pub fn is_locked(dir: &Path) -> bool {
    let Ok(f) = File::open(dir.join(LOCK_FILE)) else {
        return false;
    };
    if disk::flock(&f, libc::LOCK_SH | libc::LOCK_NB).is_ok() {
        let _ = disk::flock(&f, libc::LOCK_UN);
        false
    } else {
        true
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsRawFd;

    use super::*;

    /// A copy of the lock's descriptor (what a child forked by another
    /// thread holds until it execs) does not keep the directory locked once
    /// the holder lets go.
    #[test]
    fn a_copied_descriptor_does_not_keep_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        let lock = DataDirLock::acquire(dir.path()).unwrap();
        assert!(matches!(
            DataDirLock::acquire(dir.path()),
            Err(StorageError::Locked(_))
        ));
        // SAFETY: dup of a descriptor this test owns; closed below.
        let copy = unsafe { libc::dup(lock.file.as_raw_fd()) };
        assert!(copy >= 0);
        drop(lock);
        let again = DataDirLock::acquire(dir.path());
        // SAFETY: the copy made above, closed once.
        unsafe { libc::close(copy) };
        again.unwrap();
    }
}
