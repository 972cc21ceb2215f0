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
//! - Keys are [`percolator_core::key::CellKey::encode`]: `enc(table) ++ enc(row) ++ enc(column) ++
//!   !ts`, order-preserving and prefix-free, so a row is one key prefix and versions come newest
//!   first — the same keys as the sled backend.
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
//! - the `lock_mirror` module: the live lock keys, which answer the lock family's conditions;
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
//! checks it). Scans take no latch. A row read passes through its row's latch (for reading,
//! and lets go at once) in two cases: a snapshot read's admission, below, and a read of the
//! lock family, which it answers from the in-memory lock mirror under that latch (see
//! the layout above).
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

#[cfg(test)]
mod coalescing_tests;
#[cfg(feature = "conformance")]
pub mod conformance;
#[cfg(feature = "conformance")]
pub mod kill9;
mod lock_mirror;
mod notify_cells;
mod recent_writes;

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use bytes::Bytes;
use fjall::config::CompressionPolicy;
use fjall::{
    CompressionType, Database, Keyspace, KeyspaceCreateOptions, KvSeparationOptions, PersistMode,
    Readable as _, Snapshot,
};
use percolator_backend_embedded::{
    GroupSync, KeyLookup, KeyWrite, RowLatches, plan, prefix_end, rows_are_distinct, scan_range,
    version_bounds,
};
use percolator_core::key::{self, KeyError};
use percolator_core::records::NotifyRecord;
use percolator_core::store::{validate_atomic_batch, validate_batch};
use percolator_core::{
    AtomicOutcome, Cell, Columns, Family, FamilyRead, MutationOutcome, ReadRow, RowCells,
    RowMutation, RowStore, Scan, StoreError, StoreLimits, TsRange,
};

pub use percolator_backend_embedded::SCAN_GATES;

use crate::lock_mirror::LockMirror;
use crate::notify_cells::{Absorbed, NotifyCells};
use crate::recent_writes::RecentWrites;

/// The limits of [`FjallStore`] (the sled backend's: both fit in fjall's 64 KiB keys and 4 GiB
/// values).
pub const FJALL_LIMITS: StoreLimits = StoreLimits::new(16 * 1024, 16 * 1024 * 1024, 100_000)
    .with_persistent(true)
    .with_durable_after_sync(true)
    .with_tracks_snapshot_reads(true)
    .with_max_atomic_rows(LATCHED_SLICE_ROWS)
    .with_prefers_point_reads(true);

/// The fewest flush and compaction threads [`FjallConfig::worker_threads`] `None` gives.
pub const MIN_DEFAULT_WORKER_THREADS: usize = 3;

/// The most rows one write batch of a large distinct-row mutation covers (see
/// [`FjallStore::mutate_rows`]).
const LATCHED_SLICE_ROWS: usize = 512;

/// How to open a [`FjallStore`].
///
/// `#[non_exhaustive]` so that options can be added: start from [`FjallConfig::new`] and change
/// what you need with the `with_*` setters. [`Self::compression`], [`Self::blob_threshold`] and
/// [`Self::memtable_sizes`] are fixed when a database is created (fjall stores them with each
/// keyspace); reopening an existing database keeps the ones it was created with.
///
/// ```
/// # use percolator_backend_fjall::FjallConfig;
/// let config = FjallConfig::new("/tmp/db")
///     .with_cache_capacity(64 << 20)
///     .with_blob_threshold(None);
/// assert_eq!(config.blob_threshold, None);
/// assert!(config.compression);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct FjallConfig {
    /// Directory of the database.
    pub path: PathBuf,
    /// fjall's block cache size in bytes. The default is 64 MiB: the web index reads mostly what
    /// it just wrote (from memtables) and raw pages once, so a larger cache mostly holds memory:
    /// it raises an index run's peak RSS without making the run faster.
    pub cache_capacity: u64,
    /// lz4-compress data blocks on every level and journal entries of 4 KiB and more. Off: no
    /// compression at all.
    pub compression: bool,
    /// Data-family values of at least this many bytes are stored in fjall's blob files
    /// (key-value separation); `None` keeps every value inline.
    pub blob_threshold: Option<u32>,
    /// fjall's flush and compaction threads; `None` for fjall's default (the number of cores, at
    /// most 4), but at least [`MIN_DEFAULT_WORKER_THREADS`]. With more than one, fjall's first
    /// worker only flushes and rotates memtables and passes every compaction on (re-queueing it
    /// while the others are busy, a busy loop that takes a noticeable share of the CPU on few
    /// cores), so of two threads only one compacts. Three make index runs markedly shorter than
    /// two; with one thread compaction falls behind, and memory and disk use grow far past the
    /// data's size.
    pub worker_threads: Option<usize>,
    /// The memtable size of each family's keyspace (see [`MemtableSizes`] for the defaults and
    /// why).
    pub memtable_sizes: MemtableSizes,
    /// The most bytes fjall's journals may hold before it flushes the oldest memtables (at least
    /// 64 MiB is used). Everything journaled and not yet flushed is also in a memtable, so this
    /// bounds the memtables' memory too: with fjall's default of 512 MiB a large index run keeps
    /// most of that resident.
    pub max_journal_size: u64,
    /// Coalesce notifications that name their commit timestamp (a one-phase commit's) into a
    /// cell that already holds a notify key: the cell keeps the newest in memory instead of a key
    /// per writer (see the crate docs). On by default. Off, every notification is a key.
    pub coalesce_notifications: bool,
}

impl FjallConfig {
    /// Defaults for `path`: 64 MiB cache, lz4 compression, blob files for data values of
    /// 4 KiB and more, fjall's default worker threads but at least 3, journals of at most
    /// 128 MiB, [`MemtableSizes::default`], and notifications coalesced.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            cache_capacity: 64 * 1024 * 1024,
            compression: true,
            blob_threshold: Some(4 * 1024),
            worker_threads: None,
            memtable_sizes: MemtableSizes::default(),
            max_journal_size: 128 * 1024 * 1024,
            coalesce_notifications: true,
        }
    }

    /// Sets [`Self::path`].
    #[must_use]
    pub fn with_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.path = path.into();
        self
    }

    /// Sets [`Self::cache_capacity`].
    #[must_use]
    pub fn with_cache_capacity(mut self, cache_capacity: u64) -> Self {
        self.cache_capacity = cache_capacity;
        self
    }

    /// Sets [`Self::compression`].
    #[must_use]
    pub fn with_compression(mut self, compression: bool) -> Self {
        self.compression = compression;
        self
    }

    /// Sets [`Self::blob_threshold`].
    #[must_use]
    pub fn with_blob_threshold(mut self, blob_threshold: Option<u32>) -> Self {
        self.blob_threshold = blob_threshold;
        self
    }

    /// Sets the memtable size of `family`'s keyspace in [`Self::memtable_sizes`] (at least
    /// [`MemtableSizes::MIN`] is used).
    #[must_use]
    pub fn with_memtable_size(mut self, family: Family, bytes: u64) -> Self {
        *self.memtable_sizes.of_mut(family) = bytes;
        self
    }

    /// Sets [`Self::max_journal_size`].
    #[must_use]
    pub fn with_max_journal_size(mut self, bytes: u64) -> Self {
        self.max_journal_size = bytes;
        self
    }

    /// Sets [`Self::coalesce_notifications`].
    #[must_use]
    pub fn with_coalesce_notifications(mut self, coalesce: bool) -> Self {
        self.coalesce_notifications = coalesce;
        self
    }

    /// Sets [`Self::worker_threads`] (a value of 0 counts as 1).
    #[must_use]
    pub fn with_worker_threads(mut self, worker_threads: Option<usize>) -> Self {
        self.worker_threads = worker_threads;
        self
    }
}

