//! Segment recovery: a valid segment followed by arbitrary bytes, opened after
//! an unclean shutdown, must recover to a valid prefix that keeps every
//! original batch, and take appends at the right offset.
#![no_main]

use commitfs::record::{BatchIter, NewRecord};
use commitfs::storage::{LogConfig, LogManager, OpenOptions};
use libfuzzer_sys::fuzz_target;

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
    for i in 0..batches {
        let v = format!("value-{i}");
        let recs: Vec<NewRecord> = (0..=i % 3).map(|_| NewRecord::value(v.as_bytes())).collect();
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
    // What is left is whole, valid batches with offsets that never go back.
    let mut next = 0;
    let mut size = 0;
    for item in BatchIter::new(&recovered) {
        let (pos, b) = item.expect("recovered log holds whole batches");
        assert!(b.is_valid(), "batch at {pos} has a bad CRC");
        assert!(b.header.base_offset >= next, "offsets go back at {pos}");
        next = b.header.next_offset();
        size = pos + b.size();
    }
    assert_eq!(size, recovered.len());
    assert_eq!(next, end);
    let info = log.append(&[NewRecord::value(b"after")]).unwrap();
    assert_eq!(info.first_offset, end);
    assert_eq!(log.read(end).unwrap().value.as_deref(), Some(&b"after"[..]));
    drop(log);
    mgr.close().unwrap();
});
