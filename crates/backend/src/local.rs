//! The tree over a local data directory: the storage library's partitions.
//!
//! What the tree shows of the directory is decided here, not in storage:
//! commitfs's own bookkeeping files, the daemon's log and transient files
//! are not part of it.

use std::fs::File;
use std::sync::Arc;
use std::time::SystemTime;

use super::groups::Groups;
use super::{
    AppendError, Appended, Backend, BackendError, BackendResult, CommittedStream, Compaction,
    ErrorKind, FileInfo, LineFormat, LogControl, Offsets, Partition, RawFiles, RecordEntry,
    RootFiles, StatFs, Status,
};
use commitfs_record::NewRecord;
use commitfs_storage::names::parse_segment_file_name;
use commitfs_storage::producer_ids::PRODUCER_IDS_FILE;
use commitfs_storage::{ACLS_FILE, SCRAM_CREDENTIALS_FILE};
use commitfs_storage::{
    COMMITTED_LENGTHS_FILE, CONFIG_NAMES, LogManager, PROPERTIES_FILE, PartitionFile, PartitionLog,
    STREAM_LENGTHS_FILE, StorageError, segment_file_name,
};

/// The daemon's log, in the root of a read-write mount's data directory.
pub const DAEMON_LOG_FILE: &str = "commitfs.log";

/// Dot files (`.lock`, `.kafka_cleanshutdown`) and files on their way in or
/// out are never shown: `*.tmp` being replaced, and Kafka's `.deleted`
/// (retention), `.cleaned` and `.swap` (the log cleaner), which are not part
/// of its log: a segment renamed `.deleted` is gone.
fn transient_or_dot(name: &str) -> bool {
    name.starts_with('.')
        || [".tmp", ".deleted", ".cleaned", ".swap"]
            .iter()
            .any(|suffix| name.ends_with(suffix))
}

/// What `status` shows of the log cleaner for a compacted partition: the
/// checkpoint of its first dirty offset, its dirty ratio, and the last pass
/// (when it ended, its dirty section, what it read and wrote).
fn cleaner_fields(c: &commitfs_storage::CleanerStatus) -> Vec<(&'static str, String)> {
    let mut out = vec![
        (
            "cleaner_checkpoint",
            c.checkpoint.map_or("none".to_string(), |o| o.to_string()),
        ),
        ("dirty_ratio", format!("{:.3}", c.dirty_ratio)),
    ];
    if let Some(p) = &c.last_pass {
        out.push(("last_clean_ms", p.ended_ms.to_string()));
        out.push((
            "last_clean",
            format!(
                "[{}, {}) {} -> {} messages, {} -> {} bytes in {:.3} s",
                p.first_dirty_offset,
                p.end_offset,
                p.messages_read,
                p.messages_written,
                p.bytes_read,
                p.bytes_written,
                p.elapsed_secs
            ),
        ));
    }
    if c.uncleanable {
        out.push(("uncleanable", "true".to_string()));
    }
    out
}

/// A partition directory's files, but commitfs's own bookkeeping.
fn shown_in_partition(name: &str) -> bool {
    !(transient_or_dot(name)
        || name == PROPERTIES_FILE
        || name == STREAM_LENGTHS_FILE
        || name == COMMITTED_LENGTHS_FILE)
}

/// The data directory's own files (Kafka's), but the daemon's log, the
/// listener's producer id block, its users' SCRAM credentials (salted
/// hashes, but a copy is still something to guess passwords against) and
/// its ACLs (changed only through CreateAcls and DeleteAcls).
fn shown_in_root(name: &str) -> bool {
    !(transient_or_dot(name)
        || name == DAEMON_LOG_FILE
        || name == PRODUCER_IDS_FILE
        || name == SCRAM_CREDENTIALS_FILE
        || name == ACLS_FILE)
}

fn not_shown(name: &str) -> BackendError {
    StorageError::NoSuchFile(name.to_string()).into()
}

