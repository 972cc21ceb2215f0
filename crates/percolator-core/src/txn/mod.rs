//! Snapshot-isolation transactions over any [`RowStore`] (paper §2.2).
//!
//! - [`Client`]: one per process (or per simulated worker); owns the store handle, the oracle,
//!   the worker's liveness lease and the configuration. Cheap to clone.
//! - [`Transaction`]: `begin` takes a start timestamp; `get`/`scan` read the snapshot at it (and
//!   the transaction's own buffered writes); `set`/`delete` buffer writes, checked against the
//!   backend's limits immediately; `commit` runs the two-phase protocol of [`commit`].
//! - [`Client::run`] re-runs a whole closure on retryable errors.
//!
//! Submodules, one protocol action each: `layout` (the cells every step touches), `read`
//! (snapshot get/scan), `commit` (prewrite/commit), `resolve` (lazy lock cleanup), `retry`
//! (backoff and the run helper), `notify` (observed columns, finding and consuming
//! notifications).

mod commit;
mod layout;
mod notify;
mod one_phase;
mod read;
mod resolve;
mod retry;

use std::collections::{BTreeMap, BTreeSet};
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;

pub use notify::{ClearOutcome, NotificationKind, NotifyRow, NotifyVersion, ObservedColumn};
pub use resolve::TxnStatus;

use crate::error::Result;
use crate::liveness::{Liveness, StoreLiveness};
use crate::oracle::TimestampOracle;
use crate::records::{CellAddr, LockRecord};
use crate::store::{self, Columns, Family, FamilyRead, RowStore, Scan};
use crate::tables::{ack_column, check_user_column, check_user_table, is_reserved_column};

/// Tunables of the transaction layer.
#[derive(Debug, Clone)]
pub struct TxnConfig {
    /// After this long without a heartbeat, a lock may be rolled back even if its owner lives.
    pub lock_ttl: Duration,
    /// A reader gives up waiting for a live lock after this long ([`Error::LockWaitTimeout`]).
    pub lock_wait_timeout: Duration,
    /// How long a worker's liveness lease lasts without a refresh.
    pub worker_lease: Duration,
    /// Attempts of [`Client::run`] before the last retryable error is returned.
    pub max_attempts: u32,
    /// First backoff delay.
    pub backoff_base: Duration,
    /// Largest backoff delay.
    pub backoff_max: Duration,
    /// Call [`RowStore::sync`] after the commit point, before `commit` returns.
    pub durable_commits: bool,
    /// Commit single-row transactions in one row mutation where the store supports it
    /// ([`store::StoreLimits::tracks_snapshot_reads`]; see the `one_phase` module docs).
    pub one_phase_commit: bool,
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
        }
    }
}

impl TxnConfig {
    /// The primary lock's heartbeat period: a third of the TTL.
    pub fn heartbeat_interval(&self) -> Duration {
        (self.lock_ttl / 3).max(Duration::from_millis(1))
    }
}

/// Protocol step boundaries at which a [`CommitHook`] is consulted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CommitStep {
    /// Nothing written yet.
    BeforePrewrite,
    /// The primary row is locked; no secondary is.
    AfterPrimaryPrewrite,
    /// Every row is locked; no commit timestamp yet.
    AfterPrewrites,
    /// Commit timestamp taken; primary not yet committed.
    BeforeCommitPoint,
    /// Primary committed (the commit point); no secondary committed.
    AfterCommitPoint,
    /// Half of the secondary rows committed (only with two or more secondary rows).
    AfterHalfSecondaries,
}

/// What a [`CommitHook`] tells the committer to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookAction {
    /// Go on.
    Continue,
    /// Stop here as if the process died: no cleanup, no more heartbeats.
    Crash,
}

/// Fault injection at protocol steps (tests, chaos runs). A hook may also `await` to pause the
/// commit at a step, for example to let a cleaner race it.
#[async_trait]
pub trait CommitHook: Send + Sync {
    /// Called at each step of a commit of transaction `start_ts`.
    async fn at(&self, step: CommitStep, start_ts: u64) -> HookAction;

    /// Whether single-row transactions may commit in one phase while this hook is installed;
    /// such a commit passes only [`CommitStep::BeforePrewrite`], [`CommitStep::BeforeCommitPoint`]
    /// and [`CommitStep::AfterCommitPoint`]. `false` by default, so that a hook written for the
    /// two-phase steps always sees them.
    fn one_phase(&self) -> bool {
        false
    }
}

