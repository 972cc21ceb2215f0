//! `percolator`: the web-indexing pipeline and debugging tools on any compiled-in backend.
//!
//! ```text
//! percolator --db target/webindex webindex demo            # load, index, recrawl, check, query
//! percolator --db DIR webindex load --synthetic 5000       # or --dir PATH, --warc FILE.warc.gz
//! percolator --db DIR webindex run                         # process until idle (Ctrl-C: graceful)
//! percolator --db DIR webindex query "some words"
//! percolator --db DIR webindex stats                       # sizes and invariants
//! percolator --backend mem webindex freshness --json target/bench/freshness.json
//! percolator --db DIR scan documents --family notify       # raw cells, for debugging
//! percolator --db DIR status                               # pending notifications, locks
//! percolator --db DIR gc && percolator --db DIR compact     # collect history, shrink a sled db
//! percolator --db target/bank bank                         # the bank-transfer demo
//! percolator --backend etcd oracle serve --listen 0.0.0.0:7070   # the timestamp oracle service
//! percolator --backend etcd --oracle h1:7070,h2:7070 webindex run  # a worker using it
//! ```
//!
//! The backend is a cargo feature (`fjall`, the default; `sled`; `mem`; `tikv`; `etcd`) and, when
//! several are compiled in, `--backend` (left out: the engine already in `--db`, else fjall);
//! `backend.rs` is the only module that names a backend. Everything below `main` is generic over
//! `RowStore`.

mod backend;
mod bank_cmd;
mod compact_cmd;
mod debug_cmd;
mod gc_cmd;
mod observers_cmd;
mod oracle_cmd;
mod output;
mod remote_cmd;
mod serve_cmd;
mod webindex_cmd;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Turns transparent huge pages off for this process (Linux), before the work allocates.
///
/// mimalloc asks for huge pages for its arenas, and the kernel zeroes a whole 2 MiB page the
/// first time any byte of it is touched, each time mimalloc gives memory back and takes it again.
/// On a 10 000-page index run that zeroing was 4% of the CPU samples (0.4% without huge pages);
/// two paired runs took about 10% less CPU without them, and peak RSS at load and in the run is
/// lower (by 40–70 MB at load at 50 000 pages; see README, "Benchmarks"). The flag is inherited
/// by child processes. A failure only leaves huge pages on, so it is ignored.
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
    /// Storage backend (those compiled in; see the crate's cargo features). Default: the engine
    /// whose files are already in `--db`, else fjall.
    #[arg(long, value_enum)]
    backend: Option<backend::Backend>,
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
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// The web-indexing pipeline.
    Webindex {
        #[command(subcommand)]
        command: webindex_cmd::WebindexCommand,
    },
    /// Raw cells of a table (every family or one), for debugging.
    Scan(debug_cmd::ScanArgs),
    /// Pending notifications, locks, registered workers and parked changes.
    Status,
    /// Registered observers, parked changes, and handing those back.
    Observers {
        #[command(subcommand)]
        command: observers_cmd::ObserversCommand,
    },
    /// Garbage-collects MVCC history below the safe point (one run).
    Gc(gc_cmd::GcArgs),
    /// Gives a sled database's free space back to the file system (offline: stop the workers).
    Compact(compact_cmd::CompactArgs),
    /// Concurrent bank transfers (cross-row transactions) with a conservation check.
    Bank(bank_cmd::BankArgs),
    /// The web index as a service: runs the observers and an HTTP API (ingest, search,
    /// status, stats, metrics) with a search page at `/`, until Ctrl-C.
    Serve(serve_cmd::ServeArgs),
    /// The timestamp oracle service.
    Oracle {
        #[command(subcommand)]
        command: oracle_cmd::OracleCommand,
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
    let mut cli = Cli::parse();
    match backend::resolve(cli.backend, &cli.db) {
        Ok(chosen) => cli.backend = Some(chosen),
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    }
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
    match runtime.block_on(backend::run(&cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

impl Cli {
    /// The backend to open: `--backend`, after [`backend::resolve`] filled it in.
    fn backend(&self) -> backend::Backend {
        self.backend.unwrap_or_default()
    }
}

impl Command {
    /// Whether the command only reads an existing database (and so must not create one at a
    /// mistyped path).
    fn reads_only(&self) -> bool {
        match self {
            Command::Webindex { command } => matches!(
                command,
                webindex_cmd::WebindexCommand::Stats | webindex_cmd::WebindexCommand::Query { .. }
            ),
            Command::Scan(_) | Command::Status => true,
            Command::Observers { command } => {
                matches!(command, observers_cmd::ObserversCommand::List)
            }
            _ => false,
        }
    }
}

/// Runs `cli`'s command on an opened store. `oracle` is the store cluster's own (PD's TSO), if
/// any; `--oracle` overrides it.
pub async fn dispatch<S: percolator_core::RowStore>(
    store: std::sync::Arc<S>,
    oracle: Option<std::sync::Arc<dyn percolator_core::TimestampOracle>>,
    cli: &Cli,
) -> Result<ExitCode, CliError> {
    let oracle = oracle_cmd::remote(&cli.oracle)?.or(oracle);
    match &cli.command {
        Command::Oracle { command } => oracle_cmd::run(store, command).await,
        Command::Webindex { command } => webindex_cmd::run(store, oracle, command, &cli.db).await,
        Command::Scan(args) => debug_cmd::scan(store, args).await,
        Command::Status => debug_cmd::status(store, oracle).await,
        Command::Gc(args) => gc_cmd::run(store, oracle, args).await,
        Command::Compact(_) => compact_cmd::not_applicable(&cli.backend().to_string(), &cli.db),
        Command::Observers { command } => observers_cmd::run(store, oracle, command).await,
        Command::Bank(args) => bank_cmd::run(store, oracle, args).await,
        Command::Serve(args) => {
            let db = cli.backend().has_db_dir().then_some(cli.db.as_path());
            serve_cmd::run(store, oracle, args, db).await
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
