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
use kafka_protocol::protocol::{Request, StrBytes};
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

/// DeleteAcls v3 with one filter matching every ACL of resource type `rt`
/// (1, ANY, for all of them).
fn delete_every(c: &mut Conn, rt: i8) -> DeleteAclsResponse {
    let filter = DeleteAclsFilter::default()
        .with_resource_name_filter(None)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_resource_type_filter(rt)
        .with_pattern_type_filter(1)
        .with_operation(1)
        .with_permission_type(1);
    let req = DeleteAclsRequest::default().with_filters(vec![filter]);
    c.call(ApiKey::DeleteAcls, 3, &req)
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
    let r = delete_every(&mut c, 1);
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
    assert_eq!(
        find_coordinator(&mut c, "g", 0),
        30,
        "GROUP_AUTHORIZATION_FAILED"
    );
    assert_eq!(
        find_coordinator(&mut c, "tx", 1),
        53,
        "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
    );
    assert_eq!(
        init_idempotent(&mut c).0,
        31,
        "idempotent: CLUSTER_AUTHORIZATION_FAILED"
    );
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
    let r = delete_every(&mut c, 3);
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
    // A script run as a user: the listener's address and the user's
    // credentials come first.
    let py = &py;
    let as_user = |script: &'static str, user: &'static str, password: &'static str| {
        move |server: &Server, args: &[&str]| {
            let mut all = vec![server.addr.as_str(), user, password];
            all.extend_from_slice(args);
            run_python(py, script, &all)
        }
    };
    let admin = as_user(ADMIN, "admin", ADMIN_PASSWORD);
    let admin_client = as_user(CLIENT, "admin", ADMIN_PASSWORD);
    let bob = as_user(CLIENT, "bob", BOB_PASSWORD);
    let bob_admin = as_user(ADMIN, "bob", BOB_PASSWORD);
    let grant = |acl: &str| says(admin(&server, &["grant", acl]), "granted 1");

    // The admin (a super user) produces and reads in a group of its own.
    assert!(admin(&server, &["describe"]).trim().is_empty());
    says(admin_client(&server, &["produce", "secret"]), "produced 3");
    says(
        admin_client(&server, &["consume", "secret", "admins", "3"]),
        "consumed 3",
    );

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
    says(
        bob_admin(&server, &["grant", "TOPIC:orders:LITERAL:User:bob:WRITE"]),
        "error CLUSTER_AUTHORIZATION_FAILED",
    );

    // WRITE on the topic: a plain and an idempotent producer.
    grant("TOPIC:orders:LITERAL:User:bob:WRITE");
    says(bob(&server, &["produce", "orders"]), "produced 3");
    says(bob(&server, &["idempotent", "orders"]), "produced 3");

    // Consuming needs READ on the topic and on the group.
    let out = bob(&server, &["consume", "orders", "readers", "6"]);
    assert!(
        out.contains("refused") && out.contains("AUTHORIZATION_FAILED"),
        "{out}"
    );
    grant("TOPIC:ord:PREFIXED:User:bob:READ");
    says(
        bob(&server, &["consume", "orders", "readers", "6"]),
        "refused GROUP_AUTHORIZATION_FAILED",
    );
    grant("GROUP:readers:LITERAL:User:bob:READ");
    says(
        bob(&server, &["consume", "orders", "readers", "6"]),
        "consumed 6",
    );

    // A transactional producer needs WRITE on its transactional id.
    says(
        bob(&server, &["transactional", "orders", "tx-bob"]),
        "refused TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
    );
    grant("TRANSACTIONAL_ID:tx-:PREFIXED:User:bob:WRITE");
    says(
        bob(&server, &["transactional", "orders", "tx-bob"]),
        "committed",
    );

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
    says(bob(&server, &["produce", "orders"]), "produced 3");
    says(
        admin(&server, &["revoke", "TOPIC:orders:LITERAL:User:bob:WRITE"]),
        "deleted 1",
    );
    says(
        bob(&server, &["produce", "orders"]),
        "TOPIC_AUTHORIZATION_FAILED",
    );
    let log = server.log();
    assert!(!log.contains(BOB_PASSWORD) && !log.contains(ADMIN_PASSWORD));
}

