//! `webindex delete`: removes pages; the pipeline then takes them out of their clusters, the
//! links and the index.

use std::process::ExitCode;
use std::sync::Arc;

use percolator_core::{RowStore, TimestampOracle};
use percolator_webindex as webindex;

use super::loader;
use crate::CliError;
use crate::output::{outln, term_safe};

/// Deletes `urls`; fails (after deleting the others) if one was not stored.
///
/// A URL is looked up as the loaders store it (normalized: `HTTP://Example.COM/a#x` finds
/// `http://example.com/a`), then as given, for pages stored before URLs were normalized.
pub async fn run<S: RowStore>(
    store: Arc<S>,
    oracle: Option<Arc<dyn TimestampOracle>>,
    urls: &[String],
) -> Result<ExitCode, CliError> {
    let client = loader(&store, &oracle).await?;
    let mut missing = Vec::new();
    let mut deleted = 0;
    for url in urls {
        let normalized = webindex::url::normalize(url).ok();
        let mut found = false;
        if let Some(normalized) = &normalized {
            found = webindex::delete_page(&client, normalized.as_bytes()).await?;
        }
        if !found && normalized.as_deref() != Some(url.as_str()) {
            found = webindex::delete_page(&client, url.as_bytes()).await?;
        }
        if found {
            deleted += 1;
        } else {
            missing.push(term_safe(url));
        }
    }
    client.shutdown().await?;
    outln!("deleted {deleted} page(s); `percolator webindex run` takes them out of the index");
    if missing.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        outln!("not stored, nothing to delete: {}", missing.join(" "));
        Ok(ExitCode::FAILURE)
    }
}
