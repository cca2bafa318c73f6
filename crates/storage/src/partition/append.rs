//! Appends (Kafka's `UnifiedLog.append`): the tree's records, and the one
//! path every append takes under the writer lock, whoever appends (the
//! tree's `log`, a Kafka produce, `produce.rs`).
//!
//! That path goes down to the local log twice, to write the batches
//! (unpublished, rolling where Kafka would, all or nothing) and to publish
//! them, and never comes back up: between the two the partition counts the
//! batches in its stream tally, and after the publish, still under the
//! lock, it commits producer state, so that the next append sees both.

use std::sync::atomic::Ordering;

use super::PartitionLog;
use super::encoded::{ENCODED, Encoded};
use crate::config::LogConfig;
use crate::error::{Result, StorageError};
use crate::local_log::{Landed, LogWriter, Written};
use crate::now_ms;
use commitfs_record::{NewRecord, batch_size};

/// Where an append landed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppendInfo {
    pub first_offset: i64,
    pub last_offset: i64,
    /// How many batches the records were packed into.
    pub batches: usize,
    /// Bytes added to the log.
    pub bytes: u64,
}

impl PartitionLog {
    /// Whether `record` could be appended at all: a batch of its own fits
    /// `max.message.bytes` and `segment.bytes`, as [`PartitionLog::append`]
    /// packs it. Lets a writer refuse a line before it is acknowledged.
    pub fn check_record_size(&self, record: &NewRecord) -> Result<()> {
        let size = batch_size(std::slice::from_ref(record));
        StorageError::check_batch_size(&self.config(), size)
    }

    /// Appends `records` at the log end offset, packed in order into the fewest
    /// batches that each fit `max.message.bytes` and `segment.bytes`. All or
    /// nothing: a record that fits no batch fails the whole call with
    /// `RecordTooLarge` (or `BatchLargerThanSegment`) before anything is
    /// written. Returns once the bytes are in the segment file (page cache),
    /// and with `flush.messages` due, once they are fsynced: an error means
    /// nothing of the append was published.
    pub fn append(&self, records: &[NewRecord]) -> Result<AppendInfo> {
        if records.is_empty() {
            return Err(StorageError::EmptyAppend);
        }
        if !self.local.writable() {
            return Err(StorageError::ReadOnly);
        }
        self.check_keys(records)?;
        let path = self.health.enter("an append")?;
        path.finish(self.append_now(records))
    }

    fn append_now(&self, records: &[NewRecord]) -> Result<AppendInfo> {
        let config = self.config();
        let timestamp = now_ms();
        ENCODED.with_borrow_mut(|enc| {
            enc.encode(records, &config, timestamp)?;
            let w = self.local.writer()?;
            let written = self.append_locked(w, enc, &config)?;
            let batches = enc.batches.len();
            enc.release_if_large();
            Ok(AppendInfo {
                first_offset: written.first_offset,
                last_offset: written.next_offset - 1,
                batches,
                bytes: written.bytes,
            })
        })
    }

    /// The one append path: writes `enc`'s batches through `w` at the log
    /// end, counts them in the stream tally, publishes them, commits what
    /// producer state staged for them, lets the writer lock go and wakes
    /// waiting fetches. Call it on a write path (`Health::enter`).
    pub(super) fn append_locked(
        &self,
        mut w: LogWriter,
        enc: &mut Encoded,
        config: &LogConfig,
    ) -> Result<Written> {
        let written = match w.append(&mut enc.buf, &enc.batches, config, &self.producers) {
            Ok(written) => written,
            Err(e) => {
                // Nothing of it is kept, so nothing of it is remembered.
                self.producers.discard();
                return Err(e);
            }
        };
        self.count_appended(&written, enc);
        // A transaction the append opens is unstable before a reader can
        // see its batches; one it ends becomes stable only once its marker
        // is published (`txn.rs`).
        if let Some(first) = self.producers.staged_txn_start() {
            self.first_unstable.fetch_min(first, Ordering::AcqRel);
        }
        w.publish(&written);
        // Readers may meet the append here, published, before producer
        // state and the first unstable offset move on (tests/failpoints
        // pauses a writer at this point).
        #[cfg(feature = "failpoints")]
        fail::fail_point!("partition.append.published");
        self.producers.commit();
        self.publish_first_unstable();
        drop(w);
        self.appends.notify();
        self.local.after_publish(&written);
        Ok(written)
    }

    /// Counts an append's batches, and the rolls between them, in the
    /// stream tally.
    fn count_appended(&self, written: &Written, enc: &Encoded) {
        let mut stream_bytes = enc.stream_bytes();
        for landed in &written.landed {
            match landed {
                Landed::Batch {
                    segment,
                    position,
                    size,
                } => {
                    let bytes = stream_bytes.next().unwrap_or(0);
                    self.tally.appended(*segment, *position, *size, bytes);
                }
                Landed::Rolled(rolled) => self.count_roll(rolled),
            }
        }
    }
}
