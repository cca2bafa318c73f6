//! DescribeConfigs, IncrementalAlterConfigs and AlterConfigs: a topic's
//! configs are its partitions' `config/<name>` files, changed through the
//! same storage call (`PartitionLog::set_config`, `reset_config`) on every
//! partition of the topic. A topic is described by its partition 0 (the
//! tree lets partitions of one topic differ; Kafka does not), with Kafka's
//! synonyms when asked: the topic's override, the broker's config of the
//! same meaning given with `-o` (`log.segment.bytes` for `segment.bytes`),
//! and Kafka's defaults. The broker resource shows the listener's settings,
//! read-only: they are set with `-o` when starting. AlterConfigs (the API
//! before IncrementalAlterConfigs, which kafkajs and aiokafka still use)
//! replaces a topic's whole set of overrides, as Kafka does: a config it
//! does not name goes back to its default.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::alter_configs_request::{self as legacy, AlterConfigsRequest};
use kafka_protocol::messages::alter_configs_response::{
    self as legacy_response, AlterConfigsResponse,
};
use kafka_protocol::messages::describe_configs_request::{
    DescribeConfigsRequest, DescribeConfigsResource,
};
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResponse, DescribeConfigsResult,
    DescribeConfigsSynonym,
};
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, IncrementalAlterConfigsRequest,
};
use kafka_protocol::messages::incremental_alter_configs_response::{
    AlterConfigsResourceResponse, IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;
use log::{info, warn};

use super::Refused;
use crate::broker::Broker;
use crate::config::ConfigKind;
use crate::error::{Family, code_for, message_for};
use commitfs_storage::{CONFIG_NAMES, ConfigError, LogConfig, StorageError};

const TOPIC: i8 = 2;
const BROKER: i8 = 4;
// Kafka's ConfigSource and ConfigType values.
const DYNAMIC_TOPIC_CONFIG: i8 = 1;
const STATIC_BROKER_CONFIG: i8 = 4;
const DEFAULT_CONFIG: i8 = 5;
const BOOLEAN: i8 = 1;
const STRING: i8 = 2;
const INT: i8 = 3;
const LONG: i8 = 5;
const DOUBLE: i8 = 6;
const LIST: i8 = 7;

fn config_type(name: &str) -> i8 {
    match name {
        "segment.bytes" | "segment.index.bytes" | "index.interval.bytes" | "max.message.bytes" => {
            INT
        }
        "compression.type" | "message.timestamp.type" => STRING,
        "cleanup.policy" => LIST,
        "min.cleanable.dirty.ratio" => DOUBLE,
        "remote.storage.enable" | "remote.log.copy.disable" | "remote.log.delete.on.disable" => {
            BOOLEAN
        }
        _ => LONG,
    }
}

fn entry(
    name: &str,
    value: String,
    source: i8,
    ty: i8,
    read_only: bool,
) -> DescribeConfigsResourceResult {
    DescribeConfigsResourceResult::default()
        .with_name(StrBytes::from_string(name.to_string()))
        .with_value(Some(StrBytes::from_string(value)))
        .with_config_source(source)
        .with_config_type(ty)
        .with_read_only(read_only)
        .with_documentation(None)
}

/// `refused`: the authorization check of one resource (type, name).
pub fn describe(
    b: &Broker,
    version: i16,
    req: DescribeConfigsRequest,
    refused: &dyn Fn(i8, &str) -> Option<ResponseError>,
) -> DescribeConfigsResponse {
    let results = req
        .resources
        .iter()
        .map(|r| {
            let result = DescribeConfigsResult::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone());
            let wanted = |name: &str| {
                r.configuration_keys
                    .as_ref()
                    .is_none_or(|keys| keys.iter().any(|k| k.as_str() == name))
            };
            let synonyms = req.include_synonyms;
            if let Some(code) = refused(r.resource_type, r.resource_name.as_str()) {
                return result.with_error_code(code.code());
            }
            let described = match r.resource_type {
                TOPIC => describe_topic(b, r, synonyms),
                BROKER => Ok(describe_broker(b, synonyms)),
                t => Err((
                    ResponseError::InvalidRequest,
                    format!("resource type {t} is not served (topics and the broker are)"),
                )),
            };
            match described {
                Ok(entries) => {
                    let mut entries: Vec<_> = entries
                        .into_iter()
                        .filter(|e| wanted(e.name.as_str()))
                        .collect();
                    if version < 3 {
                        for e in &mut entries {
                            e.config_type = 0;
                        }
                    }
                    result.with_configs(entries)
                }
                Err((code, msg)) => {
                    warn!(
                        "Kafka: DescribeConfigs of {} refused: {msg}",
                        r.resource_name.as_str()
                    );
                    result
                        .with_error_code(code.code())
                        .with_error_message(Some(StrBytes::from_string(msg)))
                }
            }
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

/// Each topic config's broker configs of the same meaning, in Kafka's
/// order (`ServerTopicConfigSynonyms`), with Kafka's defaults (`None`: null,
/// a config that has none). The first is the one a mount-wide default set
/// with `-o` stands for.
const BROKER_SYNONYMS: &[(&str, Synonyms)] = &[
    (
        "segment.bytes",
        &[("log.segment.bytes", Some("1073741824"))],
    ),
    (
        "segment.ms",
        &[("log.roll.ms", None), ("log.roll.hours", Some("168"))],
    ),
    (
        "segment.jitter.ms",
        &[
            ("log.roll.jitter.ms", None),
            ("log.roll.jitter.hours", Some("0")),
        ],
    ),
    (
        "segment.index.bytes",
        &[("log.index.size.max.bytes", Some("10485760"))],
    ),
    (
        "index.interval.bytes",
        &[("log.index.interval.bytes", Some("4096"))],
    ),
    (
        "retention.ms",
        &[
            ("log.retention.ms", None),
            ("log.retention.minutes", None),
            ("log.retention.hours", Some("168")),
        ],
    ),
    ("retention.bytes", &[("log.retention.bytes", Some("-1"))]),
    (
        "flush.messages",
        &[("log.flush.interval.messages", Some("9223372036854775807"))],
    ),
    (
        "flush.ms",
        &[
            ("log.flush.interval.ms", None),
            (
                "log.flush.scheduler.interval.ms",
                Some("9223372036854775807"),
            ),
        ],
    ),
    (
        "max.message.bytes",
        &[("message.max.bytes", Some("1048588"))],
    ),
    (
        "file.delete.delay.ms",
        &[("log.segment.delete.delay.ms", Some("60000"))],
    ),
    (
        "compression.type",
        &[("compression.type", Some("producer"))],
    ),
    (
        "message.timestamp.type",
        &[("log.message.timestamp.type", Some("CreateTime"))],
    ),
    ("cleanup.policy", &[("log.cleanup.policy", Some("delete"))]),
    (
        "delete.retention.ms",
        &[("log.cleaner.delete.retention.ms", Some("86400000"))],
    ),
    (
        "min.compaction.lag.ms",
        &[("log.cleaner.min.compaction.lag.ms", Some("0"))],
    ),
    (
        "max.compaction.lag.ms",
        &[(
            "log.cleaner.max.compaction.lag.ms",
            Some("9223372036854775807"),
        )],
    ),
    (
        "min.cleanable.dirty.ratio",
        &[("log.cleaner.min.cleanable.ratio", Some("0.5"))],
    ),
    (
        "local.retention.ms",
        &[("log.local.retention.ms", Some("-2"))],
    ),
    (
        "local.retention.bytes",
        &[("log.local.retention.bytes", Some("-2"))],
    ),
];

/// Broker config names, each with its default (`None`: null).
type Synonyms = &'static [(&'static str, Option<&'static str>)];

fn synonym(name: &str, value: Option<&str>, source: i8) -> DescribeConfigsSynonym {
    DescribeConfigsSynonym::default()
        .with_name(StrBytes::from_string(name.to_string()))
        .with_value(value.map(|v| StrBytes::from_string(v.to_string())))
        .with_source(source)
}

/// A topic config's synonyms, in force first, as Kafka's
/// `ConfigHelper.createTopicConfigEntry` lists them: the topic's override,
/// the mount-wide default given with `-o` (a static broker config), then
/// Kafka's defaults of its broker configs.
fn topic_synonyms(
    name: &str,
    topic: Option<&String>,
    mount: Option<String>,
) -> Vec<DescribeConfigsSynonym> {
    let broker: Synonyms = BROKER_SYNONYMS
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(&[], |(_, s)| s);
    let first = broker.first().map_or(name, |(n, _)| n);
    let mut out: Vec<DescribeConfigsSynonym> = topic
        .map(|v| synonym(name, Some(v), DYNAMIC_TOPIC_CONFIG))
        .into_iter()
        .collect();
    out.extend(mount.map(|v| synonym(first, Some(&v), STATIC_BROKER_CONFIG)));
    out.extend(broker.iter().map(|(n, d)| synonym(n, *d, DEFAULT_CONFIG)));
    out
}

/// The entry, its source the first synonym's (Kafka's rule), with the
/// synonyms listed when asked for.
fn with_synonyms(
    e: DescribeConfigsResourceResult,
    all: Vec<DescribeConfigsSynonym>,
    include: bool,
) -> DescribeConfigsResourceResult {
    let source = all.first().map_or(DEFAULT_CONFIG, |s| s.source);
    e.with_config_source(source)
        .with_synonyms(if include { all } else { Vec::new() })
}

fn describe_topic(
    b: &Broker,
    r: &DescribeConfigsResource,
    synonyms: bool,
) -> Result<Vec<DescribeConfigsResourceResult>, Refused> {
    let name = r.resource_name.as_str();
    let log = b
        .mgr
        .topic(name)
        .and_then(|t| t.partitions.into_iter().flatten().next())
        .ok_or_else(|| {
            (
                ResponseError::UnknownTopicOrPartition,
                format!("no topic {name}"),
            )
        })?;
    let config = log.config();
    let overrides = log.overrides();
    let kafka_defaults = LogConfig::default();
    Ok(CONFIG_NAMES
        .iter()
        .map(|n| {
            let value = config.get(n).unwrap_or_default();
            let mount = b
                .mgr
                .defaults()
                .get(n)
                .filter(|v| Some(v) != kafka_defaults.get(n).as_ref());
            let all = topic_synonyms(n, overrides.get(*n), mount);
            let e = entry(n, value, DEFAULT_CONFIG, config_type(n), false);
            with_synonyms(e, all, synonyms)
        })
        .collect())
}

/// The listener's settings (read-only: they are given with `-o` at
/// start), each from the static config when given, else its default.
fn describe_broker(b: &Broker, synonyms: bool) -> Vec<DescribeConfigsResourceResult> {
    b.config
        .described()
        .into_iter()
        .map(|s| {
            // What Metadata advertises: the listener's own port when it bound 0.
            let value = match s.name {
                "advertised.listeners" => Some(
                    b.advertised
                        .iter()
                        .map(|l| l.to_string())
                        .collect::<Vec<_>>()
                        .join(","),
                ),
                _ => s.value.clone(),
            };
            let mut all = Vec::new();
            if s.given {
                all.push(synonym(s.name, s.value.as_deref(), STATIC_BROKER_CONFIG));
            }
            all.push(synonym(s.name, s.default.as_deref(), DEFAULT_CONFIG));
            let ty = match s.kind {
                ConfigKind::Boolean => BOOLEAN,
                ConfigKind::String => STRING,
                ConfigKind::Int => INT,
                ConfigKind::Long => LONG,
            };
            let e = entry(s.name, String::new(), DEFAULT_CONFIG, ty, true)
                .with_value(value.map(StrBytes::from_string));
            with_synonyms(e, all, synonyms)
        })
        .chain(cleaner_settings(b))
        .collect()
}

/// The log cleaner's settings (`log.cleaner.*`), as the broker has them.
fn cleaner_settings(b: &Broker) -> Vec<DescribeConfigsResourceResult> {
    use commitfs_storage::cleaner::CLEANER_CONFIG_NAMES;
    let c = b.mgr.cleaner_config();
    CLEANER_CONFIG_NAMES
        .iter()
        .map(|n| {
            let ty = match *n {
                "log.cleaner.enable" => BOOLEAN,
                "log.cleaner.threads" | "log.cleaner.io.buffer.size" => INT,
                "log.cleaner.io.buffer.load.factor" | "log.cleaner.io.max.bytes.per.second" => {
                    DOUBLE
                }
                _ => LONG,
            };
            entry(
                n,
                c.get(n).unwrap_or_default(),
                STATIC_BROKER_CONFIG,
                ty,
                true,
            )
        })
        .collect()
}

pub fn alter(
    b: &Broker,
    req: IncrementalAlterConfigsRequest,
    refused: &dyn Fn(i8, &str) -> Option<ResponseError>,
) -> IncrementalAlterConfigsResponse {
    let responses = req
        .resources
        .iter()
        .map(|r| {
            let resp = AlterConfigsResourceResponse::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone());
            if let Some(code) = refused(r.resource_type, r.resource_name.as_str()) {
                return resp.with_error_code(code.code());
            }
            let done = match r.resource_type {
                TOPIC => alter_topic(b, r, req.validate_only),
                BROKER => Err((
                    ResponseError::InvalidRequest,
                    "broker configs are set with -o when the daemon starts".to_string(),
                )),
                t => Err((
                    ResponseError::InvalidRequest,
                    format!("resource type {t} is not served"),
                )),
            };
            let (code, msg) = answer("IncrementalAlterConfigs", &r.resource_name, done);
            resp.with_error_code(code).with_error_message(msg)
        })
        .collect();
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

/// A resource's error code and message; a refusal is logged.
fn answer(api: &str, resource: &StrBytes, done: Result<(), Refused>) -> (i16, Option<StrBytes>) {
    let Err((code, msg)) = done else {
        return (0, None);
    };
    warn!(
        "Kafka: {api} of {} refused with {code:?}: {msg}",
        resource.as_str()
    );
    (code.code(), Some(StrBytes::from_string(msg)))
}

/// One change: `Some(value)` sets, `None` removes the override.
type ConfigChange<'a> = (&'a str, Option<&'a str>);

/// Kafka's APPEND (add the items not there yet) and SUBTRACT (remove
/// them) on a LIST config's current value.
fn list_change(current: &str, given: &str, append: bool) -> String {
    let split = |s: &str| -> Vec<String> {
        s.split(',')
            .map(|i| i.trim().to_string())
            .filter(|i| !i.is_empty())
            .collect()
    };
    let mut items = split(current);
    for item in split(given) {
        if append && !items.contains(&item) {
            items.push(item);
        } else if !append {
            items.retain(|i| *i != item);
        }
    }
    items.join(",")
}

fn alter_topic(b: &Broker, r: &AlterConfigsResource, validate_only: bool) -> Result<(), Refused> {
    let name = r.resource_name.as_str();
    if let Some((code, msg)) = crate::handlers::internal_topics::alter_configs(name) {
        return Err((code, msg.unwrap_or_default()));
    }
    let topic = b.mgr.topic(name).ok_or_else(|| {
        (
            ResponseError::UnknownTopicOrPartition,
            format!("no topic {name}"),
        )
    })?;
    let invalid = |e: ConfigError| (ResponseError::InvalidConfig, e.to_string());
    // Judged against partition 0's config, as the topic is described.
    let current = topic.partitions.iter().flatten().next().map(|l| l.config());
    let mut check = current
        .as_deref()
        .cloned()
        .unwrap_or_else(|| b.mgr.defaults().clone());
    let mut changes: Vec<(String, Option<String>)> = Vec::new();
    for c in &r.configs {
        let key = c.name.as_str();
        let given = c.value.as_deref().unwrap_or_default();
        let value = match c.config_operation {
            0 => Some(given.to_string()),
            1 => {
                if check.get(key).is_none() {
                    return Err(invalid(ConfigError::UnknownName(key.to_string())));
                }
                None
            }
            // APPEND and SUBTRACT, for the one LIST config here.
            2 | 3 if key == "cleanup.policy" => Some(list_change(
                &check.get(key).unwrap_or_default(),
                given,
                c.config_operation == 2,
            )),
            op => {
                return Err((
                    ResponseError::InvalidConfig,
                    format!(
                        "operation {op} on {key}: APPEND and SUBTRACT apply to list configs only (cleanup.policy)"
                    ),
                ));
            }
        };
        match &value {
            Some(v) => check.set(key, v).map_err(invalid)?,
            None => {
                let default = b.mgr.defaults().get(key).unwrap_or_default();
                check.set(key, &default).map_err(invalid)?
            }
        }
        changes.push((key.to_string(), value));
    }
    check.validate().map_err(invalid)?;
    if validate_only {
        return Ok(());
    }
    let storage = |e: StorageError| {
        let code = code_for(
            Family::Admin,
            &format!("IncrementalAlterConfigs of {name}"),
            &e,
        );
        (code, message_for(&e))
    };
    let changes: Vec<(&str, Option<&str>)> = changes
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_deref()))
        .collect();
    for log in topic.partitions.iter().flatten() {
        log.alter_configs(&changes).map_err(storage)?;
    }
    info!("Kafka: altered {} configs of topic {name}", changes.len());
    Ok(())
}

/// AlterConfigs: each resource's new set of configs replaces its old one,
/// with Kafka's refusals (`ConfigAdminManager.preprocess` on the broker,
/// then the controller's `legacyAlterConfigs` for topics).
pub fn replace(
    b: &Broker,
    req: AlterConfigsRequest,
    refused: &dyn Fn(i8, &str) -> Option<ResponseError>,
) -> AlterConfigsResponse {
    let key = |r: &legacy::AlterConfigsResource| (r.resource_type, r.resource_name.clone());
    let responses = req
        .resources
        .iter()
        .map(|r| {
            let twice = req.resources.iter().filter(|o| key(o) == key(r)).count() > 1;
            let (code, msg) = match refused(r.resource_type, r.resource_name.as_str()) {
                Some(code) => (code.code(), None),
                None => {
                    let done = match twice {
                        true => Err((
                            ResponseError::InvalidRequest,
                            "Each resource must appear at most once.".to_string(),
                        )),
                        false => replace_resource(b, r, req.validate_only),
                    };
                    answer("AlterConfigs", &r.resource_name, done)
                }
            };
            legacy_response::AlterConfigsResourceResponse::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone())
                .with_error_code(code)
                .with_error_message(msg)
        })
        .collect();
    AlterConfigsResponse::default().with_responses(responses)
}

