//! Kafka's `SkimpyOffsetMap`: key hash → latest offset, in one buffer of
//! fixed 24-byte slots (a 16-byte hash of the key, then the offset), open
//! addressing, no deletion. Its memory is what
//! `log.cleaner.dedupe.buffer.size` gives a cleaner thread, whatever the
//! number of keys: a dirty section with more keys than fit is cleaned in
//! several passes.
//!
//! The hash is not Kafka's MD5 but a 128-bit SipHash-1-3 under a key drawn
//! at random for each map. The digest never leaves the map: the slot
//! count, the probe sequence over the digest's bytes and so which records
//! a pass keeps are Kafka's. MD5 took a quarter of a pass: 186 ns a
//! 10-byte key, against SipHash's 15; and where anyone can compute an MD5 (and
//! craft two keys that share one, so that a pass drops the older key's
//! latest value), the keyed hash cannot be predicted from outside. Two keys
//! with the same hash are still one key, as in Kafka, with the same odds.
//!
//! The buffer is an anonymous mapping: untouched pages cost no memory until
//! a pass uses them, and a clear writes zeros over what was used, as Kafka's
//! does (giving the pages back would have every pass fault them in again,
//! which cost more than the zeros). It asks for huge pages: a probe lands
//! anywhere in the buffer, and with 4 KiB pages most probes missed the TLB
//! as well as the cache (a pass took up to half again as long). Callers
//! hash a batch's keys first and [`OffsetMap::prefetch`] their slots, so
//! the cache misses of a batch overlap instead of following one another.
//!
//! While a pass builds the map, the map also notes of each offset of the
//! dirty section whether its put was later replaced by a put of the same
//! hash (two bits an offset, beside the buffer, at most an eighth of its
//! size). The copy that follows then knows whether a record it put is its
//! key's latest without hashing the key again or probing the buffer (a
//! random slot, a cache miss): both were half of a pass's time in the map.
//! Only the records the bits do not cover are looked up: the clean
//! section's, and those past what the bits cover.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;

use memmap2::{Advice, MmapMut};
use siphasher::sip128::SipHasher13;

/// The digest's length: MD5's, `CleanerConfig.HASH_ALGORITHM`, so the slot
/// size and count are Kafka's.
const HASH_SIZE: usize = 16;

/// A key's digest in the map.
pub type KeyHash = [u8; HASH_SIZE];

/// The map's hash of keys, which a thread reading ahead of the map takes
/// along (it is the map's key, copied).
#[derive(Clone, Copy)]
pub struct KeyHasher(SipHasher13);

impl KeyHasher {
    #[inline]
    pub fn hash(&self, key: &[u8]) -> KeyHash {
        let h = self.0.hash(key);
        ((h.h1 as u128) << 64 | h.h2 as u128).to_be_bytes()
    }
}
/// A slot: the hash, then the offset as a big-endian int64.
pub const BYTES_PER_ENTRY: usize = HASH_SIZE + 8;

pub struct OffsetMap {
    bytes: MmapMut,
    slots: Slots,
    entries: usize,
    /// The last offset put or declared read (`updateLatestOffset`), -1 when
    /// nothing was.
    latest_offset: i64,
    hasher: KeyHasher,
    puts: Puts,
}

/// Kafka's `Utils.abs`: `Integer.MIN_VALUE` maps to 0.
fn java_abs(v: i32) -> i32 {
    if v == i32::MIN { 0 } else { v.abs() }
}

impl OffsetMap {
    /// A map over `memory` bytes, zero pages until a slot on them is used.
    /// Panics, as an allocation that fails does, when the mapping cannot be made.
    pub fn new(memory: usize) -> OffsetMap {
        let bytes = MmapMut::map_anon(memory.max(1)).expect("the offset map's memory");
        // Only a hint: without transparent huge pages, 4 KiB pages serve.
        let _ = bytes.advise(Advice::HugePage);
        OffsetMap {
            bytes,
            slots: Slots::new(memory / BYTES_PER_ENTRY),
            entries: 0,
            latest_offset: -1,
            hasher: random_hasher(),
            puts: Puts::default(),
        }
    }

