//! The dead-worker sweep: ends the leases of workers that are gone and resolves the locks they
//! left, so a crashed worker's locks do not wait for a reader that may never come.
//!
//! Readers resolve a dead owner's lock lazily, when they meet it. Locks on cells nobody reads
//! again (an observer's secondary writes, a killed run's prewrites) would stay until the next
//! full garbage collection, and `percolator status` would go on reporting them after a run
//! that finished cleanly. The observer runtime calls this sweep on a timer instead.
//!
//! A worker is dead when its lease has lapsed (oracle time, as everywhere), or, on a store one
//! process owns (not [`crate::StoreLimits::distributed`]), when it is not a client of this
//! process ([`crate::liveness::is_worker_of_this_process`]): the engine's file lock means its
//! process has ended, so its lease is ended at once rather than waited out.
//!
//! The sweep is cheap when nobody died: one read of the (small) workers table. Only when it
//! ends a lease does it read the lock family of every user table.

use std::sync::Arc;

use bytes::Bytes;

use crate::error::Result;
use crate::liveness::{StoreLiveness, WorkerLease, is_worker_of_this_process};
use crate::store::RowStore;
use crate::tables::RESERVED_PREFIX;
use crate::txn::Client;

/// What one [`Client::sweep_dead_workers`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeadWorkerSweep {
    /// Leases of dead workers removed.
    pub leases_ended: usize,
    /// Locks resolved (rolled forward or back through their primary).
    pub locks_resolved: usize,
    /// Locks left because their owner is alive and within its TTL.
    pub locks_left: usize,
}

impl<S: RowStore> Client<S> {
    /// Whether the worker holding `lease` is dead as of oracle time `now_ms` (see the module
    /// docs): its lease lapsed, or the store is one process's and the worker is not of this
    /// process.
    fn is_dead(&self, lease: &WorkerLease, now_ms: u64) -> bool {
        if lease.worker == self.worker_id() {
            return false;
        }
        lease.until_ms < now_ms
            || (!self.inner.store.limits().distributed && !is_worker_of_this_process(lease.worker))
    }

    /// Removes the leases of dead workers (see the module docs) and returns how many it removed.
    /// A worker that renews meanwhile keeps its lease.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::Client;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// let store = Arc::new(MemStore::new());
    /// let crashed = Client::open(Arc::clone(&store)).await?;
    /// let client = Client::open(store).await?;
    /// drop(crashed); // gone without `shutdown`: its lease stays in the store
    /// assert_eq!(client.end_dead_leases().await?, 1);
    /// assert_eq!(client.end_dead_leases().await?, 0); // ended already
    /// # client.shutdown().await }
    /// ```
    pub async fn end_dead_leases(&self) -> Result<usize> {
        let liveness = StoreLiveness::new(Arc::clone(&self.inner.store));
        let now_ms = self.inner.clock.now_ms();
        let mut ended = 0;
        for lease in liveness.leases().await? {
            if self.is_dead(&lease, now_ms) && liveness.remove_if_unchanged(&lease).await? {
                ended += 1;
            }
        }
        Ok(ended)
    }

    /// [`Self::resolve_locks`] in every user table: resolves every lock whose owner is dead or
    /// whose TTL ran out (the same decision a reader makes). Returns `(resolved, still_locked)`.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::Client;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// let client = Client::open(Arc::new(MemStore::new())).await?;
    /// let mut txn = client.begin().await?;
    /// txn.set("docs", "a", "contents", "hello")?;
    /// txn.set("stats", "a", "words", "1")?;
    /// txn.commit().await?;
    /// client.finish_background_commits().await;
    /// // Every commit finished, secondaries included, so no table holds a lock.
    /// assert_eq!(client.resolve_abandoned_locks().await?, (0, 0));
    /// # client.shutdown().await }
    /// ```
    pub async fn resolve_abandoned_locks(&self) -> Result<(usize, usize)> {
        let (mut resolved, mut left) = (0, 0);
        let tables: Vec<Bytes> = self.inner.store.tables().await?;
        for table in tables.iter().filter(|t| !t.starts_with(RESERVED_PREFIX)) {
            let (r, l) = self.resolve_locks(table).await?;
            resolved += r;
            left += l;
        }
        Ok((resolved, left))
    }

    /// Ends the leases of dead workers; if it ended any, resolves the locks they left in every
    /// user table. A lease is ended before its locks are resolved (a lock whose owner has no
    /// lease is a dead owner's), so a caller whose sweep failed part-way should call
    /// [`Self::resolve_abandoned_locks`] until it succeeds, as the observer runtime does.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::Client;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// let store = Arc::new(MemStore::new());
    /// let crashed = Client::open(Arc::clone(&store)).await?;
    /// let client = Client::open(store).await?;
    /// drop(crashed); // gone without `shutdown`: its lease stays in the store
    /// let sweep = client.sweep_dead_workers().await?;
    /// assert_eq!(sweep.leases_ended, 1);
    /// assert_eq!(sweep.locks_left, 0);
    /// # client.shutdown().await }
    /// ```
    pub async fn sweep_dead_workers(&self) -> Result<DeadWorkerSweep> {
        let leases_ended = self.end_dead_leases().await?;
        if leases_ended == 0 {
            return Ok(DeadWorkerSweep::default());
        }
        let (locks_resolved, locks_left) = self.resolve_abandoned_locks().await?;
        Ok(DeadWorkerSweep {
            leases_ended,
            locks_resolved,
            locks_left,
        })
    }
}
