//! Notification bookkeeping of the write path: what a write batch does to the notify family
//! besides its writes. It keeps the notified cells' counts exact, drops notify writes that would
//! change nothing, and coalesces notifications into busy cells (see
//! [`notify_cells`](crate::notify_cells), the in-memory table it plans against). It is apart
//! from the mutate path because it only plans; `FjallStore::apply` carries the plan out.

use percolator_backend_embedded::KeyWrite;
use percolator_core::backend::key;
use percolator_core::backend::records::NotifyRecord;
use percolator_core::{Family, StoreError};

use crate::notify_cells::Absorbed;
use crate::{FjallStore, backend, corrupt, ts_of};

/// How many notify keys of one cell, whose existence the in-memory counts cannot answer, a
/// mutation must write before the store reads the cell's notify keys in one range instead of
/// looking each up (see `FjallStore::notify_plan`).
const CELL_READ_FROM: usize = 4;

/// The final write of one notify key in a batch ([`FjallStore::notify_plan`]).
#[derive(Clone, Copy)]
struct FinalWrite<'a> {
    key: &'a [u8],
    /// The key without its version.
    cell: &'a [u8],
    /// The length of the cell's row prefix.
    row_len: usize,
    ts: u64,
    /// The index of the write in the batch.
    index: usize,
    put: bool,
    /// Whether the cell holds a notify key before the batch (it is in
    /// [`FjallStore::notify_cells`]).
    cell_holds_keys: bool,
}

/// How a write batch changes one cell's notify keys ([`FjallStore::notify_plan`]).
pub(crate) struct NotifyDelta {
    /// The cell (a notify key without its version).
    pub(crate) cell: Vec<u8>,
    /// The length of its row prefix.
    pub(crate) row_len: usize,
    /// Keys added less keys deleted.
    pub(crate) delta: i64,
    /// The newest version among the keys added (0 if none).
    pub(crate) newest: u64,
}

/// Per cell while planning: (row prefix length, keys added less keys deleted, newest added).
type CellChanges<'a> = foldhash::HashMap<&'a [u8], (usize, i64, u64)>;

/// What a write batch does to the notify family besides its writes ([`FjallStore::notify_plan`]).
#[derive(Default)]
pub(crate) struct NotifyPlan {
    /// How the cells' counts change.
    pub(crate) deltas: Vec<NotifyDelta>,
    /// The indexes of notify writes that must not reach the engine.
    pub(crate) skip: Vec<usize>,
    /// Puts absorbed by their cells instead of written (see
    /// [`notify_cells`](crate::notify_cells)), taken in once the batch applies.
    pub(crate) absorb: Vec<(Vec<u8>, Absorbed)>,
    /// Cells whose absorbed version the batch deletes or writes as a key: forgotten once it
    /// applies.
    pub(crate) forget: Vec<Vec<u8>>,
    /// Absorbed versions written as keys, because the batch deletes their cells' last stored
    /// key.
    pub(crate) put_back: Vec<KeyWrite>,
}

/// Whether deletes of `family`'s keys are weak tombstones ([`FjallStore::commit_writes`]).
pub(crate) fn weak_delete(family: Family) -> bool {
    family == Family::Notify
}

/// The `enc(table) ++ enc(row)` prefix of a cell key.
fn row_prefix_of(k: &[u8]) -> Result<&[u8], StoreError> {
    let (_, table_len) = key::decode_bytes(k, 0).map_err(corrupt)?;
    let (_, row_len) = key::decode_bytes(&k[table_len..], table_len).map_err(corrupt)?;
    Ok(&k[..table_len + row_len])
}

/// The cell of cell key `k` (`enc(table) ++ enc(row) ++ enc(column)`, the key without its
/// version) and the length of its row prefix.
pub(crate) fn cell_of(k: &[u8]) -> Result<(&[u8], usize), StoreError> {
    let row_len = row_prefix_of(k)?.len();
    let rest = k.get(row_len..).unwrap_or_default();
    let (_, column_len) = key::decode_bytes(rest, row_len).map_err(corrupt)?;
    Ok((&k[..row_len + column_len], row_len))
}

