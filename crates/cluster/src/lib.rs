//! The tree over a Kafka cluster: `commitfs mount --bootstrap-server`.
//!
//! A backend behind the same seam as local storage ([`commitfs_backend`]),
//! so the tree's rules, errno table and tests are shared; only what a
//! cluster cannot do differs (it offers no raw segment files and no `roll`
//! or `flush`, and has an `rmdir` rule of its own). The client is librdkafka,
//! through the `rdkafka` crate. The rooms:
//! - [`config`]: the mount's options and the client properties passed through;
//! - [`error`]: client and broker codes mapped to the seam's error kinds;
//! - [`admin`]: Metadata and the admin requests (topics, partitions,
//!   DeleteRecords, configs); [`groups`]: consumer groups through the
//!   admin API (`groups/`);
//! - [`produce`]: the idempotent producer and a write's wait for its acks;
//! - [`fetch`]: consumers assigned by hand, watermarks, lookups by time;
//! - [`cache`]: fetched records, bounded by `cache.bytes`;
//! - [`stream`]: the consumer stream and its exact length, in bounded memory;
//! - [`partition`]: one partition's operations as client calls.
//!
//! Every call into the cluster is bounded by `request.timeout.ms`: the
//! tree's FUSE threads call it synchronously and must never hang.

pub mod admin;
pub mod cache;
pub mod config;
pub mod error;
pub mod fetch;
pub mod groups;
pub mod partition;
pub mod produce;
pub mod stream;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use log::info;
use parking_lot::{Mutex, RwLock};
use rdkafka::admin::AdminClient;

pub use config::ClusterOptions;
pub use partition::ClusterPartition;

use admin::Admin;
use cache::Cache;
use commitfs_backend::{Backend, BackendError, BackendResult, ErrorKind, Partition, StatFs};
use fetch::Fetcher;
use produce::Producer;

/// Partitions whose stream length is kept counted at once; past this the
/// least recently indexed one forgets its count (and counts again if read).
const MAX_INDEXED: usize = 1024;
/// A name the cluster said it does not have is not asked about again for
/// this long (shells probe names).
const NEGATIVE_TTL: Duration = Duration::from_secs(1);
/// librdkafka's default `message.max.bytes`: no record can be larger.
const DEFAULT_MESSAGE_MAX_BYTES: usize = 1_000_000;

/// Kafka's topic-level configs shown under `config/`.
pub const CONFIG_NAMES: &[&str] = &[
    "cleanup.policy",
    "compression.type",
    "delete.retention.ms",
    "file.delete.delay.ms",
    "flush.messages",
    "flush.ms",
    "index.interval.bytes",
    "local.retention.bytes",
    "local.retention.ms",
    "max.compaction.lag.ms",
    "max.message.bytes",
    "message.timestamp.type",
    "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms",
    "min.insync.replicas",
    "remote.log.copy.disable",
    "remote.log.delete.on.disable",
    "remote.storage.enable",
    "retention.bytes",
    "retention.ms",
    "segment.bytes",
    "segment.index.bytes",
    "segment.jitter.ms",
    "segment.ms",
    "unclean.leader.election.enable",
];

/// What every partition shares: the clients, the cache, the options.
pub struct Shared {
    pub(crate) opts: ClusterOptions,
    producer: Option<Producer>,
    fetcher: Fetcher,
    admin: Admin,
    cache: Cache,
    max_message_bytes: usize,
    indexed: Mutex<VecDeque<(Arc<str>, Weak<ClusterPartition>)>>,
    parts: RwLock<HashMap<String, Weak<ClusterPartition>>>,
}

impl Shared {
    /// `ReadOnly` on a read-only mount: every change is refused here, not
    /// only by the tree.
    fn writable(&self) -> BackendResult<()> {
        match self.opts.read_only {
            true => Err(BackendError::new(
                ErrorKind::ReadOnly,
                "the mount is read-only",
            )),
            false => Ok(()),
        }
    }

    /// Notes that `key` now keeps a stream index; drops the oldest past the bound.
    fn indexed(&self, key: &Arc<str>) {
        let evicted = {
            let mut q = self.indexed.lock();
            q.retain(|(k, _)| k != key);
            let me = self.parts.read().get(&**key).cloned().unwrap_or_default();
            q.push_back((key.clone(), me));
            if q.len() > MAX_INDEXED {
                q.pop_front()
            } else {
                None
            }
        };
        if let Some((_, p)) = evicted
            && let Some(p) = p.upgrade()
        {
            p.drop_index();
        }
    }
}

/// `<topic>-<partition>` split, or `None` for a name that cannot be one
/// (Kafka's rules, `commitfs_record::names`).
fn parse_name(name: &str) -> Option<(&str, i32)> {
    let (topic, p) = commitfs_record::names::parse_partition_name(name).ok()?;
    Some((topic, p as i32))
}

pub struct ClusterBackend {
    shared: Arc<Shared>,
    groups: groups::ClusterGroups,
    /// Partitions seen, by name, with the time the catalog was last
    /// refreshed; names the cluster lacks, with when it said so.
    catalog: Mutex<Catalog>,
}

