//! A TPC-E-style brokerage benchmark (paper §3.3: Percolator on TPC-E).
//!
//! - [`schema`]: the tables (customer, account, broker, company, security, last trade, trade,
//!   trade history, trade request, holding, holding summary, settlement, cash transaction, watch
//!   list) and three secondary indexes maintained by hand in the same transactions.
//! - [`frames`]: the ten transaction types, written once against [`kv::Kv`].
//! - [`engine`]: Percolator (any backend; Trade-Result is an **observer** on submitted trades,
//!   the market emulator) and the peer baseline, sled's own transactions.
//! - The broker hot spot (every Trade-Result adds to its broker's trade count and commission) is
//!   handled as the paper says: Trade-Result writes an increment into a side table
//!   (`BROKER_DELTA`, one row per trade, so increments never conflict) and an aggregator folds
//!   them into the broker rows periodically; Broker-Volume reads both.
//! - Market-Feed runs once per ten executed trades with new prices of the traded securities.
//! - The run loads `customers` customers (TPC-E scales everything from them), drives the mix
//!   from closed-loop client tasks for a fixed time, waits for the market to drain, then checks
//!   the invariants ([`check`]) and reports tpsE (Trade-Results per second), per-type throughput
//!   and latency percentiles, conflict rates and the measured mix against TPC-E's.

pub mod check;
pub mod engine;
#[cfg(feature = "etcd")]
pub mod etcd_peer;
pub mod fjall_peer;
pub mod frames;
pub mod kv;
pub mod load;
pub mod market;
pub mod peer;
pub mod schema;
pub mod stats;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use percolator_core::{Error, Result};
use rand::SeedableRng as _;
use serde::Serialize;

use self::check::InvariantReport;
use self::engine::Engine;
use self::frames::{KeyChooser, TxnInput, TxnKind, Uniform};
use self::market::{Market, now_us};
use self::schema::Scale;
use self::stats::Stats;

/// Parameters of a run.
#[derive(Debug, Clone)]
pub struct TpceConfig {
    /// Customers loaded (everything else scales from them).
    pub customers: u64,
    /// Measured time.
    pub duration: Duration,
    /// Closed-loop client tasks (the customer emulator).
    pub clients: usize,
    /// Customers per load transaction.
    pub load_batch: u64,
    /// How long to wait for the market to execute the trades still queued at the end.
    pub drain_timeout: Duration,
    /// How often the broker aggregator folds the side table.
    pub aggregate_every: Duration,
    /// Show progress bars (load, run) on stderr.
    pub progress: bool,
    /// Percolator reads the rows a frame reads together in one batch
    /// ([`Transaction::get_many`](percolator_core::Transaction::get_many)); off, one after
    /// another.
    pub batch_reads: bool,
    /// Percolator returns from `commit` at the commit point and commits the secondaries in the
    /// background ([`percolator_core::TxnConfig::background_secondaries`]); off, before it
    /// returns.
    pub background_secondaries: bool,
}

impl TpceConfig {
    /// The full run: 2 000 customers (about 200 000 rows), 10 s.
    pub fn full() -> Self {
        Self {
            customers: 2_000,
            duration: Duration::from_secs(10),
            clients: 8,
            load_batch: 10,
            drain_timeout: Duration::from_secs(60),
            aggregate_every: Duration::from_millis(100),
            progress: true,
            batch_reads: true,
            background_secondaries: true,
        }
    }

    /// A smoke run: 300 customers, 2 s.
    pub fn quick() -> Self {
        Self {
            customers: 300,
            duration: Duration::from_secs(2),
            ..Self::full()
        }
    }
}

/// One transaction type's results.
#[derive(Debug, Clone, Serialize)]
pub struct KindReport {
    /// TPC-E name.
    pub name: String,
    /// Committed during the measured time.
    pub committed: u64,
    /// Per second.
    pub per_sec: f64,
    /// Share of all committed TPC-E transactions, percent.
    pub mix_percent: f64,
    /// TPC-E's share, percent.
    pub target_percent: f64,
    /// Latency percentiles, ms (Trade-Result: submission to execution).
    pub p50_ms: f64,
    /// 90th percentile, ms.
    pub p90_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// Attempts beyond the first (conflicts that were retried).
    pub retries: u64,
    /// Conflicts per attempt.
    pub conflict_rate: f64,
    /// Given up.
    pub failed: u64,
}

