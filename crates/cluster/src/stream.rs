//! The consumer stream of a partition over a cluster (`value\n` per record
//! from the log start) and its exact length, from fetched records.
//!
//! The length needs every record's value size from the log start, and a
//! cluster does not keep that, so it is counted from fetches and kept as a
//! list of **spans**: `[first offset, next offset)` and the stream bytes of
//! its records. Spans never change (records are immutable); new records
//! add spans at the end, and a moved log start drops spans from the front.
//! The list is bounded: past [`MAX_SPANS`], neighbours are merged in pairs
//! (each span then covers twice as much), so a partition of any size costs
//! a few KiB. A read finds its span by binary search and walks records from
//! the span's start, or from where the last read stopped (sequential reads
//! never walk back).
//!
//! Stream positions count from the current log start: the index keeps
//! absolute positions from where it began and subtracts the log start's.

use std::sync::Arc;
use std::time::Instant;

use super::fetch::Chunk;
use commitfs_backend::{BackendError, BackendResult, ErrorKind};

/// Spans kept per partition before they are merged in pairs.
pub const MAX_SPANS: usize = 256;
/// A new span closes once it counts this many stream bytes (doubled at each merge).
const FIRST_SPAN_BYTES: u64 = 64 << 10;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Span {
    first: i64,
    next: i64,
    /// Absolute stream position of `first`.
    start: u64,
    bytes: u64,
}

impl Span {
    fn end(&self) -> u64 {
        self.start + self.bytes
    }
}

/// Where the records come from: a chunk covering an offset (from the cache
/// or a fetch). An empty chunk: no record at or after that offset.
/// What counting the stream came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counted {
    /// The stream's length.
    Len(u64),
    /// Retention moved the log start past where counting stood: count again.
    StartMoved,
}

pub type Chunks<'a> = &'a dyn Fn(i64) -> BackendResult<Arc<Chunk>>;

#[derive(Debug)]
pub struct StreamIndex {
    spans: Vec<Span>,
    /// Where counting began (a log start) and where it has got to.
    origin: i64,
    end: i64,
    end_pos: u64,
    span_bytes: u64,
    /// The current log start and its absolute position.
    start: (i64, u64),
    /// Where the last read stopped: a record's offset and absolute start.
    cursor: Option<(i64, u64)>,
    /// The timestamp of the last record counted.
    pub last_timestamp: Option<i64>,
}

impl StreamIndex {
    /// An index counting from `log_start`.
    pub fn new(log_start: i64) -> Self {
        StreamIndex {
            spans: Vec::new(),
            origin: log_start,
            end: log_start,
            end_pos: 0,
            span_bytes: FIRST_SPAN_BYTES,
            start: (log_start, 0),
            cursor: None,
            last_timestamp: None,
        }
    }

    /// Offsets counted so far: `[origin, end)`.
    pub fn end(&self) -> i64 {
        self.end
    }

    pub fn spans(&self) -> usize {
        self.spans.len()
    }

    /// Whether this index can serve a log that starts at `log_start` and
    /// ends at `log_end`; if not (the topic was deleted and made again) it
    /// must be started anew.
    pub fn fits(&self, log_start: i64, log_end: i64) -> bool {
        log_start >= self.origin && log_end >= self.end
    }

    /// The stream length once `[log start, log_end)` is counted: counts the
    /// records not counted yet, giving up at `deadline` (what was counted
    /// stays counted for the next call).
    pub fn len(
        &mut self,
        log_start: i64,
        log_end: i64,
        chunks: Chunks,
        deadline: Instant,
    ) -> BackendResult<Counted> {
        if self.end < log_start {
            // Everything counted is gone: count from the start.
            *self = StreamIndex::new(log_start);
        }
        match self.move_start(log_start, chunks) {
            // The records before the new start in its span are gone already
            // (retention, DeleteRecords): count afresh from the start.
            Err(e) if matches!(e.kind, ErrorKind::OffsetOutOfRange { .. }) => {
                *self = StreamIndex::new(log_start);
            }
            r => r?,
        }
        match self.extend(log_end, chunks, deadline) {
            // Retention moved the start past where counting stood.
            Err(e) if matches!(e.kind, ErrorKind::OffsetOutOfRange { .. }) => {
                return Ok(Counted::StartMoved);
            }
            r => r?,
        }
        Ok(Counted::Len(self.end_pos - self.start.1))
    }

