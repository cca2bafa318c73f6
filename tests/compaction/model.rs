//! A reference model of compaction, written from Kafka's rules (the
//! notes' Part A: `buildOffsetMap`, `cleanInto`, `shouldRetainRecord`,
//! `filterTo`), not from commitfs's code, and the property test that holds
//! a data directory to it: random keyed appends, tombstones, rolls, passes
//! (with offset maps small enough to need several), and remounts. After
//! each step every segment is decoded by kafka-protocol and must hold the
//! model's batches exactly: their offsets, records and delete horizons.
//!
//! What the model keeps is batches, as the log does, because a delete
//! horizon belongs to a batch: the first pass that keeps a tombstone stamps
//! its whole batch, and a later pass drops the batch's tombstones once the
//! horizon passed. Segments are kept as their base offsets: the active one
//! is never cleaned, and a pass merges the segments it cleans into the
//! first of them (the test's logs are far below `segment.bytes`).

use std::collections::HashMap;

use proptest::prelude::*;

use commitfs::record::NewRecord;
use commitfs::storage::cleaner::Sharing;

use super::decode::decode_dir;
use super::{open_with, put};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MRec {
    pub offset: i64,
    /// `None`: a record written before the partition was compacted.
    pub key: Option<String>,
    pub value: Option<String>,
}

#[derive(Clone, Debug)]
pub struct MBatch {
    pub base: i64,
    pub last: i64,
    pub records: Vec<MRec>,
    /// The pass that stamped its delete horizon.
    pub horizon: Option<u32>,
}

pub struct Model {
    pub batches: Vec<MBatch>,
    /// Segment bases; the last is the active segment.
    pub segments: Vec<i64>,
    pub log_end: i64,
    /// The first dirty offset (`cleaner-offset-checkpoint`).
    pub checkpoint: i64,
    /// Keys an offset map takes: `floor(slots * 0.9)`.
    pub map_max: usize,
    /// `delete.retention.ms` is 0: a horizon passes by the next pass.
    pub retention_zero: bool,
    passes: u32,
}

impl Model {
    pub fn new(map_max: usize, retention_zero: bool) -> Model {
        Model {
            batches: Vec::new(),
            segments: vec![0],
            log_end: 0,
            checkpoint: 0,
            map_max,
            retention_zero,
            passes: 0,
        }
    }

    pub fn append(&mut self, recs: &[(Option<String>, Option<String>)]) {
        let base = self.log_end;
        let records = recs
            .iter()
            .enumerate()
            .map(|(i, (k, v))| MRec {
                offset: base + i as i64,
                key: k.clone(),
                value: v.clone(),
            })
            .collect();
        self.log_end += recs.len() as i64;
        self.batches.push(MBatch {
            base,
            last: self.log_end - 1,
            records,
            horizon: None,
        });
    }

    /// A roll of an empty active segment does nothing.
    pub fn roll(&mut self) {
        let active = *self.segments.last().unwrap();
        if self.batches.iter().any(|b| b.base >= active) {
            self.segments.push(self.log_end);
        }
    }

    fn segment_of(&self, offset: i64) -> i64 {
        *self.segments.iter().rev().find(|s| **s <= offset).unwrap()
    }

    fn batches_in(&self, seg: i64) -> impl Iterator<Item = &MBatch> {
        let next = self
            .segments
            .iter()
            .find(|s| **s > seg)
            .copied()
            .unwrap_or(i64::MAX);
        self.batches
            .iter()
            .filter(move |b| b.base >= seg && b.base < next)
    }

