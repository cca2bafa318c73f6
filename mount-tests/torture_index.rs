//! R3: damaged `.index` and `.timeindex` files of sealed and active segments.
//!
//! Three segments are written through the mount and unmounted cleanly; their
//! trimmed indexes are the reference. Each case restores that data dir,
//! damages one segment's index files (deleted, cut to a size that is not whole
//! entries, zero-padded to the preallocated size as after a crash, decreasing
//! entries, positions or offsets past the end, an entry off its batch), mounts
//! after a clean or an unclean shutdown, reads records of that segment, and
//! checks: the damage was reported at open or first use, the rebuilt files
//! are byte-identical to the reference (preallocated for the active segment),
//! the records read are right, and after a clean unmount every index file is
//! byte-identical again. Kafka's KAFKA-10207, KAFKA-19200 and KAFKA-12734 are
//! the untrimmed and lazily-checked cases here.

use std::path::Path;

use crate::harness::Mount;
use crate::torture_util::{
    Rng, assert_check_clean, assert_no_panic, log_since, long_rounds, read_value, restore, scale,
    seg_file,
};
use crate::{bulk_value, dd_bulk, mount, write_bulk};

const OPTS: &str = "segment.bytes=1048576";
const SEGMENTS: [i64; 3] = [0, 680, 1360];
const RECORDS: i64 = 1500;
const OFFSET_PREALLOC: u64 = 10_485_760;
const TIME_PREALLOC: u64 = 10_485_756;

#[derive(Clone, Copy, Debug)]
enum Damage {
    DeleteIndex,
    DeleteTimeIndex,
    DeleteBoth,
    CutIndex,
    CutTimeIndex,
    PadIndex,
    PadTimeIndex,
    PadBoth,
    ZeroIndex,
    DecreasingOffsets,
    PositionPastEnd,
    PositionOffBatch,
    TimeOffsetPastEnd,
    DecreasingTimestamps,
    TimeRelativeBelowBase,
}

const ALL: [Damage; 15] = [
    Damage::DeleteIndex,
    Damage::DeleteTimeIndex,
    Damage::DeleteBoth,
    Damage::CutIndex,
    Damage::CutTimeIndex,
    Damage::PadIndex,
    Damage::PadTimeIndex,
    Damage::PadBoth,
    Damage::ZeroIndex,
    Damage::DecreasingOffsets,
    Damage::PositionPastEnd,
    Damage::PositionOffBatch,
    Damage::TimeOffsetPastEnd,
    Damage::DecreasingTimestamps,
    Damage::TimeRelativeBelowBase,
];

fn pad(path: &Path, len: u64) {
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.set_len(len).unwrap();
}

