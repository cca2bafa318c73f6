//! The users' SCRAM credentials: Kafka keeps them as
//! `UserScramCredentialRecord`s in its metadata log; here they are a file
//! in the data directory root, [`SCRAM_CREDENTIALS_FILE`], rewritten whole
//! (temporary file, fsync, rename, fsync of the directory) at each change,
//! readable by its owner only.
//!
//! It holds what Kafka's record holds, never a password: per user and
//! mechanism the salt, stored key, server key and iteration count. The
//! format is versioned text, one credential a line:
//!
//! ```text
//! commitfs-scram-credentials 1
//! SCRAM-SHA-256 4096 <salt> <stored key> <server key> <user>
//! ```
//!
//! with the keys and salt in base64 and the user name percent-encoded
//! (every byte but ASCII letters, digits and `-._~`), so any name, an
//! empty one or one with spaces or newlines, survives. A file that does
//! not parse is refused, naming the file and the line: the broker does not
//! start with some users silently gone.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD as B64, STANDARD_PAD_INDIFFERENT};
use parking_lot::{Mutex, RwLock};

use super::formatter::{ScramCredential, ScramMechanism};
use commitfs_storage::StorageError;
use commitfs_storage::checkpoint::write_private_atomically;
use commitfs_storage::text_file::{escape, load, unescape, versioned_lines};

pub use commitfs_storage::SCRAM_CREDENTIALS_FILE;
const HEADER: &str = "commitfs-scram-credentials 1";

type Credentials = BTreeMap<(String, ScramMechanism), ScramCredential>;

/// One change of [`CredentialStore::apply`].
#[derive(Clone, Debug)]
pub enum Change {
    Upsert {
        user: String,
        mechanism: ScramMechanism,
        credential: ScramCredential,
    },
    Delete {
        user: String,
        mechanism: ScramMechanism,
    },
}

pub struct CredentialStore {
    /// `None`: kept in memory only (tests).
    path: Option<PathBuf>,
    read_only: bool,
    credentials: RwLock<Credentials>,
    /// Serialises rewrites, so an older set never replaces a newer one.
    writer: Mutex<()>,
}

impl CredentialStore {
    /// The store of data directory `dir`; no file is no users.
    pub fn open(dir: &Path) -> Result<Arc<CredentialStore>, String> {
        Self::open_with(dir, false)
    }

    /// As [`CredentialStore::open`], for a directory served read-only:
    /// every change is refused.
    pub fn open_read_only(dir: &Path) -> Result<Arc<CredentialStore>, String> {
        Self::open_with(dir, true)
    }

    fn open_with(dir: &Path, read_only: bool) -> Result<Arc<CredentialStore>, String> {
        let path = dir.join(SCRAM_CREDENTIALS_FILE);
        let credentials = load(&path, "the SCRAM credentials", parse)?.unwrap_or_default();
        Ok(Arc::new(CredentialStore {
            path: Some(path),
            read_only,
            credentials: RwLock::new(credentials),
            writer: Mutex::new(()),
        }))
    }

