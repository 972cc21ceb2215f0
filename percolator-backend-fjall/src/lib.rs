//! # percolator-backend-fjall
//!
//! An embedded, persistent [`RowStore`] on [fjall](https://docs.rs/fjall) 3, a log-structured
//! merge tree (LSM) engine, and the `percolator` command's default embedded backend: far less
//! disk and far fewer writes than sled, with faster indexing. An LSM tree rewrites its data
//! in compacted, **lz4-compressed** sorted files, so the directory stays near the size of the
//! live data (after garbage collection too) without the offline compaction sled needs.
//!
//! ## Layout
//! - **One fjall keyspace per family** (`data`, `lock`, `write`, `notify`; keyspaces are fjall
//!   3's column families, each its own LSM tree): Bigtable's locality groups, so the observers'
//!   scan of the notify family never reads data.
//! - Keys are [`percolator_core::backend::key::CellKey::encode`]: `enc(table) ++ enc(row) ++
//!   enc(column) ++ !ts`, order-preserving and prefix-free, so a row is one key prefix and
//!   versions come newest first — the same keys as the sled backend.
//! - Data blocks are lz4-compressed on **every** level ([`FjallConfig::compression`]; fjall's
//!   default leaves the two smallest levels uncompressed), and so are journal entries of 4 KiB
//!   and more.
//! - **Key-value separation** for the data family: values of at least
//!   [`FjallConfig::blob_threshold`] bytes (4 KiB by default) go to fjall's blob files
//!   (lz4-compressed too), so compactions of the data tree move small pointers instead of large
//!   values. The other families hold small records (locks, write records, notifications) and
//!   keep their values inline. Scans and condition checks that only need keys never load a
//!   separated value.
//!
//! These options are stored with each keyspace when it is created: they apply to new
//! databases; an existing one keeps the options it was created with.
//!
//! **Notifications leave no tombstones behind.** A notify key is deleted with a *weak* tombstone
//! (RocksDB's `SingleDelete`): when a flush or compaction brings it together with the value it
//! deletes, both vanish, where a plain tombstone is carried down to the last level. That is safe
//! because a notify key never holds two values: the store writes no put of a notify key that
//! exists and refuses one that would change its value (see `FjallStore::commit_writes`). Should
//! a database hold a notify key twice with the same value (its writer's), a weak delete may
//! bring the older copy back, which is the same notification again: the observer runs once
//! more, as notifications allow.
//!
//! Two families also live partly in memory (Bigtable's in-memory locality groups), because an
//! LSM range lookup cannot use bloom filters and steps over every tombstone in its range, and
//! locks and notifications are each written once and deleted once:
//! - the `lock_mirror` module: the live lock keys, which answer the lock family's conditions,
//!   reads and scans;
//! - the `notify_cells` module: the cells that hold notifications, each with how many, whose
//!   rows the observers' scans walk, and each busy cell's **absorbed** notification: one that
//!   names its commit timestamp (a one-phase commit's) and arrives while the cell already holds
//!   a notify key is kept there in memory instead of written as a key of its own, so a cell that
//!   many writers notify between two observer runs holds one or two notifications, not one per
//!   writer ([`FjallConfig::coalesce_notifications`]).
//!
//! Both are rebuilt from the engine on open and hold only what is live: the transactions in
//! flight and the backlog of notifications. A third structure, the `recent_writes` module,
//! answers prewrite's write-conflict check (also a range lookup, in the write family) from the
//! newest write of each recently written column, in sharded hash maps. Since the engine's lock
//! keyspace is then read only at open, it gets a small memtable (1 MiB, see [`MemtableSizes`]):
//! it only takes puts and deletes, which a shallow skip list takes cheaper.
//!
//! ## Atomicity
//! fjall is single-process. Per-row atomicity comes from **in-process row latches** (4096
//! striped `RwLock`s hashed by `(table, row)`), as in the sled backend: a row mutation takes its
//! row's latch for writing, checks its conditions against a fresh fjall snapshot, then applies
//! all of its puts and deletes — across keyspaces — in **one fjall write batch**, which is
//! atomic across the keyspaces of one database and **crash-atomic** (the journal holds the batch
//! between a start and a checksummed end marker; recovery drops a torn batch whole). A batch
//! whose rows are distinct goes in slices of 512 rows: a slice takes all of its rows' latches in
//! stripe order and applies every successful item in a single write batch. Only each item is
//! atomic, so a huge batch (an inverter's prewrite of tens of thousands of term rows) need not
//! hold every latch stripe while it applies.
//!
//! An **all-or-nothing** batch ([`RowStore::mutate_rows_atomically`], which one-phase commits of
//! several rows use) takes every row's latch at once, checks every item against one snapshot
//! and applies all of them in one write batch, or none: atomic for readers and after a crash
//! alike. So it cannot be sliced, and the store takes at most 512 rows in one
//! ([`StoreLimits::max_atomic_rows`], the slice size). Without that cap an inverter's one-phase
//! commit of ~10 000 term rows would hold nearly every stripe while it plans and applies, and
//! every snapshot read would wait behind it: a little less CPU for the run, at the price of
//! much slower incremental updates.
//!
//! **Readers take no row latch.** Every read and scan goes through one fjall [`Snapshot`] (a
//! sequence number across all keyspaces), and a snapshot never sees half of a write batch: all
//! items of a batch carry one sequence number, and fjall publishes it as visible only after
//! every item is in its memtable (under the journal lock, so in commit order). So a read of
//! several families of a row is a consistent snapshot of the row, and the ordering argument the
//! sled backend needs (a scan *finds* rows in one tree before latching them, so sled's
//! transaction must apply the write tree before the lock tree: its `COMMIT_ORDER`) is moot here:
//! a commit's move of a row from the lock family to the write family is one atomic step for
//! every snapshot (the conformance case `store_lock_to_write_transition_never_hides_a_row`
//! checks it). Scans of the data and write families take no latch; a scan of the lock family
//! reads the lock mirror, each row that holds a lock under its row's latch. A row read passes
//! through its row's latch (for reading, and lets go at once) in two cases: a snapshot read's
//! admission, below, and a read of the lock family, which it answers from the in-memory lock
//! mirror under that latch (see the layout above).
//!
//! **A scan is one pass of one iterator** (the `scan_stream` module): it steps over the keys it
//! does not want (other columns, versions outside its range or past its limit) and seeks past
//! them only after 8 in a row, since a seek builds a new iterator over every memtable and table
//! (the TPC-E run spent two thirds of its CPU in a seek per row and per column before).
//!
//! ## Snapshot reads and one-phase commit
//! The store tracks snapshot reads ([`StoreLimits::tracks_snapshot_reads`]), so single-row
//! transactions commit in one row mutation conditional on
//! [`Condition::NoSnapshotReadSince`]: the newest `snapshot_ts` a point read was admitted at is an
//! atomic per latch stripe, and that of a scan one per table (hashed into
//! [`SCAN_MARKS`](percolator_backend_embedded::SCAN_MARKS) slots), raised *before* the reader
//! opens its fjall snapshot; a mutation checks its row's stripe and its table's mark (see
//! [`RowLatches`]). The argument that no
//! admitted reader misses a mutation whose condition held is the sled backend's:
//! - the mutation checks the marks under its row's write latch and keeps the latch until its
//!   batch is visible; a **point read** admits itself, then takes the row latch for reading and
//!   opens its snapshot under it (and lets go at once): either the mutation saw the reader's
//!   timestamp and failed, or it held the latch first and the snapshot includes it;
//! - a **scan** cannot latch rows it has not found yet (a mutation may create one), so
//!   mutations carrying the condition also hold one of [`SCAN_GATES`] shared gates (for
//!   reading) from before the check until after the write; a snapshot scan, after admitting
//!   itself, takes every gate once for writing (and lets go at once) before it opens its
//!   snapshot. Any mutation checked before the admission has then landed, and every later one
//!   sees the admission and fails. The gates are shared among writers, and a scan waits only for
//!   writes already in flight: no global lock.
//!
//! Both sides put a `SeqCst` fence between raising or reading a mark and the next step; the
//! conformance case `one_phase_condition_is_atomic_against_concurrent_readers` races the two.
//!
//! ## Durability — what is on disk when a commit returns
//! Every write (a single key insert or a write batch) is appended to fjall's journal and handed
//! to the operating system before the call returns (fjall's default `PersistMode::Buffer`). So
//! when `Transaction::commit` returns, the commit survives `kill -9` of the process, but not yet
//! a machine crash or power loss. Recovery replays a prefix of the journal, so a lost commit is
//! lost whole (its primary), and the locks of half-written transactions are resolved lazily as
//! usual.
//!
//! With `TxnConfig::default().with_durable_commits(true)` the transaction layer calls
//! [`RowStore::sync`] (= `Database::persist(PersistMode::SyncAll)`, an `fsync` of the journal)
//! right after the commit point, before `commit` returns: then every acknowledged commit
//! survives power loss (as far as the file system honours `fsync`). The timestamp oracle always
//! syncs its high-water mark. Concurrent `sync` calls are grouped: one `fsync` runs at a time (on
//! tokio's blocking pool) and covers every caller whose writes completed before it started
//! (group commit).
//!
//! ## Blocking
//! fjall reads and writes run inline on the async task, as sled's do: writes go to the journal's
//! buffer and the memtable, reads mostly hit memtables and the block cache. fjall flushes and
//! compacts in its own worker threads (at least 3, see [`FjallConfig::worker_threads`]); when
//! they fall far behind, a write may briefly sleep
//! (fjall's write stall). `sync` runs the `fsync` on tokio's blocking pool. Latches are held only
//! inside synchronous code, never across an `.await`.
//!
//! ## Space
//! Deleted and overwritten keys become tombstones that compactions drop, and blob files are
//! rewritten once a quarter of them is stale: no offline compaction is needed.
//!
//! ## Limits
//! Keys up to 16 KiB encoded (fjall: 64 KiB), values up to 16 MiB (fjall: 4 GiB), 100 000 row
//! mutations per batch — the sled backend's limits, so data moves between the two.
//!
//! [`Condition::NoSnapshotReadSince`]: percolator_core::Condition::NoSnapshotReadSince
//! [`Snapshot`]: fjall::Snapshot

