//! The RecordBatch v2 codec against itself (round trips), against Kafka bytes
//! written by other software (tests/fixtures/kafka), against garbage, and
//! against an independent decoder (the `kafka-protocol` crate).

use std::path::PathBuf;

use commitfs::record::*;
use proptest::prelude::*;

// ---------------------------------------------------------------------------
// Helpers

/// An owned record, so proptest can generate it and `NewRecord` can borrow it.
#[derive(Clone, Debug)]
struct Owned {
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<(String, Option<Vec<u8>>)>,
}

/// Borrows `Owned` records as `NewRecord`s. The header slices need their own
/// storage, hence the two-step construction.
type HeaderRefs<'a> = Vec<(&'a str, Option<&'a [u8]>)>;

fn header_refs(records: &[Owned]) -> Vec<HeaderRefs<'_>> {
    records
        .iter()
        .map(|r| {
            r.headers
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_deref()))
                .collect()
        })
        .collect()
}

fn new_records<'a>(records: &'a [Owned], headers: &'a [HeaderRefs<'a>]) -> Vec<NewRecord<'a>> {
    records
        .iter()
        .zip(headers)
        .map(|(r, h)| NewRecord {
            key: r.key.as_deref(),
            value: r.value.as_deref(),
            headers: h,
        })
        .collect()
}

fn encode_owned(base_offset: i64, timestamp: i64, records: &[Owned]) -> Vec<u8> {
    let headers = header_refs(records);
    let new = new_records(records, &headers);
    let mut buf = Vec::new();
    let size = encode_batch(&mut buf, base_offset, timestamp, &new);
    assert_eq!(size, buf.len());
    buf
}

fn payload(max: usize) -> impl Strategy<Value = Option<Vec<u8>>> {
    prop::option::of(prop_oneof![
        3 => prop::collection::vec(any::<u8>(), 0..64),
        1 => prop::collection::vec(any::<u8>(), 0..max),
    ])
}

fn owned_record(max: usize) -> impl Strategy<Value = Owned> {
    (
        payload(max),
        payload(max),
        prop::collection::vec((".{0,12}", payload(64)), 0..5),
    )
        .prop_map(|(key, value, headers)| Owned {
            key,
            value,
            headers,
        })
}

/// Integration tests have no lib.rs beside them for proptest to persist failures
/// next to, so don't try (it only warns); a failing case is printed anyway.
fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn fixture(rel: &str) -> Vec<u8> {
    let path: PathBuf = [env!("CARGO_MANIFEST_DIR"), "tests/fixtures/kafka", rel]
        .iter()
        .collect();
    std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// One entry of a log as a reader sees it.
#[derive(Debug)]
enum Entry<'a> {
    V2 {
        position: usize,
        batch: Batch<'a>,
    },
    Legacy {
        position: usize,
        magic: i8,
        base_offset: i64,
        size: usize,
    },
}

/// Walks a log that may mix legacy (magic 0/1) entries and v2 batches:
/// legacy entries are stepped over with the size their error reports.
/// Returns the entries, and the error that stopped the walk before the end, if any.
fn walk_mixed(buf: &[u8]) -> (Vec<Entry<'_>>, Option<RecordError>) {
    let mut entries = Vec::new();
    let mut pos = 0;
    while pos < buf.len() {
        match peek_frame(&buf[pos..]) {
            Ok(_) => match Batch::parse(&buf[pos..]) {
                Ok(batch) => {
                    entries.push(Entry::V2 {
                        position: pos,
                        batch,
                    });
                    pos += batch.size();
                }
                Err(e) => return (entries, Some(e)),
            },
            Err(RecordError::UnsupportedMagic {
                magic,
                base_offset,
                size,
            }) if size <= buf.len() - pos => {
                entries.push(Entry::Legacy {
                    position: pos,
                    magic,
                    base_offset,
                    size,
                });
                pos += size;
            }
            Err(e) => return (entries, Some(e)),
        }
    }
    (entries, None)
}

/// Exercises every read path of whatever is in `buf`; only a panic fails.
fn poke(buf: &[u8]) {
    let _ = peek_frame(buf);
    let _ = BatchHeader::parse(buf);
    let _ = compute_crc(buf);
    if let Ok(batch) = Batch::parse(buf) {
        let _ = batch.verify_crc();
        let _ = batch.records();
        let h = batch.header;
        let _ = (
            h.last_offset(),
            h.next_offset(),
            h.last_sequence(),
            h.size(),
        );
        let _ = (h.compression(), h.timestamp_type(), h.is_control());
    }
    // Every item, errors included, must be produced without panicking.
    for (_, batch) in BatchIter::new(buf).flatten() {
        let _ = batch.is_valid();
        let _ = batch.records();
    }
    let _ = walk_mixed(buf);
}

