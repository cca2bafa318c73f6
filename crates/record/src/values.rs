//! The values of a batch's records, walked in place: the consumer stream
//! reads nothing else of a record, so it needs no [`Record`](super::Record)
//! and no allocation per record (decoding whole records cost the stream a
//! `to_vec` per value and a `Vec` per batch).

use super::RecordError;
use super::batch::BatchHeader;

/// Reads a zig-zag varint at `*pos` of `buf`, advancing it. The one-byte
/// case (every length and delta below 64) is the common one and is kept
/// inline; longer ones take the general path.
#[inline(always)]
fn varint(buf: &[u8], pos: &mut usize) -> Result<i32, RecordError> {
    if let Some(&b) = buf.get(*pos)
        && b < 0x80
    {
        *pos += 1;
        return Ok(((b >> 1) as i32) ^ -((b & 1) as i32));
    }
    // Two bytes: every length below 8 KiB.
    if let Some(&[b0, b1]) = buf
        .get(*pos..*pos + 2)
        .map(|b| <&[u8; 2]>::try_from(b).unwrap())
        && b1 < 0x80
    {
        *pos += 2;
        let z = (b0 & 0x7f) as u32 | (b1 as u32) << 7;
        return Ok(((z >> 1) as i32) ^ -((z & 1) as i32));
    }
    super::varint::get_varint(buf, pos)
}

/// The length prefix of the record at `*pos`, advancing `*pos` past it;
/// an error if the record would run past the end of `section`.
#[inline]
pub fn record_length(section: &[u8], pos: &mut usize) -> Result<usize, RecordError> {
    let length = varint(section, pos)?;
    if length < 0 || *pos + length as usize > section.len() {
        return Err(RecordError::Corrupt(format!(
            "record length {length} runs past the end of the batch"
        )));
    }
    Ok(length as usize)
}

/// Where the record at `offset` ends in `section`, which may be only the
/// start of the batch's records section: `None` when those bytes end
/// before it does, or when the batch's offsets have gaps (the record's
/// place is then known only by walking the whole section).
pub fn record_end(h: &BatchHeader, section: &[u8], offset: i64) -> Option<usize> {
    let delta = offset.checked_sub(h.base_offset)?;
    if h.last_offset_delta as i64 + 1 != h.record_count as i64
        || !(0..h.record_count as i64).contains(&delta)
    {
        return None;
    }
    let mut pos = 0usize;
    for _ in 0..=delta {
        let length = usize::try_from(varint(section, &mut pos).ok()?).ok()?;
        pos = pos.checked_add(length)?;
        if pos > section.len() {
            return None;
        }
    }
    Some(pos)
}

/// A `bytes` field: its length varint, then that many bytes (none for -1).
#[inline(always)]
fn field<'s>(body: &'s [u8], p: &mut usize) -> Result<Option<&'s [u8]>, RecordError> {
    let len = varint(body, p)?;
    if len < 0 {
        return Ok(None);
    }
    let end = *p + len as usize;
    let Some(b) = body.get(*p..end) else {
        return Err(RecordError::Corrupt(format!(
            "field of {len} bytes runs past the end of the record"
        )));
    };
    *p = end;
    Ok(Some(b))
}

/// The value of one record body (after its length prefix), checked as
/// strictly as a full decode checks it: every field in bounds, the header
/// keys present, nothing left over.
#[inline(always)]
fn body_value(body: &[u8]) -> Result<Option<&[u8]>, RecordError> {
    let mut p = 1usize; // attributes
    if body.is_empty() {
        return Err(RecordError::Corrupt("empty record".into()));
    }
    // timestampDelta: one byte whenever the records share a timestamp.
    match body.get(p) {
        Some(&b) if b < 0x80 => p += 1,
        _ => {
            super::varint::get_varlong(body, &mut p)?;
        }
    }
    varint(body, &mut p)?; // offsetDelta
    field(body, &mut p)?; // key
    let value = field(body, &mut p)?;
    let headers = varint(body, &mut p)?;
    if headers < 0 {
        return Err(RecordError::Corrupt(format!(
            "negative header count {headers}"
        )));
    }
    for _ in 0..headers {
        let key =
            field(body, &mut p)?.ok_or_else(|| RecordError::Corrupt("null header key".into()))?;
        if std::str::from_utf8(key).is_err() {
            return Err(RecordError::Corrupt("header key is not UTF-8".into()));
        }
        field(body, &mut p)?;
    }
    if p != body.len() {
        return Err(RecordError::Corrupt(format!(
            "record has {} bytes left over",
            body.len() - p
        )));
    }
    Ok(value)
}

/// A place in a records section: the record at byte `pos`, the
/// `index`-th of the batch. The default is the first record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ValueCursor {
    pub pos: usize,
    pub index: i32,
}

