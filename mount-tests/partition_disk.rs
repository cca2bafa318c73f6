//! What partitions cost on disk, and what a full disk does to them, on a
//! small tmpfs each test mounts (and unmounts in a drop guard): never the
//! root filesystem. `du` (coreutils, counting the blocks the kernel holds)
//! and `stat` are the oracles for disk, Kafka's index lengths for `ls -l`,
//! raw frames built with `kafka-protocol` the hostile client.
//!
//! - Hundreds of partitions, made by CreateTopics and by `mkdir`, fit a
//!   64 MiB tmpfs (each once reserved 20 MiB): `du` stays under 64 KiB a
//!   partition beyond its data, and the active indexes show Kafka's length.
//! - `segment.index.bytes` at Kafka's bound (2147483647) costs no blocks.
//! - An append whose index entry needs a block the full disk does not have
//!   is refused with ENOSPC, naming the index; the partition stays online,
//!   and appends go on once space is freed.
//! - A creation that runs out of inodes half way leaves nothing; one past
//!   `max.broker.partitions` or the per-request cap is refused whole.
//! - The partitions of Kafka's own topics refuse every write (EPERM, a log
//!   line), and read as before.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use commitfs::record::NewRecord;
use commitfs::storage::index::ALLOCATION_STEP;
use commitfs::storage::{LogConfig, LogManager, OpenOptions};
use kafka_protocol::messages::ApiKey;
use kafka_protocol::messages::metadata_request::MetadataRequest;
use kafka_protocol::messages::metadata_response::MetadataResponse;

use crate::harness::{Mount, Tmpfs, fuse_or_skip, run_bounded, sh_timeout};
use crate::kafka_support::requests::{creatable, create_partitions, create_topics};
use crate::kafka_support::{Conn, listener_addr, snapshot};
use crate::torture_diskfull::fill;
use crate::torture_util::{assert_check_clean, assert_no_panic, log_since, read_value, status};

/// `du -sk`: KiB of blocks under `path`, as coreutils counts them.
fn du_kib(path: &Path) -> u64 {
    let out = run_bounded(
        Command::new("du").arg("-sk").arg(path),
        "du -sk",
        sh_timeout(),
        String::new,
    );
    assert!(out.status.success(), "du failed: {out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("du printed {text:?}"))
}

fn tmp() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("commitfs-parts-")
        .tempdir()
        .unwrap()
}

/// A tmpfs of `size` mounted for the test, and a data directory path on it.
/// Bound in this order, the tmpfs goes before its mountpoint's directory.
fn on_tmpfs(size: &str) -> (tempfile::TempDir, Tmpfs, PathBuf) {
    let tmp = tmp();
    let fs = Tmpfs::mount(&tmp.path().join("fs"), size);
    let data = fs.0.join("data");
    (tmp, fs, data)
}

/// A mount of `data` with a listener on a port of its own, and its address.
fn mount_listening(data: &Path, extra: &[&str]) -> (Mount, String) {
    let mut opts = vec!["listeners=PLAINTEXT://127.0.0.1:0"];
    opts.extend_from_slice(extra);
    let m = Mount::with(&opts, Some(data), &[]);
    let addr = listener_addr(&m.log()).expect("the daemon logged its listener");
    (m, addr)
}

fn create_topic(addr: &str, topic: &str, partitions: i32) -> i16 {
    create_topics(
        &mut Conn::new(addr),
        vec![creatable(topic, partitions)],
        false,
    )[0]
    .0
}

fn grow(addr: &str, topic: &str, count: i32) -> i16 {
    create_partitions(&mut Conn::new(addr), &[(topic, count)], false)[0].0
}

/// Partitions Metadata lists, over every topic.
fn listed_partitions(addr: &str) -> usize {
    let every = MetadataRequest::default().with_topics(None);
    let r: MetadataResponse = Conn::new(addr).call(ApiKey::Metadata, 12, &every);
    r.topics.iter().map(|t| t.partitions.len()).sum()
}