/// Rewrites a batch's CRC after a test edited its bytes on purpose.
fn fix_crc(batch: &mut [u8]) {
    let crc = compute_crc(batch);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
}

// ---------------------------------------------------------------------------
// Round trips

proptest! {
    #![proptest_config(config(128))]

    #[test]
    fn encode_then_decode_round_trips(
        base_offset in 0..i64::MAX / 2,
        timestamp in any::<i64>(),
        records in prop::collection::vec(owned_record(4096), 1..50),
    ) {
        let buf = encode_owned(base_offset, timestamp, &records);

        let headers = header_refs(&records);
        let new = new_records(&records, &headers);
        prop_assert_eq!(batch_size(&new), buf.len());

        let batch = Batch::parse(&buf).unwrap();
        prop_assert_eq!(batch.size(), buf.len());
        prop_assert_eq!(batch.verify_crc(), Ok(()));
        let h = batch.header;
        prop_assert_eq!(h.base_offset, base_offset);
        prop_assert_eq!(h.magic, 2);
        prop_assert_eq!(h.record_count as usize, records.len());
        prop_assert_eq!(h.last_offset(), base_offset + records.len() as i64 - 1);
        prop_assert_eq!(h.base_timestamp, timestamp);
        prop_assert_eq!(h.max_timestamp, timestamp);
        prop_assert_eq!(h.compression(), Compression::None);
        prop_assert_eq!(h.timestamp_type(), TimestampType::CreateTime);
        prop_assert!(!h.is_control() && !h.is_transactional());
        prop_assert_eq!((h.producer_id, h.producer_epoch, h.base_sequence), (-1, -1, -1));

        let decoded = batch.records().unwrap();
        prop_assert_eq!(decoded.len(), records.len());
        for (i, (got, want)) in decoded.iter().zip(&records).enumerate() {
            prop_assert_eq!(got.offset, base_offset + i as i64);
            prop_assert_eq!(got.timestamp, timestamp);
            prop_assert_eq!(got.attributes, 0);
            prop_assert_eq!(got.sequence, -1);
            prop_assert_eq!(&got.key, &want.key);
            prop_assert_eq!(&got.value, &want.value);
            let want_headers: Vec<Header> = want
                .headers
                .iter()
                .map(|(k, v)| Header { key: k.clone(), value: v.clone() })
                .collect();
            prop_assert_eq!(&got.headers, &want_headers);
        }
    }

    #[test]
    fn consecutive_batches_walk_in_order(
        sizes in prop::collection::vec(1usize..5, 1..8),
        timestamp in 0..i64::MAX,
    ) {
        let mut buf = Vec::new();
        let mut next = 0i64;
        let mut starts = Vec::new();
        for n in &sizes {
            let values: Vec<Vec<u8>> = (0..*n).map(|i| vec![i as u8; i * 7]).collect();
            let new: Vec<NewRecord> = values.iter().map(|v| NewRecord::value(v)).collect();
            starts.push((buf.len(), next));
            encode_batch(&mut buf, next, timestamp, &new);
            next += *n as i64;
        }
        let walked: Vec<(usize, i64)> = BatchIter::new(&buf)
            .map(|r| r.map(|(pos, b)| (pos, b.header.base_offset)).unwrap())
            .collect();
        prop_assert_eq!(walked, starts);
    }
}

#[test]
fn known_batch_size_figure() {
    let value = vec![b'x'; 1506];
    let records: Vec<NewRecord> = (0..10).map(|_| NewRecord::value(&value)).collect();
    assert_eq!(batch_size(&records), 15_211);
    let mut buf = Vec::new();
    assert_eq!(
        encode_batch(&mut buf, 0, 1_700_000_000_000, &records),
        15_211
    );
    assert_eq!(buf.len(), 15_211);
    let batch = Batch::parse(&buf).unwrap();
    assert_eq!(batch.header.batch_length, 15_211 - 12);
    assert!(batch.is_valid());
    assert_eq!(batch.records().unwrap().len(), 10);
}

