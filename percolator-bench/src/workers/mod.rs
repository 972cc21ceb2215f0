//! Worker scaling: the same synthetic crawl indexed by 1, 2, 3 … workers, in each of three
//! [`Distribution`]s of the dirty rows: partitioned scanning (the default), the paper's shared
//! lock service, and every worker running every row it finds (`--unpartitioned`, the baseline).
//!
//! - [`processes`] (feature `etcd`): `percolator webindex run` processes on a 3-member etcd
//!   cluster with one oracle service, as a cluster deployment runs them.
//! - [`in_process`]: runtimes sharing one embedded store inside one process (mem, fjall), as
//!   several workers inside one `percolator serve` would.
//!
//! With processes, each run gets a fresh cluster: start it and the oracle, load the crawl with one process,
//! start the N workers at once and time them until the last exits (each exits when nothing is
//! pending in the store), then check the index (every invariant, no strong observer change
//! run twice, nothing pending or locked). Every worker writes its counters as JSON
//! (`--stats-json`); the report has them per worker and summed: conflicts per processed
//! notification, runs that found their change already acknowledged, and live workers' locks
//! rolled forward — the waste that more workers add when they collide.

pub mod in_process;
#[cfg(feature = "etcd")]
pub mod processes;

use std::path::PathBuf;
use std::time::Duration;

use percolator_observers::RuntimeStats;

use crate::webindex::checks::IndexChecks;
use serde::Serialize;

/// What to run.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct WorkersConfig {
    /// The `percolator` executable (worker processes only).
    pub percolator: PathBuf,
    /// Worker counts: one run each, and above one worker a run per distribution.
    pub counts: Vec<usize>,
    /// Pages in the synthetic crawl.
    pub docs: usize,
    /// Seed of the crawl.
    pub seed: u64,
    /// Scanner tasks per worker.
    pub scanners: usize,
    /// Observer runs in flight per worker.
    pub concurrency: usize,
    /// The distributions to run every count above one with, in order.
    pub distributions: Vec<Distribution>,
    /// Where the workers' JSON goes.
    pub scratch: PathBuf,
    /// SIGKILL the first worker this long after the workers start (and leave it dead): the
    /// others must take its rows over, or the run never drains.
    pub kill_one_after: Option<Duration>,
    /// Whether the worker processes prefetch (`webindex run --prefetch`; off by default, as
    /// `TxnConfig::prefetch`).
    pub prefetch: bool,
}

impl WorkersConfig {
    /// 2 000 pages, 1–3 workers, every distribution.
    pub fn new(percolator: PathBuf, counts: Vec<usize>, scratch: PathBuf) -> Self {
        Self {
            percolator,
            counts,
            docs: 2_000,
            seed: 7,
            scanners: 4,
            concurrency: 16,
            distributions: Distribution::ALL.to_vec(),
            scratch,
            kill_one_after: None,
            prefetch: false,
        }
    }
}

impl WorkersConfig {
    /// The runs to make, in order: `(workers, distribution)`; one worker runs once (alone,
    /// `Partitioned` being a group of one).
    pub fn runs(&self) -> Vec<(usize, Distribution)> {
        let mut runs = Vec::new();
        for &workers in &self.counts {
            if workers == 1 {
                runs.push((1, Distribution::Partitioned));
            } else {
                runs.extend(self.distributions.iter().map(|&d| (workers, d)));
            }
        }
        runs
    }
}

/// How a run's workers share the dirty rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Distribution {
    /// Each worker runs every dirty row it finds (`--unpartitioned`): the baseline.
    EveryWorkerAll,
    /// The paper's lock service: every worker scans everything and takes a shared advisory
    /// lock before it runs a row (`--unpartitioned --lock-service`).
    LockService,
    /// Partitioned scanning: each worker runs the rows it owns by rendezvous hashing over the
    /// live members of its scan group (the default).
    Partitioned,
}

impl Distribution {
    /// Every distribution, baseline first.
    pub const ALL: [Distribution; 3] = [
        Distribution::EveryWorkerAll,
        Distribution::LockService,
        Distribution::Partitioned,
    ];

    /// Its name on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Distribution::EveryWorkerAll => "every-worker-all",
            Distribution::LockService => "lock-service",
            Distribution::Partitioned => "partitioned",
        }
    }

    /// Whether the workers partition the rows.
    pub fn partitioned(self) -> bool {
        self == Distribution::Partitioned
    }
}

