//! The tree: partitions as directories, records as files.
//!
//! The rooms, each with one job:
//! - [`tree`]: the tree's state, which node a name is (`offset/N` and
//!   `time/<ms>` are resolved in [`Tree::child`](tree::Tree)) and attributes;
//! - [`dir`]: listings, `mkdir`/`rmdir`, and refusals of name changes;
//! - [`open`]: open files, their reads, writes and close;
//! - [`lines`]: where a write to `log` becomes records;
//! - [`control`]: `roll`, `flush`, `delete-records` and `config/<name>`;
//! - [`xattr`]: a record's attributes on `offset/N`;
//! - [`groups`]: `groups/`, consumer groups where the backend offers them;
//!   [`group_tables`]: their tables as `kafka-consumer-groups.sh` prints them;
//! - [`node`], [`inode`], [`handle`]: node kinds and names, inode numbers,
//!   per-open-file state;
//! - [`error`]: the one error type; every errno is chosen there;
//! - [`passthrough`]: which raw files the kernel reads itself;
//! - [`fuse`]: the thin FUSE adapter, the only module that speaks to the kernel.
//!
//! Everything but [`fuse`] can be driven without a kernel (see
//! `tests/model.rs`).

pub mod control;
pub mod dir;
pub mod error;
pub mod fuse;
pub mod group_tables;
pub mod groups;
pub mod handle;
pub mod inode;
pub mod lines;
pub mod node;
pub mod open;
pub mod passthrough;
pub mod tree;
pub mod xattr;

pub use dir::DirectoryReplier;
pub use error::{FsError, FsResult};
pub use fuse::CommitFs;
pub use open::{AccessMode, Opened};
pub use passthrough::{BackingFiles, NoPassthrough};
pub use tree::{Attr, Entry, NodeType, SetAttr, Tree};
