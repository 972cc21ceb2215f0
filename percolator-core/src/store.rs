//! The `RowStore` contract: what Percolator needs from a Bigtable-like store (paper §2.1).
//!
//! A store is a sorted map `(table, row, family, column, timestamp) -> bytes`:
//! - rows are sorted by key inside a table, columns by name inside a row, versions newest first;
//! - **families are locality groups**: each is stored apart, so scanning one family (the notify
//!   family, for the observer scanners) never reads the others;
//! - a **row mutation** is atomic on its row and is applied only if all of its conditions hold
//!   (Bigtable's conditional mutation / single-row transaction); many row mutations go in one call
//!   and each gets its own outcome;
//! - reads of several families of one row in one call are a consistent snapshot of that row.
//!
//! Everything Percolator does (locks, write records, notifications, the oracle's high-water mark,
//! worker liveness) is expressed in these three calls, which is what makes the protocol generic
//! over backends. The behaviour every backend must show is pinned down by the conformance suite
//! (`percolator_core::conformance`, feature `conformance`).

use std::ops::Bound;

use async_trait::async_trait;
use bytes::Bytes;

use crate::error::StoreError;

/// A column family (locality group). Percolator's columns map onto these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    /// Committed and uncommitted values, at the writer's start timestamp (`c:data`).
    Data,
    /// Locks of uncommitted transactions, at their start timestamp (`c:lock`).
    Lock,
    /// Write records (commit or rollback), at the commit timestamp (`c:write`).
    Write,
    /// Dirty-column notifications, scanned by observer workers (`c:notify`). (The paper's
    /// `c:ack_O` columns are ordinary transactional cells under a reserved column name, see
    /// [`crate::tables::ack_column`]: an observer's ack must conflict like any write.) A notify
    /// version is written once, by its writer: a store may refuse a put that would change the
    /// value of one that exists (fjall does, to delete notifications with weak tombstones).
    ///
    /// A store may also **coalesce** a cell's versions whose values name their writer's commit
    /// timestamp ([`crate::records::NotifyRecord::committed_at`]): while the cell holds another
    /// version, it may keep of those only the one with the highest commit timestamp (fjall keeps
    /// it in memory). A run whose snapshot covers that commit covers the others, and the cell
    /// never looks clean while one of them is pending; the conformance case
    /// `notifications_committed_during_a_run_stay_pending` pins this down.
    Notify,
}

impl Family {
    /// Every family, in index order.
    pub const ALL: [Family; 4] = [Family::Data, Family::Lock, Family::Write, Family::Notify];

    /// Dense index `0..ALL.len()`, for backends that keep one structure per family.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// Stable lower-case name (used for sled tree names, key prefixes and debugging output).
    pub const fn name(self) -> &'static str {
        match self {
            Family::Data => "data",
            Family::Lock => "lock",
            Family::Write => "write",
            Family::Notify => "notify",
        }
    }
}

/// An inclusive timestamp range `[lo, hi]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TsRange {
    /// Lowest timestamp included.
    pub lo: u64,
    /// Highest timestamp included.
    pub hi: u64,
}

impl TsRange {
    /// Every timestamp.
    pub const ALL: TsRange = TsRange {
        lo: 0,
        hi: u64::MAX,
    };

    /// `[lo, hi]`.
    pub const fn new(lo: u64, hi: u64) -> Self {
        Self { lo, hi }
    }

    /// Exactly `ts`.
    pub const fn at(ts: u64) -> Self {
        Self { lo: ts, hi: ts }
    }

    /// `[0, ts]`: what a reader at `ts` may see.
    pub const fn up_to(ts: u64) -> Self {
        Self { lo: 0, hi: ts }
    }

    /// `[ts, MAX]`.
    pub const fn from(ts: u64) -> Self {
        Self {
            lo: ts,
            hi: u64::MAX,
        }
    }

    /// Whether `ts` lies in the range.
    pub const fn contains(&self, ts: u64) -> bool {
        self.lo <= ts && ts <= self.hi
    }

    /// Whether the range selects nothing (`lo > hi`). Backends must treat an empty range as
    /// selecting nothing, never as an error or a panic.
    pub const fn is_empty(&self) -> bool {
        self.lo > self.hi
    }
}

