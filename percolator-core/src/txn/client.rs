//! [`Client`] and [`ClientBuilder`]: one client per process (or per simulated worker). A client
//! owns the store handle, the timestamp oracle, the worker's liveness lease (registered at
//! [`ClientBuilder::build`] and refreshed by a background task until the client is dropped or
//! [`Client::shutdown`]), the configuration, the observed columns and the metrics. It is cheap to
//! clone: clones share one `ClientInner`, which the protocol modules (`read`, `commit`,
//! `resolve`, `notify`) extend with their actions.

use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;

use crate::error::Result;
use crate::gc::snapshots::{ActiveSnapshots, SnapshotSafety};
use crate::liveness::{Liveness, StoreLiveness};
use crate::oracle::{OracleClock, TimestampOracle};
use crate::records::{CellAddr, LockRecord};
use crate::store::{Family, FamilyRead, RowStore, Scan};

use super::TxnConfig;
#[cfg(feature = "fault-injection")]
use super::fault::CommitHook;
use super::fault::Faults;
use super::lease::{LeaseRefresher, LeaseRenewal};
use super::metrics::{TxnMetrics, TxnMetricsSnapshot};
use super::notify::{self, ObservedColumn};
use super::resolve::TxnStatus;
use super::transaction::Transaction;

/// What the clones of one [`Client`] share.
pub(crate) struct ClientInner<S: RowStore> {
    pub(crate) store: Arc<S>,
    pub(crate) oracle: Arc<dyn TimestampOracle>,
    /// Oracle time, as of the latest timestamp this client got: what lock TTLs and worker
    /// leases are judged in.
    pub(crate) clock: Arc<OracleClock>,
    pub(crate) liveness: Arc<dyn Liveness>,
    pub(crate) config: TxnConfig,
    pub(crate) worker_id: u64,
    pub(crate) metrics: TxnMetrics,
    pub(crate) observed: Arc<notify::ObservedColumns>,
    /// Start timestamps in use, published with the lease for garbage collection.
    pub(crate) snapshots: Arc<ActiveSnapshots>,
    /// What a snapshot read or prewrite checks first (safe point, lease, lapse floor).
    pub(crate) safety: Arc<SnapshotSafety>,
    /// Renews the worker lease (the background task's, shared so that a collector can publish
    /// its own oldest snapshot right before it computes the safe point).
    pub(crate) renewal: Option<Arc<LeaseRenewal<S>>>,
    /// Faults armed for every commit of this client (empty without `fault-injection`).
    pub(super) faults: Faults,
    pub(super) lease_refresher: parking_lot::Mutex<Option<LeaseRefresher>>,
    /// Transactions this client committed, for clearing their notifications without a status
    /// read.
    pub(crate) recent_commits: super::recent_commits::RecentCommits,
    /// Secondary commits still running after their `commit` returned.
    pub(super) background: super::background::BackgroundCommits,
    /// Which columns transactions read together, for prefetching.
    pub(super) read_patterns: Arc<super::prefetch::ReadPatterns>,
}

impl<S: RowStore> ClientInner<S> {
    /// Whether this client's transactions prefetch ([`TxnConfig::prefetch`]).
    pub(super) fn prefetches(&self) -> bool {
        match self.config.prefetch {
            super::Prefetch::Off => false,
            super::Prefetch::Distributed => self.store.limits().distributed,
            super::Prefetch::Always => true,
        }
    }
}

impl<S: RowStore> Drop for ClientInner<S> {
    fn drop(&mut self) {
        // A dropped client stops refreshing its lease, exactly like a dead process.
        if let Some(refresher) = self.lease_refresher.get_mut().take() {
            refresher.signal_stop();
        }
        crate::liveness::forget_process_worker(self.worker_id);
    }
}

