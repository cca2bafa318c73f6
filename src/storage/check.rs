//! Offline consistency check of a data directory (`commitfs check`): reads
//! every file and changes nothing. Each finding names a file, a position and
//! what is wrong. `repair` then does what recovery would do.
//!
//! Index files are judged by what Kafka's loader does with them
//! (`LogLoader.loadSegmentFiles`, `LogSegment.sanityCheck`, `recoverLog`):
//! after a clean shutdown, and below the recovery point after an unclean
//! one, they are opened as they are, and only a missing offset index makes
//! it rebuild them; from the segment holding the recovery point on, after
//! an unclean shutdown, they are rebuilt whatever they hold. A finding is a
//! *problem* when Kafka would refuse the file, rebuild it, or read wrong
//! through it; a *note* when Kafka loads it as it is and reads right
//! through it, but its own writer would not have left it so, or when the
//! load rebuilds it anyway.

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
use super::stream::{COMMITTED_LENGTHS_FILE, STREAM_LENGTHS_FILE, batch_stream_len};
use crate::record::state_files::{
    ABORTED_TXN_SIZE, AbortedTxn, read_producer_snapshot, read_txn_index,
};
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
    /// What Kafka would refuse, rebuild or read wrong: `repair` fixes these.
    pub problems: Vec<Problem>,
    /// What Kafka loads as it is and reads right, but its writer would not
    /// have left so, or what its load rebuilds anyway.
    pub notes: Vec<Problem>,
    /// Partitions with at least one problem in their segments or indexes.
    damaged: BTreeMap<String, i64>,
}

impl CheckReport {
    /// Nothing found at all: every file is as Kafka's own writer leaves it.
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty() && self.notes.is_empty()
    }

    /// Whether Kafka would refuse, rebuild or read wrong anything found.
    pub fn has_problems(&self) -> bool {
        !self.problems.is_empty()
    }

    fn problem(&mut self, file: &Path, position: u64, what: impl Into<String>) {
        self.problems.push(Problem {
            file: file.to_path_buf(),
            position,
            what: what.into(),
        });
    }

    fn note(&mut self, file: &Path, position: u64, what: impl Into<String>) {
        self.notes.push(Problem {
            file: file.to_path_buf(),
            position,
            what: what.into(),
        });
    }
}

/// What Kafka's loader does with a segment's index files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Load {
    /// Opened as they are: after a clean shutdown, or below the recovery
    /// point after an unclean one.
    AsTheyAre,
    /// Rebuilt from the `.log` whatever they hold (`recoverLog`): after an
    /// unclean shutdown, the segment that holds the recovery point and the
    /// ones after it.
    Rebuilt { recovery_point: i64 },
}

impl Load {
    /// Kafka recovers `LogSegments.values(recoveryPoint, MAX)`: the
    /// segments from the one whose base is the floor of the recovery point.
    fn of_segment(clean: bool, recovery_point: i64, next_base: Option<i64>) -> Load {
        if !clean && next_base.is_none_or(|next| next > recovery_point) {
            Load::Rebuilt { recovery_point }
        } else {
            Load::AsTheyAre
        }
    }
}

/// Findings about one segment's index files, sorted by what the load does
/// with them.
struct IndexFindings<'r> {
    report: &'r mut CheckReport,
    load: Load,
}

impl IndexFindings<'_> {
    /// Kafka would refuse it, rebuild it or read wrong through it.
    fn wrong(&mut self, file: &Path, position: u64, what: impl Into<String>) {
        match self.load {
            Load::AsTheyAre => self.report.problem(file, position, what),
            Load::Rebuilt { .. } => self.rebuilt(file, position, what.into()),
        }
    }

    /// Kafka loads it as it is and reads right through it: `what` says so.
    fn unlike_writer(&mut self, file: &Path, position: u64, what: impl Into<String>) {
        match self.load {
            Load::AsTheyAre => self.report.note(file, position, what),
            Load::Rebuilt { .. } => self.rebuilt(file, position, what.into()),
        }
    }

    fn rebuilt(&mut self, file: &Path, position: u64, what: String) {
        let Load::Rebuilt { recovery_point } = self.load else {
            return;
        };
        self.report.note(
            file,
            position,
            format!(
                "{what}; rebuilt at load (no clean shutdown, and the segment is not below the recovery point {recovery_point})"
            ),
        );
    }

    fn rebuilds_anyway(&self) -> bool {
        matches!(self.load, Load::Rebuilt { .. })
    }
}

