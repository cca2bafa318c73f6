//! Reading from the cluster: a small pool of consumers assigned by hand, a
//! fetch of the records at and after an offset, the watermarks and the
//! timestamp lookup.
//!
//! A consumer keeps its position: a read that goes on where the last one
//! stopped (`cat log`, `tail -f`, `offset/N` then `offset/N+1` past a
//! chunk) finds the next records already prefetched, with no seek. Each
//! consumer's prefetch is small (`queued.max.messages.kbytes`, see
//! `config`), so memory stays bounded whatever is read.

use std::time::{Duration, Instant};

use log::{debug, warn};
use parking_lot::{Mutex, MutexGuard};
use rdkafka::ClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer as _, ConsumerContext};
use rdkafka::error::{KafkaError, KafkaResult, RDKafkaErrorCode as Code};
use rdkafka::message::{Headers, Message, Timestamp};
use rdkafka::{Offset, TopicPartitionList};

use super::error;
use commitfs_backend::{BackendError, BackendResult, ErrorKind};
use commitfs_record::{Header, Record, TimestampType};

/// A chunk stops growing at about this many record bytes (a fetch's worth).
pub const CHUNK_BYTES: usize = 1 << 20;

/// Consumers that read records; more readers serve more partitions at once.
const READERS: usize = 3;

/// A record as fetched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fetched {
    pub record: Record,
    pub timestamp_type: TimestampType,
}

impl Fetched {
    /// What it costs to keep, roughly.
    pub fn bytes(&self) -> usize {
        let r = &self.record;
        64 + r.key.as_ref().map_or(0, Vec::len)
            + r.value.as_ref().map_or(0, Vec::len)
            + r.headers
                .iter()
                .map(|h| 32 + h.key.len() + h.value.as_ref().map_or(0, Vec::len))
                .sum::<usize>()
    }
}

/// Records of `[first, next)` in offset order. Offsets in the range with no
/// record are control records (transaction markers), which consumers skip.
#[derive(Debug, Default)]
pub struct Chunk {
    pub first: i64,
    pub next: i64,
    pub records: Vec<Fetched>,
    pub bytes: usize,
}

impl Chunk {
    /// Record `offset`, if the chunk covers it and it is a user record.
    pub fn get(&self, offset: i64) -> Option<&Fetched> {
        let i = self
            .records
            .binary_search_by_key(&offset, |f| f.record.offset)
            .ok()?;
        Some(&self.records[i])
    }
}

/// Where a reader's consumer stands.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Position {
    topic: String,
    partition: i32,
    next: i64,
}

/// The consumers' context: the end-of-log events a reader waits for are
/// routine, not errors for the daemon's log.
pub struct Quiet;

impl ClientContext for Quiet {
    fn error(&self, error: KafkaError, reason: &str) {
        match error.rdkafka_error_code() {
            Some(Code::PartitionEOF) => debug!("librdkafka: {reason}"),
            _ => warn!("librdkafka: {error}: {reason}"),
        }
    }
}

impl ConsumerContext for Quiet {}

pub type Consumer = BaseConsumer<Quiet>;

struct Reader {
    consumer: Consumer,
    at: Option<Position>,
    /// The last assignment, while nothing it fetched has arrived yet.
    unsettled: Option<Assigned>,
}

/// An assignment whose fetcher may not have started yet.
struct Assigned {
    topic: String,
    partition: i32,
    offset: i64,
    at: Instant,
}

/// How long an assignment may take to start before the next one replaces
/// it anyway: far longer than a fetcher's stop and start take.
const SETTLE: Duration = Duration::from_secs(1);

