//! The live keys of the lock family, mirrored in memory for the condition checks of row
//! mutations.
//!
//! Every prewrite checks that no lock of any version sits on the cells it writes, and every
//! commit that its own lock is still there. On fjall such a check is a range lookup, and a range
//! lookup cannot use bloom filters: it seeks into every memtable and every table that overlaps
//! the range. The lock family makes that worst: each lock is written once and deleted once, so
//! its tables are mostly tombstones. Answered by the engine, the lock checks would take a
//! sizeable share of an indexing run's CPU.
//!
//! Live locks are few (the transactions in flight and the orphans of crashed ones), so the store
//! keeps a copy of them here, keyed like the engine, and [`crate::mutate::View`] answers the
//! lock family's conditions from it (Bigtable's *in-memory locality group* again).
//!
//! **Exactness.** For the row a mutation has latched, the mirror equals the engine's latest
//! state: every write to the lock family is a row mutation under that row's write latch, the
//! mirror is loaded from the engine when the store opens, and it takes a batch's lock writes
//! right after the batch is applied, before the latch is let go (a batch that fails to apply
//! changes neither). So a **row read** answers its lock-family reads from the mirror too: it
//! takes the row's latch for reading, opens its fjall snapshot and reads the mirror under it,
//! and both are then the same state of the row.
//!
//! **Scans** of the lock family read the mirror too, a row at a time under each row's latch, so
//! each row is whole. (From the engine, a lock scan walked a tombstone for every lock ever
//! deleted in its range until compaction: on the TPC-E run that was a fifth of the CPU.) Rows
//! of one atomic batch ([`RowStore::mutate_rows_atomically`]) must also be seen all or none:
//! such a batch's lock writes are bracketed by a sequence counter ([`Self::applied_atomically`]),
//! and a scan that saw it move reads the engine's snapshot instead. The protocol's atomic
//! batches (one-phase commits) write no locks, so that never happens on its path.
//!
//! [`RowStore::mutate_rows_atomically`]: percolator_core::RowStore::mutate_rows_atomically

use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::scan_stream::{RowsBuilder, scan_entries};
use bytes::Bytes;
use crossbeam_skiplist::SkipMap;
use percolator_backend_embedded::skip_range;
use percolator_backend_embedded::{KeyWrite, prefix_end};
use percolator_core::backend::key;
use percolator_core::{Cell, Family, FamilyRead, StoreError};

/// The lock family's live keys (encoded cell keys) and values.
#[derive(Debug, Default)]
pub(crate) struct LockMirror {
    keys: SkipMap<Vec<u8>, Bytes>,
    /// Odd while an atomic batch's lock writes are half applied: bumped before and after them.
    atomic_writes: AtomicU64,
}

/// A batch's writes to the lock family, taken before the batch is applied.
pub(crate) type LockWrites = Vec<(Vec<u8>, Option<Bytes>)>;

impl LockMirror {
    /// Loads one live key (when the store opens).
    pub(crate) fn load(&self, key: Vec<u8>, value: Bytes) {
        self.keys.insert(key, value);
    }

    /// The writes of `writes` to the lock family, to pass to [`Self::applied`] once they are
    /// applied.
    pub(crate) fn writes_of(writes: &[KeyWrite]) -> LockWrites {
        writes
            .iter()
            .filter(|w| w.family == Family::Lock)
            .map(|w| (w.key.clone(), w.value.clone()))
            .collect()
    }

    /// Takes lock writes the engine has applied.
    pub(crate) fn applied(&self, writes: LockWrites) {
        for (key, value) in writes {
            match value {
                Some(value) => {
                    self.keys.insert(key, value);
                }
                None => {
                    self.keys.remove(&key);
                }
            }
        }
    }

    /// Takes lock writes of an atomic batch the engine has applied, between two bumps of the
    /// sequence counter that lock scans check ([`Self::atomic_sequence`]).
    pub(crate) fn applied_atomically(&self, writes: LockWrites) {
        if writes.is_empty() {
            return;
        }
        self.atomic_writes.fetch_add(1, Ordering::SeqCst);
        self.applied(writes);
        self.atomic_writes.fetch_add(1, Ordering::SeqCst);
    }

