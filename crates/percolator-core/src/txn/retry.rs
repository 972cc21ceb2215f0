//! Backoff for lock waits, and the `run` helper that re-runs a whole transaction on conflict.
//!
//! The helper re-runs the **entire closure** — reads included — on a fresh snapshot; it never
//! replays buffered writes, because writes computed from reads of an old snapshot would violate
//! snapshot isolation (the classic retry bug in Percolator-style clients).

use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use rand::Rng as _;

use crate::error::{Error, Result};
use crate::records::CellAddr;
use crate::store::RowStore;

use super::{Client, Transaction, TxnConfig};

/// Exponential backoff with full jitter between `backoff_base` and `backoff_max`.
pub(crate) struct Backoff {
    next: Duration,
    max: Duration,
}

impl Backoff {
    pub(crate) fn new(config: &TxnConfig) -> Self {
        Self {
            next: config.backoff_base,
            max: config.backoff_max,
        }
    }

    pub(crate) async fn wait(&mut self) {
        let cap = u64::try_from(self.next.as_micros())
            .unwrap_or(u64::MAX)
            .max(1);
        let jitter = rand::rng().random_range(cap / 2..=cap);
        tokio::time::sleep(Duration::from_micros(jitter)).await;
        self.next = self.next.saturating_mul(2).min(self.max);
    }

    /// Sleeps before the next attempt, or fails with [`Error::LockWaitTimeout`] once the
    /// configured lock-wait limit has passed since `started`.
    pub(crate) async fn wait_or_timeout(
        &mut self,
        started: Instant,
        addr: &CellAddr,
        lock_ts: u64,
        config: &TxnConfig,
    ) -> Result<()> {
        let waited = started.elapsed();
        if waited >= config.lock_wait_timeout {
            return Err(Error::LockWaitTimeout {
                table: String::from_utf8_lossy(&addr.table).into_owned(),
                row: String::from_utf8_lossy(&addr.row).into_owned(),
                column: String::from_utf8_lossy(&addr.column).into_owned(),
                lock_ts,
                waited_ms: u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
            });
        }
        self.wait().await;
        Ok(())
    }
}

impl<S: RowStore> Client<S> {
    /// Runs `body` in a transaction and commits it; on a retryable error (conflict, lock-wait
    /// timeout, rollback by a cleaner, store unavailable) starts a **new** transaction and runs
    /// the whole closure again, with backoff, up to [`TxnConfig::max_attempts`] times.
    ///
    /// ```text
    /// let total = client
    ///     .run(|txn| Box::pin(async move {
    ///         let v = txn.get("t", "r", "c").await?;
    ///         txn.set("t", "r", "c", "new")?;
    ///         Ok(v)
    ///     }))
    ///     .await?;
    /// ```
    pub async fn run<T, F>(&self, mut body: F) -> Result<T>
    where
        T: Send,
        F: for<'t> FnMut(&'t mut Transaction<S>) -> BoxFuture<'t, Result<T>> + Send,
    {
        let mut backoff = Backoff::new(self.config());
        let mut attempt = 1u32;
        loop {
            let mut txn = self.begin().await?;
            let result = match body(&mut txn).await {
                Ok(value) => txn.commit().await.map(|_| value),
                Err(e) => Err(e),
            };
            match result {
                Ok(value) => return Ok(value),
                Err(e) if e.is_retryable() && attempt < self.config().max_attempts => {
                    self.inner.metrics.retried();
                    attempt += 1;
                    backoff.wait().await;
                }
                Err(e) => return Err(e),
            }
        }
    }
}
