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
use commitfs_record::state_files::{
    ABORTED_TXN_SIZE, AbortedTxn, read_producer_snapshot, read_txn_index,
};
use commitfs_record::{BatchHeader, RecordError};

mod indexes;
mod repair;
mod side_files;
mod stream_lengths;

use indexes::check_indexes;
pub use repair::{RepairReport, repair_data_dir};
use side_files::{check_checkpoints, check_snapshots, check_txn_index};
use stream_lengths::check_stream_lengths;

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
    recovery_points: checkpoint::PartitionOffsets,
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