/// Builds a [`Client`].
///
/// ```
/// # use std::sync::Arc;
/// # use std::time::Duration;
/// # use percolator_backend_mem::MemStore;
/// # use percolator_core::{Client, ObservedColumn, TxnConfig};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> percolator_core::Result<()> {
/// let client = Client::builder(Arc::new(MemStore::new()))
///     .config(TxnConfig::default().with_lock_ttl(Duration::from_secs(1)))
///     .observe(&ObservedColumn::strong("docs", "contents"))
///     .build()
///     .await?;
/// assert_eq!(client.config().lock_ttl, Duration::from_secs(1));
/// assert!(client.notifies_on_write("docs", "contents"));
/// # client.shutdown().await }
/// ```
pub struct ClientBuilder<S: RowStore> {
    store: Arc<S>,
    oracle: Option<Arc<dyn TimestampOracle>>,
    /// The caller chose the process-wide local oracle explicitly.
    local_oracle: bool,
    config: TxnConfig,
    faults: Faults,
    observed: notify::ObservedSet,
}

impl<S: RowStore> ClientBuilder<S> {
    /// Declares an observed column: commits of this client that write it (strong) set its notify
    /// cell. The declaration is registered in the store's observer registry at
    /// [`Self::build`], so every other client notifies the column too. Columns that workers
    /// registered need no declaration: every client reads the registry.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::{Client, ObservedColumn};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// let client = Client::builder(Arc::new(MemStore::new()))
    ///     .observe(&ObservedColumn::strong("docs", "contents"))
    ///     .build()
    ///     .await?;
    /// let mut txn = client.begin().await?;
    /// txn.set("docs", "a", "contents", "hello")?;
    /// txn.commit().await?;
    /// // The commit left a notification for the column's observers.
    /// assert_eq!(client.pending_notifications("docs").await?, 1);
    /// # client.shutdown().await }
    /// ```
    pub fn observe(mut self, column: &ObservedColumn) -> Self {
        self.observed.add(column);
        self
    }

