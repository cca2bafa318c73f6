//! Offline consistency check of a data directory (`commitfs check`): reads
//! every file and changes nothing. Each problem names a file, a position and
//! what is wrong. `repair` then does what recovery would do.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::path::{Path, PathBuf};

use super::batch_reader::{BatchReader, Stop};
use super::checkpoint::{self, LOG_START_OFFSET_FILE, RECOVERY_POINT_FILE};
use super::config::{LogConfig, is_config_name, parse_properties};
use super::disk;
use super::error::{IoContext, Result};
use super::index::{OFFSET_ENTRY, TIME_ENTRY, offset_entries, time_entries};
use super::manager::{CLEAN_SHUTDOWN_FILE, DataDirLock, LogManager, OpenOptions};
use super::names::{parse_partition_name, parse_segment_file_name, segment_file_name};
use super::partition::PROPERTIES_FILE;
use crate::record::{BatchHeader, RecordError};

const CHUNK: usize = 8 * 1024 * 1024;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub file: PathBuf,
    pub position: u64,
    pub what: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: position {}: {}",
            self.file.display(),
            self.position,
            self.what
        )
    }
}

#[derive(Clone, Debug, Default)]
pub struct CheckReport {
    pub partitions: usize,
    pub segments: usize,
    pub batches: u64,
    pub problems: Vec<Problem>,
    /// Partitions with at least one problem in their segments or indexes.
    damaged: BTreeMap<String, i64>,
}

impl CheckReport {
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }

    fn problem(&mut self, file: &Path, position: u64, what: impl Into<String>) {
        self.problems.push(Problem {
            file: file.to_path_buf(),
            position,
            what: what.into(),
        });
    }
}

/// What one `.log` holds, as far as it is valid.
struct LogScan {
    /// (position, header) of every valid batch.
    batches: Vec<(u64, BatchHeader)>,
}

/// Checks every partition of `dir` (or only `only`), with `defaults` as the
/// mount-wide configs the partitions were written with.
pub fn check_data_dir(dir: &Path, defaults: &LogConfig, only: Option<&str>) -> Result<CheckReport> {
    let mut report = CheckReport::default();
    let mut names: Vec<String> = fs::read_dir(dir)
        .at(dir)?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| parse_partition_name(n).is_ok())
        .filter(|n| only.is_none_or(|o| o == n))
        .collect();
    names.sort();
    if let Some(o) = only
        && names.is_empty()
    {
        report.problem(&dir.join(o), 0, "no such partition directory");
    }
    let mut log_ends = BTreeMap::new();
    for name in &names {
        let end = check_partition(&dir.join(name), defaults, &mut report)?;
        log_ends.insert(name.clone(), end);
        report.partitions += 1;
    }
    check_checkpoints(dir, &log_ends, &mut report);
    Ok(report)
}

fn check_partition(
    pdir: &Path,
    defaults: &LogConfig,
    report: &mut CheckReport,
) -> Result<(i64, i64)> {
    let name = pdir
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_string();
    let mut config = defaults.clone();
    if let Ok(text) = fs::read_to_string(pdir.join(PROPERTIES_FILE)) {
        // Names that are not topic configs are properties of the faces
        // above storage (the tree's line format): not storage's to judge.
        let properties = parse_properties(&text);
        for (k, v) in properties.iter().filter(|(k, _)| is_config_name(k)) {
            if let Err(e) = config.set(k, v) {
                report.problem(&pdir.join(PROPERTIES_FILE), 0, e.to_string());
            }
        }
    }
    let mut bases: Vec<i64> = fs::read_dir(pdir)
        .at(pdir)?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let n = e.file_name();
            let (b, s) = parse_segment_file_name(n.to_str()?)?;
            (s == "log").then_some(b)
        })
        .collect();
    bases.sort_unstable();
    let first_base = bases.first().copied().unwrap_or(0);
    let mut expected_next: Option<i64> = None;
    let last = bases.len().saturating_sub(1);
    for (i, &base) in bases.iter().enumerate() {
        report.segments += 1;
        let log_path = pdir.join(segment_file_name(base, "log"));
        let problems_before = report.problems.len();
        let scan = scan_log(&log_path, base, &mut expected_next, report)?;
        report.batches += scan.batches.len() as u64;
        check_indexes(pdir, base, &scan, &config, i == last, report)?;
        if report.problems.len() > problems_before {
            report.damaged.entry(name.clone()).or_insert(base);
        }
    }
    Ok((first_base, expected_next.unwrap_or(first_base)))
}

