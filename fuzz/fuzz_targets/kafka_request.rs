//! The Kafka listener's request path on arbitrary frames: header and
//! version checks, body decoding, every handler and the response encoding.
//! For each frame:
//! - nothing panics, and a huge claimed length never aborts (the daemon's
//!   allocator is used here too);
//! - the answer is what the connection would do: a refusal (the connection
//!   closes), nothing (only for an acks=0 Produce, which the request must
//!   be, by kafka-protocol's decoding of it), or one response, which is
//!   written through a real socket as the listener writes it (`sendfile`
//!   of Fetch records included) and read back: its size prefix is its
//!   length, its correlation id is the request's, and kafka-protocol's
//!   decoder reads it whole as the response of the request's API and
//!   version (v0 for an ApiVersions above the served range).
//!
//! Each frame gets a broker of its own over a fresh data directory, so no
//! input can leave state (a topic of millions of partitions, a group) that
//! slows or changes the next. Requests that would create more partitions
//! than a fuzz run can make (CreateTopics, CreatePartitions) are sent with
//! their counts as given only when small: making millions of directories is
//! what such a request asks for, not a bug.
#![no_main]

use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use commitfs::kafka::auth::CredentialStore;
use commitfs::kafka::broker::Broker;
use commitfs::kafka::dispatch::{Handled, handle_frame};
use commitfs::kafka::splice::{Outgoing, Progress};
use commitfs::kafka::{
    Endpoint, LazyHugeAlloc, Listener, ListenerConfig, SecurityProtocol, Session,
};
use commitfs::record::NewRecord;
use commitfs::storage::{LogConfig, LogManager, OpenOptions};
use kafka_protocol::messages::{
    ApiKey, RequestHeader, RequestKind, ResponseHeader, ResponseKind,
};
use kafka_protocol::protocol::Decodable;
use libfuzzer_sys::fuzz_target;

#[global_allocator]
static ALLOC: LazyHugeAlloc = LazyHugeAlloc;

/// The most partitions one input may ask to create.
const MAX_NEW_PARTITIONS: i64 = 8;

/// A broker over a fresh data dir with topic `t` (two partitions, a few
/// records in partition 0, so that Fetch has bytes to send).
fn broker(dir: &std::path::Path) -> Broker {
    // Small index files: Kafka's 10 MiB preallocations per partition would
    // cost more than the request.
    let mut config = LogConfig::default();
    config.set("segment.index.bytes", "4096").unwrap();
    let mgr = LogManager::open(dir, config, OpenOptions::default()).expect("open");
    mgr.create_topic("t", 2).expect("topic");
    let p0 = mgr.partition("t-0").expect("t-0");
    p0.append(&[NewRecord::value(b"a"), NewRecord::value(b"b")])
        .expect("append");
    p0.append(&[NewRecord::value(b"c")]).expect("append");
    drop(p0);
    let advertised = Listener {
        name: "PLAINTEXT".into(),
        protocol: SecurityProtocol::Plaintext,
        endpoint: Endpoint {
            host: "127.0.0.1".into(),
            port: 9092,
        },
    };
    let scram = CredentialStore::open(dir).expect("credentials");
    let b = Broker::new(Arc::new(mgr), ListenerConfig::default(), vec![advertised], scram);
    // Stopping: a Fetch long poll or a JoinGroup returns at once instead of
    // waiting for a timeout the input chose.
    b.stop();
    b
}

/// A connected pair of loopback sockets, made once.
fn sockets() -> &'static (TcpStream, TcpStream) {
    static PAIR: OnceLock<(TcpStream, TcpStream)> = OnceLock::new();
    PAIR.get_or_init(|| {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let client = TcpStream::connect(l.local_addr().unwrap()).expect("connect");
        let (server, _) = l.accept().expect("accept");
        (server, client)
    })
}

/// Whether the request creates more partitions than a run can make.
fn creates_too_much(req: &RequestKind) -> bool {
    match req {
        RequestKind::CreateTopics(r) => r
            .topics
            .iter()
            .map(|t| i64::from(t.num_partitions.max(1)))
            .sum::<i64>()
            > MAX_NEW_PARTITIONS,
        RequestKind::CreatePartitions(r) => r
            .topics
            .iter()
            .map(|t| i64::from(t.count.max(0)))
            .sum::<i64>()
            > MAX_NEW_PARTITIONS,
        _ => false,
    }
}

