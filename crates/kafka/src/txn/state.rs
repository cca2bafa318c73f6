//! The transaction coordinator's state (Kafka's `TransactionStateManager`):
//! every transactional id's metadata behind one lock, loaded from
//! `__transaction_state` at start, and each change written there before
//! it is applied (`append` below).
//!
//! Anyone who can write to the data directory can write records into the
//! topic, so a record is checked before it is applied, and one Kafka's
//! coordinator would not have written is skipped with a log line (as
//! `group/load.rs` does for groups): an id in another partition than its
//! own, a state never written (`Dead`, `PrepareEpochFence`), partitions in
//! a state that has none, a timeout that is not positive.
//!
//! A partition that cannot be read to its end is *failed*: nothing of it
//! is applied, and its ids are answered NOT_COORDINATOR until a restart
//! loads it, rather than as if they had no state.

use std::collections::BTreeMap;

use log::{error, info, warn};
use parking_lot::{Mutex, MutexGuard};

use super::log::{AppendError, TxnStateTopic};
use super::metadata::{Transit, TxnMetadata};
use crate::coordinator_topic::partition_for;
use commitfs_record::txn_log::TxnState;

/// The ids and what could not be loaded.
#[derive(Default)]
pub struct TxnInner {
    pub ids: BTreeMap<String, TxnMetadata>,
    /// Partitions of the topic that could not be read, with why.
    pub failed: BTreeMap<u32, String>,
    /// The largest producer id the loaded ids hold (new ids are given above it).
    pub max_producer_id: i64,
}

pub struct TxnStateManager {
    topic: TxnStateTopic,
    inner: Mutex<TxnInner>,
}

/// Why a loaded record is not applied, or `None` when it is one Kafka's
/// coordinator writes.
fn refused(id: &str, m: &Transit, partition: u32, count: u32) -> Option<String> {
    let home = partition_for(id, count);
    if home != partition {
        return Some(format!("its id belongs in partition {home}"));
    }
    match m.state {
        TxnState::Dead | TxnState::PrepareEpochFence => {
            return Some(format!("state {} is never written", m.state.name()));
        }
        TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
            if !m.partitions.is_empty() =>
        {
            return Some(format!("state {} with partitions", m.state.name()));
        }
        _ => {}
    }
    if m.timeout_ms <= 0 {
        return Some(format!("a transaction timeout of {} ms", m.timeout_ms));
    }
    if m.producer_id < 0 {
        return Some(format!("producer id {}", m.producer_id));
    }
    None
}

impl TxnStateManager {
    /// Loads every partition of the topic (Kafka's
    /// `loadTransactionsForTxnTopicPartition`).
    pub fn load(topic: TxnStateTopic) -> TxnStateManager {
        let mut inner = TxnInner::default();
        let count = topic.count();
        for p in topic.read_all() {
            let ids = match p.ids {
                Ok(ids) => ids,
                Err(why) => {
                    error!(
                        "Failed to load transaction states from {} due to {why}. Its transactional ids \
                         are refused with NOT_COORDINATOR until a restart loads it",
                        p.name
                    );
                    inner.failed.insert(p.index, why);
                    continue;
                }
            };
            let mut loaded = 0;
            for (id, m) in ids {
                if let Some(why) = refused(&id, &m.current, p.index, count) {
                    warn!(
                        "{}: the state of transactional id {id} is not one a coordinator writes ({why}); skipped",
                        p.name
                    );
                    continue;
                }
                inner.max_producer_id = inner.max_producer_id.max(m.current.producer_id);
                inner.ids.insert(id, m);
                loaded += 1;
            }
            info!("Loaded {loaded} transactional ids from {}", p.name);
        }
        TxnStateManager {
            topic,
            inner: Mutex::new(inner),
        }
    }