impl std::str::FromStr for Distribution {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Distribution::ALL
            .into_iter()
            .find(|d| d.name() == s)
            .ok_or_else(|| {
                format!("unknown distribution {s:?}: every-worker-all, lock-service or partitioned")
            })
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
    /// Cells read ahead by prefetching, and how many a later read used.
    pub prefetched_cells: u64,
    /// Prefetched cells a later read used.
    pub prefetch_hits: u64,
    /// Dirty rows it left to other members of its group.
    pub left_to_others: u64,
    /// Dirty rows it left because another worker held them in the lock service.
    pub held_elsewhere: u64,
    /// Rows it ran without a shared lock because the lock service did not answer.
    pub lock_service_unavailable: u64,
    /// Its teleports away from another process's scanner.
    pub cross_process_teleports: u64,
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
    /// How they shared the rows.
    pub distribution: Distribution,
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
    /// Cells read ahead by prefetching, and how many a later read used.
    pub prefetched_cells: u64,
    /// Prefetched cells a later read used.
    pub prefetch_hits: u64,
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
    /// Where the workers ran: `etcd` (processes on a 3-member cluster) or the embedded
    /// backend their runtimes shared in one process.
    pub backend: String,
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
    /// The report of `runs` made with `config`.
    pub fn new(backend: &str, config: &WorkersConfig, runs: Vec<WorkersRun>) -> Self {
        Self {
            backend: backend.to_owned(),
            docs: config.docs,
            scanners: config.scanners,
            concurrency: config.concurrency,
            runs,
        }
    }

    /// Whether every run's checks passed.
    pub fn ok(&self) -> bool {
        self.runs
            .iter()
            .all(|r| r.violations.is_empty() && r.doubled == 0 && r.pending == 0 && r.locks == 0)
    }

    /// The summary table (markdown).
    pub fn table(&self) -> String {
        let mut out = format!(
            "## Worker scaling: the web index, {}, {} pages, {} scanners and {} runs in flight \
             per worker\n\n| workers | rows | run time | pages/s | processed | \
             conflicts / processed | already acknowledged | live locks rolled forward | rows passed \
             over | observer p50 / p99 (worst worker) | checks |\n\
             |---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
            if self.backend == "etcd" {
                "worker processes on a 3-member etcd".to_owned()
            } else {
                format!("runtimes sharing one {} store in one process", self.backend)
            },
            self.docs,
            self.scanners,
            self.concurrency
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
                "| {} | {} | {:.1} s | {:.1} | {} | {:.3} | {} ({:.1}%) | {} | {} | {:.0} / {:.0} ms | {} |\n",
                r.workers,
                distribution(r),
                r.secs,
                r.pages_per_sec,
                r.processed,
                r.conflicts_per_processed,
                r.already_acknowledged,
                100.0 * r.already_acknowledged_share,
                r.live_roll_forwards,
                r.per_worker
                    .iter()
                    .map(|w| w.left_to_others + w.held_elsewhere)
                    .sum::<u64>(),
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
    match (run.workers, run.distribution) {
        (1, _) => "alone",
        (_, Distribution::Partitioned) => "partitioned",
        (_, Distribution::LockService) => "lock service",
        (_, Distribution::EveryWorkerAll) => "every worker all",
    }
}

/// `part / whole`, 0 when `whole` is.
pub(crate) fn ratio(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

impl WorkerLine {
    /// A worker's line from its counters.
    pub fn from_stats(stats: &RuntimeStats) -> Self {
        Self {
            worker: format!("{:016x}", stats.worker),
            processed: stats.notifications_processed,
            conflicts: stats.conflicts,
            already_acknowledged: stats.already_acknowledged,
            live_roll_forwards: stats.live_lock_roll_forwards,
            prefetched_cells: stats.prefetched_cells,
            prefetch_hits: stats.prefetch_hits,
            left_to_others: stats.left_to_others,
            held_elsewhere: stats.held_elsewhere,
            lock_service_unavailable: stats.lock_service_unavailable,
            cross_process_teleports: stats.cross_process_teleports,
            group_members: stats.group_members,
            group_changes: stats.group_changes,
            p50_ms: stats.latency_p50_us as f64 / 1e3,
            p99_ms: stats.latency_p99_us as f64 / 1e3,
        }
    }
}

impl WorkersRun {
    /// A run's totals from its workers' lines and the checks after it.
    pub(crate) fn from_lines(
        docs: usize,
        workers: usize,
        distribution: Distribution,
        secs: f64,
        per_worker: Vec<WorkerLine>,
        checks: IndexChecks,
    ) -> Self {
        let sum = |f: fn(&WorkerLine) -> u64| per_worker.iter().map(f).sum::<u64>();
        let processed = sum(|w| w.processed);
        let conflicts = sum(|w| w.conflicts);
        let already_acknowledged = sum(|w| w.already_acknowledged);
        let worst = |f: fn(&WorkerLine) -> f64| per_worker.iter().map(f).fold(0.0, f64::max);
        Self {
            workers,
            distribution,
            killed_at_secs: None,
            secs,
            pages_per_sec: docs as f64 / secs.max(1e-9),
            processed,
            conflicts,
            conflicts_per_processed: ratio(conflicts, processed),
            already_acknowledged,
            already_acknowledged_share: ratio(
                already_acknowledged,
                processed + already_acknowledged,
            ),
            live_roll_forwards: sum(|w| w.live_roll_forwards),
            prefetched_cells: sum(|w| w.prefetched_cells),
            prefetch_hits: sum(|w| w.prefetch_hits),
            p50_ms: worst(|w| w.p50_ms),
            p99_ms: worst(|w| w.p99_ms),
            per_worker,
            violations: checks.violations,
            doubled: checks.doubled.len(),
            pending: checks.pending,
            locks: checks.locks,
        }
    }
}
