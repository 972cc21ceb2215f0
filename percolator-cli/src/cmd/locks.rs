//! `percolator locks serve`: one instance of the paper's lock service (advisory row locks the
//! workers of a store share; see `percolator-lock-service`).
//!
//! It keeps nothing but memory and needs no store. Workers use it with `--lock-service
//! ADDR[,ADDR…]` (rows spread over the instances by hash); a worker that cannot reach it runs
//! its rows anyway, so restarting it costs only some doubled work.

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};
use percolator_lock_service::{LockServer, LockServerConfig};

use crate::CliError;
use crate::output::outln;

/// `percolator locks …`.
#[derive(Subcommand, Debug)]
pub enum LocksCommand {
    /// Serve advisory row locks until Ctrl-C or SIGTERM.
    Serve(ServeArgs),
}

/// `percolator locks serve`.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on (port 0 picks a free one; the address is printed).
    #[arg(long, default_value = "127.0.0.1:7071")]
    listen: String,
    /// How long a lock holds when its worker neither releases it nor disconnects (a hung
    /// worker), in milliseconds. A worker that exits or dies lets its locks go at once.
    #[arg(long, default_value_t = 10_000)]
    lock_ttl_ms: u64,
}

/// Runs `command`.
pub async fn run(command: &LocksCommand) -> Result<ExitCode, CliError> {
    match command {
        LocksCommand::Serve(args) => serve(args).await,
    }
}

async fn serve(args: &ServeArgs) -> Result<ExitCode, CliError> {
    let config = LockServerConfig::default().with_lock_ttl(Duration::from_millis(args.lock_ttl_ms));
    let server = LockServer::bind(&args.listen, config).await?;
    // The first line of stdout is the address: scripts and tests read it.
    outln!("lock service listening on {}", server.local_addr());
    crate::shutdown_signal().await;
    let stats = server.stats();
    server.shutdown();
    outln!(
        "lock service stopped: {} requests from {} connections; {} locks granted, {} refused \
         (held by another worker), {} released, {} released when their worker disconnected, {} \
         taken over after expiring",
        stats.requests,
        stats.connections,
        stats.granted,
        stats.refused,
        stats.released,
        stats.released_on_close,
        stats.expired_taken_over
    );
    Ok(ExitCode::SUCCESS)
}
