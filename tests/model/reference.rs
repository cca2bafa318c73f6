//! The reference model: partitions as lists of records, with log start and
//! end offsets, segments, configs and open handles. It is small on purpose
//! and shares nothing with the implementation but the README's rules.
//!
//! What it models:
//! - a partition is its records from offset 0 on (records below the log
//!   start stay in the model: a kept segment still holds them, and their
//!   timestamps still count for retention);
//! - segments by their batches: a roll of a non-empty active segment starts
//!   a new one at the log end; retention and `delete-records` delete whole
//!   sealed segments from the front; the log start only moves up;
//! - lines written to `log` as records (README "Appending to `log`"), packed
//!   into batches of at most `max.message.bytes` (uncompressed sizes);
//! - timestamps: the tree stamps each append with the wall clock. The model
//!   keeps the window [before, after] of each append, checks the timestamp
//!   the tree shows lies in it, and from then on uses it (`time/<ms>`,
//!   `retention.ms`). It assumes the clock does not step back during a run.
//!
//! What it leaves out, so that generated configs never trigger them:
//! size- and time-based rolls (`segment.bytes` >= 1 MiB against appends of
//! a few KiB, `segment.ms` - `segment.jitter.ms` of an hour or more) and a
//! full index (`segment.index.bytes` >= 4096). `append` asserts the first.

use std::collections::{BTreeMap, HashMap};

use super::configs::Configs;
use super::spec::{self, DeleteArg};

pub type Rec = (Option<Vec<u8>>, Vec<u8>);

/// One append (one write, or one close with a held line).
#[derive(Clone, Debug)]
pub struct Append {
    pub before: i64,
    pub after: i64,
    /// Learned from the tree once seen, checked to lie in [before, after].
    pub ts: Option<i64>,
}

#[derive(Clone, Debug)]
pub struct Record {
    pub key: Option<Vec<u8>>,
    pub value: Vec<u8>,
    pub append: usize,
    pub batch_base: i64,
    /// Its batch's timestamp type is `LogAppendTime`.
    pub log_append_time: bool,
}

#[derive(Clone, Debug)]
pub struct Batch {
    pub base: i64,
    pub last: i64,
    pub codec: u8,
    /// Known for uncompressed batches (Kafka's layout); learned from the
    /// `.log` framing for compressed ones.
    pub size: Option<u64>,
    pub append: usize,
}

#[derive(Clone, Debug)]
pub struct Segment {
    pub base: i64,
    pub batches: Vec<Batch>,
    /// The `.index` and `.timeindex` preallocation while it is active:
    /// `segment.index.bytes` rounded down to whole entries, as it was when
    /// the segment was created or last loaded.
    pub prealloc: (u64, u64),
}

#[derive(Clone, Debug)]
pub struct Partition {
    /// Which incarnation of the name: handles keep theirs after an rmdir.
    pub incarnation: u64,
    pub records: Vec<Record>,
    pub log_start: i64,
    pub segments: Vec<Segment>,
    pub configs: Configs,
    /// The recovery point is at least this (explicit flushes, clean loads);
    /// a roll's background flush may move it further, up to the log end.
    pub rp_min: i64,
    /// `index.interval.bytes` was changed: the offline check, which holds
    /// every entry to the value of now, no longer applies.
    pub interval_changed: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    Roll,
    Flush,
    DeleteRecords,
}

#[derive(Clone, Debug)]
pub enum HandleKind {
    Log { partial: Vec<u8> },
    Control(Control),
    Config(&'static str),
}

#[derive(Clone, Debug)]
pub struct Handle {
    pub part: String,
    pub incarnation: u64,
    pub kind: HandleKind,
}

#[derive(Default)]
pub struct Model {
    pub partitions: BTreeMap<String, Partition>,
    /// Deleted partitions that open handles still hold.
    pub graveyard: HashMap<u64, Partition>,
    pub appends: Vec<Append>,
    pub handles: Vec<Handle>,
    next_incarnation: u64,
}

fn prealloc(c: &Configs) -> (u64, u64) {
    let b = c.long("segment.index.bytes") as u64;
    (b / 8 * 8, b / 12 * 12)
}

impl Segment {
    fn new(base: i64, c: &Configs) -> Segment {
        Segment {
            base,
            batches: Vec::new(),
            prealloc: prealloc(c),
        }
    }

