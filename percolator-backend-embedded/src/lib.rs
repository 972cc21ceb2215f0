//! # percolator-backend-embedded
//!
//! Building blocks of the single-process embedded backends (sled, fjall): a crate for backend
//! implementers, not for applications.
//!
//! Both engines are ordered key-value stores that one process opens at a time, with the same key
//! layout ([`percolator_core::backend::key`]). Row atomicity, the admission of snapshot reads that
//! [`Condition::NoSnapshotReadSince`] checks, and group commit for [`percolator_core::RowStore::sync`]
//! are the same argument on both, so the code that makes it lives here once:
//!
//! - [`RowLatches`]: 4096 striped `RwLock`s hashed by `(table, row)` for row atomicity, the newest
//!   admitted `snapshot_ts` of point reads per stripe and of scans per table, and [`SCAN_GATES`]
//!   shared gates that one-phase mutations hold and snapshot scans cycle. Each backend's crate
//!   docs give the argument in terms of its engine.
//!
//!   The admission marks are per stripe and per table because a one-phase mutation only needs
//!   to know whether a reader of *its* rows was admitted at or after its commit timestamp. One
//!   mark for the whole store (TiKV's `max_ts`) would fail a mutation whenever any other
//!   transaction read anything at a newer snapshot meanwhile, and send many commits back to two
//!   phases: a heavy cost while an index processes documents, whose commits write a row per
//!   link.
//!   The latches are blocking (`parking_lot`) locks on purpose, not awaited tokio locks. Those
//!   would spare the runtime threads from parking on latches, but tokio's fair locks queue
//!   point reads behind waiting commits and keep a commit waiting longer, so more snapshot reads
//!   are admitted past its start: one-step commits fall back to two phases far more often, and
//!   observer runs and index runs get slower.
//! - [`GroupSync`]: one flush at a time; a caller whose writes a running or later flush covers
//!   waits for it instead of starting its own.
//! - [`plan`]: checks a row mutation's conditions and turns its mutations into concrete
//!   [`KeyWrite`]s, through the engine's point and range lookups ([`KeyLookup`]), for the engine
//!   to apply in one atomic batch.
//! - [`long_synchronous`]: runs a large batch so that it does not take a runtime worker away.
//! - [`skip_range::range`]: range walks over crossbeam skip maps that do not leak what they
//!   pass (crossbeam-skiplist 0.1.3's own `range` does).
//! - Key helpers for point and range lookups on [`percolator_core::backend::key`]'s layout.

use std::hash::BuildHasher;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering, fence};

use bytes::Bytes;
use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use percolator_core::StoreError;
use percolator_core::backend::key;
use percolator_core::store::{Condition, Family, Mutation, MutationOutcome, RowMutation, TsRange};

mod long_call;
pub use long_call::{LONG_BATCH_ROWS, long_synchronous};
pub mod skip_range;

/// Row latch stripes.
pub const STRIPES: usize = 4096;

/// Slots of the per-table scan admission marks (tables hashed into them; two tables sharing a
/// slot only make a one-phase mutation fall back to two phases more often).
pub const SCAN_MARKS: usize = 64;

/// How many gates one-phase mutations hold against snapshot scans: enough that concurrent
/// writers rarely share one, few enough that a scan cycles them in about a microsecond.
pub const SCAN_GATES: usize = 32;

/// In-process row latches and snapshot-read admission (see the module docs).
pub struct RowLatches {
    latches: Box<[RwLock<()>]>,
    /// Per stripe: the newest `snapshot_ts` a point read of one of its rows was admitted at.
    read_marks: Box<[AtomicU64]>,
    /// Per table slot ([`SCAN_MARKS`]): the newest `snapshot_ts` a scan of one of its tables was
    /// admitted at.
    scan_marks: Box<[AtomicU64]>,
    /// Held shared by mutations that check [`Condition::NoSnapshotReadSince`], cycled by
    /// snapshot scans.
    scan_gates: Box<[RwLock<()>]>,
    /// Seeded per process: row keys are user data, and a fixed hash would let them pick rows
    /// that share a stripe.
    hasher: foldhash::quality::RandomState,
}

impl Default for RowLatches {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for RowLatches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RowLatches").finish_non_exhaustive()
    }
}

