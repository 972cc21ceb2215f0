//! The RowStore contract.

use std::ops::Bound;
use std::sync::Arc;

use bytes::Bytes;

use super::StoreFactory;
use crate::error::StoreError;
use crate::store::{
    Cell, Columns, Condition, Family, FamilyRead, Mutation, MutationOutcome, ReadRow, RowMutation,
    RowStore, Scan, TsRange,
};

fn b(s: &[u8]) -> Bytes {
    Bytes::copy_from_slice(s)
}

fn put(family: Family, column: &[u8], ts: u64, value: &[u8]) -> Mutation {
    Mutation::Put {
        family,
        column: b(column),
        ts,
        value: b(value),
    }
}

fn row_mutation(
    table: &[u8],
    row: &[u8],
    conditions: Vec<Condition>,
    mutations: Vec<Mutation>,
) -> RowMutation {
    RowMutation {
        table: b(table),
        row: b(row),
        conditions,
        mutations,
    }
}

async fn apply<S: RowStore>(store: &S, items: Vec<RowMutation>) -> Vec<MutationOutcome> {
    store.mutate_rows(items).await.expect("mutate_rows")
}

async fn read<S: RowStore>(store: &S, table: &[u8], row: &[u8], read: FamilyRead) -> Vec<Cell> {
    store
        .read_row(ReadRow {
            snapshot_ts: None,
            table: b(table),
            row: b(row),
            reads: vec![read],
        })
        .await
        .expect("read_row")
        .pop()
        .expect("one answer per read")
}

fn summary(cells: &[Cell]) -> Vec<(Vec<u8>, u64, Vec<u8>)> {
    cells
        .iter()
        .map(|c| (c.column.to_vec(), c.ts, c.value.to_vec()))
        .collect()
}

pub async fn read_row_versions_and_filters<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let mutations = vec![
        put(Family::Data, b"b", 5, b"b5"),
        put(Family::Data, b"a", 3, b"a3"),
        put(Family::Data, b"a", 9, b"a9"),
        put(Family::Data, b"a", 6, b"a6"),
        put(Family::Write, b"a", 7, b"w7"),
    ];
    assert_eq!(
        apply(&*store, vec![row_mutation(b"t", b"r", vec![], mutations)]).await,
        vec![MutationOutcome::Applied]
    );

    let all = read(&*store, b"t", b"r", FamilyRead::all(Family::Data)).await;
    assert_eq!(
        summary(&all),
        vec![
            (b"a".to_vec(), 9, b"a9".to_vec()),
            (b"a".to_vec(), 6, b"a6".to_vec()),
            (b"a".to_vec(), 3, b"a3".to_vec()),
            (b"b".to_vec(), 5, b"b5".to_vec()),
        ],
        "columns ascending, versions newest first, other families excluded"
    );
    let newest = read(
        &*store,
        b"t",
        b"r",
        FamilyRead::all(Family::Data).max_versions(1),
    )
    .await;
    assert_eq!(newest.iter().map(|c| c.ts).collect::<Vec<_>>(), vec![9, 5]);
    let ranged = read(
        &*store,
        b"t",
        b"r",
        FamilyRead::all(Family::Data).ts(TsRange::new(4, 8)),
    )
    .await;
    assert_eq!(
        summary(&ranged),
        vec![
            (b"a".to_vec(), 6, b"a6".to_vec()),
            (b"b".to_vec(), 5, b"b5".to_vec())
        ]
    );
    let only = read(
        &*store,
        b"t",
        b"r",
        FamilyRead::all(Family::Data).columns(Columns::Only(vec![b(b"b"), b(b"zz"), b(b"b")])),
    )
    .await;
    assert_eq!(summary(&only), vec![(b"b".to_vec(), 5, b"b5".to_vec())]);
    let upto = read(
        &*store,
        b"t",
        b"r",
        FamilyRead::all(Family::Data)
            .columns(Columns::one(b(b"a")))
            .ts(TsRange::up_to(6))
            .max_versions(1),
    )
    .await;
    assert_eq!(summary(&upto), vec![(b"a".to_vec(), 6, b"a6".to_vec())]);

    // Several families in one read, answered in request order; a missing row reads empty.
    let multi = store
        .read_row(ReadRow {
            snapshot_ts: None,
            table: b(b"t"),
            row: b(b"r"),
            reads: vec![
                FamilyRead::all(Family::Write),
                FamilyRead::all(Family::Lock),
                FamilyRead::all(Family::Data).max_versions(1),
            ],
        })
        .await
        .unwrap();
    assert_eq!(multi.len(), 3);
    assert_eq!(summary(&multi[0]), vec![(b"a".to_vec(), 7, b"w7".to_vec())]);
    assert!(multi[1].is_empty());
    assert_eq!(multi[2].len(), 2);
    // An inverted timestamp range selects nothing (and must not panic).
    let inverted = TsRange::new(8, 4);
    assert!(
        read(
            &*store,
            b"t",
            b"r",
            FamilyRead::all(Family::Data).ts(inverted)
        )
        .await
        .is_empty()
    );
    assert!(
        read(
            &*store,
            b"t",
            b"r",
            FamilyRead::all(Family::Data)
                .columns(Columns::one(b(b"a")))
                .ts(inverted)
        )
        .await
        .is_empty()
    );
    let vacuous = Condition::Absent {
        family: Family::Data,
        column: b(b"a"),
        ts: inverted,
    };
    assert_eq!(
        apply(
            &*store,
            vec![row_mutation(b"t", b"r", vec![vacuous], vec![])]
        )
        .await,
        vec![MutationOutcome::Applied]
    );
    apply(
        &*store,
        vec![row_mutation(
            b"t",
            b"r",
            vec![],
            vec![Mutation::DeleteRange {
                family: Family::Data,
                column: b(b"a"),
                ts: inverted,
            }],
        )],
    )
    .await;
    assert_eq!(
        read(&*store, b"t", b"r", FamilyRead::all(Family::Data))
            .await
            .len(),
        4
    );
    assert!(
        read(&*store, b"t", b"missing", FamilyRead::all(Family::Data))
            .await
            .is_empty()
    );
    assert!(
        read(&*store, b"other", b"r", FamilyRead::all(Family::Data))
            .await
            .is_empty()
    );
}

