//! # percolator-backend-mem
//!
//! An in-process [`RowStore`]: fast, not persistent, and the **skeleton to copy** when writing a
//! new backend. A backend has exactly four jobs, each a small function here:
//! 1. keep cells ordered by `(table, row)`, then column, then timestamp newest first;
//! 2. make each row mutation atomic on its row (check conditions, then apply, with nothing
//!    interleaved) — here a per-row `RwLock` latch;
//! 3. keep each family scannable on its own (locality groups) — here one row index per family;
//! 4. state its limits ([`StoreLimits`]) and validate batches before applying anything
//!    ([`percolator_core::backend::validate::validate_batch`]).
//!
//! Then give the crate a [`StoreFactory`](percolator_core::conformance::StoreFactory) in a
//! `conformance` module behind a `conformance` feature (here [`conformance::MemFactory`]) and run
//! the conformance suite from the crate's tests (`tests/conformance.rs`, one line).
//!
//! ## Layout
//! - `rows`: a lock-free [`SkipMap`] from `(table, row)` to the row; a row holds one ordered map
//!   per family from column to its versions (a vector, newest first), behind the row's latch.
//!   Nesting the versions under the column lets a lookup borrow the requested column instead of
//!   building an owned `(column, ts)` bound for every range; a vector rather than a map keeps a
//!   one-version column at about 40 bytes instead of a 450-byte tree node. No lock spans more
//!   than one row, so unrelated rows never contend.
//! - `family_rows[f]`: the rows that have cells in family `f`, so that a scan of the notify
//!   family touches only rows with notifications. A row joins the index when it gains a cell in
//!   `f` and leaves it when a scan of `f` finds it empty, not on every mutation: a commit empties
//!   the lock family of a row that the next prewrite fills again, and re-indexing it each time
//!   would double the cost of a transaction. Scans walk these maps with
//!   [`percolator_backend_embedded::skip_range`], not crossbeam's own `range`, which would keep
//!   every row it passed allocated after the row leaves.
//!
//! ## Snapshot reads and one-phase commit
//! The store keeps the newest `snapshot_ts` any read or scan was admitted at (one atomic, like
//! TiKV's `max_ts`), so that it can check [`Condition::NoSnapshotReadSince`] and single-row
//! transactions commit in one mutation. The argument that no admitted reader misses such a
//! mutation:
//! - a reader raises the maximum *before* it looks anything up; a mutation checks it under its
//!   row's write latch, *after* making the row findable (in `rows` and in the family index of
//!   every family it puts into); both sides put a `SeqCst` fence between the two steps;
//! - so either the mutation sees the reader's timestamp and fails, or the reader's lookup comes
//!   after the row became findable; it then finds the row (also in a scan, also for a row that
//!   did not exist before) and waits on the row latch until the mutation is applied.
//!
//! A row indexed by a mutation whose conditions then fail is left in the index with an empty
//! family and pruned by the next scan, as below.
//!
//! ## Limits and guarantees
//! Calls never wait, but each consumes tokio's cooperative budget so that a task looping over an
//! always-ready store still yields to the scheduler (timers, other tasks).
//!
//! Keys up to 16 KiB encoded, values up to 32 MiB, 100 000 row mutations per batch. Nothing is
//! persistent: data lives as long as the [`MemStore`]. `sync` is a no-op.

#[cfg(feature = "conformance")]
pub mod conformance;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering, fence};

use async_trait::async_trait;
use bytes::Bytes;
use crossbeam_skiplist::SkipMap;
use parking_lot::RwLock;
use percolator_backend_embedded::skip_range;
use percolator_core::backend::scan::row_past_end;
use percolator_core::backend::validate::validate_batch;
use percolator_core::{
    Cell, Columns, Condition, Family, FamilyRead, Mutation, MutationOutcome, ReadRow, RowCells,
    RowMutation, RowStore, Scan, StoreError, StoreLimits, TsRange,
};

type RowKey = (Bytes, Bytes);
/// The versions of one column, newest first, in a plain sorted vector: most columns hold one
/// or two versions, where a `BTreeMap` would allocate a node for eleven (about 450 bytes per
/// column; this is 40 bytes per version). New versions are the newest, so inserting is a shift
/// of the few older ones at most.
#[derive(Debug, Default)]
struct Versions(Vec<(u64, Bytes)>);