fn scan_log(
    path: &Path,
    base: i64,
    expected_next: &mut Option<i64>,
    report: &mut CheckReport,
) -> Result<LogScan> {
    let f = File::open(path).at(path)?;
    let size = f.metadata().at(path)?.len();
    let mut batches = Vec::new();
    // Big chunks, so a segment is read once.
    let mut walk = BatchReader::new(&f, path, 0, size, CHUNK);
    let stop = walk.for_each_batch(|pos, batch| {
        if let Err(e) = batch.verify_crc() {
            report.problem(path, pos, describe(&e));
            return Ok(false);
        }
        let h = batch.header;
        check_batch_offsets(
            path,
            pos,
            &h,
            base,
            batches.is_empty(),
            expected_next,
            report,
        );
        batches.push((pos, h));
        Ok(true)
    })?;
    match stop {
        None | Some(Stop::End) => {}
        Some(Stop::Unframed { position, error }) => report.problem(
            path,
            position,
            format!(
                "{} invalid bytes at the end: {}",
                size - position,
                describe(&error)
            ),
        ),
        Some(Stop::Torn {
            position,
            declared,
            present,
        }) => report.problem(
            path,
            position,
            format!("torn batch: {declared} bytes declared, {present} present"),
        ),
        Some(Stop::Invalid { position, error }) => report.problem(path, position, describe(&error)),
    }
    Ok(LogScan { batches })
}

/// A batch's offsets against the file's name and the batch before it.
fn check_batch_offsets(
    path: &Path,
    pos: u64,
    h: &BatchHeader,
    base: i64,
    first: bool,
    expected_next: &mut Option<i64>,
    report: &mut CheckReport,
) {
    // A segment the log cleaner wrote may start above its name (its
    // first batches went), and keeps gaps where batches went: Kafka's
    // rule is only that offsets grow.
    if first && h.base_offset < base {
        report.problem(
            path,
            pos,
            format!(
                "first batch has base offset {} but the file is named for {base}",
                h.base_offset
            ),
        );
    }
    if let Some(next) = *expected_next
        && h.base_offset < next
    {
        report.problem(
            path,
            pos,
            format!(
                "batch base offset {} goes backwards: expected {next}",
                h.base_offset
            ),
        );
    }
    if h.last_offset() - base > u32::MAX as i64 {
        report.problem(path, pos, "offset does not fit a relative offset");
    }
    *expected_next = Some(h.next_offset());
}

fn describe(e: &RecordError) -> String {
    e.to_string()
}

/// Compares the index files with what Kafka's rule gives for the valid batches.
fn check_indexes(
    pdir: &Path,
    base: i64,
    scan: &LogScan,
    config: &LogConfig,
    active: bool,
    report: &mut CheckReport,
) -> Result<()> {
    let interval = config.index_interval_bytes.max(0) as u64;
    let expected = expected_index(base, scan, interval);
    let index_path = pdir.join(segment_file_name(base, "index"));
    check_offset_index(&index_path, base, scan, &expected, interval, active, report);
    let time_path = pdir.join(segment_file_name(base, "timeindex"));
    check_time_index(&time_path, base, scan, &expected, active, report);
    Ok(())
}

/// What Kafka's index rule gives for a segment's valid batches.
struct ExpectedIndex {
    /// (last offset, position) of each batch that gets an offset index entry.
    offsets: Vec<(i64, u64)>,
    /// The segment's largest timestamp, and the last offset of its batch.
    max_ts: i64,
    max_ts_offset: i64,
}

