//! The `read_committed` consumer stream (`committed` in the tree) against a
//! reference model: random runs of plain appends, transactional batches of
//! several producers, commits and aborts, rolls, delete-records, clean
//! restarts and crashes. After each step the stream must be what the model
//! says a `read_committed` console consumer prints: every record below the
//! last stable offset, those of aborted transactions left out, each value
//! then `\n`. The batches are encoded by kafka-protocol.

#[path = "support/batch.rs"]
mod batch;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use bytes::BytesMut;
use kafka_protocol::records::Compression;
use proptest::prelude::*;

use commitfs::record::NewRecord;
use commitfs::storage::{LogConfig, LogManager, OpenOptions, PartitionLog};

fn open(dir: &Path) -> LogManager {
    let config = LogConfig {
        // A segment holds a few batches: views cross segments.
        segment_bytes: 600,
        ..LogConfig::default()
    };
    LogManager::open(dir, config, OpenOptions::without_cleaner_threads()).unwrap()
}

/// `values` as one batch of producer `pid` from sequence `seq`.
fn batch(pid: i64, seq: i32, values: &[String], transactional: bool) -> BytesMut {
    let records = values
        .iter()
        .map(|v| (None, Some(v.clone().into_bytes().into())));
    // Now: an old timestamp would let retention (7 days) delete segments
    // under the test, whenever its check runs.
    let timestamp = 1_700_000_000_000;
    batch::encode(
        (pid, 0),
        Some(seq),
        transactional,
        timestamp,
        records,
        Compression::None,
    )
}

#[derive(Clone, Debug)]
enum Op {
    /// A shell append of n records: never part of a transaction.
    Plain(u8),
    /// n records in producer p's transaction (opening it if needed).
    Txn(u8, u8),
    /// Producer p's transaction ends (when it has one).
    End(u8, bool),
    Roll,
    /// The log start moves this many records up (clamped to the end).
    DeleteRecords(u8),
    Restart,
    Crash,
    /// A crash before any recovery point was checkpointed: recovery
    /// starts at the first segment, whatever the log start.
    CrashUnchecked,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (1u8..4).prop_map(Op::Plain),
        4 => (0u8..3, 1u8..4).prop_map(|(p, n)| Op::Txn(p, n)),
        3 => (0u8..3, any::<bool>()).prop_map(|(p, c)| Op::End(p, c)),
        1 => Just(Op::Roll),
        1 => (0u8..4).prop_map(Op::DeleteRecords),
        1 => Just(Op::Restart),
        1 => Just(Op::Crash),
        1 => Just(Op::CrashUnchecked),
    ]
}

/// What a `read_committed` consumer would print, kept apart from storage.
#[derive(Default)]
struct Model {
    /// Offset -> value of each data record; markers hold an offset but no record.
    records: BTreeMap<i64, String>,
    log_end: i64,
    log_start: i64,
    /// Producer -> (first offset, offsets) of its open transaction.
    open: BTreeMap<i64, (i64, Vec<i64>)>,
    aborted: BTreeSet<i64>,
    next_seq: BTreeMap<i64, i32>,
    counter: usize,
}

impl Model {
    fn last_stable_offset(&self) -> i64 {
        let first_open = self.open.values().map(|(f, _)| *f).min();
        first_open
            .unwrap_or(self.log_end)
            .max(self.log_start)
            .min(self.log_end)
    }

    fn committed(&self) -> Vec<u8> {
        let lso = self.last_stable_offset();
        let mut out = Vec::new();
        for (o, v) in self.records.range(self.log_start..lso) {
            if !self.aborted.contains(o) {
                out.extend_from_slice(v.as_bytes());
                out.push(b'\n');
            }
        }
        out
    }

    fn all(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for (_, v) in self.records.range(self.log_start..) {
            out.extend_from_slice(v.as_bytes());
            out.push(b'\n');
        }
        out
    }

    fn values(&mut self, n: u8, who: &str) -> Vec<String> {
        (0..n)
            .map(|_| {
                self.counter += 1;
                format!("{who}-{}", self.counter)
            })
            .collect()
    }
}

/// The whole committed stream read `chunk` bytes at a time.
fn read_all(log: &PartitionLog, chunk: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; chunk];
    loop {
        let n = log.read_committed(out.len() as u64, &mut buf).unwrap();
        if n == 0 {
            return out;
        }
        out.extend_from_slice(&buf[..n]);
    }
}

