//! Criterion benches of the Figure 8 building blocks on the in-memory store: each raw `RowStore`
//! operation beside the Percolator operation doing the same logical work (same group, so the
//! ratio reads off the report), plus the timestamp oracle. `cargo bench -p percolator-bench`.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use percolator_backend_mem::MemStore;
use percolator_bench::micro::raw_put;
use percolator_core::oracle::next_timestamp;
use percolator_core::{Client, Columns, Family, FamilyRead, ReadRow, RowStore};

const ROWS: u64 = 1_000;
const VALUE: &[u8] = b"0123456789abcdef";

fn row(i: u64) -> Bytes {
    Bytes::from(format!("row{:08}", i % ROWS))
}

fn setup(rt: &tokio::runtime::Runtime) -> (Arc<MemStore>, Client<MemStore>) {
    rt.block_on(async {
        let store = Arc::new(MemStore::new());
        let client = Client::open(Arc::clone(&store)).await.unwrap();
        let mut txn = client.begin().await.unwrap();
        for i in 0..ROWS {
            txn.set("txn", row(i), "v", VALUE).unwrap();
            store.mutate_rows(vec![raw_put(row(i), 1)]).await.unwrap();
        }
        txn.commit().await.unwrap();
        (store, client)
    })
}

fn figure8(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (store, client) = setup(&rt);
    let counter = AtomicU64::new(0);
    let next = || counter.fetch_add(1, Ordering::Relaxed);

    let mut writes = c.benchmark_group("single-cell write");
    writes
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(500))
        .sample_size(20);
    writes.bench_function("raw RowStore put", |b| {
        b.to_async(&rt).iter(|| async {
            let i = next();
            store
                .mutate_rows(vec![raw_put(row(i), i + 2)])
                .await
                .unwrap();
        })
    });
    writes.bench_function("percolator transaction", |b| {
        b.to_async(&rt).iter(|| async {
            let mut txn = client.begin().await.unwrap();
            txn.set("txn", row(next()), "v", VALUE).unwrap();
            txn.commit().await.unwrap();
        })
    });
    writes.bench_function("percolator 8-cell transaction", |b| {
        b.to_async(&rt).iter(|| async {
            let mut txn = client.begin().await.unwrap();
            for _ in 0..8 {
                txn.set("txn", row(next()), "v", VALUE).unwrap();
            }
            txn.commit().await.unwrap();
        })
    });
    writes.finish();

    let mut reads = c.benchmark_group("single-cell read");
    reads
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(500))
        .sample_size(20);
    reads.bench_function("raw RowStore read", |b| {
        b.to_async(&rt).iter(|| async {
            let cells = store
                .read_row(ReadRow {
                    snapshot_ts: None,
                    table: Bytes::from_static(b"bench_raw"),
                    row: row(next()),
                    reads: vec![
                        FamilyRead::all(Family::Data)
                            .columns(Columns::one(Bytes::from_static(b"v")))
                            .max_versions(1),
                    ],
                })
                .await
                .unwrap();
            black_box(cells);
        })
    });
    reads.bench_function("percolator snapshot read", |b| {
        b.to_async(&rt).iter(|| async {
            let txn = client.begin().await.unwrap();
            black_box(txn.get("txn", row(next()), "v").await.unwrap());
        })
    });
    reads.finish();

    let mut oracle = c.benchmark_group("oracle");
    oracle
        .measurement_time(Duration::from_secs(1))
        .warm_up_time(Duration::from_millis(300))
        .sample_size(20);
    let o = Arc::clone(client.oracle());
    oracle.bench_function("timestamp", |b| {
        b.to_async(&rt)
            .iter(|| async { black_box(next_timestamp(o.as_ref()).await.unwrap()) })
    });
    oracle.bench_function("batch of 64 timestamps", |b| {
        b.to_async(&rt)
            .iter(|| async { black_box(o.timestamps(64).await.unwrap()) })
    });
    oracle.finish();
}

criterion_group!(benches, figure8);
criterion_main!(benches);
