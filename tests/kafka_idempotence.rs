//! Idempotent producers through the listener: InitProducerId, a crafted
//! resend answered with the first copy's offsets and not stored again,
//! sequence gaps and old epochs refused with Kafka's codes, ids unique
//! across a restart and the state kept across it (clean and after a
//! SIGKILL); and confluent-kafka with `enable.idempotence=true` through a
//! proxy that sends every Produce twice, as a retry after a lost response
//! would.

mod kafka_support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;

use bytes::Bytes;
use commitfs::record::{BatchIter, NewRecord, encode_batch};
use commitfs::storage::{LogConfig, LogManager, OpenOptions};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::init_producer_id_request::InitProducerIdRequest;
use kafka_protocol::messages::init_producer_id_response::InitProducerIdResponse;
use kafka_protocol::messages::produce_response::ProduceResponse;
use kafka_protocol::messages::{ApiKey, TransactionalId};
use kafka_protocol::protocol::StrBytes;
use kafka_support::requests::produce_request;
use kafka_support::{Conn, Server, python, require, run_python};

fn data_dir() -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mgr = LogManager::open(&data, LogConfig::default(), OpenOptions::default()).unwrap();
    mgr.create_topic("t", 1).unwrap();
    mgr.close().unwrap();
    (tmp, data)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// A client's batch of `n` records from producer `pid` at `epoch` from `seq`.
fn batch(pid: i64, epoch: i16, seq: i32, n: usize) -> Bytes {
    let values: Vec<String> = (0..n).map(|i| format!("s{}", seq as usize + i)).collect();
    let recs: Vec<NewRecord> = values
        .iter()
        .map(|v| NewRecord::value(v.as_bytes()))
        .collect();
    let mut b = Vec::new();
    encode_batch(&mut b, 0, now_ms(), &recs);
    b[43..51].copy_from_slice(&pid.to_be_bytes());
    b[51..53].copy_from_slice(&epoch.to_be_bytes());
    b[53..57].copy_from_slice(&seq.to_be_bytes());
    let crc = commitfs::record::compute_crc(&b);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(b)
}