    /// Counts records up to `log_end`.
    pub fn extend(&mut self, log_end: i64, chunks: Chunks, deadline: Instant) -> BackendResult<()> {
        while self.end < log_end {
            if Instant::now() >= deadline {
                return Err(BackendError::new(
                    ErrorKind::TimedOut,
                    format!(
                        "the stream length is still being counted: offsets {}..{} of {}..{log_end} \
                         done ({} bytes so far); it goes on at the next stat",
                        self.origin, self.end, self.origin, self.end_pos
                    ),
                ));
            }
            let chunk = chunks(self.end)?;
            if chunk.records.is_empty() {
                // Only control records up to the log end.
                self.push(log_end, 0);
                break;
            }
            let mut bytes = 0;
            for f in chunk.records.iter().filter(|f| f.record.offset >= self.end) {
                bytes += stream_bytes(f);
                self.last_timestamp = Some(f.record.timestamp);
            }
            // Records past `log_end` are counted too: the log has grown.
            self.push(chunk.next.max(self.end + 1), bytes);
        }
        Ok(())
    }

    /// Counts records this mount appended itself, at `first` and after,
    /// with values of `sizes` bytes, without fetching them: only when they
    /// follow what is counted directly (else the next count fetches them).
    pub fn count_own(
        &mut self,
        first: i64,
        sizes: impl ExactSizeIterator<Item = usize>,
        timestamp: i64,
    ) -> bool {
        if first != self.end || sizes.len() == 0 {
            return false;
        }
        let count = sizes.len() as i64;
        let bytes = sizes.map(|n| n as u64 + 1).sum();
        self.push(first + count, bytes);
        self.last_timestamp = Some(timestamp);
        true
    }

    /// Adds `[end, next)` holding `bytes` stream bytes.
    fn push(&mut self, next: i64, bytes: u64) {
        match self.spans.last_mut() {
            Some(last) if last.bytes < self.span_bytes => {
                last.next = next;
                last.bytes += bytes;
            }
            _ => self.spans.push(Span {
                first: self.end,
                next,
                start: self.end_pos,
                bytes,
            }),
        }
        self.end = next;
        self.end_pos += bytes;
        if self.spans.len() > MAX_SPANS {
            self.merge();
        }
    }

    /// Halves the span count: each pair becomes one.
    fn merge(&mut self) {
        let merged = self
            .spans
            .chunks(2)
            .map(|pair| {
                let mut s = pair[0];
                if let Some(b) = pair.get(1) {
                    s.next = b.next;
                    s.bytes += b.bytes;
                }
                s
            })
            .collect();
        self.spans = merged;
        self.span_bytes *= 2;
    }

    /// Takes a new log start: its absolute position is found by counting
    /// the records of its span before it, and spans wholly below it go.
    fn move_start(&mut self, log_start: i64, chunks: Chunks) -> BackendResult<()> {
        if log_start <= self.start.0 {
            return Ok(());
        }
        let log_start = log_start.min(self.end);
        let i = self.spans.partition_point(|s| s.next <= log_start);
        self.spans.drain(..i);
        let pos = match self.spans.first() {
            None => self.end_pos,
            Some(s) => {
                let mut pos = s.start;
                let mut at = s.first;
                while at < log_start {
                    let chunk = chunks(at)?;
                    if chunk.records.is_empty() {
                        break;
                    }
                    for f in chunk.records.iter() {
                        if f.record.offset >= at && f.record.offset < log_start {
                            pos += stream_bytes(f);
                        }
                    }
                    at = chunk.next;
                }
                pos
            }
        };
        self.start = (log_start, pos);
        self.cursor = None;
        Ok(())
    }

