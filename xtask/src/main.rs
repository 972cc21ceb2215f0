//! `cargo xtask`: project automation (the rust-analyzer pattern; alias in `.cargo/config.toml`).
//!
//! - `cargo xtask conformance --backend <mem|sled|fjall|tikv-fake|tikv|etcd|all> [--pd HOST:PORT]`:
//!   runs the shared conformance suite from each backend's own test target and prints
//!   pass/fail/skip counts per backend. `tikv` needs a PD address (`--pd` or
//!   `PERCOLATOR_TIKV_PD`); without one it is reported as skipped, with the reason. `etcd` runs
//!   against a 3-member cluster started on loopback for the run (skipped, with the reason, where
//!   etcd is not installed).
//! - `cargo xtask cluster up|status|down`: a local etcd cluster under `target/etcd-cluster/`.
//! - `cargo xtask ci`: `cargo fmt --check`, `cargo clippy --workspace --all-targets
//!   --all-features -D warnings`, `cargo doc` with warnings (broken intra-doc links) denied, a
//!   check with the declared minimum Rust version (installed with rustup when missing), the
//!   conformance suite on every backend, every other test, doc tests; ends with one
//!   `ci: N passed, N failed, N skipped` line.
//! - `cargo xtask bench [--backend mem|sled|tikv|all] [--quick] [--freshness [--docs N] [--hour-secs S] [--rates R] | --figure10 | --scale [--docs N]] [--dev-build]`: the benchmarks;
//!   tables on stdout, JSON and SVG plots under `target/bench/`.

mod bench;
mod binaries;
mod ci;
mod cluster;
mod conformance;
mod plot;
mod runner;

use std::process::ExitCode;

use clap::{ArgGroup, Parser, Subcommand, ValueEnum};

#[derive(Parser)]
#[command(about = "percolator-rs project automation")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the conformance suite against one backend or all of them.
    Conformance {
        /// Which backend.
        #[arg(long, value_enum, default_value_t = Backend::All)]
        backend: Backend,
        /// PD endpoint(s) of a TiKV cluster for `tikv` (comma-separated); defaults to
        /// `PERCOLATOR_TIKV_PD`.
        #[arg(long)]
        pd: Option<String>,
    },
    /// Everything CI checks: formatting, lints, all tests.
    Ci,
    /// A local etcd cluster on loopback (`up`, `status`, `down`).
    Cluster {
        #[command(subcommand)]
        command: cluster::ClusterCmd,
    },
    /// Benchmarks: results as markdown tables, JSON and SVG plots under `target/bench/`.
    #[command(group(ArgGroup::new("sized").args(["scale", "freshness"]).multiple(true)))]
    Bench {
        /// Which backend(s).
        #[arg(long, value_enum, default_value_t = bench::BenchBackend::All)]
        backend: bench::BenchBackend,
        /// Small sizes: a smoke run that ends in a couple of minutes.
        #[arg(long)]
        quick: bool,
        /// Only the freshness experiment (incremental pipeline vs batch, paper Figure 7).
        #[arg(long)]
        freshness: bool,
        /// Only the paper's Figure 10 (worker, etcd-leader and oracle kills; needs etcd).
        #[arg(long, conflicts_with = "freshness")]
        figure10: bool,
        /// Only the scale run: 50 000 realistic pages loaded, indexed and checked on each
        /// embedded backend (pages/s, notifications/s per quarter, peak RSS, disk ÷ HTML).
        #[arg(long, conflicts_with_all = ["freshness", "figure10"])]
        scale: bool,
        /// Pages for `--scale` (default 50 000; 1 000 with `--quick`) or repository size for
        /// `--freshness` (default 2 000).
        #[arg(long, requires = "sized")]
        docs: Option<usize>,
        /// Real seconds per simulated hour for `--freshness` (default 2).
        #[arg(long, requires = "freshness")]
        hour_secs: Option<f64>,
        /// Crawl rates for `--freshness`, percent per simulated hour, comma separated.
        #[arg(long, requires = "freshness")]
        rates: Option<String>,
        /// Build the benchmarks in the dev profile (reuses the test build; a smoke run whose
        /// figures are not comparable — CI uses it).
        #[arg(long)]
        dev_build: bool,
        /// PD endpoint(s) for `--backend tikv`; defaults to `PERCOLATOR_TIKV_PD`.
        #[arg(long)]
        pd: Option<String>,
    },
}

#[derive(Copy, Clone, PartialEq, Eq, ValueEnum)]
pub(crate) enum Backend {
    Mem,
    Sled,
    /// The fjall LSM engine.
    Fjall,
    /// TiKV mapping over the in-process TiKV double.
    TikvFake,
    /// A real TiKV cluster (needs a PD address).
    Tikv,
    /// A 3-member etcd cluster that xtask starts on loopback (needs `etcd` installed).
    Etcd,
    All,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Cmd::Bench {
        backend,
        quick,
        freshness,
        figure10,
        scale,
        docs,
        hour_secs,
        rates,
        dev_build,
        pd,
    } = cli.command
    {
        let only = if freshness {
            Some(bench::Only::Freshness(bench::FreshnessSize {
                docs,
                hour_secs,
                rates,
            }))
        } else if figure10 {
            Some(bench::Only::Figure10)
        } else if scale {
            Some(bench::Only::Scale { docs })
        } else {
            None
        };
        return match bench::bench(backend, quick, only, dev_build, pd) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("xtask bench: {e}");
                ExitCode::FAILURE
            }
        };
    }
    if let Cmd::Cluster { command } = cli.command {
        return match cluster::cluster(command) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("xtask cluster: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let result = match cli.command {
        Cmd::Bench { .. } | Cmd::Cluster { .. } => unreachable!("handled above"),
        Cmd::Conformance { backend, pd } => conformance::conformance(backend, pd),
        Cmd::Ci => ci::ci().inspect(|c| {
            println!();
            println!(
                "ci: {} passed, {} failed, {} skipped",
                c.passed, c.failed, c.skipped
            );
        }),
    };
    match result {
        Ok(c) if c.failed == 0 && c.passed > 0 => ExitCode::SUCCESS,
        Ok(c) if c.passed == 0 => {
            eprintln!("xtask: no test ran");
            ExitCode::FAILURE
        }
        Ok(_) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}
