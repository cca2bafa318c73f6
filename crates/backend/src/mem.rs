//! Partitions in memory, with faults a test can inject: the tree's rules
//! driven over a backend whose every answer a test chooses (as
//! mountpoint-s3's mock client sits beside its client trait).
//!
//! A partition is a vector of records from offset 0 on, with a log start
//! offset; records below it are gone. Names, topic configs and their
//! validators are the local backend's (`commitfs_record::names`, `LogConfig`), so
//! `mkdir`, `rmdir` and `config/` behave as on a local mount; the line
//! format is kept per partition, in memory. Appends are all or nothing,
//! unless a fault says otherwise.
//!
//! **Faults.** [`Faults`] arms one-shot failures: the next call of any
//! method, or of one [`Call`], fails with a chosen [`ErrorKind`]; or the
//! next append lands its first K records and then fails, saying so in
//! [`AppendError::landed`]. Each armed fault is met once, in the order armed.
//!
//! **Capabilities.** No raw files and no root files (nothing is a file).
//! `roll` and `flush` are offered or not ([`MemBackend::without_log_control`]),
//! so the tree's paths for both can be driven: there is nothing to roll or
//! make durable, so both only answer (or fail as injected).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::{Mutex, RwLock};

use super::groups::Groups;
use super::line_format::LineFormat;
use super::mem_groups::MemGroups;
use super::{
    AppendError, Appended, Backend, BackendError, BackendResult, CommittedStream, ErrorKind,
    IO_SIZE, Landed, LogControl, Offsets, Partition, RecordEntry, StatFs, Status,
};
use commitfs_record::names::{parse_partition_name, validate_new_partition_name};
use commitfs_record::{Header, NewRecord, Record, TimestampType, batch_size};
use commitfs_storage::{CONFIG_NAMES, LogConfig, StorageError};

/// The fallible calls of the seam, by which a fault is armed for one of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Call {
    PartitionNames,
    Partition,
    CreatePartition,
    DeletePartition,
    Statfs,
    Offsets,
    Append,
    Contains,
    Record,
    StreamLen,
    ReadStream,
    CommittedLen,
    ReadCommitted,
    OffsetForTimestamp,
    Status,
    Config,
    SetConfig,
    SetLineFormat,
    CheckRecordSize,
    DeleteRecords,
    Roll,
    Flush,
}

/// One armed fault.
#[derive(Clone, Copy, Debug)]
struct Fault {
    /// The call it waits for; `None`: whichever comes first.
    call: Option<Call>,
    kind: ErrorKind,
    /// For an append: how many of its records land before it fails.
    lands: usize,
}

/// The faults armed on a backend, shared by its partitions.
#[derive(Debug, Default)]
pub struct Faults {
    armed: Mutex<VecDeque<Fault>>,
    met: AtomicU64,
}

impl Faults {
    /// The next call of any fallible method fails with `kind`.
    pub fn fail_next(&self, kind: ErrorKind) {
        self.arm(None, kind, 0);
    }

    /// The next call of `call` fails with `kind`.
    pub fn fail_next_call(&self, call: Call, kind: ErrorKind) {
        self.arm(Some(call), kind, 0);
    }

    /// The next append lands its first `lands` records (fewer if it has
    /// fewer), then fails with `kind`, saying which landed.
    pub fn fail_append_partway(&self, lands: usize, kind: ErrorKind) {
        self.arm(Some(Call::Append), kind, lands);
    }

    /// Faults armed and not met yet.
    pub fn armed(&self) -> usize {
        self.armed.lock().len()
    }

    /// Faults met so far.
    pub fn met(&self) -> u64 {
        self.met.load(Ordering::Relaxed)
    }

    fn arm(&self, call: Option<Call>, kind: ErrorKind, lands: usize) {
        self.armed.lock().push_back(Fault { call, kind, lands });
    }

    /// The first armed fault that waits for `call`, taken.
    fn take(&self, call: Call) -> Option<Fault> {
        let mut armed = self.armed.lock();
        let at = armed
            .iter()
            .position(|f| f.call.is_none_or(|c| c == call))?;
        self.met.fetch_add(1, Ordering::Relaxed);
        armed.remove(at)
    }