    /// The sequence counter of atomic batches' lock writes: a scan that reads the same even value
    /// before and after it read the mirror saw every atomic batch whole or not at all.
    pub(crate) fn atomic_sequence(&self) -> u64 {
        self.atomic_writes.load(Ordering::SeqCst)
    }

    /// The first live key in `[from, to)`.
    pub(crate) fn first_in(&self, from: &[u8], to: &[u8]) -> Option<Vec<u8>> {
        skip_range::key_range(&self.keys, Bound::Included(from), Bound::Excluded(to))
            .next()
            .map(|entry| entry.key().clone())
    }

    /// Every live key in `[from, to)`, with its value, in order.
    pub(crate) fn entries_in(&self, from: &[u8], to: &[u8]) -> Vec<(Vec<u8>, Bytes)> {
        skip_range::key_range(&self.keys, Bound::Included(from), Bound::Excluded(to))
            .map(|entry| (entry.key().clone(), entry.value().clone()))
            .collect()
    }

    /// Whether any live key lies in `lo..=hi`.
    pub(crate) fn any_in(&self, lo: &[u8], hi: &[u8]) -> bool {
        skip_range::key_range(&self.keys, Bound::Included(lo), Bound::Included(hi))
            .next()
            .is_some()
    }

    /// Whether `key` is live and, if `value` is given, holds exactly it.
    pub(crate) fn holds_value(&self, key: &[u8], value: Option<&[u8]>) -> bool {
        self.keys
            .get(key)
            .is_some_and(|entry| value.is_none_or(|v| entry.value().as_ref() == v))
    }

    /// Every live key in `lo..=hi`, in order.
    pub(crate) fn keys_in(&self, lo: &[u8], hi: &[u8]) -> Vec<Vec<u8>> {
        skip_range::key_range(&self.keys, Bound::Included(lo), Bound::Included(hi))
            .map(|entry| entry.key().clone())
            .collect()
    }

    /// The lock cells of one row that `read` selects, as the engine's latest state holds them:
    /// the caller holds the row's latch (for reading), so no mutation of the row is half done.
    /// The row's live keys go through the scans' [`RowsBuilder`], as a scan of one row.
    pub(crate) fn read(
        &self,
        table: &[u8],
        row: &[u8],
        read: &FamilyRead,
    ) -> Result<Vec<Cell>, StoreError> {
        let table_len = key::table_prefix(table).len();
        let Some(mut rows) = RowsBuilder::new(table_len, read, None) else {
            return Ok(Vec::new());
        };
        let row_prefix = key::row_prefix(table, row);
        scan_entries(
            &mut rows,
            self.entries_in(&row_prefix, &prefix_end(&row_prefix)),
        )?;
        Ok(rows
            .finish()
            .into_iter()
            .next()
            .map(|found| found.cells)
            .unwrap_or_default())
    }

    /// How many live keys there are.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(family: Family, key: &[u8], value: Option<&'static [u8]>) -> KeyWrite {
        KeyWrite {
            family,
            key: key.to_vec(),
            value: value.map(Bytes::from_static),
        }
    }

    #[test]
    fn takes_only_lock_writes_and_answers_like_the_engine() {
        let mirror = LockMirror::default();
        mirror.load(b"a1".to_vec(), Bytes::from_static(b"x"));
        let writes = vec![
            write(Family::Lock, b"b1", Some(b"y")),
            write(Family::Data, b"c1", Some(b"z")),
            write(Family::Lock, b"a1", None),
        ];
        mirror.applied(LockMirror::writes_of(&writes));
        assert_eq!(mirror.len(), 1);
        assert!(!mirror.any_in(b"a0", b"a9"));
        assert!(mirror.any_in(b"b1", b"b1"));
        assert!(!mirror.any_in(b"c0", b"c9"), "data writes stay out");
        assert!(mirror.holds_value(b"b1", None));
        assert!(mirror.holds_value(b"b1", Some(b"y")));
        assert!(!mirror.holds_value(b"b1", Some(b"z")));
        assert!(!mirror.holds_value(b"a1", None));
        assert_eq!(mirror.keys_in(b"a", b"z"), vec![b"b1".to_vec()]);
    }
}