/// The memtable size of each family's keyspace, in bytes ([`FjallConfig::memtable_sizes`]).
///
/// A memtable is a skip list: every write searches it, and each entry holds its key, value and
/// node overhead in memory until the memtable is flushed. So a small memtable costs less per
/// insert and holds less memory, but flushes more, smaller tables, which compaction then
/// rewrites. fjall's default is 64 MiB. The defaults here are tuned on indexing runs of
/// realistic pages (`percolator webindex scale`):
///
/// - **lock, 1 MiB.** Conditions on locks are answered from an in-memory mirror of the live
///   locks (see the crate docs) and the keyspace is read only at open, so its memtable only
///   takes writes: each lock is put once and deleted once. A small memtable makes index runs
///   faster and lowers their peak RSS.
/// - **data, 32 MiB.** Lower peak RSS than 64 MiB, in the load and in the run, for slightly
///   more CPU and slightly more bytes written.
/// - **write and notify, 64 MiB.** Both keyspaces take many small entries, and small memtables
///   multiply the compactions: much more CPU and more bytes written, for little memory saved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct MemtableSizes {
    /// The data family's keyspace.
    pub data: u64,
    /// The lock family's keyspace.
    pub lock: u64,
    /// The write family's keyspace.
    pub write: u64,
    /// The notify family's keyspace.
    pub notify: u64,
}

impl MemtableSizes {
    /// The smallest memtable size used: a smaller setting counts as this.
    pub const MIN: u64 = 64 * 1024;

    /// The size for `family`'s keyspace.
    pub fn of(&self, family: Family) -> u64 {
        match family {
            Family::Data => self.data,
            Family::Lock => self.lock,
            Family::Write => self.write,
            Family::Notify => self.notify,
        }
    }

    fn of_mut(&mut self, family: Family) -> &mut u64 {
        match family {
            Family::Data => &mut self.data,
            Family::Lock => &mut self.lock,
            Family::Write => &mut self.write,
            Family::Notify => &mut self.notify,
        }
    }
}

impl Default for MemtableSizes {
    fn default() -> Self {
        const MIB: u64 = 1024 * 1024;
        Self {
            data: 32 * MIB,
            lock: MIB,
            write: 64 * MIB,
            notify: 64 * MIB,
        }
    }
}

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

/// How many notify keys of one cell, whose existence the in-memory counts cannot answer, a
/// mutation must write before the store reads the cell's notify keys in one range instead of
/// looking each up (see `FjallStore::notify_plan`).
const CELL_READ_FROM: usize = 4;

/// The final write of one notify key in a batch ([`FjallStore::notify_plan`]).
#[derive(Clone, Copy)]
struct FinalWrite<'a> {
    key: &'a [u8],
    /// The key without its version.
    cell: &'a [u8],
    /// The length of the cell's row prefix.
    row_len: usize,
    ts: u64,
    /// The index of the write in the batch.
    index: usize,
    put: bool,
    /// Whether the cell holds a notify key before the batch (it is in
    /// [`FjallStore::notify_cells`]).
    cell_holds_keys: bool,
}

/// How a write batch changes one cell's notify keys ([`FjallStore::notify_plan`]).
struct NotifyDelta {
    /// The cell (a notify key without its version).
    cell: Vec<u8>,
    /// The length of its row prefix.
    row_len: usize,
    /// Keys added less keys deleted.
    delta: i64,
    /// The newest version among the keys added (0 if none).
    newest: u64,
}

/// Per cell while planning: (row prefix length, keys added less keys deleted, newest added).
type CellChanges<'a> = foldhash::HashMap<&'a [u8], (usize, i64, u64)>;

/// What a write batch does to the notify family besides its writes ([`FjallStore::notify_plan`]).
#[derive(Default)]
struct NotifyPlan {
    /// How the cells' counts change.
    deltas: Vec<NotifyDelta>,
    /// The indexes of notify writes that must not reach the engine.
    skip: Vec<usize>,
    /// Puts absorbed by their cells instead of written (see [`notify_cells`]), taken in once the
    /// batch applies.
    absorb: Vec<(Vec<u8>, Absorbed)>,
    /// Cells whose absorbed version the batch deletes or writes as a key: forgotten once it
    /// applies.
    forget: Vec<Vec<u8>>,
    /// Absorbed versions written as keys, because the batch deletes their cells' last stored
    /// key.
    put_back: Vec<KeyWrite>,
}

/// Whether deletes of `family`'s keys are weak tombstones ([`FjallStore::commit_writes`]).
fn weak_delete(family: Family) -> bool {
    family == Family::Notify
}

/// The `enc(table) ++ enc(row)` prefix of a cell key.
fn row_prefix_of(k: &[u8]) -> Result<&[u8], StoreError> {
    let (_, table_len) = key::decode_bytes(k, 0).map_err(corrupt)?;
    let (_, row_len) = key::decode_bytes(&k[table_len..], table_len).map_err(corrupt)?;
    Ok(&k[..table_len + row_len])
}

/// The cell of cell key `k` (`enc(table) ++ enc(row) ++ enc(column)`, the key without its
/// version) and the length of its row prefix.
fn cell_of(k: &[u8]) -> Result<(&[u8], usize), StoreError> {
    let row_len = row_prefix_of(k)?.len();
    let rest = k.get(row_len..).unwrap_or_default();
    let (_, column_len) = key::decode_bytes(rest, row_len).map_err(corrupt)?;
    Ok((&k[..row_len + column_len], row_len))
}

/// The version `write` would put, as an absorbed notification, if its value names its commit
/// timestamp (see [`notify_cells`]).
fn absorbable(write: &KeyWrite, ts: u64) -> Option<Absorbed> {
    let value = write.value.as_ref()?;
    let record = NotifyRecord::decode(value).ok()?;
    Some(Absorbed {
        ts,
        committed_at: record.committed_at?,
        value: value.clone(),
    })
}

/// What [`FjallStore::read_row`] knows of one read from memory, under the row's latch.
enum Known {
    /// The answer (locks, from the lock mirror).
    Cells(Vec<Cell>),
    /// The newest write record asked for is at `ts` (from the recent writes).
    NewestWrite { column: Bytes, ts: u64 },
    /// Ask the engine.
    Nothing,
}

/// The first key of `keyspace` in `range` as seen by `snapshot`, without loading its value.
fn first_key<R: std::ops::RangeBounds<Vec<u8>>>(
    snapshot: &Snapshot,
    keyspace: &Keyspace,
    range: R,
    context: &str,
) -> Result<Option<fjall::UserKey>, StoreError> {
    snapshot
        .range(keyspace, range)
        .next()
        .map(|guard| guard.key().map_err(|e| backend(context, e)))
        .transpose()
}