#[derive(Default)]
struct Catalog {
    parts: BTreeMap<String, Arc<ClusterPartition>>,
    missing: HashMap<String, Instant>,
}

impl ClusterBackend {
    /// Connects the clients. Nothing is asked of the cluster yet: the
    /// daemon checks it is reachable with [`ClusterBackend::check`].
    pub fn new(opts: ClusterOptions) -> BackendResult<Self> {
        let timeout = opts.request_timeout;
        let consumer_config = opts.consumer_config();
        let make_consumer = move || -> BackendResult<fetch::Consumer> {
            consumer_config
                .create_with_context(fetch::Quiet)
                .map_err(|e| error::client("creating a consumer", &e))
        };
        let fetcher = Fetcher::new(make_consumer, timeout)?;
        let admin_client: AdminClient<_> = opts
            .admin_config()
            .create()
            .map_err(|e| error::client("creating the admin client", &e))?;
        let producer = if opts.read_only {
            None
        } else {
            let config = opts.producer_config();
            Some(Producer::new(
                move || {
                    config
                        .create_with_context(produce::Context)
                        .map_err(|e| error::client("creating the producer", &e))
                },
                timeout,
            )?)
        };
        let max_message_bytes = opts
            .client
            .iter()
            .find(|(k, _)| k == "message.max.bytes")
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(DEFAULT_MESSAGE_MAX_BYTES);
        let shared = Arc::new(Shared {
            cache: Cache::new(opts.cache_bytes),
            admin: Admin::new(admin_client, timeout),
            opts,
            producer,
            fetcher,
            max_message_bytes,
            indexed: Mutex::default(),
            parts: RwLock::default(),
        });
        Ok(ClusterBackend {
            groups: groups::ClusterGroups::new(shared.clone()),
            shared,
            catalog: Mutex::default(),
        })
    }

    /// Asks the cluster for its topics once: a mount whose cluster cannot
    /// be reached fails at mount time, not at the first `ls`.
    pub fn check(&self) -> BackendResult<usize> {
        Ok(self.shared.admin.metadata(None)?.len())
    }

    /// Sends or fails every produce still in flight; called at unmount.
    pub fn close(&self) {
        if let Some(p) = &self.shared.producer {
            p.close();
        }
    }

    /// Records written and not yet acknowledged or failed (what
    /// [`ClusterBackend::close`] has to settle).
    pub fn produces_in_flight(&self) -> usize {
        self.shared.producer.as_ref().map_or(0, Producer::in_flight)
    }

    pub fn options(&self) -> &ClusterOptions {
        &self.shared.opts
    }

    /// The partition object for `topic`/`id`, made once.
    fn part(&self, cat: &mut Catalog, topic: &str, id: i32) -> Arc<ClusterPartition> {
        let name = format!("{topic}-{id}");
        cat.missing.remove(&name);
        cat.parts
            .entry(name.clone())
            .or_insert_with(|| {
                let p = Arc::new(ClusterPartition::new(topic, id, self.shared.clone()));
                self.shared.parts.write().insert(name, Arc::downgrade(&p));
                p
            })
            .clone()
    }

