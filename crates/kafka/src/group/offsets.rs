//! The group coordinator's topic, `__consumer_offsets`
//! ([`CoordinatorTopic`]: made at the first write, compacted, a group's
//! records in the partition of its name), and how its records are read
//! back at start, in offset order, to rebuild committed offsets and groups
//! (`load` checks and applies them).
//!
//! Its count is `offsets.topic.num.partitions`, and `segment.bytes` is
//! `offsets.topic.segment.bytes` (100 MiB), as Kafka makes it.

use std::collections::BTreeMap;
use std::sync::Arc;

use log::{info, warn};

use super::records::{Stored, parse};
use crate::coordinator_topic::{CoordinatorTopic, for_each_batch};
use commitfs_record::Batch;
use commitfs_record::end_txn_marker::{COMMIT, control_type_of};
use commitfs_storage::{LogManager, PartitionLog, StorageError};

pub const OFFSETS_TOPIC: &str = "__consumer_offsets";
/// Kafka's topic configs of `__consumer_offsets` (`offsets.topic.segment.bytes`).
const OFFSETS_TOPIC_CONFIGS: &[(&str, Option<&str>)] = &[
    ("cleanup.policy", Some("compact")),
    ("segment.bytes", Some("104857600")),
];

pub use crate::coordinator_topic::KeyValue;

pub struct OffsetsTopic(CoordinatorTopic);

impl OffsetsTopic {
    pub fn new(mgr: Arc<LogManager>, configured: u32) -> OffsetsTopic {
        OffsetsTopic(CoordinatorTopic::new(
            mgr,
            OFFSETS_TOPIC,
            OFFSETS_TOPIC_CONFIGS,
            configured,
            "group records",
        ))
    }

    pub fn read_only(&self) -> bool {
        self.0.read_only()
    }

    /// The partition count: the topic's, or the configured one before it exists.
    pub fn count(&self) -> u32 {
        self.0.count()
    }

    /// Appends a group's records as one batch; returns once they are in the
    /// segment file, as an acknowledged produce.
    pub fn append(&self, group: &str, records: &[KeyValue]) -> Result<(), StorageError> {
        self.0.append(group, records)
    }

    /// Appends a group's records as one batch of a producer's transaction
    /// (TxnOffsetCommit).
    pub fn append_transactional(
        &self,
        group: &str,
        records: &[KeyValue],
        producer: (i64, i16),
    ) -> Result<(), StorageError> {
        self.0.append_transactional(group, records, producer)
    }

    /// The partition of `__consumer_offsets` a group's records go to, made
    /// with the topic if needed (a transaction's marker goes there).
    pub fn ensure_partition(&self, group: &str) -> Result<u32, StorageError> {
        self.0
            .partition_of(group)
            .map(|log| log.local().partition())
    }

    /// The partition of `__consumer_offsets` a group's records go to.
    pub fn partition_index(&self, group: &str) -> u32 {
        self.0.partition_index(group)
    }

    /// Every partition of the topic read back, in offset order.
    pub fn read_all(&self) -> Vec<PartitionRead> {
        self.0
            .partitions()
            .iter()
            .map(|log| {
                let (records, pending) = match read_partition(log) {
                    Ok((records, pending)) => (Ok(records), pending),
                    Err(e) => (Err(e), BTreeMap::new()),
                };
                PartitionRead {
                    index: log.local().partition(),
                    name: log.name().to_string(),
                    records,
                    pending,
                }
            })
            .collect()
    }
}

/// One partition of the topic as read back at start.
pub struct PartitionRead {
    pub index: u32,
    pub name: String,
    /// Its records with their offsets, in offset order; `Err`: why it
    /// could not be read to its end.
    pub records: Result<Vec<(i64, Stored)>, String>,
    /// Each producer's transactional records whose marker is not there
    /// yet: they count when their transaction ends.
    pub pending: BTreeMap<i64, Vec<(i64, Stored)>>,
}

/// What a partition's read keeps between batches: the records so far, and
/// each producer's transactional records until its marker.
#[derive(Default)]
struct Reading {
    out: Vec<(i64, Stored)>,
    pending: BTreeMap<i64, Vec<(i64, Stored)>>,
}

/// Reads a partition back as Kafka's loader does
/// (`GroupMetadataManager.doLoadGroupsAndOffsets`): a transactional batch's
/// records count once their producer's COMMIT marker is read (an ABORT
/// drops them), and they take their place by offset; those with no marker
/// yet are kept apart, pending. Records that do not
/// decode are logged and skipped. A partition that cannot be read to its
/// end (offline, an I/O error, a batch that does not parse or fails its
/// CRC) is an `Err`: what it holds is unknown, so none of it is applied.
type Pending = BTreeMap<i64, Vec<(i64, Stored)>>;

fn read_partition(log: &PartitionLog) -> Result<(Vec<(i64, Stored)>, Pending), String> {
    let mut r = Reading::default();
    for_each_batch(log, |batch, from| r.batch(log.name(), batch, from))?;
    for (pid, left) in &r.pending {
        info!(
            "{}: {} offset commits of producer {pid}'s transaction have no marker yet; they count when it ends",
            log.name(),
            left.len()
        );
    }
    r.out.sort_by_key(|(o, _)| *o);
    Ok((r.out, r.pending))
}