    pub fn slots(&self) -> usize {
        self.slots.count
    }

    /// Distinct hashes held.
    pub fn size(&self) -> usize {
        self.entries
    }

    pub fn latest_offset(&self) -> i64 {
        self.latest_offset
    }

    pub fn update_latest_offset(&mut self, offset: i64) {
        self.latest_offset = offset;
    }

    /// `entries / slots`, the cleaner summary's buffer utilization.
    pub fn utilization(&self) -> f64 {
        self.entries as f64 / self.slots.count as f64
    }

    /// Empties the map. A map that was never filled is not touched.
    pub fn clear(&mut self) {
        if self.entries > 0 {
            self.bytes.fill(0);
        }
        self.entries = 0;
        self.latest_offset = -1;
        self.puts.reset(0, 0);
    }

    /// Has the map remember, of each offset in `[start, end)` it is given,
    /// whether a later put of the same hash replaced it (see
    /// [`Self::superseded`]); at most an eighth of its own memory's worth.
    pub fn track(&mut self, start: i64, end: i64) {
        let cap = self.bytes.len() / 8 * 8 / BITS_PER_OFFSET;
        let len = (end.saturating_sub(start).max(0) as u64).min(cap as u64);
        self.puts.reset(start, len as usize);
    }

    /// Whether the record put at `offset` was replaced by a later put of
    /// its hash, so that [`Self::get_hashed`] of its key answers another
    /// offset (`Some(true)`) or `offset` itself (`Some(false)`); `None` when
    /// the map does not know: nothing was put at `offset`, the offset is
    /// past what [`Self::track`] covers, or the puts came out of the log's
    /// order (then an offset may name two records).
    #[inline]
    pub fn superseded(&self, offset: i64) -> Option<bool> {
        self.puts.superseded(offset)
    }

    /// Whether [`Self::superseded`] answers `Some(true)` for every offset
    /// of `first..=last` (a batch's), word by word.
    pub fn all_superseded(&self, first: i64, last: i64) -> bool {
        self.puts.all_superseded(first, last)
    }

    /// A batch starting at `base` is read: a log whose batches go back in
    /// offset order is no longer tracked.
    pub fn batch_read(&mut self, base: i64) {
        if base <= self.latest_offset {
            self.puts.ordered = false;
        }
    }

    /// The digest of `key`, for [`Self::put_hashed`] and [`Self::get_hashed`].
    #[inline]
    pub fn hash(&self, key: &[u8]) -> KeyHash {
        self.hasher.hash(key)
    }

    pub fn hasher(&self) -> KeyHasher {
        self.hasher
    }

