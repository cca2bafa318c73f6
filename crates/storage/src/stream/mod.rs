//! The consumer views of a partition. `cat log`: every record from the log
//! start offset, its value bytes then `\n`, in offset order, control records
//! skipped — what `kafka-console-consumer --from-beginning` prints.
//! `cat committed`: the same for a `read_committed` consumer — the records
//! below the last stable offset, those of aborted transactions left out.
//!
//! Positions count from the current log start offset: when retention or
//! delete-records moves the start, the stream (and its size) shrinks from
//! the front.
//!
//! Nothing here scans a sealed segment at mount time. A segment's stream
//! length is computed once (on first need), then kept in a small file in the
//! partition directory; a sparse map from stream position to batch, built on
//! first read of a segment, makes a read at any position one lookup plus a
//! short scan.
//!
//! **How what is learned stays true.** Whatever changes a segment's bytes
//! other than an append (a cleaned segment swapped in at its base, recovery
//! cutting a torn tail, a read-only mount opening a segment its writer
//! replaced) makes a new [`LogSegment`]. So everything learned of a segment
//! is kept against that segment's identity ([`LogSegment::id`]) and size,
//! never its base alone: a length, a map, a cursor or the prefix below the
//! log start counted on one segment is never used for another, whichever
//! path replaced it. A saved length, read back at a load, has no identity
//! yet: it is taken only for a segment of the size it was counted at, and
//! is bound to that segment at its first use. An append grows the active
//! segment only, which the append tally follows.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::sync::{Arc, Weak};

use log::warn;

mod cursor;
mod filter;

use cursor::{Cursor, Cursors};
pub(crate) use filter::View;
use filter::{Admit, Filter};

use super::checkpoint::write_atomically;
use super::error::Result;
use super::segment::LogSegment;
use commitfs_record::Batch;
use commitfs_record::values::{ValueCursor, walk_values};

/// Per-segment stream lengths of `log`: `base_offset length` lines.
pub const STREAM_LENGTHS_FILE: &str = "commitfs.streamlen";
/// The same for `committed`, of the segments wholly below the last stable
/// offset (their committed length no longer changes).
pub const COMMITTED_LENGTHS_FILE: &str = "commitfs.committedlen";
/// A map point roughly every this many `.log` bytes.
const MAP_INTERVAL: u64 = 64 * 1024;
/// Segment maps kept in memory at once; lengths are kept for all.
const MAX_MAPS: usize = 64;
/// Bytes a stream read reads from a segment at a time: a `cat` read's worth.
const STREAM_CHUNK: usize = 1 << 20;

/// A point of the sparse map: a batch start.
#[derive(Clone, Copy, Debug)]
struct MapPoint {
    stream_pos: u64,
    file_pos: u64,
    base_offset: i64,
}

/// Sparse map of one segment, extended as the segment grows.
struct SegmentMap {
    /// The segment it maps: another segment at the same base (one the log
    /// cleaner swapped in) has a map of its own.
    segment: Weak<LogSegment>,
    points: Vec<MapPoint>,
    /// Stream bytes of the batches covered so far.
    len: u64,
    /// File bytes covered so far.
    covered: u64,
    /// The last offset of the batch at `covered` when the view ended
    /// there (the last stable offset): nothing to map until it moves past.
    stopped_at: Option<i64>,
    since_point: u64,
    last_used: u64,
}

impl SegmentMap {
    fn new(seg: &Arc<LogSegment>) -> Self {
        let base_offset = seg.base_offset;
        SegmentMap {
            segment: Arc::downgrade(seg),
            points: vec![MapPoint {
                stream_pos: 0,
                file_pos: 0,
                base_offset,
            }],
            len: 0,
            covered: 0,
            stopped_at: None,
            since_point: 0,
            last_used: 0,
        }
    }