impl RowLatches {
    /// [`STRIPES`] latches and [`SCAN_GATES`] gates, no snapshot admitted yet.
    pub fn new() -> Self {
        Self {
            latches: (0..STRIPES).map(|_| RwLock::new(())).collect(),
            read_marks: (0..STRIPES).map(|_| AtomicU64::new(0)).collect(),
            scan_marks: (0..SCAN_MARKS).map(|_| AtomicU64::new(0)).collect(),
            scan_gates: (0..SCAN_GATES).map(|_| RwLock::new(())).collect(),
            hasher: Default::default(),
        }
    }

    fn stripe(&self, table: &[u8], row: &[u8]) -> usize {
        (self.hasher.hash_one((table, row)) as usize) % STRIPES
    }

    fn scan_mark(&self, table: &[u8]) -> &AtomicU64 {
        &self.scan_marks[(self.hasher.hash_one(table) as usize) % SCAN_MARKS]
    }

    /// The latch of `(table, row)`, for reading.
    pub fn read(&self, table: &[u8], row: &[u8]) -> RwLockReadGuard<'_, ()> {
        self.latches[self.stripe(table, row)].read()
    }

    /// The latch of `(table, row)`, for writing.
    pub fn write(&self, table: &[u8], row: &[u8]) -> RwLockWriteGuard<'_, ()> {
        self.latches[self.stripe(table, row)].write()
    }

    /// The latches of every row of `batch`, for writing, taken in stripe order: the order is
    /// global, so two batches never deadlock on each other's latches.
    pub fn write_rows(&self, batch: &[RowMutation]) -> Vec<RwLockWriteGuard<'_, ()>> {
        let mut stripes: Vec<usize> = batch
            .iter()
            .map(|m| self.stripe(&m.table, &m.row))
            .collect();
        stripes.sort_unstable();
        stripes.dedup();
        stripes.iter().map(|&s| self.latches[s].write()).collect()
    }

    /// Admits a snapshot read of row `(table, row)` at `snapshot_ts` before it looks anything
    /// up (and before it takes the row's latch): raises its stripe's mark and fences, so that a
    /// mutation of the row checking [`Condition::NoSnapshotReadSince`] after this either sees it
    /// or landed before.
    pub fn admit_read(&self, table: &[u8], row: &[u8], snapshot_ts: Option<u64>) {
        if let Some(ts) = snapshot_ts {
            raise(&self.read_marks[self.stripe(table, row)], ts);
        }
    }

    /// Admits a snapshot scan of `table` at `snapshot_ts` before it looks anything up (and
    /// before it cycles the scan gates): raises the table's scan mark and fences, so that a
    /// mutation of any row of the table checking [`Condition::NoSnapshotReadSince`] after this
    /// either sees it or landed before.
    pub fn admit_scan(&self, table: &[u8], snapshot_ts: Option<u64>) {
        if let Some(ts) = snapshot_ts {
            raise(self.scan_mark(table), ts);
        }
    }

    /// Whether no read of row `(table, row)` and no scan of `table` at a snapshot of `ts` or
    /// later has been admitted: the test of [`Condition::NoSnapshotReadSince`]. The caller holds
    /// the row's write latch (and, from [`Self::gate_for`], a scan gate).
    pub fn no_snapshot_read_since(&self, table: &[u8], row: &[u8], ts: u64) -> bool {
        // Orders the caller's gate and latch before these loads.
        fence(Ordering::SeqCst);
        self.read_marks[self.stripe(table, row)].load(Ordering::SeqCst) < ts
            && self.scan_mark(table).load(Ordering::SeqCst) < ts
    }

    /// Waits until every mutation that checked [`Condition::NoSnapshotReadSince`] before the
    /// caller's admission has landed: takes every gate once for writing and lets go at once.
    pub fn cycle_scan_gates(&self) {
        for gate in self.scan_gates.iter() {
            drop(gate.write());
        }
    }

    /// The scan gate a batch holds (shared) from before its condition checks until its writes
    /// are visible, if any item checks [`Condition::NoSnapshotReadSince`]. Take it before any
    /// row latch: a scan cycling the gates holds no latch.
    pub fn gate_for(&self, batch: &[RowMutation]) -> Option<RwLockReadGuard<'_, ()>> {
        batch
            .iter()
            .find(|m| {
                m.conditions
                    .iter()
                    .any(|c| matches!(c, Condition::NoSnapshotReadSince { .. }))
            })
            .map(|m| self.scan_gates[self.stripe(&m.table, &m.row) % SCAN_GATES].read())
    }
}

