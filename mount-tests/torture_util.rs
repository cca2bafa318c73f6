//! Shared pieces of the torture suite: scale, a seeded RNG, an independent
//! reader of a partition's `.log` files, and `commitfs check` as a judge.
//!
//! Short variants run in `cargo test`. `COMMITFS_TORTURE_SCALE=N` multiplies
//! the rounds (the long suite is N=10, plus the `#[ignore]`d tests, see the
//! README); `COMMITFS_TORTURE_SEED` replays a run.

use std::path::Path;
use std::process::Command;

use commitfs::record::BatchIter;

/// The rounds multiplier: 1 in `cargo test`, more for the long suite.
pub fn scale() -> usize {
    std::env::var("COMMITFS_TORTURE_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|n| *n >= 1)
        .unwrap_or(1)
}

/// xorshift64*: enough randomness for damage positions and timings.
pub struct Rng(u64);

impl Rng {
    /// Seeded from `COMMITFS_TORTURE_SEED` or the clock; prints the seed.
    pub fn new(test: &str) -> Rng {
        let seed = std::env::var("COMMITFS_TORTURE_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
            });
        println!("{test}: seed {seed} (COMMITFS_TORTURE_SEED={seed} replays it)");
        Rng(seed | 1)
    }

    pub fn seeded(seed: u64) -> Rng {
        Rng(seed | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `lo..hi` (hi > lo).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo)
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// One batch as read back from a `.log`, independently of the storage code.
#[derive(Debug)]
pub struct ReadBatch {
    pub base_offset: i64,
    pub values: Vec<Vec<u8>>,
}

/// The sorted base offsets of the `.log` files of a partition directory.
pub fn segment_bases(dir: &Path) -> Vec<i64> {
    let mut v: Vec<i64> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| {
            let n = e.ok()?.file_name().into_string().ok()?;
            n.strip_suffix(".log")?.parse().ok()
        })
        .collect();
    v.sort_unstable();
    v
}

pub fn seg_file(dir: &Path, base: i64, suffix: &str) -> std::path::PathBuf {
    dir.join(format!("{base:020}.{suffix}"))
}

/// Every batch of a partition directory, checked: each `.log` is whole batches
/// with valid CRCs, the file name is its first base offset, and offsets are
/// contiguous from the first segment to the end. Panics with the reason.
pub fn read_partition(dir: &Path) -> Vec<ReadBatch> {
    let mut out = Vec::new();
    let mut next: Option<i64> = None;
    for base in segment_bases(dir) {
        let bytes = std::fs::read(seg_file(dir, base, "log")).expect("read .log");
        let mut first = true;
        let mut end = 0;
        for item in BatchIter::new(&bytes) {
            let (pos, batch) =
                item.unwrap_or_else(|e| panic!("{}/{base:020}.log: bad batch: {e}", dir.display()));
            batch
                .verify_crc()
                .unwrap_or_else(|e| panic!("{}/{base:020}.log at {pos}: {e}", dir.display()));
            let h = batch.header;
            if first {
                assert_eq!(h.base_offset, base, "{base:020}.log starts elsewhere");
                first = false;
            }
            if let Some(n) = next {
                assert_eq!(
                    h.base_offset, n,
                    "{base:020}.log at {pos}: offsets not contiguous"
                );
            }
            next = Some(h.next_offset());
            let values = batch
                .records()
                .expect("records decode")
                .into_iter()
                .map(|r| r.value.unwrap_or_default().to_vec())
                .collect::<Vec<_>>();
            assert_eq!(values.len() as i64, h.next_offset() - h.base_offset);
            out.push(ReadBatch {
                base_offset: h.base_offset,
                values,
            });
            end = pos + batch.size();
        }
        assert_eq!(end, bytes.len(), "{base:020}.log has a torn tail");
    }
    out
}

/// `commitfs check DATA -o OPTS`: (exit code, output).
pub fn check(data: &Path, opts: &str) -> (i32, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_commitfs"));
    c.arg("check").arg(data);
    if !opts.is_empty() {
        c.args(["-o", opts]);
    }
    let out = c.output().expect("run commitfs check");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

/// `commitfs check` must find nothing wrong.
pub fn assert_check_clean(data: &Path, opts: &str) {
    let (code, text) = check(data, opts);
    assert_eq!(code, 0, "commitfs check is not clean:\n{text}");
}

/// Sum of the "truncated N bytes" counts in a daemon log excerpt.
pub fn truncated_bytes(log: &str) -> Vec<u64> {
    log.lines()
        .filter_map(|l| {
            let rest = l.split("truncated ").nth(1)?;
            rest.split(' ').next()?.parse().ok()
        })
        .collect()
}

/// The daemon log written after `from` bytes.
pub fn log_since(m: &crate::harness::Mount, from: usize) -> String {
    let log = m.log();
    log.get(from..).unwrap_or_default().to_string()
}

/// No "panicked" anywhere in the daemon's log.
pub fn assert_no_panic(m: &crate::harness::Mount) {
    let log = m.log();
    assert!(
        !log.contains("panicked"),
        "the daemon panicked:\n{}",
        log.lines()
            .filter(|l| l.contains("panicked"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// A `status` value read directly (no shell).
pub fn status(m: &crate::harness::Mount, partition: &str, key: &str) -> i64 {
    let text = std::fs::read_to_string(m.mnt.join(partition).join("status")).expect("status");
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}: ")))
        .unwrap_or_else(|| panic!("no {key} in status:\n{text}"))
        .trim()
        .parse()
        .expect("numeric status value")
}

/// `offset/N` read directly.
pub fn read_value(m: &crate::harness::Mount, partition: &str, n: i64) -> std::io::Result<Vec<u8>> {
    std::fs::read(m.mnt.join(partition).join("offset").join(n.to_string()))
}

/// One write(2) of `data` to `log`, opened for append.
pub fn append(m: &crate::harness::Mount, partition: &str, data: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(m.mnt.join(partition).join("log"))?;
    let n = f.write(data)?;
    assert_eq!(n, data.len(), "short write");
    Ok(())
}
