//! Speaking Kafka: compressed appends, delete-records, and Kafka bytes written
//! by other software read through a read-only mount that leaves them untouched.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kafka_protocol::records::{RecordBatchDecoder, TimestampType};

use crate::mount;

const BIN: &str = env!("CARGO_BIN_EXE_commitfs");

/// Records as another Kafka implementation decodes them, batch by batch.
fn decode_theirs(buf: &[u8]) -> Vec<kafka_protocol::records::Record> {
    let mut slice = buf;
    let sets = RecordBatchDecoder::decode_all(&mut slice).expect("kafka-protocol decodes it");
    sets.into_iter().flat_map(|s| s.records).collect()
}

#[test]
fn compressed_appends_for_every_codec() {
    let m = mount!();
    // Compressible values, so compression shows in the segment size.
    let values: Vec<String> = (0..200)
        .map(|i| format!("record-{i:04}-{}", "abcdefgh".repeat(8)))
        .collect();
    let text: String = values.iter().map(|v| format!("{v}\n")).collect();
    let src = m.data.parent().unwrap().join("values.txt");
    std::fs::write(&src, &text).unwrap();
    for codec in ["gzip", "snappy", "lz4", "zstd"] {
        let p = format!("{codec}-0");
        m.ok(&format!("mkdir {p}"));
        m.ok(&format!("echo {codec} > {p}/config/compression.type"));
        assert_eq!(
            m.ok(&format!("cat {p}/config/compression.type")),
            format!("{codec}\n")
        );
        // One write: one batch of 200 records.
        m.ok(&format!("cat {} >> {p}/log", src.display()));
        assert_eq!(m.status(&p, "log_end_offset"), 200);
        for i in [0, 1, 99, 199] {
            assert_eq!(
                m.ok(&format!("cat {p}/offset/{i}")),
                values[i],
                "{codec} offset {i}"
            );
        }
        assert_eq!(m.ok(&format!("cat {p}/log")), text, "{codec} log stream");
        assert_eq!(
            m.ok(&format!("tail -n 1 {p}/log")),
            format!("{}\n", values[199])
        );

        let seg = m.mnt.join(&p).join("00000000000000000000.log");
        let size = std::fs::metadata(&seg).unwrap().len() as usize;
        assert!(
            size < text.len() / 2,
            "{codec}: a {size}-byte segment for {} bytes of values is not compressed",
            text.len()
        );
        let dump = m.ok(&format!("{BIN} dump --deep-iteration {}", seg.display()));
        assert!(
            dump.contains(&format!("compresscodec: {codec}")),
            "{codec}:\n{dump}"
        );
        assert!(dump.contains("count: 200"), "{dump}");
        // Another Kafka implementation reads the same records from the bytes.
        let theirs = decode_theirs(&std::fs::read(&seg).unwrap());
        assert_eq!(theirs.len(), 200, "{codec}");
        for (i, r) in theirs.iter().enumerate() {
            assert_eq!(r.offset, i as i64);
            assert_eq!(
                r.value.as_deref(),
                Some(values[i].as_bytes()),
                "{codec} {i}"
            );
        }
    }
    // Back to none: later batches are plain again.
    m.ok("echo none > gzip-0/config/compression.type");
    m.ok("echo plain >> gzip-0/log");
    let dump = m.ok(&format!(
        "{BIN} dump {}",
        m.mnt.join("gzip-0/00000000000000000000.log").display()
    ));
    assert!(dump.contains("compresscodec: none"), "{dump}");
    assert_eq!(m.ok("cat gzip-0/offset/200"), "plain");
    m.fails(
        "env echo brotli > gzip-0/config/compression.type",
        "Invalid argument",
    );
}