    /// Fails `call` if a fault waits for it.
    fn check(&self, call: Call) -> BackendResult<()> {
        match self.take(call) {
            Some(f) => Err(injected(call, f.kind)),
            None => Ok(()),
        }
    }
}

fn injected(call: Call, kind: ErrorKind) -> BackendError {
    BackendError::new(kind, format!("injected fault: {kind:?} in {call:?}"))
}

/// What the backend and its partitions share.
#[derive(Debug)]
struct Shared {
    faults: Arc<Faults>,
    read_only: AtomicBool,
    log_control: bool,
    defaults: LogConfig,
}

impl Shared {
    fn writable(&self) -> BackendResult<()> {
        match self.read_only.load(Ordering::Relaxed) {
            true => Err(BackendError::new(
                ErrorKind::ReadOnly,
                "the memory backend is read-only",
            )),
            false => Ok(()),
        }
    }
}

/// Partitions in memory; see the module documentation.
pub struct MemBackend {
    shared: Arc<Shared>,
    partitions: RwLock<BTreeMap<String, Arc<MemPartition>>>,
    groups: MemGroups,
}

impl Default for MemBackend {
    fn default() -> Self {
        MemBackend::new()
    }
}

impl MemBackend {
    /// Empty, writable, with `roll` and `flush`, Kafka's default configs.
    pub fn new() -> MemBackend {
        MemBackend::with(LogConfig::default(), true)
    }

    /// Without `roll` and `flush`: the tree then has no such nodes.
    pub fn without_log_control() -> MemBackend {
        MemBackend::with(LogConfig::default(), false)
    }

    /// With `defaults` as every new partition's configs.
    pub fn with(defaults: LogConfig, log_control: bool) -> MemBackend {
        let shared = Arc::new(Shared {
            faults: Arc::default(),
            read_only: AtomicBool::new(false),
            log_control,
            defaults,
        });
        let s = shared.clone();
        MemBackend {
            groups: MemGroups::new(Arc::new(move || s.read_only.load(Ordering::Relaxed))),
            shared,
            partitions: RwLock::default(),
        }
    }

    /// The consumer groups, for a test to join, leave and commit.
    pub fn group_model(&self) -> &MemGroups {
        &self.groups
    }

    /// The faults armed on this backend.
    pub fn faults(&self) -> &Faults {
        &self.shared.faults
    }

    /// Refuses every change from now on (a tree made after this shows a
    /// read-only mount), or accepts them again.
    pub fn set_read_only(&self, read_only: bool) {
        self.shared.read_only.store(read_only, Ordering::Relaxed);
    }

    /// Appends a transaction marker to `name`: an offset that holds no
    /// user record (`NoRecord`), as a transactional producer leaves.
    pub fn append_transaction_marker(&self, name: &str) -> BackendResult<i64> {
        let p = self.get(name)?;
        let mut log = p.log.write();
        log.check_live(&p.name)?;
        let offset = log.log_end();
        log.add(None);
        Ok(offset)
    }

    fn get(&self, name: &str) -> BackendResult<Arc<MemPartition>> {
        self.partitions
            .read()
            .get(name)
            .cloned()
            .ok_or_else(|| not_found(name))
    }

    /// Kafka's collision rule: `a.b` and `a_b` cannot both be topics.
    fn check_collision(&self, topic: &str) -> BackendResult<()> {
        let unified = |t: &str| t.replace('.', "_");
        let parts = self.partitions.read();
        let clash = parts
            .keys()
            .filter_map(|n| parse_partition_name(n).ok())
            .find(|(t, _)| *t != topic && unified(t) == unified(topic));
        match clash {
            Some((existing, _)) => Err(BackendError::new(
                ErrorKind::InvalidName,
                format!("topic {topic} collides with existing topic {existing}"),
            )),
            None => Ok(()),
        }
    }

