//! The produce path: one write's records, in order, to one partition, from
//! one idempotent producer with `acks=all`; the write returns only once the
//! cluster has acknowledged every record, or with an errno once any failed
//! or the request timeout passed.
//!
//! The records of a write are enqueued together, so librdkafka sends them
//! in one batch whenever they fit in one (`batch.size`, the broker's
//! `max.message.bytes`); a larger write becomes several batches, as a local
//! mount packs it. Kafka has no all-or-nothing across batches: if one fails,
//! the write fails and the log says which offsets did land.
//!
//! A producer that hits a fatal error (its idempotence state lost, say
//! after the cluster forgot its producer id) is replaced by a new one on the
//! next write, so the mount carries on without a remount.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use log::{error, warn};
use parking_lot::{Condvar, Mutex, RwLock};
use rdkafka::ClientContext;
use rdkafka::error::{KafkaError, RDKafkaErrorCode as Code};
use rdkafka::message::{Header, Message, OwnedHeaders};
use rdkafka::producer::{
    BaseRecord, DeliveryResult, Producer as _, ProducerContext, PurgeConfig, ThreadedProducer,
};

use super::error;
use commitfs_backend::{AppendError, BackendError, BackendResult, ErrorKind, Landed};
use commitfs_record::NewRecord;

/// The acknowledgements one write waits for.
#[derive(Default)]
struct Waiter {
    state: Mutex<Outcome>,
    done: Condvar,
}

#[derive(Default)]
struct Outcome {
    left: usize,
    acked: usize,
    first: Option<i64>,
    last: Option<i64>,
    failure: Option<(usize, KafkaError)>,
}

pub struct Slot {
    waiter: Arc<Waiter>,
    index: usize,
    /// The producer's count of records not reported on yet, counted down
    /// when the slot goes.
    unreported: Arc<AtomicUsize>,
}

/// Reported on, or never enqueued: either way no longer in flight.
impl Drop for Slot {
    fn drop(&mut self) {
        self.unreported.fetch_sub(1, Ordering::AcqRel);
    }
}

pub struct Context;

impl ClientContext for Context {}

impl ProducerContext for Context {
    type DeliveryOpaque = Box<Slot>;

    fn delivery(&self, result: &DeliveryResult<'_>, slot: Box<Slot>) {
        let mut o = slot.waiter.state.lock();
        match result {
            Ok(m) => {
                o.acked += 1;
                o.first = Some(o.first.map_or(m.offset(), |f| f.min(m.offset())));
                o.last = Some(o.last.map_or(m.offset(), |l| l.max(m.offset())));
            }
            Err((e, _)) => {
                if o.failure.as_ref().is_none_or(|(i, _)| slot.index < *i) {
                    o.failure = Some((slot.index, e.clone()));
                }
            }
        }
        o.left -= 1;
        if o.left == 0 {
            slot.waiter.done.notify_all();
        }
    }
}

type Inner = ThreadedProducer<Context>;

pub struct Producer {
    make: Box<dyn Fn() -> BackendResult<Inner> + Send + Sync>,
    current: RwLock<Option<Arc<Inner>>>,
    timeout: Duration,
    unreported: Arc<AtomicUsize>,
}

/// What an append got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Acked {
    pub first: i64,
    pub last: i64,
    /// The records' create time, as sent.
    pub timestamp: i64,
}

impl Producer {
    pub fn new(
        make: impl Fn() -> BackendResult<Inner> + Send + Sync + 'static,
        timeout: Duration,
    ) -> BackendResult<Self> {
        let first = make()?;
        Ok(Producer {
            make: Box::new(make),
            current: RwLock::new(Some(Arc::new(first))),
            timeout,
            unreported: Arc::default(),
        })
    }

    fn producer(&self) -> BackendResult<Arc<Inner>> {
        if let Some(p) = &*self.current.read() {
            return Ok(p.clone());
        }
        let mut slot = self.current.write();
        if let Some(p) = &*slot {
            return Ok(p.clone());
        }
        warn!("Starting a new producer after the last one failed for good");
        let p = Arc::new((self.make)()?);
        *slot = Some(p.clone());
        Ok(p)
    }

    /// Records handed to the producer that it has not reported on yet
    /// (acknowledged, failed or purged).
    pub fn in_flight(&self) -> usize {
        self.unreported.load(Ordering::Acquire)
    }

    /// Drops a producer that failed fatally; the next write makes another.
    fn retire(&self, failed: &Arc<Inner>) {
        let mut slot = self.current.write();
        if slot.as_ref().is_some_and(|p| Arc::ptr_eq(p, failed)) {
            *slot = None;
        }
    }