fn file_len(p: &Path) -> u64 {
    std::fs::metadata(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .len()
}

#[test]
fn hundreds_of_idle_partitions_fit_a_small_disk() {
    if !fuse_or_skip() {
        return;
    }
    let (_tmp, _fs, data) = on_tmpfs("64m");
    let (mut m, addr) = mount_listening(&data, &[]);
    // 300 by one CreateTopics, 100 by mkdir: 8 GB of preallocation before.
    assert_eq!(create_topic(&addr, "p", 300), 0);
    let dirs: Vec<String> = (0..100).map(|i| format!("q-{i}")).collect();
    m.ok(&format!("mkdir {}", dirs.join(" ")));
    for i in (0..300).step_by(7) {
        m.ok(&format!("echo value-{i} >> p-{i}/log"));
    }
    assert_eq!(listed_partitions(&addr), 400);
    // `ls -l` shows Kafka's lengths: roundDown(segment.index.bytes, entry).
    let active = m.mnt.join("q-99/00000000000000000000");
    assert_eq!(file_len(&active.with_extension("index")), 10_485_760);
    assert_eq!(file_len(&active.with_extension("timeindex")), 10_485_756);
    let used = du_kib(&data);
    assert!(
        used <= 400 * 64,
        "{used} KiB for 400 live partitions: over 64 KiB each"
    );
    for i in (0..300).step_by(7) {
        let v = read_value(&m, &format!("p-{i}"), 0).unwrap();
        assert_eq!(v, format!("value-{i}").as_bytes());
    }
    assert!(!m.exited(), "the daemon died:\n{}", m.log());
    m.unmount_clean();
    assert_check_clean(&data, "");
    println!(
        "400 live partitions: {used} KiB while mounted ({} KiB a partition), {} KiB after the unmount",
        used / 400,
        du_kib(&data)
    );
}

#[test]
fn segment_index_bytes_at_kafkas_bound_costs_no_blocks() {
    if !fuse_or_skip() {
        return;
    }
    let (_tmp, _fs, data) = on_tmpfs("16m");
    let mut m = Mount::with(&[], Some(&data), &[]);
    m.ok("mkdir t-0 && echo a >> t-0/log");
    // Kafka's validator: an INT, at least 4; one past Int.MaxValue is refused.
    // coreutils' echo: dash's own says "I/O error" whatever the errno.
    m.fails(
        "/bin/echo 2147483648 > t-0/config/segment.index.bytes",
        "Invalid argument",
    );
    m.ok("echo 2147483647 > t-0/config/segment.index.bytes && echo 1 > t-0/roll");
    m.ok("echo b >> t-0/log");
    let active = m.mnt.join("t-0/00000000000000000001");
    assert_eq!(file_len(&active.with_extension("index")), 2_147_483_640);
    assert_eq!(file_len(&active.with_extension("timeindex")), 2_147_483_640);
    let used = du_kib(&data);
    assert!(used <= 64, "{used} KiB after a roll with 2 GiB indexes");
    assert_eq!(m.ok("cat t-0/log"), "a\nb\n");
    m.unmount_clean();
    assert_check_clean(&data, "");
}

/// One write(2) of `data` to `t-0/log` through an open handle.
fn write(f: &mut std::fs::File, data: &[u8]) -> std::io::Result<()> {
    let n = f.write(data)?;
    assert_eq!(n, data.len(), "short write");
    Ok(())
}

#[test]
fn a_full_disk_at_an_index_extension_refuses_the_append_and_the_partition_stays_online() {
    if !fuse_or_skip() {
        return;
    }
    let (_tmp, fs, data) = on_tmpfs("16m");
    // Every batch after the first gets an offset index entry (interval 0).
    let mut m = Mount::with(&["index.interval.bytes=0"], Some(&data), &[]);
    m.ok("mkdir t-0");
    let log = m.mnt.join("t-0/log");
    let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    // The daemon allocates an index's blocks a step at a time: `full`
    // batches make `full - 1` entries, filling the first step to its last
    // byte, and the next batch's entry needs the next step.
    let full = (ALLOCATION_STEP / 8) as usize + 1;
    for i in 0..full {
        write(&mut f, format!("r{i}\n").as_bytes()).unwrap();
    }
    let filler = fs.0.join("filler");
    fill(&filler);
    let from = m.log().len();
    let next = format!("r{full}\n");
    let refused = write(&mut f, next.as_bytes()).expect_err("an append on a full disk");
    assert_eq!(refused.raw_os_error(), Some(libc::ENOSPC));
    let said = log_since(&m, from);
    assert!(
        said.lines()
            .any(|l| l.contains("00000000000000000000.index")
                && l.contains("No space left on device")),
        "the refusal names the index it could not extend:\n{said}"
    );
    // Online: not offline, nothing of the refused batch, every record there.
    let st = m.ok("cat t-0/status");
    assert!(!st.contains("offline"), "status: {st}");
    assert_eq!(status(&m, "t-0", "log_end_offset"), full as i64);
    let last = format!("r{}", full - 1);
    assert_eq!(
        read_value(&m, "t-0", full as i64 - 1).unwrap(),
        last.as_bytes()
    );
    std::fs::remove_file(&filler).unwrap();
    for i in full..1100 {
        write(&mut f, format!("r{i}\n").as_bytes()).unwrap();
    }
    drop(f);
    assert_eq!(status(&m, "t-0", "log_end_offset"), 1100);
    assert_no_panic(&m);
    m.unmount_clean();
    assert_check_clean(&data, "index.interval.bytes=0");
    m.remount();
    let want: String = (0..1100).map(|i| format!("r{i}\n")).collect();
    assert_eq!(m.ok("cat t-0/log"), want);
    m.unmount_clean();
}

/// Inodes in use on the filesystem of `path` (statvfs).
fn inodes_used(path: &Path) -> u64 {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a statvfs of a valid path into a zeroed struct.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::statvfs(c.as_ptr(), &mut st) }, 0, "statvfs");
    (st.f_files - st.f_ffree) as u64
}

