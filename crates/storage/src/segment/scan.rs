//! A segment's reads: header scans, the lookup of one batch through the
//! sparse index (Kafka's `translateOffset`), lookups by timestamp, and the
//! whole-batch walk the consumer stream reads through. All of them walk the
//! `.log` with the batch reader.

use std::sync::atomic::{AtomicU64, Ordering};

use log::error;

use super::LogSegment;
use crate::batch_reader::{BatchReader, ReadWindow, Stop, read_full_at, read_full_into};
use crate::error::{IoContext, Result, StorageError};
use crate::index::{OffsetPosition, TimestampOffset};
use commitfs_record::values::record_end;
use commitfs_record::{Batch, BatchHeader, Compression, HEADER_LEN};

/// Bytes read at a time when scanning a segment.
const SCAN_CHUNK: usize = 64 * 1024;
/// A lookup reads a batch larger than this only up to about its record.
const PREFIX_MIN: usize = 64 * 1024;

/// Where a lookup's walk from an index entry ended.
pub(crate) enum Located {
    /// (position, header, the batch's bytes if the walk read all of them)
    Found(u64, BatchHeader, Option<Vec<u8>>),
    /// No batch holds the offset (a gap, or past the published end).
    Absent,
    /// The index entry does not point at its batch.
    BadEntry,
}

/// A batch read for a lookup.
pub struct ReadBatch {
    pub position: u64,
    pub header: BatchHeader,
    /// The batch, or its decompressed records section.
    pub bytes: Vec<u8>,
    /// Where the records section starts in `bytes`.
    pub section_start: usize,
    /// All of the batch is here; else only its start, up to at least the
    /// record it was read for (an uncompressed batch, CRC already checked).
    pub complete: bool,
}

impl ReadBatch {
    pub fn section(&self) -> &[u8] {
        &self.bytes[self.section_start..]
    }
}

impl LogSegment {
    /// Walks batch headers from `start`, calling `f(position, header)` until it
    /// returns false, the published end is reached, or a batch cannot be read.
    /// Returns the bytes read from the file.
    pub fn scan(&self, start: u64, f: impl FnMut(u64, &BatchHeader) -> bool) -> Result<u64> {
        let mut walk = self.reader(start, SCAN_CHUNK)?;
        walk.for_each_header(f)?;
        Ok(walk.bytes_read())
    }

    /// [`LogSegment::scan`] with a visitor that can fail.
    pub fn try_scan(
        &self,
        start: u64,
        f: impl FnMut(u64, &BatchHeader) -> Result<bool>,
    ) -> Result<u64> {
        let mut walk = self.reader(start, SCAN_CHUNK)?;
        walk.try_for_each_header(f)?;
        Ok(walk.bytes_read())
    }

