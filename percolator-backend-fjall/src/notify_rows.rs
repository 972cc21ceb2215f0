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
//! So the store keeps the set of rows with at least one notify cell in memory, ordered like the
//! keys (Bigtable's *in-memory locality group*, the option the paper's notify column calls for),
//! and a scan of the notify family that is not a snapshot read walks this set, then reads each
//! row it finds from the engine (that read is bounded to the row, and a row holds only its own
//! few tombstones). The engine stays the only truth: the set is rebuilt from it on open and only
//! says *where to look*.
//!
//! **Invariant.** Every row whose notify cells are not all deleted in the engine's latest state
//! is in the set (the set may hold a few rows more). It holds because every change to a row's
//! notify cells is a row mutation under the row's write latch ([`percolator_core::embedded::RowLatches`]),
//! and under that latch the store inserts the row *before* a batch that puts a notification is
//! applied, and removes it only *after* a batch that deletes one, and only when the engine then
//! shows no notify key left in the row (the row's *final* writes decide: a notification put
//! and deleted again by one mutation puts nothing). A row already in the set is never inserted
//! again, since crossbeam's insert replaces the entry and a walk passing by at that moment would
//! not see it. A scan therefore never misses a row whose notification was written before the
//! scan began. Memory is one entry per dirty row: the backlog, not the
//! history.

use std::ops::Bound;

use crossbeam_skiplist::SkipSet;

/// The row prefixes (`enc(table) ++ enc(row)`, [`percolator_core::key::row_prefix`]) that may
/// hold notify cells, in key order.
#[derive(Debug, Default)]
pub(crate) struct NotifyRows {
    rows: SkipSet<Vec<u8>>,
}

impl NotifyRows {
    /// Records that `row_prefix` may hold notify cells (before the batch putting them applies).
    /// A row already in the set stays put: crossbeam's `insert` would replace its entry, and a
    /// scan walking past at that moment would not see the row.
    pub(crate) fn insert(&self, row_prefix: &[u8]) {
        if !self.rows.contains(row_prefix) {
            self.rows.insert(row_prefix.to_vec());
        }
    }

    /// Forgets `row_prefix` (after the engine showed it holds no notify cell).
    pub(crate) fn remove(&self, row_prefix: &[u8]) {
        self.rows.remove(row_prefix);
    }

    /// The row prefixes in `[from, to)`, in key order, as they are when the walk reaches them.
    pub(crate) fn range<'a>(
        &'a self,
        from: &'a [u8],
        to: &'a [u8],
    ) -> impl Iterator<Item = Vec<u8>> + 'a {
        self.rows
            .range::<[u8], _>((Bound::Included(from), Bound::Excluded(to)))
            .map(|entry| entry.value().clone())
    }

    /// How many rows are in the set.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.rows.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_half_open_and_ordered() {
        let rows = NotifyRows::default();
        for r in [b"c", b"a", b"b", b"d", b"a"] {
            rows.insert(r);
        }
        rows.remove(b"d");
        assert_eq!(rows.len(), 3);
        let got: Vec<Vec<u8>> = rows.range(b"a", b"c").collect();
        assert_eq!(got, vec![b"a".to_vec(), b"b".to_vec()]);
    }
}
