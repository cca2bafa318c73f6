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
/// written. Nothing here keeps producer state yet; a keeper plugs in here.
pub trait ProducerStateHook: Sync {
    /// Called before anything is written, with each batch's header (as sent)
    /// and the offset it would get. An error refuses the whole append.
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
        let valid = validate_produced_batch(&records[pos..pos + size])?;
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
        out.push((pos, valid));
        pos += size;
    }
    if out.is_empty() {
        return Err(StorageError::EmptyAppend);
    }
    Ok(out)
}

impl PartitionLog {
    /// Validates and appends a producer's batches, all or nothing. Returns
    /// once they are in the segment file (the page cache), as a tree append.
    pub fn append_produced(
        &self,
        records: &[u8],
        producer: &dyn ProducerStateHook,
    ) -> Result<ProducedInfo> {
        if !self.writable {
            return Err(StorageError::ReadOnly);
        }
        let batches = validate_all(self, records)?;
        let config = self.config();
        let now = super::now_ms();
        let log_append_time = config.message_timestamp_type == TimestampType::LogAppendTime;
        let mut duplicate = None;
        let mut stored = Vec::with_capacity(batches.len());
        let (first_offset, written) = self.append_with(&config, |w, written| {
            let mut offset = written.next_offset;
            for (_, v) in &batches {
                if let ProducerCheck::Duplicate {
                    first_offset,
                    last_offset,
                } = producer.check(self, &v.header, offset)?
                {
                    duplicate = Some((first_offset, last_offset));
                    return Ok(());
                }
                offset += v.header.last_offset_delta as i64 + 1;
            }
            for (pos, v) in &batches {
                let base = written.next_offset;
                w.buf.clear();
                w.buf
                    .extend_from_slice(&records[*pos..*pos + v.header.size()]);
                assign_offset(&mut w.buf, base, LEADER_EPOCH);
                if log_append_time {
                    set_log_append_time(&mut w.buf, now);
                }
                let mut header = v.header;
                header.base_offset = base;
                header.partition_leader_epoch = LEADER_EPOCH;
                if log_append_time {
                    header.max_timestamp = now;
                }
                let batch = BatchToWrite {
                    bytes: &w.buf,
                    last_offset: header.last_offset(),
                    max_timestamp: header.max_timestamp,
                    stream_bytes: v.stream_bytes,
                };
                self.write_batch(&config, &batch, written)?;
                stored.push(header);
            }
            producer.appended(self, &stored);
            Ok(())
        })?;
        if let Some((first_offset, last_offset)) = duplicate {
            return Ok(ProducedInfo {
                first_offset,
                last_offset,
                log_append_time: -1,
                log_start_offset: self.log_start_offset(),
                duplicate: true,
            });
        }
        Ok(ProducedInfo {
            first_offset,
            last_offset: written.next_offset - 1,
            log_append_time: if log_append_time { now } else { -1 },
            log_start_offset: self.log_start_offset(),
            duplicate: false,
        })
    }
}
