//! `cargo xtask bench`: builds the benchmark executables once (the `dist` profile; see
//! [`crate::binaries`]), runs them, collects their JSON under `target/bench/`, renders SVG plots
//! and prints markdown tables; `--report` turns the JSON into `docs/benchmarks.md` and README's
//! results table ([`report`]).
//!
//! One module per benchmark, each with its run and its table (the same table the report shows):
//! [`micro`] (Figure 8 and oracle throughput), [`oracle_service`], [`tpce`] (with the peer
//! baseline on sled's own transactions), [`figure10`] (wherever etcd is installed),
//! [`contention`], [`soak`] (embedded backends), [`freshness`] (Figure 7), [`scale`]
//! (`--scale` alone), [`workers`] (`--workers 1,2,3 --backend etcd` alone) and [`figure9`]
//! (`--figure9` alone: Figure 9 in simulation, on mem). The backends come from `percolator-registry`'s catalogue.

pub mod contention;
pub mod figure10;
pub mod figure9;
pub mod freshness;
pub mod micro;
pub mod oracle_service;
pub mod report;
pub mod rust_docs;
pub mod scale;
pub mod serve_load;
pub mod soak;
pub mod tpce;
pub mod workers;

use std::path::{Path, PathBuf};
use std::process::Command;

use percolator_registry::catalogue::{self, Kind, Server};
use serde_json::Value;

use crate::binaries::{self, Binaries, Profile};
use crate::plot::{Chart, svg};

/// Where reports, plots and scratch databases go.
pub const OUT: &str = "target/bench";

/// Which benchmarks a run measures.
#[derive(Clone, PartialEq)]
pub enum Only {
    /// Everything but the scale run.
    All,
    /// The freshness experiment.
    Freshness(FreshnessSize),
    /// The paper's Figure 10.
    Figure10,
    /// The scale run, with this many pages (default by `quick`).
    Scale { docs: Option<usize> },
    /// The server under load.
    ServeLoad,
    /// Worker scaling with these worker counts.
    Workers(Vec<usize>),
    /// Relevance on the Rust docs.
    RustDocs,
    /// The TPC-E-style benchmark.
    Tpce,
    /// Figure 8 and the oracle's throughput.
    Micro,
    /// The paper's Figure 9 in simulation.
    Figure9,
}

/// The freshness experiment's size when asked for alone; `None` keeps the experiment's default.
#[derive(Clone, PartialEq, Default)]
pub struct FreshnessSize {
    /// Repository size.
    pub docs: Option<usize>,
    /// Real seconds per simulated hour.
    pub hour_secs: Option<f64>,
    /// Crawl rates, percent per simulated hour, comma separated.
    pub rates: Option<String>,
}

/// What every benchmark of a run shares.
pub struct Ctx<'a> {
    /// The executables.
    pub bin: &'a Binaries,
    /// Small sizes (a smoke run).
    pub quick: bool,
    /// Where the cluster backends are.
    pub remote: &'a Remote,
    /// How the run is made (commit, date, machine, profile), taken once the executables are
    /// built, so that edits made while it runs do not change what it records.
    pub run: report::RunInfo,
}

impl Ctx<'_> {
    /// The store spec for `backend` in a benchmark called `what`: a scratch directory under
    /// [`OUT`] for the embedded engines, the cluster's address for etcd and TiKV.
    pub fn store(&self, backend: &str, what: &str) -> String {
        let Some(info) = catalogue::backend(backend) else {
            return backend.to_owned();
        };
        match (info.kind, info.needs) {
            (Kind::Embedded, _) => format!("{backend}:{OUT}/{what}-db-{backend}"),
            (_, Server::TikvPd) => format!(
                "{backend}:{}",
                self.remote.pd.as_deref().unwrap_or_default()
            ),
            (_, Server::Etcd) => format!(
                "{backend}:{}",
                self.remote.etcd.as_deref().unwrap_or_default()
            ),
            _ => backend.to_owned(),
        }
    }

    /// Whether `backend` runs on a cluster (benchmarks take their small sizes there: a cluster
    /// sharing a 2-core machine with its clients needs minutes per step at the full ones).
    pub fn on_cluster(backend: &str) -> bool {
        catalogue::backend(backend).is_some_and(|b| b.kind == Kind::Cluster)
    }
}