/// What one `.log` holds, as far as it is valid.
struct LogScan {
    /// (position, header) of every valid batch.
    batches: Vec<(u64, BatchHeader)>,
    /// Each of those batches' stream bytes (`value\n` per record), when
    /// the partition keeps saved lengths to hold against them; `None` for
    /// a batch whose records could not be read (a problem of its own).
    stream: Option<Vec<Option<u64>>>,
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
    let rules = LoadRules {
        clean: dir.join(CLEAN_SHUTDOWN_FILE).exists(),
        recovery_points: checkpoint::read(&dir.join(RECOVERY_POINT_FILE)),
    };
    let mut log_ends = BTreeMap::new();
    for name in &names {
        let end = check_partition(&dir.join(name), defaults, &rules, &mut report)?;
        log_ends.insert(name.clone(), end);
        report.partitions += 1;
    }
    check_checkpoints(dir, &log_ends, &mut report);
    Ok(report)
}

/// What decides how Kafka's loader takes the indexes of a data directory.
struct LoadRules {
    clean: bool,
    /// Kafka starts from 0 for a partition the checkpoint does not list.
    recovery_points: checkpoint::OffsetMap,
}

fn check_partition(
    pdir: &Path,
    defaults: &LogConfig,
    rules: &LoadRules,
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
    let recovery_point = parse_partition_name(&name)
        .ok()
        .and_then(|(t, p)| rules.recovery_points.get(&(t, p)).copied())
        .unwrap_or(0);
    let first_base = bases.first().copied().unwrap_or(0);
    let mut expected_next: Option<i64> = None;
    let last = bases.len().saturating_sub(1);
    let count_streams = [STREAM_LENGTHS_FILE, COMMITTED_LENGTHS_FILE]
        .iter()
        .any(|f| pdir.join(f).exists());
    let mut scans = Vec::new();
    for (i, &base) in bases.iter().enumerate() {
        report.segments += 1;
        let log_path = pdir.join(segment_file_name(base, "log"));
        let problems_before = report.problems.len();
        let scan = scan_log(&log_path, base, &mut expected_next, count_streams, report)?;
        report.batches += scan.batches.len() as u64;
        let load = Load::of_segment(rules.clean, recovery_point, bases.get(i + 1).copied());
        let mut findings = IndexFindings { report, load };
        check_indexes(pdir, base, &scan, &config, i == last, &mut findings);
        if report.problems.len() > problems_before {
            report.damaged.entry(name.clone()).or_insert(base);
        }
        // Neither is rebuilt by commitfs's recovery, so neither makes the
        // partition one to recover.
        let next = scan.batches.last().map(|(_, h)| h.next_offset());
        let mut findings = IndexFindings { report, load };
        check_txn_index(
            &pdir.join(segment_file_name(base, "txnindex")),
            (base, next),
            i == last,
            &mut findings,
        );
        scans.push((base, scan));
    }
    if count_streams {
        check_stream_lengths(pdir, &scans, report);
    }
    check_snapshots(pdir, report)?;
    Ok((first_base, expected_next.unwrap_or(first_base)))
}

fn scan_log(
    path: &Path,
    base: i64,
    expected_next: &mut Option<i64>,
    count_streams: bool,
    report: &mut CheckReport,
) -> Result<LogScan> {
    let f = File::open(path).at(path)?;
    let size = f.metadata().at(path)?.len();
    let mut batches = Vec::new();
    let mut stream = count_streams.then(Vec::new);
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
        if let Some(stream) = &mut stream {
            stream.push(match batch_stream_len(batch) {
                Ok(n) => Some(n),
                Err(e) => {
                    report.note(
                        path,
                        pos,
                        format!("records unreadable ({e}): stream length not checked"),
                    );
                    None
                }
            });
        }
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
    Ok(LogScan { batches, stream })
}

