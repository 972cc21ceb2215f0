//! The worker runtime: scanners find dirty rows, a bounded pool runs observers on them, and the
//! whole thing shuts down gracefully (paper §2.4, "Notifications").
//!
//! - One [`Client`] per runtime: its worker lease (refreshed in the background) is what lock
//!   resolution consults, so locks of a crashed worker are cleaned without waiting for their TTL.
//! - `scanners` tasks scan the notify family only (see `scanner`); each dirty row is taken under
//!   an advisory in-memory row lock ([`RowLocks`]) and processed on a task of its own, at most
//!   `max_concurrent_runs` at a time (a semaphore).
//! - [`Runtime::wait_idle`] returns once no notification on an observed column is pending and
//!   no run is in flight; [`Runtime::shutdown`] stops the scanners, lets in-flight runs finish
//!   (so no lock of this worker is left behind) and deregisters the worker.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;
use percolator_core::{Client, ClientBuilder, Result, RowStore};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::background::{dead_worker_loop, gc_loop};
use crate::config::RuntimeConfig;
use crate::error::RuntimeError;
use crate::failures::RowFailures;
use crate::metrics::{ObserverMetrics, ObserverRuns, PerObserver, RuntimeStats};
use crate::observer::Observers;
use crate::partition::Partition;
use crate::pending::{any_pending_on, pending_on};
use crate::row_locks::RowLocks;

/// The observed `tables` in the order the scanners take them: the named `stages` first, in
/// their order, then the rest, sorted ([`RuntimeConfig::stages`]).
fn scan_order(mut tables: Vec<Bytes>, stages: &[Bytes]) -> Vec<Bytes> {
    tables.sort_by_key(|t| {
        (
            stages.iter().position(|s| s == t).unwrap_or(stages.len()),
            t.clone(),
        )
    });
    tables
}

/// State shared by the scanners and the runs.
pub(crate) struct Shared<S: RowStore> {
    pub(crate) client: Client<S>,
    pub(crate) observers: Observers<S>,
    pub(crate) tables: Vec<Bytes>,
    pub(crate) config: RuntimeConfig,
    pub(crate) metrics: ObserverMetrics,
    pub(crate) per_observer: PerObserver,
    pub(crate) row_locks: Arc<RowLocks>,
    pub(crate) failures: RowFailures,
    pub(crate) permits: Arc<Semaphore>,
    pub(crate) tracker: TaskTracker,
    pub(crate) stop: CancellationToken,
    /// Where each scanner is: `(table index, last row scanned)`.
    pub(crate) positions: Vec<Mutex<Option<(usize, Bytes)>>>,
    /// The dead-worker sweep owes a pass over every table's locks (see `dead_worker_loop`).
    pub(crate) lock_sweep_owed: AtomicBool,
    /// Rows whose observers have a batch delay and whose run a timer is waiting to start
    /// (`scanner::arm_batch_timer`).
    pub(crate) lingering: Mutex<HashSet<(Bytes, Bytes)>>,
    /// The tables with a batching observer, each with its shortest delay
    /// ([`crate::Observers::batching_tables`], computed once).
    pub(crate) batching: Vec<(Bytes, Duration)>,
    /// This worker's share of its scan group's rows (`None`: partitioned scanning is off).
    pub(crate) partition: Option<Partition>,
}

impl<S: RowStore> Shared<S> {
    /// The counters now, with this worker's place in its scan group.
    pub(crate) fn stats(&self, pending: Option<u64>) -> RuntimeStats {
        let mut stats = self.metrics.snapshot(self.client.metrics(), pending);
        stats.worker = self.client.worker_id();
        (stats.group_members, stats.group_changes) = match &self.partition {
            Some(p) => (p.members() as u64, p.changes()),
            None => (1, 0),
        };
        stats
    }
}