fn produce(c: &mut Conn, records: Bytes) -> (i16, i64) {
    let req = produce_request("t", 0, records);
    let r: ProduceResponse = c.call(ApiKey::Produce, 9, &req);
    let p = &r.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

fn init(c: &mut Conn, transactional: Option<&str>) -> InitProducerIdResponse {
    let req = InitProducerIdRequest::default()
        .with_transactional_id(
            transactional.map(|t| TransactionalId(StrBytes::from_string(t.to_string()))),
        )
        .with_transaction_timeout_ms(60_000)
        .with_producer_id((-1).into())
        .with_producer_epoch(-1);
    c.call(ApiKey::InitProducerId, 4, &req)
}

/// Every stored record value of `t-0`, in order.
fn stored_values(data: &Path) -> Vec<String> {
    let mgr = LogManager::open(
        data,
        LogConfig::default(),
        OpenOptions {
            read_only: true,
            ..Default::default()
        },
    )
    .unwrap();
    let log = mgr.partition("t-0").unwrap();
    (0..log.log_end_offset())
        .map(|o| String::from_utf8(log.read(o).unwrap().value.unwrap()).unwrap())
        .collect()
}

#[test]
fn resends_gaps_epochs_and_restarts() {
    let (_tmp, data) = data_dir();
    let mut s = Server::start(&data, &[]);
    let mut c = Conn::new(&s.addr);
    let r = init(&mut c, None);
    assert_eq!(r.error_code, 0);
    let pid = r.producer_id.0;
    assert!(pid >= 0);
    assert_eq!(r.producer_epoch, 0);
    let again = init(&mut c, None).producer_id.0;
    assert_ne!(again, pid, "a new id each time");
    let tx = init(&mut c, Some("tx"));
    assert_eq!((tx.error_code, tx.producer_epoch), (0, 0));
    assert!(
        ![pid, again].contains(&tx.producer_id.0),
        "a transactional id gets its own producer id"
    );

    assert_eq!(produce(&mut c, batch(pid, 0, 0, 3)), (0, 0));
    assert_eq!(produce(&mut c, batch(pid, 0, 3, 2)), (0, 3));
    // The resend of the first batch: success, its first offset, nothing stored.
    assert_eq!(produce(&mut c, batch(pid, 0, 0, 3)), (0, 0));
    let gap = produce(&mut c, batch(pid, 0, 7, 1));
    assert_eq!(gap.0, ResponseError::OutOfOrderSequenceNumber.code());
    assert_eq!(produce(&mut c, batch(pid, 1, 0, 1)), (0, 5));
    let old = produce(&mut c, batch(pid, 0, 5, 1));
    assert_eq!(old.0, ResponseError::InvalidProducerEpoch.code());
    drop(c);
    assert!(s.stop(), "a clean stop:\n{}", s.log());

    // A clean restart: the state is read from the close's snapshot.
    let mut s = Server::start(&data, &[]);
    let mut c = Conn::new(&s.addr);
    assert_eq!(produce(&mut c, batch(pid, 1, 0, 1)), (0, 5));
    assert_eq!(produce(&mut c, batch(pid, 1, 1, 2)), (0, 6));
    let next = init(&mut c, None).producer_id.0;
    assert!(
        next > again,
        "ids are never given twice ({next} after {again})"
    );
    drop(c);
    // A crash: the state is rebuilt from the snapshot and the log after it.
    s.kill();
    let s = Server::start(&data, &[]);
    let mut c = Conn::new(&s.addr);
    assert_eq!(produce(&mut c, batch(pid, 1, 1, 2)), (0, 6));
    assert_eq!(produce(&mut c, batch(pid, 1, 3, 1)), (0, 8));
    drop(c);
    drop(s);
    let values = stored_values(&data);
    assert_eq!(
        values,
        ["s0", "s1", "s2", "s3", "s4", "s0", "s1", "s2", "s3"],
        "each batch once"
    );
}

/// Forwards a connection to the listener; each Produce is sent twice and
/// the second answer (the resend's) goes back to the client.
fn duplicating_proxy(mut client: TcpStream, target: &str) {
    let Ok(mut server) = TcpStream::connect(target) else {
        return;
    };
    let frame = |s: &mut TcpStream| -> Option<Vec<u8>> {
        let mut size = [0u8; 4];
        s.read_exact(&mut size).ok()?;
        let mut body = vec![0u8; i32::from_be_bytes(size).max(0) as usize];
        s.read_exact(&mut body).ok()?;
        let mut out = size.to_vec();
        out.extend_from_slice(&body);
        Some(out)
    };
    while let Some(req) = frame(&mut client) {
        let key = i16::from_be_bytes([req[4], req[5]]);
        let acks = if key == ApiKey::Produce as i16 { 2 } else { 1 };
        let mut resp = None;
        for _ in 0..acks {
            if server.write_all(&req).is_err() {
                return;
            }
            resp = frame(&mut server);
        }
        match resp {
            Some(r) if client.write_all(&r).is_ok() => {}
            _ => return,
        }
    }
}

const IDEMPOTENT: &str = r#"
import sys
from confluent_kafka import Producer
p = Producer({'bootstrap.servers': sys.argv[1], 'enable.idempotence': True, 'acks': 'all',
              'linger.ms': 5, 'batch.num.messages': 7, 'retries': 5})
offsets, errors = [], []
def report(err, msg):
    if err: errors.append(str(err))
    else: offsets.append(msg.offset())
for i in range(60):
    p.produce('t', value=('m%d' % i).encode(), partition=0, on_delivery=report)
    p.poll(0)
p.flush(60)
assert not errors, errors
print(' '.join(map(str, sorted(offsets))))
"#;

#[test]
fn confluent_kafka_idempotent_producer_through_a_resending_proxy() {
    let Some(py) = require(python()) else { return };
    let (_tmp, data) = data_dir();
    // Metadata names the advertised listener, so every produce goes through
    // the proxy, not only the bootstrap.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let proxy = listener.local_addr().unwrap().to_string();
    let advertised = format!("advertised.listeners=PLAINTEXT://{proxy}");
    let s = Server::start(&data, &[&advertised]);
    let target = s.addr.clone();
    std::thread::spawn(move || {
        for c in listener.incoming().flatten() {
            let target = target.clone();
            std::thread::spawn(move || duplicating_proxy(c, &target));
        }
    });
    let out = run_python(&py, IDEMPOTENT, &[&proxy]);
    let offsets: Vec<i64> = out.split_whitespace().map(|o| o.parse().unwrap()).collect();
    assert_eq!(offsets, (0..60).collect::<Vec<_>>(), "{}", s.log());
    assert!(s.log().contains("not appended again"), "{}", s.log());
    drop(s);
    let values = stored_values(&data);
    let want: Vec<String> = (0..60).map(|i| format!("m{i}")).collect();
    assert_eq!(values, want, "every record once, in order");
    let dir = data.join("t-0");
    let batches = std::fs::read(dir.join("00000000000000000000.log")).unwrap();
    for b in BatchIter::new(&batches) {
        assert!(b.unwrap().1.header.producer_id >= 0, "idempotent batches");
    }
    // Marked at the first batch, and written at the clean close.
    assert!(dir.join("00000000000000000000.snapshot").exists());
    assert!(dir.join("00000000000000000060.snapshot").exists());
}
