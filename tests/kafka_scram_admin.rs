//! SCRAM users managed over the Kafka protocol: confluent-kafka's
//! AdminClient (librdkafka salts and hashes the passwords itself, an
//! implementation we did not write) creates, describes, changes and
//! deletes users; the credentials it sent check against the passwords with
//! our own hashing, the file on disk holds no password, and a restart keeps
//! the users. The raw client checks each refusal's code and Kafka's text.

mod kafka_support;

use bytes::Bytes;
use commitfs::kafka::auth::{CredentialStore, SCRAM_CREDENTIALS_FILE, ScramMechanism, server_for};
use kafka_protocol::messages::ApiKey;
use kafka_protocol::messages::alter_user_scram_credentials_request::{
    AlterUserScramCredentialsRequest, ScramCredentialDeletion, ScramCredentialUpsertion,
};
use kafka_protocol::messages::alter_user_scram_credentials_response::{
    AlterUserScramCredentialsResponse, AlterUserScramCredentialsResult,
};
use kafka_protocol::messages::api_versions_request::ApiVersionsRequest;
use kafka_protocol::messages::api_versions_response::ApiVersionsResponse;
use kafka_protocol::messages::describe_user_scram_credentials_request::{
    DescribeUserScramCredentialsRequest, UserName,
};
use kafka_protocol::messages::describe_user_scram_credentials_response::DescribeUserScramCredentialsResponse;
use kafka_protocol::protocol::StrBytes;
use kafka_support::{Conn, Server, python, require, run_python};

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// Runs one AdminClient call; prints a line per user, sorted.
const ADMIN: &str = r#"
from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
    UserScramCredentialUpsertion, UserScramCredentialDeletion)
from confluent_kafka import KafkaException
import sys
a = AdminClient({"bootstrap.servers": sys.argv[1], "socket.timeout.ms": 30000})
op, args = sys.argv[2], sys.argv[3:]
out = []
def outcome(f, ok):
    try:
        return ok(f.result(timeout=60))
    except KafkaException as e:
        err = e.args[0]
        # librdkafka 2.16 reads a describe result's message one byte too
        # far, into the next field (the empty credential list's length, 1);
        # the raw test checks the bytes sent.
        return "%s %s" % (err.name(), err.str().rstrip("\x01"))
if op == "alter":
    alterations = []
    for spec in args:
        kind, user, mech = spec.split(":")[:3]
        m = getattr(ScramMechanism, mech)
        if kind == "upsert":
            iterations, password = spec.split(":")[3:5]
            info = ScramCredentialInfo(m, int(iterations))
            alterations.append(UserScramCredentialUpsertion(user, info, password.encode()))
        else:
            alterations.append(UserScramCredentialDeletion(user, m))
    for user, f in a.alter_user_scram_credentials(alterations).items():
        out.append("%s %s" % (user, outcome(f, lambda r: "ok")))
else:
    def infos(d):
        return ",".join(sorted("%s:%d" % (i.mechanism.name, i.iterations)
                               for i in d.scram_credential_infos))
    if args:
        for user, f in a.describe_user_scram_credentials(args).items():
            out.append("%s %s" % (user, outcome(f, infos)))
    else:
        for user, d in a.describe_user_scram_credentials().result(timeout=60).items():
            out.append("%s %s" % (user, infos(d)))
print("\n".join(sorted(out)))
"#;

fn admin(py: &std::path::Path, server: &Server, op: &str, args: &[&str]) -> Vec<String> {
    let mut all = vec![server.addr.as_str(), op];
    all.extend_from_slice(args);
    let out = run_python(py, ADMIN, &all);
    out.lines().map(str::to_string).collect()
}