pub struct LocalBackend {
    manager: Arc<LogManager>,
    /// The line format of a partition that has none of its own (`-o`).
    line_format: LineFormat,
    /// The group coordinator over this directory's `__consumer_offsets`.
    groups: Option<Arc<dyn Groups>>,
}

impl LocalBackend {
    pub fn new(manager: Arc<LogManager>) -> Self {
        LocalBackend {
            manager,
            line_format: LineFormat::default(),
            groups: None,
        }
    }

    /// Shows `groups` in `groups/`: the daemon's coordinator.
    pub fn with_groups(mut self, groups: Arc<dyn Groups>) -> Self {
        self.groups = Some(groups);
        self
    }

    /// The line format partitions have unless they set their own.
    pub fn with_line_format(mut self, format: LineFormat) -> Self {
        self.line_format = format;
        self
    }

    pub fn manager(&self) -> &Arc<LogManager> {
        &self.manager
    }
}

impl Backend for LocalBackend {
    fn read_only(&self) -> bool {
        self.manager.read_only()
    }

    fn partition_names(&self) -> BackendResult<Vec<String>> {
        Ok(self
            .manager
            .partitions()
            .iter()
            .map(|p| p.name().to_string())
            .collect())
    }

    fn partition(&self, name: &str) -> BackendResult<Arc<dyn Partition>> {
        match self.manager.partition(name) {
            Some(log) => Ok(Arc::new(LocalPartition {
                log,
                line_format: self.line_format.clone(),
            })),
            None => Err(StorageError::NoSuchPartition(name.to_string()).into()),
        }
    }

    fn create_partition(&self, name: &str) -> BackendResult<()> {
        self.manager.create_partition(name)?;
        Ok(())
    }

    fn delete_partition(&self, name: &str) -> BackendResult<()> {
        Ok(self.manager.delete_partition(name)?)
    }

    fn config_names(&self) -> &'static [&'static str] {
        CONFIG_NAMES
    }

    /// A read-only mount shows the data directory's own files (a broker's
    /// checkpoints); a read-write one is the daemon's own business.
    fn groups(&self) -> Option<&dyn Groups> {
        self.groups.as_deref()
    }

    fn root_files(&self) -> Option<&dyn RootFiles> {
        self.manager.read_only().then_some(self as &dyn RootFiles)
    }

    fn statfs(&self) -> BackendResult<StatFs> {
        let dir = self.manager.dir();
        let path = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
            .map_err(|_| BackendError::new(ErrorKind::Io, "data dir path holds NUL"))?;
        // SAFETY: statvfs writes into the zeroed struct it is given.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        loop {
            if unsafe { libc::statvfs(path.as_ptr(), &mut st) } == 0 {
                break;
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(StorageError::io(dir, e).into());
            }
        }
        Ok(StatFs {
            blocks: st.f_blocks,
            bfree: st.f_bfree,
            bavail: st.f_bavail,
            files: st.f_files,
            ffree: st.f_ffree,
            bsize: st.f_bsize as u32,
            frsize: st.f_frsize as u32,
        })
    }
}

impl RootFiles for LocalBackend {
    fn list(&self) -> BackendResult<Vec<FileInfo>> {
        Ok(self
            .manager
            .root_files()?
            .into_iter()
            .filter(|f| shown_in_root(&f.name))
            .map(|f| file_info(f, false))
            .collect())
    }

    fn read(&self, name: &str, pos: u64, buf: &mut [u8]) -> BackendResult<usize> {
        if !shown_in_root(name) {
            return Err(not_shown(name));
        }
        Ok(self.manager.read_root_file(name, pos, buf)?)
    }
}

/// A partition of the data directory, as the tree sees it.
pub struct LocalPartition {
    log: Arc<PartitionLog>,
    /// The mount's default line format, for a partition without its own.
    line_format: LineFormat,
}

impl Partition for LocalPartition {
    fn name(&self) -> &str {
        self.log.name()
    }

