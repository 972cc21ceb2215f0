//! `webindex load`: pages from a synthetic crawl, a directory of HTML files or WARC files, each
//! streamed (never held whole in memory) into `documents`, one transaction per page. A page
//! whose URL is refused (see `percolator_webindex::url::normalize`: absolute `http` and `https`
//! URLs only) is skipped, named on stderr (the first few) and counted as "skipped (bad URL)".

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::Instant;

use percolator_core::{Client, RowStore, TimestampOracle};
use percolator_webindex::{
    self as webindex, CrawledPage, LoadConfig, LoadReport, sources, synthetic::SyntheticCrawl, warc,
};

use super::{LoadArgs, loader};
use crate::CliError;
use crate::output::{bar, load_table, out, outln, term_safe};

/// Bad URLs named on stderr per source (the count is in the summary table).
const BAD_URLS_SHOWN: usize = 10;

/// Loads what `args` names and prints a summary table.
pub async fn run<S: RowStore>(
    store: Arc<S>,
    oracle: Option<Arc<dyn TimestampOracle>>,
    args: &LoadArgs,
) -> Result<ExitCode, CliError> {
    if args.synthetic.is_none() && args.dir.is_none() && args.warc.is_empty() {
        return Err("nothing to load: give --synthetic N, --dir PATH or --warc FILE".into());
    }
    let client = loader(&store, &oracle).await?;
    let config = LoadConfig::new(args.concurrency).with_max_page_bytes(args.max_page_bytes);
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
            load(&client, pages, Some(docs as u64), "synthetic", config).await?
        } else {
            let pages = crawl.recrawl(args.generation, args.fraction);
            let len = Some(pages.len() as u64);
            let pages = pages.into_iter().map(Ok::<_, std::convert::Infallible>);
            load(&client, pages, len, "synthetic", config).await?
        };
        add(&mut total, report);
    }
    if let Some(dir) = &args.dir {
        let shown_dir = term_safe(&dir.display().to_string()).into_owned();
        // Streamed: one file read at a time. A file that cannot be read is skipped
        // and named; the rest still load.
        let files = sources::html_files(dir, args.base_url.as_deref())
            .map_err(|e| format!("--dir {shown_dir}: {}", term_safe(&e.to_string())))?
            .with_max_page_bytes(args.max_page_bytes);
        let len = Some(files.len() as u64);
        let prefix = files
            .url_prefix()
            .map_err(|e| format!("--dir {shown_dir}: {}", term_safe(&e.to_string())))?;
        let seen = std::sync::Mutex::new(std::collections::HashSet::new());
        let unreadable = AtomicUsize::new(0);
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
                eprintln!("skipped unreadable file: {}", term_safe(&e.to_string()));
                unreadable.fetch_add(1, Relaxed);
                None
            }
        });
        let report = load(&client, pages, len, "html files", config).await?;
        add(&mut total, report);
        let unreadable = unreadable.into_inner();
        if unreadable > 0 {
            outln!("html files: {unreadable} unreadable (skipped)");
        }
        if args.delete_missing {
            if unreadable > 0 {
                return Err(format!(
                    "--delete-missing: {unreadable} file(s) could not be read, so nothing was deleted (they would have looked missing)"
                )
                .into());
            }
            let keep = seen.into_inner().unwrap_or_default();
            let deleted = webindex::delete_missing(&client, prefix.as_bytes(), &keep).await?;
            outln!(
                "deleted {deleted} page(s) under {} that the directory no longer has",
                term_safe(&prefix)
            );
        }
    }
    for path in &args.warc {
        let shown_path = term_safe(&path.display().to_string()).into_owned();
        let reader = warc::open(path)
            .map_err(|e| format!("--warc {shown_path}: {}", term_safe(&e.to_string())))?;
        let counts = Arc::new(warc::WarcCounts::default());
        let mut report = load(
            &client,
            warc::html_pages_counted(reader, Arc::clone(&counts)),
            None,
            "warc",
            config,
        )
        .await?;
        let (records, pages, bad_urls) = (
            counts.records.load(Relaxed),
            counts.pages.load(Relaxed),
            counts.bad_urls.load(Relaxed),
        );
        // Pages with a bad URL never reach the loader: the WARC reader skips them.
        report.skipped += bad_urls;
        add(&mut total, report);
        outln!(
            "warc {shown_path}: {records} records, {pages} HTML pages, {} other records skipped (not a 2xx HTML response, or chunked or compressed), {bad_urls} HTML pages skipped (bad URL)",
            records.saturating_sub(pages + bad_urls),
        );
    }
    client.shutdown().await?;
    total.elapsed = began.elapsed();
    out!("{}", load_table(&total));
    Ok(ExitCode::SUCCESS)
}

fn add(total: &mut LoadReport, r: LoadReport) {
    total.loaded += r.loaded;
    total.unchanged += r.unchanged;
    total.skipped += r.skipped;
    total.cut += r.cut;
}

/// Loads a stream of pages with a progress bar (a spinner when the count is unknown: WARC files
/// are read record by record, never held in memory whole). The first [`BAD_URLS_SHOWN`] pages
/// refused for their URL are named on stderr, with the reason.
async fn load<S, I, E>(
    client: &Client<S>,
    pages: I,
    len: Option<u64>,
    what: &str,
    config: LoadConfig,
) -> Result<LoadReport, CliError>
where
    S: RowStore,
    I: IntoIterator<Item = Result<CrawledPage, E>>,
    E: std::fmt::Display,
{
    let progress = bar(len, what);
    let bad_urls = AtomicUsize::new(0);
    let report = webindex::load_pages_checked(client, pages, config, |_, outcome| {
        progress.inc(1);
        if let Err(bad) = outcome
            && bad_urls.fetch_add(1, Relaxed) < BAD_URLS_SHOWN
        {
            // The message escapes the URL already; `term_safe` keeps it so whatever it says.
            progress.suspend(|| eprintln!("skipped: {}", term_safe(&bad.to_string())));
        }
    })
    .await;
    progress.finish_and_clear();
    let bad_urls = bad_urls.into_inner();
    if bad_urls > BAD_URLS_SHOWN {
        eprintln!(
            "skipped: {} more page(s) with a bad URL",
            bad_urls - BAD_URLS_SHOWN
        );
    }
    // Errors quote the input (a broken WARC record).
    Ok(report.map_err(|e| term_safe(&e.to_string()).into_owned())?)
}
