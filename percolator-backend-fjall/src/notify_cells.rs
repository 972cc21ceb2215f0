//! The cells that hold notifications, kept in memory: what makes the observers' scans cost what
//! they find instead of what was ever deleted, and what lets a busy cell's notifications
//! coalesce instead of piling up as keys.
//!
//! A notification is written once and deleted once, when an observer has run. On an LSM tree a
//! deleted key stays behind as a tombstone until compaction carries it to the last level, and
//! a range scan steps over every tombstone in its range. The observers' scanners sweep the notify
//! family from random rows looking for a few dirty rows; with the backlog processed, nearly every
//! key they meet is a tombstone, so each sweep's cost would grow with the number of
//! notifications ever processed, the sweeps slowing as a run goes on and taking a large share
//! of its CPU.
//!
//! (Deletes are weak tombstones that vanish with their value at the first flush or
//! compaction that meets both, but a backlog's values are often flushed long before their
//! deletes, so tombstones still pile up between compactions.)
//!
//! So the store keeps the cells (`enc(table) ++ enc(row) ++ enc(column)`: a notify key without
//! its version) with at least one notify key in memory, ordered like the keys (Bigtable's
//! *in-memory locality group*, the option the paper's notify column calls for), each with **how
//! many notify keys it holds**, and a scan of the notify family that is not a snapshot read
//! walks the rows of these cells, then reads each row it finds from the engine (that read is
//! bounded to the row, and a row holds only its own few tombstones). The engine holds every
//! stored key: the counts are rebuilt from it on open.
//!
//! **Why counts.** Without them, the store would learn whether a cell has notifications left
//! after a delete by a range lookup in the engine, which steps over the cell's tombstones and
//! merges every table's iterator: a noticeable share of an index run's CPU. With counts, a mutation
//! finds what it changes by *point* lookups of the keys it writes, which bloom filters answer for
//! absent keys (a new notification). A consumed one is present, and by the time an observer
//! clears it, often flushed: each lookup then searches a table per level. So a mutation that
//! deletes several keys of one cell (an observer clearing a backlog) reads the cell's notify keys
//! in one range instead, stepping over only the cell's own few tombstones.
//!
//! **Invariant.** A cell's count is the number of notify keys the engine's latest state holds in
//! the cell, and a cell is in the map exactly when its count is positive — except between a
//! mutation's count update and its write batch, where the map may hold more than the engine
//! (never less). It holds because every change to a cell's notify keys is a row mutation under
//! the row's write latch ([`percolator_backend_embedded::RowLatches`]): under that latch the store
//! compares each notify key the mutation finally writes (its *final* write decides: a
//! notification put and deleted again by one mutation puts nothing) with whether the key exists,
//! adds the new keys *before* the batch applies, and subtracts the deleted ones *after*; a cell
//! whose count reaches zero leaves the map. A cell already in the map is never inserted again,
//! since crossbeam's insert replaces the entry and a walk passing by at that moment would not see
//! it. A scan therefore never misses a row whose notification was written before the scan began.
//! Memory is one entry per dirty cell: the backlog, not the history.
//!
//! **Newest version.** Each cell also keeps a bound on its versions: the newest among its notify
//! keys and its absorbed version (below), never lowered while the cell is in the map (a cell that
//! leaves starts afresh). So a mutation needs no engine lookup to know that a key is new when its
//! cell is not in the map, or when its version is newer than the bound — nearly every
//! notification a transaction writes, since each is at the writer's fresh start timestamp. Only
//! deletes, and the rare put older than the bound, still ask the engine.
//!
//! **Coalescing.** A cell that many writers change (a link target in the web index) would get a
//! notify key per writer, each written, flushed, deleted and compacted away, while one observer
//! run covers them all. A notification that names its commit timestamp
//! ([`percolator_core::backend::records::NotifyRecord::committed_at`], written with a one-phase commit)
//! needs no key of its own in a cell that already holds one: the cell keeps it in memory as its
//! **absorbed version**, the one with the highest commit timestamp of those it took in. Reads of
//! the notify family list the absorbed version like a stored one; an observer run whose snapshot
//! covers its commit covers every commit absorbed before it, and deleting it (by its version, as
//! a run deletes what it listed) clears it. A mutation that deletes the cell's last stored key
//! while the absorbed version stays writes the absorbed version as a key in the same batch (see
//! `FjallStore::notify_plan`), so a cell with an absorbed version always holds a stored key:
//! **an absorbed version exists only in a cell whose count is positive.** A restart loses the
//! absorbed versions but not the stored key that carried them, and every run after a restart
//! has a snapshot above every commit before it, so the run that clears that key covers them.

