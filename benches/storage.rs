//! Library-level storage benchmarks (issue 5): commitfs side by side with its
//! peers, in the same run, on the same records. Prints markdown tables of
//! medians; asserts nothing about speed.
//!
//! ```text
//! CARGO_TARGET_DIR=/work/target-bench cargo bench --bench storage             # everything
//! CARGO_TARGET_DIR=/work/target-bench cargo bench --bench storage -- append   # one section
//! COMMITFS_BENCH_QUICK=1 cargo bench --bench storage                          # smoke run, seconds
//! ```
//!
//! Sections (filter by name on the command line): `append`, `lookup`, `read`,
//! `rebuild`, `open`. Sizes come from environment variables, see [`Params`].

#[path = "common/batches.rs"]
mod batches;
mod common;

use batches::walk_batches;
use common::{GIB, KIB, MIB, Rng, Spread, env_u64, median, parse_size, percentile};
use std::env;
use std::fs::{self, File};
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use commitfs::record::{BatchIter, NewRecord, encode_batch};
use commitfs::storage::{CLEAN_SHUTDOWN_FILE, LogConfig, LogManager, OpenOptions, PartitionLog};

const PARTITION: &str = "bench-0";
const SYSTEMS: [&str; 3] = ["commitfs", "commitlog", "write_all"];

// ---- parameters ----------------------------------------------------------------

/// Everything the run can be sized by.
struct Params {
    /// `COMMITFS_BENCH_QUICK=1`: tiny sizes, finishes in seconds (CI smoke run).
    quick: bool,
    /// `COMMITFS_BENCH_RUNS`: runs per figure; the table shows the median.
    runs: usize,
    /// `COMMITFS_BENCH_APPEND_BYTES`: payload bytes appended per system, per run and per shape.
    append_bytes: u64,
    /// `COMMITFS_BENCH_BYTES`: size of the large partition (lookups, reads, rebuild).
    big_bytes: u64,
    /// `COMMITFS_BENCH_APPEND_SHAPES`: append shapes (default: 100 B, 1 KiB, 10 KiB × 1, 10, 100).
    append_shapes: Vec<(usize, usize)>,
    /// `COMMITFS_BENCH_SYSTEMS`: which appenders run (default `commitfs,commitlog,write_all`);
    /// one system alone is handy under a profiler.
    systems: Vec<String>,
    /// `COMMITFS_BENCH_SHAPES`: record shapes of the large partitions, `SIZExBATCH,...`.
    shapes: Vec<(usize, usize)>,
    /// `COMMITFS_BENCH_LOOKUPS`: random lookups per shape.
    lookups: usize,
    /// `COMMITFS_BENCH_SEGMENTS`: sealed segments for the open-time figure.
    segments: usize,
    /// `COMMITFS_BENCH_DIR`: where the scratch data dirs go (default: the temp dir).
    dir: Option<PathBuf>,
    /// Sections named on the command line (none = all).
    only: Vec<String>,
}

fn parse_shapes(v: &str) -> Vec<(usize, usize)> {
    v.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| {
            let (size, batch) = s
                .trim()
                .split_once('x')
                .unwrap_or_else(|| panic!("shape {s}: expected SIZExBATCH, e.g. 100x100"));
            (
                parse_size(size).expect("record size") as usize,
                batch.parse().expect("records per batch"),
            )
        })
        .collect()
}

impl Params {
    fn from_env() -> Params {
        let quick = env::var("COMMITFS_BENCH_QUICK").is_ok_and(|v| !v.is_empty() && v != "0");
        let only = env::args()
            .skip(1)
            .filter(|a| !a.starts_with('-'))
            .collect();
        Params {
            quick,
            runs: env_u64("COMMITFS_BENCH_RUNS", if quick { 1 } else { 5 }).max(1) as usize,
            append_bytes: env_u64(
                "COMMITFS_BENCH_APPEND_BYTES",
                if quick { 256 * KIB } else { 16 * MIB },
            ),
            big_bytes: env_u64("COMMITFS_BENCH_BYTES", if quick { 4 * MIB } else { GIB }),
            append_shapes: parse_shapes(&env::var("COMMITFS_BENCH_APPEND_SHAPES").unwrap_or_else(
                |_| "100x1,100x10,100x100,1Kx1,1Kx10,1Kx100,10Kx1,10Kx10,10Kx100".into(),
            )),
            systems: env::var("COMMITFS_BENCH_SYSTEMS")
                .unwrap_or_else(|_| SYSTEMS.join(","))
                .split(',')
                .map(|s| s.trim().to_string())
                .collect(),
            shapes: parse_shapes(
                &env::var("COMMITFS_BENCH_SHAPES").unwrap_or_else(|_| "100x100,100x1".into()),
            ),
            lookups: env_u64("COMMITFS_BENCH_LOOKUPS", if quick { 200 } else { 20_000 }) as usize,
            segments: env_u64("COMMITFS_BENCH_SEGMENTS", if quick { 4 } else { 1000 }) as usize,
            dir: env::var_os("COMMITFS_BENCH_DIR").map(PathBuf::from),
            only,
        }
    }

