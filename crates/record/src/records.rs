//! Records inside a v2 batch: decoding, and encoding whole batches.

use super::RecordError;
use super::batch::{
    Batch, BatchHeader, Compression, HEADER_LEN, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE,
    TimestampType,
};
use super::compression::decompress;
use super::varint::{get_varint, get_varlong, put_varint, varint_size, varlong_size};
use std::borrow::Cow;

/// A record header: Kafka header keys are strings, values are bytes or null.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    pub key: String,
    pub value: Option<Vec<u8>>,
}

/// A decoded record with its absolute offset and timestamp.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub offset: i64,
    pub timestamp: i64,
    pub attributes: i8,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<Header>,
    /// The record's sequence (`baseSequence + offsetDelta`), or -1.
    pub sequence: i32,
    /// Size of the record as encoded, length varint excluded.
    pub size_in_bytes: usize,
}

/// A record to be written: borrowed so callers need not copy their payloads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NewRecord<'a> {
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: &'a [(&'a str, Option<&'a [u8]>)],
}

impl<'a> NewRecord<'a> {
    pub fn value(value: &'a [u8]) -> Self {
        NewRecord {
            key: None,
            value: Some(value),
            headers: &[],
        }
    }

    pub fn keyed(key: &'a [u8], value: &'a [u8]) -> Self {
        NewRecord {
            key: Some(key),
            value: Some(value),
            headers: &[],
        }
    }

    /// Encoded body size (without the length varint) at this offset delta,
    /// with timestamp delta 0 as every record of one append has.
    fn body_size(&self, offset_delta: i32) -> usize {
        let bytes_size = |b: Option<&[u8]>| match b {
            None => varint_size(-1),
            Some(b) => varint_size(b.len() as i32) + b.len(),
        };
        let mut size = 1 + varlong_size(0) + varint_size(offset_delta);
        size += bytes_size(self.key) + bytes_size(self.value);
        size += varint_size(self.headers.len() as i32);
        for (k, v) in self.headers {
            size += varint_size(k.len() as i32) + k.len() + bytes_size(*v);
        }
        size
    }

    /// Bytes this record adds to a batch when it sits at `offset_delta`.
    pub fn encoded_size(&self, offset_delta: i32) -> usize {
        let body = self.body_size(offset_delta);
        varint_size(body as i32) + body
    }
}

/// Size of a batch holding exactly these records.
pub fn batch_size(records: &[NewRecord]) -> usize {
    HEADER_LEN
        + records
            .iter()
            .enumerate()
            .map(|(i, r)| r.encoded_size(i as i32))
            .sum::<usize>()
}

/// The 61-byte header of a batch commitfs writes, its length, record
/// count, last offset delta and CRC still zero: leader epoch 0,
/// CreateTime, no producer id, epoch or sequence, and one timestamp for
/// every record.
pub(super) fn batch_header(
    base_offset: i64,
    timestamp: i64,
    codec: Compression,
) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[0..8].copy_from_slice(&base_offset.to_be_bytes());
    // 8..12 batchLength, 12..16 partitionLeaderEpoch 0
    h[16] = 2; // magic
    // 17..21 crc
    h[21..23].copy_from_slice(&(codec.id() as i16).to_be_bytes()); // attributes
    // 23..27 lastOffsetDelta
    h[27..35].copy_from_slice(&timestamp.to_be_bytes()); // baseTimestamp
    h[35..43].copy_from_slice(&timestamp.to_be_bytes()); // maxTimestamp
    h[43..51].copy_from_slice(&NO_PRODUCER_ID.to_be_bytes());
    h[51..53].copy_from_slice(&NO_PRODUCER_EPOCH.to_be_bytes());
    h[53..57].copy_from_slice(&NO_SEQUENCE.to_be_bytes());
    // 57..61 record count
    h
}

pub(super) fn put_bytes(buf: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        None => put_varint(buf, -1),
        Some(b) => {
            put_varint(buf, b.len() as i32);
            buf.extend_from_slice(b);
        }
    }
}

impl<'a> Batch<'a> {
    /// Decodes every record of the batch, decompressing the records section first
    /// if the batch is compressed.
    pub fn records(&self) -> Result<Vec<Record>, RecordError> {
        let section = self.uncompressed_section()?;
        decode_records(self, &section)
    }

