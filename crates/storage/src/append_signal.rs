//! A signal raised after every append to any partition of a data directory,
//! whoever appended (a shell write, a Kafka produce): what a long-polling
//! Fetch waits on.
//!
//! One signal per directory rather than per partition: a fetch usually waits
//! on several partitions at once, and a spurious wake-up costs one re-check
//! of the fetch's partitions, which only reads atomics.

use std::time::Instant;

use parking_lot::{Condvar, Mutex};

#[derive(Default)]
pub struct AppendSignal {
    generation: Mutex<u64>,
    cv: Condvar,
}

impl AppendSignal {
    /// The count of appends so far; pass it to [`AppendSignal::wait_past`].
    pub fn generation(&self) -> u64 {
        *self.generation.lock()
    }

    /// Wakes every waiter. Called once an append is published.
    pub fn notify(&self) {
        *self.generation.lock() += 1;
        self.cv.notify_all();
    }

    /// Waits until an append after `seen`, or until `deadline`. Returns
    /// whether there was one.
    pub fn wait_past(&self, seen: u64, deadline: Instant) -> bool {
        let mut g = self.generation.lock();
        while *g == seen {
            if self.cv.wait_until(&mut g, deadline).timed_out() {
                return *g != seen;
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn wakes_on_notify_and_times_out_without() {
        let s = Arc::new(AppendSignal::default());
        let g = s.generation();
        assert!(!s.wait_past(g, Instant::now() + Duration::from_millis(10)));
        let s2 = s.clone();
        let t =
            std::thread::spawn(move || s2.wait_past(g, Instant::now() + Duration::from_secs(30)));
        // Whether the notify lands before or during the wait, the waiter sees it.
        s.notify();
        assert!(t.join().unwrap());
        assert!(s.wait_past(g, Instant::now()));
    }
}
