//! [`TxnConfig`]: the tunables of the transaction layer.
//!
//! The struct is `#[non_exhaustive]` so that new tunables can be added without breaking callers:
//! other crates start from [`TxnConfig::default`] and change what they need with the `with_*`
//! setters (or by assigning the public fields of an existing value).

use std::time::Duration;

/// Tunables of the transaction layer.
///
/// ```
/// # use std::time::Duration;
/// # use percolator_core::TxnConfig;
/// let config = TxnConfig::default()
///     .with_lock_ttl(Duration::from_secs(1))
///     .with_durable_commits(true);
/// assert_eq!(config.lock_ttl, Duration::from_secs(1));
/// ```
///
/// Every setter, and a client that uses the result:
///
/// ```
/// # use std::sync::Arc;
/// # use std::time::Duration;
/// # use percolator_backend_mem::MemStore;
/// # use percolator_core::{Client, TxnConfig};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> percolator_core::Result<()> {
/// let config = TxnConfig::default()
///     .with_lock_ttl(Duration::from_secs(2))
///     .with_lock_wait_timeout(Duration::from_secs(5))
///     .with_worker_lease(Duration::from_secs(6))
///     .with_max_attempts(10)
///     .with_backoff(Duration::from_millis(2), Duration::from_millis(200))
///     .with_durable_commits(true)
///     .with_one_phase_commit(false)
///     .with_background_secondaries(false)
///     .with_max_background_commits(16)
///     .with_parallel_prewrite(false);
/// assert_eq!(config.max_attempts, 10);
/// assert_eq!(config.backoff_max, Duration::from_millis(200));
/// assert!(config.durable_commits && !config.one_phase_commit);
///
/// let client = Client::builder(Arc::new(MemStore::new())).config(config).build().await?;
/// let mut txn = client.begin().await?;
/// txn.set("docs", "a", "contents", "hello")?;
/// txn.commit().await?; // two phases, then a sync of the store
/// assert_eq!(client.metrics().one_phase_commits, 0);
/// # client.shutdown().await }
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct TxnConfig {
    /// After this long without a heartbeat, a lock may be rolled back even if its owner lives.
    pub lock_ttl: Duration,
    /// A reader gives up waiting for a live lock after this long
    /// ([`crate::Error::LockWaitTimeout`]).
    pub lock_wait_timeout: Duration,
    /// How long a worker's liveness lease lasts without a refresh.
    pub worker_lease: Duration,
    /// Attempts of [`crate::Client::run`] before the last retryable error is returned.
    pub max_attempts: u32,
    /// First backoff delay.
    pub backoff_base: Duration,
    /// Largest backoff delay.
    pub backoff_max: Duration,
    /// Call [`crate::RowStore::sync`] after the commit point, before `commit` returns.
    pub durable_commits: bool,
    /// Commit single-row transactions in one row mutation where the store supports it
    /// ([`crate::StoreLimits::tracks_snapshot_reads`]; see the `one_phase` module docs).
    pub one_phase_commit: bool,
    /// Return from `commit` at the commit point and commit the secondary rows in the background
    /// (see the `background` module docs). Readers roll any secondary they meet first forward;
    /// [`crate::Client::shutdown`] waits for the rest.
    pub background_secondaries: bool,
    /// Most transactions per client whose secondaries are committed in the background at once; a
    /// commit that finds them all busy waits for one to finish.
    pub max_background_commits: usize,
    /// Prewrite the primary and the secondary rows in one batch, as TiKV's clients do, instead
    /// of the primary first (paper Figure 6). A reader that meets a secondary whose primary is
    /// not locked yet waits while the secondary's owner lives, so the batch costs no spurious
    /// aborts. Only with it off does a commit pass the `AfterPrimaryPrewrite` fault checkpoint.
    pub parallel_prewrite: bool,
    /// Whether a read fetches the row's other columns that earlier transactions read with it,
    /// into a per-transaction cache (see the `prefetch` module docs); off by default (measured:
    /// the workloads here read a row's columns together already).
    pub prefetch: super::Prefetch,
}

impl Default for TxnConfig {
    fn default() -> Self {
        Self {
            lock_ttl: Duration::from_secs(3),
            lock_wait_timeout: Duration::from_secs(10),
            worker_lease: Duration::from_secs(10),
            max_attempts: 50,
            backoff_base: Duration::from_millis(1),
            backoff_max: Duration::from_millis(100),
            durable_commits: false,
            one_phase_commit: true,
            background_secondaries: true,
            max_background_commits: 64,
            parallel_prewrite: true,
            prefetch: super::Prefetch::Off,
        }
    }
}

