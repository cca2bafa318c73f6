//! A partition's producer-state files, read as Kafka reads them and printed
//! as kafka-dump-log prints them (pure: bytes in, lines out).
//!
//! - `<offset>.snapshot` (`ProducerStateManager.readSnapshot`): an int16
//!   version (1), then the `ProducerSnapshot` message: a uint32 CRC-32C of
//!   every byte after it, and the producer entries.
//! - `<offset>.txnindex` (`TransactionIndex`, `AbortedTxn`): 34-byte entries
//!   `{version int16, producerId, firstOffset, lastOffset, lastStableOffset}`
//!   (int64s); a partial entry at the end is not read. Kafka takes the
//!   version from the entry's first byte.

use super::schema::{
    INT16, INT32, INT64, Message, Struct, StructValue, Type, UINT32, Value, Versions, decode,
    encode, f, only,
};

static PRODUCER_ENTRY: Struct = Struct::new(
    "ProducerEntry",
    &[
        f("producerId", INT64, only(1)),
        f("epoch", INT16, only(1)),
        f("lastSequence", INT32, only(1)),
        f("lastOffset", INT64, only(1)),
        f("offsetDelta", INT32, only(1)),
        f("timestamp", INT64, only(1)),
        f("coordinatorEpoch", INT32, only(1)),
        f("currentTxnFirstOffset", INT64, only(1)),
    ],
);

/// `storage/src/main/resources/message/ProducerSnapshot.json`
pub static PRODUCER_SNAPSHOT: Message = Message {
    name: "ProducerSnapshot",
    api_key: -1,
    valid: only(1),
    flexible: Versions::NONE,
    body: Struct::new(
        "ProducerSnapshot",
        &[
            f("crc", UINT32, only(1)),
            f(
                "producerEntries",
                Type::Array(&Type::Struct(&PRODUCER_ENTRY)),
                only(1),
            ),
        ],
    ),
};

/// One entry of a producer snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerEntry {
    pub producer_id: i64,
    pub epoch: i16,
    pub last_sequence: i32,
    pub last_offset: i64,
    pub offset_delta: i32,
    pub timestamp: i64,
    pub coordinator_epoch: i32,
    pub current_txn_first_offset: i64,
}

const FIELDS: usize = 8;

impl ProducerEntry {
    fn from_value(v: &StructValue) -> ProducerEntry {
        let n = |i: usize| match v.fields.get(i) {
            Some(Value::Int(n)) => *n,
            _ => 0,
        };
        ProducerEntry {
            producer_id: n(0),
            epoch: n(1) as i16,
            last_sequence: n(2) as i32,
            last_offset: n(3),
            offset_delta: n(4) as i32,
            timestamp: n(5),
            coordinator_epoch: n(6) as i32,
            current_txn_first_offset: n(7),
        }
    }

    fn to_value(self) -> StructValue {
        let fields = [
            self.producer_id,
            self.epoch as i64,
            self.last_sequence as i64,
            self.last_offset,
            self.offset_delta as i64,
            self.timestamp,
            self.coordinator_epoch as i64,
            self.current_txn_first_offset,
        ];
        debug_assert_eq!(fields.len(), FIELDS);
        StructValue {
            fields: fields.into_iter().map(Value::Int).collect(),
            unknown_tagged: Vec::new(),
        }
    }

    /// kafka-dump-log's line for the entry (`DumpLogSegments.dumpProducerIdSnapshot`).
    pub fn dump_line(&self) -> String {
        let txn = if self.current_txn_first_offset >= 0 {
            format!("OptionalLong[{}]", self.current_txn_first_offset)
        } else {
            "OptionalLong.empty".to_string()
        };
        let mut line = format!(
            "producerId: {} producerEpoch: {} coordinatorEpoch: {} currentTxnFirstOffset: {} lastTimestamp: {} ",
            self.producer_id, self.epoch, self.coordinator_epoch, txn, self.timestamp
        );
        // Kafka keeps batch metadata only for an entry with a last offset.
        if self.last_offset >= 0 {
            line.push_str(&format!(
                "firstSequence: {} lastSequence: {} lastOffset: {} offsetDelta: {} timestamp: {}",
                decrement_sequence(self.last_sequence, self.offset_delta),
                self.last_sequence,
                self.last_offset,
                self.offset_delta,
                self.timestamp
            ));
        }
        line
    }
}

/// `DefaultRecordBatch.decrementSequence`: sequences wrap at `i32::MAX`.
fn decrement_sequence(sequence: i32, decrement: i32) -> i32 {
    if sequence < decrement {
        (i32::MAX - (decrement - sequence)).wrapping_add(1)
    } else {
        sequence - decrement
    }
}

