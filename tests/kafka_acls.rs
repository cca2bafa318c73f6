//! Kafka's ACLs on the listener: with `authorizer.class.name` unset the
//! ACL APIs answer SECURITY_DISABLED and everything is allowed; with
//! StandardAuthorizer on, each API's refusal code over the raw protocol,
//! and confluent-kafka's AdminClient (`create_acls`, `describe_acls`,
//! `delete_acls`) run by a super user granting a second user what Kafka
//! would have it need: WRITE to produce (an idempotent producer too),
//! READ on the topic and the group to consume, WRITE on a transactional
//! id (a prefix) for a transactional producer, and Metadata and
//! ListGroups leaving out what it may not describe; the ACLs kept across
//! a restart.

mod kafka_support;

use std::path::Path;

use commitfs::record::NewRecord;
use kafka_protocol::messages::create_acls_request::{AclCreation, CreateAclsRequest};
use kafka_protocol::messages::create_acls_response::CreateAclsResponse;
use kafka_protocol::messages::delete_acls_request::{DeleteAclsFilter, DeleteAclsRequest};
use kafka_protocol::messages::delete_acls_response::DeleteAclsResponse;
use kafka_protocol::messages::describe_acls_request::DescribeAclsRequest;
use kafka_protocol::messages::describe_acls_response::DescribeAclsResponse;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchRequest, FetchTopic};
use kafka_protocol::messages::fetch_response::FetchResponse;
use kafka_protocol::messages::find_coordinator_request::FindCoordinatorRequest;
use kafka_protocol::messages::find_coordinator_response::FindCoordinatorResponse;
use kafka_protocol::messages::init_producer_id_request::InitProducerIdRequest;
use kafka_protocol::messages::init_producer_id_response::InitProducerIdResponse;
use kafka_protocol::messages::list_groups_request::ListGroupsRequest;
use kafka_protocol::messages::list_groups_response::ListGroupsResponse;
use kafka_protocol::messages::metadata_request::{MetadataRequest, MetadataRequestTopic};
use kafka_protocol::messages::metadata_response::MetadataResponse;
use kafka_protocol::messages::{ApiKey, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_support::requests::{creatable, create_topics, produce_to, topic_name};
use kafka_support::{Conn, Server, data_dir_with, python, require, run_python};

const STANDARD: &str =
    "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer";
const ADMIN_PASSWORD: &str = "admin-Secret-3kd9";
const BOB_PASSWORD: &str = "bob-Secret-p0q7";

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn creation(rt: i8, name: &str, pt: i8, principal: &str, op: i8, perm: i8) -> AclCreation {
    AclCreation::default()
        .with_resource_type(rt)
        .with_resource_name(s(name))
        .with_resource_pattern_type(pt)
        .with_principal(s(principal))
        .with_host(s("*"))
        .with_operation(op)
        .with_permission_type(perm)
}

fn any_filter() -> DescribeAclsRequest {
    DescribeAclsRequest::default()
        .with_resource_name_filter(None)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_resource_type_filter(1)
        .with_pattern_type_filter(1)
        .with_operation(1)
        .with_permission_type(1)
}

fn produce(c: &mut Conn, topic: &str) -> i16 {
    let mut batch = Vec::new();
    commitfs::record::encode_batch(&mut batch, 0, 1, &[NewRecord::value(b"v")]);
    produce_to(c, topic, batch).0
}

fn metadata(c: &mut Conn, topics: Option<&[&str]>) -> Vec<(String, i16)> {
    let req = MetadataRequest::default().with_topics(topics.map(|ts| {
        ts.iter()
            .map(|t| MetadataRequestTopic::default().with_name(Some(topic_name(t))))
            .collect()
    }));
    let r: MetadataResponse = c.call(ApiKey::Metadata, 12, &req);
    let mut out: Vec<(String, i16)> = (r.topics.iter())
        .map(|t| {
            let name = t.name.as_ref().map(|n: &TopicName| n.0.to_string());
            (name.unwrap_or_default(), t.error_code)
        })
        .filter(|(n, _)| !n.starts_with("__"))
        .collect();
    out.sort();
    out
}

/// Metadata v10 asking for the authorized operations: the cluster's, and
/// each named topic's (its code and its operations).
fn operations(c: &mut Conn, topics: &[&str]) -> (i32, Vec<(String, i16, i32)>) {
    let req = MetadataRequest::default()
        .with_topics(Some(
            (topics.iter())
                .map(|t| MetadataRequestTopic::default().with_name(Some(topic_name(t))))
                .collect(),
        ))
        .with_allow_auto_topic_creation(false)
        .with_include_cluster_authorized_operations(true)
        .with_include_topic_authorized_operations(true);
    let r: MetadataResponse = c.call(ApiKey::Metadata, 10, &req);
    let mut topics: Vec<(String, i16, i32)> = (r.topics.iter())
        .map(|t| {
            let name = t.name.as_ref().map(|n: &TopicName| n.0.to_string());
            (
                name.unwrap_or_default(),
                t.error_code,
                t.topic_authorized_operations,
            )
        })
        .collect();
    topics.sort();
    (r.cluster_authorized_operations, topics)
}

/// The bit field of Kafka's `Utils.to32BitField` for these operation codes.
fn bits(codes: &[i8]) -> i32 {
    codes.iter().fold(0, |b, c| b | 1 << c)
}

/// Fetch v12 of partition 0 of `topic` from offset 0, as a consumer
/// (replica id -1) or a follower: its code.
fn fetch(c: &mut Conn, topic: &str, replica: i32) -> i16 {
    let req = FetchRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(replica))
        .with_max_bytes(1 << 20)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(topic_name(topic))
                .with_partitions(vec![
                    FetchPartition::default()
                        .with_partition(0)
                        .with_partition_max_bytes(1 << 20),
                ]),
        ]);
    let r: FetchResponse = c.call(ApiKey::Fetch, 12, &req);
    r.responses[0].partitions[0].error_code
}

