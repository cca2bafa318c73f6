//! Inode numbers: one stable number per node while the kernel knows it.
//!
//! Most nodes get a sequential number from a table. `offset/N` and `time/<ms>`
//! nodes are too many to tabulate (a partition can hold billions of offsets,
//! and any millisecond can be looked up), so their number is computed from
//! their directory's number and N; it is just as stable and costs no memory.
//!
//! The table does not grow with every name ever seen. A number the kernel
//! was given by a lookup is kept until the kernel forgets it (FORGET counts
//! down what lookups counted up). A number only listed by readdir or asked
//! for by getattr is held by nobody: the oldest of those are dropped past
//! [`UNREFERENCED_LIMIT`], and such a name gets a new number when it is next
//! seen. Numbers are never reused, so the generation is always 0.

use std::collections::{HashMap, VecDeque};
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
/// Numbers no lookup holds, kept at most (an `ls -l` of a partition with
/// this many files still shows each name under one number).
pub const UNREFERENCED_LIMIT: usize = 1 << 16;

pub struct InodeTable {
    inner: RwLock<Inner>,
}

struct Slot {
    key: NodeKey,
    /// Lookups the kernel has not forgotten yet.
    lookups: u64,
}

struct Inner {
    by_key: HashMap<NodeKey, u64>,
    by_ino: HashMap<u64, Slot>,
    /// Numbers handed out with no lookup, oldest first (some may have been
    /// looked up or dropped since: checked when they come up).
    unreferenced: VecDeque<u64>,
    next: u64,
}

impl Default for InodeTable {
    fn default() -> Self {
        let mut inner = Inner {
            by_key: HashMap::new(),
            by_ino: HashMap::new(),
            unreferenced: VecDeque::new(),
            next: ROOT_INO + 1,
        };
        inner.by_key.insert(NodeKey::Root, ROOT_INO);
        inner.by_ino.insert(
            ROOT_INO,
            Slot {
                key: NodeKey::Root,
                lookups: 1,
            },
        );
        InodeTable {
            inner: RwLock::new(inner),
        }
    }
}

impl Inner {
    fn insert(&mut self, key: &NodeKey, ino: u64, lookups: u64) {
        self.by_key.insert(key.clone(), ino);
        self.by_ino.insert(
            ino,
            Slot {
                key: key.clone(),
                lookups,
            },
        );
        if lookups == 0 {
            self.unreferenced.push_back(ino);
            self.evict();
        }
    }

    fn remove(&mut self, ino: u64) {
        if let Some(slot) = self.by_ino.remove(&ino) {
            self.by_key.remove(&slot.key);
        }
    }

    /// Drops the oldest numbers nobody holds, past the limit.
    fn evict(&mut self) {
        while self.unreferenced.len() > UNREFERENCED_LIMIT {
            let Some(ino) = self.unreferenced.pop_front() else {
                break;
            };
            if self.by_ino.get(&ino).is_some_and(|s| s.lookups == 0) {
                self.remove(ino);
            }
        }
    }
}

