//! The web-index experiments on a store: freshness (Figure 7), the soak and the scale run, each
//! with progress on stderr, a table on stdout and a JSON report.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use percolator_bench::webindex::{freshness, scale, soak};
use percolator_core::{Client, ClientBuilder, DynStore, TimestampOracle};
use percolator_observers::RuntimeConfig;
use percolator_registry::StoreSpec;

use crate::store::{BoxError, Opened, dir_bytes, write_json};

/// How many scanners and observer runs a worker uses.
#[derive(Args, Debug, Clone)]
pub struct WorkerArgs {
    /// Scanner tasks.
    #[arg(long, default_value_t = 4)]
    scanners: usize,
    /// Observer runs in flight.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
}

/// `percolator-bench freshness`.
#[derive(Args, Debug)]
pub struct FreshnessArgs {
    /// The store.
    #[arg(long, default_value = "mem")]
    store: StoreSpec,
    /// Repository size.
    #[arg(long, default_value_t = 2000)]
    docs: usize,
    /// Crawl rates, percent of the repository per simulated hour [default: 1,2,5,10,20,50,100;
    /// with --quick: 1,5,20,50].
    #[arg(long, value_delimiter = ',')]
    rates: Option<Vec<f64>>,
    /// Real seconds per simulated hour.
    #[arg(long, default_value_t = 2.0)]
    hour_secs: f64,
    /// Small and fast: 400 documents, one-second hours, and rates 1,5,20,50 unless --rates
    /// names others.
    #[arg(long)]
    quick: bool,
    /// Write the report as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    #[command(flatten)]
    workers: WorkerArgs,
}

/// `percolator-bench soak`.
#[derive(Args, Debug)]
pub struct SoakArgs {
    /// The store (empty: an embedded database directory is removed first).
    #[arg(long)]
    store: StoreSpec,
    /// Documents in the synthetic crawl.
    #[arg(long, default_value_t = 300)]
    docs: usize,
    /// Generations, the initial crawl included.
    #[arg(long, default_value_t = 200)]
    generations: u32,
    /// Fraction recrawled (with changed content) per generation.
    #[arg(long, default_value_t = 0.3)]
    recrawl: f64,
    /// Do not collect garbage (the baseline).
    #[arg(long)]
    no_gc: bool,
    /// Write the report as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    #[command(flatten)]
    workers: WorkerArgs,
}

/// `percolator-bench scale`.
#[derive(Args, Debug)]
pub struct ScaleArgs {
    /// The store (empty: an embedded database directory is removed first).
    #[arg(long)]
    store: StoreSpec,
    /// Documents in the synthetic crawl.
    #[arg(long, default_value_t = 50_000)]
    docs: usize,
    /// Small demo pages instead of realistic ones.
    #[arg(long)]
    demo_pages: bool,
    /// Write the report as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    #[command(flatten)]
    workers: WorkerArgs,
}

fn runtime_config(workers: &WorkerArgs) -> RuntimeConfig {
    RuntimeConfig::default()
        .with_scanners(workers.scanners)
        .with_max_concurrent_runs(workers.concurrency)
        .with_stages(percolator_webindex::pipeline::SCAN_STAGES)
}

/// A client builder on the opened store, with the oracle its cluster imposes or the local one.
pub(crate) fn builder(
    store: &Arc<DynStore>,
    oracle: &Option<Arc<dyn TimestampOracle>>,
) -> ClientBuilder<DynStore> {
    let builder = Client::builder(Arc::clone(store));
    match oracle {
        Some(oracle) => builder.oracle(Arc::clone(oracle)),
        None => builder.local_oracle(),
    }
}

