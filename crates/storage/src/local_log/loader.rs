//! Kafka's `LogLoader`: opens a log directory, removes stray files, and
//! recovers the segments an unclean shutdown may have left damaged. It
//! reads no file of the partition's own (config overrides, producer
//! snapshots, stream lengths): the partition loads those around it.

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::path::Path;
use std::sync::Arc;

use log::{info, warn};

use super::segments::LogSegments;
use super::swap;
use super::{LocalLog, LogId, settings};
use crate::checkpoint::Checkpoints;
use crate::config::LogConfig;
use crate::deleter::Deleter;
use crate::disk;
use crate::error::{IoContext, Result, StorageError};
use crate::flusher::Flusher;
use crate::health::Health;
use crate::names::parse_segment_file_name;
use crate::progress::Progress;
use crate::segment::{IndexSettings, LogSegment};

/// What the data directory gives each log it opens.
pub(crate) struct DirContext<'a> {
    pub checkpoints: &'a Arc<Checkpoints>,
    pub flusher: &'a Flusher,
    /// Removes the files of segments the log cleaner replaced, later.
    pub deleter: &'a Deleter,
    /// The clean-shutdown marker was found: nothing is recovered.
    pub clean_shutdown: bool,
    pub writable: bool,
    pub progress: Progress<'a>,
}

/// A log as loaded, with what its partition needs to know of the load.
pub(crate) struct Loaded {
    pub log: Arc<LocalLog>,
    /// The directory's names, as listed before the segments were opened.
    pub names: Vec<String>,
    /// The base of the first segment recovery went over (`i64::MIN` for
    /// all): what was learned of it and of those after it is stale. `None`
    /// after a clean shutdown.
    pub recovered_from: Option<i64>,
}

impl LocalLog {
    /// Loads a log directory (Kafka's `LogLoader`): stray files removed,
    /// the segments opened, and after an unclean shutdown, those from the
    /// recovery point on recovered. A writable directory with no segment
    /// gets one at `empty_start`, where an empty log also ends.
    pub(crate) fn load(
        dir: &Path,
        ctx: &DirContext,
        config: &LogConfig,
        health: &Arc<Health>,
        empty_start: i64,
    ) -> Result<Loaded> {
        let id = LogId::of(dir)?;
        let (mut segments, names, swapped) =
            load_segments(dir, ctx, settings(config), health, empty_start)?;
        let mut recovery_point = ctx
            .checkpoints
            .recovery_point(&id.topic, id.partition)
            .unwrap_or(0);
        if let Some(active) = segments.values().last() {
            active.mark_active();
        }
        // What a completed swap replaced is new to the partition too.
        let mut recovered_from = swapped;
        if !ctx.clean_shutdown {
            // Kafka recovers from the segment holding the recovery point,
            // or from the first one when the point is below them all (the
            // log start moved past it): its base, not the lowest offset,
            // so that producer state starts from a snapshot at or below it.
            let from = segments
                .range(..=recovery_point)
                .next_back()
                .or_else(|| segments.iter().next())
                .map_or(i64::MIN, |(b, _)| *b);
            recovered_from = Some(recovered_from.map_or(from, |s: i64| s.min(from)));
            recover_segments(&id.name, &mut segments, recovery_point, ctx.progress)?;
            // A load whose index rebuild failed (and only logged it).
            health.check()?;
        }
        let log_end = match segments.values().last() {
            Some(active) => {
                active.activate()?;
                active.read_next_offset()?
            }
            None => empty_start,
        };
        recovery_point = recovery_point.min(log_end);
        if ctx.clean_shutdown {
            recovery_point = log_end;
        }
        let log = Self::new(
            dir,
            ctx,
            LogSegments::new(segments),
            (log_end, recovery_point),
            health.clone(),
        )?;
        Ok(Loaded {
            log,
            names,
            recovered_from,
        })
    }