// ---------------------------------------------------------------------------
// Kafka bytes written by other software

const V2_FILES: &[&str] = &[
    "kafka-python-tests/record_batch_data_v2.bin",
    "sarama-record-test/control_batch.bin",
    "sarama-record-test/empty_record.bin",
    "sarama-record-test/gzipped_record.bin",
    "sarama-record-test/lz4_compressed_record.bin",
    "sarama-record-test/snappy_compressed_record.bin",
    "sarama-record-test/uncompressed_record.bin",
    "segmentio-kafka-go/v2-v2.records.bin",
    "segmentio-kafka-go/v2c-v2-v2c.records.bin",
    "segmentio-kafka-go/v2c-v2c.records.bin",
];

const MIXED_FILES: &[&str] = &[
    "segmentio-kafka-go/v1-v1c-v2-v2c-v2b-v2b-v2b-v2bc-v1b-v1bc.records.bin",
    "segmentio-kafka-go/v2b-v1.records.bin",
    "segmentio-kafka-go/v2bc-v1-v1c.records.bin",
    "segmentio-kafka-go/v2bc-v1.records.bin",
    "segmentio-kafka-go/v2bc-v1c.records.bin",
];

const LEGACY_FILES: &[&str] = &[
    "kafka-python-tests/record_batch_data_v0.bin",
    "kafka-python-tests/record_batch_data_v1.bin",
    "segmentio-kafka-go/v1-v1.records.bin",
    "segmentio-kafka-go/v1c-v1-v1c.records.bin",
    "segmentio-kafka-go/v1c-v1c.records.bin",
];

/// Checks what every v2 batch must satisfy and returns (position, base, last, codec) per entry
/// (`codec` is "v0"/"v1" for legacy entries).
fn summarize(rel: &str) -> Vec<(usize, i64, i64, String)> {
    let buf = fixture(rel);
    let (entries, err) = walk_mixed(&buf);
    assert_eq!(err, None, "{rel}: walk stopped early");
    entries
        .iter()
        .map(|e| match e {
            Entry::V2 { position, batch } => {
                assert_eq!(batch.verify_crc(), Ok(()), "{rel} at {position}");
                let h = batch.header;
                // Decompression is being wired in: until a codec is, records() must
                // say so; once it is, compressed batches must decode like the rest.
                let records = match batch.records() {
                    Ok(records) => Some(records),
                    Err(RecordError::UnsupportedCompression(c)) => {
                        assert_ne!(c, Compression::None, "{rel}");
                        assert_eq!(c, h.compression(), "{rel}");
                        None
                    }
                    Err(e) => panic!("{rel} at {position}: {e}"),
                };
                if let Some(records) = records {
                    assert_eq!(records.len(), h.record_count as usize, "{rel}");
                    for (i, r) in records.iter().enumerate() {
                        assert_eq!(r.offset, h.base_offset + i as i64, "{rel}");
                        assert!(r.timestamp <= h.max_timestamp || h.max_timestamp == 0);
                    }
                }
                (
                    *position,
                    h.base_offset,
                    h.last_offset(),
                    h.compression().name().to_string(),
                )
            }
            Entry::Legacy {
                position,
                magic,
                base_offset,
                ..
            } => (*position, *base_offset, *base_offset, format!("v{magic}")),
        })
        .collect()
}

fn s(position: usize, base: i64, last: i64, codec: &str) -> (usize, i64, i64, String) {
    (position, base, last, codec.to_string())
}

#[test]
fn every_fixture_is_walked_to_its_end() {
    for rel in V2_FILES.iter().chain(MIXED_FILES).chain(LEGACY_FILES) {
        let buf = fixture(rel);
        let (entries, err) = walk_mixed(&buf);
        assert_eq!(err, None, "{rel}");
        assert!(!entries.is_empty(), "{rel}");
        let end = match entries.last().unwrap() {
            Entry::V2 { position, batch } => position + batch.size(),
            Entry::Legacy { position, size, .. } => position + size,
        };
        assert_eq!(end, buf.len(), "{rel}");
    }
}

#[test]
fn pure_v2_fixtures_walk_with_batch_iter() {
    for rel in V2_FILES {
        let buf = fixture(rel);
        let mut n = 0;
        for item in BatchIter::new(&buf) {
            let (_, batch) = item.unwrap_or_else(|e| panic!("{rel}: {e}"));
            assert!(batch.is_valid(), "{rel}");
            n += 1;
        }
        assert!(n > 0, "{rel}");
    }
}

