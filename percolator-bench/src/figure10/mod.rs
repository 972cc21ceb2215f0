//! The paper's Figure 10 on a real cluster: throughput over time while processes die.
//!
//! A 3-member etcd cluster on loopback, 2 `percolator oracle serve` instances and N
//! `percolator webindex run --forever` worker processes run the web-indexing pipeline while a
//! crawler in this process ([`loader`]) feeds it pages at a steady rate. One phase apart:
//! 1. a worker is killed with SIGKILL and started again;
//! 2. the etcd leader is killed with SIGKILL and restarted;
//! 3. the leading oracle is killed with SIGKILL (and started again as a standby).
//!
//! Then the crawler stops, the workers stop gracefully, one more worker drains what is pending,
//! and the run is checked: every web-index invariant holds, no strong observer handled a change
//! twice (the write records of the acknowledgement columns say so), nothing is pending or locked,
//! and every page load the crawler saw acknowledged is in the store ([`loader::check_acks`]).
//!
//! The report has the observer and crawler throughput per time bucket, the fault moments, and
//! for each fault how deep throughput dipped and how long it took to recover ([`timeline`]).
//! `percolator-bench figure10` prints it as a table and writes JSON; `cargo xtask bench` plots it
//! as `target/bench/faults.svg`; `percolator-cli`'s `figure10` test runs the quick configuration
//! and asserts the checks.

pub mod loader;
pub mod process;
mod run;
pub mod timeline;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Serialize;

use self::loader::{AckCheck, LoaderConfig, LoaderRecord};
use self::process::Process;
pub use self::run::run;
use self::run::{Fault, OracleSlot, WorkerSlot};
use self::timeline::{Dip, Samples};

/// Why the run could not be made or checked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Figure10Error {
    /// etcd is not installed (the caller may skip, saying so).
    #[error("etcd is not available: {0}")]
    EtcdUnavailable(String),
    /// The etcd cluster misbehaved.
    #[error("etcd cluster: {0}")]
    Cluster(String),
    /// A child process failed to start, print what was expected, or exit cleanly.
    #[error("{name}: {reason}")]
    Process {
        /// Which process.
        name: String,
        /// What went wrong, with its output.
        reason: String,
    },
    /// A transaction of the harness itself failed.
    #[error("harness transaction: {0}")]
    Txn(#[from] percolator_core::Error),
}

/// What to run.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Figure10Config {
    /// The `percolator` executable.
    pub percolator: PathBuf,
    /// Pages in the synthetic crawl.
    pub docs: usize,
    /// Seed of the synthetic crawl.
    pub seed: u64,
    /// Worker processes.
    pub workers: usize,
    /// Scanner tasks per worker.
    pub scanners: usize,
    /// Observer runs in flight per worker.
    pub worker_concurrency: usize,
    /// Time between faults (the first fault comes one phase in, the run ends one phase after
    /// the last).
    pub phase: Duration,
    /// Width of a throughput bucket.
    pub bucket: Duration,
    /// The crawler.
    pub loader: LoaderConfig,
    /// The oracle leader's lease: longer than an etcd election (which must not depose it: the
    /// leader cannot renew while the cluster has no leader), and what a standby waits out after
    /// the leading oracle is killed.
    pub oracle_lease: Duration,
    /// How long the killed worker stays down.
    pub worker_down_for: Duration,
    /// How long the killed etcd leader stays down.
    pub etcd_down_for: Duration,
    /// How long the killed oracle stays down.
    pub oracle_down_for: Duration,
}

impl Figure10Config {
    /// The benchmark: 1 000 pages, 20 s between faults.
    pub fn full(percolator: PathBuf) -> Self {
        Self {
            percolator,
            docs: 1_000,
            seed: 10,
            workers: 3,
            scanners: 2,
            worker_concurrency: 8,
            phase: Duration::from_secs(20),
            bucket: Duration::from_millis(500),
            loader: LoaderConfig {
                pages_per_sec: 30.0,
                concurrency: 8,
                recrawl_fraction: 0.25,
                give_up_after: Duration::from_secs(30),
            },
            oracle_lease: Duration::from_secs(3),
            worker_down_for: Duration::from_secs(2),
            etcd_down_for: Duration::from_secs(3),
            oracle_down_for: Duration::from_secs(2),
        }
    }