    fn wants(&self, section: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|o| section.contains(o.as_str()))
    }
}

// ---- helpers ---------------------------------------------------------------------

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn mb_s(bytes: u64, s: f64) -> f64 {
    bytes as f64 / s / 1e6
}

/// `12.3 k`, `4.56 M`.
fn si(v: f64) -> String {
    if v >= 1e9 {
        format!("{:.2} G", v / 1e9)
    } else if v >= 1e6 {
        format!("{:.2} M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1} k", v / 1e3)
    } else {
        format!("{v:.1}")
    }
}

fn human_bytes(b: u64) -> String {
    if b >= GIB {
        format!("{:.2} GiB", b as f64 / GIB as f64)
    } else if b >= MIB {
        format!("{:.1} MiB", b as f64 / MIB as f64)
    } else if b >= KIB {
        format!("{:.1} KiB", b as f64 / KIB as f64)
    } else {
        format!("{b} B")
    }
}

/// A markdown table's header row, and the rule under it.
fn table_head(header: &str) {
    println!("{header}");
    println!("{}|", "|---".repeat(header.matches('|').count() - 1));
}

fn us(s: f64) -> String {
    format!("{:.1} µs", s * 1e6)
}

/// Deterministic, incompressible-looking payload bytes shared by every system.
fn payload_pool(len: usize) -> Vec<u8> {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut v = Vec::with_capacity(len + 8);
    while v.len() < len {
        v.extend_from_slice(&rng.next().to_le_bytes());
    }
    v.truncate(len);
    v
}

/// `batch` record values of `size` bytes each, slices of the pool.
fn batch_values(pool: &[u8], size: usize, batch: usize) -> Vec<&[u8]> {
    (0..batch)
        .map(|i| {
            let start = (i * 4099) % (pool.len() - size);
            &pool[start..start + size]
        })
        .collect()
}

fn manager(dir: &Path, config: &LogConfig) -> LogManager {
    LogManager::open(dir, config.clone(), OpenOptions::default()).expect("open data dir")
}

fn config_with(pairs: &[(&str, String)]) -> LogConfig {
    let mut c = LogConfig::default();
    for (k, v) in pairs {
        c.set(k, v).expect("valid bench config");
    }
    c
}

/// The `.log` files of a partition dir, sorted.
fn log_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .expect("partition dir")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    v.sort();
    v
}

fn index_files(dir: &Path) -> Vec<PathBuf> {
    fs::read_dir(dir)
        .expect("partition dir")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.extension()
                .is_some_and(|x| x == "index" || x == "timeindex")
        })
        .collect()
}

fn total_size(files: &[PathBuf]) -> u64 {
    files
        .iter()
        .map(|f| fs::metadata(f).expect("stat").len())
        .sum()
}

// ---- append ----------------------------------------------------------------------

/// One system's append run: `batches` appends of the same `values`.
fn run_commitfs_append(dir: &Path, values: &[&[u8]], batches: usize) -> f64 {
    let mgr = manager(dir, &LogConfig::default());
    let log = mgr.create_partition(PARTITION).expect("create partition");
    let records: Vec<NewRecord> = values.iter().map(|v| NewRecord::value(v)).collect();
    let t = Instant::now();
    for _ in 0..batches {
        log.append(&records).expect("append");
    }
    let s = secs(t.elapsed());
    drop(log);
    drop(mgr); // no close: it would fsync, which no peer here does
    s
}