pub async fn families_are_separate<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let mut items = Vec::new();
    for i in 0..50u32 {
        let row = format!("row{i:03}");
        let mut muts = vec![put(Family::Data, b"c", 1, b"data")];
        if i % 10 == 0 {
            muts.push(put(Family::Notify, b"c", 2, b""));
        }
        items.push(row_mutation(b"t", row.as_bytes(), vec![], muts));
    }
    apply(&*store, items).await;
    let notify = store
        .scan(Scan {
            snapshot_ts: None,
            table: b(b"t"),
            start: Bound::Unbounded,
            end: Bound::Unbounded,
            read: FamilyRead::all(Family::Notify),
            row_limit: None,
        })
        .await
        .unwrap();
    let rows: Vec<_> = notify.iter().map(|r| r.row.to_vec()).collect();
    assert_eq!(
        rows,
        vec![
            b"row000".to_vec(),
            b"row010".to_vec(),
            b"row020".to_vec(),
            b"row030".to_vec(),
            b"row040".to_vec()
        ]
    );
    assert!(
        notify
            .iter()
            .all(|r| r.cells.len() == 1 && r.cells[0].ts == 2)
    );
    // Deleting the last notify cell of a row removes the row from the notify family's scans.
    apply(
        &*store,
        vec![row_mutation(
            b"t",
            b"row010",
            vec![],
            vec![Mutation::Delete {
                family: Family::Notify,
                column: b(b"c"),
                ts: 2,
            }],
        )],
    )
    .await;
    let after = store
        .scan(Scan {
            snapshot_ts: None,
            table: b(b"t"),
            start: Bound::Unbounded,
            end: Bound::Unbounded,
            read: FamilyRead::all(Family::Notify),
            row_limit: None,
        })
        .await
        .unwrap();
    assert_eq!(after.len(), 4);
}