#[test]
fn delete_records_moves_the_log_start() {
    let mut m = mount!();
    m.ok("mkdir t-0");
    // Three segments: 0..10, 10..20, 20..30.
    for s in 0..3 {
        m.ok(&format!(
            "for i in $(seq {} {}); do echo v-$i; done >> t-0/log",
            s * 10,
            s * 10 + 9
        ));
        if s < 2 {
            m.ok("echo x > t-0/roll");
        }
    }
    assert_eq!(m.status("t-0", "segments"), 3);
    let full: String = (0..30).map(|i| format!("v-{i}\n")).collect();
    assert_eq!(m.ok("cat t-0/log"), full);

    m.ok("echo 15 > t-0/delete-records");
    assert_eq!(m.status("t-0", "log_start_offset"), 15);
    // Below the start: gone at once, even inside the kept segment 10..20.
    for gone in [0, 9, 10, 14] {
        m.fails(
            &format!("cat t-0/offset/{gone}"),
            "No such file or directory",
        );
    }
    assert_eq!(m.ok("cat t-0/offset/15"), "v-15");
    assert_eq!(m.ok("ls t-0/offset | head -1"), "15\n");
    // The whole segment below went; the one holding 15 stays.
    let ls = m.ok("ls t-0");
    assert!(!ls.contains("00000000000000000000.log"), "{ls}");
    assert!(ls.contains("00000000000000000010.log"), "{ls}");
    // The stream starts at the new log start; its size shrank accordingly.
    let rest: String = (15..30).map(|i| format!("v-{i}\n")).collect();
    assert_eq!(m.ok("cat t-0/log"), rest);
    assert_eq!(m.ok("stat -c %s t-0/log").trim(), rest.len().to_string());
    // Lower than the start: nothing changes.
    m.ok("echo 3 > t-0/delete-records");
    assert_eq!(m.status("t-0", "log_start_offset"), 15);

    // Refusals: EINVAL with a log line, nothing changed.
    for bad in ["abc", "31", "-2", "1e3", "015", ""] {
        m.fails(
            &format!("env printf '{bad}\\n' > t-0/delete-records"),
            "Invalid argument",
        );
    }
    assert_eq!(m.status("t-0", "log_start_offset"), 15);
    let log = m.log();
    assert!(
        log.contains("refused write to t-0/delete-records: offset 31 is out of range"),
        "{log}"
    );
    assert!(
        log.contains("refused write to t-0/delete-records: \"abc\" is not an offset"),
        "{log}"
    );
    // Reading a control file is refused.
    m.fails("cat t-0/delete-records", "Permission denied");

    // It survives a remount (log-start-offset-checkpoint).
    m.unmount_clean();
    let cp = std::fs::read_to_string(m.data.join("log-start-offset-checkpoint")).unwrap();
    assert!(cp.lines().any(|l| l == "t 0 15"), "{cp}");
    m.remount();
    assert_eq!(m.status("t-0", "log_start_offset"), 15);
    m.fails("cat t-0/offset/14", "No such file or directory");
    assert_eq!(m.ok("cat t-0/log"), rest);

    // Up to the log end offset: the log is empty but keeps its offsets.
    m.ok("echo -1 > t-0/delete-records");
    assert_eq!(m.status("t-0", "log_start_offset"), 30);
    assert_eq!(m.ok("cat t-0/log"), "");
    m.ok("echo v-30 >> t-0/log");
    assert_eq!(m.ok("cat t-0/offset/30"), "v-30");
    assert_eq!(m.ok("cat t-0/log"), "v-30\n");
}

/// Every pure RecordBatch v2 fixture, as (partition dir, segment bytes).
/// kafka-python's file is cut after its 3rd batch: the 4th restarts at
/// offset 0 and so cannot follow them in one segment.
fn fixture_partitions() -> Vec<(String, Vec<u8>)> {
    let root: PathBuf = [env!("CARGO_MANIFEST_DIR"), "tests/fixtures/kafka"]
        .iter()
        .collect();
    let read = |rel: &str| std::fs::read(root.join(rel)).unwrap();
    let mut out = vec![("kafka-python-0".to_string(), {
        let b = read("kafka-python-tests/record_batch_data_v2.bin");
        b[..218].to_vec()
    })];
    for f in [
        "control_batch",
        "empty_record",
        "gzipped_record",
        "lz4_compressed_record",
        "snappy_compressed_record",
        "uncompressed_record",
    ] {
        out.push((
            format!("sarama.{f}-0"),
            read(&format!("sarama-record-test/{f}.bin")),
        ));
    }
    for f in ["v2-v2", "v2c-v2c", "v2c-v2-v2c"] {
        out.push((
            format!("segmentio.{f}-0"),
            read(&format!("segmentio-kafka-go/{f}.records.bin")),
        ));
    }
    out
}