fn run_commitlog_append(dir: &Path, values: &[&[u8]], batches: usize) -> f64 {
    use commitlog::message::MessageBuf;
    let mut opts = commitlog::LogOptions::new(dir);
    opts.message_max_bytes(64 << 20);
    let mut log = commitlog::CommitLog::new(opts).expect("commitlog");
    let mut buf = MessageBuf::default();
    let t = Instant::now();
    for _ in 0..batches {
        buf.clear();
        for v in values {
            buf.push(v).expect("push");
        }
        log.append(&mut buf).expect("commitlog append");
    }
    secs(t.elapsed())
}

fn run_write_all(dir: &Path, values: &[&[u8]], batches: usize) -> f64 {
    let records: Vec<NewRecord> = values.iter().map(|v| NewRecord::value(v)).collect();
    let mut bytes = Vec::new();
    encode_batch(&mut bytes, 0, 0, &records);
    fs::create_dir_all(dir).expect("mkdir");
    let mut f = File::create(dir.join("plain.log")).expect("create");
    let t = Instant::now();
    for _ in 0..batches {
        f.write_all(&bytes).expect("write_all");
    }
    secs(t.elapsed())
}

fn bench_append(p: &Params, scratch: &Path, pool: &[u8]) {
    println!("\n## Append (page cache, no fsync)\n");
    println!(
        "{} of payload per system per run, {} runs, median; MB/s counts record payload bytes (the same for every system). \
write_all writes the same encoded Kafka batch with one `write(2)` per batch and no encoding: the physical limit. \
The last column is the best commitfs/commitlog any library doing one `write(2)` per append of these bytes could reach.\n",
        human_bytes(p.append_bytes),
        p.runs
    );
    table_head(
        "| record | batch | commitfs rec/s | commitfs MB/s | commitlog rec/s | commitlog MB/s | write_all rec/s | write_all MB/s | commitfs/commitlog | commitfs/write_all | write_all/commitlog (ceiling) |",
    );
    let on: Vec<bool> = SYSTEMS
        .iter()
        .map(|s| p.systems.iter().any(|x| x == s))
        .collect();
    let mut p2 = None;
    for &(size, batch) in &p.append_shapes {
        let values = batch_values(pool, size, batch);
        let batches = (p.append_bytes / (size * batch) as u64).max(1) as usize;
        let records = (batches * batch) as f64;
        let mut t = [Vec::new(), Vec::new(), Vec::new()];
        for run in 0..p.runs {
            for k in 0..3 {
                let which = (k + run) % 3;
                if !on[which] {
                    t[which].push(f64::NAN);
                    continue;
                }
                let dir = scratch.join(format!("append-{which}"));
                let s = match which {
                    0 => run_commitfs_append(&dir, &values, batches),
                    1 => run_commitlog_append(&dir, &values, batches),
                    _ => run_write_all(&dir, &values, batches),
                };
                t[which].push(s);
                fs::remove_dir_all(&dir).expect("clean up");
            }
        }
        if (size, batch) == (100, 100) && on[0] && on[2] {
            p2 = Some((records, t[0].clone(), t[2].clone()));
        }
        let [a, b, c] = t.map(|mut v| median(&mut v));
        let mb = (batches * batch * size) as u64;
        println!(
            "| {} | {batch} | {} | {:.0} | {} | {:.0} | {} | {:.0} | **{:.2}** | {:.2} | {:.2} |",
            human_bytes(size as u64),
            si(records / a),
            mb_s(mb, a),
            si(records / b),
            mb_s(mb, b),
            si(records / c),
            mb_s(mb, c),
            b / a,
            c / a,
            b / c
        );
    }
    if let Some((records, lib, write)) = p2 {
        print_p2(records, &lib, &write);
    }
}

/// P2 (100 B × 100): the library append against a plain `write(2)` of the
/// same encoded bytes, min, median and max of the runs, side by side.
fn print_p2(records: f64, lib: &[f64], write: &[f64]) {
    let rate = |t: &[f64]| Spread::of(t).map(|s| records / s);
    let (l, w) = (rate(lib), rate(write));
    let per_run: Vec<f64> = lib.iter().zip(write).map(|(l, w)| w / l).collect();
    let r = Spread::of(&per_run);
    println!(
        "\n| id | commitfs | baseline (same run) | ratio | target |\n|---|---|---|---|---|\n\
| P2 | `PartitionLog::append`, 100 B × 100, {} runs: {} rec/s ({}–{}) | `write(2)` of the same encoded batch: {} rec/s ({}–{}) | **{:.2}** (runs {:.2}–{:.2}) | ≥ 0.9 |",
        lib.len(),
        si(l.median),
        si(l.min),
        si(l.max),
        si(w.median),
        si(w.min),
        si(w.max),
        l.median / w.median,
        r.min,
        r.max
    );
}

