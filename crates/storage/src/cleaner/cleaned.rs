//! The segment a group of segments is cleaned into (Kafka's
//! `createNewCleanedSegment`): `<base>.log.cleaned` with its
//! `.index.cleaned`, `.timeindex.cleaned` and, when an aborted
//! transaction's marker stays, `.txnindex.cleaned`. It is written without
//! the writer lock (no reader knows it yet), then handed to the local log's
//! `replace_segments`, which renames it into place.
//!
//! Its indexes follow Kafka's `LogSegment.append` as the cleaner calls it:
//! once per chunk of retained batches, not per batch, so an entry holds
//! the chunk's largest offset and its start position. What it writes is
//! what Kafka writes for the same chunks.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::disk;
use crate::error::{IoContext, Result};
use crate::names::segment_file_name;
use commitfs_record::state_files::AbortedTxn;

/// Bytes kept before a write of the `.log.cleaned`.
const WRITE_BUFFER: usize = 4 << 20;

/// A chunk of retained batches, as one append.
pub(super) struct Chunk {
    pub bytes_len: usize,
    /// The largest offset retained (`FilterResult.maxOffset`).
    pub max_offset: i64,
    /// The largest batch max timestamp, and the last offset of its batch.
    pub max_timestamp: i64,
    pub offset_of_max_timestamp: i64,
}

pub(super) struct CleanedSegment {
    pub base: i64,
    dir: PathBuf,
    log: File,
    /// Bytes appended; those past `written` wait in `pending`.
    size: u64,
    written: u64,
    pending: Vec<u8>,
    offset_index: Vec<u8>,
    time_index: Vec<u8>,
    last_time_entry: Option<i64>,
    bytes_since_last_entry: u64,
    max_timestamp: i64,
    offset_of_max_timestamp: i64,
    interval: u64,
    pub txns: Vec<AbortedTxn>,
}

/// The four files of a cleaned segment at `base`, with `suffix` (`.cleaned`, `.swap`, ``).
pub(crate) fn cleaned_paths(dir: &Path, base: i64, suffix: &str) -> [PathBuf; 4] {
    ["log", "index", "timeindex", "txnindex"]
        .map(|kind| dir.join(format!("{}{suffix}", segment_file_name(base, kind))))
}

impl CleanedSegment {
    /// Starts `<base>.*.cleaned` in `dir`, removing any left there first.
    pub fn create(dir: &Path, base: i64, index_interval: u64) -> Result<CleanedSegment> {
        remove_cleaned(dir, base)?;
        let [log_path, ..] = cleaned_paths(dir, base, ".cleaned");
        let log = disk::create_file("cleaner.cleaned.create", &log_path).at(&log_path)?;
        Ok(CleanedSegment {
            base,
            dir: dir.to_path_buf(),
            log,
            size: 0,
            written: 0,
            pending: Vec::new(),
            offset_index: Vec::new(),
            time_index: Vec::new(),
            last_time_entry: None,
            bytes_since_last_entry: 0,
            max_timestamp: -1,
            offset_of_max_timestamp: -1,
            interval: index_interval,
            txns: Vec::new(),
        })
    }

    /// Kafka's `LogSegment.append(largestOffset, largestTimestamp,
    /// shallowOffsetOfMaxTimestamp, records)` of one chunk.
    pub fn append(&mut self, bytes: &[u8], chunk: &Chunk) -> Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        let position = self.size;
        self.pending.extend_from_slice(bytes);
        self.size += bytes.len() as u64;
        if self.pending.len() >= WRITE_BUFFER {
            self.write_pending()?;
        }
        if chunk.max_timestamp > self.max_timestamp {
            self.max_timestamp = chunk.max_timestamp;
            self.offset_of_max_timestamp = chunk.offset_of_max_timestamp;
        }
        if self.bytes_since_last_entry > self.interval {
            let rel = (chunk.max_offset - self.base) as u32;
            self.offset_index.extend_from_slice(&rel.to_be_bytes());
            self.offset_index
                .extend_from_slice(&(position as u32).to_be_bytes());
            self.maybe_time_entry();
            self.bytes_since_last_entry = 0;
        }
        self.bytes_since_last_entry += chunk.bytes_len as u64;
        Ok(())
    }

    /// Kafka's `TimeIndex.maybeAppend(maxTimestampSoFar, offset)`: only a
    /// timestamp larger than the last entry's is added.
    fn maybe_time_entry(&mut self) {
        if self.max_timestamp < 0
            || self
                .last_time_entry
                .is_some_and(|t| t >= self.max_timestamp)
        {
            return;
        }
        self.time_index
            .extend_from_slice(&self.max_timestamp.to_be_bytes());
        let rel = (self.offset_of_max_timestamp - self.base) as u32;
        self.time_index.extend_from_slice(&rel.to_be_bytes());
        self.last_time_entry = Some(self.max_timestamp);
    }

    fn write_pending(&mut self) -> Result<()> {
        let [log_path, ..] = cleaned_paths(&self.dir, self.base, ".cleaned");
        disk::write_all_at(
            "cleaner.cleaned.write",
            &self.log,
            &self.pending,
            self.written,
        )
        .at(&log_path)?;
        self.written += self.pending.len() as u64;
        self.pending.clear();
        Ok(())
    }

    /// Kafka's `onBecomeInactiveSegment` (the final time index entry,
    /// trimmed indexes), `flush`, and `setLastModified` to the last source
    /// segment's time: the files are ready to be swapped in.
    pub fn finish(mut self, mtime: Option<SystemTime>) -> Result<u64> {
        self.write_pending()?;
        self.maybe_time_entry();
        let [log_path, index, time, txn] = cleaned_paths(&self.dir, self.base, ".cleaned");
        let txn_bytes: Vec<u8> = self.txns.iter().flat_map(|t| t.to_bytes()).collect();
        let mut files = vec![
            (index, self.offset_index.as_slice()),
            (time, &self.time_index),
        ];
        if !txn_bytes.is_empty() {
            files.push((txn, &txn_bytes));
        }
        disk::sync_data("cleaner.cleaned.fsync", &self.log).synced(&log_path)?;
        if let Some(t) = mtime {
            let _ = self.log.set_modified(t);
        }
        for (path, bytes) in files {
            let f = disk::create_file("cleaner.cleaned.create_index", &path).at(&path)?;
            disk::write_all_at("cleaner.cleaned.write_index", &f, bytes, 0).at(&path)?;
            disk::sync_data("cleaner.cleaned.fsync_index", &f).synced(&path)?;
            if let Some(t) = mtime {
                let _ = f.set_modified(t);
            }
        }
        Ok(self.size)
    }
}

/// Removes `<base>.*.cleaned` where they exist.
pub(super) fn remove_cleaned(dir: &Path, base: i64) -> Result<()> {
    for path in cleaned_paths(dir, base, ".cleaned") {
        match disk::remove_file("cleaner.cleaned.remove", &path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e).at(&path),
            _ => {}
        }
    }
    Ok(())
}