impl FjallStore {
    /// Opens (or creates) a store at `path` with default settings.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_with(FjallConfig::new(path.as_ref()))
    }

    /// Opens (or creates) a store.
    pub fn open_with(config: FjallConfig) -> Result<Self, StoreError> {
        let compression = if config.compression {
            CompressionType::Lz4
        } else {
            CompressionType::None
        };
        let mut builder = Database::builder(&config.path)
            .cache_size(config.cache_capacity)
            .max_journaling_size(config.max_journal_size.max(64 * 1024 * 1024))
            .journal_compression(compression);
        let threads = config.worker_threads.unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map_or(1, |n| n.get().min(4))
                .max(MIN_DEFAULT_WORKER_THREADS)
        });
        builder = builder.worker_threads(threads.max(1));
        let db = builder.open().map_err(|e| backend("open", e))?;
        // fjall created the directory: its canonical path names the data however it was reached.
        let canonical = std::fs::canonicalize(&config.path).map_err(|e| {
            StoreError::backend(format!("canonicalize {}", config.path.display()), e)
        })?;
        let keyspaces = Family::ALL
            .iter()
            .map(|family| {
                db.keyspace(family.name(), || {
                    let options = KeyspaceCreateOptions::default()
                        .data_block_compression_policy(CompressionPolicy::all(compression))
                        .max_memtable_size(
                            config.memtable_sizes.of(*family).max(MemtableSizes::MIN),
                        );
                    match config.blob_threshold {
                        Some(threshold) if *family == Family::Data => {
                            options.with_kv_separation(Some(
                                KvSeparationOptions::default()
                                    .compression(compression)
                                    .separation_threshold(threshold),
                            ))
                        }
                        _ => options,
                    }
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| backend("open keyspace", e))?;
        let store = Self {
            db,
            keyspaces,
            group_sync: GroupSync::default(),
            latches: RowLatches::new(),
            notify_cells: NotifyCells::default(),
            coalesce: config.coalesce_notifications,
            locks: LockMirror::default(),
            recent: std::sync::Arc::default(),
            opening_scan: None,
            path: config.path,
            id: format!("fjall:{}", canonical.display()),
        };
        let mut store = store;
        store.load_notify_cells()?;
        store.load_locks()?;
        store.opening_scan = store.scan_write_family();
        Ok(store)
    }

    /// Starts the background scan for the highest timestamp in the write family (see
    /// [`recent_writes`]); until it finishes, write conflicts are checked in the engine. `None`
    /// if no thread could be started (then they always are).
    fn scan_write_family(
        &self,
    ) -> Option<(
        std::sync::Arc<std::sync::atomic::AtomicBool>,
        std::thread::JoinHandle<()>,
    )> {
        use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let snapshot = self.db.snapshot();
        let keyspace = self.keyspace(Family::Write).clone();
        let recent = std::sync::Arc::clone(&self.recent);
        let stopped = std::sync::Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("fjall-write-scan".into())
            .spawn(move || {
                let mut highest = 0;
                for (i, guard) in snapshot.iter(&keyspace).enumerate() {
                    if i % 4096 == 0 && stopped.load(Relaxed) {
                        return;
                    }
                    // An engine error: conflicts stay checked in the engine.
                    let Ok((k, _)) = guard.into_inner() else {
                        return;
                    };
                    let at = k.len().saturating_sub(8);
                    match key::decode_ts(&k[at..], at) {
                        Ok(ts) => highest = highest.max(ts),
                        Err(_) => return,
                    }
                }
                recent.opened_at(highest);
            })
            .ok()?;
        Some((stop, thread))
    }

    /// Fills [`Self::locks`] from the lock keyspace.
    fn load_locks(&self) -> Result<(), StoreError> {
        for guard in self.db.snapshot().iter(self.keyspace(Family::Lock)) {
            let (k, v) = guard.into_inner().map_err(|e| backend("open", e))?;
            self.locks.load(k.to_vec(), Bytes::copy_from_slice(&v));
        }
        Ok(())
    }

    /// Fills [`Self::notify_cells`] from the notify keyspace: every live notify key is counted in
    /// its cell.
    fn load_notify_cells(&self) -> Result<(), StoreError> {
        for guard in self.db.snapshot().iter(self.keyspace(Family::Notify)) {
            let k = guard.key().map_err(|e| backend("open", e))?;
            let (cell, row_len) = cell_of(&k)?;
            self.notify_cells.add(cell, row_len, 1, ts_of(&k)?);
        }
        Ok(())
    }

    /// What `writes` do to the notify family if they apply (the caller holds the rows'
    /// latches, so the answers stay true until they do):
    ///
    /// - **Counts.** Per cell, the keys that the final writes put and the engine's latest state
    ///   lacks, less those they delete and it holds. [`Self::notify_cells`] answers most puts.
    ///   The engine answers the rest: by point lookups, or, for a cell with at least
    ///   [`CELL_READ_FROM`] such keys (an observer clearing a busy cell's backlog), by one read
    ///   of the cell's notify keys. Those keys are usually flushed by then, so each point
    ///   lookup of a present key searches a table per level, and such lookups would be a large
    ///   part of a link-forwarding run's store work.
    /// - **Skips.** The notify writes that must not reach the engine: all but the last write of
    ///   each key, and a last write that changes nothing (a put of a key that exists, a delete of
    ///   one that does not). What remains puts only absent keys and deletes only present ones,
    ///   which is what makes weak tombstones safe (see [`Self::commit_writes`]).
    /// - **Coalescing** (see [`notify_cells`]). A new key whose value names its commit
    ///   timestamp, in a cell that holds a key and that the batch deletes nothing from, is
    ///   absorbed instead of written. A delete of a cell's absorbed version forgets it. A cell
    ///   whose last stored keys the batch deletes while its absorbed version stays gets that
    ///   version written as a key in the same batch (the key was never written, so it holds one
    ///   value, as weak tombstones need).
    fn notify_plan<'a>(&self, writes: &'a [KeyWrite]) -> Result<NotifyPlan, StoreError> {
        let mut plan = NotifyPlan::default();
        // Sized for the batch (a document's commit carries a notify write per link) and hashed
        // with foldhash (seeded per process), which is cheaper than SipHash on short keys.
        let mut last: foldhash::HashMap<&'a [u8], usize> =
            foldhash::HashMapExt::with_capacity(writes.len());
        for (index, w) in writes.iter().enumerate() {
            if w.family == Family::Notify
                && let Some(earlier) = last.insert(&w.key, index)
            {
                plan.skip.push(earlier);
            }
        }
        if last.is_empty() {
            return Ok(plan);
        }
        let mut finals = Vec::with_capacity(last.len());
        // The cells the batch deletes from: nothing is absorbed into them, so that the put-back
        // below sees every absorbed version that stays.
        let mut deleting: foldhash::HashSet<&'a [u8]> = foldhash::HashSet::default();
        for (key, index) in last {
            let (cell, row_len) = cell_of(key)?;
            let put = writes[index].value.is_some();
            if !put {
                deleting.insert(cell);
            }
            finals.push(FinalWrite {
                key,
                cell,
                row_len,
                ts: ts_of(key)?,
                index,
                put,
                cell_holds_keys: false,
            });
        }
        let keyspace = self.keyspace(Family::Notify);
        let mut changes: CellChanges<'a> = foldhash::HashMapExt::with_capacity(finals.len());
        // Per cell, the keys whose existence only the engine knows.
        let mut ask_engine: foldhash::HashMap<&'a [u8], Vec<FinalWrite<'a>>> =
            foldhash::HashMap::default();
        for mut write in finals {
            // The map is exact for a latched row: a cell it lacks holds no notify key, and none
            // newer than the cell's bound. Only the rest needs the engine.
            let newest = self.notify_cells.newest_ts(write.cell);
            write.cell_holds_keys = newest.is_some();
            match newest {
                None => self.settle(&mut plan, &mut changes, &deleting, writes, write, false)?,
                Some(newest) if write.put && write.ts > newest => {
                    self.settle(&mut plan, &mut changes, &deleting, writes, write, false)?;
                }
                Some(_) => ask_engine.entry(write.cell).or_default().push(write),
            }
        }
        for (cell, asked) in ask_engine {
            if asked.len() < CELL_READ_FROM {
                for write in asked {
                    let exists = keyspace
                        .contains_key(write.key)
                        .map_err(|e| backend("notify count", e))?;
                    self.settle(&mut plan, &mut changes, &deleting, writes, write, exists)?;
                }
            } else {
                // In key order: the cell's keys are one range of the keyspace.
                let held = keyspace
                    .prefix(cell)
                    .map(|guard| guard.key())
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| backend("notify count", e))?;
                for write in asked {
                    let exists = held.binary_search_by(|k| k.as_ref().cmp(write.key)).is_ok();
                    self.settle(&mut plan, &mut changes, &deleting, writes, write, exists)?;
                }
            }
        }
        for (cell, (_, delta, newest)) in &mut changes {
            if *delta >= 0
                || i64::try_from(self.notify_cells.count(cell)).unwrap_or(i64::MAX) + *delta > 0
                || plan.forget.iter().any(|forgotten| forgotten == cell)
            {
                continue;
            }
            let Some(absorbed) = self.notify_cells.absorbed(cell) else {
                continue;
            };
            let mut key = cell.to_vec();
            key::encode_ts(&mut key, absorbed.ts);
            plan.put_back.push(KeyWrite {
                family: Family::Notify,
                key,
                value: Some(absorbed.value),
            });
            *delta += 1;
            *newest = (*newest).max(absorbed.ts);
            plan.forget.push(cell.to_vec());
        }
        plan.deltas = changes
            .into_iter()
            .filter(|(_, (_, delta, _))| *delta != 0)
            .map(|(cell, (row_len, delta, newest))| NotifyDelta {
                cell: cell.to_vec(),
                row_len,
                delta,
                newest,
            })
            .collect();
        Ok(plan)
    }

    /// Plans the final write of one notify key, which the engine holds or not (`exists`); see
    /// [`Self::notify_plan`].
    fn settle<'a>(
        &self,
        plan: &mut NotifyPlan,
        changes: &mut CellChanges<'a>,
        deleting: &foldhash::HashSet<&'a [u8]>,
        writes: &[KeyWrite],
        write: FinalWrite<'a>,
        exists: bool,
    ) -> Result<(), StoreError> {
        if write.put && exists {
            self.check_notify_unchanged(&writes[write.index])?;
        }
        if !write.put
            && self
                .notify_cells
                .absorbed(write.cell)
                .is_some_and(|absorbed| absorbed.ts == write.ts)
        {
            plan.forget.push(write.cell.to_vec());
        }
        if write.put
            && !exists
            && self.coalesce
            && write.cell_holds_keys
            && !deleting.contains(write.cell)
            && let Some(absorbed) = absorbable(&writes[write.index], write.ts)
        {
            plan.skip.push(write.index);
            plan.absorb.push((write.cell.to_vec(), absorbed));
            return Ok(());
        }
        if exists == write.put {
            plan.skip.push(write.index);
            return Ok(());
        }
        let entry = changes.entry(write.cell).or_insert((write.row_len, 0, 0));
        if write.put {
            entry.1 += 1;
            entry.2 = entry.2.max(write.ts);
        } else {
            entry.1 -= 1;
        }
        Ok(())
    }

    /// A put of a notify key that exists must write the value it holds: a notify version is
    /// written once (its value names its writer, whose start timestamp is its version), and the
    /// weak tombstones of [`Self::commit_writes`] rely on it. Anything else is refused before
    /// anything applies.
    fn check_notify_unchanged(&self, write: &KeyWrite) -> Result<(), StoreError> {
        let held = self
            .keyspace(Family::Notify)
            .get(&write.key)
            .map_err(|e| backend("notify count", e))?;
        if held.as_deref() == write.value.as_deref() || held.is_none() {
            return Ok(());
        }
        let cell = key::CellKey::decode(&write.key).map_err(corrupt)?;
        Err(StoreError::InvalidInput(format!(
            "notify version {} of row {:?}, column {:?} in table {:?} exists with another value: \
             notify versions are written once",
            cell.ts,
            String::from_utf8_lossy(&cell.row),
            String::from_utf8_lossy(&cell.column),
            String::from_utf8_lossy(&cell.table),
        )))
    }

    /// Applies `writes`, planned under the latches of their rows, keeping [`Self::notify_cells`]
    /// counting each cell's notify keys (the new keys count before the writes apply, the deleted
    /// ones stop counting after) and holding the absorbed notifications (taken in and forgotten
    /// after the writes apply; see [`notify_cells`]).
    fn apply(&self, mut writes: Vec<KeyWrite>) -> Result<(), StoreError> {
        let NotifyPlan {
            deltas,
            mut skip,
            absorb,
            forget,
            put_back,
        } = self.notify_plan(&writes)?;
        if !skip.is_empty() {
            skip.sort_unstable();
            let mut index = 0;
            writes.retain(|_| {
                let keep = skip.binary_search(&index).is_err();
                index += 1;
                keep
            });
        }
        writes.extend(put_back);
        for d in deltas.iter().filter(|d| d.delta > 0) {
            self.notify_cells
                .add(&d.cell, d.row_len, d.delta.unsigned_abs(), d.newest);
        }
        let lock_writes = LockMirror::writes_of(&writes);
        let write_family: Vec<KeyWrite> = writes
            .iter()
            .filter(|w| w.family == Family::Write)
            .cloned()
            .collect();
        if let Err(e) = self.commit_writes(writes) {
            // Nothing applied: the new keys do not count.
            for d in deltas.iter().filter(|d| d.delta > 0) {
                self.notify_cells.subtract(&d.cell, d.delta.unsigned_abs());
            }
            return Err(e);
        }
        self.locks.applied(lock_writes);
        if self.recent.applied(&write_family) {
            // Over its bound: forget the older half, off this thread.
            let recent = std::sync::Arc::clone(&self.recent);
            let _ = std::thread::Builder::new()
                .name("fjall-forget".into())
                .spawn(move || recent.forget_oldest());
        }
        for (cell, version) in absorb {
            self.notify_cells.absorb(&cell, version);
        }
        for cell in &forget {
            self.notify_cells.forget_absorbed(cell);
        }
        for d in deltas.iter().filter(|d| d.delta < 0) {
            self.notify_cells.subtract(&d.cell, d.delta.unsigned_abs());
        }
        Ok(())
    }

    /// The database directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes fjall reports on disk (journals, tables and blob files).
    pub fn size_on_disk(&self) -> Result<u64, StoreError> {
        self.db.disk_space().map_err(|e| backend("disk_space", e))
    }

    /// The keyspace of `family`.
    fn keyspace(&self, family: Family) -> &Keyspace {
        &self.keyspaces[family.index()]
    }

    /// What memory answers for `read` of `table`/`row` under the row's latch.
    fn known_under_latch(
        &self,
        table: &[u8],
        row: &[u8],
        read: &FamilyRead,
    ) -> Result<Known, StoreError> {
        match (read.family, &read.columns, read.max_versions) {
            (Family::Lock, _, _) => Ok(Known::Cells(self.locks.read(table, row, read)?)),
            // The newest write record of one column (what a snapshot read asks): a range
            // lookup seeks into every table, a point lookup of its known timestamp passes
            // most of them by their bloom filters.
            (Family::Write, Columns::Only(list), Some(1))
                if list.len() == 1 && !read.ts.is_empty() =>
            {
                let column = list[0].clone();
                let prefix = key::column_prefix(table, row, &column);
                Ok(match self.recent.newest_in(&prefix, read.ts) {
                    Some(ts) => Known::NewestWrite { column, ts },
                    None => Known::Nothing,
                })
            }
            _ => Ok(Known::Nothing),
        }
    }

    /// The write record of `column` at `ts` in `snapshot`, by a point lookup; `None` if the
    /// snapshot lacks it (then the caller reads the range).
    fn newest_write(
        &self,
        snapshot: &Snapshot,
        request: &ReadRow,
        column: &Bytes,
        ts: u64,
    ) -> Result<Option<Cell>, StoreError> {
        let mut cell_key = key::column_prefix(&request.table, &request.row, column);
        key::encode_ts(&mut cell_key, ts);
        let value = snapshot
            .get(self.keyspace(Family::Write), cell_key)
            .map_err(|e| backend("read", e))?;
        Ok(value.map(|v| Cell {
            column: column.clone(),
            ts,
            value: Bytes::copy_from_slice(&v),
        }))
    }

    /// Cells of one family of one row, as `snapshot` sees them.
    ///
    /// The notify family's include the row's absorbed notifications ([`notify_cells`]).
    fn read_family(
        &self,
        snapshot: &Snapshot,
        row_prefix: &[u8],
        table: &[u8],
        row: &[u8],
        read: &FamilyRead,
    ) -> Result<Vec<Cell>, StoreError> {
        let mut cells = self.read_stored(snapshot, row_prefix, table, row, read)?;
        if read.family == Family::Notify {
            self.merge_absorbed(row_prefix, read, &mut cells)?;
        }
        Ok(cells)
    }

    /// Adds to `cells`, the notify cells `read` found stored in the row `row_prefix` (by column,
    /// newest first), the row's absorbed notifications that `read` asks for, in their places
    /// (within `read.max_versions` per column).
    fn merge_absorbed(
        &self,
        row_prefix: &[u8],
        read: &FamilyRead,
        cells: &mut Vec<Cell>,
    ) -> Result<(), StoreError> {
        if read.ts.is_empty() {
            return Ok(());
        }
        let mut added = false;
        for (cell, version) in self.notify_cells.absorbed_in_row(row_prefix) {
            if !read.ts.contains(version.ts) {
                continue;
            }
            let rest = cell.get(row_prefix.len()..).unwrap_or_default();
            let (column, _) = key::decode_bytes(rest, row_prefix.len()).map_err(corrupt)?;
            let wanted = match &read.columns {
                Columns::All => true,
                Columns::Only(list) => list.iter().any(|c| c.as_ref() == column.as_slice()),
            };
            let stored = cells
                .iter()
                .any(|c| c.ts == version.ts && c.column.as_ref() == column.as_slice());
            if wanted && !stored {
                cells.push(Cell {
                    column: Bytes::from(column),
                    ts: version.ts,
                    value: version.value,
                });
                added = true;
            }
        }
        if added {
            cells.sort_by(|a, b| a.column.cmp(&b.column).then(b.ts.cmp(&a.ts)));
            if let Some(limit) = read.max_versions {
                let mut taken: Option<(Bytes, usize)> = None;
                cells.retain(|c| {
                    let n = match &mut taken {
                        Some((column, n)) if *column == c.column => n,
                        _ => &mut taken.insert((c.column.clone(), 0)).1,
                    };
                    *n += 1;
                    *n <= limit
                });
            }
        }
        Ok(())
    }

    /// Cells of one family of one row stored in the engine, as `snapshot` sees them.
    fn read_stored(
        &self,
        snapshot: &Snapshot,
        row_prefix: &[u8],
        table: &[u8],
        row: &[u8],
        read: &FamilyRead,
    ) -> Result<Vec<Cell>, StoreError> {
        let keyspace = self.keyspace(read.family);
        let mut out = Vec::new();
        match &read.columns {
            Columns::Only(_) if read.ts.is_empty() => {}
            Columns::Only(list) => {
                let mut list = list.clone();
                list.sort();
                list.dedup();
                let limit = read.max_versions.unwrap_or(usize::MAX);
                if read.ts.lo == read.ts.hi && limit > 0 {
                    // One version per column (a read of the data a write record points at): a
                    // point lookup, which bloom filters answer without merging every table's
                    // iterator as a range does.
                    for column in &list {
                        let mut cell_key = key::column_prefix(table, row, column);
                        key::encode_ts(&mut cell_key, read.ts.lo);
                        if let Some(v) = snapshot
                            .get(keyspace, cell_key)
                            .map_err(|e| backend("read", e))?
                        {
                            out.push(Cell {
                                column: column.clone(),
                                ts: read.ts.lo,
                                value: Bytes::copy_from_slice(&v),
                            });
                        }
                    }
                    return Ok(out);
                }
                for column in &list {
                    let prefix = key::column_prefix(table, row, column);
                    let (lo, hi) = version_bounds(&prefix, read.ts);
                    for guard in snapshot.range(keyspace, lo..=hi).take(limit) {
                        let (k, v) = guard.into_inner().map_err(|e| backend("read", e))?;
                        let ts =
                            key::decode_ts(&k[prefix.len()..], prefix.len()).map_err(corrupt)?;
                        out.push(Cell {
                            column: column.clone(),
                            ts,
                            value: Bytes::copy_from_slice(&v),
                        });
                    }
                }
            }
            Columns::All if read.ts.is_empty() => {}
            Columns::All => {
                // One pass over the row, seeking past what the read does not want: versions
                // newer than the range, and a column's versions past the range or past
                // `max_versions`. Old versions are skipped by a seek, never read, and a
                // skipped key's value (maybe in a blob file) is never loaded.
                let limit = read.max_versions.unwrap_or(usize::MAX);
                let row_end = prefix_end(row_prefix);
                let mut cursor = row_prefix.to_vec();
                let mut taken: Option<(Vec<u8>, usize)> = None;
                'seek: loop {
                    for guard in snapshot.range(keyspace, cursor.clone()..row_end.clone()) {
                        let (k, v) = guard
                            .into_inner_if(|k| {
                                classify(row_prefix, read.ts, limit, k, &taken)
                                    .is_ok_and(|step| step.seek.is_none())
                            })
                            .map_err(|e| backend("read", e))?;
                        let RowStep {
                            column,
                            ts,
                            count,
                            seek,
                        } = classify(row_prefix, read.ts, limit, &k, &taken)?;
                        if let Some(next) = seek {
                            cursor = next;
                            continue 'seek;
                        }
                        let Some(v) = v else {
                            return Err(StoreError::Backend {
                                message: "fjall: read: value not loaded".into(),
                                source: None,
                            });
                        };
                        out.push(Cell {
                            column: Bytes::copy_from_slice(&column),
                            ts,
                            value: Bytes::copy_from_slice(&v),
                        });
                        taken = Some((column, count + 1));
                    }
                    break;
                }
            }
        }
        Ok(out)
    }

    /// A scan of the notify family that is not a snapshot read: the rows of the cells of
    /// [`Self::notify_cells`] in `[cursor, scan_end)`, each read from `snapshot` with its
    /// absorbed notifications (rows that got their first notification after it read as empty
    /// and are left out, as rows emptied meanwhile are).
    fn scan_notify_rows(
        &self,
        snapshot: &Snapshot,
        table_prefix: &[u8],
        cursor: &[u8],
        scan_end: &[u8],
        request: &Scan,
    ) -> Result<Vec<RowCells>, StoreError> {
        let mut out = Vec::new();
        for row_prefix in self.notify_cells.rows(cursor, scan_end) {
            if request.row_limit.is_some_and(|limit| out.len() >= limit) {
                break;
            }
            let rest = row_prefix.get(table_prefix.len()..).unwrap_or_default();
            let (row, _) = key::decode_bytes(rest, table_prefix.len()).map_err(corrupt)?;
            let cells =
                self.read_family(snapshot, &row_prefix, &request.table, &row, &request.read)?;
            if !cells.is_empty() {
                out.push(RowCells {
                    row: Bytes::from(row),
                    cells,
                });
            }
        }
        Ok(out)
    }

    /// Applies planned writes atomically (and crash-atomically) across keyspaces.
    ///
    /// Deletes of notify keys are *weak* tombstones (RocksDB's `SingleDelete`): when a
    /// compaction or flush brings one together with the value it deletes, both vanish, where a
    /// plain tombstone is carried down every level until the last. Every notification is put
    /// once and deleted once, after the observers' runs, so with plain tombstones the deletes of
    /// a whole backlog would travel through every compaction. A weak tombstone only hides the
    /// newest value below it, so it is safe only because [`Self::apply`] never puts a notify key
    /// that exists (and never deletes one that does not): each key holds at most one value
    /// between deletes.
    fn commit_writes(&self, writes: Vec<KeyWrite>) -> Result<(), StoreError> {
        match <[KeyWrite; 1]>::try_from(writes) {
            Ok([single]) => {
                // One key: a plain insert or remove (the journal entry of a one-item batch,
                // without the batch's bookkeeping).
                let keyspace = self.keyspace(single.family);
                match single.value {
                    Some(v) => keyspace.insert(single.key, v.as_ref()),
                    None if weak_delete(single.family) => keyspace.remove_weak(single.key),
                    None => keyspace.remove(single.key),
                }
                .map_err(|e| backend("write", e))
            }
            Err(many) if many.is_empty() => Ok(()),
            Err(many) => {
                // `Database::batch` hands each batch to the OS on commit (PersistMode::Buffer).
                let mut batch = self.db.batch();
                for w in many {
                    let keyspace = self.keyspace(w.family);
                    match w.value {
                        Some(v) => batch.insert(keyspace, w.key, v.as_ref()),
                        None if weak_delete(w.family) => batch.remove_weak(keyspace, w.key),
                        None => batch.remove(keyspace, w.key),
                    }
                }
                batch.commit().map_err(|e| backend("write batch", e))
            }
        }
    }

    fn mutate_one(&self, item: &RowMutation) -> Result<MutationOutcome, StoreError> {
        let _latch = self.latches.write(&item.table, &item.row);
        let snapshot = self.db.snapshot();
        let mut writes = Vec::new();
        let view = View {
            store: self,
            snapshot: &snapshot,
        };
        let outcome = plan(&self.latches, &view, item, &mut writes)?;
        drop(snapshot);
        if outcome.applied() {
            self.apply(writes)?;
        }
        Ok(outcome)
    }

    fn mutate_distinct_rows(
        &self,
        batch: &[RowMutation],
    ) -> Result<Vec<MutationOutcome>, StoreError> {
        let _latches = self.latches.write_rows(batch);
        let snapshot = self.db.snapshot();
        let mut writes = Vec::new();
        let mut outcomes = Vec::with_capacity(batch.len());
        let view = View {
            store: self,
            snapshot: &snapshot,
        };
        for item in batch {
            outcomes.push(plan(&self.latches, &view, item, &mut writes)?);
        }
        drop(snapshot);
        self.apply(writes)?;
        Ok(outcomes)
    }

    /// [`RowStore::mutate_rows_atomically`] of a validated batch: every row's latch, every
    /// item planned against one snapshot, then one write batch for all of them or none.
    fn mutate_all_or_nothing(&self, batch: &[RowMutation]) -> Result<AtomicOutcome, StoreError> {
        let _latches = self.latches.write_rows(batch);
        let snapshot = self.db.snapshot();
        let mut writes = Vec::new();
        let view = View {
            store: self,
            snapshot: &snapshot,
        };
        for (item, mutation) in batch.iter().enumerate() {
            if let MutationOutcome::ConditionFailed { condition } =
                plan(&self.latches, &view, mutation, &mut writes)?
            {
                return Ok(AtomicOutcome::ConditionFailed { item, condition });
            }
        }
        drop(snapshot);
        self.apply(writes)?;
        Ok(AtomicOutcome::Applied)
    }
}

