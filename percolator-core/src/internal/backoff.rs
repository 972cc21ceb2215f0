//! [`Backoff`]: capped exponential backoff with full jitter, the one retry delay of the project.
//!
//! The transaction layer waits with it between attempts of [`crate::Client::run`] and while a
//! live lock blocks a read; backends (TiKV re-running a conflicting batch) and the observer
//! runtime use the same type, so every retry loop in the project spreads out the same way.
//!
//! Full jitter (each delay uniform in `[0, cap]`, the cap doubling from `base` to `max`) is what
//! AWS's analysis of backoff strategies recommends for contending clients: it spreads retries of
//! clients that failed together the most, at the cost of some short waits.

use std::time::{Duration, Instant};

use rand::Rng as _;

use crate::error::{Error, Result};
use crate::records::CellAddr;
use crate::txn::TxnConfig;

/// Exponential backoff with full jitter: the `n`-th delay is uniform in
/// `[0, min(max, base * 2^n)]`.
///
/// ```
/// # use std::time::Duration;
/// # use percolator_core::internal::backoff::Backoff;
/// let mut backoff = Backoff::new(Duration::from_millis(1), Duration::from_millis(4));
/// for _ in 0..10 {
///     assert!(backoff.next_delay() <= Duration::from_millis(4));
/// }
/// ```
#[derive(Debug, Clone)]
pub struct Backoff {
    base: Duration,
    cap: Duration,
    max: Duration,
}

impl Backoff {
    /// Delays starting at up to `base` and doubling up to `max` (a `max` below `base` is
    /// raised to `base`).
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            base,
            cap: base,
            max: max.max(base),
        }
    }

    /// [`Self::new`] with the configuration's [`TxnConfig::backoff_base`] and
    /// [`TxnConfig::backoff_max`].
    pub fn from_config(config: &TxnConfig) -> Self {
        Self::new(config.backoff_base, config.backoff_max)
    }

    /// The next delay: uniform in `[0, cap]`; then the cap doubles (up to `max`).
    pub fn next_delay(&mut self) -> Duration {
        let cap = u64::try_from(self.cap.as_micros()).unwrap_or(u64::MAX);
        let delay = Duration::from_micros(rand::rng().random_range(0..=cap));
        self.cap = self.cap.saturating_mul(2).min(self.max);
        delay
    }

    /// Sleeps for [`Self::next_delay`].
    pub async fn wait(&mut self) {
        let delay = self.next_delay();
        tokio::time::sleep(delay).await;
    }

    /// Starts over from `base` (after a success).
    pub fn reset(&mut self) {
        self.cap = self.base;
    }

    /// Sleeps before the next attempt, or fails with [`Error::LockWaitTimeout`] once the
    /// configured lock-wait limit has passed since `started`.
    pub(crate) async fn wait_or_timeout(
        &mut self,
        started: Instant,
        addr: &CellAddr,
        lock_ts: u64,
        config: &TxnConfig,
    ) -> Result<()> {
        let waited = started.elapsed();
        if waited >= config.lock_wait_timeout {
            return Err(Error::LockWaitTimeout {
                table: String::from_utf8_lossy(&addr.table).into_owned(),
                row: String::from_utf8_lossy(&addr.row).into_owned(),
                column: String::from_utf8_lossy(&addr.column).into_owned(),
                lock_ts,
                waited_ms: u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
            });
        }
        self.wait().await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_double_up_to_max_and_reset() {
        let ms = Duration::from_millis;
        let mut b = Backoff::new(ms(1), ms(8));
        let caps = [1, 2, 4, 8, 8, 8];
        for cap in caps {
            for _ in 0..20 {
                // Every draw of one step stays under that step's cap.
                let mut probe = b.clone();
                assert!(probe.next_delay() <= ms(cap), "cap {cap} ms");
            }
            assert!(b.next_delay() <= ms(cap));
        }
        b.reset();
        for _ in 0..20 {
            assert!(b.clone().next_delay() <= ms(1));
        }
    }

    #[test]
    fn delays_are_jittered_and_max_below_base_is_raised() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::ZERO);
        let delays: std::collections::HashSet<_> = (0..50).map(|_| b.next_delay()).collect();
        assert!(delays.len() > 1, "no jitter");
        assert!(delays.iter().all(|d| *d <= Duration::from_millis(100)));
        let mut zero = Backoff::new(Duration::ZERO, Duration::ZERO);
        assert_eq!(zero.next_delay(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn wait_sleeps_at_most_the_cap() {
        let mut b = Backoff::new(Duration::from_millis(10), Duration::from_millis(10));
        let before = tokio::time::Instant::now();
        b.wait().await;
        assert!(before.elapsed() <= Duration::from_millis(11));
    }
}
