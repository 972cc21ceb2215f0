//! The sweep: the TPC-E-style benchmark ([`crate::tpce`]) over a fresh
//! `SimulatedCluster<MemStore>` per point, servers swept at a fixed large number of clients and
//! clients swept at a few server counts; each point's tpsE beside the cluster's capacity and
//! utilisation, the conflicts and this process's CPU ([`PointReport`]), and the analysis at the
//! end ([`super::analysis`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use percolator_backend_mem::MemStore;
use percolator_core::TimestampOracle;
use percolator_core::oracle::shared_local_oracle;
use serde::Serialize;

use super::analysis::{self, Analysis};
use super::engine::SimEngine;
use super::model::{ClusterModel, SimConfig};
use super::oracle::SimulatedOracle;
use super::sim_store::SimulatedCluster;
use super::window::Window;
use crate::tpce::engine::PercolatorEngine;
use crate::tpce::frames::TxnKind;
use crate::tpce::market::Market;
use crate::tpce::schema::Scale;
use crate::tpce::stats::Stats;
use crate::tpce::{self, TpceConfig};

/// What the sweep measures.
///
/// `#[non_exhaustive]`: start from [`Figure9Config::full`] or [`Figure9Config::quick`] and set
/// the fields.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Figure9Config {
    /// The cluster's round trip and service times ([`SimConfig::servers`] is set per point).
    pub sim: SimConfig,
    /// Server counts swept at [`Self::clients_at_scale`] clients: the Figure 9 line.
    pub servers: Vec<usize>,
    /// The fixed large number of clients of the servers sweep.
    pub clients_at_scale: usize,
    /// Client counts swept at each of [`Self::client_sweep_servers`].
    pub clients: Vec<usize>,
    /// Server counts the clients are swept at.
    pub client_sweep_servers: Vec<usize>,
    /// TPC-E customers loaded per point.
    pub customers: u64,
    /// Time per point before the measured window (the simulation on, nothing counted);
    /// longer on few servers ([`Self::times`]).
    pub warmup: Duration,
    /// Measured time per point; longer on few servers ([`Self::times`]).
    pub duration: Duration,
    /// Points on fewer servers than this warm up and measure longer ([`Self::times`]); 1: never.
    pub full_speed_servers: usize,
    /// One Percolator worker per this many clients, at least one (see [`super::engine`]).
    pub clients_per_worker: usize,
}

impl Figure9Config {
    /// The full sweep: 1 → 64 servers at 512 clients, 1 → 512 clients at 1, 16 and 64 servers,
    /// 1 000 customers, 3 s measured after 2 s of warm-up per point (four times as long on one
    /// server, twice on two): 16 points, about four minutes.
    pub fn full() -> Self {
        Self {
            sim: SimConfig::new(1),
            servers: vec![1, 2, 4, 8, 16, 32, 64],
            clients_at_scale: 512,
            clients: vec![1, 8, 64, 512],
            client_sweep_servers: vec![1, 16, 64],
            customers: 1_000,
            warmup: Duration::from_secs(2),
            duration: Duration::from_secs(3),
            full_speed_servers: 4,
            clients_per_worker: 32,
        }
    }

    /// A smoke sweep: 1 → 4 servers at 32 clients, 1 and 8 clients at 1 server, 100 customers,
    /// 1 s measured after 0.5 s of warm-up per point (longer on 1 and 2 servers).
    pub fn quick() -> Self {
        Self {
            servers: vec![1, 2, 4],
            clients_at_scale: 32,
            clients: vec![1, 8],
            client_sweep_servers: vec![1],
            customers: 100,
            warmup: Duration::from_millis(500),
            duration: Duration::from_secs(1),
            ..Self::full()
        }
    }

    /// Every `(servers, clients)` point, each once, by servers then clients.
    pub fn points(&self) -> Vec<(usize, usize)> {
        let mut points: Vec<(usize, usize)> = self
            .servers
            .iter()
            .map(|&s| (s, self.clients_at_scale))
            .chain(
                self.client_sweep_servers
                    .iter()
                    .flat_map(|&s| self.clients.iter().map(move |&c| (s, c))),
            )
            .map(|(s, c)| (s.max(1), c.max(1)))
            .collect();
        points.sort_unstable();
        points.dedup();
        points
    }