/// Fails with the whole output unless a client's `out` holds `want`.
#[track_caller]
fn says(out: String, want: &str) {
    assert!(out.contains(want), "{out}");
}

/// Grants `User:ANONYMOUS` one ACL (ALLOW from any host) over CreateAcls.
fn grant(c: &mut Conn, rt: i8, name: &str, op: i8) {
    let req = CreateAclsRequest::default().with_creations(vec![creation(
        rt,
        name,
        3,
        "User:ANONYMOUS",
        op,
        3,
    )]);
    let r: CreateAclsResponse = c.call(ApiKey::CreateAcls, 3, &req);
    assert_eq!(
        r.results[0].error_code, 0,
        "{:?}",
        r.results[0].error_message
    );
}

/// Removes the ACL [`grant`] made, over DeleteAcls.
fn revoke(c: &mut Conn, rt: i8, name: &str, op: i8) {
    let req = DeleteAclsRequest::default().with_filters(vec![
        DeleteAclsFilter::default()
            .with_resource_type_filter(rt)
            .with_resource_name_filter(Some(s(name)))
            .with_pattern_type_filter(3)
            .with_principal_filter(Some(s("User:ANONYMOUS")))
            .with_host_filter(None)
            .with_operation(op)
            .with_permission_type(3),
    ]);
    let r: DeleteAclsResponse = c.call(ApiKey::DeleteAcls, 3, &req);
    assert_eq!(r.filter_results[0].error_code, 0);
    assert_eq!(r.filter_results[0].matching_acls.len(), 1);
}

/// ListOffsets v7 (latest) of partition 0 of `topic`: its code.
fn list_offsets(c: &mut Conn, topic: &str) -> i16 {
    use kafka_protocol::messages::list_offsets_request::{
        ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic,
    };
    use kafka_protocol::messages::list_offsets_response::ListOffsetsResponse;
    let req = ListOffsetsRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_topics(vec![
            ListOffsetsTopic::default()
                .with_name(topic_name(topic))
                .with_partitions(vec![
                    ListOffsetsPartition::default()
                        .with_partition_index(0)
                        .with_timestamp(-1),
                ]),
        ]);
    let r: ListOffsetsResponse = c.call(ApiKey::ListOffsets, 7, &req);
    r.topics[0].partitions[0].error_code
}

/// DeleteTopics v6 of `topic`: its code.
fn delete_topic(c: &mut Conn, topic: &str) -> i16 {
    use kafka_protocol::messages::delete_topics_request::{DeleteTopicState, DeleteTopicsRequest};
    use kafka_protocol::messages::delete_topics_response::DeleteTopicsResponse;
    let req = DeleteTopicsRequest::default()
        .with_topics(vec![
            DeleteTopicState::default().with_name(Some(topic_name(topic))),
        ])
        .with_timeout_ms(10_000);
    let r: DeleteTopicsResponse = c.call(ApiKey::DeleteTopics, 6, &req);
    r.responses[0].error_code
}

/// DeleteRecords v2 of partition 0 of `topic` before `offset`: its code and
/// the low watermark.
fn delete_records(c: &mut Conn, topic: &str, offset: i64) -> (i16, i64) {
    use kafka_protocol::messages::delete_records_request::{
        DeleteRecordsPartition, DeleteRecordsRequest, DeleteRecordsTopic,
    };
    use kafka_protocol::messages::delete_records_response::DeleteRecordsResponse;
    let req = DeleteRecordsRequest::default()
        .with_topics(vec![
            DeleteRecordsTopic::default()
                .with_name(topic_name(topic))
                .with_partitions(vec![
                    DeleteRecordsPartition::default()
                        .with_partition_index(0)
                        .with_offset(offset),
                ]),
        ])
        .with_timeout_ms(10_000);
    let r: DeleteRecordsResponse = c.call(ApiKey::DeleteRecords, 2, &req);
    let p = &r.topics[0].partitions[0];
    (p.error_code, p.low_watermark)
}

