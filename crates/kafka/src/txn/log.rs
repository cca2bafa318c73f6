//! The transaction coordinator's topic, `__transaction_state` (Kafka's
//! `TransactionLog` and the load of `TransactionStateManager`): one record
//! per change of a transactional id's state, keyed by the id, in the
//! partition of the id ([`CoordinatorTopic`]); a tombstone when the id
//! expires. Read back at start, the latest record of each id is its state.
//!
//! The topic's count is `transaction.state.log.num.partitions` (1 here by
//! default, Kafka's 50 with `-o`), `segment.bytes` is
//! `transaction.state.log.segment.bytes` (100 MiB), and it is compacted
//! and uncompressed, as Kafka makes it.

use std::collections::BTreeMap;
use std::sync::Arc;

use log::warn;

use super::metadata::{Transit, TxnMetadata};
use crate::coordinator_topic::{CoordinatorTopic, KeyValue, for_each_batch};
use commitfs_record::error::ErrorKind;
use commitfs_record::schema::SchemaError;
use commitfs_record::txn_log::{TxnLogEntry, txn_log_key};
use commitfs_storage::{LogManager, StorageError};

pub const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";
/// Kafka's topic configs of `__transaction_state` (`transactionTopicConfigs`).
const TRANSACTION_STATE_CONFIGS: &[(&str, Option<&str>)] = &[
    ("cleanup.policy", Some("compact")),
    ("compression.type", Some("uncompressed")),
    ("segment.bytes", Some("104857600")),
];

pub struct TxnStateTopic(CoordinatorTopic);

/// Why a state change was not written.
#[derive(Debug)]
pub enum AppendError {
    /// The record does not encode (a string too long for its schema).
    Encode(String),
    Storage(StorageError),
}

impl AppendError {
    /// What kind of failure it is: a record that does not encode is an
    /// invalid record.
    pub fn kind(&self) -> ErrorKind {
        match self {
            AppendError::Encode(_) => ErrorKind::InvalidRecord,
            AppendError::Storage(e) => e.kind(),
        }
    }
}

impl std::fmt::Display for AppendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AppendError::Encode(why) => write!(f, "the record does not encode: {why}"),
            AppendError::Storage(e) => e.fmt(f),
        }
    }
}

/// One partition of the topic as read back: each id's latest state, or
/// why the partition could not be read to its end.
pub struct PartitionState {
    pub index: u32,
    pub name: String,
    pub ids: Result<BTreeMap<String, TxnMetadata>, String>,
}

impl TxnStateTopic {
    pub fn new(mgr: Arc<LogManager>, configured: u32) -> TxnStateTopic {
        TxnStateTopic(CoordinatorTopic::new(
            mgr,
            TRANSACTION_STATE_TOPIC,
            TRANSACTION_STATE_CONFIGS,
            configured,
            "transaction states",
        ))
    }

    /// The partition count: the topic's, or the configured one before it exists.
    pub fn count(&self) -> u32 {
        self.0.count()
    }

    /// The partition of the topic an id's records go to (its coordinator's).
    pub fn partition_index(&self, transactional_id: &str) -> u32 {
        self.0.partition_index(transactional_id)
    }

    /// Writes a prepared change of `transactional_id` (Kafka's
    /// `appendTransactionToLog`); returns once it is in the segment file.
    pub fn append(&self, transactional_id: &str, t: &Transit) -> Result<(), AppendError> {
        let e = t.log_entry(transactional_id);
        let encode = |r: Result<Vec<u8>, _>| r.map_err(|e: SchemaError| AppendError::Encode(e.0));
        let record: KeyValue = (encode(e.key())?, Some(encode(e.value())?));
        self.0
            .append(transactional_id, &[record])
            .map_err(AppendError::Storage)
    }

    /// The tombstone of an expired id.
    pub fn remove(&self, transactional_id: &str) -> Result<(), AppendError> {
        let key = txn_log_key(transactional_id).map_err(|e| AppendError::Encode(e.0))?;
        self.0
            .append(transactional_id, &[(key, None)])
            .map_err(AppendError::Storage)
    }

