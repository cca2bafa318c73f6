//! Shared pieces of the torture suite: scale, a seeded RNG, an independent
//! reader of a partition's `.log` files (another implementation's decoder,
//! the kafka-protocol crate), and `commitfs check` as a second judge.
//!
//! Short variants run in `cargo test`. `COMMITFS_TORTURE_SCALE=N` multiplies
//! the rounds (the long suite is N=10, plus the `#[ignore]`d tests, see the
//! README); `COMMITFS_TORTURE_SEED` replays a run. CI runs the `#[ignore]`d
//! long variants too, cut down by `COMMITFS_TORTURE_LONG_DIVISOR`, so that
//! their code runs on every change.

use std::path::Path;
use std::process::Command;

use kafka_protocol::records::{BatchDecodeInfo, Record, RecordBatchDecoder};

/// The rounds multiplier: 1 in `cargo test`, more for the long suite.
pub fn scale() -> usize {
    std::env::var("COMMITFS_TORTURE_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|n| *n >= 1)
        .unwrap_or(1)
}

/// The rounds of a long variant: `n` times the scale, divided by
/// `COMMITFS_TORTURE_LONG_DIVISOR` (1 when unset), at least 1.
pub fn long_rounds(n: usize) -> usize {
    let divisor = std::env::var("COMMITFS_TORTURE_LONG_DIVISOR")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|d: &usize| *d >= 1)
        .unwrap_or(1);
    (n * scale() / divisor).max(1)
}

/// xorshift64*: enough randomness for damage positions and timings.
pub struct Rng(u64);

impl Rng {
    /// Seeded from `COMMITFS_TORTURE_SEED` or the clock; prints the seed.
    pub fn new(test: &str) -> Rng {
        let seed = crate::kafka_support::seed_from_env("COMMITFS_TORTURE_SEED");
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

/// Puts back the data dir `data` as the copy `pristine` holds it, for the
/// next damage to start from the same bytes.
pub fn restore(pristine: &Path, data: &Path) {
    let _ = std::fs::remove_dir_all(data);
    let out = crate::harness::run_bounded(
        Command::new("cp").arg("-a").arg(pristine).arg(data),
        "cp -a of the pristine data dir",
        crate::harness::sh_timeout(),
        String::new,
    );
    assert!(out.status.success(), "cp -a: {out:?}");
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

/// The frames of a `.log` (base offset, length, then `length` bytes), split
/// by their 12-byte prefix alone: (position, frame). The bytes past the last
/// whole frame are returned apart (a torn tail).
pub fn frames(bytes: &[u8]) -> (Vec<(usize, &[u8])>, &[u8]) {
    let mut out = Vec::new();
    let mut pos = 0;
    while bytes.len() - pos >= 12 {
        let len = i32::from_be_bytes(bytes[pos + 8..pos + 12].try_into().unwrap());
        let end = pos + 12 + len.max(0) as usize;
        if len < 0 || end > bytes.len() {
            break;
        }
        out.push((pos, &bytes[pos..end]));
        pos = end;
    }
    (out, &bytes[pos..])
}

/// One frame's batch header, checked by kafka-protocol (magic 2, CRC-32C).
pub fn batch_info(frame: &[u8]) -> Result<BatchDecodeInfo, String> {
    let mut b = frame;
    let mut infos = RecordBatchDecoder::decode_batch_info(&mut b).map_err(|e| e.to_string())?;
    match (infos.len(), b.is_empty()) {
        (1, true) => Ok(infos.remove(0)),
        _ => Err("not one v2 batch".to_string()),
    }
}

/// One frame decoded by kafka-protocol: its header and its records.
pub fn decode_batch(frame: &[u8]) -> Result<(BatchDecodeInfo, Vec<Record>), String> {
    let info = batch_info(frame)?;
    let mut b = frame;
    let set = RecordBatchDecoder::decode(&mut b).map_err(|e| e.to_string())?;
    if !b.is_empty() {
        return Err(format!("{} bytes left after the batch", b.len()));
    }
    Ok((info, set.records))
}

/// Every batch of a partition directory, checked with kafka-protocol: each
/// `.log` is whole batches with valid CRCs, the file name is its first base
/// offset, and offsets are contiguous from the first segment to the end.
/// Panics with the reason.
pub fn read_partition(dir: &Path) -> Vec<ReadBatch> {
    let mut out = Vec::new();
    let mut next: Option<i64> = None;
    for base in segment_bases(dir) {
        let bytes = std::fs::read(seg_file(dir, base, "log")).expect("read .log");
        let (frames, tail) = frames(&bytes);
        assert!(
            tail.is_empty(),
            "{base:020}.log has a torn tail of {} bytes",
            tail.len()
        );
        for (i, (pos, frame)) in frames.into_iter().enumerate() {
            let (info, records) = decode_batch(frame)
                .unwrap_or_else(|e| panic!("{}/{base:020}.log at {pos}: {e}", dir.display()));
            if i == 0 {
                assert_eq!(info.min_offset, base, "{base:020}.log starts elsewhere");
            }
            if let Some(n) = next {
                assert_eq!(
                    info.min_offset, n,
                    "{base:020}.log at {pos}: offsets not contiguous"
                );
            }
            assert_eq!(records.len(), info.record_count as usize);
            for (j, r) in records.iter().enumerate() {
                assert_eq!(
                    r.offset,
                    info.min_offset + j as i64,
                    "{base:020}.log at {pos}"
                );
            }
            next = Some(info.min_offset + records.len() as i64);
            out.push(ReadBatch {
                base_offset: info.min_offset,
                values: records
                    .into_iter()
                    .map(|r| r.value.map(|v| v.to_vec()).unwrap_or_default())
                    .collect(),
            });
        }
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
    let out = crate::harness::run_bounded(
        &mut c,
        "commitfs check",
        crate::harness::sh_timeout(),
        String::new,
    );
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
    crate::harness::status_value(&text, key)
}

/// The first `len` bytes of `file` through a read-only shared map.
pub fn mapped(file: &std::fs::File, len: usize) -> Vec<u8> {
    use std::os::fd::AsRawFd;
    if len == 0 {
        return Vec::new();
    }
    // SAFETY: a read-only map of a file we hold open, read within its length, then unmapped.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        );
        assert_ne!(p, libc::MAP_FAILED, "{}", std::io::Error::last_os_error());
        let v = std::slice::from_raw_parts(p as *const u8, len).to_vec();
        libc::munmap(p, len);
        v
    }
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
