//! Loaders: one transaction per crawled page writes its raw HTML into `documents:raw`, which is
//! what sets the pipeline going. A page whose stored HTML is byte-for-byte the same is left
//! alone (a recrawl that found no change triggers nothing).

use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;
use futures::future::BoxFuture;
use percolator_core::{Client, Result, RowStore};

use super::schema::{DOCUMENTS, MAX_URL_BYTES, RAW};
use super::sources::CrawledPage;

/// What a load did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LoadReport {
    /// Pages written (new or changed).
    pub loaded: usize,
    /// Pages whose stored HTML was already the same.
    pub unchanged: usize,
    /// Pages refused: empty URL or longer than [`MAX_URL_BYTES`].
    pub skipped: usize,
    /// Wall time.
    pub elapsed: Duration,
}

/// What happened to one page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageOutcome {
    /// Written.
    Loaded,
    /// Same HTML already stored.
    Unchanged,
    /// Refused (bad URL).
    Skipped,
}

/// Writes one page (re-run on conflicts).
pub async fn load_page<S: RowStore>(client: &Client<S>, page: CrawledPage) -> Result<PageOutcome> {
    if page.url.is_empty() || page.url.len() > MAX_URL_BYTES {
        return Ok(PageOutcome::Skipped);
    }
    let url = Bytes::from(page.url);
    let html = page.html;
    client
        .run(|txn| -> BoxFuture<'_, Result<PageOutcome>> {
            let url = url.clone();
            let html = html.clone();
            Box::pin(async move {
                if txn.get(DOCUMENTS, &url, RAW).await?.as_ref() == Some(&html) {
                    return Ok(PageOutcome::Unchanged);
                }
                txn.set(DOCUMENTS, &url, RAW, html)?;
                Ok(PageOutcome::Loaded)
            })
        })
        .await
}

/// Loads `pages` with up to `concurrency` transactions in flight, calling `progress` with the
/// URL and outcome right after each page's transaction ends. `pages` yields `Err` for unreadable input (a broken WARC record): the load stops there
/// and returns that error; every page before it is fully loaded.
pub async fn load_pages<S, I, E>(
    client: &Client<S>,
    pages: I,
    concurrency: usize,
    progress: impl Fn(&str, PageOutcome),
) -> std::result::Result<LoadReport, LoadError>
where
    S: RowStore,
    I: IntoIterator<Item = std::result::Result<CrawledPage, E>>,
    E: std::fmt::Display,
{
    let began = Instant::now();
    let mut report = LoadReport::default();
    let mut source_error = None;
    let pages = pages.into_iter().map_while(|p| match p {
        Ok(page) => Some(page),
        Err(e) => {
            source_error = Some(e.to_string());
            None
        }
    });
    let mut results = futures::stream::iter(pages)
        .map(|page| async move {
            let url = page.url.clone();
            load_page(client, page).await.map(|outcome| (url, outcome))
        })
        .buffer_unordered(concurrency.max(1));
    while let Some(outcome) = results.next().await {
        let (url, outcome) = outcome?;
        match outcome {
            PageOutcome::Loaded => report.loaded += 1,
            PageOutcome::Unchanged => report.unchanged += 1,
            PageOutcome::Skipped => report.skipped += 1,
        }
        progress(&url, outcome);
    }
    drop(results);
    report.elapsed = began.elapsed();
    match source_error {
        Some(reason) => Err(LoadError::Source {
            loaded: report.loaded,
            reason,
        }),
        None => Ok(report),
    }
}

/// Why a load stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// A transaction failed.
    #[error(transparent)]
    Txn(#[from] percolator_core::Error),
    /// The input could not be read further.
    #[error("input unreadable after {loaded} page(s) loaded: {reason}")]
    Source {
        /// Pages fully loaded before the error.
        loaded: usize,
        /// What was wrong.
        reason: String,
    },
}