/// Which columns of a family a read returns.
///
/// ```
/// # use percolator_core::Columns;
/// let title = Columns::one("title");
/// assert!(title.matches(b"title") && !title.matches(b"body"));
/// assert!(Columns::All.matches(b"body"));
/// assert_eq!(Columns::default(), Columns::All);
/// ```
///
/// [`crate::Transaction::scan`] takes one to pick the columns of the rows it returns:
///
/// ```
/// # use std::sync::Arc;
/// # use percolator_backend_mem::MemStore;
/// # use percolator_core::{Client, Columns};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> percolator_core::Result<()> {
/// # let client = Client::open(Arc::new(MemStore::new())).await?;
/// let mut txn = client.begin().await?;
/// txn.set("docs", "a", "title", "Hello")?;
/// txn.set("docs", "a", "body", "hello, world")?;
/// txn.commit().await?;
/// let txn = client.begin().await?;
/// assert_eq!(txn.scan::<&str>("docs", .., Columns::All).await?.len(), 2);
/// let titles = txn.scan::<&str>("docs", .., Columns::one("title")).await?;
/// assert_eq!(&titles[0].value[..], b"Hello");
/// # client.shutdown().await }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Columns {
    /// Every column.
    #[default]
    All,
    /// Only these columns (any order; duplicates ignored).
    Only(Vec<Bytes>),
}

impl Columns {
    /// A single column.
    pub fn one(column: impl Into<Bytes>) -> Self {
        Columns::Only(vec![column.into()])
    }

    /// Whether `column` is selected.
    pub fn matches(&self, column: &[u8]) -> bool {
        match self {
            Columns::All => true,
            Columns::Only(list) => list.iter().any(|c| c.as_ref() == column),
        }
    }
}

/// What to read from one family of a row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FamilyRead {
    /// The family.
    pub family: Family,
    /// Selected columns.
    pub columns: Columns,
    /// Selected versions.
    pub ts: TsRange,
    /// At most this many versions per column (newest first); `None` for all in range.
    pub max_versions: Option<usize>,
}

impl FamilyRead {
    /// All versions of all columns of `family`.
    pub fn all(family: Family) -> Self {
        Self {
            family,
            columns: Columns::All,
            ts: TsRange::ALL,
            max_versions: None,
        }
    }

    /// Restricts the columns.
    pub fn columns(mut self, columns: Columns) -> Self {
        self.columns = columns;
        self
    }

    /// Restricts the timestamps.
    pub fn ts(mut self, ts: TsRange) -> Self {
        self.ts = ts;
        self
    }

    /// Keeps at most `n` versions per column.
    pub fn max_versions(mut self, n: usize) -> Self {
        self.max_versions = Some(n);
        self
    }
}

/// One stored version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    /// Column qualifier.
    pub column: Bytes,
    /// Version timestamp.
    pub ts: u64,
    /// Stored bytes.
    pub value: Bytes,
}

/// A read of several families of one row, returned as one consistent snapshot of the row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadRow {
    /// Table.
    pub table: Bytes,
    /// Row key.
    pub row: Bytes,
    /// Families to read; the answer has one entry per element, in the same order.
    pub reads: Vec<FamilyRead>,
    /// The start timestamp of the transaction whose snapshot this read serves, `None` for
    /// protocol bookkeeping reads. A store that tracks snapshot reads
    /// ([`StoreLimits::tracks_snapshot_reads`]) admits it before reading; see
    /// [`Condition::NoSnapshotReadSince`]. Other stores ignore it.
    pub snapshot_ts: Option<u64>,
}

/// A range scan of one family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scan {
    /// Table.
    pub table: Bytes,
    /// First row bound.
    pub start: Bound<Bytes>,
    /// Last row bound.
    pub end: Bound<Bytes>,
    /// What to read from each row.
    pub read: FamilyRead,
    /// Return at most this many rows (rows with no selected cell are not counted).
    pub row_limit: Option<usize>,
    /// As [`ReadRow::snapshot_ts`]; for a scan the admission covers every row of the range,
    /// including rows that do not exist yet.
    pub snapshot_ts: Option<u64>,
}

/// The cells one scan returned for one row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowCells {
    /// Row key.
    pub row: Bytes,
    /// Cells, ordered by column then newest first.
    pub cells: Vec<Cell>,
}

