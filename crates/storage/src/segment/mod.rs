//! One segment: a `.log` of RecordBatches plus its `.index` and `.timeindex`
//! (Kafka's `LogSegment`).
//!
//! The `.log` is written with `pwrite` through the page cache. Readers see only
//! bytes below the published `size`, so they never see a half-written batch.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use log::{error, warn};
use parking_lot::Mutex;

use super::batch_reader::BatchReader;
use super::disk;
use super::error::{IoContext, Result, StorageError};
use super::health::Health;
use super::index::{OffsetIndex, TimeIndex, TransactionIndex};
use super::names::segment_file_name;
use commitfs_record::BatchHeader;

mod follow_active;
mod lazy_index;
mod scan;

pub(crate) use follow_active::Tail;
pub(crate) use lazy_index::Indexes;
use lazy_index::LazyIndex;
pub(crate) use scan::Located;
pub use scan::ReadBatch;

/// A size not learned yet (see [`LogSegment::size`]).
const UNKNOWN_SIZE: u64 = u64::MAX;

/// Bytes read at a time when recovering a whole segment.
const RECOVERY_CHUNK: usize = 8 * 1024 * 1024;

/// The next [`LogSegment::id`].
static NEXT_SEGMENT_ID: AtomicU64 = AtomicU64::new(1);

/// Index sizing for one segment, from the partition's config.
#[derive(Clone, Copy, Debug)]
pub struct IndexSettings {
    pub offset_index_max_bytes: u64,
    pub time_index_max_bytes: u64,
    pub index_interval_bytes: u64,
}

/// State only the appender touches (under the log's writer lock).
#[derive(Clone, Copy, Debug, Default)]
struct AppendState {
    bytes_since_last_index_entry: u64,
    /// (max timestamp so far, offset of that batch's last record); -1 = unknown.
    max_timestamp: i64,
    offset_of_max_timestamp: i64,
    /// The first batch's max timestamp, which `segment.ms` counts from.
    rolling_based_timestamp: Option<i64>,
    /// Whether `max_timestamp` is known (sealed segments load it lazily).
    timestamps_known: bool,
}

/// A segment's append position and index state, to undo an append that failed.
#[derive(Clone, Copy, Debug)]
pub struct SegmentSnapshot {
    write_pos: u64,
    offset_entries: usize,
    time_entries: usize,
    txn_entries: usize,
    state: AppendState,
    active: bool,
}

impl AppendState {
    /// The counters of indexes rebuilt from the `.log`, before its first batch.
    fn rebuilt(base_offset: i64) -> Self {
        AppendState {
            max_timestamp: -1,
            offset_of_max_timestamp: base_offset,
            timestamps_known: true,
            ..Default::default()
        }
    }
}

/// What recovering a segment found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecoveryResult {
    /// Batches kept.
    pub batches: u64,
    /// Bytes cut from the end of the `.log`.
    pub truncated_bytes: u64,
    /// The offset after the last kept batch.
    pub next_offset: Option<i64>,
}

pub struct LogSegment {
    pub base_offset: i64,
    /// Unique to this segment in this process: what is learned of a
    /// segment (its stream length, say) is kept against its identity, not
    /// its base, since a cleaned segment swapped in takes the base of the
    /// one it replaces, as does a segment a read-only mount opens again.
    id: u64,
    log_path: PathBuf,
    /// Opened on first use: a clean mount of many segments opens none of them.
    log: OnceLock<File>,
    /// The inode number of `log`, learned at the first ask once it is open
    /// (saved stream lengths name the file they were counted on).
    log_ino: OnceLock<u64>,
    /// Published size: every byte below it belongs to a whole, indexed batch.
    size: AtomicU64,
    /// Bytes written, published or not. Only the appender (under the
    /// log's writer lock) moves it; an append publishes at its end.
    write_pos: AtomicU64,
    /// Bytes that have been fsynced.
    flushed_size: AtomicU64,
    indexes: LazyIndex,
    /// The `.txnindex`, made at its first entry.
    txn_index: TransactionIndex,
    state: Mutex<AppendState>,
    settings: IndexSettings,
    writable: bool,
    active: AtomicBool,
    /// The partition's: an index rebuilt on a read path may fail it.
    health: Arc<Health>,
    /// Every batch below the published size had its CRC checked by this
    /// process: the segment was created here (each batch was encoded here
    /// or validated before it was written) or recovered here. A lookup then
    /// does not check a batch's CRC again, as Kafka's fetch path does not:
    /// the bytes it reads are the ones that were checked (see
    /// [`LogSegment::read_batch_section`]).
    crc_checked: AtomicBool,
}