    /// A walk of the published bytes from `start`, reading `chunk` bytes at a
    /// time. A range too short for a batch opens no file, so walking an empty
    /// segment (a new active one) leaves its `.log` unopened until it is used.
    fn reader(&self, start: u64, chunk: usize) -> Result<BatchReader<'_>> {
        let end = self.size()?;
        if start + HEADER_LEN as u64 > end {
            return Ok(BatchReader::empty_at(start));
        }
        Ok(BatchReader::new(
            self.log_file()?,
            &self.log_path,
            start,
            end,
            chunk,
        ))
    }

    /// Reads the whole batch at `pos` and checks its CRC.
    pub fn read_batch(&self, pos: u64, size: usize) -> Result<Vec<u8>> {
        let buf = self.read_batch_unchecked(pos, size)?;
        Batch::parse(&buf)?.verify_crc()?;
        Ok(buf)
    }

    /// Reads the whole batch at `pos`; a short file is an error.
    fn read_batch_unchecked(&self, pos: u64, size: usize) -> Result<Vec<u8>> {
        self.read_batch_into(pos, size, Vec::new())
    }

    /// [`Self::read_batch_unchecked`] into `buf`.
    fn read_batch_into(&self, pos: u64, size: usize, mut buf: Vec<u8>) -> Result<Vec<u8>> {
        let n = read_full_into(self.log_file()?, &mut buf, size, pos).at(&self.log_path)?;
        if n < size {
            return Err(self.corrupt(pos, format!("batch of {size} bytes is cut short at {n}")));
        }
        Ok(buf)
    }

    fn corrupt(&self, pos: u64, reason: String) -> StorageError {
        StorageError::Corrupt {
            path: self.log_path.clone(),
            position: pos,
            reason,
        }
    }

    /// The index entry to start a scan for `offset` from.
    pub fn lookup(&self, offset: i64) -> Result<OffsetPosition> {
        Ok(self.indexes()?.offset.lookup(offset))
    }

    /// Finds the batch holding `offset`: its position, its header and, when
    /// the scan already read all of it, its bytes. Reads about one index
    /// interval of headers plus the batch, never a segment scan.
    pub(crate) fn find_batch(&self, offset: i64, bytes_read: &AtomicU64) -> Result<Located> {
        let entry = self.lookup(offset)?;
        let (read, found) = self.locate(offset, entry)?;
        bytes_read.fetch_add(read, Ordering::Relaxed);
        if !matches!(found, Located::BadEntry) {
            return Ok(found);
        }
        error!(
            "Found a corrupted index file corresponding to log file {}: entry (offset {}, position {}) does not point at its batch, rebuilding index files...",
            self.log_path.display(),
            entry.offset,
            entry.position
        );
        {
            // Rebuild under the write lock, the old maps dropped first: the
            // files are recreated underneath them.
            let mut g = self.indexes.write();
            *g = None;
            *g = Some(self.rebuild_indexes()?);
        }
        let entry = self.lookup(offset)?;
        let (read, found) = self.locate(offset, entry)?;
        bytes_read.fetch_add(read, Ordering::Relaxed);
        Ok(match found {
            // Rebuilt from the log, the index cannot be wrong again.
            Located::BadEntry => Located::Absent,
            other => other,
        })
    }

    /// Walks batch headers from an index entry to the batch holding `offset`.
    /// The first read is one index interval plus a header; past a batch larger
    /// than that, it reads as much as that batch held, which usually brings
    /// the whole next batch in the same read.
    fn locate(&self, offset: i64, entry: OffsetPosition) -> Result<(u64, Located)> {
        let start = entry.position as u64;
        let chunk =
            (self.settings.index_interval_bytes as usize + HEADER_LEN).clamp(512, SCAN_CHUNK);
        let mut walk = self.reader(start, chunk)?.for_lookup();
        let mut first = true;
        let mut found = None;
        walk.for_each_header(|pos, h| {
            if first {
                first = false;
                // An index entry must point at the start of a batch at or
                // below its offset: the batch ending there (an append's
                // entry) or the first of a chunk the log cleaner appended
                // at once (keyed by the chunk's largest offset); anything
                // else means the index is damaged.
                if start != 0 && h.base_offset > entry.offset {
                    found = Some(Located::BadEntry);
                    return false;
                }
            }
            if h.last_offset() >= offset {
                found = Some(if h.base_offset > offset {
                    Located::Absent
                } else {
                    Located::Found(pos, *h, None)
                });
                return false;
            }
            true
        })?;
        let located = match found {
            Some(Located::Found(pos, h, _)) => {
                let bytes = walk.take_buffered(pos, h.size());
                Located::Found(pos, h, bytes)
            }
            Some(other) => other,
            None if first && start != 0 => Located::BadEntry,
            None => Located::Absent,
        };
        Ok((walk.bytes_read(), located))
    }

    /// The batch holding `offset`, CRC-checked (unless its segment was
    /// checked whole, see `crc_checked`), with its position, and its
    /// records section (decompressed) as bytes plus where the section starts
    /// in them, or `None` if no batch of this segment covers it (a gap).
    /// Control batches are returned too; callers decide. Unless `whole`,
    /// an uncompressed batch of a checked segment is read only about up to
    /// the record (see [`ReadBatch::complete`]). `buf` is a buffer to read
    /// into (an earlier lookup's), so that a lookup does not fault in fresh
    /// pages for a batch of a megabyte.
    pub fn read_batch_section(
        &self,
        offset: i64,
        bytes_read: &AtomicU64,
        whole: bool,
        buf: Vec<u8>,
    ) -> Result<Option<ReadBatch>> {
        let Located::Found(pos, h, buffered) = self.find_batch(offset, bytes_read)? else {
            return Ok(None);
        };
        // A segment whose every batch was checked when written or recovered
        // by this process is not checked again on each lookup (Kafka's fetch
        // path does not either): a CRC pass over a 1 MB batch cost a lookup
        // more than finding its record in it.
        let checked = self.crc_checked.load(Ordering::Relaxed);
        let bytes = match buffered {
            Some(b) => b,
            None if checked
                && !whole
                && h.size() > PREFIX_MIN
                && h.compression() == Compression::None =>
            {
                self.read_batch_prefix(pos, &h, offset, buf, bytes_read)?
            }
            None => {
                let b = self.read_batch_into(pos, h.size(), buf)?;
                bytes_read.fetch_add(b.len() as u64, Ordering::Relaxed);
                b
            }
        };
        if !checked {
            Batch::parse(&bytes)?.verify_crc()?;
        }
        if bytes.len() < h.size() {
            return Ok(Some(ReadBatch {
                position: pos,
                header: h,
                bytes,
                section_start: HEADER_LEN,
                complete: false,
            }));
        }
        // Returned with where its records section starts, so an uncompressed
        // batch is not copied to drop its header.
        let raw = match Batch::parse(&bytes)?.uncompressed_section()? {
            std::borrow::Cow::Owned(raw) => Some(raw),
            std::borrow::Cow::Borrowed(_) => None,
        };
        let (bytes, section_start) = match raw {
            Some(raw) => (raw, 0),
            None => (bytes, HEADER_LEN),
        };
        Ok(Some(ReadBatch {
            position: pos,
            header: h,
            bytes,
            section_start,
            complete: true,
        }))
    }

    /// The start of the uncompressed batch at `pos` up to about the record
    /// at `offset`: records of a batch are usually of a size, so the record
    /// is about as far into the section as its offset is into the batch.
    /// If that guess falls short, the rest of the batch is read too.
    fn read_batch_prefix(
        &self,
        pos: u64,
        h: &BatchHeader,
        offset: i64,
        mut buf: Vec<u8>,
        bytes_read: &AtomicU64,
    ) -> Result<Vec<u8>> {
        const SLACK: usize = 4096;
        let size = h.size();
        let section = size - HEADER_LEN;
        let count = (h.record_count.max(1)) as usize;
        let delta = (offset - h.base_offset).max(0) as usize + 1;
        let guess = HEADER_LEN + section / count * delta.min(count) + SLACK;
        let mut n =
            read_full_into(self.log_file()?, &mut buf, guess.min(size), pos).at(&self.log_path)?;
        if n < size && record_end(h, &buf[HEADER_LEN.min(n)..], offset).is_none() {
            buf.resize(size, 0);
            n += read_full_at(self.log_file()?, &mut buf[n..], pos + n as u64).at(&self.log_path)?;
        }
        bytes_read.fetch_add(n as u64, Ordering::Relaxed);
        if n < guess.min(size) || (n < size && buf.len() == size) {
            return Err(self.corrupt(pos, format!("batch of {size} bytes is cut short at {n}")));
        }
        buf.truncate(n);
        Ok(buf)
    }

    /// First record at or after `min_offset` whose timestamp is >= `timestamp`
    /// (control records too), as (offset, its timestamp): Kafka's
    /// `LogSegment.findOffsetByTimestamp` and `searchForTimestamp`, which go
    /// on past a batch whose max timestamp reaches the target but none of
    /// whose records do (one the log cleaner emptied or thinned keeps the
    /// max timestamp it had).
    pub fn find_offset_by_timestamp(
        &self,
        timestamp: i64,
        min_offset: i64,
    ) -> Result<Option<(i64, i64)>> {
        let start_offset = {
            let ix = self.indexes()?;
            let t: TimestampOffset = ix.time.lookup(timestamp);
            ix.offset.lookup(t.offset.max(min_offset)).position as u64
        };
        let mut found = None;
        self.try_scan(start_offset, |pos, h| {
            if h.max_timestamp < timestamp || h.last_offset() < min_offset {
                return Ok(true);
            }
            let bytes = self.read_batch(pos, h.size())?;
            found = Batch::parse(&bytes)?
                .records()?
                .into_iter()
                .find(|r| r.timestamp >= timestamp && r.offset >= min_offset)
                .map(|r| (r.offset, r.timestamp));
            Ok(found.is_none())
        })?;
        Ok(found)
    }

    /// The largest timestamp in the segment (from the time index), for retention.
    pub fn largest_timestamp(&self) -> Result<i64> {
        drop(self.indexes()?);
        let st = self.state.lock();
        if st.max_timestamp >= 0 {
            return Ok(st.max_timestamp);
        }
        // Kafka falls back to the file's modification time.
        let mtime = self
            .log_file()?
            .metadata()
            .at(&self.log_path)?
            .modified()
            .ok();
        Ok(mtime
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(-1, |d| d.as_millis() as i64))
    }

    pub fn first_batch_header(&self) -> Result<Option<BatchHeader>> {
        let mut first = None;
        self.scan(0, |_, h| {
            first = Some(*h);
            false
        })?;
        Ok(first)
    }

    /// The offset after the last batch (clean load: index tail plus a short scan).
    pub fn read_next_offset(&self) -> Result<i64> {
        let start = {
            self.indexes()?
                .offset
                .last_entry()
                .map_or(0, |e| e.position as u64)
        };
        let mut next = self.base_offset;
        self.scan(start, |_, h| {
            next = h.next_offset();
            true
        })?;
        Ok(next)
    }

    /// [`Self::for_each_batch`], reading `chunk` bytes at a time through
    /// `window` (bytes of this segment an earlier walk read, or none): a
    /// walk that goes on where the last one stopped reads nothing twice.
    /// Published bytes never change, so what the window holds stays good.
    pub fn for_each_batch_in(
        &self,
        window: &mut ReadWindow,
        (start, chunk): (u64, usize),
        f: impl FnMut(u64, &Batch) -> Result<bool>,
    ) -> Result<()> {
        let end = self.size()?;
        if start + HEADER_LEN as u64 > end {
            return Ok(());
        }
        let taken = std::mem::take(window);
        let mut walk =
            BatchReader::with_window(self.log_file()?, &self.log_path, (start, end), chunk, taken);
        let stop = walk.for_each_batch(f);
        *window = walk.into_window();
        match stop? {
            Some(Stop::Invalid { error, .. }) => Err(error.into()),
            _ => Ok(()),
        }
    }

    /// Calls `f(position, batch)` for each whole batch from `start` up to the
    /// published size, reading in large chunks, until `f` returns false.
    /// Batches are not CRC-checked here; a batch that cannot be framed ends the walk.
    pub fn for_each_batch(
        &self,
        start: u64,
        f: impl FnMut(u64, &Batch) -> Result<bool>,
    ) -> Result<()> {
        let mut walk = self.reader(start, SCAN_CHUNK)?;
        match walk.for_each_batch(f)? {
            Some(Stop::Invalid { error, .. }) => Err(error.into()),
            _ => Ok(()),
        }
    }
}
