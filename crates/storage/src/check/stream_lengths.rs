//! The saved stream lengths against the records they were counted from.

use super::*;

/// The saved stream lengths (`commitfs.streamlen`, `commitfs.committedlen`)
/// against the records: a length the load would take (saved for a segment
/// of the size the segment has, and its file) that its records do not make
/// is a problem,
/// since `cat log`, its size and every read past the first wrong segment
/// would be off; one the load would not take (no size, another size,
/// another file, no such segment) is a note. `committed` leaves out control batches and the
/// batches of aborted transactions (every `.txnindex` of the partition).
pub(super) fn check_stream_lengths(
    pdir: &Path,
    scans: &[(i64, LogScan)],
    report: &mut CheckReport,
) {
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
            let Some(SavedLength {
                base,
                len,
                size,
                ino,
            }) = parse_line(entry)
            else {
                report.note(
                    &path,
                    line,
                    format!("line {entry:?} is not `base length size inode`: ignored at load"),
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
            let meta = fs::metadata(&log_path).ok();
            if let Some(why) = not_taken(base, size, ino, meta.as_ref()) {
                report.note(&path, line, why);
                continue;
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

/// A saved line: a segment's base and length, then the size and inode it
/// was counted at where the line has them (lines of older versions do not).
struct SavedLength {
    base: i64,
    len: u64,
    size: Option<u64>,
    ino: Option<u64>,
}

fn parse_line(entry: &str) -> Option<SavedLength> {
    let fields: Vec<&str> = entry.split_whitespace().collect();
    let num = |i: usize| fields.get(i).map(|f| f.parse::<u64>().ok());
    match (fields.len(), fields.first().map(|b| b.parse::<i64>().ok())) {
        (2..=4, Some(Some(base))) => match (num(1), num(2), num(3)) {
            (Some(Some(len)), None | Some(Some(_)), None | Some(Some(_))) => Some(SavedLength {
                base,
                len,
                size: num(2).flatten(),
                ino: num(3).flatten(),
            }),
            _ => None,
        },
        _ => None,
    }
}

/// Why the load would not take a length saved for segment `base` at
/// `size` bytes on file `ino`, given the segment file's metadata; none
/// when it would.
fn not_taken(
    base: i64,
    size: Option<u64>,
    ino: Option<u64>,
    meta: Option<&fs::Metadata>,
) -> Option<String> {
    let file_size = meta.map_or(0, |m| m.len());
    let file_ino = meta.map(std::os::unix::fs::MetadataExt::ino);
    match (size, ino) {
        (None, _) => Some(format!(
            "segment {base}'s length has no size: counted again at load"
        )),
        (Some(z), _) if z != file_size => Some(format!(
            "segment {base}'s length was counted at {z} bytes, the segment has {file_size}: counted again at load"
        )),
        (_, None) => Some(format!(
            "segment {base}'s length names no file: counted again at load"
        )),
        (_, Some(i)) if Some(i) != file_ino => Some(format!(
            "segment {base}'s length was counted on another file (inode {i}) of its size: counted again at load"
        )),
        _ => None,
    }
}