    /// The no-holes rule: partition `step` away from `name` must exist
    /// (`-1`, for a create) or must not (`+1`, for a delete).
    fn check_neighbour(&self, name: &str, step: i64, must_exist: bool) -> BackendResult<()> {
        let (topic, p) = parse_partition_name(name)
            .map_err(|why| BackendError::new(ErrorKind::InvalidName, why))?;
        let n = p as i64 + step;
        if n < 0 {
            return Ok(());
        }
        let neighbour = format!("{topic}-{n}");
        if self.partitions.read().contains_key(&neighbour) == must_exist {
            return Ok(());
        }
        let rule = match must_exist {
            true => "does not exist: create a topic's partitions in order from 0",
            false => "exists: delete a topic's partitions from the highest down",
        };
        Err(BackendError::new(
            ErrorKind::InvalidPartitions,
            format!("partition {name}: {neighbour} {rule} (Kafka clients need no holes)"),
        ))
    }
}

fn not_found(name: &str) -> BackendError {
    BackendError::new(
        ErrorKind::NotFound,
        format!("partition {name} does not exist"),
    )
}

impl Backend for MemBackend {
    fn read_only(&self) -> bool {
        self.shared.read_only.load(Ordering::Relaxed)
    }

    fn groups(&self) -> Option<&dyn Groups> {
        Some(&self.groups)
    }

    fn partition_names(&self) -> BackendResult<Vec<String>> {
        self.shared.faults.check(Call::PartitionNames)?;
        Ok(self.partitions.read().keys().cloned().collect())
    }

    fn partition(&self, name: &str) -> BackendResult<Arc<dyn Partition>> {
        self.shared.faults.check(Call::Partition)?;
        Ok(self.get(name)?)
    }

    /// The local backend's order of checks: the name, read-only, the
    /// collision and no-holes rules, then whether it exists.
    fn create_partition(&self, name: &str) -> BackendResult<()> {
        self.shared.faults.check(Call::CreatePartition)?;
        let (topic, p) = validate_new_partition_name(name).map_err(|why| {
            BackendError::new(
                ErrorKind::InvalidName,
                format!("invalid partition name {name:?}: {why}"),
            )
        })?;
        self.shared.writable()?;
        match p {
            0 => self.check_collision(topic)?,
            _ => self.check_neighbour(name, -1, true)?,
        }
        let mut parts = self.partitions.write();
        if parts.contains_key(name) {
            return Err(BackendError::new(
                ErrorKind::Exists,
                format!("partition {name} already exists"),
            ));
        }
        let p = MemPartition::new(name, self.shared.clone());
        parts.insert(name.to_string(), Arc::new(p));
        Ok(())
    }

    fn delete_partition(&self, name: &str) -> BackendResult<()> {
        self.shared.faults.check(Call::DeletePartition)?;
        self.shared.writable()?;
        self.check_neighbour(name, 1, false)?;
        let p = self
            .partitions
            .write()
            .remove(name)
            .ok_or_else(|| not_found(name))?;
        // Handles keep the partition; from now on it refuses everything.
        p.log.write().deleted = true;
        Ok(())
    }

    fn config_names(&self) -> &'static [&'static str] {
        // The line format's two settings come last; they are the tree's.
        CONFIG_NAMES
    }

    fn statfs(&self) -> BackendResult<StatFs> {
        self.shared.faults.check(Call::Statfs)?;
        let used: u64 = self.partitions.read().values().map(|p| p.bytes()).sum();
        let (frsize, blocks) = (4096u64, 1 << 20);
        let free = blocks - used.div_ceil(frsize).min(blocks);
        Ok(StatFs {
            blocks,
            bfree: free,
            bavail: free,
            files: 1 << 20,
            ffree: 1 << 20,
            bsize: IO_SIZE,
            frsize: frsize as u32,
        })
    }
}

/// One record as kept: `None` is a transaction marker's offset.
type Entry = Option<(Record, TimestampType)>;

/// A record's line in the consumer stream (a null value is an empty line).
fn stream_line(r: &Record) -> &[u8] {
    r.value.as_deref().unwrap_or_default()
}

#[derive(Debug)]
struct Log {
    /// Every offset from 0 on; those below `log_start` are gone.
    entries: Vec<Entry>,
    /// Stream bytes of `entries[..=i]` (`value\n` per record), so that a
    /// read at a position finds its record by binary search.
    ends: Vec<u64>,
    log_start: i64,
    config: LogConfig,
    line_format: LineFormat,
    last_append: Option<SystemTime>,
    deleted: bool,
}