#[cfg(test)]
mod coalescing_tests;
mod config;
#[cfg(feature = "conformance")]
pub mod conformance;
#[cfg(feature = "conformance")]
pub mod kill9;
mod lock_mirror;
mod mutate;
mod notify;
mod notify_cells;
mod open;
mod read;
mod recent_writes;
mod scan_stream;
#[cfg(test)]
mod tests;

use std::path::PathBuf;

use async_trait::async_trait;
use bytes::Bytes;
use fjall::{Database, Keyspace};
use percolator_backend_embedded::{GroupSync, RowLatches, long_synchronous};
use percolator_core::backend::key::{self, KeyError};
use percolator_core::{
    AtomicOutcome, Cell, Family, MutationOutcome, ReadRow, RowCells, RowMutation, RowStore, Scan,
    StoreError, StoreLimits,
};

pub use config::{FJALL_LIMITS, FjallConfig, MIN_DEFAULT_WORKER_THREADS, MemtableSizes};
pub use percolator_backend_embedded::SCAN_GATES;

use crate::lock_mirror::LockMirror;
use crate::notify_cells::NotifyCells;
use crate::recent_writes::RecentWrites;

/// The fjall-backed store. See the crate docs.
pub struct FjallStore {
    db: Database,
    /// One keyspace per family, in [`Family::index`] order.
    keyspaces: Vec<Keyspace>,
    /// Group commit for `sync`: one `fsync` at a time.
    group_sync: GroupSync,
    /// Row latches, snapshot admission and scan gates (see the crate docs).
    latches: RowLatches,
    /// The cells that hold notify keys, with how many each, and their absorbed notifications
    /// ([`notify_cells`]).
    notify_cells: NotifyCells,
    /// [`FjallConfig::coalesce_notifications`].
    coalesce: bool,
    /// The live keys of the lock family, for condition checks ([`lock_mirror`]).
    locks: LockMirror,
    /// The newest write-family version of recently written columns ([`recent_writes`]).
    recent: std::sync::Arc<RecentWrites>,
    /// The background scan that finds the write family's highest timestamp at open, and its
    /// stop flag (set and joined on drop).
    opening_scan: Option<(
        std::sync::Arc<std::sync::atomic::AtomicBool>,
        std::thread::JoinHandle<()>,
    )>,
    path: PathBuf,
    /// `fjall:` and the canonical database path ([`RowStore::store_id`]).
    id: String,
}