fn replace_resource(
    b: &Broker,
    r: &legacy::AlterConfigsResource,
    validate_only: bool,
) -> Result<(), Refused> {
    let invalid_request = |msg: String| (ResponseError::InvalidRequest, msg);
    let names: Vec<&str> = r.configs.iter().map(|c| c.name.as_str()).collect();
    if (1..names.len()).any(|i| names[..i].contains(&names[i])) {
        return Err(invalid_request(
            "Error due to duplicate config keys".to_string(),
        ));
    }
    let nulls: Vec<&str> = r
        .configs
        .iter()
        .filter(|c| c.value.is_none())
        .map(|c| c.name.as_str())
        .collect();
    if !nulls.is_empty() {
        return Err(invalid_request(format!(
            "Null value not supported for : {}",
            nulls.join(", ")
        )));
    }
    match r.resource_type {
        TOPIC => {
            let set: Vec<ConfigChange> = r
                .configs
                .iter()
                .map(|c| (c.name.as_str(), c.value.as_deref()))
                .collect();
            replace_topic(b, r.resource_name.as_str(), &set, validate_only)
        }
        BROKER => Err(invalid_request(format!(
            "Cannot update these configs dynamically: {}: broker configs are set with -o when \
             the daemon starts",
            names.join(", ")
        ))),
        t => Err(invalid_request(format!("Unknown resource type {t}"))),
    }
}