impl Log {
    fn log_end(&self) -> i64 {
        self.entries.len() as i64
    }

    fn check_live(&self, name: &str) -> BackendResult<()> {
        match self.deleted {
            true => Err(not_found(name)),
            false => Ok(()),
        }
    }

    fn out_of_range(&self, offset: i64, why: &str) -> BackendError {
        BackendError::new(
            ErrorKind::OffsetOutOfRange {
                offset,
                log_start: self.log_start,
                log_end: self.log_end(),
            },
            format!(
                "offset {offset} {why} [{}, {})",
                self.log_start,
                self.log_end()
            ),
        )
    }

    /// The live entries with their offsets.
    fn live(&self) -> impl Iterator<Item = (i64, &Entry)> {
        let start = self.log_start as usize;
        (start as i64..).zip(&self.entries[start..])
    }

    /// Stream bytes of the entries below `offset`.
    fn stream_at(&self, offset: i64) -> u64 {
        match offset {
            0 => 0,
            o => self.ends[o as usize - 1],
        }
    }

    /// The length of the consumer stream, from the log start.
    fn stream_len(&self) -> u64 {
        self.stream_at(self.log_end()) - self.stream_at(self.log_start)
    }

    fn add(&mut self, entry: Entry) {
        let line = entry
            .as_ref()
            .map_or(0, |(r, _)| stream_line(r).len() as u64 + 1);
        self.ends.push(self.stream_at(self.log_end()) + line);
        self.entries.push(entry);
    }

    /// Copies stream bytes from `pos` (counted from the log start).
    fn read_stream(&self, pos: u64, buf: &mut [u8]) -> usize {
        let mut at = self.stream_at(self.log_start) + pos;
        // The first entry whose line ends past `at`.
        let first = self.ends.partition_point(|end| *end <= at);
        let mut n = 0;
        for (i, e) in self.entries.iter().enumerate().skip(first) {
            let Some((r, _)) = e else { continue };
            if n == buf.len() {
                break;
            }
            // `at` lies in this entry's line: `skip` bytes into it.
            let skip = (at - self.stream_at(i as i64)) as usize;
            let tail = &stream_line(r)[skip.min(stream_line(r).len())..];
            let take = tail.len().min(buf.len() - n);
            buf[n..n + take].copy_from_slice(&tail[..take]);
            n += take;
            if take == tail.len() && n < buf.len() {
                buf[n] = b'\n';
                n += 1;
            }
            at = self.ends[i];
        }
        n
    }

    /// Refuses a record no batch may hold, as the local backend would.
    fn check_sizes(&self, records: &[NewRecord]) -> BackendResult<()> {
        let max = self.config.max_message_bytes.max(0) as usize;
        for r in records {
            let size = batch_size(std::slice::from_ref(r));
            if size > max {
                return Err(BackendError::new(
                    ErrorKind::RecordTooLarge,
                    format!(
                        "the record is {size} bytes when serialized, larger than max.message.bytes ({max})"
                    ),
                ));
            }
            if size > self.config.segment_bytes.max(0) as usize {
                return Err(BackendError::new(
                    ErrorKind::BatchTooLarge,
                    format!("a batch of {size} bytes is larger than segment.bytes"),
                ));
            }
        }
        Ok(())
    }

    /// Appends `records` stamped `now`; returns the first offset.
    fn push(&mut self, records: &[NewRecord], now: SystemTime) -> i64 {
        let first = self.log_end();
        let ms = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis()) as i64;
        let kind = self.config.message_timestamp_type;
        for (i, r) in records.iter().enumerate() {
            let record = Record {
                offset: first + i as i64,
                timestamp: ms,
                attributes: 0,
                key: r.key.map(<[u8]>::to_vec),
                value: r.value.map(<[u8]>::to_vec),
                headers: r
                    .headers
                    .iter()
                    .map(|(k, v)| Header {
                        key: k.to_string(),
                        value: v.map(<[u8]>::to_vec),
                    })
                    .collect(),
                sequence: -1,
                size_in_bytes: r.encoded_size(i as i32),
            };
            self.add(Some((record, kind)));
        }
        self.last_append = Some(now);
        first
    }
}