/// Reads a producer snapshot; the error is Kafka's `CorruptSnapshotException` message.
pub fn read_producer_snapshot(buf: &[u8]) -> Result<Vec<ProducerEntry>, String> {
    let invalid = |e: String| format!("Snapshot failed schema validation: {e}");
    let version = match buf.get(..2) {
        Some(b) => i16::from_be_bytes([b[0], b[1]]),
        None => return Err(invalid("null".into())),
    };
    if !PRODUCER_SNAPSHOT.valid.contains(version) {
        return Err(invalid(format!(
            "Snapshot contained an unknown file version {version}"
        )));
    }
    let (v, _) = decode(&PRODUCER_SNAPSHOT, version, &buf[2..]).map_err(|e| invalid(e.0))?;
    let stored = match v.fields.first() {
        Some(Value::Int(c)) => *c as u32,
        _ => 0,
    };
    let computed = crc32c::crc32c(&buf[6..]);
    if stored != computed {
        return Err(format!(
            "Snapshot is corrupt (CRC is no longer valid). Stored crc: {stored}. Computed crc: {computed}"
        ));
    }
    let entries = match v.fields.get(1) {
        Some(Value::Array(Some(items))) => items
            .iter()
            .filter_map(|i| match i {
                Value::Struct(Some(s)) => Some(ProducerEntry::from_value(s)),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    Ok(entries)
}

/// A producer snapshot's bytes, as Kafka's `writeSnapshot` lays them out.
pub fn write_producer_snapshot(entries: &[ProducerEntry]) -> Vec<u8> {
    let value = StructValue {
        fields: vec![
            Value::Int(0),
            Value::Array(Some(
                entries
                    .iter()
                    .map(|e| Value::Struct(Some(e.to_value())))
                    .collect(),
            )),
        ],
        unknown_tagged: Vec::new(),
    };
    let mut out = 1i16.to_be_bytes().to_vec();
    encode(&PRODUCER_SNAPSHOT, 1, &value, &mut out).expect("the snapshot schema fits its values");
    let crc = crc32c::crc32c(&out[6..]);
    out[2..6].copy_from_slice(&crc.to_be_bytes());
    out
}

/// One aborted transaction of a `.txnindex`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    /// The entry's first byte, as Kafka's `AbortedTxn.version()` reads it.
    pub version: i8,
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: i64,
    pub last_stable_offset: i64,
}

/// Bytes of one `.txnindex` entry.
pub const ABORTED_TXN_SIZE: usize = 34;

impl AbortedTxn {
    /// kafka-dump-log's line for the entry (`DumpLogSegments.dumpTxnIndex`).
    pub fn dump_line(&self) -> String {
        format!(
            "version: {} producerId: {} firstOffset: {} lastOffset: {} lastStableOffset: {}",
            self.version,
            self.producer_id,
            self.first_offset,
            self.last_offset,
            self.last_stable_offset
        )
    }

    /// The entry's 34 bytes, version 0.
    pub fn to_bytes(&self) -> [u8; ABORTED_TXN_SIZE] {
        let mut b = [0u8; ABORTED_TXN_SIZE];
        b[0] = self.version as u8;
        b[2..10].copy_from_slice(&self.producer_id.to_be_bytes());
        b[10..18].copy_from_slice(&self.first_offset.to_be_bytes());
        b[18..26].copy_from_slice(&self.last_offset.to_be_bytes());
        b[26..34].copy_from_slice(&self.last_stable_offset.to_be_bytes());
        b
    }
}

/// The entries of a `.txnindex`, stopping with Kafka's error at an entry of
/// a version above 0 (`Unexpected aborted transaction version ...`, with
/// `file` naming the index).
pub fn read_txn_index(buf: &[u8], file: &str) -> (Vec<AbortedTxn>, Option<String>) {
    let mut out = Vec::new();
    for e in buf.chunks_exact(ABORTED_TXN_SIZE) {
        let long = |at: usize| i64::from_be_bytes(e[at..at + 8].try_into().expect("8 bytes"));
        let txn = AbortedTxn {
            version: e[0] as i8,
            producer_id: long(2),
            first_offset: long(10),
            last_offset: long(18),
            last_stable_offset: long(26),
        };
        if txn.version > 0 {
            let err = format!(
                "Unexpected aborted transaction version {} in transaction index {file}, current version is 0",
                txn.version
            );
            return (out, Some(err));
        }
        out.push(txn);
    }
    (out, None)
}
