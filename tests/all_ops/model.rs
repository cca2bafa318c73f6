//! The reference model of one partition, written from Kafka's rules and the
//! README, not from commitfs's code: the records by offset (data records
//! and transaction markers), the log start and end offsets, the open and
//! aborted transactions, and what a compaction pass, `delete-records` and a
//! retention pass keep.
//!
//! What the model is told rather than predicts: where the segments are
//! (their bases and sizes, read from the directory after each step), so
//! that rolls by `segment.ms` and `segment.bytes`, and the cleaner's
//! grouping, need no model of their own; and each record's exact timestamp
//! (the wall clock's at the append), learned once and checked to lie in the
//! window the append ran in. Everything else follows from the rules here.

use std::collections::{BTreeMap, BTreeSet};

/// A record's key and value (`None`: null).
pub type KeyValue = (Option<Vec<u8>>, Option<Vec<u8>>);

/// One offset of the log: a data record or a transaction marker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MRec {
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    /// Learned from the segment once seen, inside `window`.
    pub ts: Option<i64>,
    /// [before, after] in ms of the call that appended it.
    pub window: (i64, i64),
    /// The producer of a transactional data record.
    pub txn: Option<i64>,
    /// A marker: (producer, commit).
    pub marker: Option<(i64, bool)>,
}

impl MRec {
    pub fn is_data(&self) -> bool {
        self.marker.is_none()
    }
}

/// A segment as the directory shows it: base offset and `.log` size.
#[derive(Clone, Copy, Debug)]
pub struct Seg {
    pub base: i64,
    pub size: u64,
}

#[derive(Default, Clone, Debug)]
pub struct Model {
    /// Every offset still on disk or below the log start (the views filter).
    pub recs: Vec<MRec>,
    pub log_start: i64,
    pub log_end: i64,
    /// Producer -> first offset of its open transaction.
    pub open: BTreeMap<i64, i64>,
    /// Producer -> offsets of its open transaction's records.
    pub open_offsets: BTreeMap<i64, Vec<i64>>,
    /// Offsets of the records of aborted transactions.
    pub aborted: BTreeSet<i64>,
}

impl Model {
    /// Appends data records, one batch; returns the first offset.
    pub fn append(
        &mut self,
        recs: &[KeyValue],
        window: (i64, i64),
        ts: Option<i64>,
        txn: Option<i64>,
    ) -> i64 {
        let first = self.log_end;
        for (key, value) in recs {
            let offset = self.log_end;
            self.recs.push(MRec {
                offset,
                key: key.clone(),
                value: value.clone(),
                ts,
                window,
                txn,
                marker: None,
            });
            if let Some(pid) = txn {
                self.open.entry(pid).or_insert(offset);
                self.open_offsets.entry(pid).or_default().push(offset);
            }
            self.log_end += 1;
        }
        first
    }

    /// Producer `pid`'s COMMIT or ABORT marker; returns its offset.
    pub fn end_txn(&mut self, pid: i64, commit: bool, window: (i64, i64)) -> i64 {
        let offset = self.log_end;
        self.recs.push(MRec {
            offset,
            key: None,
            value: None,
            ts: None,
            window,
            txn: None,
            marker: Some((pid, commit)),
        });
        self.log_end += 1;
        self.open.remove(&pid);
        let offsets = self.open_offsets.remove(&pid).unwrap_or_default();
        if !commit {
            self.aborted.extend(offsets);
        }
        offset
    }

    /// The last stable offset: the first open transaction's first offset,
    /// within [log start, log end].
    pub fn lso(&self) -> i64 {
        let first_open = self.open.values().min().copied();
        first_open
            .unwrap_or(self.log_end)
            .max(self.log_start)
            .min(self.log_end)
    }

    /// The live offsets: at or above the log start.
    pub fn live(&self) -> impl Iterator<Item = &MRec> {
        self.recs.iter().filter(|r| r.offset >= self.log_start)
    }

    /// The live data records, as a `read_uncommitted` consumer reads them.
    pub fn data(&self) -> impl Iterator<Item = &MRec> {
        self.live().filter(|r| r.is_data())
    }

    /// The records a `read_committed` consumer reads.
    pub fn committed_records(&self) -> Vec<&MRec> {
        let lso = self.lso();
        self.data()
            .filter(|r| r.offset < lso && !self.aborted.contains(&r.offset))
            .collect()
    }

    pub fn record(&self, offset: i64) -> Option<&MRec> {
        self.data().find(|r| r.offset == offset)
    }

