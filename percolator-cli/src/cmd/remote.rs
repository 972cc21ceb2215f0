//! The CLI's commands through a running server (`percolator serve`): used when `--server URL`
//! is given, or when a server has recorded itself in the `--db` directory. A database a server
//! owns cannot be opened by a second process; these commands are what it offers instead.

use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use bytes::Bytes;

use percolator_server::wire::{IngestReport, Status};
use percolator_server::{Remote, RemoteError, discovery};
use percolator_webindex::{
    self as webindex, CrawledPage, LoadReport, sources, synthetic::SyntheticCrawl, warc,
};

use crate::cmd::webindex::{LoadArgs, WebindexCommand, search_options};
use crate::output::{
    check_verdict, load_table, out, outln, print_results, sizes_table, summary_table, table,
    term_safe,
};
use crate::{Cli, CliError, Command};

/// Pages per upload when loading through a server.
const BATCH_PAGES: usize = 200;
/// HTML per upload when loading through a server: a batch of large pages goes out before it
/// has [`BATCH_PAGES`] (the server takes up to 512 MiB of WARC per upload).
const BATCH_BYTES: usize = 64 * 1024 * 1024;

/// Whether `batch` is due for an upload.
fn batch_full(batch: &[CrawledPage]) -> bool {
    batch.len() >= BATCH_PAGES || batch.iter().map(|p| p.html.len()).sum::<usize>() >= BATCH_BYTES
}

/// How long a load keeps retrying a busy server (503, 429) before it stops and says how far
/// it got.
const BUSY_PATIENCE: Duration = Duration::from_secs(600);

/// How long a query keeps retrying a busy server.
const QUERY_PATIENCE: Duration = Duration::from_secs(30);

/// Calls the server until it is not busy: on 503 or 429 it waits as long as `Retry-After`
/// asks (1 to 30 s) and tries again, for at most `patience`.
async fn patiently<T, F, Fut>(what: &str, patience: Duration, mut call: F) -> Result<T, RemoteError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, RemoteError>>,
{
    let began = Instant::now();
    let mut said = false;
    loop {
        match call().await {
            Err(RemoteError::Api {
                status: 429 | 503,
                retry_after_secs,
                message,
                ..
            }) if began.elapsed() < patience => {
                if !said {
                    eprintln!(
                        "the server is busy ({what}: {}); waiting and retrying",
                        term_safe(&message)
                    );
                    said = true;
                }
                let wait = Duration::from_secs(retry_after_secs.unwrap_or(1).clamp(1, 30));
                tokio::time::sleep(wait).await;
            }
            other => return other,
        }
    }
}

/// The server `cli`'s command should go through, if any: `--server`, else the one recorded in
/// the database directory. A command a server cannot run while it owns the database is an error
/// that says so.
pub fn server_for(cli: &Cli, db: Option<&Path>) -> Result<Option<Remote>, CliError> {
    let recorded = db.and_then(|db| discovery::find(db).map(|r| r.url));
    let Some(url) = cli.server.clone().or(recorded.clone()) else {
        return Ok(None);
    };
    if routable(&cli.command) {
        let token = crate::token::for_client(cli, db.filter(|_| recorded.is_some()))?;
        let remote = Remote::new(url);
        return Ok(Some(match token {
            Some(token) => remote.with_token(token),
            None => remote,
        }));
    }
    if recorded.is_some() {
        return Err(format!(
            "{} is owned by the server at {url} (`percolator serve`): use `webindex load|query|delete|stats|check` or `status`, which go through it, or stop it first",
            db.map_or_else(|| cli.db.display().to_string(), |d| d.display().to_string())
        )
        .into());
    }
    Err(format!("--server {url}: this command does not run through a server").into())
}

fn routable(command: &Command) -> bool {
    match command {
        Command::Webindex { command } => matches!(
            command,
            WebindexCommand::Load(_)
                | WebindexCommand::Query(_)
                | WebindexCommand::Delete { .. }
                | WebindexCommand::Stats
                | WebindexCommand::Check
        ),
        Command::Status => true,
        _ => false,
    }
}

/// Runs `cli`'s (routable) command through `remote`.
pub async fn run(remote: &Remote, cli: &Cli) -> Result<ExitCode, CliError> {
    match &cli.command {
        Command::Status => status(remote).await,
        Command::Webindex { command } => match command {
            WebindexCommand::Query(args) => {
                let options = search_options(args);
                let query = args.words.join(" ");
                let results =
                    patiently("search", QUERY_PATIENCE, || remote.search(&query, &options)).await?;
                print_results(&results, args.offset, args.json)
            }
            WebindexCommand::Delete { urls } => {
                let report = remote.delete(urls.clone()).await?;
                outln!(
                    "deleted {} page(s) through {}; the server's observers take them out of the index",
                    report.deleted,
                    remote.base()
                );
                if report.missing.is_empty() {
                    Ok(ExitCode::SUCCESS)
                } else {
                    outln!(
                        "not stored, nothing to delete: {}",
                        term_safe(&report.missing.join(" "))
                    );
                    Ok(ExitCode::FAILURE)
                }
            }
            WebindexCommand::Stats => {
                let stats = remote.stats().await?;
                out!("{}", sizes_table(&stats.sizes, stats.pending));
                Ok(ExitCode::SUCCESS)
            }
            WebindexCommand::Check => {
                let checked = remote.check().await?;
                out!("{}", summary_table(&checked.report.summary));
                if checked.pending > 0 {
                    outln!(
                        "invariants: not judged — {} notification(s) pending; the server is working them off ({} difference(s) now)",
                        checked.pending,
                        checked.report.violations.len()
                    );
                    return Ok(ExitCode::from(2));
                }
                Ok(check_verdict(&checked.report))
            }
            WebindexCommand::Load(args) => load(remote, args).await,
            _ => Err("this command does not run through a server".into()),
        },
        _ => Err("this command does not run through a server".into()),
    }
}

