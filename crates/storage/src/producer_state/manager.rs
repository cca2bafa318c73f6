//! A partition's producer state with its files (Kafka's
//! `ProducerStateManager`): `<offset>.snapshot` in Kafka's `ProducerSnapshot`
//! format, the state of every producer from the batches below that offset.
//!
//! A peer of the local log, not a part of it, and not above it: the
//! partition checks a Produce here before the batches are written and
//! commits what it staged once they are published; the local log asks for
//! the snapshot at each roll. It reads no segment: at load, the partition
//! walks the log's batch headers into a [`Replay`].
//!
//! - **When written.** At every roll, for the new segment's base offset, and
//!   at a clean close, at the log end offset, as Kafka does; written whole
//!   (`.tmp`, fsync, rename). Only by a partition that keeps producer state:
//!   one that has snapshots, or takes its first batch with a producer id,
//!   when an empty snapshot at the log end marks where the state begins. A
//!   partition only ever appended to without producer ids (the tree's
//!   appends) has none, and its load reads nothing.
//! - **When deleted.** With their segment (retention, delete-records, an
//!   undone append's rolled segment, recovery's truncation). At load, those
//!   past the log end and strays Kafka would remove (`removeStraySnapshots`)
//!   go; a corrupt one (bad CRC, torn) is removed and the one before it used.
//! - **Load.** The latest snapshot at or below the log end, then the batches
//!   with producer ids after it, read back from the segments (headers only).
//!   After a clean shutdown that is nothing to read; after a crash, the
//!   active segment from its roll snapshot. If every snapshot was lost, the
//!   whole log is read back.

use std::path::{Path, PathBuf};

use log::{info, warn};
use parking_lot::{Mutex, MutexGuard};

use super::{Checked, CompletedTxn, Marker, Origin, ProducerStates};
use crate::checkpoint::write_atomically;
use crate::disk;
use crate::error::{Result, StorageError};
use crate::names::{parse_segment_file_name, segment_file_name};
use commitfs_record::BatchHeader;
use commitfs_record::end_txn_marker::{EndTxnMarker, MarkerType};
use commitfs_record::state_files::{read_producer_snapshot, write_producer_snapshot};

pub(crate) struct ProducerStateManager {
    dir: PathBuf,
    /// `<topic>-<partition>`, for the log lines.
    name: String,
    /// A read-only partition keeps producer state in memory only: it reads
    /// the snapshots and the log, and writes or deletes no file.
    writable: bool,
    /// Changed under the log's writer lock only.
    state: Mutex<ProducerStates>,
}

/// A Produce that is a retry of batches already stored at these offsets
/// (idempotence): nothing is written, and the first offset is the answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Duplicate {
    pub first_offset: i64,
    pub last_offset: i64,
}

impl ProducerStateManager {
    pub fn new(dir: &Path, name: &str, writable: bool) -> ProducerStateManager {
        ProducerStateManager {
            dir: dir.to_path_buf(),
            name: name.to_string(),
            writable,
            state: Mutex::new(ProducerStates::default()),
        }
    }

    fn snapshot_path(&self, offset: i64) -> PathBuf {
        self.dir.join(segment_file_name(offset, "snapshot"))
    }

    /// Checks a Produce's batches (headers as sent), the first to be stored
    /// at `log_end`, and stages them (Kafka's
    /// `analyzeAndValidateProducerState`). A retry of batches already stored
    /// is answered with their offsets; then, as after a refusal, nothing
    /// stays staged: Kafka answers the whole request with the duplicate.
    /// Writer lock held.
    pub fn check(&self, batches: &[BatchHeader], log_end: i64) -> Result<Option<Duplicate>> {
        self.check_all(batches, log_end, None)
    }

    /// [`ProducerStateManager::check`] for batches that may be
    /// transactional, from `origin` (a client's, or the transaction
    /// coordinator's offset commits).
    pub fn check_transactional(
        &self,
        batches: &[BatchHeader],
        log_end: i64,
        origin: Origin,
    ) -> Result<Option<Duplicate>> {
        self.check_all(batches, log_end, Some(origin))
    }

    /// Each batch at the offset it will take; the first refusal or
    /// duplicate discards what the earlier ones staged.
    fn check_all(
        &self,
        batches: &[BatchHeader],
        log_end: i64,
        origin: Option<Origin>,
    ) -> Result<Option<Duplicate>> {
        let mut offset = log_end;
        for h in batches {
            match self.check_one(h, offset, log_end, origin) {
                Ok(None) => {}
                other => {
                    self.discard();
                    return other;
                }
            }
            offset += h.last_offset_delta as i64 + 1;
        }
        Ok(None)
    }