    /// [`Self::observe`] for each column.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::{Client, ObservedColumn};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// let columns = [
    ///     ObservedColumn::strong("docs", "contents"),
    ///     ObservedColumn::weak("docs", "links"),
    /// ];
    /// let client = Client::builder(Arc::new(MemStore::new()))
    ///     .observe_all(&columns)
    ///     .build()
    ///     .await?;
    /// assert!(client.notifies_on_write("docs", "contents"));
    /// // A weak column is notified only on request (`Transaction::notify`), but registered.
    /// assert!(!client.notifies_on_write("docs", "links"));
    /// assert!(client.is_registered("docs", "links"));
    /// # client.shutdown().await }
    /// ```
    pub fn observe_all<'a>(
        mut self,
        columns: impl IntoIterator<Item = &'a ObservedColumn>,
    ) -> Self {
        for column in columns {
            self.observed.add(column);
        }
        self
    }

    /// Uses `oracle`: the one every process on this store uses (PD's TSO on TiKV, the oracle
    /// service's `RemoteOracle`), instead of the store's process-wide
    /// [`crate::oracle::LocalOracle`] ([`crate::oracle::shared_local_oracle`]).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::{Client, LocalOracle, TimestampOracle};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// let store = Arc::new(MemStore::new());
    /// let oracle = Arc::new(LocalOracle::open(Arc::clone(&store)).await?);
    /// let client = Client::builder(store).oracle(oracle.clone()).build().await?;
    /// // The client's transactions draw their timestamps from that oracle.
    /// let before = oracle.timestamp().await?;
    /// assert!(client.begin().await?.start_ts() > before);
    /// # client.shutdown().await }
    /// ```
    pub fn oracle(mut self, oracle: Arc<dyn TimestampOracle>) -> Self {
        self.oracle = Some(oracle);
        self
    }

    /// Sets the configuration.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::{Client, TxnConfig};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// let client = Client::builder(Arc::new(MemStore::new()))
    ///     .config(TxnConfig::default().with_max_attempts(5))
    ///     .build()
    ///     .await?;
    /// assert_eq!(client.config().max_attempts, 5);
    /// # client.shutdown().await }
    /// ```
    pub fn config(mut self, config: TxnConfig) -> Self {
        self.config = config;
        self
    }

    /// Installs a fault-injection hook consulted by every commit of this client (feature
    /// `fault-injection`).
    #[cfg(feature = "fault-injection")]
    pub fn commit_hook(mut self, hook: Arc<dyn CommitHook>) -> Self {
        self.faults = Faults::new(Some(hook));
        self
    }

    /// Uses the store's process-wide [`crate::oracle::LocalOracle`] (unless [`Self::oracle`]
    /// named one) on a store that several processes could share too: the caller states that this
    /// process is the only one allocating timestamps on it. (The oracle's lease keeps a second process from breaking
    /// snapshot isolation — it is refused — but it cannot make two processes work at once.)
    /// Stores one process owns (mem, sled) use it without being asked.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::Client;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// // Needed on a store several processes can share (etcd, TiKV) when this process is the
    /// // only one allocating timestamps; harmless on MemStore, which one process owns.
    /// let client = Client::builder(Arc::new(MemStore::new())).local_oracle().build().await?;
    /// assert!(client.begin().await?.start_ts() > 0);
    /// # client.shutdown().await }
    /// ```
    pub fn local_oracle(mut self) -> Self {
        self.local_oracle = true;
        self
    }

    /// Registers the worker's liveness lease and starts refreshing it. The oracle is the one
    /// given to [`Self::oracle`] (a store cluster's own, such as PD's TSO on TiKV, is passed
    /// there), else the process-wide local one — which, on a store several processes can share
    /// ([`crate::StoreLimits::distributed`]), must be asked for with [`Self::local_oracle`]:
    /// [`crate::Error::OracleRequired`] otherwise.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::Client;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// let client = Client::builder(Arc::new(MemStore::new())).build().await?;
    /// let mut txn = client.begin().await?;
    /// txn.set("docs", "a", "contents", "hello")?;
    /// assert!(txn.commit().await?.commit_ts.is_some());
    /// # client.shutdown().await }
    /// ```
    pub async fn build(self) -> Result<Client<S>> {
        let oracle = match self.oracle {
            Some(o) => o,
            None if self.local_oracle || !self.store.limits().distributed => {
                crate::oracle::shared_local_oracle(&self.store).await?
            }
            None => {
                return Err(crate::Error::OracleRequired {
                    store: format!("{} ({})", self.store.name(), self.store.store_id()),
                });
            }
        };
        let worker_id = random_id();
        let clock = Arc::new(OracleClock::default());
        clock.observe(crate::oracle::next_timestamp(oracle.as_ref()).await?);
        let observed = Arc::new(notify::ObservedColumns::new(self.observed));
        crate::observer_registry::register(self.store.as_ref(), &observed.declared.registrations())
            .await?;
        observed.refresh(self.store.as_ref()).await?;
        let registry = Arc::new(StoreLiveness::new(Arc::clone(&self.store)));
        let snapshots = Arc::new(ActiveSnapshots::default());
        let safety = Arc::new(SnapshotSafety::default());
        let renewal = LeaseRenewal {
            registry: Arc::clone(&registry),
            store: Arc::clone(&self.store),
            oracle: Arc::clone(&oracle),
            clock: Arc::clone(&clock),
            snapshots: Arc::clone(&snapshots),
            safety: Arc::clone(&safety),
            observed: Arc::clone(&observed),
            worker_id,
            lease: self.config.worker_lease,
            renewals: AtomicU64::new(0),
            late: AtomicU64::new(0),
            renewing: tokio::sync::Mutex::new(()),
            scan_group: AtomicU64::new(0),
        };
        crate::liveness::note_process_worker(worker_id);
        if let Err(e) = renewal.renew().await {
            crate::liveness::forget_process_worker(worker_id);
            return Err(e);
        }
        let renewal = Arc::new(renewal);
        let refresher = LeaseRefresher::start(Arc::clone(&renewal));
        Ok(Client {
            inner: Arc::new(ClientInner {
                store: self.store,
                oracle,
                clock,
                liveness: registry,
                worker_id,
                metrics: TxnMetrics::default(),
                observed,
                snapshots,
                safety,
                renewal: Some(renewal),
                faults: self.faults,
                lease_refresher: parking_lot::Mutex::new(Some(refresher)),
                recent_commits: Default::default(),
                background: super::background::BackgroundCommits::new(
                    self.config.max_background_commits,
                ),
                read_patterns: Default::default(),
                config: self.config,
            }),
        })
    }
}

