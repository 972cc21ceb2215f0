//! The two systems the benchmark drives through the same frames: Percolator over any
//! [`RowStore`] (Trade-Result run by an observer on submitted trades, as the paper's market
//! emulator would be), and the peer baselines, sled's own transactions here and fjall's in
//! [`super::fjall_peer`] (Trade-Result run by tasks fed from an in-process queue — what an
//! embedded user would build).

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use percolator_core::internal::backoff::Backoff;
use percolator_core::{Client, Error, ObservedColumn, Result, RowStore, Transaction, TxnConfig};
use percolator_observers::{Change, Observer, Observers, Runtime, RuntimeConfig};

use super::check::{self, InvariantReport};
use super::frames::{self, FrameOutput, TxnInput, decode_request};
use super::kv::{PercolatorKv, SledAccess, SledKv, sled_scan};
use super::market::{Market, now_us};
use super::peer::{Peer, PeerCore, empty_dir};
use super::schema::{COLUMN, Scale, table};

/// A committed transaction.
#[derive(Debug, Clone, Copy)]
pub struct Executed {
    /// What the frames reported.
    pub output: FrameOutput,
    /// Attempts it took (1: no conflict).
    pub attempts: u64,
}

/// What prefetching did in a run.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct PrefetchStats {
    /// Whether the engine's transactions prefetch at all (`TxnConfig::prefetch` on this store).
    pub enabled: bool,
    /// Cells read ahead of a read.
    pub prefetched_cells: u64,
    /// Prefetched cells a later read took from the cache.
    pub hits: u64,
}

/// Attempts before a transaction is given up.
pub const MAX_ATTEMPTS: u64 = 50;

/// A system under test.
pub trait Engine: Send + Sync + 'static {
    /// Its name in reports.
    fn name(&self) -> String;

    /// Runs `input` to commit, retrying conflicts up to [`MAX_ATTEMPTS`] times.
    fn execute(&self, input: &TxnInput) -> impl Future<Output = Result<Executed>> + Send;

    /// A Trade-Order for trade `t_id` of security `s_id` committed: the market must execute it.
    fn submitted(&self, t_id: u64, s_id: u64, submitted_us: i64);

    /// Checks the end-of-run invariants in one transaction.
    fn verify(&self) -> impl Future<Output = Result<InvariantReport>> + Send;

    /// Conflicts of Trade-Result runs the engine retried internally.
    fn emulator_conflicts(&self) -> u64;

    /// Cells read ahead and the reads they answered (Percolator's prefetching), where the
    /// engine prefetches.
    fn prefetch(&self) -> Option<PrefetchStats> {
        None
    }

    /// Stops background work.
    fn shutdown(self) -> impl Future<Output = Result<()>> + Send;
}

/// Percolator over `S`.
pub struct PercolatorEngine<S: RowStore> {
    runtime: Runtime<S>,
    scale: Scale,
    batch_reads: bool,
    background_secondaries: bool,
}

/// How the Percolator engine runs its transactions: the switches the benchmark measures
/// against each other in one run.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct EngineOptions {
    /// Read the rows a frame reads together in one batch (see [`PercolatorKv::batch_reads`]).
    pub batch_reads: bool,
    /// Return from `commit` at the commit point
    /// ([`TxnConfig::background_secondaries`](percolator_core::TxnConfig::background_secondaries)).
    pub background_secondaries: bool,
}

impl Default for EngineOptions {
    fn default() -> Self {
        Self {
            batch_reads: true,
            background_secondaries: TxnConfig::default().background_secondaries,
        }
    }
}

/// The market emulator's Trade-Result: an observer on [`table::TRADE_REQUEST`].
struct TradeResultObserver {
    market: Arc<Market>,
    batch_reads: bool,
}

const OBSERVER: &str = "tpce-market-emulator";

#[async_trait]
impl<S: RowStore> Observer<S> for TradeResultObserver {
    fn name(&self) -> &str {
        OBSERVER
    }

    fn observed(&self) -> ObservedColumn {
        ObservedColumn::strong(table::TRADE_REQUEST, COLUMN)
    }

