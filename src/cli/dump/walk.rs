//! Reading the files `dump` is given: mapped bytes, and a walk over a
//! `.log`'s entries as Kafka's FileRecords sees them (legacy message sets
//! stepped over).

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::ops::Deref;
use std::path::Path;

use commitfs::record::{Batch, BatchHeader, Compression, RecordError, compute_crc};
use commitfs::storage::batch_reader::{BatchReader, Step, Stop};

use super::DumpError;

pub(super) fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// Base offset from a segment file name (`00000000000000000042.log`), 0 if it is not one.
pub(super) fn base_offset_of(path: &Path) -> i64 {
    let name = file_name(path);
    let stem = name.split('.').next().unwrap_or("");
    if !stem.is_empty() && stem.bytes().all(|b| b.is_ascii_digit()) {
        stem.parse().unwrap_or(0)
    } else {
        0
    }
}

/// File contents: mapped, since segments run to a GiB; read when mapping is not possible.
pub(super) enum Contents {
    Mapped(memmap2::Mmap),
    Read(Vec<u8>),
}

impl Deref for Contents {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Contents::Mapped(m) => m,
            Contents::Read(v) => v,
        }
    }
}

pub(super) fn read(path: &Path) -> io::Result<Contents> {
    let file = File::open(path)?;
    let meta = file.metadata()?;
    if meta.is_dir() {
        return Err(io::Error::other("is a directory"));
    }
    if meta.len() == 0 || !meta.is_file() {
        return std::fs::read(path).map(Contents::Read);
    }
    // SAFETY: read-only map; a file truncated underneath us could fault, the same
    // risk Kafka's own tool takes with its mapped indexes.
    match unsafe { memmap2::Mmap::map(&file) } {
        Ok(m) => Ok(Contents::Mapped(m)),
        Err(_) => std::fs::read(path).map(Contents::Read),
    }
}

/// One entry of a log: a v2 batch, or a legacy message (set).
pub(super) enum Entry<'a> {
    Batch {
        position: usize,
        batch: Batch<'a>,
    },
    Legacy {
        position: usize,
        offset: i64,
        /// The whole entry.
        bytes: &'a [u8],
    },
    /// A v2 batch whose attributes name a codec Kafka does not know (5 to
    /// 7): its header, read as if it named none, and whether its CRC holds.
    UnknownCodec {
        position: usize,
        codec: u8,
        header: BatchHeader,
        size: usize,
        crc_valid: bool,
    },
}

impl Entry<'_> {
    pub(super) fn position(&self) -> usize {
        match self {
            Entry::Batch { position, .. }
            | Entry::Legacy { position, .. }
            | Entry::UnknownCodec { position, .. } => *position,
        }
    }

    /// The entry's size in the log.
    pub(super) fn size(&self) -> usize {
        match self {
            Entry::Batch { batch, .. } => batch.size(),
            Entry::Legacy { bytes, .. } => bytes.len(),
            Entry::UnknownCodec { size, .. } => *size,
        }
    }

    pub(super) fn last_offset(&self) -> i64 {
        match self {
            Entry::Batch { batch, .. } => batch.header.last_offset(),
            // A legacy wrapper's offset is that of its last inner message.
            Entry::Legacy { offset, .. } => *offset,
            Entry::UnknownCodec { header, .. } => header.last_offset(),
        }
    }

    /// The largest record timestamp, as Kafka computes it for its time index
    /// check; the header's when the records cannot be decoded; None for a
    /// legacy entry that cannot be read.
    pub(super) fn max_timestamp(&self) -> Option<i64> {
        match self {
            Entry::Batch { batch, .. } => Some(match batch.records_as_kafka_reads() {
                Ok(records) => records.iter().map(|r| r.timestamp).fold(-1, i64::max),
                Err(_) => batch.header.max_timestamp,
            }),
            // A legacy entry's messages, as Kafka iterates them.
            Entry::Legacy { bytes, .. } => super::legacy::parse(bytes)
                .and_then(|m| super::legacy::records(&m))
                .ok()
                .map(|records| records.iter().map(|r| r.timestamp).fold(-1, i64::max)),
            Entry::UnknownCodec { header, .. } => Some(header.max_timestamp),
        }
    }
}

/// Walks a log as Kafka's FileRecords does, stepping over legacy entries, and
/// stopping at the first thing that is not a whole entry.
pub(super) struct Walk<'a> {
    buf: &'a [u8],
    reader: BatchReader<'a>,
    pub(super) valid_bytes: usize,
}

