//! A writer that does to a data directory what a running Kafka broker does,
//! in the broker's order, so that tests can follow a live `log.dir` from
//! another process (the mount's daemon):
//! - append (`LogSegment.append`): the batch goes to the `.log` first, then
//!   an entry to the preallocated `.index` and `.timeindex` when more than
//!   `index.interval.bytes` went by since the last one;
//! - roll (`LocalLog.roll`): the active segment becomes inactive (final time
//!   index entry, both indexes trimmed to their entries), then the next
//!   segment's files are created, indexes preallocated;
//! - retention (`UnifiedLog.deleteSegments`): the log start offset moves, the
//!   oldest segments' files are renamed `.deleted`, and deleted later;
//! - checkpoints (`OffsetCheckpointFile`): written to `.tmp`, then renamed.
//!
//! Batches are encoded by the storage library's codec, the way a producer
//! sends them; values are `v-<offset>` so a test knows every byte to expect.

#![allow(dead_code)]

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use commitfs::record::{NewRecord, encode_batch};

/// Kafka's defaults: 10 MiB index preallocation, an entry per 4 KiB.
pub const INDEX_BYTES: u64 = 10 * 1024 * 1024;
pub const TIME_INDEX_BYTES: u64 = INDEX_BYTES / 12 * 12;
/// Record timestamps: this plus the offset, so `time/<ms>` is predictable.
pub const BASE_TS: i64 = 1_700_000_000_000;

pub fn value(offset: i64) -> String {
    format!("v-{offset}")
}

/// The consumer stream (`cat log`) of offsets `from..to`.
pub fn stream(from: i64, to: i64) -> String {
    (from..to).map(|o| value(o) + "\n").collect()
}

pub fn seg_name(base: i64, suffix: &str) -> String {
    format!("{base:020}.{suffix}")
}

struct Active {
    base: i64,
    log: File,
    index: File,
    time: File,
    size: u64,
    bytes_since_last_index_entry: u64,
    offset_entries: u64,
    time_entries: u64,
    /// (max timestamp so far, its offset), as `LogSegment` keeps them.
    max_ts: i64,
    offset_of_max_ts: i64,
    last_time_entry: i64,
}

/// One partition of a "broker" rooted at `root`.
pub struct KafkaWriter {
    pub root: PathBuf,
    pub dir: PathBuf,
    pub topic: String,
    pub partition: u32,
    pub index_interval: u64,
    /// Bases of the segments on disk (not renamed `.deleted`), oldest first.
    pub segments: Vec<i64>,
    pub next_offset: i64,
    pub log_start: i64,
    active: Active,
    /// A batch written only in part: its bytes and how many are on disk.
    torn: Option<(Vec<u8>, usize)>,
}

impl KafkaWriter {
    /// Creates `root/<topic>-<partition>` with its first segment at 0.
    pub fn create(root: &Path, topic: &str, partition: u32, index_interval: u64) -> KafkaWriter {
        let dir = root.join(format!("{topic}-{partition}"));
        fs::create_dir_all(&dir).expect("partition dir");
        fs::write(
            dir.join("partition.metadata"),
            "version: 0\ntopic_id: 3IcWjwTRQzqsMnsYLqAjgw\n",
        )
        .expect("partition.metadata");
        fs::write(dir.join("leader-epoch-checkpoint"), "0\n1\n0 0\n").expect("epochs");
        let active = open_segment(&dir, 0);
        KafkaWriter {
            root: root.to_path_buf(),
            dir,
            topic: topic.to_string(),
            partition,
            index_interval,
            segments: vec![0],
            next_offset: 0,
            log_start: 0,
            active,
            torn: None,
        }
    }

    pub fn name(&self) -> String {
        format!("{}-{}", self.topic, self.partition)
    }

    pub fn active_base(&self) -> i64 {
        self.active.base
    }

    /// The active `.log`'s size: whole batches only.
    pub fn active_size(&self) -> u64 {
        self.active.size
    }

    pub fn path(&self, base: i64, suffix: &str) -> PathBuf {
        self.dir.join(seg_name(base, suffix))
    }

    /// One batch of `count` records `v-<offset>`; returns its first offset.
    pub fn append(&mut self, count: usize) -> i64 {
        let batch = self.encode(count);
        let first = self.next_offset;
        self.write_log(&batch, 0);
        self.index(&batch);
        first
    }

