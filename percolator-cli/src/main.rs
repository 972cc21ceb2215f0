//! `percolator`: the web-indexing pipeline and debugging tools on any compiled-in backend.
//!
//! ```text
//! percolator --db target/webindex webindex demo            # load, index, recrawl, check, query
//! percolator --db DIR webindex load --synthetic 5000       # or --dir PATH, --warc FILE.warc.gz
//! percolator --db DIR webindex run                         # process until idle (Ctrl-C: graceful)
//! percolator --db DIR webindex query "some words"
//! percolator --store etcd:http://127.0.0.1:2379 status    # any store, by spec
//! percolator --db DIR webindex stats                       # sizes, as the pipeline keeps them
//! percolator --db DIR webindex check                       # every invariant, with progress
//! percolator --db DIR scan documents --family notify       # raw cells, for debugging
//! percolator --db DIR status                               # pending notifications, locks
//! percolator --db DIR gc && percolator --db DIR compact     # collect history, shrink a sled db
//! percolator --db target/bank bank                         # the bank-transfer demo
//! percolator --backend etcd oracle serve --listen 0.0.0.0:7070   # the timestamp oracle service
//! percolator --backend etcd --oracle h1:7070,h2:7070 webindex run  # a worker using it
//! ```
//!
//! The store is `--store SPEC` (`fjall:PATH`, `sled:PATH`, `mem`, `etcd:URL,…`, `tikv:PD,…`), or
//! `--backend` with `--db`, `--endpoints` or `--pd` (left out: the engine already in `--db`, else
//! fjall). Backends are compiled in by cargo feature and opened by `percolator-registry`; no
//! module here names one. The commands run on a [`percolator_core::DynStore`], so the pipeline is
//! compiled once whatever the backends.
//!
//! Layout: `cmd/` holds one module per subcommand (`cmd/webindex/` one per `webindex`
//! subcommand), `store.rs` turns the flags into a store, and `output.rs` renders everything.

mod cmd;
mod output;
mod store;
mod token;

use cmd::{bank, compact, debug, gc, locks, observers, oracle, serve, webindex};

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// jemalloc: the observers allocate many small keys and values, and glibc malloc takes a large
/// share of an index run's CPU. Of the allocators measured under `serve` with a steady recrawl
/// (`cargo xtask bench --serve-load`), jemalloc's RSS stays flat; mimalloc's (v3) climbs
/// through the run, v2's more, glibc's to twice as much. On the Rust docs' real HTML an index run
/// is as fast as with mimalloc (ARCHITECTURE.md, "Allocator").
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Turns transparent huge pages off for this process (Linux), before the work allocates.
///
/// With huge pages the kernel zeroes a whole 2 MiB page the first time any byte of it is
/// touched, each time the allocator gives memory back and takes it again, and a page of which
/// one byte is live stays resident whole. The flag is inherited by child processes. A failure
/// only leaves huge pages on, so it is ignored.
fn without_transparent_huge_pages() {
    #[cfg(target_os = "linux")]
    let _ = nix::sys::prctl::set_thp_disable(true);
}

/// Errors of the command line tool.
pub type CliError = Box<dyn std::error::Error + Send + Sync>;

#[derive(Parser, Debug)]
#[command(
    name = "percolator",
    about = "Percolator (OSDI 2010) in Rust: the web-indexing pipeline and debugging tools"
)]
/// Command line arguments.
pub struct Cli {
    /// The store, as a spec: `fjall:PATH`, `sled:PATH`, `mem`, `etcd:URL[,URL…]` or
    /// `tikv:HOST:PORT[,…]` (instead of `--backend` and `--db`, `--endpoints`, `--pd`).
    #[arg(long, env = "PERCOLATOR_STORE", conflicts_with = "backend")]
    store: Option<percolator_registry::StoreSpec>,
    /// Storage backend (those compiled in; see the crate's cargo features). Default: the engine
    /// whose files are already in `--db`, else fjall.
    #[arg(long, value_parser = store::backend_names())]
    backend: Option<String>,
    /// Database directory (sled, fjall).
    #[arg(long, default_value = "target/percolator-db")]
    db: PathBuf,
    /// PD endpoints (tikv), comma separated; defaults to $PERCOLATOR_TIKV_PD.
    #[arg(long, env = "PERCOLATOR_TIKV_PD", value_delimiter = ',')]
    pd: Vec<String>,
    /// Key namespace inside the cluster (tikv, etcd): several stores can share one cluster.
    #[arg(long, default_value = "percolator")]
    namespace: String,
    /// etcd client URLs (etcd), comma separated; defaults to $PERCOLATOR_ETCD_ENDPOINTS.
    #[arg(long, env = "PERCOLATOR_ETCD_ENDPOINTS", value_delimiter = ',')]
    endpoints: Vec<String>,
    /// The timestamp oracle service (`percolator oracle serve` instances, host:port, comma
    /// separated; defaults to $PERCOLATOR_ORACLE). Every process sharing a store with others
    /// needs it; without it a process uses the store's own oracle (PD's TSO on TiKV) or a
    /// local one, which admits one process at a time on a shared store.
    #[arg(long, env = "PERCOLATOR_ORACLE", value_delimiter = ',')]
    oracle: Vec<String>,
    /// A running `percolator serve` to send `webindex load|query|delete|stats` and `status`
    /// to (defaults to $PERCOLATOR_SERVER; without it, the server recorded in `--db`, if any).
    #[arg(long, env = "PERCOLATOR_SERVER")]
    server: Option<String>,
    /// The server's token: the file `serve` keeps it in (for `serve`: made if missing). Else
    /// $PERCOLATOR_TOKEN, else the token file in `--db`.
    #[arg(long, value_name = "PATH")]
    token_file: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// The web-indexing pipeline.
    Webindex {
        #[command(subcommand)]
        command: webindex::WebindexCommand,
    },
    /// Raw cells of a table (every family or one), for debugging.
    Scan(debug::ScanArgs),
    /// Pending notifications, locks, registered workers and parked changes.
    Status,
    /// Registered observers, parked changes, and handing those back.
    Observers {
        #[command(subcommand)]
        command: observers::ObserversCommand,
    },
    /// Garbage-collects MVCC history below the safe point (one run).
    Gc(gc::GcArgs),
    /// Gives a sled database's free space back to the file system (offline: stop the workers).
    Compact(compact::CompactArgs),
    /// Concurrent bank transfers (cross-row transactions) with a conservation check.
    Bank(bank::BankArgs),
    /// The web index as a service: runs the observers and an HTTP API (ingest, search,
    /// status, stats, metrics) with a search page at `/`, until Ctrl-C.
    Serve(serve::ServeArgs),
    /// The timestamp oracle service.
    Oracle {
        #[command(subcommand)]
        command: oracle::OracleCommand,
    },
    /// The paper's lock service: advisory row locks shared by the workers of a store (no store
    /// needed; workers use it with `--lock-service`).
    Locks {
        #[command(subcommand)]
        command: locks::LocksCommand,
    },
}

