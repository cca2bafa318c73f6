//! What the log cleaner writes in place of a batch (Kafka's
//! `MemoryRecords.filterTo`): the batch rebuilt with the records it keeps
//! (`buildRetainedRecordsInto`), or a bare 61-byte header
//! (`DefaultRecordBatch.writeEmptyHeader`). Pure, as the rest of the codec.
//!
//! Records are walked in place ([`RecordView`]): a pass reads every record
//! of the log, and a `Record` with its owned key and value per record cost
//! more than the rest of the pass.

use super::RecordError;
use super::batch::{ATTRIBUTES_OFFSET, BatchHeader, CRC_OFFSET, HEADER_LEN, TimestampType};
use super::compression::compress;
use super::varint::{get_varint, get_varlong, put_varint, put_varlong};

/// The delete-horizon attribute (KIP-534): BaseTimestamp holds the horizon.
pub const DELETE_HORIZON_FLAG: i16 = 0x40;
/// Attribute bits a rebuilt batch takes from the original: codec,
/// timestamp type, transactional, control.
const KEPT_ATTRIBUTES: i16 = 0x07 | 0x08 | 0x10 | 0x20;

/// One record of a batch, in place.
#[derive(Clone, Copy, Debug)]
pub struct RecordView<'a> {
    pub offset: i64,
    /// As a consumer reads it: the batch's max timestamp under LogAppendTime.
    pub timestamp: i64,
    pub key: Option<&'a [u8]>,
    /// The record is a tombstone (a null value).
    pub is_tombstone: bool,
    offset_delta: i32,
    /// The body from the key's length on: key, value, headers, kept as they are.
    tail: &'a [u8],
}

/// Calls `f` with each record of `section` (the batch's records, already
/// decompressed), until it returns false.
pub fn for_each_record<'a>(
    h: &BatchHeader,
    section: &'a [u8],
    mut f: impl FnMut(RecordView<'a>) -> bool,
) -> Result<(), RecordError> {
    let corrupt = |what: &str| RecordError::Corrupt(format!("batch {}: {what}", h.base_offset));
    let mut pos = 0usize;
    for _ in 0..h.record_count {
        let len = get_varint(section, &mut pos)?;
        let end = usize::try_from(len)
            .ok()
            .and_then(|l| pos.checked_add(l))
            .filter(|e| *e <= section.len())
            .ok_or_else(|| corrupt("a record runs past the end of the batch"))?;
        let body = &section[pos..end];
        pos = end;
        let mut p = 1usize; // attributes
        let ts_delta = get_varlong(body, &mut p)?;
        let offset_delta = get_varint(body, &mut p)?;
        let tail_at = p;
        let key_len = get_varint(body, &mut p)?;
        let key = match key_len {
            -1 => None,
            n if n >= 0 && p + n as usize <= body.len() => {
                let k = &body[p..p + n as usize];
                p += n as usize;
                Some(k)
            }
            _ => return Err(corrupt("a key runs past its record")),
        };
        let value_len = get_varint(body, &mut p)?;
        let timestamp = match h.timestamp_type() {
            TimestampType::LogAppendTime => h.max_timestamp,
            TimestampType::CreateTime => h.base_timestamp.wrapping_add(ts_delta),
        };
        let view = RecordView {
            offset: h.base_offset + offset_delta as i64,
            timestamp,
            key,
            is_tombstone: value_len < 0,
            offset_delta,
            tail: &body[tail_at..],
        };
        if !f(view) {
            return Ok(());
        }
    }
    Ok(())
}

/// What a rebuilt batch says of itself, for the segment's indexes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rebuilt {
    pub max_timestamp: i64,
    /// The largest offset of a record kept (Kafka's `FilterResult.maxOffset`).
    pub max_record_offset: i64,
}