    async fn observe(&self, txn: &mut Transaction<S>, change: &Change) -> Result<()> {
        if change.value.is_none() {
            return Ok(());
        }
        let t_id = super::schema::key_part(&change.row, 0)?;
        let input = TxnInput::TradeResult {
            t_id,
            now_us: now_us(),
        };
        // The frames need the scale only for Load; any scale will do here.
        let mut kv = PercolatorKv {
            txn,
            batch_reads: self.batch_reads,
        };
        frames::run(&mut kv, &input, &Scale::of(10)).await?;
        Ok(())
    }

    fn committed(&self, change: &Change) {
        if let Some(value) = &change.value
            && let Ok((_, s_id, submitted_us)) = decode_request(value)
        {
            self.market.executed(s_id, submitted_us, 1);
        }
    }
}

impl<S: RowStore> PercolatorEngine<S> {
    /// Starts a worker on `store` whose observer is the market emulator; `batch_reads`: see
    /// [`PercolatorKv::batch_reads`].
    pub async fn start(
        store: Arc<S>,
        scale: Scale,
        market: Arc<Market>,
        oracle: Option<Arc<dyn percolator_core::TimestampOracle>>,
        batch_reads: bool,
    ) -> Result<Self> {
        let options = EngineOptions {
            batch_reads,
            ..EngineOptions::default()
        };
        Self::start_with(store, scale, market, oracle, options).await
    }

    /// [`Self::start`] with every option.
    pub async fn start_with(
        store: Arc<S>,
        scale: Scale,
        market: Arc<Market>,
        oracle: Option<Arc<dyn percolator_core::TimestampOracle>>,
        options: EngineOptions,
    ) -> Result<Self> {
        let EngineOptions {
            batch_reads,
            background_secondaries,
        } = options;
        let mut observers = Observers::new();
        observers.register(TradeResultObserver {
            market,
            batch_reads,
        })?;
        let config = RuntimeConfig::default()
            .with_scanners(2)
            .with_max_concurrent_runs(16)
            .with_idle_sleep_max(Duration::from_millis(5));
        // The benchmark is the only process on its store: without a shared oracle, the local one.
        let client = match oracle {
            Some(oracle) => Client::builder(store).oracle(oracle),
            None => Client::builder(store).local_oracle(),
        }
        .config(TxnConfig::default().with_background_secondaries(background_secondaries));
        let runtime = Runtime::start(client, observers, config).await?;
        Ok(Self {
            runtime,
            scale,
            batch_reads,
            background_secondaries,
        })
    }
}

impl<S: RowStore> Engine for PercolatorEngine<S> {
    fn name(&self) -> String {
        let store = self.runtime.client().store().name();
        let mut name = format!("percolator/{store}");
        if !self.batch_reads {
            name.push_str(" (single reads)");
        }
        if !self.background_secondaries {
            name.push_str(" (secondaries before the return)");
        }
        name
    }