    /// The warm-up and measured time of a point on `servers` servers: on fewer than
    /// [`Self::full_speed_servers`] both are longer by `full_speed_servers / servers`. Such a
    /// cluster serves proportionally less, so the window would count few Trade-Results (the base
    /// of the linearity ratio would be noisy), and its transactions take proportionally longer,
    /// so the closed loop needs longer to reach its steady state.
    pub fn times(&self, servers: usize) -> (Duration, Duration) {
        let stretch = u32::try_from(self.full_speed_servers / servers.max(1))
            .unwrap_or(u32::MAX)
            .max(1);
        (self.warmup * stretch, self.duration * stretch)
    }

    /// Workers for `clients` clients.
    pub fn workers(&self, clients: usize) -> usize {
        clients.div_ceil(self.clients_per_worker.max(1)).max(1)
    }

    fn tpce(&self, servers: usize, clients: usize) -> TpceConfig {
        let (warmup, measure) = self.times(servers);
        TpceConfig {
            customers: self.customers,
            // The driver runs through the warm-up and the window (see `engine`).
            duration: warmup + measure,
            clients,
            progress: false,
            // The market drains unsimulated (see `engine`), in seconds at most.
            drain_timeout: Duration::from_secs(60),
            batch_reads: true,
            ..TpceConfig::full()
        }
    }
}

/// One point of the sweep.
#[derive(Debug, Clone, Serialize)]
pub struct PointReport {
    /// Simulated data servers.
    pub servers: usize,
    /// TPC-E client tasks.
    pub clients: usize,
    /// Percolator workers (each with its observer runtime: the market emulator).
    pub workers: usize,
    /// Trade-Results per second.
    pub tps_e: f64,
    /// Committed TPC-E transactions per second (every type of the mix).
    pub txns_per_sec: f64,
    /// Row operations per second the servers can serve: servers ÷ service time.
    pub capacity_ops_per_sec: f64,
    /// Row operations served per committed TPC-E transaction (observer scans, retries and the
    /// broker aggregation included).
    pub row_ops_per_txn: f64,
    /// Attempts beyond the first (conflicts retried), all types, the market emulator's
    /// included.
    pub retries: u64,
    /// Retries per attempt.
    pub conflict_rate: f64,
    /// Transactions given up.
    pub failed: u64,
    /// This process's CPU per committed transaction, ms.
    pub cpu_ms_per_txn: Option<f64>,
    /// Trades not yet executed when the measurement ended.
    pub backlog_at_end: u64,
    /// Trade-Result latency (submission to execution), median over the whole run, ms.
    pub trade_result_p50_ms: f64,
    /// tpsE as the TPC-E driver counts it: over the whole run, warm-up included.
    pub run_tps_e: f64,
    /// Whether the invariants held after the run (checked unsimulated).
    pub invariants_ok: bool,
    /// Measured seconds.
    pub secs: f64,
    /// The cluster and the process in the measured window.
    pub window: Window,
}

/// The whole sweep.
#[derive(Debug, Clone, Serialize)]
pub struct Figure9Report {
    /// Round trip, ms.
    pub rtt_ms: f64,
    /// Service time per row operation, ms.
    pub service_ms: f64,
    /// Service time per oracle request, ms.
    pub oracle_service_ms: f64,
    /// Whether transactions could commit in one phase.
    pub one_phase: bool,
    /// Customers loaded per point.
    pub customers: u64,
    /// Measured seconds per point.
    pub secs_per_point: f64,
    /// Warm-up seconds per point.
    pub warmup_secs: f64,
    /// CPU cores of this machine.
    pub cores: usize,
    /// The clients of the servers sweep.
    pub clients_at_scale: usize,
    /// One Percolator worker per this many clients.
    pub clients_per_worker: usize,
    /// Points on fewer servers warmed up and measured longer.
    pub full_speed_servers: usize,
    /// Every point, by servers then clients.
    pub points: Vec<PointReport>,
    /// Linearity and where and why it bends.
    pub analysis: Analysis,
    /// Seconds the whole sweep took.
    pub total_secs: f64,
}

/// Why a point could not be measured.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Figure9Error {
    /// A transaction of the benchmark failed for good.
    #[error("{servers} servers, {clients} clients: {source}")]
    Txn {
        /// Servers of the point.
        servers: usize,
        /// Clients of the point.
        clients: usize,
        /// The error.
        source: percolator_core::Error,
    },
    /// The run ended before its measured window did (no transaction ran after the load).
    #[error("{servers} servers, {clients} clients: no measured window")]
    NoWindow {
        /// Servers of the point.
        servers: usize,
        /// Clients of the point.
        clients: usize,
    },
}

