//! Bounded storage: the pipeline through 50 recrawl generations with garbage collection after
//! each keeps the stored cells within twice what the first generation left,
//! on mem, sled and fjall. A count, not a time. Without GC the same run grows with every generation
//! (shown, for fewer generations, so that the bound is known to be able to fail).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use percolator_bench::webindex::soak::{self, SoakConfig, SoakReport};
use percolator_core::conformance::fast_config;
use percolator_core::{Client, RowStore};
use percolator_observers::RuntimeConfig;
use percolator_webindex::PipelineConfig;

fn config(generations: u32, gc: bool) -> SoakConfig {
    let mut config = SoakConfig::default();
    config.docs = 60;
    config.generations = generations;
    config.recrawl_fraction = 0.5;
    config.gc = gc;
    config.runtime = RuntimeConfig::default()
        .with_scanners(2)
        .with_idle_sleep_max(Duration::from_millis(10));
    // Generations are small: a short inverter delay keeps 50 of them quick.
    config.pipeline = PipelineConfig::default().with_invert_delay(Duration::from_millis(50));
    config.timeout = Duration::from_secs(120);
    config
}

async fn soak<S: RowStore>(store: Arc<S>, config: &SoakConfig) -> SoakReport {
    let client = Client::builder(store).local_oracle().config(fast_config());
    soak::run(
        client,
        config,
        || None,
        |g| {
            eprintln!(
                "generation {}: {} pages, {} cells, {} GC-deleted",
                g.generation, g.pages_loaded, g.cells, g.gc_cells_deleted
            );
        },
    )
    .await
    .expect("soak run")
}

fn assert_bounded(report: &SoakReport) {
    let first = report.generations[0].cells;
    for g in &report.generations {
        assert!(
            g.cells <= 2 * first,
            "{}: generation {} stores {} cells, more than twice the {first} after the first:\n{}",
            report.backend,
            g.generation,
            g.cells,
            report.table(5)
        );
    }
    assert!(
        report
            .generations
            .iter()
            .skip(1)
            .all(|g| g.pages_loaded > 0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_generations_stay_bounded_on_mem() {
    let store = Arc::new(percolator_backend_mem::MemStore::new());
    let report = soak(store, &config(50, true)).await;
    assert_eq!(report.generations.len(), 50);
    assert_bounded(&report);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_generations_stay_bounded_on_sled() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(percolator_backend_sled::SledStore::open(dir.path()).unwrap());
    let report = soak(store, &config(50, true)).await;
    assert_eq!(report.generations.len(), 50);
    assert_bounded(&report);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_generations_stay_bounded_on_fjall() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(percolator_backend_fjall::FjallStore::open(dir.path()).unwrap());
    let report = soak(store, &config(50, true)).await;
    assert_eq!(report.generations.len(), 50);
    assert_bounded(&report);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_gc_storage_grows() {
    let store = Arc::new(percolator_backend_mem::MemStore::new());
    let report = soak(store, &config(8, false)).await;
    let first = report.generations[0].cells;
    let last = report.generations[7].cells;
    assert!(
        last > first + first / 2,
        "8 generations without GC should grow the store well past the first's {first} cells, got {last}:\n{}",
        report.table(1)
    );
}