impl<S: RowStore> ClientInner<S> {
    /// Errors unless a snapshot read or prewrite at `start_ts` may go ahead (see
    /// [`crate::gc`]).
    pub(crate) fn check_snapshot(&self, start_ts: u64) -> Result<()> {
        self.safety.check(start_ts, &self.clock)
    }

    /// A timestamp from the oracle, taken in as the latest reading of oracle time.
    pub(crate) async fn timestamp(&self) -> Result<u64> {
        let ts = crate::oracle::next_timestamp(self.oracle.as_ref()).await?;
        self.clock.observe(ts);
        Ok(ts)
    }
}

/// A random non-zero id (worker ids, oracle ids), from the thread-local OS-seeded generator.
pub(crate) fn random_id() -> u64 {
    rand::random::<u64>() | 1
}

/// A Percolator client over a [`RowStore`]: begins transactions and resolves locks.
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
/// txn.commit().await?;
/// // Clones share the store, the oracle and the worker lease.
/// let other = client.clone();
/// assert_eq!(other.worker_id(), client.worker_id());
/// let txn = other.begin().await?;
/// assert_eq!(txn.get("docs", "a", "contents").await?.as_deref(), Some(&b"hello"[..]));
/// # client.shutdown().await }
/// ```
pub struct Client<S: RowStore> {
    pub(crate) inner: Arc<ClientInner<S>>,
}

impl<S: RowStore> Clone for Client<S> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<S: RowStore> std::fmt::Debug for Client<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("store", &self.inner.store.name())
            .field("worker_id", &self.inner.worker_id)
            .finish()
    }
}

impl<S: RowStore> Client<S> {
    /// Starts building a client on `store`.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::Client;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// let client = Client::builder(Arc::new(MemStore::new())).build().await?;
    /// let txn = client.begin().await?;
    /// assert_eq!(txn.get("docs", "a", "contents").await?, None);
    /// # client.shutdown().await }
    /// ```
    pub fn builder(store: Arc<S>) -> ClientBuilder<S> {
        ClientBuilder {
            store,
            oracle: None,
            local_oracle: false,
            config: TxnConfig::default(),
            faults: Faults::default(),
            observed: notify::ObservedSet::default(),
        }
    }

    /// A client with the default configuration and the store's process-wide local oracle — on a
    /// store one process owns; a shared one needs [`Self::builder`] with an explicit oracle
    /// ([`crate::Error::OracleRequired`]).
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
    /// txn.commit().await?;
    /// let txn = client.begin().await?;
    /// assert_eq!(txn.get("docs", "a", "contents").await?.as_deref(), Some(&b"hello"[..]));
    /// # client.shutdown().await }
    /// ```
    pub async fn open(store: Arc<S>) -> Result<Self> {
        Self::builder(store).build().await
    }

    /// The store.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::{Client, RowStore};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// let client = Client::open(Arc::new(MemStore::new())).await?;
    /// assert_eq!(client.store().name(), "mem");
    /// # client.shutdown().await }
    /// ```
    pub fn store(&self) -> &Arc<S> {
        &self.inner.store
    }

    /// The oracle.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::{Client, TimestampOracle};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// let client = Client::open(Arc::new(MemStore::new())).await?;
    /// let ts = client.oracle().timestamp().await?;
    /// assert!(client.begin().await?.start_ts() > ts);
    /// # client.shutdown().await }
    /// ```
    pub fn oracle(&self) -> &Arc<dyn TimestampOracle> {
        &self.inner.oracle
    }