impl<'a> Walk<'a> {
    pub(super) fn new(buf: &'a [u8]) -> Self {
        Walk {
            buf,
            reader: BatchReader::over(buf),
            valid_bytes: 0,
        }
    }
}

impl<'a> Iterator for Walk<'a> {
    type Item = Entry<'a>;

    fn next(&mut self) -> Option<Entry<'a>> {
        let entry = match self.reader.next_batch().ok()? {
            // Taken again from the file's bytes, which outlive the reader, so
            // that entries can be kept (the time index check keeps them all).
            Step::Batch(position, batch) => {
                let (position, size) = (position as usize, batch.size());
                Entry::Batch {
                    position,
                    batch: Batch::parse(&self.buf[position..position + size]).ok()?,
                }
            }
            Step::Stop(Stop::Unframed {
                position,
                error:
                    RecordError::UnsupportedMagic {
                        base_offset, size, ..
                    },
            }) if size <= self.buf.len() - position as usize => {
                self.reader.skip(size);
                Entry::Legacy {
                    position: position as usize,
                    offset: base_offset,
                    bytes: &self.buf[position as usize..position as usize + size],
                }
            }
            Step::Stop(Stop::Invalid { position, .. }) => {
                let position = position as usize;
                let (size, codec, header) = unknown_codec(&self.buf[position..])?;
                self.reader.skip(size);
                let bytes = &self.buf[position..position + size];
                Entry::UnknownCodec {
                    position,
                    codec,
                    crc_valid: compute_crc(bytes) == header.crc,
                    header,
                    size,
                }
            }
            _ => return None,
        };
        self.valid_bytes = self.reader.position() as usize;
        Some(entry)
    }
}

/// The `.log` next to an index file, if there is one.
pub(super) struct SiblingLog {
    bytes: Contents,
}

impl SiblingLog {
    pub(super) fn open(index: &Path) -> Result<Option<SiblingLog>, DumpError> {
        let name = file_name(index);
        let stem = name.split('.').next().unwrap_or("");
        let log = index.with_file_name(format!("{stem}.log"));
        if !log.is_file() {
            return Ok(None);
        }
        match read(&log) {
            Ok(bytes) => Ok(Some(SiblingLog { bytes })),
            Err(e) => Err(DumpError::Read(io::Error::new(
                e.kind(),
                format!("{}: {e}", log.display()),
            ))),
        }
    }

    pub(super) fn entries(&self) -> Vec<Entry<'_>> {
        Walk::new(&self.bytes).collect()
    }

    /// Position of each entry → its last offset and size.
    pub(super) fn batch_starts(&self) -> HashMap<usize, (i64, usize)> {
        Walk::new(&self.bytes)
            .map(|e| (e.position(), (e.last_offset(), e.size())))
            .collect()
    }
}

/// The first entry whose last offset is at least `offset`, as Kafka's
/// `batches.find(_.lastOffset >= offset)`; a binary search when offsets ascend.
pub(super) fn find_by_last_offset<'e, 'a>(
    entries: &'e [Entry<'a>],
    ascending: bool,
    offset: i64,
) -> Option<&'e Entry<'a>> {
    if ascending {
        let i = entries.partition_point(|e| e.last_offset() < offset);
        entries.get(i)
    } else {
        entries.iter().find(|e| e.last_offset() >= offset)
    }
}

pub(super) fn ascending(entries: &[Entry]) -> bool {
    entries
        .windows(2)
        .all(|w| w[0].last_offset() <= w[1].last_offset())
}

/// A whole v2 batch at the start of `buf` that fails to parse only because
/// its attributes name an unknown codec: its size, the codec id, and its
/// header read with the codec bits cleared.
fn unknown_codec(buf: &[u8]) -> Option<(usize, u8, BatchHeader)> {
    // baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes.
    const ATTRIBUTES: usize = 8 + 4 + 4 + 1 + 4;
    let length = i32::from_be_bytes(buf.get(8..12)?.try_into().ok()?);
    let size = 12usize.checked_add(usize::try_from(length).ok()?)?;
    let codec = buf.get(ATTRIBUTES + 1)? & 0x07;
    if size > buf.len() || Compression::from_id(codec).is_ok() {
        return None;
    }
    let mut patched = buf[..size].to_vec();
    patched[ATTRIBUTES + 1] &= !0x07;
    let header = BatchHeader::parse(&patched).ok()?;
    Some((size, codec, header))
}
