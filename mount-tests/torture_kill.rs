//! R1: kill -9 mid-write.
//!
//! Writer threads append numbered lines through the mount, several lines per
//! write (now and then a write of many batches), and record each write that
//! returned success. At a random moment the daemon gets SIGKILL; the test
//! remounts and checks, from the raw `.log` files: every acknowledged line is
//! there, in order, exactly once; the write in flight at the kill is absent or
//! whole when it fits one batch, a prefix of whole batches when it does not;
//! offsets are contiguous; the recovery log lines appear. After the last
//! round a clean unmount leaves a data dir that `commitfs check` passes.

use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crate::harness::Mount;
use crate::mount;
use crate::torture_util::{
    Rng, assert_check_clean, assert_no_panic, log_since, long_rounds, read_partition, scale,
    status, truncated_bytes,
};

const OPTS: &str = "segment.bytes=1048576,max.message.bytes=65536";
/// Writer id → partition.
const WRITERS: [&str; 3] = ["t-0", "t-0", "t-1"];

#[derive(Clone, Debug)]
struct Write1 {
    seq: u64,
    lines: usize,
    /// Whether it fits one batch (small) or spans several.
    large: bool,
    acked: bool,
}

fn line(w: usize, seq: u64, i: usize, pad: usize) -> String {
    format!("w{w}:{seq}:{i}:{}", "x".repeat(pad))
}

/// Writes until the first error (the kill) or `stop`; returns the writes tried.
fn writer(
    m_log: std::path::PathBuf,
    w: usize,
    first_seq: u64,
    seed: u64,
    stop: Arc<AtomicBool>,
    acks: Arc<AtomicU64>,
) -> Vec<Write1> {
    let mut rng = Rng::seeded(seed);
    let mut done = Vec::new();
    let Ok(mut f) = std::fs::OpenOptions::new().append(true).open(&m_log) else {
        return done;
    };
    let mut seq = first_seq;
    while !stop.load(Ordering::Relaxed) {
        let large = rng.range(0, 30) == 0;
        let lines = if large {
            rng.range(1500, 3000) as usize
        } else {
            rng.range(1, 20) as usize
        };
        let mut buf = String::new();
        for i in 0..lines {
            let pad = if large { 90 } else { rng.range(0, 60) as usize };
            buf.push_str(&line(w, seq, i, pad));
            buf.push('\n');
        }
        done.push(Write1 {
            seq,
            lines,
            large,
            acked: false,
        });
        match f.write(buf.as_bytes()) {
            Ok(n) if n == buf.len() => {
                done.last_mut().unwrap().acked = true;
                acks.fetch_add(1, Ordering::Relaxed);
            }
            _ => break,
        }
        seq += 1;
    }
    done
}

#[derive(Default, Debug)]
struct Tally {
    writes_acked: u64,
    lines_acked: u64,
    lost: u64,
    in_flight_absent: u64,
    in_flight_whole: u64,
    in_flight_prefix: u64,
}

/// Checks every writer's records in the partitions against what it was told.
fn verify(m: &Mount, history: &[Vec<Write1>], tally: &mut Tally) {
    // (writer) -> [(seq, line, batch id)]
    let mut seen: HashMap<usize, Vec<(u64, usize, usize)>> = HashMap::new();
    let mut batch_id = 0;
    for part in ["t-0", "t-1"] {
        let batches = read_partition(&m.data.join(part));
        let leo = batches
            .last()
            .map_or(0, |b| b.base_offset + b.values.len() as i64);
        assert_eq!(status(m, part, "log_end_offset"), leo, "{part}: LEO");
        for b in batches {
            let mut owner = None;
            for v in &b.values {
                let s = std::str::from_utf8(v).expect("utf-8 line");
                let mut it = s.split(':');
                let w: usize = it.next().unwrap()[1..].parse().unwrap();
                let seq: u64 = it.next().unwrap().parse().unwrap();
                let i: usize = it.next().unwrap().parse().unwrap();
                assert_eq!(WRITERS[w], part, "writer {w}'s line in {part}");
                // One batch holds lines of one write only.
                assert!(
                    owner.is_none() || owner == Some((w, seq)),
                    "batch at {} of {part} mixes writes",
                    b.base_offset
                );
                owner = Some((w, seq));
                seen.entry(w).or_default().push((seq, i, batch_id));
            }
            batch_id += 1;
        }
    }
    *tally = Tally::default();
    for (w, writes) in history.iter().enumerate() {
        let got = seen.remove(&w).unwrap_or_default();
        let mut at = 0;
        for wr in writes {
            let mut c = 0;
            while at + c < got.len() && got[at + c].0 == wr.seq && got[at + c].1 == c {
                c += 1;
            }
            let ctx = || format!("writer {w} write {wr:?}: {c} of its lines found in order");
            if wr.acked {
                tally.writes_acked += 1;
                tally.lines_acked += wr.lines as u64;
                tally.lost += (wr.lines - c) as u64;
                assert_eq!(c, wr.lines, "acknowledged lines lost: {}", ctx());
            } else {
                assert!(c <= wr.lines, "{}", ctx());
                if !wr.large {
                    assert!(c == 0 || c == wr.lines, "in-flight write torn: {}", ctx());
                }
                match c {
                    0 => tally.in_flight_absent += 1,
                    n if n == wr.lines => tally.in_flight_whole += 1,
                    _ => tally.in_flight_prefix += 1,
                }
            }
            if !wr.large && c > 0 {
                let b = got[at].2;
                assert!(
                    got[at..at + c].iter().all(|r| r.2 == b),
                    "a small write spans batches: {}",
                    ctx()
                );
            }
            at += c;
        }
        assert_eq!(
            at,
            got.len(),
            "writer {w}: records nobody wrote or duplicates from {:?}",
            got.get(at)
        );
    }
}

