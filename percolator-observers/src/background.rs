//! The runtime's background duties besides scanning: garbage collection on a schedule, the
//! sweep of dead workers' leases and locks, and the refresh of the scan group's members. Each runs until the runtime stops; a failed pass is
//! logged and tried again, since neither is ever needed for correctness.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use percolator_core::RowStore;

use crate::config::GcSchedule;
use crate::runtime::Shared;

/// The background collector: one run per interval (or a multiple of the last run's time, see
/// [`GcSchedule::pause_factor`]) until the runtime stops. A failed run is
/// logged and tried again next time (GC is idempotent and never needed for correctness).
pub(crate) async fn gc_loop<S: RowStore>(shared: Arc<Shared<S>>, schedule: GcSchedule) {
    let mut pause = schedule.interval;
    loop {
        tokio::select! {
            () = shared.stop.cancelled() => return,
            () = tokio::time::sleep(pause) => {}
        }
        let started = std::time::Instant::now();
        let run = tokio::select! {
            () = shared.stop.cancelled() => return,
            run = shared.client.gc(&schedule.config, |_| {}) => run,
        };
        pause = schedule.pause_after(started.elapsed());
        match run {
            Ok(report) => {
                let metrics = &shared.metrics;
                crate::metrics::bump(&metrics.gc_runs, 1);
                let deleted = report.total().cells_deleted();
                let took = started.elapsed();
                crate::metrics::bump(&metrics.gc_cells_deleted, deleted);
                crate::metrics::bump(
                    &metrics.gc_micros,
                    u64::try_from(took.as_micros()).unwrap_or(u64::MAX),
                );
                tracing::info!(
                    safe_point = report.safe_point,
                    deleted,
                    secs = took.as_secs_f64(),
                    "background GC run done"
                );
            }
            Err(e) => tracing::warn!(error = %e, "background GC run failed; retrying later"),
        }
    }
}

/// The dead-worker sweep (see [`RuntimeConfig::dead_worker_sweep`]): a pass over every table's
/// locks at start (workers that died before this one started may have no lease left to end),
/// then every `interval` a look at the leases, with another pass over the locks whenever it
/// ended one. A failed pass is logged and repeated at the next tick until it succeeds.
pub(crate) async fn dead_worker_loop<S: RowStore>(shared: Arc<Shared<S>>, interval: Duration) {
    let client = &shared.client;
    let metrics = &shared.metrics;
    loop {
        let tick = async {
            let ended = client.end_dead_leases().await?;
            crate::metrics::bump(&metrics.dead_leases_ended, ended as u64);
            if ended > 0 || shared.lock_sweep_owed.load(Ordering::SeqCst) {
                let (resolved, _) = client.resolve_abandoned_locks().await?;
                crate::metrics::bump(&metrics.abandoned_locks_resolved, resolved as u64);
                if resolved > 0 || ended > 0 {
                    tracing::info!(
                        leases_ended = ended,
                        locks_resolved = resolved,
                        "resolved the locks of dead workers"
                    );
                }
            }
            Ok::<_, percolator_core::Error>(())
        };
        let outcome = tokio::select! {
            () = shared.stop.cancelled() => return,
            outcome = tick => outcome,
        };
        match outcome {
            Ok(()) => shared.lock_sweep_owed.store(false, Ordering::SeqCst),
            Err(e) => {
                shared.lock_sweep_owed.store(true, Ordering::SeqCst);
                tracing::warn!(error = %e, "dead-worker sweep failed; retrying later");
            }
        }
        tokio::select! {
            () = shared.stop.cancelled() => return,
            () = tokio::time::sleep(interval) => {}
        }
    }
}

/// Re-reads the scan group's live members every `every` (see `partition`). A failed read keeps
/// the view it had: at worst two workers run a row both, or leave it until the next read.
pub(crate) async fn partition_loop<S: RowStore>(shared: Arc<Shared<S>>, every: Duration) {
    let Some(partition) = shared.partition.as_ref() else {
        return;
    };
    loop {
        tokio::select! {
            () = shared.stop.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
        match shared.client.scan_group_members(partition.group()).await {
            Ok(members) => {
                let before = partition.members();
                partition.update(members);
                if partition.members() != before {
                    tracing::info!(
                        members = partition.members(),
                        before,
                        "scan group changed; rows are divided anew"
                    );
                }
            }
            Err(e) => tracing::warn!(error = %e, "could not read the scan group's members"),
        }
    }
}
