//! The transaction coordinator's answers (Kafka's `TransactionCoordinator`
//! at transactions version 0): InitProducerId for a transactional id,
//! AddPartitionsToTxn, and EndTxn with the markers it writes. Each answers
//! Kafka's codes in Kafka's order; the request layer only decodes, checks
//! versions and downgrades codes old clients do not know.
//!
//! One broker is every partition's leader, so there is no
//! WriteTxnMarkers: EndTxn writes the markers itself, through
//! `PartitionLog::append_end_txn_marker`, after its Prepare record and
//! before its Complete record, and answers once the Complete record is
//! written (Kafka answers after the Prepare record; the codes are the same,
//! and a committed transaction is readable when its client's commit
//! returns).

use std::collections::BTreeSet;
use std::sync::Arc;

use kafka_protocol::ResponseError;
use log::{info, warn};

use super::metadata::{NO_PRODUCER_EPOCH, NO_PRODUCER_ID, TopicPartition, Transit, TxnMetadata};
use super::state::{TxnInner, TxnStateManager};
use crate::error::{Family, code};
use commitfs_record::names::is_internal_topic;
use commitfs_record::txn_log::TxnState;
use commitfs_storage::{LogManager, StorageError};

/// The coordinator epoch markers carry: one broker, leader epoch 0.
const COORDINATOR_EPOCH: i32 = 0;

/// `transaction.max.timeout.ms`, Kafka's default.
pub const MAX_TIMEOUT_MS: i32 = 900_000;

/// What is told of each marker written: (topic, partition, producer id,
/// commit). The broker hands `__consumer_offsets`' to the group
/// coordinator, whose transactional offsets count from then.
pub type MarkerHook = Box<dyn Fn(&str, i32, i64, bool) + Send + Sync>;

pub struct TxnCoordinator {
    pub states: TxnStateManager,
    mgr: Arc<LogManager>,
    pub max_timeout_ms: i32,
    on_marker: std::sync::OnceLock<MarkerHook>,
}

/// InitProducerId's answer: the producer id and epoch, or an error.
pub type Granted = Result<(i64, i16), ResponseError>;

impl TxnCoordinator {
    pub fn new(states: TxnStateManager, mgr: Arc<LogManager>, max_timeout_ms: i32) -> Self {
        TxnCoordinator {
            states,
            mgr,
            max_timeout_ms,
            on_marker: std::sync::OnceLock::new(),
        }
    }

    /// Sets what is told of each marker written (once, before any).
    pub fn on_marker(&self, hook: MarkerHook) {
        if self.on_marker.set(hook).is_err() {
            warn!("the transaction coordinator's marker hook was set twice; the first is kept");
        }
    }

