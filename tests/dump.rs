//! `commitfs dump`, run as a process, against logs and indexes written here
//! and against Kafka bytes from tests/fixtures/kafka.

#[path = "support/bounded.rs"]
mod bounded;

use std::path::{Path, PathBuf};
use std::process::Command;

use commitfs::record::{Batch, NewRecord, compute_crc, encode_batch};

struct Output {
    code: i32,
    stdout: String,
    stderr: String,
}

fn dump(args: &[&str], files: &[&Path]) -> Output {
    let out = bounded::run(
        Command::new(env!("CARGO_BIN_EXE_commitfs"))
            .arg("dump")
            .args(args)
            .args(files),
        &format!("commitfs dump {args:?}"),
    );
    let o = Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    };
    assert!(!o.stderr.contains("panicked"), "{}", o.stderr);
    o
}

fn lines(s: &str) -> Vec<&str> {
    s.lines().collect()
}

fn fixture(rel: &str) -> PathBuf {
    [env!("CARGO_MANIFEST_DIR"), "tests/fixtures/kafka", rel]
        .iter()
        .collect()
}

fn crc_of(batch: &[u8]) -> u32 {
    Batch::parse(batch).unwrap().header.crc
}

fn fix_crc(batch: &mut [u8]) {
    let crc = compute_crc(batch);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
}

const T: i64 = 1_700_000_000_000;

/// One batch at offset 0: `k1`=`hello` with `headers`, then `world`.
fn hello_world(log: &mut Vec<u8>, headers: &[(&str, Option<&[u8]>)]) {
    encode_batch(
        log,
        0,
        T,
        &[
            NewRecord {
                key: Some(b"k1"),
                value: Some(b"hello"),
                headers,
            },
            NewRecord::value(b"world"),
        ],
    );
}

/// Three batches: [0,1] with keys and headers, [2] a tombstone, [3,4,5] values only.
fn sample_log() -> (Vec<u8>, Vec<usize>) {
    let mut log = Vec::new();
    let mut starts = Vec::new();
    let h: &[(&str, Option<&[u8]>)] = &[("a", Some(b"1")), ("b", None)];
    starts.push(log.len());
    hello_world(&mut log, h);
    starts.push(log.len());
    encode_batch(
        &mut log,
        2,
        T + 10,
        &[NewRecord {
            key: Some(b"k3"),
            value: None,
            headers: &[],
        }],
    );
    starts.push(log.len());
    encode_batch(
        &mut log,
        3,
        T + 20,
        &[
            NewRecord::value(b"x"),
            NewRecord::value(b"yy"),
            NewRecord::value(b""),
        ],
    );
    starts.push(log.len());
    (log, starts)
}

fn batch_line(
    base: i64,
    last: i64,
    count: i32,
    position: usize,
    ts: i64,
    size: usize,
    crc: u32,
) -> String {
    format!(
        "baseOffset: {base} lastOffset: {last} count: {count} baseSequence: -1 lastSequence: -1 \
         producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false \
         isControl: false deleteHorizonMs: OptionalLong.empty position: {position} \
         CreateTime: {ts} size: {size} magic: 2 compresscodec: none crc: {crc} isvalid: true"
    )
}

/// `log` written as the first segment of a partition directory `dir`.
fn segment_zero(dir: &Path, log: &[u8]) -> PathBuf {
    let path = dir.join("00000000000000000000.log");
    std::fs::write(&path, log).unwrap();
    path
}

/// The fixture `rel` copied in as the first segment of `dir`.
fn fixture_segment_zero(dir: &Path, rel: &str) -> PathBuf {
    segment_zero(dir, &std::fs::read(fixture(rel)).unwrap())
}

/// `commitfs dump args` of `log` as the first segment of a partition.
fn dump_segment_zero(log: &[u8], args: &[&str]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    dump(args, &[&segment_zero(dir.path(), log)])
}

fn write_sample(dir: &Path) -> (PathBuf, Vec<usize>) {
    let (log, starts) = sample_log();
    (segment_zero(dir, &log), starts)
}

fn expected_batch_lines(log: &[u8], starts: &[usize]) -> Vec<String> {
    let crc = |i: usize| crc_of(&log[starts[i]..]);
    let size = |i: usize| starts[i + 1] - starts[i];
    vec![
        batch_line(0, 1, 2, starts[0], T, size(0), crc(0)),
        batch_line(2, 2, 1, starts[1], T + 10, size(1), crc(1)),
        batch_line(3, 5, 3, starts[2], T + 20, size(2), crc(2)),
    ]
}

