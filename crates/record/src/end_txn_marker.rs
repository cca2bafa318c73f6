//! Transaction markers (Kafka's `EndTransactionMarker` and
//! `MemoryRecords.withEndTransactionMarker`): the one-record control batch a
//! transaction coordinator writes to every partition of a transaction when
//! it commits or aborts, and the reading of one back.
//!
//! The record's key is `{version int16 0, type int16}` (ABORT 0, COMMIT 1,
//! `ControlRecordType`); its value `{version int16 0, coordinator_epoch
//! int32}`. The batch is uncompressed, transactional and control, carries
//! the producer's id and epoch and no sequence, and is 78 bytes.

use super::batch::{ATTRIBUTES_OFFSET, BatchHeader, CRC_OFFSET, NO_SEQUENCE};

/// `ControlRecordType.ABORT` and `COMMIT`.
pub const ABORT: i16 = 0;
pub const COMMIT: i16 = 1;

/// A marker batch's length on disk.
pub const MARKER_BATCH_LEN: usize = 78;

/// Transactional (0x10) and control (0x20); the codec and timestamp type
/// bits are 0 (none, CreateTime).
const MARKER_ATTRIBUTES: i16 = 0x30;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MarkerType {
    Abort,
    Commit,
}

impl MarkerType {
    pub fn type_id(self) -> i16 {
        match self {
            MarkerType::Abort => ABORT,
            MarkerType::Commit => COMMIT,
        }
    }

