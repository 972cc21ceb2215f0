//! Oracle time: what a timestamp says about when it was handed out.
//!
//! Every oracle of this crate (and PD's TSO) composes a timestamp as PD does: milliseconds since
//! the Unix epoch on the **oracle's** clock in the high bits, a logical counter in the low
//! [`LOGICAL_BITS`]. So a timestamp doubles as a reading of one clock that every process of a
//! deployment shares, and the protocol judges lock TTLs and worker leases in that time
//! ([`OracleClock`]) instead of comparing wall clocks read on different machines: a client
//! whose clock is minutes off neither rolls back live transactions nor delays recovery.
//!
//! - [`Clock`]: where an oracle reads physical time ([`SystemClock`]; tests skew it).
//! - [`OracleClock`]: a client's estimate of the oracle's time: the physical part of the latest
//!   timestamp it saw plus the time elapsed since on its own *monotonic* clock. Only clock rates
//!   matter then, never offsets between machines.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Bits of the logical counter below the milliseconds (PD's layout).
pub const LOGICAL_BITS: u32 = 18;

/// The milliseconds part of `ts`.
pub const fn physical_ms(ts: u64) -> u64 {
    ts >> LOGICAL_BITS
}

/// The first timestamp of millisecond `ms` (logical counter 0), saturating far in the future.
pub const fn first_of_ms(ms: u64) -> u64 {
    ms.saturating_mul(1 << LOGICAL_BITS)
}

/// How many timestamps `duration` spans.
pub fn span_of(duration: Duration) -> u64 {
    first_of_ms(u64::try_from(duration.as_millis()).unwrap_or(u64::MAX))
}

/// Where an oracle reads physical time.
pub trait Clock: Send + Sync + std::fmt::Debug + 'static {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;
}

/// The machine's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0)
    }
}

/// The wall clock shifted by a fixed offset: a machine whose clock is wrong (tests).
#[derive(Debug, Clone, Copy)]
pub struct SkewedClock {
    /// Milliseconds added to the wall clock (negative: behind).
    pub offset_ms: i64,
}

impl Clock for SkewedClock {
    fn now_ms(&self) -> u64 {
        SystemClock.now_ms().saturating_add_signed(self.offset_ms)
    }
}

/// A client's reading of oracle time (see the module docs): lock-free, monotone.
#[derive(Debug)]
pub struct OracleClock {
    origin: Instant,
    /// Oracle milliseconds minus milliseconds elapsed since `origin`, the largest seen.
    offset_ms: AtomicI64,
    /// The largest timestamp observed.
    latest: AtomicU64,
}

impl Default for OracleClock {
    fn default() -> Self {
        Self {
            origin: Instant::now(),
            offset_ms: AtomicI64::new(i64::MIN),
            latest: AtomicU64::new(0),
        }
    }
}

impl OracleClock {
    fn elapsed_ms(&self) -> i64 {
        i64::try_from(self.origin.elapsed().as_millis()).unwrap_or(i64::MAX)
    }

    /// Takes in a timestamp the oracle handed out (it was at least this late then).
    pub fn observe(&self, ts: u64) {
        let physical = i64::try_from(physical_ms(ts)).unwrap_or(i64::MAX);
        self.offset_ms
            .fetch_max(physical.saturating_sub(self.elapsed_ms()), Ordering::AcqRel);
        self.latest.fetch_max(ts, Ordering::AcqRel);
    }

    /// The largest timestamp observed (0 before any): every timestamp the oracle hands out
    /// after this call is larger.
    pub fn latest(&self) -> u64 {
        self.latest.load(Ordering::Acquire)
    }

    /// Oracle time now, in milliseconds: the latest observed timestamp's physical part plus the
    /// monotonic time elapsed since it was observed (0 before any).
    pub fn now_ms(&self) -> u64 {
        let offset = self.offset_ms.load(Ordering::Acquire);
        if offset == i64::MIN {
            return 0;
        }
        u64::try_from(offset.saturating_add(self.elapsed_ms())).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_pd() {
        let ts = first_of_ms(1_700_000_000_123) + 5;
        assert_eq!(physical_ms(ts), 1_700_000_000_123);
        assert_eq!(ts & ((1 << LOGICAL_BITS) - 1), 5);
        assert_eq!(span_of(Duration::from_millis(2)), 2 << LOGICAL_BITS);
    }

    #[test]
    fn oracle_clock_follows_the_oracle_not_the_wall() {
        let clock = OracleClock::default();
        assert_eq!(clock.now_ms(), 0);
        // An oracle ten minutes ahead of this machine.
        let ahead = SystemClock.now_ms() + 600_000;
        clock.observe(first_of_ms(ahead));
        let now = clock.now_ms();
        assert!(now >= ahead && now < ahead + 1_000, "{now} vs {ahead}");
        // An older timestamp never moves it back.
        clock.observe(first_of_ms(ahead - 60_000));
        assert!(clock.now_ms() >= now);
        let skewed = SkewedClock { offset_ms: -5_000 }.now_ms();
        assert!(skewed + 4_000 < SystemClock.now_ms());
    }
}
