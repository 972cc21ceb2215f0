//! The HTTP API's routes and handlers (axum). Every handler works on the server's one client;
//! searches read a snapshot, ingests and deletes run one transaction per page, exactly as the
//! CLI does when it opens the database itself.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use axum::Json;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Query, State};
use axum::http::header;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use futures::TryStreamExt as _;
use percolator_core::RowStore;
use percolator_webindex::{self as webindex, CrawledPage, Mode, PageOutcome, SearchOptions, warc};
use serde::Deserialize;

pub use crate::error::ApiError;
use crate::guard::{Guard, MAX_PAGES_BYTES, MAX_SMALL_BODY_BYTES, MAX_WARC_BYTES};
pub use crate::state::{
    MAX_CONCURRENT_SEARCHES, MAX_CONCURRENT_UPLOADS, MAX_INGEST_BACKLOG, SEARCH_QUEUE_WAIT,
};
use crate::state::{Shared, count};
use crate::wire::*;

/// The search page (no external resources: it works offline). Its script and style are files
/// of their own, so that the content security policy can forbid inline script.
const INDEX_HTML: &str = include_str!("../assets/index.html");
const APP_JS: &str = include_str!("../assets/app.js");
const APP_CSS: &str = include_str!("../assets/app.css");

/// Pages parsed from a WARC upload ahead of the loader, per batch (the upload is streamed: it
/// is never held whole).
const WARC_BATCH_PAGES: usize = 64;

/// The API's routes, behind the guard ([`crate::guard`]).
pub(crate) fn router<S: RowStore>(shared: Arc<Shared<S>>, guard: Arc<Guard>) -> axum::Router {
    let limit = |bytes: u64| DefaultBodyLimit::max(usize::try_from(bytes).unwrap_or(usize::MAX));
    axum::Router::new()
        .route("/", get(index))
        .route("/app.js", get(app_js))
        .route("/app.css", get(app_css))
        .route("/api/search", get(search::<S>))
        .route(
            "/api/pages",
            post(ingest_pages::<S>).layer(limit(MAX_PAGES_BYTES)),
        )
        // Streamed, with its own limit.
        .route(
            "/api/warc",
            post(ingest_warc::<S>).layer(DefaultBodyLimit::disable()),
        )
        .route("/api/delete", post(delete::<S>))
        .route("/api/delete-missing", post(delete_missing::<S>))
        .route("/api/status", get(status::<S>))
        .route("/api/stats", get(stats::<S>))
        .route("/api/check", post(check::<S>))
        .route("/metrics", get(metrics::<S>))
        .layer(limit(MAX_SMALL_BODY_BYTES))
        .layer(axum::middleware::from_fn_with_state(
            guard,
            crate::guard::guard,
        ))
        .with_state(shared)
}

type ApiResult<T> = Result<Json<T>, ApiError>;

async fn index() -> Html<&'static str> {
    Html(INDEX_HTML)
}

async fn app_js() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        APP_JS,
    )
        .into_response()
}

async fn app_css() -> Response {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], APP_CSS).into_response()
}

/// `GET /api/search` parameters.
#[derive(Debug, Deserialize)]
struct SearchParams {
    q: String,
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    offset: Option<usize>,
    #[serde(default)]
    snippets: Option<bool>,
}

async fn search<S: RowStore>(
    State(shared): State<Arc<Shared<S>>>,
    Query(params): Query<SearchParams>,
) -> ApiResult<SearchResults> {
    let began = Instant::now();
    let mut options = SearchOptions::default();
    if let Some(mode) = &params.mode {
        options = options.mode(mode.parse::<Mode>()?);
    }
    if let Some(limit) = params.limit {
        options = options.limit(limit);
    }
    if let Some(offset) = params.offset {
        options = options.offset(offset);
    }
    if let Some(snippets) = params.snippets {
        options = options.snippets(snippets);
    }
    let _turn = shared.search_turn().await?;
    let mut renewed = 0;
    let results = loop {
        match webindex::search(shared.client(), &params.q, &options).await {
            // The worker lease lapsed under the search (GC may pass its snapshot): renew it and
            // search again on a fresh snapshot, instead of failing a read that can just retry.
            Err(percolator_core::Error::SnapshotTooOld { .. }) if renewed < 2 => {
                renewed += 1;
                if let Err(e) = shared.client().renew_lease().await {
                    tracing::warn!(error = %e, "could not renew the lease for a search");
                }
            }
            other => break other?,
        }
    };
    shared.searches.fetch_add(1, Relaxed);
    shared.search_latency.record(began.elapsed());
    Ok(Json(results))
}

