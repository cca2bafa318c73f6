//! One partition of a cluster topic, as the tree sees it: each node's
//! operation as client calls, and what each costs.
//!
//! | call | round trips |
//! |---|---|
//! | `offsets` | 1 (ListOffsets: low and high watermark) |
//! | `contains(N)` | 0 when N is below a log end seen before or cached, else 1 |
//! | `record(N)` | 0 when cached, else 1 fetch (caching about 1 MiB from N) |
//! | `stream_len` | 1 ListOffsets, plus fetches of records not counted yet |
//! | `read_stream` | fetches of records not cached; 1 ListOffsets at the end |
//! | `append` | 1 produce (acks=all), more if larger than a batch; the stream index counts it without a fetch |
//! | `offset_for_timestamp` | 1 (ListOffsets by time) |
//! | `status` | 2 (ListOffsets, Metadata) |
//! | `config` | 1 DescribeConfigs, answered again for 1 s |
//! | `set_config` | 1 IncrementalAlterConfigs |
//! | `delete_records` | 1 ListOffsets and 1 DeleteRecords |

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use log::debug;
use parking_lot::Mutex;

use super::Shared;
use super::fetch::Chunk;
use super::stream::{Counted, StreamIndex};
use commitfs_backend::{
    AppendError, Appended, BackendError, BackendResult, ErrorKind, LineFormat, Offsets, Partition,
    RecordEntry, Status,
};
use commitfs_record::NewRecord;

/// librdkafka's `RD_KAFKAP_MESSAGE_V2_MAX_OVERHEAD`: varints at their widest.
const RECORD_V2_MAX_OVERHEAD: usize = 5 + 1 + 10 + 5 + 5 + 5 + 5;

/// How long a DescribeConfigs answer serves (a lookup and an open of the
/// same `config/<name>` come a moment apart).
const CONFIG_FRESH: Duration = Duration::from_secs(1);

/// A topic's configs as DescribeConfigs gives them.
type Configs = Vec<(String, Option<String>)>;

pub struct ClusterPartition {
    name: String,
    key: Arc<str>,
    topic: String,
    id: i32,
    shared: Arc<Shared>,
    /// The log start and end last seen (the start only grows, and so does
    /// the high watermark): a lower bound of the end, never served as it.
    known_start: AtomicI64,
    known_end: AtomicI64,
    index: Mutex<Option<StreamIndex>>,
    /// Kept in memory only: no broker knows the tree's line format.
    lines: Mutex<LineFormat>,
    configs: Mutex<Option<(Instant, Configs)>>,
    /// Since when what is cached of the partition (its chunks, its stream
    /// index) was fetched: a compacted topic's is dropped once it is older
    /// than `cache.compacted.ms`.
    fresh_since: Mutex<Instant>,
    fetches: AtomicU64,
    cache_hits: AtomicU64,
}

impl ClusterPartition {
    pub(super) fn new(topic: &str, id: i32, shared: Arc<Shared>) -> Self {
        let name = format!("{topic}-{id}");
        let lines = shared.opts.line_format.clone();
        ClusterPartition {
            key: Arc::from(name.as_str()),
            name,
            topic: topic.to_string(),
            id,
            shared,
            known_start: AtomicI64::new(-1),
            known_end: AtomicI64::new(-1),
            index: Mutex::new(None),
            lines: Mutex::new(lines),
            configs: Mutex::new(None),
            fresh_since: Mutex::new(Instant::now()),
            fetches: AtomicU64::new(0),
            cache_hits: AtomicU64::new(0),
        }
    }

    pub fn topic(&self) -> &str {
        &self.topic
    }

    pub fn id(&self) -> i32 {
        self.id
    }

    fn deadline(&self) -> Instant {
        Instant::now() + self.shared.opts.request_timeout
    }

    /// The watermarks, asked of the leader; both are remembered as bounds.
    fn watermarks(&self) -> BackendResult<(i64, i64)> {
        let (low, high) = self.shared.fetcher.watermarks(&self.topic, self.id)?;
        self.known_start.fetch_max(low, Ordering::Relaxed);
        self.known_end.fetch_max(high, Ordering::Relaxed);
        Ok((low, high))
    }