    /// Starts loading the slot of `hash`'s first probe into the cache,
    /// where most lookups end. Only a hint.
    pub fn prefetch(&self, hash: &KeyHash) {
        if self.slots.count == 0 {
            return;
        }
        let pos = self.position_of(hash, 0);
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
            let base = self.bytes.as_ptr();
            // A slot may straddle two cache lines: both are asked for.
            for at in [pos, pos + BYTES_PER_ENTRY - 1] {
                // SAFETY: a prefetch never faults, and `at` is inside the
                // buffer (`pos` is a slot's start, below `slots * 24`).
                unsafe { _mm_prefetch::<_MM_HINT_T0>(base.add(at).cast()) };
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = pos;
    }

    /// Kafka's `positionOf`: attempts 0..12 read overlapping 4-byte windows
    /// of the hash, later ones step on linearly from the last window (the
    /// step is added before the absolute value, as Java's int arithmetic does).
    fn position_of(&self, hash: &KeyHash, attempt: usize) -> usize {
        let at = attempt.min(HASH_SIZE - 4);
        let window = i32::from_be_bytes(hash[at..at + 4].try_into().unwrap_or_default());
        let step = attempt.saturating_sub(HASH_SIZE - 4) as i32;
        let slot = self.slots.of(java_abs(window.wrapping_add(step)) as u32);
        slot * BYTES_PER_ENTRY
    }

    /// Kafka's test: three longs of zero.
    #[inline]
    fn is_empty(&self, pos: usize) -> bool {
        let word =
            |at: usize| u64::from_ne_bytes(self.bytes[at..at + 8].try_into().unwrap_or_default());
        word(pos) | word(pos + 8) | word(pos + 16) == 0
    }

    /// Whether the slot at `pos` holds `hash`.
    #[inline]
    fn holds(&self, pos: usize, hash: &KeyHash) -> bool {
        let slot: [u8; HASH_SIZE] = self.bytes[pos..pos + HASH_SIZE]
            .try_into()
            .unwrap_or_default();
        u128::from_ne_bytes(slot) == u128::from_ne_bytes(*hash)
    }

    /// Records `offset` as the latest of `key`. Panics, as Kafka throws, on
    /// a new key when every slot is taken: the cleaner stops well before,
    /// at `log.cleaner.io.buffer.load.factor`.
    pub fn put(&mut self, key: &[u8], offset: i64) {
        let hash = self.hash(key);
        self.put_hashed(&hash, offset);
    }

    /// [`Self::put`] of a key already hashed.
    pub fn put_hashed(&mut self, hash: &KeyHash, offset: i64) {
        assert!(
            self.entries < self.slots.count,
            "Attempted to add a new entry to a full offset map, entries: {}, slots: {}",
            self.entries,
            self.slots.count
        );
        if offset <= self.latest_offset {
            self.puts.ordered = false;
        }
        let mut attempt = 0;
        let mut pos = self.position_of(hash, attempt);
        while !self.is_empty(pos) {
            if self.holds(pos, hash) {
                let at = pos + HASH_SIZE..pos + BYTES_PER_ENTRY;
                let replaced =
                    i64::from_be_bytes(self.bytes[at.clone()].try_into().unwrap_or_default());
                self.bytes[at].copy_from_slice(&offset.to_be_bytes());
                self.latest_offset = offset;
                self.puts.put(offset, Some(replaced));
                return;
            }
            attempt += 1;
            pos = self.position_of(hash, attempt);
        }
        self.bytes[pos..pos + HASH_SIZE].copy_from_slice(hash);
        self.bytes[pos + HASH_SIZE..pos + BYTES_PER_ENTRY].copy_from_slice(&offset.to_be_bytes());
        self.latest_offset = offset;
        self.entries += 1;
        self.puts.put(offset, None);
    }

    /// The latest offset of `key`, or -1 when it is not in the map.
    pub fn get(&self, key: &[u8]) -> i64 {
        self.get_hashed(&self.hash(key))
    }

    /// [`Self::get`] of a key already hashed.
    pub fn get_hashed(&self, hash: &KeyHash) -> i64 {
        let max_attempts = self.slots.count + HASH_SIZE - 4;
        for attempt in 0..max_attempts {
            let pos = self.position_of(hash, attempt);
            if self.is_empty(pos) {
                return -1;
            }
            if self.holds(pos, hash) {
                let off = &self.bytes[pos + HASH_SIZE..pos + BYTES_PER_ENTRY];
                return i64::from_be_bytes(off.try_into().unwrap_or_default());
            }
        }
        -1
    }

    /// Where a probe of `hash` lands, in slots: for tests against Kafka's
    /// probe sequence.
    #[cfg(test)]
    fn probe_slot(&self, hash: &KeyHash, attempt: usize) -> usize {
        self.position_of(hash, attempt) / BYTES_PER_ENTRY
    }
}

/// Bits [`Puts`] keeps an offset.
const BITS_PER_OFFSET: usize = 2;

/// What a pass's puts tell its copy about the records they came from: for
/// each offset of the dirty section, two bits, put and replaced. A record
/// of the dirty section is kept when its offset is its key's latest, and
/// the puts already saw which are: the copy then asks the map (a hash of
/// the key and a random slot of the buffer, likely a cache miss) only of
/// the records these bits do not cover. A dirty section of 10M records
/// takes 2.5 MiB, read in the log's order.
#[derive(Default)]
struct Puts {
    start: i64,
    /// Offsets covered from `start`.
    len: usize,
    bits: Vec<u64>,
    /// Every put so far came after the one before and after the batches
    /// read before it, so one offset is one record.
    ordered: bool,
}

impl Puts {
    fn reset(&mut self, start: i64, len: usize) {
        let words = (len * BITS_PER_OFFSET).div_ceil(64);
        self.bits.clear();
        self.bits.resize(words, 0);
        self.start = start;
        self.len = len;
        self.ordered = true;
    }

