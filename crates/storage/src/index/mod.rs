//! Kafka's sparse indexes: `.index` (8-byte entries: relative offset u32,
//! position u32) and `.timeindex` (12-byte entries: timestamp i64, relative
//! offset u32), both big-endian and memory-mapped. On a read-only data dir
//! no file is mapped: another process may truncate it at any time, and a
//! mapped page past a new end faults (SIGBUS), so the file is read into the
//! daemon's own memory instead. Entries are decoded only
//! here, so that `check` and `dump` (through [`offset_entries`] and
//! [`time_entries`]) cannot read the layout differently from the index.
//!
//! An active index is `segment.index.bytes` long (rounded down to a whole
//! entry), sparse, with real blocks allocated as entries are written (see
//! `file.rs`), and trimmed to its entries when the segment becomes inactive.

use std::path::Path;

use super::error::Result;

mod file;
mod txn;

pub use file::ALLOCATION_STEP;
use file::IndexFile;
pub(crate) use txn::TransactionIndex;

pub const OFFSET_ENTRY: usize = 8;
pub const TIME_ENTRY: usize = 12;

/// Kafka's warm-section trick: most lookups hit the tail, so search the last
/// 8 KiB worth of entries first and keep those pages hot.
const WARM_BYTES: usize = 8192;