// ---- the large partitions ----------------------------------------------------------

/// A closed (clean) data dir holding one partition of about `bytes` in one segment.
struct BigPartition {
    data: PathBuf,
    config: LogConfig,
    size: usize,
    batch: usize,
    bytes: u64,
    records: i64,
    build_s: f64,
}

impl BigPartition {
    fn part_dir(&self) -> PathBuf {
        self.data.join(PARTITION)
    }
    fn label(&self) -> String {
        format!("{} B × {}", self.size, self.batch)
    }
}

fn build_big(scratch: &Path, pool: &[u8], size: usize, batch: usize, bytes: u64) -> BigPartition {
    let data = scratch.join(format!("big-{size}x{batch}"));
    // One segment holds it all, so the rebuild figures are for one segment.
    let seg = (bytes + 64 * MIB).min(i32::MAX as u64);
    let config = config_with(&[("segment.bytes", seg.to_string())]);
    let mgr = manager(&data, &config);
    let log = mgr.create_partition(PARTITION).expect("create");
    let values = batch_values(pool, size, batch);
    let records: Vec<NewRecord> = values.iter().map(|v| NewRecord::value(v)).collect();
    let t = Instant::now();
    let mut written = 0u64;
    while written < bytes {
        written += log.append(&records).expect("append").bytes;
    }
    let build_s = secs(t.elapsed());
    let end = log.log_end_offset();
    drop(log);
    mgr.close().expect("close");
    BigPartition {
        data,
        config,
        size,
        batch,
        bytes: written,
        records: end,
        build_s,
    }
}

// ---- lookups -------------------------------------------------------------------------

fn bench_lookup(p: &Params, big: &BigPartition) {
    let mgr = manager(&big.data, &big.config);
    let log = mgr.partition(PARTITION).expect("partition");
    let files = log_files(&big.part_dir());
    let oracle = walk_batches(&files, false);
    let handles: Vec<File> = files.iter().map(|f| File::open(f).unwrap()).collect();
    let max_batch = oracle.iter().map(|b| b.size).max().unwrap_or(0);
    let mut buf = vec![0u8; max_batch];
    let end = log.log_end_offset();
    let mut rng = Rng(42);
    // Warm both paths (index maps, page cache) before timing.
    for _ in 0..100.min(p.lookups) {
        let n = rng.below(end as u64) as i64;
        log.read(n).expect("read");
    }
    let before = log.status().unwrap().lookup_bytes_read;
    let (mut lib, mut raw) = (Vec::with_capacity(p.lookups), Vec::with_capacity(p.lookups));
    let mut batch_bytes = 0u64;
    for i in 0..p.lookups {
        let n = rng.below(end as u64) as i64;
        let lib_first = i % 2 == 0;
        let time_lib = || {
            let t = Instant::now();
            let r = log.read(n).expect("read");
            let s = secs(t.elapsed());
            assert_eq!(r.offset, n);
            s
        };
        let mut time_raw = || {
            let t = Instant::now();
            let at = oracle.partition_point(|b| b.last_offset < n);
            let b = oracle[at];
            handles[b.file]
                .read_exact_at(&mut buf[..b.size], b.pos)
                .expect("pread");
            let s = secs(t.elapsed());
            (s, b.size)
        };
        let (l, (r, sz)) = if lib_first {
            let l = time_lib();
            (l, time_raw())
        } else {
            let r = time_raw();
            (time_lib(), r)
        };
        lib.push(l);
        raw.push(r);
        batch_bytes += sz as u64;
    }
    let read_bytes = log.status().unwrap().lookup_bytes_read - before;
    drop(log);
    mgr.close().expect("close");
    lib.sort_by(|a, b| a.partial_cmp(b).unwrap());
    raw.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let (lm, rm) = (percentile(&lib, 0.5), percentile(&raw, 0.5));
    let per_lookup = read_bytes as f64 / p.lookups as f64;
    let per_batch = batch_bytes as f64 / p.lookups as f64;
    let interval = big.config.index_interval_bytes as f64;
    println!(
        "| {} | {} | {} | {} | {} | {} | **{:.2}** | {:.0} | {:.0} | {:.0} | **{:.2}** |",
        big.label(),
        human_bytes(big.bytes),
        us(lm),
        us(percentile(&lib, 0.99)),
        us(rm),
        us(percentile(&raw, 0.99)),
        lm / rm,
        per_lookup,
        per_batch,
        interval + per_batch,
        per_lookup / per_batch
    );
}

