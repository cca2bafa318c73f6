//! The checks a broker runs on a batch a producer sent (Kafka's
//! `LogValidator`), and the in-place rewrites it makes before storing the
//! producer's bytes: base offset, partition leader epoch and, for
//! `LogAppendTime`, the max timestamp and the CRC.
//!
//! Pure: the batch is never re-encoded, so what is stored is what the
//! producer sent, byte for byte, but for those fields.

use super::RecordError;
use super::batch::Compression;
use super::batch::{
    ATTRIBUTES_OFFSET, Batch, BatchHeader, CRC_OFFSET, HEADER_LEN, compute_crc, peek_frame,
};
use super::compression::{self, MAX_DECOMPRESSED_SIZE};
use super::varint::{get_varint, get_varlong};
use std::io::{BufRead, BufReader};

/// Where `partitionLeaderEpoch` sits in a batch.
const LEADER_EPOCH_OFFSET: usize = 12;
/// Where `maxTimestamp` sits in a batch.
const MAX_TIMESTAMP_OFFSET: usize = 35;
/// Attribute bit 3: the timestamps are the broker's append time.
const LOG_APPEND_TIME_FLAG: i16 = 0x8;

/// What validating one produced batch found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValidBatch {
    pub header: BatchHeader,
    /// Bytes the batch adds to the consumer stream (`value\n` per record).
    pub stream_bytes: u64,
    /// The indexes of its records without a key, which a compacted topic
    /// refuses (Kafka's `LogValidator.validateKey`); learned in the same
    /// walk, so a compressed batch is inflated once.
    pub keyless: Vec<i32>,
}

/// What walking a batch's records found.
#[derive(Default)]
struct Walked {
    stream_bytes: u64,
    keyless: Vec<i32>,
}

fn corrupt(why: impl Into<String>) -> RecordError {
    RecordError::Corrupt(why.into())
}

/// Validates one whole batch as Kafka does before appending it: magic 2, a
/// size that matches the bytes, the CRC, an offset range that matches the
/// record count, no control batch, a sequence where there is a producer id,
/// and every record well-formed at its offset delta. A compressed batch is
/// read as a stream, as Kafka's `LogValidator` does: its inflated records
/// are never held whole, and the inflater's buffers come from the
/// process-wide decompression budget (`compression::stream`).
pub fn validate_produced_batch(bytes: &[u8]) -> Result<ValidBatch, RecordError> {
    let frame = peek_frame(bytes)?;
    if frame.size != bytes.len() {
        return Err(corrupt(format!(
            "the batch says it is {} bytes but {} were sent",
            frame.size,
            bytes.len()
        )));
    }
    check_batch(Batch::parse(bytes)?)
}

/// [`validate_produced_batch`] of a batch whose header was parsed before
/// (`parsed.rs`): `bytes` must be the whole batch that header says.
pub(crate) fn validate_parsed(
    header: BatchHeader,
    bytes: &[u8],
) -> Result<ValidBatch, RecordError> {
    if header.size() != bytes.len() {
        return validate_produced_batch(bytes);
    }
    check_batch(Batch::from_parsed(header, bytes))
}

/// The checks that follow the framing's: the CRC, the counts, the
/// attributes, the sequence, every record.
fn check_batch(batch: Batch) -> Result<ValidBatch, RecordError> {
    batch.verify_crc()?;
    let h = batch.header;
    if h.record_count <= 0 {
        return Err(corrupt(format!(
            "invalid reported count for record batch: {}",
            h.record_count
        )));
    }
    if h.last_offset_delta as i64 + 1 != h.record_count as i64 {
        return Err(corrupt(format!(
            "inconsistent batch offset range ({} offsets) and record count ({})",
            h.last_offset_delta as i64 + 1,
            h.record_count
        )));
    }
    if h.is_control() {
        return Err(corrupt("clients are not allowed to write control records"));
    }
    if h.producer_id >= 0 && h.base_sequence < 0 {
        return Err(corrupt(format!(
            "invalid sequence number {} for producer {}",
            h.base_sequence, h.producer_id
        )));
    }
    let section = batch.records_section();
    let walked = match h.compression() {
        Compression::None => walk_records(&h, section)?,
        codec => {
            let decoder = compression::stream(codec, section)?;
            let mut inflated = Inflated {
                r: BufReader::with_capacity(16 << 10, decoder),
                read: 0,
                codec,
            };
            walk_inflated(&h, &mut inflated)?
        }
    };
    Ok(ValidBatch {
        header: h,
        stream_bytes: walked.stream_bytes,
        keyless: walked.keyless,
    })
}

