//! The ACLs: Kafka keeps them as `AccessControlEntryRecord`s in its
//! metadata log; here they are a file in the data directory root,
//! [`ACLS_FILE`], rewritten whole (temporary file, fsync, rename, fsync of
//! the directory) at each change, as the SCRAM credentials are.
//!
//! Versioned text, one ACL a line, the enums by their Kafka names and the
//! free text percent-encoded (every byte but ASCII letters, digits and
//! `-._~*:`), so a name with spaces or newlines survives:
//!
//! ```text
//! commitfs-acls 1
//! TOPIC LITERAL User:alice * READ ALLOW orders
//! ```
//!
//! A file that does not parse is refused, naming the file and the line:
//! the broker does not start with some DENY silently gone.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use super::model::{
    AclBinding, AclBindingFilter, Operation, PatternType, Permission, ResourceType,
};
use commitfs_storage::StorageError;
use commitfs_storage::checkpoint::write_private_atomically;
use commitfs_storage::text_file::{escape, load, unescape, versioned_lines};

pub use commitfs_storage::ACLS_FILE;
const HEADER: &str = "commitfs-acls 1";

type Acls = BTreeSet<AclBinding>;

pub struct AclStore {
    /// `None`: kept in memory only (tests).
    path: Option<PathBuf>,
    read_only: bool,
    /// Replaced whole at each change: a decision reads one set.
    acls: RwLock<Arc<Acls>>,
    /// Serialises rewrites, so an older set never replaces a newer one.
    writer: Mutex<()>,
}

impl AclStore {
    /// The store of data directory `dir`; no file is no ACLs.
    pub fn open(dir: &Path, read_only: bool) -> Result<Arc<AclStore>, String> {
        let path = dir.join(ACLS_FILE);
        let acls = load(&path, "the ACLs", parse)?.unwrap_or_default();
        Ok(Arc::new(AclStore {
            path: Some(path),
            read_only,
            acls: RwLock::new(Arc::new(acls)),
            writer: Mutex::new(()),
        }))
    }

    pub fn in_memory() -> Arc<AclStore> {
        Arc::new(AclStore {
            path: None,
            read_only: false,
            acls: RwLock::new(Arc::new(Acls::new())),
            writer: Mutex::new(()),
        })
    }

    pub fn snapshot(&self) -> Arc<Acls> {
        self.acls.read().clone()
    }

    /// Adds the ACLs (one already there is not added twice, as
    /// `AclControlManager.createAcls` does), in one rewrite.
    pub fn create(&self, new: &[AclBinding]) -> Result<(), StorageError> {
        let _w = self.writer.lock();
        let mut next = (*self.snapshot()).clone();
        let before = next.len();
        next.extend(new.iter().cloned());
        if next.len() == before {
            return Ok(());
        }
        self.replace(next)
    }

    /// Removes what each filter matches, in one rewrite; per filter, the
    /// ACLs it removed (an ACL two filters match is reported by both, as
    /// Kafka's `deleteAcls` does).
    pub fn delete(
        &self,
        filters: &[AclBindingFilter],
    ) -> Result<Vec<Vec<AclBinding>>, StorageError> {
        let _w = self.writer.lock();
        let current = self.snapshot();
        let matched: Vec<Vec<AclBinding>> = (filters.iter())
            .map(|f| current.iter().filter(|a| f.matches(a)).cloned().collect())
            .collect();
        if matched.iter().all(Vec::is_empty) {
            return Ok(matched);
        }
        let mut next = (*current).clone();
        for a in matched.iter().flatten() {
            next.remove(a);
        }
        self.replace(next)?;
        Ok(matched)
    }

    fn replace(&self, next: Acls) -> Result<(), StorageError> {
        if self.read_only {
            return Err(StorageError::ReadOnly);
        }
        if let Some(path) = &self.path {
            write_private_atomically(path, format(&next).as_bytes())?;
        }
        *self.acls.write() = Arc::new(next);
        Ok(())
    }
}

fn format(acls: &Acls) -> String {
    let mut s = format!("{HEADER}\n");
    for a in acls {
        // Named whole, so that a field added to a binding cannot be left out
        // of the file unnoticed.
        let AclBinding {
            resource_type: rt,
            name,
            pattern_type: pt,
            principal,
            host,
            operation: op,
            permission: perm,
        } = a;
        let (principal, host, name) = (encode(principal), encode(host), encode(name));
        s.push_str(&format!(
            "{rt} {pt} {principal} {host} {op} {perm} {name}\n"
        ));
    }
    s
}

/// The ACLs, or the line (from 1) that is wrong and why.
fn parse(bytes: &[u8]) -> Result<Acls, (usize, String)> {
    let lines = versioned_lines(bytes, HEADER)?;
    let mut acls = Acls::new();
    for (n, line) in lines {
        let acl = parse_line(line).map_err(|why| (n, why))?;
        acl.validate().map_err(|why| (n, why))?;
        if !acls.insert(acl) {
            return Err((n, "the same ACL twice".to_string()));
        }
    }
    Ok(acls)
}