impl LogSegment {
    pub fn log_path(dir: &Path, base_offset: i64) -> PathBuf {
        dir.join(segment_file_name(base_offset, "log"))
    }
    // The sibling files share the `.log`'s name but for the suffix.
    pub fn index_path(&self) -> PathBuf {
        self.log_path.with_extension("index")
    }
    pub fn time_index_path(&self) -> PathBuf {
        self.log_path.with_extension("timeindex")
    }
    pub fn path(&self) -> &Path {
        &self.log_path
    }
    /// This segment's identity in this process (see the field).
    pub fn id(&self) -> u64 {
        self.id
    }
    pub(crate) fn txn_index(&self) -> &TransactionIndex {
        &self.txn_index
    }

    /// Creates a new, empty, active segment with its (sparse) indexes.
    pub(crate) fn create(
        dir: &Path,
        base_offset: i64,
        settings: IndexSettings,
        health: Arc<Health>,
    ) -> Result<LogSegment> {
        let log_path = Self::log_path(dir, base_offset);
        let log = disk::create_file("segment.create", &log_path).at(&log_path)?;
        let mut seg =
            LogSegment::from_parts(log_path, base_offset, Some(log), 0, settings, true, health);
        let created = (|| {
            let offset = OffsetIndex::create(
                &seg.index_path(),
                base_offset,
                settings.offset_index_max_bytes,
            )?;
            let time = TimeIndex::create(
                &seg.time_index_path(),
                base_offset,
                settings.time_index_max_bytes,
            )?;
            Ok::<_, StorageError>(Indexes { offset, time })
        })();
        match created {
            Ok(ix) => {
                seg.indexes.set(ix);
                seg.state.get_mut().timestamps_known = true;
                seg.active.store(true, Ordering::Relaxed);
                seg.crc_checked.store(true, Ordering::Relaxed);
                Ok(seg)
            }
            Err(e) => {
                // A roll that cannot create its files leaves nothing behind;
                // if it cannot even remove them, that is the failure.
                seg.delete_files()?;
                Err(e)
            }
        }
    }

    /// An existing segment. Its size is learned, its files opened and its
    /// indexes loaded on first use, so loading many sealed segments costs
    /// no system call for each.
    /// `log_path` is the segment's `.log`, as the directory listing named it.
    pub(crate) fn open(
        log_path: PathBuf,
        base_offset: i64,
        settings: IndexSettings,
        writable: bool,
        health: Arc<Health>,
    ) -> LogSegment {
        LogSegment::from_parts(
            log_path,
            base_offset,
            None,
            UNKNOWN_SIZE,
            settings,
            writable,
            health,
        )
    }

    fn from_parts(
        log_path: PathBuf,
        base_offset: i64,
        log: Option<File>,
        size: u64,
        settings: IndexSettings,
        writable: bool,
        health: Arc<Health>,
    ) -> Self {
        LogSegment {
            base_offset,
            id: NEXT_SEGMENT_ID.fetch_add(1, Ordering::Relaxed),
            txn_index: TransactionIndex::new(&log_path, writable),
            log_path,
            log: log.map(OnceLock::from).unwrap_or_default(),
            log_ino: OnceLock::new(),
            size: AtomicU64::new(size),
            write_pos: AtomicU64::new(size),
            flushed_size: AtomicU64::new(size),
            indexes: LazyIndex::default(),
            state: Mutex::new(AppendState {
                max_timestamp: -1,
                offset_of_max_timestamp: base_offset,
                ..Default::default()
            }),
            settings,
            writable,
            active: AtomicBool::new(false),
            health,
            crc_checked: AtomicBool::new(false),
        }
    }