    /// The records as Kafka's reader takes them (`DefaultRecord.readFrom`):
    /// a header key that is not UTF-8 is read with replacement characters
    /// (`Utils.utf8`) instead of failing the batch. For tools that show
    /// what Kafka shows; the broker's path keeps [`Batch::records`].
    pub fn records_as_kafka_reads(&self) -> Result<Vec<Record>, RecordError> {
        let section = self.uncompressed_section()?;
        decode_records_with(self, &section, HeaderKeys::Lossy)
    }

    /// The records section, decompressed when the batch is compressed.
    pub fn uncompressed_section(&self) -> Result<Cow<'a, [u8]>, RecordError> {
        let section = self.records_section();
        match self.header.compression() {
            Compression::None => Ok(Cow::Borrowed(section)),
            // Not a valid stream in any codec, but it carries nothing either; only
            // a writer that compresses nothing at all produces it.
            _ if section.is_empty() && self.header.record_count == 0 => Ok(Cow::Borrowed(section)),
            codec => {
                let raw = decompress(codec, section)?;
                let count = self.header.record_count as usize;
                if raw.len() / MIN_RECORD_SIZE < count {
                    return Err(RecordError::Corrupt(format!(
                        "batch {} claims {count} records but its {} records section inflates to only {} bytes",
                        self.header.base_offset,
                        codec.name(),
                        raw.len()
                    )));
                }
                Ok(Cow::Owned(raw))
            }
        }
    }
}

/// Smallest encoded record: length, attributes, timestampDelta, offsetDelta, key
/// length, value length and header count, one byte each.
const MIN_RECORD_SIZE: usize = 7;

/// Decodes `count` records from an (uncompressed) records section.
pub fn decode_records(batch: &Batch, section: &[u8]) -> Result<Vec<Record>, RecordError> {
    decode_records_with(batch, section, HeaderKeys::Utf8)
}

/// How header keys that are not UTF-8 are taken.
#[derive(Clone, Copy, PartialEq, Eq)]
enum HeaderKeys {
    /// Refused: the record is corrupt.
    Utf8,
    /// Read with U+FFFD for what is not UTF-8, as Kafka's `Utils.utf8`.
    Lossy,
}

fn decode_records_with(
    batch: &Batch,
    section: &[u8],
    keys: HeaderKeys,
) -> Result<Vec<Record>, RecordError> {
    let h = &batch.header;
    let count = h.record_count as usize;
    // A garbled count must not make us allocate wildly.
    let mut out = Vec::with_capacity(count.min(section.len() / MIN_RECORD_SIZE + 1));
    let mut pos = 0usize;
    for _ in 0..count {
        let body = next_record_body(h, section, &mut pos)?;
        out.push(decode_body_with(h, body, keys)?);
    }
    if pos != section.len() {
        return Err(RecordError::Corrupt(format!(
            "batch {} has {} bytes after its {count} records",
            h.base_offset,
            section.len() - pos
        )));
    }
    Ok(out)
}

/// Decodes only the record at `offset` from an uncompressed records section,
/// stepping over the others by their length prefix without copying them.
pub fn decode_record_at(
    h: &BatchHeader,
    section: &[u8],
    offset: i64,
) -> Result<Option<Record>, RecordError> {
    let Some(delta) = offset.checked_sub(h.base_offset) else {
        return Ok(None);
    };
    // Offset deltas strictly increase from 0 in a batch; when the last is
    // `count - 1` none is missing, and the record at delta d is the d-th:
    // step over the others reading nothing but their length. (Compacted
    // batches have gaps; a batch that lies is caught by the check below.)
    if h.last_offset_delta as i64 + 1 == h.record_count as i64
        && (0..h.record_count as i64).contains(&delta)
    {
        let mut pos = 0usize;
        for _ in 0..delta {
            let length = super::values::record_length(section, &mut pos)?;
            pos += length;
        }
        let body = next_record_body(h, section, &mut pos)?;
        let record = decode_body(h, body)?;
        if record.offset == offset {
            return Ok(Some(record));
        }
    }
    let mut pos = 0usize;
    for _ in 0..h.record_count {
        let body = next_record_body(h, section, &mut pos)?;
        let mut p = 1usize; // attributes
        get_varlong(body, &mut p)?; // timestampDelta
        let delta = get_varint(body, &mut p)?;
        if h.base_offset.checked_add(delta as i64) == Some(offset) {
            return decode_body(h, body).map(Some);
        }
    }
    Ok(None)
}