use std::ops::Bound;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

use bytes::Bytes;
use crossbeam_skiplist::SkipMap;
use crossbeam_skiplist::map::Entry;
use parking_lot::Mutex;
use percolator_backend_embedded::skip_range;

/// The cells (`enc(table) ++ enc(row) ++ enc(column)`) that hold notify keys, in key order, with
/// how many each holds, a bound on their versions and the cell's absorbed version.
#[derive(Debug, Default)]
pub(crate) struct NotifyCells {
    cells: SkipMap<Vec<u8>, CellEntry>,
    /// How many cells hold an absorbed version: at zero, reads skip looking for them.
    absorbed: AtomicUsize,
}

/// One dirty cell's notify keys.
#[derive(Debug)]
struct CellEntry {
    /// The length of the cell's row prefix (`enc(table) ++ enc(row)`) in its key.
    row_len: usize,
    count: AtomicU64,
    newest: AtomicU64,
    absorbed: Mutex<Option<Absorbed>>,
}

/// A notification kept in memory instead of as a key (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Absorbed {
    /// Its version (the writer's start timestamp).
    pub(crate) ts: u64,
    /// Its writer's commit timestamp.
    pub(crate) committed_at: u64,
    /// Its value, as the writer put it.
    pub(crate) value: Bytes,
}

impl NotifyCells {
    /// Counts `n` more notify keys in `cell`, whose row prefix is its first `row_len` bytes, the
    /// newest at version `newest` (before the batch putting them applies; the caller holds the
    /// row's write latch, or is opening the store). A cell already in the map keeps its entry:
    /// crossbeam's `insert` would replace it, and a scan walking past at that moment would not
    /// see the row.
    pub(crate) fn add(&self, cell: &[u8], row_len: usize, n: u64, newest: u64) {
        if n == 0 {
            return;
        }
        match self.cells.get(cell) {
            Some(entry) => {
                entry.value().count.fetch_add(n, Relaxed);
                entry.value().newest.fetch_max(newest, Relaxed);
            }
            None => {
                self.cells.insert(
                    cell.to_vec(),
                    CellEntry {
                        row_len,
                        count: AtomicU64::new(n),
                        newest: AtomicU64::new(newest),
                        absorbed: Mutex::new(None),
                    },
                );
            }
        }
    }

    /// The bound on the versions of `cell` (see the module docs), or `None` if it holds no
    /// notify key (exact for a cell whose row's write latch the caller holds).
    pub(crate) fn newest_ts(&self, cell: &[u8]) -> Option<u64> {
        self.cells
            .get(cell)
            .map(|entry| entry.value().newest.load(Relaxed))
    }

    /// How many notify keys `cell` holds (0 when it is not in the map).
    pub(crate) fn count(&self, cell: &[u8]) -> u64 {
        self.cells
            .get(cell)
            .map_or(0, |entry| entry.value().count.load(Relaxed))
    }

    /// Counts `n` fewer notify keys in `cell` (after the batch deleting them applied; the caller
    /// holds the row's write latch). The cell leaves the map at zero.
    pub(crate) fn subtract(&self, cell: &[u8], n: u64) {
        let Some(entry) = self.cells.get(cell) else {
            return;
        };
        let left = entry.value().count.load(Relaxed).saturating_sub(n);
        entry.value().count.store(left, Relaxed);
        if left == 0 {
            // Never with an absorbed version (its carrier is put back first); counted anyway.
            if entry.value().absorbed.lock().take().is_some() {
                self.absorbed.fetch_sub(1, Relaxed);
            }
            entry.remove();
        }
    }