/// The version `write` would put, as an absorbed notification, if its value names its commit
/// timestamp (see [`notify_cells`](crate::notify_cells)).
fn absorbable(write: &KeyWrite, ts: u64) -> Option<Absorbed> {
    let value = write.value.as_ref()?;
    let record = NotifyRecord::decode(value).ok()?;
    Some(Absorbed {
        ts,
        committed_at: record.committed_at?,
        value: value.clone(),
    })
}

impl FjallStore {
    /// What `writes` do to the notify family if they apply (the caller holds the rows'
    /// latches, so the answers stay true until they do):
    ///
    /// - **Counts.** Per cell, the keys that the final writes put and the engine's latest state
    ///   lacks, less those they delete and it holds. [`Self::notify_cells`] answers most puts.
    ///   The engine answers the rest: by point lookups, or, for a cell with at least
    ///   [`CELL_READ_FROM`] such keys (an observer clearing a busy cell's backlog), by one read
    ///   of the cell's notify keys. Those keys are usually flushed by then, so each point
    ///   lookup of a present key searches a table per level, and such lookups would be a large
    ///   part of a link-forwarding run's store work.
    /// - **Skips.** The notify writes that must not reach the engine: all but the last write of
    ///   each key, and a last write that changes nothing (a put of a key that exists, a delete of
    ///   one that does not). What remains puts only absent keys and deletes only present ones,
    ///   which is what makes weak tombstones safe (see [`Self::commit_writes`]).
    /// - **Coalescing** (see [`notify_cells`](crate::notify_cells)). A new key whose value names
    ///   its commit timestamp, in a cell that holds a key and that the batch deletes nothing
    ///   from, is absorbed instead of written. A delete of a cell's absorbed version forgets it.
    ///   A cell whose last stored keys the batch deletes while its absorbed version stays gets
    ///   that version written as a key in the same batch (the key was never written, so it
    ///   holds one value, as weak tombstones need).
    pub(crate) fn notify_plan<'a>(&self, writes: &'a [KeyWrite]) -> Result<NotifyPlan, StoreError> {
        let mut plan = NotifyPlan::default();
        // Sized for the batch (a document's commit carries a notify write per link) and hashed
        // with foldhash (seeded per process), which is cheaper than SipHash on short keys.
        let mut last: foldhash::HashMap<&'a [u8], usize> =
            foldhash::HashMapExt::with_capacity(writes.len());
        for (index, w) in writes.iter().enumerate() {
            if w.family == Family::Notify
                && let Some(earlier) = last.insert(&w.key, index)
            {
                plan.skip.push(earlier);
            }
        }
        if last.is_empty() {
            return Ok(plan);
        }
        let mut finals = Vec::with_capacity(last.len());
        // The cells the batch deletes from: nothing is absorbed into them, so that the put-back
        // below sees every absorbed version that stays.
        let mut deleting: foldhash::HashSet<&'a [u8]> = foldhash::HashSet::default();
        for (key, index) in last {
            let (cell, row_len) = cell_of(key)?;
            let put = writes[index].value.is_some();
            if !put {
                deleting.insert(cell);
            }
            finals.push(FinalWrite {
                key,
                cell,
                row_len,
                ts: ts_of(key)?,
                index,
                put,
                cell_holds_keys: false,
            });
        }
        let keyspace = self.keyspace(Family::Notify);
        let mut changes: CellChanges<'a> = foldhash::HashMapExt::with_capacity(finals.len());
        // Per cell, the keys whose existence only the engine knows.
        let mut ask_engine: foldhash::HashMap<&'a [u8], Vec<FinalWrite<'a>>> =
            foldhash::HashMap::default();
        for mut write in finals {
            // The map is exact for a latched row: a cell it lacks holds no notify key, and none
            // newer than the cell's bound. Only the rest needs the engine.
            let newest = self.notify_cells.newest_ts(write.cell);
            write.cell_holds_keys = newest.is_some();
            match newest {
                None => self.settle(&mut plan, &mut changes, &deleting, writes, write, false)?,
                Some(newest) if write.put && write.ts > newest => {
                    self.settle(&mut plan, &mut changes, &deleting, writes, write, false)?;
                }
                Some(_) => ask_engine.entry(write.cell).or_default().push(write),
            }
        }
        for (cell, asked) in ask_engine {
            if asked.len() < CELL_READ_FROM {
                for write in asked {
                    let exists = keyspace
                        .contains_key(write.key)
                        .map_err(|e| backend("notify count", e))?;
                    self.settle(&mut plan, &mut changes, &deleting, writes, write, exists)?;
                }
            } else {
                // In key order: the cell's keys are one range of the keyspace.
                let held = keyspace
                    .prefix(cell)
                    .map(|guard| guard.key())
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| backend("notify count", e))?;
                for write in asked {
                    let exists = held.binary_search_by(|k| k.as_ref().cmp(write.key)).is_ok();
                    self.settle(&mut plan, &mut changes, &deleting, writes, write, exists)?;
                }
            }
        }
        for (cell, (_, delta, newest)) in &mut changes {
            if *delta >= 0
                || i64::try_from(self.notify_cells.count(cell)).unwrap_or(i64::MAX) + *delta > 0
                || plan.forget.iter().any(|forgotten| forgotten == cell)
            {
                continue;
            }
            let Some(absorbed) = self.notify_cells.absorbed(cell) else {
                continue;
            };
            let mut key = cell.to_vec();
            key::encode_ts(&mut key, absorbed.ts);
            plan.put_back.push(KeyWrite {
                family: Family::Notify,
                key,
                value: Some(absorbed.value),
            });
            *delta += 1;
            *newest = (*newest).max(absorbed.ts);
            plan.forget.push(cell.to_vec());
        }
        plan.deltas = changes
            .into_iter()
            .filter(|(_, (_, delta, _))| *delta != 0)
            .map(|(cell, (row_len, delta, newest))| NotifyDelta {
                cell: cell.to_vec(),
                row_len,
                delta,
                newest,
            })
            .collect();
        Ok(plan)
    }

    /// Plans the final write of one notify key, which the engine holds or not (`exists`); see
    /// [`Self::notify_plan`].
    fn settle<'a>(
        &self,
        plan: &mut NotifyPlan,
        changes: &mut CellChanges<'a>,
        deleting: &foldhash::HashSet<&'a [u8]>,
        writes: &[KeyWrite],
        write: FinalWrite<'a>,
        exists: bool,
    ) -> Result<(), StoreError> {
        if write.put && exists {
            self.check_notify_unchanged(&writes[write.index])?;
        }
        if !write.put
            && self
                .notify_cells
                .absorbed(write.cell)
                .is_some_and(|absorbed| absorbed.ts == write.ts)
        {
            plan.forget.push(write.cell.to_vec());
        }
        if write.put
            && !exists
            && self.coalesce
            && write.cell_holds_keys
            && !deleting.contains(write.cell)
            && let Some(absorbed) = absorbable(&writes[write.index], write.ts)
        {
            plan.skip.push(write.index);
            plan.absorb.push((write.cell.to_vec(), absorbed));
            return Ok(());
        }
        if exists == write.put {
            plan.skip.push(write.index);
            return Ok(());
        }
        let entry = changes.entry(write.cell).or_insert((write.row_len, 0, 0));
        if write.put {
            entry.1 += 1;
            entry.2 = entry.2.max(write.ts);
        } else {
            entry.1 -= 1;
        }
        Ok(())
    }

    /// A put of a notify key that exists must write the value it holds: a notify version is
    /// written once (its value names its writer, whose start timestamp is its version), and the
    /// weak tombstones of [`Self::commit_writes`] rely on it. Anything else is refused before
    /// anything applies.
    fn check_notify_unchanged(&self, write: &KeyWrite) -> Result<(), StoreError> {
        let held = self
            .keyspace(Family::Notify)
            .get(&write.key)
            .map_err(|e| backend("notify count", e))?;
        if held.as_deref() == write.value.as_deref() || held.is_none() {
            return Ok(());
        }
        let cell = key::CellKey::decode(&write.key).map_err(corrupt)?;
        Err(StoreError::InvalidInput(format!(
            "notify version {} of row {:?}, column {:?} in table {:?} exists with another value: \
             notify versions are written once",
            cell.ts,
            String::from_utf8_lossy(&cell.row),
            String::from_utf8_lossy(&cell.column),
            String::from_utf8_lossy(&cell.table),
        )))
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use bytes::Bytes;
    use percolator_core::{RowMutation, RowStore as _, TsRange};

    use super::*;
    use crate::tests::scan_all;

    /// Applies one mutation of row `r` in table `t`.
    fn mutate(
        store: &FjallStore,
        mutations: Vec<percolator_core::Mutation>,
    ) -> Result<(), StoreError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let outcomes = rt.block_on(store.mutate_rows(vec![RowMutation {
            table: Bytes::from("t"),
            row: Bytes::from("r"),
            conditions: vec![],
            mutations,
        }]))?;
        assert!(outcomes[0].applied());
        Ok(())
    }

    fn put_at(family: Family, value: &'static [u8]) -> percolator_core::Mutation {
        percolator_core::Mutation::Put {
            family,
            column: Bytes::from("c"),
            ts: 5,
            value: Bytes::from_static(value),
        }
    }

    fn delete_at(family: Family) -> percolator_core::Mutation {
        percolator_core::Mutation::Delete {
            family,
            column: Bytes::from("c"),
            ts: 5,
        }
    }

    /// Opens a store in `dir` and waits for its opening scan of the write family, which holds
    /// a fjall snapshot while it runs (and so keeps fjall's garbage-collection watermark below
    /// it).
    fn open_settled(dir: &Path) -> FjallStore {
        let mut store = FjallStore::open(dir).unwrap();
        if let Some((_, scan)) = store.opening_scan.take() {
            scan.join().unwrap();
        }
        store
    }

    /// Flushes `family`'s memtable, after raising fjall's garbage-collection watermark past every
    /// write so far: flushes and compactions drop versions only below it, and fjall raises it
    /// to the oldest open snapshot on every 10 000th closed one.
    fn flush(store: &FjallStore, family: Family) {
        for _ in 0..10_000 {
            drop(store.db.snapshot());
        }
        store.keyspace(family).rotate_memtable_and_wait().unwrap();
    }

    /// A notification deleted before its memtable is flushed leaves nothing on disk (a weak
    /// tombstone meets its value and both vanish); a data cell's delete leaves a tombstone.
    #[test]
    fn a_notification_and_its_delete_vanish_together_at_flush() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_settled(dir.path());
        for family in [Family::Notify, Family::Data] {
            mutate(&store, vec![put_at(family, b"w")]).unwrap();
            mutate(&store, vec![delete_at(family)]).unwrap();
            flush(&store, family);
        }
        assert_eq!(store.keyspace(Family::Notify).table_count(), 0);
        assert_eq!(store.keyspace(Family::Data).table_count(), 1);
        assert!(scan_all(&store, Family::Notify).unwrap().is_empty());
    }

    /// A weak tombstone hides only the newest value below it, so a notify key must never hold
    /// two: a put of a key that exists writes nothing (if its value is the same) or is refused.
    /// Here a second value in the memtable would vanish with the delete at flush and bring the
    /// flushed first one back.
    #[test]
    fn a_notification_put_twice_then_deleted_stays_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_settled(dir.path());
        let notify = store.keyspace(Family::Notify);
        let key = key::CellKey {
            table: b"t".to_vec(),
            row: b"r".to_vec(),
            column: b"c".to_vec(),
            ts: 5,
        }
        .encode();
        // What the engine holds (a scan of the notify family walks the in-memory counts).
        let in_engine = || notify.get(&key).unwrap();
        mutate(&store, vec![put_at(Family::Notify, b"w")]).unwrap();
        flush(&store, Family::Notify);
        mutate(&store, vec![put_at(Family::Notify, b"w")]).unwrap();
        let refused = mutate(&store, vec![put_at(Family::Notify, b"other")]).unwrap_err();
        assert!(
            matches!(&refused, StoreError::InvalidInput(m) if m.contains("written once") && m.contains("\"r\"")),
            "{refused}"
        );
        assert_eq!(in_engine().as_deref(), Some(&b"w"[..]));
        let cells = scan_all(&store, Family::Notify).unwrap();
        assert_eq!(cells.len(), 1);
        assert_eq!(cells[0].cells[0].value, Bytes::from_static(b"w"));
        mutate(&store, vec![delete_at(Family::Notify)]).unwrap();
        flush(&store, Family::Notify);
        assert_eq!(in_engine(), None);
        assert!(scan_all(&store, Family::Notify).unwrap().is_empty());
        notify.major_compact().unwrap();
        assert_eq!(in_engine(), None);
    }

    #[test]
    fn the_notified_cells_follow_the_final_writes() {
        use percolator_core::Mutation;
        let dir = tempfile::tempdir().unwrap();
        let store = FjallStore::open(dir.path()).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let apply = |mutations: Vec<Mutation>| {
            let outcomes = rt
                .block_on(store.mutate_rows(vec![RowMutation {
                    table: Bytes::from("t"),
                    row: Bytes::from("r"),
                    conditions: vec![],
                    mutations,
                }]))
                .unwrap();
            assert!(outcomes[0].applied());
        };
        let put = || Mutation::Put {
            family: Family::Notify,
            column: Bytes::from("c"),
            ts: 1,
            value: Bytes::new(),
        };
        let delete = || Mutation::DeleteRange {
            family: Family::Notify,
            column: Bytes::from("c"),
            ts: TsRange::ALL,
        };
        // Put and deleted again by one mutation: nothing to remember.
        let put_at = |ts| Mutation::Put {
            family: Family::Notify,
            column: Bytes::from("c"),
            ts,
            value: Bytes::new(),
        };
        let delete_at = |ts| Mutation::Delete {
            family: Family::Notify,
            column: Bytes::from("c"),
            ts,
        };
        let cell = key::column_prefix(b"t", b"r", b"c");
        apply(vec![put(), delete()]);
        assert_eq!(store.notify_cells.len(), 0);
        apply(vec![put()]);
        apply(vec![put()]);
        assert_eq!(store.notify_cells.len(), 1);
        assert_eq!(
            store.notify_cells.count(&cell),
            1,
            "a put over a live key adds none"
        );
        apply(vec![delete()]);
        assert_eq!(store.notify_cells.len(), 0);
        // Counted per key: the cell stays while one is left.
        apply(vec![put_at(2), put_at(3), put_at(4)]);
        assert_eq!(store.notify_cells.count(&cell), 3);
        apply(vec![delete_at(2), delete_at(9)]);
        assert_eq!(
            store.notify_cells.count(&cell),
            2,
            "deleting an absent key removes none"
        );
        apply(vec![delete_at(3), put_at(5)]);
        assert_eq!(store.notify_cells.count(&cell), 2);
        // Older than the cell's newest key: new or not, the engine tells.
        apply(vec![put_at(1)]);
        apply(vec![put_at(4)]);
        assert_eq!(store.notify_cells.count(&cell), 3, "1 is new, 4 is live");
        apply(vec![delete_at(1)]);
        assert_eq!(store.notify_cells.count(&cell), 2);
        // Reopening counts what the engine holds.
        drop(store);
        let store = FjallStore::open(dir.path()).unwrap();
        assert_eq!(store.notify_cells.count(&cell), 2);
        let cells = scan_all(&store, Family::Notify).unwrap();
        assert_eq!(cells.iter().map(|r| r.cells.len()).sum::<usize>(), 2);
    }
}
