//! The files beside the segments: transaction indexes, producer snapshots,
//! checkpoints.

use super::*;

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
pub(super) fn check_txn_index(
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
pub(super) fn check_snapshots(pdir: &Path, report: &mut CheckReport) -> Result<()> {
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

pub(super) fn check_checkpoints(
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
