//! What the listener may hold: connections (Kafka's `ConnectionQuotas`),
//! bytes of requests in flight (Kafka's `SimpleMemoryPool`), and file
//! descriptors, of which storage keeps a quarter (at least 1,024), or what
//! its partitions need if that is more; and so the default number of
//! partitions (`max.broker.partitions`) the descriptors allow.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use parking_lot::Mutex;

use crate::config::ListenerConfig;

/// Something to wake when a limit frees up (a processor's or the
/// acceptor's poll waker).
pub type Wake = Arc<dyn Fn() + Send + Sync>;

/// Kafka's `SimpleMemoryPool` in its non-strict mode, as `SocketServer`
/// builds it from `queued.max.request.bytes`: a request's whole size is
/// taken from the pool once its size prefix is read, and given back when
/// the request has been handled. An allocation succeeds while *any* memory
/// is left, so the pool may go below zero by at most one request
/// (`socket.request.max.bytes`); when it is empty, connections stop reading
/// (their requests wait in the kernel's socket buffers) until memory comes
/// back. A request is never refused for want of memory.
pub struct MemoryPool {
    /// `None`: no bound (`queued.max.request.bytes` ≤ 0, Kafka's `MemoryPool.NONE`).
    size: Option<i64>,
    available: AtomicI64,
    /// Set when an allocation failed; whoever gives memory back then wakes
    /// the processors so their paused connections read again.
    starved: AtomicBool,
    wakers: Mutex<Vec<Wake>>,
}

/// Bytes taken from a [`MemoryPool`], given back on drop.
pub struct Lease {
    pool: Arc<MemoryPool>,
    bytes: i64,
}

impl MemoryPool {
    pub fn new(queued_max_request_bytes: i64) -> Arc<MemoryPool> {
        let size = (queued_max_request_bytes > 0).then_some(queued_max_request_bytes);
        Arc::new(MemoryPool {
            size,
            available: AtomicI64::new(size.unwrap_or(i64::MAX)),
            starved: AtomicBool::new(false),
            wakers: Mutex::new(Vec::new()),
        })
    }

    /// Who to wake when memory comes back.
    pub fn on_release(&self, wake: Wake) {
        self.wakers.lock().push(wake);
    }

    /// Takes `bytes` if any memory is left (`tryAllocate`); `None`: the pool
    /// is exhausted, try again once woken.
    pub fn try_allocate(self: &Arc<Self>, bytes: usize) -> Option<Lease> {
        let bytes = bytes as i64;
        if self.size.is_none() {
            return Some(Lease {
                pool: self.clone(),
                bytes: 0,
            });
        }
        let mut available = self.available.load(Ordering::Acquire);
        while available >= 1 {
            match self.available.compare_exchange_weak(
                available,
                available - bytes,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    return Some(Lease {
                        pool: self.clone(),
                        bytes,
                    });
                }
                Err(now) => available = now,
            }
        }
        self.starved.store(true, Ordering::Release);
        // Memory may have come back between the load and the flag: look again,
        // so that no release goes by without a wake-up.
        if self.available.load(Ordering::Acquire) >= 1 {
            self.wake_all();
        }
        None
    }

    /// Bytes left (negative when the last allocation went past the size).
    pub fn available(&self) -> i64 {
        self.available.load(Ordering::Acquire)
    }

    /// The size, `None` without a bound.
    pub fn size(&self) -> Option<i64> {
        self.size
    }

    fn release(&self, bytes: i64) {
        if bytes == 0 {
            return;
        }
        self.available.fetch_add(bytes, Ordering::AcqRel);
        if self.starved.load(Ordering::Acquire) {
            self.wake_all();
        }
    }

    fn wake_all(&self) {
        self.starved.store(false, Ordering::Release);
        for w in self.wakers.lock().iter() {
            w();
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.pool.release(self.bytes);
    }
}

/// Why a connection is not kept.
#[derive(Debug, PartialEq, Eq)]
pub struct TooManyConnections {
    pub ip: IpAddr,
    pub max: u32,
}