    /// The configuration.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::{Client, TxnConfig};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// let config = TxnConfig::default().with_lock_wait_timeout(Duration::from_secs(2));
    /// let client = Client::builder(Arc::new(MemStore::new())).config(config).build().await?;
    /// assert_eq!(client.config().lock_wait_timeout, Duration::from_secs(2));
    /// # client.shutdown().await }
    /// ```
    pub fn config(&self) -> &TxnConfig {
        &self.inner.config
    }

    /// This client's worker id (written into its locks).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::Client;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// let store = Arc::new(MemStore::new());
    /// let a = Client::open(Arc::clone(&store)).await?;
    /// let b = Client::open(store).await?;
    /// // Each client is a worker of its own, with its own lease.
    /// assert_ne!(a.worker_id(), b.worker_id());
    /// # a.shutdown().await?;
    /// # b.shutdown().await }
    /// ```
    pub fn worker_id(&self) -> u64 {
        self.inner.worker_id
    }

    /// Counters of what this client did.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::Client;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// let client = Client::open(Arc::new(MemStore::new())).await?;
    /// for value in ["one", "two"] {
    ///     let mut txn = client.begin().await?;
    ///     txn.set("docs", "a", "contents", value)?;
    ///     txn.commit().await?;
    /// }
    /// let metrics = client.metrics();
    /// assert_eq!(metrics.commits, 2);
    /// assert_eq!(metrics.conflicts, 0);
    /// # client.shutdown().await }
    /// ```
    pub fn metrics(&self) -> TxnMetricsSnapshot {
        let mut metrics = self.inner.metrics.snapshot();
        if let Some(renewal) = &self.inner.renewal {
            metrics.lease_renewals = renewal.renewals.load(Ordering::Relaxed);
            metrics.late_lease_renewals = renewal.late.load(Ordering::Relaxed);
        }
        metrics
    }

    /// Begins a transaction at a fresh start timestamp.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::Client;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// let client = Client::open(Arc::new(MemStore::new())).await?;
    /// let first = client.begin().await?;
    /// let second = client.begin().await?;
    /// assert!(second.start_ts() > first.start_ts());
    /// # client.shutdown().await }
    /// ```
    pub async fn begin(&self) -> Result<Transaction<S>> {
        // After a lapse (a store that could not be reached for longer than the lease), a
        // transaction begun now would fail its first read: it waits for one renewal instead,
        // shared with every other begin, and a renewal that fails is this begin's (retryable)
        // error, so callers back off rather than spin through doomed reads.
        if let Some(renewal) = &self.inner.renewal {
            let renewing = self.inner.lease_refresher.lock().is_some();
            if renewing {
                renewal.renew_if_lapsed().await?;
            }
        }
        // Registered below the timestamp before asking for it (see `crate::gc::snapshots`).
        let mut snapshot = self.inner.snapshots.enter(self.inner.clock.latest());
        let start_ts = self.inner.timestamp().await?;
        snapshot.set(start_ts);
        Ok(Transaction::new(
            self.clone(),
            start_ts,
            snapshot,
            self.inner.faults.clone(),
        ))
    }

    /// The newest GC safe point this client knows of (see [`crate::gc`]).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::{Client, GcConfig};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// let client = Client::open(Arc::new(MemStore::new())).await?;
    /// assert_eq!(client.safe_point(), 0); // nothing collected yet
    /// let report = client.gc(&GcConfig::default().with_grace(Duration::ZERO), |_| {}).await?;
    /// assert!(report.safe_point > 0);
    /// assert_eq!(client.safe_point(), report.safe_point);
    /// # client.shutdown().await }
    /// ```
    pub fn safe_point(&self) -> u64 {
        self.inner.safety.safe_point()
    }

    /// Renews the worker lease now, instead of waiting for the background renewal: what a
    /// read-only request that met [`crate::Error::SnapshotTooOld`] does before it tries again
    /// (`Client::run` does it itself). A transaction that began before a lapse stays doomed;
    /// one that begins after this reads normally.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::Client;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// let client = Client::open(Arc::new(MemStore::new())).await?;
    /// let before = client.metrics().lease_renewals;
    /// client.renew_lease().await?;
    /// assert_eq!(client.metrics().lease_renewals, before + 1);
    /// # client.shutdown().await }
    /// ```
    pub async fn renew_lease(&self) -> Result<()> {
        match &self.inner.renewal {
            Some(renewal) => renewal.renew().await,
            None => Ok(()),
        }
    }

