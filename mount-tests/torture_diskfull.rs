//! R6: a full disk.
//!
//! The data dir lives on a small tmpfs that the test mounts itself (and
//! unmounts in a drop guard). With the disk filled: appends fail with ENOSPC
//! and leave no partial batch in the `.log`; a roll that cannot create its
//! files fails cleanly and leaves the old segment active; mkdir leaves no
//! half-made partition. Once space is freed, appends resume at the right
//! offset. Filling the disk by appends alone keeps every acknowledged record
//! and whole batches only. After a clean unmount `commitfs check` is clean
//! and a remount serves every record.

use std::io::Write;
use std::path::Path;

use crate::bulk_value;
use crate::harness::{Mount, Tmpfs, fuse_or_skip};
use crate::torture_util::{
    append, assert_check_clean, assert_no_panic, read_partition, read_value, status,
};

const OPTS: &str = "segment.bytes=1048576,segment.index.bytes=65536";

/// Fills the filesystem of `path` with a file until ENOSPC.
pub fn fill(path: &Path) -> u64 {
    let mut f = std::fs::File::create(path).unwrap();
    let block = vec![0u8; 4096];
    let mut n = 0u64;
    loop {
        match f.write(&block) {
            Ok(0) => break,
            Ok(k) => n += k as u64,
            Err(e) => {
                assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "filling: {e}");
                break;
            }
        }
    }
    n
}

/// Ten bulk records i..i+10 as one write.
fn ten(i: usize) -> Vec<u8> {
    let mut s = String::new();
    for k in i..i + 10 {
        s.push_str(&bulk_value(k));
        s.push('\n');
    }
    s.into_bytes()
}

fn files(dir: &Path) -> Vec<(String, u64)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().into_string().unwrap(),
                e.metadata().unwrap().len(),
            )
        })
        .collect();
    v.sort();
    v
}

fn errno(r: std::io::Result<()>) -> Option<i32> {
    r.err().and_then(|e| e.raw_os_error())
}

#[test]
fn disk_full_fails_cleanly_and_resumes() {
    if !fuse_or_skip() {
        return;
    }
    let tmp = tempfile::Builder::new()
        .prefix("commitfs-full-")
        .tempdir()
        .unwrap();
    let fs = Tmpfs::mount(&tmp.path().join("fs"), "4m");
    let data = fs.0.join("data");
    let mut m = Mount::with(&[OPTS], Some(&data), &[]);
    let part = data.join("t-0");
    m.ok("mkdir t-0");
    let mut next = 0usize;
    while next < 200 {
        append(&m, "t-0", &ten(next)).unwrap();
        next += 10;
    }

    // Phase A: another file fills the disk.
    let filler = fs.0.join("filler");
    let filled = fill(&filler);
    let before = files(&part);
    let from = m.log().len();
    assert_eq!(
        errno(append(&m, "t-0", &ten(next))),
        Some(libc::ENOSPC),
        "append on a full disk"
    );
    assert_eq!(status(&m, "t-0", "log_end_offset"), next as i64);
    let roll = std::fs::write(m.mnt.join("t-0/roll"), "1");
    assert_eq!(errno(roll), Some(libc::ENOSPC), "roll on a full disk");
    assert_eq!(status(&m, "t-0", "segments"), 1);
    assert_eq!(status(&m, "t-0", "active_segment"), 0);
    let mk = std::fs::create_dir(m.mnt.join("t-1"));
    assert_eq!(errno(mk), Some(libc::ENOSPC), "mkdir on a full disk");
    assert_eq!(
        files(&part),
        before,
        "a refused append or roll changed the partition"
    );
    assert!(
        !data.join("t-1").exists(),
        "a half-made partition was left behind"
    );
    let log = crate::torture_util::log_since(&m, from);
    for what in [
        "append of 10 records to t-0/log",
        "roll of t-0",
        "mkdir of t-1",
    ] {
        assert!(
            log.lines()
                .any(|l| l.contains(what) && l.contains("No space left on device")),
            "no log line for {what}:\n{log}"
        );
    }
    read_partition(&part);

    // Space again: appends resume at the right offset, rolls work.
    std::fs::remove_file(&filler).unwrap();
    append(&m, "t-0", &ten(next)).unwrap();
    next += 10;
    assert_eq!(
        read_value(&m, "t-0", next as i64 - 1).unwrap(),
        bulk_value(next - 1).as_bytes()
    );
    std::fs::write(m.mnt.join("t-0/roll"), "1").unwrap();
    assert_eq!(status(&m, "t-0", "segments"), 2);

    // Phase B: appends alone fill the disk; a reserve file frees space after.
    let reserve = fs.0.join("reserve");
    std::fs::write(&reserve, vec![1u8; 1 << 20]).unwrap();
    let acked_before_full = loop {
        match append(&m, "t-0", &ten(next)) {
            Ok(()) => next += 10,
            Err(e) => {
                assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "append: {e}");
                break next;
            }
        }
    };
    assert_eq!(
        status(&m, "t-0", "log_end_offset"),
        acked_before_full as i64
    );
    let batches = read_partition(&part);
    let on_disk: usize = batches.iter().map(|b| b.values.len()).sum();
    assert_eq!(
        on_disk, acked_before_full,
        "records on disk vs acknowledged"
    );
    let segments_full = status(&m, "t-0", "segments");
    let roll = std::fs::write(m.mnt.join("t-0/roll"), "1");
    let roll_refused = errno(roll) == Some(libc::ENOSPC);
    assert_eq!(
        status(&m, "t-0", "segments"),
        segments_full,
        "a failed roll changed the segments"
    );
    std::fs::remove_file(&reserve).unwrap();
    for _ in 0..5 {
        append(&m, "t-0", &ten(next)).unwrap();
        next += 10;
    }
    assert_eq!(status(&m, "t-0", "log_end_offset"), next as i64);

    m.unmount_clean();
    assert_check_clean(&data, OPTS);
    m.remount();
    for n in [
        0,
        199,
        200,
        acked_before_full - 1,
        acked_before_full,
        next - 1,
    ] {
        assert_eq!(
            read_value(&m, "t-0", n as i64).unwrap(),
            bulk_value(n).as_bytes(),
            "offset {n}"
        );
    }
    assert_no_panic(&m);
    m.unmount_clean();
    println!(
        "disk_full: filler of {filled} bytes refused an append, a roll and a mkdir with ENOSPC; \
         appends filled the disk at {acked_before_full} records ({segments_full} segments, roll then refused: {roll_refused}); \
         resumed to {next} records; check clean"
    );
}

