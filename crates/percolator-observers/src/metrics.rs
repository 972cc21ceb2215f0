//! What the worker runtime did: lock-free counters and a latency histogram, read as a
//! [`RuntimeStats`] snapshot (printed by the CLI, asserted on by tests).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use percolator_core::txn::TxnMetricsSnapshot;
use serde::Serialize;

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

/// Counters of one runtime.
#[derive(Debug, Default)]
pub struct ObserverMetrics {
    pub(crate) processed: AtomicU64,
    pub(crate) already_done: AtomicU64,
    pub(crate) collapsed: AtomicU64,
    pub(crate) cleared: AtomicU64,
    pub(crate) kept: AtomicU64,
    pub(crate) conflicts: AtomicU64,
    pub(crate) failures: AtomicU64,
    pub(crate) rows_scanned: AtomicU64,
    pub(crate) busy_rows: AtomicU64,
    pub(crate) unobserved: AtomicU64,
    pub(crate) teleports: AtomicU64,
    pub(crate) started: AtomicU64,
    pub(crate) in_flight: AtomicU64,
    pub(crate) latency: Histogram,
}

pub(crate) fn bump(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
}

fn load(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}

/// A snapshot of what a runtime did.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct RuntimeStats {
    /// Observer transactions committed (one per processed change, or per collapsed group).
    pub notifications_processed: u64,
    /// Runs that found the change already acknowledged (duplicate or stale notifications).
    pub already_acknowledged: u64,
    /// Notify versions consumed beyond the first of each run: changes that collapsed into one.
    pub collapsed: u64,
    /// Notify versions deleted.
    pub notifications_cleared: u64,
    /// Notify versions kept after a run because its snapshot did not cover them.
    pub notifications_kept: u64,
    /// Observer transactions that hit a conflict and were re-run.
    pub conflicts: u64,
    /// Observer runs that failed (error or injected crash); their notifications stay.
    pub failures: u64,
    /// Locks of other transactions this worker rolled forward or back.
    pub lock_resolutions: u64,
    /// Rows with notifications the scanners looked at.
    pub rows_scanned: u64,
    /// Rows skipped because this worker was already processing them (advisory row locks).
    pub busy_rows: u64,
    /// Notify versions on columns without an observer in this worker (left alone).
    pub unobserved: u64,
    /// Scanner jumps after catching up with another scanner.
    pub teleports: u64,
    /// Median observer transaction latency (begin to commit), microseconds.
    pub latency_p50_us: u64,
    /// 99th percentile observer transaction latency, microseconds.
    pub latency_p99_us: u64,
    /// Pending notify versions on observed columns (a scan; `None` when not measured).
    pub pending: Option<u64>,
}

impl RuntimeStats {
    /// Collapse ratio: notify versions consumed per observer commit (1.0 = no collapsing).
    pub fn collapse_ratio(&self) -> f64 {
        if self.notifications_processed == 0 {
            return 0.0;
        }
        (self.notifications_processed + self.collapsed) as f64 / self.notifications_processed as f64
    }
}

impl ObserverMetrics {
    pub(crate) fn snapshot(&self, txn: TxnMetricsSnapshot, pending: Option<u64>) -> RuntimeStats {
        RuntimeStats {
            notifications_processed: load(&self.processed),
            already_acknowledged: load(&self.already_done),
            collapsed: load(&self.collapsed),
            notifications_cleared: load(&self.cleared),
            notifications_kept: load(&self.kept),
            conflicts: load(&self.conflicts),
            failures: load(&self.failures),
            lock_resolutions: txn.locks_rolled_forward + txn.locks_rolled_back,
            rows_scanned: load(&self.rows_scanned),
            busy_rows: load(&self.busy_rows),
            unobserved: load(&self.unobserved),
            teleports: load(&self.teleports),
            latency_p50_us: u64::try_from(self.latency.quantile(0.5).as_micros())
                .unwrap_or(u64::MAX),
            latency_p99_us: u64::try_from(self.latency.quantile(0.99).as_micros())
                .unwrap_or(u64::MAX),
            pending,
        }
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