#[test]
fn segmentio_layouts() {
    assert_eq!(
        summarize("segmentio-kafka-go/v2-v2.records.bin"),
        vec![s(0, 0, 1, "none"), s(150, 2, 3, "none")]
    );
    assert_eq!(
        summarize("segmentio-kafka-go/v2c-v2-v2c.records.bin"),
        vec![
            s(0, 0, 1, "gzip"),
            s(133, 2, 3, "none"),
            s(285, 4, 5, "gzip")
        ]
    );
    assert_eq!(
        summarize("segmentio-kafka-go/v2c-v2c.records.bin"),
        vec![s(0, 0, 1, "gzip"), s(133, 2, 3, "gzip")]
    );
    // v2 batches found after legacy entries.
    assert_eq!(
        summarize("segmentio-kafka-go/v1-v1c-v2-v2c-v2b-v2b-v2b-v2bc-v1b-v1bc.records.bin"),
        vec![
            s(0, 0, 0, "v1"),
            s(72, 1, 1, "v1"),
            s(143, 2, 2, "v1"),
            s(250, 3, 3, "v1"),
            s(356, 4, 4, "none"),
            s(462, 5, 5, "none"),
            s(568, 6, 6, "gzip"),
            s(686, 7, 7, "gzip"),
            s(804, 8, 9, "none"),
            s(957, 10, 11, "gzip"),
            s(1094, 12, 13, "none"),
            s(1244, 14, 15, "gzip"),
            s(1375, 16, 16, "v1"),
            s(1445, 17, 17, "v1"),
            s(1517, 19, 19, "v1"),
        ]
    );
    assert_eq!(
        summarize("segmentio-kafka-go/v2b-v1.records.bin"),
        vec![s(0, 0, 1, "none"), s(150, 2, 2, "v1"), s(222, 3, 3, "v1")]
    );
    assert_eq!(
        summarize("segmentio-kafka-go/v2bc-v1-v1c.records.bin"),
        vec![
            s(0, 0, 1, "gzip"),
            s(133, 2, 2, "v1"),
            s(205, 3, 3, "v1"),
            s(277, 5, 5, "v1"),
        ]
    );
    assert_eq!(
        summarize("segmentio-kafka-go/v2bc-v1.records.bin"),
        vec![s(0, 0, 1, "gzip"), s(133, 2, 2, "v1"), s(205, 3, 3, "v1")]
    );
    assert_eq!(
        summarize("segmentio-kafka-go/v2bc-v1c.records.bin"),
        vec![s(0, 0, 1, "gzip"), s(133, 3, 3, "v1")]
    );
}

#[test]
fn segmentio_uncompressed_values() {
    let buf = fixture("segmentio-kafka-go/v2-v2.records.bin");
    let batches: Vec<_> = BatchIter::new(&buf).map(|r| r.unwrap().1).collect();
    let mut got = Vec::new();
    for b in &batches {
        for r in b.records().unwrap() {
            got.push((
                r.offset,
                r.timestamp,
                String::from_utf8(r.key.unwrap()).unwrap(),
                String::from_utf8(r.value.unwrap()).unwrap(),
            ));
        }
    }
    let v = |c: char| {
        format!(
            "{{\"count\":0,\"filler\":\"{}\"}}",
            c.to_string().repeat(10)
        )
    };
    assert_eq!(
        got,
        vec![
            (0, 1633414495929, "alpha".into(), v('a')),
            (1, 1633414495954, "beta".into(), v('b')),
            (2, 1633414504352, "gamma".into(), v('c')),
            (3, 1633414505247, "delta".into(), v('d')),
        ]
    );
    // The last record of each batch carries the batch's max timestamp.
    assert_eq!(batches[0].header.max_timestamp, 1633414495954);
    assert_eq!(batches[1].header.max_timestamp, 1633414505247);
}

