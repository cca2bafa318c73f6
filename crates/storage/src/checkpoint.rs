//! Kafka's offset checkpoint files (`recovery-point-offset-checkpoint`,
//! `log-start-offset-checkpoint`, the log cleaner's
//! `cleaner-offset-checkpoint`): a `0` version line, a count line, then
//! `topic partition offset` lines. Written to `.tmp`, fsynced, renamed.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use log::warn;
use parking_lot::Mutex;

use super::disk;
use super::error::{IoContext, Result};

pub const RECOVERY_POINT_FILE: &str = "recovery-point-offset-checkpoint";
pub const LOG_START_OFFSET_FILE: &str = "log-start-offset-checkpoint";
/// Where the log cleaner keeps each compacted partition's first dirty
/// offset (Kafka's `LogCleanerManager.offsetCheckpointFile`).
pub const CLEANER_OFFSET_FILE: &str = "cleaner-offset-checkpoint";

/// (topic, partition) -> offset: what an offset checkpoint file holds
/// (Kafka's `OffsetCheckpointFile`).
pub type PartitionOffsets = BTreeMap<(String, u32), i64>;

/// Parses a checkpoint; `None` when the text is not one.
pub fn parse(text: &str) -> Option<PartitionOffsets> {
    let mut lines = text.lines();
    if lines.next()?.trim() != "0" {
        return None;
    }
    let count: usize = lines.next()?.trim().parse().ok()?;
    let mut map = PartitionOffsets::new();
    for _ in 0..count {
        let mut parts = lines.next()?.split_whitespace();
        let topic = parts.next()?.to_string();
        let partition: u32 = parts.next()?.parse().ok()?;
        let offset: i64 = parts.next()?.parse().ok()?;
        if parts.next().is_some() {
            return None;
        }
        map.insert((topic, partition), offset);
    }
    Some(map)
}

pub fn format(map: &PartitionOffsets) -> String {
    let mut s = format!("0\n{}\n", map.len());
    for ((topic, partition), offset) in map {
        s.push_str(&format!("{topic} {partition} {offset}\n"));
    }
    s
}

/// Reads a checkpoint file; a missing one is empty, a garbled one is logged and empty.
pub fn read(path: &Path) -> PartitionOffsets {
    match fs::read_to_string(path) {
        Ok(text) => parse(&text).unwrap_or_else(|| {
            warn!("Ignoring malformed checkpoint file {}", path.display());
            PartitionOffsets::new()
        }),
        Err(_) => PartitionOffsets::new(),
    }
}

/// Atomically replaces a file: write `.tmp`, fsync, rename, fsync the directory.
/// A failure before the rename leaves the old file whole (and a `.tmp`,
/// which the next load removes).
pub fn write_atomically(path: &Path, contents: &[u8]) -> Result<()> {
    replace(path, contents, None)
}

/// [`write_atomically`], owner-only (0600) before its first byte: for the
/// SCRAM credentials and the ACLs.
pub fn write_private_atomically(path: &Path, contents: &[u8]) -> Result<()> {
    replace(path, contents, Some(0o600))
}

fn replace(path: &Path, contents: &[u8], mode: Option<u32>) -> Result<()> {
    let tmp = PathBuf::from(format!("{}.tmp", path.display()));
    {
        let mut f = disk::create_file("atomic.create", &tmp).at(&tmp)?;
        if let Some(mode) = mode {
            f.set_permissions(fs::Permissions::from_mode(mode))
                .at(&tmp)?;
        }
        disk::write_all("atomic.write", &mut f, contents).at(&tmp)?;
        disk::sync_all("atomic.fsync", &f).synced(&tmp)?;
    }
    disk::rename("atomic.rename", &tmp, path).at(path)?;
    if let Some(dir) = path.parent() {
        disk::sync_dir("atomic.dir_fsync", dir).synced(dir)?;
    }
    Ok(())
}

/// The data directory's checkpoints, shared by its partitions.
pub struct Checkpoints {
    dir: PathBuf,
    read_only: bool,
    recovery_points: Mutex<PartitionOffsets>,
    log_start_offsets: Mutex<PartitionOffsets>,
    cleaner_offsets: Mutex<PartitionOffsets>,
    /// Serialises file writes so an older map never overwrites a newer one.
    write_lock: Mutex<()>,
    /// Changes stay in memory until [`Checkpoints::rewrite_all`] (see
    /// [`Checkpoints::defer_writes`]).
    deferred: AtomicBool,
}

impl Checkpoints {
    pub fn load(dir: &Path, read_only: bool) -> Checkpoints {
        Checkpoints {
            dir: dir.to_path_buf(),
            read_only,
            recovery_points: Mutex::new(read(&dir.join(RECOVERY_POINT_FILE))),
            log_start_offsets: Mutex::new(read(&dir.join(LOG_START_OFFSET_FILE))),
            cleaner_offsets: Mutex::new(read(&dir.join(CLEANER_OFFSET_FILE))),
            write_lock: Mutex::new(()),
            deferred: AtomicBool::new(false),
        }
    }

    /// From now on changes are kept in memory only, until
    /// [`Checkpoints::rewrite_all`] writes both files. A close advances every
    /// partition's recovery point, and writing the file at each would cost
    /// two fsyncs per partition, one partition after another (as Kafka, which
    /// checkpoints once after closing its logs). A crash before the rewrite
    /// leaves the older recovery points, which only make the next start
    /// recover more.
    pub fn defer_writes(&self) {
        self.deferred.store(true, Ordering::Release);
    }