/// Without an authorizer: SECURITY_DISABLED with Kafka's texts, and
/// nothing else changes.
#[test]
fn no_authorizer_answers_security_disabled() {
    let tmp = tempfile::tempdir().unwrap();
    let data = data_dir_with(tmp.path(), &["t-0"]);
    let server = Server::start(&data, &[]);
    let mut c = Conn::new(&server.addr);
    let r: DescribeAclsResponse = c.call(ApiKey::DescribeAcls, 3, &any_filter());
    assert_eq!(r.error_code, 54, "SECURITY_DISABLED");
    // Every operation a resource type supports, as KafkaApis answers
    // without an authorizer.
    assert_eq!(
        operations(&mut c, &["t"]),
        (
            bits(&[5, 7, 8, 9, 10, 11, 12]),
            vec![("t".to_string(), 0, bits(&[3, 4, 5, 6, 7, 8, 10, 11]))]
        )
    );
    assert_eq!(
        r.error_message.as_deref(),
        Some("No Authorizer is configured on the broker")
    );
    let req =
        CreateAclsRequest::default().with_creations(vec![creation(2, "t", 3, "User:a", 3, 3)]);
    let r: CreateAclsResponse = c.call(ApiKey::CreateAcls, 3, &req);
    assert_eq!(r.results[0].error_code, 54);
    assert_eq!(
        r.results[0].error_message.as_deref(),
        Some("No Authorizer is configured.")
    );
    let req = DeleteAclsRequest::default().with_filters(vec![
        DeleteAclsFilter::default()
            .with_resource_name_filter(None)
            .with_principal_filter(None)
            .with_host_filter(None)
            .with_resource_type_filter(1)
            .with_pattern_type_filter(1)
            .with_operation(1)
            .with_permission_type(1),
    ]);
    let r: DeleteAclsResponse = c.call(ApiKey::DeleteAcls, 3, &req);
    assert_eq!(r.filter_results[0].error_code, 54);
    assert_eq!(produce(&mut c, "t"), 0);
    assert_eq!(metadata(&mut c, None), vec![("t".to_string(), 0)]);
    assert!(!data.join("commitfs.acls").exists());
}