    /// The published size, learned from the file on first use. A failed
    /// stat is an error, never an empty segment: an active segment taken as
    /// empty would be written over from position 0.
    pub fn size(&self) -> Result<u64> {
        let size = self.size.load(Ordering::Acquire);
        if size != UNKNOWN_SIZE {
            return Ok(size);
        }
        // A segment loaded without a stat: its file has not changed since.
        let size = disk::metadata("segment.size.stat", &self.log_path)
            .at(&self.log_path)?
            .len();
        for a in [&self.write_pos, &self.flushed_size, &self.size] {
            let _ = a.compare_exchange(UNKNOWN_SIZE, size, Ordering::AcqRel, Ordering::Acquire);
        }
        Ok(self.size.load(Ordering::Acquire))
    }

    /// The published size if it is known, without touching the file.
    pub fn known_size(&self) -> Option<u64> {
        let size = self.size.load(Ordering::Acquire);
        (size != UNKNOWN_SIZE).then_some(size)
    }

    /// Bytes written so far, including an append's not yet published batches.
    pub fn write_pos(&self) -> Result<u64> {
        let pos = self.write_pos.load(Ordering::Acquire);
        if pos != UNKNOWN_SIZE {
            return Ok(pos);
        }
        self.size()?;
        Ok(self.write_pos.load(Ordering::Acquire))
    }

    /// Makes everything written so far visible to readers. Only for a
    /// segment that was appended to, whose write position is known.
    pub fn publish(&self) {
        let pos = self.write_pos.load(Ordering::Acquire);
        if pos != UNKNOWN_SIZE {
            self.size.store(pos, Ordering::Release);
        }
    }

    /// The `.log` file, opened on first use.
    pub fn log_file(&self) -> Result<&File> {
        if let Some(f) = self.log.get() {
            return Ok(f);
        }
        let f = if self.writable {
            OpenOptions::new()
                .read(true)
                .write(true)
                .open(&self.log_path)
        } else {
            File::open(&self.log_path)
        }
        .at(&self.log_path)?;
        // Another thread may have won the race; either descriptor will do.
        Ok(self.log.get_or_init(|| f))
    }

    pub fn is_active(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }

    /// Prepares a segment loaded from disk to take appends: grows its
    /// indexes to their full length again and restores the append counters
    /// (Kafka's `resizeIndexes` on the active segment).
    pub fn activate(&self) -> Result<()> {
        self.active.store(true, Ordering::Relaxed);
        let size = self.size()?;
        let mut ix = self.indexes_mut()?;
        ix.resize_indexes(&self.settings)?;
        let indexed = ix.offset.last_entry().map_or(0, |e| e.position as u64);
        self.state.lock().bytes_since_last_index_entry = size.saturating_sub(indexed);
        drop(ix);
        let first = self.first_batch_header()?;
        self.state.lock().rolling_based_timestamp = first.map(|h| h.max_timestamp);
        Ok(())
    }

    // ---- appends -------------------------------------------------------------

    /// Kafka's `shouldRoll`, minus the size test which the caller knows best.
    pub fn should_roll(
        &self,
        batch_size: u64,
        max_timestamp: i64,
        segment_bytes: u64,
        segment_ms: i64,
    ) -> Result<bool> {
        let size = self.write_pos()?;
        if size + batch_size > segment_bytes {
            return Ok(true);
        }
        {
            let ix = self.indexes()?;
            if ix.offset.is_full() || ix.time.is_full() {
                return Ok(true);
            }
        }
        let st = self.state.lock();
        if size > 0
            && let Some(first) = st.rolling_based_timestamp
            && max_timestamp.saturating_sub(first) > segment_ms
        {
            return Ok(true);
        }
        Ok(false)
    }