    /// Reads both files again: another process rewrote them (a read-only
    /// mount of a running broker's directory).
    pub fn reload(&self) {
        *self.recovery_points.lock() = read(&self.dir.join(RECOVERY_POINT_FILE));
        *self.log_start_offsets.lock() = read(&self.dir.join(LOG_START_OFFSET_FILE));
        *self.cleaner_offsets.lock() = read(&self.dir.join(CLEANER_OFFSET_FILE));
    }

    /// The cleaner's first dirty offset of a partition, if it was cleaned.
    pub fn cleaner_offset(&self, topic: &str, partition: u32) -> Option<i64> {
        self.cleaner_offsets
            .lock()
            .get(&(topic.to_string(), partition))
            .copied()
    }

    /// Sets (`Some`) or forgets (`None`) a partition's cleaner offset.
    pub fn set_cleaner_offset(
        &self,
        topic: &str,
        partition: u32,
        offset: Option<i64>,
    ) -> Result<()> {
        self.update(
            &self.cleaner_offsets,
            CLEANER_OFFSET_FILE,
            topic,
            partition,
            offset,
        )
    }

    pub fn recovery_point(&self, topic: &str, partition: u32) -> Option<i64> {
        self.recovery_points
            .lock()
            .get(&(topic.to_string(), partition))
            .copied()
    }

    pub fn log_start_offset(&self, topic: &str, partition: u32) -> Option<i64> {
        self.log_start_offsets
            .lock()
            .get(&(topic.to_string(), partition))
            .copied()
    }

    pub fn set_recovery_point(&self, topic: &str, partition: u32, offset: i64) -> Result<()> {
        self.update(
            &self.recovery_points,
            RECOVERY_POINT_FILE,
            topic,
            partition,
            Some(offset),
        )
    }

    pub fn set_log_start_offset(&self, topic: &str, partition: u32, offset: i64) -> Result<()> {
        self.update(
            &self.log_start_offsets,
            LOG_START_OFFSET_FILE,
            topic,
            partition,
            Some(offset),
        )
    }

    /// Forgets a deleted partition.
    pub fn remove(&self, topic: &str, partition: u32) -> Result<()> {
        if self.cleaner_offset(topic, partition).is_some() {
            self.set_cleaner_offset(topic, partition, None)?;
        }
        self.update(
            &self.recovery_points,
            RECOVERY_POINT_FILE,
            topic,
            partition,
            None,
        )?;
        self.update(
            &self.log_start_offsets,
            LOG_START_OFFSET_FILE,
            topic,
            partition,
            None,
        )
    }

    /// Writes the file with the change, and keeps the change in memory only
    /// once written: a failed write must not reach the file later through
    /// another partition's update.
    fn update(
        &self,
        map: &Mutex<PartitionOffsets>,
        file: &str,
        topic: &str,
        partition: u32,
        offset: Option<i64>,
    ) -> Result<()> {
        let _w = self.write_lock.lock();
        let key = (topic.to_string(), partition);
        let mut next = map.lock().clone();
        let changed = match offset {
            Some(o) => next.insert(key, o) != Some(o),
            None => next.remove(&key).is_some(),
        };
        if !changed {
            return Ok(());
        }
        if !self.read_only && !self.deferred.load(Ordering::Acquire) {
            write_atomically(&self.dir.join(file), format(&next).as_bytes())?;
        }
        *map.lock() = next;
        Ok(())
    }

    /// Rewrites both files (at close).
    pub fn rewrite_all(&self) -> Result<()> {
        if self.read_only {
            return Ok(());
        }
        let _w = self.write_lock.lock();
        let rp = format(&self.recovery_points.lock());
        let ls = format(&self.log_start_offsets.lock());
        write_atomically(&self.dir.join(RECOVERY_POINT_FILE), rp.as_bytes())?;
        write_atomically(&self.dir.join(LOG_START_OFFSET_FILE), ls.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_text_format_round_trips() {
        let text = "0\n2\norders 0 680\nmy.topic-x 3 12\n";
        let map = parse(text).unwrap();
        assert_eq!(map[&("orders".to_string(), 0)], 680);
        assert_eq!(map[&("my.topic-x".to_string(), 3)], 12);
        assert_eq!(parse(&format(&map)).unwrap(), map);
        assert!(parse("1\n0\n").is_none());
        assert!(
            parse("0\n2\norders 0 680\n").is_none(),
            "count larger than the lines"
        );
    }

    #[test]
    fn writes_are_atomic_files() {
        let dir = tempfile::tempdir().unwrap();
        let c = Checkpoints::load(dir.path(), false);
        c.set_recovery_point("t", 0, 42).unwrap();
        let text = fs::read_to_string(dir.path().join(RECOVERY_POINT_FILE)).unwrap();
        assert_eq!(text, "0\n1\nt 0 42\n");
        assert!(
            !dir.path()
                .join(format!("{RECOVERY_POINT_FILE}.tmp"))
                .exists()
        );
        let again = Checkpoints::load(dir.path(), false);
        assert_eq!(again.recovery_point("t", 0), Some(42));
    }

    #[test]
    fn deferred_changes_reach_the_file_at_the_rewrite_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(RECOVERY_POINT_FILE);
        let c = Checkpoints::load(dir.path(), false);
        c.set_recovery_point("t", 0, 1).unwrap();
        c.defer_writes();
        c.set_recovery_point("t", 0, 7).unwrap();
        c.set_recovery_point("u", 0, 3).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "0\n1\nt 0 1\n");
        assert_eq!(c.recovery_point("t", 0), Some(7));
        c.rewrite_all().unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "0\n2\nt 0 7\nu 0 3\n");
    }
}
