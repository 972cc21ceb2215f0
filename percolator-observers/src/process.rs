//! Processing one row with pending notifications: run each observer of each dirty column in its
//! own transaction, then consume the notify versions the runs covered.
//!
//! A strong observer's run reads the observed column and its ack column in one snapshot. If the
//! column's latest commit is not newer than the ack, the change was already processed (a
//! duplicate notification, or a run whose cleanup was lost) and nothing commits. Otherwise the
//! observer runs and the ack is set to the run's start timestamp in the same transaction: two
//! runs for one change both write the ack, so at most one of them commits. Weak observers ack
//! too (they run regardless of it).
//!
//! **Clearing** a column's notifications needs every observer registered for it in the store
//! (see `percolator_core::internal::observer_registry`) to have covered them: this worker's runs cover up
//! to their snapshots, another worker's observer up to its ack. A row that waits for another
//! worker's observer backs off instead of spinning.
//!
//! **Failures** never escape a run: an error or a panic in the observer (caught, with the
//! observer, the cell and the message) is a failed run. The row backs off exponentially; after
//! `park_after_failures` failures of one observer on one cell in a row, its change is parked
//! (see `parking`). A strong observer that writes the column it observes notifies itself again;
//! after `max_self_triggers` such runs in a row its run fails, and so it is parked in the end.

use std::ops::Bound;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use futures::FutureExt;
use percolator_core::internal::backoff::Backoff;
use percolator_core::{CellAddr, Error, NotifyRow, NotifyVersion, Result, RowStore, Transaction};

use crate::metrics::bump;
use crate::observer::{Change, Observer, is_strong};
use crate::parking;
use crate::runtime::Shared;

/// Runs every observer of every dirty column of `row`, then clears what the runs covered.
///
/// The scanner's view of the row may be stale (another run may have consumed it since), so the
/// row's notifications are read again under the row lock; that read also picks up versions that
/// arrived after the scan, which then collapse into this run.
///
/// Returns whether a batching observer ([`Observer::batch_delay`]) left work queued in the row
/// (its run notified its own cell again): the caller then runs the row again at once, since a
/// full batch already waits, instead of letting the new notification wait out the delay.
pub(crate) async fn process_row<S: RowStore>(
    shared: &Shared<S>,
    table: &Bytes,
    row: NotifyRow,
) -> bool {
    let fresh = shared
        .client
        .scan_notifications(
            table,
            Bound::Included(row.row.clone()),
            Bound::Included(row.row.clone()),
            Some(1),
        )
        .await;
    let row = match fresh {
        Ok(mut rows) => match rows.pop() {
            Some(fresh) => fresh,
            None => return false, // consumed meanwhile
        },
        Err(e) => {
            bump(&shared.metrics.failures, 1);
            tracing::debug!(error = %e, "could not re-read notifications");
            return false;
        }
    };
    let mut row_done = true;
    let mut again = false;
    for (column, versions) in row.columns {
        let observers = shared.observers.of(table, &column);
        if observers.is_empty() {
            continue;
        }
        let mut snapshot = u64::MAX;
        let mut all_ran = true;
        for observer in observers {
            let name = observer.name();
            match run_observer(shared, observer, table, &row.row, &column, versions.len()).await {
                Ok((ts, more)) => {
                    snapshot = snapshot.min(ts);
                    again |= more;
                    shared
                        .failures
                        .reset_observer(table, &row.row, &column, name);
                }
                Err(e) => {
                    bump(&shared.metrics.failures, 1);
                    let failures = shared.failures.failed(table, &row.row, &column, name);
                    let park_after = shared.config.park_after_failures;
                    if park_after == 0 || failures < park_after {
                        tracing::debug!(observer = name, failures, error = %e, "observer run failed; the row backs off");
                        all_ran = false;
                        continue;
                    }
                    let error = e.to_string();
                    match parking::park(
                        &shared.client,
                        (table, &row.row, &column),
                        name,
                        failures,
                        &error,
                    )
                    .await
                    {
                        Ok(park_ts) => {
                            bump(&shared.metrics.parked, 1);
                            tracing::warn!(observer = name, failures, error = %error, "change parked; `percolator observers retry` hands it back");
                            snapshot = snapshot.min(park_ts);
                            shared
                                .failures
                                .reset_observer(table, &row.row, &column, name);
                            shared
                                .failures
                                .clear_self_runs(table, &row.row, &column, name);
                        }
                        Err(pe) => {
                            tracing::debug!(observer = name, error = %pe, "could not park a change");
                            all_ran = false;
                        }
                    }
                }
            }
        }
        if !all_ran {
            row_done = false;
            continue;
        }
        // Observers registered by other workers must have covered the change too.
        let (snapshot, waits_for_others) =
            match others_coverage(shared, table, &row.row, &column, snapshot).await {
                Ok(cover) => cover,
                Err(e) => {
                    bump(&shared.metrics.failures, 1);
                    tracing::debug!(error = %e, "could not read other observers' acks");
                    row_done = false;
                    continue;
                }
            };
        let kept = clear(shared, table, &row.row, &column, &versions, snapshot).await;
        if waits_for_others && kept != Some(0) {
            bump(&shared.metrics.deferred, 1);
            shared.failures.wait(table, &row.row);
            row_done = false;
        }
    }
    if row_done {
        shared.failures.row_done(table, &row.row);
    }
    again
}

