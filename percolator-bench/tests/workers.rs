//! Worker scaling inside one process at smoke size: three runtimes share one store (mem and
//! fjall), first each running every dirty row it finds, then taking the paper's shared lock
//! before each row (a lock service in the process, one connection per runtime), then dividing
//! the rows (partitioned scanning). Asserts that all three index the crawl with every check
//! clean, that the lock service answered every request and kept workers off rows others held,
//! that the partitioned workers each ran a share and left the rest, and that their waste stays
//! under the bounds the etcd test uses (`percolator-cli/tests/workers.rs`) — no timing (the
//! figures come from `cargo xtask bench --workers 1,2,3 --backend fjall`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::sync::Arc;

use percolator_bench::workers::in_process::run_once;
use percolator_bench::workers::{Distribution, WorkersConfig, WorkersRun};
use percolator_core::conformance::fast_config;
use percolator_core::{Client, RowStore};

const MAX_CONFLICTS_PER_PROCESSED: f64 = 0.05;
const MAX_ALREADY_ACKNOWLEDGED: f64 = 0.05;

async fn three_workers<S: RowStore>(store: impl Fn() -> Arc<S>) -> Vec<WorkersRun> {
    let mut config = WorkersConfig::new(PathBuf::new(), vec![3], PathBuf::new());
    config.docs = 200;
    config.scanners = 2;
    config.concurrency = 8;
    assert_eq!(
        config.runs(),
        vec![
            (3, Distribution::EveryWorkerAll),
            (3, Distribution::LockService),
            (3, Distribution::Partitioned)
        ]
    );
    let mut runs = Vec::new();
    for (workers, distribution) in config.runs() {
        let store = store();
        let builder = || {
            Client::builder(Arc::clone(&store))
                .local_oracle()
                .config(fast_config())
        };
        runs.push(
            run_once(builder, &config, workers, distribution)
                .await
                .unwrap(),
        );
    }
    for run in &runs {
        eprintln!("{:?}: {:?}", run.distribution, run.per_worker);
        assert!(run.violations.is_empty(), "{:?}", run.violations);
        assert_eq!((run.doubled, run.pending, run.locks), (0, 0, 0), "{run:?}");
        assert_eq!(run.per_worker.len(), 3);
    }
    let (unpartitioned, lock_service, partitioned) = (&runs[0], &runs[1], &runs[2]);
    for worker in &lock_service.per_worker {
        assert_eq!(
            worker.lock_service_unavailable, 0,
            "the lock service answered every request: {worker:?}"
        );
        assert_eq!(worker.left_to_others, 0, "not partitioned: {worker:?}");
    }
    for worker in unpartitioned
        .per_worker
        .iter()
        .chain(&partitioned.per_worker)
    {
        assert_eq!(worker.held_elsewhere, 0, "no lock service: {worker:?}");
    }
    for worker in &partitioned.per_worker {
        assert!(
            worker.processed > 0 && worker.group_members == 3,
            "each ran its share: {worker:?}"
        );
    }
    assert!(
        partitioned.per_worker.iter().any(|w| w.left_to_others > 0),
        "no worker passed over another's row: {partitioned:?}"
    );
    for worker in &unpartitioned.per_worker {
        assert_eq!(
            worker.left_to_others, 0,
            "unpartitioned workers skip nothing"
        );
    }
    assert!(
        partitioned.conflicts_per_processed <= MAX_CONFLICTS_PER_PROCESSED,
        "{partitioned:?}"
    );
    assert!(
        partitioned.already_acknowledged_share <= MAX_ALREADY_ACKNOWLEDGED,
        "{partitioned:?}"
    );
    runs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_workers_share_one_mem_store() {
    three_workers(|| Arc::new(percolator_backend_mem::MemStore::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_workers_share_one_fjall_store() {
    let dirs: std::sync::Mutex<Vec<tempfile::TempDir>> = std::sync::Mutex::default();
    three_workers(|| {
        let dir = tempfile::tempdir().unwrap();
        let store = percolator_backend_fjall::FjallStore::open(dir.path()).unwrap();
        dirs.lock().unwrap().push(dir);
        Arc::new(store)
    })
    .await;
}
