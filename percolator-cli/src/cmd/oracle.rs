//! `percolator oracle serve`: one instance of the timestamp oracle service on the chosen store.
//!
//! Start two or more (on different machines, or ports) against one store: one leads under a
//! lease kept in the store, the others stand by and take over when it dies. Every other
//! `percolator` process on that store then gets `--oracle ADDR,ADDR…` (or `PERCOLATOR_ORACLE`).

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand};
use percolator_core::RowStore;
use percolator_core::oracle::OracleConfig;
use percolator_oracle::{OracleServer, RemoteOracle, RemoteOracleConfig, ServerConfig};

use crate::CliError;
use crate::output::outln;

/// `percolator oracle …`.
#[derive(Subcommand, Debug)]
pub enum OracleCommand {
    /// Serve timestamps of the store until Ctrl-C or SIGTERM (which release the lead).
    Serve(ServeArgs),
}

/// `percolator oracle serve`.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on (port 0 picks a free one; the address is printed).
    #[arg(long, default_value = "127.0.0.1:7070")]
    listen: String,
    /// The leader's lease in milliseconds: a standby takes over this long after the leader died.
    #[arg(long, default_value_t = 3_000)]
    lease_ms: u64,
}

/// The oracle every client of this process uses when `--oracle` names the service.
pub fn remote(
    endpoints: &[String],
) -> Result<Option<Arc<dyn percolator_core::TimestampOracle>>, CliError> {
    if endpoints.is_empty() {
        return Ok(None);
    }
    let oracle = RemoteOracle::new(RemoteOracleConfig::new(endpoints.iter().cloned()))?;
    Ok(Some(Arc::new(oracle)))
}

/// Runs `command` on `store`.
pub async fn run<S: RowStore>(
    store: Arc<S>,
    command: &OracleCommand,
) -> Result<ExitCode, CliError> {
    match command {
        OracleCommand::Serve(args) => serve(store, args).await,
    }
}

async fn serve<S: RowStore>(store: Arc<S>, args: &ServeArgs) -> Result<ExitCode, CliError> {
    let lease = Duration::from_millis(args.lease_ms);
    let config = ServerConfig::default()
        .with_oracle(OracleConfig::default().with_lease(lease))
        .with_maintain_interval((lease / 8).max(Duration::from_millis(1)));
    let server = OracleServer::bind(store, &args.listen, config).await?;
    // The first line of stdout is the address: scripts and tests read it.
    outln!("oracle listening on {}", server.local_addr());
    let mut leading = false;
    let mut tick = tokio::time::interval(Duration::from_millis(50));
    let stop = crate::shutdown_signal();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            () = &mut stop => break,
            _ = tick.tick() => {
                if server.is_leading() != leading {
                    leading = server.is_leading();
                    outln!("oracle {}", if leading { "leading" } else { "standing by" });
                }
            }
        }
    }
    let stats = server.stats();
    server.shutdown().await;
    outln!(
        "oracle stopped: {} timestamps in {} requests, {} batches, {} terms as leader",
        stats.timestamps,
        stats.requests,
        stats.batches,
        stats.terms
    );
    Ok(ExitCode::SUCCESS)
}
