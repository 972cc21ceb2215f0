//! Notification coalescing (see `notify_cells`), checked against what the engine stores: which
//! notifications a cell absorbs, what reads, conditions and range deletes see of them, when an
//! absorbed one is written back as a key, and what a restart keeps.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use bytes::Bytes;
use percolator_core::backend::records::{CellAddr, NotifyRecord};
use percolator_core::{
    Cell, Columns, Condition, Family, FamilyRead, Mutation, MutationOutcome, ReadRow, RowMutation,
    RowStore as _, TsRange,
};

use crate::{FjallConfig, FjallStore, key};

const COLUMN: &str = "c";

/// A store with a runtime to drive it, and the notify cell `t`/`r`/`c` to watch.
struct Harness {
    store: FjallStore,
    rt: tokio::runtime::Runtime,
}

/// A notify value naming its writer, and its commit timestamp if `committed_at` is given (as
/// a one-phase commit writes it).
fn record(committed_at: Option<u64>) -> Bytes {
    NotifyRecord {
        writer: Some(CellAddr::new("t", "primary", "w")),
        committed_at,
    }
    .encode()
}

fn put(ts: u64, committed_at: Option<u64>) -> Mutation {
    Mutation::Put {
        family: Family::Notify,
        column: Bytes::from(COLUMN),
        ts,
        value: record(committed_at),
    }
}

fn delete(ts: u64) -> Mutation {
    Mutation::Delete {
        family: Family::Notify,
        column: Bytes::from(COLUMN),
        ts,
    }
}

impl Harness {
    fn open(config: FjallConfig) -> Self {
        Self {
            store: FjallStore::open_with(config).unwrap(),
            rt: tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap(),
        }
    }

    fn mutate(&self, conditions: Vec<Condition>, mutations: Vec<Mutation>) -> MutationOutcome {
        self.rt
            .block_on(self.store.mutate_rows(vec![RowMutation {
                table: Bytes::from("t"),
                row: Bytes::from("r"),
                conditions,
                mutations,
            }]))
            .unwrap()
            .remove(0)
    }

    fn apply(&self, mutations: Vec<Mutation>) {
        assert!(self.mutate(Vec::new(), mutations).applied());
    }

    /// The notify versions a scan lists, newest first, with their commit timestamps.
    fn listed(&self) -> Vec<(u64, Option<u64>)> {
        let rows = self
            .rt
            .block_on(self.store.scan(percolator_core::Scan {
                snapshot_ts: None,
                table: Bytes::from("t"),
                start: std::ops::Bound::Unbounded,
                end: std::ops::Bound::Unbounded,
                read: FamilyRead::all(Family::Notify),
                row_limit: None,
            }))
            .unwrap();
        rows.iter()
            .flat_map(|row| &row.cells)
            .map(|cell| {
                let record = NotifyRecord::decode(&cell.value).unwrap();
                (cell.ts, record.committed_at)
            })
            .collect()
    }

    /// The versions the engine stores as notify keys, newest first.
    fn stored(&self) -> Vec<u64> {
        self.store
            .keyspace(Family::Notify)
            .iter()
            .map(|guard| {
                let k = guard.key().unwrap();
                crate::ts_of(&k).unwrap()
            })
            .collect()
    }

    fn read(&self, read: FamilyRead) -> Vec<Cell> {
        self.rt
            .block_on(self.store.read_row(ReadRow {
                snapshot_ts: None,
                table: Bytes::from("t"),
                row: Bytes::from("r"),
                reads: vec![read],
            }))
            .unwrap()
            .remove(0)
    }

    fn cell(&self) -> Vec<u8> {
        key::column_prefix(b"t", b"r", COLUMN.as_bytes())
    }
}

#[test]
fn a_cell_with_a_key_keeps_the_last_committed_notification_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::open(FjallConfig::new(dir.path()));
    // A two-phase writer's notification (no commit timestamp): a key.
    h.apply(vec![put(5, None)]);
    assert_eq!(h.stored(), vec![5]);
    h.apply(vec![put(7, Some(8))]);
    assert_eq!(h.stored(), vec![5], "absorbed, not written");
    assert_eq!(h.listed(), vec![(7, Some(8)), (5, None)]);
    // The one that committed last stands for the others, whatever their order.
    h.apply(vec![put(9, Some(12))]);
    h.apply(vec![put(11, Some(10))]);
    assert_eq!(h.stored(), vec![5]);
    assert_eq!(h.listed(), vec![(9, Some(12)), (5, None)]);
    assert_eq!(h.store.notify_cells.count(&h.cell()), 1);
    // Putting an absorbed version again changes nothing.
    h.apply(vec![put(9, Some(12))]);
    assert_eq!(h.listed(), vec![(9, Some(12)), (5, None)]);

    // Deleting the last stored key writes the absorbed version as one, in the same batch.
    h.apply(vec![delete(5)]);
    assert_eq!(h.stored(), vec![9]);
    assert_eq!(h.listed(), vec![(9, Some(12))]);
    assert_eq!(h.store.notify_cells.absorbed(&h.cell()), None);
    assert_eq!(h.store.notify_cells.count(&h.cell()), 1);
    h.apply(vec![delete(9)]);
    assert!(h.stored().is_empty());
    assert!(h.listed().is_empty());
    assert_eq!(h.store.notify_cells.len(), 0);
}

