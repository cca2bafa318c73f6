//! Legacy message sets (magic 0 and 1), read as Kafka's `LegacyRecord` and
//! `AbstractLegacyRecordBatch` read them, for `dump`: an entry is
//! `offset int64, size int32, crc uint32, magic int8, attributes int8,
//! [timestamp int64, magic 1], key bytes, value bytes` (int32 lengths, -1
//! for null); its CRC-32 (IEEE) covers everything from the magic byte on. A
//! compressed entry (a wrapper) holds a whole message set in its value: with
//! magic 1 the inner offsets are relative to the wrapper's, which is the
//! last inner one's.

use commitfs::record::{Compression, decompress};

/// Offset, size and the message's fixed fields, magic 0.
const OVERHEAD_V0: usize = 4 + 1 + 1 + 4 + 4;
/// The same, magic 1 (a timestamp more).
const OVERHEAD_V1: usize = OVERHEAD_V0 + 8;
const LOG_OVERHEAD: usize = 12;

/// One legacy message, as Kafka prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Message {
    pub offset: i64,
    pub magic: i8,
    pub attributes: i8,
    /// -1 (`NO_TIMESTAMP`) for magic 0.
    pub timestamp: i64,
    pub crc: u32,
    /// The CRC matches (`LegacyRecord.isValid`).
    pub valid: bool,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    /// The entry's size, log overhead included.
    pub size: usize,
}

impl Message {
    /// `compressionType().name`; `Err(id)` for an id Kafka does not know.
    pub fn codec(&self) -> Result<Compression, u8> {
        let id = (self.attributes & 0x07) as u8;
        Compression::from_id(id).map_err(|_| id)
    }

    /// `TimestampType.toString()`: none for magic 0, else attribute bit 3.
    pub fn timestamp_type(&self) -> &'static str {
        if self.magic == 0 {
            "NoTimestampType"
        } else if self.attributes & 0x08 != 0 {
            "LogAppendTime"
        } else {
            "CreateTime"
        }
    }

    pub fn key_size(&self) -> i64 {
        self.key.as_ref().map_or(-1, |k| k.len() as i64)
    }

    pub fn value_size(&self) -> i64 {
        self.value.as_ref().map_or(-1, |v| v.len() as i64)
    }
}

/// The legacy entry at the start of `buf` (offset and size included).
pub(super) fn parse(buf: &[u8]) -> Result<Message, String> {
    let short = || format!("legacy entry of {} bytes is too short", buf.len());
    if buf.len() < LOG_OVERHEAD {
        return Err(short());
    }
    let offset = i64::from_be_bytes(buf[0..8].try_into().expect("8 bytes"));
    let size = i32::from_be_bytes(buf[8..12].try_into().expect("4 bytes"));
    if size < 0 || LOG_OVERHEAD + size as usize > buf.len() {
        return Err(format!(
            "legacy entry at offset {offset} declares {size} bytes, {} are there",
            buf.len() - LOG_OVERHEAD
        ));
    }
    let m = &buf[LOG_OVERHEAD..LOG_OVERHEAD + size as usize];
    if m.len() < 6 {
        return Err(short());
    }
    let crc = u32::from_be_bytes(m[0..4].try_into().expect("4 bytes"));
    let magic = m[4] as i8;
    let attributes = m[5] as i8;
    let mut p = 6;
    let timestamp = match magic {
        0 => -1,
        1 => {
            let t = m.get(6..14).ok_or_else(short)?;
            p = 14;
            i64::from_be_bytes(t.try_into().expect("8 bytes"))
        }
        other => return Err(format!("magic {other} is not a legacy message")),
    };
    let key = bytes(m, &mut p).ok_or_else(short)?;
    let value = bytes(m, &mut p).ok_or_else(short)?;
    let overhead = if magic == 0 { OVERHEAD_V0 } else { OVERHEAD_V1 };
    Ok(Message {
        offset,
        magic,
        attributes,
        timestamp,
        crc,
        valid: m.len() + LOG_OVERHEAD >= overhead && crc32fast::hash(&m[4..]) == crc,
        key,
        value,
        size: LOG_OVERHEAD + size as usize,
    })
}

fn bytes(m: &[u8], p: &mut usize) -> Option<Option<Vec<u8>>> {
    let len = i32::from_be_bytes(m.get(*p..*p + 4)?.try_into().ok()?);
    *p += 4;
    if len < 0 {
        return Some(None);
    }
    let b = m.get(*p..*p + len as usize)?.to_vec();
    *p += len as usize;
    Some(Some(b))
}

/// What deep iteration of an entry yields (`AbstractLegacyRecordBatch`'s
/// iterator): itself when it is not compressed, else the messages of its
/// value, with absolute offsets, and the wrapper's timestamp when the
/// wrapper's type is LogAppendTime.
pub(super) fn records(wrapper: &Message) -> Result<Vec<Message>, String> {
    let codec = match wrapper.codec() {
        Ok(Compression::None) => return Ok(vec![wrapper.clone()]),
        Ok(codec) => codec,
        Err(id) => return Err(format!("unknown compression codec id {id}")),
    };
    let Some(value) = &wrapper.value else {
        return Err("Found invalid compressed record set with null value".into());
    };
    let set = decompress(codec, value).map_err(|e| e.to_string())?;
    let mut inner = Vec::new();
    let mut pos = 0;
    while pos < set.len() {
        let m = parse(&set[pos..])?;
        pos += m.size;
        inner.push(m);
    }
    if wrapper.magic > 0 {
        let last = inner.last().map_or(0, |m| m.offset);
        let base = wrapper.offset - last;
        for m in &mut inner {
            m.offset += base;
            if wrapper.attributes & 0x08 != 0 {
                m.timestamp = wrapper.timestamp;
                m.attributes |= 0x08;
            }
        }
    }
    Ok(inner)
}
