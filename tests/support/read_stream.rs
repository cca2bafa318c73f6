//! A partition's consumer stream (`log`) read whole, as a reader of the
//! file would: reads of a set size up to its length, then one past it.

use commitfs::storage::PartitionLog;

/// The whole stream, read in `chunk`-byte reads up to its length, and
/// nothing past it.
pub fn read_stream(log: &PartitionLog, chunk: usize) -> Vec<u8> {
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