/// A running worker: scanners plus observer runs, until [`Runtime::shutdown`].
///
/// ```
/// # use std::sync::Arc;
/// # use std::time::Duration;
/// # use percolator_backend_mem::MemStore;
/// # use percolator_core::Client;
/// # use percolator_observers::{Observers, Runtime, RuntimeConfig};
/// # struct WordCount;
/// # #[async_trait::async_trait]
/// # impl<S: percolator_core::RowStore> percolator_observers::Observer<S> for WordCount {
/// #     fn name(&self) -> &str {
/// #         "word-count"
/// #     }
/// #     fn observed(&self) -> percolator_core::ObservedColumn {
/// #         percolator_core::ObservedColumn::strong("docs", "contents")
/// #     }
/// #     async fn observe(
/// #         &self,
/// #         txn: &mut percolator_core::Transaction<S>,
/// #         change: &percolator_observers::Change,
/// #     ) -> percolator_core::Result<()> {
/// #         let text = change.value.as_deref().unwrap_or_default();
/// #         let words = String::from_utf8_lossy(text).split_whitespace().count();
/// #         txn.set("stats", &change.row, "words", words.to_string())
/// #     }
/// # }
/// # #[tokio::main(flavor = "multi_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let mut observers = Observers::new();
/// observers.register(WordCount)?; // counts the words of `docs:contents` into `stats:words`
/// let store = Arc::new(MemStore::new());
/// let config = RuntimeConfig::default();
/// let runtime = Runtime::start(Client::builder(store), observers, config).await?;
/// let client = runtime.client().clone();
/// for (url, text) in [("a", "one two three"), ("b", "four five")] {
///     let mut txn = client.begin().await?;
///     txn.set("docs", url, "contents", text)?;
///     txn.commit().await?;
/// }
/// runtime.wait_idle(Duration::from_secs(30)).await?;
/// let words = client.begin().await?.get("stats", "b", "words").await?;
/// assert_eq!(words.as_deref(), Some(&b"2"[..]));
/// let stats = runtime.shutdown().await?;
/// assert_eq!(stats.notifications_processed, 2);
/// # Ok(()) }
/// ```
pub struct Runtime<S: RowStore> {
    shared: Arc<Shared<S>>,
    scanners: Vec<JoinHandle<()>>,
}

impl<S: RowStore> std::fmt::Debug for Runtime<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("observers", &self.shared.observers)
            .field("scanners", &self.scanners.len())
            .finish()
    }
}

