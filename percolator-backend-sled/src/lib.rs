//! # percolator-backend-sled
//!
//! An embedded, persistent backend: a [`RowStore`] on [sled](https://docs.rs/sled) 0.34 (one of
//! the `percolator` command's embedded backends; fjall is the default).
//!
//! ## Layout
//! - **One sled tree per family** (`data`, `lock`, `write`, `notify`): Bigtable's locality
//!   groups, so the observers' scan of the notify family never reads data.
//! - Keys are [`percolator_core::backend::key::CellKey::encode`]: `enc(table) ++ enc(row) ++ enc(column) ++
//!   !ts`, order-preserving and prefix-free, so a row is one key prefix and versions come newest
//!   first.
//!
//! ## Atomicity
//! sled is single-process. Per-row atomicity comes from **in-process row latches** (4096 striped
//! `RwLock`s hashed by `(table, row)`): a row mutation takes its row's latch for writing, checks
//! its conditions against the trees, then applies all of its puts and deletes — across trees — in
//! one sled transaction, which is also what makes it **crash-atomic** (after a crash either every
//! cell of the row mutation is there or none is). Reads and scans take the row latch for reading,
//! so no reader sees half of a row mutation (sled's own multi-tree transactions are not isolated
//! from plain reads). A batch whose rows are distinct takes all of their latches in stripe order
//! and applies every successful item in a single sled transaction.
//!
//! A scan *finds* rows in one family's tree before it takes their latch, so the order in which a
//! sled transaction applies its trees is visible to it. A commit moves a row from the lock tree to
//! the write tree; a snapshot reader scans locks and then write records and must find the row in
//! one of them. The transaction therefore applies the write tree first and the lock tree last
//! ([`COMMIT_ORDER`]): a row never vanishes from both (the conformance case
//! `store_lock_to_write_transition_never_hides_a_row` checks it).
//!
//! ## Snapshot reads and one-phase commit
//! The store tracks snapshot reads ([`StoreLimits::tracks_snapshot_reads`]), so single-row
//! transactions commit in one row mutation conditional on
//! [`Condition::NoSnapshotReadSince`]: the newest `snapshot_ts` a point read was admitted at is an
//! atomic per latch stripe, and that of a scan one per table (hashed into
//! [`SCAN_MARKS`](percolator_backend_embedded::SCAN_MARKS) slots), raised *before* the reader
//! looks anything up; a mutation checks its row's stripe and its table's mark. (One atomic for
//! the whole store would make a one-step commit fall back to two phases whenever any other
//! transaction reads anything meanwhile.) The argument that no admitted reader misses a mutation
//! whose condition held:
//! - the mutation checks the marks under its row's write latch and keeps the latch until its
//!   keys are in the trees; a **point read** admits itself, then takes the row latch: either the
//!   mutation saw the reader's timestamp and failed, or it held the latch first and the read
//!   waits for it;
//! - a **scan** finds rows in a tree before latching them, so a mutation that creates a row could
//!   land behind a scan that already passed its key. Mutations carrying the condition therefore
//!   also hold one of [`SCAN_GATES`] shared gates (for reading) from before the check until after
//!   the write; a snapshot scan, after admitting itself, takes every gate once for writing (and
//!   lets go at once) before it looks anything up. Any mutation checked before the admission
//!   has then landed, and every later one sees the admission and fails. The gates are shared
//!   among writers, and a scan waits only for writes already in flight: no global lock.
//!
//! Both sides put a `SeqCst` fence between raising or reading a mark and the next step; the
//! conformance case `one_phase_condition_is_atomic_against_concurrent_readers` races the two
//! (and fails if the scan does not cycle the gates).
//!
//! A one-phase commit of one short cell writes a single key (its write record, with the value
//! inline), which goes in as a plain insert. That matters on sled: every multi-key sled
//! transaction or batch rolls sled's I/O buffer (twice), and that, not the tree work, is most of
//! its cost — several times a plain insert (the README's benchmark section has the figures).
//!
//! ## Durability — what is on disk when a commit returns
//! sled writes go to its in-memory log and are flushed by a background thread every
//! `flush_every_ms` (500 ms by default). So by default, when `Transaction::commit` returns, the
//! commit is **atomic and visible, but not yet durable**: a crash of the process or the machine
//! may lose the commits of the last flush interval. Recovery restores a prefix of the log, so a
//! lost commit is lost whole (its primary), and the locks of half-written transactions are
//! resolved lazily as usual.
//!
//! With `TxnConfig::default().with_durable_commits(true)` the transaction layer calls
//! [`RowStore::sync`] (= `Db::flush`, grouped) right after the commit point, before `commit`
//! returns: then every acknowledged commit survives `kill -9` and power loss (as far as the
//! file system honours `fsync`). The timestamp oracle always syncs its high-water mark.
//! Concurrent `sync` calls are grouped: one flush runs at a time and covers every caller whose
//! writes completed before it started (group commit).
//!
//! ## Blocking
//! sled operations run inline on the async task: they complete from sled's page cache and log
//! buffers without waiting on the disk (writes reach disk in sled's flusher thread; `sync` runs
//! `Db::flush` on tokio's blocking pool). Latches are held only inside synchronous code, never
//! across an `.await`.
//!
//! ## Known hang
//! sled 0.34 can deadlock inside itself under concurrent writes with many deletes
//! (spacejam/sled#1412, open upstream): a writer waits in `SegmentAccountant::bump_tip`, holding
//! the segment accountant mutex, for a file truncation queued on sled's I/O pool, whose threads
//! all wait for that mutex. Every writer then stops; a restart recovers as after a crash (see
//! Durability).
//! The repository's `docs/dev/README.md` describes it, and why a watchdog in the backend does
//! not help. Long jobs should prefer the fjall backend.
//!
//! ## Space
//! sled frees the space of deleted and overwritten keys only slowly, so after garbage collection
//! the directory can be many times the live data. [`compact::compact`] (`percolator compact`)
//! copies the live keys into a fresh database and swaps it in, offline and crash-safe.
//!
//! ## Limits
//! Keys up to 16 KiB encoded, values up to 16 MiB, 100 000 row mutations per batch.
//!
//! [`Condition::NoSnapshotReadSince`]: percolator_core::Condition::NoSnapshotReadSince