    /// Every partition read back (Kafka's `loadTransactionMetadata`): each
    /// id's latest record, an id whose latest is a tombstone gone. A record
    /// that does not decode is logged and skipped, as Kafka skips a key of
    /// a version it does not know.
    pub fn read_all(&self) -> Vec<PartitionState> {
        self.0
            .partitions()
            .iter()
            .map(|log| {
                let mut ids = BTreeMap::new();
                let read = for_each_batch(log, |batch, from| {
                    let records = batch.records().map_err(|e| e.to_string())?;
                    for rec in records.iter().filter(|r| r.offset >= from) {
                        let Some(key) = rec.key.as_deref() else {
                            continue;
                        };
                        match TxnLogEntry::read(key, rec.value.as_deref()) {
                            Ok((id, Some(e))) => {
                                ids.insert(id, TxnMetadata::from_log(&e));
                            }
                            Ok((id, None)) => {
                                ids.remove(&id);
                            }
                            Err(e) => warn!(
                                "{} offset {}: a transaction state record that does not decode ({e}); skipped",
                                log.name(),
                                rec.offset
                            ),
                        }
                    }
                    Ok(())
                });
                PartitionState {
                    index: log.local().partition(),
                    name: log.name().to_string(),
                    ids: read.map(|()| ids),
                }
            })
            .collect()
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use commitfs_record::txn_log::TxnState;
    use commitfs_storage::{LogConfig, OpenOptions};

    /// A data directory for the transaction log's tests (and the state's).
    pub(crate) fn open(dir: &std::path::Path) -> Arc<LogManager> {
        Arc::new(
            LogManager::open(
                dir,
                LogConfig::default(),
                OpenOptions::without_cleaner_threads(),
            )
            .unwrap(),
        )
    }

    /// Changes written, then read back after a reopen: the latest state of
    /// each id, an expired one gone; the topic made as Kafka makes it.
    #[test]
    fn states_are_read_back_as_written() {
        let tmp = tempfile::tempdir().unwrap();
        let mgr = open(tmp.path());
        let topic = TxnStateTopic::new(mgr.clone(), 3);
        let mut a = TxnMetadata::new("a", 1000, 60_000, 5);
        let t = a
            .prepare_increment_epoch(60_000, None, 10)
            .unwrap()
            .unwrap();
        topic.append("a", &t).unwrap();
        a.complete(&t).unwrap();
        let t = a
            .prepare_add_partitions(&[("t".to_string(), 0), ("u".to_string(), 3)].into(), 20)
            .unwrap();
        topic.append("a", &t).unwrap();
        a.complete(&t).unwrap();
        let mut b = TxnMetadata::new("b", 1001, 60_000, 5);
        let t = b
            .prepare_increment_epoch(60_000, None, 10)
            .unwrap()
            .unwrap();
        topic.append("b", &t).unwrap();
        topic.remove("b").unwrap();
        let log = mgr
            .partition(&format!(
                "__transaction_state-{}",
                topic.partition_index("a")
            ))
            .unwrap();
        let config = log.config();
        assert!(config.cleanup_policy.compact());
        assert_eq!(config.segment_bytes, 104_857_600);
        drop(log);
        drop(topic);
        Arc::into_inner(mgr).unwrap().close().unwrap();

        let mgr = open(tmp.path());
        let topic = TxnStateTopic::new(mgr.clone(), 1);
        let read = topic.read_all();
        assert_eq!(read.len(), 3, "the topic's own count");
        let mut all = BTreeMap::new();
        for p in read {
            all.extend(p.ids.unwrap());
        }
        assert_eq!(all.keys().collect::<Vec<_>>(), vec!["a"]);
        let back = &all["a"].current;
        assert_eq!(back.state, TxnState::Ongoing);
        assert_eq!((back.producer_id, back.producer_epoch), (1000, 0));
        assert_eq!(back.partitions, a.current.partitions);
        assert_eq!((back.start_ms, back.last_update_ms), (20, 20));
    }
}