/// What a successful commit did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitInfo {
    /// The transaction's start timestamp.
    pub start_ts: u64,
    /// Commit timestamp; `None` for a read-only transaction.
    pub commit_ts: Option<u64>,
    /// Rows written.
    pub rows: usize,
    /// Cells written.
    pub cells: usize,
}

/// A cell as a snapshot sees it, with the commit timestamp of the write that made it so.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Versioned {
    /// The value (`None`: never written, or deleted).
    pub value: Option<Bytes>,
    /// Commit timestamp of the visible put or delete; `None` if the cell was never written.
    pub commit_ts: Option<u64>,
}

/// One cell returned by [`Transaction::scan`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanItem {
    /// Row key.
    pub row: Bytes,
    /// Column.
    pub column: Bytes,
    /// Value.
    pub value: Bytes,
}

/// Counters of what the transaction layer did (cheap, lock-free).
#[derive(Debug, Default)]
pub struct TxnMetrics {
    commits: AtomicU64,
    conflicts: AtomicU64,
    aborts: AtomicU64,
    retries: AtomicU64,
    rolled_forward: AtomicU64,
    rolled_back: AtomicU64,
}

/// A copy of [`TxnMetrics`] at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TxnMetricsSnapshot {
    /// Transactions committed (with writes).
    pub commits: u64,
    /// Commits that failed prewrite on a conflict.
    pub conflicts: u64,
    /// Commits that found themselves rolled back by a cleaner.
    pub aborts: u64,
    /// Re-runs by [`Client::run`].
    pub retries: u64,
    /// Locks of other transactions rolled forward.
    pub locks_rolled_forward: u64,
    /// Locks of other transactions rolled back.
    pub locks_rolled_back: u64,
}

impl TxnMetrics {
    fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn committed(&self) {
        Self::bump(&self.commits);
    }
    pub(crate) fn conflicted(&self) {
        Self::bump(&self.conflicts);
    }
    pub(crate) fn aborted(&self) {
        Self::bump(&self.aborts);
    }
    pub(crate) fn retried(&self) {
        Self::bump(&self.retries);
    }
    pub(crate) fn rolled_forward(&self) {
        Self::bump(&self.rolled_forward);
    }
    pub(crate) fn rolled_back(&self) {
        Self::bump(&self.rolled_back);
    }

    /// Reads every counter.
    pub fn snapshot(&self) -> TxnMetricsSnapshot {
        TxnMetricsSnapshot {
            commits: self.commits.load(Ordering::Relaxed),
            conflicts: self.conflicts.load(Ordering::Relaxed),
            aborts: self.aborts.load(Ordering::Relaxed),
            retries: self.retries.load(Ordering::Relaxed),
            locks_rolled_forward: self.rolled_forward.load(Ordering::Relaxed),
            locks_rolled_back: self.rolled_back.load(Ordering::Relaxed),
        }
    }
}

pub(crate) struct ClientInner<S: RowStore> {
    pub(crate) store: Arc<S>,
    pub(crate) oracle: Arc<dyn TimestampOracle>,
    pub(crate) liveness: Arc<dyn Liveness>,
    pub(crate) config: TxnConfig,
    pub(crate) worker_id: u64,
    pub(crate) metrics: TxnMetrics,
    pub(crate) observed: notify::ObservedSet,
    commit_hook: Option<Arc<dyn CommitHook>>,
    lease_refresher: parking_lot::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl<S: RowStore> Drop for ClientInner<S> {
    fn drop(&mut self) {
        // A dropped client stops refreshing its lease, exactly like a dead process.
        if let Some(task) = self.lease_refresher.get_mut().take() {
            task.abort();
        }
    }
}

/// Builds a [`Client`].
pub struct ClientBuilder<S: RowStore> {
    store: Arc<S>,
    oracle: Option<Arc<dyn TimestampOracle>>,
    config: TxnConfig,
    commit_hook: Option<Arc<dyn CommitHook>>,
    observed: notify::ObservedSet,
}

impl<S: RowStore> ClientBuilder<S> {
    /// Declares an observed column: commits of this client that write it (strong) set its notify
    /// cell. Every client that writes observed columns must declare them — the observer runtime
    /// hands its observers' columns to its own client, and loaders take the same list.
    pub fn observe(mut self, column: &ObservedColumn) -> Self {
        self.observed.add(column);
        self
    }

