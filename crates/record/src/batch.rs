//! The RecordBatch v2 header, its framing and its CRC.

use super::RecordError;

/// Bytes before `batchLength`'s payload: baseOffset (8) + batchLength (4).
pub const LOG_OVERHEAD: usize = 12;
/// The fixed RecordBatch v2 header.
pub const HEADER_LEN: usize = 61;
/// Offset of the magic byte inside a batch or legacy message.
pub const MAGIC_OFFSET: usize = 16;
/// CRC-32C covers everything from `attributes` (byte 21) to the end of the batch.
pub const CRC_OFFSET: usize = 17;
pub const ATTRIBUTES_OFFSET: usize = 21;
/// Smallest legacy message (magic 0): offset, size, crc, magic, attributes, key len, value len.
const LEGACY_MIN_SIZE: usize = LOG_OVERHEAD + 14;

pub const NO_PRODUCER_ID: i64 = -1;
pub const NO_PRODUCER_EPOCH: i16 = -1;
pub const NO_SEQUENCE: i32 = -1;
pub const NO_TIMESTAMP: i64 = -1;

/// Attribute bits 0-2.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Compression {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Compression {
    pub fn from_id(id: u8) -> Result<Self, RecordError> {
        Ok(match id {
            0 => Compression::None,
            1 => Compression::Gzip,
            2 => Compression::Snappy,
            3 => Compression::Lz4,
            4 => Compression::Zstd,
            other => {
                return Err(RecordError::Corrupt(format!(
                    "unknown compression codec id {other}"
                )));
            }
        })
    }

    pub fn id(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 1,
            Compression::Snappy => 2,
            Compression::Lz4 => 3,
            Compression::Zstd => 4,
        }
    }

    /// The name `kafka-dump-log` prints and `compression.type` uses.
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimestampType {
    CreateTime,
    LogAppendTime,
}

impl TimestampType {
    pub fn name(self) -> &'static str {
        match self {
            TimestampType::CreateTime => "CreateTime",
            TimestampType::LogAppendTime => "LogAppendTime",
        }
    }
}

/// What the 12-byte framing plus the magic byte say about the entry at a position,
/// enough to walk a log without decoding anything else.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    pub base_offset: i64,
    /// Whole entry size: `LOG_OVERHEAD + batchLength`.
    pub size: usize,
    pub magic: i8,
}

/// Reads the framing of the entry at the start of `buf` (needs 17 bytes).
///
/// Rejects lengths that cannot be a batch, and legacy (magic 0/1) entries, so a
/// walker stops at the first thing that is not a v2 batch.
pub fn peek_frame(buf: &[u8]) -> Result<Frame, RecordError> {
    if buf.len() < MAGIC_OFFSET + 1 {
        return Err(RecordError::Truncated {
            needed: MAGIC_OFFSET + 1,
            available: buf.len(),
        });
    }
    // Fixed ranges of a buffer whose length was checked above: the
    // conversions to arrays cannot fail.
    let base_offset = i64::from_be_bytes(buf[0..8].try_into().unwrap());
    let length = i32::from_be_bytes(buf[8..12].try_into().unwrap());
    let magic = buf[MAGIC_OFFSET] as i8;
    match magic {
        2 => {}
        0 | 1 => {
            let size = LOG_OVERHEAD as i64 + length as i64;
            if size < LEGACY_MIN_SIZE as i64 {
                return Err(RecordError::Corrupt(format!(
                    "legacy message size {length} is smaller than the minimum"
                )));
            }
            return Err(RecordError::UnsupportedMagic {
                magic,
                base_offset,
                size: size as usize,
            });
        }
        other => return Err(RecordError::Corrupt(format!("unknown magic byte {other}"))),
    }
    if (length as i64) < (HEADER_LEN - LOG_OVERHEAD) as i64 {
        return Err(RecordError::Corrupt(format!(
            "batch length {length} is smaller than the v2 header ({} bytes)",
            HEADER_LEN - LOG_OVERHEAD
        )));
    }
    if base_offset < 0 {
        return Err(RecordError::Corrupt(format!(
            "negative base offset {base_offset}"
        )));
    }
    Ok(Frame {
        base_offset,
        size: LOG_OVERHEAD + length as usize,
        magic,
    })
}

/// The 61-byte RecordBatch v2 header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub record_count: i32,
}

impl BatchHeader {
    /// Parses and sanity-checks the header at the start of `buf` (needs 61 bytes).
    pub fn parse(buf: &[u8]) -> Result<Self, RecordError> {
        peek_frame(buf)?;
        if buf.len() < HEADER_LEN {
            return Err(RecordError::Truncated {
                needed: HEADER_LEN,
                available: buf.len(),
            });
        }
        // Fixed offsets below HEADER_LEN, checked above: the conversions
        // to arrays cannot fail.
        let i16_at = |p: usize| i16::from_be_bytes(buf[p..p + 2].try_into().unwrap());
        let i32_at = |p: usize| i32::from_be_bytes(buf[p..p + 4].try_into().unwrap());
        let i64_at = |p: usize| i64::from_be_bytes(buf[p..p + 8].try_into().unwrap());
        let header = BatchHeader {
            base_offset: i64_at(0),
            batch_length: i32_at(8),
            partition_leader_epoch: i32_at(12),
            magic: buf[16] as i8,
            crc: u32::from_be_bytes(buf[17..21].try_into().unwrap()),
            attributes: i16_at(21),
            last_offset_delta: i32_at(23),
            base_timestamp: i64_at(27),
            max_timestamp: i64_at(35),
            producer_id: i64_at(43),
            producer_epoch: i16_at(51),
            base_sequence: i32_at(53),
            record_count: i32_at(57),
        };
        if header.last_offset_delta < 0 {
            return Err(RecordError::Corrupt(format!(
                "negative lastOffsetDelta {}",
                header.last_offset_delta
            )));
        }
        if header.record_count < 0 {
            return Err(RecordError::Corrupt(format!(
                "negative record count {}",
                header.record_count
            )));
        }
        // `next_offset` is last + 1, so that must fit too.
        if header
            .base_offset
            .checked_add(header.last_offset_delta as i64 + 1)
            .is_none()
        {
            return Err(RecordError::Corrupt("last offset overflows".into()));
        }
        Compression::from_id((header.attributes & 0x7) as u8)?;
        Ok(header)
    }