#[test]
fn log_batches_exact_lines() {
    let dir = tempfile::tempdir().unwrap();
    let (path, starts) = write_sample(dir.path());
    let log = std::fs::read(&path).unwrap();
    let o = dump(&[], &[&path]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let mut want = vec![
        format!("Dumping {}", path.display()),
        "Log starting offset: 0".to_string(),
    ];
    want.extend(expected_batch_lines(&log, &starts));
    assert_eq!(lines(&o.stdout), want);
    assert_eq!(o.stderr, "");
    // The first batch is at 0 and the sizes add up to the file.
    assert_eq!(starts[0], 0);
    assert_eq!(*starts.last().unwrap(), log.len());
}

#[test]
fn log_deep_iteration_and_print_data_log() {
    let dir = tempfile::tempdir().unwrap();
    let (path, starts) = write_sample(dir.path());
    let log = std::fs::read(&path).unwrap();
    let b = expected_batch_lines(&log, &starts);
    let rec = |o: i64, ts: i64, k: i32, v: i32, hk: &str| {
        format!(
            "| offset: {o} CreateTime: {ts} keySize: {k} valueSize: {v} sequence: -1 headerKeys: [{hk}]"
        )
    };

    let o = dump(&["--deep-iteration"], &[&path]);
    assert_eq!(o.code, 0);
    let deep = vec![
        b[0].clone(),
        rec(0, T, 2, 5, "a,b"),
        rec(1, T, -1, 5, ""),
        b[1].clone(),
        rec(2, T + 10, 2, -1, ""),
        b[2].clone(),
        rec(3, T + 20, -1, 1, ""),
        rec(4, T + 20, -1, 2, ""),
        rec(5, T + 20, -1, 0, ""),
    ];
    assert_eq!(lines(&o.stdout)[2..], deep[..]);
    assert_eq!(o.stderr, "");

    // Kafka prints the key before the payload, and neither when null.
    let o = dump(&["--print-data-log"], &[&path]);
    assert_eq!(o.code, 0);
    let with_data = vec![
        b[0].clone(),
        rec(0, T, 2, 5, "a,b") + " key: k1 payload: hello",
        rec(1, T, -1, 5, "") + " payload: world",
        b[1].clone(),
        rec(2, T + 10, 2, -1, "") + " key: k3",
        b[2].clone(),
        rec(3, T + 20, -1, 1, "") + " payload: x",
        rec(4, T + 20, -1, 2, "") + " payload: yy",
        rec(5, T + 20, -1, 0, "") + " payload: ",
    ];
    assert_eq!(lines(&o.stdout)[2..], with_data[..]);
}

#[test]
fn log_starting_offset_comes_from_the_file_name() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = sample_log();
    let named = dir.path().join("00000000000000001234.log");
    std::fs::write(&named, &log).unwrap();
    let other = dir.path().join("segment.log");
    std::fs::write(&other, &log).unwrap();
    let o = dump(&[], &[&named, &other]);
    assert_eq!(o.code, 0);
    let l = lines(&o.stdout);
    assert_eq!(l[1], "Log starting offset: 1234");
    assert_eq!(l[5], format!("Dumping {}", other.display()));
    assert_eq!(l[6], "Log starting offset: 0");
    assert_eq!(l.len(), 10);
}

#[test]
fn trailing_garbage_and_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, starts) = sample_log();
    log.extend_from_slice(b"0123456789");
    let path = segment_zero(dir.path(), &log);
    let o = dump(&[], &[&path]);
    assert_eq!(o.code, 0);
    let l = lines(&o.stdout);
    assert_eq!(l.len(), 2 + 3 + 1);
    assert_eq!(
        l[5],
        "Found 10 invalid bytes at the end of 00000000000000000000.log"
    );

    // The last batch torn mid-way: the first two still print.
    let torn = &log[..starts[2] + 30];
    std::fs::write(&path, torn).unwrap();
    let o = dump(&["--deep-iteration"], &[&path]);
    assert_eq!(o.code, 0);
    let l = lines(&o.stdout);
    assert!(l[2].starts_with("baseOffset: 0 lastOffset: 1 "));
    assert!(l[5].starts_with("baseOffset: 2 lastOffset: 2 "));
    assert_eq!(
        *l.last().unwrap(),
        "Found 30 invalid bytes at the end of 00000000000000000000.log"
    );

    // A zero-filled (preallocated) tail is invalid bytes too.
    let mut zeros = log[..starts[3]].to_vec();
    zeros.extend_from_slice(&[0; 100]);
    std::fs::write(&path, &zeros).unwrap();
    let o = dump(&[], &[&path]);
    assert_eq!(
        *lines(&o.stdout).last().unwrap(),
        "Found 100 invalid bytes at the end of 00000000000000000000.log"
    );
}