impl Reader {
    /// Replacing an assignment stops the old one's fetcher; librdkafka
    /// (2.12, confluentinc/librdkafka#5573) asserts, aborting the daemon,
    /// if the assignment is replaced again while that stop is still under
    /// way. Fetched messages prove the new assignment started (a start
    /// waits for every stop), but an error can be a leftover of the
    /// assignment before; then a seek tells: it succeeds only once the
    /// fetcher has started. An assignment whose fetcher stopped on an error
    /// never accepts a seek; SETTLE bounds the wait for it.
    fn settle(&mut self) {
        let Some(a) = self.unsettled.take() else {
            return;
        };
        while a.at.elapsed() < SETTLE {
            let seek = self.consumer.seek(
                &a.topic,
                a.partition,
                Offset::Offset(a.offset),
                Duration::from_millis(100),
            );
            if seek.is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        debug!(
            "{}-{}: the assignment at {} did not start within {SETTLE:?}",
            a.topic, a.partition, a.offset
        );
    }

    fn assign(&mut self, topic: &str, partition: i32, offset: i64) -> KafkaResult<()> {
        self.settle();
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(topic, partition, Offset::Offset(offset))?;
        self.at = None;
        self.consumer.assign(&tpl)?;
        self.unsettled = Some(Assigned {
            topic: topic.to_string(),
            partition,
            offset,
            at: Instant::now(),
        });
        Ok(())
    }
}

impl Drop for Reader {
    /// Closing the consumer stops its fetcher: not while a stop is pending.
    fn drop(&mut self) {
        self.settle();
    }
}

type MakeConsumer = Box<dyn Fn() -> BackendResult<Consumer> + Send + Sync>;

pub struct Fetcher {
    readers: Vec<Mutex<Reader>>,
    /// Makes a reader's consumer anew, when one is retired.
    make: MakeConsumer,
    /// For watermarks and timestamp lookups: never assigned, so its calls
    /// never wait behind a reader's fetch.
    meta: Consumer,
    timeout: Duration,
}

fn convert(m: &rdkafka::message::BorrowedMessage<'_>) -> Fetched {
    let (timestamp, timestamp_type) = match m.timestamp() {
        Timestamp::CreateTime(t) => (t, TimestampType::CreateTime),
        Timestamp::LogAppendTime(t) => (t, TimestampType::LogAppendTime),
        Timestamp::NotAvailable => (-1, TimestampType::CreateTime),
    };
    let headers = m
        .headers()
        .map(|hs| {
            hs.iter()
                .map(|h| Header {
                    key: h.key.to_string(),
                    value: h.value.map(<[u8]>::to_vec),
                })
                .collect()
        })
        .unwrap_or_default();
    let key = m.key().map(<[u8]>::to_vec);
    let value = m.payload().map(<[u8]>::to_vec);
    let size_in_bytes = key.as_ref().map_or(0, Vec::len) + value.as_ref().map_or(0, Vec::len);
    Fetched {
        record: Record {
            offset: m.offset(),
            timestamp,
            attributes: 0,
            key,
            value,
            headers,
            sequence: -1,
            size_in_bytes,
        },
        timestamp_type,
    }
}

impl Fetcher {
    pub fn new(
        make: impl Fn() -> BackendResult<Consumer> + Send + Sync + 'static,
        timeout: Duration,
    ) -> BackendResult<Self> {
        let readers = (0..READERS)
            .map(|_| {
                Ok(Mutex::new(Reader {
                    consumer: make()?,
                    at: None,
                    unsettled: None,
                }))
            })
            .collect::<BackendResult<_>>()?;
        Ok(Fetcher {
            readers,
            meta: make()?,
            make: Box::new(make),
            timeout,
        })
    }

    /// The reader standing at `next` in the partition if one is free, else
    /// any free one, else the first (waiting for it).
    fn reader(&self, topic: &str, partition: i32, next: i64) -> MutexGuard<'_, Reader> {
        let mut free = None;
        for r in &self.readers {
            if let Some(g) = r.try_lock() {
                let here = g.at.as_ref().is_some_and(|p| {
                    p.topic == topic && p.partition == partition && p.next == next
                });
                if here {
                    return g;
                }
                if free.is_none() {
                    free = Some(g);
                }
            }
        }
        free.unwrap_or_else(|| self.readers[0].lock())
    }

