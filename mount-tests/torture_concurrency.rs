//! R5: concurrent writers, readers and rolls.
//!
//! 8 `dd` writer processes append multi-line writes to one partition and 8
//! more to 4 other partitions, while reader processes `cat` random
//! `offset/N`, list `offset/` and `cat` raw segments, a thread reads and
//! decodes the raw `.log` files through the mount, and another process keeps
//! rolling. Afterwards, from the raw files decoded by kafka-protocol: every
//! line is there exactly once, the lines of one write are consecutive in one
//! batch, each writer's writes are in order; every value a reader read is the
//! final log's at that offset, ENOENT came only for offsets at or past the
//! log end read just before, no other reader saw an error, no torn batch was
//! seen; `commitfs check` is clean. However the test ends, no reader or
//! writer outlives it.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::harness::Mount;
use crate::mount;
use crate::torture_util::{
    Rng, assert_check_clean, assert_no_panic, batch_info, frames, long_rounds, read_partition,
    scale,
};

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
    use std::os::unix::process::CommandExt;
    Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(&m.mnt)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("spawn sh")
}

/// The readers, writers and threads running against the mount. However the
/// test ends, they stop: the stop file and flag are set, and each process
/// group still running is killed and reaped (declare it after the mount: it
/// drops first).
struct Running {
    stop_file: std::path::PathBuf,
    done: Arc<AtomicBool>,
    children: Vec<Child>,
}