    /// Creates a new, empty log directory with its first segment and its
    /// checkpoint entries. All or nothing: a failure removes the directory
    /// again.
    pub(crate) fn create(
        dir: &Path,
        ctx: &DirContext,
        config: &LogConfig,
        health: &Arc<Health>,
    ) -> Result<Arc<LocalLog>> {
        let id = LogId::of(dir)?;
        disk::create_dir("partition.create.mkdir", dir).at(dir)?;
        let made = (|| {
            let seg = LogSegment::create(dir, 0, settings(config), health.clone())?;
            ctx.checkpoints
                .set_recovery_point(&id.topic, id.partition, 0)?;
            ctx.checkpoints
                .set_log_start_offset(&id.topic, id.partition, 0)?;
            Ok::<_, StorageError>(seg)
        })();
        let seg = match made {
            Ok(seg) => seg,
            Err(e) => {
                // Left behind, the directory would load at the next mount
                // as a partition whose mkdir failed.
                if let Err(r) = disk::remove_dir_all("partition.create.cleanup", dir) {
                    log::error!(
                        "Could not remove {} after a failed create ({e}): {r}",
                        dir.display()
                    );
                    return Err(StorageError::io(dir, r));
                }
                return Err(e);
            }
        };
        let segments = LogSegments::new(BTreeMap::from([(0, Arc::new(seg))]));
        Self::new(dir, ctx, segments, (0, 0), health.clone())
    }

    /// The log of a partition whose load failed: no segments, offline from
    /// the start (its health names the failure).
    pub(crate) fn offline(
        dir: &Path,
        ctx: &DirContext,
        health: Arc<Health>,
    ) -> Result<Arc<LocalLog>> {
        Self::new(dir, ctx, LogSegments::new(BTreeMap::new()), (0, 0), health)
    }
}

/// Segments by base offset.
type Segments = BTreeMap<i64, Arc<LogSegment>>;

/// The segments of a log directory, after stray files are removed; a
/// writable directory with none gets its first one at `empty_start`. Also
/// the directory's names, as listed, and the first base a swap completed
/// at this load covers.
fn load_segments(
    dir: &Path,
    ctx: &DirContext,
    s: IndexSettings,
    health: &Arc<Health>,
    empty_start: i64,
) -> Result<(Segments, Vec<String>, Option<i64>)> {
    // One listing serves the whole load: a clean mount of many segments
    // costs a stat per segment and opens nothing.
    let mut names = list_dir(dir)?;
    let mut swapped = None;
    // Read-only, a swap left part way is shown as its completion would leave it.
    let mut swap_range = None;
    let mut valid_swaps = Vec::new();
    if ctx.writable {
        let (changed, from) = remove_stray_files(dir, &names)?;
        swapped = from;
        if changed {
            names = list_dir(dir)?;
        }
    } else if names.iter().any(|n| n.ends_with(".swap")) {
        let swaps = swap::swap_files(dir, &names)?;
        (swap_range, valid_swaps) = (swaps.range, swaps.valid);
    }
    // Each name is parsed once: a partition may hold thousands of segments.
    let mut logs: Vec<(i64, String)> = Vec::new();
    let mut indexed = HashSet::new();
    for name in names.iter().cloned() {
        match parse_segment_file_name(&name) {
            Some((_, "log")) if swap::replaced(&name, swap_range) => {}
            Some((base, "log.swap")) if valid_swaps.contains(&name) => logs.push((base, name)),
            Some((base, "log")) => logs.push((base, name)),
            Some((base, "index")) => {
                indexed.insert(base);
            }
            _ => {}
        }
    }
    logs.sort_unstable_by_key(|(base, _)| *base);
    let mut segments = BTreeMap::new();
    for (base, name) in logs {
        let seg = LogSegment::open(dir.join(name), base, s, ctx.writable, health.clone());
        segments.insert(base, Arc::new(seg));
    }
    if segments.is_empty() && ctx.writable {
        segments.insert(
            empty_start,
            Arc::new(LogSegment::create(dir, empty_start, s, health.clone())?),
        );
        indexed.insert(empty_start);
    }
    // A missing index is rebuilt at load, as Kafka does (the rest load lazily).
    for seg in segments.values() {
        if !indexed.contains(&seg.base_offset) {
            drop(seg.indexes()?);
        }
    }
    Ok((segments, names, swapped))
}