    /// Brings the map up to the segment's published end, or to the end of
    /// the view if that comes first.
    fn extend(&mut self, seg: &LogSegment, filter: &mut Filter) -> Result<()> {
        if self.covered >= seg.size()? {
            return Ok(());
        }
        if let (Some(stopped), Some(end)) = (self.stopped_at, filter.end())
            && end <= stopped
        {
            return Ok(());
        }
        self.stopped_at = None;
        seg.for_each_batch(self.covered, |pos, batch| {
            let admit = filter.admit(&batch.header)?;
            if admit == Admit::Stop {
                self.stopped_at = Some(batch.header.last_offset());
                return Ok(false);
            }
            if self.since_point >= MAP_INTERVAL {
                self.points.push(MapPoint {
                    stream_pos: self.len,
                    file_pos: pos,
                    base_offset: batch.header.base_offset,
                });
                self.since_point = 0;
            }
            if admit == Admit::Take {
                self.len += batch_stream_len(batch)?;
            }
            self.covered = pos + batch.size() as u64;
            self.since_point += batch.size() as u64;
            Ok(true)
        })
    }

    fn point_for_stream_pos(&self, pos: u64) -> MapPoint {
        let i = self.points.partition_point(|p| p.stream_pos <= pos);
        self.points[i.saturating_sub(1)]
    }

    fn point_for_offset(&self, offset: i64) -> MapPoint {
        let i = self.points.partition_point(|p| p.base_offset <= offset);
        self.points[i.saturating_sub(1)]
    }
}

/// Stream bytes of one batch: each record's value plus `\n`; none for control batches.
pub fn batch_stream_len(batch: &Batch) -> Result<u64> {
    if batch.header.is_control() {
        return Ok(0);
    }
    let section = batch.uncompressed_section()?;
    Ok(commitfs_record::values::stream_len(
        &batch.header,
        &section,
    )?)
}

/// Stream bytes appended to the active segment, counted at append time, so
/// that neither `stat log` nor a roll has to scan what was just written.
/// Kept apart from [`Stream`] so an append never waits behind a stream read.
#[derive(Default)]
pub(crate) struct AppendTally {
    inner: parking_lot::Mutex<TallyState>,
}

#[derive(Default)]
struct TallyState {
    /// (segment base, file bytes counted, stream bytes of them)
    active: Option<(i64, u64, u64)>,
    /// Segments sealed since the stream last looked, with their stream
    /// lengths; `None` when not counted, so that any older saved length is
    /// dropped.
    sealed: Vec<(Counted, Option<u64>)>,
}

/// A sealed segment, as a length was counted on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Counted {
    base: i64,
    /// Its [`LogSegment::id`].
    id: u64,
    size: u64,
}

impl AppendTally {
    /// A new, empty active segment: everything in it will be counted.
    pub fn start_segment(&self, base: i64) {
        self.inner.lock().active = Some((base, 0, 0));
    }

    /// An active segment of `size` bytes whose stream length is known.
    pub fn resume(&self, base: i64, size: u64, len: u64) {
        self.inner.lock().active = Some((base, size, len));
    }

    /// Stops counting (after an append was undone); lengths are computed again.
    pub fn forget(&self) {
        self.inner.lock().active = None;
    }

    /// A batch of `batch_bytes` written at `pos` of segment `base`.
    pub fn appended(&self, base: i64, pos: u64, batch_bytes: u64, stream_bytes: u64) {
        let mut t = self.inner.lock();
        match &mut t.active {
            Some((b, covered, len)) if *b == base && *covered == pos => {
                *covered += batch_bytes;
                *len += stream_bytes;
            }
            _ => t.active = None,
        }
    }

    /// Segment `base` (identity `id`) of `size` bytes became inactive.
    pub fn sealed(&self, base: i64, id: u64, size: u64) {
        let mut t = self.inner.lock();
        let len = match t.active {
            Some((b, covered, len)) if b == base && covered == size => Some(len),
            _ => None,
        };
        t.sealed.push((Counted { base, id, size }, len));
        t.active = None;
    }

    fn active_len(&self, base: i64, size: u64) -> Option<u64> {
        match self.inner.lock().active {
            Some((b, covered, len)) if b == base && covered == size => Some(len),
            _ => None,
        }
    }

    fn take_sealed(&self) -> Vec<(Counted, Option<u64>)> {
        std::mem::take(&mut self.inner.lock().sealed)
    }
}

/// A segment of the log as the lengths are saved against it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Live {
    pub base: i64,
    /// Its [`LogSegment::id`].
    pub id: u64,
    /// Its size, where known without touching the file.
    pub size: Option<u64>,
    /// The inode number of the `.log` it holds open, if it opened one.
    pub ino: Option<u64>,
}