    /// Kafka's `handleInitProducerId` for a transactional id; `expected` is
    /// the (producer id, epoch) a producer re-initializing says it has
    /// (KIP-360; both -1 for none). `next_id` gives a new producer id.
    pub fn init_producer_id(
        &self,
        id: &str,
        timeout_ms: i32,
        expected: (i64, i16),
        now: i64,
        next_id: &dyn Fn() -> Result<i64, StorageError>,
    ) -> Granted {
        if (expected.0 == NO_PRODUCER_ID) != (expected.1 == NO_PRODUCER_EPOCH) {
            return Err(ResponseError::InvalidRequest);
        }
        if id.is_empty() {
            return Err(ResponseError::InvalidRequest);
        }
        if timeout_ms <= 0 || timeout_ms > self.max_timeout_ms {
            return Err(ResponseError::InvalidTransactionTimeout);
        }
        let expected = (expected.0 != NO_PRODUCER_ID).then_some(expected);
        let mut inner = self.states.lock();
        if self.states.failed(&inner, id) {
            return Err(ResponseError::NotCoordinator);
        }
        if !inner.ids.contains_key(id) {
            let pid = next_id().map_err(|e| {
                warn!("InitProducerId of transactional id {id}: no producer id: {e}");
                ResponseError::CoordinatorNotAvailable
            })?;
            inner
                .ids
                .insert(id.to_string(), TxnMetadata::new(id, pid, timeout_ms, now));
        }
        let m = inner.ids.get_mut(id).expect("inserted above");
        if m.pending.is_some() {
            return Err(ResponseError::ConcurrentTransactions);
        }
        if let Some((pid, epoch)) = expected
            && !(m.current.producer_epoch == NO_PRODUCER_EPOCH
                || pid == m.current.producer_id
                || (pid == m.current.prev_producer_id && super::metadata::epoch_exhausted(epoch)))
        {
            return Err(ResponseError::ProducerFenced);
        }
        match m.current.state {
            TxnState::PrepareAbort | TxnState::PrepareCommit => {
                Err(ResponseError::ConcurrentTransactions)
            }
            TxnState::Ongoing => {
                // Kafka fences the open transaction's producer and aborts it;
                // the client is told to retry, and its retry bumps again.
                let fence = m.prepare_fence_epoch().map_err(|e| {
                    warn!("{e}");
                    ResponseError::UnknownServerError
                })?;
                drop(inner);
                info!(
                    "InitProducerId of transactional id {id}: aborting its open transaction under epoch {}",
                    fence.producer_epoch
                );
                let _ = self.end_locked(id, false, Some(fence), now);
                Err(ResponseError::ConcurrentTransactions)
            }
            _ => {
                let rotate = m.epoch_exhausted()
                    && expected.is_none_or(|(_, e)| e == m.current.producer_epoch);
                let transit = if rotate {
                    let pid = next_id().map_err(|_| ResponseError::CoordinatorNotAvailable)?;
                    m.prepare_rotate_producer_id(pid, timeout_ms, now, expected.is_some())
                        .map_err(|e| {
                            warn!("{e}");
                            ResponseError::UnknownServerError
                        })?
                } else {
                    match m.prepare_increment_epoch(timeout_ms, expected.map(|e| e.1), now) {
                        Ok(Ok(t)) => t,
                        Ok(Err(_fenced)) => return Err(ResponseError::ProducerFenced),
                        Err(e) => {
                            warn!("{e}");
                            return Err(ResponseError::UnknownServerError);
                        }
                    }
                };
                self.write(&mut inner, id, &transit)?;
                Ok((transit.producer_id, transit.producer_epoch))
            }
        }
    }

    /// Kafka's `handleAddPartitionsToTransaction` (v0–3), after the request
    /// layer's checks of each partition.
    pub fn add_partitions(
        &self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        partitions: &BTreeSet<TopicPartition>,
        now: i64,
    ) -> Result<(), ResponseError> {
        if id.is_empty() {
            return Err(ResponseError::InvalidRequest);
        }
        let mut inner = self.states.lock();
        self.producer_of(&inner, id, producer_id, epoch)?;
        let m = inner.ids.get_mut(id).expect("checked above");
        if m.pending.is_some()
            || matches!(
                m.current.state,
                TxnState::PrepareCommit | TxnState::PrepareAbort
            )
        {
            return Err(ResponseError::ConcurrentTransactions);
        }
        if m.current.state == TxnState::Ongoing && partitions.is_subset(&m.current.partitions) {
            return Ok(());
        }
        let transit = m.prepare_add_partitions(partitions, now).map_err(|e| {
            warn!("{e}");
            ResponseError::UnknownServerError
        })?;
        self.write(&mut inner, id, &transit)
    }

    /// The per-partition checks of AddPartitionsToTxn (`KafkaApis`): an
    /// internal topic is not the client's to write (29), a partition that
    /// does not exist is unknown (3); when any fails, the others were not
    /// attempted (55). `None` when all pass.
    pub fn check_partitions(
        &self,
        partitions: &BTreeSet<TopicPartition>,
    ) -> Option<Vec<(TopicPartition, ResponseError)>> {
        let checked: Vec<(TopicPartition, Option<ResponseError>)> = partitions
            .iter()
            .map(|(t, p)| {
                let err = if is_internal_topic(t) {
                    Some(ResponseError::TopicAuthorizationFailed)
                } else if self.mgr.partition(&format!("{t}-{p}")).is_none() {
                    Some(ResponseError::UnknownTopicOrPartition)
                } else {
                    None
                };
                ((t.clone(), *p), err)
            })
            .collect();
        if checked.iter().all(|(_, e)| e.is_none()) {
            return None;
        }
        Some(
            checked
                .into_iter()
                .map(|(tp, e)| (tp, e.unwrap_or(ResponseError::OperationNotAttempted)))
                .collect(),
        )
    }