    /// Checks an end-of-transaction marker about to be stored at its
    /// offset (the log end), and stages it; the transaction it completes,
    /// if it held data. Writer lock held.
    pub fn check_marker(&self, marker: Marker, log_end: i64) -> Result<Option<CompletedTxn>> {
        self.start_tracking(log_end)?;
        let checked = self.state.lock().check_marker(marker, Origin::Coordinator);
        checked.map_err(|(refusal, message)| {
            self.discard();
            StorageError::Producer { refusal, message }
        })
    }

    /// The transactions the staged markers complete, with the last stable
    /// offset of each (see [`ProducerStates::staged_completions`]).
    pub fn staged_completions(&self) -> Vec<(CompletedTxn, i64)> {
        self.state.lock().staged_completions()
    }

    /// The first offset of the oldest open transaction, committed state.
    pub fn first_unstable_offset(&self) -> Option<i64> {
        self.state.lock().first_unstable_offset()
    }

    /// The first offset of the oldest transaction the staged batches open.
    pub fn staged_txn_start(&self) -> Option<i64> {
        self.state.lock().staged_txn_start()
    }

    /// The open transactions, (first offset, producer id), oldest first.
    pub fn open_transactions(&self) -> Vec<(i64, i64)> {
        self.state.lock().open_transactions().collect()
    }

    /// One batch: a client's without transactions (`origin` none), or any
    /// from `origin`.
    fn check_one(
        &self,
        h: &BatchHeader,
        offset: i64,
        log_end: i64,
        origin: Option<Origin>,
    ) -> Result<Option<Duplicate>> {
        if h.producer_id >= 0 {
            self.start_tracking(log_end)?;
        }
        let checked = match origin {
            None => self.state.lock().check(h, offset),
            Some(origin) => self.state.lock().check_batch(h, offset, origin),
        };
        match checked {
            Ok(Checked::Append) => Ok(None),
            Ok(Checked::Duplicate {
                first_offset,
                last_offset,
            }) => {
                info!(
                    "{}: batch of producer {} (epoch {}, sequences {}..={}) is a retry of offsets {first_offset}..={last_offset}; not appended again",
                    self.name,
                    h.producer_id,
                    h.producer_epoch,
                    h.base_sequence,
                    h.last_sequence()
                );
                Ok(Some(Duplicate {
                    first_offset,
                    last_offset,
                }))
            }
            Err((refusal, message)) => Err(StorageError::Producer { refusal, message }),
        }
    }

    /// From its first batch with a producer id on, the partition keeps
    /// producer state: an empty snapshot at the log end says there was none
    /// before.
    fn start_tracking(&self, log_end: i64) -> Result<()> {
        if self.state.lock().tracking {
            return Ok(());
        }
        self.state.lock().tracking = true;
        if let Err(e) = self.take_snapshot(log_end) {
            self.state.lock().tracking = false;
            return Err(e);
        }
        Ok(())
    }

    /// Makes what the last check staged committed: its batches are published.
    /// See [`ProducerStates::last_records`].
    pub fn last_records(&self) -> Vec<(i64, Option<i64>, i16)> {
        self.state.lock().last_records()
    }

    pub fn commit(&self) {
        self.state.lock().commit_staged();
    }

    /// Forgets what the last check staged: nothing of its batches was kept.
    pub fn discard(&self) {
        self.state.lock().discard_staged();
    }

    /// Writes the snapshot at `offset` (writer lock held, or the partition
    /// closed), if the partition keeps producer state: the committed state
    /// plus what is staged below `offset`.
    pub fn take_snapshot(&self, offset: i64) -> Result<()> {
        let entries = {
            let p = self.state.lock();
            if !p.tracking || !self.writable {
                return Ok(());
            }
            p.snapshot_entries(offset)
        };
        write_atomically(
            &self.snapshot_path(offset),
            &write_producer_snapshot(&entries),
        )
    }

    /// Removes the snapshot at `offset`, if there is one.
    pub fn remove_snapshot(&self, offset: i64) -> Result<()> {
        let path = self.snapshot_path(offset);
        match disk::remove_file("producer.snapshot.remove", &path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(StorageError::io(&path, e)),
            _ => Ok(()),
        }
    }

    /// Forgets producers past `producer.id.expiration.ms`; writer lock held.
    pub fn expire(&self, now_ms: i64) {
        let gone = self.state.lock().expire(now_ms);
        if gone > 0 {
            info!("{}: {gone} expired producer ids removed", self.name);
        }
    }