impl Live {
    pub fn of(seg: &LogSegment) -> Live {
        Live {
            base: seg.base_offset,
            id: seg.id(),
            size: seg.known_size(),
            ino: seg.open_ino(),
        }
    }
}

/// A sealed segment's length in a view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Known {
    len: u64,
    /// The segment's size it was counted at: a segment sealed, then active
    /// again after a crash (the empty one after it gone), then sealed
    /// again must not keep it, nor a segment of another size that took
    /// its base. `None` in a file saved before sizes were kept for `log`:
    /// not trusted, counted again.
    size: Option<u64>,
    /// The [`LogSegment::id`] it was counted on; `None` when read back
    /// from the file, until the segment of its size and file takes it.
    segment: Option<u64>,
    /// The inode number of the `.log` it was counted on: a cleaned segment
    /// can have the size of the one it replaced, and a length read back
    /// from the file is trusted only for the same file. `None` when not
    /// known yet (learned at the save) or in a file saved before inodes
    /// were kept: not trusted, counted again.
    ino: Option<u64>,
}

impl Known {
    /// Whether this length is `seg`'s.
    fn fits(&self, seg: &LogSegment) -> Result<bool> {
        if self.size != Some(seg.size()?) {
            return Ok(false);
        }
        Ok(match self.segment {
            Some(id) => id == seg.id(),
            None => self.ino.is_some() && self.ino == seg.file_ino()?,
        })
    }
}

/// What one view has learned of a partition's segments.
struct ViewState {
    /// Where the lengths of sealed segments are kept: `base length size inode` lines.
    file: &'static str,
    /// Known lengths of sealed segments (persisted).
    sealed: BTreeMap<i64, Known>,
    dirty: bool,
    maps: BTreeMap<i64, SegmentMap>,
    /// (log start offset, first segment's id) -> bytes of that segment's
    /// records below the log start offset.
    prefix: Option<((i64, u64), u64)>,
    clock: u64,
    /// Where recent reads stopped, for the reads that go on from there.
    cursors: Cursors,
}

impl ViewState {
    fn new(file: &'static str, sealed: BTreeMap<i64, Known>, dirty: bool) -> ViewState {
        ViewState {
            file,
            sealed,
            dirty,
            maps: BTreeMap::new(),
            prefix: None,
            clock: 0,
            cursors: Cursors::default(),
        }
    }

    /// Loads the persisted lengths, dropping those of segments at or after
    /// `invalid_from` (segments recovery may have changed).
    fn load(dir: &Path, file: &'static str, invalid_from: Option<i64>) -> ViewState {
        let mut sealed = BTreeMap::new();
        if let Ok(text) = fs::read_to_string(dir.join(file)) {
            for line in text.lines() {
                let mut it = line.split_whitespace();
                if let (Some(Ok(b)), Some(Ok(len))) = (
                    it.next().map(str::parse::<i64>),
                    it.next().map(str::parse::<u64>),
                ) {
                    let size = it.next().and_then(|z| z.parse().ok());
                    let ino = it.next().and_then(|i| i.parse().ok());
                    sealed.insert(
                        b,
                        Known {
                            len,
                            size,
                            segment: None,
                            ino,
                        },
                    );
                }
            }
        }
        let before = sealed.len();
        if let Some(from) = invalid_from {
            sealed.retain(|b, _| *b < from);
        }
        // Only a length counted on the file the name holds now: the data
        // directory copied or restored elsewhere (new inodes) counts again.
        sealed.retain(|b, k| {
            use std::os::unix::fs::MetadataExt;
            let path = dir.join(crate::names::segment_file_name(*b, "log"));
            k.ino.is_some() && fs::metadata(path).is_ok_and(|m| Some(m.ino()) == k.ino)
        });
        let dirty = sealed.len() != before;
        ViewState::new(file, sealed, dirty)
    }