    /// Copies stream bytes at `pos` (from the log start) into `buf`, within
    /// what is counted; returns how many.
    pub fn read(&mut self, pos: u64, buf: &mut [u8], chunks: Chunks) -> BackendResult<usize> {
        let mut abs = self.start.1 + pos;
        if abs >= self.end_pos || buf.is_empty() {
            return Ok(0);
        }
        let (mut at, mut rec_start) = self.seek(abs);
        let mut got = 0;
        while got < buf.len() && abs < self.end_pos {
            let chunk = chunks(at)?;
            if chunk.records.is_empty() {
                break;
            }
            for f in chunk.records.iter().filter(|f| f.record.offset >= at) {
                let len = stream_bytes(f);
                if rec_start + len <= abs {
                    rec_start += len;
                    continue;
                }
                let value = f.record.value.as_deref().unwrap_or_default();
                let mut from = (abs - rec_start) as usize;
                while from < len as usize && got < buf.len() {
                    let n = if from < value.len() {
                        let n = (value.len() - from).min(buf.len() - got);
                        buf[got..got + n].copy_from_slice(&value[from..from + n]);
                        n
                    } else {
                        buf[got] = b'\n';
                        1
                    };
                    got += n;
                    from += n;
                    abs += n as u64;
                }
                if from < len as usize {
                    // The buffer is full inside this record: resume here.
                    self.cursor = Some((f.record.offset, rec_start));
                    return Ok(got);
                }
                rec_start += len;
            }
            at = chunk.next;
            self.cursor = Some((at, rec_start));
        }
        Ok(got)
    }

    /// The record to start walking from for absolute position `abs`: the
    /// last read's stopping place when it is on the way, else the start of
    /// the span holding `abs`.
    fn seek(&self, abs: u64) -> (i64, u64) {
        let i = self.spans.partition_point(|s| s.end() <= abs);
        let span = self.spans[i.min(self.spans.len() - 1)];
        match self.cursor {
            Some((o, p)) if p <= abs && p >= span.start && o >= span.first => (o, p),
            _ => (span.first, span.start),
        }
    }
}

