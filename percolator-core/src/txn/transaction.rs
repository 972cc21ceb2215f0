//! [`Transaction`]: one snapshot-isolation transaction, and the values it hands out
//! ([`Versioned`], [`ScanItem`], [`CommitInfo`]).
//!
//! `Client::begin` takes a start timestamp; `get`/`scan` read the snapshot at it (and the
//! transaction's own buffered writes); `set`/`delete` buffer writes, checked against the
//! backend's limits immediately so that an oversize write fails before anything is locked;
//! `commit` hands the buffer to the commit protocol (`commit.rs`, `one_phase.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::ops::{Bound, RangeBounds};
#[cfg(feature = "fault-injection")]
use std::sync::Arc;

use bytes::Bytes;

use crate::error::Result;
use crate::gc::snapshots::SnapshotGuard;
use crate::records::CellAddr;
use crate::store::{self, Columns, RowStore};
use crate::tables::{ack_column, check_user_column, check_user_table, is_reserved_column};

use super::client::Client;
#[cfg(feature = "fault-injection")]
use super::fault::CommitHook;
use super::fault::Faults;

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

/// One page of [`Transaction::scan_page`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanPage {
    /// The visible cells of the page's rows, ordered by row then column.
    pub items: Vec<ScanItem>,
    /// Where the next page starts (`None`: this was the last).
    pub next: Option<Bound<Bytes>>,
}

/// A snapshot-isolation transaction. Reads see the snapshot at [`Transaction::start_ts`] plus
/// this transaction's own writes; writes are buffered until [`Transaction::commit`].
///
/// ```
/// # use std::sync::Arc;
/// # use percolator_backend_mem::MemStore;
/// # use percolator_core::Client;
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> percolator_core::Result<()> {
/// let client = Client::open(Arc::new(MemStore::new())).await?;
/// let mut txn = client.begin().await?;
/// txn.set("accounts", "alice", "balance", "10")?;
/// txn.commit().await?;
///
/// let reader = client.begin().await?; // snapshot: alice has 10
/// let mut writer = client.begin().await?;
/// writer.set("accounts", "alice", "balance", "7")?;
/// writer.commit().await?;
/// // The reader keeps seeing its snapshot; a new transaction sees the commit.
/// let old = reader.get("accounts", "alice", "balance").await?;
/// assert_eq!(old.as_deref(), Some(&b"10"[..]));
/// let new = client.begin().await?.get("accounts", "alice", "balance").await?;
/// assert_eq!(new.as_deref(), Some(&b"7"[..]));
/// # client.shutdown().await }
/// ```
pub struct Transaction<S: RowStore> {
    client: Client<S>,
    start_ts: u64,
    writes: BTreeMap<CellAddr, Option<Bytes>>,
    notifies: BTreeSet<CellAddr>,
    faults: Faults,
    /// Prefetched cells and the columns read per row (`None` where prefetching is off).
    reads: Option<super::prefetch::TxnReads>,
    /// Keeps the start timestamp published as in use until the transaction is dropped.
    _snapshot: SnapshotGuard,
}

impl<S: RowStore> std::fmt::Debug for Transaction<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transaction")
            .field("start_ts", &self.start_ts)
            .field("buffered_writes", &self.writes.len())
            .finish()
    }
}

