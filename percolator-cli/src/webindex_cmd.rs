//! `percolator webindex …`: load, run, query, check and time the web-indexing pipeline.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::{Args, Subcommand};
use parking_lot::Mutex;
use percolator_core::{Client, GcConfig, RowStore, TimestampOracle, TxnConfig};
use percolator_observers::{GcSchedule, Runtime, RuntimeConfig, RuntimeStats, audit};
use percolator_webindex::{
    self as webindex, Clustered, CrawledPage, LoadReport, Mode, PageOutcome, SearchOptions,
    freshness, sources, synthetic::SyntheticCrawl, warc,
};
use tokio::sync::mpsc;

use crate::output::{bar, milestone, ms, table, write_json};
use crate::{CliError, client_builder};

#[derive(Subcommand, Debug)]
pub enum WebindexCommand {
    /// Load a synthetic crawl, index it, recrawl part of it, index again, check the invariants,
    /// run sample queries and print a summary.
    Demo(DemoArgs),
    /// Load pages (synthetic, a directory of HTML files, WARC files) into `documents`.
    Load(LoadArgs),
    /// Run the observers until nothing is pending (or until Ctrl-C with --forever).
    Run(RunArgs),
    /// Delete pages: the pipeline takes them out of their clusters, the links and the index.
    Delete {
        /// URLs of the pages.
        #[arg(required = true)]
        urls: Vec<String>,
    },
    /// Ranked search: canonical documents containing every word (or any, with --any), best
    /// first, with the total count and snippets.
    Query {
        /// Query words.
        #[arg(required = true)]
        words: Vec<String>,
        /// Most results shown.
        #[arg(long, default_value_t = 10)]
        limit: usize,
        /// Results skipped first (paging).
        #[arg(long, default_value_t = 0)]
        offset: usize,
        /// Documents containing any of the words (OR) instead of all of them (AND).
        #[arg(long)]
        any: bool,
        /// Print the results as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Sizes of the index and its invariants (exit code 1 on a violation).
    Stats,
    /// The freshness experiment (paper Figure 7 in miniature): incremental vs batch latency.
    Freshness(FreshnessArgs),
    /// Many recrawl generations with or without garbage collection: cells and bytes stored
    /// (and on disk) per generation. Use an empty store.
    Soak(SoakArgs),
    /// Load a realistic synthetic crawl, index it until idle and check it, in one process:
    /// pages/s, notifications/s per quarter of the run, peak RSS per phase, bytes written and on
    /// disk. Use an empty store.
    Scale(ScaleArgs),
}

#[derive(Args, Debug)]
pub struct ScaleArgs {
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

#[derive(Args, Debug)]
pub struct SoakArgs {
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

#[derive(Args, Debug, Clone)]
pub struct WorkerArgs {
    /// Scanner tasks.
    #[arg(long, default_value_t = 4)]
    scanners: usize,
    /// Observer runs in flight.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
}

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Documents in the synthetic crawl.
    #[arg(long, default_value_t = 2000)]
    docs: usize,
    /// Fraction recrawled (with changed content) in the second round.
    #[arg(long, default_value_t = 0.2)]
    recrawl: f64,
    /// Seed of the synthetic crawl.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    #[command(flatten)]
    workers: WorkerArgs,
}

#[derive(Args, Debug)]
pub struct LoadArgs {
    /// Load a synthetic crawl of this many documents.
    #[arg(long)]
    pub(crate) synthetic: Option<usize>,
    /// Generation of the synthetic crawl (0: initial crawl; n > 0: recrawl with changed content).
    #[arg(long, default_value_t = 0)]
    pub(crate) generation: u32,
    /// Fraction of documents a recrawl (generation > 0) visits.
    #[arg(long, default_value_t = 0.2)]
    pub(crate) fraction: f64,
    /// Seed of the synthetic crawl.
    #[arg(long, default_value_t = 7)]
    pub(crate) seed: u64,
    /// Synthetic pages sized and linked like a real crawl (about 20 KB of HTML, 20–200 links,
    /// 60 000 words) instead of small demo pages.
    #[arg(long)]
    pub(crate) realistic: bool,
    /// Load every *.html / *.htm file under this directory.
    #[arg(long)]
    pub(crate) dir: Option<PathBuf>,
    /// URL prefix of the directory's files (default: file:// URLs).
    #[arg(long)]
    pub(crate) base_url: Option<String>,
    /// With --dir: delete the stored pages under the directory's URL prefix that the
    /// directory no longer has.
    #[arg(long, requires = "dir")]
    pub(crate) delete_missing: bool,
    /// Load the HTML responses of these WARC files (gzip or plain).
    #[arg(long)]
    pub(crate) warc: Vec<PathBuf>,
    /// Loader transactions in flight.
    #[arg(long, default_value_t = 16)]
    pub(crate) concurrency: usize,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Keep running after the pipeline is idle, until Ctrl-C.
    #[arg(long)]
    forever: bool,
    /// Print a machine-readable `progress: processed=N failures=M` line on stdout this often
    /// (milliseconds; for harnesses that plot throughput over time, like `percolator-bench
    /// figure10`).
    #[arg(long, value_name = "MS")]
    progress_every_ms: Option<u64>,
    /// Collect garbage in the background every this many seconds (see `percolator gc`); one
    /// worker of a cluster is enough.
    #[arg(long, value_name = "SECS")]
    gc_every_secs: Option<f64>,
    /// The safe point's distance behind the oldest snapshot in use, for `--gc-every-secs`.
    #[arg(long, value_name = "SECS", default_value_t = 600.0)]
    gc_grace_secs: f64,
    /// Commit every transaction in two phases, with a lock on every cell written, also where
    /// the store could commit it in one step (for comparison, and for tests of crash recovery).
    #[arg(long)]
    two_phase: bool,
    #[command(flatten)]
    workers: WorkerArgs,
}

#[derive(Args, Debug)]
pub struct FreshnessArgs {
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

pub(crate) fn runtime_config(workers: &WorkerArgs) -> RuntimeConfig {
    RuntimeConfig::default()
        .with_scanners(workers.scanners)
        .with_max_concurrent_runs(workers.concurrency)
        .with_stages(webindex::pipeline::SCAN_STAGES)
}

async fn loader<S: RowStore>(
    store: &Arc<S>,
    oracle: &Option<Arc<dyn TimestampOracle>>,
) -> Result<Client<S>, CliError> {
    let columns = webindex::observed_columns();
    Ok(client_builder(store, oracle)
        .observe_all(&columns)
        .build()
        .await?)
}

pub async fn run<S: RowStore>(
    store: Arc<S>,
    oracle: Option<Arc<dyn TimestampOracle>>,
    command: &WebindexCommand,
    db: &std::path::Path,
) -> Result<ExitCode, CliError> {
    match command {
        WebindexCommand::Soak(args) => soak(store, oracle, args, db).await,
        WebindexCommand::Scale(args) => scale(store, oracle, args, db).await,
        WebindexCommand::Demo(args) => demo(store, oracle, args).await,
        WebindexCommand::Load(args) => {
            if args.synthetic.is_none() && args.dir.is_none() && args.warc.is_empty() {
                return Err(
                    "nothing to load: give --synthetic N, --dir PATH or --warc FILE".into(),
                );
            }
            let client = loader(&store, &oracle).await?;
            let mut total = LoadReport::default();
            let began = Instant::now();
            if let Some(docs) = args.synthetic {
                let crawl = SyntheticCrawl::new(docs, args.seed).with_shape(if args.realistic {
                    webindex::synthetic::Shape::Realistic
                } else {
                    webindex::synthetic::Shape::Demo
                });
                let report = if args.generation == 0 {
                    let pages = crawl
                        .initial_prefetched(webindex::synthetic::RENDER_THREADS)
                        .map(Ok::<_, std::convert::Infallible>);
                    load(
                        &client,
                        pages,
                        Some(docs as u64),
                        "synthetic",
                        args.concurrency,
                    )
                    .await?
                } else {
                    let pages = crawl.recrawl(args.generation, args.fraction);
                    let len = Some(pages.len() as u64);
                    let pages = pages.into_iter().map(Ok::<_, std::convert::Infallible>);
                    load(&client, pages, len, "synthetic", args.concurrency).await?
                };
                add(&mut total, report);
            }
            if let Some(dir) = &args.dir {
                // Streamed: one file read at a time. A file that cannot be read is skipped
                // and named; the rest still load.
                let files = sources::html_files(dir, args.base_url.as_deref())
                    .map_err(|e| format!("--dir {}: {e}", dir.display()))?;
                let len = Some(files.len() as u64);
                let truncated = files.truncated();
                let prefix = files
                    .url_prefix()
                    .map_err(|e| format!("--dir {}: {e}", dir.display()))?;
                let seen = std::sync::Mutex::new(std::collections::HashSet::new());
                let unreadable = std::sync::atomic::AtomicUsize::new(0);
                let pages = files.filter_map(|page| match page {
                    Ok(page) => {
                        if args.delete_missing
                            && let Ok(mut seen) = seen.lock()
                        {
                            seen.insert(bytes::Bytes::from(page.url.clone()));
                        }
                        Some(Ok::<_, std::convert::Infallible>(page))
                    }
                    Err(e) => {
                        eprintln!("skipped unreadable file: {e}");
                        unreadable.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        None
                    }
                });
                add(
                    &mut total,
                    load(&client, pages, len, "html files", args.concurrency).await?,
                );
                let (truncated, unreadable) = (
                    truncated.load(std::sync::atomic::Ordering::Relaxed),
                    unreadable.into_inner(),
                );
                if truncated > 0 || unreadable > 0 {
                    println!(
                        "html files: {unreadable} unreadable (skipped), {truncated} cut to {} KiB",
                        sources::MAX_PAGE_BYTES / 1024
                    );
                }
                if args.delete_missing {
                    if unreadable > 0 {
                        return Err(format!(
                            "--delete-missing: {unreadable} file(s) could not be read, so nothing was deleted (they would have looked missing)"
                        )
                        .into());
                    }
                    let keep = seen.into_inner().unwrap_or_default();
                    let deleted =
                        webindex::delete_missing(&client, prefix.as_bytes(), &keep).await?;
                    println!(
                        "deleted {deleted} page(s) under {prefix} that the directory no longer has"
                    );
                }
            }
            for path in &args.warc {
                let reader =
                    warc::open(path).map_err(|e| format!("--warc {}: {e}", path.display()))?;
                let counts = Arc::new(warc::WarcCounts::default());
                add(
                    &mut total,
                    load(
                        &client,
                        warc::html_pages_counted(reader, Arc::clone(&counts)),
                        None,
                        "warc",
                        args.concurrency,
                    )
                    .await?,
                );
                let load = |c: &std::sync::atomic::AtomicUsize| {
                    c.load(std::sync::atomic::Ordering::Relaxed)
                };
                let (records, pages) = (load(&counts.records), load(&counts.pages));
                println!(
                    "warc {}: {records} records, {pages} HTML pages, {} other records skipped (not a 2xx HTML response, or chunked or compressed), {} pages cut to {} KiB",
                    path.display(),
                    records - pages,
                    load(&counts.truncated),
                    sources::MAX_PAGE_BYTES / 1024
                );
            }
            client.shutdown().await?;
            total.elapsed = began.elapsed();
            print!("{}", load_table(&total));
            Ok(ExitCode::SUCCESS)
        }
        WebindexCommand::Run(args) => {
            let gc = match args.gc_every_secs {
                None => None,
                Some(every) => {
                    let seconds = |what: &str, s: f64| {
                        Duration::try_from_secs_f64(s).map_err(|_| {
                            format!("{what} must be a non-negative number of seconds, not {s}")
                        })
                    };
                    Some(GcSchedule::new(
                        seconds("--gc-every-secs", every)?,
                        GcConfig::default()
                            .with_grace(seconds("--gc-grace-secs", args.gc_grace_secs)?),
                    ))
                }
            };
            let mut client = client_builder(&store, &oracle);
            if args.two_phase {
                client = client.config(TxnConfig::default().with_one_phase_commit(false));
            }
            let runtime = Runtime::start(
                client,
                webindex::observers(None),
                runtime_config(&args.workers).with_gc(gc),
            )
            .await?;
            let began = Instant::now();
            let interrupted = run_until_idle(
                &runtime,
                args.forever,
                args.progress_every_ms.map(Duration::from_millis),
            )
            .await?;
            let client = runtime.client().clone();
            let pending = runtime.pending().await?;
            let mut stats = runtime.shutdown().await?;
            stats.pending = Some(pending);
            print!("{}", stats_table(&stats, began.elapsed()));
            let txn = client.metrics();
            // Machine-readable for scripts and tests: other workers' transactions this one
            // rolled back (their owner's lease or TTL ran out) or forward, and locks it cleaned
            // up after transactions already rolled back (aborted on a conflict).
            println!(
                "worker locks: {} rolled back, {} rolled forward, {} cleaned up after aborts",
                txn.locks_rolled_back, txn.locks_rolled_forward, txn.locks_cleaned_up
            );
            if interrupted {
                println!(
                    "interrupted: stopped gracefully; `webindex run` again picks up what is pending"
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        WebindexCommand::Delete { urls } => {
            let client = loader(&store, &oracle).await?;
            let mut missing = Vec::new();
            let mut deleted = 0;
            for url in urls {
                if webindex::delete_page(&client, url.as_bytes()).await? {
                    deleted += 1;
                } else {
                    missing.push(url.as_str());
                }
            }
            client.shutdown().await?;
            println!(
                "deleted {deleted} page(s); `percolator webindex run` takes them out of the index"
            );
            if missing.is_empty() {
                Ok(ExitCode::SUCCESS)
            } else {
                println!("not stored, nothing to delete: {}", missing.join(" "));
                Ok(ExitCode::FAILURE)
            }
        }
        WebindexCommand::Query {
            words,
            limit,
            offset,
            any,
            json,
        } => {
            let client = loader(&store, &oracle).await?;
            let options = search_options(*limit, *offset, *any);
            let results = webindex::search(&client, &words.join(" "), &options).await?;
            client.shutdown().await?;
            print_results(&results, *offset, *json)
        }
        WebindexCommand::Stats => {
            let client = loader(&store, &oracle).await?;
            let pipeline = webindex::observers(None);
            let pending = percolator_observers::pending_on(&client, &pipeline).await?;
            let report = webindex::check(&client).await?;
            client.shutdown().await?;
            print!("{}", summary_table(&report.summary));
            if pending > 0 {
                // The invariants describe a finished pipeline: with work pending, differences
                // are the work still to do, not violations.
                println!(
                    "invariants: not checked — {pending} notification(s) pending; run `percolator webindex run` first ({} difference(s) now)",
                    report.violations.len()
                );
                return Ok(ExitCode::from(2));
            }
            let verdict = invariants_verdict(&report);
            // Every run of a strong observer, by any worker process ever: once per change.
            let audit = audit::strong_runs(store.as_ref(), &webindex::observers(None)).await?;
            println!(
                "strong observer runs: {} for {} changes, {} doubled",
                audit.runs,
                audit.changes,
                audit.doubled.len()
            );
            for doubled in audit.doubled.iter().take(20) {
                println!("  doubled: {doubled}");
            }
            if audit.doubled.is_empty() {
                Ok(verdict)
            } else {
                Ok(ExitCode::FAILURE)
            }
        }
        WebindexCommand::Freshness(args) => {
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
            let report = freshness::run(client_builder(&store, &oracle), &config, |line| {
                eprintln!("freshness: {line}")
            })
            .await?;
            println!(
                "freshness on {} ({} documents; 1 simulated hour = {:.1} s; initial indexing {:.1} s; one batch reclustering {:.0} ms, {} clusters):\n",
                report.backend,
                report.docs,
                report.hour_secs,
                report.initial_index_secs,
                report.batch_run_ms,
                report.batch_clusters
            );
            print!("{}", report.table());
            write_json(args.json.as_deref(), &serde_json::to_value(&report)?)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn add(total: &mut LoadReport, r: LoadReport) {
    total.loaded += r.loaded;
    total.unchanged += r.unchanged;
    total.skipped += r.skipped;
}

/// Loads a stream of pages with a progress bar (a spinner when the count is unknown: WARC files
/// are read record by record, never held in memory whole).
async fn load<S, I, E>(
    client: &Client<S>,
    pages: I,
    len: Option<u64>,
    what: &str,
    concurrency: usize,
) -> Result<LoadReport, CliError>
where
    S: RowStore,
    I: IntoIterator<Item = Result<CrawledPage, E>>,
    E: std::fmt::Display,
{
    let progress = bar(len, what);
    let report = webindex::load_pages(client, pages, concurrency, |_, _| progress.inc(1)).await;
    progress.finish_and_clear();
    Ok(report?)
}

/// Runs until idle (or Ctrl-C); returns whether it was interrupted. With `lines`, also prints
/// a progress line that often.
async fn run_until_idle<S: RowStore>(
    runtime: &Runtime<S>,
    forever: bool,
    lines: Option<Duration>,
) -> Result<bool, CliError> {
    let progress = bar(None, "observers");
    let began = Instant::now();
    let print_lines = async {
        let Some(every) = lines else {
            return std::future::pending::<()>().await;
        };
        let mut tick = tokio::time::interval(every.max(Duration::from_millis(10)));
        loop {
            tick.tick().await;
            let stats = runtime.stats();
            println!(
                "progress: processed={} failures={}",
                stats.notifications_processed, stats.failures
            );
        }
    };
    let watch = async {
        loop {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let stats = runtime.stats();
            progress.set_position(stats.notifications_processed);
            progress.set_message(format!(
                "{:.0} observer txns/s, {} in flight",
                stats.notifications_processed as f64 / began.elapsed().as_secs_f64().max(1e-3),
                runtime.in_flight()
            ));
        }
    };
    let work = async {
        if forever {
            std::future::pending::<()>().await;
        }
        runtime.wait_idle(Duration::from_secs(24 * 3600)).await
    };
    let interrupted = tokio::select! {
        r = work => { r?; false }
        () = watch => false,
        () = print_lines => false,
        () = crate::shutdown_signal() => true,
    };
    progress.finish_and_clear();
    Ok(interrupted)
}

async fn demo<S: RowStore>(
    store: Arc<S>,
    oracle: Option<Arc<dyn TimestampOracle>>,
    args: &DemoArgs,
) -> Result<ExitCode, CliError> {
    let began = Instant::now();
    let (probe, mut clustered) = mpsc::unbounded_channel::<Clustered>();
    let runtime = Runtime::start(
        client_builder(&store, &oracle),
        webindex::observers(Some(probe)),
        runtime_config(&args.workers),
    )
    .await?;
    let client = loader(&store, &oracle).await?;
    let crawl = SyntheticCrawl::new(args.docs, args.seed);
    println!(
        "web index demo on {}: {} synthetic documents, {:.0}% recrawled",
        store.name(),
        args.docs,
        args.recrawl * 100.0
    );

    let mut rounds: Vec<(String, LoadReport, Duration, Option<Duration>)> = Vec::new();
    let mut interrupted = false;
    for (round, pages) in [
        (
            "initial crawl".to_owned(),
            crawl.initial().collect::<Vec<_>>(),
        ),
        (
            format!("recrawl {:.0}%", args.recrawl * 100.0),
            crawl.recrawl(1, args.recrawl),
        ),
    ] {
        let round_began = Instant::now();
        let loaded_at: Arc<Mutex<HashMap<Bytes, Instant>>> = Arc::default();
        let progress = bar(Some(pages.len() as u64), "load");
        let report = {
            let loaded_at = Arc::clone(&loaded_at);
            webindex::load_pages(
                &client,
                pages.into_iter().map(Ok::<_, std::convert::Infallible>),
                16,
                move |url, outcome| {
                    progress.inc(1);
                    if outcome == PageOutcome::Loaded {
                        loaded_at
                            .lock()
                            .insert(Bytes::copy_from_slice(url.as_bytes()), Instant::now());
                    }
                },
            )
            .await?
        };
        interrupted = run_until_idle(&runtime, false, None).await?;
        let mut latencies: Vec<Duration> = Vec::new();
        let loaded_at = loaded_at.lock();
        while let Ok(event) = clustered.try_recv() {
            if let Some(at) = loaded_at.get(&event.url) {
                latencies.push(event.at.saturating_duration_since(*at));
            }
        }
        latencies.sort();
        let median = latencies.get(latencies.len() / 2).copied();
        rounds.push((round, report, round_began.elapsed(), median));
        if interrupted {
            break;
        }
    }
    let stats = runtime.stats_with_pending().await?;
    runtime.shutdown().await?;
    let report = webindex::check(&client).await?;
    println!();
    let mut load_rows: Vec<(String, String)> = Vec::new();
    for (round, r, took, median) in &rounds {
        load_rows.push((
            format!("{round}: pages loaded / unchanged"),
            format!("{} / {}", r.loaded, r.unchanged),
        ));
        load_rows.push((
            format!("{round}: load + index time"),
            format!("{:.2} s", took.as_secs_f64()),
        ));
        load_rows.push((
            format!("{round}: median load → clustered"),
            median.map_or("-".into(), ms),
        ));
    }
    let rows: Vec<(&str, String)> = load_rows
        .iter()
        .map(|(k, v)| (k.as_str(), v.clone()))
        .collect();
    print!("{}", table("rounds", &rows));
    println!();
    print!("{}", stats_table(&stats, began.elapsed()));
    println!();
    print!("{}", summary_table(&report.summary));
    println!();
    if let Some(term) = sample_term(&client, &crawl).await? {
        let options = SearchOptions::default().limit(3);
        let results = webindex::search(&client, &term, &options).await?;
        println!("query {term:?}:");
        print!("{}", format_results(&results, 0));
    }
    client.shutdown().await?;
    if interrupted {
        println!("interrupted: stopped gracefully");
    }
    Ok(invariants_verdict(&report))
}

/// A rare-ish term of the first document, for the sample query.
async fn sample_term<S: RowStore>(
    client: &Client<S>,
    crawl: &SyntheticCrawl,
) -> Result<Option<String>, CliError> {
    if crawl.docs() == 0 {
        return Ok(None);
    }
    let txn = client.begin().await?;
    let terms = txn
        .get(
            webindex::schema::DOCUMENTS,
            crawl.url(0),
            webindex::schema::TERMS,
        )
        .await?;
    Ok(terms.and_then(|t| {
        webindex::terms::PageTerms::decode(&t)
            .counts
            .into_keys()
            .max_by_key(|t| t.len())
    }))
}

/// `webindex query`'s options.
pub(crate) fn search_options(limit: usize, offset: usize, any: bool) -> SearchOptions {
    let mode = if any { Mode::Any } else { Mode::All };
    SearchOptions::default()
        .mode(mode)
        .limit(limit)
        .offset(offset)
}

/// Prints search results as a list, or as JSON.
pub(crate) fn print_results(
    results: &webindex::SearchResults,
    offset: usize,
    json: bool,
) -> Result<ExitCode, CliError> {
    if json {
        println!("{}", serde_json::to_string_pretty(results)?);
    } else {
        print!("{}", format_results(results, offset));
    }
    Ok(ExitCode::SUCCESS)
}

/// Search results for a terminal: the count, then per hit its rank, score, URL, title and
/// snippet (matches in brackets).
fn format_results(results: &webindex::SearchResults, offset: usize) -> String {
    let how = match results.mode {
        Mode::Any => "any",
        _ => "all",
    };
    let mut out = format!(
        "{} of {} documents contain {how} of: {}\n",
        results.total,
        results.documents,
        results.terms.join(" ")
    );
    if !results.hits.is_empty() {
        out.push_str(&format!(
            "showing {}-{}\n",
            offset + 1,
            offset + results.hits.len()
        ));
    }
    for (i, hit) in results.hits.iter().enumerate() {
        out.push_str(&format!(
            "\n{:>3}. {}  (score {:.2}, {} inlinks)\n     {}\n",
            offset + i + 1,
            hit.title,
            hit.score,
            hit.inlinks,
            hit.url
        ));
        if !hit.snippet.text.is_empty() {
            out.push_str(&format!("     {}\n", hit.snippet.marked()));
        }
    }
    out
}

pub(crate) fn invariants_verdict(report: &webindex::CheckReport) -> ExitCode {
    if report.violations.is_empty() {
        println!(
            "invariants: all hold (hash ↔ cluster membership, one canonical per cluster, anchor terms at canonicals, index = canonical terms)"
        );
        ExitCode::SUCCESS
    } else {
        println!("invariants: {} violation(s):", report.violations.len());
        for v in report.violations.iter().take(20) {
            println!("  {v}");
        }
        ExitCode::FAILURE
    }
}

pub(crate) fn load_table(r: &LoadReport) -> String {
    table(
        "load",
        &[
            ("pages loaded", r.loaded.to_string()),
            ("unchanged", r.unchanged.to_string()),
            ("skipped (bad URL)", r.skipped.to_string()),
            ("time", format!("{:.2} s", r.elapsed.as_secs_f64())),
            (
                // Every page read counts, so an unchanged reload shows its real speed.
                "pages/s (read)",
                format!(
                    "{:.0}",
                    (r.loaded + r.unchanged + r.skipped) as f64 / r.elapsed.as_secs_f64().max(1e-9)
                ),
            ),
        ],
    )
}

fn stats_table(s: &RuntimeStats, elapsed: Duration) -> String {
    table(
        "observers",
        &[
            (
                "notifications processed",
                s.notifications_processed.to_string(),
            ),
            (
                "processed per second",
                format!(
                    "{:.0}",
                    s.notifications_processed as f64 / elapsed.as_secs_f64().max(1e-9)
                ),
            ),
            ("already acknowledged", s.already_acknowledged.to_string()),
            ("collapsed", s.collapsed.to_string()),
            ("collapse ratio", format!("{:.2}", s.collapse_ratio())),
            ("conflicts (re-run)", s.conflicts.to_string()),
            ("failed runs", s.failures.to_string()),
            ("lock resolutions", s.lock_resolutions.to_string()),
            (
                "dead workers swept (their locks resolved)",
                format!("{} ({})", s.dead_leases_ended, s.abandoned_locks_resolved),
            ),
            ("scanner teleports", s.teleports.to_string()),
            (
                "background GC runs (cells deleted)",
                format!("{} ({})", s.gc_runs, s.gc_cells_deleted),
            ),
            (
                "observer latency p50",
                format!("{:.2} ms", s.latency_p50_us as f64 / 1e3),
            ),
            (
                "observer latency p99",
                format!("{:.2} ms", s.latency_p99_us as f64 / 1e3),
            ),
            (
                "pending notifications",
                s.pending.map_or("-".into(), |p| p.to_string()),
            ),
            ("elapsed", format!("{:.2} s", elapsed.as_secs_f64())),
        ],
    )
}

pub(crate) fn summary_table(s: &webindex::IndexSummary) -> String {
    table(
        "web index",
        &[
            ("documents", s.documents.to_string()),
            ("processed", s.processed.to_string()),
            ("duplicate clusters (canonicals)", s.clusters.to_string()),
            ("duplicates", s.duplicates.to_string()),
            ("link targets", s.link_targets.to_string()),
            ("anchors counted at canonicals", s.inlinks.to_string()),
            ("terms", s.terms.to_string()),
            ("postings", s.postings.to_string()),
        ],
    )
}

/// `webindex scale`: load, run and check, with progress and a summary table (and JSON).
async fn scale<S: RowStore>(
    store: Arc<S>,
    oracle: Option<Arc<dyn TimestampOracle>>,
    args: &ScaleArgs,
    db: &std::path::Path,
) -> Result<ExitCode, CliError> {
    use webindex::scale::{ScaleConfig, ScaleProgress};
    let mut config = ScaleConfig::default();
    config.docs = args.docs;
    if args.demo_pages {
        config.shape = webindex::synthetic::Shape::Demo;
    }
    config.runtime = runtime_config(&args.workers);
    let progress = bar(Some(args.docs as u64), "load");
    let report = webindex::scale::run(
        || client_builder(&store, &oracle),
        &config,
        || disk_bytes(store.name(), db),
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
    .await?;
    progress.finish_and_clear();
    print!("{}", report.table());
    for violation in report.violations.iter().take(10) {
        println!("violation: {violation}");
    }
    write_json(args.json.as_deref(), &serde_json::to_value(&report)?)?;
    Ok(if report.violations.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `webindex soak`: generation after generation, with a progress bar, a summary table and JSON.
async fn soak<S: RowStore>(
    store: Arc<S>,
    oracle: Option<Arc<dyn TimestampOracle>>,
    args: &SoakArgs,
    db: &std::path::Path,
) -> Result<ExitCode, CliError> {
    let mut config = webindex::soak::SoakConfig::default();
    config.docs = args.docs;
    config.generations = args.generations;
    config.recrawl_fraction = args.recrawl;
    config.gc = !args.no_gc;
    config.runtime = runtime_config(&args.workers);
    let progress = bar(Some(u64::from(args.generations)), "generations");
    let report = webindex::soak::run(
        client_builder(&store, &oracle),
        &config,
        || disk_bytes(store.name(), db),
        |g| {
            progress.inc(1);
            progress.set_message(format!("{} cells", g.cells));
        },
    )
    .await?;
    progress.finish_and_clear();
    println!(
        "soak on {} ({} documents, {:.0}% recrawled per generation, GC {}): cells grew {:.2}x from the first generation to the last\n",
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
    write_json(args.json.as_deref(), &serde_json::to_value(&report)?)?;
    Ok(ExitCode::SUCCESS)
}

/// The size of the store's directory: only the embedded engines keep one (mem and the
/// clusters do not).
fn disk_bytes(backend: &str, db: &std::path::Path) -> Option<u64> {
    #[cfg(feature = "sled")]
    if matches!(backend, "sled" | "fjall") && db.is_dir() {
        return Some(percolator_backend_sled::compact::dir_bytes(db));
    }
    let _ = (backend, db);
    None
}