    /// Bytes of its `.log`, once every batch size is known.
    pub fn size(&self) -> Option<u64> {
        self.batches.iter().map(|b| b.size).sum()
    }

    /// The largest timestamp of its batches (Kafka keeps it per segment).
    pub fn max_ts(&self, appends: &[Append]) -> Option<i64> {
        self.batches
            .iter()
            .map(|b| {
                appends[b.append]
                    .ts
                    .expect("timestamps are learned after each step")
            })
            .max()
    }
}

impl Partition {
    pub fn log_end(&self) -> i64 {
        self.records.len() as i64
    }

    pub fn live(&self) -> impl Iterator<Item = (i64, &Record)> {
        self.records
            .iter()
            .enumerate()
            .skip(self.log_start as usize)
            .map(|(i, r)| (i as i64, r))
    }

    pub fn active(&self) -> &Segment {
        self.segments
            .last()
            .expect("a partition has an active segment")
    }

    /// The consumer stream: each live value and `\n`.
    pub fn stream(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for (_, r) in self.live() {
            out.extend_from_slice(&r.value);
            out.push(b'\n');
        }
        out
    }

    /// Lines as records, as the console producer reads them; EINVAL for a
    /// line without the separator when `parse.key` is on.
    pub fn to_records(&self, lines: &[&[u8]]) -> Result<Vec<Rec>, i32> {
        if !self.configs.parse_key() {
            return Ok(lines.iter().map(|l| (None, l.to_vec())).collect());
        }
        let sep = self.configs.separator();
        lines
            .iter()
            .map(|l| {
                let at = l
                    .windows(sep.len())
                    .position(|w| w == sep)
                    .ok_or(libc::EINVAL)?;
                Ok((Some(l[..at].to_vec()), l[at + sep.len()..].to_vec()))
            })
            .collect()
    }

    /// Lines would be records without a key, which a compacted partition refuses.
    pub fn keyless_refused(&self) -> bool {
        self.configs.compact() && !self.configs.parse_key()
    }

    /// Whether a held (unterminated) line could be appended alone: its
    /// record, keyed where the separator is already in it, in a batch of
    /// its own within `max.message.bytes` (README "Appending to `log`").
    pub fn held_fits(&self, line: &[u8]) -> bool {
        let max = self.configs.long("max.message.bytes").max(0) as u64;
        let sep = self.configs.separator();
        let at = (self.configs.parse_key() && !sep.is_empty())
            .then(|| line.windows(sep.len()).position(|w| w == sep))
            .flatten();
        let (key, value) = match at {
            Some(at) => (Some(&line[..at]), &line[at + sep.len()..]),
            None => (None, line),
        };
        spec::BATCH_HEADER + spec::record_size(key, value, 0) <= max
    }

    /// Batch groups for `recs`, or EMSGSIZE.
    pub fn pack(&self, recs: &[Rec]) -> Result<Vec<spec::Group>, i32> {
        let max = self.configs.long("max.message.bytes").max(0) as u64;
        let view: Vec<(Option<&[u8]>, &[u8])> = recs
            .iter()
            .map(|(k, v)| (k.as_deref(), v.as_slice()))
            .collect();
        spec::pack(&view, max).ok_or(libc::EMSGSIZE)
    }

    /// Appends `recs` as `groups`, one batch each, as append number `append`.
    pub fn append(&mut self, recs: Vec<Rec>, groups: &[spec::Group], append: usize) {
        let codec = self.configs.codec();
        let log_append_time = self.configs.log_append_time();
        let segment_bytes = self.configs.long("segment.bytes") as u64;
        let mut recs = recs.into_iter();
        for g in groups {
            let base = self.log_end();
            let active = self.segments.last_mut().expect("active segment");
            if let Some(size) = active.size() {
                assert!(
                    size + g.size <= segment_bytes,
                    "the model does not roll on size: keep appends small"
                );
            }
            active.batches.push(Batch {
                base,
                last: base + g.records as i64 - 1,
                codec,
                size: (codec == 0).then_some(g.size),
                append,
            });
            for (key, value) in recs.by_ref().take(g.records) {
                self.records.push(Record {
                    key,
                    value,
                    append,
                    batch_base: base,
                    log_append_time,
                });
            }
        }
        // flush.messages=1 flushes after every append, for certain.
        if self.configs.long("flush.messages") == 1 {
            self.rp_min = self.log_end();
        }
    }