    /// Whole batch size including the 12-byte framing.
    pub fn size(&self) -> usize {
        LOG_OVERHEAD + self.batch_length as usize
    }

    pub fn last_offset(&self) -> i64 {
        self.base_offset + self.last_offset_delta as i64
    }

    pub fn next_offset(&self) -> i64 {
        self.last_offset() + 1
    }

    pub fn compression(&self) -> Compression {
        // Validated in `parse`.
        Compression::from_id((self.attributes & 0x7) as u8).unwrap_or(Compression::None)
    }

    pub fn timestamp_type(&self) -> TimestampType {
        if self.attributes & 0x8 != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }

    pub fn is_transactional(&self) -> bool {
        self.attributes & 0x10 != 0
    }

    pub fn is_control(&self) -> bool {
        self.attributes & 0x20 != 0
    }

    pub fn has_delete_horizon(&self) -> bool {
        self.attributes & 0x40 != 0
    }

    /// `baseSequence + lastOffsetDelta`, wrapping as Kafka does; -1 without a sequence.
    pub fn last_sequence(&self) -> i32 {
        if self.base_sequence == NO_SEQUENCE {
            NO_SEQUENCE
        } else {
            let last = self.base_sequence as i64 + self.last_offset_delta as i64;
            (last % (i32::MAX as i64 + 1)) as i32
        }
    }
}

/// CRC-32C of a batch's bytes from `attributes` to the end.
/// A slice too short to hold `attributes` gets the CRC of nothing rather than a panic.
pub fn compute_crc(batch: &[u8]) -> u32 {
    crc32c::crc32c(batch.get(ATTRIBUTES_OFFSET..).unwrap_or(&[]))
}

/// One whole v2 batch borrowed from a buffer.
#[derive(Clone, Copy, Debug)]
pub struct Batch<'a> {
    pub header: BatchHeader,
    bytes: &'a [u8],
}

impl<'a> Batch<'a> {
    /// Parses the batch at the start of `buf`; the whole batch must be present.
    /// The CRC is not checked here (see [`Batch::verify_crc`]).
    pub fn parse(buf: &'a [u8]) -> Result<Self, RecordError> {
        let header = BatchHeader::parse(buf)?;
        let size = header.size();
        if buf.len() < size {
            return Err(RecordError::Truncated {
                needed: size,
                available: buf.len(),
            });
        }
        Ok(Batch {
            header,
            bytes: &buf[..size],
        })
    }

    /// The batch in `bytes`, whose `header` was parsed from them before.
    pub(crate) fn from_parsed(header: BatchHeader, bytes: &'a [u8]) -> Self {
        Batch { header, bytes }
    }

    /// The whole batch, framing included.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The records section (after the 61-byte header), compressed or not.
    pub fn records_section(&self) -> &'a [u8] {
        &self.bytes[HEADER_LEN..]
    }

    pub fn size(&self) -> usize {
        self.bytes.len()
    }

    pub fn computed_crc(&self) -> u32 {
        compute_crc(self.bytes)
    }

    pub fn is_valid(&self) -> bool {
        self.computed_crc() == self.header.crc
    }

    pub fn verify_crc(&self) -> Result<(), RecordError> {
        let computed = self.computed_crc();
        if computed == self.header.crc {
            Ok(())
        } else {
            Err(RecordError::CrcMismatch {
                base_offset: self.header.base_offset,
                stored: self.header.crc,
                computed,
            })
        }
    }
}

/// Walks the batches of a buffer by their framing, without decoding records.
///
/// Yields an error (and then stops) at the first entry that is not a whole v2
/// batch: a torn tail gives `Truncated`, a legacy entry `UnsupportedMagic`.
pub struct BatchIter<'a> {
    buf: &'a [u8],
    pos: usize,
    failed: bool,
}

impl<'a> BatchIter<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        BatchIter {
            buf,
            pos: 0,
            failed: false,
        }
    }

    /// Position of the next batch in the buffer.
    pub fn position(&self) -> usize {
        self.pos
    }
}

impl<'a> Iterator for BatchIter<'a> {
    type Item = Result<(usize, Batch<'a>), RecordError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos >= self.buf.len() {
            return None;
        }
        match Batch::parse(&self.buf[self.pos..]) {
            Ok(batch) => {
                let at = self.pos;
                self.pos += batch.size();
                Some(Ok((at, batch)))
            }
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}
