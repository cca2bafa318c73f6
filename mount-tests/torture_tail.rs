//! R2: torn and garbled tails on the active segment of an unclean data dir.
//!
//! One partition with a sealed and an active segment is written through the
//! mount and the daemon is killed. Each case restores that data dir, damages
//! the active `.log` (a cut at every position inside the last batch, cuts at
//! random positions, random garbage, flipped bytes in the last batches, a
//! well-formed batch with a wrong CRC or backwards offsets), mounts it, and
//! checks: the log ends at the last valid batch, the daemon logs exactly the
//! bytes it cut, an append lands at the right offset, and nothing panicked.

use commitfs::record::{NewRecord, encode_batch};

use crate::harness::Mount;
use crate::mount;
use crate::torture_util::{
    Rng, append, assert_check_clean, assert_no_panic, batch_info, frames, log_since, long_rounds,
    read_value, restore, scale, seg_file, status,
};

const OPTS: &str = "segment.index.bytes=8192,index.interval.bytes=200";

/// What a damaged active `.log` must recover to: (bytes kept, next offset).
/// An independent walk, with kafka-protocol as the judge of each batch:
/// whole frames, magic 2, valid CRC, offsets not going backwards and fitting
/// the segment's relative offsets.
fn expected_recovery(bytes: &[u8], base: i64, min_offset: i64) -> (usize, i64) {
    let mut kept = 0;
    let mut next = min_offset.max(base);
    for (pos, frame) in frames(bytes).0 {
        let Ok(info) = batch_info(frame) else {
            break;
        };
        // lastOffsetDelta, at byte 23 of the header (kafka-protocol skips it).
        let last = info.min_offset + i32::from_be_bytes(frame[23..27].try_into().unwrap()) as i64;
        if info.min_offset < next || !(0..=u32::MAX as i64).contains(&(last - base)) {
            break;
        }
        next = last + 1;
        kept = pos + frame.len();
    }
    (kept, next)
}

fn batch(base: i64, values: &[&str]) -> Vec<u8> {
    let recs: Vec<NewRecord> = values
        .iter()
        .map(|v| NewRecord::value(v.as_bytes()))
        .collect();
    let mut buf = Vec::new();
    encode_batch(&mut buf, base, 1_700_000_000_000, &recs);
    buf
}

/// Starts of the batches of a `.log`.
fn batch_starts(bytes: &[u8]) -> Vec<usize> {
    let (frames, tail) = frames(bytes);
    assert!(tail.is_empty(), "pristine log");
    frames.into_iter().map(|(pos, _)| pos).collect()
}

struct Tail {
    pristine: std::path::PathBuf,
    active: i64,
    log: Vec<u8>,
    /// Offset the active segment's records start at (the sealed segment's end).
    min_offset: i64,
    /// Every record value, by offset.
    values: Vec<String>,
}