pub async fn scan_ranges_and_limits<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let rows: Vec<&[u8]> = vec![
        b"",
        b"\x00",
        b"\x00\x00",
        b"a",
        b"a\x00",
        b"ab",
        b"b",
        b"\xff",
        b"\xff\xff",
    ];
    let mut items = Vec::new();
    for r in &rows {
        items.push(row_mutation(
            b"t",
            r,
            vec![],
            vec![put(Family::Data, b"c", 1, r)],
        ));
    }
    // Neighbouring tables must not leak into scans of "t".
    items.push(row_mutation(
        b"s",
        b"zzz",
        vec![],
        vec![put(Family::Data, b"c", 1, b"s")],
    ));
    items.push(row_mutation(
        b"t\x00",
        b"",
        vec![],
        vec![put(Family::Data, b"c", 1, b"t0")],
    ));
    items.push(row_mutation(
        b"tt",
        b"",
        vec![],
        vec![put(Family::Data, b"c", 1, b"tt")],
    ));
    apply(&*store, items).await;

    let scan = |start: Bound<Bytes>, end: Bound<Bytes>, limit: Option<usize>| {
        let store = Arc::clone(&store);
        async move {
            store
                .scan(Scan {
                    snapshot_ts: None,
                    table: b(b"t"),
                    start,
                    end,
                    read: FamilyRead::all(Family::Data),
                    row_limit: limit,
                })
                .await
                .unwrap()
                .into_iter()
                .map(|r| {
                    assert_eq!(r.cells[0].value, r.row, "cell belongs to its row");
                    r.row.to_vec()
                })
                .collect::<Vec<_>>()
        }
    };
    let all: Vec<Vec<u8>> = rows.iter().map(|r| r.to_vec()).collect();
    assert_eq!(scan(Bound::Unbounded, Bound::Unbounded, None).await, all);
    assert_eq!(
        scan(Bound::Included(b(b"a")), Bound::Excluded(b(b"b")), None).await,
        all[3..6].to_vec()
    );
    assert_eq!(
        scan(Bound::Excluded(b(b"a")), Bound::Included(b(b"b")), None).await,
        all[4..7].to_vec()
    );
    assert_eq!(
        scan(
            Bound::Excluded(b(b"")),
            Bound::Excluded(b(b"\x00\x00")),
            None
        )
        .await,
        all[1..2].to_vec()
    );
    assert_eq!(
        scan(Bound::Included(b(b"\xff")), Bound::Unbounded, None).await,
        all[7..].to_vec()
    );
    assert_eq!(
        scan(Bound::Unbounded, Bound::Unbounded, Some(4)).await,
        all[..4].to_vec()
    );
    assert_eq!(
        scan(Bound::Included(b(b"ab")), Bound::Unbounded, Some(2)).await,
        all[5..7].to_vec()
    );
    assert!(
        scan(Bound::Included(b(b"c")), Bound::Excluded(b(b"d")), None)
            .await
            .is_empty()
    );
}

pub async fn conditions<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    apply(
        &*store,
        vec![row_mutation(
            b"t",
            b"r",
            vec![],
            vec![put(Family::Lock, b"c", 10, b"L")],
        )],
    )
    .await;
    let cases: Vec<(Condition, bool)> = vec![
        (
            Condition::Absent {
                family: Family::Lock,
                column: b(b"c"),
                ts: TsRange::new(0, 9),
            },
            true,
        ),
        (
            Condition::Absent {
                family: Family::Lock,
                column: b(b"c"),
                ts: TsRange::new(11, u64::MAX),
            },
            true,
        ),
        (
            Condition::Absent {
                family: Family::Lock,
                column: b(b"c"),
                ts: TsRange::ALL,
            },
            false,
        ),
        (
            Condition::Absent {
                family: Family::Lock,
                column: b(b"d"),
                ts: TsRange::ALL,
            },
            true,
        ),
        (
            Condition::Absent {
                family: Family::Data,
                column: b(b"c"),
                ts: TsRange::ALL,
            },
            true,
        ),
        (
            Condition::Exists {
                family: Family::Lock,
                column: b(b"c"),
                ts: 10,
            },
            true,
        ),
        (
            Condition::Exists {
                family: Family::Lock,
                column: b(b"c"),
                ts: 11,
            },
            false,
        ),
        (
            Condition::Equals {
                family: Family::Lock,
                column: b(b"c"),
                ts: 10,
                value: b(b"L"),
            },
            true,
        ),
        (
            Condition::Equals {
                family: Family::Lock,
                column: b(b"c"),
                ts: 10,
                value: b(b"M"),
            },
            false,
        ),
        (
            Condition::Equals {
                family: Family::Lock,
                column: b(b"c"),
                ts: 9,
                value: b(b"L"),
            },
            false,
        ),
    ];
    for (i, (condition, holds)) in cases.into_iter().enumerate() {
        let column = format!("probe{i}");
        let outcome = apply(
            &*store,
            vec![row_mutation(
                b"t",
                b"r",
                vec![
                    Condition::Exists {
                        family: Family::Lock,
                        column: b(b"c"),
                        ts: 10,
                    },
                    condition.clone(),
                ],
                vec![
                    put(Family::Data, column.as_bytes(), 1, b"x"),
                    put(Family::Notify, column.as_bytes(), 1, b"y"),
                ],
            )],
        )
        .await;
        let expected = if holds {
            MutationOutcome::Applied
        } else {
            MutationOutcome::ConditionFailed { condition: 1 }
        };
        assert_eq!(outcome, vec![expected], "{condition:?}");
        let data = read(
            &*store,
            b"t",
            b"r",
            FamilyRead::all(Family::Data).columns(Columns::one(b(column.as_bytes()))),
        )
        .await;
        let ack = read(
            &*store,
            b"t",
            b"r",
            FamilyRead::all(Family::Notify).columns(Columns::one(b(column.as_bytes()))),
        )
        .await;
        assert_eq!(
            data.len(),
            usize::from(holds),
            "all-or-nothing for {condition:?}"
        );
        assert_eq!(
            ack.len(),
            usize::from(holds),
            "all-or-nothing across families for {condition:?}"
        );
    }
}

