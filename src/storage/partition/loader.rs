//! Kafka's `LogLoader`: opens a partition directory, removes stray files,
//! and recovers the segments an unclean shutdown may have left damaged.

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::path::Path;
use std::sync::Arc;

use log::{info, warn};

use super::{LoadContext, PROPERTIES_FILE, PartitionLog, settings};
use crate::storage::config::{LogConfig, parse_properties};
use crate::storage::disk;
use crate::storage::error::{IoContext, Result, StorageError};
use crate::storage::health::Health;
use crate::storage::names::{parse_partition_name, parse_segment_file_name, segment_file_name};
use crate::storage::progress::Progress;
use crate::storage::segment::{IndexSettings, LogSegment};
use crate::storage::stream::Stream;

impl PartitionLog {
    /// Loads a partition directory (Kafka's `LogLoader`). A load that fails
    /// gives a partition offline from the start, with the failure as its
    /// cause, so that the other partitions mount; a remount tries again.
    pub(crate) fn load(dir: &Path, ctx: &LoadContext) -> Result<Arc<PartitionLog>> {
        let name = dir
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        let (topic, partition) = parse_partition_name(&name)?;
        let health = Arc::new(Health::new(&name));
        match Self::load_segments_of(dir, ctx, &name, (topic, partition), &health) {
            Ok(log) => Ok(log),
            Err(e) => {
                health.fail("loading the log", &e);
                Self::offline_placeholder(dir, ctx, health)
            }
        }
    }

    fn load_segments_of(
        dir: &Path,
        ctx: &LoadContext,
        name: &str,
        (topic, partition): (String, u32),
        health: &Arc<Health>,
    ) -> Result<Arc<PartitionLog>> {
        let name = name.to_string();
        let overrides = read_overrides(dir);
        let config = effective_config(ctx.defaults, &overrides, &name);
        let (mut segments, names) =
            load_segments(dir, ctx, (&topic, partition), settings(&config), health)?;
        let first_base = segments.keys().next().copied().unwrap_or(0);
        let mut log_start = ctx
            .checkpoints
            .log_start_offset(&topic, partition)
            .unwrap_or(first_base)
            .max(first_base);
        let mut recovery_point = ctx
            .checkpoints
            .recovery_point(&topic, partition)
            .unwrap_or(0);
        if let Some(active) = segments.values().last() {
            active.mark_active();
        }
        // Stream lengths of segments that recovery may change are recomputed.
        let mut invalid_from = None;
        if !ctx.clean_shutdown {
            invalid_from = Some(
                segments
                    .range(..=recovery_point)
                    .next_back()
                    .map_or(i64::MIN, |(b, _)| *b),
            );
            recover_segments(&name, &mut segments, recovery_point, ctx.progress)?;
            // A load whose index rebuild failed (and only logged it).
            health.check()?;
        }
        let stream = Stream::load(dir, invalid_from);
        let log_end = match segments.values().last() {
            Some(active) => {
                active.activate()?;
                active.read_next_offset()?
            }
            None => log_start,
        };
        log_start = log_start.min(log_end);
        recovery_point = recovery_point.min(log_end);
        if ctx.clean_shutdown {
            recovery_point = log_end;
        }
        let log = Self::new_arc(
            dir,
            ctx,
            overrides,
            config,
            segments,
            (log_start, log_end, recovery_point),
            stream,
            health.clone(),
        )?;
        log.load_producer_state(&names)?;
        Ok(log)
    }
}

/// Segments by base offset.
type Segments = BTreeMap<i64, Arc<LogSegment>>;

/// The segments of a partition directory, after stray files are removed;
/// a writable directory with none gets its first one at the log start
/// offset. Also the directory's names, as listed.
fn load_segments(
    dir: &Path,
    ctx: &LoadContext,
    (topic, partition): (&str, u32),
    s: IndexSettings,
    health: &Arc<Health>,
) -> Result<(Segments, Vec<String>)> {
    // One listing serves the whole load: a clean mount of many segments
    // costs a stat per segment and opens nothing.
    let mut names = list_dir(dir)?;
    if ctx.writable && remove_stray_files(dir, &names)? {
        names = list_dir(dir)?;
    }
    // Each name is parsed once: a partition may hold thousands of segments.
    let mut logs: Vec<(i64, String)> = Vec::new();
    let mut indexed = HashSet::new();
    for name in names.iter().cloned() {
        match parse_segment_file_name(&name) {
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
        let start = ctx
            .checkpoints
            .log_start_offset(topic, partition)
            .unwrap_or(0)
            .max(0);
        segments.insert(
            start,
            Arc::new(LogSegment::create(dir, start, s, health.clone())?),
        );
        indexed.insert(start);
    }
    // A missing index is rebuilt at load, as Kafka does (the rest load lazily).
    for seg in segments.values() {
        if !indexed.contains(&seg.base_offset) {
            drop(seg.indexes()?);
        }
    }
    Ok((segments, names))
}

fn read_overrides(dir: &Path) -> BTreeMap<String, String> {
    fs::read_to_string(dir.join(PROPERTIES_FILE))
        .map(|t| parse_properties(&t))
        .unwrap_or_default()
}

/// Applies each persisted override that is still valid; a bad one is logged and skipped.
fn effective_config(
    defaults: &LogConfig,
    overrides: &BTreeMap<String, String>,
    name: &str,
) -> LogConfig {
    let mut config = defaults.clone();
    for (k, v) in overrides {
        if let Err(e) = config.set(k, v) {
            warn!("Ignoring config override of partition {name}: {e}");
        }
    }
    config
}

/// Kafka's `LogLoader.removeTempFilesAndCollectSwapFiles`: drop `.deleted`,
/// `.cleaned` and `.tmp` files, finish `.swap` renames, and delete index files
/// whose `.log` is gone.
fn remove_stray_files(dir: &Path, names: &[String]) -> Result<bool> {
    let mut changed = false;
    // Bases that have a `.log`, or one about to be completed from `.log.swap`.
    let mut logs = HashSet::new();
    for name in names {
        if let Some((base, "log" | "log.swap")) = parse_segment_file_name(name) {
            logs.insert(base);
        }
    }
    for name in names {
        let path = dir.join(name);
        if name.ends_with(".deleted") || name.ends_with(".cleaned") || name.ends_with(".tmp") {
            info!("Deleting stray temporary file {}", path.display());
            disk::remove_file("loader.stray.remove", &path).at(&path)?;
            changed = true;
        } else if let Some(real) = name.strip_suffix(".swap") {
            info!("Completing swap of {}", path.display());
            let target = dir.join(real);
            disk::rename("loader.swap.rename", &path, &target).at(&target)?;
            if let Some((base, "log")) = parse_segment_file_name(real) {
                for suffix in ["index", "timeindex"] {
                    let index = dir.join(segment_file_name(base, suffix));
                    match disk::remove_file("loader.swap.remove_index", &index) {
                        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                            return Err(StorageError::io(&index, e));
                        }
                        _ => {}
                    }
                }
            }
            changed = true;
        } else if let Some((base, "index" | "timeindex")) = parse_segment_file_name(name)
            && !logs.contains(&base)
        {
            info!("Deleting index file {} with no log file", path.display());
            disk::remove_file("loader.orphan_index.remove", &path).at(&path)?;
            changed = true;
        }
    }
    Ok(changed)
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
            // Kafka recreates the active segment's indexes preallocated.
            drop(active.indexes()?);
        }
    }
    Ok(())
}
