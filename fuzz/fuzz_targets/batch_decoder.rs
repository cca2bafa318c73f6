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
        assert_eq!(b.verify_crc().is_ok(), b.is_valid());
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
