//! Timestamp oracle (paper §2.3): strictly increasing timestamps, never backwards across restarts.
//!
//! - [`TimestampOracle`]: what transactions ask for timestamps.
//! - [`LocalOracle`] (`local`): a window of timestamps in memory over a high-water mark persisted
//!   in the store (`mark`), fenced by a lease on stores several processes can share, so that a
//!   second oracle can never interleave its timestamps with the first one's.
//! - [`shared_local_oracle`]: the one `LocalOracle` per store in this process; a second one on a
//!   store that has one open is refused (`registry`).
//!
//! **One store, one oracle.** Processes that share a store need one oracle service (PD's TSO for
//! TiKV); a `LocalOracle` on a shared store is safe (the lease fences it) but lets one process
//! allocate at a time.

mod local;
mod mark;
mod registry;
pub mod time;

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Weak};

use async_trait::async_trait;

use crate::error::Result;
use crate::store::RowStore;

pub use local::{DEFAULT_LEASE, LocalOracle, OracleConfig};
pub use time::{Clock, OracleClock, SkewedClock, SystemClock};

/// Hands out strictly increasing timestamps that carry oracle time: milliseconds on the oracle's
/// clock in the high bits, a logical counter in the low [`time::LOGICAL_BITS`] (PD's layout).
/// Clients judge lock TTLs and worker leases in that time ([`OracleClock`]); an oracle that
/// counted from 1 instead would leave them nothing to judge by.
#[async_trait]
pub trait TimestampOracle: Send + Sync + 'static {
    /// A timestamp greater than every timestamp this oracle returned before (in this process or
    /// an earlier one).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::{LocalOracle, TimestampOracle};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// let oracle = LocalOracle::open(Arc::new(MemStore::new())).await?;
    /// let first = oracle.timestamp().await?;
    /// let second = oracle.timestamp().await?;
    /// assert!(second > first && first > 0);
    /// # Ok(()) }
    /// ```
    async fn timestamp(&self) -> Result<u64>;

    /// A timestamp if one is at hand without waiting (an in-process window), else `None`; then
    /// call [`Self::timestamp`]. Callers on the hot path try this first: it costs no future.
    fn timestamp_now(&self) -> Option<u64> {
        None
    }

    /// `count` (at least 1) consecutive timestamps, returned as the first of them: one request
    /// for a batch of callers (the paper's oracle batches requests the same way).
    async fn timestamps(&self, count: u64) -> Result<u64> {
        let first = self.timestamp().await?;
        for _ in 1..count {
            self.timestamp().await?;
        }
        Ok(first)
    }

    /// Gives up whatever the oracle holds in a shared store (a [`LocalOracle`]'s lease) so
    /// that another process can take over at once; called by [`crate::Client::shutdown`] when
    /// the client is the oracle's last user. Nothing by default.
    async fn release(&self) -> Result<()> {
        Ok(())
    }
}

/// A timestamp from `oracle`: its window if it has one at hand, else a request.
pub async fn next_timestamp(oracle: &dyn TimestampOracle) -> Result<u64> {
    match oracle.timestamp_now() {
        Some(ts) => Ok(ts),
        None => oracle.timestamp().await,
    }
}

/// Default oracle time a [`LocalOracle`] persists ahead per allocation (PD's save interval).
pub const DEFAULT_WINDOW: std::time::Duration = std::time::Duration::from_secs(3);

/// Live oracles by [`RowStore::store_id`]: one [`LocalOracle`] per store per process.
static SHARED: LazyLock<tokio::sync::Mutex<HashMap<String, Weak<dyn TimestampOracle>>>> =
    LazyLock::new(|| tokio::sync::Mutex::new(HashMap::new()));

/// The process-wide [`LocalOracle`] of `store`, opened on first use.
///
/// Every [`crate::Client`] built without an explicit oracle uses this, so that all clients of one
/// store in one process draw from a single sequence (two oracles on one store would hand out
/// interleaved ranges and break snapshot isolation). Stores are told apart by
/// [`RowStore::store_id`], which names the data a handle reaches: a second handle on the same
/// data (a reopened TiKV namespace) and every wrapper (which forwards the id of the store it
/// wraps) get the same oracle. The entry lives as long as some client holds the oracle.
pub async fn shared_local_oracle<S: RowStore>(store: &Arc<S>) -> Result<Arc<dyn TimestampOracle>> {
    let key = store.store_id();
    let mut shared = SHARED.lock().await;
    if let Some(oracle) = shared.get(&key).and_then(Weak::upgrade) {
        return Ok(oracle);
    }
    shared.retain(|_, weak| weak.strong_count() > 0);
    let oracle: Arc<dyn TimestampOracle> = Arc::new(LocalOracle::open(Arc::clone(store)).await?);
    shared.insert(key, Arc::downgrade(&oracle));
    Ok(oracle)
}
