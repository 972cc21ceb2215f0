//! The freshness experiment: the paper's Figure 7 in miniature.
//!
//! A repository of `docs` documents is loaded and indexed. Then, for each crawl rate (percent of
//! the repository recrawled per simulated hour, with changed content), the recrawled pages are
//! loaded at an even pace over one simulated hour while the pipeline runs, and for every page
//! we measure the time from its load commit to the clusterer's commit that puts it in the
//! cluster of its new content hash (its "clustered state").
//!
//! The batch baseline recomputes the clustering over the whole repository: one snapshot read of
//! every document, parse, hash, group, pick canonicals, and write the cluster table (fewer steps
//! than the incremental pipeline, which also inverts links and exports the index). A document
//! crawled while batch runs follow each other back to back waits for the running batch to end
//! and then for a whole batch: uniformly `[1, 2]` batch durations, median **1.5 × batch run
//! time**, whatever the crawl rate. The incremental latency does not depend on the repository
//! size until the crawl rate exceeds what the workers can process.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::future::BoxFuture;
use percolator_core::{Client, ClientBuilder, Columns, Result, RowStore};
use serde::Serialize;
use tokio::sync::mpsc;

use percolator_observers::{Runtime, RuntimeConfig, RuntimeError};
use percolator_webindex::html::parse_page;
use percolator_webindex::load::{PageOutcome, load_page};
use percolator_webindex::pipeline::{Clustered, observers};
use percolator_webindex::schema::{DOCUMENTS, RAW, choose_canonical};
use percolator_webindex::synthetic::SyntheticCrawl;

/// Parameters of the experiment.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct FreshnessConfig {
    /// Repository size.
    pub docs: usize,
    /// Crawl rates, percent of the repository per simulated hour, in increasing order.
    pub rates_pct: Vec<f64>,
    /// Real time standing for one simulated hour.
    pub hour: Duration,
    /// Seed of the synthetic crawl.
    pub seed: u64,
    /// Loader transactions in flight during the initial load.
    pub load_concurrency: usize,
    /// The pipeline's runtime.
    pub runtime: RuntimeConfig,
    /// Longest wait for the pipeline to go idle or for a rate's documents to be clustered.
    pub timeout: Duration,
}

impl Default for FreshnessConfig {
    fn default() -> Self {
        Self {
            docs: 2000,
            rates_pct: vec![1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0],
            hour: Duration::from_secs(2),
            seed: 7,
            load_concurrency: 16,
            runtime: RuntimeConfig::default()
                .with_stages(percolator_webindex::pipeline::SCAN_STAGES),
            timeout: Duration::from_secs(600),
        }
    }
}

/// One crawl rate's result.
#[derive(Debug, Clone, Serialize)]
pub struct FreshnessPoint {
    /// Percent of the repository recrawled per simulated hour.
    pub rate_pct_per_hour: f64,
    /// Pages recrawled (loaded with changed content).
    pub recrawled: usize,
    /// Of those, pages whose clustered state was observed.
    pub measured: usize,
    /// Median load → clustered latency of the incremental pipeline, milliseconds.
    pub incremental_p50_ms: f64,
    /// 90th percentile of the same.
    pub incremental_p90_ms: f64,
    /// Median latency of back-to-back batch reclustering (1.5 × batch run time), milliseconds.
    pub batch_p50_ms: f64,
    /// Observer transactions per second while this rate ran.
    pub notifications_per_sec: f64,
}

/// The experiment's result.
#[derive(Debug, Clone, Serialize)]
pub struct FreshnessReport {
    /// Backend name.
    pub backend: String,
    /// Repository size.
    pub docs: usize,
    /// Real seconds per simulated hour.
    pub hour_secs: f64,
    /// Initial load and indexing time, seconds.
    pub initial_index_secs: f64,
    /// One batch reclustering of the whole repository, milliseconds.
    pub batch_run_ms: f64,
    /// Clusters the batch found.
    pub batch_clusters: usize,
    /// One point per crawl rate.
    pub points: Vec<FreshnessPoint>,
    /// Collapse ratio of the whole run (notify versions per observer commit).
    pub collapse_ratio: f64,
}

