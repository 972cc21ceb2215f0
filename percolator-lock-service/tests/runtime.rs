//! The lock service under observer runtimes on one `MemStore`: two unpartitioned workers that
//! share it run every change once between them and never hear `Unavailable`; a worker whose
//! service is unreachable still runs everything (the service is advisory: it fails open).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use percolator_backend_mem::MemStore;
use percolator_core::{Client, ObservedColumn, RowStore, Transaction};
use percolator_lock_service::{LockServer, LockServerConfig, RemoteRowLocks};
use percolator_observers::{Change, Observer, Observers, Runtime, RuntimeConfig, SharedRowLocks};

const ROWS: usize = 300;

/// Copies `docs/contents` to `copies/<row>/copy`.
struct Copy;

#[async_trait]
impl<S: RowStore> Observer<S> for Copy {
    fn name(&self) -> &str {
        "copy"
    }

    fn observed(&self) -> ObservedColumn {
        ObservedColumn::strong("docs", "contents")
    }

    async fn observe(
        &self,
        txn: &mut Transaction<S>,
        change: &Change,
    ) -> percolator_core::Result<()> {
        let value = change.value.clone().unwrap_or_default();
        txn.set("copies", &change.row, "copy", value)
    }
}

fn observers() -> Observers<MemStore> {
    let mut observers = Observers::new();
    observers.register(Copy).unwrap();
    observers
}

fn config(locks: RemoteRowLocks) -> RuntimeConfig {
    RuntimeConfig::default()
        .with_scanners(2)
        .with_partition_refresh(None)
        .with_shared_locks(Some(Arc::new(locks) as Arc<dyn SharedRowLocks>))
}

async fn write_rows(client: &Client<MemStore>) {
    for i in 0..ROWS {
        let mut txn = client.begin().await.unwrap();
        txn.set("docs", format!("row{i:04}"), "contents", format!("v{i}"))
            .unwrap();
        txn.commit().await.unwrap();
    }
}

async fn assert_all_copied(client: &Client<MemStore>) {
    let txn = client.begin().await.unwrap();
    for i in 0..ROWS {
        let copy = txn
            .get("copies", format!("row{i:04}"), "copy")
            .await
            .unwrap();
        assert_eq!(
            copy.as_deref(),
            Some(format!("v{i}").as_bytes()),
            "row{i:04}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workers_share_the_rows_through_the_service() {
    let server = LockServer::bind("127.0.0.1:0", LockServerConfig::default())
        .await
        .unwrap();
    let store = Arc::new(MemStore::new());
    let address = server.local_addr().to_string();
    let mut runtimes = Vec::new();
    for _ in 0..2 {
        let locks = RemoteRowLocks::connect([address.clone()]).unwrap();
        runtimes.push(
            Runtime::start(
                Client::builder(Arc::clone(&store)),
                observers(),
                config(locks),
            )
            .await
            .unwrap(),
        );
    }
    let writer = runtimes[0].client().clone();
    write_rows(&writer).await;
    for runtime in &runtimes {
        runtime.wait_idle(Duration::from_secs(60)).await.unwrap();
    }
    assert_all_copied(&writer).await;
    let mut processed = 0;
    for runtime in runtimes {
        let stats = runtime.shutdown().await.unwrap();
        assert_eq!(stats.lock_service_unavailable, 0, "{stats:?}");
        assert_eq!(stats.left_to_others, 0, "not partitioned");
        processed += stats.notifications_processed;
    }
    assert_eq!(processed, ROWS as u64, "each change committed once");
    let served = server.stats();
    assert!(served.granted >= ROWS as u64, "{served:?}");
    assert_eq!(served.held, 0, "every lock released at the end: {served:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_service_costs_nothing_but_the_lock() {
    let address = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().to_string()
    };
    let store = Arc::new(MemStore::new());
    let locks = RemoteRowLocks::connect([address]).unwrap();
    let runtime = Runtime::start(
        Client::builder(Arc::clone(&store)),
        observers(),
        config(locks),
    )
    .await
    .unwrap();
    let writer = runtime.client().clone();
    write_rows(&writer).await;
    runtime.wait_idle(Duration::from_secs(60)).await.unwrap();
    assert_all_copied(&writer).await;
    let stats = runtime.shutdown().await.unwrap();
    assert!(stats.lock_service_unavailable > 0, "{stats:?}");
    assert_eq!(stats.held_elsewhere, 0, "{stats:?}");
}