/// Kafka's `buildRetainedRecordsInto`: `kept` (at least one record of the
/// batch `h`) as a new batch appended to `out`. Kept from the original:
/// base offset, last offset delta (so the last sequence survives), leader
/// epoch, producer id, epoch and base sequence, codec (at its default
/// level), timestamp type, the transactional and control flags. With a
/// delete horizon, the horizon flag is set and BaseTimestamp holds it; the
/// records' timestamp deltas count from it, so their timestamps stay.
pub fn rebuild_batch(
    h: &BatchHeader,
    kept: &[RecordView],
    delete_horizon: Option<i64>,
    out: &mut Vec<u8>,
) -> Result<Rebuilt, RecordError> {
    let first = kept
        .first()
        .ok_or_else(|| RecordError::Corrupt("a rebuilt batch keeps a record".into()))?;
    let base_timestamp = delete_horizon.unwrap_or(first.timestamp);
    let mut section = Vec::with_capacity(kept.iter().map(|r| r.tail.len() + 16).sum());
    let mut body = Vec::with_capacity(32);
    let mut max_ts = -1i64;
    for r in kept {
        body.clear();
        body.push(0); // attributes: Kafka's DefaultRecord writes none
        put_varlong(&mut body, r.timestamp.wrapping_sub(base_timestamp));
        put_varint(&mut body, r.offset_delta);
        put_varint(&mut section, (body.len() + r.tail.len()) as i32);
        section.extend_from_slice(&body);
        section.extend_from_slice(r.tail);
        max_ts = max_ts.max(r.timestamp);
    }
    let max_timestamp = match h.timestamp_type() {
        TimestampType::LogAppendTime => h.max_timestamp,
        TimestampType::CreateTime => max_ts,
    };
    let compressed;
    let records = match h.compression() {
        super::Compression::None => &section,
        codec => {
            compressed = compress(codec, &section)?;
            &compressed
        }
    };
    let mut attributes = h.attributes & KEPT_ATTRIBUTES;
    if delete_horizon.is_some() {
        attributes |= DELETE_HORIZON_FLAG;
    }
    let header = Header {
        h,
        attributes,
        base_timestamp,
        max_timestamp,
        count: kept.len() as i32,
    };
    header.write(records, out);
    Ok(Rebuilt {
        max_timestamp,
        max_record_offset: kept.last().map_or(h.base_offset, |r| r.offset),
    })
}

/// Kafka's `DefaultRecordBatch.writeEmptyHeader`: the 61 bytes of a batch
/// whose records all went but which must stay (a producer's last batch, the
/// last of a cleaning round). Kept: base and last offset, leader epoch,
/// producer fields, timestamp type, transactional and control flags, and
/// MaxTimestamp; BaseTimestamp -1, no codec, no delete horizon, no records.
pub fn empty_header(h: &BatchHeader, out: &mut Vec<u8>) {
    let header = Header {
        h,
        attributes: h.attributes & (0x08 | 0x10 | 0x20),
        base_timestamp: -1,
        max_timestamp: h.max_timestamp,
        count: 0,
    };
    header.write(&[], out);
}

/// A batch header to write in front of `records`.
struct Header<'a> {
    h: &'a BatchHeader,
    attributes: i16,
    base_timestamp: i64,
    max_timestamp: i64,
    count: i32,
}

impl Header<'_> {
    fn write(&self, records: &[u8], out: &mut Vec<u8>) {
        let start = out.len();
        let h = self.h;
        let length = (HEADER_LEN - 12 + records.len()) as i32;
        out.extend_from_slice(&h.base_offset.to_be_bytes());
        out.extend_from_slice(&length.to_be_bytes());
        out.extend_from_slice(&h.partition_leader_epoch.to_be_bytes());
        out.push(2);
        out.extend_from_slice(&[0; 4]); // the CRC, once the rest is there
        out.extend_from_slice(&self.attributes.to_be_bytes());
        out.extend_from_slice(&h.last_offset_delta.to_be_bytes());
        out.extend_from_slice(&self.base_timestamp.to_be_bytes());
        out.extend_from_slice(&self.max_timestamp.to_be_bytes());
        out.extend_from_slice(&h.producer_id.to_be_bytes());
        out.extend_from_slice(&h.producer_epoch.to_be_bytes());
        out.extend_from_slice(&h.base_sequence.to_be_bytes());
        out.extend_from_slice(&self.count.to_be_bytes());
        out.extend_from_slice(records);
        let crc = crc32c::crc32c(&out[start + ATTRIBUTES_OFFSET..]);
        out[start + CRC_OFFSET..start + CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Batch;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// The note's vector B.2, from `DefaultRecordBatch.writeEmptyHeader`'s
    /// layout: a transactional batch at 200..204 (PLE 5, pid 4000, epoch 3,
    /// base sequence 10, max timestamp 1700000000123) as a bare header.
    #[test]
    fn empty_header_is_kafkas() {
        let h = BatchHeader {
            base_offset: 200,
            batch_length: 0,
            partition_leader_epoch: 5,
            magic: 2,
            crc: 0,
            attributes: 0x10 | 0x40 | 0x02,
            last_offset_delta: 4,
            base_timestamp: 1_700_000_000_000,
            max_timestamp: 1_700_000_000_123,
            producer_id: 4000,
            producer_epoch: 3,
            base_sequence: 10,
            record_count: 5,
        };
        let mut out = Vec::new();
        empty_header(&h, &mut out);
        let want = hex("00 00 00 00 00 00 00 c8 00 00 00 31 00 00 00 05
             02 fc 2a 50 11 00 10 00 00 00 04 ff ff ff ff ff
             ff ff ff 00 00 01 8b cf e5 68 7b 00 00 00 00 00
             00 0f a0 00 03 00 00 00 0a 00 00 00 00");
        assert_eq!(out, want);
        assert!(Batch::parse(&out).unwrap().is_valid());
    }
}