    /// Writes only the first `cut` bytes of the next batch of `count`
    /// records, as a reader catches a write half done.
    pub fn append_torn(&mut self, count: usize, cut: usize) {
        assert!(self.torn.is_none(), "one torn batch at a time");
        let batch = self.encode(count);
        let cut = cut.min(batch.len() - 1);
        self.write_log(&batch[..cut], 0);
        self.torn = Some((batch, cut));
    }

    /// Writes the rest of the torn batch, then indexes it.
    pub fn finish_torn(&mut self) {
        let (batch, cut) = self.torn.take().expect("a torn batch");
        self.write_log(&batch[cut..], cut as u64);
        self.index(&batch);
    }

    fn encode(&self, count: usize) -> Vec<u8> {
        let values: Vec<String> = (0..count as i64)
            .map(|i| value(self.next_offset + i))
            .collect();
        let records: Vec<NewRecord> = values
            .iter()
            .map(|v| NewRecord::value(v.as_bytes()))
            .collect();
        let mut buf = Vec::new();
        encode_batch(
            &mut buf,
            self.next_offset,
            BASE_TS + self.next_offset,
            &records,
        );
        buf
    }

    fn write_log(&mut self, bytes: &[u8], at: u64) {
        let a = &mut self.active;
        a.log
            .write_all_at(bytes, a.size + at)
            .expect("append to .log");
    }

    /// `LogSegment.append` after the bytes are in the `.log`: Kafka's index rule.
    fn index(&mut self, batch: &[u8]) {
        let count = i32::from_be_bytes(batch[57..61].try_into().unwrap()) as i64;
        let last = self.next_offset + count - 1;
        let max_ts = BASE_TS + self.next_offset;
        let a = &mut self.active;
        if max_ts > a.max_ts {
            a.max_ts = max_ts;
            a.offset_of_max_ts = last;
        }
        if a.bytes_since_last_index_entry > self.index_interval {
            let mut e = [0u8; 8];
            e[..4].copy_from_slice(&((last - a.base) as u32).to_be_bytes());
            e[4..].copy_from_slice(&(a.size as u32).to_be_bytes());
            a.index
                .write_all_at(&e, a.offset_entries * 8)
                .expect("index entry");
            a.offset_entries += 1;
            maybe_time_entry(a);
            a.bytes_since_last_index_entry = 0;
        }
        a.size += batch.len() as u64;
        a.bytes_since_last_index_entry += batch.len() as u64;
        self.next_offset = last + 1;
    }

    /// `LocalLog.roll`: the active segment becomes inactive (final time
    /// index entry, indexes trimmed), then the next segment is created.
    pub fn roll(&mut self) -> i64 {
        let a = &mut self.active;
        maybe_time_entry(a);
        a.index.set_len(a.offset_entries * 8).expect("trim .index");
        a.time
            .set_len(a.time_entries * 12)
            .expect("trim .timeindex");
        self.active = open_segment(&self.dir, self.next_offset);
        self.segments.push(self.next_offset);
        self.next_offset
    }

    /// Retention of the `n` oldest segments: the log start offset moves to
    /// the next segment's base, then their files are renamed `.deleted`
    /// (log first, then the indexes, as `changeFileSuffixes`). Returns the
    /// bases renamed.
    pub fn retain(&mut self, n: usize) -> Vec<i64> {
        assert!(n < self.segments.len(), "never the active segment");
        let doomed: Vec<i64> = self.segments.drain(..n).collect();
        self.log_start = self.log_start.max(self.segments[0]);
        for base in &doomed {
            for suffix in ["log", "index", "timeindex"] {
                let from = self.path(*base, suffix);
                let to = self.path(*base, &format!("{suffix}.deleted"));
                fs::rename(&from, &to).expect("rename to .deleted");
            }
        }
        doomed
    }

    /// `file.delete.delay.ms` later: the `.deleted` files go.
    pub fn purge(&self, bases: &[i64]) {
        for base in bases {
            for suffix in ["log", "index", "timeindex"] {
                let _ = fs::remove_file(self.path(*base, &format!("{suffix}.deleted")));
            }
        }
    }