/// Kafka's `LogLoader.removeTempFilesAndCollectSwapFiles` and the passes
/// after it: `.deleted` and `.tmp` files go, swaps are completed or
/// dropped (`swap.rs`), index files whose `.log` is gone go. Returns
/// whether anything changed, and the first base a completed swap covers.
fn remove_stray_files(dir: &Path, names: &[String]) -> Result<(bool, Option<i64>)> {
    let mut changed = false;
    for name in names {
        let path = dir.join(name);
        if name.ends_with(".deleted") || name.ends_with(".tmp") {
            info!("Deleting stray temporary file {}", path.display());
            disk::remove_file("loader.stray.remove", &path).at(&path)?;
            changed = true;
        }
    }
    let live: Vec<String> = names
        .iter()
        .filter(|n| !n.ends_with(".deleted") && !n.ends_with(".tmp"))
        .cloned()
        .collect();
    let swapped = swap::finish_swaps(dir, &live)?;
    let live = if live
        .iter()
        .any(|n| n.ends_with(".swap") || n.ends_with(".cleaned"))
    {
        changed = true;
        list_dir(dir)?
    } else {
        live
    };
    let logs: HashSet<i64> = live
        .iter()
        .filter_map(|n| match parse_segment_file_name(n) {
            Some((base, "log")) => Some(base),
            _ => None,
        })
        .collect();
    for name in &live {
        if let Some((base, "index" | "timeindex")) = parse_segment_file_name(name)
            && !logs.contains(&base)
        {
            let path = dir.join(name);
            info!("Deleting index file {} with no log file", path.display());
            disk::remove_file("loader.orphan_index.remove", &path).at(&path)?;
            changed = true;
        }
    }
    Ok((changed, swapped))
}

fn list_dir(dir: &Path) -> Result<Vec<String>> {
    Ok(fs::read_dir(dir)
        .at(dir)?
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect())
}

/// Kafka's unclean-shutdown recovery: every segment from the one holding the
/// recovery point onward is validated and re-indexed; a segment cut short
/// has every later segment deleted, before the cut, so that a recovery that
/// fails part way meets the same damage at the next load.
fn recover_segments(
    name: &str,
    segments: &mut BTreeMap<i64, Arc<LogSegment>>,
    recovery_point: i64,
    progress: Progress,
) -> Result<()> {
    let started = std::time::Instant::now();
    let first = segments
        .range(..=recovery_point)
        .next_back()
        .map(|(b, _)| *b)
        .unwrap_or(i64::MIN);
    let bases: Vec<i64> = segments.range(first..).map(|(b, _)| *b).collect();
    let mut min_offset = segments
        .range(..first)
        .next_back()
        .map_or(i64::MIN, |(_, s)| s.base_offset);
    for (i, base) in bases.iter().enumerate() {
        let Some(seg) = segments.get(base).cloned() else {
            continue;
        };
        progress.report(&format!(
            "Recovering unflushed segment {base}. {i}/{} recovered for {name} in {} ms.",
            bases.len(),
            started.elapsed().as_millis()
        ));
        let later: Vec<Arc<LogSegment>> =
            segments.range(base + 1..).map(|(_, s)| s.clone()).collect();
        let result = seg.recover(min_offset, || {
            for s in &later {
                warn!(
                    "Deleting segment {} of {name} as it comes after a truncated segment",
                    s.base_offset
                );
                s.delete_files()?;
            }
            Ok(())
        })?;
        if result.truncated_bytes > 0 {
            warn!(
                "Found invalid messages in log segment {} at byte offset {}: truncated {} bytes during recovery of {name}",
                seg.path().display(),
                seg.size()?,
                result.truncated_bytes
            );
            for s in &later {
                segments.remove(&s.base_offset);
            }
            break;
        }
        min_offset = result.next_offset.unwrap_or(*base);
    }
    // An emptied segment after the first is dropped, so the active one holds the log end.
    while segments.len() > 1 {
        let Some((&base, last)) = segments.iter().next_back() else {
            break;
        };
        if last.size()? > 0 {
            break;
        }
        last.delete_files()?;
        segments.remove(&base);
    }
    if let Some(active) = segments.values().last() {
        active.mark_active();
        if active.size()? == 0 && active.base_offset > 0 {
            // Kafka recreates the active segment's indexes at their full length.
            drop(active.indexes()?);
        }
    }
    Ok(())
}