    /// The CI test and the quick benchmark: 300 pages, 8 s between faults, a gentler crawler
    /// (the test runs debug builds).
    pub fn quick(percolator: PathBuf) -> Self {
        let full = Self::full(percolator);
        Self {
            docs: 300,
            phase: Duration::from_secs(8),
            loader: LoaderConfig {
                pages_per_sec: 25.0,
                ..full.loader.clone()
            },
            ..full
        }
    }
}

/// One bucket of the timeline.
#[derive(Debug, Clone, Serialize)]
pub struct TimelinePoint {
    /// Start of the bucket, seconds since the workers started.
    pub t_secs: f64,
    /// Observer transactions committed per second, all workers together.
    pub observer_runs_per_sec: f64,
    /// Pages written per second by the crawler (acknowledged loads that changed a page).
    pub pages_written_per_sec: f64,
}

/// One fault and what it did.
#[derive(Debug, Clone, Serialize)]
pub struct FaultReport {
    /// Short name: `worker`, `etcd-leader`, `oracle-leader`.
    pub kind: String,
    /// What was done, e.g. `kill -9 worker 1`.
    pub action: String,
    /// When, seconds since the workers started.
    pub at_secs: f64,
    /// How long the killed process stayed down.
    pub down_secs: f64,
    /// Observer throughput around the fault.
    pub observers: Dip,
    /// Crawler throughput around the fault.
    pub crawler: Dip,
}

/// A change in an oracle instance's leadership, from its log.
#[derive(Debug, Clone, Serialize)]
pub struct OracleEvent {
    /// Seconds since the workers started (negative: before).
    pub at_secs: f64,
    /// The instance, e.g. `oracle A`.
    pub instance: String,
    /// `leading`, `stopped serving` (its lease ran out), `deposed` (another took the row) or
    /// `could not renew`.
    pub event: String,
}

/// The run and its checks.
#[derive(Debug, Clone, Serialize)]
pub struct Figure10Report {
    /// Pages in the crawl.
    pub docs: usize,
    /// Worker processes.
    pub workers: usize,
    /// Width of a bucket, seconds.
    pub bucket_secs: f64,
    /// Seconds from the workers' start to the crawler's stop.
    pub measured_secs: f64,
    /// Throughput per bucket.
    pub timeline: Vec<TimelinePoint>,
    /// The faults, in order.
    pub faults: Vec<FaultReport>,
    /// Observer transactions the workers reported (killed incarnations up to their last line).
    pub observer_runs: u64,
    /// Acknowledged page loads that wrote a page.
    pub pages_written: usize,
    /// Crawl generations started.
    pub generations: u32,
    /// Load attempts that failed during faults and were retried.
    pub load_retries: u64,
    /// Loads given up on (their outcome is unknown; the check allows either content).
    pub loads_given_up: u64,
    /// Other workers' locks the gracefully stopped workers rolled back and rolled forward.
    pub locks_rolled_back: u64,
    /// See `locks_rolled_back`.
    pub locks_rolled_forward: u64,
    /// Seconds the final worker took to drain what was pending.
    pub drain_secs: f64,
    /// Acknowledged loads checked against the store, and any lost.
    pub acks: AckCheck,
    /// Web-index invariant violations (empty: all hold).
    pub violations: Vec<String>,
    /// Strong observer runs, by any worker ever.
    pub strong_runs: u64,
    /// Changes those runs handled.
    pub strong_changes: u64,
    /// Changes a strong observer handled more than once.
    pub doubled: Vec<String>,
    /// Notifications still pending after the drain.
    pub pending: usize,
    /// Locks left after the drain.
    pub locks: usize,
    /// When each oracle instance took the lead, was deposed or failed to renew: whether an
    /// etcd election cost the leading oracle its lease.
    pub oracle_events: Vec<OracleEvent>,
}

impl Figure10Report {
    /// Every check passed: invariants hold, no acknowledged load lost, nothing doubled,
    /// nothing pending or locked.
    pub fn ok(&self) -> bool {
        self.violations.is_empty()
            && self.acks.lost.is_empty()
            && self.doubled.is_empty()
            && self.pending == 0
            && self.locks == 0
    }

