//! Fetched records, kept up to `cache.bytes` across every partition and
//! dropped least recently used first. Records never change once written,
//! so a cached chunk is never stale; only where the log starts and ends can
//! move, and neither is ever answered from here.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use parking_lot::Mutex;

use super::fetch::Chunk;

pub struct Cache {
    limit: u64,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Per partition, chunks by first offset (they never overlap).
    parts: HashMap<Arc<str>, BTreeMap<i64, Slot>>,
    /// Use order: tick → (partition, first offset).
    lru: BTreeMap<u64, (Arc<str>, i64)>,
    tick: u64,
    bytes: u64,
}

struct Slot {
    chunk: Arc<Chunk>,
    tick: u64,
}

impl Cache {
    pub fn new(limit: u64) -> Self {
        Cache {
            limit,
            inner: Mutex::default(),
        }
    }

    /// The chunk covering `offset` of `part`, if cached.
    pub fn get(&self, part: &Arc<str>, offset: i64) -> Option<Arc<Chunk>> {
        let mut g = self.inner.lock();
        let inner = &mut *g;
        let chunks = inner.parts.get_mut(part)?;
        let (&first, slot) = chunks.range_mut(..=offset).next_back()?;
        if offset >= slot.chunk.next {
            return None;
        }
        inner.lru.remove(&slot.tick);
        inner.tick += 1;
        slot.tick = inner.tick;
        inner.lru.insert(inner.tick, (part.clone(), first));
        Some(slot.chunk.clone())
    }

    /// Where the first cached chunk after `offset` starts (a fetch from
    /// `offset` need not go past it), or `i64::MAX`.
    pub fn next_cached(&self, part: &Arc<str>, offset: i64) -> i64 {
        let g = self.inner.lock();
        g.parts
            .get(part)
            .and_then(|c| c.range(offset + 1..).next().map(|(&k, _)| k))
            .unwrap_or(i64::MAX)
    }

    pub fn insert(&self, part: &Arc<str>, chunk: Arc<Chunk>) {
        if chunk.next <= chunk.first {
            return;
        }
        let mut g = self.inner.lock();
        let inner = &mut *g;
        inner.tick += 1;
        let tick = inner.tick;
        let first = chunk.first;
        let bytes = chunk.bytes as u64;
        let chunks = inner.parts.entry(part.clone()).or_default();
        // Two readers may have fetched the same range: keep one.
        if let Some(old) = chunks.insert(first, Slot { chunk, tick }) {
            inner.lru.remove(&old.tick);
            inner.bytes -= old.chunk.bytes as u64;
        }
        inner.lru.insert(tick, (part.clone(), first));
        inner.bytes += bytes;
        while inner.bytes > self.limit {
            let Some((_, (p, first))) = inner.lru.pop_first() else {
                break;
            };
            if let Some(chunks) = inner.parts.get_mut(&p) {
                if let Some(old) = chunks.remove(&first) {
                    inner.bytes -= old.chunk.bytes as u64;
                }
                if chunks.is_empty() {
                    inner.parts.remove(&p);
                }
            }
        }
    }

    /// Drops a partition's chunks (its topic was deleted).
    pub fn forget(&self, part: &str) {
        let mut g = self.inner.lock();
        let inner = &mut *g;
        if let Some(chunks) = inner.parts.remove(part) {
            for slot in chunks.values() {
                inner.lru.remove(&slot.tick);
                inner.bytes -= slot.chunk.bytes as u64;
            }
        }
    }

    /// Bytes held now.
    pub fn bytes(&self) -> u64 {
        self.inner.lock().bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(first: i64, next: i64, bytes: usize) -> Arc<Chunk> {
        Arc::new(Chunk {
            first,
            next,
            records: Vec::new(),
            bytes,
        })
    }

    #[test]
    fn bounded_and_least_recently_used_first() {
        let c = Cache::new(250);
        let p: Arc<str> = Arc::from("t-0");
        c.insert(&p, chunk(0, 10, 100));
        c.insert(&p, chunk(10, 20, 100));
        assert!(c.get(&p, 5).is_some()); // 0..10 is now the newest
        c.insert(&p, chunk(20, 30, 100));
        assert_eq!(c.bytes(), 200);
        assert!(
            c.get(&p, 15).is_none(),
            "10..20 was the least recently used"
        );
        assert!(c.get(&p, 9).is_some());
        assert!(c.get(&p, 30).is_none());
        assert_eq!(c.next_cached(&p, 0), 20);
        assert_eq!(c.next_cached(&p, 20), i64::MAX);
        c.forget("t-0");
        assert_eq!(c.bytes(), 0);
    }
}