    /// The records from `offset` on: at least the first record at or after
    /// it, then whatever else the same fetch brought, up to about
    /// [`CHUNK_BYTES`], never past `stop` (a chunk already cached there).
    /// An empty chunk means the log holds no record at or after `offset`
    /// (it ends there, or only control records follow).
    pub fn fetch(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
        stop: i64,
    ) -> BackendResult<Chunk> {
        let what = || format!("Fetch {topic}-{partition} at {offset}");
        let mut r = self.reader(topic, partition, offset);
        let want = Position {
            topic: topic.to_string(),
            partition,
            next: offset,
        };
        let mut fresh = r.at.as_ref() != Some(&want);
        loop {
            if fresh {
                r.assign(topic, partition, offset)
                    .map_err(|e| error::client(what(), &e))?;
            }
            let result = self.collect(&r.consumer, &want, stop);
            r.at = match &result {
                Ok(c) => {
                    // What arrived came from this assignment's fetcher.
                    r.unsettled = None;
                    Some(Position {
                        next: c.next,
                        ..want.clone()
                    })
                }
                Err(_) => {
                    self.retire_if_unsettled(&mut r);
                    None
                }
            };
            match result {
                // A consumer that stood here may hold an end-of-log event
                // from before the latest appends: only a fresh one's counts.
                Ok(c) if c.records.is_empty() && !fresh => fresh = true,
                Ok(c) => return Ok(c),
                Err(Collect::TimedOut) => {
                    return Err(error::timed_out(what(), self.timeout));
                }
                Err(Collect::Failed(e)) => return Err(e),
            }
        }
    }

    /// A reader whose assignment failed before anything of it arrived gets
    /// a new consumer, and the old one is closed in the background once it
    /// settled (see [`Reader::settle`]): the next fetch, often a retry right
    /// away, need not wait for it.
    fn retire_if_unsettled(&self, r: &mut Reader) {
        if r.unsettled.is_none() {
            return;
        }
        match (self.make)() {
            Ok(consumer) => {
                let old = std::mem::replace(
                    r,
                    Reader {
                        consumer,
                        at: None,
                        unsettled: None,
                    },
                );
                let closing = std::thread::Builder::new()
                    .name("consumer-close".into())
                    .spawn(move || drop(old));
                if let Err(e) = closing {
                    // The old reader came back with the error and is
                    // dropped here, settling first.
                    warn!("closing a consumer in the foreground: {e}");
                }
            }
            Err(e) => debug!("{e}; the reader keeps its consumer"),
        }
    }

