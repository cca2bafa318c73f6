//! commitfs: Kafka-style partition logs, stored byte-for-byte the way Apache
//! Kafka stores them, and exposed as a FUSE filesystem.
//!
//! Layers, each usable without the ones above it:
//! - [`record`]: the RecordBatch v2 codec (pure, no I/O);
//! - [`storage`]: segments, indexes, partition logs, recovery, retention;
//! - [`fs`]: the FUSE tree over `storage`.

pub mod fs;
pub mod record;
pub mod storage;
