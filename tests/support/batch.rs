//! Record batches encoded by kafka-protocol, so what commitfs stores and
//! reads is checked against another implementation of the format.

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

/// `records` (key, value), all at `timestamp`, written by producer (`pid`,
/// `epoch`) from sequence `seq`, as v2 batches: one batch, but for `seq`
/// `None`, which gives every record sequence -1 and so, as kafka-protocol
/// batches only records of consecutive sequences, a batch of its own.
pub fn encode(
    (pid, epoch): (i64, i16),
    seq: Option<i32>,
    transactional: bool,
    timestamp: i64,
    records: impl IntoIterator<Item = (Option<Bytes>, Option<Bytes>)>,
    compression: Compression,
) -> BytesMut {
    let records: Vec<Record> = (records.into_iter().enumerate())
        .map(|(i, (key, value))| Record {
            transactional,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: pid,
            producer_epoch: epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: seq.map_or(-1, |seq| seq + i as i32),
            timestamp,
            key,
            value,
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression,
    };
    RecordBatchEncoder::encode(&mut buf, &records, &options).unwrap();
    buf
}