    /// Takes a Metadata answer for `topics` (all of them when `None`).
    fn refresh(&self, topic: Option<&str>) -> BackendResult<Vec<admin::TopicMeta>> {
        let meta = self.shared.admin.metadata(topic)?;
        let mut cat = self.catalog.lock();
        let seen: std::collections::HashSet<String> = meta
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(move |p| format!("{}-{}", t.name, p.id))
            })
            .collect();
        // Partitions of topics deleted elsewhere go.
        let gone: Vec<String> = cat
            .parts
            .iter()
            .filter(|(n, p)| topic.is_none_or(|t| p.topic() == t) && !seen.contains(*n))
            .map(|(n, _)| n.clone())
            .collect();
        for n in gone {
            cat.parts.remove(&n);
            self.shared.parts.write().remove(&n);
            self.shared.cache.forget(&n);
        }
        for t in &meta {
            for p in &t.partitions {
                self.part(&mut cat, &t.name, p.id);
            }
        }
        Ok(meta)
    }

    /// The topic's partition count, or `None` if the cluster has no such topic.
    fn partition_count(&self, topic: &str) -> BackendResult<Option<usize>> {
        let meta = self.refresh(Some(topic))?;
        Ok(meta
            .iter()
            .find(|t| t.name == topic)
            .map(|t| t.partitions.len())
            .filter(|n| *n > 0))
    }

    /// Waits until Metadata shows `topic` with `count` partitions, each
    /// with a leader: a new partition is usable once this returns.
    fn wait_ready(&self, topic: &str, count: usize) -> BackendResult<()> {
        let deadline = Instant::now() + self.shared.opts.request_timeout;
        loop {
            let meta = self.refresh(Some(topic))?;
            let ready = meta.iter().find(|t| t.name == topic).is_some_and(|t| {
                t.partitions.len() >= count && t.partitions.iter().all(|p| p.leader >= 0)
            });
            if ready {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(error::timed_out(
                    format!("waiting for {topic} to have {count} partitions with leaders"),
                    self.shared.opts.request_timeout,
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn bad_name(name: &str, why: &str) -> BackendError {
    BackendError::new(
        ErrorKind::InvalidName,
        format!("invalid partition name {name:?}: {why}"),
    )
}

fn no_such(name: &str) -> BackendError {
    BackendError::new(
        ErrorKind::NotFound,
        format!("partition {name} does not exist"),
    )
}

impl Backend for ClusterBackend {
    fn read_only(&self) -> bool {
        self.shared.opts.read_only
    }

    fn groups(&self) -> Option<&dyn commitfs_backend::groups::Groups> {
        Some(&self.groups)
    }

    fn partition_names(&self) -> BackendResult<Vec<String>> {
        self.refresh(None)?;
        Ok(self.catalog.lock().parts.keys().cloned().collect())
    }

    fn partition(&self, name: &str) -> BackendResult<Arc<dyn Partition>> {
        let Some((topic, _)) = parse_name(name) else {
            return Err(no_such(name));
        };
        {
            let cat = self.catalog.lock();
            if let Some(p) = cat.parts.get(name) {
                return Ok(p.clone());
            }
            if cat
                .missing
                .get(name)
                .is_some_and(|at| at.elapsed() < NEGATIVE_TTL)
            {
                return Err(no_such(name));
            }
        }
        self.refresh(Some(topic))?;
        let mut cat = self.catalog.lock();
        if let Some(p) = cat.parts.get(name) {
            return Ok(p.clone());
        }
        cat.missing.insert(name.to_string(), Instant::now());
        Err(no_such(name))
    }

    /// CreateTopics for partition 0 of a new topic, CreatePartitions for the
    /// next partition of an existing one; the listener's no-holes rule.
    fn create_partition(&self, name: &str) -> BackendResult<()> {
        self.shared.writable()?;
        let (topic, id) = commitfs_record::names::validate_new_partition_name(name)
            .map_err(|why| bad_name(name, why))?;
        let id = id as usize;
        match self.partition_count(topic)? {
            None if id == 0 => {
                self.shared
                    .admin
                    .create_topic(topic, self.shared.opts.replication_factor)?;
            }
            None => {
                return Err(BackendError::new(
                    ErrorKind::InvalidPartitions,
                    format!(
                        "partition {name}: topic {topic} does not exist; create {topic}-0 first (partitions are 0..n-1, without holes)"
                    ),
                ));
            }
            Some(n) if id < n => {
                return Err(BackendError::new(
                    ErrorKind::Exists,
                    format!("partition {name} already exists"),
                ));
            }
            Some(n) if id == n => {
                self.shared.admin.create_partitions(topic, n + 1)?;
                self.wait_ready(topic, id + 1)?;
                // The clients know the topic with n partitions until told.
                self.shared.fetcher.learn(topic)?;
                if let Some(p) = &self.shared.producer {
                    p.learn(topic)?;
                }
                info!("Cluster: created partition {name}");
                return Ok(());
            }
            Some(n) => {
                return Err(BackendError::new(
                    ErrorKind::InvalidPartitions,
                    format!(
                        "partition {name}: topic {topic} has partitions 0..{n}; the next one is {topic}-{n} (partitions are 0..n-1, without holes)"
                    ),
                ));
            }
        }
        self.wait_ready(topic, id + 1)?;
        info!("Cluster: created partition {name}");
        Ok(())
    }

    /// Kafka cannot take one partition away from a topic: `rmdir` deletes
    /// the topic, through its only partition `T-0`.
    fn delete_partition(&self, name: &str) -> BackendResult<()> {
        self.shared.writable()?;
        let (topic, id) = parse_name(name).ok_or_else(|| no_such(name))?;
        let n = self.partition_count(topic)?.ok_or_else(|| no_such(name))?;
        if n != 1 || id != 0 {
            return Err(BackendError::new(
                ErrorKind::NotPermitted,
                format!(
                    "Kafka cannot remove a partition from a topic; rmdir deletes topic {topic} only through {topic}-0 when it is the topic's only partition (it has {n})"
                ),
            ));
        }
        self.shared.admin.delete_topic(topic)?;
        let mut cat = self.catalog.lock();
        cat.parts.remove(name);
        self.shared.parts.write().remove(name);
        self.shared.cache.forget(name);
        info!("Cluster: deleted topic {topic}");
        Ok(())
    }

    fn config_names(&self) -> &'static [&'static str] {
        CONFIG_NAMES
    }

    /// A cluster has no block counts to give: all zero, as for other
    /// network filesystems that cannot tell.
    fn statfs(&self) -> BackendResult<StatFs> {
        Ok(StatFs {
            bsize: commitfs_backend::IO_SIZE,
            frsize: commitfs_backend::IO_SIZE,
            ..StatFs::default()
        })
    }
}

impl Drop for ClusterBackend {
    fn drop(&mut self) {
        self.close();
    }
}
