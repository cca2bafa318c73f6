//! A partition's producer state on disk (Kafka's `ProducerStateManager`
//! files): `<offset>.snapshot` in Kafka's `ProducerSnapshot` format, the
//! state of every producer from the batches below that offset.
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

use std::path::PathBuf;

use log::{info, warn};

use super::PartitionLog;
use super::produce::{ProducerCheck, ProducerStateHook};
use crate::record::BatchHeader;
use crate::record::state_files::{read_producer_snapshot, write_producer_snapshot};
use crate::storage::batch_reader::BatchReader;
use crate::storage::checkpoint::write_atomically;
use crate::storage::disk;
use crate::storage::error::{Result, StorageError};
use crate::storage::names::{parse_segment_file_name, segment_file_name};
use crate::storage::producer_state::{Checked, ProducerStates};

/// Bytes read at a time when batches are read back at load.
const REPLAY_CHUNK: usize = 1 << 20;

/// The producer-state keeper for produced appends: Kafka's checks of
/// sequence numbers and epochs, duplicates answered with their offsets.
pub struct IdempotentProducers;

impl ProducerStateHook for IdempotentProducers {
    fn check(&self, log: &PartitionLog, batch: &BatchHeader, offset: i64) -> Result<ProducerCheck> {
        log.check_producer(batch, offset)
    }
    fn appended(&self, log: &PartitionLog, _: &[BatchHeader]) {
        log.producers.lock().commit_staged();
    }
}

impl PartitionLog {
    fn snapshot_path(&self, offset: i64) -> PathBuf {
        self.dir.join(segment_file_name(offset, "snapshot"))
    }

    /// Under the writer lock: checks one produced batch, and stages it.
    fn check_producer(&self, h: &BatchHeader, offset: i64) -> Result<ProducerCheck> {
        if h.producer_id >= 0 && !self.producers.lock().tracking {
            // From here on the partition keeps producer state: an empty
            // snapshot at the log end says there was none before.
            self.producers.lock().tracking = true;
            if let Err(e) = self.take_producer_snapshot(self.log_end_offset()) {
                self.producers.lock().tracking = false;
                return Err(e);
            }
        }
        match self.producers.lock().check(h, offset) {
            Ok(Checked::Append) => Ok(ProducerCheck::Append),
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
                Ok(ProducerCheck::Duplicate {
                    first_offset,
                    last_offset,
                })
            }
            Err((refusal, message)) => Err(StorageError::Producer { refusal, message }),
        }
    }

    /// Forgets what a failed produced append staged.
    pub(super) fn discard_staged_producers(&self) {
        self.producers.lock().discard_staged();
    }

    /// Writes the snapshot at `offset` (writer lock held, or the partition
    /// closed), if the partition keeps producer state.
    pub(super) fn take_producer_snapshot(&self, offset: i64) -> Result<()> {
        let entries = {
            let p = self.producers.lock();
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
    pub(super) fn remove_producer_snapshot(&self, offset: i64) -> Result<()> {
        let path = self.snapshot_path(offset);
        match disk::remove_file("producer.snapshot.remove", &path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(StorageError::io(&path, e)),
            _ => Ok(()),
        }
    }

    /// Forgets producers past `producer.id.expiration.ms`; writer lock held.
    pub(super) fn expire_producers(&self, now_ms: i64) {
        let gone = self.producers.lock().expire(now_ms);
        if gone > 0 {
            info!("{}: {gone} expired producer ids removed", self.name);
        }
    }

    /// The producer state at load: the latest good snapshot at or below the
    /// log end, then the batches after it. Writable partitions only.
    pub(super) fn load_producer_state(&self, names: &[String]) -> Result<()> {
        if !self.writable {
            return Ok(());
        }
        let mut offsets: Vec<i64> = names
            .iter()
            .filter_map(|n| match parse_segment_file_name(n) {
                Some((o, "snapshot")) => Some(o),
                _ => None,
            })
            .collect();
        if offsets.is_empty() {
            return Ok(());
        }
        offsets.sort_unstable();
        offsets = self.remove_stray_snapshots(offsets)?;
        let now = super::now_ms();
        let mut from = None;
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
                    *self.producers.lock() = ProducerStates::from_snapshot(&entries, now);
                    from = Some(offset);
                    break;
                }
                Err(e) => {
                    warn!("Deleting corrupt producer snapshot {}: {e}", path.display());
                    self.remove_producer_snapshot(offset)?;
                }
            }
        }
        let from = from.unwrap_or_else(|| {
            warn!(
                "{}: no readable producer snapshot is left; rebuilding producer state from the log start",
                self.name
            );
            i64::MIN
        });
        self.producers.lock().tracking = true;
        self.replay_producers(from)
    }

    /// Kafka's `truncateAndReload` and `removeStraySnapshots`: snapshots past
    /// the log end go, and of those at no segment's base only the latest
    /// past the last base stays. Returns the offsets kept, sorted.
    fn remove_stray_snapshots(&self, offsets: Vec<i64>) -> Result<Vec<i64>> {
        let bases = self.segment_bases();
        let last_base = bases.last().copied().unwrap_or(0);
        let end = self.log_end_offset();
        let latest_stray = offsets
            .iter()
            .copied()
            .filter(|o| *o <= end && *o > last_base && !bases.contains(o))
            .max();
        let mut kept = Vec::new();
        for o in offsets {
            if o <= end && (bases.contains(&o) || Some(o) == latest_stray) {
                kept.push(o);
            } else {
                info!(
                    "{}: deleting producer snapshot {o} (log end offset {end})",
                    self.name
                );
                self.remove_producer_snapshot(o)?;
            }
        }
        Ok(kept)
    }

    /// Reads back the headers of the batches from `from` to the log end and
    /// applies those with a producer id.
    fn replay_producers(&self, from: i64) -> Result<()> {
        let end = self.log_end_offset();
        if from >= end {
            return Ok(());
        }
        let segs: Vec<_> = {
            let map = self.segments.read();
            let first = map.range(..=from).next_back().map_or(i64::MIN, |(b, _)| *b);
            map.range(first..).map(|(_, s)| s.clone()).collect()
        };
        let mut replayed = 0u64;
        let mut state = self.producers.lock();
        for seg in segs {
            let file = seg.log_file()?;
            let size = seg.size()?;
            let mut walk = BatchReader::new(file, seg.path(), 0, size, REPLAY_CHUNK);
            walk.for_each_header(|_, h| {
                if h.base_offset >= end {
                    return false;
                }
                if h.last_offset() >= from {
                    state.replay(h);
                    replayed += 1;
                }
                true
            })?;
        }
        info!(
            "{}: producer state rebuilt from offset {} with {replayed} batches ({} producers)",
            self.name,
            from.max(0),
            state.len()
        );
        Ok(())
    }
}