impl FreshnessReport {
    /// A markdown table of the points.
    pub fn table(&self) -> String {
        let mut out = String::from(
            "| crawl rate (%/h) | recrawled | incremental p50 | incremental p90 | batch p50 | batch ÷ incremental | observer txns/s |\n|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        for p in &self.points {
            out.push_str(&format!(
                "| {:.0} | {} | {:.1} ms | {:.1} ms | {:.1} ms | {:.1}× | {:.0} |\n",
                p.rate_pct_per_hour,
                p.recrawled,
                p.incremental_p50_ms,
                p.incremental_p90_ms,
                p.batch_p50_ms,
                p.batch_p50_ms / p.incremental_p50_ms.max(0.001),
                p.notifications_per_sec,
            ));
        }
        out
    }
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Runs the experiment with a worker built from `client` on its store (which should be
/// empty), reporting progress lines.
pub async fn run<S: RowStore>(
    client: ClientBuilder<S>,
    config: &FreshnessConfig,
    progress: impl Fn(&str),
) -> std::result::Result<FreshnessReport, RuntimeError> {
    let (probe, mut clustered) = mpsc::unbounded_channel::<Clustered>();
    let runtime = Runtime::start(client, observers(Some(probe)), config.runtime.clone()).await?;
    let backend = runtime.client().store().name().to_owned();
    let client = runtime.client().clone();
    let crawl = SyntheticCrawl::new(config.docs, config.seed);

    progress(&format!("loading and indexing {} documents", config.docs));
    let began = Instant::now();
    let pages = crawl.initial().map(Ok::<_, std::convert::Infallible>);
    percolator_webindex::load::load_pages(&client, pages, config.load_concurrency, |_, _| {})
        .await
        .map_err(|e| match e {
            percolator_webindex::load::LoadError::Txn(e) => RuntimeError::Txn(e),
            other => RuntimeError::Txn(percolator_core::Error::Application(other.to_string())),
        })?;
    runtime.wait_idle(config.timeout).await?;
    let initial_index_secs = began.elapsed().as_secs_f64();
    while clustered.try_recv().is_ok() {}

    progress("batch reclustering of the whole repository");
    let (batch_run, batch_clusters) = batch_recluster(&client).await?;
    let batch_run_ms = batch_run.as_secs_f64() * 1e3;

    let mut points = Vec::new();
    for (i, &rate) in config.rates_pct.iter().enumerate() {
        let generation = u32::try_from(i + 1).unwrap_or(u32::MAX);
        let pages = crawl.recrawl(generation, rate / 100.0);
        progress(&format!(
            "crawl rate {rate}%/h: {} pages over {:?}",
            pages.len(),
            config.hour
        ));
        let expected: HashMap<Bytes, Bytes> = pages
            .iter()
            .map(|p| {
                let hash = parse_page(&p.url, &p.html).content_hash;
                (Bytes::from(p.url.clone()), Bytes::from(hash))
            })
            .collect();
        let processed_before = runtime.stats().notifications_processed;
        let rate_began = Instant::now();
        let loaded = paced_load(&client, pages, config.hour).await?;
        let mut latencies = Vec::new();
        let mut waiting: BTreeMap<Bytes, Instant> = loaded;
        let deadline = Instant::now() + config.timeout;
        while !waiting.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, clustered.recv()).await {
                Ok(Some(event)) => {
                    let done = event.hash.as_ref() == expected.get(&event.url);
                    if done && let Some(loaded_at) = waiting.remove(&event.url) {
                        latencies.push(
                            event.at.saturating_duration_since(loaded_at).as_secs_f64() * 1e3,
                        );
                    }
                }
                Ok(None) | Err(_) => break,
            }
        }
        runtime.wait_idle(config.timeout).await?;
        let elapsed = rate_began.elapsed().as_secs_f64();
        let processed = runtime.stats().notifications_processed - processed_before;
        while clustered.try_recv().is_ok() {}
        latencies.sort_by(f64::total_cmp);
        points.push(FreshnessPoint {
            rate_pct_per_hour: rate,
            recrawled: expected.len(),
            measured: latencies.len(),
            incremental_p50_ms: percentile(&latencies, 0.5),
            incremental_p90_ms: percentile(&latencies, 0.9),
            batch_p50_ms: 1.5 * batch_run_ms,
            notifications_per_sec: processed as f64 / elapsed.max(1e-9),
        });
    }
    let stats = runtime.shutdown().await?;
    Ok(FreshnessReport {
        backend,
        docs: config.docs,
        hour_secs: config.hour.as_secs_f64(),
        initial_index_secs,
        batch_run_ms,
        batch_clusters,
        points,
        collapse_ratio: stats.collapse_ratio(),
    })
}