/// Kafka's index rule, stated here again, apart from the one the segment
/// writes its indexes with (`index_batch`), on purpose: `check` is the oracle
/// that the written indexes are tested against, so the two must not share
/// code, nor a mistake.
fn expected_index(base: i64, scan: &LogScan, interval: u64) -> ExpectedIndex {
    let mut offsets = Vec::new();
    let mut since = 0u64;
    let (mut max_ts, mut max_ts_offset) = (-1i64, base);
    for (pos, h) in &scan.batches {
        if h.max_timestamp > max_ts {
            max_ts = h.max_timestamp;
            max_ts_offset = h.last_offset();
        }
        if since > interval {
            offsets.push((h.last_offset(), *pos));
            since = 0;
        }
        since += h.size() as u64;
    }
    ExpectedIndex {
        offsets,
        max_ts,
        max_ts_offset,
    }
}

fn check_offset_index(
    index_path: &Path,
    base: i64,
    scan: &LogScan,
    expected: &ExpectedIndex,
    interval: u64,
    active: bool,
    report: &mut CheckReport,
) {
    match fs::read(index_path) {
        Err(_) => report.problem(index_path, 0, "offset index file is missing"),
        Ok(bytes) => {
            if bytes.len() % OFFSET_ENTRY != 0 {
                report.problem(
                    index_path,
                    bytes.len() as u64,
                    format!(
                        "size {} is not a whole number of 8-byte entries",
                        bytes.len()
                    ),
                );
            }
            let entries: Vec<(i64, u64)> = offset_entries(base, &bytes)
                .map(|e| (e.offset, e.position as u64))
                .collect();
            let real = if active {
                // The active index is preallocated: its entries end at the first zero one.
                entries.iter().take_while(|e| e.1 != 0).count()
            } else {
                entries.len()
            };
            if active && entries[real..].iter().any(|e| *e != (base, 0)) {
                report.problem(
                    index_path,
                    (real * OFFSET_ENTRY) as u64,
                    "non-zero bytes after the last entry",
                );
            }
            let entries = &entries[..real];
            // A segment the cleaner wrote may be active again (recovery
            // drops an empty last segment), its appends' entries after the
            // cleaner's: both kinds fit the cleaner's rule.
            if entries == &expected.offsets[..] || cleaner_index(entries, scan, interval) {
                return;
            }
            report_index_entries(index_path, entries, scan, expected, interval, report);
        }
    }
}

/// The problems of offset index entries that fit neither rule: each entry
/// that does not point at its batch, and where they leave the append rule.
fn report_index_entries(
    index_path: &Path,
    entries: &[(i64, u64)],
    scan: &LogScan,
    expected: &ExpectedIndex,
    interval: u64,
    report: &mut CheckReport,
) {
    let positions: BTreeMap<u64, i64> = scan
        .batches
        .iter()
        .map(|(p, h)| (*p, h.last_offset()))
        .collect();
    for (i, &(offset, position)) in entries.iter().enumerate() {
        let at = (i * OFFSET_ENTRY) as u64;
        match positions.get(&position) {
            None => report.problem(
                index_path,
                at,
                format!("entry (offset {offset}, position {position}) does not point at a batch in the log"),
            ),
            Some(&last) if last != offset => report.problem(
                index_path,
                at,
                format!("entry offset {offset} but the batch at position {position} ends at offset {last}"),
            ),
            _ => {}
        }
    }
    let real = entries.len();
    let first_diff = entries
        .iter()
        .zip(&expected.offsets)
        .position(|(a, b)| a != b)
        .unwrap_or(real.min(expected.offsets.len()));
    report.problem(
        index_path,
        (first_diff * OFFSET_ENTRY) as u64,
        format!(
            "{real} entries where the index rule (index.interval.bytes={interval}) gives {}; first difference at entry {first_diff}",
            expected.offsets.len()
        ),
    );
}