    fn offsets(&self) -> BackendResult<Offsets> {
        self.log.check_online()?;
        Ok(Offsets {
            log_start: self.log.log_start_offset(),
            log_end: self.log.log_end_offset(),
        })
    }

    /// All or nothing: nothing of a failed append is in the log.
    fn append(&self, records: &[NewRecord]) -> Result<Appended, AppendError> {
        let info = self.log.append(records).map_err(BackendError::from)?;
        Ok(Appended {
            first_offset: info.first_offset,
            last_offset: info.last_offset,
            batches: Some(info.batches),
        })
    }

    fn record_offsets(&self, from: i64, max: usize) -> BackendResult<Vec<i64>> {
        Ok(self.log.record_offsets(from, max)?)
    }

    fn record(&self, offset: i64) -> BackendResult<RecordEntry> {
        let e = self.log.read_entry(offset)?;
        let transaction = match e.transactional {
            true => Some(self.log.transaction_of(offset, e.producer_id)?.name()),
            false => None,
        };
        Ok(RecordEntry {
            record: e.record,
            batch_base_offset: Some(e.batch_base_offset),
            position: Some(e.position),
            timestamp_type: e.timestamp_type,
            transaction,
        })
    }

    fn stream_len(&self) -> BackendResult<u64> {
        Ok(self.log.stream_len()?)
    }

    fn read_stream(&self, pos: u64, buf: &mut [u8]) -> BackendResult<usize> {
        Ok(self.log.read_stream(pos, buf)?)
    }

    /// The active segment's mtime: it moves with every append.
    fn log_mtime(&self) -> Option<SystemTime> {
        self.log.check_online().ok()?;
        let base = self.log.local().active_segment_base()?;
        self.log
            .local()
            .file(&segment_file_name(base, "log"))
            .ok()
            .map(|f| f.mtime)
    }

    fn offset_for_timestamp(&self, ms: i64) -> BackendResult<Option<i64>> {
        Ok(self.log.offset_for_timestamp(ms)?)
    }

    fn status(&self) -> BackendResult<Status> {
        let s = self.log.status()?;
        if let Some(cause) = s.offline {
            return Ok(Status::Offline { cause });
        }
        let mut detail = vec![
            ("recovery_point", s.recovery_point.to_string()),
            ("segments", s.segments.to_string()),
            ("size_bytes", s.size_bytes.to_string()),
            ("active_segment", s.active_segment.to_string()),
            ("lookup_bytes_read", s.lookup_bytes_read.to_string()),
            ("fsyncs", s.fsyncs.to_string()),
            // What a read_committed reader may read up to, and what holds it
            // back: each open transaction as producer@first offset.
            (
                "last_stable_offset",
                self.log.last_stable_offset().to_string(),
            ),
            (
                "open_transactions",
                (self.log.open_transactions().iter())
                    .map(|(first, pid)| format!("{pid}@{first}"))
                    .collect::<Vec<_>>()
                    .join(" "),
            ),
        ];
        if self.log.config().cleanup_policy.compact() {
            detail.extend(cleaner_fields(&self.log.cleaner_status()?));
        }
        Ok(Status::Serving {
            log_start_offset: s.log_start_offset,
            log_end_offset: s.log_end_offset,
            // A single replica's high watermark is its log end offset.
            high_watermark: s.log_end_offset,
            detail,
        })
    }

    fn config(&self, name: &str) -> BackendResult<Option<String>> {
        self.log.check_online()?;
        Ok(self.log.config().get(name))
    }

    fn set_config(&self, name: &str, value: &str) -> BackendResult<()> {
        Ok(self.log.set_config(name, value)?)
    }

    /// The mount's default, with the partition's own settings applied.
    fn line_format(&self) -> LineFormat {
        let own = self.log.overrides();
        let settings = own
            .iter()
            .filter(|(k, _)| LineFormat::is_setting(k))
            .map(|(k, v)| (k.as_str(), v.as_str()));
        self.line_format.with(settings, self.log.name())
    }