impl Versions {
    /// Where `ts` is, or would go (newest first).
    fn position(&self, ts: u64) -> Result<usize, usize> {
        self.0.binary_search_by(|(t, _)| ts.cmp(t))
    }

    fn insert(&mut self, ts: u64, value: Bytes) {
        match self.position(ts) {
            Ok(i) => self.0[i].1 = value,
            Err(i) => self.0.insert(i, (ts, value)),
        }
    }

    fn get(&self, ts: u64) -> Option<&Bytes> {
        self.position(ts).ok().map(|i| &self.0[i].1)
    }

    /// Versions `ts`, newest first (empty for an empty range).
    fn range(&self, ts: TsRange) -> &[(u64, Bytes)] {
        if ts.is_empty() {
            return &[];
        }
        let from = self.position(ts.hi).unwrap_or_else(|i| i);
        let to = match self.position(ts.lo) {
            Ok(i) => i + 1,
            Err(i) => i,
        };
        self.0.get(from..to.max(from)).unwrap_or(&[])
    }

    /// Removes versions `ts`.
    fn remove_range(&mut self, ts: TsRange) {
        if ts.is_empty() {
            return;
        }
        let from = self.position(ts.hi).unwrap_or_else(|i| i);
        let to = match self.position(ts.lo) {
            Ok(i) => i + 1,
            Err(i) => i,
        };
        if from < to {
            self.0.drain(from..to);
        }
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}
/// One family of one row: column → versions. A column with no versions is removed, so an empty
/// map means the row has no cells in the family.
type FamilyCells = BTreeMap<Bytes, Versions>;

/// One row: a latch over one ordered map per family, and which family indexes list the row.
#[derive(Default)]
struct MemRow {
    latched: RwLock<RowState>,
}

/// What a row's latch protects.
#[derive(Default)]
struct RowState {
    families: [FamilyCells; Family::ALL.len()],
    /// `indexed[f]`: the row is in `family_rows[f]`. Changed only under the row's write latch,
    /// together with the index itself, so the flag and the index never disagree.
    indexed: [bool; Family::ALL.len()],
    /// The row was found empty and removed from every map (under this latch). A mutation that
    /// latches a removed row looks the row up again instead of writing into it.
    removed: bool,
}

impl RowState {
    fn is_empty(&self) -> bool {
        self.families.iter().all(BTreeMap::is_empty)
    }
}

/// The in-memory store. See the crate docs.
pub struct MemStore {
    /// `mem:<n>`, unique in the process ([`RowStore::store_id`]).
    id: String,
    rows: SkipMap<RowKey, Arc<MemRow>>,
    family_rows: [SkipMap<RowKey, Arc<MemRow>>; Family::ALL.len()],
    /// The newest `snapshot_ts` a read or scan was admitted at (see the crate docs).
    newest_snapshot: AtomicU64,
}

impl Default for MemStore {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for MemStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemStore")
            .field("id", &self.id)
            .field("rows", &self.rows.len())
            .finish()
    }
}

/// The limits of [`MemStore`].
pub const MEM_LIMITS: StoreLimits =
    StoreLimits::new(16 * 1024, 32 * 1024 * 1024, 100_000).with_tracks_snapshot_reads(true);

