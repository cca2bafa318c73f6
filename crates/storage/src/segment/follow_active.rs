//! A segment another process is writing (a running broker), seen through a
//! read-only mount. Its published size is re-learned from the file: only
//! whole batches that frame, carry a good CRC and follow the offsets before
//! them are published, so a batch the writer is still copying is never
//! shown. The writer's own index lags its `.log` (Kafka writes the log
//! first), so it is never read here: the segment indexes what it validated
//! with Kafka's rule, in memory.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use log::debug;

use super::{AppendState, IndexSettings, Indexes, LogSegment, index_batch};
use crate::batch_reader::{BatchReader, Stop};
use crate::error::{IoContext, Result};
use crate::health::Health;
use crate::index::{OffsetIndex, TimeIndex};

/// Bytes read at a time when catching up with a writer.
const FOLLOW_CHUNK: usize = 256 * 1024;

/// What a look at the segment's file found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tail {
    /// Nothing new that is whole and valid.
    Same,
    /// Batches were published; the offset after the last one.
    Grew(i64),
    /// The file is shorter than what was published: it was cut underneath
    /// (a follower truncating its log), and the segment must be read again.
    Shrank,
}

impl LogSegment {
    /// A segment first seen as the active one of a log another process
    /// writes: nothing published yet, indexes built in memory as it grows.
    pub(crate) fn followed(
        log_path: PathBuf,
        base_offset: i64,
        settings: IndexSettings,
        health: Arc<Health>,
    ) -> Self {
        let mut seg =
            LogSegment::from_parts(log_path, base_offset, None, 0, settings, false, health);
        let path = seg.index_path();
        let time_path = seg.time_index_path();
        let offset = OffsetIndex::in_memory(&path, base_offset, settings.offset_index_max_bytes);
        let time = TimeIndex::in_memory(&time_path, base_offset, settings.time_index_max_bytes);
        // An index that cannot be had in memory is loaded (rebuilt) on first use.
        if let (Ok(offset), Ok(time)) = (offset, time) {
            seg.indexes.set(Indexes { offset, time });
        }
        *seg.state.get_mut() = AppendState::rebuilt(base_offset);
        seg.active.store(true, Ordering::Relaxed);
        seg
    }

    /// Publishes the whole, valid batches between the published size and
    /// `file_len` (the file's length now). `next_offset` is the offset the
    /// next batch must not start below. Stops at the first batch that is
    /// torn or does not check: a later look tries it again.
    pub(crate) fn follow_tail(&self, file_len: u64, next_offset: i64) -> Result<Tail> {
        let published = self.size()?;
        if file_len < published {
            return Ok(Tail::Shrank);
        }
        if file_len == published {
            return Ok(Tail::Same);
        }
        drop(self.indexes()?);
        let mut guard = self.indexes.write();
        let mut st = *self.state.lock();
        let interval = self.settings.index_interval_bytes;
        let mut end = published;
        let mut next = next_offset.max(self.base_offset);
        let log = self.log_file()?;
        let mut walk = BatchReader::new(log, &self.log_path, published, file_len, FOLLOW_CHUNK);
        let stop = walk.for_each_batch(|pos, batch| {
            let h = &batch.header;
            if batch.verify_crc().is_err()
                || h.base_offset < next
                || !self.can_convert_to_relative(h.last_offset())
            {
                return Ok(false);
            }
            // A batch the in-memory index has no room for is still
            // published; lookups in it walk from the last entry.
            if let Some(ix) = guard.as_mut()
                && let Err(e) = index_batch(ix, &mut st, interval, pos, h)
            {
                debug!("{}: not indexed at {pos}: {e}", self.log_path.display());
            }
            next = h.next_offset();
            end = pos + batch.size() as u64;
            Ok(true)
        })?;
        if let Some(Stop::Invalid { position, error }) | Some(Stop::Unframed { position, error }) =
            &stop
        {
            debug!(
                "{} at {position}: {error}; not published (a write in progress, or damage)",
                self.log_path.display()
            );
        }
        if end == published {
            return Ok(Tail::Same);
        }
        *self.state.lock() = st;
        drop(guard);
        self.write_pos.store(end, Ordering::Release);
        self.size.store(end, Ordering::Release);
        Ok(Tail::Grew(next))
    }

    /// The writer rolled past this segment: it is sealed, and the indexes
    /// built while following it are dropped. The writer trimmed its own
    /// before it created the next segment, so they load from the files on
    /// first use, as any sealed segment's do, and no sealed segment keeps a
    /// preallocated map.
    pub(crate) fn seal_followed(&self) -> Result<()> {
        self.seal()?;
        self.indexes.unload();
        Ok(())
    }

    /// The inode number of the `.log` this segment holds open, if it has
    /// opened it: the file it reads, whatever the name now holds.
    pub(crate) fn open_ino(&self) -> Option<u64> {
        use std::os::unix::fs::MetadataExt;
        if let Some(ino) = self.log_ino.get() {
            return Some(*ino);
        }
        let ino = self.log.get()?.metadata().ok()?.ino();
        Some(*self.log_ino.get_or_init(|| ino))
    }

    /// The inode number of the `.log` this segment reads: the file it holds
    /// open, or, before it opens one, the file its name holds now (the one
    /// it will open). A length saved against another file of the same size
    /// (a cleaned segment that took the base) is not this one's.
    pub(crate) fn file_ino(&self) -> Result<Option<u64>> {
        match self.open_ino() {
            Some(ino) => Ok(Some(ino)),
            None => Ok(self.stat_name()?.map(|(_, ino)| ino)),
        }
    }

    /// The `.log`'s length and inode number, through the name: a file
    /// renamed away or replaced is not the one this segment holds open.
    pub(crate) fn stat_name(&self) -> Result<Option<(u64, u64)>> {
        use std::os::unix::fs::MetadataExt;
        match std::fs::metadata(&self.log_path) {
            Ok(m) => Ok(Some((m.len(), m.ino()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).at(&self.log_path),
        }
    }
}
