//! `webindex query`: ranked search, printed as a list or as JSON.

use std::process::ExitCode;
use std::sync::Arc;

use percolator_core::{RowStore, TimestampOracle};
use percolator_webindex::{self as webindex, Mode, SearchOptions};

use super::{QueryArgs, loader};
use crate::CliError;
use crate::output::print_results;

/// Searches and prints the results.
pub async fn run<S: RowStore>(
    store: Arc<S>,
    oracle: Option<Arc<dyn TimestampOracle>>,
    args: &QueryArgs,
) -> Result<ExitCode, CliError> {
    let client = loader(&store, &oracle).await?;
    let options = search_options(args);
    let results = webindex::search(&client, &args.words.join(" "), &options).await?;
    client.shutdown().await?;
    print_results(&results, args.offset, args.json)
}

/// The search options `webindex query`'s flags ask for.
pub(crate) fn search_options(args: &QueryArgs) -> SearchOptions {
    let mode = if args.any { Mode::Any } else { Mode::All };
    SearchOptions::default()
        .mode(mode)
        .limit(args.limit)
        .offset(args.offset)
}