fn setup(m: &mut Mount) -> Tail {
    m.ok("mkdir t-0");
    let mut values = Vec::new();
    let mut w = 0;
    let mut write = |m: &Mount, n: usize, values: &mut Vec<String>| {
        let lines: Vec<String> = (0..n).map(|i| format!("w{w}-line{i}")).collect();
        w += 1;
        m.ok(&format!("printf '{}\\n' >> t-0/log", lines.join("\\n")));
        values.extend(lines);
    };
    for n in [3, 1, 7, 2] {
        write(m, n, &mut values);
    }
    m.ok("echo 1 > t-0/roll");
    for n in [2, 9, 1, 4, 5, 1] {
        write(m, n, &mut values);
    }
    // The flush after the roll runs in the background: wait for it to move
    // the recovery point to the active segment, so that recovery starts there.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while status(m, "t-0", "recovery_point") < 13 {
        assert!(
            std::time::Instant::now() < deadline,
            "the flush after the roll never ran:\n{}",
            m.log()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    m.kill9();
    let pristine = m.data.parent().unwrap().join("pristine");
    restore(&m.data, &pristine);
    let active = 13;
    let log = std::fs::read(seg_file(&pristine.join("t-0"), active, "log")).unwrap();
    Tail {
        pristine,
        active,
        log,
        min_offset: active,
        values,
    }
}

/// Restores, applies `damaged` as the active `.log`, mounts and checks; returns bytes cut.
fn run_case(m: &mut Mount, t: &Tail, what: &str, damaged: &[u8], full_check: bool) -> u64 {
    restore(&t.pristine, &m.data);
    let path = seg_file(&m.data.join("t-0"), t.active, "log");
    std::fs::write(&path, damaged).unwrap();
    let (kept, leo) = expected_recovery(damaged, t.active, t.min_offset);
    let cut = (damaged.len() - kept) as u64;
    let from = m.log().len();
    m.remount();
    let log = log_since(m, from);
    let ctx = || format!("case {what}: expected {kept} bytes kept, LEO {leo}\n{log}");
    assert!(
        log.contains("since no clean shutdown file was found"),
        "{}",
        ctx()
    );
    if cut > 0 {
        assert!(
            log.contains(&format!("truncated {cut} bytes during recovery of t-0")),
            "{}",
            ctx()
        );
    } else {
        assert!(!log.contains("truncated"), "{}", ctx());
    }
    assert_eq!(status(m, "t-0", "log_end_offset"), leo, "{}", ctx());
    if leo > 0 && (leo as usize) <= t.values.len() {
        assert_eq!(
            read_value(m, "t-0", leo - 1).expect("read last value"),
            t.values[leo as usize - 1].as_bytes(),
            "{}",
            ctx()
        );
    }
    append(m, "t-0", b"after-recovery\n").expect("append after recovery");
    assert_eq!(
        read_value(m, "t-0", leo).expect("read the new record"),
        b"after-recovery",
        "{}",
        ctx()
    );
    assert_eq!(status(m, "t-0", "log_end_offset"), leo + 1);
    if full_check {
        m.unmount_clean();
        assert_check_clean(&m.data, OPTS);
    } else {
        m.kill9();
    }
    assert_no_panic(m);
    cut
}

fn torn_tails(random_cases: usize) {
    let mut m = mount!(OPTS);
    let t = setup(&mut m);
    let mut rng = Rng::new("torn_tails");
    let starts = batch_starts(&t.log);
    let last = *starts.last().unwrap();
    let n = t.log.len();
    let (mut cases, mut total_cut) = (0usize, 0u64);

    // Every cut inside the last batch (and at its start).
    for p in last..n {
        total_cut += run_case(&mut m, &t, &format!("cut at {p}"), &t.log[..p], p == last);
        cases += 1;
    }
    let every = cases;
    let end = t.values.len() as i64;
    for i in 0..random_cases {
        let full = i % 25 == 0;
        let kind = rng.range(0, 7);
        let mut d = t.log.clone();
        let what = match kind {
            0 => {
                let p = rng.range(0, n as u64) as usize;
                d.truncate(p);
                format!("cut at random {p}")
            }
            1 => {
                let g = rng.range(1, 600) as usize;
                d.extend(rng.bytes(g));
                format!("{g} garbage bytes")
            }
            2 => {
                // Flip 1-3 bytes in the last 3 batches, avoiding the leader
                // epoch, which the CRC does not cover (Kafka rewrites it in place).
                let from = starts[starts.len() - 3];
                let flips = rng.range(1, 4);
                let mut at = Vec::new();
                while at.len() < flips as usize {
                    let p = rng.range(from as u64, n as u64) as usize;
                    let b = starts[starts.partition_point(|s| *s <= p) - 1];
                    if (8..12).contains(&(p - b)) || p - b >= 16 {
                        d[p] ^= 1 << rng.range(0, 8);
                        at.push(p);
                    }
                }
                format!("flips at {at:?}")
            }
            3 => {
                let mut b = batch(end, &["bad-crc-1", "bad-crc-2"]);
                b[20] ^= 0x5a;
                d.extend(b);
                "a batch with a wrong CRC".to_string()
            }
            4 => {
                let back = rng.range(1, 20) as i64;
                d.extend(batch(end - back, &["backwards"]));
                format!("a valid batch {back} offsets backwards")
            }
            5 => {
                d.extend(batch(end, &["good-1", "good-2"]));
                let g = rng.range(1, 200) as usize;
                d.extend(rng.bytes(g));
                format!("a valid batch, then {g} garbage bytes")
            }
            _ => {
                // A whole batch copied again: the same offsets a second time.
                let s = starts[rng.range(0, starts.len() as u64) as usize];
                let b = frames(&t.log[s..]).0[0].1;
                d.extend_from_slice(b);
                format!("the batch at {s} repeated")
            }
        };
        total_cut += run_case(&mut m, &t, &what, &d, full);
        cases += 1;
    }
    println!(
        "torn_tails: {cases} cases ({every} cuts inside the last batch of {} bytes, {random_cases} random), \
         {total_cut} bytes truncated in all, 0 failures",
        n - last
    );
}

#[test]
fn torn_and_garbled_tails_recover_to_the_last_valid_batch() {
    torn_tails(100 * scale());
}

/// The long variant: 1,000 random cases (times COMMITFS_TORTURE_SCALE).
#[test]
#[ignore]
fn torn_and_garbled_tails_long() {
    torn_tails(long_rounds(1000));
}