/// The body of the record at `*pos` (after its length prefix), advancing `*pos`.
fn next_record_body<'s>(
    h: &BatchHeader,
    section: &'s [u8],
    pos: &mut usize,
) -> Result<&'s [u8], RecordError> {
    let length = get_varint(section, pos)?;
    if length < 0 || *pos + length as usize > section.len() {
        return Err(RecordError::Corrupt(format!(
            "record length {length} runs past the end of batch {}",
            h.base_offset
        )));
    }
    let body = &section[*pos..*pos + length as usize];
    *pos += length as usize;
    Ok(body)
}

fn decode_body(h: &BatchHeader, body: &[u8]) -> Result<Record, RecordError> {
    decode_body_with(h, body, HeaderKeys::Utf8)
}

fn decode_body_with(h: &BatchHeader, body: &[u8], keys: HeaderKeys) -> Result<Record, RecordError> {
    let mut p = 0usize;
    let attributes = *body
        .first()
        .ok_or_else(|| RecordError::Corrupt("empty record".into()))? as i8;
    p += 1;
    let timestamp_delta = get_varlong(body, &mut p)?;
    let offset_delta = get_varint(body, &mut p)?;
    let key = get_bytes(body, &mut p)?;
    let value = get_bytes(body, &mut p)?;
    let header_count = get_varint(body, &mut p)?;
    if header_count < 0 {
        return Err(RecordError::Corrupt(format!(
            "negative header count {header_count}"
        )));
    }
    let mut headers = Vec::with_capacity((header_count as usize).min(body.len()));
    for _ in 0..header_count {
        let k = get_bytes(body, &mut p)?
            .ok_or_else(|| RecordError::Corrupt("null header key".into()))?;
        let key = match String::from_utf8(k) {
            Ok(key) => key,
            Err(e) if keys == HeaderKeys::Lossy => {
                String::from_utf8_lossy(e.as_bytes()).into_owned()
            }
            Err(_) => return Err(RecordError::Corrupt("header key is not UTF-8".into())),
        };
        let value = get_bytes(body, &mut p)?;
        headers.push(Header { key, value });
    }
    if p != body.len() {
        return Err(RecordError::Corrupt(format!(
            "record at offset delta {offset_delta} has {} bytes left over",
            body.len() - p
        )));
    }
    // A garbled offsetDelta near the top of the offset space must not overflow.
    let offset = h
        .base_offset
        .checked_add(offset_delta as i64)
        .ok_or_else(|| {
            RecordError::Corrupt(format!(
                "offset delta {offset_delta} overflows base offset {}",
                h.base_offset
            ))
        })?;
    // As Kafka's DefaultRecordBatch: with LogAppendTime every record carries the
    // broker's append time (maxTimestamp), not its own delta.
    let timestamp = match h.timestamp_type() {
        TimestampType::LogAppendTime => h.max_timestamp,
        TimestampType::CreateTime => h.base_timestamp.wrapping_add(timestamp_delta),
    };
    let sequence = if h.base_sequence < 0 {
        -1
    } else {
        ((h.base_sequence as i64 + offset_delta as i64) % (i32::MAX as i64 + 1)) as i32
    };
    Ok(Record {
        offset,
        timestamp,
        attributes,
        key,
        value,
        headers,
        sequence,
        size_in_bytes: body.len(),
    })
}

fn get_bytes(buf: &[u8], pos: &mut usize) -> Result<Option<Vec<u8>>, RecordError> {
    let len = get_varint(buf, pos)?;
    if len < 0 {
        return Ok(None);
    }
    let end = *pos + len as usize;
    if end > buf.len() {
        return Err(RecordError::Corrupt(format!(
            "field of {len} bytes runs past the end of the record"
        )));
    }
    let b = buf[*pos..end].to_vec();
    *pos = end;
    Ok(Some(b))
}