    /// Whether `last_offset` still fits a relative offset: Kafka's indexes
    /// read it as a Java int (`AbstractIndex.toRelative`).
    pub fn can_convert_to_relative(&self, last_offset: i64) -> bool {
        let rel = last_offset - self.base_offset;
        (0..=i32::MAX as i64).contains(&rel)
    }

    /// Appends one encoded batch, unpublished, indexed by `header`, the
    /// header its appender parsed or encoded (the caller vouches that it is
    /// the batch's). On a failed write the file is cut back, so no partial
    /// batch stays in the `.log`; if even that fails, its error is the one
    /// returned (a failure, never a refusal).
    pub fn append(&self, batch: &[u8], header: &BatchHeader) -> Result<()> {
        debug_assert_eq!(header.size(), batch.len());
        let pos = self.write_pos()?;
        // Blocks for the index entry this batch may add, and for the time
        // index's final entry at the roll, before a byte is written: a
        // full disk refuses the append here, with nothing to undo, and
        // never reaches a store into the mapping (SIGBUS).
        {
            let mut ix = self.indexes_mut()?;
            ix.offset.allocate_ahead(1)?;
            ix.time.allocate_ahead(2)?;
        }
        let file = self.log_file()?;
        if let Err(e) = disk::write_all_at("segment.append.write", file, batch, pos) {
            if let Err(t) = disk::set_len("segment.append.cut_back", file, pos) {
                error!(
                    "Could not cut {} back to {pos} after a failed write ({e}): {t}",
                    self.log_path.display()
                );
                return Err(StorageError::io(&self.log_path, t));
            }
            return Err(StorageError::io(&self.log_path, e));
        }
        let mut ix = self.indexes_mut()?;
        let mut st = self.state.lock();
        if st.rolling_based_timestamp.is_none() {
            st.rolling_based_timestamp = Some(header.max_timestamp);
        }
        // The write position moves first: whatever happens to the index
        // entry, the bytes are there to be undone or published.
        self.write_pos
            .store(pos + batch.len() as u64, Ordering::Release);
        // Not published yet: entries past the published size are never chosen
        // by a lookup, whose offsets are all below the published log end.
        index_batch(
            &mut ix,
            &mut st,
            self.settings.index_interval_bytes,
            pos,
            header,
        )
    }

    /// What an append may have to undo.
    pub fn snapshot(&self) -> Result<SegmentSnapshot> {
        let write_pos = self.write_pos()?;
        let ix = self.indexes()?;
        Ok(SegmentSnapshot {
            write_pos,
            offset_entries: ix.offset.entries(),
            time_entries: ix.time.entries(),
            txn_entries: self.txn_index.len()?,
            state: *self.state.lock(),
            active: self.is_active(),
        })
    }

    /// Undoes unpublished appends (and a seal) back to `snap`: the `.log` is
    /// cut, index entries past it removed, the append counters restored.
    pub fn rollback(&self, snap: &SegmentSnapshot) -> Result<()> {
        let f = self.log_file()?;
        if f.metadata().at(&self.log_path)?.len() > snap.write_pos {
            disk::set_len("segment.rollback.truncate", f, snap.write_pos).at(&self.log_path)?;
        }
        self.write_pos.store(snap.write_pos, Ordering::Release);
        let mut ix = self.indexes_mut()?;
        if snap.active && !self.is_active() {
            self.active.store(true, Ordering::Relaxed);
            ix.resize_indexes(&self.settings)?;
        }
        ix.offset.truncate_entries(snap.offset_entries);
        ix.time.truncate_entries(snap.time_entries);
        self.txn_index.rollback(snap.txn_entries)?;
        *self.state.lock() = snap.state;
        Ok(())
    }

