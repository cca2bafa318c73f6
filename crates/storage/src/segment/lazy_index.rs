//! Kafka's `LazyIndex`: a segment's `.index` and `.timeindex` are mapped on
//! first use, not when the partition loads, so that opening a partition of
//! many sealed segments maps none of them, and a sealed segment's maps can be
//! dropped again after a roll. Loading checks the files against the `.log`
//! and rebuilds them from it when they are missing or cannot be trusted.

use log::{error, info};
use parking_lot::{
    MappedRwLockReadGuard, MappedRwLockWriteGuard, RwLock, RwLockReadGuard, RwLockWriteGuard,
};

use super::{AppendState, IndexSettings, LogSegment, reindex_batch};
use crate::batch_reader::read_full_at;
use crate::disk;
use crate::error::{IoContext, Result};
use crate::index::{OFFSET_ENTRY, OffsetIndex, TIME_ENTRY, TimeIndex};
use commitfs_record::{BatchHeader, HEADER_LEN};

pub(crate) struct Indexes {
    pub offset: OffsetIndex,
    pub time: TimeIndex,
}

impl Indexes {
    /// Kafka's `resizeIndexes` on a segment becoming active: grown (sparse)
    /// to `segment.index.bytes`, but never below the entries it holds (a smaller
    /// setting than the one the segment was written with only makes it full,
    /// so the next append rolls), and with the time index's final slot.
    pub fn resize_indexes(&mut self, settings: &IndexSettings) -> Result<()> {
        let offset_used = (self.offset.entries() * OFFSET_ENTRY) as u64;
        let time_used = ((self.time.entries() + 1) * TIME_ENTRY) as u64;
        self.offset
            .resize(settings.offset_index_max_bytes.max(offset_used))?;
        self.time
            .resize(settings.time_index_max_bytes.max(time_used))
    }
}

/// A segment's two indexes, or nothing until they are first used.
#[derive(Default)]
pub(super) struct LazyIndex {
    slot: RwLock<Option<Indexes>>,
}

impl LazyIndex {
    /// The indexes, loaded by `load` on first use. The guard is taken from
    /// the loading one, so a concurrent unload cannot empty the slot between.
    fn get(
        &self,
        load: impl FnOnce() -> Result<Indexes>,
    ) -> Result<MappedRwLockReadGuard<'_, Indexes>> {
        let g = self.slot.read();
        if let Ok(ix) = RwLockReadGuard::try_map(g, Option::as_ref) {
            return Ok(ix);
        }
        let mut g = self.slot.write();
        if g.is_none() {
            *g = Some(load()?);
        }
        let g = RwLockWriteGuard::downgrade(g);
        RwLockReadGuard::try_map(g, Option::as_ref).map_err(|_| unloaded())
    }

    /// The indexes to change, loaded by `load` on first use.
    fn get_mut(
        &self,
        load: impl FnOnce() -> Result<Indexes>,
    ) -> Result<MappedRwLockWriteGuard<'_, Indexes>> {
        let mut g = self.slot.write();
        if g.is_none() {
            *g = Some(load()?);
        }
        RwLockWriteGuard::try_map(g, Option::as_mut).map_err(|_| unloaded())
    }

    /// The indexes as they are, loaded or not, to change them.
    pub(super) fn write(&self) -> RwLockWriteGuard<'_, Option<Indexes>> {
        self.slot.write()
    }

    /// The indexes as they are: a flush has nothing to sync in unloaded ones.
    pub(super) fn loaded(&self) -> RwLockReadGuard<'_, Option<Indexes>> {
        self.slot.read()
    }

    pub(super) fn set(&mut self, ix: Indexes) {
        *self.slot.get_mut() = Some(ix);
    }

    /// Drops the maps and their descriptors; they load again on first use.
    pub(super) fn unload(&self) {
        *self.slot.write() = None;
    }
}

/// A slot found empty just after it was filled under the same lock: cannot
/// happen, and is an error rather than a panic all the same.
fn unloaded() -> crate::error::StorageError {
    crate::error::StorageError::Io {
        path: std::path::PathBuf::new(),
        source: std::io::Error::other("index slot empty after loading"),
    }
}