    fn map(&mut self, seg: &Arc<LogSegment>, filter: &mut Filter) -> Result<&mut SegmentMap> {
        self.clock += 1;
        let clock = self.clock;
        if !self.maps.contains_key(&seg.base_offset)
            && self.maps.len() >= MAX_MAPS
            && let Some(oldest) = self
                .maps
                .iter()
                .min_by_key(|(_, m)| m.last_used)
                .map(|(b, _)| *b)
        {
            self.maps.remove(&oldest);
        }
        if self
            .maps
            .get(&seg.base_offset)
            .is_some_and(|m| !std::ptr::eq(m.segment.as_ptr(), Arc::as_ptr(seg)))
        {
            self.maps.remove(&seg.base_offset);
        }
        let map = self
            .maps
            .entry(seg.base_offset)
            .or_insert_with(|| SegmentMap::new(seg));
        map.last_used = clock;
        map.extend(seg, filter)?;
        Ok(map)
    }

    /// A segment's stream length: persisted for sealed segments, else
    /// computed. `tally` counts the active segment's, where the view's
    /// length is what was appended.
    fn segment_len(
        &mut self,
        seg: &Arc<LogSegment>,
        tally: Option<&AppendTally>,
        filter: &mut Filter,
    ) -> Result<u64> {
        if !seg.is_active()
            && let Some(k) = self.sealed.get_mut(&seg.base_offset)
        {
            if k.fits(seg)? {
                k.segment = Some(seg.id());
                return Ok(k.len);
            }
            // Counted on another segment at this base, or at another size.
            self.sealed.remove(&seg.base_offset);
            self.dirty = true;
        }
        if seg.is_active()
            && let Some(tally) = tally
            && let Some(l) = tally.active_len(seg.base_offset, seg.size()?)
        {
            return Ok(l);
        }
        let size = seg.size()?;
        let map = self.map(seg, filter)?;
        let (len, whole) = (map.len, map.covered >= size);
        if !seg.is_active() && whole {
            let known = Known {
                len,
                size: Some(size),
                segment: Some(seg.id()),
                ino: seg.file_ino()?,
            };
            self.sealed.insert(seg.base_offset, known);
            self.dirty = true;
        }
        Ok(len)
    }

    /// Bytes of the first segment's records below the log start offset.
    fn prefix(
        &mut self,
        first: &Arc<LogSegment>,
        log_start: i64,
        filter: &mut Filter,
    ) -> Result<u64> {
        if log_start <= first.base_offset {
            return Ok(0);
        }
        let key = (log_start, first.id());
        if let Some((k, v)) = self.prefix
            && k == key
        {
            return Ok(v);
        }
        let point = self.map(first, filter)?.point_for_offset(log_start);
        let mut bytes = point.stream_pos;
        let mut cut = false;
        first.for_each_batch(point.file_pos, |_, batch| {
            if batch.header.base_offset >= log_start {
                return Ok(false);
            }
            match filter.admit(&batch.header)? {
                Admit::Stop => {
                    // An open transaction's batch below the log start:
                    // what lies below it is counted once it is decided.
                    cut = true;
                    return Ok(false);
                }
                Admit::Skip => return Ok(true),
                Admit::Take => {}
            }
            for r in batch.records()? {
                if r.offset >= log_start {
                    break;
                }
                bytes += r.value.as_ref().map_or(0, |v| v.len() as u64) + 1;
            }
            Ok(true)
        })?;
        if !cut {
            self.prefix = Some((key, bytes));
        }
        Ok(bytes)
    }

    fn len(
        &mut self,
        segments: &[Arc<LogSegment>],
        log_start: i64,
        tally: Option<&AppendTally>,
        filter: &mut Filter,
    ) -> Result<u64> {
        let mut total = 0;
        for seg in segments {
            if filter.end().is_some_and(|end| seg.base_offset >= end) {
                break;
            }
            total += self.segment_len(seg, tally, filter)?;
        }
        let prefix = match segments.first() {
            Some(first) => self.prefix(first, log_start, filter)?,
            None => 0,
        };
        Ok(total.saturating_sub(prefix))
    }

    fn read(
        &mut self,
        segments: &[Arc<LogSegment>],
        log_start: i64,
        pos: u64,
        buf: &mut [u8],
        tally: Option<&AppendTally>,
        filter: &mut Filter,
    ) -> Result<usize> {
        let Some(first) = segments.first() else {
            return Ok(0);
        };
        let mut p = pos + self.prefix(first, log_start, filter)?;
        let mut filled = 0;
        for seg in segments {
            if filled == buf.len() || filter.end().is_some_and(|end| seg.base_offset >= end) {
                break;
            }
            let len = self.segment_len(seg, tally, filter)?;
            if p >= len {
                p -= len;
                continue;
            }
            filled = self.read_segment(seg, p, buf, filled, filter)?;
            p = 0;
        }
        Ok(filled)
    }