// ---- sequential reads ------------------------------------------------------------------

/// Plain `read(2)` of every `.log` with a 1 MiB buffer.
fn raw_read(files: &[PathBuf]) -> u64 {
    let mut total = 0u64;
    read_files(files, MIB as usize, |b| total += b.len() as u64);
    total
}

/// Every file of `files` in plain `read(2)`s of `chunk` bytes, each given
/// to `each`.
fn read_files(files: &[PathBuf], chunk: usize, mut each: impl FnMut(&[u8])) {
    let mut buf = vec![0u8; chunk];
    for f in files {
        let mut f = File::open(f).expect("open");
        loop {
            let n = f.read(&mut buf).expect("read");
            if n == 0 {
                break;
            }
            each(&buf[..n]);
        }
    }
}

/// The `.log` bytes through `PartitionLog::read_file` (what the mount serves), 1 MiB at a time.
fn lib_raw_read(log: &PartitionLog) -> u64 {
    let mut buf = vec![0u8; MIB as usize];
    let mut total = 0u64;
    for f in log.local().files().expect("files") {
        if !f.name.ends_with(".log") {
            continue;
        }
        let mut off = 0u64;
        loop {
            let n = log
                .local()
                .read_file(&f.name, off, &mut buf)
                .expect("read_file");
            if n == 0 {
                break;
            }
            off += n as u64;
        }
        total += off;
    }
    total
}

/// Every record decoded by the codec from `read_file` chunks: (bytes, records).
fn lib_decode_all(log: &PartitionLog) -> (u64, u64) {
    const CHUNK: usize = 8 << 20;
    let mut buf = vec![0u8; CHUNK];
    let (mut total, mut records) = (0u64, 0u64);
    for f in log.local().files().expect("files") {
        if !f.name.ends_with(".log") {
            continue;
        }
        let mut off = 0u64;
        let mut have = 0usize;
        loop {
            let n = log
                .local()
                .read_file(&f.name, off, &mut buf[have..])
                .expect("read_file");
            off += n as u64;
            have += n;
            let mut used = 0usize;
            let mut it = BatchIter::new(&buf[..have]);
            while let Some(Ok((at, batch))) = it.next() {
                batch.verify_crc().expect("crc");
                records += batch.records().expect("records").len() as u64;
                used = at + batch.size();
            }
            total += used as u64;
            buf.copy_within(used..have, 0);
            have -= used;
            if n == 0 {
                break;
            }
        }
    }
    (total, records)
}

fn bench_read(p: &Params, big: &BigPartition) {
    let files = log_files(&big.part_dir());
    let mgr = manager(&big.data, &big.config);
    let log = mgr.partition(PARTITION).expect("partition");
    // Record-at-a-time reads are slow by design: time a bounded prefix.
    let per_record_n = (big.records as u64).min(if p.quick { 1000 } else { 50_000 }) as i64;
    let per_record_bytes: u64 = per_record_n as u64 * big.size as u64;
    let mut t = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
    let mut decoded = 0u64;
    for run in 0..p.runs {
        for k in 0..4 {
            let which = (k + run) % 4;
            let start = Instant::now();
            match which {
                0 => {
                    raw_read(&files);
                }
                1 => {
                    lib_raw_read(&log);
                }
                2 => decoded = lib_decode_all(&log).1,
                _ => {
                    for o in 0..per_record_n {
                        std::hint::black_box(log.read(o).expect("read"));
                    }
                }
            }
            t[which].push(secs(start.elapsed()));
        }
    }
    drop(log);
    mgr.close().expect("close");
    assert_eq!(decoded as i64, big.records, "decoded every record");
    let [raw, lraw, dec, per] = t.map(|mut v| median(&mut v));
    println!(
        "| {} | {} | {:.0} | {:.0} ({:.2}) | {:.0} ({:.2}), {} rec/s | {:.1} ({:.4}), {} rec/s |",
        big.label(),
        human_bytes(big.bytes),
        mb_s(big.bytes, raw),
        mb_s(big.bytes, lraw),
        raw / lraw,
        mb_s(big.bytes, dec),
        raw / dec,
        si(big.records as f64 / dec),
        mb_s(per_record_bytes, per),
        mb_s(per_record_bytes, per) / mb_s(big.bytes, raw),
        si(per_record_n as f64 / per),
    );
}