/// A batch as large as the store takes (up to 1 000 rows), every row with conditions and
/// several mutations, a tenth of the rows mutated twice (the second time conditional on the
/// first): every item applies, in batch order. Stores that cut batches to their own limits
/// (etcd's `--max-txn-ops`) must do it without losing or reordering anything.
pub async fn large_batches_apply_every_item<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let n = store.limits().max_batch_rows.min(1000);
    let rows = n - n / 10;
    let mut batch = Vec::with_capacity(n);
    for i in 0..rows {
        let row = format!("row{i:05}").into_bytes();
        batch.push(row_mutation(
            b"big",
            &row,
            vec![
                Condition::Absent {
                    family: Family::Data,
                    column: b(b"a"),
                    ts: TsRange::ALL,
                },
                Condition::Absent {
                    family: Family::Lock,
                    column: b(b"a"),
                    ts: TsRange::ALL,
                },
            ],
            vec![
                put(Family::Data, b"a", 1, b"first"),
                put(Family::Write, b"a", 2, b"w"),
            ],
        ));
        if i % 9 == 0 && batch.len() < n {
            batch.push(row_mutation(
                b"big",
                &row,
                vec![Condition::Equals {
                    family: Family::Data,
                    column: b(b"a"),
                    ts: 1,
                    value: b(b"first"),
                }],
                vec![put(Family::Data, b"a", 1, b"second")],
            ));
        }
    }
    let len = batch.len();
    let outcomes = apply(&*store, batch).await;
    assert_eq!(outcomes.len(), len);
    assert!(
        outcomes.iter().all(|o| o.applied()),
        "{} of {len} items not applied",
        outcomes.iter().filter(|o| !o.applied()).count()
    );
    let scanned = store
        .scan(Scan {
            snapshot_ts: None,
            table: b(b"big"),
            start: Bound::Unbounded,
            end: Bound::Unbounded,
            read: FamilyRead::all(Family::Data),
            row_limit: None,
        })
        .await
        .unwrap();
    assert_eq!(scanned.len(), rows);
    for (i, row) in scanned.iter().enumerate() {
        let want: &[u8] = if i % 9 == 0 { b"second" } else { b"first" };
        assert_eq!(row.cells.len(), 1, "row {i}");
        assert_eq!(row.cells[0].value.as_ref(), want, "row {i}");
    }
}

pub async fn batch_outcomes_are_independent<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let exists = |col: &[u8]| Condition::Exists {
        family: Family::Data,
        column: b(col),
        ts: 1,
    };
    let outcomes = apply(
        &*store,
        vec![
            row_mutation(b"t", b"r1", vec![], vec![put(Family::Data, b"x", 1, b"1")]),
            row_mutation(
                b"t",
                b"r2",
                vec![exists(b"x")],
                vec![put(Family::Data, b"y", 1, b"2")],
            ),
            // Same row as the first item: sees its effect.
            row_mutation(
                b"t",
                b"r1",
                vec![exists(b"x")],
                vec![put(Family::Data, b"y", 1, b"3")],
            ),
            row_mutation(
                b"u",
                b"r1",
                vec![exists(b"x")],
                vec![put(Family::Data, b"y", 1, b"4")],
            ),
        ],
    )
    .await;
    assert_eq!(
        outcomes,
        vec![
            MutationOutcome::Applied,
            MutationOutcome::ConditionFailed { condition: 0 },
            MutationOutcome::Applied,
            MutationOutcome::ConditionFailed { condition: 0 },
        ]
    );
    assert_eq!(
        read(&*store, b"t", b"r1", FamilyRead::all(Family::Data))
            .await
            .len(),
        2
    );
    assert!(
        read(&*store, b"t", b"r2", FamilyRead::all(Family::Data))
            .await
            .is_empty()
    );
    assert!(
        read(&*store, b"u", b"r1", FamilyRead::all(Family::Data))
            .await
            .is_empty()
    );
    assert_eq!(apply(&*store, vec![]).await, vec![]);
}