/// Checks every record of an uncompressed records section without copying
/// it: the stream bytes (value length + 1 per record), the keyless records.
fn walk_records(h: &BatchHeader, section: &[u8]) -> Result<Walked, RecordError> {
    let mut pos = 0usize;
    let mut walked = Walked::default();
    for expected_delta in 0..h.record_count {
        let length = get_varint(section, &mut pos)?;
        let end = usize::try_from(length)
            .ok()
            .and_then(|l| pos.checked_add(l))
            .filter(|e| *e <= section.len())
            .ok_or_else(|| corrupt(format!("record length {length} runs past the batch end")))?;
        let body = &section[pos..end];
        pos = end;
        let (has_key, value_len) = record_fields(body, expected_delta)?;
        walked.add(expected_delta, has_key, value_len);
    }
    if pos != section.len() {
        return Err(corrupt(format!(
            "{} bytes follow the batch's {} records",
            section.len() - pos,
            h.record_count
        )));
    }
    Ok(walked)
}

impl Walked {
    fn add(&mut self, index: i32, has_key: bool, value_len: u64) {
        self.stream_bytes += value_len + 1;
        if !has_key {
            self.keyless.push(index);
        }
    }
}

/// An inflating records section, read a byte or a skip at a time, refused
/// once it inflates past [`MAX_DECOMPRESSED_SIZE`].
struct Inflated<R: BufRead> {
    r: R,
    read: u64,
    codec: Compression,
}

impl<R: BufRead> Inflated<R> {
    fn failed(&self, e: std::io::Error) -> RecordError {
        RecordError::Decompress {
            codec: self.codec,
            reason: e.to_string(),
        }
    }

    fn count(&mut self, n: usize) -> Result<(), RecordError> {
        self.read += n as u64;
        if self.read > MAX_DECOMPRESSED_SIZE as u64 {
            return Err(RecordError::DecompressedTooLarge {
                codec: self.codec,
                limit: MAX_DECOMPRESSED_SIZE,
            });
        }
        Ok(())
    }

    /// The next byte, `None` at the end of the section.
    fn byte(&mut self) -> Result<Option<u8>, RecordError> {
        let b = match self.r.fill_buf() {
            Ok([]) => return Ok(None),
            Ok(buf) => buf[0],
            Err(e) => return Err(self.failed(e)),
        };
        self.r.consume(1);
        self.count(1)?;
        Ok(Some(b))
    }