/// Raises `mark` to at least `ts`, then fences: what a reader does before it looks anything up.
fn raise(mark: &AtomicU64, ts: u64) {
    if mark.load(Ordering::SeqCst) < ts {
        mark.fetch_max(ts, Ordering::SeqCst);
    }
    fence(Ordering::SeqCst);
}

/// Whether every item of `batch` is on a different row (then one atomic engine batch can apply
/// them all; items on one row must see each other's effects and go one by one).
pub fn rows_are_distinct(batch: &[RowMutation]) -> bool {
    percolator_core::backend::validate::repeated_row(batch).is_none()
}

/// Group commit for [`percolator_core::RowStore::sync`]: one flush at a time; callers whose writes a
/// running or later flush covers wait for it instead of starting their own.
#[derive(Debug, Default)]
pub struct GroupSync {
    one_at_a_time: tokio::sync::Mutex<()>,
    requests: AtomicU64,
    synced_upto: AtomicU64,
}

impl GroupSync {
    /// Makes every write that completed before this call durable, running `flush` (blocking
    /// disk I/O) on tokio's blocking pool unless a flush that started after this call already
    /// covered it. `engine` names the engine in the error of a failed flush task.
    pub async fn sync<E>(
        &self,
        engine: &str,
        flush: impl FnOnce() -> Result<(), E> + Send + 'static,
    ) -> Result<(), StoreError>
    where
        E: Into<StoreError> + Send + 'static,
    {
        // Every write this caller saw complete happened before this ticket was drawn.
        let ticket = self.requests.fetch_add(1, Ordering::SeqCst) + 1;
        let _one_flush_at_a_time = self.one_at_a_time.lock().await;
        if self.synced_upto.load(Ordering::SeqCst) >= ticket {
            return Ok(()); // a flush that started after our ticket covered our writes
        }
        let covers = self.requests.load(Ordering::SeqCst);
        tokio::task::spawn_blocking(flush)
            .await
            .map_err(|e| StoreError::Backend {
                message: format!("{engine} flush task failed: {e}"),
                source: None,
            })?
            .map_err(Into::into)?;
        self.synced_upto.fetch_max(covers, Ordering::SeqCst);
        Ok(())
    }
}

/// One key to write (`value`) or delete (`None`) in a family's tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyWrite {
    /// The family whose tree holds the key.
    pub family: Family,
    /// The encoded cell key ([`cell_key`]).
    pub key: Vec<u8>,
    /// The value to write, or `None` to delete the key.
    pub value: Option<Bytes>,
}