/// Applies `d` to the indexes of segment `base`; `k` picks the entry to garble.
fn damage(dir: &Path, base: i64, d: Damage, k: u64) {
    let ix = seg_file(dir, base, "index");
    let tix = seg_file(dir, base, "timeindex");
    let log_len = std::fs::metadata(seg_file(dir, base, "log")).unwrap().len();
    let mut ib = std::fs::read(&ix).unwrap();
    let mut tb = std::fs::read(&tix).unwrap();
    let ni = ib.len() / 8;
    let nt = tb.len() / 12;
    assert!(ni >= 3, "segment {base} has {ni} index entries");
    let e = (k % ni as u64) as usize; // an entry of the offset index
    let put32 =
        |b: &mut Vec<u8>, at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_be_bytes());
    match d {
        Damage::DeleteIndex => std::fs::remove_file(&ix).unwrap(),
        Damage::DeleteTimeIndex => std::fs::remove_file(&tix).unwrap(),
        Damage::DeleteBoth => {
            std::fs::remove_file(&ix).unwrap();
            std::fs::remove_file(&tix).unwrap();
        }
        Damage::CutIndex => pad(&ix, ib.len() as u64 - 1 - k % 7),
        Damage::CutTimeIndex => pad(&tix, tb.len() as u64 - 1 - k % 11),
        Damage::PadIndex => pad(&ix, OFFSET_PREALLOC),
        Damage::PadTimeIndex => pad(&tix, TIME_PREALLOC),
        Damage::PadBoth => {
            pad(&ix, OFFSET_PREALLOC);
            pad(&tix, TIME_PREALLOC);
        }
        Damage::ZeroIndex => {
            ib.iter_mut().for_each(|b| *b = 0);
            std::fs::write(&ix, &ib).unwrap();
        }
        Damage::DecreasingOffsets => {
            // Entry e gets an offset below its predecessor's (or the last one's).
            let at = if e == 0 { 8 } else { e * 8 };
            let prev = u32::from_be_bytes(ib[at - 8..at - 4].try_into().unwrap());
            put32(&mut ib, at, prev.saturating_sub(1 + (k % 3) as u32));
            std::fs::write(&ix, &ib).unwrap();
        }
        Damage::PositionPastEnd => {
            put32(&mut ib, e * 8 + 4, log_len as u32 + 1 + (k % 5000) as u32);
            std::fs::write(&ix, &ib).unwrap();
        }
        Damage::PositionOffBatch => {
            let p = u32::from_be_bytes(ib[e * 8 + 4..e * 8 + 8].try_into().unwrap());
            put32(&mut ib, e * 8 + 4, p + 1 + (k % 100) as u32);
            std::fs::write(&ix, &ib).unwrap();
        }
        Damage::TimeOffsetPastEnd => {
            let t = (k % nt as u64) as usize;
            put32(&mut tb, t * 12 + 8, 5000 + (k % 1000) as u32);
            std::fs::write(&tix, &tb).unwrap();
        }
        Damage::DecreasingTimestamps => {
            // The last entry older than the first. A segment appended within
            // one millisecond has a single time index entry, which cannot
            // be older than itself: then an older entry is added after it.
            let first = i64::from_be_bytes(tb[0..8].try_into().unwrap());
            let older = (first - 1 - (k % 1000) as i64).to_be_bytes();
            if nt == 1 {
                let entry: Vec<u8> = tb[0..12].to_vec();
                tb.extend_from_slice(&entry);
            }
            let last = (tb.len() / 12 - 1) * 12;
            tb[last..last + 8].copy_from_slice(&older);
            std::fs::write(&tix, &tb).unwrap();
        }
        Damage::TimeRelativeBelowBase => {
            // A time index whose entries name offsets below the segment's base
            // cannot be written as u32; garble the relative offset to the max.
            let t = (k % nt as u64) as usize;
            put32(&mut tb, t * 12 + 8, u32::MAX);
            std::fs::write(&tix, &tb).unwrap();
        }
    }
}

struct Reference {
    pristine: std::path::PathBuf,
    files: Vec<(String, Vec<u8>)>,
}

fn setup(m: &mut Mount) -> Reference {
    m.ok("mkdir t-0");
    let src = m.data.parent().unwrap().join("bulk.txt");
    write_bulk(&src, 0, RECORDS as usize);
    m.ok(&dd_bulk(&src, "t-0"));
    m.unmount_clean();
    let pristine = m.data.parent().unwrap().join("pristine");
    restore(&m.data, &pristine);
    let mut files = Vec::new();
    for base in SEGMENTS {
        for suffix in ["index", "timeindex"] {
            let name = format!("{base:020}.{suffix}");
            files.push((
                name.clone(),
                std::fs::read(pristine.join("t-0").join(&name)).unwrap(),
            ));
        }
    }
    Reference { pristine, files }
}