pub mod compact;
#[cfg(feature = "conformance")]
pub mod conformance;

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use bytes::Bytes;
use percolator_backend_embedded::{
    GroupSync, KeyLookup, KeyWrite, RowLatches, long_synchronous, plan, prefix_end,
    rows_are_distinct, scan_range, version_bounds,
};
use percolator_core::backend::key::{self, KeyError};
use percolator_core::backend::validate::{validate_atomic_batch, validate_batch};
use percolator_core::{
    AtomicOutcome, Cell, Columns, Family, FamilyRead, MutationOutcome, ReadRow, RowCells,
    RowMutation, RowStore, Scan, StoreError, StoreLimits,
};
use sled::Transactional as _;

pub use percolator_backend_embedded::SCAN_GATES;

/// The order in which a multi-tree transaction applies its trees (sled commits them one after
/// the other): families a row can move *into* first, the lock family — which rows leave on commit
/// and rollback — last. See the module docs.
pub const COMMIT_ORDER: [Family; 4] = [Family::Write, Family::Data, Family::Notify, Family::Lock];

/// Position of family index `family` in [`COMMIT_ORDER`].
fn commit_position(family: usize) -> usize {
    COMMIT_ORDER
        .iter()
        .position(|f| f.index() == family)
        .unwrap_or(family)
}

