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

/// Deletes the stored page of `url` (the pipeline then takes it out of its cluster, the links
/// and the index, as for any change). Returns whether there was one.
pub async fn delete_page<S: RowStore>(client: &Client<S>, url: &[u8]) -> Result<bool> {
    let url = Bytes::copy_from_slice(url);
    client
        .run(|txn| -> BoxFuture<'_, Result<bool>> {
            let url = url.clone();
            Box::pin(async move {
                if txn.get(DOCUMENTS, &url, RAW).await?.is_none() {
                    return Ok(false);
                }
                txn.delete(DOCUMENTS, &url, RAW)?;
                Ok(true)
            })
        })
        .await
}

/// Deletes every stored page whose URL starts with `prefix` and is not in `keep`: the pages a
/// source no longer has (`load --dir … --delete-missing`). Reads the documents a page of rows
/// at a time. Returns how many were deleted.
pub async fn delete_missing<S: RowStore>(
    client: &Client<S>,
    prefix: &[u8],
    keep: &std::collections::HashSet<Bytes>,
) -> Result<usize> {
    let txn = client.begin().await?;
    let mut doomed = Vec::new();
    let mut start = std::ops::Bound::Included(Bytes::copy_from_slice(prefix));
    'pages: loop {
        let page = txn
            .scan_page(DOCUMENTS, start, percolator_core::Columns::one(RAW), 64)
            .await?;
        for item in page.items {
            if !item.row.starts_with(prefix) {
                break 'pages;
            }
            if !keep.contains(&item.row) {
                doomed.push(item.row);
            }
        }
        match page.next {
            Some(next) => start = next,
            None => break,
        }
    }
    drop(txn);
    let mut deleted = 0;
    for url in doomed {
        if delete_page(client, &url).await? {
            deleted += 1;
        }
    }
    Ok(deleted)
}
