//! The scale run: a realistic synthetic crawl loaded and indexed end to end in one process,
//! measuring what grows with size — throughput as the backlog drains (per quarter of the run),
//! peak memory per phase, bytes written, and bytes on disk per byte of HTML.
//!
//! Phases: **load** streams the crawl into `documents` (the pipeline is not running, so the
//! whole crawl becomes a backlog of notifications, as with `webindex load` before `run`);
//! **run** starts the observers and waits until nothing is pending, sampling how many
//! notifications have been processed; **query** times a query set drawn from the index
//! ([`super::latency`]) on the idle store, before the full scans that follow can warm
//! or evict its caches; **check** verifies every invariant of the index. Peak
//! resident memory is measured per phase (Linux: `VmHWM`, reset between phases through
//! `/proc/self/clear_refs`), bytes written from `/proc/self/io`.

use std::time::{Duration, Instant};

use percolator_core::{ClientBuilder, RowStore};
use percolator_observers::{ObserverRuns, Runtime, RuntimeConfig, RuntimeError};
use serde::Serialize;

use super::latency::{QueryLatency, measure, query_set};
use super::soak::{StoredCells, stored_cells};
use percolator_webindex::check::{IndexSummary, check};
use percolator_webindex::load::{LoadError, load_pages};
use percolator_webindex::pipeline::{observed_columns, observers};
use percolator_webindex::search::RERANK_POOL;
use percolator_webindex::synthetic::{Shape, SyntheticCrawl};

/// Parameters of a scale run.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ScaleConfig {
    /// Pages in the synthetic crawl.
    pub docs: usize,
    /// Their shape.
    pub shape: Shape,
    /// Seed of the crawl.
    pub seed: u64,
    /// Loader transactions in flight.
    pub load_concurrency: usize,
    /// The pipeline's runtime.
    pub runtime: RuntimeConfig,
    /// How often the run's progress is sampled.
    pub sample_every: Duration,
    /// Longest wait for the pipeline to go idle.
    pub timeout: Duration,
}

impl Default for ScaleConfig {
    fn default() -> Self {
        Self {
            docs: 50_000,
            shape: Shape::Realistic,
            seed: 18,
            load_concurrency: 8,
            runtime: RuntimeConfig::default()
                .with_stages(percolator_webindex::pipeline::SCAN_STAGES),
            sample_every: Duration::from_millis(200),
            timeout: Duration::from_secs(6 * 3600),
        }
    }
}

/// Notifications processed by `seconds` into the run.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ScaleSample {
    /// Seconds since the run started.
    pub seconds: f64,
    /// Observer transactions committed so far.
    pub processed: u64,
    /// Per observer, runs and their time so far.
    pub observers: Vec<ObserverRuns>,
}

/// One observer's runs per quarter of the run, and their mean time: whether a kind of work
/// gets dearer as the run goes on (the overall rate also moves with the mix of observers).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ObserverQuarters {
    /// The observer.
    pub name: String,
    /// Committed runs in each quarter.
    pub runs: [u64; 4],
    /// Their mean time, begin to commit, in milliseconds (0 without runs).
    pub mean_ms: [f64; 4],
    /// Runs that hit a conflict and were re-run, over the whole run.
    pub conflicts: u64,
}

