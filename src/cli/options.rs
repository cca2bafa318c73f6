//! The `-o` options a data directory's daemon takes, whether it mounts the
//! directory (`commitfs mount`) or only serves it over Kafka (`commitfs
//! serve`): topic configs as defaults, the tree's line format, retention's
//! interval, the listener's settings, and `ro`/`rw`. Parsed once here.

use std::time::Duration;

use commitfs::backend::LineFormat;
use commitfs::kafka::ListenerConfig;
use commitfs::kafka::config::{AUTHORIZER_CONFIG_NAMES, BROKER_CONFIG_NAMES, is_security_name};
use commitfs::storage::cleaner::{CLEANER_CONFIG_NAMES, CleanerConfig, TOPIC_SYNONYMS};
use commitfs::storage::remote_log_config::{REMOTE_LOG_CONFIG_NAMES, RemoteLogManagerConfig};
use commitfs::storage::{CONFIG_NAMES, LogConfig};

use super::logging::LogSettings;

/// Kafka's default `log.retention.check.interval.ms`.
const DEFAULT_RETENTION_CHECK_MS: u64 = 300_000;

/// Settings whose values are comma-separated lists: inside an `-o`, the
/// items after `NAME=first` are the setting's own until one that is
/// `KEY=VALUE` or a flag word (`ro`, `allow_other`), so
/// `-o listeners=PLAINTEXT://a:1,SSL://a:2,ro` is two options.
/// (`cleanup.policy` is not here: its items are flag-like words; it takes
/// `;` between them.)
const LIST_SETTINGS: &[&str] = &[
    "listeners",
    "advertised.listeners",
    "listener.security.protocol.map",
    "max.connections.per.ip.overrides",
    "ssl.enabled.protocols",
    "ssl.cipher.suites",
    "sasl.enabled.mechanisms",
];

/// Whether a comma-separated item goes on the list setting before it: not
/// an option of its own (`KEY=VALUE`, or a flag word like `ro`).
fn continues_list(item: &str) -> bool {
    let t = item.trim();
    let flag_word = !t.is_empty() && t.chars().all(|c| c.is_ascii_lowercase() || c == '_');
    !t.contains('=') && !flag_word
}