    /// The chunk of records covering `offset`: cached, or fetched and cached.
    fn chunk(&self, offset: i64) -> BackendResult<Arc<Chunk>> {
        if let Some(c) = self.shared.cache.get(&self.key, offset) {
            self.cache_hits.fetch_add(1, Ordering::Relaxed);
            return Ok(c);
        }
        let stop = self.shared.cache.next_cached(&self.key, offset);
        self.fetches.fetch_add(1, Ordering::Relaxed);
        let chunk = Arc::new(
            self.shared
                .fetcher
                .fetch(&self.topic, self.id, offset, stop)?,
        );
        if let Some(last) = chunk.records.last() {
            self.known_end
                .fetch_max(last.record.offset + 1, Ordering::Relaxed);
        }
        self.shared.cache.insert(&self.key, chunk.clone());
        Ok(chunk)
    }

    /// The stream index, made (counting from the log start) if needed.
    fn with_index<T>(
        &self,
        low: i64,
        high: i64,
        f: impl FnOnce(&mut StreamIndex) -> BackendResult<T>,
    ) -> BackendResult<T> {
        let mut g = self.index.lock();
        if !g.as_ref().is_some_and(|ix| ix.fits(low, high)) {
            *g = Some(StreamIndex::new(low));
            self.shared.indexed(&self.key);
        }
        f(g.as_mut().expect("made above"))
    }

    /// Drops the stream index (memory is wanted for another partition's).
    pub(super) fn drop_index(&self) {
        *self.index.lock() = None;
    }

    /// Drops what was fetched of a compacted topic's partition once it is
    /// older than `cache.compacted.ms`: records the broker's cleaner removed
    /// since are not served, nor a stream length counted with them. One
    /// DescribeConfigs at most per period; a topic that is not compacted
    /// keeps its cache (its records never change). Asked only once the
    /// leader answered, so an unreachable cluster costs no second timeout;
    /// a DescribeConfigs that fails keeps the cache for another period.
    fn expire_if_compacted(&self) {
        let mut since = self.fresh_since.lock();
        if since.elapsed() < self.shared.opts.cache_compacted {
            return;
        }
        *since = Instant::now();
        let compacted = match self.describe() {
            Ok(configs) => configs.iter().any(|(name, value)| {
                name == "cleanup.policy" && value.as_deref().is_some_and(|v| v.contains("compact"))
            }),
            Err(e) => {
                debug!(
                    "{}: cached records kept, the topic's cleanup.policy unknown: {e}",
                    self.name
                );
                return;
            }
        };
        if compacted {
            debug!(
                "{}: dropping what was fetched of a compacted topic",
                self.name
            );
            self.drop_index();
            self.shared.cache.forget(&self.key);
        }
    }

    fn describe(&self) -> BackendResult<Configs> {
        let mut g = self.configs.lock();
        if let Some((at, c)) = &*g
            && at.elapsed() < CONFIG_FRESH
        {
            return Ok(c.clone());
        }
        let c = self.shared.admin.describe_configs(&self.topic)?;
        *g = Some((Instant::now(), c.clone()));
        Ok(c)
    }
}

impl Partition for ClusterPartition {
    fn name(&self) -> &str {
        &self.name
    }

    fn offsets(&self) -> BackendResult<Offsets> {
        let (log_start, log_end) = self.watermarks()?;
        Ok(Offsets { log_start, log_end })
    }

    fn contains(&self, offset: i64) -> BackendResult<bool> {
        let (start, end) = (
            self.known_start.load(Ordering::Relaxed),
            self.known_end.load(Ordering::Relaxed),
        );
        if start >= 0 && start <= offset && offset < end {
            return Ok(true);
        }
        // A record fetched before stays readable (README "Faults").
        if self
            .shared
            .cache
            .get(&self.key, offset)
            .is_some_and(|c| c.get(offset).is_some())
        {
            return Ok(true);
        }
        let o = self.offsets()?;
        Ok(o.log_start <= offset && offset < o.log_end)
    }

