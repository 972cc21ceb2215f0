//! Worker scaling: the same synthetic crawl indexed by 1, 2, 3 … `percolator webindex run`
//! processes on a 3-member etcd cluster with one oracle service, with the workers dividing
//! the dirty rows among themselves (partitioned scanning, the default) and, for comparison,
//! each running every row it finds (`--unpartitioned`).
//!
//! Each run gets a fresh cluster: start it and the oracle, load the crawl with one process,
//! start the N workers at once and time them until the last exits (each exits when nothing is
//! pending in the store), then check the index (every invariant, no strong observer change
//! run twice, nothing pending or locked). Every worker writes its counters as JSON
//! (`--stats-json`); the report has them per worker and summed: conflicts per processed
//! notification, runs that found their change already acknowledged, and live workers' locks
//! rolled forward — the waste that more workers add when they collide.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use percolator_core::{Client, TimestampOracle};
use percolator_etcd_cluster::{ClusterConfig, LocalCluster};
use percolator_oracle::{RemoteOracle, RemoteOracleConfig};
use percolator_registry::{OpenOptions, StoreSpec};
use serde::Serialize;
use serde_json::Value;

use crate::figure10::Figure10Error;
use crate::figure10::process::Process;

/// What to run.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct WorkersConfig {
    /// The `percolator` executable.
    pub percolator: PathBuf,
    /// Worker counts, one run each (two above one: partitioned and not).
    pub counts: Vec<usize>,
    /// Pages in the synthetic crawl.
    pub docs: usize,
    /// Seed of the crawl.
    pub seed: u64,
    /// Scanner tasks per worker.
    pub scanners: usize,
    /// Observer runs in flight per worker.
    pub concurrency: usize,
    /// Also run every count above one with `--unpartitioned`.
    pub compare_unpartitioned: bool,
    /// Where the workers' JSON goes.
    pub scratch: PathBuf,
    /// SIGKILL the first worker this long after the workers start (and leave it dead): the
    /// others must take its rows over, or the run never drains.
    pub kill_one_after: Option<Duration>,
}

impl WorkersConfig {
    /// 2 000 pages, 1–3 workers, both distributions.
    pub fn new(percolator: PathBuf, counts: Vec<usize>, scratch: PathBuf) -> Self {
        Self {
            percolator,
            counts,
            docs: 2_000,
            seed: 7,
            scanners: 4,
            concurrency: 16,
            compare_unpartitioned: true,
            scratch,
            kill_one_after: None,
        }
    }
}

/// One worker's counters at its exit.
#[derive(Debug, Clone, Serialize)]
pub struct WorkerLine {
    /// Its id.
    pub worker: String,
    /// Notifications it processed (observer transactions committed).
    pub processed: u64,
    /// Its re-runs after conflicts.
    pub conflicts: u64,
    /// Its runs that found their change already acknowledged.
    pub already_acknowledged: u64,
    /// Locks of other live workers it rolled forward.
    pub live_roll_forwards: u64,
    /// Dirty rows it left to other members of its group.
    pub left_to_others: u64,
    /// Its scan group's size at exit.
    pub group_members: u64,
    /// Times its scan group changed while it ran.
    pub group_changes: u64,
    /// Observer latency p50, ms.
    pub p50_ms: f64,
    /// Observer latency p99, ms.
    pub p99_ms: f64,
}

/// One run: N workers, one distribution.
#[derive(Debug, Clone, Serialize)]
pub struct WorkersRun {
    /// Worker processes.
    pub workers: usize,
    /// Whether they divided the rows.
    pub partitioned: bool,
    /// When the first worker was killed, seconds after the start (its counters are lost).
    pub killed_at_secs: Option<f64>,
    /// From starting the workers until the last one exited.
    pub secs: f64,
    /// Pages indexed per second end to end.
    pub pages_per_sec: f64,
    /// Notifications processed, all workers.
    pub processed: u64,
    /// Conflicts, all workers.
    pub conflicts: u64,
    /// Conflicts per processed notification.
    pub conflicts_per_processed: f64,
    /// Runs that found their change already acknowledged, all workers.
    pub already_acknowledged: u64,
    /// Their share of all runs.
    pub already_acknowledged_share: f64,
    /// Live workers' locks rolled forward, all workers.
    pub live_roll_forwards: u64,
    /// The worst worker's observer latency p50, ms.
    pub p50_ms: f64,
    /// The worst worker's observer latency p99, ms.
    pub p99_ms: f64,
    /// Each worker.
    pub per_worker: Vec<WorkerLine>,
    /// Invariant violations found by the check (empty: all hold).
    pub violations: Vec<String>,
    /// Strong observer changes run twice (invariant 9's rows).
    pub doubled: usize,
    /// Notifications pending after the run.
    pub pending: usize,
    /// Locks left after the run.
    pub locks: usize,
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct WorkersReport {
    /// Pages in the crawl.
    pub docs: usize,
    /// Scanners per worker.
    pub scanners: usize,
    /// Runs in flight per worker.
    pub concurrency: usize,
    /// Every run, in order.
    pub runs: Vec<WorkersRun>,
}

impl WorkersReport {
    /// Whether every run's checks passed.
    pub fn ok(&self) -> bool {
        self.runs
            .iter()
            .all(|r| r.violations.is_empty() && r.doubled == 0 && r.pending == 0 && r.locks == 0)
    }

