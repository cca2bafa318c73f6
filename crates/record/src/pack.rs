//! Encoding an append's records into batches in one pass: each record is
//! sized, placed (a new batch where the size limit falls) and written in
//! the same step, straight into the buffer that goes to the file.
//!
//! Why one pass: sizing every record to pack the batches, then sizing it
//! again for its length prefix while encoding, then summing its stream
//! bytes, walked the records three times and cost more than the encoding
//! itself (a profile of `cat >> log` had `body_size` and the packing at
//! over half of the append's user time).

use super::batch::{
    ATTRIBUTES_OFFSET, BatchHeader, CRC_OFFSET, Compression, HEADER_LEN, LOG_OVERHEAD,
    NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE,
};
use super::compression::compress;
use super::records::{NewRecord, batch_header, put_bytes};
use super::varint::varint_size;

/// One batch written by [`encode_batches`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EncodedBatch {
    /// Where it is in the buffer.
    pub range: std::ops::Range<usize>,
    /// Its base offset counted from the first batch's: the caller adds the
    /// real first offset (the base offset is outside the CRC, so it can be
    /// set once the log end is known).
    pub first: i64,
    pub records: usize,
    /// Bytes its records add to the consumer stream: each value plus `\n`.
    pub stream_bytes: u64,
    /// Its header, so that no layer below parses it from the bytes again.
    pub header: BatchHeader,
}

/// A record that fits no batch of its own: its batch would be `size` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooLarge {
    pub size: usize,
}

/// A record's fields before its bytes (length prefix, attributes,
/// timestampDelta, offsetDelta and a length), gathered on the stack so a
/// record costs a few appends to the buffer rather than one per field.
struct Head {
    b: [u8; 24],
    n: usize,
}

impl Head {
    #[inline(always)]
    fn varint(&mut self, v: i32) {
        let mut z = ((v << 1) ^ (v >> 31)) as u32;
        while z >= 0x80 {
            self.b[self.n] = (z as u8) | 0x80;
            self.n += 1;
            z >>= 7;
        }
        self.b[self.n] = z as u8;
        self.n += 1;
    }

    /// Appends what is gathered, then `bytes`.
    #[inline(always)]
    fn flush_then(&mut self, buf: &mut Vec<u8>, bytes: &[u8]) {
        buf.extend_from_slice(&self.b[..self.n]);
        buf.extend_from_slice(bytes);
        self.n = 0;
    }
}

/// `bytes` field size: its length varint plus the bytes (null is -1).
#[inline(always)]
fn field_size(b: Option<&[u8]>) -> usize {
    match b {
        None => 1,
        Some(b) => varint_size(b.len() as i32) + b.len(),
    }
}

/// Body size (length prefix excluded) of `r` at `offset_delta`, timestamp
/// delta 0.
#[inline(always)]
fn body_size(r: &NewRecord, offset_delta: i32) -> usize {
    let mut size = 2 + varint_size(offset_delta) + field_size(r.key) + field_size(r.value);
    size += varint_size(r.headers.len() as i32);
    for (k, v) in r.headers {
        size += field_size(Some(k.as_bytes())) + field_size(*v);
    }
    size
}

/// Writes one record of `body` bytes.
#[inline(always)]
fn put_record(buf: &mut Vec<u8>, r: &NewRecord, offset_delta: i32, body: usize) {
    let mut h = Head { b: [0; 24], n: 0 };
    h.varint(body as i32);
    h.b[h.n] = 0; // attributes
    h.b[h.n + 1] = 0; // timestampDelta (zig-zag 0)
    h.n += 2;
    h.varint(offset_delta);
    for field in [r.key, r.value] {
        match field {
            None => h.varint(-1),
            Some(b) => {
                h.varint(b.len() as i32);
                h.flush_then(buf, b);
            }
        }
    }
    h.varint(r.headers.len() as i32);
    h.flush_then(buf, &[]);
    for (k, v) in r.headers {
        put_bytes(buf, Some(k.as_bytes()));
        put_bytes(buf, *v);
    }
}