/// A topic's overrides become exactly `set`: each validated first (an
/// unknown name or a bad value refuses the whole set), then written to
/// every partition, and every other override of a topic config removed.
/// The tree's own properties (`parse.key`, ...) are not topic configs and
/// stay.
fn replace_topic(
    b: &Broker,
    name: &str,
    set: &[ConfigChange],
    validate_only: bool,
) -> Result<(), Refused> {
    let topic = b.mgr.topic(name).ok_or_else(|| {
        (
            ResponseError::UnknownTopicOrPartition,
            format!("no topic {name}"),
        )
    })?;
    let invalid = |e: ConfigError| (ResponseError::InvalidConfig, e.to_string());
    let mut check = LogConfig::clone(b.mgr.defaults());
    for (k, v) in set {
        check.set(k, v.unwrap_or_default()).map_err(invalid)?;
    }
    // Judged whole before any partition changes, as Kafka judges the set.
    check.validate().map_err(invalid)?;
    if validate_only {
        return Ok(());
    }
    let storage = |e: StorageError| {
        let code = code_for(Family::Admin, &format!("AlterConfigs of {name}"), &e);
        (code, message_for(&e))
    };
    for log in topic.partitions.iter().flatten() {
        for (k, v) in set {
            log.set_config(k, v.unwrap_or_default()).map_err(storage)?;
        }
        let stale = log
            .overrides()
            .into_keys()
            .filter(|k| CONFIG_NAMES.contains(&k.as_str()))
            .filter(|k| !set.iter().any(|(n, _)| n == k));
        for k in stale.collect::<Vec<_>>() {
            log.reset_config(&k).map_err(storage)?;
        }
    }
    info!(
        "Kafka: replaced the configs of topic {name} with {} overrides",
        set.len()
    );
    Ok(())
}