    /// Produces `records` to `topic`/`partition` and waits for the acks.
    pub fn append(
        &self,
        topic: &str,
        partition: i32,
        records: &[NewRecord],
    ) -> Result<Acked, AppendError> {
        let what = format!(
            "Produce of {} records to {topic}-{partition}",
            records.len()
        );
        let producer = self.producer()?;
        let deadline = Instant::now() + self.timeout;
        let waiter = Arc::new(Waiter::default());
        waiter.state.lock().left = records.len();
        let timestamp = now_ms();
        let mut send_error = None;
        for (index, r) in records.iter().enumerate() {
            let slot = Box::new(Slot {
                waiter: waiter.clone(),
                index,
                unreported: self.unreported.clone(),
            });
            self.unreported.fetch_add(1, Ordering::AcqRel);
            if let Err(e) = send(&producer, topic, partition, r, timestamp, slot, deadline) {
                // The rest was never enqueued: nobody will report on it.
                let mut o = waiter.state.lock();
                o.left -= records.len() - index;
                send_error = Some((index, e));
                break;
            }
        }
        let outcome = self.wait(&waiter, deadline);
        let Some(mut o) = outcome else {
            return Err(BackendError::new(
                ErrorKind::TimedOut,
                format!(
                    "{what}: not acknowledged within request.timeout.ms ({} ms); the records may \
                     still land",
                    self.timeout.as_millis()
                ),
            )
            .into());
        };
        if let Some((i, e)) = send_error
            && o.failure.as_ref().is_none_or(|(j, _)| i < *j)
        {
            o.failure = Some((i, e));
        }
        match o.failure {
            None => Ok(Acked {
                first: o.first.unwrap_or(-1),
                last: o.last.unwrap_or(-1),
                timestamp,
            }),
            Some((index, e)) => {
                if e.rdkafka_error_code() == Some(Code::Fatal) {
                    error!("{what}: the producer failed for good ({e}); a new one takes over");
                    self.retire(&producer);
                }
                let landed = match (o.first, o.last) {
                    (Some(first_offset), Some(last_offset)) => Some(Landed {
                        records: o.acked,
                        first_offset,
                        last_offset,
                    }),
                    _ => None,
                };
                Err(AppendError {
                    error: error::client(format!("{what} (record {index})"), &e),
                    landed,
                })
            }
        }
    }

    /// The outcome once every report is in, or `None` at the deadline
    /// (plus a second: librdkafka settles each message within
    /// `message.timeout.ms`, which defaults to the request timeout).
    fn wait(&self, waiter: &Waiter, deadline: Instant) -> Option<Outcome> {
        let deadline = deadline + Duration::from_secs(1);
        let mut o = waiter.state.lock();
        while o.left > 0 {
            if waiter.done.wait_until(&mut o, deadline).timed_out() && o.left > 0 {
                return None;
            }
        }
        Some(std::mem::take(&mut *o))
    }

    /// Has the producer ask for `topic`'s metadata now (see
    /// `Fetcher::learn`): a produce to a partition its cache lacks fails.
    pub fn learn(&self, topic: &str) -> BackendResult<()> {
        let p = self.producer()?;
        p.client()
            .fetch_metadata(Some(topic), self.timeout)
            .map_err(|e| error::client(format!("Metadata {topic}"), &e))?;
        Ok(())
    }

    /// Sends what is queued; what cannot be sent within the timeout is
    /// purged, so its writers get an error before the process exits.
    pub fn close(&self) {
        let Some(p) = self.current.write().take() else {
            return;
        };
        if let Err(e) = p.flush(self.timeout) {
            warn!(
                "{} produces were still in flight at shutdown ({e}); failing them to their writers",
                p.in_flight_count()
            );
            p.purge(PurgeConfig::default().queue().inflight());
            let _ = p.flush(Duration::from_secs(1));
        }
    }
}

fn send(
    producer: &Inner,
    topic: &str,
    partition: i32,
    r: &NewRecord,
    timestamp: i64,
    slot: Box<Slot>,
    deadline: Instant,
) -> Result<(), KafkaError> {
    let mut record = BaseRecord::<[u8], [u8], Box<Slot>>::with_opaque_to(topic, slot)
        .partition(partition)
        .timestamp(timestamp);
    if let Some(v) = r.value {
        record = record.payload(v);
    }
    if let Some(k) = r.key {
        record = record.key(k);
    }
    if !r.headers.is_empty() {
        let mut hs = OwnedHeaders::new_with_capacity(r.headers.len());
        for (key, value) in r.headers {
            hs = hs.insert(Header { key, value: *value });
        }
        record = record.headers(hs);
    }
    loop {
        match producer.send(record) {
            Ok(()) => return Ok(()),
            // The local queue is full: wait for it to drain, within the bound.
            Err((KafkaError::MessageProduction(Code::QueueFull), back))
                if Instant::now() < deadline =>
            {
                record = back;
                std::thread::sleep(Duration::from_millis(5));
            }
            Err((e, _)) => return Err(e),
        }
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