    /// The summary table (markdown).
    pub fn table(&self) -> String {
        let mut out = format!(
            "## Worker scaling: the web index on a 3-member etcd, {} pages, {} scanners and {} \
             runs in flight per worker\n\n| workers | rows | run time | pages/s | processed | \
             conflicts / processed | already acknowledged | live locks rolled forward | observer \
             p50 / p99 (worst worker) | checks |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|---|\n",
            self.docs, self.scanners, self.concurrency
        );
        for r in &self.runs {
            let checks = if r.violations.is_empty() && r.doubled == 0 && r.pending == 0 {
                "all hold".to_owned()
            } else {
                format!(
                    "{} violations, {} doubled, {} pending",
                    r.violations.len(),
                    r.doubled,
                    r.pending
                )
            };
            out.push_str(&format!(
                "| {} | {} | {:.1} s | {:.1} | {} | {:.3} | {} ({:.1}%) | {} | {:.0} / {:.0} ms | {} |\n",
                r.workers,
                distribution(r),
                r.secs,
                r.pages_per_sec,
                r.processed,
                r.conflicts_per_processed,
                r.already_acknowledged,
                100.0 * r.already_acknowledged_share,
                r.live_roll_forwards,
                r.p50_ms,
                r.p99_ms,
                checks
            ));
        }
        out
    }
}

/// How a run shared the rows, for tables.
pub fn distribution(run: &WorkersRun) -> &'static str {
    match (run.workers, run.partitioned) {
        (1, _) => "alone",
        (_, true) => "partitioned",
        (_, false) => "every worker all",
    }
}

/// Runs every count (and distribution); `say` gets a line at every step.
pub async fn run(
    config: &WorkersConfig,
    say: impl Fn(&str),
) -> Result<WorkersReport, Figure10Error> {
    if let Some(reason) = percolator_etcd_cluster::skip_reason() {
        return Err(Figure10Error::EtcdUnavailable(reason.to_owned()));
    }
    std::fs::create_dir_all(&config.scratch).map_err(|e| Figure10Error::Process {
        name: "workers".into(),
        reason: format!("{}: {e}", config.scratch.display()),
    })?;
    let mut runs = Vec::new();
    for &workers in &config.counts {
        let modes: &[bool] = if workers > 1 && config.compare_unpartitioned {
            &[false, true]
        } else {
            &[true]
        };
        for &partitioned in modes {
            let run = one_run(config, workers, partitioned, &say).await?;
            say(&format!(
                "{} workers ({}): {:.1} s, {:.1} pages/s, {:.3} conflicts per processed, {} \
                 already acknowledged, {} live locks rolled forward",
                workers,
                distribution(&run),
                run.secs,
                run.pages_per_sec,
                run.conflicts_per_processed,
                run.already_acknowledged,
                run.live_roll_forwards
            ));
            runs.push(run);
        }
    }
    Ok(WorkersReport {
        docs: config.docs,
        scanners: config.scanners,
        concurrency: config.concurrency,
        runs,
    })
}