/// A run's results.
#[derive(Debug, Clone, Serialize)]
pub struct TpceReport {
    /// The system.
    pub engine: String,
    /// Table sizes.
    pub scale: Scale,
    /// Seconds the load took.
    pub load_secs: f64,
    /// Measured seconds.
    pub secs: f64,
    /// Client tasks.
    pub clients: usize,
    /// Trade-Results per second.
    pub tps_e: f64,
    /// CPU cores of the machine.
    pub cores: usize,
    /// `tps_e / cores`.
    pub tps_e_per_core: f64,
    /// Customers per tpsE measured (TPC-E rates 500 customers per tpsE).
    pub customers_per_tps_e: f64,
    /// All committed TPC-E transactions per second.
    pub txns_per_sec: f64,
    /// Per type, in TPC-E order (broker aggregation last).
    pub kinds: Vec<KindReport>,
    /// Trades still unexecuted when the measurement ended.
    pub backlog_at_end: u64,
    /// Whether the market drained before the invariants were checked.
    pub drained: bool,
    /// The invariants.
    pub invariants: InvariantReport,
    /// What prefetching did (Percolator only).
    pub prefetch: Option<engine::PrefetchStats>,
}

impl TpceReport {
    /// A markdown table.
    pub fn table(&self) -> String {
        let mut out = format!(
            "**{}**: {:.0} tpsE ({:.0} per core on {} cores), {:.0} txn/s, {} customers, {} clients, {:.1} s (load {:.1} s); invariants {}\n\n",
            self.engine,
            self.tps_e,
            self.tps_e_per_core,
            self.cores,
            self.txns_per_sec,
            self.scale.customers,
            self.clients,
            self.secs,
            self.load_secs,
            if self.invariants.ok() {
                format!(
                    "hold ({} trades, {} accounts, {} holdings, {} brokers)",
                    self.invariants.trades,
                    self.invariants.accounts,
                    self.invariants.holdings,
                    self.invariants.brokers
                )
            } else {
                format!(
                    "VIOLATED ({}): {}",
                    self.invariants.violation_count,
                    self.invariants.violations.join("; ")
                )
            }
        );
        out.push_str("| type | committed/s | mix % | target % | p50 ms | p90 ms | p99 ms | retries | conflict rate | failed |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for k in &self.kinds {
            out.push_str(&format!(
                "| {} | {:.1} | {:.1} | {:.1} | {:.2} | {:.2} | {:.2} | {} | {:.3} | {} |\n",
                k.name,
                k.per_sec,
                k.mix_percent,
                k.target_percent,
                k.p50_ms,
                k.p90_ms,
                k.p99_ms,
                k.retries,
                k.conflict_rate,
                k.failed
            ));
        }
        if let Some(p) = &self.prefetch {
            out.push_str(&if p.enabled {
                format!(
                    "\nPrefetch: {} cells read ahead, {} of them used ({:.0}%)\n",
                    p.prefetched_cells,
                    p.hits,
                    100.0 * p.hits as f64 / (p.prefetched_cells.max(1)) as f64
                )
            } else {
                "\nPrefetch: off on this store (TxnConfig::prefetch)\n".to_owned()
            });
        }
        out
    }
}

