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
//! - `cargo xtask bench [--backend NAME|all] [--quick] [--freshness [--docs N] [--hour-secs S]
//!   [--rates R]] [--figure10] [--scale [--docs N]] [--workers 1,2,3 --backend etcd]
//!   [--dev-build]`: the benchmarks; tables on
//!   stdout, JSON and SVG plots under `target/bench/`. `cargo xtask bench --report` writes
//!   `docs/benchmarks.md` and README's results table from that JSON.
//!
//! Backends come from `percolator-registry`'s catalogue: adding one needs no change here.

mod bench;
mod binaries;
mod ci;
mod cluster;
mod conformance;
mod plot;
mod runner;

use std::process::ExitCode;

use clap::{ArgGroup, Parser, Subcommand};

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
        /// `all`, a backend (every conformance target of its crate) or one target
        /// (`tikv-fake`).
        #[arg(long, default_value = "all", value_parser = clap::builder::PossibleValuesParser::new(conformance::choices()))]
        backend: String,
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
        /// `all` or one backend.
        #[arg(long, default_value = "all")]
        backend: String,
        /// Small sizes: a smoke run that ends in a couple of minutes.
        #[arg(long)]
        quick: bool,
        /// Only the freshness experiment (incremental pipeline vs batch, paper Figure 7).
        #[arg(long)]
        freshness: bool,
        /// Only the paper's Figure 10 (worker, etcd-leader and oracle kills; needs etcd).
        #[arg(long, conflicts_with = "freshness")]
        figure10: bool,
        /// Only the server under load: a steady crawl, many searchers and a CPU hog against one
        /// `percolator serve` (20 000 realistic pages, 64 searchers, 10 minutes; `--quick`:
        /// 300 pages, 8 searchers, 20 s).
        #[arg(long, conflicts_with_all = ["freshness", "figure10", "scale"])]
        serve_load: bool,
        /// Only worker scaling: the same crawl indexed by this many workers (comma separated,
        /// e.g. `1,2,3`), dividing the rows and, for comparison, each running all: worker
        /// processes on a 3-member etcd, runtimes sharing one store in one process on mem and
        /// fjall.
        #[arg(long, value_delimiter = ',', conflicts_with_all = ["freshness", "figure10", "scale", "serve_load"])]
        workers: Option<Vec<usize>>,
        /// Only relevance on the Rust toolchain's HTML docs: all of them indexed on fjall
        /// (`--quick`: the book and 49 std pages), every hand-judged query ranked as before and
        /// now, and paged through.
        #[arg(long, conflicts_with_all = ["freshness", "figure10", "scale", "serve_load", "workers"])]
        rust_docs: bool,
        /// Only the TPC-E-style benchmark on each backend (on etcd and TiKV also with single
        /// reads, the baseline of batched reads) and the sled peer.
        #[arg(long, conflicts_with_all = ["freshness", "figure10", "scale", "serve_load", "workers", "rust_docs"])]
        tpce: bool,
        /// Only the paper's Figure 9 in simulation: TPC-E over a simulated cluster on mem (rows
        /// hashed to servers, a round trip, a service time and queue per server), 1 → 64
        /// servers and 1 → 512 clients; where tpsE stops being linear and why.
        #[arg(long, conflicts_with_all = ["freshness", "figure10", "scale", "serve_load", "workers", "rust_docs", "tpce"])]
        figure9: bool,
        /// Only the paper's Figure 8 (raw operations against the same work as transactions, on
        /// each backend, as ratios within one run) and the oracle's throughput.
        #[arg(long, conflicts_with_all = ["freshness", "figure10", "scale", "serve_load", "workers", "rust_docs", "tpce", "figure9"])]
        micro: bool,
        /// Only the scale run: 50 000 realistic pages loaded, indexed and checked on each
        /// in-process backend (pages/s, notifications/s per quarter, peak RSS, disk ÷ HTML).
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
        /// Run nothing: write `docs/benchmarks.md` and README's results table from the JSON
        /// reports already in `target/bench/` (full runs of the dist profile only).
        #[arg(long, conflicts_with_all = ["quick", "freshness", "figure10", "scale", "serve_load", "workers", "rust_docs", "tpce", "figure9", "micro", "dev_build"])]
        report: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Cmd::Bench { report: true, .. } => bench::report::report().map(|()| None),
        Cmd::Bench {
            backend,
            quick,
            freshness,
            figure10,
            scale,
            serve_load,
            workers,
            rust_docs,
            tpce,
            figure9,
            micro,
            docs,
            hour_secs,
            rates,
            dev_build,
            pd,
            report: false,
        } => {
            let only = if rust_docs {
                bench::Only::RustDocs
            } else if tpce {
                bench::Only::Tpce
            } else if figure9 {
                bench::Only::Figure9
            } else if micro {
                bench::Only::Micro
            } else if serve_load {
                bench::Only::ServeLoad
            } else if let Some(counts) = workers {
                bench::Only::Workers(counts)
            } else if freshness {
                bench::Only::Freshness(bench::FreshnessSize {
                    docs,
                    hour_secs,
                    rates,
                })
            } else if figure10 {
                bench::Only::Figure10
            } else if scale {
                bench::Only::Scale { docs }
            } else {
                bench::Only::All
            };
            bench::bench(&backend, quick, only, dev_build, pd).map(|()| None)
        }
        Cmd::Cluster { command } => cluster::cluster(command).map(|()| None),
        Cmd::Conformance { backend, pd } => conformance::conformance(&backend, pd).map(Some),
        Cmd::Ci => ci::ci()
            .inspect(|c| {
                println!();
                println!(
                    "ci: {} passed, {} failed, {} skipped",
                    c.passed, c.failed, c.skipped
                );
            })
            .map(Some),
    };
    match result {
        Ok(None) => ExitCode::SUCCESS,
        Ok(Some(c)) if c.failed == 0 && c.passed > 0 => ExitCode::SUCCESS,
        Ok(Some(c)) if c.passed == 0 => {
            eprintln!("xtask: no test ran");
            ExitCode::FAILURE
        }
        Ok(Some(_)) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}
