//! Processing one row with pending notifications: run each observer of each dirty column in its
//! own transaction, then consume the notify versions the runs covered.
//!
//! A strong observer's run reads the observed column and its ack column in one snapshot. If the
//! column's latest commit is not newer than the ack, the change was already processed (a
//! duplicate notification, or a run whose cleanup was lost) and nothing commits. Otherwise the
//! observer runs and the ack is set to the run's start timestamp in the same transaction: two
//! runs for one change both write the ack, so at most one of them commits.

use std::ops::Bound;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use percolator_core::backoff::Backoff;
use percolator_core::{CellAddr, Error, NotifyRow, NotifyVersion, Result, RowStore};

use crate::metrics::bump;
use crate::observer::{Change, Observer, is_strong};
use crate::runtime::Shared;

/// Runs every observer of every dirty column of `row`, then clears what the runs covered.
///
/// The scanner's view of the row may be stale (another run may have consumed it since), so the
/// row's notifications are read again under the row lock; that read also picks up versions that
/// arrived after the scan, which then collapse into this run.
pub(crate) async fn process_row<S: RowStore>(shared: &Shared<S>, table: &Bytes, row: NotifyRow) {
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
            None => return, // consumed meanwhile
        },
        Err(e) => {
            bump(&shared.metrics.failures, 1);
            tracing::debug!(error = %e, "could not re-read notifications");
            return;
        }
    };
    for (column, versions) in row.columns {
        let observers = shared.observers.of(table, &column);
        if observers.is_empty() {
            continue;
        }
        let mut snapshot = u64::MAX;
        let mut all_ran = true;
        for observer in observers {
            match run_observer(shared, observer, table, &row.row, &column, versions.len()).await {
                Ok(ts) => snapshot = snapshot.min(ts),
                Err(e) => {
                    all_ran = false;
                    bump(&shared.metrics.failures, 1);
                    tracing::debug!(observer = observer.name(), error = %e, "observer run failed; notification stays");
                }
            }
        }
        if all_ran {
            clear(shared, table, &row.row, &column, &versions, snapshot).await;
        }
    }
}

async fn clear<S: RowStore>(
    shared: &Shared<S>,
    table: &Bytes,
    row: &Bytes,
    column: &Bytes,
    versions: &[NotifyVersion],
    snapshot: u64,
) {
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
        }
        Err(e) => {
            bump(&shared.metrics.failures, 1);
            tracing::debug!(error = %e, "could not clear notifications; they will be seen again");
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
) -> Result<u64> {
    let strong = is_strong(observer.observed().kind);
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
                    return Ok((start_ts, false));
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
            observer.observe(&mut txn, &change).await?;
            if strong {
                txn.set_ack(table, row, name, column)?;
            }
            txn.commit().await?;
            observer.committed(&change);
            Ok::<_, Error>((start_ts, true))
        }
        .await;
        match outcome {
            Ok((start_ts, committed)) => {
                if committed {
                    bump(&shared.metrics.processed, 1);
                    shared.metrics.latency.record(began.elapsed());
                } else {
                    bump(&shared.metrics.already_done, 1);
                }
                return Ok(start_ts);
            }
            Err(e) if e.is_retryable() => {
                bump(&shared.metrics.conflicts, 1);
                last_error = Some(e);
                backoff.wait().await;
            }
            Err(e) => return Err(e),
        }
    }
    Err(last_error.unwrap_or(Error::Application("observer made no attempt".into())))
}