/// The saved stream lengths (`commitfs.streamlen`, `commitfs.committedlen`)
/// against the records: a length the load would take (saved for a segment
/// of the size the segment has) that its records do not make is a problem,
/// since `cat log`, its size and every read past the first wrong segment
/// would be off; one the load would not take (no size, another size, no
/// such segment) is a note. `committed` leaves out control batches and the
/// batches of aborted transactions (every `.txnindex` of the partition).
fn check_stream_lengths(pdir: &Path, scans: &[(i64, LogScan)], report: &mut CheckReport) {
    let mut aborted: Vec<AbortedTxn> = Vec::new();
    for (base, _) in scans {
        let path = pdir.join(segment_file_name(*base, "txnindex"));
        if let Ok(bytes) = fs::read(&path) {
            aborted.extend(read_txn_index(&bytes, &path.display().to_string()).0);
        }
    }
    let is_aborted = |h: &BatchHeader| {
        h.is_transactional()
            && aborted.iter().any(|t| {
                t.producer_id == h.producer_id
                    && t.first_offset <= h.base_offset
                    && h.base_offset <= t.last_offset
            })
    };
    for (file, committed) in [(STREAM_LENGTHS_FILE, false), (COMMITTED_LENGTHS_FILE, true)] {
        let path = pdir.join(file);
        let Ok(text) = fs::read_to_string(&path) else {
            continue;
        };
        for (line, entry) in text.lines().enumerate() {
            let line = line as u64 + 1;
            let fields: Vec<&str> = entry.split_whitespace().collect();
            let parsed = match fields[..] {
                [b, l] => b
                    .parse::<i64>()
                    .ok()
                    .zip(l.parse::<u64>().ok())
                    .map(|x| (x, None)),
                [b, l, z] => b
                    .parse::<i64>()
                    .ok()
                    .zip(l.parse::<u64>().ok())
                    .zip(z.parse::<u64>().ok())
                    .map(|(x, z)| (x, Some(z))),
                _ => None,
            };
            let Some(((base, len), size)) = parsed else {
                report.note(
                    &path,
                    line,
                    format!("line {entry:?} is not `base length size`: ignored at load"),
                );
                continue;
            };
            let Some((_, scan)) = scans.iter().find(|(b, _)| *b == base) else {
                report.note(
                    &path,
                    line,
                    format!("segment {base} is not in the partition: dropped at load"),
                );
                continue;
            };
            let log_path = pdir.join(segment_file_name(base, "log"));
            let file_size = fs::metadata(&log_path).map(|m| m.len()).unwrap_or(0);
            match size {
                None => {
                    report.note(
                        &path,
                        line,
                        format!("segment {base}'s length has no size: counted again at load"),
                    );
                    continue;
                }
                Some(z) if z != file_size => {
                    report.note(&path, line, format!("segment {base}'s length was counted at {z} bytes, the segment has {file_size}: counted again at load"));
                    continue;
                }
                Some(_) => {}
            }
            let Some(lens) = &scan.stream else { continue };
            let mut counted = 0;
            for ((_, h), n) in scan.batches.iter().zip(lens) {
                let Some(n) = n else {
                    counted = u64::MAX;
                    break;
                };
                if h.is_control() || (committed && is_aborted(h)) {
                    continue;
                }
                counted += n;
            }
            if counted != u64::MAX && counted != len {
                report.problem(
                    &path,
                    line,
                    format!(
                        "segment {base}'s saved length is {len} bytes, its records make {counted}: `{}` would be wrong from there on",
                        if committed { "committed" } else { "log" }
                    ),
                );
            }
        }
    }
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
    if h.last_offset() - base > i32::MAX as i64 {
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
    findings: &mut IndexFindings,
) {
    let interval = config.index_interval_bytes.max(0) as u64;
    let expected = expected_index(base, scan, interval);
    let index_path = pdir.join(segment_file_name(base, "index"));
    let segment = Segment {
        base,
        scan,
        expected: &expected,
        active,
    };
    check_offset_index(&index_path, &segment, interval, findings);
    let time_path = pdir.join(segment_file_name(base, "timeindex"));
    check_time_index(&time_path, &segment, findings);
}

/// A segment's valid batches, and what they give its indexes.
struct Segment<'a> {
    base: i64,
    scan: &'a LogScan,
    expected: &'a ExpectedIndex,
    active: bool,
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

/// An index file's bytes (`None`: missing), its size checked against
/// its entries' as Kafka's `<class>.sanityCheck` checks it.
fn read_index(path: &Path, entry: usize, class: &str, f: &mut IndexFindings) -> Option<Vec<u8>> {
    let bytes = fs::read(path).ok()?;
    if bytes.len() % entry != 0 {
        f.wrong(
            path,
            bytes.len() as u64,
            format!(
                "size {} is not a whole number of {entry}-byte entries (what `{class}.sanityCheck` rejects; commitfs's load rebuilds it)",
                bytes.len()
            ),
        );
    }
    Some(bytes)
}

fn check_offset_index(path: &Path, seg: &Segment, interval: u64, f: &mut IndexFindings) {
    let Some(bytes) = read_index(path, OFFSET_ENTRY, "OffsetIndex", f) else {
        // `LogSegment.sanityCheck` throws NoSuchFileException: the segment is recovered.
        return f.wrong(
            path,
            0,
            "offset index file is missing: Kafka rebuilds the segment's indexes at load",
        );
    };
    let all: Vec<(i64, u64)> = offset_entries(seg.base, &bytes)
        .map(|e| (e.offset, e.position as u64))
        .collect();
    // No entry is at position 0 (the first batch is never indexed): a zero
    // entry starts the preallocated tail of an index not yet trimmed.
    let real = real_entries(path, &all, (seg.base, 0), OFFSET_ENTRY, seg.active, f);
    let entries = &all[..real];
    // A segment the cleaner wrote may be active again (recovery drops an
    // empty last segment), its appends' entries after the cleaner's: both
    // kinds fit the cleaner's rule.
    if entries == seg.expected.offsets
        || (!entries.is_empty() && cleaner_index(entries, seg.scan, interval))
    {
        return;
    }
    let positions: BTreeMap<u64, i64> = seg
        .scan
        .batches
        .iter()
        .map(|(p, h)| (*p, h.last_offset()))
        .collect();
    let mut valid = true;
    for (i, &(offset, position)) in entries.iter().enumerate() {
        let at = (i * OFFSET_ENTRY) as u64;
        let wrong = match positions.get(&position) {
            None => Some(format!(
                "entry (offset {offset}, position {position}) does not point at a batch in the log"
            )),
            Some(&last) if last != offset => Some(format!(
                "entry offset {offset} but the batch at position {position} ends at offset {last}"
            )),
            _ if i > 0 && (offset <= entries[i - 1].0 || position <= entries[i - 1].1) => Some(
                format!("entry (offset {offset}, position {position}) does not grow"),
            ),
            _ => None,
        };
        if let Some(what) = wrong {
            valid = false;
            f.wrong(path, at, what);
        }
    }
    if entries != seg.expected.offsets {
        let first_diff = entries
            .iter()
            .zip(&seg.expected.offsets)
            .position(|(a, b)| a != b)
            .unwrap_or(real.min(seg.expected.offsets.len()));
        let what = format!(
            "{real} entries where the index rule (index.interval.bytes={interval}) gives {}; first difference at entry {first_diff}",
            seg.expected.offsets.len()
        );
        let at = (first_diff * OFFSET_ENTRY) as u64;
        if valid {
            // Every entry leads a lookup to the right batch: a sparser index
            // (an empty one too) only makes it scan further.
            f.unlike_writer(path, at, format!("{what}; Kafka loads it as it is"));
        } else {
            f.wrong(path, at, what);
        }
    }
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

/// How many of an index's entries come before the zero-filled tail that
/// preallocation leaves in an active segment's index until it is trimmed
/// (all of them in a sealed segment's). A tail that is not all zeros is
/// wrong; an all-zero one is what a crash leaves, but after a clean
/// shutdown Kafka takes its length for entries.
fn real_entries<E: PartialEq + Copy>(
    path: &Path,
    entries: &[E],
    zero: E,
    entry_size: usize,
    active: bool,
    f: &mut IndexFindings,
) -> usize {
    if !active {
        return entries.len();
    }
    let real = entries.iter().take_while(|e| **e != zero).count();
    let at = (real * entry_size) as u64;
    if entries[real..].iter().any(|e| *e != zero) {
        f.wrong(path, at, "non-zero bytes after the last entry");
    } else if real < entries.len() && !f.rebuilds_anyway() {
        f.wrong(
            path,
            at,
            format!(
                "{} zero-filled entries after the last one: an index not trimmed at a clean shutdown, which Kafka reads as entries",
                entries.len() - real
            ),
        );
    }
    real
}

fn check_time_index(path: &Path, seg: &Segment, f: &mut IndexFindings) {
    let (base, scan) = (seg.base, seg.scan);
    let (max_ts, max_ts_offset) = (seg.expected.max_ts, seg.expected.max_ts_offset);
    let Some(bytes) = read_index(path, TIME_ENTRY, "TimeIndex", f) else {
        // `LogLoader.loadSegmentFiles`: created empty, and not rebuilt.
        return f.unlike_writer(
            path,
            0,
            "time index file is missing: Kafka creates it empty at load",
        );
    };
    let all: Vec<(i64, i64)> = time_entries(base, &bytes)
        .map(|e| (e.timestamp, e.offset))
        .collect();
    let real = real_entries(path, &all, (0, base), TIME_ENTRY, seg.active, f);
    let entries = &all[..real];
    if entries.is_empty() && max_ts >= 0 {
        f.unlike_writer(
            path,
            0,
            format!(
                "no entries, where the segment's batches reach timestamp {max_ts}: Kafka loads it as it is, \
                 finds times by scanning the segment, and takes the .log's modification time for its retention"
            ),
        );
    }
    check_time_entries(path, entries, scan, base, f);
    // The entry written when the segment became inactive, or at the clean
    // shutdown for the active one: Kafka's time retention takes the last
    // entry for the segment's largest timestamp.
    let sealed = !seg.active || !f.rebuilds_anyway();
    if sealed
        && max_ts >= 0
        && !entries.is_empty()
        && entries.last() != Some(&(max_ts, max_ts_offset))
    {
        f.wrong(
            path,
            bytes.len() as u64,
            format!("the last entry is not the segment's largest timestamp {max_ts} at offset {max_ts_offset}"),
        );
    }
}

/// Each time index entry against its batch and the entry before.
fn check_time_entries(
    path: &Path,
    entries: &[(i64, i64)],
    scan: &LogScan,
    base: i64,
    f: &mut IndexFindings,
) {
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
    for (i, &(t, o)) in entries.iter().enumerate() {
        let at = (i * TIME_ENTRY) as u64;
        if o < base || o >= next.max(base + 1) {
            f.wrong(
                path,
                at,
                format!("entry offset {o} is outside the segment [{base}, {next})"),
            );
        } else if batch_max.get(&o) != Some(&t) {
            f.wrong(
                path,
                at,
                format!("entry (timestamp {t}, offset {o}) does not match the batch ending at offset {o}"),
            );
        }
        if i > 0 && (t <= entries[i - 1].0 || o < entries[i - 1].1) {
            f.wrong(
                path,
                at,
                format!("entry (timestamp {t}, offset {o}) does not grow"),
            );
        }
    }
}

/// A segment's `.txnindex`, as `TransactionIndex.sanityCheck` reads it at
/// every load, whatever the shutdown: an entry of an unknown version stops
/// the load of the log (Kafka's KafkaException is not one it recovers
/// from), an aborted transaction ending below the segment makes Kafka
/// recover the segment. Then what Kafka's writer (`TransactionIndex.append`,
/// `AbortedTxn` from a completed transaction) never leaves, and Kafka reads
/// as it is, answering fetches wrong through it unless the load rebuilds
/// it: a transaction ending before it begins, last offsets that do not
/// grow, one past the segment's batches; and a partial entry at the end of
/// the active segment's index, after which Kafka appends the next aborted
/// transaction (its channel starts at the file's end), so that every entry
/// from there on is read out of step. A partial entry at the end of a sealed
/// segment's index is only never read.
fn check_txn_index(
    path: &Path,
    (base, next): (i64, Option<i64>),
    active: bool,
    f: &mut IndexFindings,
) {
    let Ok(bytes) = fs::read(path) else {
        return;
    };
    let (entries, error) = read_txn_index(&bytes, &path.display().to_string());
    if let Some(e) = error {
        let at = (entries.len() * ABORTED_TXN_SIZE) as u64;
        f.report
            .problem(path, at, format!("{e}: Kafka cannot load the log"));
    }
    let mut prev_last: Option<i64> = None;
    for (i, txn) in entries.iter().enumerate() {
        let at = (i * ABORTED_TXN_SIZE) as u64;
        let pid = txn.producer_id;
        let (first, last) = (txn.first_offset, txn.last_offset);
        if last < base {
            f.report.problem(
                path,
                at,
                format!(
                    "aborted transaction of producer {pid} ends at offset {last}, below the segment's base offset {base}: Kafka's sanityCheck fails and the segment is recovered"
                ),
            );
        } else if first > last {
            f.wrong(
                path,
                at,
                format!(
                    "aborted transaction of producer {pid} ends at offset {last}, before it begins at {first}"
                ),
            );
        } else if let Some(next) = next.filter(|n| last >= *n) {
            f.wrong(
                path,
                at,
                format!(
                    "aborted transaction of producer {pid} ends at offset {last}, past the segment's batches (next offset {next})"
                ),
            );
        } else if let Some(prev) = prev_last.filter(|p| last <= *p) {
            f.wrong(
                path,
                at,
                format!(
                    "aborted transaction of producer {pid} ends at offset {last}, not after the entry before it ({prev})"
                ),
            );
        }
        prev_last = Some(last);
    }
    let partial = bytes.len() % ABORTED_TXN_SIZE;
    if partial > 0 {
        let at = (bytes.len() - partial) as u64;
        let what = format!(
            "size {} is not a whole number of {ABORTED_TXN_SIZE}-byte entries",
            bytes.len()
        );
        if active {
            f.wrong(
                path,
                at,
                format!(
                    "{what}: Kafka appends the next aborted transaction after the {partial} bytes, and reads every entry from there on out of step"
                ),
            );
        } else {
            f.unlike_writer(
                path,
                at,
                format!(
                    "{what}: Kafka does not read the {partial} bytes after the last whole entry"
                ),
            );
        }
    }
}

/// The producer snapshots (`ProducerStateManager.readSnapshot`): one of an
/// unknown version, or whose CRC does not match, is deleted at load, and the
/// producer state rebuilt from an older one or from the log.
fn check_snapshots(pdir: &Path, report: &mut CheckReport) -> Result<()> {
    let mut paths: Vec<PathBuf> = fs::read_dir(pdir)
        .at(pdir)?
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_str()
                .and_then(parse_segment_file_name)
                .is_some_and(|(_, suffix)| suffix == "snapshot")
        })
        .map(|e| e.path())
        .collect();
    paths.sort();
    for path in paths {
        let Ok(bytes) = fs::read(&path) else {
            report.problem(&path, 0, "producer snapshot cannot be read");
            continue;
        };
        if let Err(e) = read_producer_snapshot(&bytes) {
            report.problem(
                &path,
                0,
                format!("producer snapshot: {e}: Kafka deletes it at load"),
            );
        }
    }
    Ok(())
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
/// later segments) and index rebuilds; and what the load does with a
/// producer snapshot it cannot read: deletes it. Returns what it removed.
pub fn repair_data_dir(
    dir: &Path,
    defaults: &LogConfig,
    report: &CheckReport,
) -> Result<RepairReport> {
    let mut out = RepairReport::default();
    let snapshots: Vec<&Path> = report
        .problems
        .iter()
        .map(|p| p.file.as_path())
        .filter(|f| file_suffix(f) == Some("snapshot") && f.exists())
        .collect();
    let mut lengths: Vec<&Path> = report
        .problems
        .iter()
        .map(|p| p.file.as_path())
        .filter(|f| {
            let name = f.file_name().and_then(|n| n.to_str());
            matches!(name, Some(STREAM_LENGTHS_FILE | COMMITTED_LENGTHS_FILE)) && f.exists()
        })
        .collect();
    lengths.dedup();
    if report.damaged.is_empty() && snapshots.is_empty() && lengths.is_empty() {
        return Ok(out);
    }
    // Held before anything is changed: a mounted directory is refused here,
    // whatever the caller checked before.
    let lock = DataDirLock::acquire(dir)?;
    for f in snapshots {
        disk::remove_file("repair.remove_snapshot", f).at(f)?;
        out.actions.push(format!(
            "removed {}, a producer snapshot Kafka would delete at load",
            f.display()
        ));
    }
    for f in lengths {
        disk::remove_file("repair.remove_stream_lengths", f).at(f)?;
        out.actions.push(format!(
            "removed {}, whose saved stream lengths were wrong: counted again when first needed",
            f.display()
        ));
    }
    if report.damaged.is_empty() {
        return Ok(out);
    }
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
        if matches!(file_suffix(&p.file), Some("index" | "timeindex")) && p.file.exists() {
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

/// The suffix of a segment-named file (`00000000000000000042.index`).
fn file_suffix(path: &Path) -> Option<&str> {
    let name = path.file_name()?.to_str()?;
    parse_segment_file_name(name).map(|(_, suffix)| suffix)
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