/// Calls `f(value)` for each record of an uncompressed records section, in
/// order, from `from` on (a place an earlier walk of the same section
/// stopped at), until `f` returns false. Returns the place of the record
/// `f` refused, to go on from later, or `None` once every record was
/// walked. A record that does not decode is an error, as in
/// [`decode_records`](super::decode_records).
pub fn walk_values<'s>(
    h: &BatchHeader,
    section: &'s [u8],
    from: ValueCursor,
    mut f: impl FnMut(Option<&'s [u8]>) -> bool,
) -> Result<Option<ValueCursor>, RecordError> {
    let mut pos = from.pos;
    for index in from.index..h.record_count {
        let at = pos;
        let length = varint(section, &mut pos)?;
        let end = pos + length.max(0) as usize;
        let body = match section.get(pos..end) {
            Some(b) if length >= 0 => b,
            _ => {
                return Err(RecordError::Corrupt(format!(
                    "record length {length} runs past the end of batch {}",
                    h.base_offset
                )));
            }
        };
        pos = end;
        if !f(body_value(body)?) {
            return Ok(Some(ValueCursor { pos: at, index }));
        }
    }
    if pos != section.len() {
        return Err(RecordError::Corrupt(format!(
            "batch {} has {} bytes after its {} records",
            h.base_offset,
            section.len() - pos,
            h.record_count
        )));
    }
    Ok(None)
}

/// Calls `f(value)` for each record of an uncompressed records section, in
/// order, until it returns false. Returns whether every record was walked.
pub fn for_each_value<'s>(
    h: &BatchHeader,
    section: &'s [u8],
    f: impl FnMut(Option<&'s [u8]>) -> bool,
) -> Result<bool, RecordError> {
    Ok(walk_values(h, section, ValueCursor::default(), f)?.is_none())
}

/// Bytes the records add to the consumer stream: each value plus `\n`.
pub fn stream_len(h: &BatchHeader, section: &[u8]) -> Result<u64, RecordError> {
    let mut len = 0u64;
    for_each_value(h, section, |v| {
        len += v.map_or(0, <[u8]>::len) as u64 + 1;
        true
    })?;
    Ok(len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Batch, NewRecord, encode_batch};

    #[test]
    fn values_match_a_full_decode() {
        let headers: &[(&str, Option<&[u8]>)] = &[("h", Some(b"x")), ("n", None)];
        let big = vec![b'b'; 300];
        let records = [
            NewRecord::value(b"a"),
            NewRecord::keyed(b"k", b""),
            NewRecord {
                key: None,
                value: None,
                headers,
            },
            NewRecord::value(&big),
        ];
        let mut buf = Vec::new();
        encode_batch(&mut buf, 7, 0, &records);
        let batch = Batch::parse(&buf).unwrap();
        let section = batch.records_section();
        let mut got = Vec::new();
        assert!(
            for_each_value(&batch.header, section, |v| {
                got.push(v.map(<[u8]>::to_vec));
                true
            })
            .unwrap()
        );
        let want: Vec<_> = batch
            .records()
            .unwrap()
            .into_iter()
            .map(|r| r.value)
            .collect();
        assert_eq!(got, want);
        assert_eq!(stream_len(&batch.header, section).unwrap(), 2 + 1 + 1 + 301);
        // Stopping early walks no further.
        let mut n = 0;
        assert!(
            !for_each_value(&batch.header, section, |_| {
                n += 1;
                n < 2
            })
            .unwrap()
        );
        assert_eq!(n, 2);
        // Going on from where a walk stopped gives the rest.
        let mut first = Vec::new();
        let at = walk_values(&batch.header, section, ValueCursor::default(), |v| {
            first.push(v.map(<[u8]>::to_vec));
            first.len() < 2
        })
        .unwrap()
        .unwrap();
        assert_eq!(at.index, 1);
        let mut rest = Vec::new();
        let done = walk_values(&batch.header, section, at, |v| {
            rest.push(v.map(<[u8]>::to_vec));
            true
        })
        .unwrap();
        assert_eq!(done, None);
        first.pop();
        first.extend(rest);
        assert_eq!(first, want);
    }

    #[test]
    fn a_cut_or_padded_section_is_an_error() {
        let mut buf = Vec::new();
        encode_batch(&mut buf, 0, 0, &[NewRecord::value(b"abc")]);
        let batch = Batch::parse(&buf).unwrap();
        let section = batch.records_section();
        let cut = &section[..section.len() - 1];
        assert!(for_each_value(&batch.header, cut, |_| true).is_err());
        let mut padded = section.to_vec();
        padded.push(0);
        assert!(for_each_value(&batch.header, &padded, |_| true).is_err());
    }
}
