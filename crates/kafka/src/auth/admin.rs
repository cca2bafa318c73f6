//! AlterUserScramCredentials (key 51) and DescribeUserScramCredentials
//! (key 50), v0 as Kafka serves them: the validation, codes and texts of
//! Kafka's `ScramControlManager` (alter) and `ScramImage.describe`.
//!
//! An alteration is applied all or none, as the controller's records are
//! (`ControllerResult.atomicOf`). Kafka answers from hash maps, so its
//! order of results is arbitrary; here it is deletions, then upsertions,
//! then refusals, each in the request's order.

use std::collections::{HashMap, HashSet};

use kafka_protocol::ResponseError;
use kafka_protocol::messages::alter_user_scram_credentials_request::AlterUserScramCredentialsRequest;
use kafka_protocol::messages::alter_user_scram_credentials_response::{
    AlterUserScramCredentialsResponse, AlterUserScramCredentialsResult,
};
use kafka_protocol::messages::describe_user_scram_credentials_request::DescribeUserScramCredentialsRequest;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResponse, DescribeUserScramCredentialsResult,
};
use kafka_protocol::protocol::StrBytes;
use log::info;

use super::credentials::{Change, CredentialStore};
use super::formatter::{ScramCredential, ScramMechanism};
use crate::acl::{self, Operation};
use crate::broker::Broker;
use crate::error::{Family, code_for, message_for};
use crate::network::session::Session;
use commitfs_storage::StorageError;

/// A refusal: a code and Kafka's text (`None` where Kafka sends none).
type ScramRefusal = (ResponseError, Option<String>);

fn refused(code: ResponseError, text: &str) -> ScramRefusal {
    (code, Some(text.to_string()))
}

/// `validateScramUsernameAndMechanism`.
fn validate_name_and_mechanism(name: &str, mechanism: i8) -> Result<ScramMechanism, ScramRefusal> {
    if name.is_empty() {
        return Err(refused(
            ResponseError::UnacceptableCredential,
            "Username must not be empty",
        ));
    }
    ScramMechanism::from_type(mechanism).ok_or_else(|| {
        refused(
            ResponseError::UnsupportedSaslMechanism,
            "Unknown SCRAM mechanism",
        )
    })
}

/// Users in the order first seen, each with what is decided for it.
struct Decisions<T> {
    order: Vec<String>,
    by_user: HashMap<String, T>,
}

impl<T> Decisions<T> {
    fn new() -> Self {
        Decisions {
            order: Vec::new(),
            by_user: HashMap::new(),
        }
    }

    fn insert(&mut self, user: &str, t: T) {
        if self.by_user.insert(user.to_string(), t).is_none() {
            self.order.push(user.to_string());
        }
    }

    fn remove(&mut self, user: &str) -> Option<T> {
        self.by_user.remove(user)
    }

    fn contains(&self, user: &str) -> bool {
        self.by_user.contains_key(user)
    }

    /// What is still decided, in first-seen order.
    fn into_iter(mut self) -> impl Iterator<Item = (String, T)> {
        self.order
            .into_iter()
            .filter_map(move |u| self.by_user.remove(&u).map(|t| (u, t)))
    }
}

pub fn alter(
    b: &Broker,
    s: &Session,
    request: AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    if !acl::cluster(b, s, Operation::Alter) {
        // `AlterUserScramCredentialsRequest.getErrorResponse`: every user named.
        let code = ResponseError::ClusterAuthorizationFailed.code();
        let users = (request.deletions.iter().map(|d| d.name.to_string()))
            .chain(request.upsertions.iter().map(|u| u.name.to_string()));
        let results = users.map(|u| result(&u, code, None)).collect();
        return AlterUserScramCredentialsResponse::default().with_results(results);
    }
    alter_store(&b.scram, request)
}

