//! The views the tree derives from a compacted partition (`cat log` and
//! its size, `committed`) against what a consumer reads, decoded by
//! kafka-protocol, after passes that come between a roll and the next read.

use commitfs::storage::PartitionLog;

use super::{compacted, consumed, open, put};

/// `value\n` per record a `read_uncommitted` consumer reads from the log start.
fn consumer_stream(log: &PartitionLog) -> Vec<u8> {
    let mut out = Vec::new();
    for (_, _, value) in consumed(log) {
        out.extend_from_slice(value.unwrap_or_default().as_bytes());
        out.push(b'\n');
    }
    out
}

/// The whole `log` stream, read in `chunk`-byte reads up to its length,
/// and nothing past it.
fn stream(log: &PartitionLog, chunk: usize) -> Vec<u8> {
    let len = log.stream_len().unwrap() as usize;
    let mut out = vec![0u8; len];
    let mut pos = 0;
    while pos < len {
        let end = (pos + chunk).min(len);
        let n = log.read_stream(pos as u64, &mut out[pos..end]).unwrap();
        assert!(n > 0, "no bytes at {pos} of a stream of {len}");
        pos += n;
    }
    assert_eq!(log.read_stream(len as u64, &mut [0u8; 8]).unwrap(), 0);
    out
}

fn committed(log: &PartitionLog) -> Vec<u8> {
    let len = log.committed_len().unwrap() as usize;
    let mut out = vec![0u8; len];
    let n = log.read_committed(0, &mut out).unwrap();
    assert_eq!(n, len);
    out
}

/// A roll counts the sealed segment's length in the append tally; the
/// cleaner swaps a cleaned segment in at the same base before any read of
/// `log` (the run: a time roll, then a background pass). The
/// length of the segment that went is not the one that came, in memory or
/// in `commitfs.streamlen` after a clean close.
#[test]
fn a_pass_between_a_roll_and_a_read_leaves_every_view_right() {
    let tmp = tempfile::tempdir().unwrap();
    let mgr = open(tmp.path());
    let log = compacted(&mgr, "c-0");
    for n in 0..400 {
        let (k, v) = (format!("k{}", n % 10), format!("k{}-v{n}", n % 10));
        put(&log, &[(&k, Some(&v))]);
    }
    log.roll().unwrap();
    put(&log, &[("kroll", Some("roll"))]);
    log.clean_now().unwrap().expect("a pass ran");
    let want = consumer_stream(&log);
    assert_eq!(want.iter().filter(|b| **b == b'\n').count(), 11);
    assert_eq!(log.stream_len().unwrap() as usize, want.len());
    assert_eq!(stream(&log, 4096), want);
    assert_eq!(stream(&log, 7), want);
    assert_eq!(committed(&log), want);
    drop(log);
    mgr.close().unwrap();

    let mgr = open(tmp.path());
    let log = mgr.partition("c-0").unwrap();
    assert_eq!(log.stream_len().unwrap() as usize, want.len());
    assert_eq!(stream(&log, 4096), want);
    assert_eq!(committed(&log), want);
    drop(log);
    mgr.close().unwrap();
}