    /// The state, locked. Writes to the topic happen under it (one change
    /// of an id at a time, as Kafka's per-id lock and pending state keep
    /// them), never any other partition's append.
    pub fn lock(&self) -> MutexGuard<'_, TxnInner> {
        self.inner.lock()
    }

    /// Whether an id's partition of the topic could not be loaded.
    pub fn failed(&self, inner: &TxnInner, transactional_id: &str) -> bool {
        inner
            .failed
            .contains_key(&self.topic.partition_index(transactional_id))
    }

    /// Kafka's `appendTransactionToLog`: writes the prepared change of an id
    /// in `inner`, then completes it; a failed write abandons it.
    pub fn append(
        &self,
        inner: &mut TxnInner,
        transactional_id: &str,
        t: &Transit,
    ) -> Result<(), AppendError> {
        let written = self.topic.append(transactional_id, t);
        let Some(m) = inner.ids.get_mut(transactional_id) else {
            return written;
        };
        match written {
            Ok(()) => {
                if let Err(e) = m.complete(t) {
                    // Kafka's coordinator throws here: the metadata changed
                    // under a pending state, which the lock prevents.
                    error!("{e}");
                    m.abandon();
                    return Err(AppendError::Encode(e.0));
                }
                Ok(())
            }
            Err(e) => {
                warn!(
                    "Appending the state of transactional id {transactional_id} ({}) failed: {e}",
                    t.state.name()
                );
                m.abandon();
                Err(e)
            }
        }
    }

    /// Kafka's expiry of an id (`removeExpiredTransactionalIds`): its
    /// tombstone written, then it is forgotten.
    pub fn expire(&self, inner: &mut TxnInner, transactional_id: &str) -> Result<(), AppendError> {
        match self.topic.remove(transactional_id) {
            Ok(()) => {
                inner.ids.remove(transactional_id);
                Ok(())
            }
            Err(e) => {
                if let Some(m) = inner.ids.get_mut(transactional_id) {
                    m.abandon();
                }
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::txn::log::TRANSACTION_STATE_TOPIC;
    use crate::txn::log::tests::open;
    use commitfs_record::NewRecord;
    use commitfs_record::txn_log::TxnLogEntry;

    fn entry(id: &str, state: TxnState, partitions: Vec<(String, Vec<i32>)>) -> TxnLogEntry {
        TxnLogEntry {
            transactional_id: id.to_string(),
            producer_id: 4000,
            producer_epoch: 2,
            timeout_ms: 60_000,
            state,
            partitions,
            last_update_ms: 1,
            start_ms: 1,
        }
    }

    /// `id` as InitProducerId leaves a new one: its first epoch, written.
    fn init(states: &TxnStateManager, inner: &mut TxnInner, id: &str, producer_id: i64) {
        (inner.ids).insert(id.into(), TxnMetadata::new(id, producer_id, 60_000, 1));
        let m = inner.ids.get_mut(id).unwrap();
        let t = m.prepare_increment_epoch(60_000, None, 2).unwrap().unwrap();
        states.append(inner, id, &t).unwrap();
    }

    /// Changes go through the topic and come back after a restart; forged
    /// records a coordinator would not write are skipped.
    #[test]
    fn changes_are_written_then_applied_and_forged_ones_skipped() {
        let tmp = tempfile::tempdir().unwrap();
        let mgr = open(tmp.path());
        let states = TxnStateManager::load(TxnStateTopic::new(mgr.clone(), 1));
        {
            let mut inner = states.lock();
            init(&states, &mut inner, "app", 7);
            assert_eq!(inner.ids["app"].current.producer_epoch, 0);
            assert_eq!(inner.ids["app"].pending, None);
            init(&states, &mut inner, "gone", 8);
            states.expire(&mut inner, "gone").unwrap();
        }
        // Forged: states never written, partitions where there are none.
        let log = mgr
            .partition(&format!("{TRANSACTION_STATE_TOPIC}-0"))
            .unwrap();
        for e in [
            entry("dead", TxnState::Dead, vec![]),
            entry(
                "complete",
                TxnState::CompleteCommit,
                vec![("t".into(), vec![0])],
            ),
            entry("ongoing", TxnState::Ongoing, vec![("t".into(), vec![0])]),
        ] {
            let (k, v) = (e.key().unwrap(), e.value().unwrap());
            log.append(&[NewRecord {
                key: Some(&k),
                value: Some(&v),
                headers: &[],
            }])
            .unwrap();
        }
        drop(log);
        drop(states);
        Arc::into_inner(mgr).unwrap().close().unwrap();

        let mgr = open(tmp.path());
        let states = TxnStateManager::load(TxnStateTopic::new(mgr.clone(), 1));
        let inner = states.lock();
        assert_eq!(inner.ids.keys().collect::<Vec<_>>(), vec!["app", "ongoing"]);
        assert_eq!(inner.ids["app"].current.producer_epoch, 0);
        assert_eq!(inner.ids["ongoing"].current.state, TxnState::Ongoing);
        assert_eq!(inner.max_producer_id, 4000);
        assert!(inner.failed.is_empty());
    }

    /// A failed write leaves the id as it was, free for the next change.
    #[test]
    fn a_failed_write_abandons_the_change() {
        let tmp = tempfile::tempdir().unwrap();
        let mgr = open(tmp.path());
        let states = TxnStateManager::load(TxnStateTopic::new(mgr.clone(), 1));
        let mut inner = states.lock();
        init(&states, &mut inner, "app", 7);
        // A record too large for the topic's max.message.bytes.
        let log_name = format!("{TRANSACTION_STATE_TOPIC}-0");
        mgr.partition(&log_name)
            .unwrap()
            .set_config("max.message.bytes", "10")
            .unwrap();
        let m = inner.ids.get_mut("app").unwrap();
        let t = m
            .prepare_add_partitions(&[("t".to_string(), 0)].into(), 3)
            .unwrap();
        assert!(states.append(&mut inner, "app", &t).is_err());
        let m = &inner.ids["app"];
        assert_eq!((m.current.state, m.pending), (TxnState::Empty, None));
        assert!(m.current.partitions.is_empty());
    }
}
