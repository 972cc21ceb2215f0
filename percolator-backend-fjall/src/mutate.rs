//! The mutate path: row mutations planned under their rows' latches against one fjall snapshot
//! (through [`View`]), then applied in one fjall write batch together with the in-memory
//! tables' updates. It is the only code that writes to the engine after open.

use bytes::Bytes;
use fjall::{PersistMode, Readable as _, Snapshot};
use percolator_backend_embedded::{KeyLookup, KeyWrite, plan, rows_are_distinct};
use percolator_core::backend::key;
use percolator_core::backend::validate::{validate_atomic_batch, validate_batch};
use percolator_core::{AtomicOutcome, Family, MutationOutcome, RowMutation, StoreError, TsRange};

use crate::config::LATCHED_SLICE_ROWS;
use crate::lock_mirror::LockMirror;
use crate::notify::{NotifyPlan, cell_of, weak_delete};
use crate::read::first_key;
use crate::{FJALL_LIMITS, FjallStore, backend};

impl FjallStore {
    /// [`RowStore::mutate_rows`](percolator_core::RowStore::mutate_rows), after the task's
    /// budget.
    pub(crate) fn mutate_batch(
        &self,
        batch: Vec<RowMutation>,
    ) -> Result<Vec<MutationOutcome>, StoreError> {
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

    /// [`RowStore::mutate_rows_atomically`](percolator_core::RowStore::mutate_rows_atomically),
    /// after the task's budget.
    pub(crate) fn mutate_batch_atomically(
        &self,
        batch: Vec<RowMutation>,
    ) -> Result<AtomicOutcome, StoreError> {
        validate_atomic_batch(&batch, &FJALL_LIMITS)?;
        // Taken before any row latch (a scan cycling the gates holds no latch).
        let _gate = self.latches.gate_for(&batch);
        self.mutate_all_or_nothing(&batch)
    }

    /// [`RowStore::sync`](percolator_core::RowStore::sync): an `fsync` of the journal, grouped.
    pub(crate) async fn persist_journal(&self) -> Result<(), StoreError> {
        // `persist` fsyncs the journal: blocking disk I/O, on tokio's blocking pool.
        let db = self.db.clone();
        self.group_sync
            .sync("fjall", move || {
                db.persist(PersistMode::SyncAll)
                    .map_err(|e| backend("persist", e))
            })
            .await
    }

    /// Applies `writes`, planned under the latches of their rows, keeping [`Self::notify_cells`]
    /// counting each cell's notify keys (the new keys count before the writes apply, the deleted
    /// ones stop counting after) and holding the absorbed notifications (taken in and forgotten
    /// after the writes apply; see [`notify_cells`](crate::notify_cells)). `atomic` for the
    /// writes of an atomic batch, whose lock writes scans must see whole
    /// ([`LockMirror::applied_atomically`]).
    fn apply(&self, mut writes: Vec<KeyWrite>, atomic: bool) -> Result<(), StoreError> {
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
        if atomic {
            self.locks.applied_atomically(lock_writes);
        } else {
            self.locks.applied(lock_writes);
        }
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
            self.apply(writes, false)?;
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
        self.apply(writes, false)?;
        Ok(outcomes)
    }

    /// [`RowStore::mutate_rows_atomically`](percolator_core::RowStore::mutate_rows_atomically)
    /// of a validated batch: every row's latch, every item planned against one snapshot, then
    /// one write batch for all of them or none.
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
        self.apply(writes, true)?;
        Ok(AtomicOutcome::Applied)
    }
}

/// The keyspaces as one fjall snapshot sees them, for [`plan`] (the caller holds the row
/// latch), except the lock family, which comes from [`FjallStore::locks`]: under the row's
/// latch it equals the engine's latest state, and nothing changes that row meanwhile. It lives
/// with the mutate path, its only user: the planner checks conditions and expands range deletes
/// through it, while reads go to the snapshot directly.
struct View<'a> {
    store: &'a FjallStore,
    snapshot: &'a Snapshot,
}

impl View<'_> {
    /// The keys and values of the absorbed notifications (see
    /// [`notify_cells`](crate::notify_cells)) in `lo..=hi`, in key order. They are part of the
    /// notify family as reads see it, so conditions and range deletes see them too.
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