/// Numbers the stores of this process, for their ids.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl MemStore {
    /// An empty store.
    pub fn new() -> Self {
        Self {
            id: format!("mem:{}", NEXT_ID.fetch_add(1, Ordering::Relaxed)),
            rows: SkipMap::new(),
            family_rows: std::array::from_fn(|_| SkipMap::new()),
            newest_snapshot: AtomicU64::new(0),
        }
    }

    /// Admits a snapshot read at `ts` before it looks anything up (see the crate docs).
    fn admit(&self, snapshot_ts: Option<u64>) {
        if let Some(ts) = snapshot_ts {
            if self.newest_snapshot.load(Ordering::SeqCst) < ts {
                self.newest_snapshot.fetch_max(ts, Ordering::SeqCst);
            }
            fence(Ordering::SeqCst);
        }
    }

    fn row(&self, key: &RowKey) -> Option<Arc<MemRow>> {
        self.rows.get(key).map(|e| Arc::clone(e.value()))
    }

    fn apply(&self, item: RowMutation) -> MutationOutcome {
        let key = (item.table.clone(), item.row.clone());
        loop {
            let row = match self.rows.get(&key) {
                Some(entry) => Arc::clone(entry.value()),
                None => Arc::clone(
                    self.rows
                        .get_or_insert_with(key.clone(), || Arc::new(MemRow::default()))
                        .value(),
                ),
            };
            let mut state = row.latched.write();
            if state.removed {
                continue; // emptied and removed after we found it: look it up again
            }
            let outcome = self.apply_latched(&key, &row, &mut state, item);
            if state.is_empty() {
                self.remove_row(&key, &mut state);
            }
            return outcome;
        }
    }

    /// Removes an empty row from the row map and every family index (under its write latch):
    /// deleting a row's last cell (garbage collection does) leaves nothing behind.
    fn remove_row(&self, key: &RowKey, state: &mut RowState) {
        for (f, indexed) in state.indexed.iter_mut().enumerate() {
            if std::mem::take(indexed) {
                self.family_rows[f].remove(key);
            }
        }
        state.removed = true;
        self.rows.remove(key);
    }

    fn apply_latched(
        &self,
        key: &RowKey,
        row: &Arc<MemRow>,
        state: &mut RowState,
        item: RowMutation,
    ) -> MutationOutcome {
        let (item_conditions, item_mutations) = (item.conditions, item.mutations);
        // Index the row in every family it puts into before checking anything, while holding
        // the latch: a scan admitted after the checks must find the row (crate docs). Rows are
        // never removed here, only by a scan that finds the family empty (`prune`), so a commit
        // moving a row from the lock family to the write family never leaves it missing from
        // both indexes.
        for m in &item_mutations {
            let f = m.family().index();
            if matches!(m, Mutation::Put { .. }) && !state.indexed[f] {
                state.indexed[f] = true;
                self.family_rows[f].insert(key.clone(), Arc::clone(row));
            }
        }
        for (i, condition) in item_conditions.iter().enumerate() {
            if !self.holds(&state.families, condition) {
                return MutationOutcome::ConditionFailed { condition: i };
            }
        }
        for m in item_mutations {
            apply_one(&mut state.families, m);
        }
        MutationOutcome::Applied
    }

    /// Drops `key` from family `f`'s index if the row has no cells left in `f`. Checked and done
    /// under the row's write latch, so a concurrent mutation either re-indexes the row after us
    /// or finds it still indexed.
    fn prune(&self, f: usize, key: &RowKey, row: &MemRow) {
        let mut state = row.latched.write();
        if state.indexed[f] && state.families[f].is_empty() {
            state.indexed[f] = false;
            self.family_rows[f].remove(key);
        }
    }
}

/// Versions `ts` of `column` in one family, newest first.
fn versions<'a>(family: &'a FamilyCells, column: &[u8], ts: TsRange) -> &'a [(u64, Bytes)] {
    family.get(column).map_or(&[], |v| v.range(ts))
}

impl MemStore {
    fn holds(&self, families: &[FamilyCells; Family::ALL.len()], condition: &Condition) -> bool {
        match condition {
            Condition::NoSnapshotReadSince { ts } => {
                // Orders the row's indexing (and creation) before this load; see the crate docs.
                fence(Ordering::SeqCst);
                self.newest_snapshot.load(Ordering::SeqCst) < *ts
            }
            Condition::Absent { family, column, ts } => {
                versions(&families[family.index()], column, *ts).is_empty()
            }
            Condition::Exists { family, column, ts } => families[family.index()]
                .get(column.as_ref())
                .is_some_and(|versions| versions.get(*ts).is_some()),
            Condition::Equals {
                family,
                column,
                ts,
                value,
            } => {
                families[family.index()]
                    .get(column.as_ref())
                    .and_then(|versions| versions.get(*ts))
                    == Some(value)
            }
        }
    }
}

fn apply_one(families: &mut [FamilyCells; Family::ALL.len()], mutation: Mutation) {
    match mutation {
        Mutation::Put {
            family,
            column,
            ts,
            value,
        } => {
            families[family.index()]
                .entry(column)
                .or_default()
                .insert(ts, value);
        }
        Mutation::Delete { family, column, ts } => {
            remove_versions(&mut families[family.index()], &column, TsRange::at(ts));
        }
        Mutation::DeleteRange { family, column, ts } => {
            remove_versions(&mut families[family.index()], &column, ts);
        }
    }
}

