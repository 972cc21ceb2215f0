//! The `run` helper that re-runs a whole transaction on conflict (with [`Backoff`] between
//! attempts).
//!
//! The helper re-runs the **entire closure** — reads included — on a fresh snapshot; it never
//! replays buffered writes, because writes computed from reads of an old snapshot would violate
//! snapshot isolation (the classic retry bug in Percolator-style clients).

use futures::future::BoxFuture;

use crate::backoff::Backoff;
use crate::error::Result;
use crate::store::RowStore;

use super::{Client, Transaction};

impl<S: RowStore> Client<S> {
    /// Runs `body` in a transaction and commits it; on a retryable error (conflict, lock-wait
    /// timeout, rollback by a cleaner, store unavailable) starts a **new** transaction and runs
    /// the whole closure again, with backoff, up to [`super::TxnConfig::max_attempts`] times.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::Client;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// # let client = Client::open(Arc::new(MemStore::new())).await?;
    /// let total = client
    ///     .run(|txn| Box::pin(async move {
    ///         let v = txn.get("t", "r", "c").await?;
    ///         txn.set("t", "r", "c", "new")?;
    ///         Ok(v)
    ///     }))
    ///     .await?;
    /// assert_eq!(total, None); // the value before the write
    ///
    /// // A read-modify-write counter: on a conflict the whole closure runs again.
    /// for _ in 0..3 {
    ///     client
    ///         .run(|txn| Box::pin(async move {
    ///             let hits = match txn.get("counters", "page", "hits").await? {
    ///                 Some(v) => String::from_utf8_lossy(&v).parse::<u64>().unwrap_or(0),
    ///                 None => 0,
    ///             };
    ///             txn.set("counters", "page", "hits", (hits + 1).to_string())
    ///         }))
    ///         .await?;
    /// }
    /// let txn = client.begin().await?;
    /// assert_eq!(txn.get("counters", "page", "hits").await?.as_deref(), Some(&b"3"[..]));
    /// # client.shutdown().await }
    /// ```
    pub async fn run<T, F>(&self, mut body: F) -> Result<T>
    where
        T: Send,
        F: for<'t> FnMut(&'t mut Transaction<S>) -> BoxFuture<'t, Result<T>> + Send,
    {
        let mut backoff = Backoff::from_config(self.config());
        let mut attempt = 1u32;
        loop {
            // A failed begin (the oracle's refill could not sync, say) is an attempt too.
            let result = match self.begin().await {
                Ok(mut txn) => match body(&mut txn).await {
                    Ok(value) => txn.commit().await.map(|_| value),
                    Err(e) => Err(e),
                },
                Err(e) => Err(e),
            };
            match result {
                Ok(value) => return Ok(value),
                Err(e) if e.is_retryable() && attempt < self.config().max_attempts => {
                    self.inner.metrics.retried();
                    attempt += 1;
                    if matches!(e, crate::Error::SnapshotTooOld { .. }) {
                        // The lease lapsed: renew it now rather than wait for the background
                        // renewal, so that the next attempt's snapshot is safe again.
                        if let Err(renewal) = self.renew_lease().await {
                            tracing::debug!(error = %renewal, "could not renew the lease");
                        }
                    }
                    backoff.wait().await;
                }
                Err(e) => return Err(e),
            }
        }
    }
}
