//! Loaders: one transaction per crawled page writes its raw HTML into `documents:raw`, which is
//! what sets the pipeline going. A page whose stored HTML is byte-for-byte the same is left
//! alone (a recrawl that found no change triggers nothing).
//!
//! Every page's URL is checked and normalized first ([`crate::url::normalize`]): the page is
//! stored under the normalized URL, and a page whose URL is refused (not an absolute `http` or
//! `https` URL with a host, a control character, too long…) is not stored at all. [`load_page`]
//! and [`load_pages`] count it as [`PageOutcome::Skipped`] (`skipped` in the [`LoadReport`]);
//! [`load_page_checked`] and [`load_pages_checked`] also say why ([`BadUrl`]).

use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;
use futures::future::BoxFuture;
use percolator_core::{Client, Result, RowStore};

use super::schema::{DOCUMENTS, RAW};
use super::sources::CrawledPage;
use crate::url::{BadUrl, normalize};

/// What a load did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LoadReport {
    /// Pages written (new or changed).
    pub loaded: usize,
    /// Pages whose stored HTML was already the same.
    pub unchanged: usize,
    /// Pages refused because [`normalize`] refused their URL (not stored): "skipped (bad URL)".
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
    /// Refused (bad URL: see [`normalize`]); nothing was stored.
    Skipped,
}

/// Writes one page (re-run on conflicts) under its normalized URL ([`normalize`]).
///
/// A page whose URL is refused is not stored, and the answer is `Ok(PageOutcome::Skipped)`;
/// [`load_page_checked`] answers [`LoadError::BadUrl`] with the reason instead.
pub async fn load_page<S: RowStore>(client: &Client<S>, page: CrawledPage) -> Result<PageOutcome> {
    match normalize(&page.url) {
        Ok(url) => store_page(client, url, page.html).await,
        Err(_) => Ok(PageOutcome::Skipped),
    }
}

/// [`load_page`], but a refused URL is the error [`LoadError::BadUrl`], naming the URL and why
/// it was refused (nothing is stored), instead of `Ok(PageOutcome::Skipped)`. The other
/// errors are [`LoadError::Txn`].
pub async fn load_page_checked<S: RowStore>(
    client: &Client<S>,
    page: CrawledPage,
) -> std::result::Result<PageOutcome, LoadError> {
    let url = normalize(&page.url)?;
    Ok(store_page(client, url, page.html).await?)
}

/// Writes `html` under `url` (already normalized), unless it is stored already.
async fn store_page<S: RowStore>(
    client: &Client<S>,
    url: String,
    html: Bytes,
) -> Result<PageOutcome> {
    let url = Bytes::from(url);
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
/// URL and outcome right after each page's transaction ends: the URL as stored (normalized), or
/// for a page refused for its URL ([`PageOutcome::Skipped`]) the URL as given — unchecked, so
/// it may hold anything, control characters included. [`load_pages_checked`] also says why a
/// page was refused.
///
/// `pages` yields `Err` for unreadable input (a broken WARC record): the load stops there
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
    // `move`: the future holds `progress` itself, as `load_pages_checked` holds its own (a
    // borrow held across its awaits would make the future `Send` only for a `Sync` callback).
    load_pages_checked(client, pages, concurrency, move |url, outcome| {
        progress(url, outcome.unwrap_or(PageOutcome::Skipped));
    })
    .await
}

/// [`load_pages`], calling `progress` with `Err` and the [`BadUrl`] (which names the reason)
/// for a page refused for its URL, where [`load_pages`] passes [`PageOutcome::Skipped`]. Such a
/// page is counted as `skipped` all the same; the load goes on.
pub async fn load_pages_checked<S, I, E>(
    client: &Client<S>,
    pages: I,
    concurrency: usize,
    progress: impl Fn(&str, std::result::Result<PageOutcome, &BadUrl>),
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
            match normalize(&page.url) {
                Ok(url) => store_page(client, url.clone(), page.html)
                    .await
                    .map(|outcome| (url, Ok(outcome))),
                Err(bad) => Ok((page.url, Err(bad))),
            }
        })
        .buffer_unordered(concurrency.max(1));
    while let Some(result) = results.next().await {
        let (url, outcome) = result?;
        match &outcome {
            Ok(PageOutcome::Loaded) => report.loaded += 1,
            Ok(PageOutcome::Unchanged) => report.unchanged += 1,
            Ok(PageOutcome::Skipped) | Err(_) => report.skipped += 1,
        }
        progress(&url, outcome.as_ref().copied());
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
    /// The page's URL was refused ([`load_page_checked`]; the other loaders count the page as
    /// skipped instead). Nothing was stored.
    #[error(transparent)]
    BadUrl(#[from] BadUrl),
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