impl InodeTable {
    /// The number of `key`, assigning one on first sight (held by nobody).
    pub fn ino(&self, key: &NodeKey) -> u64 {
        if let Some(ino) = self.computed(key) {
            return ino;
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
        inner.insert(key, ino, 0);
        ino
    }

    /// The kernel was given `ino` for `key` by a lookup: it holds the number
    /// until it forgets it.
    pub fn looked_up(&self, key: &NodeKey, ino: u64) {
        if ino & OFFSET_FLAG != 0 {
            return;
        }
        let mut inner = self.inner.write();
        if let Some(slot) = inner.by_ino.get_mut(&ino) {
            if slot.key == *key {
                slot.lookups += 1;
            }
        } else if !inner.by_key.contains_key(key) {
            // Dropped since it was handed out: the number is still this key's.
            inner.insert(key, ino, 1);
        }
    }

    /// The kernel forgot `n` lookups of `ino`.
    pub fn forget(&self, ino: u64, n: u64) {
        if ino == ROOT_INO || ino & OFFSET_FLAG != 0 {
            return;
        }
        let mut inner = self.inner.write();
        let Some(slot) = inner.by_ino.get_mut(&ino) else {
            return;
        };
        slot.lookups = slot.lookups.saturating_sub(n);
        if slot.lookups == 0 {
            inner.remove(ino);
        }
    }

    /// Numbers in the table (computed ones take none).
    pub fn in_use(&self) -> usize {
        self.inner.read().by_ino.len()
    }

    fn computed(&self, key: &NodeKey) -> Option<u64> {
        let (dir_key, n) = match key {
            NodeKey::Offset(p, n) => (NodeKey::OffsetDir(p.clone()), *n),
            NodeKey::Time(p, ms) => (NodeKey::TimeDir(p.clone()), *ms),
            _ => return None,
        };
        let n = u64::try_from(n).ok().filter(|n| *n <= OFFSET_MASK)?;
        let dir = self.ino(&dir_key);
        (dir < DIR_LIMIT).then_some(OFFSET_FLAG | (dir << OFFSET_BITS) | n)
    }

    /// The node behind `ino`, if it is known and its partition was not deleted.
    pub fn key(&self, ino: u64) -> Option<NodeKey> {
        let inner = self.inner.read();
        if ino & OFFSET_FLAG != 0 {
            let dir = (ino & !OFFSET_FLAG) >> OFFSET_BITS;
            let n = (ino & OFFSET_MASK) as i64;
            return match inner.by_ino.get(&dir).map(|s| &s.key) {
                Some(NodeKey::OffsetDir(p)) => Some(NodeKey::Offset(p.clone(), n)),
                Some(NodeKey::TimeDir(p)) => Some(NodeKey::Time(p.clone(), n)),
                _ => None,
            };
        }
        inner.by_ino.get(&ino).map(|s| s.key.clone())
    }

    /// Drops every number of a deleted partition, so that a partition created
    /// later under the same name gets new numbers and stale handles of the old
    /// one resolve to nothing.
    pub fn forget_partition(&self, name: &str) {
        self.forget_where(|k| k.partition().is_some_and(|p| &**p == name));
    }

    /// The nodes of a deleted group, as [`Self::forget_partition`].
    pub fn forget_group(&self, name: &str) {
        self.forget_where(|k| k.group().is_some_and(|g| &**g == name));
    }

    fn forget_where(&self, gone: impl Fn(&NodeKey) -> bool) {
        let mut inner = self.inner.write();
        let gone: Vec<u64> = inner
            .by_ino
            .iter()
            .filter(|(_, s)| gone(&s.key))
            .map(|(ino, _)| *ino)
            .collect();
        for ino in gone {
            inner.remove(ino);
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

    #[test]
    fn forgotten_numbers_leave_the_table() {
        let t = InodeTable::default();
        let p = name("t-0");
        let base = t.in_use();
        for i in 0..10_000 {
            let key = NodeKey::Raw(p.clone(), name(&format!("{i:020}.log")));
            let ino = t.ino(&key);
            t.looked_up(&key, ino);
            t.looked_up(&key, ino);
            assert_eq!(t.key(ino), Some(key.clone()));
            t.forget(ino, 1);
            assert_eq!(t.key(ino), Some(key), "one lookup is still held");
            t.forget(ino, 1);
            assert_eq!(t.key(ino), None);
        }
        assert_eq!(t.in_use(), base);
        t.forget(ROOT_INO, 1);
        assert_eq!(t.key(ROOT_INO), Some(NodeKey::Root));
    }

    #[test]
    fn unreferenced_numbers_are_bounded() {
        let t = InodeTable::default();
        let p = name("t-0");
        let held = NodeKey::Raw(p.clone(), name("held"));
        let held_ino = t.ino(&held);
        t.looked_up(&held, held_ino);
        for i in 0..UNREFERENCED_LIMIT + 5_000 {
            t.ino(&NodeKey::Raw(p.clone(), name(&format!("{i}"))));
        }
        assert!(t.in_use() <= UNREFERENCED_LIMIT + 2, "{}", t.in_use());
        assert_eq!(t.key(held_ino), Some(held.clone()));
        // A dropped name comes back under a new number; a lookup of a number
        // handed out before it was dropped keeps that number.
        let first = NodeKey::Raw(p.clone(), name("0"));
        let again = t.ino(&first);
        assert_ne!(t.key(again), None);
        t.looked_up(&held, held_ino);
        t.forget(held_ino, 2);
        assert_eq!(t.key(held_ino), None);
    }
}