    fn collect(&self, consumer: &Consumer, at: &Position, stop: i64) -> Result<Chunk, Collect> {
        let deadline = Instant::now() + self.timeout;
        let mut chunk = Chunk {
            first: at.next,
            next: at.next,
            ..Chunk::default()
        };
        // A client-wide error (a broker down, a connection lost) may be
        // one queued while the cluster was away, or one librdkafka recovers
        // from by itself: it fails the fetch only if nothing comes by the
        // deadline.
        let mut transient: Option<BackendError> = None;
        loop {
            // Once something is in hand, take only what is already queued.
            let wait = if chunk.records.is_empty() {
                let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                    return Err(transient.map_or(Collect::TimedOut, Collect::Failed));
                };
                left.min(Duration::from_millis(200))
            } else {
                Duration::ZERO
            };
            let m = match consumer.poll(wait) {
                None if chunk.records.is_empty() => continue,
                None => return Ok(chunk),
                Some(Err(KafkaError::PartitionEOF(p))) if p == at.partition => {
                    debug!(
                        "{}-{}: log end reached at {}",
                        at.topic, at.partition, chunk.next
                    );
                    return Ok(chunk);
                }
                Some(Err(KafkaError::PartitionEOF(_))) => continue,
                Some(Err(e)) => {
                    let what = format!("Fetch {}-{} at {}", at.topic, at.partition, chunk.next);
                    let err = fetch_error(what, &e);
                    if !matches!(err.kind, ErrorKind::Io | ErrorKind::TimedOut) {
                        return Err(Collect::Failed(err));
                    }
                    debug!("{err}; waiting for the client to recover");
                    transient = Some(err);
                    continue;
                }
                Some(Ok(m)) => m,
            };
            // A message of an earlier assignment, or from before the offset.
            if m.topic() != at.topic || m.partition() != at.partition || m.offset() < chunk.next {
                continue;
            }
            if m.offset() >= stop {
                chunk.next = stop;
                return Ok(chunk);
            }
            let f = convert(&m);
            chunk.next = m.offset() + 1;
            chunk.bytes += f.bytes();
            chunk.records.push(f);
            if chunk.bytes >= CHUNK_BYTES {
                return Ok(chunk);
            }
        }
    }

    /// (log start, high watermark), asked of the partition's leader.
    pub fn watermarks(&self, topic: &str, partition: i32) -> BackendResult<(i64, i64)> {
        self.meta
            .fetch_watermarks(topic, partition, self.timeout)
            .map_err(|e| error::client(format!("ListOffsets {topic}-{partition}"), &e))
    }

    /// Kafka's offsetsForTimes: the first offset with a timestamp >= `ms`.
    pub fn offset_for_time(
        &self,
        topic: &str,
        partition: i32,
        ms: i64,
    ) -> BackendResult<Option<i64>> {
        let what = || format!("ListOffsets {topic}-{partition} by time {ms}");
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(topic, partition, Offset::Offset(ms))
            .map_err(|e| error::client(what(), &e))?;
        let out = self
            .meta
            .offsets_for_times(tpl, self.timeout)
            .map_err(|e| error::client(what(), &e))?;
        let e = out
            .find_partition(topic, partition)
            .ok_or_else(|| BackendError::new(ErrorKind::Io, format!("{}: no result", what())))?;
        e.error().map_err(|err| error::client(what(), &err))?;
        Ok(match e.offset() {
            Offset::Offset(o) if o >= 0 => Some(o),
            _ => None,
        })
    }

    /// Has every consumer ask for `topic`'s metadata now: each keeps its
    /// own cache, refreshed only every few minutes, and does not know a
    /// partition added since (its watermarks and fetches would fail as
    /// "unknown partition").
    pub fn learn(&self, topic: &str) -> BackendResult<()> {
        let what = || format!("Metadata {topic}");
        self.meta
            .fetch_metadata(Some(topic), self.timeout)
            .map_err(|e| error::client(what(), &e))?;
        for r in &self.readers {
            r.lock()
                .consumer
                .fetch_metadata(Some(topic), self.timeout)
                .map_err(|e| error::client(what(), &e))?;
        }
        Ok(())
    }

    /// Forgets where readers of a partition stand (its log start moved).
    pub fn reset(&self, topic: &str, partition: i32) {
        for r in &self.readers {
            let mut g = r.lock();
            if g.at
                .as_ref()
                .is_some_and(|p| p.topic == topic && p.partition == partition)
            {
                g.at = None;
            }
        }
    }
}

enum Collect {
    TimedOut,
    Failed(BackendError),
}

/// A consumer error: below the log start is "out of range" (the tree's
/// ENOENT), the rest what the code says.
fn fetch_error(what: String, e: &KafkaError) -> BackendError {
    match e.rdkafka_error_code() {
        Some(Code::OffsetOutOfRange) | Some(Code::AutoOffsetReset) => BackendError::new(
            ErrorKind::OffsetOutOfRange {
                offset: -1,
                log_start: -1,
                log_end: -1,
            },
            format!("{what}: the offset is outside the log ({e})"),
        ),
        _ => error::client(what, e),
    }
}