// ---- index rebuild -----------------------------------------------------------------------

/// A plain CRC-32C pass over the files, 8 MiB reads (the recovery chunk size).
fn crc_pass(files: &[PathBuf]) -> u32 {
    let mut crc = 0u32;
    read_files(files, 8 << 20, |b| crc = crc32c::crc32c_append(crc, b));
    crc
}

fn bench_rebuild(p: &Params, big: &BigPartition) {
    let dir = big.part_dir();
    let files = log_files(&dir);
    // The unclean reopen recovers from the recovery point: the active (last) segment.
    let active_bytes = fs::metadata(files.last().expect("a segment"))
        .expect("stat")
        .len();
    let mut t = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
    for run in 0..p.runs {
        for k in 0..4 {
            let which = (k + run) % 4;
            let s = match which {
                0 => {
                    let start = Instant::now();
                    std::hint::black_box(crc_pass(&files));
                    secs(start.elapsed())
                }
                1 => {
                    // Missing indexes: LogManager::open rebuilds them at load.
                    for f in index_files(&dir) {
                        fs::remove_file(f).expect("rm index");
                    }
                    let start = Instant::now();
                    let mgr = manager(&big.data, &big.config);
                    let s = secs(start.elapsed());
                    mgr.close().expect("close");
                    s
                }
                2 => {
                    // Unclean shutdown: recovery validates every batch (CRC) and rebuilds.
                    fs::remove_file(big.data.join(CLEAN_SHUTDOWN_FILE)).expect("rm marker");
                    let start = Instant::now();
                    let mgr = manager(&big.data, &big.config);
                    let s = secs(start.elapsed());
                    mgr.close().expect("close");
                    s
                }
                _ => {
                    // Clean open with indexes present: the fixed cost inside the two above.
                    let start = Instant::now();
                    let mgr = manager(&big.data, &big.config);
                    let s = secs(start.elapsed());
                    mgr.close().expect("close");
                    s
                }
            };
            t[which].push(s);
        }
    }
    let [crc, rebuild, recover, clean] = t.map(|mut v| median(&mut v));
    let total = total_size(&files);
    let crc_mb = mb_s(total, crc);
    println!(
        "| {} | {} | {:.0} | {:.0} | **{:.2}** | {:.0} | **{:.2}** | {:.1} ms |",
        big.label(),
        human_bytes(total),
        crc_mb,
        mb_s(total, rebuild),
        mb_s(total, rebuild) / crc_mb,
        mb_s(active_bytes, recover),
        mb_s(active_bytes, recover) / crc_mb,
        clean * 1e3,
    );
}

// ---- open time ------------------------------------------------------------------------------

fn build_segments(dir: &Path, pool: &[u8], sealed: usize, config: &LogConfig) {
    let mgr = manager(dir, config);
    let log = mgr.create_partition(PARTITION).expect("create");
    let values = batch_values(pool, 100, 100);
    let records: Vec<NewRecord> = values.iter().map(|v| NewRecord::value(v)).collect();
    while log.status().unwrap().segments <= sealed {
        log.append(&records).expect("append");
    }
    drop(log);
    mgr.close().expect("close");
}

