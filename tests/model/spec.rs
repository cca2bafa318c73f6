//! Facts of Kafka's formats and naming rules the model needs, written from
//! Kafka's documentation (the RecordBatch v2 layout, `Topic.validate`), not
//! from commitfs's code.

/// Bytes of a RecordBatch v2 header, up to and including the record count.
pub const BATCH_HEADER: u64 = 61;

/// Bytes a zigzag varint of `v` takes.
pub fn varint_size(v: i64) -> u64 {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    let mut n = 1;
    while z >= 0x80 {
        z >>= 7;
        n += 1;
    }
    n
}

/// Bytes one record adds to an uncompressed batch at `offset_delta`: its
/// length varint, then attributes (1), timestampDelta (0 here: one timestamp
/// per append), offsetDelta, key length and key (-1 when null), value length
/// and value, and a header count of 0.
pub fn record_size(key: Option<&[u8]>, value: &[u8], offset_delta: i64) -> u64 {
    let key_part = key.map_or(varint_size(-1), |k| {
        varint_size(k.len() as i64) + k.len() as u64
    });
    let body = 1
        + varint_size(0)
        + varint_size(offset_delta)
        + key_part
        + varint_size(value.len() as i64)
        + value.len() as u64
        + varint_size(0);
    varint_size(body as i64) + body
}

/// What one group of records became: its count and its uncompressed size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Group {
    pub records: usize,
    pub size: u64,
}

/// Records packed in order into the fewest batches of at most `max` bytes
/// (uncompressed): greedy, which is optimal for contiguous groups. `None`
/// when one record alone does not fit (EMSGSIZE).
pub fn pack(records: &[(Option<&[u8]>, &[u8])], max: u64) -> Option<Vec<Group>> {
    let mut groups: Vec<Group> = Vec::new();
    let mut cur = Group {
        records: 0,
        size: BATCH_HEADER,
    };
    for (key, value) in records {
        let add = record_size(*key, value, cur.records as i64);
        if cur.records > 0 && cur.size + add > max {
            groups.push(cur);
            cur = Group {
                records: 0,
                size: BATCH_HEADER,
            };
        }
        let add = record_size(*key, value, cur.records as i64);
        if cur.records == 0 && cur.size + add > max {
            return None;
        }
        cur.records += 1;
        cur.size += add;
    }
    groups.push(cur);
    Some(groups)
}

/// The fields of a RecordBatch v2 header the model checks a `.log` against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchFrame {
    pub position: u64,
    pub base_offset: i64,
    /// 12 (offset and length fields) + batchLength.
    pub size: u64,
    pub magic: i8,
    /// The low three bits of attributes: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.
    pub codec: u8,
    pub last_offset: i64,
    pub max_timestamp: i64,
    pub records: i32,
}

/// Walks the framing of a `.log`'s bytes: baseOffset (8), batchLength (4),
/// partitionLeaderEpoch (4), magic (1), crc (4), attributes (2),
/// lastOffsetDelta (4), baseTimestamp (8), maxTimestamp (8), producerId (8),
/// producerEpoch (2), baseSequence (4), recordCount (4).
pub fn walk_batches(bytes: &[u8]) -> Result<Vec<BatchFrame>, String> {
    let be = |at: usize, n: usize| -> i64 {
        bytes[at..at + n]
            .iter()
            .fold(0i64, |acc, b| (acc << 8) | *b as i64)
    };
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos < bytes.len() {
        if bytes.len() - pos < BATCH_HEADER as usize {
            return Err(format!("a torn header at {pos}"));
        }
        let size = 12 + be(pos + 8, 4) as u64;
        if pos as u64 + size > bytes.len() as u64 || size < BATCH_HEADER {
            return Err(format!("a batch at {pos} of {size} bytes past the end"));
        }
        let base_offset = be(pos, 8);
        out.push(BatchFrame {
            position: pos as u64,
            base_offset,
            size,
            magic: bytes[pos + 16] as i8,
            codec: (be(pos + 21, 2) & 0x7) as u8,
            last_offset: base_offset + be(pos + 23, 4),
            max_timestamp: be(pos + 35, 8),
            records: be(pos + 57, 4) as i32,
        });
        pos += size as usize;
    }
    Ok(out)
}

/// Kafka's `Topic.validate` plus the tree's rule for new partitions:
/// `<topic>-<partition>` split at the last `-`; the topic 1-249 characters of
/// `[a-zA-Z0-9._-]`, not `.` or `..`, and not ending in `-` (it would read as
/// a negative partition); the partition a decimal without leading zeros, at
/// most 2^31-1.
pub fn valid_new_partition_name(name: &str) -> bool {
    let Some((topic, partition)) = name.rsplit_once('-') else {
        return false;
    };
    let topic_ok = (1..=249).contains(&topic.len())
        && topic != "."
        && topic != ".."
        && !topic.ends_with('-')
        && topic
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    topic_ok && canonical_decimal(partition).is_some_and(|p| p <= i32::MAX as i64)
}

/// A canonical non-negative decimal (no sign, no leading zero, fits i64):
/// the only form `offset/N`, `time/<ms>` and `delete-records` accept.
pub fn canonical_decimal(s: &str) -> Option<i64> {
    let ok = !s.is_empty()
        && s.bytes().all(|b| b.is_ascii_digit())
        && (s.len() == 1 || !s.starts_with('0'));
    if ok { s.parse().ok() } else { None }
}

/// What a write to `delete-records` asks for: an offset, `-1` for the log
/// end, surrounding blanks (the shell's newline) allowed; anything else is
/// no offset at all.
pub fn delete_records_arg(data: &[u8]) -> Option<DeleteArg> {
    let s = std::str::from_utf8(data).ok()?.trim();
    if s == "-1" {
        return Some(DeleteArg::LogEnd);
    }
    canonical_decimal(s).map(DeleteArg::Offset)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeleteArg {
    Offset(i64),
    LogEnd,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_from_the_spec() {
        assert_eq!(varint_size(0), 1);
        assert_eq!(varint_size(-1), 1);
        assert_eq!(varint_size(63), 1);
        assert_eq!(varint_size(64), 2);
        // "hello": body 1+1+1+1+1+5+1 = 11, plus its length varint.
        assert_eq!(record_size(None, b"hello", 0), 12);
    }
}
