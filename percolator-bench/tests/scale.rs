//! The scale run at smoke size: realistic pages loaded, indexed until idle and checked, on mem,
//! sled and fjall. Asserts that it completes, that every page was indexed and that the invariants
//! hold — no timing (the figures come from `cargo xtask bench --scale`) but one ratio: the
//! check's cost per page at four times the pages against its cost at one.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use percolator_bench::webindex::scale::{self, ScaleConfig, ScaleReport};
use percolator_core::conformance::fast_config;
use percolator_core::{Client, RowStore};
use percolator_observers::RuntimeConfig;

const DOCS: usize = 120;

async fn scale_run<S: RowStore>(store: Arc<S>, disk: impl Fn() -> Option<u64>) -> ScaleReport {
    scale_run_of(DOCS, store, disk).await
}

async fn scale_run_of<S: RowStore>(
    docs: usize,
    store: Arc<S>,
    disk: impl Fn() -> Option<u64>,
) -> ScaleReport {
    let mut config = ScaleConfig::default();
    config.docs = docs;
    config.runtime = RuntimeConfig::default()
        .with_scanners(2)
        .with_idle_sleep_max(Duration::from_millis(10));
    config.sample_every = Duration::from_millis(200);
    config.timeout = Duration::from_secs(600);
    let report = scale::run(
        || {
            Client::builder(Arc::clone(&store))
                .local_oracle()
                .config(fast_config())
        },
        &config,
        disk,
        |_| {},
    )
    .await
    .expect("scale run");
    eprintln!("{}", report.table());
    report
}

fn assert_complete(report: &ScaleReport) {
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    assert_eq!(report.summary.documents, DOCS);
    assert_eq!(report.summary.processed, DOCS, "every page indexed");
    assert!(
        report.html_bytes > (DOCS * 5_000) as u64,
        "realistic pages: {} bytes of HTML",
        report.html_bytes
    );
    assert!(report.notifications_processed >= DOCS as u64);
    let last = report.samples.last().expect("a final sample");
    assert_eq!(last.processed, report.notifications_processed);
    assert!(report.quarters.iter().sum::<f64>() > 0.0);
    if cfg!(target_os = "linux") {
        // Loading and indexing 120 realistic pages costs CPU in both phases.
        assert!(
            report
                .cpu_seconds
                .iter()
                .all(|s| s.is_some_and(|s| s > 0.0)),
            "{:?}",
            report.cpu_seconds
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn realistic_pages_index_completely_on_mem() {
    let report = scale_run(Arc::new(percolator_backend_mem::MemStore::new()), || None).await;
    assert_complete(&report);
    assert_eq!(report.disk_bytes, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn realistic_pages_index_completely_on_sled() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(percolator_backend_sled::SledStore::open(dir.path()).unwrap());
    let path = dir.path().to_owned();
    let report = scale_run(store, move || {
        Some(percolator_backend_sled::compact::dir_bytes(&path))
    })
    .await;
    assert_complete(&report);
    assert!(report.disk_per_html.is_some_and(|r| r > 0.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn realistic_pages_index_completely_on_fjall() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(percolator_backend_fjall::FjallStore::open(dir.path()).unwrap());
    let path = dir.path().to_owned();
    let report = scale_run(store, move || {
        Some(percolator_backend_sled::compact::dir_bytes(&path))
    })
    .await;
    assert_complete(&report);
    assert!(report.disk_per_html.is_some_and(|r| r > 0.0));
}

/// The full check (every invariant and the strong-run audit) costs in proportion to the data:
/// on fjall, its CPU per page at 4× the pages is under twice its CPU per page at 1× (a check
/// whose cost grows with the square of the data would be 4×). CPU of this process rather than
/// wall time, so that other tests on the machine do not count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_check_costs_in_proportion_to_the_data_on_fjall() {
    let mut per_page = Vec::new();
    for docs in [80, 320] {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(percolator_backend_fjall::FjallStore::open(dir.path()).unwrap());
        let report = scale_run_of(docs, store, || None).await;
        assert!(report.violations.is_empty(), "{:?}", report.violations);
        assert_eq!(report.summary.processed, docs);
        let cost = report.check_cpu_seconds.unwrap_or(report.check_seconds);
        eprintln!(
            "{docs} pages: check {:.2} s wall, {cost:.2} s CPU, run {:.2} s",
            report.check_seconds, report.run_seconds
        );
        per_page.push(cost / docs as f64);
    }
    let growth = per_page[1] / per_page[0];
    assert!(
        growth < 2.0,
        "the check's cost per page grew {growth:.2}× from 80 to 320 pages"
    );
}