    /// Copies the stream bytes of `seg` from its stream position `p` into
    /// `buf[filled..]`; returns how full `buf` is. A read that stops inside
    /// the segment leaves a cursor for the next one to go on from.
    fn read_segment(
        &mut self,
        seg: &Arc<LogSegment>,
        mut p: u64,
        buf: &mut [u8],
        mut filled: usize,
        filter: &mut Filter,
    ) -> Result<usize> {
        let (entry, entry_filled) = (p, filled);
        let (batch_pos, mut resume, mut s) = match self.cursors.take(seg, p) {
            Some(c) => (c.batch_pos, Some(c.record), c.record_stream_pos),
            None => {
                let point = self.map(seg, filter)?.point_for_stream_pos(p);
                (point.file_pos, None, point.stream_pos)
            }
        };
        let mut window = cursor::take_window(seg);
        let mut stopped = None;
        let walked = seg.for_each_batch_in(&mut window, (batch_pos, STREAM_CHUNK), |at, batch| {
            let from = resume.take().unwrap_or_default();
            match filter.admit(&batch.header)? {
                Admit::Stop => return Ok(false),
                Admit::Skip => return Ok(true),
                Admit::Take => {}
            }
            let section = batch.uncompressed_section()?;
            let stop = walk_values(&batch.header, &section, from, |value| {
                let value = value.unwrap_or(&[]);
                let rec_len = value.len() as u64 + 1;
                if s + rec_len <= p {
                    s += rec_len;
                    return true;
                }
                if filled == buf.len() {
                    return false;
                }
                // Copy the part of `value\n` from p onwards.
                let from = (p - s) as usize;
                if from < value.len() {
                    let n = (value.len() - from).min(buf.len() - filled);
                    buf[filled..filled + n].copy_from_slice(&value[from..from + n]);
                    filled += n;
                    p += n as u64;
                    if filled == buf.len() {
                        return false;
                    }
                }
                buf[filled] = b'\n';
                filled += 1;
                s += rec_len;
                p = s;
                true
            })?;
            stopped = Some(match stop {
                Some(record) => (at, record),
                None => (at + batch.size() as u64, ValueCursor::default()),
            });
            Ok(stop.is_none() && filled < buf.len())
        });
        cursor::put_window(seg, window);
        walked?;
        if filled == buf.len()
            && let Some((batch_pos, record)) = stopped
        {
            let at = entry + (filled - entry_filled) as u64;
            self.cursors
                .put(Cursor::new(seg, at, batch_pos, (record, s)));
        }
        Ok(filled)
    }

    /// Takes the lengths of segments sealed by appends since the last look.
    fn absorb(&mut self, tally: &AppendTally) {
        for (counted, len) in tally.take_sealed() {
            let changed = match len {
                Some(len) => {
                    let known = Known {
                        len,
                        size: Some(counted.size),
                        segment: Some(counted.id),
                        ino: None,
                    };
                    self.sealed.insert(counted.base, known) != Some(known)
                }
                None => self.sealed.remove(&counted.base).is_some(),
            };
            self.dirty |= changed;
        }
    }