impl Running {
    /// Sets the stop file and waits (bounded) for every child to finish.
    fn stop_and_wait(&mut self, m: &Mount) {
        std::fs::write(&self.stop_file, "").unwrap();
        let deadline = std::time::Instant::now() + crate::harness::sh_timeout();
        for c in &mut self.children {
            loop {
                if let Some(st) = c.try_wait().unwrap() {
                    assert!(st.success(), "a reader exited with {st}");
                    break;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "a reader did not stop:\n{}",
                    crate::harness::stacks("reader", c.id())
                        + "\n"
                        + &crate::harness::stacks("daemon", m.pid().unwrap())
                );
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = std::fs::write(&self.stop_file, "");
        self.done.store(true, Ordering::Relaxed);
        for c in &mut self.children {
            if c.try_wait().ok().flatten().is_none() {
                // SAFETY: killing the process group of our own child.
                unsafe { libc::kill(-(c.id() as i32), libc::SIGKILL) };
                // One blocked in a FUSE request ends when the daemon does
                // (the mount's guard, next): do not wait for it long.
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
                while c.try_wait().ok().flatten().is_none() && std::time::Instant::now() < deadline
                {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
            }
        }
    }
}

/// Reads every `.log` of a partition through the mount and checks, with
/// kafka-protocol, that it holds whole, valid batches only; returns the
/// bytes read.
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
        let (frames, tail) = frames(&data);
        assert!(tail.is_empty(), "{n}: torn tail seen by a reader");
        for (pos, frame) in frames {
            batch_info(frame).unwrap_or_else(|e| panic!("{n}: bad batch at {pos}: {e}"));
        }
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
    let errs: Vec<_> = (0..3)
        .map(|i| work.join(format!("reader-{i}-errors")))
        .collect();
    let out = work.join("reader-values");
    let mut running = Running {
        stop_file: stop_file.clone(),
        done: Arc::new(AtomicBool::new(false)),
        children: Vec::new(),
    };
    // cat of random offsets: each line is `ok|err LEO N VALUE-OR-ERROR`,
    // with the log end offset read just before the cat; a last pass runs
    // after the writers are done.
    running.children.push(spawn_sh(
        &m,
        &format!(
            "while :; do for n in {}; do \
               leo=$(sed -n 's/^log_end_offset: //p' t-0/status); \
               if v=$(cat t-0/offset/$n 2>&1); then echo \"ok $leo $n $v\"; else echo \"err $leo $n $v\"; fi; \
             done; {stop} && break; done > {}",
            offsets.join(" "),
            out.display()
        ),
    ));
    running.children.push(spawn_sh(
        &m,
        &format!(
            "until {stop}; do ls t-0/offset > /dev/null && ls -l t-0 t-1 > /dev/null; done 2>{}",
            errs[0].display()
        ),
    ));
    running.children.push(spawn_sh(
        &m,
        &format!(
            "until {stop}; do cat t-0/*.log t-2/*.log > /dev/null; done 2>{}",
            errs[1].display()
        ),
    ));
    running.children.push(spawn_sh(
        &m,
        &format!(
            "until {stop}; do for p in t-0 t-1 t-2 t-3 t-4; do echo 1 > $p/roll; done; sleep 0.05; done 2>{}",
            errs[2].display()
        ),
    ));
    let raw_bytes = Arc::new(AtomicU64::new(0));
    let raw_reader = {
        let (done, raw_bytes, dir) = (running.done.clone(), raw_bytes.clone(), m.mnt.join("t-0"));
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
    let writers_at = running.children.len();
    for (w, src) in &writers {
        use std::os::unix::process::CommandExt;
        running.children.push(
            Command::new("dd")
                .arg(format!("if={}", src.display()))
                .arg(format!("of={}/log", partition_of(*w)))
                .arg(format!("bs={}", LINE * lines_per_write(*w)))
                .args(["oflag=append", "conv=notrunc", "status=none"])
                .current_dir(&m.mnt)
                .process_group(0)
                .spawn()
                .expect("dd"),
        );
    }
    // A bound only a hang reaches, growing with the long variants' writes.
    let deadline = started + crate::harness::sh_timeout() * (writes / 300).max(1) as u32;
    for w in 0..writers.len() {
        let dd = &mut running.children[writers_at + w];
        let st = loop {
            if let Some(st) = dd.try_wait().unwrap() {
                break st;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "writer {w} did not finish:\n{}\n{}",
                crate::harness::stacks("writer", dd.id()),
                crate::harness::stacks("daemon", m.pid().unwrap())
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        assert!(st.success(), "writer {w} failed: {st}\n{}", m.log());
    }
    let elapsed = started.elapsed();
    running.stop_and_wait(&m);
    running.done.store(true, Ordering::Relaxed);
    let passes = raw_reader.join().expect("raw reader");

    // Readers other than the offset reader: no error at all.
    for e in &errs {
        let text = std::fs::read_to_string(e).unwrap_or_default();
        assert!(text.is_empty(), "a reader saw: {text}");
    }
    let reads = std::fs::read_to_string(&out).unwrap_or_default();

    drop(running);
    let mut m = m;
    m.unmount_clean();
    let (mut total_writes, mut total_batches) = (0usize, 0usize);
    let mut t0_values = Vec::new();
    for p in ["t-0", "t-1", "t-2", "t-3", "t-4"] {
        // (writer) -> seqs in log order
        let mut order: HashMap<usize, Vec<usize>> = HashMap::new();
        let batches = read_partition(&m.data.join(p));
        total_batches += batches.len();
        if p == "t-0" {
            t0_values = batches.iter().flat_map(|b| b.values.clone()).collect();
        }
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

    // The offset reader: each value read is the final log's at that offset;
    // ENOENT only for an offset at or past the log end it had just read.
    let (mut seen_values, mut enoent) = (0, 0);
    for l in reads.lines() {
        let mut it = l.splitn(4, ' ');
        let (kind, leo, n, rest) = (
            it.next().unwrap(),
            it.next().unwrap_or_default(),
            it.next().unwrap_or_default(),
            it.next().unwrap_or_default(),
        );
        let leo: usize = leo
            .parse()
            .unwrap_or_else(|_| panic!("no log end in {l:?}"));
        let n: usize = n.parse().unwrap_or_else(|_| panic!("no offset in {l:?}"));
        match kind {
            "ok" => {
                assert!(
                    n < t0_values.len(),
                    "offset {n} read as {rest:?}, past the final log end {}",
                    t0_values.len()
                );
                assert_eq!(
                    rest.as_bytes(),
                    t0_values[n],
                    "offset {n} read otherwise than the final log holds"
                );
                seen_values += 1;
            }
            "err" => {
                assert!(
                    rest.contains("No such file or directory") && n >= leo,
                    "offset {n} (log end {leo} just before): {rest}"
                );
                enoent += 1;
            }
            _ => panic!("bad reader line {l:?}"),
        }
    }
    assert!(seen_values > 0, "the offset reader read no value");
    println!(
        "concurrency: {total_writes} writes by 16 writers in {elapsed:?} into {total_batches} batches, 0 duplicates, 0 losses; \
         readers: {seen_values} offset values, {} ENOENT, {passes} raw passes ({} bytes) with no torn batch",
        enoent,
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
    concurrency(long_rounds(10_000));
}
