//! `percolator observers list|retry|forget`: the store's observer registry (which observers
//! watch which columns, see `percolator_core::internal::observer_registry`) and the changes parked after
//! their observer failed too often (see `percolator_observers::parking`).

use std::process::ExitCode;
use std::sync::Arc;

use percolator_core::internal::observer_registry;
use percolator_core::{NotificationKind, RowStore, TimestampOracle};
use percolator_observers::{ParkedChange, parked, retry_parked};

use crate::CliError;
use crate::output::{out, outln, show, table, term_safe};

/// `percolator observers ...`.
#[derive(Debug, clap::Subcommand)]
pub enum ObserversCommand {
    /// Registered observers and declared columns, and parked changes.
    List,
    /// Hands parked changes back to their observers (all, or one observer's).
    Retry {
        /// Only the changes of this observer.
        #[arg(long)]
        observer: Option<String>,
    },
    /// Removes an observer's registrations: its columns stop waiting for it.
    Forget {
        /// The observer's name.
        name: String,
    },
}

/// Runs an `observers` subcommand.
pub async fn run<S: RowStore>(
    store: Arc<S>,
    oracle: Option<Arc<dyn TimestampOracle>>,
    command: &ObserversCommand,
) -> Result<ExitCode, CliError> {
    match command {
        ObserversCommand::List => {
            let registrations = observer_registry::list(store.as_ref()).await?;
            let rows: Vec<(String, String)> = registrations
                .iter()
                .map(|r| {
                    let kind = match r.column.kind {
                        NotificationKind::Strong => "strong",
                        _ => "weak",
                    };
                    (
                        format!(
                            "{}:{}",
                            show(&r.column.table, 60),
                            show(&r.column.column, 60)
                        ),
                        format!(
                            "{} ({kind})",
                            term_safe(r.observer.as_deref().unwrap_or("declared by a writer"))
                        ),
                    )
                })
                .collect();
            let rows: Vec<(&str, String)> =
                rows.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
            out!("{}", table("observed column", &rows));
            print_parked(&parked(store.as_ref()).await?, usize::MAX);
        }
        ObserversCommand::Retry { observer } => {
            let client = crate::client_builder(&store, &oracle).build().await?;
            let report = retry_parked(&client, observer.as_deref()).await?;
            client.shutdown().await?;
            out!(
                "{}",
                table(
                    "parked changes",
                    &[
                        ("handed back", report.retried.to_string()),
                        (
                            "superseded by a newer change (notified)",
                            report.superseded.to_string()
                        ),
                    ]
                )
            );
        }
        ObserversCommand::Forget { name } => {
            let removed = observer_registry::forget_observer(store.as_ref(), name).await?;
            if removed == 0 {
                return Err(format!("no observer named {name:?} is registered").into());
            }
            outln!("forgot {removed} registration(s) of observer {name:?}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints up to `limit` of `parked` with their errors (nothing if there are none).
pub fn print_parked(parked: &[ParkedChange], limit: usize) {
    if parked.is_empty() {
        return;
    }
    let rows: Vec<(String, String)> = parked
        .iter()
        .take(limit)
        .map(|p| {
            (
                format!(
                    "{}/{}/{} ({})",
                    show(&p.table, 40),
                    show(&p.row, 60),
                    show(&p.column, 40),
                    term_safe(&p.observer)
                ),
                // The error may quote the row or the page.
                format!("{} failures: {}", p.failures, term_safe(&p.error)),
            )
        })
        .collect();
    let rows: Vec<(&str, String)> = rows.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    outln!();
    out!(
        "{}",
        table("parked change (retry: percolator observers retry)", &rows)
    );
    if parked.len() > limit {
        outln!(
            "... and {} more (percolator observers list)",
            parked.len() - limit
        );
    }
}
