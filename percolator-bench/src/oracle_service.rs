//! The timestamp oracle service over loopback: how many timestamps per second `n` concurrent
//! requesters get from [`RemoteOracle`] (one TCP connection, client- and server-side batching)
//! and their latency, against the same requesters on an in-process [`LocalOracle`] (the
//! baseline, measured in the same run). The target: 1 M timestamps/s from 64 requesters with
//! p99 under 1 ms (PD reaches about 1 M/s).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use percolator_backend_mem::MemStore;
use percolator_core::internal::histogram::Histogram;
use percolator_core::{LocalOracle, TimestampOracle};
use percolator_oracle::{OracleServer, RemoteOracle, ServerConfig};
use serde::Serialize;

/// Trials per requester count. Two vCPUs that park and wake make single runs of the service
/// vary widely; the median of alternating trials is steadier.
const TRIALS: usize = 3;

/// One requester count.
#[derive(Debug, Clone, Serialize)]
pub struct OraclePoint {
    /// Concurrent requesters (tasks, each waiting for its timestamp before asking again).
    pub requesters: usize,
    /// Timestamps per second from the in-process oracle (baseline): the median of the trials.
    pub local_per_s: f64,
    /// Timestamps per second from the service over loopback: the median of the trials.
    pub remote_per_s: f64,
    /// Every trial's timestamps per second from the service, in ascending order.
    pub remote_trials_per_s: Vec<f64>,
    /// Service ÷ in-process.
    pub ratio: f64,
    /// Median latency of one service request over all trials, microseconds (the lower bound of a 12.5%-wide
    /// histogram bucket).
    pub remote_p50_us: u64,
    /// 99th percentile latency, microseconds.
    pub remote_p99_us: u64,
    /// Caller requests per request on the wire (client-side batching).
    pub callers_per_rpc: f64,
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct OracleServiceReport {
    /// Seconds measured per trial, point and oracle.
    pub seconds: f64,
    /// Trials per point: the oracles take turns, and each point reports the median.
    pub trials: usize,
    /// One per requester count.
    pub points: Vec<OraclePoint>,
}

impl OracleServiceReport {
    /// A markdown table.
    pub fn table(&self) -> String {
        let mut out = String::from(
            "| requesters | in-process (M ts/s) | service (M ts/s) | service trials | service ÷ in-process | p50 | p99 | callers per RPC |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        for p in &self.points {
            out.push_str(&format!(
                "| {} | {:.2} | {:.2} | {} | {:.2} | {} µs | {} µs | {:.1} |\n",
                p.requesters,
                p.local_per_s / 1e6,
                p.remote_per_s / 1e6,
                p.remote_trials_per_s
                    .iter()
                    .map(|r| format!("{:.2}", r / 1e6))
                    .collect::<Vec<_>>()
                    .join(" "),
                p.ratio,
                p.remote_p50_us,
                p.remote_p99_us,
                p.callers_per_rpc
            ));
        }
        out
    }
}

/// Timestamps per second and latencies of `requesters` tasks on `oracle` for `seconds`.
///
/// Each timestamp costs the harness one clock read (its end is the next one's start) and the
/// tasks stop on a flag, not by reading the clock again: a clock read costs about as much as
/// a timestamp of the in-process oracle.
async fn drive(
    oracle: Arc<dyn TimestampOracle>,
    requesters: usize,
    seconds: f64,
    latencies: &Arc<Histogram>,
) -> percolator_core::Result<f64> {
    let stop = Arc::new(AtomicBool::new(false));
    let began = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..requesters {
        let oracle = Arc::clone(&oracle);
        let latencies = Arc::clone(latencies);
        let stop = Arc::clone(&stop);
        tasks.push(tokio::spawn(async move {
            let mut count = 0u64;
            let mut asked = Instant::now();
            while !stop.load(Ordering::Relaxed) {
                oracle.timestamp().await?;
                let answered = Instant::now();
                latencies.record(answered - asked);
                asked = answered;
                count += 1;
                // The in-process oracle answers without ever waiting: give the runtime its
                // turn (the timer that raises `stop` among it) once the task's budget is spent.
                tokio::task::consume_budget().await;
            }
            Ok::<_, percolator_core::Error>(count)
        }));
    }
    tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
    stop.store(true, Ordering::Relaxed);
    let mut total = 0;
    for task in tasks {
        total += task
            .await
            .map_err(|e| percolator_core::Error::Oracle(format!("requester failed: {e}")))??;
    }
    Ok(total as f64 / began.elapsed().as_secs_f64())
}

/// Measures every requester count in `requesters` for `seconds` each.
pub async fn run(
    requesters: &[usize],
    seconds: f64,
    mut progress: impl FnMut(&str),
) -> Result<OracleServiceReport, Box<dyn std::error::Error + Send + Sync>> {
    let store = Arc::new(MemStore::new());
    let server =
        OracleServer::bind(Arc::clone(&store), "127.0.0.1:0", ServerConfig::default()).await?;
    let remote: Arc<dyn TimestampOracle> =
        Arc::new(RemoteOracle::connect([server.local_addr().to_string()])?);
    // The baseline: the same requesters on an in-process oracle (its own store: one oracle
    // per store).
    let local: Arc<dyn TimestampOracle> =
        Arc::new(LocalOracle::open(Arc::new(MemStore::new())).await?);
    let mut points = Vec::new();
    for &n in requesters {
        progress(&format!("oracle service: {n} requesters, {TRIALS} trials"));
        let ignored = Arc::new(Histogram::default());
        let latencies = Arc::new(Histogram::default());
        let (mut local_rates, mut remote_rates) = (Vec::new(), Vec::new());
        let before = server.stats();
        for _ in 0..TRIALS {
            local_rates.push(drive(Arc::clone(&local), n, seconds, &ignored).await?);
            remote_rates.push(drive(Arc::clone(&remote), n, seconds, &latencies).await?);
        }
        let after = server.stats();
        let rpcs = after.requests.saturating_sub(before.requests).max(1);
        let callers = after.timestamps.saturating_sub(before.timestamps);
        let (local_per_s, remote_per_s) = (median(&mut local_rates), median(&mut remote_rates));
        points.push(OraclePoint {
            requesters: n,
            local_per_s,
            remote_per_s,
            remote_trials_per_s: remote_rates,
            ratio: remote_per_s / local_per_s.max(1e-9),
            remote_p50_us: micros(latencies.quantile(0.5)),
            remote_p99_us: micros(latencies.quantile(0.99)),
            callers_per_rpc: callers as f64 / rpcs as f64,
        });
    }
    server.shutdown().await;
    Ok(OracleServiceReport {
        seconds,
        trials: TRIALS,
        points,
    })
}

/// The middle value (the upper one of an even count); 0 for none.
fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}