/// What a scale run measured.
#[derive(Debug, Clone, Serialize)]
pub struct ScaleReport {
    /// Backend name.
    pub backend: String,
    /// Pages in the crawl.
    pub docs: usize,
    /// `demo` or `realistic`.
    pub shape: String,
    /// Bytes of HTML loaded.
    pub html_bytes: u64,
    /// Load phase: seconds and pages per second.
    pub load_seconds: f64,
    /// Pages loaded per second.
    pub load_pages_per_sec: f64,
    /// Run phase: seconds until idle.
    pub run_seconds: f64,
    /// Pages indexed per second of the run.
    pub run_pages_per_sec: f64,
    /// Observer transactions committed in the run.
    pub notifications_processed: u64,
    /// Commits in one step (no locks), and one-step attempts that fell back to two phases.
    pub one_phase: [u64; 2],
    /// Reads of another transaction's status in the run (resolving locks, clearing
    /// notifications whose writer the runtime's client did not know committed).
    pub status_reads: u64,
    /// Notifications processed per second in each quarter of the run.
    pub quarters: [f64; 4],
    /// The last quarter's rate over the first's (1.0: flat).
    pub last_over_first: f64,
    /// Per observer, runs and mean run time per quarter.
    pub observer_quarters: Vec<ObserverQuarters>,
    /// Progress samples of the run.
    pub samples: Vec<ScaleSample>,
    /// Peak resident bytes per phase (load, run, check), where the OS reports them.
    pub peak_rss_bytes: [Option<u64>; 3],
    /// Bytes the process wrote to storage (load and run), where the OS reports them.
    pub written_bytes: Option<u64>,
    /// CPU seconds the process spent (user and system, every thread) in the load (the pages'
    /// rendering included) and in the run, where the OS reports them: with the wall times, how
    /// busy the cores were, and a figure less noisy than wall time on a shared machine.
    pub cpu_seconds: [Option<f64>; 2],
    /// Wall seconds of the full check (every invariant, the strong-run audit included).
    pub check_seconds: f64,
    /// CPU seconds of the check, where the OS reports them.
    pub check_cpu_seconds: Option<f64>,
    /// Bytes on disk after the run, where the store has a directory.
    pub disk_bytes: Option<u64>,
    /// `disk_bytes` per byte of HTML.
    pub disk_per_html: Option<f64>,
    /// Cells and their key and value bytes per table and family (every version): what the
    /// store holds, against which `disk_bytes` shows the engine's own amplification.
    pub stored: StoredCells,
    /// What the index holds.
    pub summary: IndexSummary,
    /// Invariant violations found by the check (empty: all hold).
    pub violations: Vec<String>,
    /// Search latency over a query set drawn from the index.
    pub query_latency: QueryLatency,
    /// The same queries re-ranking only the best 100 by text (the pool a first page once had):
    /// the baseline of the fixed pool's cost.
    pub query_latency_pool_100: QueryLatency,
}

/// Where a scale run is, for progress displays.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum ScaleProgress {
    /// Pages loaded so far.
    Loaded(u64),
    /// Seconds into the run, and observer transactions committed so far.
    Running(f64, u64),
    /// The run went idle: seconds it took, observer transactions committed.
    Ran(f64, u64),
    /// Timing queries.
    Querying,
    /// Queries timed: how many, p50 and p99 in milliseconds.
    Queried(usize, f64, f64),
    /// The check started.
    Checking,
}

/// `VmHWM` of this process, in bytes (Linux).
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Resets [`peak_rss_bytes`] to the current resident size (Linux ≥ 4.0; elsewhere a no-op).
pub fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// CPU seconds this process has spent, user and system, in all its threads (`utime` and `stime`
/// of `/proc/self/stat`, which Linux counts in USER_HZ: 100 a second).
pub fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count from after it.
    let fields: Vec<&str> = stat
        .get(stat.rfind(')')? + 1..)?
        .split_whitespace()
        .collect();
    let ticks = |i: usize| fields.get(i)?.parse::<u64>().ok();
    // Fields 14 and 15 of the line; field 3 is the first after the name.
    Some((ticks(11)? + ticks(12)?) as f64 / 100.0)
}