    /// The state at load from the latest good snapshot at or below
    /// `log_end` and `at_most`, among the directory's `names`; `bases` are
    /// the segments'. Returns the offset from which the log's batches are
    /// to be replayed (`i64::MIN`: all of them), or `None` when there is
    /// nothing to replay. (`at_most`: the first recovered offset, whose
    /// segments' transaction indexes the replay rebuilds.)
    pub fn load(
        &self,
        names: &[String],
        bases: &[i64],
        log_end: i64,
        at_most: i64,
    ) -> Result<Option<i64>> {
        let mut offsets: Vec<i64> = names
            .iter()
            .filter_map(|n| match parse_segment_file_name(n) {
                Some((o, "snapshot")) => Some(o),
                _ => None,
            })
            .collect();
        if offsets.is_empty() {
            return Ok(None);
        }
        offsets.sort_unstable();
        offsets = self.remove_stray_snapshots(offsets, bases, log_end)?;
        let now = crate::now_ms();
        let mut from = None;
        offsets.retain(|o| *o <= at_most);
        while let Some(offset) = offsets.pop() {
            let path = self.snapshot_path(offset);
            let bytes = match std::fs::read(&path) {
                Ok(b) => b,
                // Gone with a segment recovery deleted.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(StorageError::io(&path, e)),
            };
            match read_producer_snapshot(&bytes) {
                Ok(entries) => {
                    *self.state.lock() = ProducerStates::from_snapshot(&entries, now);
                    from = Some(offset);
                    break;
                }
                Err(e) if self.writable => {
                    warn!("Deleting corrupt producer snapshot {}: {e}", path.display());
                    self.remove_snapshot(offset)?;
                }
                Err(e) => warn!("Skipping corrupt producer snapshot {}: {e}", path.display()),
            }
        }
        let from = from.unwrap_or_else(|| {
            warn!(
                "{}: no readable producer snapshot is left; rebuilding producer state from the log start",
                self.name
            );
            i64::MIN
        });
        self.state.lock().tracking = true;
        Ok((from < log_end).then_some(from))
    }

    /// Kafka's `truncateAndReload` and `removeStraySnapshots`: snapshots past
    /// the log end go, and of those at no segment's base only the latest
    /// past the last base stays. Returns the offsets kept, sorted.
    fn remove_stray_snapshots(
        &self,
        offsets: Vec<i64>,
        bases: &[i64],
        end: i64,
    ) -> Result<Vec<i64>> {
        let last_base = bases.last().copied().unwrap_or(0);
        let latest_stray = offsets
            .iter()
            .copied()
            .filter(|o| *o <= end && *o > last_base && !bases.contains(o))
            .max();
        let mut kept = Vec::new();
        for o in offsets {
            if o <= end && (bases.contains(&o) || Some(o) == latest_stray) {
                kept.push(o);
            } else if !self.writable {
                // Another process's (a broker's) to remove.
                continue;
            } else {
                info!(
                    "{}: deleting producer snapshot {o} (log end offset {end})",
                    self.name
                );
                self.remove_snapshot(o)?;
            }
        }
        Ok(kept)
    }

    /// Forgets every producer: a read-only partition whose writer cut its
    /// log loads them again.
    pub fn reset(&self) {
        *self.state.lock() = ProducerStates::default();
    }

    /// The state, taken to apply the batches from `from` on as they are
    /// read back from the log at load.
    pub fn replay(&self, from: i64) -> Replay<'_> {
        Replay {
            state: self.state.lock(),
            name: &self.name,
            from,
            batches: 0,
        }
    }
}

/// Batches read back from the log at load, applied with no checks (Kafka's
/// replication origin: they are in the log).
pub(crate) struct Replay<'a> {
    state: MutexGuard<'a, ProducerStates>,
    name: &'a str,
    from: i64,
    batches: u64,
}

impl Replay<'_> {
    /// One batch header; a batch wholly below `from` is in the snapshot.
    pub fn apply(&mut self, h: &BatchHeader) {
        if h.last_offset() >= self.from {
            self.state.replay(h);
            self.batches += 1;
        }
    }

    /// One end-of-transaction marker at `h`; the transaction it completes.
    pub fn apply_marker(
        &mut self,
        h: &BatchHeader,
        marker: EndTxnMarker,
    ) -> Option<(CompletedTxn, i64)> {
        if h.base_offset < self.from || h.producer_id < 0 {
            return None;
        }
        self.batches += 1;
        self.state.replay_marker(Marker {
            producer_id: h.producer_id,
            epoch: h.producer_epoch,
            coordinator_epoch: marker.coordinator_epoch,
            commit: marker.kind == MarkerType::Commit,
            offset: h.base_offset,
            timestamp: h.max_timestamp,
        })
    }

    /// Logs what the replay rebuilt.
    pub fn finish(self) {
        info!(
            "{}: producer state rebuilt from offset {} with {} batches ({} producers)",
            self.name,
            self.from.max(0),
            self.batches,
            self.state.len()
        );
    }
}