    /// [`Self::observe`] for each column.
    pub fn observe_all<'a>(
        mut self,
        columns: impl IntoIterator<Item = &'a ObservedColumn>,
    ) -> Self {
        for column in columns {
            self.observed.add(column);
        }
        self
    }

    /// Uses `oracle` instead of the store's process-wide [`crate::oracle::LocalOracle`]
    /// ([`crate::oracle::shared_local_oracle`]).
    pub fn oracle(mut self, oracle: Arc<dyn TimestampOracle>) -> Self {
        self.oracle = Some(oracle);
        self
    }

    /// Sets the configuration.
    pub fn config(mut self, config: TxnConfig) -> Self {
        self.config = config;
        self
    }

    /// Installs a fault-injection hook consulted by every commit of this client.
    pub fn commit_hook(mut self, hook: Arc<dyn CommitHook>) -> Self {
        self.commit_hook = Some(hook);
        self
    }

    /// Registers the worker's liveness lease and starts refreshing it.
    pub async fn build(self) -> Result<Client<S>> {
        let oracle = match self.oracle {
            Some(o) => o,
            None => crate::oracle::shared_local_oracle(&self.store).await?,
        };
        let worker_id = random_id();
        let registry = Arc::new(StoreLiveness::new(Arc::clone(&self.store)));
        let lease = self.config.worker_lease;
        registry.register(worker_id, lease).await?;
        let refresher = {
            let registry = Arc::clone(&registry);
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(lease / 3).await;
                    if let Err(e) = registry.register(worker_id, lease).await {
                        tracing::warn!(worker_id, error = %e, "could not refresh worker lease");
                    }
                }
            })
        };
        Ok(Client {
            inner: Arc::new(ClientInner {
                store: self.store,
                oracle,
                liveness: registry,
                config: self.config,
                worker_id,
                metrics: TxnMetrics::default(),
                observed: self.observed,
                commit_hook: self.commit_hook,
                lease_refresher: parking_lot::Mutex::new(Some(refresher)),
            }),
        })
    }
}

/// A random non-zero id (worker ids, oracle ids).
pub(crate) fn random_id() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    // RandomState is seeded from the OS; mixing in time and pid keeps ids distinct per process.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(crate::liveness::now_ms());
    h.write_u32(std::process::id());
    h.finish() | 1
}

/// A Percolator client over a [`RowStore`]: begins transactions and resolves locks.
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
    pub fn builder(store: Arc<S>) -> ClientBuilder<S> {
        ClientBuilder {
            store,
            oracle: None,
            config: TxnConfig::default(),
            commit_hook: None,
            observed: notify::ObservedSet::default(),
        }
    }

    /// A client with the store's process-wide local oracle and the default configuration.
    pub async fn open(store: Arc<S>) -> Result<Self> {
        Self::builder(store).build().await
    }

    /// The store.
    pub fn store(&self) -> &Arc<S> {
        &self.inner.store
    }

    /// The oracle.
    pub fn oracle(&self) -> &Arc<dyn TimestampOracle> {
        &self.inner.oracle
    }

    /// The configuration.
    pub fn config(&self) -> &TxnConfig {
        &self.inner.config
    }

    /// This client's worker id (written into its locks).
    pub fn worker_id(&self) -> u64 {
        self.inner.worker_id
    }

    /// Counters of what this client did.
    pub fn metrics(&self) -> TxnMetricsSnapshot {
        self.inner.metrics.snapshot()
    }

    /// Begins a transaction at a fresh start timestamp.
    pub async fn begin(&self) -> Result<Transaction<S>> {
        let start_ts = crate::oracle::next_timestamp(self.inner.oracle.as_ref()).await?;
        Ok(Transaction {
            client: self.clone(),
            start_ts,
            writes: BTreeMap::new(),
            notifies: BTreeSet::new(),
            commit_hook: self.inner.commit_hook.clone(),
        })
    }

    /// Deregisters the worker's lease (graceful shutdown). Locks of unfinished commits of this
    /// worker become cleanable at once.
    pub async fn shutdown(&self) -> Result<()> {
        if let Some(task) = self.inner.lease_refresher.lock().take() {
            task.abort();
        }
        StoreLiveness::new(Arc::clone(&self.inner.store))
            .deregister(self.inner.worker_id)
            .await
    }

    /// The status of transaction `start_ts` whose primary is `primary`, without cleaning up.
    pub async fn transaction_status(&self, primary: &CellAddr, start_ts: u64) -> Result<TxnStatus> {
        self.inner.check_status(primary, start_ts, false).await
    }

    /// Every lock in `table` (any timestamp): `(cell, start_ts, lock)`.
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