impl<S: RowStore> Runtime<S> {
    /// Builds the worker's client from `client` (a [`Client::builder`] carrying the oracle and
    /// transaction configuration), registers the worker and its observers (in the store's
    /// observer registry, so every writer notifies their columns) and starts its scanners.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::{Client, TxnConfig};
    /// # use percolator_observers::{Observers, Runtime, RuntimeConfig};
    /// # struct WordCount;
    /// # #[async_trait::async_trait]
    /// # impl<S: percolator_core::RowStore> percolator_observers::Observer<S> for WordCount {
    /// #     fn name(&self) -> &str {
    /// #         "word-count"
    /// #     }
    /// #     fn observed(&self) -> percolator_core::ObservedColumn {
    /// #         percolator_core::ObservedColumn::strong("docs", "contents")
    /// #     }
    /// #     async fn observe(
    /// #         &self,
    /// #         txn: &mut percolator_core::Transaction<S>,
    /// #         change: &percolator_observers::Change,
    /// #     ) -> percolator_core::Result<()> {
    /// #         let text = change.value.as_deref().unwrap_or_default();
    /// #         let words = String::from_utf8_lossy(text).split_whitespace().count();
    /// #         txn.set("stats", &change.row, "words", words.to_string())
    /// #     }
    /// # }
    /// # #[tokio::main(flavor = "multi_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let mut observers = Observers::new();
    /// observers.register(WordCount)?;
    /// // The worker's client: oracle and transaction configuration go on the builder.
    /// let client = Client::builder(Arc::new(MemStore::new()))
    ///     .config(TxnConfig::default().with_lock_ttl(Duration::from_secs(2)));
    /// let config = RuntimeConfig::default().with_scanners(2);
    /// let runtime = Runtime::start(client, observers, config).await?;
    /// // Its observers are registered: every writer of the store notifies their columns.
    /// assert!(runtime.client().notifies_on_write("docs", "contents"));
    /// runtime.shutdown().await?;
    /// # Ok(()) }
    /// ```
    pub async fn start(
        client: ClientBuilder<S>,
        observers: Observers<S>,
        config: RuntimeConfig,
    ) -> Result<Self> {
        let client = client.build().await?;
        let registrations = observers.registrations();
        client.register_observers(&registrations).await?;
        // Workers running the same observers share their rows. A worker that finds others in
        // its group waits two refreshes before it scans, so that every member has read the
        // group with it in: until then they run its share, and after it none of them does.
        // (Without the wait, a member still on the old view runs the newcomer's rows too.)
        let partition = match config.partition_refresh {
            Some(every) if !registrations.is_empty() => {
                let group = crate::partition::group_of(
                    registrations
                        .iter()
                        .map(|r| {
                            (
                                r.observer.clone().unwrap_or_default(),
                                r.column.table.to_vec(),
                                r.column.column.to_vec(),
                            )
                        })
                        .collect(),
                );
                client.join_scan_group(group).await?;
                let partition = Partition::alone(client.worker_id(), group);
                partition.update(client.scan_group_members(group).await?);
                if partition.members() > 1 {
                    tokio::time::sleep(every.saturating_mul(2)).await;
                    partition.update(client.scan_group_members(group).await?);
                }
                Some(partition)
            }
            _ => None,
        };
        let scanners = config.scanners.max(1);
        let failures = RowFailures::new(config.failure_backoff, config.failure_backoff_max);
        let names = observers.names();
        let sweeps = config.dead_worker_sweep.is_some();
        let batching = observers.batching_tables();
        let shared = Arc::new(Shared {
            client,
            tables: scan_order(observers.tables(), &config.stages),
            observers,
            permits: Arc::new(Semaphore::new(config.max_concurrent_runs.max(1))),
            config,
            metrics: ObserverMetrics::default(),
            per_observer: PerObserver::new(names),
            row_locks: RowLocks::new(),
            failures,
            tracker: TaskTracker::new(),
            stop: CancellationToken::new(),
            positions: (0..scanners).map(|_| Mutex::new(None)).collect(),
            lock_sweep_owed: AtomicBool::new(sweeps),
            lingering: Mutex::new(HashSet::new()),
            batching,
            partition,
        });
        let mut handles: Vec<JoinHandle<()>> = if shared.tables.is_empty() {
            Vec::new()
        } else {
            (0..scanners)
                .map(|id| tokio::spawn(crate::scanner::scan_loop(Arc::clone(&shared), id)))
                .collect()
        };
        for (table, delay) in shared.batching.clone() {
            handles.push(tokio::spawn(crate::scanner::batch_scan_loop(
                Arc::clone(&shared),
                table,
                delay,
            )));
        }
        if let Some(schedule) = shared.config.gc.clone() {
            handles.push(tokio::spawn(gc_loop(Arc::clone(&shared), schedule)));
        }
        if let Some(every) = shared.config.partition_refresh
            && shared.partition.is_some()
        {
            handles.push(tokio::spawn(crate::background::partition_loop(
                Arc::clone(&shared),
                every,
            )));
        }
        if let Some(interval) = shared.config.dead_worker_sweep {
            handles.push(tokio::spawn(dead_worker_loop(
                Arc::clone(&shared),
                interval,
            )));
        }
        Ok(Self {
            shared,
            scanners: handles,
        })
    }