    /// Takes `version` into `cell`'s absorbed version, unless the one it holds committed later
    /// (after the batch that would have put it applied; the caller holds the row's write latch
    /// and the cell holds a key). Raises the cell's bound on versions to it.
    pub(crate) fn absorb(&self, cell: &[u8], version: Absorbed) {
        let Some(entry) = self.cells.get(cell) else {
            return;
        };
        entry.value().newest.fetch_max(version.ts, Relaxed);
        let mut held = entry.value().absorbed.lock();
        match &*held {
            Some(current) if current.committed_at >= version.committed_at => {}
            Some(_) => *held = Some(version),
            None => {
                *held = Some(version);
                self.absorbed.fetch_add(1, Relaxed);
            }
        }
    }

    /// The absorbed version of `cell`, if any.
    pub(crate) fn absorbed(&self, cell: &[u8]) -> Option<Absorbed> {
        if self.absorbed.load(Relaxed) == 0 {
            return None;
        }
        self.cells
            .get(cell)
            .and_then(|entry| entry.value().absorbed.lock().clone())
    }

    /// Forgets the absorbed version of `cell` (after the batch that deleted it, or wrote it as a
    /// key, applied; the caller holds the row's write latch).
    pub(crate) fn forget_absorbed(&self, cell: &[u8]) {
        if let Some(entry) = self.cells.get(cell)
            && entry.value().absorbed.lock().take().is_some()
        {
            self.absorbed.fetch_sub(1, Relaxed);
        }
    }

    /// The absorbed versions of the cells in `[from, to]` (inclusive: callers pass key bounds),
    /// with their cells, in key order.
    pub(crate) fn absorbed_in(&self, from: &[u8], to: &[u8]) -> Vec<(Vec<u8>, Absorbed)> {
        self.absorbed_of(skip_range::key_range(
            &self.cells,
            Bound::Included(from),
            Bound::Included(to),
        ))
    }

    /// The absorbed versions of the cells of the row `row_prefix`, with their cells, in key
    /// order.
    pub(crate) fn absorbed_in_row(&self, row_prefix: &[u8]) -> Vec<(Vec<u8>, Absorbed)> {
        self.absorbed_of(
            skip_range::key_range(&self.cells, Bound::Included(row_prefix), Bound::Unbounded)
                .take_while(|entry| entry.key().starts_with(row_prefix)),
        )
    }