/// Where the networked backends are: PD for TiKV, etcd client URLs.
#[derive(Default)]
pub struct Remote {
    /// PD endpoints.
    pub pd: Option<String>,
    /// etcd client URLs.
    pub etcd: Option<String>,
}

/// The backends `choice` names (`all`: every compiled one that can run here; etcd where it is
/// installed, TiKV with a PD address).
pub fn backends(choice: &str, pd: Option<&str>) -> Result<Vec<&'static str>, String> {
    if choice != "all" {
        return match catalogue::backend(choice) {
            Some(b) => Ok(vec![b.name]),
            None => Err(format!(
                "--backend {choice}: expected all or one of {}",
                catalogue::names()
            )),
        };
    }
    let mut all = Vec::new();
    for b in catalogue::BACKENDS {
        match b.needs {
            Server::None => all.push(b.name),
            Server::TikvPd if pd.is_some() => all.push(b.name),
            Server::Etcd => match percolator_etcd_cluster::skip_reason() {
                None => all.push(b.name),
                Some(reason) => println!("({} not measured: {reason})", b.name),
            },
            _ => {}
        }
    }
    Ok(all)
}
/// Builds the binaries and runs one benchmark that needs no cluster of this run's (it starts
/// its own, or none).
fn alone(
    profile: Profile,
    quick: bool,
    run: impl FnOnce(&Ctx<'_>) -> Result<(), String>,
) -> Result<(), String> {
    let bin = binaries::build(profile, false)?;
    let remote = Remote::default();
    run(&Ctx {
        run: report::RunInfo::now(bin.bench_path().as_os_str(), quick),
        bin: &bin,
        quick,
        remote: &remote,
    })
}

/// Runs the benchmarks.
pub fn bench(
    choice: &str,
    quick: bool,
    only: Only,
    dev_build: bool,
    pd: Option<String>,
) -> Result<(), String> {
    let pd = pd
        .or_else(|| std::env::var("PERCOLATOR_TIKV_PD").ok())
        .filter(|p| !p.trim().is_empty());
    if catalogue::backend(choice).is_some_and(|b| b.needs == Server::TikvPd) && pd.is_none() {
        return Err(format!(
            "--backend {choice} needs --pd HOST:PORT (or PERCOLATOR_TIKV_PD)"
        ));
    }
    std::fs::create_dir_all(OUT).map_err(|e| format!("{OUT}: {e}"))?;
    let profile = if dev_build {
        println!("(dev build: a smoke run; the figures below are not comparable to dist runs)");
        Profile::DevLikeTests
    } else {
        Profile::Dist
    };
    if only == Only::ServeLoad {
        return alone(profile, quick, serve_load::run);
    }
    if let Only::Workers(counts) = &only {
        // Worker processes need a cluster (etcd, which the benchmark starts itself); embedded
        // stores belong to one process, so their workers are runtimes in one process.
        let systems: Vec<&str> = backends(choice, None)?
            .into_iter()
            // sled 0.34 can deadlock under concurrent writers; TiKV needs a cluster we do not
            // start.
            .filter(|b| matches!(*b, "mem" | "fjall" | "etcd"))
            .collect();
        if systems.is_empty() {
            return Err(format!(
                "--workers runs on etcd (worker processes) or mem and fjall (runtimes in one \
                 process), not {choice}"
            ));
        }
        if systems.contains(&"etcd")
            && let Some(reason) = percolator_etcd_cluster::skip_reason()
        {
            return Err(format!("--workers on etcd needs etcd: {reason}"));
        }
        return alone(profile, quick, |ctx| workers::run(ctx, &systems, counts));
    }
    if only == Only::Figure10 {
        if let Some(reason) = percolator_etcd_cluster::skip_reason() {
            return Err(format!("Figure 10 needs etcd: {reason}"));
        }
        return alone(profile, quick, figure10::run);
    }
    if only == Only::RustDocs {
        return alone(profile, quick, rust_docs::run);
    }
    if only == Only::Figure9 {
        return alone(profile, quick, figure9::run);
    }
    let systems = backends(choice, pd.as_deref())?;
    if let Only::Scale { docs } = only {
        let docs = docs.unwrap_or(if quick { 1_000 } else { 50_000 });
        let local: Vec<&str> = systems
            .iter()
            .copied()
            .filter(|b| catalogue::backend(b).is_some_and(|b| b.kind != Kind::Cluster))
            .collect();
        if local.is_empty() {
            return Err("--scale runs on the in-process backends: mem, fjall, sled or all".into());
        }
        return alone(profile, quick, |ctx| scale::run(ctx, &local, docs));
    }
    // etcd: the cluster in PERCOLATOR_ETCD_ENDPOINTS, else 3 members on loopback for this run
    // (stopped when `_cluster` drops at the end).
    let needs = |server: Server| {
        systems
            .iter()
            .any(|b| catalogue::backend(b).is_some_and(|b| b.needs == server))
    };
    let (etcd, _cluster) = if needs(Server::Etcd) {
        match percolator_etcd_cluster::endpoints_from_env() {
            Some(endpoints) => (Some(endpoints.join(",")), None),
            None => {
                let started = crate::cluster::for_tests()?
                    .map_err(|reason| format!("an etcd backend: {reason}"))?;
                (Some(started.endpoints().join(",")), Some(started))
            }
        }
    } else {
        (None, None)
    };
    let remote = Remote { pd, etcd };
    let bin = binaries::build(profile, needs(Server::TikvPd))?;
    let ctx = Ctx {
        run: report::RunInfo::now(bin.bench_path().as_os_str(), quick),
        bin: &bin,
        quick,
        remote: &remote,
    };
    if only == Only::Tpce {
        return tpce::run(&ctx, &systems);
    }
    if only == Only::Micro {
        micro::run(&ctx, &systems)?;
        return oracle_service::run(&ctx);
    }
    if only == Only::All {
        micro::run(&ctx, &systems)?;
        oracle_service::run(&ctx)?;
        tpce::run(&ctx, &systems)?;
        // Figure 10 starts its own etcd cluster and processes: wherever etcd is installed.
        match percolator_etcd_cluster::skip_reason() {
            None => figure10::run(&ctx)?,
            Some(reason) => println!("\n(Figure 10 not measured: {reason})"),
        }
        contention::run(&ctx, &systems)?;
        soak::run(&ctx, &systems)?;
    }
    let size = match &only {
        Only::Freshness(size) => size.clone(),
        _ => FreshnessSize::default(),
    };
    freshness::run(&ctx, &systems, &size)
}

/// Runs a benchmark command, reads the JSON report it wrote, and records in it how it was run
/// (commit, date, machine, profile: [`report::RunInfo`]) for the report.
pub fn run_for_json(
    ctx: &Ctx<'_>,
    mut cmd: Command,
    json: &Path,
    what: &str,
) -> Result<Value, String> {
    let status = cmd.status().map_err(|e| format!("running {what}: {e}"))?;
    if !status.success() {
        return Err(format!("{what} failed ({status})"));
    }
    let mut value = read_json(json)?;
    value[report::RUN_KEY] = ctx.run.to_json();
    std::fs::write(
        json,
        serde_json::to_vec_pretty(&value).map_err(|e| format!("{}: {e}", json.display()))?,
    )
    .map_err(|e| format!("{}: {e}", json.display()))?;
    Ok(value)
}

/// A JSON file.
pub fn read_json(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// `target/bench/<name>`.
pub fn out(name: &str) -> PathBuf {
    PathBuf::from(OUT).join(name)
}

/// Writes `chart` as `target/bench/<name>`.
pub fn write_chart(name: &str, chart: &Chart<'_>) -> Result<(), String> {
    std::fs::write(out(name), svg(chart)).map_err(|e| format!("writing the plot {name}: {e}"))
}

/// A number of a JSON report, 0 when it is missing.
pub fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
}

/// `percolator-bench` with `args`.
pub fn bench_cmd(ctx: &Ctx<'_>, args: &[&str]) -> Command {
    let mut cmd = ctx.bin.bench();
    cmd.args(args);
    cmd
}