impl Reading {
    fn batch(&mut self, log: &str, batch: &Batch, from: i64) -> Result<(), String> {
        let h = &batch.header;
        let records = batch.records().map_err(|e| {
            format!(
                "the records of the batch at offset {} do not decode: {e}",
                h.base_offset
            )
        })?;
        if h.is_control() {
            let kind = records
                .first()
                .and_then(|r| control_type_of(r.key.as_deref()?).ok());
            let done = self.pending.remove(&h.producer_id).unwrap_or_default();
            if kind == Some(COMMIT) {
                self.out.extend(done);
            }
            return Ok(());
        }
        for rec in records.iter().filter(|rec| rec.offset >= from) {
            let Some(key) = rec.key.as_deref() else {
                warn!(
                    "{log} offset {}: a record without a key; skipped",
                    rec.offset
                );
                continue;
            };
            let s = match parse(key, rec.value.as_deref()) {
                Ok(Stored::Other) => continue,
                Ok(s) => s,
                Err(e) => {
                    warn!(
                        "{log} offset {}: a group record that does not decode ({e}); skipped",
                        rec.offset
                    );
                    continue;
                }
            };
            match h.is_transactional() {
                true => self
                    .pending
                    .entry(h.producer_id)
                    .or_default()
                    .push((rec.offset, s)),
                false => self.out.push((rec.offset, s)),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use commitfs_record::internal::OffsetCommit;
    use commitfs_record::{NewRecord, compute_crc, encode_batch};

    /// A batch at `base` of `records`, with `attributes` and producer id
    /// patched in as a transactional producer's (or its marker) would carry.
    fn batch(base: i64, records: &[NewRecord], attributes: i16, pid: i64) -> Vec<u8> {
        let mut b = Vec::new();
        encode_batch(&mut b, base, 0, records);
        b[21..23].copy_from_slice(&attributes.to_be_bytes());
        b[43..51].copy_from_slice(&pid.to_be_bytes());
        let crc = compute_crc(&b);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        b
    }

    fn commit_record(offset: i64) -> (Vec<u8>, Vec<u8>) {
        let c = OffsetCommit {
            group: "g".into(),
            topic: "t".into(),
            partition: 0,
            offset,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp: 0,
            expire_timestamp: -1,
        };
        c.to_record().unwrap()
    }

    fn read(batches: &[Vec<u8>]) -> Vec<i64> {
        let mut r = Reading::default();
        for b in batches {
            let parsed = Batch::parse(b).unwrap();
            r.batch("__consumer_offsets-0", &parsed, 0).unwrap();
        }
        r.out.sort_by_key(|(o, _)| *o);
        r.out
            .into_iter()
            .map(|(_, s)| match s {
                Stored::Offset {
                    commit: Some(c), ..
                } => c.offset,
                other => panic!("{other:?}"),
            })
            .collect()
    }

    /// Transactional commits count once their producer's COMMIT marker is
    /// read, in their place by offset; an ABORT drops them, and with no
    /// marker yet they stay pending (not among the records read).
    #[test]
    fn transactional_commits_wait_for_their_marker() {
        let (k1, v1) = commit_record(1);
        let (k2, v2) = commit_record(2);
        let (k3, v3) = commit_record(3);
        let rec = |k: &[u8], v: &[u8]| vec![(k.to_vec(), v.to_vec())];
        let encode = |base: i64, kv: Vec<(Vec<u8>, Vec<u8>)>, attributes: i16, pid: i64| {
            let records: Vec<NewRecord> = kv
                .iter()
                .map(|(k, v)| NewRecord {
                    key: Some(k),
                    value: Some(v),
                    headers: &[],
                })
                .collect();
            batch(base, &records, attributes, pid)
        };
        let marker = |base: i64, kind: u8, pid: i64| {
            let key = [0u8, 0, 0, kind];
            encode(
                base,
                vec![(key.to_vec(), vec![0, 0, 0, 0, 0, 0])],
                0x30,
                pid,
            )
        };
        let txn = |base: i64, k: &[u8], v: &[u8], pid: i64| encode(base, rec(k, v), 0x10, pid);
        let plain = |base: i64, k: &[u8], v: &[u8]| encode(base, rec(k, v), 0, -1);
        // Committed: the transaction's commit (at 0) sorts before the plain one at 1.
        assert_eq!(
            read(&[txn(0, &k1, &v1, 7), plain(1, &k2, &v2), marker(2, 1, 7)]),
            [1, 2]
        );
        // Aborted, or never ended: only the plain commit.
        assert_eq!(
            read(&[txn(0, &k1, &v1, 7), plain(1, &k2, &v2), marker(2, 0, 7)]),
            [2]
        );
        assert_eq!(read(&[txn(0, &k3, &v3, 8), plain(1, &k2, &v2)]), [2]);
    }
}
