//! Worker runtimes sharing one store inside one process (mem, fjall: stores one process owns),
//! as several workers inside one `percolator serve` would: N [`Runtime`]s, each with a client
//! (and so a worker id and a lease) of its own, are started and their group formed; then the
//! crawl is loaded and they run until nothing is pending. The time is the load's and the
//! indexing's together, which overlap. With the lock service, one [`LockServer`] runs in the
//! process and each runtime connects to it, as separate worker processes would.

use std::time::{Duration, Instant};

use std::sync::Arc;

use percolator_core::{ClientBuilder, RowStore};
use percolator_lock_service::{LockServer, LockServerConfig, RemoteRowLocks};
use percolator_observers::{Runtime, RuntimeConfig, RuntimeError, SharedRowLocks};
use percolator_webindex::load::{LoadError, load_pages};
use percolator_webindex::synthetic::SyntheticCrawl;
use percolator_webindex::{observed_columns, observers};

use super::{Distribution, WorkerLine, WorkersConfig, WorkersRun};

/// One run on an empty store: `workers` runtimes sharing the rows by `distribution`, then the
/// crawl loaded with one more client, until idle; then the checks. `builder` makes every
/// client.
pub async fn run_once<S: RowStore>(
    builder: impl Fn() -> ClientBuilder<S>,
    config: &WorkersConfig,
    workers: usize,
    distribution: Distribution,
) -> Result<WorkersRun, RuntimeError> {
    let partitioned = distribution.partitioned();
    let lock_server = match distribution {
        Distribution::LockService => Some(
            LockServer::bind("127.0.0.1:0", LockServerConfig::default())
                .await
                .map_err(|e| {
                    RuntimeError::Txn(percolator_core::Error::Application(e.to_string()))
                })?,
        ),
        _ => None,
    };
    let base_config = RuntimeConfig::default()
        .with_scanners(config.scanners)
        .with_max_concurrent_runs(config.concurrency)
        .with_stages(percolator_webindex::pipeline::SCAN_STAGES)
        .with_partition_refresh(if partitioned {
            RuntimeConfig::default().partition_refresh
        } else {
            None
        });
    let mut configs = Vec::new();
    for _ in 0..workers {
        let locks = match &lock_server {
            Some(server) => Some(Arc::new(
                RemoteRowLocks::connect([server.local_addr().to_string()]).map_err(|e| {
                    RuntimeError::Txn(percolator_core::Error::Application(e.to_string()))
                })?,
            ) as Arc<dyn SharedRowLocks>),
            None => None,
        };
        configs.push(base_config.clone().with_shared_locks(locks));
    }
    let runtimes = futures::future::try_join_all(
        configs
            .into_iter()
            .map(|runtime_config| Runtime::start(builder(), observers(None), runtime_config)),
    )
    .await?;
    // A long-running deployment: the group has formed before the pages arrive. (Started on a
    // backlog, the first worker would run everything alone until the others joined.)
    if partitioned {
        while runtimes
            .iter()
            .any(|r| r.stats().group_members < workers as u64)
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    let began = Instant::now();
    let crawl = SyntheticCrawl::new(config.docs, config.seed);
    let loader = builder().observe_all(&observed_columns()).build().await?;
    let pages = crawl.initial().map(Ok::<_, std::convert::Infallible>);
    load_pages(&loader, pages, 16, |_, _| {})
        .await
        .map_err(|e| match e {
            LoadError::Txn(e) => RuntimeError::Txn(e),
            other => RuntimeError::Txn(percolator_core::Error::Application(other.to_string())),
        })?;
    for runtime in &runtimes {
        runtime.wait_idle(Duration::from_secs(6 * 3600)).await?;
    }
    let secs = began.elapsed().as_secs_f64();
    let mut per_worker = Vec::new();
    for runtime in runtimes {
        per_worker.push(WorkerLine::from_stats(&runtime.shutdown().await?));
    }
    let checks = crate::webindex::checks::index_checks(&loader).await?;
    loader.shutdown().await?;
    Ok(WorkersRun::from_lines(
        config.docs,
        workers,
        distribution,
        secs,
        per_worker,
        checks,
    ))
}
