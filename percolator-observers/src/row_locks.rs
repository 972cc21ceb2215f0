//! The advisory row lock service (paper §2.4: "a lightweight lock service" that keeps two
//! scanners of a worker off the same row). In memory and per worker: correctness never depends
//! on it — the ack column and the transaction protocol do that — it only avoids wasted,
//! conflicting runs. Sharded, so taking a lock never contends on one global mutex.

use std::collections::HashSet;
use std::hash::BuildHasher;
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;

const SHARDS: usize = 64;

type RowId = (Bytes, Bytes);

/// Advisory locks on `(table, row)`.
///
/// ```
/// # use bytes::Bytes;
/// # use percolator_observers::RowLocks;
/// let locks = RowLocks::new();
/// let (table, row) = (Bytes::from("docs"), Bytes::from("a"));
/// let guard = locks.try_lock(&table, &row);
/// assert!(guard.is_some());
/// assert!(locks.try_lock(&table, &row).is_none()); // held
/// assert_eq!(locks.held(), 1);
/// drop(guard); // released with its guard
/// assert!(locks.try_lock(&table, &row).is_some());
/// ```
#[derive(Debug)]
pub struct RowLocks {
    shards: Vec<Mutex<HashSet<RowId>>>,
    hasher: std::collections::hash_map::RandomState,
}

impl Default for RowLocks {
    fn default() -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::new(HashSet::new())).collect(),
            hasher: std::collections::hash_map::RandomState::new(),
        }
    }
}

impl RowLocks {
    /// A new, empty lock service.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    fn shard(&self, id: &RowId) -> &Mutex<HashSet<RowId>> {
        // The shard count divides u64's range evenly enough for a hash.
        &self.shards[(self.hasher.hash_one(id) % SHARDS as u64) as usize]
    }

    /// Takes the lock on `table`/`row` unless someone holds it.
    pub fn try_lock(self: &Arc<Self>, table: &Bytes, row: &Bytes) -> Option<RowGuard> {
        let id = (table.clone(), row.clone());
        if !self.shard(&id).lock().insert(id.clone()) {
            return None;
        }
        Some(RowGuard {
            locks: Arc::clone(self),
            id: Some(id),
        })
    }

    /// Number of rows locked now.
    pub fn held(&self) -> usize {
        self.shards.iter().map(|s| s.lock().len()).sum()
    }
}

/// Releases its row lock when dropped.
#[derive(Debug)]
pub struct RowGuard {
    locks: Arc<RowLocks>,
    id: Option<RowId>,
}

impl Drop for RowGuard {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            self.locks.shard(&id).lock().remove(&id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_holder_per_row() {
        let locks = RowLocks::new();
        let t = Bytes::from_static(b"t");
        let a = locks.try_lock(&t, &Bytes::from_static(b"a"));
        assert!(a.is_some());
        assert!(locks.try_lock(&t, &Bytes::from_static(b"a")).is_none());
        assert!(locks.try_lock(&t, &Bytes::from_static(b"b")).is_some());
        assert_eq!(locks.held(), 1, "the guard for b was dropped at once");
        drop(a);
        assert!(locks.try_lock(&t, &Bytes::from_static(b"a")).is_some());
        assert_eq!(locks.held(), 0);
    }
}
