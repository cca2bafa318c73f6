//! Extended attributes: a record's timestamp, key and headers on `offset/N`,
//! and in Kafka's internal topics the record decoded; a commit's metadata,
//! leader epoch and time on a group's offsets file. Nothing else has any,
//! and none can be set: they are derived from records.

use std::ffi::OsStr;

use log::debug;

use super::error::{FsError, FsResult};
use super::node::NodeKey;
use super::tree::Tree;
use commitfs_backend::RecordEntry;
use commitfs_record::internal::decode_internal_record;
use commitfs_record::names::parse_partition_name;

/// Longest xattr name the kernel passes (XATTR_NAME_MAX).
const XATTR_NAME_MAX: usize = 255;

impl Tree {
    /// The value of attribute `name`, or ENODATA.
    pub fn getxattr(&self, ino: u64, name: &OsStr) -> FsResult<Vec<u8>> {
        let want = name.as_encoded_bytes();
        self.xattrs(ino)?
            .into_iter()
            .find(|(n, _)| n.as_bytes() == want)
            .map(|(_, v)| v)
            .ok_or(FsError::quiet(libc::ENODATA))
    }

    /// The names of the attributes, each ended by NUL.
    pub fn listxattr(&self, ino: u64) -> FsResult<Vec<u8>> {
        let mut list = Vec::new();
        for (n, _) in self.xattrs(ino)? {
            list.extend_from_slice(n.as_bytes());
            list.push(0);
        }
        Ok(list)
    }

    /// setxattr and removexattr: attributes of the tree are derived from
    /// records, never stored.
    pub fn refuse_xattr_change(&self, op: &str, ino: u64, name: &OsStr) -> FsError {
        let what = self.key(ino).map(|k| k.path()).unwrap_or_default();
        let errno = if self.read_only {
            libc::EROFS
        } else {
            libc::EPERM
        };
        FsError::refuse(
            errno,
            format!("{op} {name:?} on {what}"),
            "extended attributes are not kept",
        )
    }

    /// Extended attributes of a node: only `offset/N` has any.
    fn xattrs(&self, ino: u64) -> FsResult<Vec<(String, Vec<u8>)>> {
        let key = self.key(ino)?;
        if let NodeKey::GroupOffset(g, p) = &key {
            return self.group_offset_xattrs(g, p);
        }
        let NodeKey::Offset(p, n) = &key else {
            return Ok(Vec::new());
        };
        let entry = self.record(&*self.partition(p)?, *n, &key)?;
        let mut attrs = record_xattrs(&entry, &key.path());
        // Kafka's internal topics hold binary records of their own schemas:
        // shown decoded, as kafka-dump-log prints them.
        if let Ok((topic, _)) = parse_partition_name(p) {
            let r = &entry.record;
            if let Some(text) =
                decode_internal_record(topic, *n, r.key.as_deref(), r.value.as_deref())
            {
                attrs.push(("user.kafka.decoded".to_string(), text.into_bytes()));
            }
        }
        Ok(attrs)
    }
}

/// A record's extended attributes, in listing order.
fn record_xattrs(e: &RecordEntry, path: &str) -> Vec<(String, Vec<u8>)> {
    let r = &e.record;
    let mut out = vec![
        (
            "user.kafka.timestamp".to_string(),
            r.timestamp.to_string().into_bytes(),
        ),
        (
            "user.kafka.timestamp_type".to_string(),
            e.timestamp_type.name().as_bytes().to_vec(),
        ),
    ];
    if let Some(k) = &r.key {
        out.push(("user.kafka.key".to_string(), k.clone()));
    }
    for h in &r.headers {
        let name = format!("user.kafka.header.{}", h.key);
        if name.len() > XATTR_NAME_MAX || name.contains('\0') {
            debug!(
                "{path}: header {:?} cannot be an xattr name; not shown",
                h.key
            );
            continue;
        }
        let value = h.value.clone().unwrap_or_default();
        // Kafka allows repeated header keys; an xattr name is unique, so the
        // last value wins, as Kafka's Headers.lastHeader() reads it.
        match out.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = value,
            None => out.push((name, value)),
        }
    }
    if let Some(base) = e.batch_base_offset {
        out.push((
            "user.kafka.batch_base_offset".to_string(),
            base.to_string().into_bytes(),
        ));
    }
    if let Some(position) = e.position {
        out.push((
            "user.kafka.position".to_string(),
            position.to_string().into_bytes(),
        ));
    }
    if let Some(t) = e.transaction {
        out.push(("user.kafka.transaction".to_string(), t.as_bytes().to_vec()));
    }
    out
}