    pub fn roll(&mut self) {
        if !self.active().batches.is_empty() {
            let seg = Segment::new(self.log_end(), &self.configs);
            self.segments.push(seg);
        }
    }

    /// Deletes the longest prefix of sealed segments for which `doomed`
    /// holds (given the segment and the next one's base); the log start
    /// follows the first segment left.
    fn drop_prefix(&mut self, mut doomed: impl FnMut(&Segment, i64) -> bool) {
        while self.segments.len() > 1 && doomed(&self.segments[0], self.segments[1].base) {
            self.segments.remove(0);
        }
        self.log_start = self.log_start.max(self.segments[0].base);
    }

    /// A write to `delete-records`.
    pub fn delete_records(&mut self, data: &[u8]) -> Result<(), i32> {
        let offset = match spec::delete_records_arg(data).ok_or(libc::EINVAL)? {
            DeleteArg::LogEnd => self.log_end(),
            DeleteArg::Offset(o) if o > self.log_end() => return Err(libc::EINVAL),
            DeleteArg::Offset(o) => o,
        };
        if offset > self.log_start {
            self.log_start = offset;
            self.drop_prefix(|_, next| next <= offset);
        }
        Ok(())
    }

    /// One retention pass (README "Retention"): the log start, then
    /// `retention.bytes`, then `retention.ms`, each deleting sealed segments
    /// from the front, rolling first when every segment qualifies.
    pub fn retention(&mut self, now_ms: i64, appends: &[Append]) {
        // A compacted partition's retention is the log cleaner's, as in
        // Kafka; the retention check leaves it alone.
        if self.configs.compact() {
            return;
        }
        let start = self.log_start;
        self.drop_prefix(|_, next| next <= start);
        // Size and time only where the policy says `delete` (an empty list
        // says neither).
        if !self.configs.delete() {
            return;
        }
        let limit = self.configs.long("retention.bytes");
        if limit >= 0 {
            let size = |s: &Segment| s.size().expect("sizes are learned after each step") as i64;
            let total: i64 = self.segments.iter().map(size).sum();
            let mut d = total - limit;
            let all = self.segments.iter().all(|s| {
                d -= size(s);
                d >= 0
            });
            if all {
                self.roll();
            }
            let mut diff = total - limit;
            self.drop_prefix(|s, _| {
                let ok = diff - size(s) >= 0;
                if ok {
                    diff -= size(s);
                }
                ok
            });
        }
        let limit = self.configs.long("retention.ms");
        if limit >= 0 {
            let expired = |s: &Segment| s.max_ts(appends).is_some_and(|t| now_ms - t > limit);
            if self.segments.iter().all(expired) {
                self.roll();
            }
            self.drop_prefix(|s, _| expired(s));
        }
    }

    /// `time/<ms>`: Kafka's offsetsForTimes over the live records.
    pub fn offset_for_time(&self, ms: i64, appends: &[Append]) -> Option<i64> {
        for seg in &self.segments {
            if seg.max_ts(appends).is_none_or(|t| t < ms) {
                continue;
            }
            for b in &seg.batches {
                let ts = appends[b.append].ts.expect("learned");
                if ts >= ms && b.last >= self.log_start {
                    return Some(b.base.max(self.log_start));
                }
            }
        }
        None
    }

    /// A clean load: everything is flushed; the active segment's indexes
    /// are preallocated to the configs of now.
    pub fn clean_load(&mut self) {
        self.rp_min = self.log_end();
        let p = prealloc(&self.configs);
        self.segments.last_mut().expect("active").prealloc = p;
    }

