//! `GET /metrics` in the Prometheus text exposition format (version 0.0.4).

use std::fmt::Write;
use std::sync::atomic::Ordering::Relaxed;

use percolator_core::RowStore;
use percolator_observers::RuntimeStats;

use crate::state::Shared;
use crate::wire::Status;

/// One metric: its help line, type and samples (`labels`, value).
fn metric(out: &mut String, name: &str, kind: &str, help: &str, samples: &[(&str, f64)]) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    for (labels, value) in samples {
        let _ = writeln!(out, "{name}{labels} {value}");
    }
}

/// The server's metrics.
pub(crate) fn render<S: RowStore>(
    shared: &Shared<S>,
    status: &Status,
    stats: &RuntimeStats,
) -> String {
    let mut out = String::new();
    let quantiles = |h: &percolator_core::internal::histogram::Histogram| {
        [
            ("{quantile=\"0.5\"}", h.quantile(0.5).as_secs_f64()),
            ("{quantile=\"0.99\"}", h.quantile(0.99).as_secs_f64()),
        ]
    };
    metric(
        &mut out,
        "percolator_index_documents",
        "gauge",
        "Documents in the search index.",
        &[("", status.documents as f64)],
    );
    metric(
        &mut out,
        "percolator_pending_notifications",
        "gauge",
        "Pending notifications on observed columns.",
        &[("", status.pending as f64)],
    );
    let lease = shared.client().metrics();
    metric(
        &mut out,
        "percolator_worker_lease_renewals_total",
        "counter",
        "Renewals of the server's worker lease.",
        &[("", lease.lease_renewals as f64)],
    );
    metric(
        &mut out,
        "percolator_worker_lease_late_renewals_total",
        "counter",
        "Lease renewals that found the lease lapsed (searches and runs then retried).",
        &[("", lease.late_lease_renewals as f64)],
    );
    metric(
        &mut out,
        "percolator_search_slots",
        "gauge",
        "Searches ranked at once; more wait for a turn.",
        &[("", crate::api::MAX_CONCURRENT_SEARCHES as f64)],
    );
    metric(
        &mut out,
        "percolator_search_queue_wait_seconds",
        "gauge",
        "How long a search waits for a turn before it is answered 503.",
        &[("", crate::api::SEARCH_QUEUE_WAIT.as_secs_f64())],
    );
    metric(
        &mut out,
        "percolator_searches_rejected_total",
        "counter",
        "Searches answered 503 (no turn within the queue wait).",
        &[("", shared.searches_rejected.load(Relaxed) as f64)],
    );
    metric(
        &mut out,
        "percolator_ingest_backlog",
        "gauge",
        "Rows with pending notifications in the pipeline's tables (counted up to just past the limit).",
        &[("", shared.backlog.load(Relaxed) as f64)],
    );
    metric(
        &mut out,
        "percolator_ingest_backlog_limit",
        "gauge",
        "Rows with pending notifications past which ingests are answered 503.",
        &[("", crate::api::MAX_INGEST_BACKLOG as f64)],
    );
    metric(
        &mut out,
        "percolator_ingests_rejected_total",
        "counter",
        "Ingests answered 503 for the backlog.",
        &[("", shared.ingests_rejected.load(Relaxed) as f64)],
    );
    metric(
        &mut out,
        "percolator_observer_transactions_total",
        "counter",
        "Observer transactions committed.",
        &[("", stats.notifications_processed as f64)],
    );
    metric(
        &mut out,
        "percolator_observer_failures_total",
        "counter",
        "Observer runs that failed (retried).",
        &[("", stats.failures as f64)],
    );
    metric(
        &mut out,
        "percolator_observer_conflicts_total",
        "counter",
        "Observer transactions re-run after a conflict.",
        &[("", stats.conflicts as f64)],
    );
    let worker = format!("{{worker=\"{:016x}\"}}", stats.worker);
    metric(
        &mut out,
        "percolator_scan_group_members",
        "gauge",
        "Workers of this worker's scan group that share the dirty rows, itself included.",
        &[(&worker, stats.group_members as f64)],
    );
    metric(
        &mut out,
        "percolator_rows_left_to_group_total",
        "counter",
        "Dirty rows this worker passed over because another worker of its scan group owns them.",
        &[(&worker, stats.left_to_others as f64)],
    );
    metric(
        &mut out,
        "percolator_rows_held_elsewhere_total",
        "counter",
        "Dirty rows this worker passed over because another worker held them in the lock service.",
        &[(&worker, stats.held_elsewhere as f64)],
    );
    metric(
        &mut out,
        "percolator_lock_service_unavailable_total",
        "counter",
        "Rows this worker ran without a shared lock because the lock service did not answer.",
        &[(&worker, stats.lock_service_unavailable as f64)],
    );
    metric(
        &mut out,
        "percolator_cross_process_teleports_total",
        "counter",
        "Scanner teleports away from a stretch another worker's scanner was running.",
        &[(&worker, stats.cross_process_teleports as f64)],
    );
    metric(
        &mut out,
        "percolator_observer_already_acknowledged_total",
        "counter",
        "Observer runs that found their change already acknowledged (did nothing).",
        &[(&worker, stats.already_acknowledged as f64)],
    );
    metric(
        &mut out,
        "percolator_observer_conflicts_per_processed",
        "gauge",
        "Conflicts (re-runs) per processed notification since start.",
        &[(&worker, stats.conflicts_per_processed())],
    );
    metric(
        &mut out,
        "percolator_live_lock_roll_forwards_total",
        "counter",
        "Locks of another live worker's transaction this worker rolled forward (two workers on one row).",
        &[(&worker, stats.live_lock_roll_forwards as f64)],
    );
    metric(
        &mut out,
        "percolator_dead_worker_locks_resolved_total",
        "counter",
        "Locks of dead workers resolved by the dead-worker sweep.",
        &[("", stats.abandoned_locks_resolved as f64)],
    );
    metric(
        &mut out,
        "percolator_gc_runs_total",
        "counter",
        "Background garbage-collection runs completed (serve --gc-every-secs).",
        &[("", stats.gc_runs as f64)],
    );
    metric(
        &mut out,
        "percolator_gc_cells_deleted_total",
        "counter",
        "Cells (old versions, rollback records, acks) background garbage collection deleted.",
        &[("", stats.gc_cells_deleted as f64)],
    );
    metric(
        &mut out,
        "percolator_gc_seconds_total",
        "counter",
        "Wall time of the completed background garbage-collection runs.",
        &[("", stats.gc_micros as f64 / 1e6)],
    );
    metric(
        &mut out,
        "percolator_observer_transactions_per_second",
        "gauge",
        "Observer transactions per second, last 10 s.",
        &[("", status.processed_per_sec)],
    );
    let locks: usize = status.tables.iter().map(|t| t.locks).sum();
    metric(
        &mut out,
        "percolator_locks",
        "gauge",
        "Locks held in the web index's tables.",
        &[("", locks as f64)],
    );
    metric(
        &mut out,
        "percolator_ingest_pages_total",
        "counter",
        "Pages ingested through the API, by outcome.",
        &[
            (
                "{outcome=\"loaded\"}",
                shared.pages_loaded.load(Relaxed) as f64,
            ),
            (
                "{outcome=\"unchanged\"}",
                shared.pages_unchanged.load(Relaxed) as f64,
            ),
            (
                "{outcome=\"skipped\"}",
                shared.pages_skipped.load(Relaxed) as f64,
            ),
        ],
    );
    metric(
        &mut out,
        "percolator_pages_deleted_total",
        "counter",
        "Pages deleted through the API.",
        &[("", shared.pages_deleted.load(Relaxed) as f64)],
    );
    metric(
        &mut out,
        "percolator_freshness_seconds",
        "summary",
        "Seconds from a page's ingest until the clusterer placed it.",
        &quantiles(&shared.freshness),
    );
    metric(
        &mut out,
        "percolator_search_seconds",
        "summary",
        "Search latency.",
        &quantiles(&shared.search_latency),
    );
    metric(
        &mut out,
        "percolator_searches_total",
        "counter",
        "Searches answered.",
        &[("", shared.searches.load(Relaxed) as f64)],
    );
    out
}