pub async fn deletes<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let muts = (1..=6)
        .map(|ts| put(Family::Write, b"c", ts, b"v"))
        .chain([put(Family::Write, b"d", 3, b"v")])
        .collect();
    apply(&*store, vec![row_mutation(b"t", b"r", vec![], muts)]).await;
    apply(
        &*store,
        vec![row_mutation(
            b"t",
            b"r",
            vec![],
            vec![
                Mutation::Delete {
                    family: Family::Write,
                    column: b(b"c"),
                    ts: 6,
                },
                Mutation::Delete {
                    family: Family::Write,
                    column: b(b"c"),
                    ts: 100,
                },
                Mutation::DeleteRange {
                    family: Family::Write,
                    column: b(b"c"),
                    ts: TsRange::new(2, 4),
                },
            ],
        )],
    )
    .await;
    let left = read(&*store, b"t", b"r", FamilyRead::all(Family::Write)).await;
    assert_eq!(
        left.iter()
            .map(|c| (c.column.to_vec(), c.ts))
            .collect::<Vec<_>>(),
        vec![(b"c".to_vec(), 5), (b"c".to_vec(), 1), (b"d".to_vec(), 3)]
    );
}

/// The mutations of one row mutation apply in order: a later one on the same cell wins, and a
/// range delete takes the versions the same item put before it (in one row and in a batch of
/// distinct rows alike, on every family).
pub async fn mutations_apply_in_order<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    for family in Family::ALL {
        let item = |row: &[u8]| {
            row_mutation(
                b"t",
                row,
                vec![],
                vec![
                    put(family, b"c", 1, b"first"),
                    put(family, b"c", 1, b"second"),
                    Mutation::Delete {
                        family,
                        column: b(b"d"),
                        ts: 1,
                    },
                    put(family, b"d", 1, b"put after its delete"),
                    put(family, b"e", 1, b"deleted by the range"),
                    put(family, b"e", 2, b"deleted by the range"),
                    Mutation::DeleteRange {
                        family,
                        column: b(b"e"),
                        ts: TsRange::ALL,
                    },
                    put(family, b"f", 3, b"put before its delete"),
                    Mutation::Delete {
                        family,
                        column: b(b"f"),
                        ts: 3,
                    },
                ],
            )
        };
        // One item alone, then two items of distinct rows in one batch.
        assert!(apply(&*store, vec![item(b"r1")]).await[0].applied());
        let outcomes = apply(&*store, vec![item(b"r2"), item(b"r3")]).await;
        assert!(outcomes.iter().all(|o| o.applied()), "{outcomes:?}");
        for row in [&b"r1"[..], b"r2", b"r3"] {
            let cells = read(&*store, b"t", row, FamilyRead::all(family)).await;
            assert_eq!(
                summary(&cells),
                vec![
                    (b"c".to_vec(), 1, b"second".to_vec()),
                    (b"d".to_vec(), 1, b"put after its delete".to_vec()),
                ],
                "{family:?}, row {}",
                String::from_utf8_lossy(row)
            );
        }
    }
}

pub async fn invalid_input_rejects_whole_batch<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let limits = store.limits();
    let good = row_mutation(
        b"t",
        b"good",
        vec![],
        vec![put(Family::Data, b"c", 1, b"v")],
    );
    let bad_items = vec![
        row_mutation(b"", b"r", vec![], vec![put(Family::Data, b"c", 1, b"v")]),
        row_mutation(
            b"t",
            b"r",
            vec![],
            vec![put(
                Family::Data,
                b"c",
                1,
                &vec![7u8; limits.max_value_bytes + 1],
            )],
        ),
        row_mutation(
            b"t",
            &vec![b'k'; limits.max_key_bytes],
            vec![],
            vec![put(Family::Data, b"c", 1, b"v")],
        ),
    ];
    for bad in bad_items {
        let err = store
            .mutate_rows(vec![good.clone(), bad])
            .await
            .expect_err("invalid batch accepted");
        assert!(
            matches!(
                err,
                StoreError::InvalidInput(_) | StoreError::TooLarge { .. }
            ),
            "{err:?}"
        );
        assert!(
            read(&*store, b"t", b"good", FamilyRead::all(Family::Data))
                .await
                .is_empty(),
            "half-applied batch"
        );
    }
    // At the limit exactly is fine.
    let max_value = vec![1u8; limits.max_value_bytes.min(4 << 20)];
    apply(
        &*store,
        vec![row_mutation(
            b"t",
            b"big",
            vec![],
            vec![put(Family::Data, b"c", 1, &max_value)],
        )],
    )
    .await;
    assert_eq!(
        read(&*store, b"t", b"big", FamilyRead::all(Family::Data)).await[0]
            .value
            .len(),
        max_value.len()
    );
}

