//! Data written through one `FjallStore` is there after the store is dropped and reopened:
//! small values, values large enough for fjall's blob files, deletes, and every family.

#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions

use bytes::Bytes;
use percolator_backend_fjall::{FjallConfig, FjallStore};
use percolator_core::{
    Cell, Family, FamilyRead, Mutation, ReadRow, RowMutation, RowStore, StoreLimits,
};

fn put(family: Family, column: &'static str, ts: u64, value: Bytes) -> Mutation {
    Mutation::Put {
        family,
        column: Bytes::from(column),
        ts,
        value,
    }
}

async fn read_all(store: &FjallStore, row: &'static str) -> Vec<Vec<Cell>> {
    store
        .read_row(ReadRow {
            table: Bytes::from("t"),
            row: Bytes::from(row),
            reads: Family::ALL.iter().map(|f| FamilyRead::all(*f)).collect(),
            snapshot_ts: None,
        })
        .await
        .unwrap()
}

#[tokio::test]
async fn data_survives_drop_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let big = Bytes::from(
        (0..200_000u32)
            .map(|i| (i % 251) as u8)
            .collect::<Vec<u8>>(),
    );
    let store = FjallStore::open(dir.path()).unwrap();
    let id = store.store_id();
    assert!(id.starts_with("fjall:"), "{id}");
    let outcomes = store
        .mutate_rows(vec![
            RowMutation {
                table: Bytes::from("t"),
                row: Bytes::from("r1"),
                conditions: vec![],
                mutations: vec![
                    put(Family::Data, "c", 5, Bytes::from("small")),
                    put(Family::Data, "c", 7, big.clone()),
                    put(Family::Lock, "c", 7, Bytes::from("lock")),
                    put(Family::Notify, "c", 0, Bytes::new()),
                ],
            },
            RowMutation {
                table: Bytes::from("t"),
                row: Bytes::from("r2"),
                conditions: vec![],
                mutations: vec![put(Family::Write, "c", 9, Bytes::from("w"))],
            },
        ])
        .await
        .unwrap();
    assert!(outcomes.iter().all(|o| o.applied()));
    // A commit-like step: move r1's lock to a write record and drop the notification.
    store
        .mutate_rows(vec![RowMutation {
            table: Bytes::from("t"),
            row: Bytes::from("r1"),
            conditions: vec![],
            mutations: vec![
                put(Family::Write, "c", 8, Bytes::from("commit")),
                Mutation::Delete {
                    family: Family::Lock,
                    column: Bytes::from("c"),
                    ts: 7,
                },
                Mutation::Delete {
                    family: Family::Notify,
                    column: Bytes::from("c"),
                    ts: 0,
                },
            ],
        }])
        .await
        .unwrap();
    let before = (read_all(&store, "r1").await, read_all(&store, "r2").await);
    store.sync().await.unwrap();
    drop(store);

    let store = FjallStore::open_with(FjallConfig::new(dir.path())).unwrap();
    assert_eq!(store.store_id(), id);
    let after = (read_all(&store, "r1").await, read_all(&store, "r2").await);
    assert_eq!(before, after);
    let [data, lock, write, notify] = <[Vec<Cell>; 4]>::try_from(after.0).unwrap();
    assert_eq!(data.len(), 2);
    assert_eq!(data[0].ts, 7);
    assert_eq!(data[0].value, big);
    assert_eq!(data[1].value, Bytes::from("small"));
    assert!(lock.is_empty() && notify.is_empty());
    assert_eq!(write.len(), 1);
    assert_eq!(write[0].value, Bytes::from("commit"));
    assert_eq!(after.1[2].len(), 1);
    assert_eq!(
        store.tables().await.unwrap(),
        vec![Bytes::from("t")],
        "tables after reopen"
    );
    let limits: StoreLimits = store.limits();
    assert!(limits.persistent && limits.durable_after_sync && limits.tracks_snapshot_reads);
}
