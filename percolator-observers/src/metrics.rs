//! What the worker runtime did: lock-free counters and a latency histogram (core's
//! [`Histogram`]), read as a
//! [`RuntimeStats`] snapshot (printed by the CLI, asserted on by tests).

use std::sync::atomic::{AtomicU64, Ordering};

use percolator_core::internal::histogram::Histogram;
use percolator_core::txn::TxnMetricsSnapshot;
use serde::{Deserialize, Serialize};

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
    pub(crate) gc_runs: AtomicU64,
    pub(crate) gc_cells_deleted: AtomicU64,
    pub(crate) gc_micros: AtomicU64,
    pub(crate) dead_leases_ended: AtomicU64,
    pub(crate) abandoned_locks_resolved: AtomicU64,
    pub(crate) panics: AtomicU64,
    pub(crate) parked: AtomicU64,
    pub(crate) backed_off: AtomicU64,
    pub(crate) lingered: AtomicU64,
    pub(crate) batch_reruns: AtomicU64,
    pub(crate) deferred: AtomicU64,
    pub(crate) self_trigger_stops: AtomicU64,
    pub(crate) left_to_others: AtomicU64,
    pub(crate) held_elsewhere: AtomicU64,
    pub(crate) lock_service_unavailable: AtomicU64,
    pub(crate) cross_process_teleports: AtomicU64,
    pub(crate) latency: Histogram,
}

/// Committed runs, their total time and conflicts, per observer (names fixed when the runtime
/// starts, so counting takes no lock).
#[derive(Debug, Default)]
pub(crate) struct PerObserver {
    names: Vec<String>,
    runs: Vec<AtomicU64>,
    micros: Vec<AtomicU64>,
    conflicts: Vec<AtomicU64>,
}

impl PerObserver {
    pub(crate) fn new(names: Vec<String>) -> Self {
        let runs = names.iter().map(|_| AtomicU64::new(0)).collect();
        let micros = names.iter().map(|_| AtomicU64::new(0)).collect();
        let conflicts = names.iter().map(|_| AtomicU64::new(0)).collect();
        Self {
            names,
            conflicts,
            runs,
            micros,
        }
    }

    /// Counts a committed run of `name` that took `elapsed`.
    pub(crate) fn record(&self, name: &str, elapsed: std::time::Duration) {
        if let Some(i) = self.names.iter().position(|n| n == name) {
            bump(&self.runs[i], 1);
            bump(
                &self.micros[i],
                u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX),
            );
        }
    }

    /// Counts a run of `name` that hit a conflict (and is retried).
    pub(crate) fn record_conflict(&self, name: &str) {
        if let Some(i) = self.names.iter().position(|n| n == name) {
            bump(&self.conflicts[i], 1);
        }
    }

    pub(crate) fn snapshot(&self) -> Vec<ObserverRuns> {
        self.names
            .iter()
            .enumerate()
            .map(|(i, name)| ObserverRuns {
                name: name.clone(),
                runs: load(&self.runs[i]),
                busy_micros: load(&self.micros[i]),
                conflicts: load(&self.conflicts[i]),
            })
            .collect()
    }
}

/// What one observer of a runtime did so far.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ObserverRuns {
    /// The observer's name.
    pub name: String,
    /// Its committed runs.
    pub runs: u64,
    /// Their total time, begin to commit, in microseconds (runs overlap: this is work, not
    /// wall time).
    pub busy_micros: u64,
    /// Its runs that hit a conflict and were re-run (work thrown away).
    pub conflicts: u64,
}

pub(crate) fn bump(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
}

fn load(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}

/// A snapshot of what a runtime did.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
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
    /// Garbage-collection runs of this worker's background collector that completed.
    pub gc_runs: u64,
    /// Cells those runs deleted.
    pub gc_cells_deleted: u64,
    /// Wall time those runs took, microseconds.
    pub gc_micros: u64,
    /// Observer panics caught (in `observe`, counted as failed runs, or in `committed`).
    pub panics: u64,
    /// Changes parked after their observer failed too often.
    pub parked: u64,
    /// Dirty rows skipped because they were pausing after failures (or waiting for another
    /// worker's observer).
    pub backed_off: u64,
    /// Dirty rows a scanner left to a batch timer instead of starting a run
    /// ([`crate::Observer::batch_delay`]).
    pub lingered: u64,
    /// Runs of a batching observer started at once after its previous run left work queued.
    pub batch_reruns: u64,
    /// Clearings held back because an observer of another worker had not covered the change.
    pub deferred: u64,
    /// Runs failed because their observer kept writing the column it observes.
    pub self_trigger_stops: u64,
    /// Leases of dead workers this worker's sweep ended.
    pub dead_leases_ended: u64,
    /// Locks of dead workers (or past their TTL) this worker's sweep resolved.
    pub abandoned_locks_resolved: u64,
    /// This worker's id (its client's, written into its locks).
    pub worker: u64,
    /// Workers of this worker's scan group that share the dirty rows, itself included (1:
    /// alone, or partitioned scanning off).
    pub group_members: u64,
    /// Times the scan group's membership changed (a worker joined, left or died).
    pub group_changes: u64,
    /// Dirty rows passed over because another worker of the scan group owns them.
    pub left_to_others: u64,
    /// Dirty rows passed over because another worker held them in the shared lock service
    /// ([`crate::RuntimeConfig::shared_locks`]).
    #[serde(default)]
    pub held_elsewhere: u64,
    /// Rows run without a shared lock because the lock service could not answer.
    #[serde(default)]
    pub lock_service_unavailable: u64,
    /// Teleports because most of a scanned batch was held by other workers: a scanner of
    /// another process was on the same stretch (counted in `teleports` too).
    #[serde(default)]
    pub cross_process_teleports: u64,
    /// Locks of another live worker's transaction this worker rolled forward: it met that
    /// worker's commit half done, on a row both were working on. Waste, like conflicts and
    /// runs that found their change already acknowledged.
    pub live_lock_roll_forwards: u64,
    /// Cells this worker's transactions read ahead (`TxnConfig::prefetch`: the columns earlier
    /// transactions read with the one asked for).
    #[serde(default)]
    pub prefetched_cells: u64,
    /// Of those, cells a later read of the same transaction took from its cache.
    #[serde(default)]
    pub prefetch_hits: u64,
}