pub async fn arbitrary_bytes_round_trip<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let samples: Vec<&[u8]> = vec![
        b"",
        b"\x00",
        b"\xff\xfe\x00",
        b"\xc3\x28",
        b"12345678",
        b"123456789",
    ];
    for (i, row) in samples.iter().enumerate() {
        for column in &samples {
            let value = [row, column, &[i as u8][..]].concat();
            apply(
                &*store,
                vec![row_mutation(
                    b"\x00tbl\xff",
                    row,
                    vec![],
                    vec![
                        put(Family::Data, column, u64::MAX - 1, &value),
                        put(Family::Data, column, 0, b""),
                    ],
                )],
            )
            .await;
        }
    }
    for (i, row) in samples.iter().enumerate() {
        let cells = read(&*store, b"\x00tbl\xff", row, FamilyRead::all(Family::Data)).await;
        let mut columns: Vec<&[u8]> = samples.clone();
        columns.sort();
        columns.dedup();
        assert_eq!(cells.len(), columns.len() * 2);
        for (pair, column) in cells.chunks(2).zip(&columns) {
            assert_eq!(pair[0].column.as_ref(), *column);
            assert_eq!(pair[0].ts, u64::MAX - 1);
            assert_eq!(
                pair[0].value.as_ref(),
                [row, column, &[i as u8][..]].concat().as_slice()
            );
            assert_eq!(pair[1].ts, 0);
            assert!(pair[1].value.is_empty());
        }
    }
}

