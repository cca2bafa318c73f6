//! A line held across writes (no newline yet) is refused at the write that
//! makes it too large to append, never at the close: what a write
//! acknowledged is stored. "Too large" is a record's serialized size, a
//! batch of its own against `max.message.bytes`; kafka-protocol's encoder,
//! which we did not write, says how large that batch is.

#[path = "support/batch.rs"]
mod batch;

use std::ffi::OsStr;
use std::sync::Arc;

use bytes::Bytes;
use commitfs::backend::local::LocalBackend;
use commitfs::fs::{AccessMode, NoPassthrough, Tree};
use commitfs::storage::{LogConfig, LogManager, OpenOptions};
use kafka_protocol::records::Compression;

const ROOT: u64 = 1;
const WRITE: AccessMode = AccessMode {
    read: false,
    write: true,
};

/// The size kafka-protocol gives a batch holding one record of `value_len` bytes.
fn their_batch_size(value_len: usize) -> usize {
    let value = Bytes::from(vec![b'x'; value_len]);
    batch::encode(
        (-1, -1),
        None,
        false,
        1_700_000_000_000,
        [(None, Some(value))],
        Compression::None,
    )
    .len()
}

/// The longest value whose one-record batch fits `max`.
fn longest_fitting(max: usize) -> usize {
    let mut n = max;
    while their_batch_size(n) > max {
        n -= 1;
    }
    n
}

fn open_log(tree: &Tree) -> u64 {
    let dir = tree.lookup(ROOT, OsStr::new("t-0")).unwrap().attr.ino;
    let log = tree.lookup(dir, OsStr::new("log")).unwrap().attr.ino;
    tree.open(log, WRITE, &NoPassthrough).unwrap().fh
}

#[test]
fn a_held_line_is_refused_at_the_write_not_lost_at_the_close() {
    let tmp = tempfile::tempdir().unwrap();
    let config = LogConfig::default();
    let max = config.max_message_bytes as usize;
    let manager = Arc::new(LogManager::open(tmp.path(), config, OpenOptions::default()).unwrap());
    let tree = Tree::new(Arc::new(LocalBackend::new(manager.clone())));
    tree.mkdir(ROOT, OsStr::new("t-0")).unwrap();
    let fits = longest_fitting(max);

    // One byte too many, in two writes: the second is refused at once and
    // nothing of it is held; the first is stored at the close.
    let fh = open_log(&tree);
    assert_eq!(tree.write(fh, &vec![b'a'; fits]).unwrap(), fits as u32);
    let e = tree.write(fh, b"b").unwrap_err();
    assert_eq!(e.errno, libc::EMSGSIZE);
    tree.release(fh).unwrap();

    // Exactly the longest that fits, in one write with no newline.
    let fh = open_log(&tree);
    assert_eq!(tree.write(fh, &vec![b'c'; fits]).unwrap(), fits as u32);
    tree.release(fh).unwrap();

    // Too long as one write: refused, and nothing held for the close.
    let fh = open_log(&tree);
    let e = tree.write(fh, &vec![b'd'; fits + 1]).unwrap_err();
    assert_eq!(e.errno, libc::EMSGSIZE);
    tree.release(fh).unwrap();

    // After complete lines, an unterminated rest that cannot fit: the whole
    // write is refused.
    let fh = open_log(&tree);
    let mut data = b"e\n".to_vec();
    data.extend(vec![b'f'; fits + 1]);
    assert_eq!(tree.write(fh, &data).unwrap_err().errno, libc::EMSGSIZE);
    tree.release(fh).unwrap();

    let log = manager.partition("t-0").unwrap();
    assert_eq!(
        log.log_end_offset(),
        2,
        "the two held lines that fit, no more"
    );
    assert_eq!(log.read(0).unwrap().value.unwrap(), vec![b'a'; fits]);
    assert_eq!(log.read(1).unwrap().value.unwrap(), vec![b'c'; fits]);
    drop(tree);
    manager.close().unwrap();
}
