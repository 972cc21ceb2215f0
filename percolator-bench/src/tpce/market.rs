//! The market emulator's shared state: trades submitted and executed (so the run can wait for
//! the market to drain), Trade-Result statistics, and the channel feeding executed securities to
//! the Market-Feed task.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::mpsc;

use super::frames::TxnKind;
use super::stats::Stats;

/// Microseconds since the Unix epoch (wall time, stored in trades; latencies are differences).
pub fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

/// Shared by the driver, the engine's Trade-Result executor and the feed task.
#[derive(Debug)]
pub struct Market {
    /// Statistics of every transaction type.
    pub stats: Arc<Stats>,
    submitted: AtomicU64,
    executed: AtomicU64,
    feed: mpsc::UnboundedSender<u64>,
}

impl Market {
    /// A market and the receiving end of its feed (securities of executed trades).
    pub fn new(stats: Arc<Stats>) -> (Arc<Self>, mpsc::UnboundedReceiver<u64>) {
        let (feed, rx) = mpsc::unbounded_channel();
        let market = Arc::new(Self {
            stats,
            submitted: AtomicU64::new(0),
            executed: AtomicU64::new(0),
            feed,
        });
        (market, rx)
    }

    /// A Trade-Order committed.
    pub fn submitted(&self) {
        self.submitted.fetch_add(1, Ordering::Relaxed);
    }

    /// A Trade-Result committed for a trade of security `s_id` submitted at `submitted_us`,
    /// after `attempts` attempts.
    pub fn executed(&self, s_id: u64, submitted_us: i64, attempts: u64) {
        self.executed.fetch_add(1, Ordering::Relaxed);
        let waited = u64::try_from(now_us().saturating_sub(submitted_us)).unwrap_or(0);
        self.stats.committed(
            TxnKind::TradeResult,
            attempts,
            Duration::from_micros(waited),
        );
        // The feed task may be gone at shutdown; prices then simply stop moving.
        let _ = self.feed.send(s_id);
    }

    /// Trades submitted but not executed yet.
    pub fn backlog(&self) -> u64 {
        self.submitted
            .load(Ordering::Relaxed)
            .saturating_sub(self.executed.load(Ordering::Relaxed))
    }

    /// Waits until every submitted trade is executed, or `timeout`.
    pub async fn drain(&self, timeout: Duration) -> bool {
        let until = tokio::time::Instant::now() + timeout;
        while self.backlog() > 0 {
            if tokio::time::Instant::now() >= until {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        true
    }
}
