//! Invariant 9: every strong observer ran at most once per change of its column, by any
//! worker process that ever ran (the audit of [`percolator_observers::audit`], over the write
//! records garbage collection kept).

use percolator_core::{Client, Result, RowStore};
use percolator_observers::audit;

use super::Progress;
use super::violations::Violations;
use super::walk::ProgressFn;

/// Audits the pipeline's strong observers (invariant 9) over the store of `client`. Returns
/// the changes of their columns and their runs.
///
/// It holds because a second run of a strong observer for one change either reads the first
/// run's ack and skips, or conflicts with it on the ack column (paper §2.4).
pub(super) async fn check_observer_runs<S: RowStore>(
    client: &Client<S>,
    progress: ProgressFn<'_>,
    violations: &mut Violations,
) -> Result<(u64, u64)> {
    let observers = crate::observers::<S>(None);
    let on_table = |table: &[u8]| {
        progress(Progress::Table {
            table: &format!("{} (observer runs)", String::from_utf8_lossy(table)),
            rows: None,
        });
    };
    let on_rows = |rows: u64| progress(Progress::Rows(rows));
    let found =
        audit::strong_runs_with(client.store().as_ref(), &observers, &on_table, &on_rows).await?;
    for doubled in &found.doubled {
        violations.add(
            9,
            "change handled by two committed runs of a strong observer",
            doubled.clone(),
        );
    }
    Ok((found.changes, found.runs))
}