/// StandardAuthorizer on a PLAINTEXT listener: the client is
/// User:ANONYMOUS. Each refusal code, CreateAcls' validation, then
/// ANONYMOUS made a super user by `super.users`.
#[test]
fn refusals_over_the_raw_protocol() {
    let tmp = tempfile::tempdir().unwrap();
    let data = data_dir_with(tmp.path(), &["orders-0", "secret-0"]);
    let mut server = Server::start(&data, &[STANDARD, "auto.create.topics.enable=true"]);
    let mut c = Conn::new(&server.addr);
    // No ACL: denied by default (allow.everyone.if.no.acl.found=false).
    assert_eq!(produce(&mut c, "orders"), 29, "TOPIC_AUTHORIZATION_FAILED");
    assert_eq!(fetch(&mut c, "orders", -1), 29);
    assert_eq!(
        fetch(&mut c, "orders", 1),
        29,
        "a follower without CLUSTER_ACTION"
    );
    assert_eq!(metadata(&mut c, None), vec![], "all topics: none listed");
    // Nothing may be described: the cluster's operations are 0, a refused
    // topic keeps the schema's default.
    assert_eq!(
        operations(&mut c, &["orders"]),
        (0, vec![("orders".to_string(), 29, i32::MIN)])
    );
    assert_eq!(
        metadata(&mut c, Some(&["orders", "new-topic"])),
        vec![("new-topic".to_string(), 29), ("orders".to_string(), 29)]
    );
    let r: DescribeAclsResponse = c.call(ApiKey::DescribeAcls, 3, &any_filter());
    assert_eq!(r.error_code, 31, "CLUSTER_AUTHORIZATION_FAILED");
    let req =
        CreateAclsRequest::default().with_creations(vec![creation(2, "t", 3, "User:a", 3, 3)]);
    let r: CreateAclsResponse = c.call(ApiKey::CreateAcls, 3, &req);
    assert_eq!(r.results[0].error_code, 31);
    let r: FindCoordinatorResponse = c.call(
        ApiKey::FindCoordinator,
        3,
        &FindCoordinatorRequest::default()
            .with_key(s("g"))
            .with_key_type(0),
    );
    assert_eq!(r.error_code, 30, "GROUP_AUTHORIZATION_FAILED");
    let r: FindCoordinatorResponse = c.call(
        ApiKey::FindCoordinator,
        3,
        &FindCoordinatorRequest::default()
            .with_key(s("tx"))
            .with_key_type(1),
    );
    assert_eq!(r.error_code, 53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED");
    let r: InitProducerIdResponse = c.call(
        ApiKey::InitProducerId,
        4,
        &InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(kafka_protocol::messages::ProducerId(-1))
            .with_producer_epoch(-1),
    );
    assert_eq!(r.error_code, 31, "idempotent: CLUSTER_AUTHORIZATION_FAILED");
    assert_eq!(
        create_topics(&mut c, vec![creatable("made", 1)], false)[0].0,
        29
    );
    assert!(!data.join("made-0").exists());
    assert!(server.stop(), "a clean stop:\n{}", server.log());

    // ANONYMOUS a super user: everything, and ACLs may be managed.
    let mut server = Server::start(
        &data,
        &[
            STANDARD,
            "super.users=User:ANONYMOUS",
            "auto.create.topics.enable=true",
        ],
    );
    let mut c = Conn::new(&server.addr);
    // A super user may do all that each resource type supports
    // (AclEntry.supportedOperations), an unknown topic included.
    let topic_ops = bits(&[3, 4, 5, 6, 7, 8, 10, 11]);
    assert_eq!(
        operations(&mut c, &["orders", "nowhere"]),
        (
            bits(&[5, 7, 8, 9, 10, 11, 12]),
            vec![
                ("nowhere".to_string(), 3, topic_ops),
                ("orders".to_string(), 0, topic_ops)
            ]
        )
    );
    assert_eq!(produce(&mut c, "orders"), 0);
    assert_eq!(fetch(&mut c, "orders", -1), 0);
    assert_eq!(fetch(&mut c, "orders", 1), 0);
    let req = CreateAclsRequest::default().with_creations(vec![
        creation(2, "orders", 3, "User:bob", 4, 3),
        creation(4, "other-cluster", 3, "User:bob", 4, 3),
        creation(2, "", 3, "User:bob", 4, 3),
        creation(1, "x", 3, "User:bob", 4, 3),
        creation(2, "x", 2, "User:bob", 4, 3),
        creation(2, "x", 3, "User:bob", 1, 3),
        creation(2, "x", 3, "User:bob", 4, 1),
        creation(3, "g-", 4, "User:*", 3, 2),
    ]);
    let r: CreateAclsResponse = c.call(ApiKey::CreateAcls, 3, &req);
    let got: Vec<(i16, Option<String>)> = (r.results.iter())
        .map(|r| (r.error_code, r.error_message.as_deref().map(str::to_string)))
        .collect();
    let invalid = |m: &str| (42, Some(m.to_string()));
    // Kafka's AclCreationResult: an empty message when all went well.
    let ok = (0, Some(String::new()));
    assert_eq!(
        got,
        vec![
            ok.clone(),
            invalid("The only valid name for the CLUSTER resource is kafka-cluster"),
            invalid("Invalid empty resource name"),
            invalid("Invalid resourceType ANY"),
            invalid("Invalid patternType MATCH"),
            invalid("Invalid operation ANY"),
            invalid("Invalid permissionType ANY"),
            ok,
        ]
    );
    let r: DescribeAclsResponse = c.call(ApiKey::DescribeAcls, 3, &any_filter());
    assert_eq!(r.error_code, 0);
    let described: Vec<(i8, String, i8, usize)> = (r.resources.iter())
        .map(|r| {
            (
                r.resource_type,
                r.resource_name.to_string(),
                r.pattern_type,
                r.acls.len(),
            )
        })
        .collect();
    assert_eq!(
        described,
        vec![(2, "orders".to_string(), 3, 1), (3, "g-".to_string(), 4, 1)]
    );
    // MATCH finds the prefixed ACL covering a group.
    let matching = any_filter()
        .with_resource_type_filter(3)
        .with_resource_name_filter(Some(s("g-1")))
        .with_pattern_type_filter(2)
        .with_operation(1)
        .with_permission_type(1);
    let r: DescribeAclsResponse = c.call(ApiKey::DescribeAcls, 3, &matching);
    assert_eq!(r.resources.len(), 1);
    assert_eq!(r.resources[0].acls[0].permission_type, 2, "DENY");
    let file = std::fs::read_to_string(data.join("commitfs.acls")).unwrap();
    assert!(
        file.contains("TOPIC LITERAL User:bob * WRITE ALLOW orders\n"),
        "{file}"
    );
    let req = DeleteAclsRequest::default().with_filters(vec![
        DeleteAclsFilter::default()
            .with_resource_name_filter(None)
            .with_principal_filter(None)
            .with_host_filter(None)
            .with_resource_type_filter(3)
            .with_pattern_type_filter(1)
            .with_operation(1)
            .with_permission_type(1),
    ]);
    let r: DeleteAclsResponse = c.call(ApiKey::DeleteAcls, 3, &req);
    assert_eq!(r.filter_results[0].error_code, 0);
    assert_eq!(r.filter_results[0].matching_acls.len(), 1);
    assert_eq!(&*r.filter_results[0].matching_acls[0].resource_name, "g-");
    let r: ListGroupsResponse = c.call(ApiKey::ListGroups, 4, &ListGroupsRequest::default());
    assert_eq!(r.error_code, 0);
    assert!(server.stop(), "a clean stop:\n{}", server.log());
    let log = server.log();
    assert!(
        log.contains(
            "Kafka: ACLs enforced (StandardAuthorizer): 0 ACLs, super users [User:ANONYMOUS]"
        ),
        "{log}"
    );
    assert!(
        log.contains("Kafka: User:ANONYMOUS removed ACL (pattern=ResourcePattern(resourceType=GROUP, name=g-, patternType=PREFIXED), entry=(principal=User:*, host=*, operation=READ, permissionType=DENY))"),
        "{log}"
    );
    assert!(server.log().contains(
        "Principal = User:ANONYMOUS is Denied operation = WRITE from host = 127.0.0.1 on resource = Topic:LITERAL:orders based on rule DefaultDeny"
    ), "{}", server.log());
}

const ADMIN: &str = r#"
from confluent_kafka.admin import (AdminClient, AclBinding, AclBindingFilter, ResourceType,
    ResourcePatternType, AclOperation, AclPermissionType)
from confluent_kafka import KafkaException, TopicCollection
import sys
addr, user, password, action = sys.argv[1:5]
a = AdminClient({"bootstrap.servers": addr, "security.protocol": "SASL_PLAINTEXT",
                 "sasl.mechanisms": "SCRAM-SHA-256", "sasl.username": user, "sasl.password": password})
def spec(s):
    rt, name, pt, p1, p2, op = s.split(":")
    return ResourceType[rt], name, ResourcePatternType[pt], p1 + ":" + p2, AclOperation[op]
try:
    if action == "grant":
        bs = [AclBinding(rt, n, pt, p, "*", op, AclPermissionType.ALLOW)
              for rt, n, pt, p, op in map(spec, sys.argv[5:])]
        for b, f in a.create_acls(bs).items():
            f.result(timeout=30)
        print("granted", len(bs))
    elif action == "describe":
        f = a.describe_acls(AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY,
            None, None, AclOperation.ANY, AclPermissionType.ANY))
        for b in sorted("%s %s %s %s %s %s" % (b.restype.name, b.name, b.resource_pattern_type.name,
                b.principal, b.operation.name, b.permission_type.name) for b in f.result(timeout=30)):
            print("acl", b)
    elif action == "revoke":
        fs = [AclBindingFilter(rt, n, pt, p, None, op, AclPermissionType.ANY)
              for rt, n, pt, p, op in map(spec, sys.argv[5:])]
        for flt, f in a.delete_acls(fs).items():
            print("deleted", len(f.result(timeout=30)))
    elif action == "operations":
        topic, group = sys.argv[5:7]
        t = a.describe_topics(TopicCollection([topic]), include_authorized_operations=True)
        ops = t[topic].result(timeout=30).authorized_operations or []
        print("topic", ",".join(sorted(op.name for op in ops)))
        g = a.describe_consumer_groups([group], include_authorized_operations=True)
        ops = g[group].result(timeout=30).authorized_operations or []
        print("group", ",".join(sorted(op.name for op in ops)))
    elif action == "list":
        md = a.list_topics(timeout=30)
        print("topics", ",".join(sorted(t for t in md.topics if not t.startswith("__"))))
        groups = a.list_consumer_groups().result(timeout=30)
        print("groups", ",".join(sorted(g.group_id for g in groups.valid)))
