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
use percolator_server::{Access, ReadAccess, Server, ServerConfig, Token, discovery};

use crate::cmd::webindex::{WorkerArgs, gc_schedule, runtime_config};
use crate::output::outln;
use crate::{CliError, client_builder};

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address of the HTTP API and the search page. Another address than loopback needs
    /// --public-read or --auth-read.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Searches, status, metrics and the search page open to anyone who reaches the server
    /// (the default on loopback).
    #[arg(long, conflicts_with = "auth_read")]
    public_read: bool,
    /// Reads need the token too.
    #[arg(long)]
    auth_read: bool,
    /// Also answer requests addressed to this name (host or host:port), e.g. the machine's
    /// name behind a proxy; others are refused (a defence against DNS rebinding).
    #[arg(long, value_name = "HOST")]
    allowed_host: Vec<String>,
    /// Collect garbage in the background every this many seconds (see `percolator gc`;
    /// 0: never). A server recrawling pages keeps every old version without it. A run reads
    /// every write record of the store, so it is not cheap: with the default grace, collecting
    /// more often than the grace frees little more.
    #[arg(long, value_name = "SECS", default_value_t = 600.0)]
    gc_every_secs: f64,
    /// The safe point's distance behind the oldest snapshot in use: versions a snapshot this
    /// much older than every live transaction's could still read are kept.
    #[arg(long, value_name = "SECS", default_value_t = 600.0)]
    gc_grace_secs: f64,
    /// The most HTML kept of an uploaded page, in bytes; longer pages are cut, and the ingest
    /// reports count them. The store's largest value (1 MiB on etcd) can cut a page shorter
    /// still, once compressed.
    #[arg(long, value_name = "BYTES", default_value_t = percolator_webindex::raw::DEFAULT_MAX_PAGE_BYTES)]
    max_page_bytes: usize,
    #[command(flatten)]
    workers: WorkerArgs,
}

/// Who may do what, from the flags and the token: reads open on loopback unless --auth-read;
/// elsewhere only as the flags say.
fn access(args: &ServeArgs, token: Token) -> Result<Access, CliError> {
    let reads = match (
        args.public_read,
        args.auth_read,
        args.listen.ip().is_loopback(),
    ) {
        (_, true, _) => ReadAccess::Token,
        (true, _, _) | (false, false, true) => ReadAccess::Open,
        (false, false, false) => {
            return Err(format!(
                "--listen {} is reachable from other machines: choose who may search with \
                 --public-read (anyone) or --auth-read (only with the token); writes always \
                 need the token",
                args.listen
            )
            .into());
        }
    };
    let mut access = Access::new(token).with_reads(reads);
    for host in &args.allowed_host {
        access = access.with_allowed_host(host.clone());
    }
    Ok(access)
}

/// Serves until Ctrl-C or SIGTERM. `db` is the directory to record the server in (`None` for
/// backends without one).
pub async fn run<S: RowStore>(
    store: Arc<S>,
    oracle: Option<Arc<dyn TimestampOracle>>,
    args: &ServeArgs,
    db: Option<&Path>,
    token: Option<Token>,
) -> Result<ExitCode, CliError> {
    let Some(token) = token else {
        return Err(format!(
            "serve needs a token for writes: --token-file PATH (made if missing) or {}; on a \
             store with a database directory it is kept there",
            crate::token::TOKEN_VAR
        )
        .into());
    };
    let access = access(args, token)?;
    let gc = gc_schedule(Some(args.gc_every_secs), args.gc_grace_secs)?;
    let config = ServerConfig::new(args.listen, access)
        .with_runtime(runtime_config(&args.workers)?.with_gc(gc))
        .with_max_page_bytes(args.max_page_bytes);
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
    outln!(
        "serving {} (search page at {}/)",
        server.url(),
        server.url()
    );
    if let Some(db) = db {
        outln!(
            "writes need the token in {} (the CLI on this --db sends it itself)",
            percolator_server::auth::token_path(db).display()
        );
    }
    crate::shutdown_signal().await;
    if let Some(db) = db {
        discovery::remove(db);
    }
    let stats = server.shutdown().await?;
    outln!(
        "stopped: {} observer transactions, {} failures",
        stats.notifications_processed,
        stats.failures
    );
    Ok(ExitCode::SUCCESS)
}