#[test]
fn confluent_kafka_manages_users_and_a_restart_keeps_them() {
    let Some(py) = require(python()) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let mut server = Server::start(&data, &[]);

    assert_eq!(
        admin(
            &py,
            &server,
            "alter",
            &[
                "upsert:alice:SCRAM_SHA_256:8192:alice-secret",
                "upsert:bob:SCRAM_SHA_512:4096:bob-secret",
            ],
        ),
        ["alice ok", "bob ok"]
    );
    assert_eq!(
        admin(&py, &server, "describe", &[]),
        ["alice SCRAM_SHA_256:8192", "bob SCRAM_SHA_512:4096"]
    );
    // A second mechanism for alice, with another password.
    assert_eq!(
        admin(
            &py,
            &server,
            "alter",
            &["upsert:alice:SCRAM_SHA_512:4096:alice-secret-2"]
        ),
        ["alice ok"]
    );
    assert_eq!(
        admin(&py, &server, "describe", &["alice", "nobody"]),
        [
            "alice SCRAM_SHA_256:8192,SCRAM_SHA_512:4096",
            "nobody RESOURCE_NOT_FOUND Attempt to describe a user credential that does not exist: nobody",
        ]
    );
    assert_eq!(
        admin(&py, &server, "alter", &["delete:bob:SCRAM_SHA_512"]),
        ["bob ok"]
    );
    assert_eq!(
        admin(&py, &server, "alter", &["delete:bob:SCRAM_SHA_512"]),
        ["bob RESOURCE_NOT_FOUND Attempt to delete a user credential that does not exist"]
    );
    assert_eq!(
        admin(&py, &server, "describe", &["bob"]),
        ["bob RESOURCE_NOT_FOUND Attempt to describe a user credential that does not exist: bob"]
    );

    // librdkafka salted the passwords; our hashing agrees with it.
    let check = |store: &CredentialStore| {
        let m256 = ScramMechanism::Sha256;
        let m512 = ScramMechanism::Sha512;
        let alice = store.get("alice", m256).expect("alice's SCRAM-SHA-256");
        assert_eq!(alice.iterations, 8192);
        assert!(alice.matches_password(m256, b"alice-secret"));
        assert!(!alice.matches_password(m256, b"alice-secret-2"));
        let alice = store.get("alice", m512).expect("alice's SCRAM-SHA-512");
        assert!(alice.matches_password(m512, b"alice-secret-2"));
        assert!(store.get("bob", m512).is_none());
    };
    check(&CredentialStore::open(&data).unwrap());
    // PLAIN checks against the SCRAM-SHA-512 credential.
    let store = CredentialStore::open(&data).unwrap();
    let mut plain = server_for("PLAIN", &store).unwrap();
    plain.evaluate(b"\0alice\0alice-secret-2").unwrap();
    assert_eq!(plain.authorization_id(), Some("alice"));

    let file = std::fs::read(data.join(SCRAM_CREDENTIALS_FILE)).unwrap();
    let text = String::from_utf8(file).unwrap();
    for secret in ["alice-secret", "bob-secret"] {
        assert!(!text.contains(secret), "{text}");
    }
    assert_eq!(text.lines().count(), 3, "{text}");

    assert!(server.stop(), "clean stop");
    let server = Server::start(&data, &[]);
    assert_eq!(
        admin(&py, &server, "describe", &[]),
        ["alice SCRAM_SHA_256:8192,SCRAM_SHA_512:4096"]
    );
    check(&CredentialStore::open(&data).unwrap());
}

fn upsertion(name: &str, mechanism: i8, iterations: i32) -> ScramCredentialUpsertion {
    ScramCredentialUpsertion::default()
        .with_name(s(name))
        .with_mechanism(mechanism)
        .with_iterations(iterations)
        .with_salt(Bytes::from_static(b"salt"))
        .with_salted_password(Bytes::from(vec![7u8; 32]))
}

fn deletion(name: &str, mechanism: i8) -> ScramCredentialDeletion {
    ScramCredentialDeletion::default()
        .with_name(s(name))
        .with_mechanism(mechanism)
}

/// The result Kafka gives a user's alteration: compared whole, tagged
/// fields included.
fn answered(user: &str, code: i16, text: Option<&str>) -> AlterUserScramCredentialsResult {
    AlterUserScramCredentialsResult::default()
        .with_user(s(user))
        .with_error_code(code)
        .with_error_message(text.map(s))
}