/// DescribeConfigs v4 of one resource (2 a topic, 4 the broker): its code
/// and how many configs came back.
fn describe_configs(c: &mut Conn, rt: i8, name: &str) -> (i16, usize) {
    use kafka_protocol::messages::describe_configs_request::{
        DescribeConfigsRequest, DescribeConfigsResource,
    };
    use kafka_protocol::messages::describe_configs_response::DescribeConfigsResponse;
    let req = DescribeConfigsRequest::default().with_resources(vec![
        DescribeConfigsResource::default()
            .with_resource_type(rt)
            .with_resource_name(s(name))
            .with_configuration_keys(None),
    ]);
    let r: DescribeConfigsResponse = c.call(ApiKey::DescribeConfigs, 4, &req);
    (r.results[0].error_code, r.results[0].configs.len())
}

/// The response to `req`, sent at `version` under its own API key.
fn request<R: Request>(c: &mut Conn, version: i16, req: &R) -> R::Response {
    c.call(ApiKey::try_from(R::KEY).unwrap(), version, req)
}

/// Defines `$fn(c, rt, name, value)`, setting `retention.ms` of one
/// resource with `$module::$req` at `$version`: its code. AlterConfigs and
/// IncrementalAlterConfigs each have types of their own, built alike; the
/// incremental one's config also names its operation (`$op`).
macro_rules! alter_retention {
    ($fn:ident, $module:ident::$req:ident, $version:literal $(, $op:literal)?) => {
        fn $fn(c: &mut Conn, rt: i8, name: &str, value: &str) -> i16 {
            use kafka_protocol::messages::$module::{AlterConfigsResource, AlterableConfig, $req};
            let config = AlterableConfig::default()
                .with_name(s("retention.ms"))
                .with_value(Some(s(value)));
            $(let config = config.with_config_operation($op);)?
            let resource = AlterConfigsResource::default()
                .with_resource_type(rt)
                .with_resource_name(s(name))
                .with_configs(vec![config]);
            let req = $req::default().with_resources(vec![resource]);
            request(c, $version, &req).responses[0].error_code
        }
    };
}

// AlterConfigs v2; IncrementalAlterConfigs v1 SETting (0) the value.
alter_retention!(alter_configs, alter_configs_request::AlterConfigsRequest, 2);
alter_retention!(
    incremental_alter_configs,
    incremental_alter_configs_request::IncrementalAlterConfigsRequest,
    1,
    0
);

/// All three config APIs on one resource (the alters setting `value`)
/// refused with `code`, and no configs described.
fn config_apis_refused(c: &mut Conn, rt: i8, name: &str, value: &str, code: i16) {
    assert_eq!(describe_configs(c, rt, name), (code, 0));
    assert_eq!(alter_configs(c, rt, name, value), code);
    assert_eq!(incremental_alter_configs(c, rt, name, value), code);
}

/// DescribeConfigs of one resource served, with some configs.
fn configs_described(c: &mut Conn, rt: i8, name: &str) {
    let (code, configs) = describe_configs(c, rt, name);
    assert_eq!(code, 0);
    assert!(configs > 0);
}

/// FindCoordinator v3 of `key`, a group's (`key_type` 0) or a
/// transactional id's (1): its code.
fn find_coordinator(c: &mut Conn, key: &str, key_type: i8) -> i16 {
    let req = FindCoordinatorRequest::default()
        .with_key(s(key))
        .with_key_type(key_type);
    let r: FindCoordinatorResponse = c.call(ApiKey::FindCoordinator, 3, &req);
    r.error_code
}