/// A snapshot-isolation transaction. Reads see the snapshot at [`Transaction::start_ts`] plus
/// this transaction's own writes; writes are buffered until [`Transaction::commit`].
pub struct Transaction<S: RowStore> {
    client: Client<S>,
    start_ts: u64,
    writes: BTreeMap<CellAddr, Option<Bytes>>,
    notifies: BTreeSet<CellAddr>,
    commit_hook: Option<Arc<dyn CommitHook>>,
}

impl<S: RowStore> std::fmt::Debug for Transaction<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transaction")
            .field("start_ts", &self.start_ts)
            .field("buffered_writes", &self.writes.len())
            .finish()
    }
}

fn bytes_of(b: impl AsRef<[u8]>) -> Bytes {
    Bytes::copy_from_slice(b.as_ref())
}

fn bound_of<B: AsRef<[u8]>>(b: Bound<&B>) -> Bound<Bytes> {
    match b {
        Bound::Included(x) => Bound::Included(bytes_of(x)),
        Bound::Excluded(x) => Bound::Excluded(bytes_of(x)),
        Bound::Unbounded => Bound::Unbounded,
    }
}

impl<S: RowStore> Transaction<S> {
    /// The snapshot timestamp.
    pub fn start_ts(&self) -> u64 {
        self.start_ts
    }

    /// Overrides the client's commit hook for this transaction.
    pub fn set_commit_hook(&mut self, hook: Option<Arc<dyn CommitHook>>) {
        self.commit_hook = hook;
    }

    /// Number of buffered writes.
    pub fn buffered_writes(&self) -> usize {
        self.writes.len()
    }

    fn addr(
        &self,
        table: impl AsRef<[u8]>,
        row: impl AsRef<[u8]>,
        column: impl AsRef<[u8]>,
    ) -> Result<CellAddr> {
        check_user_table(table.as_ref())?;
        let limits = self.client.inner.store.limits();
        store::check_key_size(table.as_ref(), row.as_ref(), column.as_ref(), &limits)?;
        Ok(CellAddr::new(
            bytes_of(table),
            bytes_of(row),
            bytes_of(column),
        ))
    }

    /// Reads a cell: this transaction's own write if any, else the snapshot at start_ts.
    pub async fn get(
        &self,
        table: impl AsRef<[u8]>,
        row: impl AsRef<[u8]>,
        column: impl AsRef<[u8]>,
    ) -> Result<Option<Bytes>> {
        let addr = self.addr(table, row, column)?;
        if let Some(own) = self.writes.get(&addr) {
            return Ok(own.clone());
        }
        self.client.inner.snapshot_get(&addr, self.start_ts).await
    }

    /// Like [`Self::get`], with the commit timestamp of the visible write. A cell this
    /// transaction wrote itself reports the snapshot's commit timestamp underneath.
    pub async fn get_versioned(
        &self,
        table: impl AsRef<[u8]>,
        row: impl AsRef<[u8]>,
        column: impl AsRef<[u8]>,
    ) -> Result<Versioned> {
        let addr = self.addr(table, row, column)?;
        let mut seen = self
            .client
            .inner
            .snapshot_get_versioned(&addr, self.start_ts)
            .await?;
        if let Some(own) = self.writes.get(&addr) {
            seen.value = own.clone();
        }
        Ok(seen)
    }

    /// Asks for a weak notification of `table`/`row`/`column`, written with this transaction's
    /// prewrite (so it survives a crash after the commit point). It conflicts with nothing. A
    /// transaction without writes writes it at commit.
    pub fn notify(
        &mut self,
        table: impl AsRef<[u8]>,
        row: impl AsRef<[u8]>,
        column: impl AsRef<[u8]>,
    ) -> Result<()> {
        let addr = self.addr(table, row, column)?;
        self.notifies.insert(addr);
        Ok(())
    }