    /// A store with no file, for tests.
    pub fn in_memory() -> Arc<CredentialStore> {
        Arc::new(CredentialStore {
            path: None,
            read_only: false,
            credentials: RwLock::new(Credentials::new()),
            writer: Mutex::new(()),
        })
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    pub fn get(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential> {
        (self.credentials.read())
            .get(&(user.to_string(), mechanism))
            .cloned()
    }

    /// The mechanisms `user` has a credential for, with their iterations
    /// (DescribeUserScramCredentials' answer): empty for an unknown user.
    pub fn describe(&self, user: &str) -> Vec<(ScramMechanism, i32)> {
        let creds = self.credentials.read();
        ScramMechanism::ALL
            .into_iter()
            .filter_map(|m| Some((m, creds.get(&(user.to_string(), m))?.iterations)))
            .collect()
    }

    /// Every user with a credential, in order.
    pub fn users(&self) -> Vec<String> {
        let mut users: Vec<String> = (self.credentials.read().keys())
            .map(|(u, _)| u.clone())
            .collect();
        users.dedup();
        users
    }

    pub fn upsert(
        &self,
        user: &str,
        mechanism: ScramMechanism,
        credential: ScramCredential,
    ) -> Result<(), StorageError> {
        self.apply(&[Change::Upsert {
            user: user.to_string(),
            mechanism,
            credential,
        }])
    }

    /// Removes a credential; whether there was one.
    pub fn delete(&self, user: &str, mechanism: ScramMechanism) -> Result<bool, StorageError> {
        let _w = self.writer.lock();
        if self.get(user, mechanism).is_none() {
            return Ok(false);
        }
        self.apply_locked(&[Change::Delete {
            user: user.to_string(),
            mechanism,
        }])?;
        Ok(true)
    }

    /// The changes, all or none: the file is rewritten once, and the new
    /// set is seen only once it is durable.
    pub fn apply(&self, changes: &[Change]) -> Result<(), StorageError> {
        let _w = self.writer.lock();
        self.apply_locked(changes)
    }

    fn apply_locked(&self, changes: &[Change]) -> Result<(), StorageError> {
        if self.read_only {
            return Err(StorageError::ReadOnly);
        }
        let mut next = self.credentials.read().clone();
        for c in changes {
            match c {
                Change::Upsert {
                    user,
                    mechanism,
                    credential,
                } => {
                    next.insert((user.clone(), *mechanism), credential.clone());
                }
                Change::Delete { user, mechanism } => {
                    next.remove(&(user.clone(), *mechanism));
                }
            }
        }
        if let Some(path) = &self.path {
            write_private_atomically(path, format(&next).as_bytes())?;
        }
        *self.credentials.write() = next;
        Ok(())
    }
}

fn format(creds: &Credentials) -> String {
    let mut s = format!("{HEADER}\n");
    for ((user, m), c) in creds {
        s.push_str(&format!(
            "{} {} {} {} {} {}\n",
            m.mechanism_name(),
            c.iterations,
            B64.encode(&c.salt),
            B64.encode(&c.stored_key),
            B64.encode(&c.server_key),
            encode_name(user)
        ));
    }
    s
}

/// The credentials, or the line (from 1) that is wrong and why.
fn parse(bytes: &[u8]) -> Result<Credentials, (usize, String)> {
    let lines = versioned_lines(bytes, HEADER)?;
    let mut creds = Credentials::new();
    for (n, line) in lines {
        let (user, m, cred) = parse_line(line).map_err(|why| (n, why))?;
        if creds.insert((user.clone(), m), cred).is_some() {
            return Err((
                n,
                format!(
                    "a second {} credential for user {user:?}",
                    m.mechanism_name()
                ),
            ));
        }
    }
    Ok(creds)
}

fn parse_line(line: &str) -> Result<(String, ScramMechanism, ScramCredential), String> {
    let fields: Vec<&str> = line.splitn(6, ' ').collect();
    let [mechanism, iterations, salt, stored_key, server_key, user] = fields[..] else {
        return Err(format!("expected 6 fields, found {}", fields.len()));
    };
    let m = ScramMechanism::from_mechanism_name(mechanism)
        .ok_or_else(|| format!("unknown mechanism {mechanism:?}"))?;
    let iterations: i32 = iterations
        .parse()
        .ok()
        .filter(|&i| i > 0)
        .ok_or_else(|| format!("bad iteration count {iterations:?}"))?;
    let b64 = |what: &str, v: &str| {
        B64.decode(v)
            .map_err(|e| format!("bad base64 in the {what}: {e}"))
    };
    let salt = b64("salt", salt)?;
    let stored_key = b64("stored key", stored_key)?;
    let server_key = b64("server key", server_key)?;
    if stored_key.len() != m.hash_len() || server_key.len() != m.hash_len() {
        return Err(format!("the keys are not {} bytes long", m.hash_len()));
    }
    let user = decode_name(user)?;
    Ok((
        user,
        m,
        ScramCredential {
            salt,
            stored_key,
            server_key,
            iterations,
        },
    ))
}

fn encode_name(name: &str) -> String {
    escape(name, b"")
}

fn decode_name(s: &str) -> Result<String, String> {
    unescape(s, b"", "the user name ")
}

/// Kafka's `ScramParser`: one `kafka-storage.sh format --add-scram`
/// argument, `SCRAM-SHA-256=[name=alice,password=alice-secret]` (also
/// `iterations=`, `salt=` and `saltedpassword=`, base64, a value optionally
/// in double quotes), with its error texts. A salt not given is random;
/// iterations default to 4096.
pub fn parse_add_scram(text: &str) -> Result<(String, ScramMechanism, ScramCredential), String> {
    let input = text.trim();
    let Some((mechanism, config)) = input.split_once('=') else {
        return Err(format!(
            "Failed to find equals sign in SCRAM argument '{input}'"
        ));
    };
    let m = ScramMechanism::from_mechanism_name(mechanism)
        .ok_or_else(|| format!("The add-scram mechanism {mechanism} is not supported."))?;
    if !config.starts_with('[') {
        return Err("Expected configuration string to start with [".to_string());
    }
    if !config.ends_with(']') || config.len() < 2 {
        return Err("Expected configuration string to end with ]".to_string());
    }
    let mut components = BTreeMap::new();
    for c in java_split_commas(&config[1..config.len() - 1]) {
        let (k, v) = split_component(c)?;
        components.insert(k, v);
    }
    let name = components
        .remove("name")
        .ok_or("You must supply 'name' to add-scram")?;
    // Java's Base64 decoder takes a missing final padding.
    let decode = |v: &str| STANDARD_PAD_INDIFFERENT.decode(v);
    let salt = match components.remove("salt") {
        None => None,
        Some(s) => Some(decode(s).map_err(|_| format!("Failed to decode given salt: {s}"))?),
    };
    let iterations = match components.remove("iterations") {
        None => None,
        Some(s) => Some(
            s.parse::<i32>()
                .map_err(|_| format!("Failed to parse iterations count: {s}"))?,
        ),
    };
    let password = components.remove("password");
    let salted = match (password, components.remove("saltedpassword")) {
        (Some(_), _) => None,
        (None, None) => {
            return Err(
                "You must supply one of 'password' or 'saltedpassword' to add-scram".to_string(),
            );
        }
        (None, Some(_)) if salt.is_none() => {
            return Err("You must supply 'salt' with 'saltedpassword' to add-scram".to_string());
        }
        (None, Some(s)) => {
            Some(decode(s).map_err(|_| format!("Failed to decode given saltedPassword: {s}"))?)
        }
    };
    if !components.is_empty() {
        let unknown: Vec<&str> = components.keys().copied().collect();
        return Err(format!(
            "Unknown SCRAM configurations: {}",
            unknown.join(", ")
        ));
    }
    let salt = match salt {
        Some(s) => s,
        None => super::formatter::secure_random_string()?.into_bytes(),
    };
    let iterations = iterations.unwrap_or(4096);
    if iterations < m.min_iterations() {
        return Err(format!(
            "The 'iterations' value must be >= {} for add-scram using {}",
            m.min_iterations(),
            m.enum_name()
        ));
    }
    if iterations > m.max_iterations() {
        return Err(format!(
            "The 'iterations' value must be <= {} for add-scram using {}",
            m.max_iterations(),
            m.enum_name()
        ));
    }
    let salted = match salted {
        Some(s) => s,
        None => m.salted_password(password.unwrap_or_default().as_bytes(), &salt, iterations),
    };
    if salted.is_empty() || password == Some("") {
        // Java's SecretKeySpec refuses an empty HMAC key.
        return Err("Empty key".to_string());
    }
    Ok((
        name.to_string(),
        m,
        ScramCredential::from_salted_password(m, &salt, &salted, iterations),
    ))
}

/// Java's `String.split(",")`: trailing empty strings are dropped (and an
/// empty string is one empty piece).
fn java_split_commas(s: &str) -> Vec<&str> {
    if s.is_empty() {
        return vec![""];
    }
    let mut v: Vec<&str> = s.split(',').collect();
    while v.last() == Some(&"") {
        v.pop();
    }
    v
}

/// `ScramParser.splitTrimmedConfigStringComponent`.
fn split_component(input: &str) -> Result<(&str, &str), String> {
    let Some((k, v)) = input.split_once('=') else {
        return Err(format!("No equals sign found in SCRAM component: {input}"));
    };
    let v = if v.len() >= 2 && v.starts_with('"') && v.ends_with('"') {
        &v[1..v.len() - 1]
    } else {
        v
    };
    Ok((k, v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn cred(m: ScramMechanism, password: &str) -> ScramCredential {
        ScramCredential::generate(m, password, 4096).unwrap()
    }

    #[test]
    fn credentials_survive_a_reopen_with_any_name() {
        let dir = tempfile::tempdir().unwrap();
        let store = CredentialStore::open(dir.path()).unwrap();
        assert!(store.users().is_empty());
        let names = ["alice", "", "a b\nc%d", "Ünïcødé,=;", "-._~"];
        for (i, name) in names.iter().enumerate() {
            let m = ScramMechanism::ALL[i % 2];
            store.upsert(name, m, cred(m, "secret-password")).unwrap();
        }
        store
            .upsert(
                "alice",
                ScramMechanism::Sha512,
                cred(ScramMechanism::Sha512, "x"),
            )
            .unwrap();
        let again = CredentialStore::open(dir.path()).unwrap();
        let mut want: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        want.sort();
        assert_eq!(again.users(), want);
        for name in names {
            for m in ScramMechanism::ALL {
                assert_eq!(again.get(name, m), store.get(name, m), "{name:?} {m:?}");
            }
        }
        assert_eq!(
            again.describe("alice"),
            vec![
                (ScramMechanism::Sha256, 4096),
                (ScramMechanism::Sha512, 4096)
            ]
        );
        assert!(again.describe("nobody").is_empty());
        let text = std::fs::read_to_string(dir.path().join(SCRAM_CREDENTIALS_FILE)).unwrap();
        assert!(!text.contains("secret-password"));
        assert!(text.starts_with("commitfs-scram-credentials 1\n"));
        assert_eq!(text.lines().count(), 7);
        let mode = std::fs::metadata(dir.path().join(SCRAM_CREDENTIALS_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);

        assert!(again.delete("alice", ScramMechanism::Sha256).unwrap());
        assert!(!again.delete("alice", ScramMechanism::Sha256).unwrap());
        let third = CredentialStore::open(dir.path()).unwrap();
        assert_eq!(
            third.describe("alice"),
            vec![(ScramMechanism::Sha512, 4096)]
        );
    }

    #[test]
    fn a_rewrite_replaces_the_file_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(SCRAM_CREDENTIALS_FILE);
        let store = CredentialStore::open(dir.path()).unwrap();
        let m = ScramMechanism::Sha256;
        store.upsert("alice", m, cred(m, "a")).unwrap();
        let ino = |p: &Path| std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(p).unwrap());
        let before = ino(&path);
        // A temporary file left by a crash is overwritten, not appended to.
        std::fs::write(
            dir.path().join(format!("{SCRAM_CREDENTIALS_FILE}.tmp")),
            "junk",
        )
        .unwrap();
        store
            .apply(&[
                Change::Upsert {
                    user: "bob".into(),
                    mechanism: m,
                    credential: cred(m, "b"),
                },
                Change::Delete {
                    user: "alice".into(),
                    mechanism: m,
                },
            ])
            .unwrap();
        assert_ne!(ino(&path), before, "renamed over, not written in place");
        assert!(
            !dir.path()
                .join(format!("{SCRAM_CREDENTIALS_FILE}.tmp"))
                .exists()
        );
        assert_eq!(CredentialStore::open(dir.path()).unwrap().users(), ["bob"]);
    }

    #[test]
    fn a_failed_write_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = CredentialStore::open(dir.path()).unwrap();
        let m = ScramMechanism::Sha256;
        store.upsert("alice", m, cred(m, "a")).unwrap();
        // The temporary file's name taken by a directory: the write fails.
        std::fs::create_dir(dir.path().join(format!("{SCRAM_CREDENTIALS_FILE}.tmp"))).unwrap();
        assert!(store.upsert("bob", m, cred(m, "b")).is_err());
        assert_eq!(store.users(), ["alice"]);
        assert_eq!(
            CredentialStore::open(dir.path()).unwrap().users(),
            ["alice"]
        );
        let ro = CredentialStore::open_read_only(dir.path()).unwrap();
        assert!(matches!(
            ro.upsert("carol", m, cred(m, "c")),
            Err(StorageError::ReadOnly)
        ));
        assert!(ro.get("alice", m).is_some());
    }

    #[test]
    fn a_corrupt_file_is_refused_naming_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let store = CredentialStore::open(dir.path()).unwrap();
        let m = ScramMechanism::Sha512;
        store.upsert("alice", m, cred(m, "a")).unwrap();
        store.upsert("bob", m, cred(m, "b")).unwrap();
        let path = dir.path().join(SCRAM_CREDENTIALS_FILE);
        let good = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = good.lines().collect();
        let cases = [
            (
                good.replace(
                    "commitfs-scram-credentials 1",
                    "commitfs-scram-credentials 2",
                ),
                1,
                "unknown version",
            ),
            (
                good.replacen("commitfs-scram-credentials 1\n", "", 1),
                1,
                "expected",
            ),
            (good[..good.len() - 1].to_string(), 3, "cut short"),
            (
                good.replace("SCRAM-SHA-512 4096", "SCRAM-SHA-1 4096"),
                2,
                "unknown mechanism",
            ),
            (
                good.replacen("SCRAM-SHA-512 4096", "SCRAM-SHA-512 0", 1),
                2,
                "iteration",
            ),
            (
                format!(
                    "{}\n{}\n{} al ice\n",
                    lines[0],
                    lines[1],
                    lines[2].rsplit_once(' ').unwrap().0
                ),
                3,
                "unencoded byte",
            ),
            (
                format!("{}\n{}\n{}\n", lines[0], lines[1], lines[1]),
                3,
                "a second SCRAM-SHA-512 credential",
            ),
            (
                format!("{}\n{}\n\n", lines[0], lines[1]),
                3,
                "expected 6 fields",
            ),
            (
                format!(
                    "{}\n{}\n{} %zz\n",
                    lines[0],
                    lines[1],
                    lines[2].rsplit_once(' ').unwrap().0
                ),
                3,
                "bad escape",
            ),
            (
                good.replacen(" 4096 ", " 4096 !!!! ", 1),
                2,
                "bad base64 in the salt",
            ),
        ];
        for (text, line, what) in cases {
            std::fs::write(&path, &text).unwrap();
            let e = CredentialStore::open(dir.path()).err().unwrap();
            assert!(
                e.contains(&format!("{} line {line}: ", path.display())) && e.contains(what),
                "{text:?}: {e}"
            );
        }
        std::fs::write(&path, b"commitfs-scram-credentials 1\n\xff\n").unwrap();
        let e = CredentialStore::open(dir.path()).err().unwrap();
        assert!(e.contains("line 2: not UTF-8"), "{e}");
    }

    const TEST_SALT: &[u8] = b"1lv4pdnw4fwq7notcxm0yy1k7q";

    #[test]
    fn add_scram_as_kafka_storage_parses_it() {
        let (user, m, c) =
            parse_add_scram("SCRAM-SHA-512=[name=scram-admin,password=scram-user-secret]").unwrap();
        assert_eq!(
            (user.as_str(), m, c.iterations),
            ("scram-admin", ScramMechanism::Sha512, 4096)
        );
        assert!(c.matches_password(m, b"scram-user-secret"));
        let (user, m, c) = parse_add_scram(
            "  SCRAM-SHA-256=[name=bob,password=my pass,iterations=8192,salt=\"MWx2NHBkbnc0ZndxN25vdGN4bTB5eTFrN3E=\"] ",
        )
        .unwrap();
        assert_eq!((user.as_str(), m), ("bob", ScramMechanism::Sha256));
        assert_eq!((c.salt.as_slice(), c.iterations), (TEST_SALT, 8192));
        assert!(c.matches_password(m, b"my pass"));
        // ScramParserTest's salt and salted password, taken as given.
        let salted = B64
            .decode("mT0yyUUxnlJaC99HXgRTSYlbuqa4FSGtJCJfTMvjYCE=")
            .unwrap();
        let (user, m, c) = parse_add_scram(
            "SCRAM-SHA-512=[name=alice,salt=\"MWx2NHBkbnc0ZndxN25vdGN4bTB5eTFrN3E=\",saltedpassword=\"mT0yyUUxnlJaC99HXgRTSYlbuqa4FSGtJCJfTMvjYCE=\"]",
        )
        .unwrap();
        assert_eq!(user, "alice");
        assert_eq!(
            c,
            ScramCredential::from_salted_password(m, TEST_SALT, &salted, 4096)
        );
        // A random salt each time, as Kafka's secureRandomBytes.
        let a = parse_add_scram("SCRAM-SHA-256=[name=bob,password=pw]")
            .unwrap()
            .2;
        let b = parse_add_scram("SCRAM-SHA-256=[name=bob,password=pw]")
            .unwrap()
            .2;
        assert_ne!(a.salt, b.salt);
        // An empty name is Kafka's too.
        assert_eq!(
            parse_add_scram("SCRAM-SHA-256=[name=,password=pw]")
                .unwrap()
                .0,
            ""
        );
        assert_eq!(
            parse_add_scram("SCRAM-SHA-256=[name=\"\",password=pw,]")
                .unwrap()
                .0,
            ""
        );
    }

    #[test]
    fn add_scram_refusals_have_kafkas_text() {
        for (arg, text) in [
            (
                "SCRAM-SHA-512",
                "Failed to find equals sign in SCRAM argument 'SCRAM-SHA-512'",
            ),
            (
                "SCRAM-SHA-UNSUPPORTED=[name=scram-admin,password=scram-user-secret]",
                "The add-scram mechanism SCRAM-SHA-UNSUPPORTED is not supported.",
            ),
            (
                "SCRAM-SHA-256=name=scram-admin,password=scram-user-secret",
                "Expected configuration string to start with [",
            ),
            (
                "SCRAM-SHA-256=[name=scram-admin,password=scram-user-secret",
                "Expected configuration string to end with ]",
            ),
            (
                "SCRAM-SHA-256=[",
                "Expected configuration string to end with ]",
            ),
            (
                "SCRAM-SHA-256=[password=mypass]",
                "You must supply 'name' to add-scram",
            ),
            (
                "SCRAM-SHA-256=[name=bar]",
                "You must supply one of 'password' or 'saltedpassword' to add-scram",
            ),
            (
                "SCRAM-SHA-256=[name=bob,password=mypass,unknown=something,unknown2=somethingelse]",
                "Unknown SCRAM configurations: unknown, unknown2",
            ),
            (
                "SCRAM-SHA-256=[name=alice,saltedpassword=\"mT0yyUUxnlJaC99HXgRTSYlbuqa4FSGtJCJfTMvjYCE=\"]",
                "You must supply 'salt' with 'saltedpassword' to add-scram",
            ),
            (
                "SCRAM-SHA-256=[name]",
                "No equals sign found in SCRAM component: name",
            ),
            (
                "SCRAM-SHA-256=[]",
                "No equals sign found in SCRAM component: ",
            ),
            (
                "SCRAM-SHA-256=[name=a,password=b,salt=!!]",
                "Failed to decode given salt: !!",
            ),
            (
                "SCRAM-SHA-256=[name=a,salt=c2FsdA==,saltedpassword=**]",
                "Failed to decode given saltedPassword: **",
            ),
            (
                "SCRAM-SHA-256=[name=a,password=b,iterations=many]",
                "Failed to parse iterations count: many",
            ),
            (
                "SCRAM-SHA-256=[name=a,password=b,iterations=4095]",
                "The 'iterations' value must be >= 4096 for add-scram using SCRAM_SHA_256",
            ),
            (
                "SCRAM-SHA-512=[name=a,password=b,iterations=16385]",
                "The 'iterations' value must be <= 16384 for add-scram using SCRAM_SHA_512",
            ),
        ] {
            assert_eq!(parse_add_scram(arg).unwrap_err(), text, "{arg}");
        }
    }

    #[test]
    fn names_encode_and_decode() {
        for name in ["", "alice", "a b", "%41", "é", "\n\0"] {
            let e = encode_name(name);
            assert!(!e.contains(' ') && !e.contains('\n'));
            assert_eq!(decode_name(&e).unwrap(), name);
        }
        assert_eq!(encode_name("a b"), "a%20b");
        assert!(decode_name("%ff").is_err());
    }
}