/// The snapshot that every registered observer of `table`/`column` has covered, given that this
/// worker's observers covered `local`, and whether an observer of another worker held it back.
/// An observer of another worker covered the change up to its ack (the start timestamp of its
/// last committed run, or of the parking of its change) — and a strong one also covered
/// everything up to now when a run of it now would do nothing: the column has no value, or its
/// value is not newer than the ack. (Without that, a deleted column's notification would wait
/// forever for a strong observer that, finding no value, never acks it.)
async fn others_coverage<S: RowStore>(
    shared: &Shared<S>,
    table: &Bytes,
    row: &Bytes,
    column: &Bytes,
    local: u64,
) -> Result<(u64, bool)> {
    let ours = shared.observers.of(table, column);
    let others: Vec<(String, bool)> = shared
        .client
        .registered_observers(table, column)
        .into_iter()
        .filter(|(name, _)| !ours.iter().any(|o| o.name() == name))
        .map(|(name, kind)| (name, is_strong(kind)))
        .collect();
    if others.is_empty() {
        return Ok((local, false));
    }
    let txn = shared.client.begin().await?;
    let committed = if others.iter().any(|(_, strong)| *strong) {
        txn.get_versioned(table, row, column).await?.commit_ts
    } else {
        None
    };
    let mut covered = local;
    for (name, strong) in &others {
        let ack = txn.ack(table, row, name, column).await?;
        let would_do_nothing = *strong && committed.is_none_or(|c| ack.is_some_and(|a| c <= a));
        if !would_do_nothing {
            covered = covered.min(ack.unwrap_or(0));
        }
    }
    Ok((covered, covered < local))
}

/// Clears what `snapshot` covered; returns how many versions stayed (`None`: clearing failed).
async fn clear<S: RowStore>(
    shared: &Shared<S>,
    table: &Bytes,
    row: &Bytes,
    column: &Bytes,
    versions: &[NotifyVersion],
    snapshot: u64,
) -> Option<usize> {
    let addr = CellAddr::new(table.clone(), row.clone(), column.clone());
    match shared
        .client
        .clear_notifications(&addr, versions, snapshot)
        .await
    {
        Ok(outcome) => {
            let deleted = outcome.deleted as u64;
            bump(&shared.metrics.cleared, deleted);
            bump(&shared.metrics.kept, outcome.kept as u64);
            bump(&shared.metrics.collapsed, deleted.saturating_sub(1));
            Some(outcome.kept)
        }
        Err(e) => {
            bump(&shared.metrics.failures, 1);
            tracing::debug!(error = %e, "could not clear notifications; they will be seen again");
            None
        }
    }
}