/// Kafka's `ConnectionQuotas` for one listener: `max.connections` (the
/// acceptor stops accepting while the count is at it, so new connections
/// wait in the kernel's backlog) and `max.connections.per.ip` (a connection
/// past it is accepted and closed at once). The cap in force is the lower
/// of `max.connections` and the file descriptors the listener may use.
pub struct ConnectionQuotas {
    config: ListenerConfig,
    max_total: u32,
    counts: Mutex<Counts>,
    /// The acceptor waits for a slot: wake it on the next close.
    acceptor_waiting: AtomicBool,
    acceptor: Mutex<Option<Wake>>,
}

#[derive(Default)]
struct Counts {
    total: u32,
    per_ip: HashMap<IpAddr, u32>,
}

impl ConnectionQuotas {
    pub fn new(config: &ListenerConfig, fd_cap: u32) -> ConnectionQuotas {
        ConnectionQuotas {
            config: config.clone(),
            max_total: config.max_connections.min(fd_cap),
            counts: Mutex::new(Counts::default()),
            acceptor_waiting: AtomicBool::new(false),
            acceptor: Mutex::new(None),
        }
    }

    /// The cap in force.
    pub fn max_total(&self) -> u32 {
        self.max_total
    }

    pub fn set_acceptor(&self, wake: Wake) {
        *self.acceptor.lock() = Some(wake);
    }

    /// Open connections.
    pub fn total(&self) -> u32 {
        self.counts.lock().total
    }

    /// Whether the acceptor may accept one more (`connectionSlotAvailable`).
    /// When not, it is woken by the next [`ConnectionQuotas::dec`].
    pub fn slot_available(&self) -> bool {
        let c = self.counts.lock();
        if c.total < self.max_total {
            return true;
        }
        self.acceptor_waiting.store(true, Ordering::Release);
        false
    }

    /// Counts a new connection from `ip` (`inc`). Past the per-IP cap it is
    /// still counted, as in Kafka: the caller closes it and calls `dec`.
    pub fn inc(&self, ip: IpAddr) -> Result<(), TooManyConnections> {
        let mut c = self.counts.lock();
        c.total += 1;
        let n = c.per_ip.entry(ip).or_insert(0);
        let before = *n;
        *n += 1;
        let max = self.config.max_connections_for(ip);
        if before >= max {
            return Err(TooManyConnections { ip, max });
        }
        Ok(())
    }

    /// A connection from `ip` closed.
    pub fn dec(&self, ip: IpAddr) {
        {
            let mut c = self.counts.lock();
            c.total = c.total.saturating_sub(1);
            if let Some(n) = c.per_ip.get_mut(&ip) {
                *n -= 1;
                if *n == 0 {
                    c.per_ip.remove(&ip);
                }
            }
        }
        if self.acceptor_waiting.swap(false, Ordering::AcqRel)
            && let Some(w) = self.acceptor.lock().as_ref()
        {
            w();
        }
    }
}

/// The soft `RLIMIT_NOFILE` (the daemon raised it to the hard limit at start).
pub fn nofile_limit() -> u64 {
    // SAFETY: getrlimit fills a local struct.
    unsafe {
        let mut lim: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
            lim.rlim_cur
        } else {
            1024
        }
    }
}

/// Descriptors the listener itself holds besides its connections: its
/// sockets, each poller and waker, the spare descriptor, and some slack.
const OWN_FDS: u64 = 32;

/// Storage's share of `nofile` descriptors when its partitions need no
/// more: a quarter of them, and at least 1,024 (half of a limit below 2,048).
fn storage_share(nofile: u64) -> u64 {
    (nofile / 4).max((nofile / 2).min(1024))
}

/// Descriptors `n` live partitions need: one each (the active `.log`; their
/// indexes are mapped and hold none), and as many again, at most 1,024, for
/// what storage opens besides (a roll's new files, sealed segments being
/// read, checkpoints, and with a mount FUSE's).
pub fn partition_fds(n: u64) -> u64 {
    n + n.min(1024)
}

/// The default `max.broker.partitions` under `nofile` descriptors: as many
/// partitions as storage's share holds ([`partition_fds`]), at most
/// storage's own default (10,000). Past it a creation would meet EMFILE, and
/// a roll of a partition already there too, which takes it offline.
pub fn default_max_partitions(nofile: u64) -> usize {
    let share = storage_share(nofile);
    let fit = if share >= 2048 {
        share - 1024
    } else {
        share / 2
    };
    (fit as usize).min(commitfs_storage::DEFAULT_MAX_PARTITIONS)
}