    /// `user.kafka.transaction` of a transactional record.
    pub fn txn_state(&self, r: &MRec) -> Option<&'static str> {
        let pid = r.txn?;
        Some(if self.aborted.contains(&r.offset) {
            "aborted"
        } else if self
            .open_offsets
            .get(&pid)
            .is_some_and(|o| o.contains(&r.offset))
        {
            "open"
        } else {
            "committed"
        })
    }

    pub fn stream(&self) -> Vec<u8> {
        stream_of(self.data())
    }

    pub fn committed(&self) -> Vec<u8> {
        stream_of(self.committed_records().into_iter())
    }

    /// Kafka's offsetsForTimes over the live offsets (markers included:
    /// their record carries a timestamp too).
    pub fn offset_for_time(&self, ms: i64) -> Option<i64> {
        self.live()
            .find(|r| r.ts.expect("timestamps are learned") >= ms)
            .map(|r| r.offset)
    }

    /// `delete-records` of `to` (already checked to be in [0, log end]).
    pub fn delete_records(&mut self, to: i64) {
        self.log_start = self.log_start.max(to);
    }

    /// A pass of the cleaner below the active segment `active_base`
    /// (Kafka's `cleanInto` with an offset map that holds every key): of
    /// the records below it, the latest of each key stays, a record without
    /// a key goes, and tombstones stay (`delete.retention.ms` has not
    /// passed). The active segment is never cleaned.
    pub fn compact(&mut self, active_base: i64) {
        let mut latest: BTreeMap<Vec<u8>, i64> = BTreeMap::new();
        for r in self.recs.iter().filter(|r| r.offset < active_base) {
            if let (Some(k), None) = (&r.key, &r.marker) {
                latest.insert(k.clone(), r.offset);
            }
        }
        self.recs.retain(|r| {
            r.offset >= active_base
                || r.marker.is_some()
                || r.key.as_ref().is_some_and(|k| latest[k] == r.offset)
        });
    }

    /// The largest timestamp of the offsets in [from, to).
    fn max_ts(&self, from: i64, to: i64) -> Option<i64> {
        self.recs
            .iter()
            .filter(|r| r.offset >= from && r.offset < to)
            .map(|r| r.ts.expect("timestamps are learned"))
            .max()
    }

    /// A retention pass at `now` over the segments `segs` (a `delete`
    /// policy): segments wholly below the log start go, then by
    /// `retention.bytes`, then by `retention.ms`, each from the front and
    /// never the active one, rolling first when every segment qualifies.
    /// Returns whether it rolls (the active segment goes too).
    pub fn retention(&mut self, now: i64, segs: &[Seg], bytes: i64, ms: i64) {
        let mut segs: Vec<(i64, u64)> = segs.iter().map(|s| (s.base, s.size)).collect();
        let next = |segs: &Vec<(i64, u64)>, i: usize, end: i64| {
            segs.get(i + 1).map(|s| s.0).unwrap_or(end)
        };
        let log_end = self.log_end;
        let start = self.log_start;
        while segs.len() > 1 && segs[1].0 <= start {
            segs.remove(0);
        }
        let roll = |segs: &mut Vec<(i64, u64)>| {
            if segs.last().is_some_and(|s| s.0 < log_end) {
                segs.push((log_end, 0));
            }
        };
        if bytes >= 0 {
            let total: i64 = segs.iter().map(|s| s.1 as i64).sum();
            let mut d = total - bytes;
            if segs.iter().all(|s| {
                d -= s.1 as i64;
                d >= 0
            }) {
                roll(&mut segs);
            }
            let mut diff = total - bytes;
            while segs.len() > 1 && diff - segs[0].1 as i64 >= 0 {
                diff -= segs[0].1 as i64;
                segs.remove(0);
            }
        }
        if ms >= 0 {
            let expired = |m: &Model, segs: &Vec<(i64, u64)>, i: usize| {
                m.max_ts(segs[i].0, next(segs, i, log_end))
                    .is_some_and(|t| now - t > ms)
            };
            if (0..segs.len()).all(|i| expired(self, &segs, i)) {
                roll(&mut segs);
            }
            while segs.len() > 1 && expired(self, &segs, 0) {
                segs.remove(0);
            }
        }
        self.log_start = self.log_start.max(segs[0].0);
    }
}

/// `value\n` per record (a null value reads as an empty line).
pub fn stream_of<'a>(recs: impl Iterator<Item = &'a MRec>) -> Vec<u8> {
    let mut out = Vec::new();
    for r in recs {
        out.extend_from_slice(r.value.as_deref().unwrap_or_default());
        out.push(b'\n');
    }
    out
}
