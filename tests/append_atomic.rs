//! An append that fails part way leaves nothing behind: not its first
//! batches, not a segment it rolled to, not an index entry.
//!
//! Failures are injected with RLIMIT_FSIZE, which is process-wide: this file
//! holds one test so that nothing else runs in its process.

use std::fs;
use std::path::Path;

use commitfs::record::NewRecord;
use commitfs::storage::check::check_data_dir;
use commitfs::storage::{LogConfig, LogManager, OpenOptions};

fn set_file_size_limit(bytes: u64) {
    let lim = libc::rlimit {
        rlim_cur: bytes as libc::rlim_t,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: plain syscalls; SIGXFSZ is ignored so an over-limit write fails
    // with EFBIG instead of killing the process.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &lim), 0);
    }
}

fn no_file_size_limit() {
    set_file_size_limit(libc::RLIM_INFINITY);
}

fn log_len(dir: &Path, base: i64) -> u64 {
    fs::metadata(dir.join("t-0").join(format!("{base:020}.log")))
        .unwrap()
        .len()
}

fn fill(log: &commitfs::storage::PartitionLog, n: usize) {
    let v = vec![b'x'; 1024];
    for _ in 0..n {
        log.append(&[NewRecord::value(&v)]).unwrap();
    }
}

#[test]
fn failed_appends_keep_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let mut c = LogConfig::default();
    c.set("segment.bytes", "1048576").unwrap();
    c.set("segment.index.bytes", "4096").unwrap();
    c.set("index.interval.bytes", "1000").unwrap();
    c.set("max.message.bytes", "650100").unwrap();
    let mgr = LogManager::open(tmp.path(), c.clone(), OpenOptions::default()).unwrap();
    let log = mgr.create_partition("t-0").unwrap();
    fill(&log, 100);

    // Case 1, no roll: two batches ([1 KiB, 400 KB] and [400 KB]); the file
    // may grow by the first only.
    let s0 = log_len(tmp.path(), 0);
    let leo = log.log_end_offset();
    let status = log.status().unwrap();
    let small = vec![b's'; 1024];
    let m = vec![b'm'; 400_000];
    let recs = [
        NewRecord::value(&small),
        NewRecord::value(&m),
        NewRecord::value(&m),
    ];
    set_file_size_limit(s0 + 402_000);
    let err = log.append(&recs).unwrap_err();
    no_file_size_limit();
    assert_eq!(err.raw_os_error(), Some(libc::EFBIG), "{err}");
    assert_eq!(log.log_end_offset(), leo);
    assert_eq!(
        log.status().unwrap(),
        status,
        "nothing of the failed append is visible"
    );
    assert_eq!(
        log_len(tmp.path(), 0),
        s0,
        "the first batch was cut away again"
    );

    // Case 2: the first batch lands in the old segment, the second rolls and
    // fails in the new one. Both go; the old segment is active again.
    fill(&log, 300);
    let s0 = log_len(tmp.path(), 0);
    let leo = log.log_end_offset();
    let big = vec![b'b'; 649_500];
    let recs = [NewRecord::value(&small), NewRecord::value(&big)];
    set_file_size_limit(s0 + 1200);
    let err = log.append(&recs).unwrap_err();
    no_file_size_limit();
    assert_eq!(err.raw_os_error(), Some(libc::EFBIG), "{err}");
    assert_eq!(log.log_end_offset(), leo);
    assert_eq!(
        log.segment_bases(),
        vec![0],
        "the rolled-to segment is gone"
    );
    assert!(
        !tmp.path()
            .join("t-0")
            .join(format!("{leo:020}.log"))
            .exists()
    );
    assert_eq!(log_len(tmp.path(), 0), s0);
    assert_eq!(
        fs::metadata(tmp.path().join("t-0").join(format!("{:020}.index", 0)))
            .unwrap()
            .len(),
        4096,
        "active again: its index is preallocated"
    );
    let first = log.append(&[NewRecord::value(b"ok")]).unwrap().first_offset;
    assert_eq!(first, leo, "appends continue at the same offset");

    // Both shapes succeed without a limit, and the result checks clean.
    let info = log.append(&recs).unwrap();
    assert_eq!((info.first_offset, info.batches), (leo + 1, 2));
    assert_eq!(log.segment_bases().len(), 2);
    assert_eq!(log.read(leo + 2).unwrap().value.unwrap().len(), big.len());
    drop(log);
    mgr.close().unwrap();
    let report = check_data_dir(tmp.path(), &c, None).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
}