/// The request as kafka-protocol decodes it: (key, version, correlation
/// id, body), when it decodes.
fn decode_request(frame: &[u8]) -> Option<(ApiKey, i16, i32, RequestKind)> {
    if frame.len() < 4 {
        return None;
    }
    let key = ApiKey::try_from(i16::from_be_bytes([frame[0], frame[1]])).ok()?;
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let mut buf = Bytes::copy_from_slice(frame);
    let header = RequestHeader::decode(&mut buf, key.request_header_version(version)).ok()?;
    let body = RequestKind::decode(key, &mut buf, version).ok()?;
    Some((key, version, header.correlation_id, body))
}

fuzz_target!(|data: &[u8]| {
    let request = decode_request(data);
    if request.as_ref().is_some_and(|(_, _, _, r)| creates_too_much(r)) {
        return;
    }
    // A tmpfs when there is one: every open and create fsyncs.
    let shm = std::path::Path::new("/dev/shm");
    let tmp = if shm.is_dir() {
        tempfile::tempdir_in(shm).unwrap()
    } else {
        tempfile::tempdir().unwrap()
    };
    let b = broker(tmp.path());
    let session = Session {
        listener: 0,
        peer: "127.0.0.1:40000".parse().unwrap(),
        principal: commitfs::kafka::Principal::anonymous(),
    };
    let answer = match handle_frame(&b, &session, Bytes::copy_from_slice(data)) {
        Ok(Handled::Reply(r)) => Ok(r),
        // A long poll waiting for data: only a Fetch may park, and it
        // holds nothing the next input could see (each has its own broker).
        Ok(Handled::Parked(_)) => {
            let fetch = matches!(&request, Some((_, _, _, RequestKind::Fetch(_))));
            assert!(fetch, "a request parked, but it is not a Fetch");
            return;
        }
        Err(e) => Err(e),
    };
    match answer {
        // A refusal: the connection closes, which is an answer.
        Err(_) => {}
        Ok(None) => {
            let acks0 = matches!(&request, Some((_, _, _, RequestKind::Produce(p))) if p.acks == 0);
            assert!(acks0, "no response, but the request is not an acks=0 Produce");
        }
        Ok(Some(resp)) => {
            // The frame's key, version and correlation id were read by the
            // server, so they are there.
            let key = ApiKey::try_from(i16::from_be_bytes([data[0], data[1]])).unwrap();
            let version = i16::from_be_bytes([data[2], data[3]]);
            let correlation = i32::from_be_bytes(data[4..8].try_into().unwrap());
            let (server, client) = sockets();
            let mut frame = Vec::new();
            let prefix = resp.prefix;
            std::thread::scope(|s| {
                let writer = s.spawn(move || {
                    let mut out = server.try_clone().expect("socket");
                    let mut outgoing = Outgoing::new(resp.prefix, resp.body);
                    // A blocking socket: one call writes it all.
                    let done = outgoing.write_to(&mut out).expect("write the response");
                    assert!(matches!(done, Progress::Done), "a blocking write left a part");
                });
                let mut input = client.try_clone().expect("socket");
                let mut size = [0u8; 4];
                input.read_exact(&mut size).expect("size");
                assert_eq!(size, prefix);
                let len = i32::from_be_bytes(size);
                assert!(len >= 0, "negative response size");
                frame.resize(len as usize, 0);
                input.read_exact(&mut frame).expect("body");
                writer.join().expect("writer");
            });
            // ApiVersions above the served range is answered at v0.
            let answered = if key == ApiKey::ApiVersions && version > 3 {
                0
            } else {
                version
            };
            let mut buf = Bytes::from(frame);
            let header = ResponseHeader::decode(&mut buf, key.response_header_version(answered))
                .expect("the response header decodes");
            assert_eq!(header.correlation_id, correlation, "correlation id");
            ResponseKind::decode(key, &mut buf, answered).unwrap_or_else(|e| {
                panic!("the {key:?} v{answered} response does not decode: {e}")
            });
            assert!(buf.is_empty(), "{} bytes after the {key:?} response", buf.len());
        }
    }
    drop(b);
});
