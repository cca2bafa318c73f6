//! The cluster mount's options: commitfs's own (`cache.bytes`,
//! `replication.factor`, the console-producer line settings) and every other
//! `KEY=VALUE`, passed through to librdkafka as a client property
//! (`security.protocol`, `sasl.*`, `client.id`, `request.timeout.ms`, ...).
//!
//! A few client properties carry the tree's promises (`acks=all`, a
//! consumer that sees every record and reports the log end), so commitfs
//! sets them itself and refuses them as options.

use std::time::Duration;

use commitfs_backend::LineFormat;

use rdkafka::ClientConfig;

/// `cache.bytes`: fetched records kept in memory, across all partitions.
pub const DEFAULT_CACHE_BYTES: u64 = 64 << 20;
/// `cache.compacted.ms`: how long what was fetched of a compacted topic serves.
pub const DEFAULT_CACHE_COMPACTED_MS: u64 = 5_000;
/// Kafka's default `request.timeout.ms`.
pub const DEFAULT_REQUEST_TIMEOUT_MS: u64 = 30_000;

/// Client properties commitfs sets itself, and why.
const FIXED: &[(&str, &str)] = &[
    (
        "acks",
        "a write returns only once every in-sync replica has the records (acks=all)",
    ),
    (
        "request.required.acks",
        "a write returns only once every in-sync replica has the records (acks=all)",
    ),
    (
        "isolation.level",
        "the tree reads as a read_uncommitted consumer, as a local mount does",
    ),
    (
        "enable.partition.eof",
        "reads need to know where the log ends",
    ),
    (
        "auto.offset.reset",
        "a read below the log start must fail, not jump",
    ),
    ("enable.auto.commit", "the mount keeps no consumer offsets"),
    ("group.id", "the mount reads by assignment, not in a group"),
    ("bootstrap.servers", "give it with --bootstrap-server"),
    (
        "allow.auto.create.topics",
        "looking a name up must never create a topic",
    ),
];

/// Properties only librdkafka's producer knows: not given to consumers,
/// which would warn about each.
const PRODUCER_ONLY: &[&str] = &[
    "request.timeout.ms",
    "message.timeout.ms",
    "delivery.timeout.ms",
    "linger.ms",
    "queue.buffering.",
    "batch.",
    "compression.",
    "enable.idempotence",
    "enable.gapless.guarantee",
    "retries",
    "message.send.max.retries",
    "partitioner",
    "sticky.",
    "transactional.id",
    "transaction.timeout.ms",
];

/// Properties only librdkafka's consumer knows: not given to the producer
/// and the admin client.
const CONSUMER_ONLY: &[&str] = &[
    "fetch.",
    "max.partition.fetch.bytes",
    "queued.",
    "check.crcs",
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "partition.assignment.strategy",
    "max.poll.interval.ms",
    "enable.auto.offset.store",
    "auto.commit.interval.ms",
    "consume.callback.max.messages",
];

fn matches(key: &str, list: &[&str]) -> bool {
    list.iter().any(|p| {
        if p.ends_with('.') {
            key.starts_with(p)
        } else {
            key == *p
        }
    })
}

/// How a cluster mount reaches and uses its cluster.
#[derive(Clone, Debug)]
pub struct ClusterOptions {
    /// `HOST:PORT[,HOST:PORT...]`.
    pub bootstrap: String,
    /// Client properties, in the order given.
    pub client: Vec<(String, String)>,
    pub cache_bytes: u64,
    /// How long what was fetched of a partition of a compacted topic
    /// (records, and the stream's length counted from them) is served
    /// before it is fetched again: the broker's log cleaner removes records
    /// behind every client's back, and no API says when.
    pub cache_compacted: Duration,
    /// For new topics; -1 asks for the broker's `default.replication.factor`.
    pub replication_factor: i32,
    /// The bound on every call into the cluster.
    pub request_timeout: Duration,
    pub read_only: bool,
    /// The line format each partition starts with.
    pub line_format: LineFormat,
}

impl ClusterOptions {
    pub fn new(bootstrap: impl Into<String>) -> Self {
        ClusterOptions {
            bootstrap: bootstrap.into(),
            client: Vec::new(),
            cache_bytes: DEFAULT_CACHE_BYTES,
            cache_compacted: Duration::from_millis(DEFAULT_CACHE_COMPACTED_MS),
            replication_factor: -1,
            request_timeout: Duration::from_millis(DEFAULT_REQUEST_TIMEOUT_MS),
            read_only: false,
            line_format: LineFormat::default(),
        }
    }

