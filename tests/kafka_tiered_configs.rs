//! Tiered storage's configs (KIP-405) through the admin APIs: taken and
//! validated as Kafka does, so a topic's settings carry over, with the
//! remote storage system off (there is none yet): CreateTopics and
//! IncrementalAlterConfigs refuse `remote.storage.enable=true` with
//! Kafka's INVALID_CONFIG and words, DescribeConfigs shows the others with
//! their source and Kafka's synonyms, and the daemon refuses to start with
//! `remote.log.storage.system.enable=true`.

mod kafka_support;

use std::process::Command;

use kafka_protocol::messages::ApiKey;
use kafka_protocol::messages::create_topics_request::CreateTopicsRequest;
use kafka_protocol::messages::create_topics_response::CreateTopicsResponse;
use kafka_protocol::messages::describe_configs_request::{
    DescribeConfigsRequest, DescribeConfigsResource,
};
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResponse,
};
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig, IncrementalAlterConfigsRequest,
};
use kafka_protocol::messages::incremental_alter_configs_response::IncrementalAlterConfigsResponse;
use kafka_protocol::protocol::StrBytes;
use kafka_support::{BIN, Conn, Server, bounded, requests};

const INVALID_CONFIG: i16 = 40;
const DYNAMIC_TOPIC_CONFIG: i8 = 1;
const DEFAULT_CONFIG: i8 = 5;
const SYSTEM_OFF: &str = "Tiered Storage functionality is disabled in the broker. Topic cannot \
                          be configured with remote log storage.";

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// CreateTopics of one topic: its error code and message.
fn create(c: &mut Conn, n: &str, configs: &[(&str, &str)]) -> (i16, String) {
    let req = CreateTopicsRequest::default().with_topics(vec![
        requests::creatable(n, 2)
            .with_replication_factor(1)
            .with_configs(requests::topic_configs(configs)),
    ]);
    let r: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 7, &req);
    let t = &r.topics[0];
    (
        t.error_code,
        t.error_message.as_deref().unwrap_or("").to_string(),
    )
}

/// IncrementalAlterConfigs SETs of one topic: its error code and message.
fn alter(c: &mut Conn, t: &str, set: &[(&str, &str)]) -> (i16, String) {
    let configs = set
        .iter()
        .map(|(k, v)| {
            AlterableConfig::default()
                .with_name(s(k))
                .with_config_operation(0)
                .with_value(Some(s(v)))
        })
        .collect();
    let req = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s(t))
            .with_configs(configs),
    ]);
    let r: IncrementalAlterConfigsResponse = c.call(ApiKey::IncrementalAlterConfigs, 1, &req);
    let a = &r.responses[0];
    (
        a.error_code,
        a.error_message.as_deref().unwrap_or("").to_string(),
    )
}

/// DescribeConfigs of one topic config, with synonyms.
fn describe(c: &mut Conn, t: &str, key: &str) -> DescribeConfigsResourceResult {
    let req = DescribeConfigsRequest::default()
        .with_include_synonyms(true)
        .with_resources(vec![
            DescribeConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(s(t))
                .with_configuration_keys(Some(vec![s(key)])),
        ]);
    let r: DescribeConfigsResponse = c.call(ApiKey::DescribeConfigs, 4, &req);
    assert_eq!(
        r.results[0].error_code, 0,
        "{:?}",
        r.results[0].error_message
    );
    let mut found = r.results[0].configs.clone();
    assert_eq!(found.len(), 1, "{key}: {found:?}");
    found.remove(0)
}

fn synonyms(e: &DescribeConfigsResourceResult) -> Vec<(String, Option<String>, i8)> {
    e.synonyms
        .iter()
        .map(|s| {
            let value = s.value.as_deref().map(str::to_string);
            (s.name.to_string(), value, s.source)
        })
        .collect()
}

/// A synonym as [`synonyms`] lists it.
fn syn(name: &str, value: &str, source: i8) -> (String, Option<String>, i8) {
    (name.to_string(), Some(value.to_string()), source)
}

fn properties(data: &std::path::Path, partition: &str) -> String {
    std::fs::read_to_string(data.join(partition).join("commitfs.properties")).unwrap_or_default()
}

