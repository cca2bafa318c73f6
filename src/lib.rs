//! commitfs: Kafka-style partition logs, stored byte-for-byte the way Apache
//! Kafka stores them, and exposed as a FUSE filesystem.
//!
//! Layers, each usable without the ones above it:
//! - [`record`]: the RecordBatch v2 codec (pure, no I/O);
//! - [`storage`]: segments, indexes, partition logs, recovery, retention;
//! - [`fs`]: the FUSE tree over a backend: `storage`, or
//! - [`cluster`]: a Kafka cluster, through librdkafka.
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

pub mod backend;
pub mod cluster;
pub mod error;
pub mod fs;
pub mod kafka;
pub mod names;
pub mod record;
pub mod storage;