/// Descriptors kept for storage given `nofile` and the partitions it may
/// hold: its share, or what `max_partitions` partitions need if more (an
/// explicit `max.broker.partitions` past the default takes them from the
/// listener's connections).
pub fn storage_fds(nofile: u64, max_partitions: u64) -> u64 {
    storage_share(nofile).max(partition_fds(max_partitions))
}

/// How many connections the listener may hold given `nofile`: the
/// descriptors less those kept for storage ([`storage_fds`]) and less the
/// listener's own, so that clients can never take the descriptors a
/// partition needs to roll.
pub fn fd_cap(nofile: u64, max_partitions: u64) -> u32 {
    nofile
        .saturating_sub(storage_fds(nofile, max_partitions))
        .saturating_sub(OWN_FDS)
        .clamp(1, i32::MAX as u64) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn pool_is_not_strict_and_wakes_on_release() {
        let pool = MemoryPool::new(100);
        let woken = Arc::new(AtomicUsize::new(0));
        let w = woken.clone();
        pool.on_release(Arc::new(move || {
            w.fetch_add(1, Ordering::SeqCst);
        }));
        // Any memory left: a request larger than what is left still gets it.
        let a = pool.try_allocate(60).unwrap();
        let b = pool.try_allocate(60).unwrap();
        assert_eq!(pool.available(), -20);
        assert!(pool.try_allocate(1).is_none());
        drop(a);
        assert_eq!(woken.load(Ordering::SeqCst), 1);
        assert_eq!(pool.available(), 40);
        let c = pool.try_allocate(100).unwrap();
        drop((b, c));
        assert_eq!(pool.available(), 100);
        // No bound.
        let none = MemoryPool::new(-1);
        assert!(none.try_allocate(1 << 30).is_some());
        assert_eq!(none.size(), None);
    }

    #[test]
    fn quotas_cap_per_ip_and_in_total() {
        let config = ListenerConfig {
            max_connections: 3,
            max_connections_per_ip: 2,
            ..ListenerConfig::default()
        };
        let q = ConnectionQuotas::new(&config, 1000);
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let other: IpAddr = "127.0.0.2".parse().unwrap();
        assert!(q.inc(ip).is_ok());
        assert!(q.inc(ip).is_ok());
        assert_eq!(q.inc(ip), Err(TooManyConnections { ip, max: 2 }));
        q.dec(ip);
        assert!(q.slot_available());
        assert!(q.inc(other).is_ok());
        assert!(!q.slot_available());
        let woken = Arc::new(AtomicUsize::new(0));
        let w = woken.clone();
        q.set_acceptor(Arc::new(move || {
            w.fetch_add(1, Ordering::SeqCst);
        }));
        q.dec(other);
        assert_eq!(woken.load(Ordering::SeqCst), 1);
        assert!(q.slot_available());
        // The descriptor cap wins over a larger max.connections.
        assert_eq!(ConnectionQuotas::new(&config, 2).max_total(), 2);
        // With the partitions the descriptors allow by default, storage
        // keeps its quarter; more partitions take from the connections.
        let cap = |n: u64| fd_cap(n, default_max_partitions(n) as u64);
        assert_eq!(cap(256), 96);
        assert_eq!(cap(1024), 480);
        assert_eq!(cap(4096), 3040);
        assert_eq!(cap(20_000), 14_968);
        assert_eq!(cap(1 << 20), 786_400);
        assert_eq!(cap(10), 1);
        assert_eq!(fd_cap(20_000, 10_000), 20_000 - 11_024 - 32);
        assert_eq!(fd_cap(20_000, 100_000), 1);
    }

    #[test]
    fn default_partitions_fit_storages_descriptors() {
        for (nofile, want) in [
            (1024, 256),
            (4096, 512),
            (20_000, 3_976),
            (65_536, 10_000),
            (1 << 20, 10_000),
        ] {
            let n = default_max_partitions(nofile);
            assert_eq!(n, want, "RLIMIT_NOFILE {nofile}");
            assert!(partition_fds(n as u64) <= storage_fds(nofile, 0));
            assert!(n == 10_000 || partition_fds(n as u64 + 1) > storage_fds(nofile, 0));
        }
    }
}
