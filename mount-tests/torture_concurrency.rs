//! R5: concurrent writers, readers and rolls.
//!
//! 8 `dd` writer processes append multi-line writes to one partition and 8
//! more to 4 other partitions, while reader processes `cat` random
//! `offset/N`, list `offset/` and `cat` raw segments, a thread reads and
//! decodes the raw `.log` files through the mount, and another process keeps
//! rolling. Afterwards, from the raw files: every line is there exactly once,
//! the lines of one write are consecutive in one batch, each writer's writes
//! are in order; readers saw no error but ENOENT past the end and no torn
//! batch; `commitfs check` is clean.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use commitfs::record::BatchIter;

use crate::harness::Mount;
use crate::mount;
use crate::torture_util::{Rng, assert_check_clean, assert_no_panic, read_partition, scale};

const OPTS: &str = "segment.bytes=1048576";
const LINE: usize = 32;

fn partition_of(w: usize) -> String {
    if w < 8 {
        "t-0".to_string()
    } else {
        format!("t-{}", 1 + (w - 8) / 2)
    }
}

fn lines_per_write(w: usize) -> usize {
    2 + w % 7
}

fn line(w: usize, seq: usize, i: usize) -> String {
    let head = format!("w{w:02}-{seq:06}-{i:02}-");
    format!("{head}{}", "p".repeat(LINE - 1 - head.len()))
}

fn parse(v: &[u8]) -> (usize, usize, usize) {
    let s = std::str::from_utf8(v).expect("utf-8");
    assert_eq!(s.len(), LINE - 1, "torn value {s:?}");
    let mut it = s.split('-');
    let w = it.next().unwrap()[1..].parse().unwrap();
    let seq = it.next().unwrap().parse().unwrap();
    let i = it.next().unwrap().parse().unwrap();
    (w, seq, i)
}

fn spawn_sh(m: &Mount, script: &str) -> Child {
    Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(&m.mnt)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn sh")
}

/// Reads every `.log` of a partition through the mount and checks it holds
/// whole, valid batches only; returns the bytes read.
fn read_raw(dir: &Path) -> u64 {
    let mut bytes = 0;
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .expect("list partition")
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".log"))
        .collect();
    names.sort();
    for n in names {
        let data = std::fs::read(dir.join(&n)).unwrap_or_else(|e| panic!("read {n}: {e}"));
        let mut end = 0;
        for item in BatchIter::new(&data) {
            let (pos, b) = item.unwrap_or_else(|e| panic!("{n}: torn batch at {end}: {e}"));
            assert!(b.is_valid(), "{n}: bad CRC at {pos}");
            end = pos + b.size();
        }
        assert_eq!(end, data.len(), "{n}: torn tail seen by a reader");
        bytes += data.len() as u64;
    }
    bytes
}