/// Where an index is built before it is installed.
fn staged(path: &std::path::Path) -> std::path::PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".tmp");
    name.into()
}

impl LogSegment {
    /// The indexes, loading (and if needed rebuilding) them on first use.
    pub(crate) fn indexes(&self) -> Result<MappedRwLockReadGuard<'_, Indexes>> {
        self.indexes.get(|| self.load_indexes())
    }

    /// The indexes to change, loading them first if needed.
    pub(crate) fn indexes_mut(&self) -> Result<MappedRwLockWriteGuard<'_, Indexes>> {
        self.indexes.get_mut(|| self.load_indexes())
    }

    /// Maps the index files, checks them against the log and rebuilds them
    /// from the `.log` if they are missing or cannot be trusted.
    fn load_indexes(&self) -> Result<Indexes> {
        if !self.index_path().exists() {
            error!(
                "Could not find offset index file corresponding to log file {}, recovering segment and rebuilding index files...",
                self.log_path.display()
            );
            return self.rebuild_indexes();
        }
        match self.open_checked_indexes()? {
            Ok(ix) => {
                let last = ix.time.last_entry();
                let mut st = self.state.lock();
                if !st.timestamps_known {
                    st.max_timestamp = last.timestamp;
                    st.offset_of_max_timestamp = last.offset;
                    st.timestamps_known = true;
                }
                Ok(ix)
            }
            Err(why) => {
                error!(
                    "Found a corrupted index file corresponding to log file {} due to {why}, recovering segment and rebuilding index files...",
                    self.log_path.display()
                );
                self.rebuild_indexes()
            }
        }
    }

    /// Maps the index files and checks them against the log. `Ok(Err(why))`:
    /// they cannot be trusted and are to be rebuilt.
    fn open_checked_indexes(&self) -> Result<std::result::Result<Indexes, String>> {
        let index_path = self.index_path();
        let time_path = self.time_index_path();
        let size = self.size()?;
        let offset = OffsetIndex::open(&index_path, self.base_offset, self.writable)?;
        if let Err(why) = offset.check(size) {
            return Ok(Err(format!("offset index {}: {why}", index_path.display())));
        }
        // The log end is found by scanning from the last entry, so that
        // entry must point at a batch at or below its offset: the batch
        // ending there (an append's entry), or the first batch of the chunk
        // the log cleaner appended at once (Kafka's cleaner indexes a chunk
        // by its largest offset). Other entries are checked as lookups use them.
        if let Some(last) = offset.last_entry() {
            let mut hdr = [0u8; HEADER_LEN];
            let n =
                read_full_at(self.log_file()?, &mut hdr, last.position as u64).at(&self.log_path)?;
            match BatchHeader::parse(&hdr[..n]) {
                Ok(h) if h.base_offset <= last.offset => {}
                _ => {
                    return Ok(Err(format!(
                        "offset index {}: last entry (offset {}, position {}) does not point at its batch",
                        index_path.display(),
                        last.offset,
                        last.position
                    )));
                }
            }
        }
        if !time_path.exists() {
            return Ok(Err(format!(
                "time index {} is missing",
                time_path.display()
            )));
        }
        let time = TimeIndex::open(&time_path, self.base_offset, self.writable)?;
        let next = self.next_offset_upper_bound(&offset)?;
        if let Err(why) = time.check(next) {
            return Ok(Err(format!("time index {}: {why}", time_path.display())));
        }
        Ok(Ok(Indexes { offset, time }))
    }

    /// The offset after the last batch, found from the last index entry plus a
    /// short scan (an upper bound for checks when the log is damaged).
    fn next_offset_upper_bound(&self, offset: &OffsetIndex) -> Result<i64> {
        let start = offset.last_entry().map(|e| e.position as u64).unwrap_or(0);
        let mut next = self.base_offset;
        self.scan(start, |_, h| {
            next = h.next_offset();
            true
        })?;
        Ok(next.max(
            offset
                .last_entry()
                .map_or(self.base_offset, |e| e.offset + 1),
        ))
    }

    /// Builds both indexes from the `.log` with Kafka's rule, byte for byte what
    /// the appends would have written. Sealed segments get the final time index
    /// entry and trimmed files; the active one keeps its full length.
    /// It writes the index files, whatever path asked for the indexes (a
    /// read too), so it runs guarded: a failure takes the partition offline.
    pub(super) fn rebuild_indexes(&self) -> Result<Indexes> {
        self.health.guard("an index rebuild", || {
            self.rebuild_indexes_now()
                .inspect_err(|_| self.discard_index_files())
        })
    }

    /// After a rebuild (or recovery) that failed part way, its staged files
    /// go (or else the next load removes them).
    pub(super) fn discard_index_files(&self) {
        if !self.writable {
            return;
        }
        for p in [staged(&self.index_path()), staged(&self.time_index_path())] {
            if let Err(e) = disk::remove_file("index.discard", &p)
                && e.kind() != std::io::ErrorKind::NotFound
            {
                error!(
                    "Could not remove {} after a failed rebuild: {e}",
                    p.display()
                );
            }
        }
    }

    fn rebuild_indexes_now(&self) -> Result<Indexes> {
        let size = self.size()?;
        let mut ix = self.fresh_indexes()?;
        let mut st = AppendState::rebuilt(self.base_offset);
        let interval = self.settings.index_interval_bytes;
        self.try_scan(0, |pos, h| {
            if pos + h.size() as u64 > size {
                return Ok(false);
            }
            reindex_batch(&mut ix, &mut st, (interval, pos), h)?;
            Ok(true)
        })?;
        self.seal_and_install(&mut ix, &st)?;
        *self.state.lock() = st;
        Ok(ix)
    }

    /// Puts rebuilt indexes in place of the old files: until then a failed
    /// rebuild, or a crash in it, leaves the old files as they were (missing
    /// or damaged, to be rebuilt again) and a `.tmp` that the next load
    /// removes, never files half filled that would pass for good ones.
    /// Installs rebuilt indexes; a sealed segment's get their final time
    /// entry and are trimmed first, as a roll leaves them.
    pub(super) fn seal_and_install(&self, ix: &mut Indexes, st: &AppendState) -> Result<()> {
        if !self.is_active() {
            ix.time
                .maybe_append(st.max_timestamp, st.offset_of_max_timestamp, true)?;
            ix.offset.trim()?;
            ix.time.trim()?;
        }
        self.install(ix)
    }

    fn install(&self, ix: &mut Indexes) -> Result<()> {
        if !self.writable {
            return Ok(());
        }
        for (path, file) in [
            (self.index_path(), ix.offset.path().to_path_buf()),
            (self.time_index_path(), ix.time.path().to_path_buf()),
        ] {
            disk::rename("index.install", &file, &path).at(&path)?;
        }
        ix.offset.moved_to(&self.index_path());
        ix.time.moved_to(&self.time_index_path());
        Ok(())
    }

    /// Empty indexes at their full (sparse) length: on disk under staged names
    /// (see [`Self::install`]), or in memory when the data directory must
    /// not be written.
    pub(super) fn fresh_indexes(&self) -> Result<Indexes> {
        let s = self.settings;
        if self.writable {
            Ok(Indexes {
                offset: OffsetIndex::create(
                    &staged(&self.index_path()),
                    self.base_offset,
                    s.offset_index_max_bytes,
                )?,
                time: TimeIndex::create(
                    &staged(&self.time_index_path()),
                    self.base_offset,
                    s.time_index_max_bytes,
                )?,
            })
        } else {
            info!(
                "Rebuilding the indexes of {} in memory only: the data directory is read-only",
                self.log_path.display()
            );
            Ok(Indexes {
                offset: OffsetIndex::in_memory(
                    &self.index_path(),
                    self.base_offset,
                    s.offset_index_max_bytes,
                )?,
                time: TimeIndex::in_memory(
                    &self.time_index_path(),
                    self.base_offset,
                    s.time_index_max_bytes,
                )?,
            })
        }
    }
}