/// One partition in memory.
pub struct MemPartition {
    name: String,
    shared: Arc<Shared>,
    log: RwLock<Log>,
}

impl MemPartition {
    fn new(name: &str, shared: Arc<Shared>) -> MemPartition {
        let log = Log {
            entries: Vec::new(),
            ends: Vec::new(),
            log_start: 0,
            config: shared.defaults.clone(),
            line_format: LineFormat::default(),
            last_append: None,
            deleted: false,
        };
        MemPartition {
            name: name.to_string(),
            shared,
            log: RwLock::new(log),
        }
    }

    /// Stream bytes held, for `statfs`.
    fn bytes(&self) -> u64 {
        self.log.read().stream_len()
    }

    fn check(&self, call: Call) -> BackendResult<()> {
        self.shared.faults.check(call)
    }

    /// A change: fails as injected, on a read-only backend, or once deleted.
    fn change(&self, call: Call) -> BackendResult<parking_lot::RwLockWriteGuard<'_, Log>> {
        self.check(call)?;
        self.shared.writable()?;
        let log = self.log.write();
        log.check_live(&self.name)?;
        Ok(log)
    }

    /// A read: fails as injected, or once deleted.
    fn read(&self, call: Call) -> BackendResult<parking_lot::RwLockReadGuard<'_, Log>> {
        self.check(call)?;
        let log = self.log.read();
        log.check_live(&self.name)?;
        Ok(log)
    }
}

impl Partition for MemPartition {
    fn name(&self) -> &str {
        &self.name
    }

    fn offsets(&self) -> BackendResult<Offsets> {
        let log = self.read(Call::Offsets)?;
        Ok(Offsets {
            log_start: log.log_start,
            log_end: log.log_end(),
        })
    }

    /// All or nothing, unless a fault lands part of it. A record too
    /// large is refused before a deleted partition is (the local order).
    fn append(&self, records: &[NewRecord]) -> Result<Appended, AppendError> {
        let fault = self.shared.faults.take(Call::Append);
        if let Some(f) = fault.filter(|f| f.lands == 0) {
            return Err(injected(Call::Append, f.kind).into());
        }
        self.shared.writable()?;
        if records.is_empty() {
            return Err(BackendError::new(ErrorKind::InvalidRecord, "nothing to append").into());
        }
        let mut log = self.log.write();
        StorageError::check_keys(&log.config, &self.name, records).map_err(BackendError::from)?;
        log.check_sizes(records)?;
        log.check_live(&self.name)?;
        let now = SystemTime::now();
        let Some(f) = fault else {
            let first = log.push(records, now);
            return Ok(Appended {
                first_offset: first,
                last_offset: log.log_end() - 1,
                batches: None,
            });
        };
        let lands = f.lands.min(records.len());
        let first = log.push(&records[..lands], now);
        Err(AppendError {
            error: injected(Call::Append, f.kind),
            landed: Some(Landed {
                records: lands,
                first_offset: first,
                last_offset: first + lands as i64 - 1,
            }),
        })
    }

    fn contains(&self, offset: i64) -> BackendResult<bool> {
        let log = self.read(Call::Contains)?;
        Ok(log.log_start <= offset && offset < log.log_end())
    }

    fn record(&self, offset: i64) -> BackendResult<RecordEntry> {
        let log = self.read(Call::Record)?;
        if offset < log.log_start || offset >= log.log_end() {
            return Err(log.out_of_range(offset, "is outside the log"));
        }
        match &log.entries[offset as usize] {
            Some((record, timestamp_type)) => Ok(RecordEntry {
                record: record.clone(),
                batch_base_offset: None,
                position: None,
                timestamp_type: *timestamp_type,
                // The in-memory store takes no transactions.
                transaction: None,
            }),
            None => Err(BackendError::new(
                ErrorKind::NoRecord,
                format!("offset {offset} of {} holds no record", self.name),
            )),
        }
    }

    fn stream_len(&self) -> BackendResult<u64> {
        Ok(self.read(Call::StreamLen)?.stream_len())
    }

    fn read_stream(&self, pos: u64, buf: &mut [u8]) -> BackendResult<usize> {
        Ok(self.read(Call::ReadStream)?.read_stream(pos, buf))
    }