/// Removes versions `ts` of `column`, and the column itself once it has none left.
fn remove_versions(family: &mut FamilyCells, column: &[u8], ts: TsRange) {
    let Some(versions) = family.get_mut(column) else {
        return;
    };
    versions.remove_range(ts);
    if versions.is_empty() {
        family.remove(column);
    }
}

/// Cells of one family selected by `read`, ordered by column then newest first.
fn select(family: &FamilyCells, read: &FamilyRead) -> Vec<Cell> {
    let mut out = Vec::new();
    let limit = read.max_versions.unwrap_or(usize::MAX);
    let mut push = |column: &Bytes, versions: &Versions| {
        for (ts, value) in versions.range(read.ts).iter().take(limit) {
            out.push(Cell {
                column: column.clone(),
                ts: *ts,
                value: value.clone(),
            });
        }
    };
    match &read.columns {
        Columns::All => family
            .iter()
            .for_each(|(column, versions)| push(column, versions)),
        Columns::Only(list) => {
            let sorted;
            let list = if list.is_sorted_by(|a, b| a < b) {
                list
            } else {
                let mut copy = list.clone();
                copy.sort();
                copy.dedup();
                sorted = copy;
                &sorted
            };
            for column in list {
                if let Some((stored, versions)) = family.get_key_value(column.as_ref()) {
                    push(stored, versions);
                }
            }
        }
    }
    out
}

