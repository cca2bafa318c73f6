//! A segment's `.txnindex` (Kafka's `TransactionIndex`): one 34-byte
//! [`AbortedTxn`] per transaction aborted in the segment, in the order
//! their markers were written, so that a `read_committed` fetch learns
//! which of the producers' batches it must skip, and the cleaner which it
//! may drop.
//!
//! The file is made at the first entry: most segments have none. Entries
//! are few (one per abort) and read whole; a writable segment keeps them
//! in memory after the first read, since only its own appender changes
//! the file. A read-only one reads the file each time: a live daemon may
//! be appending to it.
//!
//! Kafka appends at the file's end. A torn entry there (a crash in the
//! middle of a write) would shift every later entry as Kafka reads them;
//! here an append writes at the end of the last whole entry instead, so
//! the torn bytes are overwritten and the file stays whole.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

use crate::disk;
use crate::error::{IoContext, Result, StorageError};
use commitfs_record::state_files::{ABORTED_TXN_SIZE, AbortedTxn, read_txn_index};

pub(crate) struct TransactionIndex {
    path: PathBuf,
    /// The entries, once read (writable segments only).
    cache: Option<Mutex<Option<Vec<AbortedTxn>>>>,
    /// Written since the last flush.
    dirty: AtomicBool,
}

/// What [`TransactionIndex::collect_aborted`] found (Kafka's
/// `TxnIndexSearchResult`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct TxnSearch {
    pub aborted: Vec<AbortedTxn>,
    /// An entry's last stable offset reached the upper bound: no later
    /// segment can hold an abort the range needs.
    pub complete: bool,
}

impl TransactionIndex {
    /// The index of the segment whose `.log` is `log_path`. No I/O.
    pub fn new(log_path: &Path, writable: bool) -> TransactionIndex {
        TransactionIndex {
            path: log_path.with_extension("txnindex"),
            cache: writable.then(|| Mutex::new(None)),
            dirty: AtomicBool::new(false),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Calls `f` with the entries, read from the file if need be.
    fn with_entries<T>(&self, f: impl FnOnce(&mut Vec<AbortedTxn>) -> Result<T>) -> Result<T> {
        match &self.cache {
            Some(cache) => {
                let mut cached = cache.lock();
                if cached.is_none() {
                    *cached = Some(self.read()?);
                }
                f(cached.as_mut().expect("read above"))
            }
            None => f(&mut self.read()?),
        }
    }

    /// The file's whole entries; Kafka's error for an entry of a version
    /// it does not know.
    fn read(&self) -> Result<Vec<AbortedTxn>> {
        let bytes = match std::fs::read(&self.path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e).at(&self.path),
        };
        let (txns, bad) = read_txn_index(&bytes, &self.path.display().to_string());
        match bad {
            Some(reason) => Err(StorageError::Corrupt {
                path: self.path.clone(),
                position: (txns.len() * ABORTED_TXN_SIZE) as u64,
                reason,
            }),
            None => Ok(txns),
        }
    }

    /// Adds an entry; its last offset must be past the last entry's, as
    /// Kafka's `append` demands (an abort is indexed once, in log order).
    pub fn append(&self, txn: AbortedTxn) -> Result<()> {
        self.with_entries(|entries| {
            if let Some(last) = entries.last()
                && last.last_offset >= txn.last_offset
            {
                return Err(StorageError::Corrupt {
                    path: self.path.clone(),
                    position: (entries.len() * ABORTED_TXN_SIZE) as u64,
                    reason: format!(
                        "The last offset of appended transactions must increase sequentially, but {} is not greater than current last offset {} of index {}",
                        txn.last_offset,
                        last.last_offset,
                        self.path.display()
                    ),
                });
            }
            // Past the whole entries: a torn one (shorter than an entry)
            // is written over, and the file ends with the new entry.
            let at = (entries.len() * ABORTED_TXN_SIZE) as u64;
            let file = disk::open_or_create("txnindex.append.open", &self.path).at(&self.path)?;
            disk::write_all_at("txnindex.append.write", &file, &txn.to_bytes(), at)
                .at(&self.path)?;
            entries.push(txn);
            self.dirty.store(true, Ordering::Release);
            Ok(())
        })
    }

    /// Drops every entry (Kafka's `reset`: the segment is being recovered).
    pub fn reset(&self) -> Result<()> {
        self.with_entries(|entries| {
            self.cut(0)?;
            entries.clear();
            Ok(())
        })
    }

    /// The file cut to its first `n` entries, when it exists.
    fn cut(&self, n: usize) -> Result<()> {
        let file = match std::fs::OpenOptions::new().write(true).open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e).at(&self.path),
        };
        disk::set_len("txnindex.truncate", &file, (n * ABORTED_TXN_SIZE) as u64).at(&self.path)?;
        self.dirty.store(true, Ordering::Release);
        Ok(())
    }

    /// Makes the entries durable, when any changed (Kafka's `flush`).
    pub fn flush(&self) -> Result<()> {
        if !self.dirty.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        let file = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e).at(&self.path),
        };
        disk::sync_data("txnindex.flush", &file).synced(&self.path)
    }

    /// Kafka's `collectAbortedTxns(fetchOffset, upperBoundOffset)`: the
    /// aborts that end at or past `fetch_offset` and began below `upper`,
    /// until one whose last stable offset reaches `upper`.
    pub fn collect_aborted(&self, fetch_offset: i64, upper: i64) -> Result<TxnSearch> {
        self.with_entries(|entries| {
            let mut found = TxnSearch::default();
            for t in entries.iter() {
                if t.last_offset >= fetch_offset && t.first_offset < upper {
                    found.aborted.push(*t);
                }
                if t.last_stable_offset >= upper {
                    found.complete = true;
                    break;
                }
            }
            Ok(found)
        })
    }

    /// Entries held, for an append's undo.
    pub fn len(&self) -> Result<usize> {
        self.with_entries(|e| Ok(e.len()))
    }

    /// Back to the first `n` entries: the undo of a failed append.
    pub fn rollback(&self, n: usize) -> Result<()> {
        self.with_entries(|entries| {
            if n < entries.len() {
                self.cut(n)?;
                entries.truncate(n);
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests;
