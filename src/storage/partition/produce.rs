//! Appending batches a producer encoded (Kafka's `UnifiedLog.appendAsLeader`):
//! each batch is validated, then stored byte for byte as sent but for the
//! fields a broker owns (base offset, partition leader epoch, and with
//! `LogAppendTime` the max timestamp and CRC). It goes through the same
//! append path as the tree's writes, so the two never interleave inside a
//! batch.

use super::PartitionLog;
use super::append::BatchToWrite;
use crate::record::{
    BatchHeader, TimestampType, ValidBatch, assign_offset, peek_frame, set_log_append_time,
    validate_produced_batch,
};
use crate::storage::error::{Result, StorageError};

/// The leader epoch written into produced batches: this single replica's
/// only epoch, the one the tree's appends write too.
pub const LEADER_EPOCH: i32 = 0;

/// Where a produced append landed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProducedInfo {
    pub first_offset: i64,
    pub last_offset: i64,
    /// The append time given to the batches, or -1 with CreateTime.
    pub log_append_time: i64,
    pub log_start_offset: i64,
    /// The batches were a retry of ones already in the log: nothing written.
    pub duplicate: bool,
}

/// What producer state says about a batch about to be appended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProducerCheck {
    Append,
    /// A retry of a batch already stored at these offsets (idempotence).
    Duplicate {
        first_offset: i64,
        last_offset: i64,
    },
}

/// Producer state (idempotence, transactions) as the append path consults
/// it: under the partition's writer lock, before and after the batches are
/// written. The keeper of Kafka's rules is `IdempotentProducers`
/// (`producers.rs`).
pub trait ProducerStateHook: Sync {
    /// Called before anything is written, with each batch's header (as sent)
    /// and the offset it would get. An error refuses the whole append; it
    /// must be a refusal (`StorageError::is_refusal`), or the partition is
    /// taken offline as after a failed write.
    fn check(&self, log: &PartitionLog, batch: &BatchHeader, offset: i64) -> Result<ProducerCheck>;
    /// Called once every batch is written, still under the writer lock and
    /// just before they are published, with their stored headers.
    fn appended(&self, log: &PartitionLog, batches: &[BatchHeader]);
}

/// No producer state: every batch is appended; batches with a producer id
/// are stored as sent, with no sequence checks.
pub struct NoProducerState;

impl ProducerStateHook for NoProducerState {
    fn check(&self, _: &PartitionLog, _: &BatchHeader, _: i64) -> Result<ProducerCheck> {
        Ok(ProducerCheck::Append)
    }
    fn appended(&self, _: &PartitionLog, _: &[BatchHeader]) {}
}

/// Splits `records` (a Produce request's bytes for one partition) into
/// batches and validates each; sizes are checked against the configs.
fn validate_all(log: &PartitionLog, records: &[u8]) -> Result<Vec<(usize, ValidBatch)>> {
    let config = log.config();
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < records.len() {
        let frame = peek_frame(&records[pos..])?;
        let size = frame.size.min(records.len() - pos);
        // Kafka's order (`UnifiedLog.analyzeAndValidateRecords`): the batch's
        // size as sent, compressed, against max.message.bytes first, before
        // its CRC is checked or anything is decompressed.
        let max = config.max_message_bytes.max(0) as usize;
        if size > max {
            return Err(StorageError::RecordTooLarge { size, max });
        }
        if size > config.segment_bytes as usize {
            return Err(StorageError::BatchLargerThanSegment {
                size,
                max: config.segment_bytes as usize,
            });
        }
        let valid = validate_produced_batch(&records[pos..pos + size])?;
        out.push((pos, valid));
        pos += size;
    }
    if out.is_empty() {
        return Err(StorageError::EmptyAppend);
    }
    Ok(out)
}

/// A validated produce on its way in.
struct Incoming<'a> {
    records: &'a [u8],
    batches: Vec<(usize, ValidBatch)>,
    /// The append time, with `message.timestamp.type=LogAppendTime`.
    append_time: Option<i64>,
}

impl PartitionLog {
    /// Validates and appends a producer's batches, all or nothing. Returns
    /// once they are in the segment file (the page cache), as a tree append.
    /// A batch that fails validation is refused before the append path is
    /// entered: bad input never takes the partition offline.
    pub fn append_produced(
        &self,
        records: &[u8],
        producer: &dyn ProducerStateHook,
    ) -> Result<ProducedInfo> {
        if !self.writable {
            return Err(StorageError::ReadOnly);
        }
        let config = self.config();
        let incoming = Incoming {
            records,
            batches: validate_all(self, records)?,
            append_time: (config.message_timestamp_type == TimestampType::LogAppendTime)
                .then(super::now_ms),
        };
        let count: i64 = incoming
            .batches
            .iter()
            .map(|(_, v)| v.header.last_offset_delta as i64 + 1)
            .sum();
        let mut duplicate = None;
        let (first_offset, written) = self.health.guard("a produce", || {
            self.append_with(&config, count, |w, written| {
                let r = self.write_produced(w, written, &incoming, &config, producer);
                if r.is_err() {
                    // Nothing of it is kept, so nothing of it is remembered.
                    self.discard_staged_producers();
                }
                duplicate = r?;
                Ok(())
            })
        })?;
        let (first_offset, last_offset) =
            duplicate.unwrap_or((first_offset, written.next_offset - 1));
        Ok(ProducedInfo {
            first_offset,
            last_offset,
            log_append_time: match duplicate {
                None => incoming.append_time.unwrap_or(-1),
                Some(_) => -1,
            },
            log_start_offset: self.log_start_offset(),
            duplicate: duplicate.is_some(),
        })
    }

    /// Under the writer lock: asks producer state about each batch, then
    /// writes them with the broker's fields set. Returns the offsets of the
    /// earlier copy when the batches are a duplicate (nothing written).
    fn write_produced(
        &self,
        w: &mut super::Writer,
        written: &mut super::append::Written,
        incoming: &Incoming,
        config: &crate::storage::LogConfig,
        producer: &dyn ProducerStateHook,
    ) -> Result<Option<(i64, i64)>> {
        let mut offset = written.next_offset;
        for (_, v) in &incoming.batches {
            if let ProducerCheck::Duplicate {
                first_offset,
                last_offset,
            } = producer.check(self, &v.header, offset)?
            {
                // Kafka answers the whole request with the duplicate; what
                // the batches before it staged is not appended either.
                self.discard_staged_producers();
                return Ok(Some((first_offset, last_offset)));
            }
            offset += v.header.last_offset_delta as i64 + 1;
        }
        let mut stored = Vec::with_capacity(incoming.batches.len());
        for (pos, v) in &incoming.batches {
            let base = written.next_offset;
            w.buf.clear();
            w.buf
                .extend_from_slice(&incoming.records[*pos..*pos + v.header.size()]);
            assign_offset(&mut w.buf, base, LEADER_EPOCH);
            let mut header = v.header;
            header.base_offset = base;
            header.partition_leader_epoch = LEADER_EPOCH;
            if let Some(now) = incoming.append_time {
                set_log_append_time(&mut w.buf, now);
                header.max_timestamp = now;
            }
            let batch = BatchToWrite {
                bytes: &w.buf,
                last_offset: header.last_offset(),
                max_timestamp: header.max_timestamp,
                stream_bytes: v.stream_bytes,
            };
            self.write_batch(config, &batch, written)?;
            stored.push(header);
        }
        producer.appended(self, &stored);
        Ok(None)
    }
}