    /// The runtime's client: use it (or a client built with the same observed columns) to write
    /// data that observers watch.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::Client;
    /// # use percolator_observers::{Observers, Runtime, RuntimeConfig};
    /// # struct WordCount;
    /// # #[async_trait::async_trait]
    /// # impl<S: percolator_core::RowStore> percolator_observers::Observer<S> for WordCount {
    /// #     fn name(&self) -> &str {
    /// #         "word-count"
    /// #     }
    /// #     fn observed(&self) -> percolator_core::ObservedColumn {
    /// #         percolator_core::ObservedColumn::strong("docs", "contents")
    /// #     }
    /// #     async fn observe(
    /// #         &self,
    /// #         txn: &mut percolator_core::Transaction<S>,
    /// #         change: &percolator_observers::Change,
    /// #     ) -> percolator_core::Result<()> {
    /// #         let text = change.value.as_deref().unwrap_or_default();
    /// #         let words = String::from_utf8_lossy(text).split_whitespace().count();
    /// #         txn.set("stats", &change.row, "words", words.to_string())
    /// #     }
    /// # }
    /// # #[tokio::main(flavor = "multi_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let mut observers = Observers::new();
    /// # observers.register(WordCount)?;
    /// # let store = Arc::new(MemStore::new());
    /// # let config = RuntimeConfig::default();
    /// # let runtime = Runtime::start(Client::builder(store), observers, config).await?;
    /// let client = runtime.client().clone(); // notifies the observed columns
    /// let mut txn = client.begin().await?;
    /// txn.set("docs", "a", "contents", "one two three")?;
    /// txn.commit().await?;
    /// runtime.wait_idle(Duration::from_secs(30)).await?;
    /// let words = client.begin().await?.get("stats", "a", "words").await?;
    /// assert_eq!(words.as_deref(), Some(&b"3"[..]));
    /// # runtime.shutdown().await?;
    /// # Ok(()) }
    /// ```
    pub fn client(&self) -> &Client<S> {
        &self.shared.client
    }

    /// Counters so far (without the pending count, which needs a scan).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::Client;
    /// # use percolator_observers::{Observers, Runtime, RuntimeConfig};
    /// # struct WordCount;
    /// # #[async_trait::async_trait]
    /// # impl<S: percolator_core::RowStore> percolator_observers::Observer<S> for WordCount {
    /// #     fn name(&self) -> &str {
    /// #         "word-count"
    /// #     }
    /// #     fn observed(&self) -> percolator_core::ObservedColumn {
    /// #         percolator_core::ObservedColumn::strong("docs", "contents")
    /// #     }
    /// #     async fn observe(
    /// #         &self,
    /// #         txn: &mut percolator_core::Transaction<S>,
    /// #         change: &percolator_observers::Change,
    /// #     ) -> percolator_core::Result<()> {
    /// #         let text = change.value.as_deref().unwrap_or_default();
    /// #         let words = String::from_utf8_lossy(text).split_whitespace().count();
    /// #         txn.set("stats", &change.row, "words", words.to_string())
    /// #     }
    /// # }
    /// # #[tokio::main(flavor = "multi_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let mut observers = Observers::new();
    /// # observers.register(WordCount)?;
    /// # let store = Arc::new(MemStore::new());
    /// # let config = RuntimeConfig::default();
    /// # let runtime = Runtime::start(Client::builder(store), observers, config).await?;
    /// let mut txn = runtime.client().begin().await?;
    /// txn.set("docs", "a", "contents", "one two three")?;
    /// txn.commit().await?;
    /// runtime.wait_idle(Duration::from_secs(30)).await?;
    /// let stats = runtime.stats();
    /// assert_eq!(stats.notifications_processed, 1);
    /// assert_eq!(stats.failures, 0);
    /// assert_eq!(stats.pending, None); // `stats_with_pending` counts them
    /// # runtime.shutdown().await?;
    /// # Ok(()) }
    /// ```
    pub fn stats(&self) -> RuntimeStats {
        self.shared.stats(None)
    }