fn main() -> ExitCode {
    without_transparent_huge_pages();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        // Colour codes only for a terminal, not in logs and pipes.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = Cli::parse();
    let spec = match store::spec(&cli) {
        Ok(spec) => spec,
        Err(e) => {
            eprintln!("error: {}", output::term_safe(&e.to_string()));
            return ExitCode::FAILURE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(store::run(&cli, &spec)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", output::term_safe(&e.to_string()));
            ExitCode::FAILURE
        }
    }
}

impl Command {
    /// Whether the command only reads an existing database (and so must not create one at a
    /// mistyped path).
    fn reads_only(&self) -> bool {
        match self {
            Command::Webindex { command } => matches!(
                command,
                webindex::WebindexCommand::Stats
                    | webindex::WebindexCommand::Check
                    | webindex::WebindexCommand::Query(_)
            ),
            Command::Scan(_) | Command::Status => true,
            Command::Observers { command } => {
                matches!(command, observers::ObserversCommand::List)
            }
            _ => false,
        }
    }
}

/// Runs `cli`'s command on an opened store. `oracle` is the store cluster's own (PD's TSO), if
/// any; `--oracle` overrides it. `db` is the store's directory, if it has one (where a server
/// records itself).
pub async fn dispatch<S: percolator_core::RowStore>(
    store: std::sync::Arc<S>,
    oracle: Option<std::sync::Arc<dyn percolator_core::TimestampOracle>>,
    cli: &Cli,
    db: Option<&std::path::Path>,
) -> Result<ExitCode, CliError> {
    let oracle = oracle::remote(&cli.oracle)?.or(oracle);
    match &cli.command {
        Command::Oracle { command } => oracle::run(store, command).await,
        // `store::run` serves it before it opens anything (it needs no store).
        Command::Locks { command } => locks::run(command).await,
        Command::Webindex { command } => webindex::run(store, oracle, command).await,
        Command::Scan(args) => debug::scan(store, args).await,
        Command::Status => debug::status(store, oracle).await,
        Command::Gc(args) => gc::run(store, oracle, args).await,
        // `store::run` compacts before it opens anything (compaction is offline).
        Command::Compact(_) => Err("compact: the store is open; it compacts only offline".into()),
        Command::Observers { command } => observers::run(store, oracle, command).await,
        Command::Bank(args) => bank::run(store, oracle, args).await,
        Command::Serve(args) => {
            let token = crate::token::for_serve(cli, db)?;
            serve::run(store, oracle, args, db, token).await
        }
    }
}

/// Resolves on Ctrl-C or SIGTERM (what `kill` and process managers send): the signal to stop
/// gracefully.
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

/// A client builder on `store` with the oracle every client of this process must use on it
/// (`None`: the store's process-wide local oracle — each `percolator` command is the one
/// process allocating timestamps on its store; on a shared store the oracle's lease refuses a
/// second one instead of letting it break snapshot isolation).
pub fn client_builder<S: percolator_core::RowStore>(
    store: &std::sync::Arc<S>,
    oracle: &Option<std::sync::Arc<dyn percolator_core::TimestampOracle>>,
) -> percolator_core::ClientBuilder<S> {
    let builder = percolator_core::Client::builder(std::sync::Arc::clone(store));
    match oracle {
        Some(oracle) => builder.oracle(std::sync::Arc::clone(oracle)),
        None => builder.local_oracle(),
    }
}
