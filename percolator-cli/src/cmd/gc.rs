//! `percolator gc [--dry-run] [--grace-secs S]`: one garbage-collection run below the safe
//! point (see `percolator_core::gc`), with a progress bar and a summary table.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use percolator_core::gc::{GcConfig, GcProgress};
use percolator_core::{RowStore, TimestampOracle};

use crate::CliError;
use crate::output::{bar, out, term_safe};

/// Arguments of `percolator gc`.
#[derive(Debug, clap::Args)]
pub struct GcArgs {
    /// Count what would be collected; change nothing (the safe point included).
    #[arg(long)]
    pub dry_run: bool,
    /// How far the safe point stays behind the oldest snapshot any live worker uses.
    #[arg(long, default_value_t = 600.0, allow_negative_numbers = true)]
    pub grace_secs: f64,
    /// Rows per store call.
    #[arg(long, default_value_t = 256)]
    pub batch_rows: usize,
}

/// Runs one collection and prints what it did.
pub async fn run<S: RowStore>(
    store: Arc<S>,
    oracle: Option<Arc<dyn TimestampOracle>>,
    args: &GcArgs,
) -> Result<ExitCode, CliError> {
    if !args.grace_secs.is_finite() || args.grace_secs < 0.0 {
        return Err(format!(
            "--grace-secs must be a non-negative number of seconds, not {}",
            args.grace_secs
        )
        .into());
    }
    let config = GcConfig::default()
        .with_grace(Duration::from_secs_f64(args.grace_secs))
        .with_batch_rows(args.batch_rows)
        .with_dry_run(args.dry_run);
    let client = crate::client_builder(&store, &oracle).build().await?;
    let progress = bar(None, "gc");
    let report = client
        .gc(&config, |event| match event {
            GcProgress::Started { safe_point, tables } => {
                progress.set_message(format!("gc below {safe_point}: {tables} tables"))
            }
            GcProgress::Locks { table, seen } => progress.set_message(format!(
                "locks of {}: {seen}",
                term_safe(&String::from_utf8_lossy(table))
            )),
            GcProgress::Versions { table, rows } => {
                progress.set_position(rows);
                progress.set_message(format!(
                    "rows of {}",
                    term_safe(&String::from_utf8_lossy(table))
                ));
            }
            _ => {}
        })
        .await;
    progress.finish_and_clear();
    client.shutdown().await?;
    out!("{}", crate::output::gc_table(&report?));
    Ok(ExitCode::SUCCESS)
}