/// Loads pages, counting outcomes and noting the loaded ones for freshness.
async fn load<S: RowStore, E: std::fmt::Display>(
    shared: &Shared<S>,
    pages: impl IntoIterator<Item = Result<CrawledPage, E>>,
) -> Result<IngestReport, ApiError> {
    let report =
        webindex::load_pages_checked(shared.client(), pages, shared.load, |url, outcome| {
            if outcome == Ok(PageOutcome::Loaded) {
                shared.ingested(Bytes::copy_from_slice(url.as_bytes()));
            }
        })
        .await?;
    count(&shared.pages_loaded, report.loaded);
    count(&shared.pages_unchanged, report.unchanged);
    count(&shared.pages_skipped, report.skipped);
    shared.status_changed().await;
    Ok(IngestReport {
        loaded: report.loaded,
        unchanged: report.unchanged,
        skipped: report.skipped,
        truncated: report.cut,
        ..IngestReport::default()
    })
}

async fn ingest_pages<S: RowStore>(
    State(shared): State<Arc<Shared<S>>>,
    Json(pages): Json<Vec<PageIn>>,
) -> ApiResult<IngestReport> {
    shared.refuse_if_backlogged()?;
    let _upload = shared.upload_permit()?;
    let pages = pages.into_iter().map(|p| {
        Ok::<_, std::convert::Infallible>(CrawledPage {
            url: p.url,
            html: Bytes::from(p.html),
        })
    });
    Ok(Json(load(&shared, pages).await?))
}

async fn ingest_warc<S: RowStore>(
    State(shared): State<Arc<Shared<S>>>,
    body: Body,
) -> ApiResult<IngestReport> {
    shared.refuse_if_backlogged()?;
    let _upload = shared.upload_permit()?;
    // The body streams into a parser on a blocking thread (decompressing and parsing is CPU
    // work), which hands pages over in batches through a bounded channel: the upload is never
    // held whole, and a slow loader slows the reading down.
    let mut read = 0u64;
    let stream = body
        .into_data_stream()
        .map_err(std::io::Error::other)
        .and_then(move |chunk| {
            read += chunk.len() as u64;
            std::future::ready(if read > MAX_WARC_BYTES {
                Err(std::io::Error::other(format!(
                    "the upload is over {MAX_WARC_BYTES} bytes"
                )))
            } else {
                Ok(chunk)
            })
        });
    let reader = tokio_util::io::SyncIoBridge::new(tokio_util::io::StreamReader::new(stream));
    let counts = Arc::new(warc::WarcCounts::default());
    let parse_counts = Arc::clone(&counts);
    let (batches, mut received) = tokio::sync::mpsc::channel::<Vec<_>>(2);
    let parser = tokio::task::spawn_blocking(move || -> Result<(), warc::WarcError> {
        let pages = warc::html_pages_counted(warc::from_reader(reader)?, parse_counts);
        let mut batch = Vec::with_capacity(WARC_BATCH_PAGES);
        for page in pages {
            batch.push(page);
            if batch.len() == WARC_BATCH_PAGES {
                let full = std::mem::replace(&mut batch, Vec::with_capacity(WARC_BATCH_PAGES));
                if batches.blocking_send(full).is_err() {
                    return Ok(()); // the request is gone
                }
            }
        }
        if !batch.is_empty() {
            let _ = batches.blocking_send(batch);
        }
        Ok(())
    });
    let mut report = IngestReport::default();
    while let Some(batch) = received.recv().await {
        let loaded = load(&shared, batch).await?;
        report.loaded += loaded.loaded;
        report.unchanged += loaded.unchanged;
        report.skipped += loaded.skipped;
        report.truncated += loaded.truncated;
    }
    parser
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?
        .map_err(|e| ApiError::bad_request("invalid_warc", e.to_string()))?;
    report.records = counts.records.load(Relaxed);
    let bad_urls = counts.bad_urls.load(Relaxed);
    report.skipped += bad_urls;
    count(&shared.pages_skipped, bad_urls);
    report.other_records = report
        .records
        .saturating_sub(counts.pages.load(Relaxed) + bad_urls);
    Ok(Json(report))
}