    /// Kafka's `handleEndTransaction` (v0–4) from a client.
    pub fn end_txn(
        &self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        commit: bool,
        now: i64,
    ) -> Result<(), ResponseError> {
        if id.is_empty() {
            return Err(ResponseError::InvalidRequest);
        }
        self.producer_of(&self.states.lock(), id, producer_id, epoch)?;
        self.end_locked(id, commit, None, now)
    }

    /// The end of a transaction: from a client, or an abort the coordinator
    /// decides (`fence` held: a fenced producer's, or a timed-out one).
    fn end_locked(
        &self,
        id: &str,
        commit: bool,
        fence: Option<Transit>,
        now: i64,
    ) -> Result<(), ResponseError> {
        let mut inner = self.states.lock();
        let m = inner
            .ids
            .get_mut(id)
            .ok_or(ResponseError::InvalidProducerIdMapping)?;
        if let Some(f) = &fence {
            m.take_fence(f);
        } else if m.pending.is_some() {
            return Err(ResponseError::ConcurrentTransactions);
        }
        let (prepare, complete) = if commit {
            (TxnState::PrepareCommit, TxnState::CompleteCommit)
        } else {
            (TxnState::PrepareAbort, TxnState::CompleteAbort)
        };
        match m.current.state {
            TxnState::Ongoing => {}
            // Prepared, and no write of its markers under way (that holds a
            // pending state): the markers failed before, so they are sent
            // again (Kafka's marker channel retries until they land).
            s if s == prepare && fence.is_none() => {
                drop(inner);
                return self.complete_prepared(id, now);
            }
            s if s == prepare => return Err(ResponseError::ConcurrentTransactions),
            s if s == complete => return Ok(()),
            _ => return Err(ResponseError::InvalidTxnState),
        }
        let transit = m.prepare_abort_or_commit(prepare, now).map_err(|e| {
            warn!("{e}");
            ResponseError::UnknownServerError
        })?;
        if let Err(e) = self.write(&mut inner, id, &transit) {
            if fence.is_some()
                && let Some(m) = inner.ids.get_mut(id)
            {
                // The epoch was bumped in memory but not written: the next
                // fence keeps it (Kafka's `hasFailedEpochFence`).
                m.has_failed_epoch_fence = true;
                warn!(
                    "Transactional id {id}: the epoch fence to {} was not written; it was not returned to any client",
                    m.current.producer_epoch
                );
            }
            return Err(e);
        }
        drop(inner);
        self.complete_prepared(id, now)
    }

    /// Completes a transaction whose Prepare record is written: its
    /// markers go to each of its partitions, then its Complete record is
    /// written. The Complete change is pending meanwhile, so no other
    /// request changes the id; the markers are written with no lock held.
    /// When a marker cannot be written, the transaction stays prepared and
    /// `Ok` is answered (the decision is durable): the next EndTxn, or the
    /// next start, sends the markers again.
    fn complete_prepared(&self, id: &str, now: i64) -> Result<(), ResponseError> {
        let mut inner = self.states.lock();
        let m = inner
            .ids
            .get_mut(id)
            .ok_or(ResponseError::InvalidProducerIdMapping)?;
        let commit = match m.current.state {
            TxnState::PrepareCommit => true,
            TxnState::PrepareAbort => false,
            _ => return Err(ResponseError::InvalidTxnState),
        };
        if m.pending.is_some() {
            return Err(ResponseError::ConcurrentTransactions);
        }
        let (pid, epoch) = (m.current.producer_id, m.current.producer_epoch);
        let partitions: Vec<TopicPartition> = m.current.partitions.iter().cloned().collect();
        let transit = m.prepare_complete(now).map_err(|e| {
            warn!("{e}");
            ResponseError::UnknownServerError
        })?;
        drop(inner);
        let mut left = Vec::new();
        for (topic, p) in &partitions {
            let name = format!("{topic}-{p}");
            let Some(log) = self.mgr.partition(&name) else {
                // Kafka drops a partition with no leader: it was deleted.
                continue;
            };
            match log.append_end_txn_marker(pid, epoch, COORDINATOR_EPOCH, commit) {
                Ok(_) => {
                    if let Some(hook) = self.on_marker.get() {
                        hook(topic, *p, pid, commit);
                    }
                }
                Err(e) => {
                    warn!(
                        "Transactional id {id}: the {} marker for {name} was not written: {e}",
                        if commit { "COMMIT" } else { "ABORT" }
                    );
                    left.push(name);
                }
            }
        }
        let mut inner = self.states.lock();
        if !left.is_empty() {
            if let Some(m) = inner.ids.get_mut(id) {
                m.abandon();
            }
            warn!(
                "Transactional id {id} stays {} until its markers reach {}",
                if commit {
                    "PrepareCommit"
                } else {
                    "PrepareAbort"
                },
                left.join(", ")
            );
            return Ok(());
        }
        self.write(&mut inner, id, &transit)
    }