    /// Announces, with this worker's lease, that it scans notifications for scan group `group`
    /// (workers running the same observers), and renews the lease now so that the others see
    /// it at once. The membership lasts as long as the lease: a worker that stops renewing
    /// drops out of [`Self::scan_group_members`] after half a lease. `percolator-observers`
    /// divides the notify space among a group's members with it; nothing in the protocol
    /// depends on it.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::Client;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// let store = Arc::new(MemStore::new());
    /// let a = Client::open(Arc::clone(&store)).await?;
    /// let b = Client::open(store).await?;
    /// a.join_scan_group(7).await?;
    /// b.join_scan_group(7).await?;
    /// let mut both = vec![a.worker_id(), b.worker_id()];
    /// both.sort_unstable();
    /// assert_eq!(a.scan_group_members(7).await?, both);
    /// b.shutdown().await?; // its lease, and with it its membership, is gone
    /// assert_eq!(a.scan_group_members(7).await?, vec![a.worker_id()]);
    /// # a.shutdown().await }
    /// ```
    pub async fn join_scan_group(&self, group: u64) -> Result<()> {
        match &self.inner.renewal {
            Some(renewal) => {
                // 0 means "none" in the renewal; any other value is as good a name.
                renewal.scan_group.store(group.max(1), Ordering::Relaxed);
                renewal.renew().await
            }
            None => Ok(()),
        }
    }

    /// The workers of scan group `group` (see [`Self::join_scan_group`]) that renew their
    /// leases on time, by id. This worker is among them while it belongs to the group, whatever
    /// its stored lease says: it is running.
    pub async fn scan_group_members(&self, group: u64) -> Result<Vec<u64>> {
        let group = group.max(1);
        let now = self.inner.clock.now_ms();
        let mut members: Vec<u64> = StoreLiveness::new(Arc::clone(&self.inner.store))
            .leases()
            .await?
            .into_iter()
            .filter(|lease| {
                lease
                    .scan_group
                    .is_some_and(|g| g.group == group && g.renewing(lease, now))
            })
            .map(|lease| lease.worker)
            .collect();
        let mine = self
            .inner
            .renewal
            .as_ref()
            .and_then(|r| r.scan_group())
            .is_some_and(|g| g == group);
        if mine && !members.contains(&self.inner.worker_id) {
            members.push(self.inner.worker_id);
        }
        members.sort_unstable();
        Ok(members)
    }

    /// Waits until the secondaries of every transaction this client committed so far are
    /// committed too ([`TxnConfig::background_secondaries`]): then a scan of the lock family
    /// finds none of them. Reads never need this (they roll a committed lock forward
    /// themselves); tools that count locks, and tests, do.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::Client;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// let client = Client::open(Arc::new(MemStore::new())).await?;
    /// let mut txn = client.begin().await?;
    /// for row in ["a", "b", "c"] {
    ///     txn.set("docs", row, "contents", "hello")?;
    /// }
    /// txn.commit().await?; // returns at the primary's commit
    /// client.finish_background_commits().await;
    /// assert!(client.locks("docs").await?.is_empty());
    /// # client.shutdown().await }
    /// ```
    pub async fn finish_background_commits(&self) {
        self.inner.background.wait_idle().await;
    }

    /// How many committed transactions' secondaries are still being committed in the background.
    pub fn background_commits_in_flight(&self) -> usize {
        self.inner.background.in_flight()
    }