    /// As kafka-dump-log names it.
    pub fn name(self) -> &'static str {
        match self {
            MarkerType::Abort => "ABORT",
            MarkerType::Commit => "COMMIT",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EndTxnMarker {
    pub kind: MarkerType,
    pub coordinator_epoch: i32,
}

/// Where and for whom a marker batch is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MarkerBatch {
    pub base_offset: i64,
    pub partition_leader_epoch: i32,
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// The base and max timestamp, and the record's: the write's time.
    pub timestamp: i64,
}

/// `MemoryRecords.withEndTransactionMarker`: the 78 bytes of the batch.
pub fn marker_batch(b: &MarkerBatch, marker: EndTxnMarker) -> Vec<u8> {
    let mut out = Vec::with_capacity(MARKER_BATCH_LEN);
    out.extend_from_slice(&b.base_offset.to_be_bytes());
    out.extend_from_slice(&((MARKER_BATCH_LEN - 12) as i32).to_be_bytes());
    out.extend_from_slice(&b.partition_leader_epoch.to_be_bytes());
    out.push(2);
    out.extend_from_slice(&[0; 4]); // the CRC, once the rest is there
    out.extend_from_slice(&MARKER_ATTRIBUTES.to_be_bytes());
    out.extend_from_slice(&0i32.to_be_bytes()); // last offset delta
    out.extend_from_slice(&b.timestamp.to_be_bytes());
    out.extend_from_slice(&b.timestamp.to_be_bytes());
    out.extend_from_slice(&b.producer_id.to_be_bytes());
    out.extend_from_slice(&b.producer_epoch.to_be_bytes());
    out.extend_from_slice(&NO_SEQUENCE.to_be_bytes());
    out.extend_from_slice(&1i32.to_be_bytes());
    // The record: length 16 (zigzag 32), attributes, timestamp delta and
    // offset delta 0, a 4-byte key, a 6-byte value, no headers.
    out.extend_from_slice(&[0x20, 0, 0, 0, 0x08]);
    out.extend_from_slice(&0i16.to_be_bytes());
    out.extend_from_slice(&marker.kind.type_id().to_be_bytes());
    out.push(0x0c);
    out.extend_from_slice(&0i16.to_be_bytes());
    out.extend_from_slice(&marker.coordinator_epoch.to_be_bytes());
    out.push(0);
    let crc = crc32c::crc32c(&out[ATTRIBUTES_OFFSET..]);
    out[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
    out
}

/// [`marker_batch`], and its header: what a log indexes the marker by,
/// without parsing it back.
pub fn marker_batch_parsed(b: &MarkerBatch, marker: EndTxnMarker) -> (Vec<u8>, BatchHeader) {
    let bytes = marker_batch(b, marker);
    let crc = u32::from_be_bytes([bytes[17], bytes[18], bytes[19], bytes[20]]);
    (bytes, marker_header(b, crc))
}

/// The header of the batch [`marker_batch`] writes for `b`, whose CRC is
/// `crc`.
fn marker_header(b: &MarkerBatch, crc: u32) -> BatchHeader {
    BatchHeader {
        base_offset: b.base_offset,
        batch_length: (MARKER_BATCH_LEN - 12) as i32,
        partition_leader_epoch: b.partition_leader_epoch,
        magic: 2,
        crc,
        attributes: MARKER_ATTRIBUTES,
        last_offset_delta: 0,
        base_timestamp: b.timestamp,
        max_timestamp: b.timestamp,
        producer_id: b.producer_id,
        producer_epoch: b.producer_epoch,
        base_sequence: NO_SEQUENCE,
        record_count: 1,
    }
}

/// Kafka's `ControlRecordType.parseTypeId`: the type of a control record's
/// key, with Kafka's messages for a key it refuses. A version above 0 is
/// read as version 0, as Kafka does.
pub fn control_type_of(key: &[u8]) -> Result<i16, String> {
    if key.len() < 4 {
        return Err(format!(
            "Invalid value size found for end control record key. Must have at least 4 bytes, but found only {}",
            key.len()
        ));
    }
    let version = i16::from_be_bytes([key[0], key[1]]);
    if version < 0 {
        return Err(format!(
            "Invalid version found for control record: {version}. May indicate data corruption"
        ));
    }
    Ok(i16::from_be_bytes([key[2], key[3]]))
}

/// Kafka's `EndTransactionMarker.deserialize`: the marker a control record
/// holds, or why it holds none (a control record of another type, a key or
/// value Kafka refuses), in Kafka's words.
pub fn read_marker(key: Option<&[u8]>, value: Option<&[u8]>) -> Result<EndTxnMarker, String> {
    let kind = match control_type_of(key.unwrap_or(&[]))? {
        ABORT => MarkerType::Abort,
        COMMIT => MarkerType::Commit,
        other => {
            return Err(format!(
                "Invalid control record type for end transaction marker: {other}"
            ));
        }
    };
    let value = value.unwrap_or(&[]);
    if value.len() < 6 {
        return Err(format!(
            "Invalid value size found for end transaction marker. Must have at least 6 bytes, but found only {}",
            value.len()
        ));
    }
    let version = i16::from_be_bytes([value[0], value[1]]);
    if version < 0 {
        return Err(format!(
            "Invalid version found for end transaction marker: {version}. May indicate data corruption"
        ));
    }
    let coordinator_epoch = i32::from_be_bytes([value[2], value[3], value[4], value[5]]);
    Ok(EndTxnMarker {
        kind,
        coordinator_epoch,
    })
}

/// The marker a control batch holds (Kafka's `ProducerAppendInfo.append`
/// reads its first record): none when the batch is empty (the cleaner left
/// only its header); Kafka's message when its record is not a marker.
pub fn marker_of_batch(batch: &crate::Batch) -> Result<Option<EndTxnMarker>, String> {
    let records = batch.records().map_err(|e| e.to_string())?;
    records
        .first()
        .map(|r| read_marker(r.key.as_deref(), r.value.as_deref()))
        .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Batch;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    /// The shared notes' vector B.1: an ABORT marker at offset 100, leader
    /// epoch 5, producer 4000 epoch 3, coordinator epoch 7, time
    /// 1700000000000, worked out from Kafka's `withEndTransactionMarker`.
    #[test]
    fn an_abort_marker_is_kafkas_bytes() {
        let b = MarkerBatch {
            base_offset: 100,
            partition_leader_epoch: 5,
            producer_id: 4000,
            producer_epoch: 3,
            timestamp: 1_700_000_000_000,
        };
        let bytes = marker_batch(
            &b,
            EndTxnMarker {
                kind: MarkerType::Abort,
                coordinator_epoch: 7,
            },
        );
        // The note's dump, line by line.
        let want = [
            "00 00 00 00 00 00 00 64 00 00 00 42 00 00 00 05",
            "02 3a 72 24 c6 00 30 00 00 00 00 00 00 01 8b cf",
            "e5 68 00 00 00 01 8b cf e5 68 00 00 00 00 00 00",
            "00 0f a0 00 03 ff ff ff ff 00 00 00 01 20 00 00",
            "00 08 00 00 00 00 0c 00 00 00 00 00 07 00",
        ]
        .concat()
        .replace(' ', "");
        assert_eq!(hex(&bytes), want);
        assert_eq!(bytes.len(), MARKER_BATCH_LEN);
        let kind = EndTxnMarker {
            kind: MarkerType::Abort,
            coordinator_epoch: 7,
        };
        let (same, header) = marker_batch_parsed(&b, kind);
        assert_eq!(same, bytes);
        assert_eq!(header, BatchHeader::parse(&bytes).unwrap());
    }

    /// Kafka's own decoder (the kafka-protocol crate) reads a COMMIT marker
    /// back: a control, transactional batch of one record whose key and
    /// value are the marker's.
    #[test]
    fn kafka_protocol_reads_a_commit_marker() {
        use kafka_protocol::records::RecordBatchDecoder;
        let bytes = marker_batch(
            &MarkerBatch {
                base_offset: 42,
                partition_leader_epoch: 0,
                producer_id: 7,
                producer_epoch: 1,
                timestamp: 1_800_000_000_000,
            },
            EndTxnMarker {
                kind: MarkerType::Commit,
                coordinator_epoch: 9,
            },
        );
        let mut buf = bytes::Bytes::from(bytes.clone());
        let set = RecordBatchDecoder::decode(&mut buf).unwrap();
        let rec = &set.records[0];
        assert_eq!(set.records.len(), 1);
        assert!(rec.control && rec.transactional);
        assert_eq!(
            (rec.offset, rec.producer_id, rec.producer_epoch),
            (42, 7, 1)
        );
        assert_eq!(rec.sequence, -1);
        assert_eq!(rec.timestamp, 1_800_000_000_000);
        let key = rec.key.as_deref().unwrap();
        let value = rec.value.as_deref().unwrap();
        assert_eq!(key, [0, 0, 0, 1]);
        assert_eq!(
            read_marker(Some(key), Some(value)),
            Ok(EndTxnMarker {
                kind: MarkerType::Commit,
                coordinator_epoch: 9
            })
        );
        // Our own batch reader agrees on the header, and on the marker.
        let batch = Batch::parse(&bytes).unwrap();
        assert!(batch.header.is_control() && batch.header.is_transactional());
        batch.verify_crc().unwrap();
        assert_eq!(
            marker_of_batch(&batch),
            Ok(Some(EndTxnMarker {
                kind: MarkerType::Commit,
                coordinator_epoch: 9
            }))
        );
        // The cleaner's bare header of it holds none.
        let mut empty = Vec::new();
        crate::retain::empty_header(&batch.header, &mut empty);
        assert_eq!(marker_of_batch(&Batch::parse(&empty).unwrap()), Ok(None));
    }

    /// What Kafka refuses, in its words; a newer version is read as 0.
    #[test]
    fn keys_and_values_kafka_refuses() {
        let ok = [0u8, 0, 0, 0, 0, 3];
        assert_eq!(
            read_marker(Some(&[0, 0, 0]), Some(&ok)).unwrap_err(),
            "Invalid value size found for end control record key. Must have at least 4 bytes, but found only 3"
        );
        assert_eq!(
            read_marker(Some(&[0xff, 0xff, 0, 0]), Some(&ok)).unwrap_err(),
            "Invalid version found for control record: -1. May indicate data corruption"
        );
        assert!(
            read_marker(Some(&[0, 0, 0, 3]), Some(&ok))
                .unwrap_err()
                .starts_with("Invalid control record type")
        );
        assert_eq!(
            read_marker(Some(&[0, 0, 0, 0]), Some(&[0, 0, 0])).unwrap_err(),
            "Invalid value size found for end transaction marker. Must have at least 6 bytes, but found only 3"
        );
        assert_eq!(
            read_marker(Some(&[0, 0, 0, 0]), Some(&[0x80, 0, 0, 0, 0, 1])).unwrap_err(),
            "Invalid version found for end transaction marker: -32768. May indicate data corruption"
        );
        assert_eq!(
            read_marker(Some(&[0, 5, 0, 1]), Some(&[0, 2, 0, 0, 0, 4, 0xaa])),
            Ok(EndTxnMarker {
                kind: MarkerType::Commit,
                coordinator_epoch: 4
            })
        );
    }
}
