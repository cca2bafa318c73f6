//! Kafka's `Throttler` for `log.cleaner.io.max.bytes.per.second`: bytes
//! read and written by every cleaner thread are counted, and every 300 ms
//! a thread that finds the rate over the limit sleeps until it is not.

use std::time::{Duration, Instant};

use parking_lot::Mutex;

const CHECK_INTERVAL: Duration = Duration::from_millis(300);

pub(crate) struct Throttler {
    rate: f64,
    state: Mutex<(Instant, f64)>,
}

impl Throttler {
    pub fn new(bytes_per_second: f64) -> Throttler {
        Throttler {
            rate: bytes_per_second,
            state: Mutex::new((Instant::now(), 0.0)),
        }
    }

    pub fn maybe_throttle(&self, observed: u64) {
        if !self.rate.is_finite() || self.rate >= f64::MAX / 2.0 {
            return;
        }
        let sleep = {
            let mut st = self.state.lock();
            st.1 += observed as f64;
            let elapsed = st.0.elapsed();
            if elapsed < CHECK_INTERVAL {
                return;
            }
            let rate = st.1 / elapsed.as_secs_f64();
            let sleep = if rate > self.rate {
                let want = Duration::from_secs_f64(st.1 / self.rate);
                want.saturating_sub(elapsed)
            } else {
                Duration::ZERO
            };
            *st = (Instant::now() + sleep, 0.0);
            sleep
        };
        if !sleep.is_zero() {
            std::thread::sleep(sleep);
        }
    }
}