#[test]
fn tiered_storage_configs_are_validated_as_kafka_does() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let server = Server::start(&data, &[]);
    let mut c = Conn::new(&server.addr);

    let (code, msg) = create(
        &mut c,
        "tiered",
        &[("retention.ms", "86400000"), ("local.retention.ms", "1000")],
    );
    assert_eq!(code, 0, "{msg}");
    assert!(properties(&data, "tiered-1").contains("local.retention.ms=1000"));
    let e = describe(&mut c, "tiered", "local.retention.ms");
    assert_eq!(e.value.as_deref(), Some("1000"));
    assert_eq!(e.config_source, DYNAMIC_TOPIC_CONFIG);
    assert_eq!(e.config_type, 5, "LONG");
    assert_eq!(
        synonyms(&e),
        [
            syn("local.retention.ms", "1000", 1),
            syn("log.local.retention.ms", "-2", 5),
        ]
    );
    let e = describe(&mut c, "tiered", "local.retention.bytes");
    assert_eq!(e.value.as_deref(), Some("-2"));
    assert_eq!(e.config_source, DEFAULT_CONFIG);
    let e = describe(&mut c, "tiered", "remote.storage.enable");
    assert_eq!(e.value.as_deref(), Some("false"));
    assert_eq!((e.config_source, e.config_type), (DEFAULT_CONFIG, 1));

    // Remote storage itself: the system is off, so Kafka refuses it first,
    // whatever else the topic says.
    for configs in [
        &[("remote.storage.enable", "true")][..],
        &[
            ("remote.storage.enable", "true"),
            ("retention.ms", "1000"),
            ("local.retention.ms", "2000"),
        ],
        &[
            ("remote.storage.enable", "true"),
            ("cleanup.policy", "compact"),
        ],
    ] {
        assert_eq!(
            create(&mut c, "remote", configs),
            (INVALID_CONFIG, SYSTEM_OFF.to_string()),
            "{configs:?}"
        );
    }
    assert!(!data.join("remote-0").exists(), "no topic made");
    let before = properties(&data, "tiered-0");
    assert_eq!(
        alter(&mut c, "tiered", &[("remote.storage.enable", "true")]),
        (INVALID_CONFIG, SYSTEM_OFF.to_string())
    );
    // `local.retention.ms` above `retention.ms`, in one change and in two:
    // refused only with remote storage on (which is refused first).
    assert_eq!(
        alter(
            &mut c,
            "tiered",
            &[
                ("remote.storage.enable", "true"),
                ("local.retention.ms", "172800000"),
            ]
        ),
        (INVALID_CONFIG, SYSTEM_OFF.to_string())
    );
    assert_eq!(
        properties(&data, "tiered-0"),
        before,
        "refusals change nothing"
    );
    let (code, msg) = alter(&mut c, "tiered", &[("local.retention.ms", "-3")]);
    assert_eq!(code, INVALID_CONFIG);
    assert_eq!(
        msg,
        "Invalid value -3 for configuration local.retention.ms: Value must be at least -2"
    );
    let (code, msg) = alter(&mut c, "tiered", &[("remote.log.copy.disable", "maybe")]);
    assert_eq!(code, INVALID_CONFIG);
    assert!(
        msg.contains("Expected value to be either true or false"),
        "{msg}"
    );

    // Without remote storage Kafka keeps the local retention inert: above
    // `retention.ms` is accepted, as are the other configs alone.
    let set = [
        ("remote.storage.enable", "false"),
        ("local.retention.ms", "172800000"),
        ("local.retention.bytes", "1048576"),
        ("remote.log.copy.disable", "true"),
        ("remote.log.delete.on.disable", "true"),
    ];
    assert_eq!(alter(&mut c, "tiered", &set), (0, String::new()));
    for (k, v) in set {
        let e = describe(&mut c, "tiered", k);
        assert_eq!(e.value.as_deref(), Some(v), "{k}");
        assert_eq!(e.config_source, DYNAMIC_TOPIC_CONFIG, "{k}");
        assert!(properties(&data, "tiered-1").contains(&format!("{k}={v}\n")));
    }
}

/// `log.local.retention.*` are the broker defaults of `local.retention.*`,
/// shown as a static broker config.
#[test]
fn broker_defaults_of_local_retention() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let server = Server::start(&data, &["log.local.retention.bytes=4096"]);
    let mut c = Conn::new(&server.addr);
    assert_eq!(create(&mut c, "t", &[]).0, 0);
    let e = describe(&mut c, "t", "local.retention.bytes");
    assert_eq!(e.value.as_deref(), Some("4096"));
    assert_eq!(e.config_source, 4, "STATIC_BROKER_CONFIG");
    assert_eq!(
        synonyms(&e),
        [
            syn("log.local.retention.bytes", "4096", 4),
            syn("log.local.retention.bytes", "-2", 5),
        ]
    );
}

/// There is no remote store: the daemon says so and stops.
/// `serve` with one `-o` setting, bounded: a daemon that took the setting
/// would serve until killed. Its stderr, after it exited with 2.
fn refused_at_start(data: &std::path::Path, setting: &str) -> String {
    let out = bounded::run(
        Command::new(BIN)
            .args([
                "serve",
                "--listeners",
                "PLAINTEXT://127.0.0.1:0",
                "-o",
                setting,
            ])
            .arg(data),
        setting,
    );
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}

#[test]
fn the_remote_storage_system_is_refused_at_start() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let stderr = refused_at_start(&data, "remote.log.storage.system.enable=true");
    assert!(
        stderr.contains("tiered storage (KIP-405) is not available in this version"),
        "{stderr}"
    );
    let stderr = refused_at_start(&data, "remote.log.reader.threads=0");
    assert!(
        stderr.contains(
            "Invalid value 0 for configuration remote.log.reader.threads: Value must be at least 1"
        ),
        "{stderr}"
    );
}
