//! Where the last reads of a partition's stream stopped, and the bytes they
//! read. `cat log` reads the stream in order, 1 MiB at a time, and a read
//! seldom ends on a batch boundary: without these, each read found its
//! batch again from the sparse map, read it from the file again and decoded
//! it again up to where the last read had stopped.

use std::sync::{Arc, Mutex, Weak};

use crate::batch_reader::ReadWindow;
use crate::segment::LogSegment;
use commitfs_record::values::ValueCursor;

/// Cursors kept per partition: one per reader going on sequentially.
const MAX_CURSORS: usize = 4;
/// Read windows kept for the whole process, whatever the partitions: the
/// bytes are the memory, so they are bounded once, not per partition.
const MAX_WINDOWS: usize = 4;
/// A window that grew past this (a huge batch) is not kept.
const MAX_WINDOW_BYTES: usize = 8 << 20;

/// Where a read stopped inside a segment.
#[derive(Clone, Debug)]
pub(super) struct Cursor {
    /// The segment, by identity: a cursor never applies to another segment
    /// of the same base (one a read-only mount re-read, say).
    segment: Weak<LogSegment>,
    /// The segment-relative stream position the read stopped at.
    pub pos: u64,
    /// File position of the batch to go on in (or the next batch).
    pub batch_pos: u64,
    /// The record to go on at in that batch, and its stream position.
    pub record: ValueCursor,
    pub record_stream_pos: u64,
}

impl Cursor {
    pub fn new(
        seg: &Arc<LogSegment>,
        pos: u64,
        batch_pos: u64,
        (record, record_stream_pos): (ValueCursor, u64),
    ) -> Cursor {
        Cursor {
            segment: Arc::downgrade(seg),
            pos,
            batch_pos,
            record,
            record_stream_pos,
        }
    }

    fn of(&self, seg: &Arc<LogSegment>) -> bool {
        std::ptr::eq(self.segment.as_ptr(), Arc::as_ptr(seg))
    }
}

/// A partition's cursors, most recently used last.
#[derive(Default)]
pub(super) struct Cursors {
    list: Vec<Cursor>,
}

impl Cursors {
    /// The cursor of a read that stopped at `pos` of `seg`, taken out.
    pub fn take(&mut self, seg: &Arc<LogSegment>, pos: u64) -> Option<Cursor> {
        let i = self.list.iter().position(|c| c.pos == pos && c.of(seg))?;
        Some(self.list.remove(i))
    }

    pub fn put(&mut self, c: Cursor) {
        if self.list.len() >= MAX_CURSORS {
            self.list.remove(0);
        }
        self.list.push(c);
    }
}

static WINDOWS: Mutex<Vec<(Weak<LogSegment>, ReadWindow)>> = Mutex::new(Vec::new());

/// A window for reading `seg`: the one holding its bytes if one is kept,
/// else a kept buffer emptied, else a new one.
pub(super) fn take_window(seg: &Arc<LogSegment>) -> ReadWindow {
    let mut w = WINDOWS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(i) = w
        .iter()
        .position(|(s, _)| std::ptr::eq(s.as_ptr(), Arc::as_ptr(seg)))
    {
        return w.remove(i).1;
    }
    if w.len() >= MAX_WINDOWS {
        return w.remove(0).1.recycled();
    }
    ReadWindow::default()
}

/// Keeps the window of `seg` for the next read, the oldest one going.
pub(super) fn put_window(seg: &Arc<LogSegment>, window: ReadWindow) {
    if window.capacity() > MAX_WINDOW_BYTES {
        return;
    }
    let mut w = WINDOWS.lock().unwrap_or_else(|e| e.into_inner());
    if w.len() >= MAX_WINDOWS {
        w.remove(0);
    }
    w.push((Arc::downgrade(seg), window));
}