    fn save(&mut self, dir: &Path, live: &[Live], writable: bool) -> Result<()> {
        let before = self.sealed.len();
        let live_at = |b: &i64| {
            live.binary_search_by_key(b, |l| l.base)
                .ok()
                .map(|i| live[i])
        };
        // A length counted on a segment that was replaced since goes here
        // too, before it could be saved under the base of the one now there,
        // and so does a length read back for a segment that has grown since
        // (active again after a crash, then appended to).
        self.sealed.retain(|b, k| {
            live_at(b).is_some_and(|l| match k.segment {
                Some(id) => id == l.id,
                None => {
                    l.size.is_none_or(|z| k.size == Some(z))
                        && l.ino.is_none_or(|i| k.ino == Some(i))
                }
            })
        });
        // A length counted on a live segment is saved against its file:
        // the one it holds open, or (not opened yet: an empty segment
        // sealed at a close) the one its name holds.
        for (b, k) in self.sealed.iter_mut() {
            if k.ino.is_none()
                && let Some(l) = live_at(b)
                && k.segment == Some(l.id)
            {
                k.ino = l.ino.or_else(|| {
                    use std::os::unix::fs::MetadataExt;
                    let path = dir.join(crate::names::segment_file_name(*b, "log"));
                    fs::metadata(path).ok().map(|m| m.ino())
                });
                self.dirty |= k.ino.is_some();
            }
        }
        self.maps.retain(|b, _| live_at(b).is_some());
        if self.sealed.len() != before {
            self.dirty = true;
        }
        if !self.dirty || !writable {
            return Ok(());
        }
        let text: String = self
            .sealed
            .iter()
            .filter_map(|(b, k)| Some(format!("{b} {} {} {}\n", k.len, k.size?, k.ino?)))
            .collect();
        match write_atomically(&dir.join(self.file), text.as_bytes()) {
            Ok(()) => {
                self.dirty = false;
                Ok(())
            }
            Err(e) => {
                warn!("Could not save stream lengths in {}: {e}", dir.display());
                Err(e)
            }
        }
    }
}

/// The stream state of one partition (under the partition's stream lock):
/// `log` and `committed`.
pub(crate) struct Stream {
    all: ViewState,
    committed: ViewState,
}

impl Stream {
    /// No lengths known (an offline partition's).
    pub fn empty() -> Stream {
        Stream {
            all: ViewState::new(STREAM_LENGTHS_FILE, BTreeMap::new(), false),
            committed: ViewState::new(COMMITTED_LENGTHS_FILE, BTreeMap::new(), false),
        }
    }

    /// Loads the persisted lengths, dropping those of segments at or after
    /// `invalid_from` (segments recovery may have changed).
    pub fn load(dir: &Path, invalid_from: Option<i64>) -> Stream {
        Stream {
            all: ViewState::load(dir, STREAM_LENGTHS_FILE, invalid_from),
            committed: ViewState::load(dir, COMMITTED_LENGTHS_FILE, invalid_from),
        }
    }

    /// The view's state and the tally of appends where it counts them.
    fn parts<'s, 't>(
        &'s mut self,
        view: &View,
        tally: &'t AppendTally,
    ) -> (&'s mut ViewState, Option<&'t AppendTally>) {
        match view {
            View::All => {
                self.all.absorb(tally);
                (&mut self.all, Some(tally))
            }
            // An append changes the committed length of the active segment
            // only once the last stable offset moves past it.
            View::Committed { .. } => (&mut self.committed, None),
        }
    }

    /// The stream's length from the log start offset.
    pub fn len(
        &mut self,
        segments: &[Arc<LogSegment>],
        log_start: i64,
        tally: &AppendTally,
        view: View,
    ) -> Result<u64> {
        let mut filter = Filter::new(view);
        let (state, tally) = self.parts(&view, tally);
        state.len(segments, log_start, tally, &mut filter)
    }

    /// Copies stream bytes at `pos` into `buf`; returns how many.
    pub fn read(
        &mut self,
        segments: &[Arc<LogSegment>],
        log_start: i64,
        pos: u64,
        buf: &mut [u8],
        tally: &AppendTally,
        view: View,
    ) -> Result<usize> {
        let mut filter = Filter::new(view);
        let (state, tally) = self.parts(&view, tally);
        state.read(segments, log_start, pos, buf, tally, &mut filter)
    }

    /// The persisted `log` length of segment `base`, if it was counted at
    /// `size` bytes.
    pub fn known_len(&self, base: i64, size: u64) -> Option<u64> {
        self.all
            .sealed
            .get(&base)
            .filter(|k| k.size == Some(size))
            .map(|k| k.len)
    }

    /// Takes the lengths of segments sealed by appends since the last look.
    pub fn absorb(&mut self, tally: &AppendTally) {
        self.all.absorb(tally);
    }

    /// Forgets segments that are gone or replaced (`live`: each segment's
    /// base and id, in base order) and persists new sealed lengths. A
    /// failed write keeps them to be saved again.
    pub fn save(&mut self, dir: &Path, live: &[Live], writable: bool) -> Result<()> {
        let all = self.all.save(dir, live, writable);
        let committed = self.committed.save(dir, live, writable);
        all.and(committed)
    }
}
