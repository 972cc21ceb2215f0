//! The fjall store answers lock-family conditions from an in-memory mirror and scans the
//! notify family through an in-memory set of dirty rows (see the crate's `lock_mirror` and
//! `notify_cells` modules), and prewrite's write-conflict checks from the newest recent write
//! of each column (`recent_writes`). This test drives a fjall store and the in-memory reference
//! store (`MemStore`) with the same random row mutations — puts, deletes and range deletes of
//! locks, notifications and write records, and clears of a cell's notification backlog, under
//! `Absent`, `Exists` and `Equals` conditions on the lock family and `Absent` on the write
//! family —
//! and asserts after every step that both agree on every outcome, on every notify scan and on
//! every row read (whose lock-family reads the mirror answers, with every filter). Halfway through, the fjall store is dropped and reopened, so the mirror and the
//! set are rebuilt from disk and must go on agreeing.

#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions

use std::ops::Bound;

use bytes::Bytes;
use percolator_backend_fjall::FjallStore;
use percolator_backend_mem::MemStore;
use percolator_core::{
    Columns, Condition, Family, FamilyRead, Mutation, MutationOutcome, ReadRow, RowMutation,
    RowStore, Scan, TsRange,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const ROWS: u32 = 12;
const COLUMNS: [&str; 3] = ["a", "b", "c"];

fn random_family(rng: &mut StdRng) -> Family {
    match rng.random_range(0..3) {
        0 => Family::Lock,
        1 => Family::Notify,
        _ => Family::Write,
    }
}

fn random_mutation(rng: &mut StdRng, base: u64) -> Mutation {
    let family = random_family(rng);
    let column = Bytes::from(COLUMNS[rng.random_range(0..COLUMNS.len())]);
    let ts = base + rng.random_range(1..6u64);
    match rng.random_range(0..4) {
        0 | 1 => Mutation::Put {
            family,
            column,
            ts,
            // A notify version is written once, by its writer: a put of one that exists
            // carries the value it holds (fjall refuses any other, see `Family::Notify`).
            value: if family == Family::Notify {
                Bytes::from(format!("n{ts}"))
            } else {
                Bytes::from(format!("v{}", rng.random_range(0..3)))
            },
        },
        2 => Mutation::Delete { family, column, ts },
        _ => Mutation::DeleteRange {
            family,
            column,
            ts: TsRange::new(ts, ts + rng.random_range(0..3)),
        },
    }
}

/// An observer clearing a cell's backlog: deletes of every notify version of one column in a
/// window (most of them present), so the store counts them with one read of the row's notify
/// keys instead of a lookup each.
fn clear_backlog(rng: &mut StdRng, base: u64) -> Vec<Mutation> {
    let column = Bytes::from(COLUMNS[rng.random_range(0..COLUMNS.len())]);
    (1..=rng.random_range(4..8u64))
        .map(|d| Mutation::Delete {
            family: Family::Notify,
            column: column.clone(),
            ts: base.saturating_sub(2) + d,
        })
        .collect()
}

fn random_condition(rng: &mut StdRng, base: u64) -> Condition {
    let column = Bytes::from(COLUMNS[rng.random_range(0..COLUMNS.len())]);
    let ts = base + rng.random_range(1..6u64);
    match rng.random_range(0..4) {
        // Prewrite's write-conflict check (answered from memory above the floor).
        3 => Condition::Absent {
            family: Family::Write,
            column,
            ts: if rng.random_bool(0.7) {
                TsRange::from(ts)
            } else {
                TsRange::new(ts, ts + 2)
            },
        },
        0 => Condition::Absent {
            family: Family::Lock,
            column,
            ts: if rng.random_bool(0.5) {
                TsRange::ALL
            } else {
                TsRange::new(ts, ts + 1)
            },
        },
        1 => Condition::Exists {
            family: Family::Lock,
            column,
            ts,
        },
        _ => Condition::Equals {
            family: Family::Lock,
            column,
            ts,
            value: Bytes::from(format!("v{}", rng.random_range(0..3))),
        },
    }
}

fn random_batch(rng: &mut StdRng, base: u64) -> Vec<RowMutation> {
    let mut rows: Vec<u32> = (0..rng.random_range(1..4))
        .map(|_| rng.random_range(0..ROWS))
        .collect();
    if rng.random_bool(0.7) {
        // Mostly distinct rows (one engine batch); sometimes one row twice (item by item).
        rows.sort_unstable();
        rows.dedup();
    }
    rows.into_iter()
        .map(|row| RowMutation {
            table: Bytes::from("t"),
            row: Bytes::from(format!("row{row:02}")),
            conditions: (0..rng.random_range(0..3))
                .map(|_| random_condition(rng, base))
                .collect(),
            mutations: if rng.random_bool(0.15) {
                clear_backlog(rng, base)
            } else {
                (0..rng.random_range(1..4))
                    .map(|_| random_mutation(rng, base))
                    .collect()
            },
        })
        .collect()
}

async fn notify_scan(store: &impl RowStore, start: Bound<Bytes>, limit: Option<usize>) -> String {
    let rows = store
        .scan(Scan {
            table: Bytes::from("t"),
            start,
            end: Bound::Unbounded,
            read: FamilyRead::all(Family::Notify),
            row_limit: limit,
            snapshot_ts: None,
        })
        .await
        .unwrap();
    format!("{rows:?}")
}

async fn row(store: &impl RowStore, row: u32) -> String {
    let cells = store
        .read_row(ReadRow {
            table: Bytes::from("t"),
            row: Bytes::from(format!("row{row:02}")),
            reads: vec![
                FamilyRead::all(Family::Lock),
                FamilyRead::all(Family::Notify),
                // Row reads answer the lock family from the mirror: filters as the engine's.
                FamilyRead::all(Family::Lock).ts(TsRange::new(2, 4)),
                FamilyRead::all(Family::Lock).max_versions(1),
                FamilyRead::all(Family::Lock)
                    .columns(Columns::Only(vec![Bytes::from("c"), Bytes::from("a")]))
                    .ts(TsRange::up_to(3)),
                FamilyRead::all(Family::Lock)
                    .columns(Columns::Only(vec![Bytes::from("b")]))
                    .max_versions(2),
                FamilyRead::all(Family::Lock).ts(TsRange::new(4, 2)),
                FamilyRead::all(Family::Write),
            ],
            snapshot_ts: None,
        })
        .await
        .unwrap();
    format!("{cells:?}")
}

async fn assert_agree(fjall: &FjallStore, mem: &MemStore, rng: &mut StdRng, step: usize) {
    let start = match rng.random_range(0..3) {
        0 => Bound::Unbounded,
        1 => Bound::Included(Bytes::from(format!("row{:02}", rng.random_range(0..ROWS)))),
        _ => Bound::Excluded(Bytes::from(format!("row{:02}", rng.random_range(0..ROWS)))),
    };
    let limit = rng.random_bool(0.5).then(|| rng.random_range(1..4));
    assert_eq!(
        notify_scan(fjall, start.clone(), limit).await,
        notify_scan(mem, start, limit).await,
        "notify scan after step {step}"
    );
    for r in 0..ROWS {
        assert_eq!(
            row(fjall, r).await,
            row(mem, r).await,
            "row {r} after step {step}"
        );
    }
}

#[tokio::test]
async fn in_memory_answers_agree_with_the_reference_store() {
    let dir = tempfile::tempdir().unwrap();
    let mem = MemStore::new();
    let mut fjall = FjallStore::open(dir.path()).unwrap();
    let mut rng = StdRng::seed_from_u64(0x5eed_f1a1);
    let mut applied = 0;
    let mut failed = 0;
    for step in 0..1_500 {
        if step == 750 {
            drop(fjall);
            fjall = FjallStore::open(dir.path()).unwrap();
        }
        // Timestamps creep up, as an oracle's do: writes land above the floor the reopened
        // store finds, so the write-conflict checks are answered from memory there.
        let batch = random_batch(&mut rng, step as u64 / 8);
        let from_fjall = fjall.mutate_rows(batch.clone()).await.unwrap();
        let from_mem = mem.mutate_rows(batch.clone()).await.unwrap();
        assert_eq!(from_fjall, from_mem, "outcomes of step {step}: {batch:?}");
        for outcome in from_fjall {
            match outcome {
                MutationOutcome::Applied => applied += 1,
                _ => failed += 1,
            }
        }
        assert_agree(&fjall, &mem, &mut rng, step).await;
    }
    // The random conditions both held and failed often enough to mean something.
    assert!(
        applied > 500 && failed > 500,
        "applied {applied}, failed {failed}"
    );
}
