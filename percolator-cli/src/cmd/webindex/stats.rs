//! `webindex stats`: the index's sizes and its invariants, checked in full, and the audit of
//! every strong observer run (exit code 1 on a violation, 2 while work is pending).

use std::process::ExitCode;
use std::sync::Arc;

use percolator_core::{RowStore, TimestampOracle};
use percolator_observers::audit;
use percolator_webindex as webindex;

use super::loader;
use crate::CliError;
use crate::output::{invariants_verdict, out, outln, summary_table, term_safe};

/// Checks the index and prints the verdict.
pub async fn run<S: RowStore>(
    store: Arc<S>,
    oracle: Option<Arc<dyn TimestampOracle>>,
) -> Result<ExitCode, CliError> {
    let client = loader(&store, &oracle).await?;
    let pipeline = webindex::observers(None);
    let pending = percolator_observers::pending_on(&client, &pipeline).await?;
    let report = webindex::check(&client).await?;
    client.shutdown().await?;
    out!("{}", summary_table(&report.summary));
    if pending > 0 {
        // The invariants describe a finished pipeline: with work pending, differences
        // are the work still to do, not violations.
        outln!(
            "invariants: not checked — {pending} notification(s) pending; run `percolator webindex run` first ({} difference(s) now)",
            report.violations.len()
        );
        return Ok(ExitCode::from(2));
    }
    let verdict = invariants_verdict(&report);
    // Every run of a strong observer, by any worker process ever: once per change.
    let audit = audit::strong_runs(store.as_ref(), &webindex::observers(None)).await?;
    outln!(
        "strong observer runs: {} for {} changes, {} doubled",
        audit.runs,
        audit.changes,
        audit.doubled.len()
    );
    for doubled in audit.doubled.iter().take(20) {
        outln!("  doubled: {}", term_safe(doubled));
    }
    if audit.doubled.is_empty() {
        Ok(verdict)
    } else {
        Ok(ExitCode::FAILURE)
    }
}
