//! Inode numbers: one stable number per node for the life of the mount.
//!
//! Most nodes get a sequential number from a table. `offset/N` and `time/<ms>`
//! nodes are too many to tabulate (a partition can hold billions of offsets,
//! and any millisecond can be looked up), so their number is computed from
//! their directory's number and N; it is just as stable and costs no memory.
//! Numbers are never reused, so the generation is always 0.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::RwLock;

use super::node::NodeKey;

pub const ROOT_INO: u64 = 1;

const OFFSET_FLAG: u64 = 1 << 63;
/// 44 bits hold today's millisecond timestamps (about 1.8e12) until the year 2527.
const OFFSET_BITS: u32 = 44;
const OFFSET_MASK: u64 = (1 << OFFSET_BITS) - 1;
/// Table numbers that fit beside the offset bits under the flag bit.
const DIR_LIMIT: u64 = 1 << (63 - OFFSET_BITS);

pub struct InodeTable {
    inner: RwLock<Inner>,
}

struct Inner {
    by_key: HashMap<NodeKey, u64>,
    by_ino: HashMap<u64, NodeKey>,
    next: u64,
}

impl Default for InodeTable {
    fn default() -> Self {
        let mut inner = Inner {
            by_key: HashMap::new(),
            by_ino: HashMap::new(),
            next: ROOT_INO + 1,
        };
        inner.by_key.insert(NodeKey::Root, ROOT_INO);
        inner.by_ino.insert(ROOT_INO, NodeKey::Root);
        InodeTable {
            inner: RwLock::new(inner),
        }
    }
}

impl InodeTable {
    /// The number of `key`, assigning one on first sight.
    pub fn ino(&self, key: &NodeKey) -> u64 {
        let computed = match key {
            NodeKey::Offset(p, n) => Some((NodeKey::OffsetDir(p.clone()), *n)),
            NodeKey::Time(p, ms) => Some((NodeKey::TimeDir(p.clone()), *ms)),
            _ => None,
        };
        if let Some((dir_key, n)) = computed
            && let Ok(n) = u64::try_from(n)
            && n <= OFFSET_MASK
        {
            let dir = self.ino(&dir_key);
            if dir < DIR_LIMIT {
                return OFFSET_FLAG | (dir << OFFSET_BITS) | n;
            }
        }
        if let Some(&ino) = self.inner.read().by_key.get(key) {
            return ino;
        }
        let mut inner = self.inner.write();
        if let Some(&ino) = inner.by_key.get(key) {
            return ino;
        }
        let ino = inner.next;
        inner.next += 1;
        inner.by_key.insert(key.clone(), ino);
        inner.by_ino.insert(ino, key.clone());
        ino
    }

    /// The node behind `ino`, if it is known and its partition was not deleted.
    pub fn key(&self, ino: u64) -> Option<NodeKey> {
        let inner = self.inner.read();
        if ino & OFFSET_FLAG != 0 {
            let dir = (ino & !OFFSET_FLAG) >> OFFSET_BITS;
            let n = (ino & OFFSET_MASK) as i64;
            return match inner.by_ino.get(&dir) {
                Some(NodeKey::OffsetDir(p)) => Some(NodeKey::Offset(p.clone(), n)),
                Some(NodeKey::TimeDir(p)) => Some(NodeKey::Time(p.clone(), n)),
                _ => None,
            };
        }
        inner.by_ino.get(&ino).cloned()
    }

    /// Drops every number of a deleted partition, so that a partition created
    /// later under the same name gets new numbers and stale handles of the old
    /// one resolve to nothing.
    pub fn forget_partition(&self, name: &str) {
        let mut inner = self.inner.write();
        let gone: Vec<u64> = inner
            .by_ino
            .iter()
            .filter(|(_, k)| k.partition().is_some_and(|p| &**p == name))
            .map(|(ino, _)| *ino)
            .collect();
        for ino in gone {
            if let Some(k) = inner.by_ino.remove(&ino) {
                inner.by_key.remove(&k);
            }
        }
    }
}

/// Shares partition names between keys.
pub fn name(s: &str) -> Arc<str> {
    Arc::from(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_and_distinct() {
        let t = InodeTable::default();
        let p = name("t-0");
        assert_eq!(t.ino(&NodeKey::Root), ROOT_INO);
        let a = t.ino(&NodeKey::Partition(p.clone()));
        let b = t.ino(&NodeKey::Log(p.clone()));
        assert_ne!(a, b);
        assert_eq!(t.ino(&NodeKey::Partition(name("t-0"))), a);
        assert_eq!(t.key(b), Some(NodeKey::Log(p.clone())));
        let o = t.ino(&NodeKey::Offset(p.clone(), 680));
        assert_eq!(t.key(o), Some(NodeKey::Offset(p.clone(), 680)));
        assert_ne!(t.ino(&NodeKey::Offset(p.clone(), 681)), o);
        let q = name("t-1");
        assert_ne!(t.ino(&NodeKey::Offset(q.clone(), 680)), o);
        let huge = t.ino(&NodeKey::Offset(p.clone(), 1 << 50));
        assert_eq!(t.key(huge), Some(NodeKey::Offset(p.clone(), 1 << 50)));
        let ms = 1_700_000_000_123;
        let ti = t.ino(&NodeKey::Time(p.clone(), ms));
        assert_eq!(t.key(ti), Some(NodeKey::Time(p.clone(), ms)));
        assert_ne!(t.ino(&NodeKey::Offset(p.clone(), ms)), ti);
    }

    #[test]
    fn deleted_partitions_get_new_numbers() {
        let t = InodeTable::default();
        let p = name("t-0");
        let a = t.ino(&NodeKey::Partition(p.clone()));
        let o = t.ino(&NodeKey::Offset(p.clone(), 3));
        t.forget_partition("t-0");
        assert_eq!(t.key(a), None);
        assert_eq!(t.key(o), None);
        assert_ne!(t.ino(&NodeKey::Partition(p.clone())), a);
        assert!(t.key(t.ino(&NodeKey::Root)).is_some());
    }
}