fn alter_store(
    store: &CredentialStore,
    request: AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    const TWICE: &str = "A user credential cannot be altered twice in the same request";
    let mut deletions: Decisions<ScramMechanism> = Decisions::new();
    let mut upserts = Decisions::new();
    let mut errors: Decisions<ScramRefusal> = Decisions::new();
    for d in &request.deletions {
        let name: &str = &d.name;
        if errors.contains(name) {
            continue;
        }
        if deletions.remove(name).is_some() {
            errors.insert(name, refused(ResponseError::DuplicateResource, TWICE));
            continue;
        }
        let checked =
            validate_name_and_mechanism(name, d.mechanism).and_then(|m| match store.get(name, m) {
                Some(_) => Ok(m),
                None => Err(refused(
                    ResponseError::ResourceNotFound,
                    "Attempt to delete a user credential that does not exist",
                )),
            });
        match checked {
            Ok(m) => deletions.insert(name, m),
            Err(e) => errors.insert(name, e),
        }
    }
    for u in &request.upsertions {
        let name: &str = &u.name;
        if errors.contains(name) {
            continue;
        }
        if deletions.remove(name).is_some() || upserts.remove(name).is_some() {
            errors.insert(name, refused(ResponseError::DuplicateResource, TWICE));
            continue;
        }
        let checked = validate_name_and_mechanism(name, u.mechanism)
            .and_then(|m| iterations_in_bounds(m, u.iterations));
        match checked {
            Ok(m) => upserts.insert(name, (m, u)),
            Err(e) => errors.insert(name, e),
        }
    }
    let mut changes = Vec::new();
    let mut done = Vec::new();
    for (user, mechanism) in deletions.into_iter() {
        changes.push(Change::Delete {
            user: user.clone(),
            mechanism,
        });
        done.push(user);
    }
    for (user, (mechanism, u)) in upserts.into_iter() {
        if u.salted_password.is_empty() {
            // `finishUpsertion`: Java's HMAC refuses an empty key, and
            // `ApiError.fromThrowable` sends an unexpected failure without
            // its text.
            errors.insert(&user, (ResponseError::UnknownServerError, None));
            continue;
        }
        let credential = ScramCredential::from_salted_password(
            mechanism,
            &u.salt,
            &u.salted_password,
            u.iterations,
        );
        changes.push(Change::Upsert {
            user: user.clone(),
            mechanism,
            credential,
        });
        done.push(user);
    }
    let failed = apply(store, &changes);
    let (code, text) = match failed {
        Some((code, text)) => (code.code(), text),
        None => (0, None),
    };
    let mut results: Vec<AlterUserScramCredentialsResult> = done
        .into_iter()
        .map(|user| result(&user, code, text.clone()))
        .collect();
    results.extend(
        errors
            .into_iter()
            .map(|(user, (code, text))| result(&user, code.code(), text)),
    );
    AlterUserScramCredentialsResponse::default().with_results(results)
}

/// `ScramControlManager`'s bounds on a credential's iterations.
fn iterations_in_bounds(
    m: ScramMechanism,
    iterations: i32,
) -> Result<ScramMechanism, ScramRefusal> {
    if iterations < m.min_iterations() {
        Err(refused(
            ResponseError::UnacceptableCredential,
            "Too few iterations",
        ))
    } else if iterations > m.max_iterations() {
        Err(refused(
            ResponseError::UnacceptableCredential,
            "Too many iterations",
        ))
    } else {
        Ok(m)
    }
}

/// Writes the changes (a request refused whole leaves the file alone), and
/// logs each; what every change gets when the file could not be written.
fn apply(store: &CredentialStore, changes: &[Change]) -> Option<ScramRefusal> {
    let applied = if changes.is_empty() {
        Ok(())
    } else {
        store.apply(changes)
    };
    match applied {
        Ok(()) => {
            for c in changes {
                match c {
                    Change::Upsert {
                        user, mechanism, ..
                    } => info!(
                        "Kafka: SCRAM credential of {user:?} for {} set",
                        mechanism.mechanism_name()
                    ),
                    Change::Delete { user, mechanism } => info!(
                        "Kafka: SCRAM credential of {user:?} for {} deleted",
                        mechanism.mechanism_name()
                    ),
                }
            }
            None
        }
        Err(e) => Some(storage_refusal(&e)),
    }
}

