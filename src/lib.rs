//! commitfs: Kafka-style partition logs, stored byte-for-byte the way Apache
//! Kafka stores them, and exposed as a FUSE filesystem.
//!
//! The layers are crates of one workspace, each usable without the ones
//! above it (data flows one way, down), and re-exported here under the names
//! the binary, the tests and the examples use:
//! - [`record`] (`commitfs-record`): the RecordBatch v2 codec and Kafka's
//!   record schemas (pure, no I/O), with [`names`] (Kafka's topic and
//!   partition name rules) and [`error`] (the one vocabulary of what went
//!   wrong, [`error::ErrorKind`]);
//! - [`storage`] (`commitfs-storage`): Kafka-exact local storage: segments,
//!   indexes, the local log and the partition above it, producer state,
//!   recovery, retention, and the timed work of all of them;
//! - [`backend`] (`commitfs-backend`): the seam between the tree and where
//!   partitions live: the traits, the local backend over `storage`, and an
//!   in-memory one;
//! - [`fs`] (`commitfs-fs`): the tree's semantics over any backend, and the
//!   thin FUSE adapter;
//! - [`kafka`] (`commitfs-kafka`): the Kafka listener over `storage`;
//! - [`cluster`] (`commitfs-cluster`): a backend over a Kafka cluster,
//!   through librdkafka.
//!
//! `fs` and `cluster` know only the seam, not each other; `kafka` knows
//! `storage` and the seam's group types. The `commitfs` binary's commands
//! (`src/cli/`) sit on top.
//!
//! The storage library on its own:
//!
//! ```
//! use commitfs::record::NewRecord;
//! use commitfs::storage::{LogConfig, LogManager, OpenOptions};
//!
//! let dir = tempfile::tempdir()?;
//! let mgr = LogManager::open(dir.path(), LogConfig::default(), OpenOptions::default())?;
//! let log = mgr.create_partition("orders-0")?;
//! let info = log.append(&[NewRecord::value(b"hello"), NewRecord::keyed(b"k", b"world")])?;
//! assert_eq!((info.first_offset, info.last_offset, info.batches), (0, 1, 1));
//! assert_eq!(log.read(1)?.key.as_deref(), Some(&b"k"[..]));
//! assert_eq!(log.stream_len()?, "hello\nworld\n".len() as u64);
//! drop(log);
//! mgr.close()?; // flushes, trims indexes, writes .kafka_cleanshutdown
//! assert!(dir.path().join(".kafka_cleanshutdown").exists());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub use commitfs_backend as backend;
pub use commitfs_cluster as cluster;
pub use commitfs_fs as fs;
pub use commitfs_kafka as kafka;
pub use commitfs_record as record;
pub use commitfs_record::{error, names};
pub use commitfs_storage as storage;