/// Bytes this process caused to be written to storage (`write_bytes` of `/proc/self/io`).
pub fn written_bytes() -> Option<u64> {
    let io = std::fs::read_to_string("/proc/self/io").ok()?;
    let line = io.lines().find(|l| l.starts_with("write_bytes:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Notifications per second in each quarter of a run of `total` seconds, from cumulative
/// samples (linearly interpolated between them).
pub fn quarter_rates(samples: &[ScaleSample], total: f64) -> [f64; 4] {
    let at = |t: f64| -> f64 {
        let (mut seconds, mut processed) = (0.0, 0u64);
        for s in samples {
            if s.seconds >= t {
                let span = s.seconds - seconds;
                let share = if span > 0.0 {
                    (t - seconds) / span
                } else {
                    1.0
                };
                return processed as f64 + share * (s.processed as f64 - processed as f64);
            }
            (seconds, processed) = (s.seconds, s.processed);
        }
        processed as f64
    };
    let quarter = total / 4.0;
    let mut rates = [0.0; 4];
    if quarter > 0.0 {
        for (q, rate) in rates.iter_mut().enumerate() {
            let (from, to) = (q as f64 * quarter, (q + 1) as f64 * quarter);
            *rate = (at(to) - at(from)) / quarter;
        }
    }
    rates
}

/// Per observer, runs and mean run time in each quarter of a run of `total` seconds (counts
/// taken at the first sample at or after each quarter's end).
pub fn observer_quarters(samples: &[ScaleSample], total: f64) -> Vec<ObserverQuarters> {
    let at = |t: f64| -> Vec<ObserverRuns> {
        samples
            .iter()
            .find(|s| s.seconds >= t)
            .or(samples.last())
            .map(|s| s.observers.clone())
            .unwrap_or_default()
    };
    let names: Vec<String> = samples
        .last()
        .map(|s| s.observers.iter().map(|o| o.name.clone()).collect())
        .unwrap_or_default();
    let bounds: Vec<Vec<ObserverRuns>> = (1..=4).map(|q| at(total * q as f64 / 4.0)).collect();
    names
        .into_iter()
        .map(|name| {
            let mut out = ObserverQuarters {
                name: name.clone(),
                runs: [0; 4],
                mean_ms: [0.0; 4],
                conflicts: bounds
                    .last()
                    .and_then(|b| b.iter().find(|o| o.name == name))
                    .map_or(0, |o| o.conflicts),
            };
            let (mut runs_before, mut micros_before) = (0, 0);
            for (q, bound) in bounds.iter().enumerate() {
                let (runs, micros) = bound
                    .iter()
                    .find(|o| o.name == name)
                    .map_or((runs_before, micros_before), |o| (o.runs, o.busy_micros));
                let (dr, dm) = (
                    runs.saturating_sub(runs_before),
                    micros.saturating_sub(micros_before),
                );
                out.runs[q] = dr;
                out.mean_ms[q] = if dr > 0 {
                    dm as f64 / dr as f64 / 1e3
                } else {
                    0.0
                };
                (runs_before, micros_before) = (runs, micros);
            }
            out
        })
        .collect()
}

/// Documents the query phase draws its queries from (four each).
const QUERY_DOCS: usize = 100;

/// Runs the scale experiment on an empty store. `builder` makes the clients (the loader's and
/// the runtime's); `disk_bytes` measures the store's directory (or gives `None`).
pub async fn run<S: RowStore>(
    builder: impl Fn() -> ClientBuilder<S>,
    config: &ScaleConfig,
    disk_bytes: impl Fn() -> Option<u64>,
    mut progress: impl FnMut(ScaleProgress),
) -> std::result::Result<ScaleReport, RuntimeError> {
    let crawl = SyntheticCrawl::new(config.docs, config.seed).with_shape(config.shape);
    let written_before = written_bytes();
    let cpu_before_load = cpu_seconds();
    // Load.
    reset_peak_rss();
    let loader = builder().observe_all(&observed_columns()).build().await?;
    let html_bytes = std::sync::atomic::AtomicU64::new(0);
    let loaded = std::sync::atomic::AtomicU64::new(0);
    // Pages are rendered on two threads ahead of the loader, as files would be read ahead.
    let pages = crawl
        .initial_prefetched(percolator_webindex::synthetic::RENDER_THREADS)
        .map(|page| {
            html_bytes.fetch_add(page.html.len() as u64, std::sync::atomic::Ordering::Relaxed);
            Ok::<_, std::convert::Infallible>(page)
        });
    let report_loaded = std::cell::RefCell::new(&mut progress);
    let load = load_pages(&loader, pages, config.load_concurrency, |_, _| {
        let n = loaded.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        if n.is_multiple_of(500)
            && let Ok(mut progress) = report_loaded.try_borrow_mut()
        {
            progress(ScaleProgress::Loaded(n));
        }
    })
    .await
    .map_err(|e| match e {
        LoadError::Txn(e) => RuntimeError::Txn(e),
        other => RuntimeError::Txn(percolator_core::Error::Application(other.to_string())),
    })?;
    loader.shutdown().await?;
    let load_peak = peak_rss_bytes();
    let cpu_before_run = cpu_seconds();
    // Run.
    reset_peak_rss();
    let runtime = Runtime::start(builder(), observers(None), config.runtime.clone()).await?;
    let began = Instant::now();
    let mut samples = Vec::new();
    {
        let idle = runtime.wait_idle(config.timeout);
        tokio::pin!(idle);
        let mut ticker = tokio::time::interval(config.sample_every);
        // A late tick (a busy worker thread) waits a whole period again: no bursts of samples.
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker.tick().await; // the first tick is immediate
        loop {
            tokio::select! {
                done = &mut idle => { done?; break; }
                _ = ticker.tick() => {
                    let sample = ScaleSample {
                        seconds: began.elapsed().as_secs_f64(),
                        processed: runtime.stats().notifications_processed,
                        observers: runtime.observer_runs(),
                    };
                    progress(ScaleProgress::Running(sample.seconds, sample.processed));
                    samples.push(sample);
                }
            }
        }
    }
    let run_seconds = began.elapsed().as_secs_f64();
    let cpu_after_run = cpu_seconds();
    let processed = runtime.stats().notifications_processed;
    let txn = runtime.client().metrics();
    samples.push(ScaleSample {
        seconds: run_seconds,
        processed,
        observers: runtime.observer_runs(),
    });
    let run_peak = peak_rss_bytes();
    let written = written_bytes()
        .zip(written_before)
        .map(|(after, before)| after.saturating_sub(before));
    progress(ScaleProgress::Ran(run_seconds, processed));
    // Query: 4 queries from each of 100 documents spread over the crawl.
    progress(ScaleProgress::Querying);
    let step = (config.docs / QUERY_DOCS).max(1);
    let urls = (0..config.docs).step_by(step).map(|i| crawl.url(i));
    let queries = query_set(runtime.client(), urls).await?;
    let query_latency_pool_100 = measure(runtime.client(), &queries, 100).await?;
    let query_latency = measure(runtime.client(), &queries, RERANK_POOL).await?;
    progress(ScaleProgress::Queried(
        query_latency.queries,
        query_latency.p50_ms,
        query_latency.p99_ms,
    ));
    let disk = disk_bytes();
    let stored = stored_cells(runtime.client().store().as_ref()).await?;
    // Check.
    progress(ScaleProgress::Checking);
    reset_peak_rss();
    let (check_began, cpu_before_check) = (Instant::now(), cpu_seconds());
    let report = check(runtime.client()).await?;
    let check_seconds = check_began.elapsed().as_secs_f64();
    let check_cpu_seconds = cpu_seconds()
        .zip(cpu_before_check)
        .map(|(after, before)| after - before);
    let check_peak = peak_rss_bytes();
    let backend = runtime.client().store().name().to_owned();
    runtime.shutdown().await?;
    let quarters = quarter_rates(&samples, run_seconds);
    let observer_quarters = observer_quarters(&samples, run_seconds);
    let html_bytes = html_bytes.into_inner();
    Ok(ScaleReport {
        backend,
        docs: config.docs,
        shape: format!("{:?}", config.shape).to_lowercase(),
        html_bytes,
        load_seconds: load.elapsed.as_secs_f64(),
        load_pages_per_sec: load.loaded as f64 / load.elapsed.as_secs_f64().max(1e-9),
        run_seconds,
        run_pages_per_sec: config.docs as f64 / run_seconds.max(1e-9),
        notifications_processed: processed,
        one_phase: [txn.one_phase_commits, txn.one_phase_fallbacks],
        status_reads: txn.status_reads,
        quarters,
        last_over_first: if quarters[0] > 0.0 {
            quarters[3] / quarters[0]
        } else {
            0.0
        },
        observer_quarters,
        samples,
        peak_rss_bytes: [load_peak, run_peak, check_peak],
        written_bytes: written,
        cpu_seconds: [
            cpu_before_run
                .zip(cpu_before_load)
                .map(|(after, before)| after - before),
            cpu_after_run
                .zip(cpu_before_run)
                .map(|(after, before)| after - before),
        ],
        check_seconds,
        check_cpu_seconds,
        disk_bytes: disk,
        disk_per_html: disk.map(|d| d as f64 / html_bytes.max(1) as f64),
        stored,
        summary: report.summary,
        violations: report.violations.iter().map(ToString::to_string).collect(),
        query_latency,
        query_latency_pool_100,
    })
}

impl ScaleReport {
    /// CPU seconds of the load and the run, the run's per page, and how busy the cores were.
    fn cpu_figures(&self) -> String {
        let [Some(load), Some(run)] = self.cpu_seconds else {
            return "-".to_owned();
        };
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        format!(
            "{load:.1} / {run:.1} s ({:.1} ms a page in the run, {:.0}% of {cores} cores busy)",
            1000.0 * run / self.docs.max(1) as f64,
            100.0 * run / (self.run_seconds.max(1e-9) * cores as f64),
        )
    }

    /// A two-column markdown table of the figures.
    pub fn table(&self) -> String {
        let mb = |b: Option<u64>| {
            b.map_or_else(|| "-".to_owned(), |b| format!("{:.0} MB", b as f64 / 1e6))
        };
        let rows = [
            ("backend", self.backend.clone()),
            ("pages", format!("{} ({})", self.docs, self.shape)),
            ("HTML", mb(Some(self.html_bytes))),
            (
                "load",
                format!(
                    "{:.1} s, {:.0} pages/s",
                    self.load_seconds, self.load_pages_per_sec
                ),
            ),
            (
                "run",
                format!(
                    "{:.1} s, {:.0} pages/s, {} observer txns",
                    self.run_seconds, self.run_pages_per_sec, self.notifications_processed
                ),
            ),
            ("CPU: load / run", self.cpu_figures()),
            (
                "one-step commits / fell back",
                format!("{} / {}", self.one_phase[0], self.one_phase[1]),
            ),
            ("status reads of writers", self.status_reads.to_string()),
            (
                "notifications/s per quarter",
                self.quarters
                    .iter()
                    .map(|q| format!("{q:.0}"))
                    .collect::<Vec<_>>()
                    .join(" / "),
            ),
            (
                "last ÷ first quarter",
                format!("{:.2}", self.last_over_first),
            ),
            (
                "peak RSS: load / run / check",
                self.peak_rss_bytes
                    .iter()
                    .map(|b| mb(*b))
                    .collect::<Vec<_>>()
                    .join(" / "),
            ),
            ("written to disk", mb(self.written_bytes)),
            (
                "stored cells (all versions)",
                format!("{}, {}", self.stored.cells, mb(Some(self.stored.bytes))),
            ),
            ("on disk", mb(self.disk_bytes)),
            (
                "disk ÷ HTML",
                self.disk_per_html
                    .map_or_else(|| "-".to_owned(), |r| format!("{r:.1}×")),
            ),
            (
                "check: wall, CPU, ÷ run",
                format!(
                    "{:.1} s, {}, {:.2}× the run",
                    self.check_seconds,
                    self.check_cpu_seconds
                        .map_or_else(|| "-".to_owned(), |c| format!("{c:.1} s CPU")),
                    self.check_seconds / self.run_seconds.max(1e-9)
                ),
            ),
            ("invariant violations", self.violations.len().to_string()),
            (
                "query latency p50 / p99 / max",
                format!(
                    "{:.1} / {:.1} / {:.1} ms ({} queries, {:.0} hits each on average)",
                    self.query_latency.p50_ms,
                    self.query_latency.p99_ms,
                    self.query_latency.max_ms,
                    self.query_latency.queries,
                    self.query_latency.mean_total
                ),
            ),
            (
                "the same, re-ranking the best 100 (baseline)",
                format!(
                    "{:.1} / {:.1} / {:.1} ms",
                    self.query_latency_pool_100.p50_ms,
                    self.query_latency_pool_100.p99_ms,
                    self.query_latency_pool_100.max_ms,
                ),
            ),
        ];
        let mut out = String::from("| scale run | value |\n|---|---:|\n");
        for (k, v) in rows {
            out.push_str(&format!("| {k} | {v} |\n"));
        }
        out.push_str(
            "\n| observer | runs per quarter | mean run ms per quarter | conflicts |\n|---|---|---|---:|\n",
        );
        for o in &self.observer_quarters {
            let runs: Vec<String> = o.runs.iter().map(u64::to_string).collect();
            let ms: Vec<String> = o.mean_ms.iter().map(|m| format!("{m:.1}")).collect();
            out.push_str(&format!(
                "| {} | {} | {} | {} |\n",
                o.name,
                runs.join(" / "),
                ms.join(" / "),
                o.conflicts
            ));
        }
        out.push_str("\n| table | family | cells | MB |\n|---|---|---:|---:|\n");
        for f in &self.stored.by_family {
            out.push_str(&format!(
                "| {} | {} | {} | {:.1} |\n",
                f.table,
                f.family,
                f.cells,
                f.bytes as f64 / 1e6
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(seconds: f64, processed: u64) -> ScaleSample {
        ScaleSample {
            seconds,
            processed,
            observers: vec![ObserverRuns {
                name: "o".into(),
                runs: processed,
                busy_micros: processed * 1000,
                conflicts: 0,
            }],
        }
    }

    #[test]
    fn quarters_interpolate_between_samples() {
        let samples = [sample(1.0, 100), sample(2.0, 200), sample(4.0, 250)];
        let q = quarter_rates(&samples, 4.0);
        assert_eq!(q, [100.0, 100.0, 25.0, 25.0]);
        assert_eq!(quarter_rates(&[], 0.0), [0.0; 4]);
        let per = observer_quarters(&samples, 4.0);
        assert_eq!(per[0].runs, [100, 100, 50, 0]);
        assert_eq!(per[0].mean_ms, [1.0, 1.0, 1.0, 0.0]);
    }

    #[test]
    fn proc_readings_exist_on_linux() {
        if cfg!(target_os = "linux") {
            assert!(peak_rss_bytes().is_some_and(|b| b > 0));
            assert!(written_bytes().is_some());
            // CPU time only grows, and spinning for 50 ms spends some.
            let before = cpu_seconds().unwrap();
            let spin = std::time::Instant::now();
            let mut x = 0u64;
            while spin.elapsed() < std::time::Duration::from_millis(50) {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
            let after = cpu_seconds().unwrap();
            assert!(after > before, "{before} s then {after} s");
        }
    }
}