fn concurrency(writes: usize) {
    let m = mount!(OPTS);
    m.ok("mkdir t-0 t-1 t-2 t-3 t-4");
    let mut rng = Rng::new("concurrency");
    let work = m.data.parent().unwrap().to_path_buf();
    let stop_file = work.join("stop");
    let err_file = work.join("reader-errors");

    // Inputs: writer w's file holds `writes` blocks of lines_per_write(w) lines.
    let mut writers = Vec::new();
    for w in 0..16 {
        let src = work.join(format!("writer-{w}.txt"));
        let mut f = std::io::BufWriter::new(std::fs::File::create(&src).unwrap());
        for seq in 0..writes {
            for i in 0..lines_per_write(w) {
                writeln!(f, "{}", line(w, seq, i)).unwrap();
            }
        }
        f.flush().unwrap();
        writers.push((w, src));
    }
    let t0_total = 8 * writes * 5; // about: writers 0..8 write 2..8 lines
    let offsets: Vec<String> = (0..400)
        .map(|_| rng.range(0, t0_total as u64 + 200).to_string())
        .collect();

    let stop = format!("[ -e {} ]", stop_file.display());
    let err = err_file.display().to_string();
    let out = work.join("reader-values");
    let mut readers = vec![
        // cat of random offsets, values and errors kept for checking.
        spawn_sh(
            &m,
            &format!(
                "until {stop}; do for n in {}; do printf '%s ' $n; cat t-0/offset/$n 2>>{err}; echo; done; done > {}",
                offsets.join(" "),
                out.display()
            ),
        ),
        spawn_sh(
            &m,
            &format!(
                "until {stop}; do ls t-0/offset > /dev/null 2>>{err}; ls -l t-0 t-1 > /dev/null 2>>{err}; done"
            ),
        ),
        spawn_sh(
            &m,
            &format!("until {stop}; do cat t-0/*.log t-2/*.log > /dev/null 2>>{err}; done"),
        ),
        spawn_sh(
            &m,
            &format!(
                "until {stop}; do for p in t-0 t-1 t-2 t-3 t-4; do echo 1 > $p/roll; done; sleep 0.05; done 2>>{err}"
            ),
        ),
    ];
    let done = Arc::new(AtomicBool::new(false));
    let raw_bytes = Arc::new(AtomicU64::new(0));
    let raw_reader = {
        let (done, raw_bytes, dir) = (done.clone(), raw_bytes.clone(), m.mnt.join("t-0"));
        std::thread::spawn(move || {
            let mut passes = 0u64;
            while !done.load(Ordering::Relaxed) {
                raw_bytes.fetch_add(read_raw(&dir), Ordering::Relaxed);
                passes += 1;
            }
            passes
        })
    };

    let started = std::time::Instant::now();
    let dds: Vec<Child> = writers
        .iter()
        .map(|(w, src)| {
            Command::new("dd")
                .arg(format!("if={}", src.display()))
                .arg(format!("of={}/log", partition_of(*w)))
                .arg(format!("bs={}", LINE * lines_per_write(*w)))
                .args(["oflag=append", "conv=notrunc", "status=none"])
                .current_dir(&m.mnt)
                .spawn()
                .expect("dd")
        })
        .collect();
    for (w, mut dd) in dds.into_iter().enumerate() {
        let st = dd.wait().unwrap();
        assert!(st.success(), "writer {w} failed: {st}\n{}", m.log());
    }
    let elapsed = started.elapsed();
    std::fs::write(&stop_file, "").unwrap();
    for r in &mut readers {
        r.wait().unwrap();
    }
    done.store(true, Ordering::Relaxed);
    let passes = raw_reader.join().expect("raw reader");

    // Readers: only ENOENT, only whole values.
    let errors = std::fs::read_to_string(&err_file).unwrap_or_default();
    for l in errors.lines() {
        assert!(l.contains("No such file or directory"), "a reader saw: {l}");
    }
    let values = std::fs::read_to_string(&out).unwrap_or_default();
    let mut seen_values = 0;
    for l in values.lines() {
        let (_, v) = l.split_once(' ').unwrap_or((l, ""));
        if !v.is_empty() {
            let (w, _, _) = parse(v.as_bytes());
            assert!(w < 8, "t-0 holds writer {w}'s line");
            seen_values += 1;
        }
    }

    let mut m = m;
    m.unmount_clean();
    let (mut total_writes, mut total_batches) = (0usize, 0usize);
    for p in ["t-0", "t-1", "t-2", "t-3", "t-4"] {
        // (writer) -> seqs in log order
        let mut order: HashMap<usize, Vec<usize>> = HashMap::new();
        let batches = read_partition(&m.data.join(p));
        total_batches += batches.len();
        for b in &batches {
            let mut i = 0;
            while i < b.values.len() {
                let (w, seq, first) = parse(&b.values[i]);
                assert_eq!(partition_of(w), p, "writer {w} in {p}");
                assert_eq!(
                    first, 0,
                    "{p}: write {w}/{seq} does not start its run at batch {}",
                    b.base_offset
                );
                let k = lines_per_write(w);
                assert!(
                    i + k <= b.values.len(),
                    "{p}: write {w}/{seq} split across batches"
                );
                for j in 0..k {
                    assert_eq!(
                        parse(&b.values[i + j]),
                        (w, seq, j),
                        "{p}: write {w}/{seq} interleaved"
                    );
                }
                order.entry(w).or_default().push(seq);
                i += k;
            }
        }
        for (w, seqs) in order {
            assert_eq!(
                seqs,
                (0..writes).collect::<Vec<_>>(),
                "writer {w}: lost, duplicated or reordered writes"
            );
            total_writes += seqs.len();
        }
    }
    assert_eq!(
        total_writes,
        16 * writes,
        "a writer's writes are missing entirely"
    );
    assert_check_clean(&m.data, OPTS);
    assert_no_panic(&m);
    println!(
        "concurrency: {total_writes} writes by 16 writers in {elapsed:?} into {total_batches} batches, 0 duplicates, 0 losses; \
         readers: {seen_values} offset values, {} ENOENT, {passes} raw passes ({} bytes) with no torn batch",
        errors.lines().count(),
        raw_bytes.load(Ordering::Relaxed)
    );
}

#[test]
fn concurrent_writers_readers_and_rolls() {
    concurrency(300 * scale());
}

/// The long variant: 10,000 writes per writer.
#[test]
#[ignore]
fn concurrent_writers_readers_and_rolls_long() {
    concurrency(10_000 * scale());
}