    /// Kafka's `buildOffsetMap` over `[start, upper)`: the latest offset
    /// put per key, and where the map stopped (`latestOffset`).
    fn offset_map(&self, start: i64, upper: i64) -> (HashMap<String, i64>, i64) {
        let mut map: HashMap<String, i64> = HashMap::new();
        let mut latest = -1;
        let dirty: Vec<i64> = self
            .segments
            .iter()
            .copied()
            .filter(|s| *s < upper && (*s >= self.segment_of(start)))
            .collect();
        for (i, seg) in dirty.iter().enumerate() {
            for b in self.batches_in(*seg) {
                for r in b.records.iter().filter(|r| r.offset >= start) {
                    let Some(key) = &r.key else { continue };
                    if map.len() >= self.map_max {
                        return (map, latest);
                    }
                    map.insert(key.clone(), r.offset);
                    latest = r.offset;
                }
                if b.last >= start {
                    latest = b.last;
                }
            }
            latest = dirty.get(i + 1).copied().unwrap_or(upper) - 1;
        }
        (map, latest)
    }

    /// One pass asked for: `Some(end)` where the map stopped, `None` when
    /// nothing below the active segment is dirty.
    pub fn pass(&mut self) -> Option<i64> {
        let upper = *self.segments.last().unwrap();
        let start = if self.checkpoint > self.log_end {
            0
        } else {
            self.checkpoint
        };
        let dirty_from = self.segment_of(start.min(upper));
        let cleanable = self
            .batches
            .iter()
            .any(|b| b.base >= dirty_from && b.base < upper);
        if !cleanable {
            return None;
        }
        self.passes += 1;
        let (map, latest) = self.offset_map(start, upper);
        let end = latest + 1;
        let cleaned: Vec<i64> = self.segments.iter().copied().filter(|s| *s < end).collect();
        // The segments based below `end` are cleaned, whole.
        let reach = self
            .segments
            .iter()
            .copied()
            .find(|s| *s >= end)
            .unwrap_or(upper);
        let pass = self.passes;
        let retention_zero = self.retention_zero;
        self.batches.retain_mut(|b| {
            if b.base >= reach {
                return true;
            }
            let horizon_passed = b.horizon.is_some() && retention_zero;
            b.records.retain(|r| {
                // A record without a key is dropped, but past the map's reach.
                r.offset > latest
                    || r.key.as_ref().is_some_and(|k| {
                        r.offset >= map.get(k).copied().unwrap_or(-1)
                            && (r.value.is_some() || !horizon_passed)
                    })
            });
            if b.records.iter().any(|r| r.value.is_none()) && b.horizon.is_none() {
                b.horizon = Some(pass);
            }
            if b.records.is_empty() {
                // A bare header keeps no horizon.
                b.horizon = None;
                return b.last + 1 == upper;
            }
            true
        });
        if let Some(first) = cleaned.first() {
            self.segments
                .retain(|s| *s == *first || !cleaned.contains(s));
        }
        self.checkpoint = end;
        Some(end)
    }
}

#[derive(Clone, Debug)]
pub enum Op {
    Append(Vec<(u8, Option<u8>)>),
    /// Records without a key, appended while the policy is `delete`.
    Keyless(u8),
    Roll,
    Pass,
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    let rec = (0u8..6, prop::option::weighted(0.8, 0u8..50));
    prop_oneof![
        4 => prop::collection::vec(rec, 1..4).prop_map(Op::Append),
        1 => (1u8..3).prop_map(Op::Keyless),
        2 => Just(Op::Roll),
        2 => Just(Op::Pass),
        1 => Just(Op::Reopen),
    ]
}

/// The log as decoded, in the model's terms.
fn decoded(dir: &std::path::Path) -> Vec<(i64, i64, bool, Vec<MRec>)> {
    decode_dir(dir)
        .into_iter()
        .map(|b| {
            let recs = b
                .records
                .into_iter()
                .map(|r| MRec {
                    offset: r.offset,
                    key: r.key.map(|k| String::from_utf8(k).unwrap()),
                    value: r.value.map(|v| String::from_utf8(v).unwrap()),
                })
                .collect();
            (b.base_offset, b.last_offset, b.delete_horizon, recs)
        })
        .collect()
}

fn expected(m: &Model) -> Vec<(i64, i64, bool, Vec<MRec>)> {
    m.batches
        .iter()
        .map(|b| (b.base, b.last, b.horizon.is_some(), b.records.clone()))
        .collect()
}

