//! One index file's bytes: a shared mapping of the file while the data
//! directory is ours, a copy in the daemon's own memory where it is not (a
//! read-only data dir, whose files another process may truncate under a
//! mapping), and the file upkeep (resize, block allocation, trim, flush).
//!
//! **Apparent size and real blocks.** An active index has Kafka's length
//! (`segment.index.bytes`, as `RandomAccessFile.setLength` leaves it: a
//! sparse file), so `ls -l` shows what a broker's data dir shows. Real
//! blocks are allocated only as entries are written, [`ALLOCATION_STEP`]
//! bytes at a time (`fallocate(2)` of that range), before an entry is
//! stored through the mapping. So a live idle partition holds no more than
//! a step per index beyond its entries, and a full disk is an error of the
//! allocation (ENOSPC, refused and undone like any append) and never a
//! write to a mapped hole, which the kernel answers with SIGBUS. Preallocating
//! the whole length instead reserved 20 MiB per partition: 2,000
//! partitions took 40 GB.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use memmap2::{MmapMut, MmapOptions};

use crate::disk;
use crate::error::{IoContext, Result, StorageError};

/// Real blocks are allocated this many bytes at a time, ahead of the
/// entries written: a page, 512 offset entries (2 MiB of log at the
/// default `index.interval.bytes`) per `fallocate` call, and what an idle
/// partition's index holds at most beyond its entries.
pub const ALLOCATION_STEP: u64 = 4096;

/// How an index's bytes are kept.
pub(super) enum Backing {
    /// A shared mapping of the file at `path`: what we write reaches the
    /// file. The file is opened only to map it or change its length or
    /// blocks, as Kafka's `AbstractIndex` closes its `RandomAccessFile` once
    /// mapped: a live partition's indexes hold no descriptor, so its only
    /// one is its active `.log`.
    File,
    /// In memory only: a copy of a file we must not change (a read-only
    /// data dir), or an index rebuilt there.
    Memory,
}

/// The mapped bytes of one index file plus its entry count.
pub(super) struct IndexFile {
    pub(super) path: PathBuf,
    pub(super) backing: Backing,
    pub(super) mmap: Option<MmapMut>,
    pub(super) entry_size: usize,
    pub(super) entries: usize,
    /// How many bytes from the start are known to have real blocks (a
    /// file's only): an entry is written through the mapping only below it.
    /// Unknown for a file opened from disk, so taken as 0 there: allocating
    /// a range that has its blocks already costs nothing.
    allocated: u64,
}

impl IndexFile {
    /// Maps `path`, taking every whole entry of its length as an entry (as Kafka
    /// does); callers sanity-check or count the real entries afterwards.
    pub(super) fn open(path: &Path, entry_size: usize, writable: bool) -> Result<Self> {
        if !writable {
            return Self::copy(path, entry_size);
        }
        let mut idx = IndexFile::unmapped(path, Backing::File, entry_size);
        let len = idx.file_len()? as usize;
        idx.entries = len / entry_size;
        idx.remap(len)?;
        Ok(idx)
    }