/// A predicate on the current state of a row, checked atomically with the mutation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Condition {
    /// No version of `(family, column)` has a timestamp in `ts`.
    Absent {
        /// Family.
        family: Family,
        /// Column.
        column: Bytes,
        /// Timestamps that must be empty.
        ts: TsRange,
    },
    /// The version `(family, column, ts)` exists (any value).
    Exists {
        /// Family.
        family: Family,
        /// Column.
        column: Bytes,
        /// Timestamp.
        ts: u64,
    },
    /// The version `(family, column, ts)` exists and holds exactly `value`.
    Equals {
        /// Family.
        family: Family,
        /// Column.
        column: Bytes,
        /// Timestamp.
        ts: u64,
        /// Expected bytes.
        value: Bytes,
    },
    /// No read or scan with a `snapshot_ts` at or after `ts` has been admitted by the store
    /// (one-phase commit at `ts`: see `percolator_core::txn` and the store docs). A store may
    /// track one maximum for all rows, or finer ones (the embedded stores keep one per latch
    /// stripe for point reads and one per table for scans). What it must guarantee: if the condition holds when the
    /// mutation applies, every read admitted later with `snapshot_ts >= ts` — a point read or a
    /// scan whose range covers the row, even a row that did not exist — sees the mutation.
    /// Stores that do not track snapshot reads report the condition as failed.
    NoSnapshotReadSince {
        /// The commit timestamp the mutation writes at.
        ts: u64,
    },
}

/// A change to one row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mutation {
    /// Write (or overwrite) one version.
    Put {
        /// Family.
        family: Family,
        /// Column.
        column: Bytes,
        /// Timestamp.
        ts: u64,
        /// Bytes to store.
        value: Bytes,
    },
    /// Delete one version (no-op if absent).
    Delete {
        /// Family.
        family: Family,
        /// Column.
        column: Bytes,
        /// Timestamp.
        ts: u64,
    },
    /// Delete every version of a column within a timestamp range.
    DeleteRange {
        /// Family.
        family: Family,
        /// Column.
        column: Bytes,
        /// Timestamps to delete.
        ts: TsRange,
    },
}

impl Mutation {
    /// The family this mutation touches.
    pub fn family(&self) -> Family {
        match self {
            Mutation::Put { family, .. }
            | Mutation::Delete { family, .. }
            | Mutation::DeleteRange { family, .. } => *family,
        }
    }
}

/// Conditions and mutations for one row, applied atomically iff every condition holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowMutation {
    /// Table.
    pub table: Bytes,
    /// Row key.
    pub row: Bytes,
    /// All must hold for the mutations to be applied.
    pub conditions: Vec<Condition>,
    /// Applied in order, all or nothing.
    pub mutations: Vec<Mutation>,
}

/// The result of one [`RowMutation`] of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MutationOutcome {
    /// Conditions held; every mutation was applied.
    Applied,
    /// The condition at this index (the first that failed) did not hold; nothing was applied.
    ConditionFailed {
        /// Index into [`RowMutation::conditions`].
        condition: usize,
    },
}

/// What [`RowStore::mutate_rows_atomically`] did: everything or nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AtomicOutcome {
    /// Every condition of every item held; every mutation was applied.
    Applied,
    /// A condition did not hold (the first the store found); nothing was applied.
    ConditionFailed {
        /// Index of the item into the batch.
        item: usize,
        /// Index into that item's [`RowMutation::conditions`].
        condition: usize,
    },
}

impl MutationOutcome {
    /// Whether the row mutation was applied.
    pub fn applied(self) -> bool {
        matches!(self, MutationOutcome::Applied)
    }
}

/// What a backend can hold and promise. Checked before any lock is written.
///
/// `#[non_exhaustive]`, so that new limits and guarantees can be added without breaking
/// backends: build one with [`StoreLimits::new`] (the sizes; every guarantee off) and the
/// `with_*` setters, all `const` so that a backend can keep its limits in a constant.
///
/// ```
/// # use percolator_core::StoreLimits;
/// const LIMITS: StoreLimits = StoreLimits::new(4096, 1 << 20, 1000)
///     .with_persistent(true)
///     .with_durable_after_sync(true);
/// assert!(LIMITS.persistent && !LIMITS.distributed);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoreLimits {
    /// Largest encoded cell key (`table`, `row`, `column`, `ts` as [`crate::backend::key::CellKey::encode`]).
    pub max_key_bytes: usize,
    /// Largest value of one cell.
    pub max_value_bytes: usize,
    /// Most row mutations in one `mutate_rows` call.
    pub max_batch_rows: usize,
    /// Data survives a restart of the process.
    pub persistent: bool,
    /// Data that [`RowStore::sync`] returned for survives a machine crash.
    pub durable_after_sync: bool,
    /// Several processes on several machines may share the store.
    pub distributed: bool,
    /// The store admits snapshot reads ([`ReadRow::snapshot_ts`]) and can check
    /// [`Condition::NoSnapshotReadSince`]: single-row transactions then commit in one row
    /// mutation instead of two. Only in-process stores can do it cheaply (TiKV's equivalent is
    /// its per-node `max_ts`, which its raw and transactional APIs do not expose).
    pub tracks_snapshot_reads: bool,
    /// Most conditions, and most mutations, in one row mutation (etcd's `--max-txn-ops`;
    /// `usize::MAX` where there is no such limit). The transaction layer checks the rows of a
    /// transaction against it before writing any lock.
    pub max_row_ops: usize,
    /// Most row mutations in one [`RowStore::mutate_rows_atomically`] call: 0 (the default)
    /// where the store cannot apply mutations of several rows all or nothing. Transactions that
    /// write up to this many rows then commit in one step where the store also
    /// [tracks snapshot reads](Self::tracks_snapshot_reads) (see `txn::one_phase`).
    pub max_atomic_rows: usize,
    /// A cost hint, not a guarantee: reading one version of a column ([`TsRange::at`]) costs
    /// much less here than reading the newest version in a range. So it is in an LSM store,
    /// where bloom filters answer a point lookup for most tables but a range seeks into every
    /// table. A snapshot read then asks for the newest write record alone, and for the data
    /// version it names afterwards only if the value is not inline; otherwise (the default)
    /// it saves a round trip by fetching the newest data version with the write records.
    pub prefers_point_reads: bool,
}

