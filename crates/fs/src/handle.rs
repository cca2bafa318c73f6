//! Per-open-file state.
//!
//! Generated files are snapshotted at open, so that one `cat` sees one
//! consistent text however the kernel splits its reads. A `log` handle keeps
//! the line a write boundary cut, until its newline or the close.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use super::node::{Control, NodeKey};
use super::passthrough::Backing;
use commitfs_backend::Partition;

pub enum Handle {
    /// An open directory: the listing the first READDIR saw, so that later
    /// READDIRs of the same stream neither skip nor repeat names when the
    /// directory changes meanwhile (cookies are positions in it).
    Dir(Option<Arc<[(NodeKey, String)]>>),
    /// Bytes fixed at open: `status`, `offset/N`, and `config/<name>` for reading.
    Snapshot(Vec<u8>),
    /// A raw partition file: passed through to the kernel, or read with
    /// positioned reads through the backend.
    Raw {
        partition: Arc<dyn Partition>,
        name: Arc<str>,
        ino: u64,
        /// Keeps the inode's backing file registered while this handle is open.
        backing: Option<Backing>,
    },
    /// A Kafka file of the data-directory root, read through the backend.
    RootFile(Arc<str>),
    /// `log`: reads return the consumer stream, writes append.
    Log {
        partition: Arc<dyn Partition>,
        /// Bytes after the last newline seen on this handle.
        partial: Vec<u8>,
    },
    /// `committed`: reads return the `read_committed` consumer stream.
    Committed(Arc<dyn Partition>),
    Control {
        partition: Arc<dyn Partition>,
        control: Control,
    },
    Config {
        partition: Arc<dyn Partition>,
        name: &'static str,
        /// What a read on the same handle returns.
        snapshot: Vec<u8>,
    },
    /// `groups/<G>/offsets/<p>`: reads the offset committed at open, writes reset it.
    GroupOffset {
        group: Arc<str>,
        partition: Arc<str>,
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