async fn status(remote: &Remote) -> Result<ExitCode, CliError> {
    let Status {
        documents,
        pending,
        processed,
        processed_per_sec,
        freshness_samples,
        freshness_p50_secs,
        freshness_p99_secs,
        tables,
        ..
    } = remote.status().await?;
    let mut rows: Vec<(String, String)> = tables
        .iter()
        .map(|t| {
            (
                t.table.clone(),
                format!("{} pending, {} locks", t.pending, t.locks),
            )
        })
        .collect();
    rows.push(("server".into(), remote.base().to_owned()));
    rows.push(("documents indexed".into(), documents.to_string()));
    rows.push(("pending notifications".into(), pending.to_string()));
    rows.push((
        "observer txns (per s, last 10 s)".into(),
        format!("{processed} ({processed_per_sec:.1}/s)"),
    ));
    rows.push((
        "freshness p50 / p99 (ingest → clustered)".into(),
        if freshness_samples == 0 {
            "no pages ingested yet".into()
        } else {
            format!(
                "{freshness_p50_secs:.3} s / {freshness_p99_secs:.3} s ({freshness_samples} pages)"
            )
        },
    ));
    let rows: Vec<(&str, String)> = rows.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    out!("{}", table("table", &rows));
    Ok(ExitCode::SUCCESS)
}

/// Uploads pages as WARC batches (bytes kept as they are).
async fn upload(
    remote: &Remote,
    pages: &mut Vec<CrawledPage>,
    total: &mut IngestReport,
) -> Result<(), CliError> {
    if pages.is_empty() {
        return Ok(());
    }
    let mut bytes = Vec::new();
    warc::write_warc(&mut bytes, pages, false)?;
    let count = pages.len();
    pages.clear();
    let bytes = Bytes::from(bytes);
    let report = patiently("upload", BUSY_PATIENCE, || {
        remote.ingest_warc(bytes.clone())
    })
    .await
    .map_err(|e| {
        format!(
            "stopped after {} page(s) were taken ({} more in the batch that failed): {e}",
            total.loaded + total.unchanged + total.skipped,
            count
        )
    })?;
    total.loaded += report.loaded;
    total.unchanged += report.unchanged;
    total.skipped += report.skipped;
    total.truncated += report.truncated;
    Ok(())
}

async fn load(remote: &Remote, args: &LoadArgs) -> Result<ExitCode, CliError> {
    if args.synthetic.is_none() && args.dir.is_none() && args.warc.is_empty() {
        return Err("nothing to load: give --synthetic N, --dir PATH or --warc FILE".into());
    }
    let began = std::time::Instant::now();
    let mut total = IngestReport::default();
    let mut batch = Vec::with_capacity(BATCH_PAGES);
    if let Some(docs) = args.synthetic {
        let crawl = SyntheticCrawl::new(docs, args.seed).with_shape(if args.realistic {
            webindex::synthetic::Shape::Realistic
        } else {
            webindex::synthetic::Shape::Demo
        });
        let pages: Vec<CrawledPage> = if args.generation == 0 {
            crawl.initial().collect()
        } else {
            crawl.recrawl(args.generation, args.fraction)
        };
        for page in pages {
            batch.push(page);
            if batch_full(&batch) {
                upload(remote, &mut batch, &mut total).await?;
            }
        }
        upload(remote, &mut batch, &mut total).await?;
    }
    if let Some(dir) = &args.dir {
        let files = sources::html_files(dir, args.base_url.as_deref())
            .map_err(|e| format!("--dir {}: {e}", dir.display()))?
            .with_max_page_bytes(args.max_page_bytes);
        let prefix = files
            .url_prefix()
            .map_err(|e| format!("--dir {}: {e}", dir.display()))?;
        let mut seen = Vec::new();
        let mut unreadable = 0usize;
        for page in files {
            match page {
                Ok(page) => {
                    if args.delete_missing {
                        seen.push(page.url.clone());
                    }
                    batch.push(page);
                    if batch_full(&batch) {
                        upload(remote, &mut batch, &mut total).await?;
                    }
                }
                Err(e) => {
                    eprintln!("skipped unreadable file: {}", term_safe(&e.to_string()));
                    unreadable += 1;
                }
            }
        }
        upload(remote, &mut batch, &mut total).await?;
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
            let report = remote.delete_missing(prefix.clone(), seen).await?;
            outln!(
                "deleted {} page(s) under {prefix} that the directory no longer has",
                report.deleted
            );
        }
    }
    for path in &args.warc {
        let file = path.clone();
        let bytes = tokio::task::spawn_blocking(move || std::fs::read(file))
            .await?
            .map_err(|e| format!("--warc {}: {e}", path.display()))?;
        let bytes = Bytes::from(bytes);
        let report = patiently("upload", BUSY_PATIENCE, || {
            remote.ingest_warc(bytes.clone())
        })
        .await?;
        outln!(
            "warc {}: {} records, {} HTML pages, {} other records skipped",
            path.display(),
            report.records,
            report.records - report.other_records,
            report.other_records,
        );
        total.loaded += report.loaded;
        total.unchanged += report.unchanged;
        total.skipped += report.skipped;
        total.truncated += report.truncated;
    }
    outln!("loaded through the server at {}", remote.base());
    out!(
        "{}",
        load_table(&LoadReport {
            loaded: total.loaded,
            unchanged: total.unchanged,
            skipped: total.skipped,
            cut: total.truncated,
            elapsed: began.elapsed(),
        })
    );
    Ok(ExitCode::SUCCESS)
}