/// Copies `src` to `dst` a 16-byte block at a time (the last block
/// overlapping the one before it): values of a hundred bytes are the
/// common case, and a `memcpy` call per value cost as much as the rest of
/// encoding the record.
///
/// # Safety
/// `dst` must be valid for `src.len()` bytes of writes, not overlapping `src`.
#[inline(always)]
unsafe fn copy_small(src: &[u8], dst: *mut u8) {
    const B: usize = 16;
    let n = src.len();
    let s = src.as_ptr();
    // SAFETY (all below): every read is within `src` (offsets below `n`,
    // blocks only when `n >= B`), every write within the `n` bytes at `dst`.
    unsafe {
        if n < B {
            if n >= 8 {
                let (a, b) = (
                    s.cast::<u64>().read_unaligned(),
                    s.add(n - 8).cast::<u64>().read_unaligned(),
                );
                dst.cast::<u64>().write_unaligned(a);
                dst.add(n - 8).cast::<u64>().write_unaligned(b);
            } else {
                std::ptr::copy_nonoverlapping(s, dst, n);
            }
            return;
        }
        if n > 256 {
            std::ptr::copy_nonoverlapping(s, dst, n);
            return;
        }
        let mut i = 0;
        while i + B < n {
            dst.add(i)
                .cast::<[u8; B]>()
                .write_unaligned(s.add(i).cast::<[u8; B]>().read_unaligned());
            i += B;
        }
        let last = n - B;
        dst.add(last)
            .cast::<[u8; B]>()
            .write_unaligned(s.add(last).cast::<[u8; B]>().read_unaligned());
    }
}

/// Writes a zig-zag varint at `p`; returns the byte after it.
///
/// # Safety
/// `p` must be valid for 5 bytes of writes.
#[inline(always)]
unsafe fn put_varint_at(p: *mut u8, v: i32) -> *mut u8 {
    let mut z = ((v << 1) ^ (v >> 31)) as u32;
    let mut p = p;
    // SAFETY: a 32-bit varint takes at most 5 bytes, which the caller vouches for.
    unsafe {
        while z >= 0x80 {
            *p = (z as u8) | 0x80;
            p = p.add(1);
            z >>= 7;
        }
        *p = z as u8;
        p.add(1)
    }
}

/// [`put_record`] for a record without headers, the common case, written
/// in place: `total` (its length prefix plus `body`) is reserved once and
/// the fields are stored without a capacity check each.
#[inline(always)]
fn put_plain_record(
    buf: &mut Vec<u8>,
    r: &NewRecord,
    offset_delta: i32,
    body: usize,
    total: usize,
) {
    buf.reserve(total);
    let len = buf.len();
    // SAFETY: `reserve` made room for `total` bytes past `len`, and the
    // writes below are exactly the record's `total` bytes (its length
    // prefix and the `body` that `body_size` counted), so they stay within
    // it; `set_len` then covers only bytes written.
    unsafe {
        let mut p = buf.as_mut_ptr().add(len);
        p = put_varint_at(p, body as i32);
        *p = 0; // attributes
        *p.add(1) = 0; // timestampDelta (zig-zag 0)
        p = put_varint_at(p.add(2), offset_delta);
        for field in [r.key, r.value] {
            match field {
                None => p = put_varint_at(p, -1),
                Some(b) => {
                    p = put_varint_at(p, b.len() as i32);
                    copy_small(b, p);
                    p = p.add(b.len());
                }
            }
        }
        *p = 0; // no headers
        debug_assert_eq!(p.add(1), buf.as_mut_ptr().add(len + total));
        buf.set_len(len + total);
    }
}

