//! `webindex stats`: the index's sizes as the pipeline keeps them (a few cells, whatever the
//! index's size) and the work pending. The full invariant check is `webindex check`.

use std::process::ExitCode;
use std::sync::Arc;

use percolator_core::{RowStore, TimestampOracle};
use percolator_webindex as webindex;

use super::loader;
use crate::CliError;
use crate::output::{out, sizes_table};

/// Prints the kept sizes and what is pending.
pub async fn run<S: RowStore>(
    store: Arc<S>,
    oracle: Option<Arc<dyn TimestampOracle>>,
) -> Result<ExitCode, CliError> {
    let client = loader(&store, &oracle).await?;
    let pipeline = webindex::observers(None);
    let pending = percolator_observers::pending_on(&client, &pipeline).await?;
    let txn = client.begin().await?;
    let sizes = webindex::sizes::read(&txn).await?;
    drop(txn);
    client.shutdown().await?;
    out!("{}", sizes_table(&sizes, pending));
    Ok(ExitCode::SUCCESS)
}