    async fn execute(&self, input: &TxnInput) -> Result<Executed> {
        let mut attempts = 0;
        let mut backoff = Backoff::new(Duration::from_micros(200), Duration::from_millis(5));
        loop {
            attempts += 1;
            let mut txn = self.runtime.client().begin().await?;
            let outcome = frames::run(
                &mut PercolatorKv {
                    txn: &mut txn,
                    batch_reads: self.batch_reads,
                },
                input,
                &self.scale,
            )
            .await;
            let result = match outcome {
                Ok(output) => txn.commit().await.map(|_| output),
                Err(e) => Err(e),
            };
            match result {
                Ok(output) => return Ok(Executed { output, attempts }),
                Err(e) if e.is_retryable() && attempts < MAX_ATTEMPTS => {
                    // Yield for the first retries (most conflicts clear at once), then back off.
                    if attempts < 3 {
                        tokio::task::yield_now().await;
                    } else {
                        backoff.wait().await;
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn submitted(&self, _t_id: u64, _s_id: u64, _submitted_us: i64) {
        // The Trade-Order's write of the request row is the notification.
    }

    async fn verify(&self) -> Result<InvariantReport> {
        let mut txn = self.runtime.client().begin().await?;
        let mut kv = PercolatorKv {
            txn: &mut txn,
            batch_reads: self.batch_reads,
        };
        check::verify(&mut kv, &self.scale).await
    }

    fn prefetch(&self) -> Option<PrefetchStats> {
        let client = self.runtime.client();
        let metrics = client.metrics();
        let enabled = match client.config().prefetch {
            percolator_core::Prefetch::Off => false,
            percolator_core::Prefetch::Always => true,
            _ => client.store().limits().distributed,
        };
        Some(PrefetchStats {
            enabled,
            prefetched_cells: metrics.prefetched_cells,
            hits: metrics.prefetch_hits,
        })
    }

    fn emulator_conflicts(&self) -> u64 {
        self.runtime.stats().conflicts
    }

    async fn shutdown(self) -> Result<()> {
        self.runtime.shutdown().await.map(|_| ())
    }
}

/// The peer baseline: sled's own serializable transactions over one tree.
pub type SledPeer = Peer<SledShared>;

/// The sled peer's state (see [`SledPeer`]).
pub struct SledShared {
    db: sled::Db,
    tree: sled::Tree,
    scale: Scale,
}

impl SledShared {
    fn execute_blocking(&self, input: &TxnInput) -> Result<Executed> {
        if input.kind().is_read_only() {
            let mut kv = SledKv {
                access: SledAccess::Direct(&self.tree),
                prefetched: None,
                conflict: false,
            };
            let output = futures::executor::block_on(frames::run(&mut kv, input, &self.scale))?;
            return Ok(Executed {
                output,
                attempts: 1,
            });
        }
        // Only the aggregator deletes increments, so the ones read here stay put.
        let prefetched = match input {
            TxnInput::BrokerAggregate { b_id } => Some(sled_scan(
                &self.tree,
                table::BROKER_DELTA,
                &super::schema::key(&[*b_id]),
                10_000,
            )?),
            _ => None,
        };
        let attempts = AtomicU64::new(0);
        let result = self.tree.transaction(|tx| {
            attempts.fetch_add(1, Ordering::Relaxed);
            let mut kv = SledKv {
                access: SledAccess::Transaction(tx),
                prefetched: prefetched.clone(),
                conflict: false,
            };
            let outcome = futures::executor::block_on(frames::run(&mut kv, input, &self.scale));
            outcome.map_err(|e| {
                if kv.conflict {
                    sled::transaction::ConflictableTransactionError::Conflict
                } else {
                    sled::transaction::ConflictableTransactionError::Abort(e)
                }
            })
        });
        let attempts = attempts.load(Ordering::Relaxed);
        match result {
            Ok(output) => Ok(Executed { output, attempts }),
            Err(sled::transaction::TransactionError::Abort(e)) => Err(e),
            Err(sled::transaction::TransactionError::Storage(e)) => {
                Err(Error::Application(format!("sled: {e}")))
            }
        }
    }
}

impl Peer<SledShared> {
    /// Opens (emptied first) a sled database at `path` and starts `executors` Trade-Result
    /// tasks.
    pub fn open_sled(
        path: &Path,
        scale: Scale,
        market: Arc<Market>,
        executors: usize,
    ) -> Result<Self> {
        empty_dir(path)?;
        let db = sled::open(path)
            .map_err(|e| Error::Application(format!("opening {}: {e}", path.display())))?;
        let tree = db
            .open_tree("tpce")
            .map_err(|e| Error::Application(format!("opening tree: {e}")))?;
        Ok(Peer::start(
            SledShared { db, tree, scale },
            market,
            executors,
        ))
    }
}

impl PeerCore for SledShared {
    fn name(&self) -> String {
        "sled transactions (peer)".into()
    }

    async fn execute(&self, input: &TxnInput) -> Result<Executed> {
        self.execute_blocking(input)
    }

    async fn verify(&self) -> Result<InvariantReport> {
        // Run after the market drained: nothing writes any more, direct reads see one state.
        let mut kv = SledKv {
            access: SledAccess::Direct(&self.tree),
            prefetched: None,
            conflict: false,
        };
        futures::executor::block_on(check::verify(&mut kv, &self.scale))
    }

    async fn close(&self) -> Result<()> {
        self.db
            .flush_async()
            .await
            .map(|_| ())
            .map_err(|e| Error::Application(format!("sled flush: {e}")))
    }
}