/// What a row read does with one key of the row ([`classify`]).
struct RowStep {
    /// The key's column.
    column: Vec<u8>,
    /// Its version.
    ts: u64,
    /// Versions of `column` already taken.
    count: usize,
    /// `None` to take the key, or the key to seek to instead.
    seek: Option<Vec<u8>>,
}

/// Classifies key `k` of the row `row_prefix` for a read of versions `ts`, at most `limit` per
/// column, that has `taken` versions of its last column so far.
fn classify(
    row_prefix: &[u8],
    ts: TsRange,
    limit: usize,
    k: &[u8],
    taken: &Option<(Vec<u8>, usize)>,
) -> Result<RowStep, StoreError> {
    let rest = k.get(row_prefix.len()..).unwrap_or_default();
    let (column, used) = key::decode_bytes(rest, row_prefix.len()).map_err(corrupt)?;
    let at = row_prefix.len() + used;
    let version = key::decode_ts(&k[at..], at).map_err(corrupt)?;
    let count = match taken {
        Some((c, n)) if *c == column => *n,
        _ => 0,
    };
    let seek = if version > ts.hi {
        // Newer than the range: jump to the range's newest version.
        Some(version_bounds(&k[..at], ts).0)
    } else if version < ts.lo || count >= limit {
        // Past the range or the version limit: jump to the next column.
        Some(prefix_end(&k[..at]))
    } else {
        None
    };
    Ok(RowStep {
        column,
        ts: version,
        count,
        seek,
    })
}

