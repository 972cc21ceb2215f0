//! `percolator-bench`: the benchmark driver (`cargo xtask bench` runs it in release mode).
//!
//! ```text
//! percolator-bench micro --backend sled --db target/bench/db [--quick] [--json FILE]
//! percolator-bench contention --backend mem|sled [--quick] [--json FILE]
//! percolator-bench tpce --backend mem|sled|sled-peer [--customers N] [--secs S] [--quick] [--json FILE]
//! percolator-bench figure10 --percolator target/release/percolator [--quick] [--json FILE]
//! ```

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand, ValueEnum};
use percolator_bench::micro::{self, MicroConfig};
use percolator_bench::{contention, tpce};

#[derive(Parser)]
#[command(about = "percolator-rs benchmarks")]
struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    tikv: TikvArgs,
    /// etcd client URLs (`--backend etcd`), comma-separated.
    #[arg(
        long,
        env = "PERCOLATOR_ETCD_ENDPOINTS",
        value_delimiter = ',',
        global = true
    )]
    endpoints: Vec<String>,
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
    /// The timestamp oracle service over loopback against an in-process oracle (mem store).
    #[cfg(feature = "mem")]
    OracleService {
        /// Concurrent requesters, comma separated.
        #[arg(long, value_delimiter = ',', default_value = "1,8,64,256")]
        requesters: Vec<usize>,
        /// Seconds per point and oracle.
        #[arg(long, default_value_t = 2.0)]
        seconds: f64,
        /// Write the report as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// The paper's Figure 10: worker, etcd-leader and oracle-leader kills during the web-index
    /// pipeline on a 3-member etcd cluster this starts; throughput over time and the checks.
    #[cfg(feature = "etcd")]
    Figure10 {
        /// The `percolator` executable the worker and oracle processes run.
        #[arg(long)]
        percolator: PathBuf,
        /// The short configuration (300 pages, 8 s between faults) instead of the full one
        /// (1 000 pages, 20 s).
        #[arg(long)]
        quick: bool,
        /// Pages the crawler offers per second (overrides the configuration).
        #[arg(long)]
        pages_per_sec: Option<f64>,
        /// Seconds between faults (overrides the configuration).
        #[arg(long)]
        phase_secs: Option<f64>,
        /// Write the report as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// Zipf-skewed (θ = 0.99) versus uniform keys: goodput and abort rate.
    Contention {
        /// Backend.
        #[arg(long, value_enum)]
        backend: Backend,
        /// Database directory (sled); emptied first.
        #[arg(long, default_value = "target/bench/contention-db")]
        db: PathBuf,
        /// Short measurements (a smoke run).
        #[arg(long)]
        quick: bool,
        /// Write the report as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// The TPC-E-style brokerage benchmark (tpsE, per-type latency, conflicts, invariants).
    Tpce {
        /// System under test.
        #[arg(long, value_enum)]
        backend: TpceSystem,
        /// Database directory (sled, fjall, sled-peer); emptied first.
        #[arg(long, default_value = "target/bench/tpce-db")]
        db: PathBuf,
        /// The smoke configuration (300 customers, 2 s) instead of the full one (2 000, 10 s).
        #[arg(long)]
        quick: bool,
        /// Customers to load (overrides the configuration).
        #[arg(long)]
        customers: Option<u64>,
        /// Measured seconds (overrides the configuration).
        #[arg(long)]
        secs: Option<f64>,
        /// Client tasks (overrides the configuration).
        #[arg(long)]
        clients: Option<usize>,
        /// Write the report as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
    },
}

/// Systems the TPC-E-style benchmark can drive.
#[derive(Clone, Copy, ValueEnum)]
enum TpceSystem {
    /// Percolator over the in-memory backend.
    #[cfg(feature = "mem")]
    Mem,
    /// Percolator over the sled backend.
    #[cfg(feature = "sled")]
    Sled,
    /// Percolator over the fjall backend.
    #[cfg(feature = "fjall")]
    Fjall,
    /// The peer baseline: sled's own transactions.
    SledPeer,
    /// Percolator over a TiKV cluster (`--pd`), with PD's TSO as the oracle.
    #[cfg(feature = "tikv")]
    Tikv,
    /// Percolator over an etcd cluster (`--endpoints`).
    #[cfg(feature = "etcd")]
    Etcd,
}

#[derive(Clone, Copy, ValueEnum)]
enum Backend {
    #[cfg(feature = "mem")]
    Mem,
    #[cfg(feature = "sled")]
    Sled,
    #[cfg(feature = "fjall")]
    Fjall,
    /// A TiKV cluster (`--pd`), with PD's TSO as the oracle.
    #[cfg(feature = "tikv")]
    Tikv,
    /// An etcd cluster (`--endpoints`).
    #[cfg(feature = "etcd")]
    Etcd,
}

/// Where a TiKV cluster is (used by `--backend tikv`).
#[derive(clap::Args, Clone, Default)]
struct TikvArgs {
    /// PD endpoints, comma-separated.
    #[arg(long, env = "PERCOLATOR_TIKV_PD", value_delimiter = ',', global = true)]
    pd: Vec<String>,
    /// Key prefix isolating this run's data in the cluster.
    #[arg(long, default_value = "bench", global = true)]
    namespace: String,
}

#[cfg(feature = "tikv")]
async fn open_tikv(
    args: &TikvArgs,
) -> Result<
    (
        Arc<percolator_backend_tikv::TikvStore<percolator_backend_tikv::TikvClient>>,
        Arc<dyn percolator_core::TimestampOracle>,
    ),
    BoxError,
> {
    use percolator_backend_tikv::{PdOracle, TikvConfig, TikvStore};
    if args.pd.is_empty() {
        return Err("--backend tikv needs --pd HOST:PORT (or PERCOLATOR_TIKV_PD)".into());
    }
    let namespace = format!("{}-{}", args.namespace, std::process::id());
    let store = TikvStore::connect(&TikvConfig::new(args.pd.clone()), namespace.as_bytes()).await?;
    let oracle: Arc<dyn percolator_core::TimestampOracle> =
        Arc::new(PdOracle::new(Arc::clone(store.api())));
    Ok((Arc::new(store), oracle))
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[cfg(feature = "etcd")]
async fn open_etcd(
    endpoints: &[String],
    namespace: &str,
) -> Result<Arc<percolator_backend_etcd::EtcdStore>, BoxError> {
    use percolator_backend_etcd::{EtcdConfig, EtcdStore};
    if endpoints.is_empty() {
        return Err(
            "--backend etcd needs --endpoints URL[,URL…] (or PERCOLATOR_ETCD_ENDPOINTS)".into(),
        );
    }
    let namespace = format!("{namespace}-{}", std::process::id());
    let store =
        EtcdStore::connect(&EtcdConfig::new(endpoints.to_vec()), namespace.as_bytes()).await?;
    Ok(Arc::new(store))
}

async fn micro_on<S: percolator_core::RowStore>(
    store: Arc<S>,
    oracle: Option<Arc<dyn percolator_core::TimestampOracle>>,
    quick: bool,
    json: Option<&PathBuf>,
) -> Result<(), BoxError> {
    let config = if quick {
        MicroConfig::quick()
    } else {
        MicroConfig::full()
    };
    let report = micro::run_with_oracle(store, oracle, &config).await?;
    print!("{}", report.table());
    write_json(json, &report)
}

fn write_json(path: Option<&PathBuf>, value: &impl serde::Serialize) -> Result<(), BoxError> {
    if let Some(path) = path {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(path, serde_json::to_vec_pretty(value)?)?;
    }
    Ok(())
}

async fn tpce(
    system: TpceSystem,
    db: &std::path::Path,
    config: &tpce::TpceConfig,
    tikv: &TikvArgs,
    endpoints: &[String],
) -> Result<tpce::TpceReport, BoxError> {
    let _ = (tikv, endpoints);
    let _ = std::fs::remove_dir_all(db);
    let report = match system {
        #[cfg(feature = "mem")]
        TpceSystem::Mem => {
            tpce::run_percolator(Arc::new(percolator_backend_mem::MemStore::new()), config).await?
        }
        #[cfg(feature = "sled")]
        TpceSystem::Sled => {
            let store = percolator_backend_sled::SledStore::open(db)?;
            tpce::run_percolator(Arc::new(store), config).await?
        }
        #[cfg(feature = "fjall")]
        TpceSystem::Fjall => {
            let store = percolator_backend_fjall::FjallStore::open(db)?;
            tpce::run_percolator(Arc::new(store), config).await?
        }
        TpceSystem::SledPeer => tpce::run_sled_peer(db, config).await?,
        #[cfg(feature = "tikv")]
        TpceSystem::Tikv => {
            let (store, oracle) = open_tikv(tikv).await?;
            tpce::run_percolator_with_oracle(store, Some(oracle), config).await?
        }
        #[cfg(feature = "etcd")]
        TpceSystem::Etcd => {
            let store = open_etcd(endpoints, &tikv.namespace).await?;
            tpce::run_percolator(store, config).await?
        }
    };
    let _ = std::fs::remove_dir_all(db);
    Ok(report)
}

async fn contention_on<S: percolator_core::RowStore>(
    store: Arc<S>,
    oracle: Option<Arc<dyn percolator_core::TimestampOracle>>,
    quick: bool,
    json: Option<&PathBuf>,
) -> Result<(), BoxError> {
    let config = if quick {
        contention::ContentionConfig::quick()
    } else {
        contention::ContentionConfig::full()
    };
    let report = contention::run(store, oracle, &config).await?;
    print!("{}", report.table());
    write_json(json, &report)
}

/// Evaluates `$body` with `$store` (an `Arc` of the chosen backend) and `$oracle` (PD's TSO for
/// TiKV, else `None`); a sled or fjall database directory is emptied before and after.
macro_rules! with_backend {
    ($backend:expr, $db:expr, $tikv:expr, $endpoints:expr, |$store:ident, $oracle:ident| $body:expr) => {{
        let _ = (&$db, &$tikv, &$endpoints);
        match $backend {
            #[cfg(feature = "mem")]
            Backend::Mem => {
                let $store = Arc::new(percolator_backend_mem::MemStore::new());
                let $oracle = None;
                $body
            }
            #[cfg(feature = "sled")]
            Backend::Sled => {
                let _ = std::fs::remove_dir_all(&$db);
                let $store = Arc::new(percolator_backend_sled::SledStore::open(&$db)?);
                let $oracle = None;
                let result = $body;
                let _ = std::fs::remove_dir_all(&$db);
                result
            }
            #[cfg(feature = "fjall")]
            Backend::Fjall => {
                let _ = std::fs::remove_dir_all(&$db);
                let $store = Arc::new(percolator_backend_fjall::FjallStore::open(&$db)?);
                let $oracle = None;
                let result = $body;
                let _ = std::fs::remove_dir_all(&$db);
                result
            }
            #[cfg(feature = "tikv")]
            Backend::Tikv => {
                let ($store, oracle) = open_tikv(&$tikv).await?;
                let $oracle = Some(oracle);
                $body
            }
            #[cfg(feature = "etcd")]
            Backend::Etcd => {
                let $store = open_etcd(&$endpoints, &$tikv.namespace).await?;
                let $oracle = None;
                $body
            }
        }
    }};
}

async fn run(cli: Cli) -> Result<(), BoxError> {
    match cli.command {
        #[cfg(feature = "mem")]
        Command::OracleService {
            requesters,
            seconds,
            json,
        } => {
            let report = percolator_bench::oracle_service::run(&requesters, seconds, |line| {
                eprintln!("{line}");
            })
            .await?;
            print!("{}", report.table());
            write_json(json.as_ref(), &report)
        }
        #[cfg(feature = "etcd")]
        Command::Figure10 {
            percolator,
            quick,
            pages_per_sec,
            phase_secs,
            json,
        } => {
            use percolator_bench::figure10::{self, Figure10Config};
            let mut config = if quick {
                Figure10Config::quick(percolator)
            } else {
                Figure10Config::full(percolator)
            };
            if let Some(rate) = pages_per_sec {
                config.loader.pages_per_sec = rate;
            }
            if let Some(secs) = phase_secs {
                config.phase = std::time::Duration::from_secs_f64(secs.max(1.0));
            }
            let report = figure10::run(&config, |line| eprintln!("figure10: {line}")).await?;
            print!("{}", report.table());
            write_json(json.as_ref(), &report)?;
            if !report.ok() {
                return Err("Figure 10 checks failed (see the table)".into());
            }
            Ok(())
        }
        Command::Contention {
            backend,
            db,
            quick,
            json,
        } => with_backend!(backend, db, cli.tikv, cli.endpoints, |store, oracle| {
            contention_on(store, oracle, quick, json.as_ref()).await
        }),
        Command::Tpce {
            backend,
            db,
            quick,
            customers,
            secs,
            clients,
            json,
        } => {
            let mut config = if quick {
                tpce::TpceConfig::quick()
            } else {
                tpce::TpceConfig::full()
            };
            if let Some(c) = customers {
                config.customers = c;
            }
            if let Some(s) = secs {
                config.duration = std::time::Duration::from_secs_f64(s.max(0.1));
            }
            if let Some(c) = clients {
                config.clients = c;
            }
            let report = tpce(backend, &db, &config, &cli.tikv, &cli.endpoints).await?;
            print!("{}", report.table());
            write_json(json.as_ref(), &report)?;
            if !report.invariants.ok() {
                return Err("TPC-E invariants violated".into());
            }
            Ok(())
        }
        Command::Micro {
            backend,
            db,
            quick,
            json,
        } => with_backend!(backend, db, cli.tikv, cli.endpoints, |store, oracle| {
            micro_on(store, oracle, quick, json.as_ref()).await
        }),
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
