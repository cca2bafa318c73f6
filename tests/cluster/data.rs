//! The data plane: appends, records, xattrs, the stream, the cache and
//! `tail -f`, on every kind of cluster.

use std::time::Duration;

use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseRecord, Producer};

use crate::fixture::{Kind, fixture, wait_for};

on_every_cluster!(
    append_then_read_every_way,
    keys_headers_and_null_values_from_another_client,
    parse_key_lines_become_keyed_records,
    a_stream_of_many_writes_reads_whole_and_at_any_place,
    a_second_read_near_the_first_costs_no_round_trip,
    tail_sees_appends_of_another_client,
);

fn append_then_read_every_way(kind: Kind) {
    let f = fixture(kind, 1, 5000, |_| {});
    let p = f.p(0);
    f.write(&format!("{p}/log"), b"hello\n").unwrap();
    f.write(&format!("{p}/log"), b"a\nb\nc\n").unwrap();
    assert_eq!(f.text(&format!("{p}/offset/0")), "hello");
    assert_eq!(f.text(&format!("{p}/offset/3")), "c");
    assert_eq!(f.read(&format!("{p}/offset/4")), Err(libc::ENOENT));
    assert_eq!(f.text(&format!("{p}/log")), "hello\na\nb\nc\n");
    assert_eq!(f.size(&format!("{p}/log")), Ok(12));
    let o1 = format!("{p}/offset/1");
    let ts: i64 = String::from_utf8(f.xattr(&o1, "user.kafka.timestamp").unwrap())
        .unwrap()
        .parse()
        .unwrap();
    assert!(ts > 1_600_000_000_000, "{ts}");
    assert_eq!(
        f.xattr(&o1, "user.kafka.timestamp_type").unwrap(),
        b"CreateTime"
    );
    assert_eq!(f.xattr(&o1, "user.kafka.key"), Err(libc::ENODATA));
    // The cluster hands out records, not batches: no batch or file position.
    assert_eq!(
        f.xattr(&o1, "user.kafka.batch_base_offset"),
        Err(libc::ENODATA)
    );
    assert_eq!(f.xattr(&o1, "user.kafka.position"), Err(libc::ENODATA));
    assert_eq!(f.status(&p, "log_end_offset"), 4);
    assert_eq!(f.status(&p, "log_start_offset"), 0);
    assert!(f.status(&p, "leader") >= 0);
    let past = format!("{p}/time/{}", ts + 3_600_000);
    assert_eq!(f.read(&past), Err(libc::ENOENT));
    if f.full() {
        // The mock cluster answers every lookup by time with "none".
        assert_eq!(f.text(&format!("{p}/time/{ts}")), "1\n");
        assert_eq!(f.text(&format!("{p}/time/0")), "0\n");
    }
}

fn keys_headers_and_null_values_from_another_client(kind: Kind) {
    let f = fixture(kind, 1, 5000, |_| {});
    let p = f.p(0);
    let producer = f.other_producer();
    let headers = OwnedHeaders::new()
        .insert(Header {
            key: "h1",
            value: Some("one"),
        })
        .insert(Header {
            key: "h1",
            value: Some("uno"),
        })
        .insert(Header {
            key: "empty",
            value: None::<&str>,
        });
    producer
        .send(
            BaseRecord::to(&f.topic)
                .partition(0)
                .key("k\x00ey")
                .payload("v1")
                .headers(headers),
        )
        .unwrap();
    producer
        .send(
            BaseRecord::<str, str>::to(&f.topic)
                .partition(0)
                .key("nothing"),
        )
        .unwrap();
    producer.flush(Duration::from_secs(10)).unwrap();
    let o0 = format!("{p}/offset/0");
    assert_eq!(f.text(&o0), "v1");
    assert_eq!(f.xattr(&o0, "user.kafka.key").unwrap(), b"k\x00ey");
    assert_eq!(f.xattr(&o0, "user.kafka.header.h1").unwrap(), b"uno");
    assert_eq!(f.xattr(&o0, "user.kafka.header.empty").unwrap(), b"");
    let list = f.tree.listxattr(f.ino(&o0).unwrap()).unwrap();
    let names: Vec<&[u8]> = list.split(|b| *b == 0).filter(|n| !n.is_empty()).collect();
    assert_eq!(
        names,
        [
            &b"user.kafka.timestamp"[..],
            b"user.kafka.timestamp_type",
            b"user.kafka.key",
            b"user.kafka.header.h1",
            b"user.kafka.header.empty"
        ]
    );
    assert_eq!(f.text(&format!("{p}/offset/1")), "");
    assert_eq!(f.text(&format!("{p}/log")), "v1\n\n");
}

