//! The transaction coordinator's two scheduled tasks (Kafka's
//! `transaction-abort` and `transactionalId-expiration`): timed-out
//! transactions aborted every
//! `transaction.abort.timed.out.transaction.cleanup.interval.ms`, and idle
//! transactional ids expired every
//! `transaction.remove.expired.transaction.cleanup.interval.ms`.

use std::sync::Arc;
use std::time::Duration;

use commitfs_storage::scheduler::Scheduler;

use crate::broker::Broker;

pub struct TxnCleaner(Scheduler);

impl TxnCleaner {
    pub fn start(broker: Arc<Broker>) -> Result<TxnCleaner, String> {
        let jobs = Scheduler::new("kafka-txn-cleanup", 1);
        // Read-only, nothing can be written: no abort, no tombstone.
        if broker.mgr.read_only() {
            return Ok(TxnCleaner(jobs));
        }
        let c = &broker.config;
        let abort_every = Duration::from_millis(c.txn_abort_interval_ms);
        let expire_every = Duration::from_millis(c.txn_expire_interval_ms);
        let expiration_ms = c.txn_id_expiration_ms as i64;
        let b = broker.clone();
        let abort = move || b.txns.abort_timed_out(commitfs_storage::now_ms());
        let expire = move || {
            (broker.txns).expire_ids(commitfs_storage::now_ms(), expiration_ms);
        };
        let started = jobs
            .schedule("transaction-abort", abort_every, abort_every, abort)
            .and_then(|()| {
                jobs.schedule(
                    "transactionalId-expiration",
                    expire_every,
                    expire_every,
                    expire,
                )
            });
        if let Err(e) = started {
            jobs.stop();
            return Err(format!("cannot start the transaction cleanup: {e}"));
        }
        Ok(TxnCleaner(jobs))
    }

    /// Stops the jobs and waits for them (a task under way finishes first).
    pub fn stop(&mut self) {
        self.0.stop();
    }
}

impl Drop for TxnCleaner {
    fn drop(&mut self) {
        self.stop();
    }
}