fn progress_bar(show: bool, len: u64, what: &str) -> indicatif::ProgressBar {
    if !show {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(len);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{msg:>12} [{bar:30}] {pos}/{len} {elapsed}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar.set_message(what.to_owned());
    bar
}

/// Loads the database through `engine`.
pub async fn load<E: Engine>(engine: &E, scale: &Scale, config: &TpceConfig) -> Result<()> {
    let batch = config.load_batch.max(1);
    let bar = progress_bar(config.progress, scale.customers, "load");
    let mut lo = 0;
    while lo < scale.customers {
        let hi = (lo + batch).min(scale.customers);
        engine
            .execute(&TxnInput::Load {
                lo,
                hi,
                market: lo == 0,
            })
            .await?;
        bar.set_position(hi);
        lo = hi;
    }
    bar.finish_and_clear();
    Ok(())
}

/// Loads, runs the mix, drains the market and checks the invariants. `feed` is the receiving end
/// of `market`'s channel (see [`Market::new`]).
pub async fn run<E: Engine>(
    engine: E,
    market: Arc<Market>,
    feed: tokio::sync::mpsc::UnboundedReceiver<u64>,
    config: &TpceConfig,
) -> Result<TpceReport> {
    let scale = Scale::of(config.customers);
    let engine = Arc::new(engine);
    let loaded = Instant::now();
    load(engine.as_ref(), &scale, config).await?;
    let load_secs = loaded.elapsed().as_secs_f64();

    let stop = Arc::new(AtomicBool::new(false));
    let feeder = tokio::spawn(feed_loop(Arc::clone(&engine), Arc::clone(&market), feed));
    let aggregator = tokio::spawn(aggregate_loop(
        Arc::clone(&engine),
        Arc::clone(&market.stats),
        scale,
        config.aggregate_every,
        Arc::clone(&stop),
    ));
    let next_trade = Arc::new(AtomicU64::new(scale.history_trades()));
    let began = Instant::now();
    let mut clients = Vec::new();
    for _ in 0..config.clients.max(1) {
        clients.push(tokio::spawn(client_loop(
            Arc::clone(&engine),
            Arc::clone(&market),
            scale,
            Arc::clone(&next_trade),
            Arc::clone(&stop),
        )));
    }
    let bar = progress_bar(config.progress, config.duration.as_millis() as u64, "tpc-e");
    while began.elapsed() < config.duration {
        tokio::time::sleep(Duration::from_millis(100)).await;
        bar.set_position(began.elapsed().as_millis() as u64);
        bar.set_message(format!(
            "{} trades",
            market.stats.count(TxnKind::TradeResult)
        ));
    }
    let secs = began.elapsed().as_secs_f64();
    let snapshot: Vec<(u64, u64, u64)> = TxnKind::ALL
        .iter()
        .map(|k| {
            let s = market.stats.of(*k);
            (
                s.committed.load(Ordering::Relaxed),
                s.attempts.load(Ordering::Relaxed),
                s.failed.load(Ordering::Relaxed),
            )
        })
        .collect();
    stop.store(true, Ordering::Relaxed);
    bar.finish_and_clear();
    for c in clients {
        c.await
            .map_err(|e| Error::Application(format!("client task: {e}")))??;
    }
    let backlog_at_end = market.backlog();
    let drained = market.drain(config.drain_timeout).await;
    aggregator.abort();
    feeder.abort();
    let invariants = engine.verify().await?;
    let emulator_conflicts = engine.emulator_conflicts();
    let prefetch = engine.prefetch();
    let engine_name = engine.name();
    if let Ok(engine) = Arc::try_unwrap(engine) {
        engine.shutdown().await?;
    }

    let mix_total: u64 = TxnKind::ALL
        .iter()
        .filter(|k| k.target_percent() > 0.0)
        .map(|k| snapshot[k.index()].0)
        .sum();
    let kinds = TxnKind::ALL
        .iter()
        .map(|kind| {
            let (committed, mut attempts, failed) = snapshot[kind.index()];
            if *kind == TxnKind::TradeResult {
                attempts += emulator_conflicts;
            }
            let retries = attempts.saturating_sub(committed + failed);
            let latency = &market.stats.of(*kind).latency;
            let ms = |q: f64| latency.quantile(q).as_secs_f64() * 1e3;
            KindReport {
                name: kind.name().into(),
                committed,
                per_sec: committed as f64 / secs,
                mix_percent: if kind.target_percent() > 0.0 {
                    100.0 * committed as f64 / mix_total.max(1) as f64
                } else {
                    0.0
                },
                target_percent: kind.target_percent(),
                p50_ms: ms(0.5),
                p90_ms: ms(0.9),
                p99_ms: ms(0.99),
                retries,
                conflict_rate: retries as f64 / attempts.max(1) as f64,
                failed,
            }
        })
        .collect();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let tps_e = snapshot[TxnKind::TradeResult.index()].0 as f64 / secs;
    Ok(TpceReport {
        engine: engine_name,
        scale,
        load_secs,
        secs,
        clients: config.clients,
        tps_e,
        cores,
        tps_e_per_core: tps_e / cores as f64,
        customers_per_tps_e: scale.customers as f64 / tps_e.max(1e-9),
        txns_per_sec: mix_total as f64 / secs,
        kinds,
        backlog_at_end,
        drained,
        invariants,
        prefetch,
    })
}

/// One customer-emulator task: draws a transaction type by TPC-E's weights, runs it to commit.
async fn client_loop<E: Engine>(
    engine: Arc<E>,
    market: Arc<Market>,
    scale: Scale,
    next_trade: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
) -> Result<()> {
    let mut rng = rand::rngs::SmallRng::from_rng(&mut rand::rng());
    let weights: Vec<f64> = TxnKind::DRIVEN.iter().map(|k| k.target_percent()).collect();
    let total: f64 = weights.iter().sum();
    let chooser = Uniform;
    let take_trade = || next_trade.fetch_add(1, Ordering::Relaxed);
    while !stop.load(Ordering::Relaxed) {
        let mut x = rand::Rng::random_range(&mut rng, 0.0..total);
        let mut kind = TxnKind::DRIVEN[0];
        for (k, w) in TxnKind::DRIVEN.iter().zip(&weights) {
            if x < *w {
                kind = *k;
                break;
            }
            x -= w;
        }
        let input = frames::draw(
            kind,
            &scale,
            &chooser as &dyn KeyChooser,
            &mut rng,
            &take_trade,
            next_trade.load(Ordering::Relaxed),
            now_us(),
        );
        let started = Instant::now();
        match engine.execute(&input).await {
            Ok(done) => {
                market
                    .stats
                    .committed(kind, done.attempts, started.elapsed());
                if let Some((t_id, s_id)) = done.output.trade
                    && kind == TxnKind::TradeOrder
                {
                    market.submitted();
                    let submitted_us = match input {
                        TxnInput::TradeOrder { now_us, .. } => now_us,
                        _ => now_us(),
                    };
                    engine.submitted(t_id, s_id, submitted_us);
                }
            }
            Err(e) if e.is_retryable() => market.stats.failed(kind, engine::MAX_ATTEMPTS),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Market-Feed: once per ten executed trades, new prices for their securities.
async fn feed_loop<E: Engine>(
    engine: Arc<E>,
    market: Arc<Market>,
    mut feed: tokio::sync::mpsc::UnboundedReceiver<u64>,
) {
    let mut rng = rand::rngs::SmallRng::from_rng(&mut rand::rng());
    let mut pending = Vec::new();
    while let Some(s_id) = feed.recv().await {
        pending.push(s_id);
        if pending.len() < 10 {
            continue;
        }
        pending.sort_unstable();
        pending.dedup();
        let ticks = pending
            .drain(..)
            .map(|s| (s, rand::Rng::random_range(&mut rng, -50..=50)))
            .collect();
        let input = TxnInput::MarketFeed {
            ticks,
            now_us: now_us(),
        };
        let started = Instant::now();
        match engine.execute(&input).await {
            Ok(done) => {
                market
                    .stats
                    .committed(TxnKind::MarketFeed, done.attempts, started.elapsed())
            }
            Err(e) => {
                tracing::warn!(error = %e, "market feed failed");
                market.stats.failed(TxnKind::MarketFeed, 1);
            }
        }
    }
}

/// Folds the broker side table into the broker rows every `every`.
async fn aggregate_loop<E: Engine>(
    engine: Arc<E>,
    stats: Arc<Stats>,
    scale: Scale,
    every: Duration,
    stop: Arc<AtomicBool>,
) {
    while !stop.load(Ordering::Relaxed) {
        tokio::time::sleep(every).await;
        for b_id in 0..scale.brokers {
            let started = Instant::now();
            match engine.execute(&TxnInput::BrokerAggregate { b_id }).await {
                Ok(done) => {
                    stats.committed(TxnKind::BrokerAggregate, done.attempts, started.elapsed())
                }
                Err(e) => {
                    tracing::warn!(error = %e, "broker aggregation failed");
                    stats.failed(TxnKind::BrokerAggregate, 1);
                }
            }
        }
    }
}

/// Runs the benchmark on Percolator over `store` (with the store's shared local oracle).
pub async fn run_percolator<S: percolator_core::RowStore>(
    store: Arc<S>,
    config: &TpceConfig,
) -> Result<TpceReport> {
    run_percolator_with_oracle(store, None, config).await
}

/// Runs the benchmark on Percolator over `store`, taking timestamps from `oracle` if given.
pub async fn run_percolator_with_oracle<S: percolator_core::RowStore>(
    store: Arc<S>,
    oracle: Option<Arc<dyn percolator_core::TimestampOracle>>,
    config: &TpceConfig,
) -> Result<TpceReport> {
    let (market, feed) = Market::new(Arc::new(Stats::default()));
    let scale = Scale::of(config.customers);
    let options = engine::EngineOptions {
        batch_reads: config.batch_reads,
        background_secondaries: config.background_secondaries,
    };
    let engine =
        engine::PercolatorEngine::start_with(store, scale, Arc::clone(&market), oracle, options)
            .await?;
    run(engine, market, feed, config).await
}

/// Runs the benchmark on the peer baseline, sled's own transactions, in `path` (emptied first).
pub async fn run_sled_peer(path: &std::path::Path, config: &TpceConfig) -> Result<TpceReport> {
    let (market, feed) = Market::new(Arc::new(Stats::default()));
    let scale = Scale::of(config.customers);
    let engine = engine::SledPeer::open_sled(path, scale, Arc::clone(&market), 16)?;
    run(engine, market, feed, config).await
}

/// Runs the benchmark on the peer baseline on fjall, fjall's own optimistic transactions, in
/// `path` (emptied first).
pub async fn run_fjall_peer(path: &std::path::Path, config: &TpceConfig) -> Result<TpceReport> {
    let (market, feed) = Market::new(Arc::new(Stats::default()));
    let scale = Scale::of(config.customers);
    let engine = fjall_peer::FjallPeer::open_fjall(path, scale, Arc::clone(&market), 16)?;
    run(engine, market, feed, config).await
}

/// Runs the benchmark on the peer baseline on etcd's own mini-transactions (STM style), on the
/// cluster at `endpoints` (comma-separated client URLs), under a fresh namespace.
#[cfg(feature = "etcd")]
pub async fn run_etcd_peer(endpoints: &str, config: &TpceConfig) -> Result<TpceReport> {
    let (market, feed) = Market::new(Arc::new(Stats::default()));
    let scale = Scale::of(config.customers);
    let engine = etcd_peer::EtcdPeer::open_etcd(endpoints, scale, Arc::clone(&market), 16).await?;
    run(engine, market, feed, config).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> TpceConfig {
        TpceConfig {
            customers: 20,
            duration: Duration::from_millis(400),
            clients: 4,
            progress: false,
            aggregate_every: Duration::from_millis(20),
            ..TpceConfig::quick()
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn percolator_on_mem_runs_the_mix_and_keeps_the_invariants() {
        let store = Arc::new(percolator_backend_mem::MemStore::new());
        let report = run_percolator(store, &tiny()).await.unwrap();
        assert!(report.drained, "{}", report.table());
        assert!(report.invariants.ok(), "{}", report.table());
        assert!(report.invariants.trades > 0, "{}", report.table());
        let tr = &report.kinds[TxnKind::TradeResult.index()];
        assert!(tr.committed > 0 && report.tps_e > 0.0, "{}", report.table());
        for kind in TxnKind::DRIVEN {
            assert!(
                report.kinds[kind.index()].committed > 0,
                "{} never ran: {}",
                kind.name(),
                report.table()
            );
        }
        assert!(report.table().contains("Trade-Result"));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn peers_run_the_same_mix_and_keep_the_invariants() {
        let dir = tempfile::tempdir().unwrap();
        for (name, report) in [
            (
                "sled",
                run_sled_peer(&dir.path().join("sled"), &tiny()).await,
            ),
            (
                "fjall",
                run_fjall_peer(&dir.path().join("fjall"), &tiny()).await,
            ),
        ] {
            let report = report.unwrap();
            assert!(report.engine.contains(name), "{}", report.engine);
            assert!(report.drained, "{}", report.table());
            assert!(report.invariants.ok(), "{}", report.table());
            assert!(report.invariants.trades > 0, "{}", report.table());
            assert!(report.tps_e > 0.0);
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_check_catches_a_broken_balance() {
        let store = Arc::new(percolator_backend_mem::MemStore::new());
        let (market, _feed) = Market::new(Arc::new(Stats::default()));
        let config = tiny();
        let scale = Scale::of(config.customers);
        let engine = engine::PercolatorEngine::start(Arc::clone(&store), scale, market, None, true)
            .await
            .unwrap();
        load(&engine, &scale, &config).await.unwrap();
        assert!(engine.verify().await.unwrap().ok());
        // Money appears from nowhere: the check must say so.
        let client = percolator_core::Client::open(store).await.unwrap();
        let mut txn = client.begin().await.unwrap();
        txn.set(
            schema::table::ACCOUNT,
            schema::key(&[3]),
            schema::COLUMN,
            schema::record(&[0, scale.broker_of(3) as i64, schema::INITIAL_BALANCE + 1]),
        )
        .unwrap();
        txn.commit().await.unwrap();
        let report = engine.verify().await.unwrap();
        assert_eq!(report.violation_count, 1, "{report:?}");
        assert!(report.violations[0].contains("account 3"));
        engine.shutdown().await.unwrap();
    }
}
