//! An append's batches, made ready for the log before the writer lock is
//! taken: the tree's records encoded, or a Produce's batches copied with
//! the fields a broker owns set (the leader epoch, and with
//! `LogAppendTime` the max timestamp and CRC). Only the base offsets are
//! left, for the local log to set where the log end is known (they lie
//! outside the CRC). So a refused record takes no lock, and another
//! appender's write overlaps this one's encoding.

use std::cell::RefCell;

use crate::config::LogConfig;
use crate::error::{Result, StorageError};
use commitfs_record::{
    BatchHeader, EncodedBatch, NewRecord, TimestampType, TooLarge, ValidBatch, assign_offset,
    encode_batches, set_log_append_time,
};

/// The leader epoch written into every stored batch, produced or the
/// tree's: this single replica's only epoch.
pub const LEADER_EPOCH: i32 = 0;

/// An append's batches, back to back in one buffer. One per thread,
/// reused: a 1 MiB write to `log` encodes into the same buffer every time.
#[derive(Default)]
pub(super) struct Encoded {
    pub buf: Vec<u8>,
    pub batches: Vec<EncodedBatch>,
}

thread_local! {
    pub(super) static ENCODED: RefCell<Encoded> = RefCell::default();
}

impl Encoded {
    /// Encodes `records` packed in order into the fewest batches that each
    /// fit both `max.message.bytes` and `segment.bytes`. A record that fits
    /// a batch of its own under neither is refused, naming the limit it breaks.
    pub fn encode(
        &mut self,
        records: &[NewRecord],
        config: &LogConfig,
        timestamp: i64,
    ) -> Result<()> {
        let codec = config.compression_type.codec();
        self.buf.clear();
        self.batches.clear();
        encode_batches(
            &mut self.buf,
            timestamp,
            records,
            config.batch_limit(),
            codec,
            &mut self.batches,
        )
        .or_else(|TooLarge { size }| StorageError::check_batch_size(config, size))?;
        if config.message_timestamp_type == TimestampType::LogAppendTime {
            self.set_log_append_time(timestamp);
        }
        Ok(())
    }

    /// Copies a Produce's validated batches (`valid`, each with its position
    /// in `records`), giving them this replica's leader epoch and, when
    /// `append_time` is set, that time as their `LogAppendTime`.
    pub fn copy_produced(
        &mut self,
        records: &[u8],
        valid: &[(usize, ValidBatch)],
        append_time: Option<i64>,
    ) {
        self.buf.clear();
        self.buf.extend_from_slice(records);
        self.batches.clear();
        let mut first = 0;
        for (pos, v) in valid {
            let range = *pos..*pos + v.header.size();
            // The base offset is set under the writer lock.
            assign_offset(&mut self.buf[range.clone()], 0, LEADER_EPOCH);
            let offsets = v.header.last_offset_delta as i64 + 1;
            let header = BatchHeader {
                base_offset: 0,
                partition_leader_epoch: LEADER_EPOCH,
                ..v.header
            };
            self.batches.push(EncodedBatch {
                range,
                first,
                records: offsets as usize,
                stream_bytes: v.stream_bytes,
                header,
            });
            first += offsets;
        }
        if let Some(now) = append_time {
            self.set_log_append_time(now);
        }
    }

    /// One control batch (an end-of-transaction marker), whole but for its
    /// base offset, with its header; it adds nothing to the consumer stream.
    pub fn control(&mut self, batch: &[u8], header: BatchHeader) {
        self.buf.clear();
        self.buf.extend_from_slice(batch);
        self.batches.clear();
        self.batches.push(EncodedBatch {
            range: 0..batch.len(),
            first: 0,
            records: 1,
            stream_bytes: 0,
            header,
        });
    }

    /// Gives every batch `now` as its `LogAppendTime`, in its bytes and in
    /// the header the segment indexes it by.
    fn set_log_append_time(&mut self, now: i64) {
        for b in &mut self.batches {
            set_log_append_time(&mut self.buf[b.range.clone()], &mut b.header, now);
        }
    }

    /// Bytes each batch adds to the consumer stream, in order.
    pub fn stream_bytes(&self) -> impl Iterator<Item = u64> + '_ {
        self.batches.iter().map(|b| b.stream_bytes)
    }

    /// A rare huge append does not pin its buffer for the thread's life.
    pub fn release_if_large(&mut self) {
        if self.buf.capacity() > 16 << 20 {
            *self = Encoded::default();
        }
    }
}
