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

fn encode_owned_with(
    base_offset: i64,
    timestamp: i64,
    records: &[Owned],
    codec: Compression,
) -> Vec<u8> {
    let headers = header_refs(records);
    let new = new_records(records, &headers);
    let mut buf = Vec::new();
    let size = encode_batch_compressed(&mut buf, base_offset, timestamp, &new, codec);
    assert_eq!(size, buf.len());
    buf
}

const CODECS: [Compression; 4] = [
    Compression::Gzip,
    Compression::Snappy,
    Compression::Lz4,
    Compression::Zstd,
];

fn codec() -> impl Strategy<Value = Compression> {
    prop::sample::select(CODECS.to_vec())
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

proptest! {
    #![proptest_config(config(96))]

    #[test]
    fn compressed_encode_then_decode_round_trips(
        codec in codec(),
        base_offset in 0..i64::MAX / 2,
        timestamp in any::<i64>(),
        records in prop::collection::vec(owned_record(4096), 1..50),
    ) {
        let buf = encode_owned_with(base_offset, timestamp, &records, codec);
        let plain = encode_owned(base_offset, timestamp, &records);

        let batch = Batch::parse(&buf).unwrap();
        prop_assert_eq!(batch.size(), buf.len());
        prop_assert_eq!(batch.verify_crc(), Ok(()));
        let h = batch.header;
        prop_assert_eq!(h.compression(), codec);
        prop_assert_eq!(h.attributes, codec.id() as i16);
        prop_assert_eq!(h.record_count as usize, records.len());
        prop_assert_eq!(h.last_offset(), base_offset + records.len() as i64 - 1);
        prop_assert_eq!((h.base_timestamp, h.max_timestamp), (timestamp, timestamp));
        // Only the records section differs from the uncompressed encoding:
        // the header fields other than length, CRC and attributes are the same.
        prop_assert_eq!(&buf[..8], &plain[..8]);
        prop_assert_eq!(&buf[12..17], &plain[12..17]);
        prop_assert_eq!(&buf[23..HEADER_LEN], &plain[23..HEADER_LEN]);
        prop_assert_eq!(
            decompress(codec, batch.records_section()).unwrap(),
            &plain[HEADER_LEN..]
        );

        let plain_records = Batch::parse(&plain).unwrap().records().unwrap();
        prop_assert_eq!(batch.records().unwrap(), plain_records);
    }

    #[test]
    fn compress_then_decompress_round_trips(
        codec in codec(),
        data in prop_oneof![
            prop::collection::vec(any::<u8>(), 0..100_000),
            // Long runs: compressible, and several snappy / lz4 blocks.
            (any::<u8>(), 0usize..300_000).prop_map(|(b, n)| vec![b; n]),
        ],
    ) {
        let c = compress(codec, &data).unwrap();
        prop_assert_eq!(decompress(codec, &c).unwrap(), data);
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
                // Compressed or not, every batch must decode.
                let records = batch
                    .records()
                    .unwrap_or_else(|e| panic!("{rel} at {position}: {e}"));
                assert_eq!(records.len(), h.record_count as usize, "{rel}");
                for (i, r) in records.iter().enumerate() {
                    assert_eq!(r.offset, h.base_offset + i as i64, "{rel}");
                    assert!(r.timestamp <= h.max_timestamp || h.max_timestamp == 0);
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

/// Each segmentio-kafka-go fixture and its entries as [`summarize`] gives
/// them.
type Layout = (&'static str, &'static [(usize, i64, i64, &'static str)]);

const SEGMENTIO_LAYOUTS: &[Layout] = &[
    ("v2-v2", &[(0, 0, 1, "none"), (150, 2, 3, "none")]),
    (
        "v2c-v2-v2c",
        &[(0, 0, 1, "gzip"), (133, 2, 3, "none"), (285, 4, 5, "gzip")],
    ),
    ("v2c-v2c", &[(0, 0, 1, "gzip"), (133, 2, 3, "gzip")]),
    // v2 batches found after legacy entries.
    (
        "v1-v1c-v2-v2c-v2b-v2b-v2b-v2bc-v1b-v1bc",
        &[
            (0, 0, 0, "v1"),
            (72, 1, 1, "v1"),
            (143, 2, 2, "v1"),
            (250, 3, 3, "v1"),
            (356, 4, 4, "none"),
            (462, 5, 5, "none"),
            (568, 6, 6, "gzip"),
            (686, 7, 7, "gzip"),
            (804, 8, 9, "none"),
            (957, 10, 11, "gzip"),
            (1094, 12, 13, "none"),
            (1244, 14, 15, "gzip"),
            (1375, 16, 16, "v1"),
            (1445, 17, 17, "v1"),
            (1517, 19, 19, "v1"),
        ],
    ),
    (
        "v2b-v1",
        &[(0, 0, 1, "none"), (150, 2, 2, "v1"), (222, 3, 3, "v1")],
    ),
    (
        "v2bc-v1-v1c",
        &[
            (0, 0, 1, "gzip"),
            (133, 2, 2, "v1"),
            (205, 3, 3, "v1"),
            (277, 5, 5, "v1"),
        ],
    ),
    (
        "v2bc-v1",
        &[(0, 0, 1, "gzip"), (133, 2, 2, "v1"), (205, 3, 3, "v1")],
    ),
    ("v2bc-v1c", &[(0, 0, 1, "gzip"), (133, 3, 3, "v1")]),
];

#[test]
fn segmentio_layouts() {
    for (name, entries) in SEGMENTIO_LAYOUTS {
        let want: Vec<(usize, i64, i64, String)> = (entries.iter())
            .map(|&(position, base, last, codec)| (position, base, last, codec.to_string()))
            .collect();
        let rel = format!("segmentio-kafka-go/{name}.records.bin");
        assert_eq!(summarize(&rel), want, "{rel}");
    }
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
fn sarama_compressed_records_decode() {
    let plain = fixture("sarama-record-test/uncompressed_record.bin");
    let plain_records = Batch::parse(&plain).unwrap().records().unwrap();
    for (rel, codec, section_start) in [
        // gzip member header.
        (
            "sarama-record-test/gzipped_record.bin",
            Compression::Gzip,
            &[0x1f, 0x8b, 0x08][..],
        ),
        // sarama writes snappy-java's framing, as Kafka's Java client does.
        (
            "sarama-record-test/snappy_compressed_record.bin",
            Compression::Snappy,
            &b"\x82SNAPPY\0\0\0\0\x01\0\0\0\x01"[..],
        ),
        // LZ4 frame magic; FLG 0x64 = version 1, independent blocks, content checksum.
        (
            "sarama-record-test/lz4_compressed_record.bin",
            Compression::Lz4,
            &[0x04, 0x22, 0x4d, 0x18, 0x64, 0x40][..],
        ),
    ] {
        let buf = fixture(rel);
        let batch = Batch::parse(&buf).unwrap();
        assert_eq!(batch.verify_crc(), Ok(()), "{rel}");
        assert_eq!(batch.size(), buf.len(), "{rel}");
        assert_eq!(batch.header.compression(), codec, "{rel}");
        assert_eq!(batch.header.record_count, 1, "{rel}");
        assert!(batch.records_section().starts_with(section_start), "{rel}");
        // The section inflates to the uncompressed vector's records, byte for byte.
        assert_eq!(
            decompress(codec, batch.records_section()).unwrap(),
            &plain[HEADER_LEN..],
            "{rel}"
        );
        let records = batch.records().unwrap();
        assert_eq!(records, plain_records, "{rel}");
        // sarama's vector, as in `sarama_uncompressed_record`.
        let r = &records[0];
        assert_eq!((r.offset, r.timestamp), (0, 1479847795005), "{rel}");
        assert_eq!(r.key.as_deref(), Some(&[1u8, 2, 3, 4][..]), "{rel}");
        assert_eq!(r.value.as_deref(), Some(&[5u8, 6, 7][..]), "{rel}");
        assert_eq!(
            r.headers,
            vec![Header {
                key: "\u{8}\u{9}\u{a}".into(),
                value: Some(vec![11, 12])
            }],
            "{rel}"
        );
    }
}

/// (offset, timestamp, key, value) of every record in the fixture's v2 batches.
fn v2_values(rel: &str) -> Vec<(i64, i64, String, String)> {
    let buf = fixture(rel);
    let (entries, err) = walk_mixed(&buf);
    assert_eq!(err, None, "{rel}");
    let mut got = Vec::new();
    for e in entries {
        if let Entry::V2 { batch, .. } = e {
            for r in batch.records().unwrap() {
                got.push((
                    r.offset,
                    r.timestamp,
                    String::from_utf8(r.key.unwrap()).unwrap(),
                    String::from_utf8(r.value.unwrap()).unwrap(),
                ));
            }
        }
    }
    got
}

#[test]
fn segmentio_gzip_values() {
    let v = |c: char| {
        format!(
            "{{\"count\":0,\"filler\":\"{}\"}}",
            c.to_string().repeat(10)
        )
    };
    let rec = |o: i64, t: i64, k: &str, c: char| (o, t, k.to_string(), v(c));
    assert_eq!(
        v2_values("segmentio-kafka-go/v2c-v2c.records.bin"),
        vec![
            rec(0, 1633414684500, "alpha", 'a'),
            rec(1, 1633414684528, "beta", 'b'),
            rec(2, 1633414694417, "gamma", 'c'),
            rec(3, 1633414695120, "delta", 'd'),
        ]
    );
    let mixed = v2_values("segmentio-kafka-go/v2c-v2-v2c.records.bin");
    assert_eq!(mixed.len(), 6);
    assert_eq!(mixed[0], rec(0, 1633414998643, "alpha", 'a'));
    assert_eq!(mixed[1], rec(1, 1633414998669, "beta", 'b'));
    assert_eq!(
        mixed[2..4].iter().map(|r| r.0).collect::<Vec<_>>(),
        vec![2, 3]
    );
    assert_eq!(mixed[4], rec(4, 1633415023097, "epsilon", 'e'));
    assert_eq!(mixed[5], rec(5, 1633415024052, "zeta", 'f'));
    // Each pair of keys was produced twice, uncompressed then gzip; the v1 entries
    // around them are skipped.
    assert_eq!(
        v2_values("segmentio-kafka-go/v1-v1c-v2-v2c-v2b-v2b-v2b-v2bc-v1b-v1bc.records.bin")
            .into_iter()
            .map(|(o, _, k, _)| (o, k))
            .collect::<Vec<_>>(),
        [
            (4, "gamma"),
            (5, "delta"),
            (6, "gamma"),
            (7, "delta"),
            (8, "epsilon"),
            (9, "zeta"),
            (10, "epsilon"),
            (11, "zeta"),
            (12, "eta"),
            (13, "theta"),
            (14, "eta"),
            (15, "theta"),
        ]
        .map(|(o, k)| (o, k.to_string()))
        .to_vec()
    );
    for rel in [
        "segmentio-kafka-go/v2bc-v1-v1c.records.bin",
        "segmentio-kafka-go/v2bc-v1.records.bin",
    ] {
        assert_eq!(
            v2_values(rel),
            vec![
                rec(0, 1633407550377, "alpha", 'a'),
                rec(1, 1633407550403, "beta", 'b')
            ],
            "{rel}"
        );
    }
    assert_eq!(
        v2_values("segmentio-kafka-go/v2bc-v1c.records.bin"),
        vec![
            rec(0, 1633405558246, "alpha", 'a'),
            rec(1, 1633405558271, "beta", 'b')
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
// Compressed batches: the stream formats Kafka writes, and what Kafka's readers accept

/// Rebuilds `batch` with another records section and codec, as another writer would.
fn with_section(batch: &[u8], codec_id: u8, section: &[u8]) -> Vec<u8> {
    let mut out = batch[..HEADER_LEN].to_vec();
    out[22] = (out[22] & !0x7) | codec_id;
    out.extend_from_slice(section);
    let length = (out.len() - 12) as i32;
    out[8..12].copy_from_slice(&length.to_be_bytes());
    fix_crc(&mut out);
    out
}

/// About 200 KiB of records section: several snappy (32 KiB) and lz4 (64 KiB) blocks.
fn big_records() -> Vec<Owned> {
    (0..50u32)
        .map(|i| Owned {
            key: Some(i.to_be_bytes().to_vec()),
            value: Some(
                (0..4000u32)
                    .map(|j| (j.wrapping_mul(2654435761) >> (i % 24)) as u8)
                    .collect(),
            ),
            headers: vec![(format!("h{i}"), Some(vec![i as u8; 3]))],
        })
        .collect()
}

#[test]
fn written_streams_have_kafkas_framing() {
    let records = big_records();
    let plain = encode_owned(100, 1_700_000_000_000, &records);
    let raw = &plain[HEADER_LEN..];
    assert!(raw.len() > 200_000);
    for codec in CODECS {
        let buf = encode_owned_with(100, 1_700_000_000_000, &records, codec);
        let section = Batch::parse(&buf).unwrap().records_section();
        match codec {
            Compression::Gzip => assert_eq!(section[..3], [0x1f, 0x8b, 0x08]),
            Compression::Zstd => assert_eq!(section[..4], [0x28, 0xb5, 0x2f, 0xfd]),
            Compression::Lz4 => {
                // KafkaLZ4BlockOutputStream: FLG 0x60 (version 1, independent blocks,
                // no checksums, no content size), BD 0x40 (64 KiB blocks), and the
                // frame ends with the end mark alone (no content checksum).
                assert_eq!(section[..6], [0x04, 0x22, 0x4d, 0x18, 0x60, 0x40]);
                assert_eq!(section[section.len() - 4..], [0, 0, 0, 0]);
            }
            Compression::Snappy => {
                // snappy-java's SnappyOutputStream: header, then 32 KiB blocks, each
                // behind its big-endian compressed length.
                assert_eq!(&section[..16], b"\x82SNAPPY\0\0\0\0\x01\0\0\0\x01");
                let mut pos = 16;
                let mut inflated = Vec::new();
                while pos < section.len() {
                    let len = u32::from_be_bytes(section[pos..pos + 4].try_into().unwrap());
                    pos += 4;
                    let block = snap::raw::Decoder::new()
                        .decompress_vec(&section[pos..pos + len as usize])
                        .unwrap();
                    pos += len as usize;
                    inflated.push(block);
                }
                assert_eq!(pos, section.len());
                assert_eq!(inflated.len(), raw.len().div_ceil(32 * 1024));
                assert!(
                    inflated[..inflated.len() - 1]
                        .iter()
                        .all(|b| b.len() == 32 * 1024)
                );
                assert_eq!(inflated.concat(), raw);
            }
            Compression::None => unreachable!(),
        }
        assert_eq!(decompress(codec, section).unwrap(), raw, "{codec:?}");
    }
}

#[test]
fn raw_snappy_and_concatenated_streams_are_read() {
    let records = big_records();
    let plain = encode_owned(0, 5, &records);
    let raw = &plain[HEADER_LEN..];
    let want = Batch::parse(&plain).unwrap().records().unwrap();
    let decode = |buf: &[u8]| {
        let batch = Batch::parse(buf).unwrap();
        assert!(batch.is_valid());
        batch.records().unwrap()
    };

    // One raw snappy block, no framing: snappy-java's reader falls back to it.
    let section = snap::raw::Encoder::new().compress_vec(raw).unwrap();
    assert_eq!(decode(&with_section(&plain, 2, &section)), want);

    // Two snappy-java streams back to back: the second header stands where a
    // block length would.
    let (a, b) = raw.split_at(70_001);
    let mut section = compress(Compression::Snappy, a).unwrap();
    section.extend(compress(Compression::Snappy, b).unwrap());
    assert_eq!(decode(&with_section(&plain, 2, &section)), want);

    // Two gzip members, as Java's GZIPInputStream reads them; two zstd frames,
    // as zstd-jni reads them.
    for codec in [Compression::Gzip, Compression::Zstd] {
        let mut section = compress(codec, a).unwrap();
        section.extend(compress(codec, b).unwrap());
        assert_eq!(
            decode(&with_section(&plain, codec.id(), &section)),
            want,
            "{codec:?}"
        );
    }

    // Kafka's LZ4 reader stops at the first frame's end mark and ignores the rest.
    let mut section = compress(Compression::Lz4, a).unwrap();
    section.extend(compress(Compression::Lz4, b).unwrap());
    assert_eq!(decompress(Compression::Lz4, &section).unwrap(), a);
}

#[test]
fn decompression_is_capped() {
    let data = vec![0u8; 1 << 20];
    for codec in CODECS {
        let c = compress(codec, &data).unwrap();
        assert!(c.len() < data.len() / 10, "{codec:?}");
        assert_eq!(
            compression::decompress_with_limit(codec, &c, data.len()).unwrap(),
            data
        );
        assert_eq!(
            compression::decompress_with_limit(codec, &c, data.len() - 1),
            Err(RecordError::DecompressedTooLarge {
                codec,
                limit: data.len() - 1
            }),
            "{codec:?}"
        );
    }
}

#[test]
fn forged_snappy_lengths_are_refused_before_allocating() {
    let mut plain = Vec::new();
    encode_batch(&mut plain, 0, 0, &[NewRecord::value(b"v")]);
    // A raw block whose length varint claims 4 GiB - 1.
    let forged_raw = [0xff, 0xff, 0xff, 0xff, 0x0f, 0x00];
    // The same inside snappy-java's framing.
    let mut forged_framed = b"\x82SNAPPY\0\0\0\0\x01\0\0\0\x01".to_vec();
    forged_framed.extend_from_slice(&(forged_raw.len() as u32).to_be_bytes());
    forged_framed.extend_from_slice(&forged_raw);
    for section in [&forged_raw[..], &forged_framed[..]] {
        let err = Batch::parse(&with_section(&plain, 2, section))
            .unwrap()
            .records()
            .unwrap_err();
        assert_eq!(
            err,
            RecordError::DecompressedTooLarge {
                codec: Compression::Snappy,
                limit: MAX_DECOMPRESSED_SIZE
            }
        );
        assert_eq!(
            err.to_string(),
            "snappy records section decompresses to more than 67108864 bytes"
        );
    }
}

#[test]
fn compressed_garbage_and_wrong_counts_are_errors() {
    let mut plain = Vec::new();
    encode_batch(
        &mut plain,
        0,
        0,
        &[NewRecord::value(b"one"), NewRecord::value(b"two")],
    );
    for codec in CODECS {
        // Not a stream of this codec at all.
        let garbage = with_section(&plain, codec.id(), b"definitely not compressed data");
        let err = Batch::parse(&garbage).unwrap().records().unwrap_err();
        assert!(
            matches!(&err, RecordError::Decompress { codec: c, .. } if *c == codec),
            "{codec:?}: {err:?}"
        );
        assert!(err.to_string().starts_with(codec.name()), "{err}");

        // A truncated stream, whatever was cut: trailer, checksum, end mark, data.
        let mut buf = Vec::new();
        encode_batch_compressed(&mut buf, 0, 0, &[NewRecord::value(&[7; 5000])], codec);
        for cut in 1..=10 {
            let section = &buf[HEADER_LEN..buf.len() - cut];
            let truncated = with_section(&buf, codec.id(), section);
            let got = Batch::parse(&truncated).unwrap().records();
            assert!(
                matches!(got, Err(RecordError::Decompress { .. })),
                "{codec:?} cut {cut}: {got:?}"
            );
        }

        // A count the inflated section cannot hold.
        let mut buf = Vec::new();
        encode_batch_compressed(&mut buf, 0, 0, &[NewRecord::value(b"x")], codec);
        buf[57..61].copy_from_slice(&1000i32.to_be_bytes());
        fix_crc(&mut buf);
        match Batch::parse(&buf).unwrap().records() {
            Err(RecordError::Corrupt(m)) => assert!(m.contains("claims 1000 records"), "{m}"),
            other => panic!("{codec:?}: {other:?}"),
        }

        // An empty batch with nothing behind its header carries no records.
        let mut empty = with_section(&plain, codec.id(), &[]);
        empty[57..61].copy_from_slice(&0i32.to_be_bytes());
        fix_crc(&mut empty);
        assert_eq!(Batch::parse(&empty).unwrap().records(), Ok(vec![]));
    }
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn garbage_sections_never_panic(
        codec in codec(),
        section in prop::collection::vec(any::<u8>(), 0..300),
        count in 0i32..5,
    ) {
        let _ = decompress(codec, &section);
        let mut plain = Vec::new();
        encode_batch(&mut plain, 0, 0, &[NewRecord::value(b"v")]);
        let mut buf = with_section(&plain, codec.id(), &section);
        buf[57..61].copy_from_slice(&count.to_be_bytes());
        fix_crc(&mut buf);
        poke(&buf);
    }

    #[test]
    fn flipped_bytes_in_compressed_batches_never_panic(
        codec in codec(),
        records in prop::collection::vec(owned_record(256), 1..6),
        flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..6),
    ) {
        let mut buf = encode_owned_with(7, 1_700_000_000_000, &records, codec);
        for (i, x) in &flips {
            let at = HEADER_LEN + i.index(buf.len() - HEADER_LEN);
            buf[at] ^= x;
        }
        fix_crc(&mut buf);
        poke(&buf);
        for len in (0..buf.len()).step_by(7) {
            poke(&buf[..len]);
        }
    }
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

    fn their_codec(codec: Compression) -> kafka_protocol::records::Compression {
        use kafka_protocol::records::Compression as K;
        match codec {
            Compression::None => K::None,
            Compression::Gzip => K::Gzip,
            Compression::Snappy => K::Snappy,
            Compression::Lz4 => K::Lz4,
            Compression::Zstd => K::Zstd,
        }
    }

    /// kafka-protocol keeps headers in a map, so give each key a unique prefix.
    fn unique_header_keys(records: &mut [Owned]) {
        for r in records {
            for (i, (k, _)) in r.headers.iter_mut().enumerate() {
                *k = format!("{i}:{k}");
            }
        }
    }

    proptest! {
        #![proptest_config(config(64))]

        #[test]
        fn our_compressed_batches_decode_the_same_in_kafka_protocol(
            codec in codec(),
            base_offset in 0..i64::MAX / 2,
            timestamp in any::<i64>(),
            mut records in prop::collection::vec(owned_record(2048), 1..30),
        ) {
            unique_header_keys(&mut records);
            let buf = encode_owned_with(base_offset, timestamp, &records, codec);
            let theirs = decode_theirs(&buf);
            let ours = Batch::parse(&buf).unwrap().records().unwrap();
            assert_same(&ours, &theirs);
            prop_assert_eq!(theirs.len(), records.len());
        }

        /// The other direction: batches kafka-protocol compresses (its lz4 is the C
        /// library's frame writer, its snappy writes snappy-java's framing) decode with ours.
        #[test]
        fn kafka_protocol_compressed_batches_decode_the_same_in_ours(
            codec in codec(),
            base_offset in 0..i64::MAX / 2,
            timestamp in 0..i64::MAX / 2,
            mut records in prop::collection::vec(owned_record(2048), 1..30),
        ) {
            use kafka_protocol::indexmap::IndexMap;
            use kafka_protocol::protocol::StrBytes;
            use kafka_protocol::records::{RecordBatchEncoder, RecordEncodeOptions};
            unique_header_keys(&mut records);
            let theirs: Vec<kafka_protocol::records::Record> = records
                .iter()
                .enumerate()
                .map(|(i, r)| kafka_protocol::records::Record {
                    transactional: false,
                    control: false,
                    delete_horizon: false,
                    partition_leader_epoch: 0,
                    producer_id: -1,
                    producer_epoch: -1,
                    timestamp_type: kafka_protocol::records::TimestampType::Creation,
                    offset: base_offset + i as i64,
                    // kafka-protocol starts a new batch wherever offset - sequence
                    // changes; this keeps one batch with baseSequence -1.
                    sequence: i as i32 - 1,
                    timestamp,
                    key: r.key.clone().map(Into::into),
                    value: r.value.clone().map(Into::into),
                    headers: r
                        .headers
                        .iter()
                        .map(|(k, v)| (StrBytes::from_string(k.clone()), v.clone().map(Into::into)))
                        .collect::<IndexMap<_, _>>(),
                })
                .collect();
            let mut buf = Vec::new();
            RecordBatchEncoder::encode(
                &mut buf,
                &theirs,
                &RecordEncodeOptions { version: 2, compression: their_codec(codec) },
            )
            .unwrap();
            let batch = Batch::parse(&buf).unwrap();
            prop_assert_eq!(batch.size(), buf.len());
            prop_assert_eq!(batch.verify_crc(), Ok(()));
            prop_assert_eq!(batch.header.compression(), codec);
            assert_same(&batch.records().unwrap(), &theirs);
        }
    }

    #[test]
    fn compressed_fixture_batches_decode_the_same() {
        let mut checked = Vec::new();
        for rel in V2_FILES.iter().chain(MIXED_FILES) {
            let buf = fixture(rel);
            let (entries, _) = walk_mixed(&buf);
            for e in entries {
                if let Entry::V2 { batch, .. } = e {
                    if batch.header.compression() == Compression::None {
                        continue;
                    }
                    assert_same(&batch.records().unwrap(), &decode_theirs(batch.bytes()));
                    checked.push(batch.header.compression());
                }
            }
        }
        let count = |c| checked.iter().filter(|&&x| x == c).count();
        assert_eq!(
            CODECS.map(count),
            [12, 1, 1, 0],
            "gzip, snappy, lz4, zstd batches"
        );
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

proptest! {
    /// Decoding one record by offset gives the same record as decoding all.
    #[test]
    fn decode_record_at_matches_full_decode(
        values in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 1..40),
        base in 0i64..1_000_000,
    ) {
        let recs: Vec<NewRecord> = values.iter().map(|v| NewRecord::value(v)).collect();
        let mut buf = Vec::new();
        encode_batch(&mut buf, base, 1_700_000_000_000, &recs);
        let batch = Batch::parse(&buf).unwrap();
        let all = batch.records().unwrap();
        let section = batch.uncompressed_section().unwrap();
        for r in &all {
            let one = commitfs::record::decode_record_at(&batch.header, &section, r.offset).unwrap();
            prop_assert_eq!(one.as_ref(), Some(r));
        }
        let past = commitfs::record::decode_record_at(&batch.header, &section, base + values.len() as i64).unwrap();
        prop_assert!(past.is_none());
    }
}
