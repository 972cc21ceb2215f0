//! `percolator serve`: the web index's observers and its HTTP API in one process that owns the
//! database (see `percolator-server`). It records its URL in the database directory, so that
//! `percolator webindex load|query|delete|stats` and `percolator status` on the same `--db` go
//! through it instead of opening the database.

use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use percolator_core::{RowStore, TimestampOracle};
use percolator_server::{Server, ServerConfig, discovery};

use crate::cmd::webindex::{WorkerArgs, runtime_config};
use crate::{CliError, client_builder};

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address of the HTTP API and the search page.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    #[command(flatten)]
    workers: WorkerArgs,
}

/// Serves until Ctrl-C or SIGTERM. `db` is the directory to record the server in (`None` for
/// backends without one).
pub async fn run<S: RowStore>(
    store: Arc<S>,
    oracle: Option<Arc<dyn TimestampOracle>>,
    args: &ServeArgs,
    db: Option<&Path>,
) -> Result<ExitCode, CliError> {
    let config = ServerConfig::new(args.listen).with_runtime(runtime_config(&args.workers));
    let server = Server::start(client_builder(&store, &oracle), config).await?;
    if let Some(db) = db {
        discovery::write(db, &server.url()).map_err(|e| {
            format!(
                "cannot record the server in {}: {e}",
                discovery::path(db).display()
            )
        })?;
    }
    // Machine-readable first line (tests and scripts wait for it).
    println!(
        "serving {} (search page at {}/)",
        server.url(),
        server.url()
    );
    crate::shutdown_signal().await;
    if let Some(db) = db {
        discovery::remove(db);
    }
    let stats = server.shutdown().await?;
    println!(
        "stopped: {} observer transactions, {} failures",
        stats.notifications_processed, stats.failures
    );
    Ok(ExitCode::SUCCESS)
}