#[test]
fn corrupt_crc_prints_isvalid_false() {
    let (mut log, starts) = sample_log();
    // Flip a byte of the first batch's value "hello".
    let at = log[..starts[1]]
        .windows(5)
        .position(|w| w == b"hello")
        .unwrap();
    log[at] = b'j';
    let o = dump_segment_zero(&log, &["--print-data-log"]);
    assert_eq!(o.code, 0);
    let l = lines(&o.stdout);
    assert!(l[2].ends_with("isvalid: false"), "{}", l[2]);
    assert!(l[3].ends_with("key: k1 payload: jello"), "{}", l[3]);
    assert!(l[5].ends_with("isvalid: true"));
}

#[test]
fn fixture_sarama_uncompressed() {
    let dir = tempfile::tempdir().unwrap();
    let path = fixture_segment_zero(dir.path(), "sarama-record-test/uncompressed_record.bin");
    let o = dump(&["--print-data-log"], &[&path]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    // sarama leaves maxTimestamp at 0; crc is the stored 0x547961fd. baseSequence
    // is 0, so the record's sequence is 0; key 1..4, value 5..7, and one header
    // whose key {8,9,10} is "\x08\t\n" (so the line breaks where Kafka's would).
    let want = format!(
        "Dumping {}\n\
         Log starting offset: 0\n\
         baseOffset: 0 lastOffset: 0 count: 1 baseSequence: 0 lastSequence: 0 producerId: 0 \
         producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: false isControl: false \
         deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 0 size: 82 magic: 2 \
         compresscodec: none crc: 1417241085 isvalid: true\n\
         | offset: 0 CreateTime: 1479847795005 keySize: 4 valueSize: 3 sequence: 0 \
         headerKeys: [\u{8}\t\n] key: \u{1}\u{2}\u{3}\u{4} payload: \u{5}\u{6}\u{7}\n",
        path.display()
    );
    assert_eq!(o.stdout, want);
}

#[test]
fn fixture_compressed_and_legacy_entries() {
    let dir = tempfile::tempdir().unwrap();
    let path = fixture_segment_zero(
        dir.path(),
        "segmentio-kafka-go/v1-v1c-v2-v2c-v2b-v2b-v2b-v2bc-v1b-v1bc.records.bin",
    );
    let o = dump(&["--deep-iteration"], &[&path]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let l = lines(&o.stdout);
    // Magic 1 entries as Kafka prints a legacy batch, then its message.
    assert_eq!(
        l[2..4],
        [
            "offset: 0 position: 0 CreateTime: 1633286796965 size: 72 magic: 1 compresscodec: none crc: 1123078385 isvalid: true",
            "| offset: 0 CreateTime: 1633286796965 keySize: 5 valueSize: 33 isValid: true crc: 1123078385",
        ]
    );
    // A gzip wrapper: its own CRC on the batch line, the inner message's on the record's.
    assert_eq!(
        l[6..8],
        [
            "offset: 2 position: 143 CreateTime: 1633286831051 size: 107 magic: 1 compresscodec: gzip crc: 3553592831 isvalid: true",
            "| offset: 2 CreateTime: 1633286831051 keySize: 5 valueSize: 33 isValid: true crc: 2125748918",
        ]
    );
    assert!(l[10].starts_with("baseOffset: 4 lastOffset: 4 count: 1 "));
    assert!(l[10].contains(" position: 356 CreateTime: 1633286986079 size: 106 "));
    assert!(l[11].starts_with("| offset: 4 CreateTime: 1633286986079 keySize: 5 valueSize: 33 "));
    assert!(l[14].contains(" position: 568 ") && l[14].contains(" compresscodec: gzip "));
    assert!(l[15].starts_with("| offset: 6 CreateTime: 1633287000247 keySize: 5 valueSize: 33 "));
    // The last wrapper holds two messages: offsets relative to the wrapper's, which is the last one's.
    let n = l.len();
    assert_eq!(
        l[n - 3..],
        [
            "offset: 19 position: 1517 CreateTime: 1633374040837 size: 130 magic: 1 compresscodec: gzip crc: 3689980426 isvalid: true",
            "| offset: 18 CreateTime: 1633374040551 keySize: 3 valueSize: 33 isValid: true crc: 2959239806",
            "| offset: 19 CreateTime: 1633374040837 keySize: 5 valueSize: 33 isValid: true crc: 576835190",
        ]
    );
    assert!(!o.stdout.contains("invalid bytes"));
    assert!(!o.stderr.contains("Non-consecutive"), "{}", o.stderr);
}

/// Magic 0 messages (kafka-python's vectors from a Kafka 0.11 broker): no
/// timestamp type, timestamp -1; a damaged message is printed with
/// isvalid false, as Kafka's `LegacyRecord.isValid` says.
#[test]
fn legacy_magic_0_messages_and_a_bad_crc() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("00000000000000000000.log");
    let mut bytes = std::fs::read(fixture("kafka-python-tests/record_batch_data_v0.bin")).unwrap();
    std::fs::write(&path, &bytes).unwrap();
    let o = dump(&["--print-data-log"], &[&path]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(
        lines(&o.stdout)[2..6],
        [
            "offset: 0 position: 0 NoTimestampType: -1 size: 29 magic: 0 compresscodec: none crc: 4272954815 isvalid: true",
            "| offset: 0 NoTimestampType: -1 keySize: -1 valueSize: 3 isValid: true crc: 4272954815 payload: 123",
            "offset: 1 position: 29 NoTimestampType: -1 size: 26 magic: 0 compresscodec: none crc: 2035763424 isvalid: true",
            "| offset: 1 NoTimestampType: -1 keySize: -1 valueSize: 0 isValid: true crc: 2035763424 payload: ",
        ]
    );
    // The first message's value, under its CRC.
    bytes[28] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let o = dump(&["--deep-iteration"], &[&path]);
    assert_eq!(
        lines(&o.stdout)[2..4],
        [
            "offset: 0 position: 0 NoTimestampType: -1 size: 29 magic: 0 compresscodec: none crc: 4272954815 isvalid: false",
            "| offset: 0 NoTimestampType: -1 keySize: -1 valueSize: 3 isValid: false crc: 4272954815",
        ]
    );
}

/// A magic 1 wrapper with LogAppendTime: its messages take its timestamp.
#[test]
fn legacy_log_append_time_wrapper_gives_its_timestamp_to_its_messages() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("00000000000000000000.log");
    let src = std::fs::read(fixture("segmentio-kafka-go/v1c-v1c.records.bin")).unwrap();
    // The first entry: offset, size, crc, magic, attributes (gzip), timestamp.
    let size = i32::from_be_bytes(src[8..12].try_into().unwrap()) as usize;
    let mut entry = src[..12 + size].to_vec();
    entry[17] |= 0x08;
    entry[18..26].copy_from_slice(&42i64.to_be_bytes());
    let crc = crc32fast::hash(&entry[16..]);
    entry[12..16].copy_from_slice(&crc.to_be_bytes());
    std::fs::write(&path, &entry).unwrap();
    let o = dump(&["--deep-iteration"], &[&path]);
    let l = lines(&o.stdout);
    assert!(
        l[2].contains(" LogAppendTime: 42 ") && l[2].ends_with(" isvalid: true"),
        "{}",
        l[2]
    );
    assert!(l.len() > 3, "{}", o.stdout);
    for r in &l[3..] {
        assert!(
            r.starts_with("| offset: ") && r.contains(" LogAppendTime: 42 keySize: "),
            "{r}"
        );
    }
}

#[test]
fn non_consecutive_offsets_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    // The 4th kafka-python vector restarts at offset 0.
    let path = fixture_segment_zero(dir.path(), "kafka-python-tests/record_batch_data_v2.bin");
    let o = dump(&["--deep-iteration"], &[&path]);
    assert_eq!(o.code, 0);
    assert_eq!(
        lines(&o.stderr),
        vec![
            format!(
                "Non-consecutive offsets in {}",
                std::path::absolute(&path).unwrap().display()
            ),
            "  3 is followed by 0".to_string(),
        ]
    );
    assert!(
        lines(&o.stdout)
            .last()
            .unwrap()
            .ends_with("headerKeys: [hkey]")
    );
}