    /// Markdown: the faults and the checks.
    pub fn table(&self) -> String {
        let mut out = format!(
            "{} worker processes, 2 oracle instances, 3 etcd members; {} pages, {} generations; {:.0} s measured, {:.1} s buckets\n\n",
            self.workers, self.docs, self.generations, self.measured_secs, self.bucket_secs
        );
        out.push_str("| fault | at | down for | observer baseline | lowest | back to 80% after | observer txns lost | crawler lowest | crawler back after |\n");
        out.push_str("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        let after = |d: &Dip| {
            d.recovered_after_secs
                .map_or("not within the phase".to_owned(), |s| format!("{s:.1} s"))
        };
        for f in &self.faults {
            out.push_str(&format!(
                "| {} | {:.1} s | {:.1} s | {:.0}/s | {:.0}% | {} | {:.0} | {:.0}% | {} |\n",
                f.action,
                f.at_secs,
                f.down_secs,
                f.observers.baseline,
                f.observers.lowest_share * 100.0,
                after(&f.observers),
                f.observers.shortfall,
                f.crawler.lowest_share * 100.0,
                after(&f.crawler),
            ));
        }
        let verdict = |ok: bool| if ok { "ok" } else { "FAILED" };
        out.push_str(&format!(
            "\n| check | result |\n|---|---|\n\
             | web-index invariants | {} ({} violations) |\n\
             | acknowledged loads in the store | {} ({} checked, {} lost) |\n\
             | strong observer runs | {} ({} runs for {} changes, {} doubled) |\n\
             | pending / locks after the drain | {} ({} / {}) |\n\
             | observer transactions | {} |\n\
             | pages written (retried loads, given up) | {} ({}, {}) |\n\
             | locks of others rolled back / forward | {} / {} |\n\
             | drain after the run | {:.1} s |\n",
            verdict(self.violations.is_empty()),
            self.violations.len(),
            verdict(self.acks.lost.is_empty()),
            self.acks.checked,
            self.acks.lost.len(),
            verdict(self.doubled.is_empty()),
            self.strong_runs,
            self.strong_changes,
            self.doubled.len(),
            verdict(self.pending == 0 && self.locks == 0),
            self.pending,
            self.locks,
            self.observer_runs,
            self.pages_written,
            self.load_retries,
            self.loads_given_up,
            self.locks_rolled_back,
            self.locks_rolled_forward,
            self.drain_secs,
        ));
        if !self.oracle_events.is_empty() {
            out.push_str("\n| oracle event | at |\n|---|---:|\n");
            for e in &self.oracle_events {
                out.push_str(&format!(
                    "| {}: {} | {:.1} s |\n",
                    e.instance, e.event, e.at_secs
                ));
            }
        }
        out
    }
}

/// The leadership changes in the oracles' logs, in order.
fn oracle_events(oracles: &[OracleSlot], origin: Instant) -> Vec<OracleEvent> {
    let mut events: Vec<OracleEvent> = oracles
        .iter()
        .flat_map(|slot| {
            slot.killed
                .iter()
                .chain(slot.running.iter())
                .flat_map(|process| process.lines())
                .filter_map(move |line| {
                    let event = if line.text.contains("deposed") {
                        "deposed"
                    } else if line.text == "oracle standing by" {
                        "stopped serving"
                    } else if line.text.contains("could not renew") {
                        "could not renew"
                    } else if line.text.contains("oracle leading")
                        || line.text.contains("oracle server: leading")
                    {
                        "leading"
                    } else {
                        return None;
                    };
                    let at_secs = match line.at.checked_duration_since(origin) {
                        Some(after) => after.as_secs_f64(),
                        None => -origin.duration_since(line.at).as_secs_f64(),
                    };
                    Some(OracleEvent {
                        at_secs,
                        instance: slot.name.clone(),
                        event: event.to_owned(),
                    })
                })
        })
        .collect();
    events.sort_by(|a, b| a.at_secs.total_cmp(&b.at_secs));
    events
}

/// How long the final worker may take to drain the backlog.
const DRAIN_LIMIT: Duration = Duration::from_secs(600);

type Dips = Vec<(Dip, Dip)>;