/// Every file and directory under `dir` with its bytes (None for a directory).
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                out.insert(p.clone(), None);
                todo.push(p);
            } else {
                out.insert(p.clone(), Some(std::fs::read(&p).unwrap()));
            }
        }
    }
    out
}

#[test]
fn kafka_fixtures_through_a_read_only_mount() {
    let mut m = mount!();
    // Start from an empty data dir laid out as a broker's log dir.
    m.unmount_clean();
    std::fs::remove_dir_all(&m.data).unwrap();
    std::fs::create_dir(&m.data).unwrap();
    let parts = fixture_partitions();
    for (name, bytes) in &parts {
        let dir = m.data.join(name);
        std::fs::create_dir(&dir).unwrap();
        let base = i64::from_be_bytes(bytes[..8].try_into().unwrap());
        std::fs::write(dir.join(format!("{base:020}.log")), bytes).unwrap();
    }
    // Kafka's side files, shown read-only.
    let side = m.data.join("kafka-python-0");
    std::fs::write(side.join("leader-epoch-checkpoint"), "0\n1\n1 0\n").unwrap();
    std::fs::write(
        side.join("partition.metadata"),
        "version: 0\ntopic_id: 3IcWjwTRQzqsMnsYLqAjgw\n",
    )
    .unwrap();
    std::fs::write(side.join("00000000000000000003.snapshot"), [0u8; 0]).unwrap();
    std::fs::write(
        m.data.join("meta.properties"),
        "version=1\nnode.id=1\ncluster.id=q1Sh-9_ISia_zwGINzRvyQ\n",
    )
    .unwrap();
    std::fs::write(
        m.data.join("recovery-point-offset-checkpoint"),
        "0\n1\nkafka-python 0 3\n",
    )
    .unwrap();
    let before = snapshot(&m.data);

    m.opts = vec!["ro".to_string()];
    m.remount();

    let root = m.ok("ls");
    let mut expect_root: Vec<String> = parts.iter().map(|(n, _)| n.clone()).collect();
    expect_root.push("groups".into());
    expect_root.push("meta.properties".into());
    expect_root.push("recovery-point-offset-checkpoint".into());
    expect_root.sort();
    assert_eq!(root.lines().collect::<Vec<_>>(), expect_root);
    assert_eq!(
        m.ok("cat meta.properties"),
        "version=1\nnode.id=1\ncluster.id=q1Sh-9_ISia_zwGINzRvyQ\n"
    );
    assert_eq!(m.ok("stat -c %a meta.properties").trim(), "444");
    m.fails("echo x >> meta.properties", "Read-only file system");
    assert_eq!(
        m.ok("cat kafka-python-0/partition.metadata"),
        "version: 0\ntopic_id: 3IcWjwTRQzqsMnsYLqAjgw\n"
    );
    let ls = m.ok("ls kafka-python-0");
    for f in [
        "00000000000000000000.log",
        "00000000000000000003.snapshot",
        "leader-epoch-checkpoint",
        "partition.metadata",
        "log",
        "offset",
        "time",
        "status",
    ] {
        assert!(ls.lines().any(|l| l == f), "{f} missing:\n{ls}");
    }
    // Every readable file reads as 444 on a read-only mount, `log` too.
    assert_eq!(m.ok("stat -c %a kafka-python-0/log").trim(), "444");
    m.fails("test -w kafka-python-0/log", "");
    m.fails("echo x >> kafka-python-0/log", "Read-only file system");
    m.fails(
        "echo 1 > kafka-python-0/delete-records",
        "Read-only file system",
    );

    let mut records_read = 0;
    for (name, bytes) in &parts {
        let theirs = decode_theirs(bytes);
        let mut stream = Vec::new();
        for r in &theirs {
            let node = format!("{name}/offset/{}", r.offset);
            if r.control {
                m.fails(&format!("cat {node}"), "No such file or directory");
                continue;
            }
            let value = r.value.as_deref().unwrap_or(&[]);
            let out = m.sh(&format!("cat {node}"));
            assert!(out.status.success(), "cat {node}: {:?}", out);
            assert_eq!(out.stdout, value, "{node}");
            stream.extend_from_slice(value);
            stream.push(b'\n');
            records_read += 1;

            // The xattrs say what the decoder says.
            let get = |attr: &str| {
                m.sh(&format!("getfattr --only-values -n {attr} {node}"))
                    .stdout
            };
            assert_eq!(
                get("user.kafka.timestamp"),
                r.timestamp.to_string().as_bytes()
            );
            let tt = match r.timestamp_type {
                TimestampType::Creation => "CreateTime",
                TimestampType::LogAppend => "LogAppendTime",
            };
            assert_eq!(get("user.kafka.timestamp_type"), tt.as_bytes(), "{node}");
            let listed = m.ok(&format!("getfattr -d -m - {node}"));
            match &r.key {
                Some(k) => assert_eq!(get("user.kafka.key"), &k[..], "{node}"),
                None => assert!(!listed.contains("user.kafka.key="), "{listed}"),
            }
            let headers = listed
                .lines()
                .filter(|l| l.starts_with("user.kafka.header."))
                .count();
            assert_eq!(headers, r.headers.len(), "{node}:\n{listed}");
            // Header names can hold any character (sarama's is a tab): ask
            // the syscall itself rather than a shell.
            for (hk, hv) in &r.headers {
                let name = format!("user.kafka.header.{}", &**hk);
                assert_eq!(
                    crate::consumer::getxattr(&m.mnt.join(&node), &name, 65536).unwrap(),
                    hv.as_deref().unwrap_or(&[]),
                    "{node} header {}",
                    &**hk
                );
            }
        }
        let out = m.sh(&format!("cat {name}/log"));
        assert!(out.status.success(), "cat {name}/log");
        assert_eq!(out.stdout, stream, "{name}/log");
        assert_eq!(
            m.ok(&format!("stat -c %s {name}/log")).trim(),
            stream.len().to_string()
        );
        // Through the time index (rebuilt in memory). Only time/0: like
        // Kafka, the lookup trusts each batch's maxTimestamp, and sarama's
        // vectors leave it 0 below their records' timestamps.
        if let Some(first) = theirs.iter().find(|r| !r.control) {
            let got: i64 = m.ok(&format!("cat {name}/time/0")).trim().parse().unwrap();
            assert!(got <= first.offset, "{name}: time/0 gave {got}");
        }
        let status = m.ok(&format!("cat {name}/status"));
        assert!(status.contains("log_start_offset:"), "{status}");
    }
    assert!(records_read >= 15, "only {records_read} records read");

    m.unmount_clean();
    let after = snapshot(&m.data);
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>(),
        "a read-only mount added or removed files"
    );
    for (p, b) in &before {
        assert!(after[p] == *b, "{} changed", p.display());
    }
}

