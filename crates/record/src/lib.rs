//! The RecordBatch v2 codec: varints, the 61-byte header, CRC-32C, records.
//! Pure: no I/O, so it can be fuzzed and property-tested on its own.
//!
//! Also the records Kafka keeps in its internal topics and side files:
//! [`schema`] (Kafka's message-schema model and the tables of its internal
//! records), [`internal`] (`__consumer_offsets`, `__transaction_state`,
//! `__cluster_metadata`, `__share_group_state`), [`remote_log`]
//! (`__remote_log_metadata`), [`control`] (KRaft control records),
//! [`end_txn_marker`] (transaction markers), [`txn_log`] (`__transaction_state`
//! records as the coordinator writes them) and
//! [`state_files`] (producer snapshots, transaction indexes).
//!
//! Beside them, as pure as they are: [`names`] (Kafka's topic and partition
//! name rules) and [`error`] (the one vocabulary of what went wrong, which
//! every layer's error maps to and the edges map to an errno or a Kafka
//! code).

pub mod batch;
pub mod compression;
pub mod control;
pub mod end_txn_marker;
pub mod error;
pub mod internal;
pub mod names;
pub mod pack;
pub mod parsed;
pub mod records;
pub mod remote_log;
pub mod retain;
pub mod schema;
pub mod state_files;
pub mod txn_log;
pub mod validate;
pub mod values;
pub mod varint;

pub use batch::{
    Batch, BatchHeader, BatchIter, Compression, Frame, HEADER_LEN, LOG_OVERHEAD, TimestampType,
    compute_crc, peek_frame,
};
pub use compression::{MAX_DECOMPRESSED_SIZE, compress, decompress};
pub use pack::{EncodedBatch, TooLarge, encode_batch, encode_batch_compressed, encode_batches};
pub use parsed::{Framed, ParsedBatches};
pub use records::{Header, NewRecord, Record, batch_size, decode_record_at, decode_records};
pub use validate::{ValidBatch, assign_offset, set_log_append_time, validate_produced_batch};

/// Everything the codec can refuse. Never a panic: every input maps to one of these.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum RecordError {
    #[error("truncated batch: needed {needed} bytes, only {available} available")]
    Truncated { needed: usize, available: usize },
    #[error(
        "legacy message format (magic {magic}) at offset {base_offset} is not supported; only RecordBatch v2 (magic 2) is"
    )]
    UnsupportedMagic {
        magic: i8,
        base_offset: i64,
        /// Size of the legacy entry, so a reader can step over it.
        size: usize,
    },
    #[error(
        "CRC mismatch in batch at offset {base_offset}: stored {stored:#010x}, computed {computed:#010x}"
    )]
    CrcMismatch {
        base_offset: i64,
        stored: u32,
        computed: u32,
    },
    #[error("{} records section does not decompress: {reason}", .codec.name())]
    Decompress { codec: Compression, reason: String },
    #[error("{} records section decompresses to more than {limit} bytes", .codec.name())]
    DecompressedTooLarge { codec: Compression, limit: usize },
    #[error("corrupt batch: {0}")]
    Corrupt(String),
}