    /// Completes every transaction found prepared (Kafka completes them
    /// when it loads `__transaction_state`): its markers are written again,
    /// which a partition that has them already takes as a retry.
    pub fn complete_prepared_at_load(&self, now: i64) {
        let prepared: Vec<String> = {
            let inner = self.states.lock();
            inner
                .ids
                .iter()
                .filter(|(_, m)| {
                    matches!(
                        m.current.state,
                        TxnState::PrepareCommit | TxnState::PrepareAbort
                    )
                })
                .map(|(id, _)| id.clone())
                .collect()
        };
        for id in prepared {
            info!("Transactional id {id} was prepared at the last stop: completing it");
            if let Err(e) = self.complete_prepared(&id, now) {
                warn!("Transactional id {id}: completing it failed with {e:?}");
            }
        }
    }

    /// Kafka's `abortTimedOutTransactions`: each transaction open for longer
    /// than its timeout is aborted under a new epoch, which fences its
    /// producer (as a second producer of the id would).
    pub fn abort_timed_out(&self, now: i64) {
        let timed_out: Vec<(String, i64)> = {
            let inner = self.states.lock();
            inner
                .ids
                .iter()
                .filter(|(_, m)| {
                    m.pending.is_none()
                        && m.current.state == TxnState::Ongoing
                        && m.current.start_ms + i64::from(m.current.timeout_ms) < now
                })
                .map(|(id, m)| (id.clone(), m.current.producer_id))
                .collect()
        };
        for (id, pid) in timed_out {
            let fence = {
                let mut inner = self.states.lock();
                let Some(m) = inner.ids.get_mut(&id) else {
                    continue;
                };
                if m.current.producer_id != pid
                    || m.pending.is_some()
                    || m.current.state != TxnState::Ongoing
                {
                    continue;
                }
                match m.prepare_fence_epoch() {
                    Ok(fence) => {
                        info!(
                            "Transactional id {id}: its transaction, open since {} for more than its timeout of {} ms, is aborted under epoch {}",
                            m.current.start_ms, m.current.timeout_ms, fence.producer_epoch
                        );
                        fence
                    }
                    Err(e) => {
                        warn!(
                            "Transactional id {id}: its timed-out transaction is not aborted: {e}"
                        );
                        continue;
                    }
                }
            };
            if let Err(e) = self.end_locked(&id, false, Some(fence), now) {
                warn!(
                    "Transactional id {id}: aborting its timed-out transaction failed with {e:?}"
                );
            }
        }
    }