    /// The absorbed versions among `entries`, with their cells (none looked at while no cell
    /// holds one).
    fn absorbed_of<'a>(
        &self,
        entries: impl Iterator<Item = Entry<'a, Vec<u8>, CellEntry>>,
    ) -> Vec<(Vec<u8>, Absorbed)> {
        if self.absorbed.load(Relaxed) == 0 {
            return Vec::new();
        }
        entries
            .filter_map(|entry| {
                let absorbed = entry.value().absorbed.lock().clone()?;
                Some((entry.key().clone(), absorbed))
            })
            .collect()
    }

    /// The row prefixes of the cells in `[from, to)`, in key order and each once, as they are
    /// when the walk reaches them (`from` and `to` are row bounds, so a row's cells are all in
    /// or all out).
    pub(crate) fn rows<'a>(
        &'a self,
        from: &'a [u8],
        to: &'a [u8],
    ) -> impl Iterator<Item = Vec<u8>> + 'a {
        let mut last: Option<Vec<u8>> = None;
        skip_range::key_range(&self.cells, Bound::Included(from), Bound::Excluded(to)).filter_map(
            move |entry| {
                let row = entry.key().get(..entry.value().row_len)?;
                if last.as_deref() == Some(row) {
                    return None;
                }
                last = Some(row.to_vec());
                last.clone()
            },
        )
    }

    /// How many cells are in the map.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.cells.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn version(ts: u64, committed_at: u64) -> Absorbed {
        Absorbed {
            ts,
            committed_at,
            value: Bytes::from(format!("{ts}@{committed_at}")),
        }
    }

    #[test]
    fn rows_are_half_open_ordered_and_listed_once() {
        let cells = NotifyCells::default();
        for c in [b"c1", b"a1", b"b1", b"d1", b"a1", b"a2", b"b3"] {
            cells.add(c, 1, 1, 7);
        }
        cells.subtract(b"d1", 1);
        assert_eq!(cells.len(), 5);
        let got: Vec<Vec<u8>> = cells.rows(b"a", b"c").collect();
        assert_eq!(got, vec![b"a".to_vec(), b"b".to_vec()]);
        let got: Vec<Vec<u8>> = cells.rows(b"b", b"z").collect();
        assert_eq!(got, vec![b"b".to_vec(), b"c".to_vec()]);
    }

    #[test]
    fn a_cell_leaves_when_its_count_reaches_zero() {
        let cells = NotifyCells::default();
        cells.add(b"r", 1, 2, 9);
        cells.add(b"r", 1, 0, 99);
        cells.add(b"r", 1, 1, 5);
        assert_eq!(
            cells.newest_ts(b"r"),
            Some(9),
            "never lowered; a no-op add changes nothing"
        );
        cells.subtract(b"r", 2);
        assert_eq!((cells.len(), cells.count(b"r")), (1, 1));
        cells.subtract(b"r", 5);
        assert_eq!((cells.len(), cells.count(b"r")), (0, 0));
        assert_eq!(cells.newest_ts(b"r"), None);
        cells.add(b"r", 1, 1, 3);
        assert_eq!(
            cells.newest_ts(b"r"),
            Some(3),
            "a cell back in the map starts afresh"
        );
        cells.subtract(b"absent", 1);
        assert_eq!(cells.len(), 1);
    }

    #[test]
    fn a_cell_keeps_the_absorbed_version_that_committed_last() {
        let cells = NotifyCells::default();
        cells.absorb(b"r", version(1, 2));
        assert_eq!(cells.absorbed(b"r"), None, "only a cell with a key absorbs");
        cells.add(b"r", 1, 1, 3);
        cells.absorb(b"r", version(10, 20));
        cells.absorb(b"r", version(12, 15));
        assert_eq!(cells.absorbed(b"r"), Some(version(10, 20)));
        assert_eq!(cells.newest_ts(b"r"), Some(12), "raised by every version");
        cells.absorb(b"r", version(14, 30));
        assert_eq!(cells.absorbed(b"r"), Some(version(14, 30)));
        cells.add(b"s", 1, 1, 3);
        cells.absorb(b"s", version(5, 6));
        assert_eq!(
            cells.absorbed_in(b"a", b"z"),
            vec![
                (b"r".to_vec(), version(14, 30)),
                (b"s".to_vec(), version(5, 6))
            ]
        );
        assert_eq!(
            cells.absorbed_in(b"s", b"s").len(),
            1,
            "bounds are inclusive"
        );
        cells.add(b"rx", 1, 1, 3);
        cells.absorb(b"rx", version(7, 8));
        cells.add(b"t", 1, 1, 3);
        cells.absorb(b"t", version(9, 10));
        assert_eq!(
            cells.absorbed_in_row(b"r"),
            vec![
                (b"r".to_vec(), version(14, 30)),
                (b"rx".to_vec(), version(7, 8))
            ],
            "the row's cells only"
        );
        cells.forget_absorbed(b"rx");
        cells.forget_absorbed(b"t");
        cells.forget_absorbed(b"r");
        assert_eq!(cells.absorbed(b"r"), None);
        cells.subtract(b"s", 1);
        assert_eq!(cells.absorbed(b"s"), None);
        assert_eq!(
            cells.absorbed.load(Relaxed),
            0,
            "every absorbed one counted out"
        );
        assert!(cells.absorbed_in(b"a", b"z").is_empty());
    }
}
