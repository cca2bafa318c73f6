//! R6: a full disk.
//!
//! The data dir lives on a small tmpfs that the test mounts itself (and
//! unmounts in a drop guard). With the disk filled: appends fail with ENOSPC
//! and leave no partial batch in the `.log`; a roll, which needs no blocks
//! (sparse indexes), goes through; mkdir leaves no half-made partition. Once space is freed, appends resume at the right
//! offset. Filling the disk by appends alone keeps every acknowledged record
//! and whole batches only. After a clean unmount `commitfs check` is clean
//! and a remount serves every record. The same disk under the Kafka
//! listener: a Produce gets KAFKA_STORAGE_ERROR and leaves nothing behind.

use std::io::Write;
use std::path::Path;

use bytes::Bytes;
use commitfs::record::NewRecord;
use kafka_protocol::messages::api_versions_request::ApiVersionsRequest;
use kafka_protocol::messages::api_versions_response::ApiVersionsResponse;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreateTopicsRequest};
use kafka_protocol::messages::create_topics_response::CreateTopicsResponse;
use kafka_protocol::messages::produce_response::ProduceResponse;
use kafka_protocol::messages::{ApiKey, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::bulk_value;
use crate::harness::{Mount, Tmpfs, fuse_or_skip};
use crate::kafka_support::requests::produce_request;
use crate::kafka_support::{Conn, Server, decode_partition};
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

/// A disk of `size` (a tmpfs) in a temp dir, which outlives it: the pair
/// drops the mount first.
fn small_disk(size: &str) -> (tempfile::TempDir, Tmpfs) {
    let tmp = tempfile::Builder::new()
        .prefix("commitfs-full-")
        .tempdir()
        .unwrap();
    let fs = Tmpfs::mount(&tmp.path().join("fs"), size);
    (tmp, fs)
}

fn errno(r: std::io::Result<()>) -> Option<i32> {
    r.err().and_then(|e| e.raw_os_error())
}

#[test]
fn disk_full_fails_cleanly_and_resumes() {
    if !fuse_or_skip() {
        return;
    }
    let (_tmp, fs) = small_disk("4m");
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
    let mk = std::fs::create_dir(m.mnt.join("t-1"));
    assert_eq!(errno(mk), Some(libc::ENOSPC), "mkdir on a full disk");
    assert_eq!(
        files(&part),
        before,
        "a refused append or mkdir changed the partition"
    );
    assert!(
        !data.join("t-1").exists(),
        "a half-made partition was left behind"
    );
    // A roll needs no blocks: the new segment's indexes are sparse (Kafka's
    // setLength), and the old ones are trimmed. Appends to it still wait
    // for space. (A roll that cannot create its files is in the failpoint
    // matrix: `segment.create`, `index.create` with ENOSPC.)
    std::fs::write(m.mnt.join("t-0/roll"), "1").expect("a roll on a full disk");
    assert_eq!(status(&m, "t-0", "segments"), 2);
    assert_eq!(
        errno(append(&m, "t-0", &ten(next))),
        Some(libc::ENOSPC),
        "append to the new segment on a full disk"
    );
    assert_eq!(status(&m, "t-0", "log_end_offset"), next as i64);
    let log = crate::torture_util::log_since(&m, from);
    for what in ["append of 10 records to t-0/log", "mkdir of t-1"] {
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
    assert_eq!(status(&m, "t-0", "segments"), 3);

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
        segments_full + i64::from(!roll_refused),
        "a roll on a full disk: one more segment, or none if it was refused"
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
        "disk_full: filler of {filled} bytes refused appends and a mkdir with ENOSPC; \
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
    let (_tmp, fs) = small_disk("2m");
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

/// A Produce of `n` records of 10,000 bytes to `t-0` (acks=-1), values
/// `b<batch>-<i>-xxx...`; returns the partition's error code and base offset.
fn produce_big(c: &mut Conn, batch: usize, n: usize) -> (i16, i64) {
    let values: Vec<Vec<u8>> = (0..n).map(|i| big_value(batch, i)).collect();
    let recs: Vec<NewRecord> = values.iter().map(|v| NewRecord::value(v)).collect();
    let mut bytes = Vec::new();
    commitfs::record::encode_batch(&mut bytes, 0, 1_700_000_000_000, &recs);
    let req = produce_request("t", 0, Bytes::from(bytes));
    let r: ProduceResponse = c.call(ApiKey::Produce, 9, &req);
    let p = &r.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

fn big_value(batch: usize, i: usize) -> Vec<u8> {
    let mut v = format!("b{batch}-{i}-").into_bytes();
    v.resize(10_000, b'x');
    v
}

/// A full disk under the Kafka listener (`commitfs serve` on a small tmpfs):
/// a Produce that cannot be written gets KAFKA_STORAGE_ERROR (56), the
/// answer Kafka gives for a log it cannot write; nothing of it stays in
/// the `.log` (kafka-protocol's decoder reads whole batches, exactly the
/// acknowledged ones); the daemon serves on, and once space is freed the
/// next Produce lands at the offset after the last acknowledged one.
#[test]
fn a_full_disk_under_the_listener_refuses_produce_and_keeps_no_partial_batch() {
    if !fuse_or_skip() {
        return;
    }
    let (tmp, fs) = small_disk("4m");
    let data = fs.0.join("data");
    let opts = ["segment.bytes=1048576", "segment.index.bytes=65536"];
    // The daemon logs off the disk it fills.
    let mut s = Server::start_logging_to(&data, &tmp.path().join("serve.log"), &opts);
    let mut c = Conn::new(&s.addr);
    let create = CreateTopicsRequest::default().with_topics(vec![
        CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("t")))
            .with_num_partitions(1)
            .with_replication_factor(1),
    ]);
    let r: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 7, &create);
    assert_eq!(r.topics[0].error_code, 0);
    let mut acked: Vec<Vec<u8>> = Vec::new();
    for batch in 0..5 {
        let (code, base) = produce_big(&mut c, batch, 10);
        assert_eq!((code, base), (0, acked.len() as i64), "batch {batch}");
        acked.extend((0..10).map(|i| big_value(batch, i)));
    }
    let filler = fs.0.join("filler");
    fill(&filler);
    for batch in 5..8 {
        let (code, _) = produce_big(&mut c, batch, 10);
        assert_eq!(
            code, 56,
            "KAFKA_STORAGE_ERROR for batch {batch} on a full disk"
        );
    }
    assert!(
        s.log().contains("refused with KafkaStorageError"),
        "a log line says why:\n{}",
        s.log()
    );
    // Alive, serving, and the log holds exactly what was acknowledged.
    assert!(s.alive(), "the daemon died:\n{}", s.log());
    let mut probe = Conn::new(&s.addr);
    let r: ApiVersionsResponse = probe.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    assert_eq!(r.error_code, 0);
    let values = |dir: &Path| -> Vec<Vec<u8>> {
        decode_partition(dir)
            .into_iter()
            .flat_map(|b| b.records)
            .map(|(_, v)| v.expect("a value"))
            .collect()
    };
    assert!(
        values(&data.join("t-0")) == acked,
        "the log is not exactly the acknowledged batches"
    );
    // Space again: the next Produce goes on at the right offset.
    std::fs::remove_file(&filler).unwrap();
    let (code, base) = produce_big(&mut c, 8, 10);
    assert_eq!((code, base), (0, acked.len() as i64));
    acked.extend((0..10).map(|i| big_value(8, i)));
    assert!(s.stop(), "a clean stop:\n{}", s.log());
    assert!(values(&data.join("t-0")) == acked);
    assert_check_clean(&data, opts.join(",").as_str());
}