    /// Committed runs and their time, per observer.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::Client;
    /// # use percolator_observers::{Observers, Runtime, RuntimeConfig};
    /// # struct WordCount;
    /// # #[async_trait::async_trait]
    /// # impl<S: percolator_core::RowStore> percolator_observers::Observer<S> for WordCount {
    /// #     fn name(&self) -> &str {
    /// #         "word-count"
    /// #     }
    /// #     fn observed(&self) -> percolator_core::ObservedColumn {
    /// #         percolator_core::ObservedColumn::strong("docs", "contents")
    /// #     }
    /// #     async fn observe(
    /// #         &self,
    /// #         txn: &mut percolator_core::Transaction<S>,
    /// #         change: &percolator_observers::Change,
    /// #     ) -> percolator_core::Result<()> {
    /// #         let text = change.value.as_deref().unwrap_or_default();
    /// #         let words = String::from_utf8_lossy(text).split_whitespace().count();
    /// #         txn.set("stats", &change.row, "words", words.to_string())
    /// #     }
    /// # }
    /// # #[tokio::main(flavor = "multi_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let mut observers = Observers::new();
    /// # observers.register(WordCount)?;
    /// # let store = Arc::new(MemStore::new());
    /// # let config = RuntimeConfig::default();
    /// # let runtime = Runtime::start(Client::builder(store), observers, config).await?;
    /// let mut txn = runtime.client().begin().await?;
    /// txn.set("docs", "a", "contents", "one two three")?;
    /// txn.commit().await?;
    /// runtime.wait_idle(Duration::from_secs(30)).await?;
    /// let runs = runtime.observer_runs();
    /// assert_eq!(runs.len(), 1);
    /// assert_eq!((runs[0].name.as_str(), runs[0].runs), ("word-count", 1));
    /// # runtime.shutdown().await?;
    /// # Ok(()) }
    /// ```
    pub fn observer_runs(&self) -> Vec<ObserverRuns> {
        self.shared.per_observer.snapshot()
    }

    /// Counters so far, with the number of pending notifications.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::Client;
    /// # use percolator_observers::{Observers, Runtime, RuntimeConfig};
    /// # struct WordCount;
    /// # #[async_trait::async_trait]
    /// # impl<S: percolator_core::RowStore> percolator_observers::Observer<S> for WordCount {
    /// #     fn name(&self) -> &str {
    /// #         "word-count"
    /// #     }
    /// #     fn observed(&self) -> percolator_core::ObservedColumn {
    /// #         percolator_core::ObservedColumn::strong("docs", "contents")
    /// #     }
    /// #     async fn observe(
    /// #         &self,
    /// #         txn: &mut percolator_core::Transaction<S>,
    /// #         change: &percolator_observers::Change,
    /// #     ) -> percolator_core::Result<()> {
    /// #         let text = change.value.as_deref().unwrap_or_default();
    /// #         let words = String::from_utf8_lossy(text).split_whitespace().count();
    /// #         txn.set("stats", &change.row, "words", words.to_string())
    /// #     }
    /// # }
    /// # #[tokio::main(flavor = "multi_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let mut observers = Observers::new();
    /// # observers.register(WordCount)?;
    /// # let store = Arc::new(MemStore::new());
    /// # let config = RuntimeConfig::default();
    /// # let runtime = Runtime::start(Client::builder(store), observers, config).await?;
    /// let mut txn = runtime.client().begin().await?;
    /// txn.set("docs", "a", "contents", "one two three")?;
    /// txn.commit().await?;
    /// runtime.wait_idle(Duration::from_secs(30)).await?;
    /// let stats = runtime.stats_with_pending().await?;
    /// assert_eq!(stats.pending, Some(0));
    /// assert_eq!(stats.notifications_processed, 1);
    /// # runtime.shutdown().await?;
    /// # Ok(()) }
    /// ```
    pub async fn stats_with_pending(&self) -> Result<RuntimeStats> {
        let pending = self.pending().await?;
        Ok(self.shared.stats(Some(pending)))
    }