/// The limits of [`SledStore`].
pub const SLED_LIMITS: StoreLimits = StoreLimits::new(16 * 1024, 16 * 1024 * 1024, 100_000)
    .with_persistent(true)
    .with_durable_after_sync(true)
    .with_tracks_snapshot_reads(true)
    .with_max_atomic_rows(MAX_ATOMIC_ROWS);

/// The most rows of one all-or-nothing mutation: each holds its rows' latches while it applies.
const MAX_ATOMIC_ROWS: usize = 512;

/// How to open a [`SledStore`].
///
/// `#[non_exhaustive]` so that options can be added: start from [`SledConfig::new`] and change
/// what you need with the `with_*` setters.
///
/// ```
/// # use percolator_backend_sled::SledConfig;
/// let config = SledConfig::new("/tmp/db")
///     .with_cache_capacity(64 << 20)
///     .with_flush_every_ms(None);
/// assert_eq!(config.flush_every_ms, None);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SledConfig {
    /// Directory of the database.
    pub path: PathBuf,
    /// sled's page cache size in bytes.
    pub cache_capacity: u64,
    /// Background flush period; `None` disables background flushing (only `sync` flushes).
    pub flush_every_ms: Option<u64>,
}

impl SledConfig {
    /// Defaults for `path`: 256 MiB cache, flush every 500 ms.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            cache_capacity: 256 * 1024 * 1024,
            flush_every_ms: Some(500),
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

    /// Sets [`Self::flush_every_ms`].
    #[must_use]
    pub fn with_flush_every_ms(mut self, flush_every_ms: Option<u64>) -> Self {
        self.flush_every_ms = flush_every_ms;
        self
    }
}

/// The sled-backed store. See the crate docs.
pub struct SledStore {
    db: sled::Db,
    /// Group commit for `sync`.
    group_sync: GroupSync,
    trees: Vec<sled::Tree>,
    /// `trees` in [`COMMIT_ORDER`], for multi-tree transactions.
    commit_trees: Vec<sled::Tree>,
    /// Row latches, snapshot admission and scan gates (see the crate docs).
    latches: RowLatches,
    path: PathBuf,
    /// `sled:` and the canonical database path ([`RowStore::store_id`]).
    id: String,
}

impl std::fmt::Debug for SledStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SledStore")
            .field("path", &self.path)
            .finish()
    }
}

fn backend(context: &str, e: sled::Error) -> StoreError {
    StoreError::backend(format!("sled: {context}"), e)
}

fn corrupt(e: KeyError) -> StoreError {
    StoreError::Corrupt(format!("undecodable key in sled tree: {e}"))
}

