//! Read-only: a log another process writes (a running broker), brought up
//! to date on each access. What it costs per look:
//! - a `stat` of the partition directory: its mtime moves when the broker
//!   creates a segment (roll), renames one `.deleted` or deletes it
//!   (retention); only then is the directory listed;
//! - a `stat` of the active `.log`: when it grew, the new bytes are read
//!   from the last published end and published batch by batch, whole and
//!   valid only (see `segment/follow_active.rs`).
//!
//! Sealed segments are never scanned here: a segment sealed by a roll is
//! final, and one that appeared sealed (several rolls between two looks)
//! is opened lazily, as at load.
//!
//! Following changes the log, so it goes through the writer lock (nothing
//! else writes a read-only log). A segment whose file changed underneath
//! (replaced, cut) is opened again as a new segment, so nothing learned of
//! the old one applies to it (see `stream`). What it learns that is the
//! partition's (a log start offset the writer moved, the tail moved) it
//! hands up in [`Seen`].

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::DirEntryExt;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::SystemTime;

use log::info;

use super::{LogWriter, settings};
use crate::config::LogConfig;
use crate::dir_watch::DirWatch;
use crate::error::{IoContext, Result};
use crate::names::parse_segment_file_name;
use crate::segment::{LogSegment, Tail};

/// What a partition knows of its directory between two looks.
#[derive(Debug, Default)]
pub(crate) struct FollowState {
    dir: DirWatch,
    /// Inode of each segment's `.log` at the last listing: a segment whose
    /// name now holds another file was replaced (the log cleaner's swap).
    inodes: HashMap<i64, u64>,
    /// (base, inode) of the active `.log` as last followed.
    active: Option<(i64, u64)>,
    /// Every segment went: the segments that come next start the log again.
    emptied: bool,
}

/// One look at the directory.
struct Look<'a> {
    /// What the log knew of the directory, brought up to date.
    known: FollowState,
    /// What segments are opened with.
    config: &'a LogConfig,
    seen: Seen,
}

/// What a look at the directory found that is the partition's.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    /// The directory is gone (the writer deleted the partition).
    pub vanished: bool,
    /// The active segment grew, rolled or was read again: what was counted
    /// of it as it was appended is stale.
    pub tail_moved: bool,
    /// The log start offset as the directory now shows it.
    pub log_start: i64,
}