/// Whether `entries` are what Kafka's log cleaner writes for these
/// batches: it appends a chunk of batches at once, so an entry points at
/// the chunk's first batch and holds an offset of the chunk (its largest),
/// and comes more than `index.interval.bytes` after the entry before. The
/// chunks themselves are not in the file; entries that fit some chunking
/// are accepted, which keeps every lookup right.
fn cleaner_index(entries: &[(i64, u64)], scan: &LogScan, interval: u64) -> bool {
    let at = |p: u64| scan.batches.binary_search_by_key(&p, |(pos, _)| *pos).ok();
    let mut last_pos = 0u64;
    let mut last_offset = i64::MIN;
    for (i, &(offset, pos)) in entries.iter().enumerate() {
        let Some(first) = at(pos) else { return false };
        let upto = entries
            .get(i + 1)
            .and_then(|(_, next)| at(*next))
            .unwrap_or(scan.batches.len());
        let (lo, hi) = (
            scan.batches[first].1.base_offset,
            scan.batches[upto - 1].1.last_offset(),
        );
        if offset < lo || offset > hi || offset <= last_offset || pos - last_pos <= interval {
            return false;
        }
        (last_pos, last_offset) = (pos, offset);
    }
    true
}

fn check_time_index(
    time_path: &Path,
    base: i64,
    scan: &LogScan,
    expected: &ExpectedIndex,
    active: bool,
    report: &mut CheckReport,
) {
    let (max_ts, max_ts_offset) = (expected.max_ts, expected.max_ts_offset);
    match fs::read(time_path) {
        Err(_) => report.problem(time_path, 0, "time index file is missing"),
        Ok(bytes) => {
            if bytes.len() % TIME_ENTRY != 0 {
                report.problem(
                    time_path,
                    bytes.len() as u64,
                    format!(
                        "size {} is not a whole number of 12-byte entries",
                        bytes.len()
                    ),
                );
            }
            let entries: Vec<(i64, i64)> = time_entries(base, &bytes)
                .map(|e| (e.timestamp, e.offset))
                .collect();
            let real = if active {
                let mut n = 0;
                while n < entries.len() && entries[n] != (0, base) {
                    n += 1;
                }
                n
            } else {
                entries.len()
            };
            let next = scan.batches.last().map_or(base, |(_, h)| h.next_offset());
            // Each entry is (max timestamp so far, last offset of the batch that
            // holds it). Entries appear at index points and when a segment is
            // closed, so reopened segments legitimately hold extra ones: check
            // every entry against its batch rather than against one sequence.
            let batch_max: BTreeMap<i64, i64> = scan
                .batches
                .iter()
                .map(|(_, h)| (h.last_offset(), h.max_timestamp))
                .collect();
            for i in 0..real {
                let (t, o) = entries[i];
                let at = (i * TIME_ENTRY) as u64;
                if o < base || o >= next.max(base + 1) {
                    report.problem(
                        time_path,
                        at,
                        format!("entry offset {o} is outside the segment [{base}, {next})"),
                    );
                } else if batch_max.get(&o) != Some(&t) {
                    report.problem(
                        time_path,
                        at,
                        format!("entry (timestamp {t}, offset {o}) does not match the batch ending at offset {o}"),
                    );
                }
                if i > 0 && (t <= entries[i - 1].0 || o < entries[i - 1].1) {
                    report.problem(
                        time_path,
                        at,
                        format!("entry (timestamp {t}, offset {o}) does not grow"),
                    );
                }
            }
            // A sealed segment ends with the entry written when it became inactive.
            if !active && max_ts >= 0 && entries.last() != Some(&(max_ts, max_ts_offset)) {
                report.problem(
                    time_path,
                    bytes.len() as u64,
                    format!("the last entry is not the segment's largest timestamp {max_ts} at offset {max_ts_offset}"),
                );
            }
        }
    }
}