/// Completes the batch that starts at `start` and holds `count` records:
/// its section compressed by `codec`, then its length, count and CRC.
/// Returns its header, as [`BatchHeader::parse`] would read it back.
fn finish(buf: &mut Vec<u8>, start: usize, count: usize, codec: Compression) -> BatchHeader {
    if codec != Compression::None {
        let raw = buf.split_off(start + HEADER_LEN);
        // Compressing into memory has no I/O to fail; only a codec bug could get here.
        let compressed = compress(codec, &raw)
            .unwrap_or_else(|e| panic!("compressing {} bytes: {e}", raw.len()));
        buf.extend_from_slice(&compressed);
    }
    let b = &mut buf[start..];
    let length = (b.len() - LOG_OVERHEAD) as i32;
    b[8..12].copy_from_slice(&length.to_be_bytes());
    b[23..27].copy_from_slice(&((count - 1) as i32).to_be_bytes()); // lastOffsetDelta
    b[57..61].copy_from_slice(&(count as i32).to_be_bytes());
    let crc = crc32c::crc32c(&b[ATTRIBUTES_OFFSET..]);
    b[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
    // The fields `batch_header` wrote, and the ones set above.
    let timestamp = i64::from_be_bytes(b[27..35].try_into().unwrap_or_default());
    BatchHeader {
        base_offset: i64::from_be_bytes(b[..8].try_into().unwrap_or_default()),
        batch_length: length,
        partition_leader_epoch: 0,
        magic: 2,
        crc,
        attributes: codec.id() as i16,
        last_offset_delta: (count - 1) as i32,
        base_timestamp: timestamp,
        max_timestamp: timestamp,
        producer_id: NO_PRODUCER_ID,
        producer_epoch: NO_PRODUCER_EPOCH,
        base_sequence: NO_SEQUENCE,
        record_count: count as i32,
    }
}

/// Appends `records` to `buf` as batches in the format of
/// [`encode_batch_compressed`](super::encode_batch_compressed), packed in
/// order into the fewest batches whose records, uncompressed, fit `limit`
/// bytes each (greedy packing is optimal for contiguous groups), and
/// describes each in `out`. A record too large for a batch of its own
/// fails the whole call; `buf` and `out` then hold a partial encoding to
/// be discarded.
pub fn encode_batches(
    buf: &mut Vec<u8>,
    timestamp: i64,
    records: &[NewRecord],
    limit: usize,
    codec: Compression,
    out: &mut Vec<EncodedBatch>,
) -> Result<(), TooLarge> {
    let mut start = buf.len();
    let mut first = 0usize;
    let mut size = HEADER_LEN;
    let mut stream_bytes = 0u64;
    let mut header = batch_header(0, timestamp, codec);
    header[..8].fill(0);
    buf.extend_from_slice(&header);
    for (i, r) in records.iter().enumerate() {
        let mut delta = (i - first) as i32;
        let mut body = body_size(r, delta);
        let mut add = varint_size(body as i32) + body;
        if i > first && size + add > limit {
            let done = finish(buf, start, i - first, codec);
            out.push(EncodedBatch {
                range: start..buf.len(),
                first: first as i64,
                records: i - first,
                stream_bytes,
                header: done,
            });
            (start, first, size, stream_bytes) = (buf.len(), i, HEADER_LEN, 0);
            header[..8].copy_from_slice(&(i as i64).to_be_bytes());
            buf.extend_from_slice(&header);
            delta = 0;
            body = body_size(r, 0);
            add = varint_size(body as i32) + body;
        }
        size += add;
        if i == first && size > limit {
            return Err(TooLarge { size });
        }
        if r.headers.is_empty() {
            put_plain_record(buf, r, delta, body, add);
        } else {
            put_record(buf, r, delta, body);
        }
        stream_bytes += r.value.map_or(0, <[u8]>::len) as u64 + 1;
    }
    if records.len() > first {
        let done = finish(buf, start, records.len() - first, codec);
        out.push(EncodedBatch {
            range: start..buf.len(),
            first: first as i64,
            records: records.len() - first,
            stream_bytes,
            header: done,
        });
    } else {
        buf.truncate(start);
    }
    Ok(())
}

/// Encodes one uncompressed batch, appending it to `buf`, and returns its size.
///
/// What commitfs writes: leader epoch 0, CreateTime, no producer id, epoch or
/// sequence, and one timestamp for all records of the append.
pub fn encode_batch(
    buf: &mut Vec<u8>,
    base_offset: i64,
    timestamp: i64,
    records: &[NewRecord],
) -> usize {
    encode_batch_compressed(buf, base_offset, timestamp, records, Compression::None)
}

/// As [`encode_batch`], with the records section compressed by `codec` in the
/// stream format Kafka's Java producer uses; the CRC covers the compressed bytes.
pub fn encode_batch_compressed(
    buf: &mut Vec<u8>,
    base_offset: i64,
    timestamp: i64,
    records: &[NewRecord],
    codec: Compression,
) -> usize {
    assert!(!records.is_empty(), "a batch holds at least one record");
    let start = buf.len();
    let mut out = Vec::with_capacity(1);
    // No limit: all the records go into the one batch.
    let packed = encode_batches(buf, timestamp, records, usize::MAX, codec, &mut out);
    debug_assert!(packed.is_ok() && out.len() == 1);
    buf[start..start + 8].copy_from_slice(&base_offset.to_be_bytes());
    buf.len() - start
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Batch, encode_batch_compressed};

    type Headers = Vec<(&'static str, Option<&'static [u8]>)>;

    fn records(sizes: &[usize]) -> (Vec<Vec<u8>>, Headers) {
        let values = sizes.iter().map(|&n| vec![b'v'; n]).collect();
        (values, vec![("h", Some(&b"x"[..]))])
    }

    /// Every value length around the block sizes of the in-place copy
    /// decodes back to itself.
    #[test]
    fn every_small_length_round_trips() {
        let pool: Vec<u8> = (0..400u32).map(|i| (i * 31 % 251) as u8).collect();
        for n in 0..=300 {
            let recs = [
                NewRecord::value(&pool[1..1 + n]),
                NewRecord::keyed(&pool[..n / 3], &pool[n..2 * n.min(200)]),
            ];
            let (mut buf, mut out) = (Vec::new(), Vec::new());
            encode_batches(&mut buf, 5, &recs, usize::MAX, Compression::None, &mut out).unwrap();
            let batch = Batch::parse(&buf).unwrap();
            batch.verify_crc().unwrap();
            let got = batch.records().unwrap();
            assert_eq!(got[0].value.as_deref(), Some(&pool[1..1 + n]));
            assert_eq!(got[1].key.as_deref(), Some(&pool[..n / 3]));
            assert_eq!(got[1].value.as_deref(), Some(&pool[n..2 * n.min(200)]));
        }
    }

    /// Every shape of record, packed, is byte for byte what encoding each
    /// group with `encode_batch_compressed` gives.
    #[test]
    fn matches_batch_by_batch_encoding() {
        let (values, headers) = records(&[0, 1, 63, 64, 100, 300, 5000, 100, 7]);
        let mut recs: Vec<NewRecord> = values.iter().map(|v| NewRecord::value(v)).collect();
        recs[1] = NewRecord::keyed(b"key", &values[1]);
        recs[2].headers = &headers;
        recs[3].value = None;
        for codec in [Compression::None, Compression::Gzip] {
            let too_large = 61 + recs[6].encoded_size(0);
            for limit in [400, too_large - 1, too_large, 5400, 1 << 20] {
                let (mut buf, mut out) = (vec![9u8; 3], Vec::new());
                let r = encode_batches(&mut buf, 77, &recs, limit, codec, &mut out);
                if limit < too_large {
                    assert_eq!(r, Err(TooLarge { size: too_large }));
                    continue;
                }
                r.unwrap();
                let mut want = vec![9u8; 3];
                for b in &out {
                    let group = &recs[b.first as usize..b.first as usize + b.records];
                    encode_batch_compressed(&mut want, b.first, 77, group, codec);
                    let stream: u64 = group
                        .iter()
                        .map(|r| r.value.map_or(0, |v| v.len()) as u64 + 1)
                        .sum();
                    assert_eq!(b.stream_bytes, stream);
                    let parsed = Batch::parse(&buf[b.range.clone()]).unwrap();
                    parsed.verify_crc().unwrap();
                    // What storage indexes the batch by, instead of parsing it.
                    assert_eq!(b.header, parsed.header);
                }
                assert_eq!(buf, want, "codec {codec:?} limit {limit}");
                assert_eq!(out.iter().map(|b| b.records).sum::<usize>(), recs.len());
                if codec == Compression::None {
                    for b in &out {
                        let group = &recs[b.first as usize..b.first as usize + b.records];
                        assert!(crate::batch_size(group) <= limit);
                    }
                }
            }
        }
    }
}
