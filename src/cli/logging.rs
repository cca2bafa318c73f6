//! The daemon's log: `env_logger`'s filter (`RUST_LOG`, `info` by default)
//! and format, with two bounds a client cannot get around.
//!
//! - **Repeats are rate-limited.** Each call site (file and line) of an
//!   info, warning or error line writes at most [`BURST`] lines per
//!   [`WINDOW`]; the rest are counted, and one line then says so:
//!   `<the last one> (and 99999 more like it in the last 10 s)`. A request
//!   naming 100,000 missing partitions writes a dozen lines, not 100,000.
//!   Debug and trace lines, off by default, are not limited, nor are the
//!   tree's (`commitfs::fs`: each of its refusals answers a local user's
//!   own system call, with one line saying why).
//! - **The log file is rotated by size.** Past `daemon.log.max.bytes` the
//!   file becomes `commitfs.log.1` (the older ones shift up to
//!   `commitfs.log.<daemon.log.backup.count>`, the oldest is deleted), so
//!   the log never takes more than `max.bytes × (backup.count + 1)`; and
//!   nothing is written while the file system holding it has less than
//!   [`low_space`] free, so the log never takes the last blocks a
//!   partition needs (the lines dropped meanwhile are counted, and said
//!   once there is room again).

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use log::{Level, Log, Metadata, Record};

/// The tree's lines are not limited: each refusal there answers a local
/// user's own system call with an errno, and its one line says why.
const TREE: &str = "commitfs_fs";

/// Lines one call site may write per [`WINDOW`].
pub const BURST: u32 = 10;
/// The rate limit's window.
pub const WINDOW: Duration = Duration::from_secs(10);

/// `daemon.log.max.bytes`'s default: 10 MiB.
pub const DEFAULT_MAX_BYTES: u64 = 10 << 20;
/// `daemon.log.backup.count`'s default.
pub const DEFAULT_BACKUPS: u32 = 5;

/// The daemon log file's rotation settings (`-o daemon.log.max.bytes=N`,
/// `-o daemon.log.backup.count=N` on `commitfs mount`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogSettings {
    pub max_bytes: u64,
    pub backups: u32,
}

impl Default for LogSettings {
    fn default() -> Self {
        LogSettings {
            max_bytes: DEFAULT_MAX_BYTES,
            backups: DEFAULT_BACKUPS,
        }
    }
}

