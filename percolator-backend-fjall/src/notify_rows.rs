//! The rows that hold notifications, kept in memory: what makes the observers' scans cost what
//! they find instead of what was ever deleted.
//!
//! A notification is written once and deleted once, when an observer has run. On an LSM tree a
//! deleted key stays behind as a tombstone until compaction carries it to the last level, and
//! a range scan steps over every tombstone in its range. The observers' scanners sweep the notify
//! family from random rows looking for a few dirty rows; with the backlog processed, nearly every
//! key they meet is a tombstone, so each sweep cost grew with the number of notifications ever
//! processed (41% of all CPU in a 3 000-page indexing run, the sweeps slowing as the run went
//! on).
//!
//! (Deletes are now weak tombstones that vanish with their value at the first flush or
//! compaction that meets both, but a backlog's values are often flushed long before their
//! deletes, so tombstones still pile up between compactions.)
//!
//! So the store keeps the rows with at least one notify cell in memory, ordered like the keys
//! (Bigtable's *in-memory locality group*, the option the paper's notify column calls for), each
//! with **how many notify keys it holds**, and a scan of the notify family that is not a snapshot
//! read walks these rows, then reads each row it finds from the engine (that read is bounded to
//! the row, and a row holds only its own few tombstones). The engine stays the only truth: the
//! counts are rebuilt from it on open.
//!
//! **Why counts.** Without them, the store learned whether a row had notifications left after a
//! delete by a range lookup in the engine, which steps over the row's tombstones and merges every
//! table's iterator: 7.5% of all CPU of a 10 000-page index run. With counts, a mutation finds
//! what it changes by *point* lookups of the keys it writes, which bloom filters answer for
//! absent keys (a new notification). A consumed one is present, and by the time an observer
//! clears it, often flushed: each lookup then searches a table per level. So a mutation that
//! deletes several keys of one row (an observer clearing a backlog: a link target's dozens of
//! notifications) reads the row's notify keys in one range instead, stepping over only the
//! row's own few tombstones; that was half of the link forwarders' store work.
//!
//! **Invariant.** A row's count is the number of notify keys the engine's latest state holds in
//! the row, and a row is in the map exactly when its count is positive — except between a
//! mutation's count update and its write batch, where the map may hold more than the engine
//! (never less). It holds because every change to a row's notify cells is a row mutation under
//! the row's write latch ([`percolator_core::embedded::RowLatches`]): under that latch the store
//! compares each notify key the mutation finally writes (its *final* write decides: a
//! notification put and deleted again by one mutation puts nothing) with whether the key exists,
//! adds the new keys *before* the batch applies, and subtracts the deleted ones *after*; a row
//! whose count reaches zero leaves the map. A row already in the map is never inserted again,
//! since crossbeam's insert replaces the entry and a walk passing by at that moment would not see
//! it. A scan therefore never misses a row whose notification was written before the scan began.
//! Memory is one entry per dirty row: the backlog, not the history.
//!
//! **Newest version.** Each row also keeps the newest version among its notify keys (never
//! lowered while the row is in the map; a row that leaves starts afresh). So a mutation needs no
//! engine lookup to know that a key is new when its row is not in the map, or when its version
//! is newer than the row's newest — nearly every notification a transaction writes, since each
//! is at the writer's fresh start timestamp. Only deletes, and the rare put older than its
//! row's newest key, still ask the engine.

use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crossbeam_skiplist::SkipMap;

/// The row prefixes (`enc(table) ++ enc(row)`, [`percolator_core::key::row_prefix`]) that hold
/// notify cells, in key order, with how many each holds and the newest version among them.
#[derive(Debug, Default)]
pub(crate) struct NotifyRows {
    rows: SkipMap<Vec<u8>, RowEntry>,
}

/// One dirty row's notify keys.
#[derive(Debug)]
struct RowEntry {
    count: AtomicU64,
    newest: AtomicU64,
}