/// A record's (key, value).
type KeyValue = (Option<Vec<u8>>, Option<Vec<u8>>);

/// One batch as a Java producer of a transactional id would write it.
fn txn_batch(offset: i64, records: &[KeyValue], transactional: bool, control: bool) -> Vec<u8> {
    use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions};
    let producer_id = if transactional { 7 } else { -1 };
    let recs: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(i, (k, v))| Record {
            transactional,
            control,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id,
            producer_epoch: if transactional { 0 } else { -1 },
            timestamp_type: TimestampType::Creation,
            offset: offset + i as i64,
            sequence: if transactional && !control {
                offset as i32 + i as i32
            } else {
                -1
            },
            timestamp: 1_700_000_000_000 + offset,
            key: k.clone().map(Into::into),
            value: v.clone().map(Into::into),
            headers: Default::default(),
        })
        .collect();
    let mut buf = Vec::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &recs,
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .unwrap();
    buf
}

/// A transaction marker: key {version 0, type}, value {version 0, coordinatorEpoch 5}.
fn marker(offset: i64, commit: bool) -> Vec<u8> {
    let key = vec![0, 0, 0, commit as u8];
    let value = vec![0, 0, 0, 0, 0, 5];
    txn_batch(offset, &[(Some(key), Some(value))], true, true)
}