impl StoreLimits {
    /// Limits with these sizes and none of the guarantees (not persistent, not durable, not
    /// distributed, no snapshot-read tracking).
    pub const fn new(max_key_bytes: usize, max_value_bytes: usize, max_batch_rows: usize) -> Self {
        Self {
            max_key_bytes,
            max_value_bytes,
            max_batch_rows,
            persistent: false,
            durable_after_sync: false,
            distributed: false,
            tracks_snapshot_reads: false,
            max_row_ops: usize::MAX,
            max_atomic_rows: 0,
            prefers_point_reads: false,
        }
    }

    /// Sets [`Self::prefers_point_reads`].
    #[must_use]
    pub const fn with_prefers_point_reads(mut self, prefers_point_reads: bool) -> Self {
        self.prefers_point_reads = prefers_point_reads;
        self
    }

    /// Sets [`Self::max_atomic_rows`].
    #[must_use]
    pub const fn with_max_atomic_rows(mut self, max_atomic_rows: usize) -> Self {
        self.max_atomic_rows = max_atomic_rows;
        self
    }

    /// Sets [`Self::max_row_ops`].
    #[must_use]
    pub const fn with_max_row_ops(mut self, max_row_ops: usize) -> Self {
        self.max_row_ops = max_row_ops;
        self
    }

    /// Sets [`Self::persistent`].
    #[must_use]
    pub const fn with_persistent(mut self, persistent: bool) -> Self {
        self.persistent = persistent;
        self
    }

    /// Sets [`Self::durable_after_sync`].
    #[must_use]
    pub const fn with_durable_after_sync(mut self, durable_after_sync: bool) -> Self {
        self.durable_after_sync = durable_after_sync;
        self
    }

    /// Sets [`Self::distributed`].
    #[must_use]
    pub const fn with_distributed(mut self, distributed: bool) -> Self {
        self.distributed = distributed;
        self
    }

    /// Sets [`Self::tracks_snapshot_reads`].
    #[must_use]
    pub const fn with_tracks_snapshot_reads(mut self, tracks_snapshot_reads: bool) -> Self {
        self.tracks_snapshot_reads = tracks_snapshot_reads;
        self
    }
}