/// One observer's run for one dirty cell, re-run on retryable errors. Returns the start
/// timestamp of the snapshot that covered the change (committed or found acknowledged).
async fn run_observer<S: RowStore>(
    shared: &Shared<S>,
    observer: &Arc<dyn Observer<S>>,
    table: &Bytes,
    row: &Bytes,
    column: &Bytes,
    notifications: usize,
) -> Result<(u64, bool)> {
    let strong = is_strong(observer.observed().kind);
    let batches = !observer.batch_delay().is_zero();
    let name = observer.name();
    let config = shared.client.config();
    let mut backoff = Backoff::from_config(config);
    let mut last_error = None;
    for _ in 0..config.max_attempts.max(1) {
        let began = Instant::now();
        let outcome = async {
            let mut txn = shared.client.begin().await?;
            let start_ts = txn.start_ts();
            let seen = txn.get_versioned(table, row, column).await?;
            if strong {
                let ack = txn.ack(table, row, name, column).await?;
                let changed = match (seen.commit_ts, ack) {
                    (None, _) => false,
                    (Some(_), None) => true,
                    (Some(commit_ts), Some(ack)) => commit_ts > ack,
                };
                if !changed {
                    return Ok((start_ts, false, false));
                }
            }
            let change = Change {
                table: table.clone(),
                row: row.clone(),
                column: column.clone(),
                value: seen.value,
                commit_ts: seen.commit_ts,
                notifications,
            };
            observe_caught(shared, observer, &mut txn, &change).await?;
            // Every run acks, weak ones too: workers with other observers of the column read
            // the acks before clearing its notifications.
            txn.set_ack(table, row, name, column)?;
            let wrote_self = strong && txn.writes_cell(table, row, column);
            let failures = &shared.failures;
            let limit = shared.config.max_self_triggers;
            if wrote_self && failures.self_runs(table, row, column, name) >= limit {
                bump(&shared.metrics.self_trigger_stops, 1);
                return Err(Error::Application(format!(
                    "observer {name:?} wrote the column it observes ({}/{}/{}) on {limit} runs in a row: \
                     each write notifies it again, so the runtime stopped it",
                    String::from_utf8_lossy(table),
                    String::from_utf8_lossy(row),
                    String::from_utf8_lossy(column)
                )));
            }
            // A batching observer that notifies its own cell again left work queued.
            let more = batches && txn.notifies_cell(table, row, column);
            txn.commit().await?;
            failures.record_self_run(table, row, column, name, wrote_self);
            committed_caught(shared, observer, &change);
            Ok::<_, Error>((start_ts, true, more))
        }
        .await;
        match outcome {
            Ok((start_ts, committed, more)) => {
                if committed {
                    bump(&shared.metrics.processed, 1);
                    shared.metrics.latency.record(began.elapsed());
                    shared.per_observer.record(name, began.elapsed());
                } else {
                    bump(&shared.metrics.already_done, 1);
                }
                return Ok((start_ts, more));
            }
            Err(e) if e.is_retryable() => {
                bump(&shared.metrics.conflicts, 1);
                shared.per_observer.record_conflict(name);
                last_error = Some(e);
                backoff.wait().await;
            }
            Err(e) => return Err(e),
        }
    }
    Err(last_error.unwrap_or(Error::Application("observer made no attempt".into())))
}

/// Runs the observer's code; a panic becomes an error naming the observer and the cell (the
/// transaction is dropped uncommitted, so nothing of the run is written).
async fn observe_caught<S: RowStore>(
    shared: &Shared<S>,
    observer: &Arc<dyn Observer<S>>,
    txn: &mut Transaction<S>,
    change: &Change,
) -> Result<()> {
    match AssertUnwindSafe(observer.observe(txn, change))
        .catch_unwind()
        .await
    {
        Ok(outcome) => outcome,
        Err(payload) => {
            bump(&shared.metrics.panics, 1);
            Err(Error::Application(format!(
                "observer {:?} panicked on {}/{}/{}: {}",
                observer.name(),
                String::from_utf8_lossy(&change.table),
                String::from_utf8_lossy(&change.row),
                String::from_utf8_lossy(&change.column),
                panic_message(payload.as_ref())
            )))
        }
    }
}

/// Calls the observer's `committed` hook; a panic there is counted and logged (the run did
/// commit, so it is not a failure).
fn committed_caught<S: RowStore>(
    shared: &Shared<S>,
    observer: &Arc<dyn Observer<S>>,
    change: &Change,
) {
    if let Err(payload) = std::panic::catch_unwind(AssertUnwindSafe(|| observer.committed(change)))
    {
        bump(&shared.metrics.panics, 1);
        tracing::warn!(
            observer = observer.name(),
            panic = panic_message(payload.as_ref()),
            "observer's committed hook panicked"
        );
    }
}

/// The text of a panic payload (`panic!` with a literal or a format string), else a placeholder.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "(a panic without a message)".to_owned()
    }
}
