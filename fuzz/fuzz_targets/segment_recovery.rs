//! Segment recovery: a valid segment followed by arbitrary bytes, opened after
//! an unclean shutdown, must recover to a valid prefix that keeps every
//! original batch, and take appends at the right offset.
//!
//! The judge is not commitfs's reader: the kept bytes are split into
//! frames by their 12-byte prefix, and each frame is checked by the rules
//! of Kafka's recovery (`LogSegment.recover`: whole, at least a batch
//! header, magic 2, CRC-32C computed here with the `crc32c` crate, offsets
//! never going back, a last offset the index can hold), with the headers
//! cross-checked by kafka-protocol's `RecordBatchDecoder` and the original
//! batches decoded by it record by record. Recovery must also keep as much
//! as those rules allow: the bytes after what it kept must not start with
//! a frame the rules accept.
#![no_main]

use commitfs::record::NewRecord;
use commitfs::storage::{LogConfig, LogManager, OpenOptions};
use kafka_protocol::records::RecordBatchDecoder;
use libfuzzer_sys::fuzz_target;

/// Kafka's `RECORD_BATCH_OVERHEAD` less the 12-byte frame prefix: the
/// smallest batch length a frame can declare.
const MIN_BATCH_LEN: usize = 61 - 12;

/// A frame at the start of `bytes`, if one is whole: its length.
fn frame_len(bytes: &[u8]) -> Option<usize> {
    let len = i32::from_be_bytes(bytes.get(8..12)?.try_into().unwrap());
    let end = 12usize.checked_add(usize::try_from(len).ok()?)?;
    (end <= bytes.len()).then_some(end)
}

/// Whether `frame` is a batch recovery keeps after offsets below `min`
/// (segment base offset 0); its next offset if so.
fn accepted(frame: &[u8], min: i64) -> Option<i64> {
    if frame.len() < 12 + MIN_BATCH_LEN || frame[16] != 2 {
        return None;
    }
    let stored = u32::from_be_bytes(frame[17..21].try_into().unwrap());
    if crc32c::crc32c(&frame[21..]) != stored {
        return None;
    }
    let base = i64::from_be_bytes(frame[0..8].try_into().unwrap());
    let last = base + i64::from(i32::from_be_bytes(frame[23..27].try_into().unwrap()));
    // A relative offset an index holds: Kafka's rule (Int.MaxValue), the one
    // commitfs's roll keeps to. Kafka's recovery splits a segment past that
    // rather than cutting it.
    if base < min || !(0..=i32::MAX as i64).contains(&last) {
        return None;
    }
    Some(last + 1)
}

fuzz_target!(|data: &[u8]| {
    // A tmpfs when there is one: every open and close fsyncs checkpoints.
    let shm = std::path::Path::new("/dev/shm");
    let tmp = if shm.is_dir() {
        tempfile::tempdir_in(shm).unwrap()
    } else {
        tempfile::tempdir().unwrap()
    };
    let dir = tmp.path();
    let mut config = LogConfig::default();
    config.set("segment.index.bytes", "4096").unwrap();
    config.set("index.interval.bytes", "100").unwrap();
    let mgr = LogManager::open(dir, config.clone(), OpenOptions::default()).unwrap();
    let log = mgr.create_partition("f-0").unwrap();
    // The first input byte picks how many batches the valid part has.
    let batches = data.first().map_or(1, |b| 1 + (*b % 8) as usize);
    let mut leo = 0i64;
    let mut values: Vec<Vec<u8>> = Vec::new();
    for i in 0..batches {
        let v = format!("value-{i}");
        let recs: Vec<NewRecord> = (0..=i % 3).map(|_| NewRecord::value(v.as_bytes())).collect();
        values.extend(recs.iter().map(|_| v.as_bytes().to_vec()));
        leo = log.append(&recs).unwrap().last_offset + 1;
    }
    drop(log);
    drop(mgr); // no close: an unclean shutdown
    let seg = dir.join("f-0").join(format!("{:020}.log", 0));
    let valid = std::fs::read(&seg).unwrap();
    let mut bytes = valid.clone();
    bytes.extend_from_slice(data.get(1..).unwrap_or_default());
    std::fs::write(&seg, &bytes).unwrap();

    let mgr = LogManager::open(dir, config, OpenOptions::default()).unwrap();
    let log = mgr.partition("f-0").unwrap();
    let end = log.log_end_offset();
    assert!(end >= leo, "recovery lost valid batches: {end} < {leo}");
    let recovered = std::fs::read(&seg).unwrap();
    assert!(recovered.len() >= valid.len() && recovered.starts_with(&valid));
    assert!(bytes.starts_with(&recovered), "recovery kept bytes that were not there");

    // What is left is whole frames the rules accept, from the judge's reading.
    let mut pos = 0;
    let mut next = 0i64;
    while pos < recovered.len() {
        let len = frame_len(&recovered[pos..])
            .unwrap_or_else(|| panic!("recovery kept a torn frame at {pos}"));
        let frame = &recovered[pos..pos + len];
        next = accepted(frame, next)
            .unwrap_or_else(|| panic!("recovery kept a batch the rules refuse at {pos}"));
        // kafka-protocol reads the same header where it knows the codec.
        if let Ok(infos) = RecordBatchDecoder::decode_batch_info(&mut &frame[..]) {
            assert_eq!(infos.len(), 1, "one batch at {pos}");
            assert_eq!(infos[0].min_offset, i64::from_be_bytes(frame[0..8].try_into().unwrap()));
        }
        pos += len;
    }
    assert_eq!(next, end, "the log end is the last kept batch's next offset");
    // Nothing the rules accept was cut away.
    let rest = &bytes[recovered.len()..];
    if let Some(len) = frame_len(rest) {
        assert!(
            accepted(&rest[..len], next).is_none(),
            "recovery cut a batch the rules accept at {}",
            recovered.len()
        );
    }
    // The original batches, decoded record by record by kafka-protocol.
    let set = RecordBatchDecoder::decode_all(&mut &valid[..]).expect("the valid part decodes");
    let decoded: Vec<(i64, Vec<u8>)> = set
        .iter()
        .flat_map(|s| &s.records)
        .map(|r| (r.offset, r.value.as_deref().unwrap_or_default().to_vec()))
        .collect();
    let want: Vec<(i64, Vec<u8>)> = values.into_iter().enumerate().map(|(i, v)| (i as i64, v)).collect();
    assert_eq!(decoded, want, "the original records");

    let info = log.append(&[NewRecord::value(b"after")]).unwrap();
    assert_eq!(info.first_offset, end);
    assert_eq!(log.read(end).unwrap().value.as_deref(), Some(&b"after"[..]));
    drop(log);
    mgr.close().unwrap();
});