/// Measures one point on a fresh store.
pub async fn run_point(
    config: &Figure9Config,
    servers: usize,
    clients: usize,
) -> Result<PointReport, Figure9Error> {
    let failed = |source| Figure9Error::Txn {
        servers,
        clients,
        source,
    };
    let sim = config.sim.clone().with_servers(servers);
    let capacity = sim.capacity_ops_per_sec();
    let inner = Arc::new(MemStore::new());
    let model = Arc::new(ClusterModel::new(sim));
    let store = Arc::new(SimulatedCluster::new(
        Arc::clone(&inner),
        Arc::clone(&model),
    ));
    let oracle: Arc<dyn TimestampOracle> = Arc::new(SimulatedOracle::new(
        shared_local_oracle(&inner).await.map_err(failed)?,
        Arc::clone(&model),
    ));
    let (market, feed) = Market::new(Arc::new(Stats::default()));
    let mut workers = Vec::new();
    for _ in 0..config.workers(clients) {
        let worker = PercolatorEngine::start(
            Arc::clone(&store),
            Scale::of(config.customers),
            Arc::clone(&market),
            Some(Arc::clone(&oracle)),
            true,
        )
        .await
        .map_err(failed)?;
        workers.push(worker);
    }
    let (warmup, measure) = config.times(servers);
    let engine = SimEngine::new(workers, model, Arc::clone(&market.stats), warmup, measure)
        .map_err(failed)?;
    let mut window = engine.window();
    let report = tpce::run(engine, market, feed, &config.tpce(servers, clients))
        .await
        .map_err(failed)?;
    let window = window
        .wait_for(Option::is_some)
        .await
        .ok()
        .and_then(|w| (*w).clone())
        .ok_or(Figure9Error::NoWindow { servers, clients })?;
    let per_txn = |per_sec: f64| {
        if window.txns_per_sec > 0.0 {
            per_sec / window.txns_per_sec
        } else {
            0.0
        }
    };
    Ok(PointReport {
        servers,
        clients,
        workers: config.workers(clients),
        tps_e: window.tps_e,
        txns_per_sec: window.txns_per_sec,
        capacity_ops_per_sec: capacity,
        row_ops_per_txn: per_txn(window.row_ops_per_sec),
        retries: window.retries,
        conflict_rate: window.conflict_rate,
        failed: window.failed,
        cpu_ms_per_txn: window.process_cpu_cores.map(|c| 1e3 * per_txn(c)),
        backlog_at_end: report.backlog_at_end,
        trade_result_p50_ms: report.kinds[TxnKind::TradeResult.index()].p50_ms,
        run_tps_e: report.tps_e,
        invariants_ok: report.invariants.ok() && report.drained,
        secs: window.secs,
        window,
    })
}