/// A Bigtable-like store with per-row conditional mutations. See the module docs.
///
/// Implementations must be safe to share between tasks and must not hold a global lock across
/// the whole store on the hot path.
///
/// # Wrappers
///
/// A type that wraps another store (fault injection, metrics, tracing, caching) must **forward
/// every method** to the store it wraps — including [`RowStore::limits`],
/// [`RowStore::store_id`] and [`RowStore::sync`], which are easy to forget because nothing
/// breaks at once: a wrapper that reported its own limits would let through batches the real
/// store rejects, one with its own id would get a second timestamp oracle on the same data
/// (breaking snapshot isolation), and one whose `sync` did nothing would acknowledge durable
/// commits that are not. A wrapper changes a method's behaviour only where that is its purpose
/// (a fault injector failing some calls), and then says so.
///
/// To keep that true as the trait grows, put `#[deny(clippy::missing_trait_methods)]` on the
/// wrapper's `impl RowStore` block: a method added to the trait with a default body then fails
/// the wrapper's build until it forwards it too (the same rule `object_store` gives its
/// wrappers). Every wrapper in this repository does.
#[cfg_attr(test, mockall::automock)]
#[async_trait]
pub trait RowStore: Send + Sync + 'static {
    /// Short backend name (`"mem"`, `"sled"`, ...), for reports.
    fn name(&self) -> &'static str;

    /// Sizes and guarantees of this backend.
    fn limits(&self) -> StoreLimits;

    /// Identifies the data this handle reaches: two handles on the same data return the same
    /// id, handles on different data different ids (for example `"sled:"` and the canonical
    /// database path). Per-store singletons are keyed by it — above all the process-wide
    /// timestamp oracle ([`crate::oracle::shared_local_oracle`]), so that a reopened handle or a
    /// wrapper shares the oracle of the data it reaches instead of starting a second one. A
    /// wrapper returns the id of the store it wraps.
    fn store_id(&self) -> String;

    /// Reads several families of one row as one consistent snapshot; one result per
    /// [`ReadRow::reads`] entry, each ordered by column then newest first.
    async fn read_row(&self, request: ReadRow) -> Result<Vec<Vec<Cell>>, StoreError>;

    /// Reads several rows: one answer per request, in order, each as [`Self::read_row`] answers
    /// it (one consistent snapshot of its row; different rows may be read at different moments,
    /// which the protocol's timestamps make safe). A distributed store answers them in as few
    /// round trips as it can (etcd: one read-only transaction of many ranges). By default, the
    /// rows are read one after another; an empty batch answers nothing.
    async fn read_rows(&self, requests: Vec<ReadRow>) -> Result<Vec<Vec<Vec<Cell>>>, StoreError> {
        let mut answers = Vec::with_capacity(requests.len());
        for request in requests {
            answers.push(self.read_row(request).await?);
        }
        Ok(answers)
    }

    /// Scans one family over a row range, in row order; only rows with selected cells appear.
    async fn scan(&self, request: Scan) -> Result<Vec<RowCells>, StoreError>;

    /// Applies each row mutation atomically on its row iff its conditions hold; one outcome per
    /// item, in order. Items on the same row are applied in batch order. Invalid input (limits,
    /// empty table name) fails the whole call before anything is applied.
    async fn mutate_rows(
        &self,
        batch: Vec<RowMutation>,
    ) -> Result<Vec<MutationOutcome>, StoreError>;

    /// Applies every row mutation of `batch` or none of them: the conditions of all items are
    /// checked against one state of the store, and if they all hold, all mutations apply as one
    /// step — no reader sees some rows changed and others not, and a crash keeps all or none.
    /// The rows must be distinct and at most [`StoreLimits::max_atomic_rows`]; invalid input
    /// fails the call before anything is applied. A store that cannot do it (the default,
    /// `max_atomic_rows` 0) refuses every batch with [`StoreError::TooLarge`].
    async fn mutate_rows_atomically(
        &self,
        batch: Vec<RowMutation>,
    ) -> Result<AtomicOutcome, StoreError> {
        Err(crate::backend::validate::too_many_atomic_rows(
            batch.len(),
            0,
        ))
    }

    /// Makes every mutation that returned before this call durable (as far as
    /// [`StoreLimits::durable_after_sync`] promises).
    async fn sync(&self) -> Result<(), StoreError>;

    /// Every table that holds a cell in some family, in byte order, reserved tables included.
    /// For maintenance (garbage collection walks every table), not the transaction path: it may
    /// also list a table whose last cells were just deleted, never leave out one with cells.
    async fn tables(&self) -> Result<Vec<Bytes>, StoreError>;

    /// Lets the store reclaim its own history below `safe_point`, a timestamp below every
    /// snapshot in use (TiKV: its MVCC GC; etcd: revision compaction; stores that keep no
    /// history of their own need nothing). Percolator's GC calls it after collecting its own versions. Does nothing by
    /// default; a wrapper forwards it.
    async fn collect_garbage(&self, safe_point: u64) -> Result<(), StoreError> {
        let _ = safe_point;
        Ok(())
    }
}

/// One page of a scan of `table` from `start` to the end: at most `row_limit` rows. Walk a
/// table a page at a time by passing `Bound::Excluded(last row)` as the next `start`.
pub async fn scan_page<S: RowStore + ?Sized>(
    store: &S,
    table: &Bytes,
    start: &Bound<Bytes>,
    read: FamilyRead,
    row_limit: usize,
) -> Result<Vec<RowCells>, StoreError> {
    store
        .scan(Scan {
            snapshot_ts: None,
            table: table.clone(),
            start: start.clone(),
            end: Bound::Unbounded,
            read,
            row_limit: Some(row_limit),
        })
        .await
}