/// One case; returns the number of index files that differed from the reference.
fn run_case(m: &mut Mount, r: &Reference, base: i64, d: Damage, clean: bool, k: u64) -> usize {
    restore(&r.pristine, &m.data);
    let dir = m.data.join("t-0");
    damage(&dir, base, d, k);
    if !clean {
        std::fs::remove_file(m.data.join(".kafka_cleanshutdown")).unwrap();
    }
    let from = m.log().len();
    m.remount();
    let what = format!(
        "{d:?} on segment {base} ({} shutdown, k={k})",
        if clean { "clean" } else { "unclean" }
    );
    // First use: records at the start, middle and end of the segment, and
    // those the garbled entry (and its neighbours) index.
    let end = SEGMENTS
        .iter()
        .find(|b| **b > base)
        .copied()
        .unwrap_or(RECORDS);
    let ix = &r
        .files
        .iter()
        .find(|f| f.0 == format!("{base:020}.index"))
        .unwrap()
        .1;
    let ni = ix.len() / 8;
    let e = (k % ni as u64) as usize;
    let entry =
        |i: usize| base + u32::from_be_bytes(ix[i * 8..i * 8 + 4].try_into().unwrap()) as i64;
    let mut reads = vec![base, base + 1, (base + end) / 2, end - 11, end - 1];
    for i in [e.saturating_sub(1), e, (e + 1).min(ni - 1)] {
        reads.extend([entry(i), entry(i) - 1, entry(i) + 1]);
    }
    reads.retain(|n| (base..end).contains(n));
    for n in reads {
        let v = read_value(m, "t-0", n)
            .unwrap_or_else(|e| panic!("{what}: offset {n}: {e}\n{}", m.log()));
        assert_eq!(v, bulk_value(n as usize).as_bytes(), "{what}: offset {n}");
    }
    let log = log_since(m, from);
    let seg_log = format!("{base:020}.log");
    let reported = log.lines().any(|l| {
        l.contains(&seg_log)
            && (l.contains("Could not find offset index file")
                || l.contains("Found a corrupted index file"))
    });
    let active = base == *SEGMENTS.last().unwrap();
    // The active segment of an unclean data dir is rebuilt by recovery anyway.
    if clean || !active {
        assert!(
            reported,
            "{what}: damage not reported at open or first use:\n{log}"
        );
    }
    let mut mismatches = 0;
    // While mounted: the rebuilt files on disk, preallocated if active.
    for suffix in ["index", "timeindex"] {
        let name = format!("{base:020}.{suffix}");
        let want = &r.files.iter().find(|f| f.0 == name).unwrap().1;
        let got = std::fs::read(dir.join(&name)).unwrap();
        let ok = if active {
            let full = if suffix == "index" {
                OFFSET_PREALLOC
            } else {
                TIME_PREALLOC
            };
            got.len() as u64 == full
                && got.starts_with(want)
                && got[want.len()..].iter().all(|b| *b == 0)
        } else {
            &got == want
        };
        if !ok {
            eprintln!(
                "{what}: {name} differs while mounted ({} bytes, want {})",
                got.len(),
                want.len()
            );
            mismatches += 1;
        }
    }
    assert_eq!(
        crate::torture_util::status(m, "t-0", "log_end_offset"),
        RECORDS,
        "{what}"
    );
    m.unmount_clean();
    for (name, want) in &r.files {
        let got = std::fs::read(dir.join(name)).unwrap_or_default();
        if &got != want {
            eprintln!(
                "{what}: {name} differs after unmount ({} bytes, want {})",
                got.len(),
                want.len()
            );
            mismatches += 1;
        }
    }
    assert_no_panic(m);
    mismatches
}

fn index_damage(random_rounds: usize) {
    let mut m = mount!(OPTS);
    let r = setup(&mut m);
    let mut rng = Rng::new("index_damage");
    let (mut cases, mut mismatches) = (0usize, 0usize);
    for base in SEGMENTS {
        for d in ALL {
            for clean in [true, false] {
                mismatches += run_case(&mut m, &r, base, d, clean, 1);
                cases += 1;
            }
        }
    }
    for _ in 0..random_rounds {
        let base = SEGMENTS[rng.range(0, 3) as usize];
        let d = ALL[rng.range(0, ALL.len() as u64) as usize];
        let clean = rng.range(0, 2) == 0;
        mismatches += run_case(&mut m, &r, base, d, clean, rng.next());
        cases += 1;
    }
    m.remount();
    m.unmount_clean();
    assert_check_clean(&m.data, OPTS);
    println!("index_damage: {cases} cases, {mismatches} byte mismatches");
    assert_eq!(mismatches, 0, "rebuilt indexes differ from undamaged ones");
}

/// Regression (storage, fixed in c15bda1): after a clean shutdown the active
/// segment's log end is found by scanning from its last index entry. An entry
/// inside the `.log` but off its batch made the scan find nothing, so the log
/// end fell back to the base offset (1360 instead of 1500) and the next append
/// would have reused offset 1360.
#[test]
fn last_active_entry_off_its_batch() {
    let mut m = mount!(OPTS);
    let r = setup(&mut m);
    let ni = r
        .files
        .iter()
        .find(|f| f.0 == format!("{:020}.index", 1360))
        .unwrap()
        .1
        .len()
        / 8;
    let k = ni as u64 - 1; // the last entry, moved 1 + k % 100 bytes into its batch
    assert_eq!(
        run_case(&mut m, &r, 1360, Damage::PositionOffBatch, true, k),
        0
    );
}

#[test]
fn damaged_indexes_are_rebuilt_byte_identical() {
    index_damage(10 * scale());
}

/// The long variant: 500 random cases (times COMMITFS_TORTURE_SCALE).
#[test]
#[ignore]
fn damaged_indexes_long() {
    index_damage(long_rounds(500));
}