    /// Validated here, kept by storage as a property of the partition (in
    /// its properties file, beside the topic config overrides).
    fn set_line_format(&self, name: &str, value: &str) -> BackendResult<()> {
        // A deleted partition refuses first, whatever the value.
        self.log.check_live()?;
        let mut format = self.line_format();
        format.set_or_refuse(name, value)?;
        let text = format.get(name).unwrap_or_default();
        Ok(self.log.set_property(name, &text)?)
    }

    fn check_record_size(&self, record: &NewRecord) -> BackendResult<()> {
        // A held line without a key stays keyless only without `parse.key`
        // (with it, its separator may still come): then a compacted
        // partition would refuse it at its newline, so it is refused now.
        if record.key.is_none() && !self.line_format().parse_key {
            self.log.check_keys(std::slice::from_ref(record))?;
        }
        Ok(self.log.check_record_size(record)?)
    }

    fn delete_records(&self, offset: i64) -> BackendResult<i64> {
        Ok(self.log.delete_records_before(offset)?)
    }

    fn raw_files(&self) -> Option<&dyn RawFiles> {
        Some(self)
    }

    fn committed(&self) -> Option<&dyn CommittedStream> {
        Some(self)
    }

    fn log_control(&self) -> Option<&dyn LogControl> {
        Some(self)
    }

    fn compaction(&self) -> Option<&dyn Compaction> {
        Some(self)
    }
}

impl CommittedStream for LocalPartition {
    fn committed_len(&self) -> BackendResult<u64> {
        Ok(self.log.committed_len()?)
    }

    fn read_committed(&self, pos: u64, buf: &mut [u8]) -> BackendResult<usize> {
        Ok(self.log.read_committed(pos, buf)?)
    }
}

impl Compaction for LocalPartition {
    fn compact(&self) -> BackendResult<()> {
        self.log.clean_now()?;
        Ok(())
    }
}

impl LogControl for LocalPartition {
    fn roll(&self) -> BackendResult<()> {
        Ok(self.log.roll()?)
    }

    fn flush(&self) -> BackendResult<()> {
        Ok(self.log.flush()?)
    }
}

impl RawFiles for LocalPartition {
    fn files(&self) -> BackendResult<Vec<FileInfo>> {
        // Read before the sizes: a segment sealed meanwhile has its final size.
        let active = self.log.local().active_segment_base();
        Ok(self
            .log
            .local()
            .files()?
            .into_iter()
            .filter(|f| shown_in_partition(&f.name))
            .map(|f| {
                let sealed = is_sealed(&f.name, active);
                file_info(f, sealed)
            })
            .collect())
    }

    fn file(&self, name: &str) -> BackendResult<FileInfo> {
        if !shown_in_partition(name) {
            return Err(not_shown(name));
        }
        let active = self.log.local().active_segment_base();
        let f = self.log.local().file(name)?;
        Ok(file_info(f, is_sealed(name, active)))
    }

    fn read_file(&self, name: &str, pos: u64, buf: &mut [u8]) -> BackendResult<usize> {
        if !shown_in_partition(name) {
            return Err(not_shown(name));
        }
        Ok(self.log.local().read_file(name, pos, buf)?)
    }

    fn open_file(&self, name: &str) -> BackendResult<File> {
        if !shown_in_partition(name) {
            return Err(not_shown(name));
        }
        Ok(self.log.local().open_file(name)?)
    }
}

/// A file of a segment below the active one: its bytes never change again
/// (the active base only grows, so a stale `active` errs towards "not sealed").
fn is_sealed(name: &str, active: Option<i64>) -> bool {
    match (parse_segment_file_name(name), active) {
        (Some((base, "log" | "index" | "timeindex")), Some(active)) => base < active,
        _ => false,
    }
}

fn file_info(f: PartitionFile, sealed: bool) -> FileInfo {
    FileInfo {
        kind: f.kind,
        name: f.name,
        size: f.size,
        mtime: f.mtime,
        sealed,
    }
}