fn refused(user: &str, code: i16, text: &str) -> AlterUserScramCredentialsResult {
    answered(user, code, Some(text))
}

#[test]
fn refusals_over_the_raw_protocol() {
    const RESOURCE_NOT_FOUND: i16 = 91;
    const DUPLICATE_RESOURCE: i16 = 92;
    const UNACCEPTABLE_CREDENTIAL: i16 = 93;
    const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let server = Server::start(&data, &[]);
    let mut c = Conn::new(&server.addr);

    let versions: ApiVersionsResponse =
        c.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    for key in [50, 51] {
        let v = (versions.api_keys.iter())
            .find(|k| k.api_key == key)
            .unwrap_or_else(|| panic!("API {key} advertised"));
        assert_eq!((v.min_version, v.max_version), (0, 0));
    }

    let alter = |c: &mut Conn, d: Vec<ScramCredentialDeletion>, u| {
        let req = AlterUserScramCredentialsRequest::default()
            .with_deletions(d)
            .with_upsertions(u);
        let r: AlterUserScramCredentialsResponse =
            c.call(ApiKey::AlterUserScramCredentials, 0, &req);
        r.results
    };
    assert_eq!(
        alter(&mut c, vec![], vec![upsertion("alice", 1, 4096)]),
        [answered("alice", 0, None)]
    );
    let twice = "A user credential cannot be altered twice in the same request";
    let got = alter(
        &mut c,
        vec![deletion("nobody", 1), deletion("", 2), deletion("carol", 9)],
        vec![
            upsertion("dave", 1, 4095),
            upsertion("erin", 2, 16385),
            upsertion("frank", 0, 4096),
            upsertion("alice", 1, 4096),
            upsertion("alice", 2, 4096),
        ],
    );
    assert_eq!(
        got,
        [
            refused(
                "nobody",
                RESOURCE_NOT_FOUND,
                "Attempt to delete a user credential that does not exist"
            ),
            refused("", UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
            refused(
                "carol",
                UNSUPPORTED_SASL_MECHANISM,
                "Unknown SCRAM mechanism"
            ),
            refused("dave", UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
            refused("erin", UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
            refused(
                "frank",
                UNSUPPORTED_SASL_MECHANISM,
                "Unknown SCRAM mechanism"
            ),
            refused("alice", DUPLICATE_RESOURCE, twice),
        ]
    );

    let describe = |c: &mut Conn, users: Option<&[&str]>| {
        let users = users.map(|us| {
            us.iter()
                .map(|u| UserName::default().with_name(s(u)))
                .collect()
        });
        let req = DescribeUserScramCredentialsRequest::default().with_users(users);
        let r: DescribeUserScramCredentialsResponse =
            c.call(ApiKey::DescribeUserScramCredentials, 0, &req);
        assert_eq!(r.error_code, 0);
        r.results
            .into_iter()
            .map(|r| {
                let infos: Vec<(i8, i32)> = (r.credential_infos.iter())
                    .map(|i| (i.mechanism, i.iterations))
                    .collect();
                (
                    r.user.to_string(),
                    r.error_code,
                    r.error_message.map(|m| m.to_string()),
                    infos,
                )
            })
            .collect::<Vec<_>>()
    };
    let all = describe(&mut c, None);
    assert_eq!(
        all,
        [("alice".to_string(), 0, Some(String::new()), vec![(1, 4096)])]
    );
    assert_eq!(describe(&mut c, Some(&[])), all);
    let got = describe(&mut c, Some(&["bob", "alice", "bob"]));
    assert_eq!(
        got,
        [
            (
                "bob".to_string(),
                DUPLICATE_RESOURCE,
                Some("Cannot describe SCRAM credentials for the same user twice in a single request: bob".to_string()),
                vec![]
            ),
            ("alice".to_string(), 0, Some(String::new()), vec![(1, 4096)]),
        ]
    );
    let got = describe(&mut c, Some(&[""]));
    assert_eq!(got[0].1, RESOURCE_NOT_FOUND);
    assert_eq!(
        got[0].2.as_deref(),
        Some("Attempt to describe a user credential that does not exist: ")
    );
}