    /// Recovery after a crash: nothing acknowledged is lost; an empty
    /// segment after the first is dropped, so the active segment holds the
    /// log end (the implementation's recovery does so; the README is silent).
    pub fn recover(&mut self) {
        while self.segments.len() > 1 && self.active().batches.is_empty() {
            self.segments.pop();
        }
        let p = prealloc(&self.configs);
        self.segments.last_mut().expect("active").prealloc = p;
    }
}

impl Model {
    pub fn mkdir(&mut self, name: &str) -> Result<(), i32> {
        if !spec::valid_new_partition_name(name) {
            return Err(libc::EINVAL);
        }
        if self.partitions.contains_key(name) {
            return Err(libc::EEXIST);
        }
        // No holes: a topic's partitions are 0..n-1, created in order.
        if let Some(below) = neighbour(name, -1)
            && !self.partitions.contains_key(&below)
        {
            return Err(libc::EINVAL);
        }
        self.next_incarnation += 1;
        let configs = Configs::default();
        let seg = Segment::new(0, &configs);
        self.partitions.insert(
            name.to_string(),
            Partition {
                incarnation: self.next_incarnation,
                records: Vec::new(),
                log_start: 0,
                segments: vec![seg],
                configs,
                rp_min: 0,
                interval_changed: false,
            },
        );
        Ok(())
    }

    pub fn rmdir(&mut self, name: &str) -> Result<(), i32> {
        if !self.partitions.contains_key(name) {
            return Err(libc::ENOENT);
        }
        // No holes: partitions go from the highest down.
        if let Some(above) = neighbour(name, 1)
            && self.partitions.contains_key(&above)
        {
            return Err(libc::EINVAL);
        }
        let p = self.partitions.remove(name).ok_or(libc::ENOENT)?;
        self.graveyard.insert(p.incarnation, p);
        Ok(())
    }

    /// The partition a handle writes to, and whether it still exists.
    pub fn handle_partition(&mut self, h: usize) -> (&mut Partition, bool) {
        let (name, incarnation) = (&self.handles[h].part, self.handles[h].incarnation);
        match self.partitions.get_mut(name) {
            Some(p) if p.incarnation == incarnation => (p, true),
            _ => (self.graveyard.get_mut(&incarnation).expect("kept"), false),
        }
    }

    pub fn new_append(&mut self, window: (i64, i64)) -> usize {
        self.appends.push(Append {
            before: window.0,
            after: window.1,
            ts: None,
        });
        self.appends.len() - 1
    }

    /// One WRITE of `data` to log handle `h` (README "Appending to `log`").
    /// The precedence of refusals is the implementation's: an over-long
    /// unterminated line, a line without separator, a record too large,
    /// then a partition that is gone.
    pub fn write_log(&mut self, h: usize, data: &[u8], window: (i64, i64)) -> Result<(), i32> {
        let HandleKind::Log { partial } = &self.handles[h].kind else {
            unreachable!("a log handle")
        };
        let mut text = partial.clone();
        text.extend_from_slice(data);
        let (p, live) = self.handle_partition(h);
        // A compacted partition takes no record without a key: without
        // `parse.key` every line would be one, held or not.
        if p.keyless_refused() && !text.is_empty() {
            return Err(libc::EINVAL);
        }
        let Some(last_nl) = data.iter().rposition(|b| *b == b'\n') else {
            if !p.held_fits(&text) {
                return Err(libc::EMSGSIZE);
            }
            self.set_partial(h, text);
            return Ok(());
        };
        let cut = text.len() - (data.len() - last_nl);
        let rest = text[cut + 1..].to_vec();
        if !rest.is_empty() && !p.held_fits(&rest) {
            return Err(libc::EMSGSIZE);
        }
        let lines: Vec<&[u8]> = text[..cut].split(|b| *b == b'\n').collect();
        let recs = p.to_records(&lines)?;
        let groups = p.pack(&recs)?;
        if !live {
            return Err(libc::ENOENT);
        }
        let n = self.new_append(window);
        let (p, _) = self.handle_partition(h);
        p.append(recs, &groups, n);
        self.set_partial(h, rest);
        Ok(())
    }

    fn set_partial(&mut self, h: usize, bytes: Vec<u8>) {
        if let HandleKind::Log { partial } = &mut self.handles[h].kind {
            *partial = bytes;
        }
    }

    /// The record a log handle's held line becomes at its close, if any.
    pub fn held_record(&mut self, h: usize) -> Option<(Rec, spec::Group)> {
        let HandleKind::Log { partial } = &self.handles[h].kind else {
            return None;
        };
        if partial.is_empty() {
            return None;
        }
        let line = partial.clone();
        let (p, live) = self.handle_partition(h);
        if p.keyless_refused() {
            return None;
        }
        let recs = p.to_records(&[&line]).ok()?;
        let groups = p.pack(&recs).ok()?;
        live.then(|| (recs.into_iter().next().expect("one"), groups[0]))
    }