    fn log_mtime(&self) -> Option<SystemTime> {
        self.log.read().last_append
    }

    /// The first live record with a timestamp at or after `ms`.
    fn offset_for_timestamp(&self, ms: i64) -> BackendResult<Option<i64>> {
        let log = self.read(Call::OffsetForTimestamp)?;
        Ok(log
            .live()
            .find(|(_, e)| e.as_ref().is_some_and(|(r, _)| r.timestamp >= ms))
            .map(|(o, _)| o))
    }

    fn status(&self) -> BackendResult<Status> {
        let log = self.read(Call::Status)?;
        let records = log.live().filter(|(_, e)| e.is_some()).count();
        Ok(Status::Serving {
            log_start_offset: log.log_start,
            log_end_offset: log.log_end(),
            // One copy, in memory: everything appended is committed.
            high_watermark: log.log_end(),
            detail: vec![
                ("records", records.to_string()),
                ("faults_met", self.shared.faults.met().to_string()),
            ],
        })
    }

    fn config(&self, name: &str) -> BackendResult<Option<String>> {
        let log = self.read(Call::Config)?;
        match LineFormat::is_setting(name) {
            true => Ok(None),
            false => Ok(log.config.get(name)),
        }
    }

    /// Validated as the local backend validates (Kafka's validators).
    fn set_config(&self, name: &str, value: &str) -> BackendResult<()> {
        let mut log = self.change(Call::SetConfig)?;
        if LineFormat::is_setting(name) {
            return Err(BackendError::new(
                ErrorKind::InvalidConfig,
                format!("{name} is the tree's line format, not a topic config"),
            ));
        }
        let mut config = log.config.clone();
        // What no single value shows (a compaction lag range, remote storage
        // with the system off) is judged on the whole, as local storage does.
        config
            .set(name, value)
            .and_then(|()| config.validate())
            .map_err(|e| BackendError::new(ErrorKind::InvalidConfig, e.to_string()))?;
        log.config = config;
        Ok(())
    }

    fn line_format(&self) -> LineFormat {
        self.log.read().line_format.clone()
    }

    fn set_line_format(&self, name: &str, value: &str) -> BackendResult<()> {
        let mut log = self.change(Call::SetLineFormat)?;
        log.line_format.set_or_refuse(name, value)
    }

    /// The local backend's rule: a batch of its own within
    /// `max.message.bytes` and `segment.bytes`.
    fn check_record_size(&self, record: &NewRecord) -> BackendResult<()> {
        self.check(Call::CheckRecordSize)?;
        let log = self.log.read();
        if record.key.is_none() && !log.line_format.parse_key {
            StorageError::check_keys(&log.config, &self.name, std::slice::from_ref(record))?;
        }
        let size = batch_size(std::slice::from_ref(record));
        Ok(StorageError::check_batch_size(&log.config, size)?)
    }

    fn delete_records(&self, offset: i64) -> BackendResult<i64> {
        let mut log = self.change(Call::DeleteRecords)?;
        if offset < 0 || offset > log.log_end() {
            return Err(log.out_of_range(offset, "cannot be the log start: the log holds"));
        }
        log.log_start = log.log_start.max(offset);
        Ok(log.log_start)
    }

    fn log_control(&self) -> Option<&dyn LogControl> {
        self.shared.log_control.then_some(self as &dyn LogControl)
    }

    fn committed(&self) -> Option<&dyn CommittedStream> {
        Some(self)
    }
}

/// The in-memory store takes no transactions: everything is committed.
impl CommittedStream for MemPartition {
    fn committed_len(&self) -> BackendResult<u64> {
        Ok(self.read(Call::CommittedLen)?.stream_len())
    }

    fn read_committed(&self, pos: u64, buf: &mut [u8]) -> BackendResult<usize> {
        Ok(self.read(Call::ReadCommitted)?.read_stream(pos, buf))
    }
}

/// Nothing to roll or make durable: each only answers, or fails as armed.
impl LogControl for MemPartition {
    fn roll(&self) -> BackendResult<()> {
        self.change(Call::Roll).map(drop)
    }

    fn flush(&self) -> BackendResult<()> {
        self.read(Call::Flush).map(drop)
    }
}