/// A write that spans several batches and meets a full disk: the write fails
/// with ENOSPC, so none of its records may be in the log (a client retrying
/// it would otherwise duplicate them). Regression test: appends once kept the
/// batches written before the failing one.
#[test]
fn enospc_in_a_multi_batch_write_appends_nothing() {
    if !fuse_or_skip() {
        return;
    }
    let tmp = tempfile::Builder::new()
        .prefix("commitfs-full-")
        .tempdir()
        .unwrap();
    let fs = Tmpfs::mount(&tmp.path().join("fs"), "2m");
    let data = fs.0.join("data");
    let m = Mount::with(
        &["segment.bytes=1048576,segment.index.bytes=65536,max.message.bytes=8000"],
        Some(&data),
        &[],
    );
    m.ok("mkdir t-0");
    let filler = fs.0.join("filler");
    fill(&filler);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&filler)
        .unwrap();
    let mut len = f.metadata().unwrap().len();
    let (mut next, mut failures, mut partial) = (0usize, 0usize, Vec::new());
    // Free 4 KiB at a time; each ten-record write is two batches of ~7.6 KB.
    while len >= 4096 && next < 400 {
        match append(&m, "t-0", &ten(next)) {
            Ok(()) => next += 10,
            Err(e) => {
                assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "append: {e}");
                failures += 1;
                let leo = status(&m, "t-0", "log_end_offset") as usize;
                if leo != next {
                    partial.push((next, leo));
                    next = leo;
                }
                len -= 4096;
                f.set_len(len).unwrap();
            }
        }
    }
    read_partition(&data.join("t-0"));
    println!(
        "multi-batch ENOSPC: {failures} failed writes, {} of them left records behind (first: {:?})",
        partial.len(),
        &partial[..partial.len().min(3)]
    );
    assert!(failures > 0);
    assert!(
        partial.is_empty(),
        "writes that failed with ENOSPC left records in the log (from, LEO after): {:?}",
        &partial[..partial.len().min(3)]
    );
}
