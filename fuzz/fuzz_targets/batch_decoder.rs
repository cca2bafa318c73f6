//! The batch decoder on arbitrary bytes: framing, header, CRC and records
//! (decompressing where the attributes say so) must return errors, never
//! panic, and agree with each other.
#![no_main]

use commitfs::record::{Batch, BatchIter, decode_record_at, peek_frame};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = peek_frame(data);
    if let Ok(b) = Batch::parse(data) {
        assert!(b.size() <= data.len());
        // The CRC rule, from the bytes and not the decoder: CRC-32C of
        // everything after the CRC field (byte 21) to the end of the batch,
        // against the big-endian value stored at byte 17.
        let stored = u32::from_be_bytes(data[17..21].try_into().unwrap());
        let valid = crc32c::crc32c(&data[21..b.size()]) == stored;
        assert_eq!(b.is_valid(), valid, "is_valid disagrees with the CRC rule");
        assert_eq!(b.verify_crc().is_ok(), valid, "verify_crc disagrees with the CRC rule");
        if let Ok(records) = b.records() {
            assert_eq!(records.len(), b.header.record_count as usize);
            // Decoding one record by offset agrees with decoding them all.
            let section = b.uncompressed_section().expect("records() decompressed it");
            for r in &records {
                let one = decode_record_at(&b.header, &section, r.offset).expect("same bytes");
                assert!(one.is_some_and(|o| o.offset == r.offset));
            }
        }
    }
    let mut end = 0;
    for item in BatchIter::new(data) {
        match item {
            Ok((pos, b)) => {
                assert_eq!(pos, end, "batches are adjacent");
                end = pos + b.size();
                assert!(end <= data.len());
                let _ = b.verify_crc();
                let _ = b.records();
            }
            Err(_) => break,
        }
    }
});