    /// Makes the segment inactive: final time index entry, trimmed indexes.
    pub fn seal(&self) -> Result<()> {
        if !self.active.swap(false, Ordering::Relaxed) {
            return Ok(());
        }
        let mut g = self.indexes.write();
        if let Some(ix) = g.as_mut() {
            let st = *self.state.lock();
            if st.max_timestamp >= 0
                && let Err(e) =
                    ix.time
                        .maybe_append(st.max_timestamp, st.offset_of_max_timestamp, true)
            {
                // Nothing changed yet (a full disk at the entry's blocks,
                // for an index opened from disk): the segment stays active.
                self.active.store(true, Ordering::Relaxed);
                return Err(e);
            }
            if self.writable {
                ix.offset.trim()?;
                ix.time.trim()?;
                ix.offset.flush()?;
                ix.time.flush()?;
            }
        }
        Ok(())
    }

    /// Drops the index maps and their descriptors; they load again on first
    /// use. A long-lived log that rolls often would otherwise keep two more
    /// descriptors and two maps per sealed segment.
    pub fn unload_indexes(&self) {
        if self.writable && !self.is_active() {
            self.indexes.unload();
        }
    }

    /// fsync of the `.log` and msync of the indexes, of everything written,
    /// published or not (an append due a flush syncs before it publishes).
    pub fn flush(&self) -> Result<bool> {
        let written = self.write_pos.load(Ordering::Acquire);
        if written == UNKNOWN_SIZE {
            // Never touched since a load that found it on disk: nothing to sync.
            return Ok(false);
        }
        if self.flushed_size.load(Ordering::Acquire) == written && !self.is_active() {
            return Ok(false);
        }
        disk::sync_data("segment.flush.fdatasync", self.log_file()?).synced(&self.log_path)?;
        if let Some(ix) = self.indexes.loaded().as_ref() {
            ix.offset.flush()?;
            ix.time.flush()?;
        }
        self.txn_index.flush()?;
        self.flushed_size.store(written, Ordering::Release);
        Ok(true)
    }

    // ---- recovery --------------------------------------------------------------

    /// Kafka's `LogSegment.recover`: validates every batch (framing, CRC,
    /// offsets), cuts the `.log` at the first bad or torn one and rebuilds both
    /// indexes from what remains. `before_cut` runs before the cut (the loader
    /// deletes the later segments there), so a recovery that fails part way
    /// finds the same damage again at the next load.
    pub fn recover(
        &self,
        min_offset: i64,
        before_cut: impl FnOnce() -> Result<()>,
    ) -> Result<RecoveryResult> {
        self.recover_now(min_offset, before_cut)
            .inspect_err(|_| self.discard_index_files())
    }