#[async_trait]
impl RowStore for MemStore {
    fn name(&self) -> &'static str {
        "mem"
    }

    fn limits(&self) -> StoreLimits {
        MEM_LIMITS
    }

    /// `mem:<n>`: each [`MemStore`] is its own data, so each gets a number unique in the process.
    fn store_id(&self) -> String {
        self.id.clone()
    }

    async fn read_row(&self, request: ReadRow) -> Result<Vec<Vec<Cell>>, StoreError> {
        // Every call completes without waiting; let tokio's budget preempt busy tasks anyway.
        tokio::task::consume_budget().await;
        self.admit(request.snapshot_ts);
        let Some(row) = self.row(&(request.table, request.row)) else {
            return Ok(vec![Vec::new(); request.reads.len()]);
        };
        let state = row.latched.read();
        Ok(request
            .reads
            .iter()
            .map(|read| select(&state.families[read.family.index()], read))
            .collect())
    }

    async fn scan(&self, request: Scan) -> Result<Vec<RowCells>, StoreError> {
        tokio::task::consume_budget().await;
        self.admit(request.snapshot_ts);
        let table = request.table.clone();
        let lower: Bound<RowKey> = match &request.start {
            Bound::Included(r) => Bound::Included((table.clone(), r.clone())),
            Bound::Excluded(r) => Bound::Excluded((table.clone(), r.clone())),
            Bound::Unbounded => Bound::Included((table.clone(), Bytes::new())),
        };
        let index = &self.family_rows[request.read.family.index()];
        let mut out = Vec::new();
        for entry in skip_range::range::<_, _, RowKey, _>(index, (lower, Bound::Unbounded)) {
            let (t, r) = entry.key();
            if *t != table || row_past_end(r, &request.end) {
                break;
            }
            if request.row_limit.is_some_and(|limit| out.len() >= limit) {
                break;
            }
            let f = request.read.family.index();
            let (cells, emptied) = {
                let state = entry.value().latched.read();
                (
                    select(&state.families[f], &request.read),
                    state.families[f].is_empty(),
                )
            };
            if emptied {
                self.prune(f, entry.key(), entry.value());
            } else if !cells.is_empty() {
                out.push(RowCells {
                    row: r.clone(),
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
        validate_batch(&batch, &MEM_LIMITS)?;
        Ok(batch.into_iter().map(|item| self.apply(item)).collect())
    }

    async fn sync(&self) -> Result<(), StoreError> {
        Ok(())
    }

    async fn tables(&self) -> Result<Vec<Bytes>, StoreError> {
        let mut tables = Vec::new();
        let mut next = self.rows.front();
        while let Some(entry) = next {
            let table = entry.key().0.clone();
            // The first row key of the next table: every row of `table` sorts below it.
            let mut past = table.to_vec();
            past.push(0);
            next = self
                .rows
                .lower_bound(Bound::Included(&(Bytes::from(past), Bytes::new())));
            tables.push(table);
        }
        Ok(tables)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(ts: u64) -> Mutation {
        Mutation::Put {
            family: Family::Write,
            column: Bytes::from_static(b"c"),
            ts,
            value: Bytes::from_static(b"v"),
        }
    }

    fn item(row: &'static [u8], mutations: Vec<Mutation>) -> RowMutation {
        RowMutation {
            table: Bytes::from_static(b"t"),
            row: Bytes::from_static(row),
            conditions: vec![],
            mutations,
        }
    }

    #[tokio::test]
    async fn a_row_emptied_by_deletes_leaves_no_trace_and_comes_back_on_the_next_write() {
        let store = MemStore::new();
        store
            .mutate_rows(vec![item(b"r", vec![put(1), put(2)])])
            .await
            .unwrap();
        assert_eq!(store.rows.len(), 1);
        let delete_all = Mutation::DeleteRange {
            family: Family::Write,
            column: Bytes::from_static(b"c"),
            ts: TsRange::ALL,
        };
        store
            .mutate_rows(vec![item(b"r", vec![delete_all])])
            .await
            .unwrap();
        assert_eq!(store.rows.len(), 0, "the empty row stayed in the row map");
        assert!(store.family_rows.iter().all(SkipMap::is_empty));
        assert!(store.tables().await.unwrap().is_empty());
        store
            .mutate_rows(vec![item(b"r", vec![put(3)])])
            .await
            .unwrap();
        let cells = store
            .read_row(ReadRow {
                snapshot_ts: None,
                table: Bytes::from_static(b"t"),
                row: Bytes::from_static(b"r"),
                reads: vec![FamilyRead::all(Family::Write)],
            })
            .await
            .unwrap();
        assert_eq!(cells[0].len(), 1, "the write after the removal was lost");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn writes_racing_row_removal_are_never_lost() {
        let store = Arc::new(MemStore::new());
        let mut tasks = Vec::new();
        for w in 0..4u64 {
            let store = Arc::clone(&store);
            tasks.push(tokio::spawn(async move {
                for i in 0..2_000u64 {
                    let ts = w * 1_000_000 + i + 1;
                    store
                        .mutate_rows(vec![item(b"r", vec![put(ts)])])
                        .await
                        .unwrap();
                    let delete = Mutation::Delete {
                        family: Family::Write,
                        column: Bytes::from_static(b"c"),
                        ts,
                    };
                    // Our own version must be there until we delete it.
                    let cells = store
                        .read_row(ReadRow {
                            snapshot_ts: None,
                            table: Bytes::from_static(b"t"),
                            row: Bytes::from_static(b"r"),
                            reads: vec![FamilyRead::all(Family::Write).ts(TsRange::at(ts))],
                        })
                        .await
                        .unwrap();
                    assert_eq!(cells[0].len(), 1, "write {ts} vanished");
                    store
                        .mutate_rows(vec![item(b"r", vec![delete])])
                        .await
                        .unwrap();
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(store.rows.len(), 0);
    }

    #[test]
    fn versions_keep_newest_first_and_answer_ranges() {
        let mut v = Versions::default();
        for ts in [5, 1, 9, 3, 7] {
            v.insert(ts, Bytes::from(format!("v{ts}")));
        }
        v.insert(5, Bytes::from("five"));
        let ts_of = |cells: &[(u64, Bytes)]| cells.iter().map(|(t, _)| *t).collect::<Vec<_>>();
        assert_eq!(ts_of(v.range(TsRange::new(0, u64::MAX))), [9, 7, 5, 3, 1]);
        assert_eq!(ts_of(v.range(TsRange::new(3, 7))), [7, 5, 3]);
        assert_eq!(ts_of(v.range(TsRange::new(4, 6))), [5]);
        assert_eq!(ts_of(v.range(TsRange::new(10, 20))), Vec::<u64>::new());
        assert_eq!(
            ts_of(v.range(TsRange::new(6, 4))),
            Vec::<u64>::new(),
            "inverted"
        );
        assert_eq!(v.get(5), Some(&Bytes::from("five")));
        assert_eq!(v.get(4), None);
        v.remove_range(TsRange::new(2, 7));
        assert_eq!(ts_of(v.range(TsRange::new(0, u64::MAX))), [9, 1]);
        v.remove_range(TsRange::new(8, 2));
        assert_eq!(
            ts_of(v.range(TsRange::new(0, u64::MAX))),
            [9, 1],
            "inverted removes nothing"
        );
        v.remove_range(TsRange::at(9));
        v.remove_range(TsRange::at(1));
        assert!(v.is_empty());
    }
}