/// A progress bar on stderr (hidden when stderr is not a terminal).
fn bar(len: u64, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(len).with_style(
        ProgressStyle::with_template(
            "{msg:>10} [{elapsed_precise}] {wide_bar} {pos}/{len} ({per_sec}, eta {eta})",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_message(what.to_owned());
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// A milestone line above `bar`, or on stderr when the bar is hidden (a log keeps it).
fn milestone(bar: &ProgressBar, line: &str) {
    if bar.is_hidden() {
        eprintln!("{line}");
    } else {
        bar.println(line);
    }
}

/// The freshness experiment: table and JSON.
pub async fn freshness(args: &FreshnessArgs, namespace: &str) -> Result<(), BoxError> {
    let mut config = freshness::FreshnessConfig::default();
    config.docs = args.docs;
    config.hour = Duration::from_secs_f64(args.hour_secs.max(0.01));
    config.runtime = runtime_config(&args.workers);
    config.rates_pct = match &args.rates {
        Some(rates) => rates.clone(),
        None if args.quick => vec![1.0, 5.0, 20.0, 50.0],
        None => vec![1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0],
    };
    if args.quick {
        config.docs = 400;
        config.hour = Duration::from_secs(1);
    }
    let opened = Opened::fresh(&args.store, namespace).await?;
    let report = freshness::run(
        builder(&opened.store(), &opened.oracle()),
        &config,
        |line| eprintln!("freshness: {line}"),
    )
    .await;
    opened.close();
    let report = report?;
    println!(
        "freshness on {} ({} documents; 1 simulated hour = {:.1} s; initial indexing {:.1} s; one \
         batch reclustering {:.0} ms, {} clusters):\n",
        report.backend,
        report.docs,
        report.hour_secs,
        report.initial_index_secs,
        report.batch_run_ms,
        report.batch_clusters
    );
    print!("{}", report.table());
    write_json(args.json.as_ref(), &report)
}

/// The soak: generation after generation, with a progress bar, a summary table and JSON.
pub async fn soak(args: &SoakArgs, namespace: &str) -> Result<(), BoxError> {
    let mut config = soak::SoakConfig::default();
    config.docs = args.docs;
    config.generations = args.generations;
    config.recrawl_fraction = args.recrawl;
    config.gc = !args.no_gc;
    config.runtime = runtime_config(&args.workers);
    let opened = Opened::fresh(&args.store, namespace).await?;
    let progress = bar(u64::from(args.generations), "generations");
    let dir = opened.dir().map(PathBuf::from);
    let report = soak::run(
        builder(&opened.store(), &opened.oracle()),
        &config,
        || dir.as_deref().map(dir_bytes),
        |g| {
            progress.inc(1);
            progress.set_message(format!("{} cells", g.cells));
        },
    )
    .await;
    progress.finish_and_clear();
    // The store is closed (the runtime shut down with the run) before an offline compaction.
    let dir = opened.dir().map(PathBuf::from);
    opened.keep();
    let compacted = match &report {
        Ok(_) => compact_after_soak(&args.store),
        Err(_) => Ok(None),
    };
    if let Some(dir) = dir {
        let _ = std::fs::remove_dir_all(dir);
    }
    let compacted = compacted?;
    let report = report?;
    println!(
        "soak on {} ({} documents, {:.0}% recrawled per generation, GC {}): cells grew {:.2}x \
         from the first generation to the last\n",
        report.backend,
        report.docs,
        report.recrawl_fraction * 100.0,
        if report.gc { "on" } else { "off" },
        report.growth()
    );
    let every = (report.generations.len() / 20).max(1);
    print!("{}", report.table(every));
    println!("\nWhere the cells are:\n");
    print!("{}", report.breakdown());
    let mut json = serde_json::to_value(&report)?;
    if let Some(compacted) = compacted {
        json["compact"] = compacted;
    }
    write_json(args.json.as_ref(), &json)
}

/// Where the store needs an offline compaction to give freed space back (sled), what it takes:
/// the live bytes and the directory's size after it. `None` where the backend manages its
/// space itself.
fn compact_after_soak(spec: &StoreSpec) -> Result<Option<serde_json::Value>, BoxError> {
    let report = match percolator_registry::compact(spec, |_| {}) {
        Ok(report) => report,
        Err(percolator_registry::CompactError::NotApplicable(_)) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    Ok(Some(serde_json::json!({
        "keys": report.keys,
        "live_bytes": report.live_bytes,
        "disk_bytes_before": report.disk_bytes_before,
        "disk_bytes_after": report.disk_bytes_after,
    })))
}

/// The scale run: load, run and check, with progress, a summary table and JSON; an error if the
/// index check found violations.
pub async fn scale(args: &ScaleArgs, namespace: &str) -> Result<(), BoxError> {
    use scale::{ScaleConfig, ScaleProgress};
    let mut config = ScaleConfig::default();
    config.docs = args.docs;
    if args.demo_pages {
        config.shape = percolator_webindex::synthetic::Shape::Demo;
    }
    config.runtime = runtime_config(&args.workers);
    let opened = Opened::fresh(&args.store, namespace).await?;
    let (store, oracle) = (opened.store(), opened.oracle());
    let dir = opened.dir().map(PathBuf::from);
    let progress = bar(args.docs as u64, "load");
    let report = scale::run(
        || builder(&store, &oracle),
        &config,
        || dir.as_deref().map(dir_bytes),
        |event| match event {
            ScaleProgress::Loaded(n) => progress.set_position(n),
            ScaleProgress::Running(seconds, processed) => {
                progress.set_message(format!("run: {seconds:.0} s, {processed} observer txns"));
            }
            ScaleProgress::Ran(seconds, processed) => milestone(
                &progress,
                &format!(
                    "run idle after {seconds:.1} s: {processed} observer txns, {:.0} pages/s",
                    args.docs as f64 / seconds.max(1e-9)
                ),
            ),
            ScaleProgress::Querying => progress.set_message("queries"),
            ScaleProgress::Queried(n, p50, p99) => milestone(
                &progress,
                &format!("{n} queries: p50 {p50:.1} ms, p99 {p99:.1} ms"),
            ),
            ScaleProgress::Checking => progress.set_message("check"),
            _ => {}
        },
    )
    .await;
    progress.finish_and_clear();
    drop((store, oracle));
    opened.close();
    let report = report?;
    print!("{}", report.table());
    for violation in report.violations.iter().take(10) {
        println!("violation: {violation}");
    }
    write_json(args.json.as_ref(), &report)?;
    if report.violations.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the index check found {} violation(s)",
            report.violations.len()
        )
        .into())
    }
}

/// `percolator-bench rust-docs`.
#[derive(Args, Debug)]
pub struct RustDocsArgs {
    /// The store (empty: an embedded database directory is removed first).
    #[arg(long)]
    store: StoreSpec,
    /// Every page of the docs (about 48 000), not CI's subset (the book and 49 std pages).
    #[arg(long)]
    full: bool,
    /// More rerank pools to rank each first page with, besides before and now (comma
    /// separated).
    #[arg(long, value_delimiter = ',')]
    pools: Vec<usize>,
    /// Write the report as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    #[command(flatten)]
    workers: WorkerArgs,
}

/// The relevance set on the Rust docs: index them with the whole pipeline, then rank every
/// judged query (see `percolator_bench::webindex::rust_docs`).
pub async fn rust_docs(args: &RustDocsArgs, namespace: &str) -> Result<(), BoxError> {
    use percolator_bench::webindex::rust_docs::{self, Corpus, Ranking};
    let dir = rust_docs::docs_dir().ok_or(
        "the Rust toolchain's HTML docs are not installed (rustup component add rust-docs)",
    )?;
    let corpus = if args.full {
        Corpus::Full
    } else {
        Corpus::Subset
    };
    let opened = Opened::fresh(&args.store, namespace).await?;
    let (store, oracle) = (opened.store(), opened.oracle());
    let runtime = percolator_observers::Runtime::start(
        builder(&store, &oracle),
        percolator_webindex::observers(None),
        runtime_config(&args.workers),
    )
    .await?;
    let loader = builder(&store, &oracle)
        .observe_all(&percolator_webindex::observed_columns())
        .build()
        .await?;
    let progress = bar(0, "load");
    let began = std::time::Instant::now();
    let ingest = std::sync::Mutex::new(rust_docs::Ingest::default());
    let pages = rust_docs::pages(&dir, corpus)?.inspect(|page| {
        if let (Ok(page), Ok(mut ingest)) = (page, ingest.lock()) {
            ingest.count(page);
        }
    });
    let loaded =
        percolator_webindex::load_pages(&loader, pages, 16, |_, _| progress.inc(1)).await?;
    progress.set_message("index");
    runtime.wait_idle(Duration::from_secs(6 * 3600)).await?;
    let mut ingest = ingest.into_inner().unwrap_or_default();
    ingest.cut = loaded.cut as u64;
    ingest.seconds = began.elapsed().as_secs_f64();
    milestone(
        &progress,
        &format!(
            "{} pages loaded and indexed in {:.1} s",
            loaded.loaded,
            began.elapsed().as_secs_f64()
        ),
    );
    progress.set_message("queries");
    let mut rankings = vec![Ranking::BEFORE, Ranking::NOW, Ranking::POINTERS_AS_SCORED];
    for &pool in &args.pools {
        rankings.push(Ranking {
            // Lives for the process: a handful of names.
            name: Box::leak(format!("pool {pool}").into_boxed_str()),
            pool,
            length_floor: Ranking::NOW.length_floor,
            pointers_below: Ranking::NOW.pointers_below,
        });
    }
    let report = rust_docs::evaluate(&loader, corpus, &rankings).await;
    progress.finish_and_clear();
    runtime.shutdown().await?;
    loader.shutdown().await?;
    drop((store, oracle));
    opened.close();
    let mut report = report?;
    report.ingest = Some(ingest);
    print!("{}", report.table());
    write_json(args.json.as_ref(), &report)?;
    let failures = report.paging_failures();
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "paging went wrong for {} queries: {failures:?}",
            failures.len()
        )
        .into())
    }
}
