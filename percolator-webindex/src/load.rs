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
use crate::raw;
use crate::sizes::{self, SizeCounts};
use crate::url::{BadUrl, normalize};

/// How pages are loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct LoadConfig {
    /// Page transactions in flight (at least 1).
    pub concurrency: usize,
    /// The most HTML kept of a page, in bytes ([`raw::DEFAULT_MAX_PAGE_BYTES`], 16 MiB, by
    /// default); longer pages are cut, and counted in [`LoadReport::cut`]. The store's largest
    /// value can cut a page shorter still ([`raw::fit`]).
    pub max_page_bytes: usize,
}

impl LoadConfig {
    /// `concurrency` transactions in flight, pages kept up to the default size.
    pub fn new(concurrency: usize) -> Self {
        Self {
            concurrency,
            max_page_bytes: raw::DEFAULT_MAX_PAGE_BYTES,
        }
    }

    /// Keeps at most `max_page_bytes` of a page's HTML.
    #[must_use]
    pub fn with_max_page_bytes(mut self, max_page_bytes: usize) -> Self {
        self.max_page_bytes = max_page_bytes;
        self
    }
}

impl Default for LoadConfig {
    fn default() -> Self {
        Self::new(8)
    }
}

/// What a load did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LoadReport {
    /// Pages written (new or changed).
    pub loaded: usize,
    /// Pages whose stored HTML was already the same.
    pub unchanged: usize,
    /// Pages refused because [`normalize`] refused their URL (not stored): "skipped (bad URL)".
    pub skipped: usize,
    /// Pages written (counted in `loaded`) with less than their whole HTML: longer than
    /// [`LoadConfig::max_page_bytes`], or than the store's largest value once compressed.
    pub cut: usize,
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
        Ok(url) => Ok(
            store_page(client, url, page.html, raw::DEFAULT_MAX_PAGE_BYTES)
                .await?
                .outcome,
        ),
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
    Ok(
        store_page(client, url, page.html, raw::DEFAULT_MAX_PAGE_BYTES)
            .await?
            .outcome,
    )
}

/// What storing one page did.
#[derive(Debug, Clone, Copy)]
struct Stored {
    outcome: PageOutcome,
    /// Written with less than its whole HTML.
    cut: bool,
}

/// Writes `html` under `url` (already normalized), as much of it as fits ([`raw::fit`]),
/// unless the same is stored already. A page stored cut, or a cut one replaced, changes the
/// kept count of cut pages in the same transaction.
async fn store_page<S: RowStore>(
    client: &Client<S>,
    url: String,
    html: Bytes,
    max_page_bytes: usize,
) -> Result<Stored> {
    let url = Bytes::from(url);
    let max_value_bytes = client.store().limits().max_value_bytes;
    // Compressing is CPU work of milliseconds for the largest pages: done once, before the
    // transaction (which a conflict re-runs).
    let fitted = raw::fit(&html, max_page_bytes, max_value_bytes);
    let kept = html.slice(..fitted.kept);
    let cell = fitted.cell;
    let cut = fitted.cut;
    client
        .run(|txn| -> BoxFuture<'_, Result<Stored>> {
            let (url, kept, cell) = (url.clone(), kept.clone(), cell.clone());
            Box::pin(async move {
                let old = txn.get(DOCUMENTS, &url, RAW).await?;
                let old_cut = old.as_deref().is_some_and(raw::is_cut);
                let same = old.as_ref().is_some_and(|old| {
                    old == &cell
                        || raw::decode(old).is_ok_and(|page| page.cut == cut && page.html == kept)
                });
                if same {
                    return Ok(Stored {
                        outcome: PageOutcome::Unchanged,
                        cut,
                    });
                }
                txn.set(DOCUMENTS, &url, RAW, cell)?;
                sizes::add(
                    txn,
                    SizeCounts {
                        cut_pages: i64::from(cut) - i64::from(old_cut),
                        ..SizeCounts::default()
                    },
                )?;
                Ok(Stored {
                    outcome: PageOutcome::Loaded,
                    cut,
                })
            })
        })
        .await
}

/// Loads `pages` with up to `concurrency` transactions in flight (pages kept up to the default
/// size: [`load_pages_checked`] takes a [`LoadConfig`]), calling `progress` with the
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
    load_pages_checked(
        client,
        pages,
        LoadConfig::new(concurrency),
        move |url, outcome| {
            progress(url, outcome.unwrap_or(PageOutcome::Skipped));
        },
    )
    .await
}

/// [`load_pages`] as `config` says, calling `progress` with `Err` and the [`BadUrl`] (which
/// names the reason) for a page refused for its URL, where [`load_pages`] passes
/// [`PageOutcome::Skipped`]. Such a page is counted as `skipped` all the same; the load goes
/// on.
pub async fn load_pages_checked<S, I, E>(
    client: &Client<S>,
    pages: I,
    config: LoadConfig,
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
                Ok(url) => store_page(client, url.clone(), page.html, config.max_page_bytes)
                    .await
                    .map(|stored| (url, Ok(stored))),
                Err(bad) => Ok((page.url, Err(bad))),
            }
        })
        .buffer_unordered(config.concurrency.max(1));
    while let Some(result) = results.next().await {
        let (url, stored) = result?;
        let outcome = stored.map(|stored| {
            if stored.cut && stored.outcome == PageOutcome::Loaded {
                report.cut += 1;
            }
            stored.outcome
        });
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
                let Some(old) = txn.get(DOCUMENTS, &url, RAW).await? else {
                    return Ok(false);
                };
                txn.delete(DOCUMENTS, &url, RAW)?;
                if raw::is_cut(&old) {
                    sizes::add(
                        txn,
                        SizeCounts {
                            cut_pages: -1,
                            ..SizeCounts::default()
                        },
                    )?;
                }
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
