//! `webindex delete`: removes pages; the pipeline then takes them out of their clusters, the
//! links and the index.

use std::process::ExitCode;
use std::sync::Arc;

use percolator_core::{RowStore, TimestampOracle};
use percolator_webindex as webindex;

use super::loader;
use crate::CliError;

/// Deletes `urls`; fails (after deleting the others) if one was not stored.
pub async fn run<S: RowStore>(
    store: Arc<S>,
    oracle: Option<Arc<dyn TimestampOracle>>,
    urls: &[String],
) -> Result<ExitCode, CliError> {
    let client = loader(&store, &oracle).await?;
    let mut missing = Vec::new();
    let mut deleted = 0;
    for url in urls {
        if webindex::delete_page(&client, url.as_bytes()).await? {
            deleted += 1;
        } else {
            missing.push(url.as_str());
        }
    }
    client.shutdown().await?;
    println!("deleted {deleted} page(s); `percolator webindex run` takes them out of the index");
    if missing.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        println!("not stored, nothing to delete: {}", missing.join(" "));
        Ok(ExitCode::FAILURE)
    }
}
