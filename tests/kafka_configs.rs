//! Configs through the admin APIs older clients speak:
//! - kafka-python's admin client describes a topic's and the broker's
//!   configs with Kafka's synonyms, and changes them with AlterConfigs (the
//!   API before IncrementalAlterConfigs, as kafkajs and aiokafka use it),
//!   whose reset relies on Kafka's rule that the set sent replaces the old;
//! - AlterConfigs' refusals, by raw requests;
//! - ApiVersions advertises exactly what is served: every advertised
//!   version of every API is answered.

mod kafka_support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bytes::BytesMut;
use commitfs::storage::{LogConfig, LogManager, OpenOptions};
use kafka_protocol::messages::alter_configs_request::{
    AlterConfigsRequest, AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::alter_configs_response::AlterConfigsResponse;
use kafka_protocol::messages::api_versions_request::ApiVersionsRequest;
use kafka_protocol::messages::api_versions_response::ApiVersionsResponse;
use kafka_protocol::messages::{
    ApiKey, RequestHeader, RequestKind, ResponseHeader, ResponseKind, *,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_support::{Conn, Server, python, require, run_python};

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// A data directory with topic `name` (`partitions` of them), each
/// partition with `overrides`, and the tree's `parse.key` property.
fn data_dir(tmp: &Path, name: &str, partitions: u32, overrides: &[(&str, &str)]) -> PathBuf {
    let data = tmp.join("data");
    let mgr = LogManager::open(&data, LogConfig::default(), OpenOptions::default()).unwrap();
    mgr.create_topic(name, partitions).unwrap();
    for p in 0..partitions {
        let log = mgr.partition(&format!("{name}-{p}")).unwrap();
        for (k, v) in overrides {
            log.set_config(k, v).unwrap();
        }
        log.set_property("parse.key", "true").unwrap();
    }
    mgr.close().unwrap();
    data
}

/// A partition's `commitfs.properties`, as a map.
fn properties(data: &Path, partition: &str) -> BTreeMap<String, String> {
    std::fs::read_to_string(data.join(partition).join("commitfs.properties"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Prints each config of a resource as kafka-python's admin client sees
/// it: `<name> <value> <source> <synonym>=<value>@<source>;...`.
const DESCRIBE: &str = r#"
import sys
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType
a = KafkaAdminClient(bootstrap_servers=sys.argv[1], request_timeout_ms=30000)
kind = ConfigResourceType.TOPIC if sys.argv[2] == 'topic' else ConfigResourceType.BROKER
r = a.describe_configs([ConfigResource(kind, sys.argv[3])], include_synonyms=True, config_filter='all')
for name, c in sorted(r[sys.argv[2]][sys.argv[3]].items()):
    syn = ';'.join('%s=%s@%s' % (s['name'], s['value'], s['source']) for s in c['synonyms'])
    print(name, c['value'], c['config_source'], syn)
a.close()
"#;

/// kafka-python's alter_configs and reset_configs over AlterConfigs
/// (`incremental=False`): set segment.ms, then reset retention.ms. Its
/// reset sends every other modified config and leaves retention.ms out,
/// which only works where the set sent replaces the old one.
const ALTER: &str = r#"
import sys
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType
a = KafkaAdminClient(bootstrap_servers=sys.argv[1], request_timeout_ms=30000)
t = ConfigResourceType.TOPIC
print(a.alter_configs([ConfigResource(t, 'orders', configs={'segment.ms': '3600000'})], incremental=False))
print(a.reset_configs([ConfigResource(t, 'orders', configs=['retention.ms'])], incremental=False))
a.close()
"#;

fn described(py: &Path, addr: &str, kind: &str, name: &str) -> BTreeMap<String, String> {
    run_python(py, DESCRIBE, &[addr, kind, name])
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(k, rest)| (k.to_string(), rest.to_string()))
        .collect()
}

/// A topic's configs with Kafka's synonyms: an override, a mount-wide
/// default given with `-o` (a static broker config, under the broker's
/// name), Kafka's default (every broker synonym, null where Kafka has
/// none); and the broker's settings, given or default.
#[test]
fn kafka_python_sees_kafkas_synonyms() {
    let Some(py) = require(python()) else { return };
    let tmp = tempfile::tempdir().unwrap();
    let data = data_dir(tmp.path(), "orders", 2, &[("retention.ms", "86400000")]);
    let s = Server::start(&data, &["segment.bytes=2097152", "max.connections=500"]);
    let topic = described(&py, &s.addr, "topic", "orders");
    let want = [
        (
            "retention.ms",
            "86400000 DYNAMIC_TOPIC_CONFIG retention.ms=86400000@DYNAMIC_TOPIC_CONFIG;\
             log.retention.ms=None@DEFAULT_CONFIG;log.retention.minutes=None@DEFAULT_CONFIG;\
             log.retention.hours=168@DEFAULT_CONFIG",
        ),
        (
            "segment.bytes",
            "2097152 STATIC_BROKER_CONFIG log.segment.bytes=2097152@STATIC_BROKER_CONFIG;\
             log.segment.bytes=1073741824@DEFAULT_CONFIG",
        ),
        (
            "max.message.bytes",
            "1048588 DEFAULT_CONFIG message.max.bytes=1048588@DEFAULT_CONFIG",
        ),
    ];
    for (name, line) in want {
        assert_eq!(
            topic.get(name).map(String::as_str),
            Some(line),
            "{name}: {topic:#?}"
        );
    }
    let broker = described(&py, &s.addr, "broker", "0");
    let given = |n: &str, v: &str, d: &str| {
        format!("{v} STATIC_BROKER_CONFIG {n}={v}@STATIC_BROKER_CONFIG;{n}={d}@DEFAULT_CONFIG")
    };
    let default = |n: &str, d: &str| format!("{d} DEFAULT_CONFIG {n}={d}@DEFAULT_CONFIG");
    let want = [
        (
            "max.connections",
            given("max.connections", "500", "2147483647"),
        ),
        ("num.network.threads", default("num.network.threads", "3")),
        (
            "connections.max.idle.ms",
            default("connections.max.idle.ms", "600000"),
        ),
        (
            "queued.max.request.bytes",
            default("queued.max.request.bytes", "104857600"),
        ),
        (
            "max.connections.per.ip",
            default("max.connections.per.ip", "2147483647"),
        ),
        (
            "offsets.retention.minutes",
            default("offsets.retention.minutes", "10080"),
        ),
        ("group.max.size", default("group.max.size", "2147483647")),
    ];
    for (name, line) in want {
        assert_eq!(broker.get(name), Some(&line), "{name}: {broker:#?}");
    }
}

/// kafka-python's reset over AlterConfigs sends the overrides to keep and
/// leaves out the one to reset: only Kafka's replace rule resets it.
#[test]
fn kafka_python_resets_a_config_with_alter_configs() {
    let Some(py) = require(python()) else { return };
    let tmp = tempfile::tempdir().unwrap();
    let data = data_dir(tmp.path(), "orders", 2, &[("retention.ms", "86400000")]);
    let s = Server::start(&data, &[]);
    let out = run_python(&py, ALTER, &[&s.addr]);
    assert_eq!(out.matches("'orders': 'OK'").count(), 2, "{out}");
    for p in ["orders-0", "orders-1"] {
        let props = properties(&data, p);
        assert_eq!(
            props.get("segment.ms").map(String::as_str),
            Some("3600000"),
            "{p}"
        );
        assert!(!props.contains_key("retention.ms"), "{p}: {props:?}");
        assert_eq!(
            props.get("parse.key").map(String::as_str),
            Some("true"),
            "{p}"
        );
    }
    let topic = described(&py, &s.addr, "topic", "orders");
    assert!(
        topic["retention.ms"].starts_with("604800000 DEFAULT_CONFIG "),
        "{topic:#?}"
    );
    assert!(
        topic["segment.ms"].starts_with("3600000 DYNAMIC_TOPIC_CONFIG "),
        "{topic:#?}"
    );
}

/// One AlterConfigs resource: type, name, and configs (`None`: a null value).
type Resource<'a> = (i8, &'a str, &'a [(&'a str, Option<&'a str>)]);

fn alter(c: &mut Conn, resources: &[Resource], validate_only: bool) -> Vec<(i16, String)> {
    let resources = resources
        .iter()
        .map(|(ty, name, configs)| {
            let configs = configs
                .iter()
                .map(|(k, v)| {
                    AlterableConfig::default()
                        .with_name(sb(k))
                        .with_value(v.map(sb))
                })
                .collect();
            AlterConfigsResource::default()
                .with_resource_type(*ty)
                .with_resource_name(sb(name))
                .with_configs(configs)
        })
        .collect();
    let req = AlterConfigsRequest::default()
        .with_resources(resources)
        .with_validate_only(validate_only);
    let r: AlterConfigsResponse = c.call(ApiKey::AlterConfigs, 2, &req);
    r.responses
        .iter()
        .map(|r| {
            (
                r.error_code,
                r.error_message.as_deref().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// AlterConfigs replaces a topic's overrides (every partition's, keeping
/// the tree's own properties), and refuses as Kafka does: an unknown name
/// or bad value (INVALID_CONFIG), a null value, a repeated key or resource,
/// the broker (its settings are given at start), an unknown resource type
/// (INVALID_REQUEST), an unknown topic. A refusal, or `validate_only`,
/// changes nothing.
#[test]
fn alter_configs_replaces_the_whole_set_and_refuses_as_kafka_does() {
    let tmp = tempfile::tempdir().unwrap();
    let over = [("retention.ms", "86400000"), ("max.message.bytes", "2000")];
    let data = data_dir(tmp.path(), "t", 2, &over);
    let s = Server::start(&data, &[]);
    let mut c = Conn::new(&s.addr);
    let before = properties(&data, "t-1");
    refusals(&mut c, &|what: &str| {
        assert_eq!(properties(&data, "t-1"), before, "{what}")
    });
    let unchanged = |what: &str| assert_eq!(properties(&data, "t-1"), before, "{what}");
    let invalid_request = 42;
    let twice = alter(&mut c, &[(2, "t", &[]), (2, "t", &[])], false);
    let msg = "Each resource must appear at most once.".to_string();
    assert_eq!(
        twice,
        vec![(invalid_request, msg.clone()), (invalid_request, msg)]
    );
    unchanged("the same resource twice");
    let set = [("segment.ms", Some("3600000"))];
    assert_eq!(
        alter(&mut c, &[(2, "t", &set)], true),
        vec![(0, String::new())]
    );
    unchanged("validate_only");

    assert_eq!(
        alter(&mut c, &[(2, "t", &set)], false),
        vec![(0, String::new())]
    );
    for p in ["t-0", "t-1"] {
        let props = properties(&data, p);
        let want: BTreeMap<String, String> = [("parse.key", "true"), ("segment.ms", "3600000")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(
            props, want,
            "{p}: only the new set, and the tree's property"
        );
    }
    assert_eq!(
        alter(&mut c, &[(2, "t", &[])], false),
        vec![(0, String::new())]
    );
    assert_eq!(
        properties(&data, "t-0").len(),
        1,
        "an empty set resets every config"
    );
}

/// Each refusal, one resource at a time; `unchanged` checks nothing moved.
fn refusals(c: &mut Conn, unchanged: &dyn Fn(&str)) {
    let (invalid_config, invalid_request) = (40, 42);
    for (resources, code, msg) in [
        (
            vec![(2, "t", &[("bogus", Some("1"))][..])],
            invalid_config,
            "bogus",
        ),
        (
            vec![(2, "t", &[("segment.bytes", Some("10"))][..])],
            invalid_config,
            "segment.bytes",
        ),
        (
            vec![(2, "t", &[("retention.ms", None)][..])],
            invalid_request,
            "Null value not supported for : retention.ms",
        ),
        (
            vec![(
                2,
                "t",
                &[("segment.ms", Some("1")), ("segment.ms", Some("2"))][..],
            )],
            invalid_request,
            "Error due to duplicate config keys",
        ),
        (
            vec![(4, "0", &[("max.connections", Some("5"))][..])],
            invalid_request,
            "Cannot update these configs dynamically",
        ),
        (
            vec![(99, "x", &[][..])],
            invalid_request,
            "Unknown resource type 99",
        ),
        (vec![(2, "nope", &[][..])], 3, "no topic nope"),
    ] {
        let answers = alter(c, &resources, false);
        assert_eq!(answers.len(), 1);
        assert_eq!(answers[0].0, code, "{resources:?}: {answers:?}");
        assert!(answers[0].1.contains(msg), "{resources:?}: {answers:?}");
        unchanged(msg);
    }
}

/// A default request of each served API, as `RequestKind`.
fn default_request(key: ApiKey) -> RequestKind {
    macro_rules! kinds {
        ($($k:ident: $m:ident :: $t:ident),* $(,)?) => {
            match key {
                $(ApiKey::$k => RequestKind::$k($m::$t::default()),)*
                other => panic!("{other:?} is advertised but has no request here"),
            }
        };
    }
    let mut r = kinds!(
        Produce: produce_request::ProduceRequest,
        Fetch: fetch_request::FetchRequest,
        ListOffsets: list_offsets_request::ListOffsetsRequest,
        Metadata: metadata_request::MetadataRequest,
        OffsetCommit: offset_commit_request::OffsetCommitRequest,
        OffsetFetch: offset_fetch_request::OffsetFetchRequest,
        FindCoordinator: find_coordinator_request::FindCoordinatorRequest,
        JoinGroup: join_group_request::JoinGroupRequest,
        Heartbeat: heartbeat_request::HeartbeatRequest,
        LeaveGroup: leave_group_request::LeaveGroupRequest,
        SyncGroup: sync_group_request::SyncGroupRequest,
        DescribeGroups: describe_groups_request::DescribeGroupsRequest,
        ListGroups: list_groups_request::ListGroupsRequest,
        SaslHandshake: sasl_handshake_request::SaslHandshakeRequest,
        SaslAuthenticate: sasl_authenticate_request::SaslAuthenticateRequest,
        ApiVersions: api_versions_request::ApiVersionsRequest,
        CreateTopics: create_topics_request::CreateTopicsRequest,
        DeleteTopics: delete_topics_request::DeleteTopicsRequest,
        DeleteRecords: delete_records_request::DeleteRecordsRequest,
        InitProducerId: init_producer_id_request::InitProducerIdRequest,
        AddPartitionsToTxn: add_partitions_to_txn_request::AddPartitionsToTxnRequest,
        EndTxn: end_txn_request::EndTxnRequest,
        AddOffsetsToTxn: add_offsets_to_txn_request::AddOffsetsToTxnRequest,
        TxnOffsetCommit: txn_offset_commit_request::TxnOffsetCommitRequest,
        DescribeTransactions: describe_transactions_request::DescribeTransactionsRequest,
        ListTransactions: list_transactions_request::ListTransactionsRequest,
        DescribeConfigs: describe_configs_request::DescribeConfigsRequest,
        AlterConfigs: alter_configs_request::AlterConfigsRequest,
        CreatePartitions: create_partitions_request::CreatePartitionsRequest,
        DeleteGroups: delete_groups_request::DeleteGroupsRequest,
        IncrementalAlterConfigs: incremental_alter_configs_request::IncrementalAlterConfigsRequest,
        DescribeAcls: describe_acls_request::DescribeAclsRequest,
        CreateAcls: create_acls_request::CreateAclsRequest,
        DeleteAcls: delete_acls_request::DeleteAclsRequest,
        DescribeUserScramCredentials: describe_user_scram_credentials_request::DescribeUserScramCredentialsRequest,
        AlterUserScramCredentials: alter_user_scram_credentials_request::AlterUserScramCredentialsRequest,
    );
    match &mut r {
        // acks=0 is answered with nothing, by design.
        RequestKind::Produce(p) => p.acks = 1,
        // v1 has no null for "every topic".
        RequestKind::OffsetFetch(f) => f.topics = Some(Vec::new()),
        _ => {}
    }
    r
}

/// Sends `req` at `version` (encoded at `encoded_as`, for versions the
/// codec cannot write, whose header is the same) and reads what follows:
/// the decoded response, or `None` if the connection closed.
fn exchange(
    c: &mut Conn,
    key: ApiKey,
    (version, encoded_as): (i16, i16),
    req: &RequestKind,
) -> Option<ResponseKind> {
    let mut buf = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(encoded_as)
        .with_correlation_id(7)
        .with_client_id(Some(sb("versions")))
        .encode(&mut buf, key.request_header_version(encoded_as))
        .unwrap();
    req.encode(&mut buf, encoded_as)
        .unwrap_or_else(|e| panic!("{key:?} v{encoded_as}: {e}"));
    buf[2..4].copy_from_slice(&version.to_be_bytes());
    c.send_raw(&buf);
    let mut resp = c.recv_for(&format!("{key:?} v{version}"))?;
    let header = ResponseHeader::decode(&mut resp, key.response_header_version(version)).unwrap();
    assert_eq!(header.correlation_id, 7, "{key:?} v{version}");
    let body = ResponseKind::decode(key, &mut resp, version)
        .unwrap_or_else(|e| panic!("{key:?} v{version}: the response does not decode: {e}"));
    assert!(
        resp.is_empty(),
        "{key:?} v{version}: bytes left after the response"
    );
    Some(body)
}

/// Every API ApiVersions advertises is answered at every version it
/// advertises, but Produce below v3 and Fetch below v4, which are
/// advertised for old librdkafka only and close the connection. The
/// table is the one the README lists, AlterConfigs and DeleteGroups
/// included.
#[test]
fn every_advertised_version_is_served() {
    let tmp = tempfile::tempdir().unwrap();
    let data = data_dir(tmp.path(), "t", 1, &[]);
    let s = Server::start(&data, &[]);
    let mut c = Conn::new(&s.addr);
    let r: ApiVersionsResponse = c.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    let table: Vec<(i16, i16, i16)> = r
        .api_keys
        .iter()
        .map(|k| (k.api_key, k.min_version, k.max_version))
        .collect();
    for want in [(33, 0, 2), (42, 0, 2), (32, 1, 4), (44, 0, 1)] {
        assert!(table.contains(&want), "{want:?} in {table:?}");
    }
    for (key, min, max) in table {
        let key = ApiKey::try_from(key).unwrap();
        for v in min..=max {
            let served_from = match key {
                ApiKey::Produce => 3,
                ApiKey::Fetch => 4,
                _ => min,
            };
            let closed_by_design = v < served_from;
            let versions = (v, v.max(served_from));
            match exchange(&mut c, key, versions, &default_request(key)) {
                Some(_) => assert!(!closed_by_design, "{key:?} v{v} was answered"),
                None if closed_by_design => c = Conn::new(&s.addr),
                None => panic!(
                    "{key:?} v{v} is advertised, but closed the connection:\n{}",
                    s.log()
                ),
            }
        }
    }
}