#[test]
fn transactions_read_uncommitted_and_committed() {
    let mut m = mount!();
    m.unmount_clean();
    std::fs::remove_dir_all(&m.data).unwrap();
    let dir = m.data.join("txn-0");
    std::fs::create_dir_all(&dir).unwrap();
    let v = |s: &str| (None, Some(s.as_bytes().to_vec()));
    let mut seg = Vec::new();
    seg.extend(txn_batch(0, &[v("t1"), v("t2")], true, false));
    seg.extend(marker(2, true));
    seg.extend(txn_batch(3, &[v("aborted-1")], true, false));
    seg.extend(marker(4, false));
    seg.extend(txn_batch(5, &[v("plain")], false, false));
    std::fs::write(dir.join("00000000000000000000.log"), &seg).unwrap();
    // The abort's `.txnindex` entry, as Kafka's `AbortedTxn` lays it out:
    // version (short 0), producer id 7, first offset 3, last offset 4 (the
    // marker), last stable offset 5.
    let mut entry = 0i16.to_be_bytes().to_vec();
    for n in [7i64, 3, 4, 5] {
        entry.extend(n.to_be_bytes());
    }
    std::fs::write(dir.join("00000000000000000000.txnindex"), &entry).unwrap();
    let before = snapshot(&m.data);
    m.opts = vec!["ro".to_string()];
    m.remount();

    assert_eq!(m.status("txn-0", "log_end_offset"), 6);
    // Markers occupy offsets 2 and 4 but hold no user record.
    for (n, want) in [
        (0, Some("t1")),
        (1, Some("t2")),
        (2, None),
        (3, Some("aborted-1")),
        (4, None),
        (5, Some("plain")),
    ] {
        match want {
            Some(w) => assert_eq!(m.ok(&format!("cat txn-0/offset/{n}")), w),
            None => {
                m.fails(
                    &format!("cat txn-0/offset/{n}"),
                    "No such file or directory",
                );
            }
        }
    }
    // read_uncommitted: the aborted record is in the stream, the markers are not.
    assert_eq!(m.ok("cat txn-0/log"), "t1\nt2\naborted-1\nplain\n");
    assert_eq!(m.ok("tail -n 2 txn-0/log"), "aborted-1\nplain\n");
    // read_committed: the aborted transaction's record is left out.
    assert_eq!(m.ok("cat txn-0/committed"), "t1\nt2\nplain\n");
    assert_eq!(m.ok("stat -c %s txn-0/committed").trim(), "12");
    assert_eq!(
        m.ok("getfattr --only-values -n user.kafka.transaction txn-0/offset/3"),
        "aborted"
    );
    assert_eq!(m.ok("cat txn-0/time/1700000000003"), "3\n");
    let dump = m.ok(&format!(
        "{BIN} dump --deep-iteration {}",
        m.mnt.join("txn-0/00000000000000000000.log").display()
    ));
    assert!(
        dump.contains("endTxnMarker: COMMIT coordinatorEpoch: 5"),
        "{dump}"
    );
    assert!(
        dump.contains("endTxnMarker: ABORT coordinatorEpoch: 5"),
        "{dump}"
    );
    m.unmount_clean();
    assert!(
        snapshot(&m.data) == before,
        "the read-only mount changed the data dir"
    );
}