    /// Where `offset`'s bits are: a word and a shift.
    #[inline]
    fn at(&self, offset: i64) -> Option<(usize, u32)> {
        let i = usize::try_from(offset.checked_sub(self.start)?).ok()?;
        (i < self.len).then(|| {
            let per_word = 64 / BITS_PER_OFFSET;
            (i / per_word, ((i % per_word) * BITS_PER_OFFSET) as u32)
        })
    }

    /// `offset` put, replacing the one put at `replaced`.
    #[inline]
    fn put(&mut self, offset: i64, replaced: Option<i64>) {
        if let Some((word, shift)) = self.at(offset) {
            self.bits[word] |= 1 << shift;
        }
        if let Some((word, shift)) = replaced.and_then(|r| self.at(r)) {
            self.bits[word] |= 2 << shift;
        }
    }

    fn all_superseded(&self, first: i64, last: i64) -> bool {
        if !self.ordered || first > last {
            return false;
        }
        let (Some(_), Some(_)) = (self.at(first), self.at(last)) else {
            return false;
        };
        // Both bits of each offset set: the bits `2 * from..2 * (to + 1)`.
        let from = (first - self.start) as usize * BITS_PER_OFFSET;
        let to = (last - self.start + 1) as usize * BITS_PER_OFFSET;
        let mut at = from;
        while at < to {
            let (word, bit) = (at / 64, at % 64);
            let n = (to - at).min(64 - bit);
            let mask = (u64::MAX >> (64 - n)) << bit;
            if self.bits[word] & mask != mask {
                return false;
            }
            at += n;
        }
        true
    }

    #[inline]
    fn superseded(&self, offset: i64) -> Option<bool> {
        if !self.ordered {
            return None;
        }
        let (word, shift) = self.at(offset)?;
        match (self.bits[word] >> shift) & 3 {
            1 => Some(false),
            3 => Some(true),
            _ => None,
        }
    }
}

/// The slot count, and Lemire's multiplier for the remainder of a 32-bit
/// probe window by it: every put and lookup takes two remainders (the
/// prefetch's, then the probe's), and a 64-bit division took a tenth of
/// the cleaner thread's time.
#[derive(Clone, Copy, Debug)]
struct Slots {
    count: usize,
    /// `2^64 / count` rounded up, when `count` fits 32 bits (a window
    /// below a larger count is its own remainder).
    magic: Option<u64>,
}

impl Slots {
    fn new(count: usize) -> Slots {
        let magic = match u32::try_from(count) {
            Ok(d) if d > 0 => Some((u64::MAX / d as u64).wrapping_add(1)),
            _ => None,
        };
        Slots { count, magic }
    }