fn kill9_mid_write(kills: usize) {
    let mut m = mount!(OPTS);
    m.ok("mkdir t-0 t-1");
    let mut rng = Rng::new("kill9_mid_write");
    let mut history: Vec<Vec<Write1>> = vec![Vec::new(); WRITERS.len()];
    let mut tally = Tally::default();
    let mut cut_bytes = 0u64;
    let mut truncations = 0usize;
    for round in 0..kills {
        let stop = Arc::new(AtomicBool::new(false));
        let acks: Vec<Arc<AtomicU64>> = WRITERS.iter().map(|_| Arc::default()).collect();
        let handles: Vec<_> = WRITERS
            .iter()
            .enumerate()
            .map(|(w, part)| {
                let first = history[w].last().map_or(0, |x| x.seq + 1);
                let (path, seed, stop) = (m.mnt.join(part).join("log"), rng.next(), stop.clone());
                let acks = acks[w].clone();
                thread::spawn(move || writer(path, w, first, seed, stop, acks))
            })
            .collect();
        // The kill lands mid-write, after every writer had writes acknowledged.
        let deadline = Instant::now() + Duration::from_secs(60);
        while acks.iter().any(|a| a.load(Ordering::Relaxed) == 0) {
            if Instant::now() > deadline || handles.iter().any(|h| h.is_finished()) {
                stop.store(true, Ordering::Relaxed);
                panic!(
                    "round {round}: a writer had no write acknowledged ({:?}):\n{}",
                    acks.iter()
                        .map(|a| a.load(Ordering::Relaxed))
                        .collect::<Vec<_>>(),
                    m.log()
                );
            }
            thread::sleep(Duration::from_millis(5));
        }
        thread::sleep(Duration::from_millis(rng.range(20, 300)));
        m.kill9();
        stop.store(true, Ordering::Relaxed);
        for (w, h) in handles.into_iter().enumerate() {
            let round_writes = h.join().expect("writer thread");
            assert!(
                round_writes.iter().any(|x| x.acked),
                "round {round}: writer {w} has no acknowledged write"
            );
            history[w].extend(round_writes);
        }
        let from = m.log().len();
        m.remount();
        let log = log_since(&m, from);
        assert!(
            log.contains("Recovering") && log.contains("since no clean shutdown file was found"),
            "round {round}: no recovery lines:\n{log}"
        );
        let cuts = truncated_bytes(&log);
        truncations += cuts.len();
        cut_bytes += cuts.iter().sum::<u64>();
        verify(&m, &history, &mut tally);
        assert_no_panic(&m);
    }
    m.unmount_clean();
    assert_check_clean(&m.data, OPTS);
    assert!(
        tally.writes_acked >= (kills * WRITERS.len()) as u64,
        "{tally:?}"
    );
    println!(
        "kill9_mid_write: {kills} kills; {} writes ({} lines) acknowledged, {} acknowledged lines lost; \
         in-flight writes: {} absent, {} whole, {} a prefix of whole batches; \
         {truncations} truncations, {cut_bytes} bytes truncated; check clean",
        tally.writes_acked,
        tally.lines_acked,
        tally.lost,
        tally.in_flight_absent,
        tally.in_flight_whole,
        tally.in_flight_prefix
    );
}

#[test]
fn kill9_mid_write_loses_no_acknowledged_line() {
    kill9_mid_write(10 * scale());
}

/// The long variant: 100 kills (times COMMITFS_TORTURE_SCALE).
#[test]
#[ignore]
fn kill9_mid_write_long() {
    kill9_mid_write(long_rounds(100));
}