/// The text kafka-dump-log prints after a record's metadata, per offset, as
/// `commitfs dump` with `decoder` prints it.
fn dumped(file: &Path, decoder: &str) -> BTreeMap<i64, String> {
    let out = crate::harness::run_bounded(
        std::process::Command::new(BIN)
            .args(["dump", decoder])
            .arg(file),
        &format!("commitfs dump {decoder}"),
        crate::harness::sh_timeout(),
        String::new,
    );
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("| offset: ")?;
            let offset = rest.split(' ').next()?.parse().ok()?;
            let text = rest.split_once("headerKeys: [] ")?.1;
            Some((offset, text.to_string()))
        })
        .collect()
}

/// Kafka's internal topics through a read-only mount: each record's
/// `user.kafka.decoded` is what `commitfs dump` prints for it with the
/// topic's decoder (kafka-dump-log's text), and `getfattr -d` shows it.
#[test]
fn internal_topics_show_decoded_records() {
    let mut m = mount!();
    m.unmount_clean();
    std::fs::remove_dir_all(&m.data).unwrap();
    let fixtures: PathBuf = [env!("CARGO_MANIFEST_DIR"), "tests/fixtures/kafka"]
        .iter()
        .collect();
    // A real KRaft metadata log, and __consumer_offsets records of a real
    // group written into a partition by the storage library.
    let metadata = m.data.join("__cluster_metadata-0");
    std::fs::create_dir_all(&metadata).unwrap();
    let src =
        fixtures.join("codecrafters-kafka-tester/__cluster_metadata-0/00000000000000000000.log");
    std::fs::copy(&src, metadata.join("00000000000000000000.log")).unwrap();
    {
        use commitfs::record::NewRecord;
        use commitfs::storage::{LogConfig, LogManager, OpenOptions};
        let mgr = LogManager::open(&m.data, LogConfig::default(), OpenOptions::default()).unwrap();
        let log = mgr.create_partition("__consumer_offsets-0").unwrap();
        let dir = fixtures.join("konsumer-offsets");
        for name in ["offset_commit-01", "group_metadata-01", "offset_commit-02"] {
            let key = std::fs::read(dir.join(format!("{name}.key"))).unwrap();
            let value = std::fs::read(dir.join(format!("{name}.payload"))).unwrap();
            log.append(&[NewRecord::keyed(&key, &value)]).unwrap();
        }
        drop(log);
        mgr.close().unwrap();
    }
    let groups = m.data.join("__consumer_offsets-0/00000000000000000000.log");
    m.opts = vec!["ro".to_string()];
    m.remount();
    for (part, file, decoder) in [
        (
            "__cluster_metadata-0",
            metadata.join("00000000000000000000.log"),
            "--cluster-metadata-decoder",
        ),
        ("__consumer_offsets-0", groups, "--offsets-decoder"),
    ] {
        let want = dumped(&file, decoder);
        assert!(want.len() >= 3, "{want:?}");
        for (offset, text) in &want {
            if text.starts_with("LeaderChange") {
                continue; // a control record: no offset/N to show it
            }
            let got = m.ok(&format!(
                "getfattr --only-values -n user.kafka.decoded {part}/offset/{offset}"
            ));
            assert_eq!(&got, text, "{part} offset {offset}");
        }
        let all = m.ok(&format!(
            "getfattr -d -m - {part}/offset/{}",
            want.keys().last().unwrap()
        ));
        assert!(all.contains("user.kafka.decoded="), "{all}");
        assert!(all.contains("user.kafka.timestamp="), "{all}");
    }
    // User topics have no decoded form.
    m.fails(
        "getfattr -n user.kafka.decoded __consumer_offsets-0/log",
        "No such attribute",
    );
}
