//! Cases of Kafka's `StandardAuthorizerTest` and `AclAuthorizerTest`.

use std::net::IpAddr;

use super::*;
use crate::acl::model::tests::binding;
use crate::acl::model::{AclBinding, PatternType, Permission, ResourceType};

use Operation::*;
use PatternType::{Literal, Prefixed};
use Permission::{Allow, Deny};
use ResourceType::{Cluster, Group, Topic, TransactionalId};

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn authorizer(acls: &[AclBinding], super_users: &[&str], allow_everyone: bool) -> Authorizer {
    let store = AclStore::in_memory();
    store.create(acls).unwrap();
    Authorizer::new(
        AuthorizerSettings {
            super_users: super_users.iter().map(|s| s.to_string()).collect(),
            allow_everyone_if_no_acl: allow_everyone,
        },
        store,
    )
}

/// No super users, and nothing allowed where no ACL says so: the setting
/// most cases test.
fn rules(acls: &[AclBinding]) -> Authorizer {
    authorizer(acls, &[], false)
}

fn can(a: &Authorizer, who: &str, op: Operation, rt: ResourceType, name: &str) -> bool {
    let p = Principal::parse(who).unwrap();
    a.authorize(&p, ip("192.168.0.1"), op, rt, name).allowed()
}

#[test]
fn implications_of_an_allow() {
    // Bob allowed one operation on each topic.
    let grants = [
        ("r", Read),
        ("w", Write),
        ("d", Delete),
        ("a", Alter),
        ("ac", AlterConfigs),
        ("all", All),
    ];
    let a = rules(&grants.map(|(t, op)| binding(Topic, t, Literal, "User:bob", "*", op, Allow)));
    for t in ["r", "w", "d", "a", "all"] {
        assert!(can(&a, "User:bob", Describe, Topic, t), "{t}");
    }
    assert!(can(&a, "User:bob", DescribeConfigs, Topic, "ac"));
    // ALTER_CONFIGS does not imply DESCRIBE, ALTER not ALTER_CONFIGS, READ
    // not WRITE, nor WRITE READ.
    for (op, t) in [
        (Describe, "ac"),
        (AlterConfigs, "a"),
        (Write, "r"),
        (Read, "w"),
    ] {
        assert!(!can(&a, "User:bob", op, Topic, t), "{op} {t}");
    }
    for op in [
        Read,
        Write,
        Create,
        Delete,
        Alter,
        Describe,
        DescribeConfigs,
        AlterConfigs,
    ] {
        assert!(can(&a, "User:bob", op, Topic, "all"), "{op}");
    }
}

#[test]
fn deny_wins_and_a_deny_implies_nothing() {
    let a = rules(&[
        binding(Topic, "*", Literal, "User:*", "*", All, Allow),
        binding(Topic, "secret", Literal, "User:bob", "*", Read, Deny),
        binding(Topic, "hidden", Literal, "User:bob", "*", All, Deny),
    ]);
    // A DENY of READ is not of DESCRIBE, and is bob's alone.
    for (who, op, t) in [
        ("User:bob", Describe, "secret"),
        ("User:alice", Read, "secret"),
        ("User:bob", Write, "other"),
    ] {
        assert!(can(&a, who, op, Topic, t), "{who} {op} {t}");
    }
    for (op, t) in [(Read, "secret"), (Describe, "hidden")] {
        assert!(!can(&a, "User:bob", op, Topic, t), "{op} {t}");
    }
}

#[test]
fn prefixed_patterns() {
    // Bob's READ allowed or denied on prefixes.
    let patterns = [
        (Topic, "foo", Allow),
        (Topic, "foobar", Deny),
        (Group, "g-", Allow),
    ];
    let a =
        rules(&patterns.map(|(rt, p, perm)| binding(rt, p, Prefixed, "User:bob", "*", Read, perm)));
    let reads = |rt, name| can(&a, "User:bob", Read, rt, name);
    for t in ["foo", "food"] {
        assert!(reads(Topic, t), "{t}");
    }
    for t in ["foobarbaz", "fo"] {
        assert!(!reads(Topic, t), "{t}");
    }
    assert!(!reads(Topic, "g-1"), "types are apart");
    assert!(reads(Group, "g-1"));
    assert!(!reads(Group, "g"));
}

