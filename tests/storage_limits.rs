//! What a partition costs on disk, and the limits on how many there are,
//! in the storage library on temp directories:
//! - an active index has Kafka's length but holds real blocks only for the
//!   entries written, a step ahead; the kernel's block count (`st_blocks`)
//!   is the oracle;
//! - `max.broker.partitions` refuses a creation past it, whatever the
//!   call, and loads every partition already there;
//! - a topic creation or growth that fails half way leaves no partition
//!   behind, on disk or in the checkpoints.

mod kafka_support;

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use commitfs::error::ErrorKind;
use commitfs::record::NewRecord;
use commitfs::storage::index::ALLOCATION_STEP;
use commitfs::storage::{LogConfig, LogManager, OpenOptions, StorageError};
use kafka_support::requests::subdirs as dirs;

fn config(interval: &str) -> LogConfig {
    let mut c = LogConfig::default();
    c.set("index.interval.bytes", interval).unwrap();
    c
}

fn open(dir: &Path, c: &LogConfig) -> LogManager {
    LogManager::open(dir, c.clone(), OpenOptions::default()).unwrap()
}

/// (apparent length, bytes of real blocks) of a file, from the kernel.
fn sizes(p: &Path) -> (u64, u64) {
    let m = std::fs::metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    (m.len(), m.blocks() * 512)
}

fn index(dir: &Path, suffix: &str) -> std::path::PathBuf {
    dir.join("t-0").join(format!("{:020}.{suffix}", 0))
}

/// The block the file system allocates in, so bounds allow for its rounding.
fn fs_block(dir: &Path) -> u64 {
    std::fs::metadata(dir).unwrap().blksize()
}

#[test]
fn an_active_index_has_kafkas_length_and_blocks_only_for_its_entries() {
    let tmp = tempfile::tempdir().unwrap();
    // Every batch after the first gets an entry (interval 0: "more than 0").
    let c = config("0");
    let mgr = open(tmp.path(), &c);
    let log = mgr.create_partition("t-0").unwrap();
    let (off, time) = (index(tmp.path(), "index"), index(tmp.path(), "timeindex"));
    // Kafka's AbstractIndex: roundDown(segment.index.bytes, entry size).
    assert_eq!(sizes(&off).0, 10_485_760);
    assert_eq!(sizes(&time).0, 10_485_756);
    assert_eq!(sizes(&off).1, 0, "a new partition reserves no index blocks");
    assert_eq!(sizes(&time).1, 0);
    // st_blocks also counts the file system's own blocks for the file's
    // map (ext4's extent tree, once a sparse file has several extents).
    let step = ALLOCATION_STEP.max(fs_block(tmp.path())) + fs_block(tmp.path());
    // Where the first step of blocks is full, and the next one is taken.
    let edge = ALLOCATION_STEP / 8 + 1;
    for n in 1..=3000u64 {
        log.append(&[NewRecord::value(format!("v{n}").as_bytes())])
            .unwrap();
        if n % 500 == 0 || n == edge || n == edge + 1 {
            let entries = n - 1;
            let (len, blocks) = sizes(&off);
            assert_eq!(len, 10_485_760, "the length stays Kafka's");
            assert!(
                blocks >= entries * 8 && blocks <= entries * 8 + 8 + step,
                "{n} batches: {blocks} bytes of blocks for {entries} offset entries"
            );
        }
    }
    drop(log);
    mgr.close().unwrap();
    // Trimmed at the close: exactly the entries, as Kafka leaves it.
    assert_eq!(sizes(&off).0, 2999 * 8);
    // Reopened, the active index is Kafka's length again, sparse past its entries.
    let mgr = open(tmp.path(), &c);
    let log = mgr.partition("t-0").unwrap();
    log.append(&[NewRecord::value(b"after")]).unwrap();
    let (len, blocks) = sizes(&off);
    assert_eq!(len, 10_485_760);
    assert!(
        blocks <= 3000 * 8 + step,
        "{blocks} bytes of blocks after a reopen"
    );
    drop(log);
    mgr.close().unwrap();
}

