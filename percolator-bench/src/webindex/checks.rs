//! The checks at the end of a run on the web index, shared by the experiments that run the
//! pipeline on a cluster or with several workers (Figure 10, worker scaling).

use percolator_core::{Client, Result, RowStore};

/// What the end of a run on the web index checks: every invariant with the audit of strong
/// observer runs (invariant 9), and nothing left pending or locked.
pub struct IndexChecks {
    /// Every violation found, as text.
    pub violations: Vec<String>,
    /// Rows of strong observer changes run twice (invariant 9).
    pub doubled: Vec<String>,
    /// Committed strong observer runs the audit counted.
    pub strong_runs: u64,
    /// Changes of strongly observed columns the audit counted.
    pub strong_changes: u64,
    /// Notifications pending in the pipeline's tables.
    pub pending: usize,
    /// Locks left in the pipeline's tables.
    pub locks: usize,
}

/// Runs [`IndexChecks`] with `client`.
pub async fn index_checks<S: RowStore>(client: &Client<S>) -> Result<IndexChecks> {
    let check = percolator_webindex::check(client).await?;
    let (mut pending, mut locks) = (0, 0);
    for table in percolator_webindex::schema::TABLES {
        pending += client.pending_notifications(table).await?;
        locks += client.locks(table).await?.len();
    }
    Ok(IndexChecks {
        violations: check.violations.iter().map(ToString::to_string).collect(),
        doubled: check
            .violations
            .iter()
            .filter(|v| v.invariant == 9)
            .flat_map(|v| v.rows.clone())
            .collect(),
        strong_runs: check.observer_runs,
        strong_changes: check.observed_changes,
        pending,
        locks,
    })
}