pub async fn concurrent_conditional_increments<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    const TASKS: u64 = 8;
    const EACH: u64 = 150;
    let mut handles = Vec::new();
    for _ in 0..TASKS {
        let store = Arc::clone(&store);
        handles.push(tokio::spawn(async move {
            let mut done = 0;
            while done < EACH {
                let current = read(
                    &*store,
                    b"t",
                    b"counter",
                    FamilyRead::all(Family::Data).max_versions(1),
                )
                .await;
                let (condition, next) = match current.first() {
                    None => (
                        Condition::Absent {
                            family: Family::Data,
                            column: b(b"n"),
                            ts: TsRange::at(0),
                        },
                        1u64,
                    ),
                    Some(c) => (
                        Condition::Equals {
                            family: Family::Data,
                            column: b(b"n"),
                            ts: 0,
                            value: c.value.clone(),
                        },
                        u64::from_be_bytes(c.value.as_ref().try_into().unwrap()) + 1,
                    ),
                };
                let outcome = apply(
                    &*store,
                    vec![row_mutation(
                        b"t",
                        b"counter",
                        vec![condition],
                        vec![put(Family::Data, b"n", 0, &next.to_be_bytes())],
                    )],
                )
                .await;
                if outcome[0].applied() {
                    done += 1;
                }
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    let cells = read(&*store, b"t", b"counter", FamilyRead::all(Family::Data)).await;
    assert_eq!(
        u64::from_be_bytes(cells[0].value.as_ref().try_into().unwrap()),
        TASKS * EACH,
        "lost update: conditional mutations were not atomic"
    );
    store.sync().await.expect("sync");
}

/// A row moving from one family to another in one row mutation (a commit: lock out, write record
/// in) never disappears from both for a reader that scans the first family and then the second:
/// rows locked when the lock scan starts are in the lock scan or in the following write scan.
/// (Snapshot scans rely on this; a backend whose scans find rows without the row latch must
/// publish the new family before withdrawing the old one.)
pub async fn lock_to_write_transition_never_hides_a_row<F: StoreFactory>(factory: &F) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    const ROWS: usize = 1500;
    const WRITERS: usize = 3;
    let store = factory.open().await;
    let row = |r: usize| Bytes::from(format!("r{r:05}"));
    // Per writer: the row it has locked and not yet started to commit.
    let current: Arc<Vec<AtomicUsize>> =
        Arc::new((0..WRITERS).map(|_| AtomicUsize::new(usize::MAX)).collect());
    // Checker rounds completed; writers wait for the checker now and then, so that the two
    // overlap even on a busy machine.
    let rounds = Arc::new(AtomicUsize::new(0));
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let store = Arc::clone(&store);
        let current = Arc::clone(&current);
        let rounds = Arc::clone(&rounds);
        writers.push(tokio::spawn(async move {
            for (i, r) in (w..ROWS).step_by(WRITERS).enumerate() {
                if i % 50 == 0 {
                    let seen = rounds.load(Ordering::SeqCst);
                    while rounds.load(Ordering::SeqCst) == seen {
                        tokio::task::yield_now().await;
                    }
                }
                let lock = row_mutation(
                    b"mv",
                    row(r).as_ref(),
                    vec![],
                    vec![put(Family::Lock, b"c", 1, b"l")],
                );
                store.mutate_rows(vec![lock]).await.unwrap();
                current[w].store(r, Ordering::SeqCst);
                tokio::task::yield_now().await;
                let commit = row_mutation(
                    b"mv",
                    row(r).as_ref(),
                    vec![Condition::Exists {
                        family: Family::Lock,
                        column: b(b"c"),
                        ts: 1,
                    }],
                    vec![
                        put(Family::Write, b"c", 2, b"w"),
                        Mutation::Delete {
                            family: Family::Lock,
                            column: b(b"c"),
                            ts: 1,
                        },
                    ],
                );
                store.mutate_rows(vec![commit]).await.unwrap();
            }
        }));
    }
    let scan = |family| Scan {
        snapshot_ts: None,
        table: b(b"mv"),
        start: Bound::Unbounded,
        end: Bound::Unbounded,
        read: FamilyRead::all(family),
        row_limit: None,
    };
    let mut checked = 0;
    while !writers.iter().all(|w| w.is_finished()) {
        let locked: Vec<usize> = current.iter().map(|c| c.load(Ordering::SeqCst)).collect();
        let locks = store.scan(scan(Family::Lock)).await.unwrap();
        let writes = store.scan(scan(Family::Write)).await.unwrap();
        for &r in locked.iter().filter(|&&r| r != usize::MAX) {
            checked += 1;
            assert!(
                locks.iter().chain(writes.iter()).any(|x| x.row == row(r)),
                "row {r} was locked when the lock scan began but is in neither scan"
            );
        }
        rounds.fetch_add(1, Ordering::SeqCst);
        tokio::task::yield_now().await;
    }
    for w in writers {
        w.await.unwrap();
    }
    assert!(checked > 0, "no row was observed mid-transition");
}

/// `tables` lists every table holding a cell in any family, once each, in byte order (tables
/// whose names are prefixes of each other or hold awkward bytes included).
pub async fn tables_lists_every_table<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let tables: [&[u8]; 5] = [b"a", b"a\x00", b"ab", b"\xff\x00t", b"zz"];
    for (i, table) in tables.iter().enumerate() {
        let family = Family::ALL[i % Family::ALL.len()];
        let items = (0..3)
            .map(|r| {
                row_mutation(
                    table,
                    format!("row{r}").as_bytes(),
                    vec![],
                    vec![put(family, b"c", 5, b"v")],
                )
            })
            .collect();
        apply(&*store, items).await;
    }
    let listed = store.tables().await.unwrap();
    let mut wanted: Vec<Bytes> = tables.iter().map(|t| b(t)).collect();
    wanted.sort();
    let user: Vec<Bytes> = listed
        .iter()
        .filter(|t| !t.starts_with(crate::tables::RESERVED_PREFIX))
        .cloned()
        .collect();
    assert_eq!(user, wanted, "listed {listed:?}");
    assert!(listed.is_sorted(), "{listed:?}");
}

/// `(column, ts)` of each cell of a row.
type Versions = Vec<(Vec<u8>, u64)>;

/// A scan with `max_versions` returns the newest versions in range of every column, also when
/// one column's history is longer than a backend's page (backends skip it instead of reading
/// it; the rows and columns after it must still come back).
pub async fn scan_max_versions_over_deep_history<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    const DEEP: u64 = 1_100;
    for row in [&b"r1"[..], b"r2"] {
        let mut items = Vec::new();
        // Column "a": DEEP versions, in batches within the backend's per-row operation limit.
        let per_row = store.limits().max_row_ops.clamp(1, 100) as u64;
        let mut ts = 1;
        while ts <= DEEP {
            let upto = (ts + per_row - 1).min(DEEP);
            items.push(row_mutation(
                b"deep",
                row,
                vec![],
                (ts..=upto)
                    .map(|t| put(Family::Write, b"a", t, b"v"))
                    .collect(),
            ));
            ts = upto + 1;
        }
        items.push(row_mutation(
            b"deep",
            row,
            vec![],
            (1..=3).map(|t| put(Family::Write, b"b", t, b"w")).collect(),
        ));
        for chunk in items.chunks(store.limits().max_batch_rows.min(64)) {
            apply(&*store, chunk.to_vec()).await;
        }
    }
    let scan = |read: FamilyRead| Scan {
        snapshot_ts: None,
        table: b(b"deep"),
        start: Bound::Unbounded,
        end: Bound::Unbounded,
        read,
        row_limit: None,
    };
    let rows = store
        .scan(scan(FamilyRead::all(Family::Write).max_versions(2)))
        .await
        .unwrap();
    let got: Vec<(Bytes, Versions)> = rows
        .iter()
        .map(|r| {
            (
                r.row.clone(),
                r.cells.iter().map(|c| (c.column.to_vec(), c.ts)).collect(),
            )
        })
        .collect();
    let want_row = vec![
        (b"a".to_vec(), DEEP),
        (b"a".to_vec(), DEEP - 1),
        (b"b".to_vec(), 3),
        (b"b".to_vec(), 2),
    ];
    assert_eq!(
        got,
        vec![(b(b"r1"), want_row.clone()), (b(b"r2"), want_row)],
        "newest two versions of every column"
    );
    let old = store
        .scan(scan(
            FamilyRead::all(Family::Write)
                .ts(TsRange::up_to(500))
                .max_versions(1),
        ))
        .await
        .unwrap();
    for row in &old {
        let cells: Versions = row
            .cells
            .iter()
            .map(|c| (c.column.to_vec(), c.ts))
            .collect();
        assert_eq!(cells, vec![(b"a".to_vec(), 500), (b"b".to_vec(), 3)]);
    }
    assert_eq!(old.len(), 2);
}