impl Drop for FjallStore {
    fn drop(&mut self) {
        // The opening scan holds a snapshot of the database: stop it before the database goes.
        if let Some((stop, thread)) = self.opening_scan.take() {
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            let _ = thread.join();
        }
    }
}

impl std::fmt::Debug for FjallStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FjallStore")
            .field("path", &self.path)
            .finish()
    }
}

/// A fjall error as a [`StoreError`]: failed checksums and undecodable blocks or journal entries
/// are [`StoreError::Corrupt`], everything else a backend error.
fn backend(context: &str, e: fjall::Error) -> StoreError {
    use fjall::LsmError;
    let corrupt = match &e {
        fjall::Error::Storage(inner) => matches!(
            inner,
            LsmError::ChecksumMismatch { .. }
                | LsmError::Decompress(_)
                | LsmError::InvalidTag(_)
                | LsmError::InvalidTrailer
                | LsmError::InvalidHeader(_)
                | LsmError::Utf8(_)
        ),
        fjall::Error::Decompress(_)
        | fjall::Error::InvalidTrailer
        | fjall::Error::InvalidTag(_)
        | fjall::Error::JournalRecovery(_) => true,
        _ => false,
    };
    if corrupt {
        StoreError::Corrupt(format!("fjall: {context}: {e}"))
    } else {
        StoreError::backend(format!("fjall: {context}"), e)
    }
}