/// The keyspaces as one fjall snapshot sees them, for [`plan`] (the caller holds the row
/// latch), except the lock family, which comes from [`FjallStore::locks`]: under the row's
/// latch it equals the engine's latest state, and nothing changes that row meanwhile.
struct View<'a> {
    store: &'a FjallStore,
    snapshot: &'a Snapshot,
}

impl View<'_> {
    /// The keys and values of the absorbed notifications (see [`notify_cells`]) in `lo..=hi`,
    /// in key order. They are part of the notify family as reads see it, so conditions and
    /// range deletes see them too.
    fn absorbed_in(&self, lo: &[u8], hi: &[u8]) -> Vec<(Vec<u8>, Bytes)> {
        // A cell sorts before its keys, and (the encoding being prefix-free) a cell before the
        // cell of `lo` has only keys before `lo`.
        let from = cell_of(lo).map_or(&[][..], |(cell, _)| cell);
        self.store
            .notify_cells
            .absorbed_in(from, hi)
            .into_iter()
            .filter_map(|(mut key, version)| {
                key::encode_ts(&mut key, version.ts);
                (lo <= key.as_slice() && key.as_slice() <= hi).then_some((key, version.value))
            })
            .collect()
    }
}

impl KeyLookup for View<'_> {
    fn absent_in_memory(&self, family: Family, column_prefix: &[u8], ts: TsRange) -> Option<bool> {
        (family == Family::Write)
            .then(|| self.store.recent.absent(column_prefix, ts))
            .flatten()
    }

    fn any_in(&self, family: Family, lo: &[u8], hi: &[u8]) -> Result<bool, StoreError> {
        if family == Family::Lock {
            return Ok(self.store.locks.any_in(lo, hi));
        }
        if family == Family::Notify && !self.absorbed_in(lo, hi).is_empty() {
            return Ok(true);
        }
        let keyspace = self.store.keyspace(family);
        Ok(first_key(
            self.snapshot,
            keyspace,
            lo.to_vec()..=hi.to_vec(),
            "condition",
        )?
        .is_some())
    }

    fn holds_value(
        &self,
        family: Family,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<bool, StoreError> {
        if family == Family::Lock {
            return Ok(self.store.locks.holds_value(key, value));
        }
        if family == Family::Notify
            && let Some((_, held)) = self.absorbed_in(key, key).into_iter().next()
        {
            return Ok(value.is_none_or(|value| held.as_ref() == value));
        }
        let keyspace = self.store.keyspace(family);
        match value {
            None => self.snapshot.contains_key(keyspace, key),
            Some(value) => self
                .snapshot
                .get(keyspace, key)
                .map(|v| v.is_some_and(|v| v.as_ref() == value)),
        }
        .map_err(|e| backend("condition", e))
    }

    fn keys_in(&self, family: Family, lo: &[u8], hi: &[u8]) -> Result<Vec<Vec<u8>>, StoreError> {
        if family == Family::Lock {
            return Ok(self.store.locks.keys_in(lo, hi));
        }
        let keyspace = self.store.keyspace(family);
        let mut keys = self
            .snapshot
            .range(keyspace, lo.to_vec()..=hi.to_vec())
            .map(|guard| {
                guard
                    .key()
                    .map(|k| k.to_vec())
                    .map_err(|e| backend("delete range", e))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if family == Family::Notify {
            let absorbed = self.absorbed_in(lo, hi);
            if !absorbed.is_empty() {
                keys.extend(absorbed.into_iter().map(|(key, _)| key));
                keys.sort();
                keys.dedup();
            }
        }
        Ok(keys)
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
        let reads_locks = request.reads.iter().any(|read| read.family == Family::Lock);
        // Per read: its answer from the lock mirror, or the timestamp of the newest write
        // record it asks for, known from memory.
        let mut known: Vec<Known> = Vec::new();
        let snapshot = if request.snapshot_ts.is_some() || reads_locks {
            self.latches
                .admit_read(&request.table, &request.row, request.snapshot_ts);
            // A mutation that checked the condition before the admission holds the latch until
            // its batch is visible: the snapshot opened after it includes it. Under the latch
            // the lock mirror and the recent writes are the row's latest state too, the one the
            // snapshot holds.
            let _latch = self.latches.read(&request.table, &request.row);
            let snapshot = self.db.snapshot();
            known = request
                .reads
                .iter()
                .map(|read| self.known_under_latch(&request.table, &request.row, read))
                .collect::<Result<_, _>>()?;
            snapshot
        } else {
            // One snapshot: never half of a batch, so no latch (see the crate docs).
            self.db.snapshot()
        };
        let prefix = key::row_prefix(&request.table, &request.row);
        let mut known = known.into_iter();
        request
            .reads
            .iter()
            .map(|read| {
                let from_memory = match known.next() {
                    Some(Known::Cells(cells)) => Some(cells),
                    Some(Known::NewestWrite { column, ts }) => self
                        .newest_write(&snapshot, &request, &column, ts)?
                        .map(|cell| vec![cell]),
                    Some(Known::Nothing) | None => None,
                };
                match from_memory {
                    Some(cells) => Ok(cells),
                    None => {
                        self.read_family(&snapshot, &prefix, &request.table, &request.row, read)
                    }
                }
            })
            .collect()
    }

    async fn scan(&self, request: Scan) -> Result<Vec<RowCells>, StoreError> {
        tokio::task::consume_budget().await;
        if request.snapshot_ts.is_some() {
            self.latches.admit_scan(&request.table, request.snapshot_ts);
            self.latches.cycle_scan_gates();
        }
        let snapshot = self.db.snapshot();
        let table_prefix = key::table_prefix(&request.table);
        let (mut cursor, scan_end) = scan_range(&request.table, &request.start, &request.end);
        if request.read.family == Family::Notify && request.snapshot_ts.is_none() {
            return self.scan_notify_rows(&snapshot, &table_prefix, &cursor, &scan_end, &request);
        }
        let keyspace = self.keyspace(request.read.family);
        let mut out = Vec::new();
        while request.row_limit.is_none_or(|limit| out.len() < limit) {
            let Some(k) = first_key(
                &snapshot,
                keyspace,
                cursor.clone()..scan_end.clone(),
                "scan",
            )?
            else {
                break;
            };
            let rest = k.get(table_prefix.len()..).unwrap_or_default();
            let (row, used) = key::decode_bytes(rest, table_prefix.len()).map_err(corrupt)?;
            let row_prefix = &k[..table_prefix.len() + used];
            let cells =
                self.read_family(&snapshot, row_prefix, &request.table, &row, &request.read)?;
            cursor = prefix_end(row_prefix);
            if !cells.is_empty() {
                out.push(RowCells {
                    row: Bytes::from(row),
                    cells,
                });
            }
        }
        Ok(out)
    }

    async fn mutate_rows(
        &self,
        batch: Vec<RowMutation>,
    ) -> Result<Vec<MutationOutcome>, StoreError> {
        tokio::task::consume_budget().await;
        validate_batch(&batch, &FJALL_LIMITS)?;
        if rows_are_distinct(&batch) {
            // Each item is atomic on its row and nothing more (the trait's contract), so a large
            // batch goes in slices, each holding only its own rows' latches. In one piece, the
            // inverter's prewrite of tens of thousands of term rows would hold nearly every latch
            // stripe for the whole batch and stall every other writer and point reader of the
            // process. (The task does not yield between slices: a batch that waits its turn
            // behind every other run once per slice takes many times as long.)
            let mut outcomes = Vec::with_capacity(batch.len());
            for slice in batch.chunks(LATCHED_SLICE_ROWS) {
                // Taken before any row latch (a scan cycling the gates holds no latch).
                let _gate = self.latches.gate_for(slice);
                outcomes.extend(self.mutate_distinct_rows(slice)?);
            }
            Ok(outcomes)
        } else {
            let _gate = self.latches.gate_for(&batch);
            // Items on the same row must see each other's effects: apply one by one.
            batch.iter().map(|item| self.mutate_one(item)).collect()
        }
    }

    /// One fjall write batch under every row's latch: atomic for readers (a snapshot never sees
    /// part of a batch) and after a crash (the journal drops a torn batch whole).
    async fn mutate_rows_atomically(
        &self,
        batch: Vec<RowMutation>,
    ) -> Result<AtomicOutcome, StoreError> {
        tokio::task::consume_budget().await;
        validate_atomic_batch(&batch, &FJALL_LIMITS)?;
        // Taken before any row latch (a scan cycling the gates holds no latch).
        let _gate = self.latches.gate_for(&batch);
        self.mutate_all_or_nothing(&batch)
    }

    async fn sync(&self) -> Result<(), StoreError> {
        // `persist` fsyncs the journal: blocking disk I/O, on tokio's blocking pool.
        let db = self.db.clone();
        self.group_sync
            .sync("fjall", move || {
                db.persist(PersistMode::SyncAll)
                    .map_err(|e| backend("persist", e))
            })
            .await
    }

    /// Skips from table to table in each family's keyspace: one seek per table.
    async fn tables(&self) -> Result<Vec<Bytes>, StoreError> {
        let snapshot = self.db.snapshot();
        let mut tables = std::collections::BTreeSet::new();
        for keyspace in &self.keyspaces {
            let mut cursor = Vec::new();
            while let Some(k) = first_key(&snapshot, keyspace, cursor.clone().., "listing tables")?
            {
                let (table, _) = key::decode_bytes(&k, 0).map_err(corrupt)?;
                cursor = prefix_end(&key::table_prefix(&table));
                tables.insert(Bytes::from(table));
            }
        }
        Ok(tables.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ops::Bound;

    fn scan_all(store: &FjallStore, family: Family) -> Result<Vec<RowCells>, StoreError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(store.scan(Scan {
            snapshot_ts: None,
            table: Bytes::from("t"),
            start: Bound::Unbounded,
            end: Bound::Unbounded,
            read: FamilyRead::all(family),
            row_limit: None,
        }))
    }

    /// Each family's keyspace is created with its own memtable size: notify keys written past
    /// a small notify memtable get flushed, while the data keyspace, given a large one, keeps
    /// the same bytes in memory.
    #[test]
    fn each_family_gets_its_configured_memtable_size() {
        use percolator_core::Mutation;
        let dir = tempfile::tempdir().unwrap();
        let config = FjallConfig::new(dir.path())
            .with_memtable_size(Family::Notify, 0)
            .with_memtable_size(Family::Data, 64 * 1024 * 1024);
        assert_eq!(config.memtable_sizes.of(Family::Notify), 0);
        assert_eq!(
            config.memtable_sizes.of(Family::Lock),
            MemtableSizes::default().lock
        );
        let store = FjallStore::open_with(config).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        // 2 000 rows of 200-byte cells in each family, about 440 KB: several memtables of the
        // notify keyspace's 64 KiB (the minimum), a small part of the data keyspace's 64 MiB.
        for chunk in 0..20u32 {
            let batch = (0..100u32)
                .map(|i| RowMutation {
                    table: Bytes::from("t"),
                    row: Bytes::from(format!("row{:05}", chunk * 100 + i)),
                    conditions: vec![],
                    mutations: [Family::Notify, Family::Data]
                        .into_iter()
                        .map(|family| Mutation::Put {
                            family,
                            column: Bytes::from("c"),
                            ts: 7,
                            value: Bytes::from(vec![b'v'; 200]),
                        })
                        .collect(),
                })
                .collect();
            let outcomes = rt.block_on(store.mutate_rows(batch)).unwrap();
            assert!(outcomes.iter().all(|o| o.applied()));
        }
        let flushed = |family: Family| {
            let keyspace = store.keyspace(family);
            keyspace.table_count() + keyspace.sealed_memtable_count()
        };
        // Rotation is requested on write and done by fjall's workers: wait for it (bounded).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while flushed(Family::Notify) == 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(
            flushed(Family::Notify) > 0,
            "the notify keyspace never rotated its 64 KiB memtable"
        );
        assert_eq!(flushed(Family::Data), 0, "the data memtable is 64 MiB");
    }

    /// Applies one mutation of row `r` in table `t`.
    fn mutate(
        store: &FjallStore,
        mutations: Vec<percolator_core::Mutation>,
    ) -> Result<(), StoreError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let outcomes = rt.block_on(store.mutate_rows(vec![RowMutation {
            table: Bytes::from("t"),
            row: Bytes::from("r"),
            conditions: vec![],
            mutations,
        }]))?;
        assert!(outcomes[0].applied());
        Ok(())
    }

    fn put_at(family: Family, value: &'static [u8]) -> percolator_core::Mutation {
        percolator_core::Mutation::Put {
            family,
            column: Bytes::from("c"),
            ts: 5,
            value: Bytes::from_static(value),
        }
    }

    fn delete_at(family: Family) -> percolator_core::Mutation {
        percolator_core::Mutation::Delete {
            family,
            column: Bytes::from("c"),
            ts: 5,
        }
    }

    /// Opens a store in `dir` and waits for its opening scan of the write family, which holds
    /// a fjall snapshot while it runs (and so keeps fjall's garbage-collection watermark below
    /// it).
    fn open_settled(dir: &Path) -> FjallStore {
        let mut store = FjallStore::open(dir).unwrap();
        if let Some((_, scan)) = store.opening_scan.take() {
            scan.join().unwrap();
        }
        store
    }

    /// Flushes `family`'s memtable, after raising fjall's garbage-collection watermark past every
    /// write so far: flushes and compactions drop versions only below it, and fjall raises it
    /// to the oldest open snapshot on every 10 000th closed one.
    fn flush(store: &FjallStore, family: Family) {
        for _ in 0..10_000 {
            drop(store.db.snapshot());
        }
        store.keyspace(family).rotate_memtable_and_wait().unwrap();
    }

    /// A notification deleted before its memtable is flushed leaves nothing on disk (a weak
    /// tombstone meets its value and both vanish); a data cell's delete leaves a tombstone.
    #[test]
    fn a_notification_and_its_delete_vanish_together_at_flush() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_settled(dir.path());
        for family in [Family::Notify, Family::Data] {
            mutate(&store, vec![put_at(family, b"w")]).unwrap();
            mutate(&store, vec![delete_at(family)]).unwrap();
            flush(&store, family);
        }
        assert_eq!(store.keyspace(Family::Notify).table_count(), 0);
        assert_eq!(store.keyspace(Family::Data).table_count(), 1);
        assert!(scan_all(&store, Family::Notify).unwrap().is_empty());
    }

    /// A weak tombstone hides only the newest value below it, so a notify key must never hold
    /// two: a put of a key that exists writes nothing (if its value is the same) or is refused.
    /// Here a second value in the memtable would vanish with the delete at flush and bring the
    /// flushed first one back.
    #[test]
    fn a_notification_put_twice_then_deleted_stays_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_settled(dir.path());
        let notify = store.keyspace(Family::Notify);
        let key = key::CellKey {
            table: b"t".to_vec(),
            row: b"r".to_vec(),
            column: b"c".to_vec(),
            ts: 5,
        }
        .encode();
        // What the engine holds (a scan of the notify family walks the in-memory counts).
        let in_engine = || notify.get(&key).unwrap();
        mutate(&store, vec![put_at(Family::Notify, b"w")]).unwrap();
        flush(&store, Family::Notify);
        mutate(&store, vec![put_at(Family::Notify, b"w")]).unwrap();
        let refused = mutate(&store, vec![put_at(Family::Notify, b"other")]).unwrap_err();
        assert!(
            matches!(&refused, StoreError::InvalidInput(m) if m.contains("written once") && m.contains("\"r\"")),
            "{refused}"
        );
        assert_eq!(in_engine().as_deref(), Some(&b"w"[..]));
        let cells = scan_all(&store, Family::Notify).unwrap();
        assert_eq!(cells.len(), 1);
        assert_eq!(cells[0].cells[0].value, Bytes::from_static(b"w"));
        mutate(&store, vec![delete_at(Family::Notify)]).unwrap();
        flush(&store, Family::Notify);
        assert_eq!(in_engine(), None);
        assert!(scan_all(&store, Family::Notify).unwrap().is_empty());
        notify.major_compact().unwrap();
        assert_eq!(in_engine(), None);
    }

    #[test]
    fn the_notified_cells_follow_the_final_writes() {
        use percolator_core::Mutation;
        let dir = tempfile::tempdir().unwrap();
        let store = FjallStore::open(dir.path()).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let apply = |mutations: Vec<Mutation>| {
            let outcomes = rt
                .block_on(store.mutate_rows(vec![RowMutation {
                    table: Bytes::from("t"),
                    row: Bytes::from("r"),
                    conditions: vec![],
                    mutations,
                }]))
                .unwrap();
            assert!(outcomes[0].applied());
        };
        let put = || Mutation::Put {
            family: Family::Notify,
            column: Bytes::from("c"),
            ts: 1,
            value: Bytes::new(),
        };
        let delete = || Mutation::DeleteRange {
            family: Family::Notify,
            column: Bytes::from("c"),
            ts: TsRange::ALL,
        };
        // Put and deleted again by one mutation: nothing to remember.
        let put_at = |ts| Mutation::Put {
            family: Family::Notify,
            column: Bytes::from("c"),
            ts,
            value: Bytes::new(),
        };
        let delete_at = |ts| Mutation::Delete {
            family: Family::Notify,
            column: Bytes::from("c"),
            ts,
        };
        let cell = key::column_prefix(b"t", b"r", b"c");
        apply(vec![put(), delete()]);
        assert_eq!(store.notify_cells.len(), 0);
        apply(vec![put()]);
        apply(vec![put()]);
        assert_eq!(store.notify_cells.len(), 1);
        assert_eq!(
            store.notify_cells.count(&cell),
            1,
            "a put over a live key adds none"
        );
        apply(vec![delete()]);
        assert_eq!(store.notify_cells.len(), 0);
        // Counted per key: the cell stays while one is left.
        apply(vec![put_at(2), put_at(3), put_at(4)]);
        assert_eq!(store.notify_cells.count(&cell), 3);
        apply(vec![delete_at(2), delete_at(9)]);
        assert_eq!(
            store.notify_cells.count(&cell),
            2,
            "deleting an absent key removes none"
        );
        apply(vec![delete_at(3), put_at(5)]);
        assert_eq!(store.notify_cells.count(&cell), 2);
        // Older than the cell's newest key: new or not, the engine tells.
        apply(vec![put_at(1)]);
        apply(vec![put_at(4)]);
        assert_eq!(store.notify_cells.count(&cell), 3, "1 is new, 4 is live");
        apply(vec![delete_at(1)]);
        assert_eq!(store.notify_cells.count(&cell), 2);
        // Reopening counts what the engine holds.
        drop(store);
        let store = FjallStore::open(dir.path()).unwrap();
        assert_eq!(store.notify_cells.count(&cell), 2);
        let cells = scan_all(&store, Family::Notify).unwrap();
        assert_eq!(cells.iter().map(|r| r.cells.len()).sum::<usize>(), 2);
    }

    #[test]
    fn corrupt_keys_in_a_keyspace_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let store = FjallStore::open(dir.path()).unwrap();
        // A key that starts like table "t" but is cut short.
        let mut bad = key::table_prefix(b"t");
        bad.extend_from_slice(&[1, 2, 3]);
        store.keyspace(Family::Data).insert(bad, &b"x"[..]).unwrap();
        let err = scan_all(&store, Family::Data).unwrap_err();
        assert!(matches!(err, StoreError::Corrupt(_)), "{err:?}");

        // A whole row key whose column part is cut short, read through `read_row`: from the
        // engine (data), and from the lock mirror, which loads it when the store reopens.
        let mut bad = key::row_prefix(b"t", b"r");
        bad.extend_from_slice(&[7; 5]);
        store
            .keyspace(Family::Data)
            .insert(bad.clone(), &b"x"[..])
            .unwrap();
        store.keyspace(Family::Lock).insert(bad, &b"x"[..]).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let read_row = |store: &FjallStore, family| {
            rt.block_on(store.read_row(ReadRow {
                table: Bytes::from("t"),
                row: Bytes::from("r"),
                reads: vec![FamilyRead::all(family)],
                snapshot_ts: None,
            }))
        };
        let err = read_row(&store, Family::Data).unwrap_err();
        assert!(matches!(err, StoreError::Corrupt(_)), "{err:?}");
        drop(store);
        let store = FjallStore::open(dir.path()).unwrap();
        let err = read_row(&store, Family::Lock).unwrap_err();
        assert!(matches!(err, StoreError::Corrupt(_)), "{err:?}");

        // A key that is not even a table prefix.
        store
            .keyspace(Family::Write)
            .insert(&[0x01u8][..], &b"x"[..])
            .unwrap();
        let err = rt.block_on(store.tables()).unwrap_err();
        assert!(matches!(err, StoreError::Corrupt(_)), "{err:?}");
    }
}