    /// Takes one `KEY=VALUE` option: commitfs's own, or a client property.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        let invalid = |rule: &str| format!("Invalid value {value} for configuration {key}: {rule}");
        match key {
            "cache.bytes" => {
                self.cache_bytes = value
                    .parse()
                    .map_err(|_| invalid("Value must be a number of bytes"))?
            }
            "cache.compacted.ms" => {
                let ms: u64 = value
                    .parse()
                    .map_err(|_| invalid("Value must be a number of milliseconds"))?;
                self.cache_compacted = Duration::from_millis(ms);
            }
            "replication.factor" => {
                self.replication_factor = value
                    .parse()
                    .ok()
                    .filter(|r| *r == -1 || (1..=i16::MAX as i32).contains(r))
                    .ok_or_else(|| invalid("Value must be -1 or at least 1"))?
            }
            "parse.key" | "key.separator" => self.line_format.set(key, value)?,
            _ => {
                if let Some((_, why)) = FIXED.iter().find(|(k, _)| *k == key) {
                    return Err(format!("{key} cannot be set on a cluster mount: {why}"));
                }
                if key == "request.timeout.ms" {
                    let ms: u64 = value
                        .parse()
                        .ok()
                        .filter(|ms| *ms >= 1)
                        .ok_or_else(|| invalid("Value must be at least 1"))?;
                    self.request_timeout = Duration::from_millis(ms);
                }
                self.client.retain(|(k, _)| k != key);
                self.client.push((key.to_string(), value.to_string()));
            }
        }
        Ok(())
    }

    fn given(&self, key: &str) -> bool {
        self.client.iter().any(|(k, _)| k == key)
    }

    /// What every client shares: the bootstrap list, the timeouts that bound
    /// each call, and the user's properties (except the other role's).
    fn base(&self, skip: &[&str]) -> ClientConfig {
        let mut c = ClientConfig::new();
        let ms = self.request_timeout.as_millis().to_string();
        c.set("bootstrap.servers", &self.bootstrap);
        c.set("client.id", "commitfs");
        c.set("socket.timeout.ms", &ms);
        // A broker that is gone is tried again soon after it comes back.
        c.set("reconnect.backoff.max.ms", "1000");
        // Looking a name up must never create the topic.
        c.set("allow.auto.create.topics", "false");
        for (k, v) in &self.client {
            if !matches(k, skip) {
                c.set(k, v);
            }
        }
        c
    }

    /// The idempotent producer: `acks=all`, and every message settled (acked
    /// or failed) within the request timeout.
    pub fn producer_config(&self) -> ClientConfig {
        let mut c = self.base(CONSUMER_ONLY);
        let ms = self.request_timeout.as_millis().to_string();
        if !self.given("enable.idempotence") {
            c.set("enable.idempotence", "true");
        }
        if !self.given("message.timeout.ms") && !self.given("delivery.timeout.ms") {
            c.set("message.timeout.ms", &ms);
        }
        if !self.given("request.timeout.ms") {
            c.set("request.timeout.ms", &ms);
        }
        // One write(2) can carry up to a FUSE request's worth of lines.
        if !self.given("queue.buffering.max.messages") {
            c.set("queue.buffering.max.messages", "2000000");
        }
        if !self.given("batch.num.messages") {
            c.set("batch.num.messages", "1000000");
        }
        c.set("acks", "all");
        c
    }

    /// A reading consumer: assigned by hand, every record (aborted ones
    /// too, as locally), an event at the log end, an error below the start.
    /// Its prefetch is kept small: memory stays bounded whatever is read.
    pub fn consumer_config(&self) -> ClientConfig {
        let mut c = self.base(PRODUCER_ONLY);
        // The prefetch is bounded by bytes only (4 MiB): a count of 1000
        // is reached by one fetch of 100-byte records, and librdkafka then
        // postpones the next fetch by `fetch.queue.backoff.ms` (1 s by
        // default) even after the queue is drained, which made every
        // further MiB of a sequential read cost a second.
        let defaults = [
            ("queued.max.messages.kbytes", "4096"),
            ("queued.min.messages", "10000000"),
            ("fetch.queue.backoff.ms", "10"),
            ("fetch.max.bytes", "4194304"),
            ("max.partition.fetch.bytes", "1048576"),
            ("fetch.wait.max.ms", "100"),
        ];
        for (k, v) in defaults {
            if !self.given(k) {
                c.set(k, v);
            }
        }
        c.set("group.id", "commitfs");
        c.set("enable.auto.commit", "false");
        c.set("enable.auto.offset.store", "false");
        c.set("enable.partition.eof", "true");
        c.set("auto.offset.reset", "error");
        c.set("isolation.level", "read_uncommitted");
        c
    }

    /// The admin client (a producer-type handle in librdkafka).
    pub fn admin_config(&self) -> ClientConfig {
        self.base(CONSUMER_ONLY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_split_between_commitfs_and_the_client() {
        let mut o = ClusterOptions::new("h:1");
        o.set("cache.bytes", "1024").unwrap();
        o.set("replication.factor", "3").unwrap();
        o.set("request.timeout.ms", "2500").unwrap();
        o.set("security.protocol", "SASL_PLAINTEXT").unwrap();
        o.set("fetch.wait.max.ms", "50").unwrap();
        assert_eq!(o.cache_bytes, 1024);
        assert_eq!(o.replication_factor, 3);
        assert_eq!(o.request_timeout, Duration::from_millis(2500));
        let p = o.producer_config();
        assert_eq!(p.get("acks"), Some("all"));
        assert_eq!(p.get("enable.idempotence"), Some("true"));
        assert_eq!(p.get("message.timeout.ms"), Some("2500"));
        assert_eq!(p.get("security.protocol"), Some("SASL_PLAINTEXT"));
        assert_eq!(p.get("fetch.wait.max.ms"), None);
        let c = o.consumer_config();
        assert_eq!(c.get("request.timeout.ms"), None);
        assert_eq!(c.get("fetch.wait.max.ms"), Some("50"));
        assert_eq!(c.get("socket.timeout.ms"), Some("2500"));
        assert!(o.set("acks", "1").unwrap_err().contains("acks=all"));
        assert!(o.set("replication.factor", "0").is_err());
        assert!(o.set("request.timeout.ms", "0").is_err());
        assert_eq!(
            o.cache_compacted,
            Duration::from_millis(DEFAULT_CACHE_COMPACTED_MS)
        );
        o.set("cache.compacted.ms", "250").unwrap();
        assert_eq!(o.cache_compacted, Duration::from_millis(250));
        assert!(o.set("cache.compacted.ms", "-1").is_err());
        assert!(
            o.producer_config().get("cache.compacted.ms").is_none(),
            "commitfs's own, not a client property"
        );
    }
}