fn parse_key_lines_become_keyed_records(kind: Kind) {
    let f = fixture(kind, 1, 5000, |_| {});
    let p = f.p(0);
    f.write(&format!("{p}/config/parse.key"), b"true\n")
        .unwrap();
    f.write(&format!("{p}/config/key.separator"), b":\n")
        .unwrap();
    assert_eq!(f.text(&format!("{p}/config/parse.key")), "true\n");
    f.write(&format!("{p}/log"), b"k1:v1\nk2:v:2\n").unwrap();
    assert_eq!(
        f.xattr(&format!("{p}/offset/1"), "user.kafka.key").unwrap(),
        b"k2"
    );
    assert_eq!(f.text(&format!("{p}/offset/1")), "v:2");
    // A line without the separator: the whole write is refused.
    assert_eq!(
        f.write(&format!("{p}/log"), b"k3:v3\nnokey\n"),
        Err(libc::EINVAL)
    );
    assert_eq!(f.status(&p, "log_end_offset"), 2);
}

fn a_stream_of_many_writes_reads_whole_and_at_any_place(kind: Kind) {
    let f = fixture(kind, 1, 5000, |o| o.set("cache.bytes", "20000").unwrap());
    let p = f.p(0);
    let mut want = Vec::new();
    for w in 0..20 {
        let mut data = Vec::new();
        for i in 0..150 {
            data.extend_from_slice(format!("w{w}-r{i}-{}\n", "x".repeat(i % 40)).as_bytes());
        }
        f.write(&format!("{p}/log"), &data).unwrap();
        want.extend_from_slice(&data);
    }
    let log = format!("{p}/log");
    assert_eq!(f.size(&log), Ok(want.len() as u64));
    assert_eq!(f.read(&log).unwrap(), want);
    let fh = f.open(&log, true, false).unwrap();
    for pos in [0usize, 1, 4095, 33333, want.len() - 10, want.len()] {
        let got = f.read_at(fh, pos as u64, 100).unwrap();
        assert_eq!(got, want[pos..(pos + 100).min(want.len())], "at {pos}");
    }
    f.tree.release(fh).unwrap();
    // The cache stays within cache.bytes.
    assert!(f.status(&p, "cache_bytes") <= 20000);
    assert!(f.status(&p, "stream_spans") >= 1);
}

fn a_second_read_near_the_first_costs_no_round_trip(kind: Kind) {
    let f = fixture(kind, 1, 5000, |_| {});
    let p = f.p(0);
    f.write(&format!("{p}/log"), b"1\n2\n3\n4\n").unwrap();
    assert_eq!(f.text(&format!("{p}/offset/0")), "1");
    let fetches = f.status(&p, "fetches");
    assert_eq!(f.text(&format!("{p}/offset/2")), "3");
    assert_eq!(f.text(&format!("{p}/offset/0")), "1");
    assert_eq!(f.status(&p, "fetches"), fetches, "served from the cache");
    assert!(f.status(&p, "cache_hits") > 0);
}

fn tail_sees_appends_of_another_client(kind: Kind) {
    let f = fixture(kind, 1, 5000, |_| {});
    let p = f.p(0);
    let log = format!("{p}/log");
    f.write(&log, b"first\n").unwrap();
    assert_eq!(f.size(&log), Ok(6));
    let fh = f.open(&log, true, false).unwrap();
    assert_eq!(f.read_at(fh, 0, 100).unwrap(), b"first\n");
    let producer = f.other_producer();
    producer
        .send(
            BaseRecord::<str, str>::to(&f.topic)
                .partition(0)
                .payload("second"),
        )
        .unwrap();
    producer.flush(Duration::from_secs(10)).unwrap();
    // What tail -f does: fstat until the size grows, then read from there.
    wait_for("the size grows", Duration::from_secs(5), || {
        f.size(&log) == Ok(13)
    });
    assert_eq!(f.read_at(fh, 6, 100).unwrap(), b"second\n");
    assert_eq!(f.read_at(fh, 13, 100).unwrap(), b"");
    f.tree.release(fh).unwrap();
}