pub(super) fn bytes_of(b: impl AsRef<[u8]>) -> Bytes {
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
    /// A transaction of `client` at `start_ts`, nothing buffered.
    pub(super) fn new(
        client: Client<S>,
        start_ts: u64,
        snapshot: SnapshotGuard,
        faults: Faults,
    ) -> Self {
        let reads = client.inner.prefetches().then(|| {
            super::prefetch::TxnReads::new(std::sync::Arc::clone(&client.inner.read_patterns))
        });
        Self {
            client,
            start_ts,
            writes: BTreeMap::new(),
            notifies: BTreeSet::new(),
            faults,
            reads,
            _snapshot: snapshot,
        }
    }

    /// The snapshot timestamp.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::Client;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// # let client = Client::open(Arc::new(MemStore::new())).await?;
    /// let txn = client.begin().await?;
    /// let later = client.begin().await?;
    /// assert!(later.start_ts() > txn.start_ts());
    /// # client.shutdown().await }
    /// ```
    pub fn start_ts(&self) -> u64 {
        self.start_ts
    }

    /// Overrides the client's commit hook for this transaction (`None`: no hook; feature
    /// `fault-injection`).
    #[cfg(feature = "fault-injection")]
    pub fn set_commit_hook(&mut self, hook: Option<Arc<dyn CommitHook>>) {
        self.faults = Faults::new(hook);
    }

    /// The limits of the store this transaction writes to: how many rows, and operations per
    /// row, a commit may take (an application that batches sizes its batches by them).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::Client;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// # let client = Client::open(Arc::new(MemStore::new())).await?;
    /// let txn = client.begin().await?;
    /// let limits = txn.store_limits();
    /// assert!(limits.max_batch_rows > 0);
    /// assert!(!limits.distributed); // MemStore lives in this process
    /// # client.shutdown().await }
    /// ```
    pub fn store_limits(&self) -> crate::StoreLimits {
        self.client.inner.store.limits()
    }

    /// Number of buffered writes.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::Client;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// # let client = Client::open(Arc::new(MemStore::new())).await?;
    /// let mut txn = client.begin().await?;
    /// txn.set("docs", "a", "contents", "hello")?;
    /// txn.set("docs", "a", "contents", "hello again")?; // replaces the first write
    /// txn.delete("docs", "b", "contents")?;
    /// assert_eq!(txn.buffered_writes(), 2);
    /// # client.shutdown().await }
    /// ```
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
        crate::backend::validate::check_key_size(
            table.as_ref(),
            row.as_ref(),
            column.as_ref(),
            &limits,
        )?;
        Ok(CellAddr::new(
            bytes_of(table),
            bytes_of(row),
            bytes_of(column),
        ))
    }

    /// Reads a cell: this transaction's own write if any, else the snapshot at start_ts.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::Client;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// # let client = Client::open(Arc::new(MemStore::new())).await?;
    /// let mut txn = client.begin().await?;
    /// assert_eq!(txn.get("docs", "a", "contents").await?, None); // never written
    /// txn.set("docs", "a", "contents", "hello")?;
    /// // Its own buffered write, before the commit:
    /// assert_eq!(txn.get("docs", "a", "contents").await?.as_deref(), Some(&b"hello"[..]));
    /// txn.commit().await?;
    /// let txn = client.begin().await?;
    /// assert_eq!(txn.get("docs", "a", "contents").await?.as_deref(), Some(&b"hello"[..]));
    /// # client.shutdown().await }
    /// ```
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
        let Some(reads) = &self.reads else {
            return self.client.inner.snapshot_get(&addr, self.start_ts).await;
        };
        let cached = {
            let mut cache = reads.cache.lock();
            cache.note_read(&addr);
            cache.get(&addr)
        };
        if let Some((value, first_use)) = cached {
            if first_use {
                self.client.inner.metrics.prefetch_hit();
            }
            return Ok(value);
        }
        let companions = reads.companions(&addr, |a| self.writes.contains_key(a));
        if companions.is_empty() {
            return self.client.inner.snapshot_get(&addr, self.start_ts).await;
        }
        // The cell and its usual companions in one store call; the companions are kept.
        let mut addrs = Vec::with_capacity(companions.len() + 1);
        addrs.push(addr);
        addrs.extend(companions);
        let mut seen = self
            .client
            .inner
            .snapshot_get_batch(&addrs, 1, self.start_ts)
            .await?
            .into_iter();
        let value = seen.next().flatten().and_then(|s| s.value);
        let mut cache = reads.cache.lock();
        let mut kept = 0;
        // A companion behind a lock is left for its own read to resolve.
        for (addr, cell) in addrs.into_iter().skip(1).zip(seen) {
            if let Some(cell) = cell {
                cache.keep(addr, cell.value);
                kept += 1;
            }
        }
        self.client.inner.metrics.prefetched(kept);
        Ok(value)
    }

    /// Reads many cells, across rows and tables, at this transaction's snapshot: the answers
    /// [`Self::get`] would give, in order, from one store call
    /// ([`RowStore::read_rows`](crate::RowStore::read_rows): on etcd one read-only transaction,
    /// not one round trip per cell). A cell behind a lock is resolved (or waited out) on its
    /// own, as [`Self::get`] does; this transaction's own writes answer for themselves.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::Client;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// # let client = Client::open(Arc::new(MemStore::new())).await?;
    /// let mut txn = client.begin().await?;
    /// txn.set("docs", "a", "title", "A")?;
    /// txn.set("links", "b", "from:a", "see b")?;
    /// txn.commit().await?;
    ///
    /// let txn = client.begin().await?;
    /// let cells = [("docs", "a", "title"), ("links", "b", "from:a"), ("docs", "z", "title")];
    /// let values = txn.get_many(cells).await?;
    /// assert_eq!(values[0].as_deref(), Some(&b"A"[..]));
    /// assert_eq!(values[1].as_deref(), Some(&b"see b"[..]));
    /// assert_eq!(values[2], None);
    /// # client.shutdown().await }
    /// ```
    ///
    /// The cells are checked and taken before the returned future starts, so it holds none of
    /// the iterator (a closure over borrowed rows can feed it from inside a `Send` future).
    pub fn get_many<T, R, C>(
        &self,
        cells: impl IntoIterator<Item = (T, R, C)>,
    ) -> impl Future<Output = Result<Vec<Option<Bytes>>>> + Send + '_
    where
        T: AsRef<[u8]>,
        R: AsRef<[u8]>,
        C: AsRef<[u8]>,
    {
        let addrs = cells
            .into_iter()
            .map(|(table, row, column)| self.addr(table, row, column))
            .collect::<Result<Vec<_>>>();
        async move { self.get_addrs(addrs?).await }
    }

    /// [`Self::get_many`] of checked addresses.
    async fn get_addrs(&self, addrs: Vec<CellAddr>) -> Result<Vec<Option<Bytes>>> {
        // Cells prefetched before answer from the cache (and every read is noted for learning).
        let mut cached: std::collections::HashMap<CellAddr, Option<Bytes>> = Default::default();
        if let Some(reads) = &self.reads {
            let mut cache = reads.cache.lock();
            for addr in &addrs {
                cache.note_read(addr);
                if let Some((value, first_use)) = cache.get(addr) {
                    if first_use {
                        self.client.inner.metrics.prefetch_hit();
                    }
                    cached.insert(addr.clone(), value);
                }
            }
        }
        let unread: Vec<CellAddr> = addrs
            .iter()
            .filter(|addr| !self.writes.contains_key(*addr) && !cached.contains_key(*addr))
            .cloned()
            .collect();
        let mut read = self
            .client
            .inner
            .snapshot_get_many(&unread, self.start_ts)
            .await?
            .into_iter();
        Ok(addrs
            .iter()
            .map(|addr| match (self.writes.get(addr), cached.get(addr)) {
                (Some(own), _) => own.clone(),
                (None, Some(value)) => value.clone(),
                (None, None) => read.next().and_then(|seen| seen.value),
            })
            .collect())
    }

    /// Like [`Self::get`], with the commit timestamp of the visible write. A cell this
    /// transaction wrote itself reports the snapshot's commit timestamp underneath.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::{Client, Versioned};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// # let client = Client::open(Arc::new(MemStore::new())).await?;
    /// let mut txn = client.begin().await?;
    /// txn.set("docs", "a", "contents", "hello")?;
    /// let info = txn.commit().await?;
    ///
    /// let txn = client.begin().await?;
    /// let seen = txn.get_versioned("docs", "a", "contents").await?;
    /// assert_eq!(seen.value.as_deref(), Some(&b"hello"[..]));
    /// assert_eq!(seen.commit_ts, info.commit_ts);
    /// let never = txn.get_versioned("docs", "b", "contents").await?;
    /// assert_eq!(never, Versioned::default()); // no value, no commit timestamp
    /// # client.shutdown().await }
    /// ```
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
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::Client;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// # let client = Client::open(Arc::new(MemStore::new())).await?;
    /// let mut txn = client.begin().await?;
    /// txn.notify("docs", "a", "contents")?; // wake the column's (weak) observers
    /// txn.commit().await?;
    /// assert_eq!(client.pending_notifications("docs").await?, 1);
    /// # client.shutdown().await }
    /// ```
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
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::Client;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// # let client = Client::open(Arc::new(MemStore::new())).await?;
    /// let mut run = client.begin().await?;
    /// run.set("stats", "a", "words", "2")?;
    /// run.set_ack("docs", "a", "word-count", "contents")?;
    /// let run_ts = run.start_ts();
    /// run.commit().await?;
    ///
    /// let txn = client.begin().await?;
    /// assert_eq!(txn.ack("docs", "a", "word-count", "contents").await?, Some(run_ts));
    /// assert_eq!(txn.ack("docs", "a", "other", "contents").await?, None);
    /// # client.shutdown().await }
    /// ```
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
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::Client;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// # let client = Client::open(Arc::new(MemStore::new())).await?;
    /// let mut run = client.begin().await?;
    /// run.set_ack("docs", "a", "word-count", "contents")?;
    /// let run_ts = run.start_ts();
    /// run.commit().await?;
    /// let txn = client.begin().await?;
    /// assert_eq!(txn.ack("docs", "a", "word-count", "contents").await?, Some(run_ts));
    /// # client.shutdown().await }
    /// ```
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

    /// Sets observer `observer`'s ack of `table`/`row`/`column` to `ack` instead of this
    /// transaction's start timestamp: how a parked change is handed back to its observer (its
    /// ack as before the change was parked; 0 for "never ran").
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::Client;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// # let client = Client::open(Arc::new(MemStore::new())).await?;
    /// let mut txn = client.begin().await?;
    /// txn.restore_ack("docs", "a", "word-count", "contents", 42)?;
    /// txn.commit().await?;
    /// let txn = client.begin().await?;
    /// assert_eq!(txn.ack("docs", "a", "word-count", "contents").await?, Some(42));
    /// # client.shutdown().await }
    /// ```
    pub fn restore_ack(
        &mut self,
        table: impl AsRef<[u8]>,
        row: impl AsRef<[u8]>,
        observer: &str,
        column: impl AsRef<[u8]>,
        ack: u64,
    ) -> Result<()> {
        let ack_addr = ack_column(observer, column.as_ref());
        let addr = self.addr(table, row, &ack_addr)?;
        self.writes
            .insert(addr, Some(Bytes::copy_from_slice(&ack.to_be_bytes())));
        Ok(())
    }

    /// Whether this transaction notifies `table`/`row`/`column` with [`Self::notify`] (the
    /// observer runtime asks it to find a batching observer that left work for another run).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::Client;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// # let client = Client::open(Arc::new(MemStore::new())).await?;
    /// let mut txn = client.begin().await?;
    /// txn.notify("queue", "shard-0", "apply")?;
    /// assert!(txn.notifies_cell("queue", "shard-0", "apply"));
    /// assert!(!txn.notifies_cell("queue", "shard-1", "apply"));
    /// # client.shutdown().await }
    /// ```
    pub fn notifies_cell(
        &self,
        table: impl AsRef<[u8]>,
        row: impl AsRef<[u8]>,
        column: impl AsRef<[u8]>,
    ) -> bool {
        let addr = CellAddr::new(bytes_of(table), bytes_of(row), bytes_of(column));
        self.notifies.contains(&addr)
    }

    /// Whether this transaction has a buffered write (or delete) of `table`/`row`/`column`
    /// (the observer runtime asks it to find observers that write the column they observe).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::Client;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// # let client = Client::open(Arc::new(MemStore::new())).await?;
    /// let mut txn = client.begin().await?;
    /// txn.set("docs", "a", "contents", "hello")?;
    /// txn.delete("docs", "b", "contents")?;
    /// assert!(txn.writes_cell("docs", "a", "contents"));
    /// assert!(txn.writes_cell("docs", "b", "contents")); // a delete is a write too
    /// assert!(!txn.writes_cell("docs", "a", "title"));
    /// # client.shutdown().await }
    /// ```
    pub fn writes_cell(
        &self,
        table: impl AsRef<[u8]>,
        row: impl AsRef<[u8]>,
        column: impl AsRef<[u8]>,
    ) -> bool {
        let addr = CellAddr::new(bytes_of(table), bytes_of(row), bytes_of(column));
        self.writes.contains_key(&addr)
    }

    /// Buffers a write. Size limits are checked now, so an oversize value fails here, before
    /// anything is locked.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::Client;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// # let client = Client::open(Arc::new(MemStore::new())).await?;
    /// let mut txn = client.begin().await?;
    /// // One transaction may write any rows of any tables.
    /// txn.set("docs", "https://example.com/", "contents", "<html>…</html>")?;
    /// txn.set("dups", "hash:1234", "canonical-url", "https://example.com/")?;
    /// txn.set("docs", "https://example.com/", "size", 15.to_string())?;
    /// assert_eq!(txn.commit().await?.cells, 3);
    /// let txn = client.begin().await?;
    /// let size = txn.get("docs", "https://example.com/", "size").await?;
    /// assert_eq!(size.as_deref(), Some(&b"15"[..]));
    /// # client.shutdown().await }
    /// ```
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
        crate::backend::validate::check_value_size(value.len(), &limits)?;
        self.writes.insert(addr, Some(value));
        Ok(())
    }

    /// Buffers a deletion.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::Client;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// # let client = Client::open(Arc::new(MemStore::new())).await?;
    /// let mut txn = client.begin().await?;
    /// txn.set("docs", "a", "contents", "hello")?;
    /// txn.commit().await?;
    /// let mut txn = client.begin().await?;
    /// txn.delete("docs", "a", "contents")?;
    /// assert_eq!(txn.get("docs", "a", "contents").await?, None); // its own delete
    /// txn.commit().await?;
    /// let txn = client.begin().await?;
    /// assert_eq!(txn.get("docs", "a", "contents").await?, None);
    /// # client.shutdown().await }
    /// ```
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
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::{Client, Columns};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// # let client = Client::open(Arc::new(MemStore::new())).await?;
    /// let mut txn = client.begin().await?;
    /// for (row, a, b) in [("r1", "a1", "b1"), ("r2", "a2", "b2"), ("r3", "a3", "b3")] {
    ///     txn.set("s", row, "a", a)?;
    ///     txn.set("s", row, "b", b)?;
    /// }
    /// txn.commit().await?;
    ///
    /// let txn = client.begin().await?;
    /// let all = txn.scan::<&str>("s", .., Columns::All).await?;
    /// assert_eq!(all.len(), 6); // ordered by row, then column
    /// assert_eq!((&all[0].row[..], &all[0].column[..]), (&b"r1"[..], &b"a"[..]));
    /// let some = txn.scan("s", "r2".."r3", Columns::one("a")).await?;
    /// assert_eq!(some.len(), 1);
    /// assert_eq!(&some[0].value[..], b"a2");
    /// # client.shutdown().await }
    /// ```
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
                || !crate::backend::scan::row_in_bounds(&addr.row, &start, &end)
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

    /// At most about `row_limit` rows of [`Self::scan`] from `start` on: memory bounded by the
    /// page, not the table. The page ends at the `row_limit`-th row with committed history (at
    /// or below the snapshot), so a page may hold fewer rows with visible cells; continue from
    /// [`ScanPage::next`] until it is `None`. Every page reads the same snapshot.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::{Client, Columns};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// # let client = Client::open(Arc::new(MemStore::new())).await?;
    /// # use std::ops::Bound;
    /// let mut txn = client.begin().await?;
    /// for i in 0..5 {
    ///     txn.set("t", format!("row{i}"), "c", "v")?;
    /// }
    /// txn.commit().await?;
    /// // Every row committed (a row still locked by a commit in flight has no committed
    /// // history yet, so it would not count towards a page's rows).
    /// client.finish_background_commits().await;
    ///
    /// let txn = client.begin().await?;
    /// let (mut start, mut pages, mut cells) = (Bound::Unbounded, 0, 0);
    /// loop {
    ///     let page = txn.scan_page("t", start, Columns::All, 2).await?;
    ///     pages += 1;
    ///     cells += page.items.len();
    ///     match page.next {
    ///         Some(next) => start = next,
    ///         None => break,
    ///     }
    /// }
    /// assert_eq!((pages, cells), (3, 5));
    /// # client.shutdown().await }
    /// ```
    pub async fn scan_page(
        &self,
        table: impl AsRef<[u8]>,
        start: Bound<Bytes>,
        columns: Columns,
        row_limit: usize,
    ) -> Result<ScanPage> {
        check_user_table(table.as_ref())?;
        let table = bytes_of(table);
        let limit = row_limit.max(1);
        let rows = self
            .client
            .inner
            .store
            .scan(store::Scan {
                snapshot_ts: Some(self.start_ts),
                table: table.clone(),
                start: start.clone(),
                end: Bound::Unbounded,
                read: store::FamilyRead::all(store::Family::Write)
                    .columns(columns.clone())
                    .ts(store::TsRange::up_to(self.start_ts))
                    .max_versions(1),
                row_limit: Some(limit),
            })
            .await?;
        let end = match rows.last() {
            Some(last) if rows.len() >= limit => Some(last.row.clone()),
            _ => None,
        };
        let items = match &end {
            Some(end) => self.scan(&table, (start, Bound::Included(end.clone())), columns),
            None => self.scan(&table, (start, Bound::Unbounded), columns),
        }
        .await?;
        Ok(ScanPage {
            items,
            next: end.map(Bound::Excluded),
        })
    }

    /// Commits the buffered writes (two-phase, see the `commit` module). A transaction without
    /// writes commits trivially.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::Client;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// # let client = Client::open(Arc::new(MemStore::new())).await?;
    /// let mut txn = client.begin().await?;
    /// txn.set("docs", "a", "contents", "hello")?;
    /// txn.set("docs", "a", "title", "greeting")?;
    /// let info = txn.commit().await?;
    /// assert!(info.commit_ts > Some(info.start_ts));
    /// assert_eq!((info.rows, info.cells), (1, 2));
    ///
    /// let read_only = client.begin().await?;
    /// assert_eq!(read_only.commit().await?.commit_ts, None);
    /// # client.shutdown().await }
    /// ```
    pub async fn commit(self) -> Result<CommitInfo> {
        let Transaction {
            client,
            start_ts,
            writes,
            notifies,
            faults,
            reads,
            _snapshot: snapshot,
        } = self;
        // What this transaction read is learned from now (the cache is not needed any more).
        drop(reads);
        // The snapshot stays published until the commit is done (its prewrite is checked).
        let committed = client
            .commit_writes(start_ts, writes, notifies, faults)
            .await;
        drop(snapshot);
        committed
    }
}
