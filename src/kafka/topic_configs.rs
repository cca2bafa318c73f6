//! DescribeConfigs and IncrementalAlterConfigs: a topic's configs are its
//! partitions' `config/<name>` files, changed through the same storage call
//! (`PartitionLog::set_config`, `reset_config`) on every partition of the
//! topic. A topic is described by its partition 0 (the tree lets partitions
//! of one topic differ; Kafka does not). The broker resource shows the
//! listener's settings, read-only: they are set with `-o` when starting.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_configs_request::{
    DescribeConfigsRequest, DescribeConfigsResource,
};
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResponse, DescribeConfigsResult,
};
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, IncrementalAlterConfigsRequest,
};
use kafka_protocol::messages::incremental_alter_configs_response::{
    AlterConfigsResourceResponse, IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;
use log::{info, warn};

use super::broker::Broker;
use super::error::{Family, code_for, message_for};
use crate::storage::{CONFIG_NAMES, ConfigError, LogConfig, StorageError};

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

type Refused = (ResponseError, String);

fn config_type(name: &str) -> i8 {
    match name {
        "segment.bytes" | "segment.index.bytes" | "index.interval.bytes" | "max.message.bytes" => {
            INT
        }
        "compression.type" | "message.timestamp.type" => STRING,
        "cleanup.policy" => LIST,
        "min.cleanable.dirty.ratio" => DOUBLE,
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

pub fn describe(b: &Broker, version: i16, req: DescribeConfigsRequest) -> DescribeConfigsResponse {
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
            let described = match r.resource_type {
                TOPIC => describe_topic(b, r),
                BROKER => Ok(describe_broker(b)),
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

fn describe_topic(
    b: &Broker,
    r: &DescribeConfigsResource,
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
            let source = if overrides.contains_key(*n) {
                DYNAMIC_TOPIC_CONFIG
            } else if b.mgr.defaults().get(n) != kafka_defaults.get(n) {
                STATIC_BROKER_CONFIG
            } else {
                DEFAULT_CONFIG
            };
            entry(n, value, source, config_type(n), false)
        })
        .collect())
}

fn describe_broker(b: &Broker) -> Vec<DescribeConfigsResourceResult> {
    let c = &b.config;
    let listener = c
        .listener
        .as_ref()
        .map(|l| l.to_string())
        .unwrap_or_default();
    [
        ("listeners", listener, STRING),
        ("advertised.listeners", b.advertised.to_string(), STRING),
        (
            "auto.create.topics.enable",
            c.auto_create_topics.to_string(),
            BOOLEAN,
        ),
        ("num.partitions", c.num_partitions.to_string(), INT),
        (
            "socket.request.max.bytes",
            c.socket_request_max_bytes.to_string(),
            INT,
        ),
        ("node.id", c.node_id.to_string(), INT),
    ]
    .into_iter()
    .map(|(n, v, t)| entry(n, v, STATIC_BROKER_CONFIG, t, true))
    .chain(cleaner_settings(b))
    .collect()
}

/// The log cleaner's settings (`log.cleaner.*`), as the broker has them.
fn cleaner_settings(b: &Broker) -> Vec<DescribeConfigsResourceResult> {
    use crate::storage::cleaner::CLEANER_CONFIG_NAMES;
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

pub fn alter(b: &Broker, req: IncrementalAlterConfigsRequest) -> IncrementalAlterConfigsResponse {
    let responses = req
        .resources
        .iter()
        .map(|r| {
            let resp = AlterConfigsResourceResponse::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone());
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
            match done {
                Ok(()) => resp,
                Err((code, msg)) => {
                    warn!(
                        "Kafka: IncrementalAlterConfigs of {} refused with {code:?}: {msg}",
                        r.resource_name.as_str()
                    );
                    resp.with_error_code(code.code())
                        .with_error_message(Some(StrBytes::from_string(msg)))
                }
            }
        })
        .collect();
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

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