/// Loads `pages` evenly spread over `span`; returns when each changed page's load committed.
async fn paced_load<S: RowStore>(
    client: &Client<S>,
    pages: Vec<percolator_webindex::sources::CrawledPage>,
    span: Duration,
) -> Result<BTreeMap<Bytes, Instant>> {
    let began = tokio::time::Instant::now();
    let gap = span / u32::try_from(pages.len().max(1)).unwrap_or(u32::MAX);
    let mut tasks = tokio::task::JoinSet::new();
    for (i, page) in pages.into_iter().enumerate() {
        let client = client.clone();
        let at = began + gap * u32::try_from(i).unwrap_or(u32::MAX);
        tasks.spawn(async move {
            tokio::time::sleep_until(at).await;
            let url = Bytes::from(page.url.clone());
            let outcome = load_page(&client, page).await?;
            Ok::<_, percolator_core::Error>((url, outcome, Instant::now()))
        });
    }
    let mut loaded = BTreeMap::new();
    while let Some(joined) = tasks.join_next().await {
        let (url, outcome, at) = joined
            .map_err(|e| percolator_core::Error::Application(format!("loader task: {e}")))??;
        if outcome == PageOutcome::Loaded {
            loaded.insert(url, at);
        }
    }
    Ok(loaded)
}

/// Recomputes the clustering of the whole repository in one pass; returns the run time and the
/// number of clusters. Results go to the `batch_clusters` table, 256 rows per transaction.
pub async fn batch_recluster<S: RowStore>(client: &Client<S>) -> Result<(Duration, usize)> {
    let began = Instant::now();
    let txn = client.begin().await?;
    let docs = txn.scan::<Bytes>(DOCUMENTS, .., Columns::one(RAW)).await?;
    drop(txn);
    let mut clusters: BTreeMap<String, Vec<(Bytes, Bytes)>> = BTreeMap::new();
    for doc in docs {
        let page = parse_page(&String::from_utf8_lossy(&doc.row), &doc.value);
        let declared = Bytes::from(page.canonical.unwrap_or_default());
        clusters
            .entry(page.content_hash)
            .or_default()
            .push((doc.row, declared));
    }
    let rows: Vec<(String, Bytes)> = clusters
        .iter()
        .filter_map(|(hash, members)| {
            choose_canonical(members.iter().map(|(u, d)| (u, d))).map(|c| (hash.clone(), c.clone()))
        })
        .collect();
    for chunk in rows.chunks(256) {
        let chunk = chunk.to_vec();
        client
            .run(|txn| -> BoxFuture<'_, Result<()>> {
                let chunk = chunk.clone();
                Box::pin(async move {
                    for (hash, canonical) in chunk {
                        txn.set(BATCH_CLUSTERS, hash, "canonical", canonical)?;
                    }
                    Ok(())
                })
            })
            .await?;
    }
    Ok((began.elapsed(), rows.len()))
}

/// Where [`batch_recluster`] writes its result.
pub const BATCH_CLUSTERS: &[u8] = b"batch_clusters";