    /// The start timestamp of observer `observer`'s last run on `table`/`row`/`column` (its ack
    /// column), as of this snapshot.
    pub async fn ack(
        &self,
        table: impl AsRef<[u8]>,
        row: impl AsRef<[u8]>,
        observer: &str,
        column: impl AsRef<[u8]>,
    ) -> Result<Option<u64>> {
        let ack = ack_column(observer, column.as_ref());
        let Some(bytes) = self.get(table, row, &ack).await? else {
            return Ok(None);
        };
        let raw: [u8; 8] = bytes.as_ref().try_into().map_err(|_| {
            crate::Error::Corrupt(format!("ack column holds {} bytes, not 8", bytes.len()))
        })?;
        Ok(Some(u64::from_be_bytes(raw)))
    }

    /// Records that observer `observer` ran on `table`/`row`/`column` at this transaction's start
    /// timestamp. Two runs for one change both write this cell, so at most one commits.
    pub fn set_ack(
        &mut self,
        table: impl AsRef<[u8]>,
        row: impl AsRef<[u8]>,
        observer: &str,
        column: impl AsRef<[u8]>,
    ) -> Result<()> {
        let ack = ack_column(observer, column.as_ref());
        let addr = self.addr(table, row, &ack)?;
        let value = Bytes::copy_from_slice(&self.start_ts.to_be_bytes());
        self.writes.insert(addr, Some(value));
        Ok(())
    }

    /// Buffers a write. Size limits are checked now, so an oversize value fails here, before
    /// anything is locked.
    pub fn set(
        &mut self,
        table: impl AsRef<[u8]>,
        row: impl AsRef<[u8]>,
        column: impl AsRef<[u8]>,
        value: impl Into<Bytes>,
    ) -> Result<()> {
        check_user_column(column.as_ref())?;
        let addr = self.addr(table, row, column)?;
        let value = value.into();
        let limits = self.client.inner.store.limits();
        store::check_value_size(value.len(), &limits)?;
        self.writes.insert(addr, Some(value));
        Ok(())
    }

    /// Buffers a deletion.
    pub fn delete(
        &mut self,
        table: impl AsRef<[u8]>,
        row: impl AsRef<[u8]>,
        column: impl AsRef<[u8]>,
    ) -> Result<()> {
        check_user_column(column.as_ref())?;
        let addr = self.addr(table, row, column)?;
        self.writes.insert(addr, None);
        Ok(())
    }

    /// Every visible cell of `table` with a row in `rows`, restricted to `columns`, ordered by
    /// row then column; includes this transaction's own writes. [`Columns::All`] leaves out
    /// Percolator's reserved columns (observer acks).
    pub async fn scan<B: AsRef<[u8]>>(
        &self,
        table: impl AsRef<[u8]>,
        rows: impl RangeBounds<B>,
        columns: Columns,
    ) -> Result<Vec<ScanItem>> {
        check_user_table(table.as_ref())?;
        let table = bytes_of(table);
        let start = bound_of(rows.start_bound());
        let end = bound_of(rows.end_bound());
        let committed = self
            .client
            .inner
            .snapshot_scan(&table, &start, &end, &columns, self.start_ts)
            .await?;
        let mut merged: BTreeMap<(Bytes, Bytes), Bytes> = committed
            .into_iter()
            .map(|i| ((i.row, i.column), i.value))
            .collect();
        for (addr, value) in &self.writes {
            if addr.table != table
                || !store::row_in_bounds(&addr.row, &start, &end)
                || !columns.matches(&addr.column)
            {
                continue;
            }
            let key = (addr.row.clone(), addr.column.clone());
            match value {
                Some(v) => {
                    merged.insert(key, v.clone());
                }
                None => {
                    merged.remove(&key);
                }
            }
        }
        let all = matches!(columns, Columns::All);
        Ok(merged
            .into_iter()
            .filter(|((_, column), _)| !(all && is_reserved_column(column)))
            .map(|((row, column), value)| ScanItem { row, column, value })
            .collect())
    }

    /// Commits the buffered writes (two-phase, see the `commit` module). A transaction without
    /// writes commits trivially.
    pub async fn commit(self) -> Result<CommitInfo> {
        let Transaction {
            client,
            start_ts,
            writes,
            notifies,
            commit_hook,
        } = self;
        client
            .commit_writes(start_ts, writes, notifies, commit_hook)
            .await
    }
}