fn corrupt(e: KeyError) -> StoreError {
    StoreError::Corrupt(format!("undecodable key in fjall keyspace: {e}"))
}

/// The version of cell key `k` (its last eight bytes).
fn ts_of(k: &[u8]) -> Result<u64, StoreError> {
    let at = k.len().saturating_sub(8);
    key::decode_ts(&k[at..], at).map_err(corrupt)
}

impl FjallStore {
    /// The keyspace of `family`.
    fn keyspace(&self, family: Family) -> &Keyspace {
        &self.keyspaces[family.index()]
    }
}

#[async_trait]
impl RowStore for FjallStore {
    fn name(&self) -> &'static str {
        "fjall"
    }

    fn limits(&self) -> StoreLimits {
        FJALL_LIMITS
    }

    /// `fjall:` and the canonical database path: every handle on one database has the same id
    /// (fjall lets one process open a database once at a time; this keeps a reopened handle on
    /// the same oracle).
    fn store_id(&self) -> String {
        self.id.clone()
    }

    async fn read_row(&self, request: ReadRow) -> Result<Vec<Vec<Cell>>, StoreError> {
        tokio::task::consume_budget().await;
        self.read_cells(request)
    }

    async fn scan(&self, request: Scan) -> Result<Vec<RowCells>, StoreError> {
        tokio::task::consume_budget().await;
        // An unbounded scan is usually a short one (a row, a prefix): only a bounded page of many
        // rows counts as long.
        let rows = request.row_limit.unwrap_or(0);
        long_synchronous(rows, || self.scan_rows(request))
    }

    async fn mutate_rows(
        &self,
        batch: Vec<RowMutation>,
    ) -> Result<Vec<MutationOutcome>, StoreError> {
        tokio::task::consume_budget().await;
        long_synchronous(batch.len(), || self.mutate_batch(batch))
    }

    /// One fjall write batch under every row's latch: atomic for readers (a snapshot never sees
    /// part of a batch) and after a crash (the journal drops a torn batch whole).
    async fn mutate_rows_atomically(
        &self,
        batch: Vec<RowMutation>,
    ) -> Result<AtomicOutcome, StoreError> {
        tokio::task::consume_budget().await;
        long_synchronous(batch.len(), || self.mutate_batch_atomically(batch))
    }

    async fn sync(&self) -> Result<(), StoreError> {
        self.persist_journal().await
    }

    /// Skips from table to table in each family's keyspace: one seek per table.
    async fn tables(&self) -> Result<Vec<Bytes>, StoreError> {
        self.table_names()
    }
}