/// InitProducerId v4 without a transactional id: its code and the
/// producer id and epoch granted.
fn init_idempotent(c: &mut Conn) -> (i16, i64, i16) {
    let r: InitProducerIdResponse = c.call(
        ApiKey::InitProducerId,
        4,
        &InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(kafka_protocol::messages::ProducerId(-1))
            .with_producer_epoch(-1),
    );
    (r.error_code, r.producer_id.0, r.producer_epoch)
}

/// An idempotent producer's batch: one record from `pid` at `epoch`,
/// sequence `seq`.
fn idempotent_batch(pid: i64, epoch: i16, seq: i32) -> Vec<u8> {
    let mut b = Vec::new();
    commitfs::record::encode_batch(&mut b, 0, 1, &[NewRecord::value(b"idem")]);
    b[43..51].copy_from_slice(&pid.to_be_bytes());
    b[51..53].copy_from_slice(&epoch.to_be_bytes());
    b[53..57].copy_from_slice(&seq.to_be_bytes());
    let crc = commitfs::record::compute_crc(&b);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

// Kafka's codes: resource types, operations, errors.
const TOPIC: i8 = 2;
const CLUSTER: i8 = 4;
const WRITE: i8 = 4;
const DELETE: i8 = 6;
const DESCRIBE: i8 = 8;
const DESCRIBE_CONFIGS: i8 = 10;
const ALTER_CONFIGS: i8 = 11;
const IDEMPOTENT_WRITE: i8 = 12;
const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;

/// ListOffsets, DeleteTopics, DeleteRecords, the three config APIs and
/// IDEMPOTENT_WRITE, each as Kafka's `KafkaApis` checks it: refused with
/// Kafka's code while User:ANONYMOUS lacks the ACL, served once the one
/// ACL the API needs is granted (and refused again when an ACL that does
/// not imply it is all there is). ANONYMOUS holds ALTER on the cluster
/// from the start, so it may grant itself each ACL over CreateAcls; a
/// first run as a super user gives it that and writes some records.
#[test]
fn each_api_needs_its_own_acl() {
    let tmp = tempfile::tempdir().unwrap();
    let data = data_dir_with(tmp.path(), &["lo-0", "dt-0", "dr-0", "cf-0", "w-0"]);
    let mut server = Server::start(&data, &[STANDARD, "super.users=User:ANONYMOUS"]);
    let mut c = Conn::new(&server.addr);
    for _ in 0..3 {
        assert_eq!(produce(&mut c, "dr"), 0);
    }
    grant(&mut c, CLUSTER, "kafka-cluster", 7);
    server.stop();

    let mut server = Server::start(&data, &[STANDARD]);
    let mut c = Conn::new(&server.addr);
    let denied = TOPIC_AUTHORIZATION_FAILED;

    // ListOffsets: DESCRIBE on the topic (WRITE implies it; ALTER_CONFIGS
    // does not).
    assert_eq!(list_offsets(&mut c, "lo"), denied);
    grant(&mut c, TOPIC, "lo", ALTER_CONFIGS);
    assert_eq!(list_offsets(&mut c, "lo"), denied);
    grant(&mut c, TOPIC, "lo", DESCRIBE);
    assert_eq!(list_offsets(&mut c, "lo"), 0);

    // DeleteRecords: DELETE on the topic; DESCRIBE is not enough.
    grant(&mut c, TOPIC, "dr", DESCRIBE);
    assert_eq!(delete_records(&mut c, "dr", 2), (denied, -1));
    grant(&mut c, TOPIC, "dr", DELETE);
    assert_eq!(delete_records(&mut c, "dr", 2), (0, 2));

    // DeleteTopics: DELETE on the topic.
    grant(&mut c, TOPIC, "dt", DESCRIBE);
    assert_eq!(delete_topic(&mut c, "dt"), denied);
    assert!(data.join("dt-0").exists());
    grant(&mut c, TOPIC, "dt", DELETE);
    assert_eq!(delete_topic(&mut c, "dt"), 0);

    // The config APIs: DESCRIBE_CONFIGS and ALTER_CONFIGS on the topic, or
    // on the cluster for the broker's; ALTER_CONFIGS implies
    // DESCRIBE_CONFIGS, not the other way round.
    config_apis_refused(&mut c, TOPIC, "cf", "100000", denied);
    grant(&mut c, TOPIC, "cf", DESCRIBE_CONFIGS);
    configs_described(&mut c, TOPIC, "cf");
    assert_eq!(alter_configs(&mut c, TOPIC, "cf", "100000"), denied);
    assert_eq!(
        incremental_alter_configs(&mut c, TOPIC, "cf", "100000"),
        denied
    );
    revoke(&mut c, TOPIC, "cf", DESCRIBE_CONFIGS);
    grant(&mut c, TOPIC, "cf", ALTER_CONFIGS);
    assert_eq!(describe_configs(&mut c, TOPIC, "cf").0, 0);
    assert_eq!(alter_configs(&mut c, TOPIC, "cf", "100000"), 0);
    assert_eq!(incremental_alter_configs(&mut c, TOPIC, "cf", "200000"), 0);
    let props = std::fs::read_to_string(data.join("cf-0/commitfs.properties")).unwrap();
    assert!(props.contains("retention.ms=200000"), "{props}");
    let cluster = CLUSTER_AUTHORIZATION_FAILED;
    config_apis_refused(&mut c, CLUSTER, "0", "1", cluster);
    grant(&mut c, CLUSTER, "kafka-cluster", DESCRIBE_CONFIGS);
    configs_described(&mut c, CLUSTER, "0");
    assert_eq!(alter_configs(&mut c, CLUSTER, "0", "1"), cluster);
    grant(&mut c, CLUSTER, "kafka-cluster", ALTER_CONFIGS);
    // Past the check: broker configs are not altered over the wire
    // (INVALID_REQUEST), but no longer for want of an ACL.
    assert_eq!(alter_configs(&mut c, CLUSTER, "0", "1"), 42);
    assert_eq!(incremental_alter_configs(&mut c, CLUSTER, "0", "1"), 42);

    // IDEMPOTENT_WRITE: InitProducerId without a transactional id needs it
    // on the cluster, or WRITE on some topic (DESCRIBE, DELETE and the
    // configs ACLs held by now are not enough).
    assert_eq!(init_idempotent(&mut c).0, cluster);
    grant(&mut c, TOPIC, "w", WRITE);
    assert_eq!(init_idempotent(&mut c).0, 0);
    revoke(&mut c, TOPIC, "w", WRITE);
    assert_eq!(init_idempotent(&mut c).0, cluster);
    grant(&mut c, CLUSTER, "kafka-cluster", IDEMPOTENT_WRITE);
    let (code, pid, epoch) = init_idempotent(&mut c);
    assert_eq!(code, 0);
    assert!(pid >= 0);
    // An idempotent batch is a Produce: WRITE on its topic, which
    // IDEMPOTENT_WRITE does not give (Kafka 3.0 dropped the cluster check
    // of idempotent Produce, KIP-679).
    let batch = idempotent_batch(pid, epoch, 0);
    assert_eq!(produce_to(&mut c, "w", batch.clone()).0, denied);
    grant(&mut c, TOPIC, "w", WRITE);
    assert_eq!(produce_to(&mut c, "w", batch).0, 0);
    server.stop();
    // The first refusals are logged as Kafka's authorizer logs them (later
    // ones may fall to the log's rate limit on repeats).
    let log = server.log();
    for denial in [
        "is Denied operation = DESCRIBE from host = 127.0.0.1 on resource = Topic:LITERAL:lo",
        "is Denied operation = DELETE from host = 127.0.0.1 on resource = Topic:LITERAL:dr",
    ] {
        assert!(log.contains(denial), "no {denial:?} in:\n{log}");
    }
}