fn check_checkpoints(
    dir: &Path,
    log_ends: &BTreeMap<String, (i64, i64)>,
    report: &mut CheckReport,
) {
    for file in [RECOVERY_POINT_FILE, LOG_START_OFFSET_FILE] {
        let path = dir.join(file);
        let Ok(text) = fs::read_to_string(&path) else {
            continue;
        };
        let Some(map) = checkpoint::parse(&text) else {
            report.problem(&path, 0, "not a valid offset checkpoint file");
            continue;
        };
        for ((topic, partition), offset) in map {
            let name = format!("{topic}-{partition}");
            let Some(&(start, end)) = log_ends.get(&name) else {
                continue;
            };
            if offset > end {
                report.problem(
                    &path,
                    0,
                    format!("{name}: offset {offset} is past the log end offset {end}"),
                );
            }
            if file == LOG_START_OFFSET_FILE && offset < start {
                report.problem(
                    &path,
                    0,
                    format!("{name}: log start offset {offset} is below the first segment {start}"),
                );
            }
        }
    }
}

/// What `repair` changed.
#[derive(Clone, Debug, Default)]
pub struct RepairReport {
    pub actions: Vec<String>,
}

/// Does what recovery would do for every damaged partition: recovery from
/// the first damaged segment (truncating at the first bad batch, dropping
/// later segments) and index rebuilds. Returns what it removed.
pub fn repair_data_dir(
    dir: &Path,
    defaults: &LogConfig,
    report: &CheckReport,
) -> Result<RepairReport> {
    let mut out = RepairReport::default();
    if report.damaged.is_empty() {
        return Ok(out);
    }
    // Held before anything is changed: a mounted directory is refused here,
    // whatever the caller checked before.
    let lock = DataDirLock::acquire(dir)?;
    let before = sizes(dir)?;
    // Make recovery start at the first damaged segment of each damaged partition,
    // and drop damaged index files so they are rebuilt from the log.
    let rp_path = dir.join(RECOVERY_POINT_FILE);
    let mut rps = checkpoint::read(&rp_path);
    for (name, base) in &report.damaged {
        let (topic, partition) = parse_partition_name(name)?;
        let rp = rps.entry((topic, partition)).or_insert(*base);
        *rp = (*rp).min(*base);
    }
    checkpoint::write_atomically(&rp_path, checkpoint::format(&rps).as_bytes())?;
    for p in &report.problems {
        if let Some(name) = p.file.file_name().and_then(|n| n.to_str())
            && let Some((_, suffix)) = parse_segment_file_name(name)
            && (suffix == "index" || suffix == "timeindex")
            && p.file.exists()
        {
            disk::remove_file("repair.remove_index", &p.file).at(&p.file)?;
            out.actions.push(format!(
                "removed {} to rebuild it from the log",
                p.file.display()
            ));
        }
    }
    let marker = dir.join(CLEAN_SHUTDOWN_FILE);
    if marker.exists() {
        disk::remove_file("repair.remove_marker", &marker).at(&marker)?;
    }
    let mgr = LogManager::open_with_lock(dir, defaults.clone(), OpenOptions::default(), lock)?;
    mgr.close()?;
    let after = sizes(dir)?;
    for (path, size) in &before {
        match after.get(path) {
            None => out
                .actions
                .push(format!("deleted {} ({size} bytes)", path.display())),
            Some(a) if a < size && path.extension().is_some_and(|e| e == "log") => {
                out.actions.push(format!(
                    "truncated {} by {} bytes",
                    path.display(),
                    size - a
                ))
            }
            _ => {}
        }
    }
    Ok(out)
}

fn sizes(dir: &Path) -> Result<BTreeMap<PathBuf, u64>> {
    let mut out = BTreeMap::new();
    for e in fs::read_dir(dir).at(dir)?.filter_map(|e| e.ok()) {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            for f in fs::read_dir(e.path()).at(&e.path())?.filter_map(|f| f.ok()) {
                if let Ok(m) = f.metadata() {
                    out.insert(f.path(), m.len());
                }
            }
        }
    }
    Ok(out)
}