impl LogWriter<'_> {
    /// Brings a read-only log up to what its directory holds now, given the
    /// partition's log start offset as it stands. What it saw is handed up
    /// even when it failed part way: the changes before the failure stand.
    pub fn follow(&mut self, config: &LogConfig, log_start: i64) -> (Seen, Result<()>) {
        let mut look = Look {
            known: std::mem::take(&mut self.state.follow),
            config,
            seen: Seen {
                log_start,
                ..Seen::default()
            },
        };
        let r = self.look(&mut look);
        self.state.follow = look.known;
        (look.seen, r)
    }

    fn look(&mut self, look: &mut Look) -> Result<()> {
        let dir = &self.log.dir;
        let mtime = match std::fs::metadata(dir) {
            Ok(m) if m.is_dir() => m.modified().at(dir)?,
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e).at(dir),
            _ => {
                look.seen.vanished = true;
                return Ok(());
            }
        };
        if look.known.dir.must_list(mtime) {
            let started = SystemTime::now();
            self.reconcile(look)?;
            look.known.dir.listed(mtime, started);
        }
        if !self.follow_active(look)? {
            // The active `.log` went or was replaced since the listing.
            self.reconcile(look)?;
            look.known.dir.forget();
            self.follow_active(look)?;
        }
        self.follow_checkpoints(&mut look.seen);
        Ok(())
    }

    /// Lists the directory and makes the segment map match it: segments
    /// whose `.log` went (retention renamed it `.deleted`, or deleted it)
    /// leave, segments after the active one (a roll) join, segments whose
    /// `.log` was replaced are opened again.
    fn reconcile(&mut self, look: &mut Look) -> Result<()> {
        let dir = &self.log.dir;
        let inodes = &look.known.inodes;
        let mut present: HashMap<i64, u64> = HashMap::new();
        // The log cleaner renames the old `.log` `.deleted` before its
        // `.log.swap` takes the name: such a segment is being replaced, not gone.
        let mut swapping = HashSet::new();
        for entry in std::fs::read_dir(dir).at(dir)? {
            let entry = entry.at(dir)?;
            match entry.file_name().to_str().and_then(parse_segment_file_name) {
                Some((base, "log")) => {
                    present.insert(base, entry.ino());
                }
                Some((base, "log.swap")) => {
                    swapping.insert(base);
                }
                _ => {}
            }
        }
        let known = self.log.segment_bases();
        let gone: Vec<i64> = known
            .iter()
            .copied()
            .filter(|b| !present.contains_key(b) && !swapping.contains(b))
            .collect();
        // Until the swap ends, the old file's inode stays the one to compare with.
        for base in swapping {
            if let Some(ino) = inodes.get(&base) {
                present.entry(base).or_insert(*ino);
            }
        }
        // The active segment's file is watched by `follow_active`, unless
        // the writer rolled past it since the last look: then it is sealed
        // here, and may have been cleaned and swapped after the roll too
        // (the new file must be the one sealed, not the one followed).
        let active = self.log.active_segment_base();
        let rolled = present.keys().any(|b| active.is_some_and(|a| *b > a));
        let checked = match rolled {
            true => &known[..],
            false => &known[..known.len().saturating_sub(1)],
        };
        // Replaced: the name holds another file than the one last listed,
        // or (a segment never listed since it was opened, at load) than the
        // one the segment has open.
        let replaced: Vec<i64> = checked
            .iter()
            .copied()
            .filter(|b| {
                let Some(new) = present.get(b) else {
                    return false;
                };
                let old = inodes
                    .get(b)
                    .copied()
                    .or_else(|| self.log.segments.get(*b)?.open_ino());
                old.is_some_and(|old| old != *new)
            })
            .collect();
        self.drop_segments(&gone, &replaced, rolled, look);
        let last = self.log.active_segment_base();
        let mut new: Vec<i64> = present
            .keys()
            .copied()
            .filter(|b| last.is_none_or(|l| *b > l))
            .collect();
        new.sort_unstable();
        // Every segment went, and others came (at this look or a later
        // one): the log was emptied and started again at the new first
        // segment (Kafka's `truncateFullyAndStartAt`), so its offsets may
        // move back.
        look.known.emptied |= last.is_none() && !known.is_empty();
        if !new.is_empty() {
            self.follow_roll(&new, look.known.emptied, look)?;
            look.known.emptied = false;
        }
        look.known.inodes = present;
        Ok(())
    }

    /// Segments that went, and segments whose file was replaced (opened
    /// again, lazily; the active one stays active unless the writer `rolled`
    /// past it). The log start offset moves up to the first segment left.
    fn drop_segments(&mut self, gone: &[i64], replaced: &[i64], rolled: bool, look: &mut Look) {
        if gone.is_empty() && replaced.is_empty() {
            return;
        }
        let log = self.log;
        for base in gone {
            log.segments.remove(*base);
            info!("Segment {base} of {} is gone", log.name());
        }
        for base in replaced {
            if let Some(old) = log.segments.get(*base) {
                let seg = LogSegment::open(
                    old.path().to_path_buf(),
                    *base,
                    settings(look.config),
                    false,
                    log.health.clone(),
                );
                if old.is_active() && !rolled {
                    seg.mark_active();
                }
                log.segments.insert(Arc::new(seg));
                info!("Segment {base} of {} was replaced", log.name());
            }
        }
        let seen = &mut look.seen;
        if let Some(first) = log.first_segment_base() {
            seen.log_start = seen.log_start.max(first);
        }
    }

    /// A roll (or several) since the last look: the active segment is read
    /// to its end and sealed, then the new segments join, the last one
    /// active. Those between are final and opened lazily.
    fn follow_roll(&mut self, new: &[i64], restarted: bool, look: &mut Look) -> Result<()> {
        let log = self.log;
        if let Some(old) = log.active_segment() {
            if let Some((len, _)) = old.stat_name()?
                && let Tail::Grew(next) = old.follow_tail(len, log.log_end_offset())?
            {
                log.log_end_offset.fetch_max(next, Ordering::AcqRel);
            }
            old.seal_followed()?;
        }
        let s = settings(look.config);
        let Some((&active, sealed)) = new.split_last() else {
            return Ok(());
        };
        for base in sealed {
            let path = LogSegment::log_path(&log.dir, *base);
            let seg = LogSegment::open(path, *base, s, false, log.health.clone());
            log.segments.insert(Arc::new(seg));
        }
        let path = LogSegment::log_path(&log.dir, active);
        let seg = LogSegment::followed(path, active, s, log.health.clone());
        log.segments.insert(Arc::new(seg));
        look.seen.tail_moved = true;
        if restarted {
            log.log_end_offset.store(active, Ordering::Release);
            look.seen.log_start = new[0];
        }
        // An empty new segment starts at the log end (Kafka rolls at it).
        log.log_end_offset.fetch_max(active, Ordering::AcqRel);
        info!("Followed a roll of {} to segment {active}", log.name());
        Ok(())
    }

    /// Publishes what the writer appended to the active segment. Returns
    /// false when its `.log` is gone or is another file than the one
    /// followed (the caller lists the directory again).
    fn follow_active(&mut self, look: &mut Look) -> Result<bool> {
        let log = self.log;
        let Some(active) = log.active_segment() else {
            return Ok(true);
        };
        let Some((len, ino)) = active.stat_name()? else {
            return Ok(false);
        };
        let st = &mut look.known;
        let replaced = st
            .active
            .is_some_and(|(base, seen)| base == active.base_offset && seen != ino);
        st.active = Some((active.base_offset, ino));
        st.inodes.insert(active.base_offset, ino);
        if replaced {
            self.reload_active(&active, look)?;
            return Ok(true);
        }
        match active.follow_tail(len, log.log_end_offset())? {
            Tail::Same => {}
            Tail::Grew(next) => {
                look.seen.tail_moved = true;
                log.log_end_offset.fetch_max(next, Ordering::AcqRel);
            }
            Tail::Shrank => self.reload_active(&active, look)?,
        }
        Ok(true)
    }

    /// The active `.log` was cut below what was published (a follower
    /// truncating its log) or replaced by another file: it is read again
    /// from its start, and the log end may move back.
    fn reload_active(&mut self, old: &LogSegment, look: &mut Look) -> Result<()> {
        let log = self.log;
        let seg = LogSegment::open(
            old.path().to_path_buf(),
            old.base_offset,
            settings(look.config),
            false,
            log.health.clone(),
        );
        seg.mark_active();
        let next = seg
            .recover(old.base_offset, || Ok(()))?
            .next_offset
            .unwrap_or(old.base_offset);
        log.segments.insert(Arc::new(seg));
        let seen = &mut look.seen;
        seen.tail_moved = true;
        log.log_end_offset.store(next, Ordering::Release);
        seen.log_start = seen.log_start.min(next);
        info!(
            "Segment {} of {} was cut underneath: read again, log end offset {next}",
            old.base_offset,
            log.name()
        );
        Ok(())
    }

    /// The log start offset and recovery point the broker checkpointed.
    fn follow_checkpoints(&mut self, seen: &mut Seen) {
        let log = self.log;
        let end = log.log_end_offset();
        let (topic, partition) = (log.topic(), log.partition());
        if let Some(o) = log.checkpoints.log_start_offset(topic, partition) {
            seen.log_start = seen.log_start.max(o.min(end));
        }
        if let Some(o) = log.checkpoints.recovery_point(topic, partition) {
            log.recovery_point.store(o.min(end), Ordering::Release);
        }
    }
}
