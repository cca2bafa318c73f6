//! Read-only: a partition another process writes (a running broker),
//! brought up to date on each access. What it costs per look:
//! - a `stat` of the partition directory: its mtime moves when the broker
//!   creates a segment (roll), renames one `.deleted` or deletes it
//!   (retention); only then is the directory listed;
//! - a `stat` of the active `.log`: when it grew, the new bytes are read
//!   from the last published end and published batch by batch, whole and
//!   valid only (see `segment/follow.rs`).
//!
//! Sealed segments are never scanned here: a segment sealed by a roll is
//! final, and one that appeared sealed (several rolls between two looks)
//! is opened lazily, as at load.

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::DirEntryExt;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::SystemTime;

use log::info;

use super::{PartitionLog, settings};
use crate::storage::error::{IoContext, Result};
use crate::storage::manager::follow::DirWatch;
use crate::storage::names::parse_segment_file_name;
use crate::storage::segment::{LogSegment, Tail};

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

/// Whether the partition is still there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Followed {
    Live,
    /// Its directory is gone (the broker deleted the partition).
    Vanished,
}

impl PartitionLog {
    /// Brings a read-only partition up to what its directory holds now.
    /// A writable one is its own writer: nothing to follow.
    pub(crate) fn follow(&self) -> Result<Followed> {
        if self.writable {
            return Ok(Followed::Live);
        }
        let mut st = self.follow.lock();
        let mtime = match std::fs::metadata(&self.dir) {
            Ok(m) if m.is_dir() => m.modified().at(&self.dir)?,
            Ok(_) => return Ok(Followed::Vanished),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Followed::Vanished),
            Err(e) => return Err(e).at(&self.dir),
        };
        if st.dir.must_list(mtime) {
            let started = SystemTime::now();
            self.reconcile(&mut st)?;
            st.dir.listed(mtime, started);
        }
        if !self.follow_active(&mut st)? {
            // The active `.log` went or was replaced since the listing.
            self.reconcile(&mut st)?;
            st.dir.forget();
            self.follow_active(&mut st)?;
        }
        self.follow_checkpoints();
        Ok(Followed::Live)
    }

    /// The partition left the tree.
    pub(crate) fn mark_deleted(&self) {
        self.deleted.store(true, Ordering::Release);
    }

    /// Lists the directory and makes the segment map match it: segments
    /// whose `.log` went (retention renamed it `.deleted`, or deleted it)
    /// leave, segments after the active one (a roll) join, segments whose
    /// `.log` was replaced are opened again.
    fn reconcile(&self, st: &mut FollowState) -> Result<()> {
        let mut present: HashMap<i64, u64> = HashMap::new();
        // The log cleaner renames the old `.log` `.deleted` before its
        // `.log.swap` takes the name: such a segment is being replaced, not gone.
        let mut swapping = HashSet::new();
        for entry in std::fs::read_dir(&self.dir).at(&self.dir)? {
            let entry = entry.at(&self.dir)?;
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
        let known: Vec<i64> = self.segments.read().keys().copied().collect();
        let gone: Vec<i64> = known
            .iter()
            .copied()
            .filter(|b| !present.contains_key(b) && !swapping.contains(b))
            .collect();
        // Until the swap ends, the old file's inode stays the one to compare with.
        for base in swapping {
            if let Some(ino) = st.inodes.get(&base) {
                present.entry(base).or_insert(*ino);
            }
        }
        // The active segment's file is watched by `follow_active`.
        let sealed = &known[..known.len().saturating_sub(1)];
        let replaced: Vec<i64> = sealed
            .iter()
            .copied()
            .filter(|b| {
                let (old, new) = (st.inodes.get(b), present.get(b));
                old.is_some() && new.is_some() && old != new
            })
            .collect();
        self.drop_segments(&gone, &replaced);
        let last = self.segments.read().keys().next_back().copied();
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
        st.emptied |= last.is_none() && !known.is_empty();
        if !new.is_empty() {
            self.follow_roll(&new, st.emptied)?;
            st.emptied = false;
        }
        st.inodes = present;
        Ok(())
    }

    /// Segments that went, and segments whose file was replaced (opened
    /// again, lazily). The log start offset moves up to the first segment left.
    fn drop_segments(&self, gone: &[i64], replaced: &[i64]) {
        if gone.is_empty() && replaced.is_empty() {
            return;
        }
        let config = self.config();
        {
            let mut segs = self.segments.write();
            for base in gone {
                segs.remove(base);
                info!("Segment {base} of {} is gone", self.name);
            }
            for base in replaced {
                if let Some(old) = segs.get(base) {
                    let seg = LogSegment::open(
                        old.path().to_path_buf(),
                        *base,
                        settings(&config),
                        false,
                        self.health.clone(),
                    );
                    if old.is_active() {
                        seg.mark_active();
                    }
                    segs.insert(*base, Arc::new(seg));
                    info!("Segment {base} of {} was replaced", self.name);
                }
            }
        }
        let mut stream = self.stream.lock();
        for base in gone.iter().chain(replaced) {
            stream.forget(*base);
        }
        drop(stream);
        *self.recent_batch.lock() = None;
        if let Some(first) = self.segments.read().keys().next().copied() {
            self.log_start_offset.fetch_max(first, Ordering::AcqRel);
        }
    }

    /// A roll (or several) since the last look: the active segment is read
    /// to its end and sealed, then the new segments join, the last one
    /// active. Those between are final and opened lazily.
    fn follow_roll(&self, new: &[i64], restarted: bool) -> Result<()> {
        if let Some(old) = self.active_segment() {
            if let Some((len, _)) = old.stat_name()?
                && let Tail::Grew(next) = old.follow_tail(len, self.log_end_offset())?
            {
                self.log_end_offset.fetch_max(next, Ordering::AcqRel);
            }
            old.seal_followed()?;
        }
        let config = self.config();
        let s = settings(&config);
        let Some((&active, sealed)) = new.split_last() else {
            return Ok(());
        };
        let mut segs = self.segments.write();
        for base in sealed {
            let path = LogSegment::log_path(&self.dir, *base);
            let seg = LogSegment::open(path, *base, s, false, self.health.clone());
            segs.insert(*base, Arc::new(seg));
        }
        let path = LogSegment::log_path(&self.dir, active);
        let seg = LogSegment::followed(path, active, s, self.health.clone());
        segs.insert(active, Arc::new(seg));
        drop(segs);
        self.tally.forget();
        if restarted {
            let first = new[0];
            self.log_end_offset.store(active, Ordering::Release);
            self.log_start_offset.store(first, Ordering::Release);
        }
        // An empty new segment starts at the log end (Kafka rolls at it).
        self.log_end_offset.fetch_max(active, Ordering::AcqRel);
        info!("Followed a roll of {} to segment {active}", self.name);
        Ok(())
    }

    /// Publishes what the writer appended to the active segment. Returns
    /// false when its `.log` is gone or is another file than the one
    /// followed (the caller lists the directory again).
    fn follow_active(&self, st: &mut FollowState) -> Result<bool> {
        let Some(active) = self.active_segment() else {
            return Ok(true);
        };
        let Some((len, ino)) = active.stat_name()? else {
            return Ok(false);
        };
        let replaced = st
            .active
            .is_some_and(|(base, seen)| base == active.base_offset && seen != ino);
        st.active = Some((active.base_offset, ino));
        st.inodes.insert(active.base_offset, ino);
        if replaced {
            self.reload_active(&active)?;
            return Ok(true);
        }
        match active.follow_tail(len, self.log_end_offset())? {
            Tail::Same => {}
            Tail::Grew(next) => {
                self.tally.forget();
                self.log_end_offset.fetch_max(next, Ordering::AcqRel);
            }
            Tail::Shrank => self.reload_active(&active)?,
        }
        Ok(true)
    }

    /// The active `.log` was cut below what was published (a follower
    /// truncating its log) or replaced by another file: it is read again
    /// from its start, and the log end may move back.
    fn reload_active(&self, old: &LogSegment) -> Result<()> {
        let config = self.config();
        let seg = LogSegment::open(
            old.path().to_path_buf(),
            old.base_offset,
            settings(&config),
            false,
            self.health.clone(),
        );
        seg.mark_active();
        let next = seg
            .recover(old.base_offset, || Ok(()))?
            .next_offset
            .unwrap_or(old.base_offset);
        self.segments.write().insert(old.base_offset, Arc::new(seg));
        self.stream.lock().forget(old.base_offset);
        *self.recent_batch.lock() = None;
        self.tally.forget();
        self.log_end_offset.store(next, Ordering::Release);
        let end = self.log_end_offset();
        self.log_start_offset.fetch_min(end, Ordering::AcqRel);
        info!(
            "Segment {} of {} was cut underneath: read again, log end offset {next}",
            old.base_offset, self.name
        );
        Ok(())
    }

    /// The log start offset and recovery point the broker checkpointed.
    fn follow_checkpoints(&self) {
        let end = self.log_end_offset();
        if let Some(o) = self
            .checkpoints
            .log_start_offset(&self.topic, self.partition)
        {
            self.log_start_offset
                .fetch_max(o.min(end), Ordering::AcqRel);
        }
        if let Some(o) = self.checkpoints.recovery_point(&self.topic, self.partition) {
            self.recovery_point.store(o.min(end), Ordering::Release);
        }
    }
}
