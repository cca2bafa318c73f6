//! Fail-stop under injected I/O faults (`cargo test --features failpoints
//! --test failpoints`), in the manner of raft-engine's
//! `tests/failpoints/test_io_error.rs`.
//!
//! Every call site in `storage::disk::SITES` (each write, fsync, rename,
//! truncate, allocation, msync and removal storage makes) is made to fail
//! during each operation that reaches it: append (plain, rolling, with
//! `flush.messages`), roll, flush, retention, delete-records, a config
//! change, close, mkdir, rmdir, a stream read that saves lengths, recovery
//! and index rebuilds at load, a lazy index rebuild on a read, the open of
//! the data dir and `check --repair`. Each case checks:
//! - the caller got an errno (EIO, or ENOSPC for a full disk);
//! - the partition went offline (every later operation EIO, `status` says
//!   why), unless the fault was a refusal (a full disk, undone), after which
//!   it carries on; another partition carries on either way;
//! - after a remount, every acknowledged record is there at its offset with
//!   its value, the failed operation's records are there whole or not at
//!   all, nothing else is, and `commitfs check` is clean.
//!
//! The cases are in `cases.rs`; a test fails if a site has none. The
//! named tests of particular failures are in `named.rs`; faults injected
//! into a running daemon and seen at the shell, in `mount.rs`; a shutdown
//! on a disk whose syncs are slow, in `shutdown.rs`.
#[path = "../support/batch.rs"]
mod batch;
mod cases;
mod clean;
#[allow(dead_code)]
#[path = "../../mount-tests/harness.rs"]
mod harness;
#[path = "../kafka_support/mod.rs"]
mod kafka_support;
mod matrix;
mod mount;
mod named;
mod shutdown;
mod txn;

use std::path::Path;

use commitfs::record::NewRecord;
use commitfs::storage::{LogConfig, LogManager, OpenOptions, PartitionLog, StorageError};

pub const VALUE_LEN: usize = 10_000;
/// The failpoint action for an I/O error (EIO).
pub const E: &str = "return";
/// The same, once: at a load, for the first partition (t-0) only.
pub const E1: &str = "1*return";
pub const FILLED: usize = 250;

pub fn config() -> LogConfig {
    let mut c = LogConfig::default();
    c.set("segment.bytes", "1048576").unwrap();
    c.set("index.interval.bytes", "1000").unwrap();
    c
}

pub fn value(i: usize) -> Vec<u8> {
    let mut v = format!("{i:08}-").into_bytes();
    v.resize(VALUE_LEN, b'a' + (i % 26) as u8);
    v
}

/// Opens `dir`, waiting out a lock that a closed manager let go of but a
/// child process still holds for a moment: `.lock` is held with flock,
/// and a process that another test thread is spawning has a copy of every
/// descriptor from its fork to its exec. A lock still held after 10 s is
/// `Locked`.
pub fn open(dir: &Path) -> commitfs::storage::Result<LogManager> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match LogManager::open(dir, config(), OpenOptions::default()) {
            Err(StorageError::Locked(_)) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            r => return r,
        }
    }
}

/// Producer 7's transactional batch of one record, `value(i)`: commitfs's
/// encoder, with the producer fields and the transactional bit set and
/// the CRC made again.
pub fn append_transactional(log: &PartitionLog, i: usize) {
    let v = value(i);
    let mut b = Vec::new();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    commitfs::record::encode_batch(&mut b, 0, now, &[NewRecord::value(&v)]);
    b[21..23].copy_from_slice(&0x10i16.to_be_bytes());
    b[43..51].copy_from_slice(&7i64.to_be_bytes());
    b[51..53].copy_from_slice(&0i16.to_be_bytes());
    b[53..57].copy_from_slice(&0i32.to_be_bytes());
    let crc = commitfs::record::compute_crc(&b);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    log.append_transactional(&b).unwrap();
}

pub fn append_values(log: &PartitionLog, from: usize, n: usize) {
    for i in from..from + n {
        log.append(&[NewRecord::value(&value(i))]).unwrap();
    }
}
