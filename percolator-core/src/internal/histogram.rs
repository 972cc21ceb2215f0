//! [`Histogram`]: a lock-free log-linear latency histogram (HDR-style, 12.5% resolution).
//!
//! Recording is one relaxed atomic add, so the observer runtime and the benchmarks record every
//! transaction's latency from many tasks without contention; quantiles are read from a copy of
//! the counters. Values are microseconds: below 8 µs each value has its own bucket, above it
//! every power of two is split into 8 buckets, so a reported quantile (the lower bound of its
//! bucket) is within 12.5% of the true value. Serialization is left to the caller (it reports
//! the quantiles it needs).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Sub-buckets per power of two (3 mantissa bits: values within 12.5%).
const SUB_BITS: u32 = 3;
const SUB: usize = 1 << SUB_BITS;
const BUCKETS: usize = SUB + (64 - SUB_BITS as usize) * SUB;

/// A lock-free log-linear histogram of microsecond values (HDR-style, 12.5% resolution).
#[derive(Debug)]
pub struct Histogram {
    counts: Box<[AtomicU64]>,
}

impl Default for Histogram {
    fn default() -> Self {
        Self {
            counts: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

fn bucket_of(v: u64) -> usize {
    if v < SUB as u64 {
        return v as usize;
    }
    let exp = 63 - v.leading_zeros(); // >= SUB_BITS
    let mantissa = ((v >> (exp - SUB_BITS)) as usize) & (SUB - 1);
    SUB + (exp - SUB_BITS) as usize * SUB + mantissa
}

fn bucket_floor(index: usize) -> u64 {
    if index < SUB {
        return index as u64;
    }
    let exp = (index - SUB) / SUB + SUB_BITS as usize;
    let mantissa = ((index - SUB) % SUB) as u64;
    ((SUB as u64) + mantissa) << (exp - SUB_BITS as usize)
}

impl Histogram {
    /// Records one duration.
    pub fn record(&self, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.counts[bucket_of(us)].fetch_add(1, Ordering::Relaxed);
    }

    /// Number of values recorded.
    pub fn count(&self) -> u64 {
        self.counts.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }

    /// The `q` quantile (0..=1), as the lower bound of its bucket; zero when empty.
    pub fn quantile(&self, q: f64) -> Duration {
        let counts: Vec<u64> = self
            .counts
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return Duration::ZERO;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, c) in counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Duration::from_micros(bucket_floor(i));
            }
        }
        Duration::from_micros(bucket_floor(BUCKETS - 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_monotonic_and_tight() {
        let mut last = 0;
        for v in (0..100_000u64).chain([u64::MAX / 2, u64::MAX]) {
            let b = bucket_of(v);
            assert!(b >= last, "bucket order at {v}");
            last = b;
            let floor = bucket_floor(b);
            assert!(floor <= v, "floor {floor} above {v}");
            assert!(
                v - floor <= v / 8 + 1,
                "bucket of {v} too wide (floor {floor})"
            );
        }
        assert!(bucket_of(u64::MAX) < BUCKETS);
    }

    #[test]
    fn quantiles() {
        let h = Histogram::default();
        assert_eq!(h.quantile(0.5), Duration::ZERO);
        for ms in 1..=100 {
            h.record(Duration::from_millis(ms));
        }
        assert_eq!(h.count(), 100);
        let p50 = h.quantile(0.5).as_micros() as f64;
        let p99 = h.quantile(0.99).as_micros() as f64;
        assert!((50_000.0 * 0.87..=50_000.0).contains(&p50), "p50 {p50}");
        assert!((99_000.0 * 0.87..=99_000.0).contains(&p99), "p99 {p99}");
    }
}
