//! The views the tree derives from a compacted partition (`cat log` and
//! its size, `committed`) against what a consumer reads, decoded by
//! kafka-protocol, after passes that come between a roll and the next read.

use commitfs::storage::PartitionLog;

use super::read_stream::read_stream;
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
    // A lookup keeps the batch it read: offset 0's, which the pass removes.
    assert_eq!(log.read(0).unwrap().value.as_deref(), Some(&b"k0-v0"[..]));
    log.clean_now().unwrap().expect("a pass ran");
    let want = consumer_stream(&log);
    assert_eq!(want.iter().filter(|b| **b == b'\n').count(), 11);
    assert!(
        matches!(
            log.read(0),
            Err(commitfs::storage::StorageError::RecordNotFound(0))
        ),
        "offset 0 was cleaned away: {:?}",
        log.read(0).map(|r| r.value)
    );
    let offsets: Vec<i64> = consumed(&log).iter().map(|(o, _, _)| *o).collect();
    assert_eq!(log.record_offsets(0, usize::MAX).unwrap(), offsets);
    assert_eq!(log.stream_len().unwrap() as usize, want.len());
    assert_eq!(read_stream(&log, 4096), want);
    assert_eq!(read_stream(&log, 7), want);
    assert_eq!(committed(&log), want);
    drop(log);
    mgr.close().unwrap();

    let mgr = open(tmp.path());
    let log = mgr.partition("c-0").unwrap();
    assert_eq!(log.stream_len().unwrap() as usize, want.len());
    assert_eq!(read_stream(&log, 4096), want);
    assert_eq!(committed(&log), want);
    drop(log);
    mgr.close().unwrap();
}

/// Waits, bounded, until `ok` holds of what the read-only manager shows
/// of `name` (a look lists the directory again at most every 100 ms while
/// its mtime may hide a change).
fn follow_until(
    mgr: &commitfs::storage::LogManager,
    name: &str,
    what: &str,
    ok: impl Fn(&PartitionLog) -> bool,
) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        if let Some(p) = mgr.partition(name)
            && ok(&p)
        {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "never saw {what}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A read-only mount following the writer, having read the whole stream
/// before the roll, shows the cleaned log once the swap is on disk, as one
/// opened after the pass does: the roll and the swap come between two of
/// its looks, so the segment it followed as active is sealed in the new file.
#[test]
fn a_read_only_follower_sees_a_pass() {
    let tmp = tempfile::tempdir().unwrap();
    let mgr = open(tmp.path());
    let log = compacted(&mgr, "c-0");
    // Kafka's default: the replaced files stay a minute as `.deleted`.
    log.set_config("file.delete.delay.ms", "60000").unwrap();
    let ro = commitfs::storage::LogManager::open(
        tmp.path(),
        commitfs::storage::LogConfig::default(),
        commitfs::storage::OpenOptions {
            read_only: true,
            ..Default::default()
        },
    )
    .unwrap();
    for n in 0..3000 {
        let (k, v) = (format!("k{}", n % 20), format!("k{}-v{n}", n % 20));
        put(&log, &[(&k, Some(&v))]);
    }
    let before = consumer_stream(&log);
    follow_until(&ro, "c-0", "the writer's 3,000 lines", |p| {
        p.stream_len().unwrap() as usize == before.len() && read_stream(p, 65536) == before
    });
    log.roll().unwrap();
    put(&log, &[("kroll", Some("roll"))]);
    log.clean_now().unwrap().expect("a pass ran");
    let want = consumer_stream(&log);
    assert_eq!(want.iter().filter(|b| **b == b'\n').count(), 21);
    follow_until(&ro, "c-0", "the cleaned 21 lines", |p| {
        p.stream_len().unwrap() as usize == want.len()
            && read_stream(p, 65536) == want
            && read_stream(p, 5) == want
    });
    drop(log);
    mgr.close().unwrap();
    ro.close().unwrap();
}