#[test]
fn kafka_python_v2_vectors() {
    let buf = fixture("kafka-python-tests/record_batch_data_v2.bin");
    let batches: Vec<_> = BatchIter::new(&buf).map(|r| r.unwrap()).collect();
    assert_eq!(
        batches.iter().map(|(p, _)| *p).collect::<Vec<_>>(),
        vec![0, 71, 147, 218]
    );
    let h0 = batches[0].1.header;
    assert_eq!(h0.partition_leader_epoch, 1);
    assert_eq!(h0.crc, 0x0318_a270);

    let all: Vec<Vec<Record>> = batches.iter().map(|(_, b)| b.records().unwrap()).collect();
    let r = &all[0][0];
    assert_eq!((r.offset, r.timestamp), (0, 1503229838908));
    assert_eq!(r.key, None);
    assert_eq!(r.value.as_deref(), Some(&b"123"[..]));
    assert!(r.headers.is_empty());

    // Two records with empty (not null) values; the second 168 ms later.
    assert_eq!(all[1].len(), 2);
    assert_eq!(
        all[1]
            .iter()
            .map(|r| (r.offset, r.timestamp, r.value.clone()))
            .collect::<Vec<_>>(),
        vec![
            (1, 1503229959532, Some(vec![])),
            (2, 1503229959700, Some(vec![])),
        ]
    );

    assert_eq!(all[2][0].offset, 3);
    assert_eq!(all[2][0].value.as_deref(), Some(&b"123"[..]));

    // The 4th vector restarts at offset 0 and has a header.
    let r = &all[3][0];
    assert_eq!((r.offset, r.timestamp), (0, 1535546684353));
    assert_eq!(r.value.as_deref(), Some(&b"hdr"[..]));
    assert_eq!(
        r.headers,
        vec![Header {
            key: "hkey".into(),
            value: Some(b"hval".to_vec())
        }]
    );
}

#[test]
fn sarama_uncompressed_record() {
    let buf = fixture("sarama-record-test/uncompressed_record.bin");
    let batch = Batch::parse(&buf).unwrap();
    assert_eq!(batch.size(), 82);
    assert!(batch.is_valid());
    assert_eq!(batch.header.base_timestamp, 1479847795000);
    let records = batch.records().unwrap();
    assert_eq!(records.len(), 1);
    let r = &records[0];
    // sarama's vector: timestamp delta 5 ms, key 1..4, value 5..7, header {8,9,10} = {11,12}.
    assert_eq!(r.offset, 0);
    assert_eq!(r.timestamp, 1479847795005);
    assert_eq!(r.key.as_deref(), Some(&[1u8, 2, 3, 4][..]));
    assert_eq!(r.value.as_deref(), Some(&[5u8, 6, 7][..]));
    assert_eq!(
        r.headers,
        vec![Header {
            key: "\u{8}\u{9}\u{a}".into(),
            value: Some(vec![11, 12])
        }]
    );
}

#[test]
fn sarama_compressed_records_are_valid_and_decode_or_are_unsupported() {
    let plain = fixture("sarama-record-test/uncompressed_record.bin");
    let plain_records = Batch::parse(&plain).unwrap().records().unwrap();
    for (rel, codec) in [
        ("sarama-record-test/gzipped_record.bin", Compression::Gzip),
        (
            "sarama-record-test/snappy_compressed_record.bin",
            Compression::Snappy,
        ),
        (
            "sarama-record-test/lz4_compressed_record.bin",
            Compression::Lz4,
        ),
    ] {
        let buf = fixture(rel);
        let batch = Batch::parse(&buf).unwrap();
        assert_eq!(batch.verify_crc(), Ok(()), "{rel}");
        assert_eq!(batch.size(), buf.len(), "{rel}");
        assert_eq!(batch.header.compression(), codec, "{rel}");
        assert_eq!(batch.header.record_count, 1, "{rel}");
        match batch.records() {
            // sarama compresses the same record as its uncompressed vector.
            Ok(records) => assert_eq!(records, plain_records, "{rel}"),
            Err(err) => {
                assert_eq!(err, RecordError::UnsupportedCompression(codec), "{rel}");
                assert!(err.to_string().contains(codec.name()));
            }
        }
    }
}

#[test]
fn segmentio_gzip_values_when_decompressed() {
    let buf = fixture("segmentio-kafka-go/v2c-v2c.records.bin");
    let mut got = Vec::new();
    for item in BatchIter::new(&buf) {
        let (_, batch) = item.unwrap();
        assert_eq!(batch.header.compression(), Compression::Gzip);
        match batch.records() {
            Ok(records) => got.extend(records.into_iter().map(|r| {
                (
                    r.offset,
                    String::from_utf8(r.key.unwrap()).unwrap(),
                    String::from_utf8(r.value.unwrap()).unwrap(),
                )
            })),
            Err(e) => {
                assert_eq!(e, RecordError::UnsupportedCompression(Compression::Gzip));
                return;
            }
        }
    }
    let v = |c: char| {
        format!(
            "{{\"count\":0,\"filler\":\"{}\"}}",
            c.to_string().repeat(10)
        )
    };
    assert_eq!(
        got,
        vec![
            (0, "alpha".into(), v('a')),
            (1, "beta".into(), v('b')),
            (2, "gamma".into(), v('c')),
            (3, "delta".into(), v('d')),
        ]
    );
}