    /// The log cleaner's swap (`LocalLog.replaceSegments`) of the sealed
    /// segments `bases` (consecutive, oldest first) into one segment at
    /// `bases[0]` holding only the offsets `keep` accepts, one batch each:
    /// the cleaned files are written, renamed `.swap`, the old segments
    /// renamed `.deleted`; `mid` runs then, while the first `.log` name is
    /// missing; then the `.swap` files lose their suffix.
    pub fn compact(&mut self, bases: &[i64], keep: impl Fn(i64) -> bool, mid: impl FnOnce()) {
        let first = bases[0];
        let last = *bases.last().expect("segments to compact");
        let i = self
            .segments
            .iter()
            .position(|b| *b == last)
            .expect("a segment");
        let end = self.segments[i + 1];
        let mut log = Vec::new();
        for o in (first..end).filter(|o| keep(*o)) {
            let v = value(o);
            encode_batch(&mut log, o, BASE_TS + o, &[NewRecord::value(v.as_bytes())]);
        }
        for (suffix, bytes) in [
            ("log", &log[..]),
            ("index", &[][..]),
            ("timeindex", &[][..]),
        ] {
            let cleaned = self.path(first, &format!("{suffix}.cleaned"));
            fs::write(&cleaned, bytes).expect("cleaned file");
            fs::rename(&cleaned, self.path(first, &format!("{suffix}.swap"))).expect("to .swap");
        }
        for base in bases {
            for suffix in ["log", "index", "timeindex"] {
                let to = self.path(*base, &format!("{suffix}.deleted"));
                fs::rename(self.path(*base, suffix), to).expect("to .deleted");
            }
        }
        mid();
        for suffix in ["log", "index", "timeindex"] {
            let swap = self.path(first, &format!("{suffix}.swap"));
            fs::rename(swap, self.path(first, suffix)).expect("swap in");
        }
        self.segments.retain(|b| !bases[1..].contains(b));
    }

    /// Writes the data dir's checkpoints for this partition, as the broker's
    /// checkpoint tasks do: `.tmp`, fsync, rename.
    pub fn write_checkpoints(&self, recovery_point: i64) {
        let line = |o: i64| format!("0\n1\n{} {} {o}\n", self.topic, self.partition);
        write_checkpoint(
            &self.root,
            "log-start-offset-checkpoint",
            &line(self.log_start),
        );
        write_checkpoint(
            &self.root,
            "recovery-point-offset-checkpoint",
            &line(recovery_point),
        );
    }

    /// `kafka-delete-records`: the log start moves, and the broker's
    /// checkpoint task writes it.
    pub fn delete_records(&mut self, offset: i64) {
        self.log_start = offset;
        self.write_checkpoints(0);
    }
}

/// `TimeIndex.maybeAppend`: only a growing timestamp makes an entry.
fn maybe_time_entry(a: &mut Active) {
    if a.max_ts > a.last_time_entry {
        let mut e = [0u8; 12];
        e[..8].copy_from_slice(&a.max_ts.to_be_bytes());
        e[8..].copy_from_slice(&((a.offset_of_max_ts - a.base) as u32).to_be_bytes());
        a.time
            .write_all_at(&e, a.time_entries * 12)
            .expect("time index entry");
        a.time_entries += 1;
        a.last_time_entry = a.max_ts;
    }
}

/// A new segment: an empty `.log` and preallocated (sparse) indexes.
fn open_segment(dir: &Path, base: i64) -> Active {
    let open = |suffix: &str| {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(dir.join(seg_name(base, suffix)))
            .expect("segment file")
    };
    let log = open("log");
    let index = open("index");
    index.set_len(INDEX_BYTES).expect("preallocate .index");
    let time = open("timeindex");
    time.set_len(TIME_INDEX_BYTES)
        .expect("preallocate .timeindex");
    Active {
        base,
        log,
        index,
        time,
        size: 0,
        bytes_since_last_index_entry: 0,
        offset_entries: 0,
        time_entries: 0,
        max_ts: -1,
        offset_of_max_ts: base,
        last_time_entry: -1,
    }
}

/// Kafka's `CheckpointFile.write`: a `.tmp` written and fsynced, then renamed.
pub fn write_checkpoint(root: &Path, name: &str, text: &str) {
    let tmp = root.join(format!("{name}.tmp"));
    let f = File::create(&tmp).expect("checkpoint tmp");
    f.write_all_at(text.as_bytes(), 0).expect("checkpoint text");
    f.sync_all().expect("fsync checkpoint");
    fs::rename(&tmp, root.join(name)).expect("rename checkpoint");
}

/// A broker's `meta.properties`, so the root looks like a `log.dir`.
pub fn write_meta(root: &Path) {
    fs::create_dir_all(root).expect("log.dir");
    fs::write(
        root.join("meta.properties"),
        "version=1\nnode.id=1\ncluster.id=q1Sh-9_ISia_zwGINzRvyQ\n",
    )
    .expect("meta.properties");
}