impl TxnConfig {
    /// The primary lock's heartbeat period: a third of the TTL.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use percolator_core::TxnConfig;
    /// let config = TxnConfig::default().with_lock_ttl(Duration::from_secs(3));
    /// assert_eq!(config.heartbeat_interval(), Duration::from_secs(1));
    /// ```
    pub fn heartbeat_interval(&self) -> Duration {
        (self.lock_ttl / 3).max(Duration::from_millis(1))
    }

    /// Sets [`Self::lock_ttl`].
    #[must_use]
    pub fn with_lock_ttl(mut self, lock_ttl: Duration) -> Self {
        self.lock_ttl = lock_ttl;
        self
    }

    /// Sets [`Self::lock_wait_timeout`].
    #[must_use]
    pub fn with_lock_wait_timeout(mut self, lock_wait_timeout: Duration) -> Self {
        self.lock_wait_timeout = lock_wait_timeout;
        self
    }

    /// Sets [`Self::worker_lease`].
    #[must_use]
    pub fn with_worker_lease(mut self, worker_lease: Duration) -> Self {
        self.worker_lease = worker_lease;
        self
    }

    /// Sets [`Self::max_attempts`].
    #[must_use]
    pub fn with_max_attempts(mut self, max_attempts: u32) -> Self {
        self.max_attempts = max_attempts;
        self
    }

    /// Sets [`Self::backoff_base`] and [`Self::backoff_max`].
    #[must_use]
    pub fn with_backoff(mut self, base: Duration, max: Duration) -> Self {
        self.backoff_base = base;
        self.backoff_max = max;
        self
    }

    /// Sets [`Self::durable_commits`].
    #[must_use]
    pub fn with_durable_commits(mut self, durable_commits: bool) -> Self {
        self.durable_commits = durable_commits;
        self
    }

    /// Sets [`Self::one_phase_commit`].
    #[must_use]
    pub fn with_one_phase_commit(mut self, one_phase_commit: bool) -> Self {
        self.one_phase_commit = one_phase_commit;
        self
    }

    /// Sets [`Self::background_secondaries`].
    #[must_use]
    pub fn with_background_secondaries(mut self, background_secondaries: bool) -> Self {
        self.background_secondaries = background_secondaries;
        self
    }

    /// Sets [`Self::parallel_prewrite`].
    #[must_use]
    pub fn with_parallel_prewrite(mut self, parallel_prewrite: bool) -> Self {
        self.parallel_prewrite = parallel_prewrite;
        self
    }

    /// Sets [`Self::prefetch`].
    #[must_use]
    pub fn with_prefetch(mut self, prefetch: super::Prefetch) -> Self {
        self.prefetch = prefetch;
        self
    }

    /// Sets [`Self::max_background_commits`] (at least one is used).
    #[must_use]
    pub fn with_max_background_commits(mut self, max_background_commits: usize) -> Self {
        self.max_background_commits = max_background_commits;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setters_set_their_field_only() {
        let base = TxnConfig::default();
        let c = TxnConfig::default()
            .with_lock_ttl(Duration::from_millis(7))
            .with_lock_wait_timeout(Duration::from_millis(8))
            .with_worker_lease(Duration::from_millis(9))
            .with_max_attempts(3)
            .with_backoff(Duration::from_micros(5), Duration::from_micros(50))
            .with_durable_commits(true)
            .with_one_phase_commit(false)
            .with_background_secondaries(false)
            .with_max_background_commits(3)
            .with_parallel_prewrite(false)
            .with_prefetch(super::super::Prefetch::Always);
        assert_eq!(c.lock_ttl, Duration::from_millis(7));
        assert_eq!(c.lock_wait_timeout, Duration::from_millis(8));
        assert_eq!(c.worker_lease, Duration::from_millis(9));
        assert_eq!(c.max_attempts, 3);
        assert_eq!(
            (c.backoff_base, c.backoff_max),
            (Duration::from_micros(5), Duration::from_micros(50))
        );
        assert!(c.durable_commits);
        assert!(!c.one_phase_commit);
        assert!(!c.background_secondaries);
        assert_eq!(c.max_background_commits, 3);
        assert!(!c.parallel_prewrite);
        assert_eq!(c.prefetch, super::super::Prefetch::Always);
        let same = TxnConfig::default().with_lock_ttl(base.lock_ttl);
        assert_eq!(format!("{same:?}"), format!("{base:?}"));
    }
}