    /// Kafka's `removeExpiredTransactionalIds`: an id with no transaction
    /// open whose state has not changed for `expiration_ms` is forgotten,
    /// its tombstone written first.
    pub fn expire_ids(&self, now: i64, expiration_ms: i64) {
        let mut inner = self.states.lock();
        let expired: Vec<String> = inner
            .ids
            .iter()
            .filter(|(id, m)| {
                m.pending.is_none()
                    && super::metadata::expirable(m.current.state)
                    && m.current.last_update_ms <= now - expiration_ms
                    && !self.states.failed(&inner, id)
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            let m = inner.ids.get_mut(&id).expect("listed above");
            if let Err(e) = m.prepare_dead() {
                warn!("Transactional id {id} is not expired: {e}");
                continue;
            }
            match self.states.expire(&mut inner, &id) {
                Ok(()) => info!(
                    "Transactional id {id} expired: no change for transactional.id.expiration.ms ({expiration_ms} ms)"
                ),
                Err(e) => warn!("Transactional id {id}: its tombstone was not written: {e}"),
            }
        }
    }

    /// Kafka's `handleDescribeTransactions` for one id: its metadata, or
    /// INVALID_REQUEST (empty id), NOT_COORDINATOR (its partition of the
    /// topic failed to load) or TRANSACTIONAL_ID_NOT_FOUND.
    pub fn describe(&self, id: &str) -> Result<TxnMetadata, ResponseError> {
        if id.is_empty() {
            return Err(ResponseError::InvalidRequest);
        }
        let inner = self.states.lock();
        if self.states.failed(&inner, id) {
            return Err(ResponseError::NotCoordinator);
        }
        match inner.ids.get(id) {
            Some(m) if m.current.state != TxnState::Dead => Ok(m.clone()),
            _ => Err(ResponseError::TransactionalIdNotFound),
        }
    }

    /// Kafka's `listTransactionStates`: (id, producer id, state) of each id
    /// that passes the filters (none given: all), Dead ones never; and the
    /// state names it does not know.
    pub fn list(
        &self,
        producer_ids: &[i64],
        states: &[String],
        duration_ms: i64,
        now: i64,
    ) -> (Vec<String>, Vec<(String, i64, TxnState)>) {
        let mut unknown = Vec::new();
        let mut wanted = Vec::new();
        for name in states {
            match TxnState::ALL.iter().find(|s| s.name() == name) {
                Some(s) => wanted.push(*s),
                None => unknown.push(name.clone()),
            }
        }
        let inner = self.states.lock();
        let found = inner
            .ids
            .iter()
            .filter(|(_, m)| {
                m.current.state != TxnState::Dead
                    && (producer_ids.is_empty() || producer_ids.contains(&m.current.producer_id))
                    && (states.is_empty() || wanted.contains(&m.current.state))
                    && !(duration_ms >= 0 && now - m.current.start_ms <= duration_ms)
            })
            .map(|(id, m)| (id.clone(), m.current.producer_id, m.current.state))
            .collect();
        (unknown, found)
    }

    /// A client's transactional batches for `topic`-`partition`, appended
    /// by `append` once the partition is known to be in the producer's
    /// open transaction (Kafka's produce-time verification, KIP-890 part
    /// 1, in process). The lock is held across the append, so no EndTxn
    /// can decide the transaction between the check and the append.
    pub fn append_in_txn<T>(
        &self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        tp: (&str, i32),
        append: impl FnOnce() -> T,
    ) -> Result<T, ResponseError> {
        let inner = self.states.lock();
        let m = self.producer_of(&inner, id, producer_id, epoch)?;
        if m.pending.is_some()
            || matches!(
                m.current.state,
                TxnState::PrepareCommit | TxnState::PrepareAbort
            )
        {
            return Err(ResponseError::ConcurrentTransactions);
        }
        if m.current.state != TxnState::Ongoing
            || !m.current.partitions.contains(&(tp.0.to_string(), tp.1))
        {
            return Err(ResponseError::InvalidTxnState);
        }
        Ok(append())
    }

    /// An id's metadata, when (`producer_id`, `epoch`) is its producer
    /// (Kafka's checks in this order): NOT_COORDINATOR when its partition
    /// of the topic failed to load, INVALID_PRODUCER_ID_MAPPING for an
    /// unknown id or another producer, PRODUCER_FENCED for another epoch.
    fn producer_of<'a>(
        &self,
        inner: &'a TxnInner,
        id: &str,
        producer_id: i64,
        epoch: i16,
    ) -> Result<&'a TxnMetadata, ResponseError> {
        if self.states.failed(inner, id) {
            return Err(ResponseError::NotCoordinator);
        }
        let Some(m) = inner.ids.get(id) else {
            return Err(ResponseError::InvalidProducerIdMapping);
        };
        if m.current.producer_id != producer_id {
            return Err(ResponseError::InvalidProducerIdMapping);
        }
        if m.current.producer_epoch != epoch {
            return Err(ResponseError::ProducerFenced);
        }
        Ok(m)
    }

    fn write(&self, inner: &mut TxnInner, id: &str, t: &Transit) -> Result<(), ResponseError> {
        self.states
            .append(inner, id, t)
            .map_err(|e| code(Family::TxnLog, e.kind()))
    }
}

#[cfg(test)]
mod tests;