#[test]
fn sarama_empty_and_control_batches() {
    let buf = fixture("sarama-record-test/empty_record.bin");
    let batch = Batch::parse(&buf).unwrap();
    assert!(batch.is_valid());
    assert_eq!(batch.header.record_count, 0);
    assert!(!batch.header.is_control());
    assert_eq!(batch.records().unwrap(), vec![]);

    let buf = fixture("sarama-record-test/control_batch.bin");
    let batch = Batch::parse(&buf).unwrap();
    assert!(batch.is_valid());
    assert!(batch.header.is_control());
    assert!(!batch.header.is_transactional());
    assert_eq!(batch.header.attributes, 0x20);
    assert_eq!(batch.records().unwrap(), vec![]);
}

#[test]
fn legacy_fixtures_give_unsupported_magic() {
    let expect = [
        ("kafka-python-tests/record_batch_data_v0.bin", 0, 29),
        ("kafka-python-tests/record_batch_data_v1.bin", 1, 37),
        ("segmentio-kafka-go/v1-v1.records.bin", 1, 72),
        ("segmentio-kafka-go/v1c-v1-v1c.records.bin", 1, 133),
        ("segmentio-kafka-go/v1c-v1c.records.bin", 1, 132),
    ];
    for (rel, magic, size) in expect {
        let buf = fixture(rel);
        let first = BatchIter::new(&buf).next().unwrap().unwrap_err();
        match &first {
            RecordError::UnsupportedMagic {
                magic: m, size: sz, ..
            } => assert_eq!((*m, *sz), (magic, size), "{rel}"),
            other => panic!("{rel}: {other:?}"),
        }
        assert!(
            first.to_string().contains(&format!("magic {magic}")),
            "{rel}: {first}"
        );
        assert_eq!(Batch::parse(&buf).unwrap_err(), first);
        assert_eq!(BatchHeader::parse(&buf).unwrap_err(), first);
        // BatchIter stops after the error rather than yielding garbage.
        assert_eq!(BatchIter::new(&buf).count(), 1);
        // And a mixed walker finds only legacy entries.
        let (entries, err) = walk_mixed(&buf);
        assert_eq!(err, None);
        assert!(entries.iter().all(|e| matches!(e, Entry::Legacy { .. })));
    }
    // The v1 wrapper of a compressed message set carries its last inner offset.
    let buf = fixture("segmentio-kafka-go/v1c-v1-v1c.records.bin");
    let (entries, _) = walk_mixed(&buf);
    let offsets: Vec<i64> = entries
        .iter()
        .map(|e| match e {
            Entry::Legacy { base_offset, .. } => *base_offset,
            Entry::V2 { .. } => unreachable!(),
        })
        .collect();
    assert_eq!(offsets, vec![1, 2, 3, 4, 5]);
}

// ---------------------------------------------------------------------------
// Regressions for bugs found while writing these tests

#[test]
fn offset_delta_overflow_is_corrupt_not_a_panic() {
    let mut buf = Vec::new();
    encode_batch(&mut buf, i64::MAX - 10, 0, &[NewRecord::value(b"v")]);
    // Record 0: length varint (1 byte), attributes, timestampDelta, then offsetDelta.
    let at = HEADER_LEN + 3;
    assert_eq!(buf[at], 0);
    buf[at] = 0x7e; // zig-zag 63: base + 63 > i64::MAX
    fix_crc(&mut buf);
    let batch = Batch::parse(&buf).unwrap();
    assert!(batch.is_valid());
    assert!(matches!(batch.records(), Err(RecordError::Corrupt(_))));
}