/// One `-o` split into options at commas, a list setting keeping its items.
fn split_option(s: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let mut at = 0;
    for item in s.split(',') {
        items.push((at, item));
        at += item.len() + 1;
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < items.len() {
        let (start, item) = items[i];
        let mut end = start + item.len();
        i += 1;
        if is_list_setting(item) {
            while i < items.len() && continues_list(items[i].1) {
                end = items[i].0 + items[i].1.len();
                i += 1;
            }
        }
        out.push(&s[start..end]);
    }
    out
}

/// Whether an option is a list setting (listener-prefixed or not).
fn is_list_setting(raw: &str) -> bool {
    let Some((name, _)) = raw.trim().split_once('=') else {
        return false;
    };
    let base = match name.strip_prefix("listener.name.") {
        Some(rest) => rest.split_once('.').map_or(rest, |(_, b)| b),
        None => name,
    };
    LIST_SETTINGS.contains(&base)
}

/// Each `-o` token: split at commas, a list setting keeping its items
/// (see [`LIST_SETTINGS`]).
pub fn tokens(raw: &[String]) -> impl Iterator<Item = &str> {
    raw.iter()
        .flat_map(|s| split_option(s))
        .map(str::trim)
        .filter(|t| !t.is_empty())
}

pub struct DaemonOptions {
    /// Topic configs every partition starts from.
    pub defaults: LogConfig,
    /// How lines written to `log` become records, unless a partition says.
    pub line_format: LineFormat,
    pub read_only: bool,
    pub retention_check: Duration,
    pub kafka: ListenerConfig,
    /// The daemon's own log: its size, its rotation.
    pub log: LogSettings,
    /// `max.broker.partitions`: the partitions the data directory may hold;
    /// `None`: as many as the daemon's descriptors allow.
    pub max_partitions: Option<usize>,
    /// The log cleaner's settings (`log.cleaner.*`).
    pub cleaner: CleanerConfig,
    /// Tiered storage's settings (`remote.log.*`): validated, not used.
    pub remote_log: RemoteLogManagerConfig,
}

impl Default for DaemonOptions {
    fn default() -> Self {
        DaemonOptions {
            defaults: LogConfig::default(),
            line_format: LineFormat::default(),
            read_only: false,
            retention_check: Duration::from_millis(DEFAULT_RETENTION_CHECK_MS),
            kafka: ListenerConfig::default(),
            log: LogSettings::default(),
            max_partitions: None,
            cleaner: CleanerConfig::default(),
            remote_log: RemoteLogManagerConfig::default(),
        }
    }
}

impl DaemonOptions {
    /// What no single option shows, once all are taken (Kafka validates the
    /// whole config): the listener's, the log cleaner's (its dedupe buffer
    /// per thread), tiered storage's (not available: refused when turned
    /// on), the topic defaults' (the compaction lags, remote storage).
    pub fn check(&self) -> Result<(), String> {
        self.kafka.check()?;
        self.cleaner.validate().map_err(|e| e.to_string())?;
        self.remote_log.validate().map_err(|e| e.to_string())?;
        self.defaults.validate().map_err(|e| e.to_string())
    }

    /// Takes `tok` if it is a daemon option: `Ok(false)` if it is not one,
    /// an error for a bad value (in Kafka's words).
    pub fn take(&mut self, tok: &str) -> Result<bool, String> {
        match tok.split_once('=') {
            None if tok == "ro" => self.read_only = true,
            None if tok == "rw" => self.read_only = false,
            Some(("log.retention.check.interval.ms", v)) => {
                let ms: u64 = v.parse().ok().filter(|ms| *ms >= 1).ok_or_else(|| {
                    format!(
                        "Invalid value {v} for configuration log.retention.check.interval.ms: \
                         Value must be at least 1"
                    )
                })?;
                self.retention_check = Duration::from_millis(ms);
            }
            Some(("max.broker.partitions", v)) => self.max_partitions = Some(max_partitions(v)?),
            Some((k, v)) if LineFormat::is_setting(k) => self.line_format.set(k, v)?,
            // `-o` splits at commas, so a list's items are given with `;`
            // there (`cleanup.policy=compact;delete`).
            Some((k @ "cleanup.policy", v)) => self
                .defaults
                .set(k, &v.replace(';', ","))
                .map_err(|e| e.to_string())?,
            Some((k, v)) if CONFIG_NAMES.contains(&k) => {
                self.defaults.set(k, v).map_err(|e| e.to_string())?
            }
            Some((k, v)) if CLEANER_CONFIG_NAMES.contains(&k) => {
                self.cleaner.set(k, v).map_err(|e| e.to_string())?;
            }
            Some((k, v)) if REMOTE_LOG_CONFIG_NAMES.contains(&k) => {
                self.remote_log.set(k, v).map_err(|e| e.to_string())?;
            }
            // A broker name of a topic config sets the topic default, as
            // Kafka's synonyms do (`log.cleanup.policy` for `cleanup.policy`).
            Some((k, v)) if let Some((_, topic)) = TOPIC_SYNONYMS.iter().find(|(b, _)| *b == k) => {
                self.defaults
                    .set(topic, &v.replace(';', ","))
                    .map_err(|e| e.to_string())?
            }
            // Lists too: `listeners=PLAINTEXT://127.0.0.1:9092;INTERNAL://127.0.0.1:9093`.
            Some((
                k @ ("listeners" | "advertised.listeners" | "listener.security.protocol.map"),
                v,
            )) => {
                self.kafka.set(k, &v.replace(';', ","))?;
            }
            // Kafka's own separator is `;`, and a principal may hold commas
            // (`User:CN=a,O=b`), so nothing is replaced.
            Some((k, v)) if AUTHORIZER_CONFIG_NAMES.contains(&k) => {
                self.kafka.set(k, v)?;
            }
            Some((k, v)) if BROKER_CONFIG_NAMES.contains(&k) || is_security_name(k) => {
                self.kafka.set(k, &v.replace(';', ","))?;
            }
            Some((k, v)) => return self.log.set(k, v),
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// `max.broker.partitions`, an INT of at least 1 with Kafka's messages
/// (the name is KIP-578's, which Kafka never added).
fn max_partitions(v: &str) -> Result<usize, String> {
    let n: i32 = v.trim().parse().map_err(|_| {
        format!(
            "Invalid value {v} for configuration max.broker.partitions: Expected value to be a \
             32-bit integer, but it was a java.lang.String"
        )
    })?;
    if n < 1 {
        return Err(format!(
            "Invalid value {v} for configuration max.broker.partitions: Value must be at least 1"
        ));
    }
    Ok(n as usize)
}

/// Options that belong to mount(8), fstab or systemd, not to commitfs: `-o`
/// accepts and ignores them, so an fstab line or a systemd unit can carry them.
pub fn is_mount8_option(opt: &str) -> bool {
    const FLAGS: &[&str] = &[
        "defaults", "auto", "noauto", "nofail", "_netdev", "user", "nouser", "users", "nousers",
        "owner", "noowner", "group", "nogroup",
    ];
    const PREFIXES: &[&str] = &["x-", "X-", "comment=", "user=", "helper=", "uhelper="];
    FLAGS.contains(&opt) || PREFIXES.iter().any(|p| opt.starts_with(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_o_carries_one_list_setting_whole() {
        let raw = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let got: Vec<String> = tokens(&raw(&[
            "ssl.enabled.protocols=TLSv1.2,TLSv1.3",
            "listener.name.secure.ssl.cipher.suites=A, B",
            "segment.bytes=1048576,ro",
            "listeners=SSL://a:1,PLAINTEXT://a:2",
            "listeners=PLAINTEXT://127.0.0.1:0,daemon.log.max.bytes=16384,ro",
            "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,allow_other",
            "cleanup.policy=compact;delete,retention.ms=1",
        ]))
        .map(str::to_string)
        .collect();
        assert_eq!(
            got,
            [
                "ssl.enabled.protocols=TLSv1.2,TLSv1.3",
                "listener.name.secure.ssl.cipher.suites=A, B",
                "segment.bytes=1048576",
                "ro",
                "listeners=SSL://a:1,PLAINTEXT://a:2",
                "listeners=PLAINTEXT://127.0.0.1:0",
                "daemon.log.max.bytes=16384",
                "ro",
                "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256",
                "allow_other",
                "cleanup.policy=compact;delete",
                "retention.ms=1",
            ]
        );
        let mut o = DaemonOptions::default();
        assert!(
            o.take("listener.name.secure.ssl.keystore.location=/k.pem")
                .unwrap()
        );
        assert_eq!(
            o.kafka
                .security
                .get("listener.name.secure.ssl.keystore.location")
                .map(String::as_str),
            Some("/k.pem")
        );
        assert_eq!(
            o.take("ssl.client.auth=maybe").unwrap_err(),
            "Invalid value maybe for configuration ssl.client.auth: String must be one of: \
             required, requested, none"
        );
    }

    #[test]
    fn daemon_options_in_kafka_words() {
        let mut o = DaemonOptions::default();
        for tok in tokens(&["segment.bytes=1048576, ro".to_string()]) {
            assert!(o.take(tok).unwrap(), "{tok}");
        }
        assert_eq!(o.defaults.segment_bytes, 1_048_576);
        assert!(o.read_only);
        assert!(o.take("parse.key=true").unwrap());
        assert!(o.line_format.parse_key);
        assert!(o.take("log.retention.check.interval.ms=1000").unwrap());
        assert_eq!(o.retention_check, Duration::from_millis(1000));
        assert_eq!(
            o.take("segment.bytes=16384").unwrap_err(),
            "Invalid value 16384 for configuration segment.bytes: Value must be at least 1048576"
        );
        assert!(!o.take("bogus=1").unwrap());
        assert!(o.take("max.broker.partitions=3").unwrap());
        assert_eq!(o.max_partitions, Some(3));
        assert_eq!(
            o.take("max.broker.partitions=0").unwrap_err(),
            "Invalid value 0 for configuration max.broker.partitions: Value must be at least 1"
        );
        assert!(o.take("max.broker.partitions=2147483648").is_err());
        // The log cleaner's settings, the broker synonyms of the topic
        // configs it reads, and a list's items given with `;`.
        assert!(o.take("log.cleaner.backoff.ms=100").unwrap());
        assert_eq!(o.cleaner.backoff_ms, 100);
        assert!(o.take("log.cleanup.policy=compact;delete").unwrap());
        assert_eq!(o.defaults.cleanup_policy.text(), "compact,delete");
        assert!(o.take("log.cleaner.min.cleanable.ratio=0.1").unwrap());
        assert_eq!(o.defaults.get("min.cleanable.dirty.ratio").unwrap(), "0.1");
        o.check().unwrap();
        assert!(
            o.take("log.cleaner.threads=200").unwrap(),
            "judged with the rest"
        );
        assert_eq!(
            o.check().unwrap_err(),
            "log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner thread."
        );
        assert!(!o.take("allow_other").unwrap());
    }

    /// Tiered storage's settings and topic defaults are taken with Kafka's
    /// validators; turning the remote storage system on is refused.
    #[test]
    fn tiered_storage_options() {
        let mut o = DaemonOptions::default();
        assert!(o.take("remote.log.manager.task.interval.ms=1000").unwrap());
        assert_eq!(o.remote_log.task_interval_ms, 1000);
        assert!(o.take("remote.log.reader.threads=2").unwrap());
        assert_eq!(
            o.take("remote.log.manager.copy.max.bytes.per.second=0")
                .unwrap_err(),
            "Invalid value 0 for configuration remote.log.manager.copy.max.bytes.per.second: \
             Value must be at least 1"
        );
        assert!(o.take("log.local.retention.ms=1000").unwrap());
        assert_eq!(o.defaults.local_retention_ms, 1000);
        assert!(o.take("log.local.retention.bytes=-3").is_err());
        assert!(o.take("remote.log.storage.system.enable=false").unwrap());
        o.check().unwrap();
        assert!(o.take("remote.log.storage.system.enable=true").unwrap());
        assert!(
            o.check()
                .unwrap_err()
                .contains("tiered storage (KIP-405) is not available in this version")
        );
        let mut o = DaemonOptions::default();
        assert!(o.take("remote.storage.enable=true").unwrap());
        assert_eq!(
            o.check().unwrap_err(),
            "Tiered Storage functionality is disabled in the broker. Topic cannot be configured \
             with remote log storage."
        );
    }
}
