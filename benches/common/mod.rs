//! Helpers shared by the storage bench and the mount bench
//! (`examples/bench_mount.rs` includes this file by path).

use std::env;

pub const KIB: u64 = 1024;
pub const MIB: u64 = 1024 * KIB;
pub const GIB: u64 = 1024 * MIB;

/// A size from the environment (`123`, `64K`, `16M`, `1G`), or `default`.
pub fn env_u64(name: &str, default: u64) -> u64 {
    match env::var(name) {
        Ok(v) => parse_size(&v).unwrap_or_else(|| panic!("{name}={v}: not a size")),
        Err(_) => default,
    }
}

/// `123`, `64K`, `16M`, `1G` (powers of 1024).
pub fn parse_size(v: &str) -> Option<u64> {
    let v = v.trim();
    let (num, mult) = match v.chars().last()? {
        'k' | 'K' => (&v[..v.len() - 1], KIB),
        'm' | 'M' => (&v[..v.len() - 1], MIB),
        'g' | 'G' => (&v[..v.len() - 1], GIB),
        _ => (v, 1),
    };
    num.trim().parse::<u64>().ok().map(|n| n * mult)
}

/// Median of the figures (sorts them).
pub fn median(v: &mut [f64]) -> f64 {
    assert!(!v.is_empty());
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The `p` quantile (0..=1) of sorted figures.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Min, median and max of some runs' figures, so a table shows the spread
/// and not only the middle.
#[allow(dead_code)] // not every bench that includes this file uses it
#[derive(Clone, Copy, Debug)]
pub struct Spread {
    pub min: f64,
    pub median: f64,
    pub max: f64,
}

#[allow(dead_code)]
impl Spread {
    pub fn of(v: &[f64]) -> Spread {
        let mut s = v.to_vec();
        let median = median(&mut s);
        Spread {
            min: s[0],
            median,
            max: s[s.len() - 1],
        }
    }

    /// The spread of `f` of each figure (for a rate from times, min and max swap).
    pub fn map(self, f: impl Fn(f64) -> f64) -> Spread {
        let (a, b) = (f(self.min), f(self.max));
        Spread {
            min: a.min(b),
            median: f(self.median),
            max: a.max(b),
        }
    }
}

/// xorshift64*: deterministic, no dependency.
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}