fn largest_lower_bound(
    entries: usize,
    entry_size: usize,
    target: i64,
    key: impl Fn(usize) -> i64,
) -> Option<usize> {
    if entries == 0 || key(0) > target {
        return None;
    }
    let warm_entries = WARM_BYTES / entry_size;
    let first_hot = entries.saturating_sub(warm_entries);
    let (mut lo, mut hi) = if key(first_hot) <= target {
        (first_hot, entries - 1)
    } else {
        (0, first_hot)
    };
    // Invariant: key(lo) <= target; the answer is in [lo, hi].
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if key(mid) <= target {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    Some(lo)
}

/// Construction and file upkeep, the same for both kinds of index.
macro_rules! index_common {
    ($entry_size:expr) => {
        pub fn open(path: &Path, base_offset: i64, writable: bool) -> Result<Self> {
            Ok(Self {
                base_offset,
                file: IndexFile::open(path, $entry_size, writable)?,
            })
        }

        /// A fresh empty index file of `max_bytes`, sparse.
        pub fn create(path: &Path, base_offset: i64, max_bytes: u64) -> Result<Self> {
            Ok(Self {
                base_offset,
                file: IndexFile::create(path, $entry_size, max_bytes)?,
            })
        }

        /// An index built in memory only (a read-only data dir).
        pub fn in_memory(path: &Path, base_offset: i64, max_bytes: u64) -> Result<Self> {
            Ok(Self {
                base_offset,
                file: IndexFile::in_memory(path, $entry_size, max_bytes)?,
            })
        }

        pub fn entries(&self) -> usize {
            self.file.entries
        }
        /// Real blocks for `n` more entries, so that an append's index
        /// entries cannot meet a full disk after its bytes are written.
        pub fn allocate_ahead(&mut self, n: usize) -> Result<()> {
            self.file.allocate_for(self.file.entries + n)
        }
        pub fn truncate_entries(&mut self, n: usize) {
            self.file.truncate_entries(n)
        }
        pub fn trim(&mut self) -> Result<()> {
            self.file.trim()
        }
        pub fn resize(&mut self, len: u64) -> Result<()> {
            self.file.resize(len)
        }
        pub fn flush(&self) -> Result<()> {
            self.file.flush()
        }
        pub fn path(&self) -> &Path {
            &self.file.path
        }
        /// The file was renamed to `path`.
        pub fn moved_to(&mut self, path: &Path) {
            self.file.path = path.to_path_buf();
        }
    };
}

/// `.index`: relative offset -> file position, for the batch's last offset.
pub struct OffsetIndex {
    base_offset: i64,
    file: IndexFile,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OffsetPosition {
    pub offset: i64,
    pub position: u32,
}

impl OffsetPosition {
    /// An entry as stored. The add wraps: `dump` decodes whatever bytes it
    /// is given, under whatever base offset the file name says.
    #[inline]
    pub fn decode(base_offset: i64, entry: &[u8]) -> Self {
        OffsetPosition {
            offset: base_offset.wrapping_add(be_u32(&entry[0..4]) as i64),
            position: be_u32(&entry[4..8]),
        }
    }

    /// An entry as Kafka's `OffsetIndex.parseEntry` reads it: the relative
    /// offset as a signed int, so one past `Int.MaxValue` comes out below the
    /// base offset, which is what Kafka's sanity check looks for. The two
    /// readings differ only for entries Kafka never writes.
    pub fn decode_as_kafka(base_offset: i64, entry: &[u8]) -> Self {
        OffsetPosition {
            offset: base_offset.wrapping_add(be_u32(&entry[0..4]) as i32 as i64),
            position: be_u32(&entry[4..8]),
        }
    }

    fn encode(&self, base_offset: i64) -> [u8; OFFSET_ENTRY] {
        let mut e = [0u8; OFFSET_ENTRY];
        e[0..4].copy_from_slice(&((self.offset - base_offset) as u32).to_be_bytes());
        e[4..8].copy_from_slice(&self.position.to_be_bytes());
        e
    }
}

/// Every whole entry of an `.index` file's bytes: Kafka counts them from
/// the length, zero-filled preallocation included.
pub fn offset_entries(base_offset: i64, bytes: &[u8]) -> impl Iterator<Item = OffsetPosition> + '_ {
    bytes
        .chunks_exact(OFFSET_ENTRY)
        .map(move |e| OffsetPosition::decode(base_offset, e))
}

impl OffsetIndex {
    index_common!(OFFSET_ENTRY);

    pub fn entry(&self, i: usize) -> OffsetPosition {
        OffsetPosition::decode(self.base_offset, self.file.entry_bytes(i))
    }

    pub fn last_entry(&self) -> Option<OffsetPosition> {
        self.entries().checked_sub(1).map(|i| self.entry(i))
    }

    pub fn is_full(&self) -> bool {
        self.file.entries >= self.file.capacity()
    }

    /// The largest entry with offset <= `target`, or (base offset, 0).
    pub fn lookup(&self, target: i64) -> OffsetPosition {
        match largest_lower_bound(self.entries(), OFFSET_ENTRY, target, |i| {
            self.entry(i).offset
        }) {
            Some(i) => self.entry(i),
            None => OffsetPosition {
                offset: self.base_offset,
                position: 0,
            },
        }
    }

    pub fn append(&mut self, offset: i64, position: u32) -> Result<()> {
        self.file
            .push(&OffsetPosition { offset, position }.encode(self.base_offset))
    }

    /// Grows the index, if it is full, so that one more entry fits.
    pub fn make_room(&mut self) -> Result<()> {
        self.file.reserve(1)
    }

    /// Kafka's `OffsetIndex.sanityCheck`, plus what an untrimmed file after a
    /// crash looks like (zeroed tail entries), plus entries that do not fit the
    /// log. Returns why the index cannot be trusted.
    pub fn check(&self, log_size: u64) -> std::result::Result<(), String> {
        let len = self.file.file_len().map_err(|e| e.to_string())?;
        if len % OFFSET_ENTRY as u64 != 0 {
            return Err(format!(
                "index file size {len} is not a multiple of {OFFSET_ENTRY}"
            ));
        }
        let mut prev: Option<OffsetPosition> = None;
        for i in 0..self.entries() {
            let e = self.entry(i);
            // The first batch of a segment is never indexed, so a real entry never
            // points at position 0: a zero entry is space never written.
            if e.position == 0 {
                return Err(format!(
                    "entry {i} has position 0 (an untrimmed or zero-filled index)"
                ));
            }
            if e.offset <= self.base_offset {
                return Err(format!(
                    "entry {i} has offset {} at or below the base offset",
                    e.offset
                ));
            }
            if e.position as u64 >= log_size {
                return Err(format!(
                    "entry {i} points at position {} past the end of the log ({log_size} bytes)",
                    e.position
                ));
            }
            if let Some(p) = prev
                && (e.offset <= p.offset || e.position <= p.position)
            {
                return Err(format!("entry {i} (offset {}) does not increase", e.offset));
            }
            prev = Some(e);
        }
        Ok(())
    }
}

/// `.timeindex`: max timestamp so far -> relative offset of that timestamp.
pub struct TimeIndex {
    base_offset: i64,
    file: IndexFile,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimestampOffset {
    pub timestamp: i64,
    pub offset: i64,
}

impl TimestampOffset {
    /// An entry as stored (12 bytes: callers pass whole entries, so the
    /// conversions below cannot fail); the add wraps, as in
    /// [`OffsetPosition::decode`].
    #[inline]
    pub fn decode(base_offset: i64, entry: &[u8]) -> Self {
        TimestampOffset {
            timestamp: i64::from_be_bytes(entry[0..8].try_into().unwrap()),
            offset: base_offset.wrapping_add(be_u32(&entry[8..12]) as i64),
        }
    }

    /// An entry as Kafka's `TimeIndex.parseEntry` reads it, as
    /// [`OffsetPosition::decode_as_kafka`].
    pub fn decode_as_kafka(base_offset: i64, entry: &[u8]) -> Self {
        TimestampOffset {
            timestamp: i64::from_be_bytes(entry[0..8].try_into().unwrap()),
            offset: base_offset.wrapping_add(be_u32(&entry[8..12]) as i32 as i64),
        }
    }

    fn encode(&self, base_offset: i64) -> [u8; TIME_ENTRY] {
        let mut e = [0u8; TIME_ENTRY];
        e[0..8].copy_from_slice(&self.timestamp.to_be_bytes());
        e[8..12].copy_from_slice(&((self.offset - base_offset) as u32).to_be_bytes());
        e
    }
}

/// Every whole entry of a `.timeindex` file's bytes, as [`offset_entries`].
pub fn time_entries(base_offset: i64, bytes: &[u8]) -> impl Iterator<Item = TimestampOffset> + '_ {
    bytes
        .chunks_exact(TIME_ENTRY)
        .map(move |e| TimestampOffset::decode(base_offset, e))
}

/// Four bytes at a fixed range of a whole entry: the conversion cannot fail.
#[inline]
fn be_u32(b: &[u8]) -> u32 {
    u32::from_be_bytes(b.try_into().unwrap())
}

impl TimeIndex {
    index_common!(TIME_ENTRY);

    pub fn entry(&self, i: usize) -> TimestampOffset {
        TimestampOffset::decode(self.base_offset, self.file.entry_bytes(i))
    }

    /// The last entry, or Kafka's "unknown": (-1, base offset).
    pub fn last_entry(&self) -> TimestampOffset {
        match self.entries().checked_sub(1) {
            Some(i) => self.entry(i),
            None => TimestampOffset {
                timestamp: -1,
                offset: self.base_offset,
            },
        }
    }

    /// Kafka keeps one slot free for the entry written when the segment rolls.
    pub fn is_full(&self) -> bool {
        self.file.entries + 1 >= self.file.capacity()
    }

    /// Adds an entry only when the timestamp grows (Kafka's `maybeAppend`).
    /// `skip_full_check` is for the final entry of a segment becoming inactive.
    pub fn maybe_append(
        &mut self,
        timestamp: i64,
        offset: i64,
        skip_full_check: bool,
    ) -> Result<()> {
        if !skip_full_check && self.is_full() {
            return Ok(());
        }
        if self.file.entries >= self.file.capacity() {
            return Ok(());
        }
        let last = self.last_entry();
        if timestamp > last.timestamp && offset >= last.offset {
            let entry = TimestampOffset { timestamp, offset };
            self.file.push(&entry.encode(self.base_offset))?;
        }
        Ok(())
    }

    /// Grows the index, if it is full, so that one more entry plus the
    /// final one of a segment becoming inactive fit.
    pub fn make_room(&mut self) -> Result<()> {
        self.file.reserve(2)
    }

    /// The entry with the largest timestamp <= `target`, or (-1, base offset).
    pub fn lookup(&self, target: i64) -> TimestampOffset {
        match largest_lower_bound(self.entries(), TIME_ENTRY, target, |i| {
            self.entry(i).timestamp
        }) {
            Some(i) => self.entry(i),
            None => TimestampOffset {
                timestamp: -1,
                offset: self.base_offset,
            },
        }
    }

    /// Kafka's `TimeIndex.sanityCheck` plus strict growth of every entry, which
    /// also catches a zero-padded tail.
    pub fn check(&self, next_offset: i64) -> std::result::Result<(), String> {
        let len = self.file.file_len().map_err(|e| e.to_string())?;
        if len % TIME_ENTRY as u64 != 0 {
            return Err(format!(
                "time index file size {len} is not a multiple of {TIME_ENTRY}"
            ));
        }
        let mut prev: Option<TimestampOffset> = None;
        for i in 0..self.entries() {
            let e = self.entry(i);
            if e.offset >= next_offset {
                return Err(format!(
                    "entry {i} has offset {} past the log end {next_offset}",
                    e.offset
                ));
            }
            if let Some(p) = prev
                && (e.timestamp <= p.timestamp || e.offset < p.offset)
            {
                return Err(format!(
                    "entry {i} (timestamp {}, offset {}) does not grow (an untrimmed or damaged time index)",
                    e.timestamp, e.offset
                ));
            }
            prev = Some(e);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_finds_largest_lower_bound_in_warm_and_cold_sections() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000100.index");
        let mut idx = OffsetIndex::create(&path, 100, 80_000).unwrap();
        for i in 1..=5000u32 {
            idx.append(100 + (i as i64) * 10, i * 100).unwrap();
        }
        assert_eq!(idx.lookup(50).position, 0);
        assert_eq!(idx.lookup(109).position, 0);
        assert_eq!(idx.lookup(110).position, 100);
        assert_eq!(idx.lookup(115).position, 100);
        assert_eq!(idx.lookup(100 + 2500 * 10 + 3).position, 250_000);
        assert_eq!(idx.lookup(100 + 4999 * 10).position, 499_900);
        assert_eq!(idx.lookup(i64::MAX).position, 500_000);
        idx.trim().unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 5000 * 8);
        idx.check(10_000_000).unwrap();
    }

    #[test]
    fn zero_padding_is_detected() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.index");
        let mut idx = OffsetIndex::create(&path, 0, 800).unwrap();
        idx.append(5, 4200).unwrap();
        idx.append(9, 8400).unwrap();
        idx.flush().unwrap();
        drop(idx);
        let reopened = OffsetIndex::open(&path, 0, true).unwrap();
        assert_eq!(
            reopened.entries(),
            100,
            "Kafka counts entries from the file length"
        );
        assert!(reopened.check(100_000).unwrap_err().contains("position 0"));
    }

    #[test]
    fn a_read_only_open_keeps_its_own_copy_when_the_file_is_cut() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.index");
        // 2000 entries (offset 2i, position 100i): four pages.
        let bytes: Vec<u8> = (1..=2000u32)
            .flat_map(|i| [(i * 2).to_be_bytes(), (i * 100).to_be_bytes()].concat())
            .collect();
        std::fs::write(&path, &bytes).unwrap();
        let ro = OffsetIndex::open(&path, 0, false).unwrap();
        // Another process cuts the file: a mapping would fault here.
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(0)
            .unwrap();
        assert_eq!(ro.entries(), 2000);
        assert_eq!(ro.lookup(3).position, 100);
        assert_eq!(ro.lookup(2001).position, 100_000);
        ro.check(1 << 30).unwrap();
        let empty = OffsetIndex::open(&path, 0, false).unwrap();
        assert_eq!(empty.entries(), 0);
        assert_eq!(empty.lookup(7).position, 0);
    }

    #[test]
    fn time_index_appends_only_when_the_timestamp_grows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.timeindex");
        let mut idx = TimeIndex::create(&path, 0, 120).unwrap();
        idx.maybe_append(10, 3, false).unwrap();
        idx.maybe_append(10, 5, false).unwrap();
        idx.maybe_append(12, 7, false).unwrap();
        assert_eq!(idx.entries(), 2);
        assert_eq!(idx.lookup(11).offset, 3);
        assert_eq!(idx.lookup(9).timestamp, -1);
        idx.check(8).unwrap();
        for t in 13..100 {
            idx.maybe_append(t, t, false).unwrap();
        }
        assert_eq!(idx.entries(), 9, "one slot is kept for the final entry");
        idx.maybe_append(1000, 1000, true).unwrap();
        assert_eq!(idx.entries(), 10);
    }
}