    /// The file, opened for a mapping or a change of its length or blocks,
    /// and closed again by the caller's drop.
    fn file(&self) -> Result<File> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .open(&self.path)
            .at(&self.path)
    }

    /// An empty index over `backing`, not mapped yet.
    fn unmapped(path: &Path, backing: Backing, entry_size: usize) -> Self {
        IndexFile {
            path: path.to_path_buf(),
            backing,
            mmap: None,
            entry_size,
            entries: 0,
            allocated: 0,
        }
    }

    /// Reads a file we must not change (and that another process may cut
    /// or rewrite meanwhile) into memory of our own. The length is what was
    /// read: a file cut while it is read is taken as it was cut, so the
    /// entry count and every later check see one consistent copy.
    pub(super) fn copy(path: &Path, entry_size: usize) -> Result<Self> {
        let file = File::open(path).at(path)?;
        let len = file.metadata().at(path)?.len() as usize;
        let mut idx = IndexFile::unmapped(path, Backing::Memory, entry_size);
        idx.remap(len)?;
        let read = match idx.mmap.as_mut() {
            Some(m) => crate::batch_reader::read_full_at(&file, &mut m[..], 0).at(path)?,
            None => 0,
        };
        if read < len {
            // Cut while it was read: keep only what was there.
            let old = idx.mmap.take();
            idx.remap(read)?;
            if let (Some(to), Some(from)) = (idx.mmap.as_mut(), old.as_ref()) {
                to.copy_from_slice(&from[..read]);
            }
        }
        idx.entries = read / entry_size;
        Ok(idx)
    }

    /// A fresh empty index file of `max_bytes`, sparse: its blocks come
    /// as entries are written (see the module's comment).
    pub(super) fn create(path: &Path, entry_size: usize, max_bytes: u64) -> Result<Self> {
        drop(disk::create_file("index.create", path).at(path)?);
        let mut idx = IndexFile::unmapped(path, Backing::File, entry_size);
        idx.resize(max_bytes)?;
        Ok(idx)
    }

    pub(super) fn in_memory(path: &Path, entry_size: usize, max_bytes: u64) -> Result<Self> {
        let mut idx = IndexFile::unmapped(path, Backing::Memory, entry_size);
        idx.remap(max_bytes as usize)?;
        Ok(idx)
    }

    pub(super) fn remap(&mut self, len: usize) -> Result<()> {
        self.mmap = None;
        if len == 0 {
            return Ok(());
        }
        let map = match &self.backing {
            // SAFETY: index files belong to this process (the data dir is locked);
            // nothing else truncates them while they are mapped. A read-only
            // data dir is not locked, and is never mapped (see `copy`).
            Backing::File => unsafe { MmapOptions::new().len(len).map_mut(&self.file()?) },
            Backing::Memory => MmapOptions::new().len(len).map_anon(),
        };
        let map = map.at(&self.path)?;
        // An index is sparse and touched one entry at a time
        // (appends) or by binary search: readahead on a page fault only
        // zero-fills pages of the hole nobody asked for (a tenth of a
        // library append's time with fresh 10 MiB indexes). Only advice:
        // a kernel that refuses it just reads ahead.
        let _ = map.advise(memmap2::Advice::Random);
        self.mmap = Some(map);
        Ok(())
    }

    pub(super) fn capacity(&self) -> usize {
        self.mmap.as_ref().map_or(0, |m| m.len()) / self.entry_size
    }

    /// Entry `i < entries`. An index with entries is mapped: its entry count
    /// never exceeds what its mapping holds (`open`, `resize`, `push`).
    pub(super) fn entry_bytes(&self, i: usize) -> &[u8] {
        let m = self.mmap.as_ref().expect("an index with entries is mapped");
        &m[i * self.entry_size..(i + 1) * self.entry_size]
    }

    /// Adds an entry. A full index is refused as Kafka's `AbstractIndex`
    /// refuses it; callers roll (appends) or grow the index (rebuilds) first.
    pub(super) fn push(&mut self, bytes: &[u8]) -> Result<()> {
        // Never a store into a hole: on a full disk that is SIGBUS.
        self.allocate_for(self.entries + 1)?;
        disk::map_write("index.push").at(&self.path)?;
        let at = self.entries * self.entry_size;
        match self.mmap.as_mut() {
            Some(m) if at + self.entry_size <= m.len() => {
                m[at..at + self.entry_size].copy_from_slice(bytes);
                self.entries += 1;
                Ok(())
            }
            _ => Err(StorageError::IndexFull {
                path: self.path.clone(),
                entries: self.entries,
            }),
        }
    }

    /// Real blocks under the first `entries` entries (as far as the file
    /// reaches), allocated [`ALLOCATION_STEP`] at a time. A full disk is
    /// the allocation's error (ENOSPC), and nothing was written.
    pub(super) fn allocate_for(&mut self, entries: usize) -> Result<()> {
        let Backing::File = &self.backing else {
            return Ok(());
        };
        let mapped = self.mmap.as_ref().map_or(0, |m| m.len()) as u64;
        let need = ((entries * self.entry_size) as u64).min(mapped);
        if need <= self.allocated {
            return Ok(());
        }
        let to = need.next_multiple_of(ALLOCATION_STEP).min(mapped);
        let f = self.file()?;
        disk::allocate("index.fallocate", &f, self.allocated, to - self.allocated).at(&self.path)?;
        self.allocated = to;
        Ok(())
    }

    /// Room for `spare` more entries, growing the file past its length
    /// if needed: a rebuild re-indexes what a larger `segment.index.bytes`
    /// may have written, and the setting only sizes new segments.
    pub(super) fn reserve(&mut self, spare: usize) -> Result<()> {
        if self.entries + spare <= self.capacity() {
            return Ok(());
        }
        let want = (self.entries + spare).max(self.capacity() * 2).max(64);
        self.resize((want * self.entry_size) as u64)
    }

    /// Changes the file (and mapping) length; a shrink drops entries past
    /// it and frees their blocks, a growth is sparse (Kafka's `setLength`).
    pub(super) fn resize(&mut self, len: u64) -> Result<()> {
        self.mmap = None;
        match &self.backing {
            Backing::File => {
                let f = self.file()?;
                if len > f.metadata().at(&self.path)?.len() {
                    disk::set_len("index.set_len", &f, len).at(&self.path)?;
                } else {
                    disk::set_len("index.resize.truncate", &f, len).at(&self.path)?;
                }
                self.allocated = self.allocated.min(len);
            }
            Backing::Memory => {
                // Never touch the file: rebuild a private copy at the new size.
                let old: Vec<u8> = (0..self.entries)
                    .flat_map(|i| self.entry_bytes_owned(i))
                    .collect();
                self.backing = Backing::Memory;
                self.remap(len as usize)?;
                if let Some(m) = self.mmap.as_mut() {
                    let n = old.len().min(m.len());
                    m[..n].copy_from_slice(&old[..n]);
                }
            }
        }
        if matches!(self.backing, Backing::File) {
            self.remap(len as usize)?;
        }
        self.entries = self.entries.min(len as usize / self.entry_size);
        Ok(())
    }

    pub(super) fn entry_bytes_owned(&self, i: usize) -> Vec<u8> {
        self.mmap
            .as_ref()
            .map(|m| m[i * self.entry_size..(i + 1) * self.entry_size].to_vec())
            .unwrap_or_default()
    }

    pub(super) fn trim(&mut self) -> Result<()> {
        let len = (self.entries * self.entry_size) as u64;
        if self.file_len()? != len {
            self.resize(len)?;
        }
        Ok(())
    }

    pub(super) fn file_len(&self) -> Result<u64> {
        match &self.backing {
            Backing::File => Ok(std::fs::metadata(&self.path).at(&self.path)?.len()),
            Backing::Memory => Ok(self.mmap.as_ref().map_or(0, |m| m.len()) as u64),
        }
    }

    /// Drops the entries from `n` on, zeroing their bytes.
    pub(super) fn truncate_entries(&mut self, n: usize) {
        if n >= self.entries {
            return;
        }
        let (from, to) = (n * self.entry_size, self.entries * self.entry_size);
        if let Some(m) = self.mmap.as_mut() {
            let to = to.min(m.len());
            m[from.min(to)..to].fill(0);
        }
        self.entries = n;
    }

    pub(super) fn flush(&self) -> Result<()> {
        if let (Backing::File, Some(m)) = (&self.backing, &self.mmap) {
            disk::msync("index.msync", m).synced(&self.path)?;
        }
        Ok(())
    }
}
