//! Per-open-file state.
//!
//! Generated files are snapshotted at open, so that one `cat` sees one
//! consistent text however the kernel splits its reads. A `log` handle keeps
//! the line a write boundary cut, until its newline or the close.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use fuser::BackingId;
use parking_lot::Mutex;

use super::node::{Control, NodeKey};
use crate::record::NewRecord;
use crate::storage::PartitionLog;

pub enum Handle {
    /// Bytes fixed at open: `status`, `offset/N`, and `config/<name>` for reading.
    Snapshot(Vec<u8>),
    /// A raw partition file: passed through to the kernel, or read with
    /// positioned reads through storage.
    Raw {
        partition: Arc<PartitionLog>,
        name: Arc<str>,
        ino: u64,
        /// Keeps the inode's backing file registered while this handle is open.
        backing: Option<Arc<BackingId>>,
    },
    /// A Kafka file of the data-directory root, read through the log manager.
    RootFile(Arc<str>),
    /// `log`: reads return the consumer stream, writes append.
    Log {
        partition: Arc<PartitionLog>,
        /// Bytes after the last newline seen on this handle.
        partial: Vec<u8>,
    },
    Control {
        partition: Arc<PartitionLog>,
        control: Control,
    },
    Config {
        partition: Arc<PartitionLog>,
        name: &'static str,
        /// What a read on the same handle returns.
        snapshot: Vec<u8>,
    },
}

pub struct OpenFile {
    pub key: NodeKey,
    pub handle: Handle,
}

#[derive(Default)]
pub struct HandleTable {
    next: AtomicU64,
    open: Mutex<HashMap<u64, Arc<Mutex<OpenFile>>>>,
}

impl HandleTable {
    pub fn insert(&self, f: OpenFile) -> u64 {
        let fh = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        self.open.lock().insert(fh, Arc::new(Mutex::new(f)));
        fh
    }

    pub fn get(&self, fh: u64) -> Option<Arc<Mutex<OpenFile>>> {
        self.open.lock().get(&fh).cloned()
    }

    pub fn remove(&self, fh: u64) -> Option<Arc<Mutex<OpenFile>>> {
        self.open.lock().remove(&fh)
    }

    /// Every open handle, emptying the table (used at shutdown).
    pub fn drain(&self) -> Vec<Arc<Mutex<OpenFile>>> {
        self.open.lock().drain().map(|(_, f)| f).collect()
    }
}

/// Splits `buf` into its complete lines (newlines dropped) and the unterminated rest.
#[cfg(test)]
pub fn split_lines(buf: &[u8]) -> (Vec<&[u8]>, &[u8]) {
    let mut lines = Vec::new();
    let rest = push_lines(buf, &mut lines);
    (lines, rest)
}

/// Pushes the complete lines of `buf` (newlines dropped) onto `lines` and
/// returns the unterminated rest. memchr finds the newlines a vector at a time.
pub fn push_lines<'a, 'b: 'a>(buf: &'b [u8], lines: &mut Vec<&'a [u8]>) -> &'b [u8] {
    let mut start = 0;
    for nl in memchr::memchr_iter(b'\n', buf) {
        lines.push(&buf[start..nl]);
        start = nl + 1;
    }
    &buf[start..]
}

/// Lines as records, the way Kafka's console producer reads them: the whole
/// line is the value, or with `parse.key` the text before the first separator
/// is the key. Errors with Kafka's message when a line has no separator.
pub fn to_records<'a>(
    lines: &[&'a [u8]],
    parse_key: bool,
    separator: &[u8],
) -> Result<Vec<NewRecord<'a>>, String> {
    if !parse_key || separator.is_empty() {
        return Ok(lines.iter().map(|line| NewRecord::value(line)).collect());
    }
    let finder = memchr::memmem::Finder::new(separator);
    let mut out = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        match finder.find(line) {
            Some(at) => out.push(NewRecord::keyed(&line[..at], &line[at + separator.len()..])),
            None => {
                return Err(format!(
                    "No key separator found on line number {}: '{}'",
                    i + 1,
                    String::from_utf8_lossy(line)
                ));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_rest() {
        assert_eq!(
            split_lines(b"a\nb\nc\n"),
            (vec![&b"a"[..], b"b", b"c"], &b""[..])
        );
        assert_eq!(split_lines(b"a\nbc"), (vec![&b"a"[..]], &b"bc"[..]));
        assert_eq!(split_lines(b"abc"), (vec![], &b"abc"[..]));
        assert_eq!(split_lines(b"\n\n"), (vec![&b""[..], b""], &b""[..]));
    }

    #[test]
    fn keys() {
        let r = to_records(&[b"k\tv\tw"], true, b"\t").unwrap();
        assert_eq!(r[0].key, Some(&b"k"[..]));
        assert_eq!(r[0].value, Some(&b"v\tw"[..]));
        let r = to_records(&[b"k\tv"], false, b"\t").unwrap();
        assert_eq!(r[0].key, None);
        let e = to_records(&[b"a:b", b"c"], true, b":").unwrap_err();
        assert_eq!(e, "No key separator found on line number 2: 'c'");
    }
}