#[test]
fn last_offset_at_i64_max_is_rejected() {
    let v = [NewRecord::value(b"a"), NewRecord::value(b"b")];
    let mut buf = Vec::new();
    encode_batch(&mut buf, i64::MAX - 1, 0, &v);
    // next_offset() would be i64::MAX + 1.
    assert!(matches!(Batch::parse(&buf), Err(RecordError::Corrupt(_))));
    let mut buf = Vec::new();
    encode_batch(&mut buf, i64::MAX - 2, 0, &v);
    assert_eq!(Batch::parse(&buf).unwrap().header.next_offset(), i64::MAX);
}

#[test]
fn log_append_time_records_carry_max_timestamp() {
    let mut buf = Vec::new();
    encode_batch(
        &mut buf,
        0,
        1_000,
        &[NewRecord::value(b"a"), NewRecord::value(b"b")],
    );
    buf[22] |= 0x08; // attributes low byte: LogAppendTime
    buf[35..43].copy_from_slice(&5_000i64.to_be_bytes()); // maxTimestamp
    fix_crc(&mut buf);
    let batch = Batch::parse(&buf).unwrap();
    assert_eq!(batch.header.timestamp_type(), TimestampType::LogAppendTime);
    let ts: Vec<i64> = batch
        .records()
        .unwrap()
        .iter()
        .map(|r| r.timestamp)
        .collect();
    assert_eq!(ts, vec![5_000, 5_000]);
}

#[test]
fn compute_crc_of_short_slices_does_not_panic() {
    // Nothing past `attributes` means the CRC-32C of no bytes, which is 0.
    assert_eq!(compute_crc(&[]), 0);
    assert_eq!(compute_crc(&[1, 2, 3]), 0);
    assert_eq!(compute_crc(&[7; 22]), crc32c::crc32c(&[7]));
}

// ---------------------------------------------------------------------------
// Garbage never panics

fn small_batch() -> Vec<u8> {
    let mut buf = Vec::new();
    let h: &[(&str, Option<&[u8]>)] = &[("k", Some(b"v")), ("n", None)];
    let records = [
        NewRecord {
            key: Some(b"key"),
            value: Some(b"value"),
            headers: h,
        },
        NewRecord::default(),
        NewRecord::value(&[0xff; 200]),
    ];
    encode_batch(&mut buf, 42, 1_700_000_000_000, &records);
    buf
}

#[test]
fn every_truncation_is_an_error_not_a_panic() {
    let mut two = small_batch();
    let one = two.len();
    two.extend_from_slice(&small_batch());
    for len in 0..two.len() {
        let buf = &two[..len];
        poke(buf);
        if len < one {
            assert!(Batch::parse(buf).is_err(), "len {len}");
            // An empty buffer is an empty log, not an error.
            assert_eq!(
                BatchIter::new(buf).any(|r| r.is_err()),
                len > 0,
                "len {len}"
            );
        } else {
            // First batch whole, second torn (or absent).
            let items: Vec<_> = BatchIter::new(buf).collect();
            assert!(items[0].is_ok());
            assert_eq!(items.len(), if len == one { 1 } else { 2 });
            if len > one {
                assert!(
                    matches!(
                        items[1],
                        Err(RecordError::Truncated { .. }) | Err(RecordError::Corrupt(_))
                    ),
                    "len {len}: {:?}",
                    items[1]
                );
            }
        }
    }
}

#[test]
fn every_fixture_truncation_is_handled() {
    for rel in V2_FILES.iter().chain(MIXED_FILES).chain(LEGACY_FILES) {
        let buf = fixture(rel);
        for len in 0..buf.len() {
            poke(&buf[..len]);
        }
    }
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn arbitrary_bytes_never_panic(buf in prop::collection::vec(any::<u8>(), 0..512)) {
        poke(&buf);
    }

    /// Arbitrary bytes behind a plausible v2 prefix, so parsing gets past the framing.
    #[test]
    fn arbitrary_bytes_behind_a_v2_header_never_panic(
        base_offset in any::<i64>(),
        body in prop::collection::vec(any::<u8>(), 49..400),
        patch_length in any::<bool>(),
    ) {
        let mut buf = base_offset.to_be_bytes().to_vec();
        let len = if patch_length { body.len() as i32 } else { i32::from_be_bytes(body[0..4].try_into().unwrap()) };
        buf.extend_from_slice(&len.to_be_bytes());
        buf.extend_from_slice(&body);
        buf[16] = 2;
        poke(&buf);
        fix_crc(&mut buf);
        poke(&buf);
    }

    #[test]
    fn flipped_bytes_never_panic(
        records in prop::collection::vec(owned_record(64), 1..6),
        flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..6),
        recompute_crc in any::<bool>(),
    ) {
        let original = encode_owned(7, 1_700_000_000_000, &records);
        let mut buf = original.clone();
        for (i, x) in &flips {
            let at = i.index(buf.len());
            buf[at] ^= x;
        }
        // Two flips of one byte can cancel out, so look at what actually changed.
        let changed: Vec<usize> = (0..buf.len()).filter(|&i| buf[i] != original[i]).collect();
        if recompute_crc {
            fix_crc(&mut buf);
        } else if let Ok(batch) = Batch::parse(&buf)
            && !changed.is_empty()
            && changed.iter().all(|&i| i >= 21)
        {
            prop_assert!(!batch.is_valid(), "CRC missed a change at {:?}", changed);
        }
        poke(&buf);
    }

    #[test]
    fn truncated_random_batches_never_panic(
        records in prop::collection::vec(owned_record(32), 1..4),
    ) {
        let buf = encode_owned(0, 0, &records);
        for len in 0..buf.len() {
            poke(&buf[..len]);
            prop_assert!(Batch::parse(&buf[..len]).is_err());
        }
    }
}

