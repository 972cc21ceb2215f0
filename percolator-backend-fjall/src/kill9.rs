//! The workload of the SIGKILL test (`tests/crash_kill9.rs`), shared by the test and its child
//! process (the `fjall-kill9-writer` binary, feature `conformance`).
//!
//! Batch `n` writes row `r<n>` in the data, write and notify families and version `n` of the
//! `counter` row's lock column: two rows, four families, one fjall write batch. Every third data
//! value is large enough for a blob file. What survives a kill must be a prefix of the batches,
//! each whole.

#![allow(clippy::expect_used, clippy::panic)]

use std::ops::Bound;
use std::path::Path;

use bytes::Bytes;
use percolator_core::{Family, FamilyRead, Mutation, RowMutation, RowStore as _, Scan};

use crate::FjallStore;

/// The table the workload writes.
pub const TABLE: &str = "t";

fn put(family: Family, ts: u64, value: Bytes) -> Mutation {
    Mutation::Put {
        family,
        column: Bytes::from("c"),
        ts,
        value,
    }
}

/// The data value of batch `n`: every third one large enough for a blob file.
pub fn data_value(n: u64) -> Bytes {
    let len = if n.is_multiple_of(3) { 6_000 } else { 40 };
    Bytes::from(vec![(n % 251) as u8; len])
}

/// The row batch `n` writes in the data, write and notify families.
pub fn row(n: u64) -> Bytes {
    Bytes::from(format!("r{n:08}"))
}

/// Batch `n` (see the module docs).
pub fn batch(n: u64) -> Vec<RowMutation> {
    let table = Bytes::from(TABLE);
    vec![
        RowMutation {
            table: table.clone(),
            row: row(n),
            conditions: vec![],
            mutations: vec![
                put(Family::Data, n, data_value(n)),
                put(Family::Write, n + 1, Bytes::from(n.to_string())),
                put(Family::Notify, 0, Bytes::new()),
            ],
        },
        RowMutation {
            table,
            row: Bytes::from("counter"),
            conditions: vec![],
            mutations: vec![put(Family::Lock, n, Bytes::from(n.to_string()))],
        },
    ]
}

/// Every `(row, ts)` of `family` in [`TABLE`].
pub async fn cells(store: &FjallStore, family: Family) -> Vec<(Bytes, u64)> {
    store
        .scan(Scan {
            snapshot_ts: None,
            table: Bytes::from(TABLE),
            start: Bound::Unbounded,
            end: Bound::Unbounded,
            read: FamilyRead::all(family),
            row_limit: None,
        })
        .await
        .expect("scan")
        .into_iter()
        .flat_map(|r| {
            let row = r.row.clone();
            r.cells.into_iter().map(move |c| (row.clone(), c.ts))
        })
        .collect()
}

/// The child: opens the store at `dir` and writes batches from where it left off, printing
/// `ACK <n>` after each returns, until it is killed.
pub async fn write_until_killed(dir: &Path) {
    let store = FjallStore::open(dir).expect("open the store");
    let start = cells(&store, Family::Lock)
        .await
        .iter()
        .map(|(_, ts)| ts + 1)
        .max()
        .unwrap_or(0);
    for n in start.. {
        let outcomes = store.mutate_rows(batch(n)).await.expect("write a batch");
        assert!(
            outcomes.iter().all(|o| o.applied()),
            "batch {n} not applied"
        );
        println!("ACK {n}");
    }
}