/// Runs every point of `config`, telling `progress` before and after each, and analyses them.
pub async fn run(
    config: &Figure9Config,
    mut progress: impl FnMut(&str),
) -> Result<Figure9Report, Figure9Error> {
    let began = Instant::now();
    let points = config.points();
    let mut reports = Vec::with_capacity(points.len());
    for (i, &(servers, clients)) in points.iter().enumerate() {
        progress(&format!(
            "[{}/{}] {servers} servers, {clients} clients ({:.0} s so far)",
            i + 1,
            points.len(),
            began.elapsed().as_secs_f64()
        ));
        let point = run_point(config, servers, clients).await?;
        progress(&format!(
            "        {:.1} tpsE, {:.0} txn/s, {:.1} row ops per txn ({:.0} empty scans/s); servers \
             {:.0}% busy (busiest {:.0}%), oracle {:.0}%; conflicts {:.1}%; CPU {}",
            point.tps_e,
            point.txns_per_sec,
            point.row_ops_per_txn,
            point.window.empty_scans_per_sec,
            100.0 * point.window.server_utilisation,
            100.0 * point.window.busiest_server_utilisation,
            100.0 * point.window.oracle_utilisation,
            100.0 * point.conflict_rate,
            match (
                point.window.process_cpu_cores,
                point.window.machine_cpu_cores
            ) {
                (Some(p), Some(m)) => format!("{p:.2} cores (machine {m:.2})"),
                _ => "unmeasured".to_owned(),
            },
        ));
        reports.push(point);
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let analysis = analysis::analyse(&reports, config, cores);
    Ok(Figure9Report {
        rtt_ms: 1e3 * config.sim.rtt.as_secs_f64(),
        service_ms: 1e3 * config.sim.service.as_secs_f64(),
        oracle_service_ms: 1e3 * config.sim.oracle_service.as_secs_f64(),
        one_phase: config.sim.one_phase,
        customers: config.customers,
        secs_per_point: config.duration.as_secs_f64(),
        warmup_secs: config.warmup.as_secs_f64(),
        cores,
        clients_at_scale: config.clients_at_scale,
        clients_per_worker: config.clients_per_worker,
        full_speed_servers: config.full_speed_servers,
        points: reports,
        analysis,
        total_secs: began.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny sweep runs every point, keeps the invariants, measures Trade-Results, the servers
    /// and the CPU, and writes every field the plots and the report read.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_tiny_sweep_measures_every_point() {
        let config = Figure9Config {
            sim: SimConfig::new(1)
                .with_rtt(Duration::from_millis(1))
                .with_service(Duration::from_micros(100)),
            servers: vec![1, 2],
            clients_at_scale: 4,
            clients: vec![1],
            client_sweep_servers: vec![1],
            customers: 20,
            warmup: Duration::from_millis(300),
            duration: Duration::from_millis(1200),
            full_speed_servers: 1,
            clients_per_worker: 2,
        };
        assert_eq!((config.workers(1), config.workers(4)), (1, 2));
        assert_eq!(config.points(), vec![(1, 1), (1, 4), (2, 4)]);
        let stretched = Figure9Config {
            full_speed_servers: 4,
            ..config.clone()
        };
        assert_eq!(stretched.times(1).1, 4 * config.duration);
        assert_eq!(stretched.times(2).0, 2 * config.warmup);
        assert_eq!(stretched.times(16), config.times(16));
        let mut lines = Vec::new();
        let report = run(&config, |line| lines.push(line.to_owned()))
            .await
            .unwrap();
        assert_eq!(
            lines.len(),
            6,
            "a line before and after each point: {lines:?}"
        );
        assert_eq!(report.points.len(), 3);
        for p in &report.points {
            assert!(p.invariants_ok, "{p:?}");
            assert!(p.txns_per_sec > 0.0, "{p:?}");
            assert!(p.window.server_utilisation > 0.0, "{p:?}");
            assert!(p.window.oracle_requests_per_sec > 0.0, "{p:?}");
            assert!(p.row_ops_per_txn > 0.0, "{p:?}");
            #[cfg(target_os = "linux")]
            assert!(p.window.process_cpu_cores.is_some(), "{p:?}");
        }
        for p in report.points.iter().filter(|p| p.clients == 4) {
            assert!(p.tps_e > 0.0, "{p:?}");
        }
        assert_eq!(report.analysis.points.len(), 2);
        assert_eq!(report.analysis.points[0].servers, 1);
        assert!((report.analysis.points[0].ratio - 1.0).abs() < 1e-9);
        assert!(!report.analysis.conclusion.is_empty());
        // The oracle (10 µs a request) never saturates: the analysis says so, from the numbers.
        assert!(
            report
                .analysis
                .conclusion
                .iter()
                .any(|l| l.starts_with("Never the limit here") && l.contains("oracle (at most")),
            "{:?}",
            report.analysis.conclusion
        );

        let json = serde_json::to_value(&report).unwrap();
        for key in [
            "rtt_ms",
            "service_ms",
            "cores",
            "clients_at_scale",
            "points",
            "analysis",
        ] {
            assert!(!json[key].is_null(), "{key} missing: {json}");
        }
        let point = &json["points"][2];
        for key in [
            "servers",
            "clients",
            "tps_e",
            "capacity_ops_per_sec",
            "conflict_rate",
        ] {
            assert!(point[key].is_number(), "{key} missing: {point}");
        }
        assert!(point["window"]["server_utilisation"].is_number(), "{point}");
        assert!(json["analysis"]["conclusion"].is_array());
        let table = report.table();
        assert!(table.starts_with("## Figure 9"), "{table}");
        assert_eq!(
            table.matches("\n| 1 | ").count() + table.matches("\n| 2 | ").count(),
            3
        );
    }
}
