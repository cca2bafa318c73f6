//! The offset and time indexes against Kafka's index rule, stated here apart
//! from the writer's.

use super::*;

/// Compares the index files with what Kafka's rule gives for the valid batches.
pub(super) fn check_indexes(
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