#[test]
fn wildcard_principal_and_hosts() {
    let bob = Principal::parse("User:bob").unwrap();
    let a = rules(&[
        binding(Topic, "t", Literal, "User:*", "*", Read, Allow),
        binding(Topic, "u", Literal, "User:bob", "192.168.0.1", Write, Allow),
        binding(Topic, "u", Literal, "User:*", "10.0.0.1", Write, Deny),
    ]);
    assert!(can(&a, "User:anyone", Read, Topic, "t"));
    // `matchingPrincipals` always holds `User:*`, whatever the type.
    assert!(can(&a, "Group:x", Read, Topic, "t"));
    for (host, allowed) in [
        ("192.168.0.1", true),
        ("192.168.0.2", false),
        ("10.0.0.1", false),
    ] {
        let rule = a.authorize(&bob, ip(host), Write, Topic, "u");
        assert_eq!(rule.allowed(), allowed, "{host}");
    }
}

#[test]
fn super_users_and_the_default() {
    let a = authorizer(
        &[binding(Topic, "*", Literal, "User:*", "*", All, Deny)],
        &["User:admin", "User:CN=x,O=y"],
        false,
    );
    assert!(
        can(&a, "User:admin", Write, Topic, "t"),
        "a super user passes a DENY"
    );
    assert!(can(&a, "User:CN=x,O=y", Alter, Cluster, "kafka-cluster"));
    assert!(!can(&a, "User:bob", Write, Topic, "t"));
    assert!(
        !can(&a, "User:bob", Read, Group, "g"),
        "no ACL: denied by default"
    );
    assert_eq!(
        a.authorize(&Principal::user("bob"), ip("1.2.3.4"), Read, Group, "g"),
        Rule::NoAcl(false)
    );
    let everyone = authorizer(
        &[binding(
            Topic,
            "mine",
            Literal,
            "User:alice",
            "*",
            Read,
            Allow,
        )],
        &[],
        true,
    );
    assert!(
        can(&everyone, "User:bob", Read, Group, "g"),
        "no ACL on it: allowed"
    );
    assert!(can(&everyone, "User:bob", Write, Topic, "other"));
    assert!(
        !can(&everyone, "User:bob", Read, Topic, "mine"),
        "an ACL on the resource: the default no longer applies"
    );
    let rule = everyone.authorize(&Principal::user("bob"), ip("1.2.3.4"), Read, Topic, "mine");
    assert_eq!(rule, Rule::Deny);
    assert_eq!(rule.to_string(), "DefaultDeny");
}

/// `AuthorizerTest`'s authorizeByResourceType cases.
#[test]
fn by_resource_type() {
    let bob = Principal::user("bob");
    let h = ip("1.2.3.4");
    let check = |acls: &[AclBinding]| rules(acls).authorize_by_resource_type(&bob, h, Write, Topic);
    assert!(!check(&[]));
    // One ACL allowing on topic `t` (TransactionalId: another type).
    for (rt, principal, op, expected) in [
        (Topic, "User:bob", Write, true),
        (Topic, "User:bob", All, true),
        (Topic, "User:bob", Read, false),
        (Topic, "User:alice", Write, false),
        (Topic, "User:*", Write, true),
        (TransactionalId, "User:bob", Write, false),
    ] {
        let one = binding(rt, "t", Literal, principal, "*", op, Allow);
        assert_eq!(check(&[one]), expected, "{rt:?} {principal} {op}");
    }
    // Bob's WRITE allowed on one pattern and denied on another: a deny
    // that covers every name the allow does wins.
    for (allowed, denied, pt, expected) in [
        ("t", "t", Literal, false),
        ("abc", "ab", Prefixed, false),
        ("abc", "abcd", Prefixed, true),
        ("*", "*", Literal, false),
        ("t", "u", Literal, true),
    ] {
        let acls = [
            binding(Topic, allowed, pt, "User:bob", "*", Write, Allow),
            binding(Topic, denied, pt, "User:bob", "*", Write, Deny),
        ];
        assert_eq!(check(&acls), expected, "{allowed} {denied} {pt:?}");
    }
    let sup = authorizer(&[], &["User:bob"], false);
    assert!(sup.authorize_by_resource_type(&bob, h, Write, Topic));
    let everyone = authorizer(&[], &[], true);
    assert!(everyone.authorize_by_resource_type(&bob, h, Write, Topic));
}

#[test]
fn audit_names() {
    assert_eq!(resource_type_name(TransactionalId), "TransactionalId");
    assert_eq!(resource_type_name(Topic), "Topic");
}
