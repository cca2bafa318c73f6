//! Mount tests: a real `commitfs mount` per test, driven with shell tools.
//! They need root and /dev/fuse; without them they skip, or fail when `CI` is set.

mod harness;
#[path = "../tests/kafka_support/mod.rs"]
mod kafka_support;
#[path = "../tests/support/kafka_writer.rs"]
mod kafka_writer;
#[path = "../tests/support/test_ca.rs"]
mod test_ca;

mod basic;
mod cluster;
mod cluster_e2e;
mod compaction;
mod consumer;
mod control;
mod crash;
mod errors;
mod fstab;
mod groups;
mod kafka;
mod kafka_limits;
mod kafka_listener;
mod lifecycle;
mod live_ro;
mod partition_disk;
mod raw;
mod ro_shrink;
mod roll;
mod shutdown;
mod tools;
mod torture_concurrency;
mod torture_diskfull;
mod torture_durability;
mod torture_index;
mod torture_input;
mod torture_kill;
mod torture_tail;
mod torture_util;
mod views;

use std::io::Write;
use std::path::Path;

/// The value of record `i` in the bulk tests: 1506 bytes, unique per record,
/// so that 10 of them make the 15,211-byte batch of Kafka's arithmetic.
pub fn bulk_value(i: usize) -> String {
    let head = format!("record-{i:06}-");
    format!("{head}{}", "x".repeat(1506 - head.len()))
}

/// Writes records `from..to` as lines to `path`, for `dd bs=15070` to send
/// through the mount 10 lines per write.
pub fn write_bulk(path: &Path, from: usize, to: usize) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).expect("bulk file"));
    for i in from..to {
        writeln!(f, "{}", bulk_value(i)).expect("write bulk");
    }
    f.flush().expect("flush bulk");
}

/// The dd command that appends a bulk file 10 lines per write(2).
pub fn dd_bulk(src: &Path, partition: &str) -> String {
    format!(
        "dd if={} of={partition}/log bs=15070 oflag=append conv=notrunc status=none",
        src.display()
    )
}