    /// `window % count` (Lemire, Kaser and Kurz, "Faster Remainder by
    /// Direct Computation", 2019: exact for every 32-bit window and count).
    #[inline]
    fn of(&self, window: u32) -> usize {
        match self.magic {
            Some(m) => {
                let low = m.wrapping_mul(window as u64);
                ((low as u128 * self.count as u128) >> 64) as usize
            }
            None => window as usize % self.count,
        }
    }
}

/// A SipHash under a key nobody outside this process knows: `RandomState`'s
/// keys come from the operating system's random source.
fn random_hasher() -> KeyHasher {
    let state = RandomState::new();
    KeyHasher(SipHasher13::new_with_keys(
        state.hash_one(0u8),
        state.hash_one(1u8),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The note's vector B.7: MD5("key-1") and its probe slots at Kafka's
    /// default capacity (128 MiB / 24 = 5,592,405 slots), worked out by
    /// hand from `SkimpyOffsetMap.positionOf`. The map hashes otherwise,
    /// but walks a digest's bytes as Kafka does.
    #[test]
    fn probe_positions_are_kafkas() {
        use md5::{Digest, Md5};
        let mut m = OffsetMap::new(0);
        m.slots = Slots::new(5_592_405);
        let hash: KeyHash = Md5::digest(b"key-1").into();
        let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, "21af6b8b5e2244835679bbdbe0ab03a6");
        for (attempt, slot) in [
            (0, 311_554),
            (1, 4_136_861),
            (12, 5_569_657),
            (13, 5_569_656),
            (14, 5_569_655),
        ] {
            assert_eq!(m.probe_slot(&hash, attempt), slot, "attempt {attempt}");
        }
    }

    /// Each map draws its own key: the digests of one key differ between
    /// maps, so nobody can compute them ahead, and each map still finds
    /// its keys by its own digests.
    #[test]
    fn each_map_hashes_under_its_own_key() {
        let (mut a, mut b) = (OffsetMap::new(24 * 16), OffsetMap::new(24 * 16));
        assert_ne!(a.hash(b"key-1"), b.hash(b"key-1"));
        assert_eq!(a.hash(b"key-1"), a.hash(b"key-1"));
        a.put(b"key-1", 7);
        b.put_hashed(&b.hash(b"key-1"), 9);
        assert_eq!((a.get(b"key-1"), b.get(b"key-1")), (7, 9));
        assert_eq!(a.get_hashed(&b.hash(b"key-1")), -1);
    }

    proptest::proptest! {
        /// The multiplier's remainder is the division's, for any window
        /// and any slot count (the edges: one slot, counts at and past
        /// 2^31 and 2^32, the largest window).
        #[test]
        fn remainders_are_the_divisions(
            window in proptest::prop_oneof![proptest::num::u32::ANY, 0..2u32, (i32::MAX as u32 - 2)..=i32::MAX as u32, (u32::MAX - 2)..=u32::MAX],
            count in proptest::prop_oneof![1usize..64, 1usize..=u32::MAX as usize, (1usize << 31) - 2..(1usize << 31) + 2, (1usize << 32) - 2..(1usize << 32) + 2, 5_592_405usize..5_592_406],
        ) {
            proptest::prop_assert_eq!(Slots::new(count).of(window), window as usize % count);
        }
    }

    #[test]
    fn latest_offset_per_key_and_misses() {
        let mut m = OffsetMap::new(24 * 100);
        assert_eq!(m.slots(), 100);
        for i in 0..50i64 {
            m.put(format!("k{}", i % 10).as_bytes(), i);
        }
        assert_eq!(m.size(), 10);
        for k in 0..10i64 {
            assert_eq!(m.get(format!("k{k}").as_bytes()), 40 + k);
        }
        assert_eq!(m.get(b"absent"), -1);
        assert_eq!(m.latest_offset(), 49);
        m.clear();
        assert_eq!((m.size(), m.latest_offset(), m.get(b"k1")), (0, -1, -1));
    }

    /// Every slot used: the probe sequence still finds each key, and a
    /// miss ends after `slots + 12` attempts instead of looping.
    #[test]
    fn a_full_map_finds_every_key_and_ends_a_miss() {
        let mut m = OffsetMap::new(24 * 7);
        for i in 0..7i64 {
            m.put(format!("key{i}").as_bytes(), i * 10);
        }
        assert_eq!(m.size(), 7);
        for i in 0..7i64 {
            assert_eq!(m.get(format!("key{i}").as_bytes()), i * 10);
        }
        assert_eq!(m.get(b"not there"), -1);
    }

    #[test]
    #[should_panic(expected = "full offset map")]
    fn a_new_key_in_a_full_map_is_refused() {
        let mut m = OffsetMap::new(24 * 2);
        m.put(b"a", 1);
        m.put(b"b", 2);
        m.put(b"c", 3);
    }

    /// The bits answer what a lookup of the record's key would: its own
    /// offset while no later put of the key came, another one after.
    #[test]
    fn puts_know_which_records_were_superseded() {
        let mut m = OffsetMap::new(24 * 100);
        m.track(10, 20);
        m.put(b"a", 10);
        m.put(b"b", 11);
        m.put(b"a", 13);
        // Offset 12 was a record put nowhere (a marker, a record without a key).
        m.update_latest_offset(14);
        m.batch_read(15);
        m.put(b"b", 19);
        m.put(b"c", 25);
        assert_eq!(m.superseded(10), Some(true));
        assert_eq!(m.superseded(11), Some(true));
        assert_eq!(m.superseded(12), None);
        assert_eq!(m.superseded(13), Some(false));
        assert_eq!(m.superseded(19), Some(false));
        // Before and past the tracked range: only the map knows.
        assert_eq!((m.superseded(9), m.superseded(25)), (None, None));
        for (key, offset) in [(&b"a"[..], 13), (b"b", 19), (b"c", 25)] {
            assert_eq!(m.get(key), offset);
        }
        m.clear();
        assert_eq!(m.superseded(13), None);
    }

    /// A range is superseded whole when each of its offsets is, across
    /// the bits' words.
    #[test]
    fn all_superseded_is_every_offset_superseded() {
        let mut m = OffsetMap::new(24 * 1000);
        m.track(5, 305);
        // Keys repeat every 7 offsets; offsets 100 and 200 are put nowhere.
        for offset in (5..305).filter(|o| o % 100 != 0) {
            m.put(format!("k{}", offset % 7).as_bytes(), offset);
        }
        for first in 0..310 {
            for last in first..(first + 80).min(310) {
                let each = (first..=last).all(|o| m.superseded(o) == Some(true));
                assert_eq!(m.all_superseded(first, last), each, "{first}..={last}");
            }
        }
        assert!(m.all_superseded(5, 99) && !m.all_superseded(5, 100));
    }

    /// A put at or before an offset already put or declared read, or a
    /// batch that starts there, means one offset may name two records:
    /// the bits no longer answer for any.
    #[test]
    fn puts_out_of_order_are_not_tracked() {
        for out_of_order in [
            |m: &mut OffsetMap| m.put(b"b", 1),
            |m: &mut OffsetMap| m.put(b"b", 2),
            |m: &mut OffsetMap| m.batch_read(2),
        ] {
            let mut m = OffsetMap::new(24 * 100);
            m.track(0, 10);
            m.put(b"a", 2);
            assert_eq!(m.superseded(2), Some(false));
            out_of_order(&mut m);
            assert_eq!(m.superseded(2), None);
            m.clear();
            m.track(0, 10);
            m.put(b"a", 2);
            assert_eq!(m.superseded(2), Some(false));
        }
    }

    /// The bits take at most an eighth of the map's memory: past that,
    /// offsets are left to the map.
    #[test]
    fn puts_tracked_within_an_eighth_of_the_memory() {
        let mut m = OffsetMap::new(24 * 100);
        let cap = 24 * 100 / 8 * 8 / BITS_PER_OFFSET;
        m.track(0, i64::MAX);
        for offset in [0, cap as i64 - 1, cap as i64] {
            m.put(format!("k{offset}").as_bytes(), offset);
        }
        assert_eq!(m.superseded(cap as i64 - 1), Some(false));
        assert_eq!(m.superseded(cap as i64), None);
        assert!(m.puts.bits.len() * 8 < 24 * 100 / 8 + 8);
    }
}