    /// Deregisters the worker's lease (graceful shutdown). Locks of unfinished commits of this
    /// worker become cleanable at once.
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
    /// txn.commit().await?;
    /// client.shutdown().await?;
    /// // Without its lease the client's snapshots are no longer safe from GC: reads fail.
    /// let txn = client.begin().await?;
    /// assert!(txn.get("docs", "a", "contents").await.is_err());
    /// # Ok(()) }
    /// ```
    pub async fn shutdown(&self) -> Result<()> {
        // Secondaries still being committed finish first: a clean shutdown leaves no lock of a
        // committed transaction for readers to roll forward.
        self.inner.background.close().await;
        let refresher = self.inner.lease_refresher.lock().take();
        if let Some(refresher) = refresher {
            refresher.stop().await;
        }
        self.inner.safety.released();
        crate::liveness::forget_process_worker(self.inner.worker_id);
        StoreLiveness::new(Arc::clone(&self.inner.store))
            .deregister(self.inner.worker_id)
            .await?;
        // The oracle's last user lets go of its hold on a shared store, so that the next
        // process takes over at once instead of waiting out the lease.
        if Arc::strong_count(&self.inner.oracle) == 1 {
            self.inner.oracle.release().await?;
        }
        Ok(())
    }

    /// The status of transaction `start_ts` whose primary is `primary`, without cleaning up.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::{CellAddr, Client, TxnStatus};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// let client = Client::open(Arc::new(MemStore::new())).await?;
    /// let mut txn = client.begin().await?;
    /// txn.set("docs", "a", "contents", "hello")?; // its only cell is its primary
    /// let info = txn.commit().await?;
    /// let primary = CellAddr::new("docs", "a", "contents");
    /// let status = client.transaction_status(&primary, info.start_ts).await?;
    /// match status {
    ///     TxnStatus::Committed { commit_ts } => assert_eq!(Some(commit_ts), info.commit_ts),
    ///     other => panic!("not committed: {other:?}"),
    /// }
    /// # client.shutdown().await }
    /// ```
    pub async fn transaction_status(&self, primary: &CellAddr, start_ts: u64) -> Result<TxnStatus> {
        self.inner.check_status(primary, start_ts, false).await
    }

    /// Every lock in `table` (any timestamp): `(cell, start_ts, lock)`.
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
    /// txn.set("docs", "b", "contents", "world")?;
    /// txn.commit().await?;
    /// // Once its secondaries are committed too, a commit leaves no lock behind.
    /// client.finish_background_commits().await;
    /// assert!(client.locks("docs").await?.is_empty());
    /// # client.shutdown().await }
    /// ```
    pub async fn locks(&self, table: impl AsRef<[u8]>) -> Result<Vec<(CellAddr, u64, LockRecord)>> {
        let table = Bytes::copy_from_slice(table.as_ref());
        let rows = self
            .inner
            .store
            .scan(Scan {
                snapshot_ts: None,
                table: table.clone(),
                start: Bound::Unbounded,
                end: Bound::Unbounded,
                read: FamilyRead::all(Family::Lock),
                row_limit: None,
            })
            .await?;
        let mut out = Vec::new();
        for row in rows {
            for cell in row.cells {
                out.push((
                    CellAddr {
                        table: table.clone(),
                        row: row.row.clone(),
                        column: cell.column,
                    },
                    cell.ts,
                    LockRecord::decode(&cell.value)?,
                ));
            }
        }
        Ok(out)
    }

    /// Resolves every lock in `table` whose owner is dead or whose TTL ran out (roll forward or
    /// back through its primary). Returns `(resolved, still_locked)`.
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
    /// txn.commit().await?;
    /// let (resolved, still_locked) = client.resolve_locks("docs").await?;
    /// assert_eq!((resolved, still_locked), (0, 0)); // nothing was left locked
    /// # client.shutdown().await }
    /// ```
    pub async fn resolve_locks(&self, table: impl AsRef<[u8]>) -> Result<(usize, usize)> {
        let mut resolved = 0;
        let mut live = 0;
        for (addr, ts, lock) in self.locks(table).await? {
            if self.inner.resolve_lock(&addr, ts, &lock).await? {
                resolved += 1;
            } else {
                live += 1;
            }
        }
        Ok((resolved, live))
    }
}
