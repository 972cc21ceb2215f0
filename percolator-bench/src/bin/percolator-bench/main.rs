//! `percolator-bench`: the benchmark driver (`cargo xtask bench` runs it in the `dist` profile).
//!
//! ```text
//! percolator-bench micro --store fjall:target/bench/db [--quick] [--json FILE]
//! percolator-bench contention --store mem [--quick] [--json FILE]
//! percolator-bench tpce --store sled:DIR | --sled-peer DIR | --fjall-peer DIR [--customers N] [--secs S] [--quick] [--json FILE]
//! percolator-bench figure9 [--servers 1,2,4] [--clients 1,8] [--clients-at-scale N] [--rtt-ms MS] [--service-ms MS] [--secs S] [--warmup-secs S] [--quick] [--json FILE]
//! percolator-bench oracle-service [--requesters 1,64] [--json FILE]
//! percolator-bench figure10 --percolator target/dist/percolator [--quick] [--json FILE]
//! percolator-bench workers --percolator target/dist/percolator | --store fjall:DIR [--workers 1,2,3] [--docs N] [--json FILE]
//! percolator-bench serve-load --percolator target/dist/percolator [--quick] [--json FILE]
//! percolator-bench freshness --store mem [--docs N] [--rates 1,5] [--quick] [--json FILE]
//! percolator-bench soak --store fjall:DIR [--docs N] [--generations G] [--no-gc] [--json FILE]
//! percolator-bench scale --store fjall:DIR [--docs N] [--json FILE]
//! ```
//!
//! Stores are named by spec (`percolator-registry`): `mem`, `fjall:PATH`, `sled:PATH`,
//! `etcd:URL,…`, `tikv:PD,…`. An embedded database directory is emptied before and after a run.
//!
//! Modules: `store.rs` opens stores, `experiments.rs` runs the web-index experiments, and this
//! file parses the command line and runs the other benchmarks.

mod experiments;
mod store;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use percolator_bench::micro::{self, MicroConfig};
use percolator_bench::{contention, tpce};
use percolator_registry::StoreSpec;

use crate::store::{BoxError, Opened, write_json};

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser)]
#[command(about = "percolator-rs benchmarks")]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Key prefix isolating this run's data in a cluster (etcd, TiKV); the process id is
    /// appended.
    #[arg(long, default_value = "bench", global = true)]
    namespace: String,
}