#[test]
fn deleting_the_absorbed_notification_forgets_it() {
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::open(FjallConfig::new(dir.path()));
    h.apply(vec![put(5, None), put(6, None)]);
    h.apply(vec![put(7, Some(8))]);
    h.apply(vec![delete(7)]);
    assert_eq!(h.listed(), vec![(6, None), (5, None)]);
    assert_eq!(h.stored(), vec![6, 5]);
    // With it gone, deleting the stored keys leaves nothing.
    h.apply(vec![delete(5), delete(6)]);
    assert!(h.listed().is_empty() && h.stored().is_empty());

    // Deleting every key and the absorbed version in one batch leaves nothing either.
    h.apply(vec![put(15, None)]);
    h.apply(vec![put(17, Some(18))]);
    h.apply(vec![delete(15), delete(17)]);
    assert!(h.listed().is_empty() && h.stored().is_empty());
    assert_eq!(h.store.notify_cells.len(), 0);

    // A batch deleting one of two stored keys keeps the absorbed version in memory.
    h.apply(vec![put(21, None), put(22, None)]);
    h.apply(vec![put(23, Some(24))]);
    h.apply(vec![delete(21)]);
    assert_eq!(h.stored(), vec![22]);
    assert_eq!(h.listed(), vec![(23, Some(24)), (22, None)]);
}

#[test]
fn only_a_cell_that_holds_a_key_and_loses_none_absorbs() {
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::open(FjallConfig::new(dir.path()));
    // An empty cell: the notification is its key.
    h.apply(vec![put(7, Some(8))]);
    assert_eq!(h.stored(), vec![7]);
    // A batch that deletes from the cell writes its put as a key.
    h.apply(vec![delete(7), put(9, Some(10))]);
    assert_eq!(h.stored(), vec![9]);
    // A notification naming no commit is always a key.
    h.apply(vec![put(11, None)]);
    assert_eq!(h.stored(), vec![11, 9]);
    // And a value that is no notify record at all.
    h.apply(vec![Mutation::Put {
        family: Family::Notify,
        column: Bytes::from(COLUMN),
        ts: 13,
        value: Bytes::from_static(b"\xff raw"),
    }]);
    assert_eq!(h.stored(), vec![13, 11, 9]);
}

#[test]
fn coalescing_off_writes_every_notification() {
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::open(FjallConfig::new(dir.path()).with_coalesce_notifications(false));
    h.apply(vec![put(5, None)]);
    h.apply(vec![put(7, Some(8))]);
    h.apply(vec![put(9, Some(10))]);
    assert_eq!(h.stored(), vec![9, 7, 5]);
    assert_eq!(h.listed().len(), 3);
}

#[test]
fn a_restart_keeps_the_key_that_carried_absorbed_notifications() {
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::open(FjallConfig::new(dir.path()));
    h.apply(vec![put(5, None)]);
    h.apply(vec![put(7, Some(8))]);
    assert_eq!(h.listed().len(), 2);
    drop(h);
    // Every run after the restart has a snapshot above 8, so its run on key 5 covers commit 8.
    let h = Harness::open(FjallConfig::new(dir.path()));
    assert_eq!(h.listed(), vec![(5, None)]);
    assert_eq!(h.store.notify_cells.count(&h.cell()), 1);
    h.apply(vec![put(9, Some(10))]);
    assert_eq!(h.listed(), vec![(9, Some(10)), (5, None)]);
}

#[test]
fn reads_conditions_and_range_deletes_see_absorbed_notifications() {
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::open(FjallConfig::new(dir.path()));
    h.apply(vec![put(3, None), put(5, None)]);
    h.apply(vec![put(7, Some(8))]);
    let versions = |read: FamilyRead| -> Vec<u64> { h.read(read).iter().map(|c| c.ts).collect() };
    let notify =
        || FamilyRead::all(Family::Notify).columns(Columns::Only(vec![Bytes::from(COLUMN)]));
    assert_eq!(versions(notify()), vec![7, 5, 3]);
    assert_eq!(versions(notify().max_versions(1)), vec![7]);
    assert_eq!(versions(notify().max_versions(2)), vec![7, 5]);
    assert_eq!(versions(notify().ts(TsRange::up_to(6))), vec![5, 3]);
    assert_eq!(versions(notify().ts(TsRange::from(6))), vec![7]);
    assert_eq!(
        versions(FamilyRead::all(Family::Notify).columns(Columns::Only(vec![Bytes::from("x")]))),
        Vec::<u64>::new()
    );
    assert_eq!(
        versions(FamilyRead::all(Family::Notify).max_versions(1)),
        vec![7]
    );
    assert_eq!(versions(FamilyRead::all(Family::Data)), Vec::<u64>::new());

    let exists = |ts| Condition::Exists {
        family: Family::Notify,
        column: Bytes::from(COLUMN),
        ts,
    };
    assert!(h.mutate(vec![exists(7)], Vec::new()).applied());
    assert!(!h.mutate(vec![exists(6)], Vec::new()).applied());
    let equals = |value| Condition::Equals {
        family: Family::Notify,
        column: Bytes::from(COLUMN),
        ts: 7,
        value,
    };
    assert!(
        h.mutate(vec![equals(record(Some(8)))], Vec::new())
            .applied()
    );
    assert!(!h.mutate(vec![equals(record(None))], Vec::new()).applied());
    let absent = |ts| Condition::Absent {
        family: Family::Notify,
        column: Bytes::from(COLUMN),
        ts,
    };
    assert!(
        !h.mutate(vec![absent(TsRange::new(6, 9))], Vec::new())
            .applied()
    );
    assert!(
        h.mutate(vec![absent(TsRange::new(8, 9))], Vec::new())
            .applied()
    );

    // A range delete over the absorbed version and one stored key.
    h.apply(vec![Mutation::DeleteRange {
        family: Family::Notify,
        column: Bytes::from(COLUMN),
        ts: TsRange::from(4),
    }]);
    assert_eq!(h.listed(), vec![(3, None)]);
    assert_eq!(h.stored(), vec![3]);
    assert_eq!(h.store.notify_cells.absorbed(&h.cell()), None);
}
