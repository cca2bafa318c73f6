//! A partition directory's segments as kafka-protocol's decoder reads them
//! (another implementation than commitfs's reader): every batch's CRC-32C
//! checked, every record decoded; offsets must strictly increase across
//! the whole log and lie inside their batch's range.

use std::path::Path;

use kafka_protocol::records::RecordBatchDecoder;

/// One record as a consumer reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rec {
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub timestamp: i64,
}

/// One batch, its header fields read from the bytes, its records decoded.
#[derive(Clone, Debug)]
pub struct DecodedBatch {
    pub segment: i64,
    pub base_offset: i64,
    pub last_offset: i64,
    pub producer_id: i64,
    pub delete_horizon: bool,
    /// A control batch (a transaction marker).
    pub control: bool,
    pub base_timestamp: i64,
    pub size: usize,
    pub records: Vec<Rec>,
}

/// The `.log` files of `dir`, in base offset order.
pub use super::kafka_support::log_bases as segment_bases;

/// Every batch of every segment of `dir`, decoded by kafka-protocol.
pub fn decode_dir(dir: &Path) -> Vec<DecodedBatch> {
    let mut out = Vec::new();
    let mut next = i64::MIN;
    for base in segment_bases(dir) {
        let path = dir.join(format!("{base:020}.log"));
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut pos = 0;
        let mut first = true;
        while pos < bytes.len() {
            let at = format!("{} at {pos}", path.display());
            assert!(bytes.len() - pos >= 61, "{at}: a torn batch header");
            let i64_at =
                |p: usize| i64::from_be_bytes(bytes[pos + p..pos + p + 8].try_into().unwrap());
            let len = i32::from_be_bytes(bytes[pos + 8..pos + 12].try_into().unwrap()) as usize;
            let end = pos + 12 + len;
            assert!(end <= bytes.len(), "{at}: a torn batch");
            let frame = &bytes[pos..end];
            let info = RecordBatchDecoder::decode_batch_info(&mut &frame[..])
                .unwrap_or_else(|e| panic!("{at}: {e}"));
            let set =
                RecordBatchDecoder::decode(&mut &frame[..]).unwrap_or_else(|e| panic!("{at}: {e}"));
            let info = &info[0];
            let delta = i32::from_be_bytes(frame[23..27].try_into().unwrap()) as i64;
            let (base_offset, last_offset) = (info.min_offset, info.min_offset + delta);
            if first {
                assert!(
                    base_offset >= base,
                    "{at}: a batch below its segment's base"
                );
                first = false;
            }
            assert!(
                base_offset >= next,
                "{at}: offsets go backwards ({base_offset} < {next})"
            );
            let records: Vec<Rec> = set
                .records
                .iter()
                .map(|r| Rec {
                    offset: r.offset,
                    key: r.key.as_ref().map(|k| k.to_vec()),
                    value: r.value.as_ref().map(|v| v.to_vec()),
                    timestamp: r.timestamp,
                })
                .collect();
            let mut prev = base_offset - 1;
            for r in &records {
                assert!(
                    r.offset > prev && r.offset <= last_offset,
                    "{at}: record offset {}",
                    r.offset
                );
                prev = r.offset;
            }
            next = last_offset + 1;
            out.push(DecodedBatch {
                segment: base,
                base_offset,
                last_offset,
                producer_id: info.producer_id,
                delete_horizon: info.delete_horizon,
                control: i16::from_be_bytes(frame[21..23].try_into().unwrap()) & 0x20 != 0,
                base_timestamp: i64_at(27),
                size: frame.len(),
                records,
            });
            pos = end;
        }
    }
    out
}

/// The records of `decode_dir`, from `from` on, in offset order.
pub fn records_from(dir: &Path, from: i64) -> Vec<Rec> {
    decode_dir(dir)
        .into_iter()
        .flat_map(|b| b.records)
        .filter(|r| r.offset >= from)
        .collect()
}