/// Remounts the tmpfs at `fs` with room for `inodes` inodes.
fn set_inodes(fs: &Path, inodes: u64) {
    let opt = format!("remount,nr_inodes={inodes}");
    let out = run_bounded(
        Command::new("mount").args(["-o", &opt]).arg(fs),
        "mount -o remount,nr_inodes",
        sh_timeout(),
        String::new,
    );
    assert!(out.status.success(), "{opt}: {out:?}");
}

#[test]
fn creations_that_cannot_finish_leave_nothing_and_cost_nothing() {
    if !fuse_or_skip() {
        return;
    }
    let (_tmp, fs, data) = on_tmpfs("16m");
    let (mut m, addr) = mount_listening(&data, &["max.broker.partitions=6"]);
    m.ok("mkdir t-0 && echo kept >> t-0/log");
    let before = du_kib(&data);
    // The per-request cap, then the broker's: refused whole.
    assert_eq!(grow(&addr, "t", i32::MAX), 44, "POLICY_VIOLATION");
    assert_eq!(
        create_topic(&addr, "big", 6),
        44,
        "past max.broker.partitions"
    );
    // Inodes for two partitions (four each: the directory, the .log and
    // two indexes) and a checkpoint's temporary file: the third of `half`
    // cannot be made.
    set_inodes(&fs.0, inodes_used(&fs.0) + 10);
    let from = m.log().len();
    let code = create_topic(&addr, "half", 4);
    assert_ne!(code, 0, "4 partitions in the inodes of 2");
    assert!(
        log_since(&m, from).contains("Created log for partition half-1"),
        "the creation failed half way, after half-1"
    );
    let left: Vec<String> = std::fs::read_dir(&data)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().into_string().unwrap())
        .filter(|n| n.starts_with("half-") || n.starts_with("big-"))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    assert_eq!(du_kib(&data), before, "refused creations cost no blocks");
    // Room again; the tree meets the broker's cap as the listener does.
    set_inodes(&fs.0, 1 << 16);
    m.ok("mkdir t-1 t-2 t-3 t-4 t-5");
    let from = m.log().len();
    m.fails("mkdir t-6", "Disk quota exceeded");
    assert!(
        log_since(&m, from).contains("max.broker.partitions (6)"),
        "a log line says which limit"
    );
    assert_eq!(m.ok("cat t-0/log"), "kept\n");
    assert!(!m.exited(), "the daemon died:\n{}", m.log());
    m.unmount_clean();
    assert_check_clean(&data, "");
}

/// A data directory with Kafka's own topics, each holding one record.
fn kafka_owned(data: &Path) {
    let mgr = LogManager::open(data, LogConfig::default(), OpenOptions::default()).unwrap();
    for p in ["__consumer_offsets-0", "__cluster_metadata-0", "t-0"] {
        let log = mgr.create_partition(p).unwrap();
        log.append(&[NewRecord::value(format!("{p} record").as_bytes())])
            .unwrap();
    }
    mgr.close().unwrap();
}

#[test]
fn the_tree_refuses_every_write_to_kafkas_own_topics() {
    if !fuse_or_skip() {
        return;
    }
    let tmp = tmp();
    let data = tmp.path().join("data");
    kafka_owned(&data);
    let before = snapshot(&data.join("__consumer_offsets-0"));
    let mut m = Mount::with(&[], Some(&data), &[]);
    let from = m.log().len();
    for p in ["__consumer_offsets-0", "__cluster_metadata-0"] {
        let refused = [
            format!("echo forged >> {p}/log"),
            format!(": > {p}/log"),
            format!("echo 1 > {p}/roll"),
            format!("echo 1 > {p}/flush"),
            format!("echo 1 > {p}/delete-records"),
            format!("echo 1 > {p}/config/retention.ms"),
            format!("rmdir {p}"),
        ];
        for cmd in &refused {
            m.fails(cmd, "Operation not permitted");
        }
        assert_eq!(m.ok(&format!("cat {p}/log")), format!("{p} record\n"));
        m.fails(&format!("test -w {p}/log"), "");
    }
    for p in [
        "__consumer_offsets-1",
        "__transaction_state-0",
        "__share_group_state-0",
    ] {
        m.fails(&format!("mkdir {p}"), "Operation not permitted");
    }
    let said = log_since(&m, from);
    let lines = said
        .lines()
        .filter(|l| l.contains("is Kafka's own topic") && l.contains("EPERM"))
        .count();
    assert!(lines >= 17, "a log line per refusal, {lines}:\n{said}");
    // A user's topic next to them takes writes as ever.
    m.ok("echo more >> t-0/log");
    assert!(!data.join("__consumer_offsets-1").exists());
    m.unmount_clean();
    let after = snapshot(&data.join("__consumer_offsets-0"));
    assert!(
        after == before,
        "the partition's files changed:\n{}",
        m.log()
    );
    assert_check_clean(&data, "");
}