    /// The close of handle `h`: a held line becomes the last record; a
    /// refusal then has nobody to answer and is dropped.
    pub fn close(&mut self, h: usize, window: (i64, i64)) {
        if let Some((rec, group)) = self.held_record(h) {
            let n = self.new_append(window);
            let (p, _) = self.handle_partition(h);
            p.append(vec![rec], &[group], n);
        }
        self.handles.remove(h);
        self.bury();
    }

    /// Forgets deleted partitions no handle holds any more.
    pub fn bury(&mut self) {
        let held: Vec<u64> = self.handles.iter().map(|h| h.incarnation).collect();
        self.graveyard
            .retain(|incarnation, _| held.contains(incarnation));
    }

    /// A write to a control or config file through handle `h`. What the
    /// tree itself checks (UTF-8, the form of an offset) comes first; then
    /// a partition that is gone refuses everything (ENOENT); then its own
    /// rules (a config's validator, the offset's range).
    pub fn write_control(&mut self, h: usize, data: &[u8]) -> Result<(), i32> {
        let kind = self.handles[h].kind.clone();
        let (p, live) = self.handle_partition(h);
        let parsed = match kind {
            HandleKind::Config(_) => std::str::from_utf8(data).is_ok(),
            HandleKind::Control(Control::DeleteRecords) => spec::delete_records_arg(data).is_some(),
            _ => true,
        };
        if !parsed {
            return Err(libc::EINVAL);
        }
        if !live {
            return Err(libc::ENOENT);
        }
        match kind {
            HandleKind::Config(name) => {
                p.configs.write(name, data)?;
                p.interval_changed |= name == "index.interval.bytes";
            }
            HandleKind::Control(Control::DeleteRecords) => p.delete_records(data)?,
            HandleKind::Control(Control::Roll) => p.roll(),
            HandleKind::Control(Control::Flush) => p.rp_min = p.log_end(),
            HandleKind::Log { .. } => unreachable!("not a log handle"),
        }
        Ok(())
    }

    /// fsync(2) of a handle: a `log` handle flushes its partition where
    /// the backend flushes (`flushes`); where it does not, every write it
    /// acknowledged is as durable as it makes one, and nothing is asked.
    pub fn fsync(&mut self, h: usize, flushes: bool) -> Result<(), i32> {
        let is_log = matches!(self.handles[h].kind, HandleKind::Log { .. });
        let (p, live) = self.handle_partition(h);
        match (is_log && flushes, live) {
            (false, _) => Ok(()),
            (true, false) => Err(libc::ENOENT),
            (true, true) => {
                p.rp_min = p.log_end();
                Ok(())
            }
        }
    }

    /// Partitions the offline check can hold to the mount-wide defaults.
    pub fn intact_partitions(&self) -> Vec<String> {
        self.partitions
            .iter()
            .filter(|(_, p)| !p.interval_changed)
            .map(|(n, _)| n.clone())
            .collect()
    }

    pub fn retention(&mut self, now_ms: i64) {
        for p in self.partitions.values_mut() {
            p.retention(now_ms, &self.appends);
        }
    }

    /// A crash: held lines and handles are gone; recovery keeps every
    /// acknowledged append.
    pub fn crash(&mut self) {
        self.handles.clear();
        self.graveyard.clear();
        for p in self.partitions.values_mut() {
            p.recover();
        }
    }

    /// After a clean remount: handles are gone (their held lines were
    /// appended by the harness, in the order the tree chose), all flushed.
    pub fn clean_load(&mut self) {
        self.handles.clear();
        self.graveyard.clear();
        for p in self.partitions.values_mut() {
            p.clean_load();
        }
    }
}

/// The partition `step` away from `name` in its topic (`t-1` is `t-0`'s
/// neighbour above), if that is a partition id at all.
fn neighbour(name: &str, step: i64) -> Option<String> {
    let (topic, n) = name.rsplit_once('-')?;
    let n: i64 = n.parse().ok()?;
    let m = n + step;
    (m >= 0).then(|| format!("{topic}-{m}"))
}