// ---------------------------------------------------------------------------
// An independent decoder: the kafka-protocol crate

mod kafka_protocol_cross_check {
    use super::*;
    use kafka_protocol::records::RecordBatchDecoder;

    fn decode_theirs(buf: &[u8]) -> Vec<kafka_protocol::records::Record> {
        let mut slice = buf;
        let set = RecordBatchDecoder::decode(&mut slice).expect("kafka-protocol decodes it");
        assert!(slice.is_empty(), "kafka-protocol left bytes over");
        assert_eq!(set.version, 2);
        set.records
    }

    fn assert_same(ours: &[Record], theirs: &[kafka_protocol::records::Record]) {
        assert_eq!(ours.len(), theirs.len());
        for (o, t) in ours.iter().zip(theirs) {
            assert_eq!(o.offset, t.offset);
            assert_eq!(o.timestamp, t.timestamp);
            // kafka-protocol adds offsetDelta to a baseSequence of -1 too; Kafka's
            // DefaultRecord (and ours) keep -1 there, so compare real sequences only.
            if o.sequence >= 0 {
                assert_eq!(o.sequence, t.sequence);
            }
            assert_eq!(o.key.as_deref(), t.key.as_deref());
            assert_eq!(o.value.as_deref(), t.value.as_deref());
            let theirs_headers: Vec<(String, Option<Vec<u8>>)> = t
                .headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.as_ref().map(|v| v.to_vec())))
                .collect();
            let ours_headers: Vec<(String, Option<Vec<u8>>)> = o
                .headers
                .iter()
                .map(|h| (h.key.clone(), h.value.clone()))
                .collect();
            assert_eq!(ours_headers, theirs_headers);
        }
    }

    proptest! {
        #![proptest_config(config(64))]

        #[test]
        fn our_batches_decode_the_same_in_kafka_protocol(
            base_offset in 0..i64::MAX / 2,
            timestamp in any::<i64>(),
            mut records in prop::collection::vec(owned_record(2048), 1..30),
        ) {
            // kafka-protocol keeps headers in a map, so give each key a unique prefix.
            for r in &mut records {
                for (i, (k, _)) in r.headers.iter_mut().enumerate() {
                    *k = format!("{i}:{k}");
                }
            }
            let buf = encode_owned(base_offset, timestamp, &records);
            let theirs = decode_theirs(&buf);
            let ours = Batch::parse(&buf).unwrap().records().unwrap();
            assert_same(&ours, &theirs);
            prop_assert_eq!(theirs.len(), records.len());
            prop_assert!(theirs.iter().all(|t| !t.control && !t.transactional));
        }
    }

    #[test]
    fn uncompressed_fixture_batches_decode_the_same() {
        let mut checked = 0;
        for rel in V2_FILES.iter().chain(MIXED_FILES) {
            let buf = fixture(rel);
            let (entries, _) = walk_mixed(&buf);
            for e in entries {
                if let Entry::V2 { batch, .. } = e {
                    if batch.header.compression() != Compression::None
                        || batch.header.record_count == 0
                    {
                        continue;
                    }
                    assert_same(&batch.records().unwrap(), &decode_theirs(batch.bytes()));
                    checked += 1;
                }
            }
        }
        assert_eq!(checked, 13);
    }
}