impl LogSettings {
    /// Applies one `name=value`; `Ok(false)` if the name is not one of these.
    pub fn set(&mut self, name: &str, value: &str) -> Result<bool, String> {
        let at_least = |min: u64, max: u64| -> Result<u64, String> {
            let n: i64 = value.parse().map_err(|_| {
                format!("Invalid value {value} for configuration {name}: Not a number of type LONG")
            })?;
            if n < min as i64 || n as u64 > max {
                return Err(format!(
                    "Invalid value {value} for configuration {name}: Value must be at least {min}{}",
                    if max < u64::MAX {
                        format!(" and at most {max}")
                    } else {
                        String::new()
                    }
                ));
            }
            Ok(n as u64)
        };
        match name {
            "daemon.log.max.bytes" => self.max_bytes = at_least(4096, u64::MAX)?,
            "daemon.log.backup.count" => self.backups = at_least(0, 100)? as u32,
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// Installs the daemon's logger: rate-limited, to stderr, or to `file`
/// (rotated) when the daemon was started in the background.
pub fn init(file: Option<(PathBuf, LogSettings)>) {
    let mut builder =
        env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"));
    if let Some((path, settings)) = file {
        match Rotating::open(path.clone(), settings) {
            Ok(r) => {
                builder.target(env_logger::Target::Pipe(Box::new(r)));
            }
            Err(e) => eprintln!("commitfs: cannot open {}: {e}", path.display()),
        }
    }
    let inner = builder.build();
    let max = inner.filter();
    let limited = Arc::new(Limited {
        inner,
        sites: Mutex::new(HashMap::new()),
    });
    if log::set_boxed_logger(Box::new(LimitedRef(limited.clone()))).is_ok() {
        log::set_max_level(max);
        // Counts of lines held back are said once their window is over,
        // even if the call site never logs again.
        let _ = std::thread::Builder::new()
            .name("log-flush".into())
            .spawn(move || {
                // Started before a daemon blocks the signals that end it:
                // without blocking them here too, this thread would take a
                // SIGTERM, or the daemon's own SIGUSR1, that arrived while
                // the waiting thread was busy, and die of it mid-shutdown.
                let _ = super::signals::Signals::block();
                loop {
                    std::thread::sleep(Duration::from_secs(1));
                    limited.flush_expired(Instant::now());
                }
            });
    }
}

/// Where a call site's window stands.
struct Site {
    start: Instant,
    written: u32,
    held: u64,
    level: Level,
    target: String,
    last: String,
}

struct Limited {
    inner: env_logger::Logger,
    sites: Mutex<HashMap<(String, u32), Site>>,
}

struct LimitedRef(Arc<Limited>);

/// One line saying how many lines of a call site were held back.
struct Summary {
    level: Level,
    target: String,
    text: String,
}

impl Limited {
    /// Whether `record` is written; held-back counts of a window just over
    /// come back to be said first.
    fn admit(&self, record: &Record, now: Instant) -> (bool, Option<Summary>) {
        let key = (
            record.file().unwrap_or(record.target()).to_string(),
            record.line().unwrap_or(0),
        );
        let mut sites = self.sites.lock().unwrap_or_else(|e| e.into_inner());
        let site = sites.entry(key).or_insert_with(|| Site {
            start: now,
            written: 0,
            held: 0,
            level: record.level(),
            target: record.target().to_string(),
            last: String::new(),
        });
        let mut summary = None;
        if now.duration_since(site.start) >= WINDOW {
            summary = take_summary(site, now);
            site.start = now;
            site.written = 0;
        }
        if site.written < BURST {
            site.written += 1;
            return (true, summary);
        }
        site.held += 1;
        site.last = record.args().to_string();
        (false, summary)
    }

    fn flush_expired(&self, now: Instant) {
        let summaries: Vec<Summary> = {
            let mut sites = self.sites.lock().unwrap_or_else(|e| e.into_inner());
            sites
                .values_mut()
                .filter(|s| now.duration_since(s.start) >= WINDOW)
                .filter_map(|s| {
                    let summary = take_summary(s, now);
                    s.start = now;
                    s.written = 0;
                    summary
                })
                .collect()
        };
        for s in summaries {
            self.say(&s);
        }
    }

    fn say(&self, s: &Summary) {
        self.inner.log(
            &Record::builder()
                .level(s.level)
                .target(&s.target)
                .args(format_args!("{}", s.text))
                .build(),
        );
    }
}

fn take_summary(site: &mut Site, now: Instant) -> Option<Summary> {
    if site.held == 0 {
        return None;
    }
    let secs = now.duration_since(site.start).as_secs().max(1);
    let text = format!(
        "{} (and {} more like it in the last {secs} s)",
        site.last, site.held
    );
    site.held = 0;
    site.last.clear();
    Some(Summary {
        level: site.level,
        target: site.target.clone(),
        text,
    })
}

impl Log for LimitedRef {
    fn enabled(&self, metadata: &Metadata) -> bool {
        self.0.inner.enabled(metadata)
    }

    fn log(&self, record: &Record) {
        if !self.0.inner.matches(record) {
            return;
        }
        if record.level() > Level::Info || record.target().starts_with(TREE) {
            self.0.inner.log(record);
            return;
        }
        let (write, summary) = self.0.admit(record, Instant::now());
        if let Some(s) = summary {
            self.0.say(&s);
        }
        if write {
            self.0.inner.log(record);
        }
    }

    fn flush(&self) {
        self.0.inner.flush();
    }
}

/// How much free space the log leaves alone on the file system `stat`
/// describes: 1% of it, and at least 4 MiB.
pub fn low_space(total_bytes: u64) -> u64 {
    (total_bytes / 100).max(4 << 20)
}

/// Free and total bytes of the file system holding `path`.
fn space(path: &Path) -> Option<(u64, u64)> {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: statvfs fills a local struct from a valid C string.
    unsafe {
        let mut s: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(c.as_ptr(), &mut s) != 0 {
            return None;
        }
        let unit = s.f_frsize as u64;
        Some((s.f_bavail as u64 * unit, s.f_blocks as u64 * unit))
    }
}

/// How often the free space is looked at while writing.
const SPACE_CHECK_BYTES: u64 = 64 << 10;
const SPACE_CHECK_EVERY: Duration = Duration::from_secs(5);

/// The log file, rotated by size, and paused while its disk is nearly full.
struct Rotating {
    path: PathBuf,
    settings: LogSettings,
    file: File,
    size: u64,
    /// Written since the free space was last looked at, and when that was.
    since_check: u64,
    checked: Instant,
    /// Lines not written for want of space.
    dropped: u64,
}

impl Rotating {
    fn open(path: PathBuf, settings: LogSettings) -> std::io::Result<Rotating> {
        let file = OpenOptions::new().create(true).append(true).open(&path)?;
        let size = file.metadata()?.len();
        let mut r = Rotating {
            path,
            settings,
            file,
            size,
            // The first line looks at the free space.
            since_check: SPACE_CHECK_BYTES,
            checked: Instant::now(),
            dropped: 0,
        };
        // The file the daemon was started with may be over the size already.
        if r.size >= r.settings.max_bytes {
            r.rotate()?;
        }
        Ok(r)
    }

    fn backup(&self, n: u32) -> PathBuf {
        let mut p = self.path.clone().into_os_string();
        p.push(format!(".{n}"));
        PathBuf::from(p)
    }

    fn rotate(&mut self) -> std::io::Result<()> {
        if self.settings.backups == 0 {
            self.file.set_len(0)?;
            self.size = 0;
            return Ok(());
        }
        let _ = std::fs::remove_file(self.backup(self.settings.backups));
        for n in (1..self.settings.backups).rev() {
            let _ = std::fs::rename(self.backup(n), self.backup(n + 1));
        }
        std::fs::rename(&self.path, self.backup(1))?;
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        // Whatever else writes to stderr (a panic message) follows the file.
        // SAFETY: dup2 of a descriptor we own onto stderr.
        unsafe { libc::dup2(file.as_raw_fd(), 2) };
        self.file = file;
        self.size = 0;
        Ok(())
    }

    /// Whether the file system has room for the log; looked at every
    /// [`SPACE_CHECK_BYTES`] written, and every few seconds while paused.
    fn room(&mut self) -> bool {
        let due = self.since_check >= SPACE_CHECK_BYTES
            || (self.dropped > 0 && self.checked.elapsed() >= SPACE_CHECK_EVERY);
        if !due {
            return self.dropped == 0;
        }
        self.since_check = 0;
        self.checked = Instant::now();
        let dir = self.path.parent().unwrap_or(Path::new("/"));
        match space(dir) {
            Some((free, total)) => free >= low_space(total),
            None => true,
        }
    }
}

impl Write for Rotating {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if !self.room() {
            self.dropped += 1;
            return Ok(buf.len());
        }
        if self.dropped > 0 {
            let note = format!(
                "[commitfs] {} log lines were dropped while the file system had less than 1% \
                 free\n",
                self.dropped
            );
            self.dropped = 0;
            let _ = self.file.write_all(note.as_bytes());
            self.size += note.len() as u64;
        }
        if self.size > 0 && self.size + buf.len() as u64 > self.settings.max_bytes {
            // A failed rotation keeps writing to the old file: the size check
            // comes back at the next line.
            let _ = self.rotate();
        }
        self.file.write_all(buf)?;
        self.size += buf.len() as u64;
        self.since_check += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limited() -> Limited {
        Limited {
            inner: env_logger::Builder::new().build(),
            sites: Mutex::new(HashMap::new()),
        }
    }

    fn record(line: u32) -> Record<'static> {
        Record::builder()
            .level(Level::Warn)
            .target("t")
            .file(Some("f.rs"))
            .line(Some(line))
            .args(format_args!("no such partition"))
            .build()
    }

    #[test]
    fn a_call_site_writes_a_burst_per_window_then_a_count() {
        let l = limited();
        let t0 = Instant::now();
        let admitted = (0..100_000).filter(|_| l.admit(&record(1), t0).0).count();
        assert_eq!(admitted, BURST as usize);
        // Another call site has its own budget.
        assert!(l.admit(&record(2), t0).0);
        // The window over: the count comes with the next line.
        let (write, summary) = l.admit(&record(1), t0 + WINDOW);
        assert!(write);
        let s = summary.expect("a count of the lines held back");
        assert_eq!(
            s.text,
            format!(
                "no such partition (and {} more like it in the last 10 s)",
                100_000 - BURST
            )
        );
        // Nothing held back: no count.
        assert!(l.admit(&record(1), t0 + WINDOW * 2).1.is_none());
    }

    #[test]
    fn rotation_keeps_the_log_within_its_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("commitfs.log");
        let settings = LogSettings {
            max_bytes: 4096,
            backups: 3,
        };
        let mut r = Rotating::open(path.clone(), settings).unwrap();
        let line = [b'x'; 100];
        for _ in 0..1000 {
            r.write_all(&line).unwrap();
        }
        let mut total = 0;
        for e in std::fs::read_dir(dir.path()).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().into_string().unwrap();
            assert!(
                [
                    "commitfs.log",
                    "commitfs.log.1",
                    "commitfs.log.2",
                    "commitfs.log.3"
                ]
                .contains(&name.as_str()),
                "{name}"
            );
            let len = e.metadata().unwrap().len();
            assert!(len <= 4096, "{name}: {len}");
            total += len;
        }
        assert!(total <= 4 * 4096);
        let mut s = LogSettings::default();
        assert!(s.set("daemon.log.max.bytes", "100").is_err());
        assert!(s.set("daemon.log.backup.count", "-1").is_err());
        assert!(s.set("daemon.log.backup.count", "0").unwrap());
        assert!(!s.set("max.message.bytes", "1").unwrap());
    }
}
