//! [`TxnMetrics`]: lock-free counters of what one client's transaction layer did, read as a
//! [`TxnMetricsSnapshot`] ([`crate::Client::metrics`]). The observer runtime folds them into its
//! own statistics.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of what the transaction layer did (cheap, lock-free).
#[derive(Debug, Default)]
pub struct TxnMetrics {
    commits: AtomicU64,
    conflicts: AtomicU64,
    aborts: AtomicU64,
    retries: AtomicU64,
    rolled_forward: AtomicU64,
    rolled_forward_of_live: AtomicU64,
    rolled_back: AtomicU64,
    cleaned_up: AtomicU64,
    one_phase: AtomicU64,
    one_phase_fallbacks: AtomicU64,
    status_reads: AtomicU64,
    lock_waits: AtomicU64,
    prefetched: AtomicU64,
    prefetch_hits: AtomicU64,
}

/// A copy of [`TxnMetrics`] at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TxnMetricsSnapshot {
    /// Transactions committed (with writes).
    pub commits: u64,
    /// Commits that failed prewrite on a conflict.
    pub conflicts: u64,
    /// Commits that found themselves rolled back by a cleaner.
    pub aborts: u64,
    /// Re-runs by [`crate::Client::run`].
    pub retries: u64,
    /// Locks of other transactions rolled forward.
    pub locks_rolled_forward: u64,
    /// Of those, locks of another worker that was alive (its lock's TTL and its lease held):
    /// this client met a running worker's commit half done. Among workers that share out the
    /// rows they work on, a sign of two of them on the same rows.
    pub locks_rolled_forward_of_live: u64,
    /// Transactions of others this client rolled back: their owner was dead, their lock's TTL
    /// had run out, or their primary was never locked (fenced). A live worker's transactions
    /// are never among them while its lease and heartbeat hold.
    pub locks_rolled_back: u64,
    /// Locks removed of transactions that were already rolled back — by their own owner after
    /// a conflict (it fences its primary before it removes its other locks), or by another
    /// cleaner. Cleaning up, not a decision about a live transaction.
    pub locks_cleaned_up: u64,
    /// Commits in one step, without locks (`txn::one_phase`).
    pub one_phase_commits: u64,
    /// One-step attempts that found a condition failed and committed in two phases instead
    /// (a reader admitted after the commit timestamp, a lock or a newer write in the way).
    pub one_phase_fallbacks: u64,
    /// Reads of another transaction's status at its primary: to resolve a lock in the way, or
    /// to clear a notification whose writer is not known to be committed.
    pub status_reads: u64,
    /// Times a read waited for a live lock at or below its snapshot to be resolved by its
    /// owner (it backs off and reads again; it never reads around the lock).
    pub lock_waits: u64,
    /// Cells read ahead of a `get` because earlier transactions read them with the cell it
    /// asked for (`TxnConfig::prefetch`).
    pub prefetched_cells: u64,
    /// Prefetched cells a read then took from the transaction's cache (each counted once).
    pub prefetch_hits: u64,
    /// Renewals of this client's worker lease.
    pub lease_renewals: u64,
    /// Renewals that found the lease already lapsed (in the client's view): the transactions
    /// that began before failed with `SnapshotTooOld`. More than none means the renewal was held
    /// up longer than half a lease.
    pub late_lease_renewals: u64,
}

impl TxnMetrics {
    fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn committed(&self) {
        Self::bump(&self.commits);
    }
    pub(crate) fn conflicted(&self) {
        Self::bump(&self.conflicts);
    }
    pub(crate) fn aborted(&self) {
        Self::bump(&self.aborts);
    }
    pub(crate) fn retried(&self) {
        Self::bump(&self.retries);
    }
    pub(crate) fn rolled_forward(&self, owner_alive: bool) {
        Self::bump(&self.rolled_forward);
        if owner_alive {
            Self::bump(&self.rolled_forward_of_live);
        }
    }
    pub(crate) fn rolled_back(&self) {
        Self::bump(&self.rolled_back);
    }
    pub(crate) fn cleaned_up(&self) {
        Self::bump(&self.cleaned_up);
    }
    pub(crate) fn one_phase(&self, committed: bool) {
        Self::bump(if committed {
            &self.one_phase
        } else {
            &self.one_phase_fallbacks
        });
    }

    pub(crate) fn status_read(&self) {
        Self::bump(&self.status_reads);
    }

    pub(crate) fn lock_waited(&self) {
        Self::bump(&self.lock_waits);
    }

    pub(crate) fn prefetched(&self, cells: u64) {
        self.prefetched.fetch_add(cells, Ordering::Relaxed);
    }

    pub(crate) fn prefetch_hit(&self) {
        Self::bump(&self.prefetch_hits);
    }

    /// Reads every counter.
    pub fn snapshot(&self) -> TxnMetricsSnapshot {
        TxnMetricsSnapshot {
            commits: self.commits.load(Ordering::Relaxed),
            conflicts: self.conflicts.load(Ordering::Relaxed),
            aborts: self.aborts.load(Ordering::Relaxed),
            retries: self.retries.load(Ordering::Relaxed),
            locks_rolled_forward: self.rolled_forward.load(Ordering::Relaxed),
            locks_rolled_forward_of_live: self.rolled_forward_of_live.load(Ordering::Relaxed),
            locks_rolled_back: self.rolled_back.load(Ordering::Relaxed),
            locks_cleaned_up: self.cleaned_up.load(Ordering::Relaxed),
            one_phase_commits: self.one_phase.load(Ordering::Relaxed),
            one_phase_fallbacks: self.one_phase_fallbacks.load(Ordering::Relaxed),
            status_reads: self.status_reads.load(Ordering::Relaxed),
            lock_waits: self.lock_waits.load(Ordering::Relaxed),
            prefetched_cells: self.prefetched.load(Ordering::Relaxed),
            prefetch_hits: self.prefetch_hits.load(Ordering::Relaxed),
            // Filled in by `Client::metrics` from the lease's refresher.
            lease_renewals: 0,
            late_lease_renewals: 0,
        }
    }
}