#[derive(Subcommand)]
enum Command {
    /// The paper's Figure 8 ratios and oracle throughput.
    Micro {
        /// The store (`mem`, `fjall:DIR`, `sled:DIR`, `etcd:URLS`, `tikv:PD`).
        #[arg(long)]
        store: StoreSpec,
        /// Short measurements (a smoke run).
        #[arg(long)]
        quick: bool,
        /// Write the report as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// The timestamp oracle service over loopback against an in-process oracle (mem store).
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
    /// Worker scaling: one crawl indexed by N workers, dividing the rows and, for comparison,
    /// each running all: worker processes on a 3-member etcd cluster this starts (fresh per
    /// run) with `--percolator`, or runtimes sharing an embedded store in this process with
    /// `--store mem|fjall:DIR`.
    Workers {
        /// The `percolator` executable the worker, loader and oracle processes run (etcd).
        #[arg(long, conflicts_with = "store", required_unless_present = "store")]
        percolator: Option<PathBuf>,
        /// An embedded store the workers share in this process.
        #[arg(long)]
        store: Option<StoreSpec>,
        /// Worker counts, comma separated.
        #[arg(long, value_delimiter = ',', default_value = "1,2,3")]
        workers: Vec<usize>,
        /// Pages in the synthetic crawl.
        #[arg(long, default_value_t = 2000)]
        docs: usize,
        /// How the workers share the rows, comma separated, one run each above one worker:
        /// `every-worker-all` (the baseline), `lock-service`, `partitioned`.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "every-worker-all,lock-service,partitioned"
        )]
        distributions: Vec<percolator_bench::workers::Distribution>,
        /// Worker processes run with `webindex run --prefetch` (off by default, as
        /// `TxnConfig::prefetch`).
        #[arg(long)]
        prefetch: bool,
        /// Write the report as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// Zipf-skewed (θ = 0.99) versus uniform keys: goodput and abort rate.
    Contention {
        /// The store.
        #[arg(long)]
        store: StoreSpec,
        /// Short measurements (a smoke run).
        #[arg(long)]
        quick: bool,
        /// Write the report as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// The TPC-E-style brokerage benchmark (tpsE, per-type latency, conflicts, invariants).
    Tpce {
        /// Percolator over this store.
        #[arg(
            long,
            required_unless_present_any = ["sled_peer", "fjall_peer", "etcd_peer"],
            conflicts_with_all = ["sled_peer", "etcd_peer"]
        )]
        store: Option<StoreSpec>,
        /// The peer baseline instead: sled's own transactions, in this directory.
        #[arg(long, value_name = "DIR", conflicts_with = "fjall_peer")]
        sled_peer: Option<PathBuf>,
        /// The peer baseline on fjall instead: fjall's own optimistic transactions, in this
        /// directory.
        #[arg(long, value_name = "DIR", conflicts_with_all = ["store", "etcd_peer"])]
        fjall_peer: Option<PathBuf>,
        /// The peer baseline on etcd instead: etcd's own mini-transactions, STM style, on the
        /// cluster at these client URLs (comma-separated), under a fresh namespace.
        #[arg(long, value_name = "URLS", conflicts_with = "sled_peer")]
        etcd_peer: Option<String>,
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
        /// Read the rows a frame reads together one after another, not in one batch (the
        /// baseline batched reads are measured against).
        #[arg(long, conflicts_with_all = ["sled_peer", "fjall_peer", "etcd_peer"])]
        single_reads: bool,
        /// Commit the secondary rows before `commit` returns, not after (the baseline returning
        /// at the commit point is measured against).
        #[arg(long, conflicts_with_all = ["sled_peer", "fjall_peer", "etcd_peer"])]
        inline_secondaries: bool,
        /// Write the report as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// The paper's Figure 9 in simulation: TPC-E over a simulated cluster (rows hashed to
    /// servers, a round trip, a service time and queue per server, the oracle as one more
    /// server) on mem, swept over servers and clients; where tpsE stops being linear and why.
    Figure9(Figure9Args),
    /// The freshness experiment (paper Figure 7 in miniature): incremental vs batch latency.
    Freshness(experiments::FreshnessArgs),
    /// Many recrawl generations with or without garbage collection: cells and bytes stored
    /// (and on disk) per generation. Use an empty store.
    Soak(experiments::SoakArgs),
    /// `percolator serve` under a steady crawl, many searchers and a CPU hog for the middle third
    /// of the run: searches/s, latency, 503s, freshness, RSS and disk over time; then the
    /// checks (no 5xx but 503, every acknowledged page stored, every invariant).
    ServeLoad {
        /// The `percolator` executable that serves.
        #[arg(long)]
        percolator: PathBuf,
        /// The database directory (emptied first, removed after).
        #[arg(long, default_value = "target/bench/serve-load-db")]
        db: PathBuf,
        /// The smoke size (300 demo pages, 8 searchers, 20 s) instead of the full one (20 000
        /// realistic pages, 64 searchers, 10 minutes).
        #[arg(long)]
        quick: bool,
        /// Pages the crawler loads (overrides the size).
        #[arg(long)]
        docs: Option<usize>,
        /// Concurrent searchers (overrides the size).
        #[arg(long)]
        searchers: Option<usize>,
        /// Seconds of load (overrides the size).
        #[arg(long)]
        secs: Option<f64>,
        /// No CPU hog.
        #[arg(long)]
        no_hog: bool,
        /// Write the report as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// Load a realistic synthetic crawl, index it until idle and check it, in one process:
    /// pages/s, notifications/s per quarter of the run, peak RSS per phase, bytes written and on
    /// disk.
    Scale(experiments::ScaleArgs),
    /// The relevance set on the Rust toolchain's own HTML docs: index them (CI's subset, or
    /// `--full`), rank every hand-judged query's first page as it is ranked now and as before,
    /// and page through each; top-1, top-3, MRR and latency per ranking.
    RustDocs(experiments::RustDocsArgs),
}

async fn run(cli: Cli) -> Result<(), BoxError> {
    let namespace = cli.namespace;
    match cli.command {
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
        Command::Workers {
            percolator,
            store,
            workers,
            docs,
            distributions,
            prefetch,
            json,
        } => {
            use percolator_bench::workers::{WorkersConfig, WorkersReport};
            let scratch =
                std::env::temp_dir().join(format!("percolator-workers-{}", std::process::id()));
            let mut config = WorkersConfig::new(
                percolator.clone().unwrap_or_default(),
                workers,
                scratch.clone(),
            );
            config.docs = docs;
            config.distributions = distributions;
            config.prefetch = prefetch;
            let report = match store {
                Some(spec) => {
                    let mut runs = Vec::new();
                    for (workers, shape) in config.runs() {
                        eprintln!("workers: {workers} runtimes on {spec}, {}", shape.name());
                        let opened = Opened::fresh(&spec, &namespace).await?;
                        let (shared, oracle) = (opened.store(), opened.oracle());
                        let run = percolator_bench::workers::in_process::run_once(
                            || experiments::builder(&shared, &oracle),
                            &config,
                            workers,
                            shape,
                        )
                        .await;
                        drop(shared);
                        opened.close();
                        runs.push(run?);
                    }
                    Ok(WorkersReport::new(spec.backend().name, &config, runs))
                }
                #[cfg(feature = "etcd")]
                None => {
                    percolator_bench::workers::processes::run(&config, |line| {
                        eprintln!("workers: {line}")
                    })
                    .await
                }
                #[cfg(not(feature = "etcd"))]
                None => return Err("worker processes need the etcd feature; give --store".into()),
            };
            let _ = std::fs::remove_dir_all(&scratch);
            let report = report?;
            print!("{}", report.table());
            write_json(json.as_ref(), &report)?;
            if !report.ok() {
                return Err("worker scaling checks failed (see the table)".into());
            }
            Ok(())
        }
        Command::Contention { store, quick, json } => {
            let opened = Opened::fresh(&store, &namespace).await?;
            let config = if quick {
                contention::ContentionConfig::quick()
            } else {
                contention::ContentionConfig::full()
            };
            let report = contention::run(opened.store(), opened.oracle(), &config).await;
            opened.close();
            let report = report?;
            print!("{}", report.table());
            write_json(json.as_ref(), &report)
        }
        Command::Micro { store, quick, json } => {
            let opened = Opened::fresh(&store, &namespace).await?;
            let config = if quick {
                MicroConfig::quick()
            } else {
                MicroConfig::full()
            };
            let report = micro::run_with_oracle(opened.store(), opened.oracle(), &config).await;
            opened.close();
            let report = report?;
            print!("{}", report.table());
            write_json(json.as_ref(), &report)
        }
        Command::Tpce {
            store,
            sled_peer,
            fjall_peer,
            etcd_peer,
            quick,
            customers,
            secs,
            clients,
            single_reads,
            inline_secondaries,
            json,
        } => {
            let mut config = if quick {
                tpce::TpceConfig::quick()
            } else {
                tpce::TpceConfig::full()
            };
            config.batch_reads = !single_reads;
            config.background_secondaries = !inline_secondaries;
            if let Some(c) = customers {
                config.customers = c;
            }
            if let Some(s) = secs {
                config.duration = std::time::Duration::from_secs_f64(s.max(0.1));
            }
            if let Some(c) = clients {
                config.clients = c;
            }
            if let Some(endpoints) = etcd_peer {
                let report = run_etcd_peer(&endpoints, &config).await?;
                print!("{}", report.table());
                write_json(json.as_ref(), &report)?;
                if !report.invariants.ok() {
                    return Err("TPC-E invariants violated on the etcd peer".into());
                }
                return Ok(());
            }
            let report = match (store, sled_peer, fjall_peer) {
                (_, Some(dir), _) => {
                    let _ = std::fs::remove_dir_all(&dir);
                    let report = tpce::run_sled_peer(&dir, &config).await;
                    let _ = std::fs::remove_dir_all(&dir);
                    report?
                }
                (_, None, Some(dir)) => {
                    let _ = std::fs::remove_dir_all(&dir);
                    let report = tpce::run_fjall_peer(&dir, &config).await;
                    let _ = std::fs::remove_dir_all(&dir);
                    report?
                }
                (Some(spec), None, None) => {
                    let opened = Opened::fresh(&spec, &namespace).await?;
                    let report =
                        tpce::run_percolator_with_oracle(opened.store(), opened.oracle(), &config)
                            .await;
                    opened.close();
                    report?
                }
                (None, None, None) => {
                    return Err(
                        "tpce needs --store SPEC, --sled-peer DIR or --fjall-peer DIR".into(),
                    );
                }
            };
            print!("{}", report.table());
            write_json(json.as_ref(), &report)?;
            if !report.invariants.ok() {
                return Err("TPC-E invariants violated".into());
            }
            Ok(())
        }
        Command::ServeLoad {
            percolator,
            db,
            quick,
            docs,
            searchers,
            secs,
            no_hog,
            json,
        } => {
            use percolator_bench::serve_load::{self, ServeLoadConfig};
            let mut config = if quick {
                ServeLoadConfig::quick(percolator, db)
            } else {
                ServeLoadConfig::full(percolator, db)
            };
            if let Some(docs) = docs {
                config.docs = docs;
            }
            if let Some(searchers) = searchers {
                config.searchers = searchers;
            }
            if let Some(secs) = secs {
                config.duration = std::time::Duration::from_secs_f64(secs.max(1.0));
            }
            config.hog = !no_hog;
            let report = serve_load::run(&config, |line| eprintln!("serve-load: {line}")).await?;
            print!("{}", report.table());
            write_json(json.as_ref(), &report)?;
            if !report.ok() {
                return Err("the serve load's checks failed (see the table)".into());
            }
            Ok(())
        }
        Command::Figure9(args) => figure9(&args).await,
        Command::Freshness(args) => experiments::freshness(&args, &namespace).await,
        Command::Soak(args) => experiments::soak(&args, &namespace).await,
        Command::Scale(args) => experiments::scale(&args, &namespace).await,
        Command::RustDocs(args) => experiments::rust_docs(&args, &namespace).await,
    }
}

/// `percolator-bench figure9`: every setting defaults to the full sweep (or the quick one).
#[derive(clap::Args)]
struct Figure9Args {
    /// The smoke sweep (1 → 4 servers at 32 clients, 100 customers, 1 s per point) instead of
    /// the full one (1 → 64 servers at 512 clients, 1 000 customers, 3 s per point).
    #[arg(long)]
    quick: bool,
    /// Server counts swept at `--clients-at-scale` clients, comma separated.
    #[arg(long, value_delimiter = ',')]
    servers: Option<Vec<usize>>,
    /// The fixed large client count of the servers sweep.
    #[arg(long)]
    clients_at_scale: Option<usize>,
    /// Client counts swept at each of `--client-sweep-servers`, comma separated.
    #[arg(long, value_delimiter = ',')]
    clients: Option<Vec<usize>>,
    /// Server counts the clients are swept at, comma separated.
    #[arg(long, value_delimiter = ',')]
    client_sweep_servers: Option<Vec<usize>>,
    /// Customers loaded per point.
    #[arg(long)]
    customers: Option<u64>,
    /// Measured seconds per point.
    #[arg(long)]
    secs: Option<f64>,
    /// Seconds of warm-up per point before the measured ones.
    #[arg(long)]
    warmup_secs: Option<f64>,
    /// Points on fewer servers than this warm up and measure longer, by this ÷ servers (1:
    /// never).
    #[arg(long)]
    full_speed_servers: Option<usize>,
    /// One Percolator worker (with its market-emulator observers) per this many clients.
    #[arg(long)]
    clients_per_worker: Option<usize>,
    /// Network round trip, ms.
    #[arg(long)]
    rtt_ms: Option<f64>,
    /// Service time of one row operation at a server, ms.
    #[arg(long)]
    service_ms: Option<f64>,
    /// Service time of one request at the timestamp oracle, ms.
    #[arg(long)]
    oracle_service_ms: Option<f64>,
    /// Keep mem's single-process guarantees, so that transactions may commit in one phase
    /// (default: two-phase, as over Bigtable).
    #[arg(long)]
    one_phase: bool,
    /// Write the report as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// A duration of `ms` milliseconds, refused if negative or not finite.
fn millis(ms: f64, what: &str) -> Result<std::time::Duration, BoxError> {
    std::time::Duration::try_from_secs_f64(ms / 1e3)
        .map_err(|e| format!("--{what} {ms}: {e}").into())
}

/// Runs the Figure 9 sweep: progress on stderr, the table and analysis on stdout, JSON.
async fn figure9(args: &Figure9Args) -> Result<(), BoxError> {
    use percolator_bench::figure9::{self, Figure9Config};
    let mut config = if args.quick {
        Figure9Config::quick()
    } else {
        Figure9Config::full()
    };
    if let Some(servers) = &args.servers {
        config.servers = servers.clone();
    }
    if let Some(clients) = args.clients_at_scale {
        config.clients_at_scale = clients;
    }
    if let Some(clients) = &args.clients {
        config.clients = clients.clone();
    }
    if let Some(servers) = &args.client_sweep_servers {
        config.client_sweep_servers = servers.clone();
    }
    if let Some(customers) = args.customers {
        config.customers = customers;
    }
    if let Some(secs) = args.secs {
        config.duration = std::time::Duration::try_from_secs_f64(secs.max(0.2))
            .map_err(|e| format!("--secs {secs}: {e}"))?;
    }
    if let Some(secs) = args.warmup_secs {
        config.warmup = std::time::Duration::try_from_secs_f64(secs)
            .map_err(|e| format!("--warmup-secs {secs}: {e}"))?;
    }
    if let Some(servers) = args.full_speed_servers {
        config.full_speed_servers = servers;
    }
    if let Some(clients) = args.clients_per_worker {
        config.clients_per_worker = clients;
    }
    if let Some(ms) = args.rtt_ms {
        config.sim = config.sim.with_rtt(millis(ms, "rtt-ms")?);
    }
    if let Some(ms) = args.service_ms {
        config.sim = config.sim.with_service(millis(ms, "service-ms")?);
    }
    if let Some(ms) = args.oracle_service_ms {
        config.sim = config
            .sim
            .with_oracle_service(millis(ms, "oracle-service-ms")?);
    }
    config.sim = config.sim.with_one_phase(args.one_phase);
    eprintln!(
        "figure9: {} points of {:.1} s measured after {:.1} s of warm-up (plus load and check each)",
        config.points().len(),
        config.duration.as_secs_f64(),
        config.warmup.as_secs_f64()
    );
    let report = figure9::run(&config, |line| eprintln!("figure9: {line}")).await?;
    print!("{}", report.table());
    write_json(args.json.as_ref(), &report)?;
    if report.points.iter().any(|p| !p.invariants_ok) {
        return Err("Figure 9: TPC-E invariants violated at some point (see the JSON)".into());
    }
    Ok(())
}

fn main() -> ExitCode {
    store::without_transparent_huge_pages();
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

/// The TPC-E peer baseline on etcd's own mini-transactions.
#[cfg(feature = "etcd")]
async fn run_etcd_peer(
    endpoints: &str,
    config: &tpce::TpceConfig,
) -> Result<tpce::TpceReport, BoxError> {
    Ok(tpce::run_etcd_peer(endpoints, config).await?)
}

/// Without the `etcd` feature there is no etcd client to run the peer on.
#[cfg(not(feature = "etcd"))]
async fn run_etcd_peer(
    endpoints: &str,
    _config: &tpce::TpceConfig,
) -> Result<tpce::TpceReport, BoxError> {
    Err(format!("the etcd peer ({endpoints}) needs percolator-bench's `etcd` feature").into())
}