/// A record's bytes in the stream: its value and a newline.
fn stream_bytes(f: &super::fetch::Fetched) -> u64 {
    f.record.value.as_ref().map_or(0, Vec::len) as u64 + 1
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::time::Duration;

    use super::*;
    use crate::fetch::Fetched;
    use commitfs_record::{Record, TimestampType};

    /// A log of `n` records with values `v<i>` (i printed in full), offsets
    /// `0..n`, served 7 records per chunk; `marker` holds no record.
    fn log(n: i64, marker: i64) -> impl Fn(i64) -> BackendResult<Arc<Chunk>> {
        move |at| {
            let next = (at + 7).min(n);
            let records: Vec<Fetched> = (at..next)
                .filter(|o| *o != marker)
                .map(|o| Fetched {
                    record: Record {
                        offset: o,
                        timestamp: o,
                        attributes: 0,
                        key: None,
                        value: Some(format!("v{o}").into_bytes()),
                        headers: Vec::new(),
                        sequence: -1,
                        size_in_bytes: 0,
                    },
                    timestamp_type: TimestampType::CreateTime,
                })
                .collect();
            Ok(Arc::new(Chunk {
                first: at,
                next: if records.is_empty() { at } else { next },
                records,
                bytes: 0,
            }))
        }
    }

    fn text(from: i64, n: i64, marker: i64) -> Vec<u8> {
        (from..n)
            .filter(|o| *o != marker)
            .flat_map(|o| format!("v{o}\n").into_bytes())
            .collect()
    }

    fn far() -> Instant {
        Instant::now() + Duration::from_secs(60)
    }

    #[test]
    fn length_and_reads_match_the_stream_through_merges_and_a_moved_start() {
        let n = 5000;
        let chunks = log(n, 1234);
        let mut ix = StreamIndex::new(0);
        ix.span_bytes = 16;
        let want = text(0, n, 1234);
        assert_eq!(
            ix.len(0, n, &chunks, far()).unwrap(),
            Counted::Len(want.len() as u64)
        );
        assert!(ix.spans() <= MAX_SPANS, "{}", ix.spans());
        // Reads of odd sizes, sequential and at random places.
        let mut got = Vec::new();
        let mut buf = [0u8; 13];
        loop {
            let k = ix.read(got.len() as u64, &mut buf, &chunks).unwrap();
            if k == 0 {
                break;
            }
            got.extend_from_slice(&buf[..k]);
        }
        assert_eq!(got, want);
        for pos in [0usize, 1, 77, 4000, want.len() - 3] {
            let k = ix.read(pos as u64, &mut buf, &chunks).unwrap();
            assert_eq!(
                &buf[..k],
                &want[pos..(pos + 13).min(want.len())],
                "at {pos}"
            );
        }
        // The log start moves: positions count from it.
        let want = text(1000, n, 1234);
        assert_eq!(
            ix.len(1000, n, &chunks, far()).unwrap(),
            Counted::Len(want.len() as u64)
        );
        let k = ix.read(0, &mut buf, &chunks).unwrap();
        assert_eq!(&buf[..k], &want[..13]);
    }

    #[test]
    fn a_start_moved_past_deleted_records_counts_afresh() {
        let n = 100;
        let inner = log(n, -1);
        let gone = std::cell::Cell::new(0);
        let chunks = |at| {
            if at < gone.get() {
                return Err(BackendError::new(
                    ErrorKind::OffsetOutOfRange {
                        offset: at,
                        log_start: gone.get(),
                        log_end: n,
                    },
                    "deleted",
                ));
            }
            inner(at)
        };
        let mut ix = StreamIndex::new(0);
        assert_eq!(
            ix.len(0, n, &chunks, far()).unwrap(),
            Counted::Len(text(0, n, -1).len() as u64)
        );
        gone.set(50);
        let want = text(50, n, -1);
        assert_eq!(
            ix.len(50, n, &chunks, far()).unwrap(),
            Counted::Len(want.len() as u64)
        );
        let mut buf = [0u8; 8];
        let k = ix.read(0, &mut buf, &chunks).unwrap();
        assert_eq!(&buf[..k], &want[..8]);
    }

    #[test]
    fn counting_stops_at_the_deadline_and_resumes() {
        let fetches = Cell::new(0);
        let inner = log(100, -1);
        let chunks = |at| {
            fetches.set(fetches.get() + 1);
            inner(at)
        };
        let mut ix = StreamIndex::new(0);
        let e = ix.len(0, 100, &chunks, Instant::now()).unwrap_err();
        assert_eq!(e.kind, ErrorKind::TimedOut);
        assert_eq!(
            ix.len(0, 100, &chunks, far()).unwrap(),
            Counted::Len(text(0, 100, -1).len() as u64)
        );
        let before = fetches.get();
        ix.len(0, 100, &chunks, far()).unwrap();
        assert_eq!(fetches.get(), before, "a counted log costs no fetch");
    }

    #[test]
    fn own_appends_are_counted_without_a_fetch_only_when_they_follow() {
        let fetches = Cell::new(0);
        // The log holds 90 records until this mount appends ten more.
        let (short, long) = (log(90, -1), log(100, -1));
        let grown = Cell::new(false);
        let chunks = |at| {
            fetches.set(fetches.get() + 1);
            if grown.get() { long(at) } else { short(at) }
        };
        let mut ix = StreamIndex::new(0);
        ix.len(0, 90, &chunks, far()).unwrap();
        grown.set(true);
        let before = fetches.get();
        // Records 90..=99 are "v90".."v99": 3 bytes each.
        assert!(!ix.count_own(91, [3usize; 9].into_iter(), 7), "a gap");
        assert!(ix.count_own(90, [3usize; 10].into_iter(), 7));
        assert_eq!(ix.last_timestamp, Some(7));
        let want = text(0, 100, -1);
        assert_eq!(
            ix.len(0, 100, &chunks, far()).unwrap(),
            Counted::Len(want.len() as u64)
        );
        assert_eq!(fetches.get(), before, "counted from what was sent");
        let mut buf = [0u8; 8];
        let k = ix.read(want.len() as u64 - 8, &mut buf, &chunks).unwrap();
        assert_eq!(&buf[..k], &want[want.len() - 8..]);
    }
}
