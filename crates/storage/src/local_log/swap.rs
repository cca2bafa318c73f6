//! Kafka's `LogLoader` on the files a log cleaner's swap leaves when it
//! stops part way (`removeTempFilesAndCollectSwapFiles` and the passes
//! after it): `.cleaned` files are dropped (the swap never began), `.swap`
//! files at or above the lowest `.cleaned` are dropped (an unfinished split),
//! the other `.swap` files are completed forward: every other file whose
//! offset lies in the range they cover goes (the segments they replace),
//! then they take their names.
//!
//! A read-only directory is never changed: the same outcome is shown
//! instead, the `.log.swap` files read in place of the segments they replace.

use std::fs::File;
use std::path::Path;

use log::info;

use crate::batch_reader::BatchReader;
use crate::disk;
use crate::error::{IoContext, Result};
use crate::names::parse_segment_file_name;

/// Bytes read at a time when a `.log.swap` is scanned for its end.
const SCAN_CHUNK: usize = 1 << 20;

/// What the swap files of a directory say.
#[derive(Debug, Default)]
pub(super) struct SwapFiles {
    /// `.swap` files to complete (of every kind: log, indexes).
    pub valid: Vec<String>,
    /// `.swap` files of an unfinished split, and every `.cleaned` file.
    pub doomed: Vec<String>,
    /// `[first base, next offset)` the valid `.log.swap` files cover.
    pub range: Option<(i64, i64)>,
}

/// The numeric prefix of a file name, as Kafka's `offsetFromFile` reads it.
fn offset_of(name: &str) -> Option<i64> {
    name.split_once('.')?.0.parse().ok()
}

/// The offset after the last whole batch of a `.log.swap` (Kafka's
/// `readNextOffset` of the segment opened on it), its base when empty.
fn next_offset(path: &Path, base: i64) -> Result<i64> {
    let f = File::open(path).at(path)?;
    let size = f.metadata().at(path)?.len();
    let mut next = base;
    BatchReader::new(&f, path, 0, size, SCAN_CHUNK).for_each_header(|_, h| {
        next = h.next_offset();
        true
    })?;
    Ok(next)
}

/// Kafka's pass 0 and pass 1 over `names`, reading nothing but the
/// valid `.log.swap` files.
pub(super) fn swap_files(dir: &Path, names: &[String]) -> Result<SwapFiles> {
    let min_cleaned = names
        .iter()
        .filter(|n| n.ends_with(".cleaned"))
        .filter_map(|n| offset_of(n))
        .min()
        .unwrap_or(i64::MAX);
    let mut files = SwapFiles::default();
    for name in names {
        if name.ends_with(".cleaned") {
            files.doomed.push(name.clone());
        } else if name.ends_with(".swap") {
            match offset_of(name) {
                Some(o) if o < min_cleaned => files.valid.push(name.clone()),
                _ => files.doomed.push(name.clone()),
            }
        }
    }
    for name in &files.valid {
        if let Some((base, "log.swap")) = parse_segment_file_name(name) {
            let next = next_offset(&dir.join(name), base)?;
            let (lo, hi) = files.range.unwrap_or((i64::MAX, i64::MIN));
            files.range = Some((lo.min(base), hi.max(next)));
        }
    }
    Ok(files)
}

/// Whether `name` is a file a valid swap replaces (Kafka's pass 2).
pub(super) fn replaced(name: &str, range: Option<(i64, i64)>) -> bool {
    match (range, offset_of(name)) {
        (Some((lo, hi)), Some(o)) => !name.ends_with(".swap") && o >= lo && o < hi,
        _ => false,
    }
}

/// Completes or drops the swaps of a writable directory. Returns the
/// first base the completed swaps cover, if any.
pub(super) fn finish_swaps(dir: &Path, names: &[String]) -> Result<Option<i64>> {
    let files = swap_files(dir, names)?;
    for name in &files.doomed {
        let path = dir.join(name);
        info!("Deleting stray temporary file {}", path.display());
        disk::remove_file("loader.swap.remove_doomed", &path).at(&path)?;
    }
    for name in names.iter().filter(|n| replaced(n, files.range)) {
        let path = dir.join(name);
        info!("Deleting segment files {name} that is compacted but has not been deleted yet.");
        disk::remove_file("loader.swap.remove_replaced", &path).at(&path)?;
    }
    for name in &files.valid {
        let path = dir.join(name);
        let target = dir.join(name.trim_end_matches(".swap"));
        info!("Recovering file {name} by renaming from .swap files.");
        disk::rename("loader.swap.rename", &path, &target).at(&target)?;
    }
    Ok(files.range.map(|(lo, _)| lo))
}
