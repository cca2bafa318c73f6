//! Appending batches a producer encoded (Kafka's `UnifiedLog.appendAsLeader`):
//! each batch is validated, then stored byte for byte as sent but for the
//! fields a broker owns (base offset, partition leader epoch, and with
//! `LogAppendTime` the max timestamp and CRC). Under the writer lock,
//! producer state checks the batches (sequences, epochs, retries) against
//! the offsets they would get; then they take the same append path as the
//! tree's writes (`append.rs`), so the two never interleave inside a batch.

use super::PartitionLog;
use super::encoded::{ENCODED, Encoded};
use crate::config::LogConfig;
use crate::error::{Result, StorageError};
use crate::local_log::Written;
use crate::now_ms;
use crate::producer_state::{Duplicate, Origin};
use commitfs_record::{BatchHeader, ParsedBatches, TimestampType, ValidBatch};

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

/// Validates each of a Produce request's batches for one partition, from
/// the headers parsed where the request arrived; sizes are checked against
/// the configs, and for a compacted partition every record must have a key.
fn validate_all(
    config: &LogConfig,
    partition: &str,
    parsed: &ParsedBatches,
) -> Result<Vec<(usize, ValidBatch)>> {
    let mut out = Vec::new();
    for framed in parsed.framed() {
        let size = framed.size;
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
        let valid = parsed.validate(framed)?;
        // Kafka's `LogValidator.validateKey`, from the validation's walk.
        if config.cleanup_policy.compact() && !valid.keyless.is_empty() {
            return Err(StorageError::KeylessRecords {
                partition: partition.to_string(),
                indexes: valid.keyless,
            });
        }
        out.push((framed.pos, valid));
    }
    if let Some(e) = parsed.framing_error() {
        return Err(e.into());
    }
    if out.is_empty() {
        return Err(StorageError::EmptyAppend);
    }
    Ok(out)
}

/// What became of a Produce that passed validation.
enum Produced {
    Appended(Written),
    /// A retry of batches already stored: nothing written.
    Duplicate(Duplicate),
}

impl PartitionLog {
    /// Validates and appends a producer's batches, all or nothing. Returns
    /// once they are in the segment file (the page cache), as a tree append.
    /// A batch that fails validation is refused before the append path is
    /// entered: bad input never takes the partition offline. A retry of
    /// batches already stored (an idempotent producer's) is answered with
    /// their offsets, and nothing is written.
    pub fn append_produced<'a>(
        &self,
        batches: impl Into<ParsedBatches<'a>>,
    ) -> Result<ProducedInfo> {
        self.append_produced_from(&batches.into(), None)
    }

    /// [`PartitionLog::append_produced`], whose batches producer state
    /// checks as a client's without transactions (`origin` none), or as
    /// `origin`'s, transactions and all.
    pub(super) fn append_produced_from(
        &self,
        parsed: &ParsedBatches,
        origin: Option<Origin>,
    ) -> Result<ProducedInfo> {
        if !self.local.writable() {
            return Err(StorageError::ReadOnly);
        }
        let config = self.config();
        let batches = validate_all(&config, self.name(), parsed)?;
        let append_time =
            (config.message_timestamp_type == TimestampType::LogAppendTime).then(now_ms);
        let produced = ENCODED.with_borrow_mut(|enc| {
            enc.copy_produced(parsed.bytes(), &batches, append_time);
            let path = self.health.enter("a produce")?;
            let produced = path.finish(self.produce_locked(enc, &batches, &config, origin));
            enc.release_if_large();
            produced
        })?;
        let log_start_offset = self.log_start_offset();
        Ok(match produced {
            Produced::Appended(written) => ProducedInfo {
                first_offset: written.first_offset,
                last_offset: written.next_offset - 1,
                log_append_time: append_time.unwrap_or(-1),
                log_start_offset,
                duplicate: false,
            },
            Produced::Duplicate(d) => ProducedInfo {
                first_offset: d.first_offset,
                last_offset: d.last_offset,
                log_append_time: -1,
                log_start_offset,
                duplicate: true,
            },
        })
    }

    /// Under the writer lock: producer state checks the batches against
    /// the offsets they would get, then they take the one append path.
    fn produce_locked(
        &self,
        enc: &mut Encoded,
        batches: &[(usize, ValidBatch)],
        config: &LogConfig,
        origin: Option<Origin>,
    ) -> Result<Produced> {
        let w = self.local.writer()?;
        let headers: Vec<BatchHeader> = batches.iter().map(|(_, v)| v.header).collect();
        let log_end = w.log_end_offset();
        let duplicate = match origin {
            None => self.producers.check(&headers, log_end)?,
            Some(origin) => self
                .producers
                .check_transactional(&headers, log_end, origin)?,
        };
        if let Some(duplicate) = duplicate {
            return Ok(Produced::Duplicate(duplicate));
        }
        self.append_locked(w, enc, config).map(Produced::Appended)
    }
}