    fn recover_now(
        &self,
        min_offset: i64,
        before_cut: impl FnOnce() -> Result<()>,
    ) -> Result<RecoveryResult> {
        let log = self.log_file()?;
        let file_size = log.metadata().at(&self.log_path)?.len();
        // One pass: each batch is validated and indexed as it is read. The old
        // maps go first, since the index files are recreated under them.
        let mut guard = self.indexes.write();
        *guard = None;
        let mut ix = self.fresh_indexes()?;
        let mut st = AppendState::rebuilt(self.base_offset);
        let interval = self.settings.index_interval_bytes;
        let mut valid: u64 = 0;
        let mut expected_min = min_offset.max(self.base_offset);
        let mut batches = 0u64;
        let mut next_offset = None;
        let mut first_max_timestamp = None;
        let mut walk = BatchReader::new(log, &self.log_path, 0, file_size, RECOVERY_CHUNK);
        // The first bad or torn batch ends what is kept, whatever is wrong with it.
        walk.for_each_batch(|pos, batch| {
            let h = &batch.header;
            if batch.verify_crc().is_err()
                || h.base_offset < expected_min
                || !self.can_convert_to_relative(h.last_offset())
            {
                return Ok(false);
            }
            reindex_batch(&mut ix, &mut st, (interval, pos), h)?;
            first_max_timestamp.get_or_insert(h.max_timestamp);
            expected_min = h.next_offset();
            next_offset = Some(h.next_offset());
            batches += 1;
            valid = pos + batch.size() as u64;
            Ok(true)
        })?;
        let truncated = file_size - valid;
        if truncated > 0 {
            if self.writable {
                before_cut()?;
                disk::set_len("segment.recover.truncate", self.log_file()?, valid)
                    .at(&self.log_path)?;
            } else {
                // Never write a read-only data dir: the bad tail is just not served.
                warn!(
                    "Ignoring {truncated} invalid bytes at the end of {} (read-only, not truncated)",
                    self.log_path.display()
                );
            }
        }
        self.size.store(valid, Ordering::Release);
        self.write_pos.store(valid, Ordering::Release);
        self.flushed_size.store(0, Ordering::Release);
        self.seal_and_install(&mut ix, &st)?;
        // What is kept is exactly what was checked (for a read-only data
        // dir, up to the published size; the bad tail is not served).
        self.crc_checked.store(true, Ordering::Relaxed);
        st.rolling_based_timestamp = first_max_timestamp;
        *self.state.lock() = st;
        *guard = Some(ix);
        Ok(RecoveryResult {
            batches,
            truncated_bytes: truncated,
            next_offset,
        })
    }

    /// Marks the segment active before recovery, so its rebuilt indexes keep
    /// their full length.
    pub fn mark_active(&self) {
        self.active.store(true, Ordering::Relaxed);
    }

    /// Removes the segment's files (readers holding the segment keep their
    /// open descriptor). Files already gone are no error.
    pub fn delete_files(&self) -> Result<()> {
        if !self.writable {
            return Ok(()); // a read-only data dir only drops the segment from view
        }
        // The producer snapshot at the segment's base goes with it, as Kafka's
        // `deleteProducerSnapshots` does.
        for p in [
            self.log_path.clone(),
            self.index_path(),
            self.time_index_path(),
            self.log_path.with_extension("snapshot"),
        ] {
            match disk::remove_file("segment.delete.remove", &p) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(StorageError::io(&p, e));
                }
                _ => {}
            }
        }
        let txn = self.txn_index.path();
        match disk::remove_file("segment.delete.remove_txnindex", txn) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(StorageError::io(txn, e)),
            _ => Ok(()),
        }
    }
}

/// Kafka's per-batch index rule (`LogSegment.append` and `recover`):
/// index the batch (its last offset, its start position) only when more than
/// `index.interval.bytes` have gone by since the last entry, then count its bytes.
/// An append finds room (a full index rolls first); a rebuild makes room.
fn index_batch(
    ix: &mut Indexes,
    st: &mut AppendState,
    interval: u64,
    pos: u64,
    h: &BatchHeader,
) -> Result<()> {
    if h.max_timestamp > st.max_timestamp {
        st.max_timestamp = h.max_timestamp;
        st.offset_of_max_timestamp = h.last_offset();
    }
    if st.bytes_since_last_index_entry > interval {
        ix.offset.append(h.last_offset(), pos as u32)?;
        ix.time
            .maybe_append(st.max_timestamp, st.offset_of_max_timestamp, false)?;
        st.bytes_since_last_index_entry = 0;
    }
    st.bytes_since_last_index_entry += h.size() as u64;
    Ok(())
}

/// [`index_batch`] for a rebuild from the `.log`: the indexes grow past
/// `segment.index.bytes` where the segment was written under a larger one
/// (Kafka throws here; a rebuild must reproduce what is there).
fn reindex_batch(
    ix: &mut Indexes,
    st: &mut AppendState,
    at: (u64, u64),
    h: &BatchHeader,
) -> Result<()> {
    let (interval, pos) = at;
    ix.offset.make_room()?;
    ix.time.make_room()?;
    index_batch(ix, st, interval, pos, h)
}