async fn delete<S: RowStore>(
    State(shared): State<Arc<Shared<S>>>,
    Json(request): Json<DeleteRequest>,
) -> ApiResult<DeleteReport> {
    let mut report = DeleteReport::default();
    for url in request.urls {
        // Pages are stored under their normalized URL; a URL as typed may differ.
        let stored = webindex::url::normalize(&url).unwrap_or_else(|_| url.clone());
        if webindex::delete_page(shared.client(), stored.as_bytes()).await?
            || (stored != url && webindex::delete_page(shared.client(), url.as_bytes()).await?)
        {
            report.deleted += 1;
        } else {
            report.missing.push(url);
        }
    }
    count(&shared.pages_deleted, report.deleted);
    shared.status_changed().await;
    Ok(Json(report))
}

async fn delete_missing<S: RowStore>(
    State(shared): State<Arc<Shared<S>>>,
    Json(request): Json<DeleteMissingRequest>,
) -> ApiResult<DeleteReport> {
    let keep: HashSet<Bytes> = request.keep.into_iter().map(Bytes::from).collect();
    let deleted =
        webindex::delete_missing(shared.client(), request.prefix.as_bytes(), &keep).await?;
    count(&shared.pages_deleted, deleted);
    shared.status_changed().await;
    Ok(Json(DeleteReport {
        deleted,
        missing: Vec::new(),
    }))
}

pub(crate) async fn status_of<S: RowStore>(shared: &Shared<S>) -> Result<Status, ApiError> {
    let client = shared.client();
    let mut tables = Vec::new();
    for table in webindex::schema::TABLES {
        tables.push(TableStatus {
            table: String::from_utf8_lossy(table).into_owned(),
            pending: client.pending_notifications(table).await? as u64,
            locks: client.locks(table).await?.len(),
        });
    }
    let stats = shared.runtime.stats();
    let documents = webindex::search::documents(client).await?;
    let secs = |d: std::time::Duration| d.as_secs_f64();
    Ok(Status {
        uptime_secs: shared.started.elapsed().as_secs_f64(),
        documents,
        pending: shared.runtime.pending().await?,
        processed: stats.notifications_processed,
        processed_per_sec: shared.rate(),
        failures: stats.failures,
        freshness_samples: shared.freshness.count(),
        freshness_p50_secs: secs(shared.freshness.quantile(0.5)),
        freshness_p99_secs: secs(shared.freshness.quantile(0.99)),
        searches: shared.searches.load(Relaxed),
        search_p50_ms: secs(shared.search_latency.quantile(0.5)) * 1000.0,
        gc_runs: stats.gc_runs,
        gc_secs: stats.gc_micros as f64 / 1e6,
        gc_cells_deleted: stats.gc_cells_deleted,
        tables,
    })
}

async fn status<S: RowStore>(State(shared): State<Arc<Shared<S>>>) -> ApiResult<Status> {
    Ok(Json(shared.status().await?))
}

async fn stats<S: RowStore>(State(shared): State<Arc<Shared<S>>>) -> ApiResult<Sizes> {
    let client = shared.client();
    let txn = client.begin().await?;
    let sizes = webindex::sizes::read(&txn).await?;
    Ok(Json(Sizes {
        pending: shared.runtime.pending().await?,
        sizes,
    }))
}

async fn check<S: RowStore>(State(shared): State<Arc<Shared<S>>>) -> ApiResult<Checked> {
    Ok(Json(shared.checked().await?))
}

async fn metrics<S: RowStore>(State(shared): State<Arc<Shared<S>>>) -> Result<Response, ApiError> {
    let status = shared.status().await?;
    let stats = shared.runtime.stats();
    let text = crate::metrics::render(&shared, &status, &stats);
    Ok((
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response())
}