#[test]
fn a_large_segment_index_bytes_costs_no_blocks() {
    let tmp = tempfile::tempdir().unwrap();
    let mut c = config("4096");
    // The issue measured 764 MiB reserved by one roll at 400000000 (the
    // mount tests take Int.MaxValue, on a tmpfs).
    c.set("segment.index.bytes", "40000000").unwrap();
    let mgr = open(tmp.path(), &c);
    let log = mgr.create_partition("t-0").unwrap();
    log.append(&[NewRecord::value(b"x")]).unwrap();
    log.roll().unwrap();
    log.append(&[NewRecord::value(b"y")]).unwrap();
    let active = tmp.path().join("t-0").join(format!("{:020}.index", 1));
    let (len, blocks) = sizes(&active);
    assert_eq!(len, 40_000_000);
    assert!(
        blocks <= 8192u64.max(fs_block(tmp.path())),
        "{blocks} bytes"
    );
    // Kafka's validator: an INT of at least 4.
    let e = c.set("segment.index.bytes", "2147483648").unwrap_err();
    assert_eq!(
        e.to_string(),
        "Invalid value 2147483648 for configuration segment.index.bytes: Expected value to be a \
         32-bit integer, but it was a java.lang.String"
    );
    drop(log);
    mgr.close().unwrap();
}

fn kind(r: commitfs::storage::Result<impl Sized>) -> ErrorKind {
    match r {
        Ok(_) => panic!("expected a refusal"),
        Err(e) => e.kind(),
    }
}

#[test]
fn max_partitions_refuses_creations_past_it_and_loads_what_is_there() {
    let tmp = tempfile::tempdir().unwrap();
    let c = LogConfig::default();
    let mgr = open(tmp.path(), &c);
    assert_eq!(mgr.max_partitions(), 10_000, "the default");
    mgr.set_max_partitions(3);
    mgr.create_topic("a", 2).unwrap();
    assert_eq!(
        kind(mgr.create_topic("b", 2)),
        ErrorKind::LimitReached,
        "2 more past 3"
    );
    assert_eq!(kind(mgr.grow_topic("a", 4)), ErrorKind::LimitReached);
    mgr.create_partition("a-2").unwrap();
    let e = mgr.create_partition("c-0").err().expect("refused");
    assert!(matches!(
        e,
        StorageError::PartitionLimit {
            new: 1,
            held: 3,
            max: 3
        }
    ));
    assert_eq!(
        e.to_string(),
        "creating 1 partition(s) would make 4 on this broker, more than max.broker.partitions (3)"
    );
    assert_eq!(dirs(tmp.path()), ["a-0", "a-1", "a-2"]);
    mgr.close().unwrap();
    // A lower limit later loads every partition there and refuses new ones.
    let mgr = open(tmp.path(), &c);
    mgr.set_max_partitions(1);
    assert_eq!(mgr.partitions().len(), 3);
    assert_eq!(kind(mgr.create_partition("a-3")), ErrorKind::LimitReached);
    mgr.delete_topic("a").unwrap();
    mgr.create_partition("d-0").unwrap();
    mgr.close().unwrap();
}

#[test]
fn a_creation_that_fails_half_way_leaves_no_partition_behind() {
    let tmp = tempfile::tempdir().unwrap();
    let c = LogConfig::default();
    let mgr = open(tmp.path(), &c);
    // A stray file where partition 3 would go: the fourth creation fails.
    std::fs::write(tmp.path().join("t-3"), b"in the way").unwrap();
    assert_eq!(kind(mgr.create_topic("t", 6)), ErrorKind::Exists);
    assert_eq!(dirs(tmp.path()), Vec::<String>::new());
    assert!(mgr.topic("t").is_none());
    mgr.create_topic("t", 1).unwrap();
    assert_eq!(kind(mgr.grow_topic("t", 5)), ErrorKind::Exists);
    assert_eq!(dirs(tmp.path()), ["t-0"]);
    assert_eq!(mgr.topic("t").unwrap().partitions.len(), 1);
    // Configs that cannot be set undo the topic too.
    assert_eq!(
        kind(mgr.create_topic_configured("u", 2, &[("retention.ms", "-2")])),
        ErrorKind::InvalidConfig
    );
    assert!(!tmp.path().join("u-0").exists());
    mgr.close().unwrap();
    // The checkpoints name only what is there.
    let rp = std::fs::read_to_string(tmp.path().join("recovery-point-offset-checkpoint")).unwrap();
    assert_eq!(rp, "0\n1\nt 0 0\n", "the recovery point checkpoint");
}