#[test]
fn control_batch_end_txn_marker() {
    let mut log = Vec::new();
    let key = [0u8, 0, 0, 1]; // version 0, COMMIT
    let value = [0u8, 0, 0, 0, 0, 7]; // version 0, coordinatorEpoch 7
    encode_batch(&mut log, 0, T, &[NewRecord::keyed(&key, &value)]);
    log[22] |= 0x30; // transactional + control
    log[43..51].copy_from_slice(&42i64.to_be_bytes()); // producerId
    fix_crc(&mut log);
    let o = dump_segment_zero(&log, &["--print-data-log"]);
    let l = lines(&o.stdout);
    assert!(
        l[2].contains(" producerId: 42 ")
            && l[2].contains(" isTransactional: true isControl: true "),
        "{}",
        l[2]
    );
    // Control records never print key or payload.
    assert_eq!(
        l[3],
        format!(
            "| offset: 0 CreateTime: {T} keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] \
             endTxnMarker: COMMIT coordinatorEpoch: 7"
        )
    );
}

#[test]
fn log_append_time_and_delete_horizon() {
    let mut log = Vec::new();
    encode_batch(&mut log, 0, T, &[NewRecord::value(b"v")]);
    log[22] |= 0x48; // LogAppendTime + delete horizon
    log[35..43].copy_from_slice(&(T + 5).to_be_bytes()); // maxTimestamp
    fix_crc(&mut log);
    let o = dump_segment_zero(&log, &["--deep-iteration"]);
    let l = lines(&o.stdout);
    assert!(
        l[2].contains(&format!(
            " deleteHorizonMs: OptionalLong[{T}] position: 0 LogAppendTime: {} ",
            T + 5
        )),
        "{}",
        l[2]
    );
    assert!(l[3].starts_with(&format!("| offset: 0 LogAppendTime: {} ", T + 5)));
}

