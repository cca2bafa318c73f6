//! The transaction coordinator's two scheduled tasks (Kafka's
//! `transaction-abort` and `transactionalId-expiration`): timed-out
//! transactions aborted every
//! `transaction.abort.timed.out.transaction.cleanup.interval.ms`, and idle
//! transactional ids expired every
//! `transaction.remove.expired.transaction.cleanup.interval.ms`.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::kafka::broker::Broker;

pub struct TxnCleaner {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl TxnCleaner {
    pub fn start(broker: Arc<Broker>) -> Result<TxnCleaner, String> {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let flag = stop.clone();
        let c = &broker.config;
        let abort_every = Duration::from_millis(c.txn_abort_interval_ms);
        let expire_every = Duration::from_millis(c.txn_expire_interval_ms);
        let expiration_ms = c.txn_id_expiration_ms as i64;
        let read_only = broker.mgr.read_only();
        let thread = std::thread::Builder::new()
            .name("kafka-txn-cleanup".into())
            .spawn(move || {
                let (stopped, wake) = &*flag;
                let start = Instant::now();
                let (mut next_abort, mut next_expire) = (start + abort_every, start + expire_every);
                loop {
                    {
                        let mut s = stopped.lock();
                        let next = next_abort.min(next_expire);
                        while !*s && Instant::now() < next {
                            wake.wait_until(&mut s, next);
                        }
                        if *s {
                            return;
                        }
                    }
                    if read_only {
                        // Nothing can be written: no abort, no tombstone.
                        next_abort = Instant::now() + abort_every;
                        next_expire = Instant::now() + expire_every;
                        continue;
                    }
                    let now = Instant::now();
                    if now >= next_abort {
                        broker.txns.abort_timed_out(crate::storage::now_ms());
                        next_abort = now + abort_every;
                    }
                    if now >= next_expire {
                        broker
                            .txns
                            .expire_ids(crate::storage::now_ms(), expiration_ms);
                        next_expire = now + expire_every;
                    }
                }
            })
            .map_err(|e| format!("cannot start the transaction cleanup thread: {e}"))?;
        Ok(TxnCleaner {
            stop,
            thread: Some(thread),
        })
    }

    /// Stops the thread and waits for it (a task under way finishes first).
    pub fn stop(&mut self) {
        *self.stop.0.lock() = true;
        self.stop.1.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for TxnCleaner {
    fn drop(&mut self) {
        self.stop();
    }
}
