//! `percolator-bench`: the benchmark driver (`cargo xtask bench` runs it in release mode).
//!
//! ```text
//! percolator-bench micro --backend sled --db target/bench/db [--quick] [--json FILE]
//! ```

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand, ValueEnum};
use percolator_bench::micro::{self, MicroConfig};

#[derive(Parser)]
#[command(about = "percolator-rs benchmarks")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The paper's Figure 8 ratios and oracle throughput.
    Micro {
        /// Backend.
        #[arg(long, value_enum)]
        backend: Backend,
        /// Database directory (sled); emptied first.
        #[arg(long, default_value = "target/bench/micro-db")]
        db: PathBuf,
        /// Short measurements (a smoke run).
        #[arg(long)]
        quick: bool,
        /// Write the report as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Backend {
    #[cfg(feature = "mem")]
    Mem,
    #[cfg(feature = "sled")]
    Sled,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

async fn micro_on<S: percolator_core::RowStore>(
    store: Arc<S>,
    quick: bool,
    json: Option<&PathBuf>,
) -> Result<(), BoxError> {
    let config = if quick {
        MicroConfig::quick()
    } else {
        MicroConfig::full()
    };
    let report = micro::run(store, &config).await?;
    print!("{}", report.table());
    if let Some(path) = json {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)?;
    }
    Ok(())
}

async fn run(cli: Cli) -> Result<(), BoxError> {
    match cli.command {
        Command::Micro {
            backend,
            db,
            quick,
            json,
        } => match backend {
            #[cfg(feature = "mem")]
            Backend::Mem => {
                let _ = &db;
                micro_on(
                    Arc::new(percolator_backend_mem::MemStore::new()),
                    quick,
                    json.as_ref(),
                )
                .await
            }
            #[cfg(feature = "sled")]
            Backend::Sled => {
                let _ = std::fs::remove_dir_all(&db);
                let store = percolator_backend_sled::SledStore::open(&db)?;
                let result = micro_on(Arc::new(store), quick, json.as_ref()).await;
                let _ = std::fs::remove_dir_all(&db);
                result
            }
        },
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