fn index_bytes(entries: &[(u32, u32)], zero_fill: usize) -> Vec<u8> {
    let mut b = Vec::new();
    for (rel, pos) in entries {
        b.extend_from_slice(&rel.to_be_bytes());
        b.extend_from_slice(&pos.to_be_bytes());
    }
    b.extend(std::iter::repeat_n(0u8, zero_fill * 8));
    b
}

/// Segment at base offset 100 with the sample batches (offsets 100..=105).
fn segment_100(dir: &Path) -> (PathBuf, Vec<usize>) {
    let mut log = Vec::new();
    let mut starts = Vec::new();
    for (i, (base, n)) in [(100i64, 2usize), (102, 1), (103, 3)].iter().enumerate() {
        starts.push(log.len());
        let values: Vec<Vec<u8>> = (0..*n).map(|j| vec![b'a'; 10 + j]).collect();
        let records: Vec<NewRecord> = values.iter().map(|v| NewRecord::value(v)).collect();
        encode_batch(&mut log, *base, T + 10 * i as i64, &records);
    }
    let path = dir.join("00000000000000000100.log");
    std::fs::write(&path, &log).unwrap();
    (path, starts)
}

#[test]
fn offset_index_entries_and_mismatches() {
    let dir = tempfile::tempdir().unwrap();
    let (_, starts) = segment_100(dir.path());
    let index = dir.path().join("00000000000000000100.index");
    let (p1, p2) = (starts[1] as u32, starts[2] as u32);
    // Good: batch [102] at p1 (relative 2), batch [103..105] at p2 (relative 5).
    // Bad: relative 3 at p1 (its last offset is 102), relative 4 at p2 + 1 (not a batch start).
    // Then a preallocated zero tail that must not be printed.
    let entries = [(2, p1), (3, p1), (4, p2 + 1), (5, p2)];
    std::fs::write(&index, index_bytes(&entries, 50)).unwrap();

    let o = dump(&[], &[&index]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(
        lines(&o.stdout),
        vec![
            format!("Dumping {}", index.display()),
            format!("offset: 102 position: {p1}"),
            format!("offset: 103 position: {p1}"),
            format!("offset: 104 position: {}", p2 + 1),
            format!("offset: 105 position: {p2}"),
        ]
    );
    let abs = std::path::absolute(&index).unwrap();
    // Kafka's list is last-found first.
    let report = vec![
        format!("Mismatches in :{}", abs.display()),
        "  Index offset: 104, log offset: -1".to_string(),
        "  Index offset: 103, log offset: 102".to_string(),
    ];
    assert_eq!(lines(&o.stderr), report);

    let o = dump(&["--verify-index-only"], &[&index]);
    assert_eq!(o.code, 0);
    assert_eq!(
        lines(&o.stdout),
        vec![format!("Dumping {}", index.display())]
    );
    assert_eq!(lines(&o.stderr), report);

    // All entries right: no report at all.
    std::fs::write(&index, index_bytes(&[(2, p1), (5, p2)], 3)).unwrap();
    let o = dump(&[], &[&index]);
    assert_eq!(lines(&o.stdout).len(), 3);
    assert_eq!(o.stderr, "");
}

#[test]
fn empty_and_logless_index() {
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("00000000000000000000.index");
    std::fs::write(&index, b"").unwrap();
    let o = dump(&[], &[&index]);
    assert_eq!(
        lines(&o.stdout),
        vec![
            format!("Dumping {}", index.display()),
            format!("{} is empty.", index.display()),
        ]
    );
    // No .log beside it: entries print, nothing to check against.
    std::fs::write(&index, index_bytes(&[(7, 4096)], 0)).unwrap();
    let o = dump(&[], &[&index]);
    assert_eq!(o.code, 0);
    assert_eq!(lines(&o.stdout)[1], "offset: 7 position: 4096");
    assert_eq!(o.stderr, "");
}

fn time_index_bytes(entries: &[(i64, u32)], zero_fill: usize) -> Vec<u8> {
    let mut b = Vec::new();
    for (ts, rel) in entries {
        b.extend_from_slice(&ts.to_be_bytes());
        b.extend_from_slice(&rel.to_be_bytes());
    }
    b.extend(std::iter::repeat_n(0u8, zero_fill * 12));
    b
}

#[test]
fn time_index_entries_and_problems() {
    let dir = tempfile::tempdir().unwrap();
    segment_100(dir.path());
    let path = dir.path().join("00000000000000000100.timeindex");
    // Batch max timestamps: [100,101] T, [102] T+10, [103..105] T+20.
    std::fs::write(&path, time_index_bytes(&[(T + 10, 2), (T + 20, 5)], 10)).unwrap();
    let o = dump(&[], &[&path]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(
        lines(&o.stdout),
        vec![
            format!("Dumping {}", path.display()),
            format!("timestamp: {} offset: 102", T + 10),
            format!("timestamp: {} offset: 105", T + 20),
        ]
    );
    assert_eq!(o.stderr, "");

    // Wrong timestamp for 102; 104 is not a batch's last offset; 105 out of order.
    std::fs::write(
        &path,
        time_index_bytes(&[(T + 15, 2), (T + 30, 4), (T + 20, 5)], 0),
    )
    .unwrap();
    let o = dump(&["--verify-index-only"], &[&path]);
    assert_eq!(o.code, 0);
    assert_eq!(
        lines(&o.stdout),
        vec![format!("Dumping {}", path.display())]
    );
    let abs = std::path::absolute(&path).unwrap();
    assert_eq!(
        lines(&o.stderr),
        vec![
            format!("Found timestamp mismatch in :{}", abs.display()),
            format!("  Index timestamp: {}, log timestamp: {}", T + 15, T + 10),
            format!("Found out of order timestamp in :{}", abs.display()),
            format!(
                "  Index timestamp: {}, Previously indexed timestamp: {}",
                T + 20,
                T + 30
            ),
            "The following indexed offsets are not found in the log.".to_string(),
            "Indexed offset: 104, found log offset: 105".to_string(),
        ]
    );
}

#[test]
fn garbage_files_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    // Deterministic noise, plus shapes that look almost right.
    let mut noise = Vec::new();
    let mut x: u32 = 0x1234_5678;
    for _ in 0..4096 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        noise.push(x as u8);
    }
    let (log, _) = sample_log();
    let mut bad_magic = log.clone();
    bad_magic[16] = 9;
    let mut huge_len = log.clone();
    huge_len[8..12].copy_from_slice(&i32::MAX.to_be_bytes());
    for (i, content) in [noise.clone(), bad_magic, huge_len, vec![0xff; 61]]
        .iter()
        .enumerate()
    {
        let stem = format!("{:020}", i);
        for suffix in ["log", "index", "timeindex"] {
            let p = dir.path().join(format!("{stem}.{suffix}"));
            std::fs::write(&p, content).unwrap();
        }
        for suffix in ["log", "index", "timeindex"] {
            let p = dir.path().join(format!("{stem}.{suffix}"));
            let o = dump(&["--print-data-log"], &[&p]);
            assert_eq!(o.code, 0, "{}: {}", p.display(), o.stderr);
        }
    }
}