/// The per-bucket rates, the observer runs counted, and each fault's dips.
fn timeline_of(
    config: &Figure10Config,
    origin: Instant,
    measured: Duration,
    workers: &[WorkerSlot],
    record: &LoaderRecord,
    faults: &[Fault],
) -> (Vec<TimelinePoint>, u64, Dips) {
    let buckets = (measured.as_secs_f64() / config.bucket.as_secs_f64()).ceil() as usize;
    let incarnations: Vec<Samples> = workers
        .iter()
        .flat_map(|slot| slot.killed.iter().chain(slot.running.iter()))
        .map(progress_samples)
        .collect();
    let observer_runs = incarnations
        .iter()
        .filter_map(|s| s.last().map(|&(_, n)| n))
        .sum();
    let observers = timeline::rates_from_cumulative(&incarnations, origin, config.bucket, buckets);
    let crawler = timeline::rates_from_events(&record.written_at, origin, config.bucket, buckets);
    let points = (0..buckets)
        .map(|i| TimelinePoint {
            t_secs: i as f64 * config.bucket.as_secs_f64(),
            observer_runs_per_sec: observers[i],
            pages_written_per_sec: crawler[i],
        })
        .collect();
    let baseline = config.phase.as_secs_f64() / 2.0;
    let dips = faults
        .iter()
        .enumerate()
        .map(|(i, (_, _, at, _))| {
            let until = faults
                .get(i + 1)
                .map_or(measured.as_secs_f64(), |next| next.2);
            (
                timeline::dip(&observers, config.bucket, *at, baseline, until),
                timeline::dip(&crawler, config.bucket, *at, baseline, until),
            )
        })
        .collect();
    (points, observer_runs, dips)
}

/// A worker's `progress: processed=N` lines as cumulative samples.
fn progress_samples(process: &Process) -> Samples {
    process
        .lines()
        .iter()
        .filter_map(|line| {
            let rest = line.text.strip_prefix("progress: processed=")?;
            let n = rest.split_whitespace().next()?.parse().ok()?;
            Some((line.at, n))
        })
        .collect()
}

/// The counts of a worker's `worker locks: N rolled back, M rolled forward` line.
fn worker_locks(output: &str) -> (u64, u64) {
    let Some(line) = output.lines().find(|l| l.starts_with("worker locks:")) else {
        return (0, 0);
    };
    let numbers: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect();
    (
        numbers.first().copied().unwrap_or(0),
        numbers.get(1).copied().unwrap_or(0),
    )
}

fn worker_command(config: &Figure10Config, base: &[String]) -> std::process::Command {
    let (scanners, concurrency) = (
        config.scanners.to_string(),
        config.worker_concurrency.to_string(),
    );
    Process::percolator(
        &config.percolator,
        base,
        &[
            "webindex",
            "run",
            "--forever",
            "--progress-every-ms",
            "250",
            "--scanners",
            &scanners,
            "--concurrency",
            &concurrency,
        ],
    )
}

fn spawn_oracle(
    config: &Figure10Config,
    store_args: &[String],
    slot: &OracleSlot,
) -> Result<Process, Figure10Error> {
    let lease = config.oracle_lease.as_millis().to_string();
    Process::spawn(
        &slot.name,
        Process::percolator(
            &config.percolator,
            store_args,
            &[
                "oracle",
                "serve",
                "--listen",
                &slot.address,
                "--lease-ms",
                &lease,
            ],
        ),
    )
}

/// The index of the oracle whose latest state line says it leads.
async fn wait_for_leading_oracle(
    oracles: &[OracleSlot],
    limit: Duration,
) -> Result<usize, Figure10Error> {
    let deadline = Instant::now() + limit;
    loop {
        let leading = oracles.iter().position(|slot| {
            slot.running.as_ref().is_some_and(|p| {
                p.last_line_with(&["oracle leading", "oracle standing by"])
                    .is_some_and(|l| l.contains("leading"))
            })
        });
        if let Some(i) = leading {
            return Ok(i);
        }
        if Instant::now() >= deadline {
            return Err(Figure10Error::Process {
                name: "oracles".into(),
                reason: format!("none says it leads after {limit:?}"),
            });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn sleep_until(at: Instant) {
    tokio::time::sleep_until(at.into()).await;
}

/// Runs blocking cluster work off the async threads.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Figure10Error> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Figure10Error::Cluster(format!("blocking task: {e}")))
}