except KafkaException as e:
    print("error", e.args[0].name())
"#;

const CLIENT: &str = r#"
from confluent_kafka import Producer, Consumer, KafkaException
import sys, time
addr, user, password, mode, topic = sys.argv[1:6]
conf = {"bootstrap.servers": addr, "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "SCRAM-SHA-256", "sasl.username": user, "sasl.password": password}
errors = []
conf["error_cb"] = lambda e: errors.append(e.name())
if mode in ("produce", "idempotent"):
    p = Producer(dict(conf, **{"enable.idempotence": mode == "idempotent",
                               "message.timeout.ms": 10000}))
    results = []
    for i in range(3):
        p.produce(topic, value=b"v%d" % i, on_delivery=lambda err, msg: results.append(err))
    p.flush(30)
    failed = [e.name() for e in results if e is not None]
    if len(results) == 3 and not failed:
        print("produced", len(results))
    else:
        print("refused", ",".join(sorted(set(failed + errors))))
elif mode == "transactional":
    p = Producer(dict(conf, **{"transactional.id": sys.argv[6]}))
    try:
        p.init_transactions(30)
        p.begin_transaction()
        p.produce(topic, value=b"in-txn")
        p.commit_transaction(30)
        print("committed")
    except KafkaException as e:
        print("refused", e.args[0].name())
else:
    group = sys.argv[6]
    c = Consumer(dict(conf, **{"group.id": group, "auto.offset.reset": "earliest"}))
    c.subscribe([topic])
    got, deadline, outcome = 0, time.time() + 60, None
    while time.time() < deadline and outcome is None:
        m = c.poll(0.5)
        if errors:
            outcome = "refused " + ",".join(sorted(set(errors)))
        elif m is None:
            continue
        elif m.error():
            outcome = "refused " + m.error().name()
        else:
            got += 1
            if got >= int(sys.argv[7]):
                outcome = "consumed %d" % got
    c.close()
    print(outcome or "timeout %d" % got)
"#;

fn sasl_server(data: &Path, extra: &[&str]) -> Server {
    let admin = format!("SCRAM-SHA-256=[name=admin,password={ADMIN_PASSWORD}]");
    let bob = format!("SCRAM-SHA-256=[name=bob,password={BOB_PASSWORD}]");
    let mut opts = vec![
        "sasl.enabled.mechanisms=SCRAM-SHA-256",
        STANDARD,
        "super.users=User:admin",
    ];
    opts.extend_from_slice(extra);
    Server::start_with_args(
        data,
        "SASL_PLAINTEXT://127.0.0.1:0",
        &opts,
        "info",
        &["--add-scram", &admin, "--add-scram", &bob],
    )
}

#[test]
fn a_super_user_grants_with_confluent_kafka() {
    let Some(py) = require(python()) else { return };
    let tmp = tempfile::tempdir().unwrap();
    let data = data_dir_with(tmp.path(), &["orders-0", "secret-0"]);
    let mut server = sasl_server(&data, &[]);
    let admin = |server: &Server, args: &[&str]| {
        let mut all = vec![server.addr.as_str(), "admin", ADMIN_PASSWORD];
        all.extend_from_slice(args);
        run_python(&py, ADMIN, &all)
    };
    let bob = |server: &Server, args: &[&str]| {
        let mut all = vec![server.addr.as_str(), "bob", BOB_PASSWORD];
        all.extend_from_slice(args);
        run_python(&py, CLIENT, &all)
    };
    let bob_admin = |server: &Server, args: &[&str]| {
        let mut all = vec![server.addr.as_str(), "bob", BOB_PASSWORD];
        all.extend_from_slice(args);
        run_python(&py, ADMIN, &all)
    };

    // The admin (a super user) produces and reads in a group of its own.
    assert!(admin(&server, &["describe"]).trim().is_empty());
    let out = run_python(
        &py,
        CLIENT,
        &[&server.addr, "admin", ADMIN_PASSWORD, "produce", "secret"],
    );
    assert!(out.contains("produced 3"), "{out}");
    let out = run_python(
        &py,
        CLIENT,
        &[
            &server.addr,
            "admin",
            ADMIN_PASSWORD,
            "consume",
            "secret",
            "admins",
            "3",
        ],
    );
    assert!(out.contains("consumed 3"), "{out}");

    // Bob may do nothing yet.
    let out = bob(&server, &["produce", "orders"]);
    assert!(
        out.contains("refused") && out.contains("TOPIC_AUTHORIZATION_FAILED"),
        "{out}"
    );
    // The answer is CLUSTER_AUTHORIZATION_FAILED (see the raw test), which
    // librdkafka's describe_acls drops: it reports no ACLs.
    let out = bob_admin(&server, &["describe"]);
    assert!(
        out.contains("error CLUSTER_AUTHORIZATION_FAILED") || out.trim().is_empty(),
        "{out}"
    );
    let out = bob_admin(&server, &["grant", "TOPIC:orders:LITERAL:User:bob:WRITE"]);
    assert!(out.contains("error CLUSTER_AUTHORIZATION_FAILED"), "{out}");

    // WRITE on the topic: a plain and an idempotent producer.
    let out = admin(&server, &["grant", "TOPIC:orders:LITERAL:User:bob:WRITE"]);
    assert!(out.contains("granted 1"), "{out}");
    let out = bob(&server, &["produce", "orders"]);
    assert!(out.contains("produced 3"), "{out}");
    let out = bob(&server, &["idempotent", "orders"]);
    assert!(out.contains("produced 3"), "{out}");

    // Consuming needs READ on the topic and on the group.
    let out = bob(&server, &["consume", "orders", "readers", "6"]);
    assert!(
        out.contains("refused") && out.contains("AUTHORIZATION_FAILED"),
        "{out}"
    );
    let out = admin(&server, &["grant", "TOPIC:ord:PREFIXED:User:bob:READ"]);
    assert!(out.contains("granted 1"), "{out}");
    let out = bob(&server, &["consume", "orders", "readers", "6"]);
    assert!(out.contains("refused GROUP_AUTHORIZATION_FAILED"), "{out}");
    let out = admin(&server, &["grant", "GROUP:readers:LITERAL:User:bob:READ"]);
    assert!(out.contains("granted 1"), "{out}");
    let out = bob(&server, &["consume", "orders", "readers", "6"]);
    assert!(out.contains("consumed 6"), "{out}");

    // A transactional producer needs WRITE on its transactional id.
    let out = bob(&server, &["transactional", "orders", "tx-bob"]);
    assert!(
        out.contains("refused TRANSACTIONAL_ID_AUTHORIZATION_FAILED"),
        "{out}"
    );
    let out = admin(
        &server,
        &["grant", "TRANSACTIONAL_ID:tx-:PREFIXED:User:bob:WRITE"],
    );
    assert!(out.contains("granted 1"), "{out}");
    let out = bob(&server, &["transactional", "orders", "tx-bob"]);
    assert!(out.contains("committed"), "{out}");

    // Bob sees only what he may describe.
    let out = bob_admin(&server, &["list"]);
    assert!(out.contains("topics orders\n"), "{out}");
    assert!(out.contains("groups readers\n"), "{out}");
    let out = admin(&server, &["list"]);
    assert!(out.contains("topics orders,secret\n"), "{out}");
    assert!(out.contains("groups admins,readers\n"), "{out}");
    // What each may do, as AdminClient's describe_topics and
    // describe_consumer_groups report it (Metadata's and DescribeGroups'
    // authorized operations): bob's grants and what they imply; all that
    // the resource type supports for the super user.
    let out = bob_admin(&server, &["operations", "orders", "readers"]);
    assert_eq!(out, "topic DESCRIBE,READ,WRITE\ngroup DESCRIBE,READ\n");
    let out = admin(&server, &["operations", "orders", "readers"]);
    assert_eq!(
        out,
        "topic ALTER,ALTER_CONFIGS,CREATE,DELETE,DESCRIBE,DESCRIBE_CONFIGS,READ,WRITE\n\
         group ALTER_CONFIGS,DELETE,DESCRIBE,DESCRIBE_CONFIGS,READ\n"
    );

    let described = admin(&server, &["describe"]);
    assert_eq!(
        described,
        "acl GROUP readers LITERAL User:bob READ ALLOW\n\
         acl TOPIC ord PREFIXED User:bob READ ALLOW\n\
         acl TOPIC orders LITERAL User:bob WRITE ALLOW\n\
         acl TRANSACTIONAL_ID tx- PREFIXED User:bob WRITE ALLOW\n"
    );

    // Kept across a restart, after a clean stop.
    assert!(server.stop(), "a clean stop:\n{}", server.log());
    let server = sasl_server(&data, &[]);
    assert_eq!(admin(&server, &["describe"]), described);
    let out = bob(&server, &["produce", "orders"]);
    assert!(out.contains("produced 3"), "{out}");
    let out = admin(&server, &["revoke", "TOPIC:orders:LITERAL:User:bob:WRITE"]);
    assert!(out.contains("deleted 1"), "{out}");
    let out = bob(&server, &["produce", "orders"]);
    assert!(out.contains("TOPIC_AUTHORIZATION_FAILED"), "{out}");
    let log = server.log();
    assert!(!log.contains(BOB_PASSWORD) && !log.contains(ADMIN_PASSWORD));
}