#[test]
fn unreadable_files_exit_1_and_others_still_dump() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = write_sample(dir.path());
    let missing = dir.path().join("00000000000000000099.log");
    let o = dump(&[], &[&missing, &path]);
    assert_eq!(o.code, 1);
    assert!(
        o.stderr
            .contains(&format!("Could not read {}", missing.display()))
    );
    assert!(o.stdout.contains(&format!("Dumping {}", path.display())));
    assert_eq!(lines(&o.stdout).len(), 2 + 2 + 3);

    let odd = dir.path().join("notes.txt");
    std::fs::write(&odd, "hi").unwrap();
    let o = dump(&[], &[&odd]);
    assert_eq!(o.code, 0);
    assert_eq!(
        lines(&o.stderr),
        vec![format!("Ignoring unknown file {}", odd.display())]
    );
}

/// A header key that is not UTF-8: Kafka reads it with replacement
/// characters (`Utils.utf8`) and prints every record of the batch.
#[test]
fn a_header_key_that_is_not_utf8_keeps_the_batch_records() {
    let mut log = Vec::new();
    let h: &[(&str, Option<&[u8]>)] = &[("zq", Some(b"1"))];
    hello_world(&mut log, h);
    let at = log.windows(2).position(|w| w == b"zq").unwrap();
    log[at] = 0xff;
    fix_crc(&mut log);
    let o = dump_segment_zero(&log, &["--print-data-log"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let l = lines(&o.stdout);
    assert!(l[2].ends_with(" isvalid: true"), "{}", l[2]);
    assert_eq!(
        l[3..],
        [
            format!(
                "| offset: 0 CreateTime: {T} keySize: 2 valueSize: 5 sequence: -1 headerKeys: [\u{fffd}q] key: k1 payload: hello"
            ),
            format!(
                "| offset: 1 CreateTime: {T} keySize: -1 valueSize: 5 sequence: -1 headerKeys: [] payload: world"
            ),
        ]
    );
}

/// A batch whose attributes name a codec Kafka does not know (id 5): named
/// on its line, its records said to be undecodable, and the batch after it
/// dumped; not folded into "invalid bytes".
#[test]
fn a_batch_with_an_unknown_codec_is_named_and_the_walk_goes_on() {
    let (mut log, starts) = sample_log();
    let first = starts[0]..starts[1];
    log[first.start + 22] |= 5;
    fix_crc(&mut log[first.clone()]);
    let o = dump_segment_zero(&log, &["--deep-iteration"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let l = lines(&o.stdout);
    let crc = crc_of_raw(&log[first.clone()]);
    assert_eq!(
        l[2],
        batch_line(0, 1, 2, 0, T, first.len(), crc)
            .replace("compresscodec: none", "compresscodec: unknown(5)")
    );
    assert_eq!(
        l[3],
        "| records could not be decoded: unknown compression codec id 5"
    );
    assert!(l[4].starts_with("baseOffset: 2 lastOffset: 2 "), "{}", l[4]);
    assert!(!o.stdout.contains("invalid bytes"), "{}", o.stdout);
    assert!(!o.stderr.contains("Non-consecutive"), "{}", o.stderr);
}

fn crc_of_raw(batch: &[u8]) -> u32 {
    u32::from_be_bytes(batch[17..21].try_into().unwrap())
}

// ---- Kafka's options ----------------------------------------------------------

/// One batch: key "k", values 42 as an int32 and "ab".
fn decoder_log(dir: &Path) -> PathBuf {
    let mut log = Vec::new();
    let four = 42i32.to_be_bytes();
    encode_batch(
        &mut log,
        0,
        T,
        &[
            NewRecord {
                key: Some(b"k"),
                value: Some(&four),
                headers: &[],
            },
            NewRecord::value(b"ab"),
        ],
    );
    segment_zero(dir, &log)
}

/// `--key-decoder-class`/`--value-decoder-class` take Kafka's decoders under
/// either name, and imply --print-data-log as Kafka's options do.
#[test]
fn decoder_classes_decode_and_imply_print_data_log() {
    let dir = tempfile::tempdir().unwrap();
    let path = decoder_log(dir.path());
    let o = dump(
        &[
            "--key-decoder-class",
            "kafka.serializer.StringDecoder",
            "--value-decoder-class",
            "org.apache.kafka.tools.api.IntegerDecoder",
        ],
        &[&path],
    );
    let l = lines(&o.stdout);
    assert!(
        l[3].ends_with(" headerKeys: [] key: k payload: 42"),
        "{}",
        l[3]
    );
    // "ab" is too short for an int32: Kafka's decoder throws.
    assert!(
        o.stderr.contains("java.nio.BufferUnderflowException"),
        "{}",
        o.stderr
    );
    assert_eq!(o.code, 1);

    let o = dump(
        &["--value-decoder-class", "kafka.serializer.DefaultDecoder"],
        &[&path],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let l = lines(&o.stdout);
    let crc = format!("{:x}", crc32c_of(b"ab"));
    assert!(l[4].ends_with(&format!(" payload: [B@{crc}")), "{}", l[4]);
    // The key keeps the default StringDecoder.
    assert!(l[3].contains(" key: k payload: [B@"), "{}", l[3]);

    let o = dump(&["--key-decoder-class", "com.example.Mine"], &[&path]);
    assert_eq!(o.code, 2);
    assert!(
        o.stderr.contains("no decoder class com.example.Mine"),
        "{}",
        o.stderr
    );
}

fn crc32c_of(b: &[u8]) -> u32 {
    // CRC-32C, bit by bit.
    let mut crc = !0u32;
    for &x in b {
        crc ^= x as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// An index entry pointing at a batch larger than --max-message-size: Kafka's
/// slice finds no batch there and its dump stops.
#[test]
fn max_message_size_stops_an_index_dump_at_a_larger_batch() {
    let dir = tempfile::tempdir().unwrap();
    let (_, starts) = segment_100(dir.path());
    let index = dir.path().join("00000000000000000100.index");
    let (p1, p2) = (starts[1] as u32, starts[2] as u32);
    std::fs::write(&index, index_bytes(&[(2, p1), (5, p2)], 0)).unwrap();
    let o = dump(&[], &[&index]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(lines(&o.stdout).len(), 3);
    // The last batch holds three records: larger than the second's one.
    let small = starts[2] - starts[1];
    let o = dump(&["--max-message-size", &small.to_string()], &[&index]);
    assert_eq!(o.code, 1);
    assert_eq!(
        lines(&o.stdout),
        vec![
            format!("Dumping {}", index.display()),
            format!("offset: 102 position: {p1}"),
        ]
    );
    assert!(
        o.stderr
            .contains(&format!("the batch at position {p2} is ")),
        "{}",
        o.stderr
    );
}

#[test]
fn dump_version_prints_the_version() {
    let out = bounded::run(
        Command::new(env!("CARGO_BIN_EXE_commitfs")).args(["dump", "--version"]),
        "commitfs dump --version",
    );
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains(env!("CARGO_PKG_VERSION")), "{text}");
}

/// What `commitfs args` (a help or a man page) prints, with the man
/// page's escapes (`\&`, `\-`) taken out.
fn help_text(args: &[&str]) -> String {
    let out = bounded::run(
        Command::new(env!("CARGO_BIN_EXE_commitfs")).args(args),
        &format!("commitfs {args:?}"),
    );
    assert_eq!(out.status.code(), Some(0), "{args:?}");
    String::from_utf8_lossy(&out.stdout)
        .replace("\\&", "")
        .replace("\\-", "-")
}

/// Help and the man page name every file kind dump reads.
#[test]
fn help_and_man_page_list_every_file_kind() {
    for args in [&["dump", "--help"][..], &["help"][..], &["man", "dump"][..]] {
        let text = help_text(args);
        for kind in [
            ".log",
            ".index",
            ".timeindex",
            ".snapshot",
            ".txnindex",
            ".checkpoint",
        ] {
            assert!(text.contains(kind), "{args:?} does not name {kind}: {text}");
        }
    }
}

/// `dump --help` and the man page name each of Kafka's internal-topic decoders.
#[test]
fn help_and_man_page_name_every_decoder() {
    for args in [&["dump", "--help"][..], &["man", "dump"][..]] {
        let text = help_text(args);
        for (option, topic) in [
            ("--offsets-decoder", "__consumer_offsets"),
            ("--transaction-log-decoder", "__transaction_state"),
            ("--cluster-metadata-decoder", "__cluster_metadata"),
            ("--share-group-state-decoder", "__share_group_state"),
            ("--remote-log-metadata-decoder", "__remote_log_metadata"),
        ] {
            assert!(
                text.contains(option),
                "{args:?} does not name {option}: {text}"
            );
            assert!(
                text.contains(topic),
                "{args:?} does not name {topic}: {text}"
            );
        }
    }
}