/// `mutate_rows_atomically`: all or nothing. A condition failing on the last row leaves every
/// row as it was; when all hold, every row changes; duplicate rows and batches over
/// `max_atomic_rows` are refused before anything applies. A store that cannot (limit 0)
/// refuses every batch, naming the limit.
pub async fn atomic_batches_apply_all_or_nothing<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let limit = store.limits().max_atomic_rows;
    let rows: Vec<&[u8]> = vec![b"a", b"b", b"c"];
    // Each row: put data "v" at 10 if no write record on "w" exists.
    let batch = |rows: &[&[u8]]| -> Vec<RowMutation> {
        rows.iter()
            .map(|row| {
                row_mutation(
                    b"t",
                    row,
                    vec![Condition::Absent {
                        family: Family::Write,
                        column: b(b"w"),
                        ts: TsRange::ALL,
                    }],
                    vec![put(Family::Data, b"v", 10, row)],
                )
            })
            .collect()
    };
    let store = &*store;
    if limit < rows.len() {
        let err = store
            .mutate_rows_atomically(batch(&rows))
            .await
            .expect_err("over the store's limit of atomic rows");
        assert!(
            matches!(err, StoreError::TooLarge { size: 3, limit: l, .. } if l == limit),
            "{err:?}"
        );
        for row in &rows {
            assert!(data_of(store, row).await.is_empty(), "nothing applied");
        }
        return;
    }
    // The last row's condition fails: nothing is applied, on any row.
    apply(
        store,
        vec![row_mutation(
            b"t",
            b"c",
            vec![],
            vec![put(Family::Write, b"w", 5, b"W")],
        )],
    )
    .await;
    let outcome = store.mutate_rows_atomically(batch(&rows)).await.unwrap();
    assert_eq!(
        outcome,
        crate::store::AtomicOutcome::ConditionFailed {
            item: 2,
            condition: 0
        }
    );
    for row in &rows {
        assert!(data_of(store, row).await.is_empty(), "row {row:?} changed");
    }
    // Every condition holds: every row changes.
    let outcome = store
        .mutate_rows_atomically(batch(&rows[..2]))
        .await
        .unwrap();
    assert_eq!(outcome, crate::store::AtomicOutcome::Applied);
    for row in &rows[..2] {
        assert_eq!(
            summary(&data_of(store, row).await),
            [(b"v".to_vec(), 10, row.to_vec())]
        );
    }
    // A row twice: refused, naming the row; nothing applied.
    let mut twice = batch(&[b"d", b"e"]);
    twice.push(twice[0].clone());
    let err = store
        .mutate_rows_atomically(twice)
        .await
        .expect_err("a row twice");
    assert!(
        matches!(&err, StoreError::InvalidInput(m) if m.contains("\"d\"")),
        "{err:?}"
    );
    assert!(data_of(store, b"d").await.is_empty());
    // One row over the limit: refused.
    let over: Vec<Vec<u8>> = (0..=limit).map(|i| format!("o{i}").into_bytes()).collect();
    let over: Vec<&[u8]> = over.iter().map(Vec::as_slice).collect();
    let err = store
        .mutate_rows_atomically(batch(&over))
        .await
        .expect_err("over the limit");
    assert!(
        matches!(err, StoreError::TooLarge { limit: l, .. } if l == limit),
        "{err:?}"
    );
    assert!(data_of(store, b"o0").await.is_empty());
}

/// The data cells of row `row` of table `t`.
async fn data_of<S: RowStore>(store: &S, row: &[u8]) -> Vec<Cell> {
    read(store, b"t", row, FamilyRead::all(Family::Data)).await
}