fn run(ops: Vec<Op>, slots: usize, retention_zero: bool, sharing: Sharing, io_buffer: usize) {
    let tmp = tempfile::tempdir().unwrap();
    let mut cleaner = super::cleaner_config();
    cleaner
        .set("log.cleaner.dedupe.buffer.size", &(slots * 24).to_string())
        .unwrap();
    cleaner
        .set("log.cleaner.io.buffer.size", &io_buffer.to_string())
        .unwrap();
    cleaner.sharing = sharing;
    let mut model = Model::new((slots as f64 * 0.9) as usize, retention_zero);
    let mut mgr = open_with(tmp.path(), cleaner.clone());
    let mut log = super::compacted(&mgr, "t-0");
    let retention = if retention_zero { "0" } else { "864000000" };
    log.set_config("delete.retention.ms", retention).unwrap();
    for (step, op) in ops.into_iter().enumerate() {
        match &op {
            Op::Append(recs) => {
                let recs: Vec<(Option<String>, Option<String>)> = recs
                    .iter()
                    .map(|(k, v)| (Some(format!("k{k}")), v.map(|v| format!("v{v}"))))
                    .collect();
                let borrowed: Vec<(&str, Option<&str>)> = recs
                    .iter()
                    .map(|(k, v)| (k.as_deref().unwrap_or_default(), v.as_deref()))
                    .collect();
                put(&log, &borrowed);
                model.append(&recs);
            }
            Op::Keyless(n) => {
                log.set_config("cleanup.policy", "delete").unwrap();
                let values: Vec<String> = (0..*n).map(|i| format!("x{i}")).collect();
                let recs: Vec<NewRecord> = values
                    .iter()
                    .map(|v| NewRecord::value(v.as_bytes()))
                    .collect();
                log.append(&recs).unwrap();
                log.set_config("cleanup.policy", "compact").unwrap();
                model.append(
                    &values
                        .iter()
                        .map(|v| (None, Some(v.clone())))
                        .collect::<Vec<_>>(),
                );
            }
            Op::Roll => {
                log.roll().unwrap();
                model.roll();
            }
            Op::Pass => {
                let got = log.clean_now().unwrap().map(|p| p.end_offset);
                assert_eq!(got, model.pass(), "step {step}: where the pass ended");
            }
            Op::Reopen => {
                drop(log);
                mgr.close().unwrap();
                mgr = open_with(tmp.path(), cleaner.clone());
                log = mgr.partition("t-0").unwrap();
            }
        }
        assert_eq!(
            decoded(log.local().dir()),
            expected(&model),
            "step {step} ({op:?})"
        );
        let bases = super::decode::segment_bases(log.local().dir());
        assert_eq!(bases, model.segments, "step {step}: segments");
    }
    for o in 0..model.log_end {
        let want = model
            .batches
            .iter()
            .flat_map(|b| &b.records)
            .find(|r| r.offset == o);
        let got = log
            .read(o)
            .ok()
            .map(|r| r.value.map(|v| String::from_utf8(v).unwrap()));
        assert_eq!(got, want.map(|r| r.value.clone()), "offset/{o}");
    }
    drop(log);
    mgr.close().unwrap();
    let report =
        commitfs::storage::check::check_data_dir(tmp.path(), &Default::default(), None).unwrap();
    assert!(!report.has_problems(), "{:?}", report.problems);
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("COMMITFS_COMPACTION_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(96),
        ..ProptestConfig::default()
    })]

    #[test]
    fn passes_keep_what_the_model_keeps(
        ops in prop::collection::vec(op(), 1..40),
        slots in prop_oneof![Just(3usize), Just(5), Just(1000)],
        retention_zero in any::<bool>(),
        // Which thread filters which chunk, over chunks of a batch or two
        // (grown for a larger one) and over whole segments.
        sharing in prop_oneof![
            Just(Sharing::WhenBehind),
            Just(Sharing::CleanerThread),
            Just(Sharing::Reader),
            Just(Sharing::Alternate),
        ],
        io_buffer in prop_oneof![Just(256usize), Just(524_288)],
    ) {
        run(ops, slots, retention_zero, sharing, io_buffer);
    }
}