async fn one_run(
    config: &WorkersConfig,
    workers: usize,
    partitioned: bool,
    say: &impl Fn(&str),
) -> Result<WorkersRun, Figure10Error> {
    say(&format!(
        "{workers} workers, {}: starting a 3-member etcd cluster and an oracle",
        if partitioned {
            "partitioned"
        } else {
            "unpartitioned"
        }
    ));
    let cluster = blocking(|| LocalCluster::start(ClusterConfig::default().with_members(3)))
        .await?
        .map_err(|e| Figure10Error::Cluster(e.to_string()))?;
    let endpoints = cluster.endpoints();
    let namespace = format!("workers-{}-{workers}-{partitioned}", std::process::id());
    let store_args: Vec<String> = [
        "--backend",
        "etcd",
        "--endpoints",
        &endpoints.join(","),
        "--namespace",
        &namespace,
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let mut oracle = Process::spawn(
        "oracle",
        Process::percolator(
            &config.percolator,
            &store_args,
            &["oracle", "serve", "--listen", "127.0.0.1:0"],
        ),
    )?;
    let line = oracle
        .wait_for_line("oracle listening on", Duration::from_secs(30))
        .await?;
    let address = line.rsplit(' ').next().unwrap_or_default().to_owned();
    oracle
        .wait_for_line("oracle leading", Duration::from_secs(30))
        .await?;
    let mut worker_args = store_args.clone();
    worker_args.extend(["--oracle".to_owned(), address.clone()]);

    say(&format!("loading {} synthetic pages", config.docs));
    let (docs, seed) = (config.docs.to_string(), config.seed.to_string());
    let mut load = Process::spawn(
        "load",
        Process::percolator(
            &config.percolator,
            &worker_args,
            &["webindex", "load", "--synthetic", &docs, "--seed", &seed],
        ),
    )?;
    load.finish(Duration::from_secs(600)).await?;

    say(&format!(
        "running {workers} workers until nothing is pending"
    ));
    let (scanners, concurrency) = (config.scanners.to_string(), config.concurrency.to_string());
    let began = Instant::now();
    let mut processes = Vec::new();
    let mut files = Vec::new();
    for i in 0..workers {
        let file = config
            .scratch
            .join(format!("worker-{workers}-{partitioned}-{i}.json"));
        let _ = std::fs::remove_file(&file);
        let file_arg = file.display().to_string();
        let mut args = vec![
            "webindex",
            "run",
            "--scanners",
            &scanners,
            "--concurrency",
            &concurrency,
            "--stats-json",
            &file_arg,
        ];
        if !partitioned {
            args.push("--unpartitioned");
        }
        processes.push(Process::spawn(
            &format!("worker {}", i + 1),
            Process::percolator(&config.percolator, &worker_args, &args),
        )?);
        files.push(file);
    }
    let mut killed_at_secs = None;
    if let Some(after) = config.kill_one_after {
        tokio::time::sleep(after).await;
        if let Some(first) = processes.first_mut() {
            say("kill -9 worker 1; the others must take its rows over");
            first.kill9();
            killed_at_secs = Some(began.elapsed().as_secs_f64());
        }
    }
    let survivors = usize::from(killed_at_secs.is_some());
    for process in &mut processes[survivors..] {
        process.finish(Duration::from_secs(1800)).await?;
    }
    let secs = began.elapsed().as_secs_f64();
    let per_worker = files[survivors..]
        .iter()
        .map(|f| worker_line(f))
        .collect::<Result<Vec<_>, _>>()?;

    say("checking the index");
    let spec = StoreSpec::Etcd(endpoints);
    let opened =
        percolator_registry::open(&spec, &OpenOptions::default().with_namespace(&namespace))
            .await
            .map_err(|e| Figure10Error::Cluster(e.to_string()))?;
    let oracle_client: Arc<dyn TimestampOracle> =
        Arc::new(RemoteOracle::new(RemoteOracleConfig::new([address]))?);
    let client = Client::builder(Arc::new(opened.store))
        .oracle(oracle_client)
        .build()
        .await?;
    let checks = crate::figure10::index_checks(&client).await?;
    client.shutdown().await?;
    let _ = oracle.terminate();
    let _ = oracle.finish(Duration::from_secs(10)).await;
    let _ = blocking(move || cluster.stop()).await;

    let sum = |f: fn(&WorkerLine) -> u64| per_worker.iter().map(f).sum::<u64>();
    let processed = sum(|w| w.processed);
    let conflicts = sum(|w| w.conflicts);
    let already_acknowledged = sum(|w| w.already_acknowledged);
    let worst = |f: fn(&WorkerLine) -> f64| per_worker.iter().map(f).fold(0.0, f64::max);
    Ok(WorkersRun {
        workers,
        partitioned,
        killed_at_secs,
        secs,
        pages_per_sec: config.docs as f64 / secs.max(1e-9),
        processed,
        conflicts,
        conflicts_per_processed: ratio(conflicts, processed),
        already_acknowledged,
        already_acknowledged_share: ratio(already_acknowledged, processed + already_acknowledged),
        live_roll_forwards: sum(|w| w.live_roll_forwards),
        p50_ms: worst(|w| w.p50_ms),
        p99_ms: worst(|w| w.p99_ms),
        per_worker,
        violations: checks.violations,
        doubled: checks.doubled.len(),
        pending: checks.pending,
        locks: checks.locks,
    })
}

fn ratio(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// A worker's `--stats-json` file.
fn worker_line(path: &std::path::Path) -> Result<WorkerLine, Figure10Error> {
    let failed = |reason: String| Figure10Error::Process {
        name: "worker".into(),
        reason,
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| failed(format!("its stats {}: {e}", path.display())))?;
    let json: Value = serde_json::from_str(&text)
        .map_err(|e| failed(format!("its stats {}: {e}", path.display())))?;
    let o = &json["observers"];
    let n = |v: &Value| v.as_u64().unwrap_or(0);
    Ok(WorkerLine {
        worker: format!("{:016x}", n(&o["worker"])),
        processed: n(&o["notifications_processed"]),
        conflicts: n(&o["conflicts"]),
        already_acknowledged: n(&o["already_acknowledged"]),
        live_roll_forwards: n(&o["live_lock_roll_forwards"]),
        left_to_others: n(&o["left_to_others"]),
        group_members: n(&o["group_members"]),
        group_changes: n(&o["group_changes"]),
        p50_ms: n(&o["latency_p50_us"]) as f64 / 1e3,
        p99_ms: n(&o["latency_p99_us"]) as f64 / 1e3,
    })
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Figure10Error> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Figure10Error::Cluster(format!("blocking task: {e}")))
}
