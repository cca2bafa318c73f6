//! Item 7: a read-only mount takes no lock, so another process may truncate
//! any file under it. An index file the daemon had mapped, cut underneath,
//! faults (SIGBUS) at the next lookup that touches it: the daemon must read
//! index files into its own memory instead, and survive with right answers.

use std::fs;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::harness::{Mount, fuse_or_skip};
use crate::kafka_writer::{BASE_TS, KafkaWriter, seg_name, value, write_meta};

/// `offset/N` through the mount: the value, or the errno of the failure.
fn read_offset(m: &Mount, n: i64) -> Result<String, i32> {
    match fs::read(m.mnt.join(format!("t-0/offset/{n}"))) {
        Ok(v) => Ok(String::from_utf8_lossy(&v).into_owned()),
        Err(e) => Err(e.raw_os_error().unwrap_or(0)),
    }
}

#[test]
fn index_files_cut_under_a_read_only_mount_do_not_kill_it() {
    if !fuse_or_skip() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    write_meta(&data);
    // index.interval.bytes=0: every batch but the first is indexed, so the
    // sealed segment's indexes span several pages.
    let mut w = KafkaWriter::create(&data, "t", 0, 0);
    for _ in 0..3000 {
        w.append(1);
    }
    w.roll();
    for _ in 0..10 {
        w.append(1);
    }
    // Everything flushed: only the active segment is recovered at mount, so
    // the sealed one's indexes are opened from their files, lazily.
    w.write_checkpoints(w.next_offset);
    let index = w.path(0, "index");
    let time_index = w.path(0, "timeindex");
    let index_bytes = fs::read(&index).unwrap();
    let time_bytes = fs::read(&time_index).unwrap();
    assert_eq!(index_bytes.len(), 2999 * 8);

    let mut m = Mount::with(&["ro"], Some(&data), &[]);
    // The first lookups load the sealed segment's indexes.
    assert_eq!(read_offset(&m, 1500), Ok(value(1500)));
    assert_eq!(m.ok(&format!("cat t-0/time/{}", BASE_TS + 2000)), "2000\n");

    // Another process cuts the index files and puts them back, over and
    // over, while lookups that walk every page of them run.
    let stop = Arc::new(AtomicBool::new(false));
    let cutter = {
        let stop = stop.clone();
        let (index, time_index) = (index.clone(), time_index.clone());
        let (index_bytes, time_bytes) = (index_bytes.clone(), time_bytes.clone());
        std::thread::spawn(move || {
            let mut rounds = 0u32;
            while !stop.load(Ordering::Relaxed) {
                for (path, bytes) in [(&index, &index_bytes), (&time_index, &time_bytes)] {
                    // Errors only once the test has failed and its dir is gone.
                    let Ok(f) = fs::OpenOptions::new().write(true).open(path) else {
                        return rounds;
                    };
                    let _ = f.set_len(0);
                    let _ = f.set_len(bytes.len() as u64 / 2);
                    let _ = f.set_len(0);
                    let _ = std::os::unix::fs::FileExt::write_all_at(&f, bytes, 0);
                }
                rounds += 1;
            }
            rounds
        })
    };
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut n = 0i64;
    let mut checked = 0;
    while Instant::now() < deadline {
        n = (n + 997) % 3010;
        match read_offset(&m, n) {
            Ok(v) => assert_eq!(v, value(n)),
            // The daemon may fail a lookup whose file changed under it, but
            // must answer it: ENOTCONN would mean it died.
            Err(e) => assert!(
                e == libc::ENOENT || e == libc::EIO,
                "offset/{n}: errno {e}\n{}",
                m.log()
            ),
        }
        checked += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let rounds = cutter.join().unwrap();
    assert!(
        rounds > 0 && checked > 0,
        "{rounds} cuts, {checked} lookups"
    );
    assert!(!m.exited(), "the daemon died:\n{}", m.log());

    // Cut for good: the answers stay right.
    fs::OpenOptions::new()
        .write(true)
        .open(&index)
        .unwrap()
        .set_len(0)
        .unwrap();
    fs::OpenOptions::new()
        .write(true)
        .open(&time_index)
        .unwrap()
        .set_len(0)
        .unwrap();
    for n in [0, 1, 777, 1500, 2998, 2999, 3005] {
        assert_eq!(read_offset(&m, n), Ok(value(n)), "offset/{n}");
    }
    assert_eq!(m.ok(&format!("cat t-0/time/{}", BASE_TS + 100)), "100\n");
    assert_eq!(
        m.ok(&format!("stat -c %s t-0/{}", seg_name(0, "index"))),
        "0\n"
    );
    m.unmount_clean();
}
