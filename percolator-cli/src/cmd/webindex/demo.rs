//! `webindex demo`: the main job in one command. It loads a synthetic crawl, indexes it,
//! recrawls part of it, indexes again, checks every invariant and runs a sample query, with
//! progress bars while it works and tables at the end.

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;
use percolator_core::{Client, RowStore, TimestampOracle};
use percolator_observers::Runtime;
use percolator_webindex::{
    self as webindex, Clustered, LoadReport, PageOutcome, SearchOptions, synthetic::SyntheticCrawl,
};
use tokio::sync::mpsc;

use super::run::run_until_idle;
use super::{DemoArgs, loader, runtime_config};
use crate::output::{
    bar, check_verdict, format_results, ms, out, outln, stats_table, summary_table, table,
};
use crate::{CliError, client_builder};

/// Runs the demo and prints its tables; the exit code is the invariants' verdict.
pub async fn run<S: RowStore>(
    store: Arc<S>,
    oracle: Option<Arc<dyn TimestampOracle>>,
    args: &DemoArgs,
) -> Result<ExitCode, CliError> {
    let began = Instant::now();
    let (probe, mut clustered) = mpsc::unbounded_channel::<Clustered>();
    let runtime = Runtime::start(
        client_builder(&store, &oracle),
        webindex::observers(Some(probe)),
        runtime_config(&args.workers)?,
    )
    .await?;
    let client = loader(&store, &oracle).await?;
    let crawl = SyntheticCrawl::new(args.docs, args.seed);
    outln!(
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
    outln!();
    let mut load_rows: Vec<(String, String)> = Vec::new();
    for (round, r, took, median) in &rounds {
        load_rows.push((
            format!("{round}: pages loaded / unchanged / skipped (bad URL)"),
            format!("{} / {} / {}", r.loaded, r.unchanged, r.skipped),
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
    out!("{}", table("rounds", &rows));
    outln!();
    out!("{}", stats_table(&stats, began.elapsed()));
    outln!();
    out!("{}", summary_table(&report.summary));
    outln!();
    if let Some(term) = sample_term(&client, &crawl).await? {
        let options = SearchOptions::default().limit(3);
        let results = webindex::search(&client, &term, &options).await?;
        outln!("query {term:?}:");
        out!("{}", format_results(&results, 0));
    }
    client.shutdown().await?;
    if interrupted {
        outln!("interrupted: stopped gracefully");
    }
    Ok(check_verdict(&report))
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