impl SledStore {
    /// Opens (or creates) a store at `path` with default settings.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_with(SledConfig::new(path.as_ref()))
    }

    /// Opens (or creates) a store.
    pub fn open_with(config: SledConfig) -> Result<Self, StoreError> {
        compact::finish_interrupted(&config.path)?;
        let db = sled::Config::new()
            .path(&config.path)
            .cache_capacity(config.cache_capacity)
            .flush_every_ms(config.flush_every_ms)
            .open()
            .map_err(|e| backend("open", e))?;
        // sled created the directory: its canonical path names the data however it was reached.
        let canonical = std::fs::canonicalize(&config.path).map_err(|e| {
            StoreError::backend(format!("canonicalize {}", config.path.display()), e)
        })?;
        let trees = Family::ALL
            .iter()
            .map(|f| db.open_tree(f.name()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| backend("open tree", e))?;
        let commit_trees = COMMIT_ORDER
            .iter()
            .map(|f| trees[f.index()].clone())
            .collect();
        Ok(Self {
            db,
            commit_trees,
            group_sync: GroupSync::default(),
            trees,
            latches: RowLatches::new(),
            path: config.path,
            id: format!("sled:{}", canonical.display()),
        })
    }

    /// The database directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes sled reports on disk.
    pub fn size_on_disk(&self) -> Result<u64, StoreError> {
        self.db
            .size_on_disk()
            .map_err(|e| backend("size_on_disk", e))
    }

    fn tree(&self, family: Family) -> &sled::Tree {
        &self.trees[family.index()]
    }

    /// Cells of one family of one row (caller holds the row latch).
    fn read_family(
        &self,
        row_prefix: &[u8],
        table: &[u8],
        row: &[u8],
        read: &FamilyRead,
    ) -> Result<Vec<Cell>, StoreError> {
        let tree = self.tree(read.family);
        let mut out = Vec::new();
        match &read.columns {
            Columns::Only(_) if read.ts.is_empty() => {}
            Columns::Only(list) => {
                let mut list = list.clone();
                list.sort();
                list.dedup();
                for column in &list {
                    let prefix = key::column_prefix(table, row, column);
                    let (lo, hi) = version_bounds(&prefix, read.ts);
                    let limit = read.max_versions.unwrap_or(usize::MAX);
                    for item in tree.range(lo..=hi).take(limit) {
                        let (k, v) = item.map_err(|e| backend("read", e))?;
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
                // `max_versions`. Old versions are skipped by a seek, never read.
                let limit = read.max_versions.unwrap_or(usize::MAX);
                let row_end = prefix_end(row_prefix);
                let mut cursor = row_prefix.to_vec();
                let mut taken: Option<(Vec<u8>, usize)> = None;
                'seek: loop {
                    for item in tree.range(cursor.as_slice()..row_end.as_slice()) {
                        let (k, v) = item.map_err(|e| backend("read", e))?;
                        let (column, used) =
                            key::decode_bytes(&k[row_prefix.len()..], row_prefix.len())
                                .map_err(corrupt)?;
                        let at = row_prefix.len() + used;
                        let ts = key::decode_ts(&k[at..], at).map_err(corrupt)?;
                        let count = match &taken {
                            Some((c, n)) if *c == column => *n,
                            _ => 0,
                        };
                        if ts > read.ts.hi {
                            // Newer than the range: jump to the range's newest version.
                            cursor = version_bounds(&k[..at], read.ts).0;
                            continue 'seek;
                        }
                        if ts < read.ts.lo || count >= limit {
                            cursor = prefix_end(&k[..at]);
                            continue 'seek;
                        }
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

    /// Applies planned writes atomically (and crash-atomically) across trees.
    fn commit_writes(&self, writes: &[KeyWrite]) -> Result<(), StoreError> {
        match writes {
            [] => Ok(()),
            [single] => {
                let tree = self.tree(single.family);
                match &single.value {
                    Some(v) => tree.insert(&single.key, v.as_ref()).map(|_| ()),
                    None => tree.remove(&single.key).map(|_| ()),
                }
                .map_err(|e| backend("write", e))
            }
            many => self.commit_trees[..]
                .transaction(|trees| {
                    for w in many {
                        let tree = &trees[commit_position(w.family.index())];
                        match &w.value {
                            Some(v) => {
                                tree.insert(w.key.as_slice(), v.as_ref())?;
                            }
                            None => {
                                tree.remove(w.key.as_slice())?;
                            }
                        }
                    }
                    Ok::<(), sled::transaction::ConflictableTransactionError<()>>(())
                })
                .map_err(|e| match e {
                    sled::transaction::TransactionError::Storage(e) => backend("transaction", e),
                    sled::transaction::TransactionError::Abort(()) => StoreError::Backend {
                        message: "sled transaction aborted".into(),
                        source: None,
                    },
                }),
        }
    }

    fn mutate_one(&self, item: &RowMutation) -> Result<MutationOutcome, StoreError> {
        let _latch = self.latches.write(&item.table, &item.row);
        let mut writes = Vec::new();
        let outcome = plan(&self.latches, self, item, &mut writes)?;
        if outcome.applied() {
            self.commit_writes(&writes)?;
        }
        Ok(outcome)
    }

    fn mutate_distinct_rows(
        &self,
        batch: &[RowMutation],
    ) -> Result<Vec<MutationOutcome>, StoreError> {
        let _latches = self.latches.write_rows(batch);
        let mut writes = Vec::new();
        let mut outcomes = Vec::with_capacity(batch.len());
        for item in batch {
            outcomes.push(plan(&self.latches, self, item, &mut writes)?);
        }
        self.commit_writes(&writes)?;
        Ok(outcomes)
    }

    /// [`RowStore::mutate_rows_atomically`] of a validated batch: every row's latch, every
    /// item planned, then one sled transaction for all of them or none.
    fn mutate_all_or_nothing(&self, batch: &[RowMutation]) -> Result<AtomicOutcome, StoreError> {
        let _latches = self.latches.write_rows(batch);
        let mut writes = Vec::new();
        for (item, mutation) in batch.iter().enumerate() {
            if let MutationOutcome::ConditionFailed { condition } =
                plan(&self.latches, self, mutation, &mut writes)?
            {
                return Ok(AtomicOutcome::ConditionFailed { item, condition });
            }
        }
        self.commit_writes(&writes)?;
        Ok(AtomicOutcome::Applied)
    }
}

/// The trees as they are: the caller holds the row latch.
impl KeyLookup for SledStore {
    fn any_in(&self, family: Family, lo: &[u8], hi: &[u8]) -> Result<bool, StoreError> {
        match self.tree(family).range(lo..=hi).next() {
            None => Ok(false),
            Some(item) => item.map(|_| true).map_err(|e| backend("condition", e)),
        }
    }

    fn holds_value(
        &self,
        family: Family,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<bool, StoreError> {
        let tree = self.tree(family);
        match value {
            None => tree.contains_key(key),
            Some(value) => tree
                .get(key)
                .map(|v| v.is_some_and(|v| v.as_ref() == value)),
        }
        .map_err(|e| backend("condition", e))
    }

    fn keys_in(&self, family: Family, lo: &[u8], hi: &[u8]) -> Result<Vec<Vec<u8>>, StoreError> {
        self.tree(family)
            .range(lo..=hi)
            .keys()
            .map(|k| {
                k.map(|k| k.to_vec())
                    .map_err(|e| backend("delete range", e))
            })
            .collect()
    }
}

#[async_trait]
impl RowStore for SledStore {
    fn name(&self) -> &'static str {
        "sled"
    }

    fn limits(&self) -> StoreLimits {
        SLED_LIMITS
    }

    /// `sled:` and the canonical database path: every handle on one database has the same id
    /// (sled lets one process open a database once at a time; this keeps a reopened handle on
    /// the same oracle).
    fn store_id(&self) -> String {
        self.id.clone()
    }

    async fn read_row(&self, request: ReadRow) -> Result<Vec<Vec<Cell>>, StoreError> {
        tokio::task::consume_budget().await;
        self.latches
            .admit_read(&request.table, &request.row, request.snapshot_ts);
        let prefix = key::row_prefix(&request.table, &request.row);
        let _latch = self.latches.read(&request.table, &request.row);
        request
            .reads
            .iter()
            .map(|read| self.read_family(&prefix, &request.table, &request.row, read))
            .collect()
    }

    async fn scan(&self, request: Scan) -> Result<Vec<RowCells>, StoreError> {
        tokio::task::consume_budget().await;
        // An unbounded scan is usually a short one (a row, a prefix): only a bounded page of many
        // rows counts as long.
        let rows = request.row_limit.unwrap_or(0);
        long_synchronous(rows, || {
            if request.snapshot_ts.is_some() {
                self.latches.admit_scan(&request.table, request.snapshot_ts);
                self.latches.cycle_scan_gates();
            }
            let table_prefix = key::table_prefix(&request.table);
            let (mut cursor, scan_end) = scan_range(&request.table, &request.start, &request.end);
            let tree = self.tree(request.read.family);
            let mut out = Vec::new();
            while request.row_limit.is_none_or(|limit| out.len() < limit) {
                let Some(item) = tree.range(cursor.as_slice()..scan_end.as_slice()).next() else {
                    break;
                };
                let (k, _) = item.map_err(|e| backend("scan", e))?;
                if !k.starts_with(&table_prefix) {
                    break;
                }
                let (row, used) = key::decode_bytes(&k[table_prefix.len()..], table_prefix.len())
                    .map_err(corrupt)?;
                let row_prefix = &k[..table_prefix.len() + used];
                let cells = {
                    let _latch = self.latches.read(&request.table, &row);
                    self.read_family(row_prefix, &request.table, &row, &request.read)?
                };
                cursor = prefix_end(row_prefix);
                if !cells.is_empty() {
                    out.push(RowCells {
                        row: Bytes::from(row),
                        cells,
                    });
                }
            }
            Ok(out)
        })
    }

    async fn mutate_rows(
        &self,
        batch: Vec<RowMutation>,
    ) -> Result<Vec<MutationOutcome>, StoreError> {
        tokio::task::consume_budget().await;
        validate_batch(&batch, &SLED_LIMITS)?;
        // Taken before any row latch (a scan cycling the gates holds no latch).
        let _gate = self.latches.gate_for(&batch);
        long_synchronous(batch.len(), || {
            if rows_are_distinct(&batch) {
                self.mutate_distinct_rows(&batch)
            } else {
                // Items on the same row must see each other's effects: apply one by one.
                batch.iter().map(|item| self.mutate_one(item)).collect()
            }
        })
    }

    /// One sled transaction under every row's latch, as a distinct-row batch applies.
    async fn mutate_rows_atomically(
        &self,
        batch: Vec<RowMutation>,
    ) -> Result<AtomicOutcome, StoreError> {
        tokio::task::consume_budget().await;
        validate_atomic_batch(&batch, &SLED_LIMITS)?;
        // Taken before any row latch (a scan cycling the gates holds no latch).
        let _gate = self.latches.gate_for(&batch);
        long_synchronous(batch.len(), || self.mutate_all_or_nothing(&batch))
    }

    async fn sync(&self) -> Result<(), StoreError> {
        // `Db::flush` on tokio's blocking pool. (Not `flush_async`: it runs on sled's own small
        // thread pool, and many concurrent flushes there starve the log writes they wait for
        // while a sled transaction waits for its commit lock: a handful of concurrent durable
        // committers can deadlock that way.)
        let db = self.db.clone();
        self.group_sync
            .sync("sled", move || {
                db.flush().map(|_| ()).map_err(|e| backend("flush", e))
            })
            .await
    }

    /// Skips from table to table in each family's tree: one seek per table.
    async fn tables(&self) -> Result<Vec<Bytes>, StoreError> {
        let mut tables = std::collections::BTreeSet::new();
        for tree in &self.trees {
            let mut cursor = Vec::new();
            while let Some(item) = tree.range(cursor.as_slice()..).next() {
                let (k, _) = item.map_err(|e| backend("listing tables", e))?;
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

    #[test]
    fn corrupt_keys_in_a_tree_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(dir.path()).unwrap();
        // A key that starts like table "t" but is cut short.
        let mut bad = key::table_prefix(b"t");
        bad.extend_from_slice(&[1, 2, 3]);
        store.tree(Family::Data).insert(bad, &b"x"[..]).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let err = rt
            .block_on(store.scan(Scan {
                snapshot_ts: None,
                table: Bytes::from("t"),
                start: Bound::Unbounded,
                end: Bound::Unbounded,
                read: FamilyRead::all(Family::Data),
                row_limit: None,
            }))
            .unwrap_err();
        assert!(matches!(err, StoreError::Corrupt(_)), "{err:?}");
    }
}
