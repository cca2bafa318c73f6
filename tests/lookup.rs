//! Lookups of single records in large batches: a batch of a segment whose
//! CRCs this process checked is read only up to about the record, and
//! whole when a later record of it is asked for; a segment loaded from
//! disk is read whole and CRC-checked. Every path must give the record.

use commitfs::record::NewRecord;
use commitfs::storage::{LogConfig, LogManager, OpenOptions, PartitionLog};

fn value(i: usize) -> Vec<u8> {
    // Lengths vary, so a record's place is not its offset times a size.
    let mut v = format!("{i:08}-").into_bytes();
    v.resize(20 + (i * 7919) % 400, b'a' + (i % 26) as u8);
    v
}

const BATCHES: usize = 3;
const PER_BATCH: usize = 3000;

fn fill(log: &PartitionLog) {
    for b in 0..BATCHES {
        let vals: Vec<Vec<u8>> = (0..PER_BATCH).map(|i| value(b * PER_BATCH + i)).collect();
        let recs: Vec<NewRecord> = vals.iter().map(|v| NewRecord::value(v)).collect();
        assert_eq!(log.append(&recs).unwrap().batches, 1);
    }
}

fn check(log: &PartitionLog, order: &[usize]) {
    for &i in order {
        let r = log.read(i as i64).unwrap();
        assert_eq!(r.offset, i as i64);
        assert_eq!(r.value.unwrap(), value(i), "offset {i}");
    }
}

fn orders() -> Vec<Vec<usize>> {
    let n = BATCHES * PER_BATCH;
    let mut x = 12345usize;
    let random = (0..2000)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % n
        })
        .collect();
    vec![(0..n).collect(), (0..n).rev().collect(), random]
}

#[test]
fn every_record_of_large_batches_reads_back_in_any_order() {
    let tmp = tempfile::tempdir().unwrap();
    let config = LogConfig::default();
    let mgr = LogManager::open(tmp.path(), config.clone(), OpenOptions::default()).unwrap();
    let log = mgr.create_partition("t-0").unwrap();
    fill(&log);
    for order in orders() {
        check(&log, &order);
    }
    // A lookup near the start of a large batch reads its start only.
    let batch_bytes = log.status().unwrap().size_bytes / BATCHES as u64;
    log.read((2 * PER_BATCH) as i64).unwrap();
    let before = log.status().unwrap().lookup_bytes_read;
    log.read(10).unwrap();
    let read = log.status().unwrap().lookup_bytes_read - before;
    assert!(
        read < batch_bytes / 2,
        "{read} bytes of a {batch_bytes}-byte batch"
    );
    drop(log);
    mgr.close().unwrap();

    // Loaded from disk: whole batches, CRC-checked, the same records.
    let mgr = LogManager::open(tmp.path(), config, OpenOptions::default()).unwrap();
    let log = mgr.partition("t-0").unwrap();
    for order in orders() {
        check(&log, &order);
    }
    drop(log);
    mgr.close().unwrap();
}

#[test]
fn a_damaged_batch_is_caught_where_its_crc_was_not_checked_here() {
    let tmp = tempfile::tempdir().unwrap();
    let config = LogConfig::default();
    let mgr = LogManager::open(tmp.path(), config.clone(), OpenOptions::default()).unwrap();
    let log = mgr.create_partition("t-0").unwrap();
    fill(&log);
    drop(log);
    mgr.close().unwrap();
    // Flip a byte inside the second batch's records.
    let path = tmp.path().join("t-0").join(format!("{:020}.log", 0));
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x55;
    std::fs::write(&path, &bytes).unwrap();
    let mgr = LogManager::open(tmp.path(), config, OpenOptions::default()).unwrap();
    let log = mgr.partition("t-0").unwrap();
    let err = log.read(PER_BATCH as i64 + 5).unwrap_err();
    assert!(
        err.to_string().contains("CRC") || err.to_string().contains("crc"),
        "{err}"
    );
    drop(log);
    mgr.close().unwrap();
}