    /// Kafka has no all-or-nothing across batches: a failed append says
    /// which records the cluster acknowledged all the same.
    fn append(&self, records: &[NewRecord]) -> Result<Appended, AppendError> {
        self.shared.writable()?;
        let Some(producer) = &self.shared.producer else {
            return Err(BackendError::new(ErrorKind::ReadOnly, "the mount is read-only").into());
        };
        if records.is_empty() {
            return Err(BackendError::new(ErrorKind::InvalidRecord, "nothing to append").into());
        }
        let acked = producer.append(&self.topic, self.id, records)?;
        self.known_end.fetch_max(acked.last + 1, Ordering::Relaxed);
        // The records sit at first..=last with nobody else's between them:
        // the stream index counts them from what was sent, so the next
        // `stat log` (every `open` of it) need not fetch them back.
        if acked.last - acked.first + 1 == records.len() as i64
            && let Some(ix) = self.index.lock().as_mut()
        {
            let sizes = records.iter().map(|r| r.value.map_or(0, <[u8]>::len));
            ix.count_own(acked.first, sizes, acked.timestamp);
        }
        Ok(Appended {
            first_offset: acked.first,
            last_offset: acked.last,
            // librdkafka batches as it sees fit and does not tell.
            batches: None,
        })
    }

    fn record(&self, offset: i64) -> BackendResult<RecordEntry> {
        let start = self.known_start.load(Ordering::Relaxed);
        let below = || {
            BackendError::new(
                ErrorKind::OffsetOutOfRange {
                    offset,
                    log_start: start,
                    log_end: self.known_end.load(Ordering::Relaxed),
                },
                format!("offset {offset} is below the log start offset {start}"),
            )
        };
        if offset < start {
            return Err(below());
        }
        let chunk = self.chunk(offset)?;
        match chunk.get(offset) {
            Some(f) => Ok(RecordEntry {
                record: f.record.clone(),
                batch_base_offset: None,
                position: None,
                timestamp_type: f.timestamp_type,
                // The cluster's records come through a client, which does
                // not say what became of their transaction.
                transaction: None,
            }),
            None => {
                // Nothing fetched there: past the log end, or a marker.
                let (low, high) = self.watermarks()?;
                if offset >= high {
                    return Err(BackendError::new(
                        ErrorKind::OffsetOutOfRange {
                            offset,
                            log_start: low,
                            log_end: high,
                        },
                        format!("offset {offset} is at or past the log end offset {high}"),
                    ));
                }
                Err(BackendError::new(
                    ErrorKind::NoRecord,
                    format!("offset {offset} of {} holds no record", self.name),
                ))
            }
        }
    }

    fn stream_len(&self) -> BackendResult<u64> {
        let deadline = self.deadline();
        let chunks = |at| self.chunk(at);
        let mut tries = 0;
        loop {
            let (low, high) = self.watermarks()?;
            self.expire_if_compacted();
            match self.with_index(low, high, |ix| ix.len(low, high, &chunks, deadline))? {
                Counted::Len(n) => return Ok(n),
                // The log start moved while counting: once more from it.
                Counted::StartMoved if tries == 0 => tries += 1,
                Counted::StartMoved => {
                    return Err(BackendError::new(
                        ErrorKind::Io,
                        format!(
                            "sizing the stream of {}: the log start moved twice while counting",
                            self.name
                        ),
                    ));
                }
            }
        }
    }

    /// Reads from the index `stream_len` made (every reader `stat`s first,
    /// and that is where a compacted topic's cache expires).
    fn read_stream(&self, pos: u64, buf: &mut [u8]) -> BackendResult<usize> {
        let chunks = |at| self.chunk(at);
        {
            let mut g = self.index.lock();
            if let Some(ix) = g.as_mut() {
                let n = ix.read(pos, buf, &chunks)?;
                if n > 0 {
                    return Ok(n);
                }
            }
        }
        // At the end of what is counted: count up to the log end, then read.
        let (low, high) = self.watermarks()?;
        let deadline = self.deadline();
        self.with_index(low, high, |ix| {
            ix.len(low, high, &chunks, deadline)?;
            ix.read(pos, buf, &chunks)
        })
    }

