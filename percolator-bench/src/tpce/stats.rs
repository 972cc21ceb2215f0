//! Per-transaction-type counters and latency histograms, shared by the driver tasks and the
//! market emulator (lock-free: atomics and percolator-observers' histogram).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use percolator_core::internal::histogram::Histogram;

use super::frames::TxnKind;

/// Counters of one transaction type.
#[derive(Debug, Default)]
pub struct KindStats {
    /// Committed transactions.
    pub committed: AtomicU64,
    /// Attempts, committed or not (retries after conflicts included).
    pub attempts: AtomicU64,
    /// Transactions given up (non-retryable error or too many conflicts).
    pub failed: AtomicU64,
    /// Latency of committed transactions, retries included. For Trade-Result: from the
    /// Trade-Order's submission to the execution's commit.
    pub latency: Histogram,
}

/// Counters of every type.
#[derive(Debug)]
pub struct Stats {
    kinds: Vec<KindStats>,
}

impl Default for Stats {
    fn default() -> Self {
        Self {
            kinds: TxnKind::ALL.iter().map(|_| KindStats::default()).collect(),
        }
    }
}

impl Stats {
    /// The counters of `kind`.
    pub fn of(&self, kind: TxnKind) -> &KindStats {
        &self.kinds[kind.index()]
    }

    /// Records a committed transaction.
    pub fn committed(&self, kind: TxnKind, attempts: u64, latency: Duration) {
        let k = self.of(kind);
        k.committed.fetch_add(1, Ordering::Relaxed);
        k.attempts.fetch_add(attempts, Ordering::Relaxed);
        k.latency.record(latency);
    }

    /// Records a transaction given up after `attempts`.
    pub fn failed(&self, kind: TxnKind, attempts: u64) {
        let k = self.of(kind);
        k.failed.fetch_add(1, Ordering::Relaxed);
        k.attempts.fetch_add(attempts, Ordering::Relaxed);
    }

    /// Committed transactions of `kind` so far.
    pub fn count(&self, kind: TxnKind) -> u64 {
        self.of(kind).committed.load(Ordering::Relaxed)
    }
}
