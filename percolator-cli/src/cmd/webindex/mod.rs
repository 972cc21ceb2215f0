//! `percolator webindex …`: load, run, query, delete and check the web-indexing pipeline, one
//! module per subcommand. The experiments (freshness, soak, scale) are the benchmark driver's
//! (`percolator-bench`).

mod check;
mod delete;
mod demo;
mod load;
mod query;
mod run;
mod stats;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand};
use percolator_core::{Client, GcConfig, RowStore, TimestampOracle};
use percolator_observers::{GcSchedule, RuntimeConfig};
use percolator_webindex as webindex;

use crate::{CliError, client_builder};

pub(crate) use query::search_options;

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
    Query(QueryArgs),
    /// Sizes of the index as the pipeline keeps them, and the work pending: a few cells read,
    /// at any size.
    Stats,
    /// Every invariant of the index and the audit of every strong observer run, table by
    /// table (exit code 1 on a violation, 2 while work is pending).
    Check,
}

/// How many scanners and observer runs a worker uses.
#[derive(Args, Debug, Clone)]
pub struct WorkerArgs {
    /// Scanner tasks.
    #[arg(long, default_value_t = 4)]
    pub(crate) scanners: usize,
    /// Observer runs in flight.
    #[arg(long, default_value_t = 16)]
    pub(crate) concurrency: usize,
    /// Run every dirty row this worker finds, instead of its share of the rows of the workers
    /// running the same observers on the store (for comparison: workers then collide).
    #[arg(long)]
    pub(crate) unpartitioned: bool,
    /// The paper's lock service (`percolator locks serve` instances, host:port, comma
    /// separated): take a lock shared with the store's other workers before running a row, and
    /// leave the rows they hold. Usually with `--unpartitioned` (it is the other way to share
    /// the rows); unreachable, rows run without it.
    #[arg(long, env = "PERCOLATOR_LOCK_SERVICE", value_delimiter = ',')]
    pub(crate) lock_service: Vec<String>,
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
    // The help as an attribute, not a doc comment: rustdoc would flag its bare URL.
    #[arg(
        long,
        value_name = "URL",
        help = "With --dir: pages of the directory get URLs under --base-url, default \
                http://localhost/ (an http or https URL; the file's path relative to the \
                directory is joined to it)"
    )]
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
    /// The most HTML kept of a page, in bytes; longer pages are cut, and the load counts them.
    /// The store's largest value (1 MiB on etcd) can cut a page shorter still, once compressed.
    /// Through a server, the server's own limit applies (`serve --max-page-bytes`).
    #[arg(long, value_name = "BYTES", default_value_t = percolator_webindex::raw::DEFAULT_MAX_PAGE_BYTES)]
    pub(crate) max_page_bytes: usize,
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
    /// Read ahead the columns of a row that earlier transactions read together
    /// (`TxnConfig::prefetch`, off by default: see ARCHITECTURE.md, "Why these choices").
    #[arg(long)]
    prefetch: bool,
    /// Also write the summary's counters (this worker's, with its id and scan group) to this
    /// file as JSON, for harnesses that compare workers (`cargo xtask bench --workers`).
    #[arg(long, value_name = "FILE")]
    stats_json: Option<std::path::PathBuf>,
    #[command(flatten)]
    workers: WorkerArgs,
}

#[derive(Args, Debug)]
pub struct QueryArgs {
    /// Query words.
    #[arg(required = true)]
    pub(crate) words: Vec<String>,
    /// Most results shown.
    #[arg(long, default_value_t = 10)]
    pub(crate) limit: usize,
    /// Results skipped first (paging).
    #[arg(long, default_value_t = 0)]
    pub(crate) offset: usize,
    /// Documents containing any of the words (OR) instead of all of them (AND).
    #[arg(long)]
    pub(crate) any: bool,
    /// Print the results as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

/// The observer runtime's configuration from the worker flags.
/// Garbage collection every `every_secs` (none when `None` or 0) with the safe point
/// `grace_secs` behind the oldest snapshot in use (see `percolator gc`).
pub(crate) fn gc_schedule(
    every_secs: Option<f64>,
    grace_secs: f64,
) -> Result<Option<GcSchedule>, CliError> {
    let seconds = |what: &str, s: f64| {
        Duration::try_from_secs_f64(s)
            .map_err(|_| format!("{what} must be a non-negative number of seconds, not {s}"))
    };
    let Some(every) = every_secs else {
        return Ok(None);
    };
    let every = seconds("--gc-every-secs", every)?;
    if every.is_zero() {
        return Ok(None);
    }
    Ok(Some(GcSchedule::new(
        every,
        GcConfig::default().with_grace(seconds("--gc-grace-secs", grace_secs)?),
    )))
}

pub(crate) fn runtime_config(workers: &WorkerArgs) -> Result<RuntimeConfig, CliError> {
    let shared_locks = if workers.lock_service.is_empty() {
        None
    } else {
        let client =
            percolator_lock_service::RemoteRowLocks::connect(workers.lock_service.iter().cloned())?;
        Some(Arc::new(client) as Arc<dyn percolator_observers::SharedRowLocks>)
    };
    Ok(RuntimeConfig::default()
        .with_scanners(workers.scanners)
        .with_max_concurrent_runs(workers.concurrency)
        .with_stages(webindex::pipeline::SCAN_STAGES)
        .with_partition_refresh(if workers.unpartitioned {
            None
        } else {
            RuntimeConfig::default().partition_refresh
        })
        .with_shared_locks(shared_locks))
}

/// A client that writes pages: it declares the pipeline's observed columns, so its commits
/// notify them.
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

/// Runs a `webindex` subcommand on an opened store.
pub async fn run<S: RowStore>(
    store: Arc<S>,
    oracle: Option<Arc<dyn TimestampOracle>>,
    command: &WebindexCommand,
) -> Result<ExitCode, CliError> {
    match command {
        WebindexCommand::Demo(args) => demo::run(store, oracle, args).await,
        WebindexCommand::Load(args) => load::run(store, oracle, args).await,
        WebindexCommand::Run(args) => run::run(store, oracle, args).await,
        WebindexCommand::Delete { urls } => delete::run(store, oracle, urls).await,
        WebindexCommand::Query(args) => query::run(store, oracle, args).await,
        WebindexCommand::Stats => stats::run(store, oracle).await,
        WebindexCommand::Check => check::run(store, oracle).await,
    }
}