    /// Pending notify versions on columns this worker observes (a scan of the notify family of
    /// every observed table).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::Client;
    /// # use percolator_observers::{Observers, Runtime, RuntimeConfig};
    /// # struct WordCount;
    /// # #[async_trait::async_trait]
    /// # impl<S: percolator_core::RowStore> percolator_observers::Observer<S> for WordCount {
    /// #     fn name(&self) -> &str {
    /// #         "word-count"
    /// #     }
    /// #     fn observed(&self) -> percolator_core::ObservedColumn {
    /// #         percolator_core::ObservedColumn::strong("docs", "contents")
    /// #     }
    /// #     async fn observe(
    /// #         &self,
    /// #         txn: &mut percolator_core::Transaction<S>,
    /// #         change: &percolator_observers::Change,
    /// #     ) -> percolator_core::Result<()> {
    /// #         let text = change.value.as_deref().unwrap_or_default();
    /// #         let words = String::from_utf8_lossy(text).split_whitespace().count();
    /// #         txn.set("stats", &change.row, "words", words.to_string())
    /// #     }
    /// # }
    /// # #[tokio::main(flavor = "multi_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let mut observers = Observers::new();
    /// # observers.register(WordCount)?;
    /// # let store = Arc::new(MemStore::new());
    /// # let config = RuntimeConfig::default();
    /// # let runtime = Runtime::start(Client::builder(store), observers, config).await?;
    /// let mut txn = runtime.client().begin().await?;
    /// txn.set("docs", "a", "contents", "one two three")?;
    /// txn.commit().await?;
    /// runtime.wait_idle(Duration::from_secs(30)).await?;
    /// assert_eq!(runtime.pending().await?, 0); // the run consumed the notification
    /// # runtime.shutdown().await?;
    /// # Ok(()) }
    /// ```
    pub async fn pending(&self) -> Result<u64> {
        pending_on(&self.shared.client, &self.shared.observers).await
    }

    /// Runs in flight now.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::Client;
    /// # use percolator_observers::{Observers, Runtime, RuntimeConfig};
    /// # struct WordCount;
    /// # #[async_trait::async_trait]
    /// # impl<S: percolator_core::RowStore> percolator_observers::Observer<S> for WordCount {
    /// #     fn name(&self) -> &str {
    /// #         "word-count"
    /// #     }
    /// #     fn observed(&self) -> percolator_core::ObservedColumn {
    /// #         percolator_core::ObservedColumn::strong("docs", "contents")
    /// #     }
    /// #     async fn observe(
    /// #         &self,
    /// #         txn: &mut percolator_core::Transaction<S>,
    /// #         change: &percolator_observers::Change,
    /// #     ) -> percolator_core::Result<()> {
    /// #         let text = change.value.as_deref().unwrap_or_default();
    /// #         let words = String::from_utf8_lossy(text).split_whitespace().count();
    /// #         txn.set("stats", &change.row, "words", words.to_string())
    /// #     }
    /// # }
    /// # #[tokio::main(flavor = "multi_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let mut observers = Observers::new();
    /// # observers.register(WordCount)?;
    /// # let store = Arc::new(MemStore::new());
    /// # let config = RuntimeConfig::default();
    /// # let runtime = Runtime::start(Client::builder(store), observers, config).await?;
    /// let mut txn = runtime.client().begin().await?;
    /// txn.set("docs", "a", "contents", "one two three")?;
    /// txn.commit().await?;
    /// runtime.wait_idle(Duration::from_secs(30)).await?;
    /// assert_eq!(runtime.in_flight(), 0); // idle: nothing runs
    /// # runtime.shutdown().await?;
    /// # Ok(()) }
    /// ```
    pub fn in_flight(&self) -> u64 {
        self.shared.metrics.in_flight.load(Ordering::SeqCst)
    }