/// The lookups [`plan`] needs from an engine, as one consistent view of it sees the keys (the
/// caller holds the row's write latch, so nothing else changes the row meanwhile).
pub trait KeyLookup {
    /// Whether any key of `family` lies in `lo..=hi`.
    fn any_in(&self, family: Family, lo: &[u8], hi: &[u8]) -> Result<bool, StoreError>;
    /// Whether `key` is in `family` and, if `value` is given, holds exactly it.
    fn holds_value(
        &self,
        family: Family,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<bool, StoreError>;
    /// Every key of `family` in `lo..=hi`, in order.
    fn keys_in(&self, family: Family, lo: &[u8], hi: &[u8]) -> Result<Vec<Vec<u8>>, StoreError>;
    /// Whether no version of the column `column_prefix` ([`key::column_prefix`]) in `ts` exists
    /// in `family`, if the engine keeps that in memory; `None`: ask [`Self::any_in`].
    fn absent_in_memory(&self, family: Family, column_prefix: &[u8], ts: TsRange) -> Option<bool> {
        let _ = (family, column_prefix, ts);
        None
    }
}

/// Whether `condition` holds for `(table, row)`.
fn holds(
    latches: &RowLatches,
    lookup: &impl KeyLookup,
    table: &[u8],
    row: &[u8],
    condition: &Condition,
) -> Result<bool, StoreError> {
    Ok(match condition {
        Condition::NoSnapshotReadSince { ts } => latches.no_snapshot_read_since(table, row, *ts),
        Condition::Absent { ts, .. } if ts.is_empty() => true,
        Condition::Absent { family, column, ts } => {
            let prefix = key::column_prefix(table, row, column);
            match lookup.absent_in_memory(*family, &prefix, *ts) {
                Some(absent) => absent,
                None => {
                    let (lo, hi) = version_bounds(&prefix, *ts);
                    !lookup.any_in(*family, &lo, &hi)?
                }
            }
        }
        Condition::Exists { family, column, ts } => {
            lookup.holds_value(*family, &cell_key(table, row, column, *ts), None)?
        }
        Condition::Equals {
            family,
            column,
            ts,
            value,
        } => lookup.holds_value(*family, &cell_key(table, row, column, *ts), Some(value))?,
    })
}

/// Checks `item`'s conditions and, if they all hold, appends its mutations to `writes` as
/// concrete keys (a range delete becomes the keys it finds). The caller holds the row's write
/// latch, so the keys found stay valid until the writes are applied.
pub fn plan(
    latches: &RowLatches,
    lookup: &impl KeyLookup,
    item: &RowMutation,
    writes: &mut Vec<KeyWrite>,
) -> Result<MutationOutcome, StoreError> {
    for (i, condition) in item.conditions.iter().enumerate() {
        if !holds(latches, lookup, &item.table, &item.row, condition)? {
            return Ok(MutationOutcome::ConditionFailed { condition: i });
        }
    }
    // The item's mutations apply in order: a later one replaces an earlier write of the same
    // key (an engine batch holding one key twice may apply either), and a range delete also
    // takes the keys the item itself put before it.
    let mut item_writes = ItemWrites::new(writes.len(), item.mutations.len());
    for m in &item.mutations {
        match m {
            Mutation::Put {
                family,
                column,
                ts,
                value,
            } => item_writes.set(
                writes,
                *family,
                cell_key(&item.table, &item.row, column, *ts),
                Some(value.clone()),
            ),
            Mutation::Delete { family, column, ts } => item_writes.set(
                writes,
                *family,
                cell_key(&item.table, &item.row, column, *ts),
                None,
            ),
            Mutation::DeleteRange { ts, .. } if ts.is_empty() => {}
            Mutation::DeleteRange { family, column, ts } => {
                let prefix = key::column_prefix(&item.table, &item.row, column);
                let (lo, hi) = version_bounds(&prefix, *ts);
                for w in &mut writes[item_writes.first..] {
                    if w.family == *family && w.key.as_slice() >= lo.as_slice() && w.key <= hi {
                        w.value = None;
                    }
                }
                for key in lookup.keys_in(*family, &lo, &hi)? {
                    item_writes.set(writes, *family, key, None);
                }
            }
        }
    }
    Ok(MutationOutcome::Applied)
}

/// The writes of the item being planned: `writes[first..]`, indexed by key for a large item.
struct ItemWrites {
    first: usize,
    /// `(family, key)` to its index in `writes`, for items of more than [`Self::SCAN_UP_TO`]
    /// mutations (a small item searches its few writes instead).
    by_key: Option<std::collections::HashMap<(Family, Vec<u8>), usize>>,
}

impl ItemWrites {
    const SCAN_UP_TO: usize = 16;

    fn new(first: usize, mutations: usize) -> Self {
        Self {
            first,
            by_key: (mutations > Self::SCAN_UP_TO).then(std::collections::HashMap::new),
        }
    }

    /// Writes `value` to `key` (or deletes it), replacing the item's earlier write of the key.
    fn set(
        &mut self,
        writes: &mut Vec<KeyWrite>,
        family: Family,
        key: Vec<u8>,
        value: Option<Bytes>,
    ) {
        let earlier = match &self.by_key {
            Some(by_key) => by_key.get(&(family, key.clone())).copied(),
            None => writes[self.first..]
                .iter()
                .position(|w| w.family == family && w.key == key)
                .map(|i| self.first + i),
        };
        match earlier {
            Some(i) => writes[i].value = value,
            None => {
                if let Some(by_key) = &mut self.by_key {
                    by_key.insert((family, key.clone()), writes.len());
                }
                writes.push(KeyWrite { family, key, value });
            }
        }
    }
}

/// The key of one cell version.
pub fn cell_key(table: &[u8], row: &[u8], column: &[u8], ts: u64) -> Vec<u8> {
    let mut k = key::column_prefix(table, row, column);
    key::encode_ts(&mut k, ts);
    k
}

/// `(start, end)` keys, both inclusive, covering versions `ts` of the column whose
/// [`key::column_prefix`] is `column_prefix` (versions are stored newest first).
pub fn version_bounds(column_prefix: &[u8], ts: TsRange) -> (Vec<u8>, Vec<u8>) {
    let mut lo = column_prefix.to_vec();
    key::encode_ts(&mut lo, ts.hi);
    let mut hi = column_prefix.to_vec();
    key::encode_ts(&mut hi, ts.lo);
    (lo, hi)
}

/// The exclusive end of a scan over `prefix` (a prefix built by [`percolator_core::backend::key`], which ends in a
/// marker byte, so [`key::prefix_successor`] always has an answer; the fallback covers the rest).
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    key::prefix_successor(prefix).unwrap_or_else(|| vec![0xFF; prefix.len() + 1])
}