fn parse_line(line: &str) -> Result<AclBinding, String> {
    let fields: Vec<&str> = line.split(' ').collect();
    let [rt, pt, principal, host, op, perm, name] = fields[..] else {
        return Err(format!("expected 7 fields, found {}", fields.len()));
    };
    let unknown = |what: &str, v: &str| format!("unknown {what} {v:?}");
    Ok(AclBinding {
        resource_type: ResourceType::from_name(rt).ok_or_else(|| unknown("resource type", rt))?,
        pattern_type: PatternType::from_name(pt).ok_or_else(|| unknown("pattern type", pt))?,
        principal: decode(principal)?,
        host: decode(host)?,
        operation: Operation::from_name(op).ok_or_else(|| unknown("operation", op))?,
        permission: Permission::from_name(perm).ok_or_else(|| unknown("permission", perm))?,
        name: decode(name)?,
    })
}

/// ACL fields keep `*` and `:` (`User:*`) as they are.
const PLAIN: &[u8] = b"*:";

fn encode(text: &str) -> String {
    escape(text, PLAIN)
}

fn decode(s: &str) -> Result<String, String> {
    unescape(s, PLAIN, "")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn acl(name: &str, principal: &str, op: Operation) -> AclBinding {
        AclBinding {
            resource_type: ResourceType::Topic,
            name: name.to_string(),
            pattern_type: PatternType::Prefixed,
            principal: principal.to_string(),
            host: "*".to_string(),
            operation: op,
            permission: Permission::Allow,
        }
    }

    #[test]
    fn round_trip_through_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = AclStore::open(dir.path(), false).unwrap();
        assert!(store.snapshot().is_empty());
        let odd = acl("a topic\nwith %", "User:CN=x, O=y", Operation::Read);
        let plain = acl("orders", "User:alice", Operation::Write);
        store
            .create(&[odd.clone(), plain.clone(), plain.clone()])
            .unwrap();
        assert_eq!(store.snapshot().len(), 2);
        let text = std::fs::read_to_string(dir.path().join(ACLS_FILE)).unwrap();
        assert!(text.starts_with("commitfs-acls 1\n"), "{text}");
        assert!(
            text.contains("TOPIC PREFIXED User:alice * WRITE ALLOW orders\n"),
            "{text}"
        );
        let mode = std::fs::metadata(dir.path().join(ACLS_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let again = AclStore::open(dir.path(), false).unwrap();
        assert_eq!(again.snapshot(), store.snapshot());

        let f = AclBindingFilter {
            principal: Some("User:alice".into()),
            ..AclBindingFilter::any()
        };
        let removed = again.delete(&[f.clone(), f]).unwrap();
        assert_eq!(removed, vec![vec![plain.clone()], vec![plain]]);
        let last = AclStore::open(dir.path(), false).unwrap();
        assert_eq!(
            last.snapshot().iter().cloned().collect::<Vec<_>>(),
            vec![odd]
        );
    }

    #[test]
    fn a_corrupt_file_is_refused_with_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(ACLS_FILE);
        let cases = [
            ("", "line 1: the file does not end with a newline"),
            ("commitfs-acls 2\n", "line 1: unknown version"),
            (
                "commitfs-acls 1\nTOPIC LITERAL User:a * READ ALLOW\n",
                "line 2: expected 7 fields",
            ),
            (
                "commitfs-acls 1\nTOPIC LITERAL User:a * READ ALLOW t\nTOPIC LITERAL User:a * READ ALLOW t\n",
                "line 3: the same ACL twice",
            ),
            (
                "commitfs-acls 1\nTOPIC LITERAL User:a * REED ALLOW t\n",
                "line 2: unknown operation \"REED\"",
            ),
            (
                "commitfs-acls 1\nANY LITERAL User:a * READ ALLOW t\n",
                "line 2: Invalid resourceType ANY",
            ),
            (
                "commitfs-acls 1\nTOPIC LITERAL User:a * READ ALLOW t%2\n",
                "line 2: bad escape",
            ),
            (
                "commitfs-acls 1\nTOPIC LITERAL User:a * READ ALLOW t",
                "line 2: the file does not end",
            ),
        ];
        for (text, want) in cases {
            std::fs::write(&path, text).unwrap();
            let err = AclStore::open(dir.path(), false).err().unwrap();
            assert!(err.contains(want), "{text:?}: {err}");
            assert!(err.contains(ACLS_FILE), "{err}");
        }
    }

    #[test]
    fn read_only_refuses_changes() {
        let dir = tempfile::tempdir().unwrap();
        let store = AclStore::open(dir.path(), true).unwrap();
        let e = store
            .create(&[acl("t", "User:a", Operation::Read)])
            .unwrap_err();
        assert!(matches!(e, StorageError::ReadOnly));
        assert!(store.snapshot().is_empty());
        assert!(!dir.path().join(ACLS_FILE).exists());
    }
}