impl RuntimeStats {
    /// Collapse ratio: notify versions consumed per observer commit (1.0 = no collapsing).
    ///
    /// ```
    /// # use percolator_observers::RuntimeStats;
    /// let stats = RuntimeStats {
    ///     notifications_processed: 4,
    ///     collapsed: 2, // two more changes were handled by those four runs
    ///     ..RuntimeStats::default()
    /// };
    /// assert_eq!(stats.collapse_ratio(), 1.5);
    /// assert_eq!(RuntimeStats::default().collapse_ratio(), 0.0);
    /// ```
    pub fn collapse_ratio(&self) -> f64 {
        ratio(
            self.notifications_processed + self.collapsed,
            self.notifications_processed,
        )
    }

    /// Conflicts (re-runs) per processed notification: work done twice. Workers that collide
    /// on the same rows drive it up.
    ///
    /// ```
    /// # use percolator_observers::RuntimeStats;
    /// let stats = RuntimeStats {
    ///     notifications_processed: 200,
    ///     conflicts: 5,
    ///     ..RuntimeStats::default()
    /// };
    /// assert_eq!(stats.conflicts_per_processed(), 0.025);
    /// ```
    pub fn conflicts_per_processed(&self) -> f64 {
        ratio(self.conflicts, self.notifications_processed)
    }

    /// Share of runs that found their change already acknowledged (by another worker, or by
    /// an earlier run whose cleanup was lost): runs that did nothing.
    ///
    /// ```
    /// # use percolator_observers::RuntimeStats;
    /// let stats = RuntimeStats {
    ///     notifications_processed: 90,
    ///     already_acknowledged: 10,
    ///     ..RuntimeStats::default()
    /// };
    /// assert_eq!(stats.already_acknowledged_share(), 0.1);
    /// ```
    pub fn already_acknowledged_share(&self) -> f64 {
        ratio(
            self.already_acknowledged,
            self.notifications_processed + self.already_acknowledged,
        )
    }
}

/// `part / whole`, 0 when `whole` is.
fn ratio(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        return 0.0;
    }
    part as f64 / whole as f64
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
            lock_resolutions: txn.locks_rolled_forward
                + txn.locks_rolled_back
                + txn.locks_cleaned_up,
            rows_scanned: load(&self.rows_scanned),
            busy_rows: load(&self.busy_rows),
            unobserved: load(&self.unobserved),
            teleports: load(&self.teleports),
            latency_p50_us: u64::try_from(self.latency.quantile(0.5).as_micros())
                .unwrap_or(u64::MAX),
            latency_p99_us: u64::try_from(self.latency.quantile(0.99).as_micros())
                .unwrap_or(u64::MAX),
            pending,
            gc_runs: load(&self.gc_runs),
            gc_cells_deleted: load(&self.gc_cells_deleted),
            gc_micros: load(&self.gc_micros),
            panics: load(&self.panics),
            parked: load(&self.parked),
            backed_off: load(&self.backed_off),
            lingered: load(&self.lingered),
            batch_reruns: load(&self.batch_reruns),
            deferred: load(&self.deferred),
            self_trigger_stops: load(&self.self_trigger_stops),
            dead_leases_ended: load(&self.dead_leases_ended),
            abandoned_locks_resolved: load(&self.abandoned_locks_resolved),
            // The runtime fills in the worker and its group.
            worker: 0,
            group_members: 1,
            group_changes: 0,
            left_to_others: load(&self.left_to_others),
            held_elsewhere: load(&self.held_elsewhere),
            lock_service_unavailable: load(&self.lock_service_unavailable),
            cross_process_teleports: load(&self.cross_process_teleports),
            live_lock_roll_forwards: txn.locks_rolled_forward_of_live,
            prefetched_cells: txn.prefetched_cells,
            prefetch_hits: txn.prefetch_hits,
        }
    }
}