/// What a user's alteration gets when the file could not be written.
fn storage_refusal(e: &StorageError) -> ScramRefusal {
    let what = "AlterUserScramCredentials (saving the credentials)";
    (code_for(Family::Metadata, what, e), Some(message_for(e)))
}

fn result(user: &str, code: i16, text: Option<String>) -> AlterUserScramCredentialsResult {
    AlterUserScramCredentialsResult::default()
        .with_user(StrBytes::from_string(user.to_string()))
        .with_error_code(code)
        .with_error_message(text.map(StrBytes::from_string))
}

pub fn describe(
    b: &Broker,
    s: &Session,
    request: DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    if !acl::cluster(b, s, Operation::Describe) {
        return DescribeUserScramCredentialsResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code());
    }
    describe_store(&b.scram, request)
}

/// `ScramImage.describe`: no users (null or empty) is every user. A user
/// found gets Kafka's default message, an empty string, as Kafka's does.
fn describe_store(
    store: &CredentialStore,
    request: DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    let asked: Vec<String> = (request.users.unwrap_or_default().iter())
        .map(|u| u.name.to_string())
        .collect();
    let mut users: Vec<(String, bool)> = Vec::new();
    if asked.is_empty() {
        users = store.users().into_iter().map(|u| (u, false)).collect();
    } else {
        let mut seen = HashSet::new();
        let mut twice = HashSet::new();
        for u in &asked {
            if !seen.insert(u.as_str()) {
                twice.insert(u.as_str());
            }
        }
        let mut listed = HashSet::new();
        for u in &asked {
            if listed.insert(u.as_str()) {
                users.push((u.clone(), twice.contains(u.as_str())));
            }
        }
    }
    let results = users
        .into_iter()
        .map(|(user, twice)| {
            let r = DescribeUserScramCredentialsResult::default()
                .with_user(StrBytes::from_string(user.clone()));
            let found = store.describe(&user);
            if twice {
                r.with_error_code(ResponseError::DuplicateResource.code())
                    .with_error_message(Some(StrBytes::from_string(format!(
                        "Cannot describe SCRAM credentials for the same user twice in a single request: {user}"
                    ))))
            } else if found.is_empty() {
                r.with_error_code(ResponseError::ResourceNotFound.code())
                    .with_error_message(Some(StrBytes::from_string(format!(
                        "Attempt to describe a user credential that does not exist: {user}"
                    ))))
            } else {
                r.with_credential_infos(
                    found
                        .into_iter()
                        .map(|(m, iterations)| {
                            CredentialInfo::default()
                                .with_mechanism(m.type_id())
                                .with_iterations(iterations)
                        })
                        .collect(),
                )
            }
        })
        .collect();
    DescribeUserScramCredentialsResponse::default().with_results(results)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use kafka_protocol::messages::alter_user_scram_credentials_request::{
        ScramCredentialDeletion, ScramCredentialUpsertion,
    };
    use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;

    fn upsert(
        name: &str,
        mechanism: i8,
        iterations: i32,
        password: &str,
    ) -> ScramCredentialUpsertion {
        let salt = b"some-salt".to_vec();
        let salted = ScramMechanism::from_type(mechanism)
            .map(|m| m.salted_password(password.as_bytes(), &salt, iterations.clamp(1, 16384)))
            .unwrap_or_else(|| vec![1; 32]);
        ScramCredentialUpsertion::default()
            .with_name(StrBytes::from_string(name.to_string()))
            .with_mechanism(mechanism)
            .with_iterations(iterations)
            .with_salt(Bytes::from(salt))
            .with_salted_password(Bytes::from(salted))
    }

    fn delete(name: &str, mechanism: i8) -> ScramCredentialDeletion {
        ScramCredentialDeletion::default()
            .with_name(StrBytes::from_string(name.to_string()))
            .with_mechanism(mechanism)
    }

    fn alter(
        store: &CredentialStore,
        deletions: Vec<ScramCredentialDeletion>,
        upsertions: Vec<ScramCredentialUpsertion>,
    ) -> Vec<(String, i16, Option<String>)> {
        let r = AlterUserScramCredentialsRequest::default()
            .with_deletions(deletions)
            .with_upsertions(upsertions);
        alter_store(store, r)
            .results
            .into_iter()
            .map(|r| {
                (
                    r.user.to_string(),
                    r.error_code,
                    r.error_message.map(|m| m.to_string()),
                )
            })
            .collect()
    }

    /// A user, its code and message, and (mechanism, iterations) pairs.
    type DescribedUser = (String, i16, Option<String>, Vec<(i8, i32)>);

    fn describe(store: &CredentialStore, users: Option<&[&str]>) -> Vec<DescribedUser> {
        let users = users.map(|us| {
            us.iter()
                .map(|u| UserName::default().with_name(StrBytes::from_string(u.to_string())))
                .collect()
        });
        let r = describe_store(
            store,
            DescribeUserScramCredentialsRequest::default().with_users(users),
        );
        assert_eq!(r.error_code, 0);
        r.results
            .into_iter()
            .map(|r| {
                (
                    r.user.to_string(),
                    r.error_code,
                    r.error_message.map(|m| m.to_string()),
                    r.credential_infos
                        .iter()
                        .map(|c| (c.mechanism, c.iterations))
                        .collect(),
                )
            })
            .collect()
    }

    fn ok(user: &str) -> (String, i16, Option<String>) {
        (user.to_string(), 0, None)
    }

    fn err(user: &str, code: ResponseError, text: &str) -> (String, i16, Option<String>) {
        (user.to_string(), code.code(), Some(text.to_string()))
    }

    #[test]
    fn create_describe_change_delete() {
        let store = CredentialStore::in_memory();
        assert_eq!(
            alter(
                &store,
                vec![],
                vec![upsert("alice", 1, 4096, "a1"), upsert("bob", 2, 8192, "b")]
            ),
            vec![ok("alice"), ok("bob")]
        );
        let alice = store.get("alice", ScramMechanism::Sha256).unwrap();
        assert!(alice.matches_password(ScramMechanism::Sha256, b"a1"));
        assert_eq!(
            alter(&store, vec![], vec![upsert("alice", 2, 4096, "a2")]),
            vec![ok("alice")]
        );
        assert_eq!(
            describe(&store, None),
            vec![
                (
                    "alice".into(),
                    0,
                    Some("".into()),
                    vec![(1, 4096), (2, 4096)]
                ),
                ("bob".into(), 0, Some("".into()), vec![(2, 8192)]),
            ]
        );
        assert_eq!(describe(&store, Some(&[])), describe(&store, None));
        assert_eq!(
            describe(&store, Some(&["bob", "carol", "alice", "carol"])),
            vec![
                ("bob".into(), 0, Some("".into()), vec![(2, 8192)]),
                (
                    "carol".into(),
                    ResponseError::DuplicateResource.code(),
                    Some("Cannot describe SCRAM credentials for the same user twice in a single request: carol".into()),
                    vec![]
                ),
                ("alice".into(), 0, Some("".into()), vec![(1, 4096), (2, 4096)]),
            ]
        );
        assert_eq!(
            describe(&store, Some(&["dave"])),
            vec![(
                "dave".into(),
                ResponseError::ResourceNotFound.code(),
                Some("Attempt to describe a user credential that does not exist: dave".into()),
                vec![]
            )]
        );
        assert_eq!(
            alter(&store, vec![delete("alice", 1)], vec![]),
            vec![ok("alice")]
        );
        assert_eq!(describe(&store, Some(&["alice"]))[0].3, vec![(2, 4096)]);
    }

    #[test]
    fn refusals_have_kafkas_codes_and_texts() {
        let store = CredentialStore::in_memory();
        alter(&store, vec![], vec![upsert("alice", 1, 4096, "a")]);
        let got = alter(
            &store,
            vec![
                delete("alice", 2),
                delete("", 1),
                delete("bob", 0),
                delete("carol", 1),
                delete("carol", 1),
                delete("carol", 1),
            ],
            vec![
                upsert("dave", 1, 4095, "d"),
                upsert("erin", 2, 16385, "e"),
                upsert("frank", 3, 4096, "f"),
                upsert("", 1, 4096, "g"),
                upsert("carol", 1, 4096, "c"),
                upsert("gina", 1, 4096, "g"),
                upsert("gina", 2, 4096, "g"),
                upsert("hank", 1, 4096, "h").with_salted_password(Bytes::new()),
            ],
        );
        let not_found = "Attempt to delete a user credential that does not exist";
        let twice = "A user credential cannot be altered twice in the same request";
        assert_eq!(
            got,
            vec![
                err("alice", ResponseError::ResourceNotFound, not_found),
                err(
                    "",
                    ResponseError::UnacceptableCredential,
                    "Username must not be empty"
                ),
                err(
                    "bob",
                    ResponseError::UnsupportedSaslMechanism,
                    "Unknown SCRAM mechanism"
                ),
                err("carol", ResponseError::ResourceNotFound, not_found),
                err(
                    "dave",
                    ResponseError::UnacceptableCredential,
                    "Too few iterations"
                ),
                err(
                    "erin",
                    ResponseError::UnacceptableCredential,
                    "Too many iterations"
                ),
                err(
                    "frank",
                    ResponseError::UnsupportedSaslMechanism,
                    "Unknown SCRAM mechanism"
                ),
                err("gina", ResponseError::DuplicateResource, twice),
                (
                    "hank".to_string(),
                    ResponseError::UnknownServerError.code(),
                    None
                ),
            ]
        );
        // Nothing of a refused user was applied.
        assert_eq!(store.users(), ["alice"]);
        // A user deleted and upserted in one request, or deleted twice.
        let got = alter(
            &store,
            vec![delete("alice", 1), delete("alice", 1)],
            vec![upsert("alice", 2, 4096, "x")],
        );
        assert_eq!(
            got,
            vec![err("alice", ResponseError::DuplicateResource, twice)]
        );
        let got = alter(
            &store,
            vec![delete("alice", 1)],
            vec![upsert("alice", 2, 4096, "x")],
        );
        assert_eq!(
            got,
            vec![err("alice", ResponseError::DuplicateResource, twice)]
        );
        assert!(store.get("alice", ScramMechanism::Sha256).is_some());
    }

    #[test]
    fn a_read_only_store_refuses_every_change() {
        let dir = tempfile::tempdir().unwrap();
        let store = CredentialStore::open_read_only(dir.path()).unwrap();
        let got = alter(&store, vec![], vec![upsert("alice", 1, 4096, "a")]);
        assert_eq!(got[0].1, ResponseError::ClusterAuthorizationFailed.code());
        assert_eq!(
            got[0].2.as_deref(),
            Some("commitfs serves this data directory read-only: writes are refused")
        );
        assert!(store.users().is_empty());
        // Refusals alone write nothing, so they answer as on any store.
        let got = alter(&store, vec![delete("alice", 1)], vec![]);
        assert_eq!(got[0].1, ResponseError::ResourceNotFound.code());
        assert!(
            !dir.path()
                .join(super::super::SCRAM_CREDENTIALS_FILE)
                .exists()
        );
    }
}
