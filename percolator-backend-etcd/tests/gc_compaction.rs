//! GC bounds etcd's own history too: `collect_garbage` compacts the cluster up to the revision
//! the previous run recorded, so old revisions of overwritten and deleted keys are dropped, while
//! every current key stays readable. Reported as skipped, with the reason, where etcd is not
//! installed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use bytes::Bytes;
use percolator_backend_etcd::{EtcdConfig, EtcdError, EtcdStore, proto};
use percolator_core::{Family, FamilyRead, Mutation, ReadRow, RowMutation, RowStore};
use percolator_etcd_cluster::{ClusterConfig, LocalCluster};
use percolator_testkit::{Harness, Needs};

fn put(round: u64) -> RowMutation {
    RowMutation {
        table: Bytes::from("t"),
        row: Bytes::from("r"),
        conditions: vec![],
        mutations: vec![Mutation::Put {
            family: Family::Data,
            column: Bytes::from("c"),
            ts: 1,
            value: Bytes::from(format!("round {round}")),
        }],
    }
}

async fn revision(store: &EtcdStore) -> i64 {
    let answer = store
        .client()
        .range(proto::RangeRequest {
            key: Bytes::from("anything"),
            ..proto::RangeRequest::default()
        })
        .await
        .unwrap();
    answer.header.unwrap().revision
}

async fn gc_compacts_etcd_history_up_to_the_previous_run() {
    let cluster = LocalCluster::start(ClusterConfig::default().with_members(1)).unwrap();
    let store = EtcdStore::connect(&EtcdConfig::new(cluster.endpoints()), b"gc")
        .await
        .unwrap();
    for round in 0..5 {
        store.mutate_rows(vec![put(round)]).await.unwrap();
    }
    let old = revision(&store).await;
    store.collect_garbage(0).await.unwrap(); // records the mark; nothing to compact yet
    for round in 5..10 {
        store.mutate_rows(vec![put(round)]).await.unwrap();
    }
    let old_read = proto::RangeRequest {
        key: Bytes::from("anything"),
        revision: old - 1,
        ..proto::RangeRequest::default()
    };
    store
        .client()
        .range(old_read.clone())
        .await
        .expect("history is kept until the next run");
    store.collect_garbage(0).await.unwrap(); // compacts up to the first run's mark
    match store.client().range(old_read).await {
        Err(EtcdError::Compacted(_)) => {}
        other => panic!("a read below the first run's mark should be compacted away: {other:?}"),
    }
    // Current data is untouched, and a third run (compacting to the second mark) still works.
    store.collect_garbage(0).await.unwrap();
    let cells = store
        .read_row(ReadRow {
            snapshot_ts: None,
            table: Bytes::from("t"),
            row: Bytes::from("r"),
            reads: vec![FamilyRead::all(Family::Data)],
        })
        .await
        .unwrap();
    assert_eq!(cells[0].len(), 1);
    assert_eq!(cells[0][0].value, Bytes::from("round 9"));
}

fn main() -> std::process::ExitCode {
    Harness::new(&[Needs::Etcd])
        .tokio(
            "gc_compacts_etcd_history_up_to_the_previous_run",
            2,
            gc_compacts_etcd_history_up_to_the_previous_run,
        )
        .run()
}