/// The key range `[start, end)` of a scan of `table` over rows `start..end`: the scan never
/// looks at keys past its last row. (On an LSM engine a key past the last row can lie behind
/// any number of tombstones: an unbounded range would walk them all to find it.)
pub fn scan_range(table: &[u8], start: &Bound<Bytes>, end: &Bound<Bytes>) -> (Vec<u8>, Vec<u8>) {
    let first = match start {
        Bound::Included(r) => key::row_prefix(table, r),
        Bound::Excluded(r) => prefix_end(&key::row_prefix(table, r)),
        Bound::Unbounded => key::table_prefix(table),
    };
    let last = match end {
        Bound::Included(r) => prefix_end(&key::row_prefix(table, r)),
        Bound::Excluded(r) => key::row_prefix(table, r),
        Bound::Unbounded => prefix_end(&key::table_prefix(table)),
    };
    (first, last)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(row: &str, one_phase: bool) -> RowMutation {
        RowMutation {
            table: Bytes::from("t"),
            row: Bytes::from(row.to_owned()),
            conditions: if one_phase {
                vec![Condition::NoSnapshotReadSince { ts: 10 }]
            } else {
                vec![]
            },
            mutations: vec![Mutation::Delete {
                family: Family::Data,
                column: Bytes::from("c"),
                ts: 1,
            }],
        }
    }

    #[test]
    fn a_read_fails_later_one_phase_checks_of_its_row_only() {
        let latches = RowLatches::new();
        let other = (0..)
            .map(|i| format!("r{i}"))
            .find(|r| latches.stripe(b"t", r.as_bytes()) != latches.stripe(b"t", b"a"))
            .unwrap_or_default();
        assert!(latches.no_snapshot_read_since(b"t", b"a", 10));
        latches.admit_read(b"t", b"a", Some(9));
        assert!(latches.no_snapshot_read_since(b"t", b"a", 10));
        latches.admit_read(b"t", b"a", Some(10));
        assert!(!latches.no_snapshot_read_since(b"t", b"a", 10));
        // A row in another stripe, and a read without a snapshot, are not affected.
        assert!(latches.no_snapshot_read_since(b"t", other.as_bytes(), 10));
        latches.admit_read(b"t", other.as_bytes(), None);
        assert!(latches.no_snapshot_read_since(b"t", other.as_bytes(), 10));
        // An older admission never lowers the mark.
        latches.admit_read(b"t", b"a", Some(3));
        assert!(!latches.no_snapshot_read_since(b"t", b"a", 10));
        assert!(latches.no_snapshot_read_since(b"t", b"a", 11));
    }

    #[test]
    fn a_scan_fails_later_one_phase_checks_of_every_row_of_its_table_only() {
        let latches = RowLatches::new();
        let slot = |table: &[u8]| latches.hasher.hash_one(table) as usize % SCAN_MARKS;
        let other = (0..)
            .map(|i| format!("table{i}"))
            .find(|t| slot(t.as_bytes()) != slot(b"t"))
            .unwrap_or_default();
        latches.admit_scan(b"t", Some(10));
        for row in ["a", "b", "c"] {
            assert!(!latches.no_snapshot_read_since(b"t", row.as_bytes(), 10));
            assert!(latches.no_snapshot_read_since(b"t", row.as_bytes(), 11));
            assert!(latches.no_snapshot_read_since(other.as_bytes(), row.as_bytes(), 10));
        }
    }

    #[test]
    fn only_one_phase_batches_hold_a_gate_and_the_gate_blocks_a_scan() {
        let latches = RowLatches::new();
        assert!(latches.gate_for(&[item("a", false)]).is_none());
        let gate = latches.gate_for(&[item("a", false), item("b", true)]);
        assert!(gate.is_some());
        // A scan cycling the gates cannot get past a held gate.
        let blocked = latches
            .scan_gates
            .iter()
            .filter(|g| g.try_write().is_none())
            .count();
        assert_eq!(blocked, 1);
        drop(gate);
        latches.cycle_scan_gates();
    }

    #[test]
    fn write_rows_takes_each_stripe_once() {
        let latches = RowLatches::new();
        let guards = latches.write_rows(&[item("a", false), item("a", false), item("b", false)]);
        assert!(guards.len() <= 2 && !guards.is_empty());
        assert!(
            latches.latches[latches.stripe(b"t", b"a")]
                .try_read()
                .is_none()
        );
        drop(guards);
        assert!(
            latches.latches[latches.stripe(b"t", b"a")]
                .try_read()
                .is_some()
        );
    }

    #[test]
    fn distinct_rows() {
        assert!(rows_are_distinct(&[item("a", false), item("b", false)]));
        assert!(!rows_are_distinct(&[item("a", false), item("a", true)]));
    }

    #[test]
    fn version_bounds_cover_the_range_newest_first() {
        let prefix = key::column_prefix(b"t", b"r", b"c");
        let (lo, hi) = version_bounds(&prefix, TsRange { lo: 5, hi: 9 });
        assert_eq!(lo, cell_key(b"t", b"r", b"c", 9));
        assert_eq!(hi, cell_key(b"t", b"r", b"c", 5));
        assert!(lo < cell_key(b"t", b"r", b"c", 7) && cell_key(b"t", b"r", b"c", 7) < hi);
        assert!(prefix_end(&prefix) > cell_key(b"t", b"r", b"c", 0));
    }

    #[test]
    fn scan_ranges_end_at_the_last_row() {
        let row = |r: &str| Bytes::from(r.to_owned());
        let key = |r: &str| cell_key(b"t", r.as_bytes(), b"c", 7);
        let (lo, hi) = scan_range(b"t", &Bound::Included(row("b")), &Bound::Included(row("b")));
        assert!(lo <= key("b") && key("b") < hi);
        assert!(key("a") < lo && key("ba") >= hi && key("c") >= hi);
        let (lo, hi) = scan_range(b"t", &Bound::Excluded(row("a")), &Bound::Excluded(row("c")));
        assert!(key("a") < lo && lo <= key("b") && key("b") < hi && key("c") >= hi);
        let (lo, hi) = scan_range(b"t", &Bound::Unbounded, &Bound::Unbounded);
        assert!(lo <= key("") && key("zzz") < hi);
        assert!(cell_key(b"u", b"a", b"c", 1) >= hi && cell_key(b"s", b"z", b"c", 1) < lo);
    }

    #[tokio::test]
    async fn concurrent_syncs_share_flushes() {
        use std::sync::Arc;
        use std::sync::atomic::AtomicUsize;
        let sync = Arc::new(GroupSync::default());
        let flushes = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for _ in 0..16 {
            let (sync, flushes) = (Arc::clone(&sync), Arc::clone(&flushes));
            tasks.push(tokio::spawn(async move {
                sync.sync("test", move || {
                    flushes.fetch_add(1, Ordering::SeqCst);
                    std::thread::sleep(std::time::Duration::from_millis(5));
                    Ok::<(), StoreError>(())
                })
                .await
            }));
        }
        for task in tasks {
            task.await.unwrap().unwrap();
        }
        // The callers that queued behind the first flush share one.
        let ran = flushes.load(Ordering::SeqCst);
        assert!((1..16).contains(&ran), "{ran} flushes for 16 callers");
        // A later caller always flushes again (its writes may be newer than every flush).
        sync.sync("test", || Ok::<(), StoreError>(()))
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn a_failed_flush_is_the_callers_error() {
        let sync = GroupSync::default();
        let err = sync
            .sync("test", || {
                Err(StoreError::Backend {
                    message: "disk full".into(),
                    source: None,
                })
            })
            .await
            .unwrap_err();
        assert!(err.to_string().contains("disk full"), "{err}");
    }
}