    /// Waits until no notification on an observed column is pending, no run is in flight and
    /// the dead-worker sweep owes no pass over the locks, checking every few milliseconds.
    /// Writers should have stopped (or this may never return).
    ///
    /// The check costs nothing while runs are in flight (the worker is busy by definition) and
    /// otherwise reads the notify family only up to the first pending notification
    /// ([`any_pending_on`]): its cost does not grow with the backlog. Only a timeout counts them.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::Client;
    /// # use percolator_observers::{Observers, Runtime, RuntimeConfig};
    /// # struct WordCount;
    /// # #[async_trait::async_trait]
    /// # impl<S: percolator_core::RowStore> percolator_observers::Observer<S> for WordCount {
    /// #     fn name(&self) -> &str {
    /// #         "word-count"
    /// #     }
    /// #     fn observed(&self) -> percolator_core::ObservedColumn {
    /// #         percolator_core::ObservedColumn::strong("docs", "contents")
    /// #     }
    /// #     async fn observe(
    /// #         &self,
    /// #         txn: &mut percolator_core::Transaction<S>,
    /// #         change: &percolator_observers::Change,
    /// #     ) -> percolator_core::Result<()> {
    /// #         let text = change.value.as_deref().unwrap_or_default();
    /// #         let words = String::from_utf8_lossy(text).split_whitespace().count();
    /// #         txn.set("stats", &change.row, "words", words.to_string())
    /// #     }
    /// # }
    /// # #[tokio::main(flavor = "multi_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let mut observers = Observers::new();
    /// # observers.register(WordCount)?;
    /// # let store = Arc::new(MemStore::new());
    /// # let config = RuntimeConfig::default();
    /// # let runtime = Runtime::start(Client::builder(store), observers, config).await?;
    /// for (url, text) in [("a", "one two three"), ("b", "four five"), ("a", "six")] {
    ///     let mut txn = runtime.client().begin().await?;
    ///     txn.set("docs", url, "contents", text)?;
    ///     txn.commit().await?;
    /// }
    /// runtime.wait_idle(Duration::from_secs(30)).await?;
    /// // Every change is processed: `a` has the count of its last text.
    /// let txn = runtime.client().begin().await?;
    /// assert_eq!(txn.get("stats", "a", "words").await?.as_deref(), Some(&b"1"[..]));
    /// assert_eq!(runtime.pending().await?, 0);
    /// # drop(txn);
    /// # runtime.shutdown().await?;
    /// # Ok(()) }
    /// ```
    pub async fn wait_idle(&self, timeout: Duration) -> std::result::Result<(), RuntimeError> {
        let began = Instant::now();
        let metrics = &self.shared.metrics;
        loop {
            // A run that could add notifications either is in flight at one of the two looks or
            // started between them; a quiet pair of looks around an empty scan means idle.
            let started = metrics.started.load(Ordering::SeqCst);
            let in_flight_before = metrics.in_flight.load(Ordering::SeqCst);
            let sweep_owed = self.shared.lock_sweep_owed.load(Ordering::SeqCst);
            if in_flight_before == 0 && !sweep_owed {
                let pending = any_pending_on(&self.shared.client, &self.shared.observers).await?;
                let in_flight = metrics.in_flight.load(Ordering::SeqCst);
                if !pending && in_flight == 0 && started == metrics.started.load(Ordering::SeqCst) {
                    return Ok(());
                }
            }
            if began.elapsed() >= timeout {
                return Err(RuntimeError::NotIdle {
                    pending: self.pending().await?,
                    in_flight: metrics.in_flight.load(Ordering::SeqCst),
                    lock_sweep_owed: self.shared.lock_sweep_owed.load(Ordering::SeqCst),
                    waited: began.elapsed(),
                });
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Stops the scanners, waits for in-flight runs to finish, deregisters the worker and
    /// returns the final counters.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::Client;
    /// # use percolator_observers::{Observers, Runtime, RuntimeConfig};
    /// # struct WordCount;
    /// # #[async_trait::async_trait]
    /// # impl<S: percolator_core::RowStore> percolator_observers::Observer<S> for WordCount {
    /// #     fn name(&self) -> &str {
    /// #         "word-count"
    /// #     }
    /// #     fn observed(&self) -> percolator_core::ObservedColumn {
    /// #         percolator_core::ObservedColumn::strong("docs", "contents")
    /// #     }
    /// #     async fn observe(
    /// #         &self,
    /// #         txn: &mut percolator_core::Transaction<S>,
    /// #         change: &percolator_observers::Change,
    /// #     ) -> percolator_core::Result<()> {
    /// #         let text = change.value.as_deref().unwrap_or_default();
    /// #         let words = String::from_utf8_lossy(text).split_whitespace().count();
    /// #         txn.set("stats", &change.row, "words", words.to_string())
    /// #     }
    /// # }
    /// # #[tokio::main(flavor = "multi_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let mut observers = Observers::new();
    /// # observers.register(WordCount)?;
    /// # let store = Arc::new(MemStore::new());
    /// # let config = RuntimeConfig::default();
    /// # let runtime = Runtime::start(Client::builder(store), observers, config).await?;
    /// let mut txn = runtime.client().begin().await?;
    /// txn.set("docs", "a", "contents", "one two three")?;
    /// txn.commit().await?;
    /// runtime.wait_idle(Duration::from_secs(30)).await?;
    /// let stats = runtime.shutdown().await?; // in-flight runs finish first
    /// assert_eq!(stats.notifications_processed, 1);
    /// # Ok(()) }
    /// ```
    pub async fn shutdown(mut self) -> Result<RuntimeStats> {
        self.shared.stop.cancel();
        for handle in self.scanners.drain(..) {
            if let Err(e) = handle.await {
                tracing::warn!(error = %e, "scanner task ended abnormally");
            }
        }
        self.shared.tracker.close();
        self.shared.tracker.wait().await;
        self.shared.client.shutdown().await?;
        Ok(self.stats())
    }
}

impl<S: RowStore> Drop for Runtime<S> {
    fn drop(&mut self) {
        // Dropped without shutdown: stop scanning (in-flight runs finish on their own).
        self.shared.stop.cancel();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use async_trait::async_trait;
    use percolator_backend_mem::MemStore;
    use percolator_core::conformance::fast_config;
    use percolator_core::{Client, ObservedColumn, Transaction};

    use super::*;
    use crate::pending::PENDING_PAGE;
    use crate::{Change, Observer};

    struct Nop;

    #[async_trait]
    impl Observer<MemStore> for Nop {
        fn name(&self) -> &str {
            "nop"
        }
        fn observed(&self) -> ObservedColumn {
            ObservedColumn::strong("t", "watched")
        }
        async fn observe(&self, _: &mut Transaction<MemStore>, _: &Change) -> Result<()> {
            Ok(())
        }
    }

    /// The cheap idle check looks past pages of rows that only hold columns other workers
    /// observe, and agrees with the full count.
    #[tokio::test]
    async fn any_pending_looks_past_other_workers_columns() {
        let store = Arc::new(MemStore::new());
        let client = Client::builder(Arc::clone(&store))
            .local_oracle()
            .config(fast_config())
            .observe(&ObservedColumn::strong("t", "watched"))
            .observe(&ObservedColumn::strong("t", "elsewhere"))
            .build()
            .await
            .unwrap();
        let mut observers = Observers::new();
        observers.register(Nop).unwrap();
        for i in 0..3 * PENDING_PAGE {
            let mut txn = client.begin().await.unwrap();
            txn.set("t", format!("a{i:04}"), "elsewhere", "x").unwrap();
            txn.commit().await.unwrap();
        }
        assert!(!any_pending_on(&client, &observers).await.unwrap());
        assert_eq!(pending_on(&client, &observers).await.unwrap(), 0);
        let mut txn = client.begin().await.unwrap();
        txn.set("t", "z-last", "watched", "x").unwrap();
        txn.commit().await.unwrap();
        assert!(any_pending_on(&client, &observers).await.unwrap());
        assert_eq!(pending_on(&client, &observers).await.unwrap(), 1);
    }
}
