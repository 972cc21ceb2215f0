//! What the peer baselines share: an [`Engine`] over an engine's own transactions
//! ([`PeerCore`]), whose Trade-Results are run by tasks fed from an in-process queue (what an
//! embedded user would build), the market told of each as Percolator's observer tells it.

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use percolator_core::{Error, Result};
use tokio::sync::{Mutex, mpsc};

use super::check::InvariantReport;
use super::engine::{Engine, Executed};
use super::frames::{TxnInput, TxnKind};
use super::market::{Market, now_us};

/// A peer baseline's own transactions.
pub trait PeerCore: Send + Sync + 'static {
    /// Its name in reports.
    fn name(&self) -> String;
    /// Runs `input` to commit in one of the peer's transactions (its conflicts retried).
    fn execute(&self, input: &TxnInput) -> impl Future<Output = Result<Executed>> + Send;
    /// The end-of-run invariants, read at one point (the market has drained).
    fn verify(&self) -> impl Future<Output = Result<InvariantReport>> + Send;
    /// Makes what was written durable before the run ends.
    fn close(&self) -> impl Future<Output = Result<()>> + Send;
}

/// What a peer's engine and its Trade-Result tasks share.
struct Shared<P> {
    core: P,
    market: Arc<Market>,
    /// Submitted trades, for the Trade-Result tasks.
    queue: mpsc::UnboundedSender<(u64, u64, i64)>,
    /// Conflicts of Trade-Result runs.
    conflicts: AtomicU64,
}

/// A peer baseline: its transactions and its Trade-Result tasks.
pub struct Peer<P: PeerCore> {
    shared: Arc<Shared<P>>,
    workers: Vec<tokio::task::JoinHandle<()>>,
}

impl<P: PeerCore> Peer<P> {
    /// Starts `executors` Trade-Result tasks over `core`, telling `market`.
    pub fn start(core: P, market: Arc<Market>, executors: usize) -> Self {
        let (queue, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            core,
            market,
            queue,
            conflicts: AtomicU64::new(0),
        });
        let rx = Arc::new(Mutex::new(rx));
        let workers = (0..executors.max(1))
            .map(|_| tokio::spawn(trade_result_worker(Arc::clone(&shared), Arc::clone(&rx))))
            .collect();
        Self { shared, workers }
    }
}

/// Empties `path` (a peer's database directory) if it exists.
pub fn empty_dir(path: &Path) -> Result<()> {
    if path.exists() {
        std::fs::remove_dir_all(path)
            .map_err(|e| Error::Application(format!("emptying {}: {e}", path.display())))?;
    }
    Ok(())
}

/// A Trade-Result task: executes the trades submitted to the queue until it closes.
async fn trade_result_worker<P: PeerCore>(
    shared: Arc<Shared<P>>,
    rx: Arc<Mutex<mpsc::UnboundedReceiver<(u64, u64, i64)>>>,
) {
    loop {
        let next = rx.lock().await.recv().await;
        let Some((t_id, s_id, submitted_us)) = next else {
            return;
        };
        let input = TxnInput::TradeResult {
            t_id,
            now_us: now_us(),
        };
        match shared.core.execute(&input).await {
            Ok(done) => {
                shared
                    .conflicts
                    .fetch_add(done.attempts.saturating_sub(1), Ordering::Relaxed);
                shared.market.executed(s_id, submitted_us, done.attempts);
            }
            Err(e) => {
                tracing::warn!(t_id, error = %e, "trade result failed");
                shared.market.stats.failed(TxnKind::TradeResult, 1);
            }
        }
        tokio::task::consume_budget().await;
    }
}

impl<P: PeerCore> Engine for Peer<P> {
    fn name(&self) -> String {
        self.shared.core.name()
    }

    async fn execute(&self, input: &TxnInput) -> Result<Executed> {
        tokio::task::consume_budget().await;
        self.shared.core.execute(input).await
    }

    fn submitted(&self, t_id: u64, s_id: u64, submitted_us: i64) {
        let _ = self.shared.queue.send((t_id, s_id, submitted_us));
    }

    async fn verify(&self) -> Result<InvariantReport> {
        self.shared.core.verify().await
    }

    fn emulator_conflicts(&self) -> u64 {
        self.shared.conflicts.load(Ordering::Relaxed)
    }

    async fn shutdown(self) -> Result<()> {
        for w in &self.workers {
            w.abort();
        }
        self.shared.core.close().await
    }
}