    /// The last counted record's timestamp: it moves with every append.
    fn log_mtime(&self) -> Option<SystemTime> {
        let ts = self.index.lock().as_ref()?.last_timestamp?;
        Some(UNIX_EPOCH + Duration::from_millis(ts.max(0) as u64))
    }

    fn offset_for_timestamp(&self, ms: i64) -> BackendResult<Option<i64>> {
        self.shared
            .fetcher
            .offset_for_time(&self.topic, self.id, ms)
    }

    fn status(&self) -> BackendResult<Status> {
        let (low, high) = self.watermarks()?;
        let meta = self.shared.admin.metadata(Some(&self.topic))?;
        let p = meta
            .iter()
            .flat_map(|t| t.partitions.iter())
            .find(|p| p.id == self.id);
        let list = |v: Option<&Vec<i32>>| {
            v.map(|v| v.iter().map(i32::to_string).collect::<Vec<_>>().join(","))
                .unwrap_or_default()
        };
        let (spans, counted) = match &*self.index.lock() {
            Some(ix) => (ix.spans(), ix.end()),
            None => (0, -1),
        };
        Ok(Status::Serving {
            log_start_offset: low,
            log_end_offset: high,
            high_watermark: high,
            detail: vec![
                ("leader", p.map_or(-1, |p| p.leader).to_string()),
                ("replicas", list(p.map(|p| &p.replicas))),
                ("isr", list(p.map(|p| &p.isr))),
                ("fetches", self.fetches.load(Ordering::Relaxed).to_string()),
                (
                    "cache_hits",
                    self.cache_hits.load(Ordering::Relaxed).to_string(),
                ),
                ("cache_bytes", self.shared.cache.bytes().to_string()),
                ("stream_counted_to", counted.to_string()),
                ("stream_spans", spans.to_string()),
            ],
        })
    }

    fn config(&self, name: &str) -> BackendResult<Option<String>> {
        let configs = self.describe()?;
        Ok(configs
            .into_iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, v)| v))
    }

    fn set_config(&self, name: &str, value: &str) -> BackendResult<()> {
        self.shared.writable()?;
        *self.configs.lock() = None;
        self.shared.admin.alter_config(&self.topic, name, value)
    }

    fn line_format(&self) -> LineFormat {
        self.lines.lock().clone()
    }

    fn set_line_format(&self, name: &str, value: &str) -> BackendResult<()> {
        self.shared.writable()?;
        self.lines.lock().set_or_refuse(name, value)
    }

    /// librdkafka's own check at produce time (`rd_kafka_msg_new0`): the
    /// record's bytes plus the largest overhead a v2 record can have.
    fn check_record_size(&self, record: &NewRecord) -> BackendResult<()> {
        let headers: usize = (record.headers.iter())
            .map(|(k, v)| k.len() + v.map_or(0, <[u8]>::len) + 10)
            .sum();
        let size = RECORD_V2_MAX_OVERHEAD
            + record.key.map_or(0, <[u8]>::len)
            + record.value.map_or(0, <[u8]>::len)
            + headers;
        let max = self.shared.max_message_bytes;
        if size > max {
            return Err(BackendError::new(
                ErrorKind::RecordTooLarge,
                format!("the record is {size} bytes, larger than message.max.bytes ({max})"),
            ));
        }
        Ok(())
    }

    fn delete_records(&self, offset: i64) -> BackendResult<i64> {
        self.shared.writable()?;
        let (low, high) = self.watermarks()?;
        if offset > high {
            return Err(BackendError::new(
                ErrorKind::OffsetOutOfRange {
                    offset,
                    log_start: low,
                    log_end: high,
                },
                format!("offset {offset} is past the high watermark {high}"),
            ));
        }
        if offset <= low {
            return Ok(low);
        }
        let start = self
            .shared
            .admin
            .delete_records(&self.topic, self.id, offset)?;
        self.known_start.fetch_max(start, Ordering::Relaxed);
        self.shared.fetcher.reset(&self.topic, self.id);
        Ok(start)
    }
}
