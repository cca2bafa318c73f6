//! The Kafka listener's request path on arbitrary frames: header and
//! version checks, body decoding, every handler and the response encoding
//! must answer or refuse, never panic, and never abort on a huge claimed
//! length (the daemon's allocator is used here too).
#![no_main]

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use commitfs::kafka::broker::Broker;
use commitfs::kafka::dispatch::handle_frame;
use commitfs::kafka::{Endpoint, LazyHugeAlloc, ListenerConfig};
use commitfs::storage::{LogConfig, LogManager, OpenOptions};
use libfuzzer_sys::fuzz_target;

#[global_allocator]
static ALLOC: LazyHugeAlloc = LazyHugeAlloc;

/// One data dir with a small topic, kept for the whole run.
fn broker() -> &'static Broker {
    static B: OnceLock<(tempfile::TempDir, Broker)> = OnceLock::new();
    &B.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let mgr = LogManager::open(dir.path(), LogConfig::default(), OpenOptions::default())
            .expect("open");
        mgr.create_topic("t", 2).expect("topic");
        let config = ListenerConfig::default();
        let advertised = Endpoint {
            host: "127.0.0.1".into(),
            port: 9092,
        };
        let b = Broker::new(Arc::new(mgr), config, advertised);
        // Stopping: a Fetch long poll returns at once instead of waiting.
        b.stop();
        (dir, b)
    })
    .1
}

/// CreateTopics is left out: a fuzzed partition count of millions would
/// spend the run making directories, which is what it is asked to do.
const CREATE_TOPICS: [u8; 2] = 19i16.to_be_bytes();

fuzz_target!(|data: &[u8]| {
    if data.starts_with(&CREATE_TOPICS) {
        return;
    }
    let _ = handle_frame(broker(), Bytes::copy_from_slice(data));
});