fn check(log: &PartitionLog, model: &Model, step: usize, chunk: usize, at: u16) {
    assert_eq!(
        log.last_stable_offset(),
        model.last_stable_offset(),
        "step {step}: last stable offset"
    );
    let want = model.committed();
    assert_eq!(
        log.committed_len().unwrap(),
        want.len() as u64,
        "step {step}: committed length"
    );
    assert_eq!(
        String::from_utf8_lossy(&read_all(log, chunk)),
        String::from_utf8_lossy(&want),
        "step {step}: committed stream in reads of {chunk}"
    );
    let pos = at as usize % (want.len() + 4);
    let mut buf = vec![0u8; 9];
    let n = log.read_committed(pos as u64, &mut buf).unwrap();
    let end = (pos + 9).min(want.len());
    assert_eq!(
        &buf[..n],
        &want[pos.min(end)..end],
        "step {step}: read at {pos}"
    );
    // `log` is untouched by transactions: every record from the log start.
    let all = model.all();
    assert_eq!(log.stream_len().unwrap(), all.len() as u64, "step {step}");
}

fn run(ops: &[Op], chunk: usize, at: u16) {
    let tmp = tempfile::tempdir().unwrap();
    let mut mgr = open(tmp.path());
    let mut log = mgr.create_partition("t-0").unwrap();
    let mut m = Model::default();
    for (step, op) in ops.iter().enumerate() {
        match op {
            Op::Plain(n) => {
                let values = m.values(*n, "plain");
                let records: Vec<NewRecord> = values
                    .iter()
                    .map(|v| NewRecord::value(v.as_bytes()))
                    .collect();
                let first = log.append(&records).unwrap().first_offset;
                assert_eq!(first, m.log_end, "step {step}");
                for v in values {
                    m.records.insert(m.log_end, v);
                    m.log_end += 1;
                }
            }
            Op::Txn(p, n) => {
                let pid = 1000 + *p as i64;
                let values = m.values(*n, &format!("txn{pid}"));
                let seq = m.next_seq.entry(pid).or_insert(0);
                let first = log
                    .append_transactional(&batch(pid, *seq, &values, true))
                    .unwrap()
                    .first_offset;
                *seq += values.len() as i32;
                assert_eq!(first, m.log_end, "step {step}");
                let entry = m.open.entry(pid).or_insert((first, Vec::new()));
                for v in values {
                    entry.1.push(m.log_end);
                    m.records.insert(m.log_end, v);
                    m.log_end += 1;
                }
            }
            Op::End(p, commit) => {
                let pid = 1000 + *p as i64;
                let Some((_, offsets)) = m.open.remove(&pid) else {
                    continue;
                };
                let at = log.append_end_txn_marker(pid, 0, 0, *commit).unwrap();
                assert_eq!(at, m.log_end, "step {step}");
                m.log_end += 1;
                if !commit {
                    m.aborted.extend(offsets);
                }
            }
            Op::Roll => log.roll().unwrap(),
            Op::DeleteRecords(k) => {
                let to = (m.log_start + *k as i64).min(m.log_end);
                m.log_start = m.log_start.max(log.delete_records_before(to).unwrap());
            }
            Op::Restart | Op::Crash | Op::CrashUnchecked => {
                drop(log);
                if matches!(op, Op::Crash | Op::CrashUnchecked) {
                    drop(mgr);
                    let _ = std::fs::remove_file(tmp.path().join(".kafka_cleanshutdown"));
                    if matches!(op, Op::CrashUnchecked) {
                        let _ = std::fs::remove_file(
                            tmp.path().join("recovery-point-offset-checkpoint"),
                        );
                    }
                } else {
                    mgr.close().unwrap();
                }
                mgr = open(tmp.path());
                log = mgr.partition("t-0").unwrap();
            }
        }
        check(&log, &m, step, chunk, at);
    }
    drop(log);
    mgr.close().unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: std::env::var("COMMITTED_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(48), ..ProptestConfig::default() })]
    #[test]
    fn the_committed_stream_is_what_the_model_says(
        ops in prop::collection::vec(op(), 1..40),
        chunk in 1usize..40,
        at in any::<u16>(),
    ) {
        run(&ops, chunk, at);
    }
}

/// The runs the property may not draw: an abort whose records span a roll
/// and sit between committed ones, under a transaction that stays open,
/// then a restart that must keep all of it.
#[test]
fn an_abort_across_segments_under_an_open_transaction() {
    use Op::*;
    run(
        &[
            Txn(0, 3),
            Plain(2),
            Txn(1, 3),
            Roll,
            Txn(0, 3),
            Txn(2, 1),
            Plain(3),
            End(0, false),
            Roll,
            End(1, true),
            Plain(1),
            Restart,
            End(2, true),
            Crash,
            Txn(0, 2),
            DeleteRecords(3),
            End(0, false),
        ],
        5,
        7,
    );
}

/// Runs the property once drew that failed an earlier version of the code.
#[test]
fn runs_that_failed_once() {
    use Op::*;
    let runs: &[(&str, &[Op])] = &[
        (
            // The log start moved into an open transaction: its records
            // below the start count once it is decided, not before.
            "a log start inside an open transaction",
            &[Plain(1), Txn(0, 2), DeleteRecords(2), End(0, true)],
        ),
        (
            "an abort below a log start moved past it",
            &[
                Txn(1, 1),
                Txn(0, 1),
                Txn(0, 1),
                DeleteRecords(1),
                End(1, false),
                DeleteRecords(1),
            ],
        ),
        (
            // After the crash the sealed segment is active again and grows:
            // the committed length counted while it was sealed is stale.
            "a segment sealed, active again after a crash, sealed again",
            &[
                Plain(1),
                Roll,
                Crash,
                Txn(2, 1),
                Plain(1),
                Plain(1),
                End(2, false),
                Plain(1),
                Plain(1),
                Plain(1),
            ],
        ),
        (
            // The first recovery removes the snapshots with the empty
            // segment; the second must still find the open transaction.
            "an open transaction through two crashes",
            &[Plain(1), Txn(0, 1), Roll, Crash, Crash],
        ),
        (
            // Recovery from below the first segment (the log start moved
            // past the recovery point) must still start producer state
            // from the snapshot at that segment's base, which holds the
            // transaction whose first batch was deleted with segment 0.
            "a recovery point below the first segment",
            &[
                Txn(0, 2),
                Plain(1),
                Plain(3),
                Crash,
                DeleteRecords(2),
                Txn(0, 1),
                Plain(3),
                CrashUnchecked,
            ],
        ),
    ];
    for (what, ops) in runs {
        eprintln!("{what}");
        run(ops, 1, 0);
    }
}

/// A read-only open of a directory another process writes (here a
/// writable manager, as a broker would be) follows the writer's
/// transactions: the open one it found at load, then those begun, committed
/// and aborted after, replayed from what the writer appended.
#[test]
fn a_read_only_view_follows_the_writers_transactions() {
    let tmp = tempfile::tempdir().unwrap();
    let writer = open(tmp.path());
    let log = writer.create_partition("t-0").unwrap();
    let mut m = Model::default();
    let plain = |log: &PartitionLog, m: &mut Model| {
        let v = m.values(1, "plain");
        log.append(&[NewRecord::value(v[0].as_bytes())]).unwrap();
        m.records.insert(m.log_end, v[0].clone());
        m.log_end += 1;
    };
    let txn = |log: &PartitionLog, m: &mut Model, pid: i64| {
        let v = m.values(2, &format!("txn{pid}"));
        let seq = m.next_seq.entry(pid).or_insert(0);
        log.append_transactional(&batch(pid, *seq, &v, true))
            .unwrap();
        *seq += 2;
        let e = m.open.entry(pid).or_insert((m.log_end, Vec::new()));
        for v in v {
            e.1.push(m.log_end);
            m.records.insert(m.log_end, v);
            m.log_end += 1;
        }
    };
    let end = |log: &PartitionLog, m: &mut Model, pid: i64, commit: bool| {
        log.append_end_txn_marker(pid, 0, 0, commit).unwrap();
        let (_, offsets) = m.open.remove(&pid).unwrap();
        if !commit {
            m.aborted.extend(offsets);
        }
        m.log_end += 1;
    };
    plain(&log, &mut m);
    txn(&log, &mut m, 7);
    plain(&log, &mut m);
    log.flush().unwrap();

    let reader = LogManager::open(
        tmp.path(),
        LogConfig::default(),
        OpenOptions {
            read_only: true,
            ..Default::default()
        },
    )
    .unwrap();
    // Each look follows the writer; a change within the directory
    // timestamp's granularity shows at a later look, so looks repeat
    // until the log end is the writer's.
    let look = |m: &Model| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let p = reader.partition("t-0").unwrap();
            if p.log_end_offset() == m.log_end {
                return p;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the reader never saw {}",
                m.log_end
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    };
    let p = look(&m);
    assert_eq!(p.open_transactions(), vec![(1, 7)], "found at load");
    check(&p, &m, 0, 7, 3);

    end(&log, &mut m, 7, true);
    txn(&log, &mut m, 8);
    plain(&log, &mut m);
    log.roll().unwrap();
    txn(&log, &mut m, 9);
    end(&log, &mut m, 8, false);
    plain(&log, &mut m);
    log.flush().unwrap();
    let p = look(&m);
    assert_eq!(p.open_transactions(), vec![(m.log_end - 4, 9)]);
    check(&p, &m, 1, 5, 11);

    end(&log, &mut m, 9, true);
    log.flush().unwrap();
    let p = look(&m);
    assert_eq!(p.open_transactions(), vec![]);
    check(&p, &m, 2, 64, 0);
    drop((p, log));
    writer.close().unwrap();
}