impl NotifyRows {
    /// Counts `n` more notify keys in `row_prefix`, the newest at version `newest` (before the
    /// batch putting them applies; the caller holds the row's write latch, or is opening the
    /// store). A row already in the map keeps its entry: crossbeam's `insert` would replace it,
    /// and a scan walking past at that moment would not see the row.
    pub(crate) fn add(&self, row_prefix: &[u8], n: u64, newest: u64) {
        if n == 0 {
            return;
        }
        match self.rows.get(row_prefix) {
            Some(entry) => {
                entry.value().count.fetch_add(n, Relaxed);
                entry.value().newest.fetch_max(newest, Relaxed);
            }
            None => {
                self.rows.insert(
                    row_prefix.to_vec(),
                    RowEntry {
                        count: AtomicU64::new(n),
                        newest: AtomicU64::new(newest),
                    },
                );
            }
        }
    }

    /// The newest version among the notify keys of `row_prefix`, or `None` if it holds none
    /// (exact for a row whose write latch the caller holds).
    pub(crate) fn newest_ts(&self, row_prefix: &[u8]) -> Option<u64> {
        self.rows
            .get(row_prefix)
            .map(|entry| entry.value().newest.load(Relaxed))
    }

    /// Counts `n` fewer notify keys in `row_prefix` (after the batch deleting them applied; the
    /// caller holds the row's write latch). The row leaves the map at zero.
    pub(crate) fn subtract(&self, row_prefix: &[u8], n: u64) {
        let Some(entry) = self.rows.get(row_prefix) else {
            return;
        };
        let left = entry.value().count.load(Relaxed).saturating_sub(n);
        entry.value().count.store(left, Relaxed);
        if left == 0 {
            entry.remove();
        }
    }

    /// The row prefixes in `[from, to)`, in key order, as they are when the walk reaches them.
    pub(crate) fn range<'a>(
        &'a self,
        from: &'a [u8],
        to: &'a [u8],
    ) -> impl Iterator<Item = Vec<u8>> + 'a {
        self.rows
            .range::<[u8], _>((Bound::Included(from), Bound::Excluded(to)))
            .map(|entry| entry.key().clone())
    }

    /// How many rows are in the map.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.rows.len()
    }

    /// The count of `row_prefix` (0 when it is not in the map).
    #[cfg(test)]
    pub(crate) fn count(&self, row_prefix: &[u8]) -> u64 {
        self.rows
            .get(row_prefix)
            .map_or(0, |entry| entry.value().count.load(Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_half_open_and_ordered() {
        let rows = NotifyRows::default();
        for r in [b"c", b"a", b"b", b"d", b"a"] {
            rows.add(r, 1, 7);
        }
        rows.subtract(b"d", 1);
        assert_eq!(rows.len(), 3);
        let got: Vec<Vec<u8>> = rows.range(b"a", b"c").collect();
        assert_eq!(got, vec![b"a".to_vec(), b"b".to_vec()]);
    }

    #[test]
    fn a_row_leaves_when_its_count_reaches_zero() {
        let rows = NotifyRows::default();
        rows.add(b"r", 2, 9);
        rows.add(b"r", 0, 99);
        rows.add(b"r", 1, 5);
        assert_eq!(
            rows.newest_ts(b"r"),
            Some(9),
            "never lowered; a no-op add changes nothing"
        );
        rows.subtract(b"r", 2);
        assert_eq!((rows.len(), rows.count(b"r")), (1, 1));
        rows.subtract(b"r", 5);
        assert_eq!((rows.len(), rows.count(b"r")), (0, 0));
        assert_eq!(rows.newest_ts(b"r"), None);
        rows.add(b"r", 1, 3);
        assert_eq!(
            rows.newest_ts(b"r"),
            Some(3),
            "a row back in the map starts afresh"
        );
        rows.subtract(b"absent", 1);
        assert_eq!(rows.len(), 1);
    }
}