fn bench_open(p: &Params, scratch: &Path, pool: &[u8]) {
    let small = config_with(&[("segment.bytes", MIB.to_string())]);
    let many = scratch.join("open-many");
    let one = scratch.join("open-one");
    build_segments(&many, pool, p.segments, &small);
    build_segments(&one, pool, 0, &small);
    let mut t = [Vec::new(), Vec::new()];
    for run in 0..p.runs.max(3) {
        for k in 0..2 {
            let which = (k + run) % 2;
            let dir = if which == 0 { &many } else { &one };
            let start = Instant::now();
            let mgr = manager(dir, &small);
            t[which].push(secs(start.elapsed()));
            mgr.close().expect("close");
        }
    }
    let [m, o] = t.map(|mut v| median(&mut v));
    println!(
        "\n## Clean open: `LogManager::open` with many sealed segments vs one (P5, library)\n"
    );
    table_head("| sealed segments | open many | open one | many/one |");
    println!(
        "| {} × 1 MiB | {:.1} ms | {:.1} ms | **{:.2}** |",
        p.segments,
        m * 1e3,
        o * 1e3,
        m / o
    );
    fs::remove_dir_all(&many).expect("clean up");
    fs::remove_dir_all(&one).expect("clean up");
}

// ---- main -----------------------------------------------------------------------------------

fn main() {
    let p = Params::from_env();
    let base = p.dir.clone().unwrap_or_else(env::temp_dir);
    fs::create_dir_all(&base).expect("bench dir");
    let scratch = tempfile::Builder::new()
        .prefix("commitfs-bench-")
        .tempdir_in(&base)
        .expect("scratch dir");
    let pool = Arc::new(payload_pool(4 << 20));
    println!("# commitfs storage benchmarks\n");
    println!(
        "quick={} runs={} append_bytes={} big_bytes={} shapes={:?} lookups={} segments={} scratch={}",
        p.quick,
        p.runs,
        human_bytes(p.append_bytes),
        human_bytes(p.big_bytes),
        p.shapes,
        p.lookups,
        p.segments,
        scratch.path().display()
    );

    if p.wants("append") {
        bench_append(&p, scratch.path(), &pool);
    }

    if p.wants("lookup") || p.wants("read") || p.wants("rebuild") {
        let mut bigs = Vec::new();
        println!("\n## Large partitions (built with `PartitionLog::append`, then closed)\n");
        table_head("| shape | size | records | build MB/s (on-disk bytes) |");
        for &(size, batch) in &p.shapes {
            let big = build_big(scratch.path(), &pool, size, batch, p.big_bytes);
            println!(
                "| {} | {} | {} | {:.0} |",
                big.label(),
                human_bytes(big.bytes),
                big.records,
                mb_s(big.bytes, big.build_s)
            );
            bigs.push(big);
        }
        if p.wants("lookup") {
            println!(
                "\n## Random offset lookup (P3): `PartitionLog::read(N)` vs `pread` of the batch\n"
            );
            println!(
                "{} random N per shape, warm page cache. The pread baseline finds the batch in an in-memory table (built by walking the file) \
and preads exactly its bytes; the library goes through the sparse index. Bytes read come from `status().lookup_bytes_read`.\n",
                p.lookups
            );
            table_head(
                "| shape | size | read p50 | read p99 | pread p50 | pread p99 | read/pread | bytes read/lookup | batch bytes | interval+batch | read bytes/batch bytes |",
            );
            for big in &bigs {
                bench_lookup(&p, big);
            }
        }
        if p.wants("read") {
            println!(
                "\n## Sequential read MB/s (warm page cache; ratio to raw read in parentheses)\n"
            );
            table_head(
                "| shape | size | raw `read(2)` 1 MiB | library `read_file` 1 MiB | library decode all records (`read_file` + `BatchIter` + CRC + `records()`) | library `read(offset)` per record (prefix) |",
            );
            for big in &bigs {
                bench_read(&p, big);
            }
        }
        if p.wants("rebuild") {
            println!("\n## Index rebuild (P7) vs a plain CRC-32C pass over the same file\n");
            println!(
                "rebuild = `LogManager::open` with the .index/.timeindex files deleted (header walk, no CRC); \
recover = `LogManager::open` without `.kafka_cleanshutdown` (CRC of every batch + rebuild of the active segment). \
Both include the clean-open fixed cost shown last. MB/s.\n"
            );
            table_head(
                "| shape | segment | CRC-32C pass | rebuild | rebuild/CRC | recover | recover/CRC | clean open |",
            );
            for big in &bigs {
                bench_rebuild(&p, big);
            }
        }
        for big in bigs {
            fs::remove_dir_all(&big.data).expect("clean up");
        }
    }

    if p.wants("open") {
        bench_open(&p, scratch.path(), &pool);
    }
    println!();
}