    fn raw_varint(&mut self, max_bytes: usize) -> Result<u64, RecordError> {
        let mut value: u64 = 0;
        for i in 0..max_bytes {
            let b = self
                .byte()?
                .ok_or_else(|| corrupt("varint runs past the end of the record"))?;
            value |= ((b & 0x7f) as u64) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(corrupt(format!("varint longer than {max_bytes} bytes")))
    }

    fn varint(&mut self) -> Result<i32, RecordError> {
        let v = self.raw_varint(5)?;
        let decoded = ((v >> 1) as i64) ^ -((v & 1) as i64);
        i32::try_from(decoded).map_err(|_| corrupt("varint out of 32-bit range"))
    }

    fn varlong(&mut self) -> Result<i64, RecordError> {
        let v = self.raw_varint(10)?;
        Ok(((v >> 1) as i64) ^ -((v & 1) as i64))
    }

    /// Steps over `n` bytes, which must all be there.
    fn skip(&mut self, mut n: u64) -> Result<(), RecordError> {
        while n > 0 {
            let have = match self.r.fill_buf() {
                Ok([]) => return Err(corrupt("a record runs past the end of the batch")),
                Ok(buf) => buf.len(),
                Err(e) => return Err(self.failed(e)),
            };
            let step = (have as u64).min(n) as usize;
            self.r.consume(step);
            self.count(step)?;
            n -= step as u64;
        }
        Ok(())
    }

    /// Steps over a varint-length-prefixed field of the record that ends at
    /// `end`; returns its length (`None` if null).
    fn skip_field(&mut self, end: u64, nullable: bool) -> Result<Option<u64>, RecordError> {
        let len = self.varint()?;
        if len < 0 {
            if nullable && len == -1 {
                return Ok(None);
            }
            return Err(corrupt(format!("invalid field length {len}")));
        }
        if self.read + len as u64 > end {
            return Err(corrupt(format!(
                "field of {len} bytes runs past the record end"
            )));
        }
        self.skip(len as u64)?;
        Ok(Some(len as u64))
    }
}

/// [`walk_records`] over an inflating section, holding no more of it than
/// the reader's buffer.
fn walk_inflated<R: BufRead>(h: &BatchHeader, s: &mut Inflated<R>) -> Result<Walked, RecordError> {
    let mut walked = Walked::default();
    for expected_delta in 0..h.record_count {
        let length = s.varint()?;
        if length < 1 {
            return Err(corrupt(format!(
                "record length {length} runs past the batch end"
            )));
        }
        let end = s.read + length as u64;
        s.byte()?.ok_or_else(|| corrupt("empty record"))?; // attributes
        s.varlong()?; // timestampDelta
        let delta = s.varint()?;
        if delta != expected_delta {
            return Err(corrupt(format!(
                "inner record offset delta {delta} where {expected_delta} was expected"
            )));
        }
        let key = s.skip_field(end, true)?;
        let value = s.skip_field(end, true)?;
        let headers = s.varint()?;
        if headers < 0 {
            return Err(corrupt(format!("negative header count {headers}")));
        }
        for _ in 0..headers {
            s.skip_field(end, false)?; // header key: never null
            s.skip_field(end, true)?;
        }
        if s.read != end {
            return Err(corrupt(format!(
                "record at offset delta {delta} does not end where its length says"
            )));
        }
        walked.add(delta, key.is_some(), value.unwrap_or(0));
    }
    if s.byte()?.is_some() {
        return Err(corrupt(format!(
            "bytes follow the batch's {} records",
            h.record_count
        )));
    }
    Ok(walked)
}

/// Checks one record body; returns whether it has a key, and its value
/// length (0 for a null value).
fn record_fields(body: &[u8], expected_delta: i32) -> Result<(bool, u64), RecordError> {
    if body.is_empty() {
        return Err(corrupt("empty record"));
    }
    let mut p = 1usize; // attributes
    get_varlong(body, &mut p)?; // timestampDelta
    let delta = get_varint(body, &mut p)?;
    if delta != expected_delta {
        return Err(corrupt(format!(
            "inner record offset delta {delta} where {expected_delta} was expected"
        )));
    }
    let key = skip_bytes(body, &mut p, true)?;
    let value = skip_bytes(body, &mut p, true)?;
    let headers = get_varint(body, &mut p)?;
    if headers < 0 {
        return Err(corrupt(format!("negative header count {headers}")));
    }
    for _ in 0..headers {
        skip_bytes(body, &mut p, false)?; // header key: never null
        skip_bytes(body, &mut p, true)?;
    }
    if p != body.len() {
        return Err(corrupt(format!(
            "record at offset delta {delta} has {} bytes left over",
            body.len() - p
        )));
    }
    Ok((key.is_some(), value.unwrap_or(0)))
}

/// Steps over a varint-length-prefixed field; returns its length (`None`
/// if null).
fn skip_bytes(buf: &[u8], pos: &mut usize, nullable: bool) -> Result<Option<u64>, RecordError> {
    let len = get_varint(buf, pos)?;
    if len < 0 {
        if nullable && len == -1 {
            return Ok(None);
        }
        return Err(corrupt(format!("invalid field length {len}")));
    }
    let end = pos
        .checked_add(len as usize)
        .filter(|e| *e <= buf.len())
        .ok_or_else(|| corrupt(format!("field of {len} bytes runs past the record end")))?;
    *pos = end;
    Ok(Some(len as u64))
}

/// Sets the fields a broker owns: `baseOffset` and `partitionLeaderEpoch`.
/// Both lie outside the CRC, so the batch stays valid.
pub fn assign_offset(batch: &mut [u8], base_offset: i64, leader_epoch: i32) {
    if batch.len() < HEADER_LEN {
        return;
    }
    batch[0..8].copy_from_slice(&base_offset.to_be_bytes());
    batch[LEADER_EPOCH_OFFSET..LEADER_EPOCH_OFFSET + 4]
        .copy_from_slice(&leader_epoch.to_be_bytes());
}

/// Kafka's `DefaultRecordBatch.setMaxTimestamp(LOG_APPEND_TIME, now)`: the
/// timestamp-type bit and `maxTimestamp` change, and the CRC is recomputed,
/// in the batch's bytes and in `header`, its parsed header, so that what
/// indexes the batch never reads them back from the bytes.
/// Records keep their deltas; readers take `maxTimestamp` for every record.
pub fn set_log_append_time(batch: &mut [u8], header: &mut BatchHeader, now_ms: i64) {
    if batch.len() < HEADER_LEN || header.magic != 2 {
        return;
    }
    let attrs = header.attributes;
    if attrs & LOG_APPEND_TIME_FLAG != 0 && header.max_timestamp == now_ms {
        return;
    }
    let attrs = attrs | LOG_APPEND_TIME_FLAG;
    batch[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&attrs.to_be_bytes());
    batch[MAX_TIMESTAMP_OFFSET..MAX_TIMESTAMP_OFFSET + 8].copy_from_slice(&now_ms.to_be_bytes());
    let crc = compute_crc(batch);
    batch[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
    header.attributes = attrs;
    header.max_timestamp = now_ms;
    header.crc = crc;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::MAGIC_OFFSET;
    use crate::{Compression, NewRecord, encode_batch_compressed};

    fn batch(codec: Compression) -> Vec<u8> {
        let mut buf = Vec::new();
        let recs = [NewRecord::value(b"ab"), NewRecord::keyed(b"k", b"cde")];
        encode_batch_compressed(&mut buf, 0, 1000, &recs, codec);
        buf
    }

    #[test]
    fn accepts_what_we_encode_in_every_codec() {
        for codec in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let b = batch(codec);
            let v = validate_produced_batch(&b).unwrap();
            assert_eq!(v.stream_bytes, 3 + 4, "{codec:?}");
            assert_eq!(v.header.record_count, 2);
            // The first record has no key: a compacted topic refuses it.
            assert_eq!(v.keyless, [0], "{codec:?}");
        }
    }

    #[test]
    fn refuses_damage() {
        let good = batch(Compression::None);
        let mut crc = good.clone();
        let last = crc.len() - 1;
        crc[last] ^= 1;
        assert!(matches!(
            validate_produced_batch(&crc),
            Err(RecordError::CrcMismatch { .. })
        ));
        assert!(validate_produced_batch(&good[..good.len() - 1]).is_err());
        let mut longer = good.clone();
        longer.push(0);
        assert!(validate_produced_batch(&longer).is_err());
        let mut magic = good.clone();
        magic[MAGIC_OFFSET] = 1;
        assert!(validate_produced_batch(&magic).is_err());
        // A count that does not match lastOffsetDelta, with a valid CRC.
        let mut count = good.clone();
        count[57..61].copy_from_slice(&3i32.to_be_bytes());
        let c = compute_crc(&count);
        count[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&c.to_be_bytes());
        assert!(validate_produced_batch(&count).is_err());
    }

    #[test]
    fn rewrites_stay_valid() {
        let mut b = batch(Compression::Lz4);
        assign_offset(&mut b, 42, 7);
        let v = validate_produced_batch(&b).unwrap();
        assert_eq!(v.header.base_offset, 42);
        assert_eq!(v.header.partition_leader_epoch, 7);
        let mut header = v.header;
        set_log_append_time(&mut b, &mut header, 5000);
        let v = validate_produced_batch(&b).unwrap();
        assert_eq!(header, v.header);
        assert_eq!(v.header.max_timestamp, 5000);
        assert_eq!(
            v.header.timestamp_type(),
            crate::TimestampType::LogAppendTime
        );
        let recs = Batch::parse(&b).unwrap().records().unwrap();
        assert!(recs.iter().all(|r| r.timestamp == 5000));
    }
}
