//! The HTTP API's routes and handlers (axum). Every handler works on the server's one client;
//! searches read a snapshot, ingests and deletes run one transaction per page, exactly as the
//! CLI does when it opens the database itself.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use axum::Json;
use axum::extract::{DefaultBodyLimit, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use percolator_core::RowStore;
use percolator_webindex::{self as webindex, CrawledPage, Mode, PageOutcome, SearchOptions, warc};
use serde::Deserialize;

use crate::state::{Shared, count};
use crate::wire::*;

/// The largest request body (a WARC upload).
pub const MAX_BODY_BYTES: usize = 512 * 1024 * 1024;

/// The search page (no external resources: it works offline).
const INDEX_HTML: &str = include_str!("../assets/index.html");

/// The API's routes.
pub(crate) fn router<S: RowStore>(shared: Arc<Shared<S>>) -> axum::Router {
    axum::Router::new()
        .route("/", get(index))
        .route("/api/search", get(search::<S>))
        .route("/api/pages", post(ingest_pages::<S>))
        .route("/api/warc", post(ingest_warc::<S>))
        .route("/api/delete", post(delete::<S>))
        .route("/api/delete-missing", post(delete_missing::<S>))
        .route("/api/status", get(status::<S>))
        .route("/api/stats", get(stats::<S>))
        .route("/metrics", get(metrics::<S>))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(shared)
}

/// A failed request: its status and what failed, as `{"error": ...}`.
pub(crate) struct ApiError(StatusCode, String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, Json(ErrorBody { error: self.1 })).into_response()
    }
}

impl From<percolator_core::Error> for ApiError {
    fn from(e: percolator_core::Error) -> Self {
        let status = match e {
            percolator_core::Error::InvalidInput(_) => StatusCode::BAD_REQUEST,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError(status, e.to_string())
    }
}

impl From<webindex::LoadError> for ApiError {
    fn from(e: webindex::LoadError) -> Self {
        match e {
            webindex::LoadError::Txn(e) => e.into(),
            other => ApiError(StatusCode::BAD_REQUEST, other.to_string()),
        }
    }
}

type ApiResult<T> = Result<Json<T>, ApiError>;

async fn index() -> Html<&'static str> {
    Html(INDEX_HTML)
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
    let results = webindex::search(shared.client(), &params.q, &options).await?;
    shared.searches.fetch_add(1, Relaxed);
    shared.search_latency.record(began.elapsed());
    Ok(Json(results))
}

/// Loads pages, counting outcomes and noting the loaded ones for freshness.
async fn load<S: RowStore, E: std::fmt::Display>(
    shared: &Shared<S>,
    pages: impl IntoIterator<Item = Result<CrawledPage, E>>,
) -> Result<IngestReport, ApiError> {
    let report = webindex::load_pages(
        shared.client(),
        pages,
        shared.load_concurrency,
        |url, outcome| {
            if outcome == PageOutcome::Loaded {
                shared.ingested(Bytes::copy_from_slice(url.as_bytes()));
            }
        },
    )
    .await?;
    count(&shared.pages_loaded, report.loaded);
    count(&shared.pages_unchanged, report.unchanged);
    count(&shared.pages_skipped, report.skipped);
    Ok(IngestReport {
        loaded: report.loaded,
        unchanged: report.unchanged,
        skipped: report.skipped,
        ..IngestReport::default()
    })
}

async fn ingest_pages<S: RowStore>(
    State(shared): State<Arc<Shared<S>>>,
    Json(pages): Json<Vec<PageIn>>,
) -> ApiResult<IngestReport> {
    let pages = pages.into_iter().map(|p| {
        Ok::<_, std::convert::Infallible>(CrawledPage {
            url: p.url,
            html: webindex::sources::truncate_page(Bytes::from(p.html)),
        })
    });
    Ok(Json(load(&shared, pages).await?))
}

async fn ingest_warc<S: RowStore>(
    State(shared): State<Arc<Shared<S>>>,
    body: Bytes,
) -> ApiResult<IngestReport> {
    // Decompressing and parsing is CPU work: off the async workers.
    let counts = Arc::new(warc::WarcCounts::default());
    let parse_counts = Arc::clone(&counts);
    let pages = tokio::task::spawn_blocking(move || {
        warc::html_pages_counted(warc::from_bytes(body), parse_counts).collect::<Vec<_>>()
    })
    .await
    .map_err(|e| ApiError(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    let mut report = load(&shared, pages).await?;
    report.records = counts.records.load(Relaxed);
    report.other_records = report.records - counts.pages.load(Relaxed);
    report.truncated = counts.truncated.load(Relaxed);
    Ok(Json(report))
}

async fn delete<S: RowStore>(
    State(shared): State<Arc<Shared<S>>>,
    Json(request): Json<DeleteRequest>,
) -> ApiResult<DeleteReport> {
    let mut report = DeleteReport::default();
    for url in request.urls {
        if webindex::delete_page(shared.client(), url.as_bytes()).await? {
            report.deleted += 1;
        } else {
            report.missing.push(url);
        }
    }
    count(&shared.pages_deleted, report.deleted);
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
    let documents = webindex::search(client, "", &SearchOptions::default())
        .await?
        .documents;
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
        tables,
    })
}

async fn status<S: RowStore>(State(shared): State<Arc<Shared<S>>>) -> ApiResult<Status> {
    Ok(Json(status_of(&shared).await?))
}

async fn stats<S: RowStore>(State(shared): State<Arc<Shared<S>>>) -> ApiResult<Stats> {
    let pending = shared.runtime.pending().await?;
    let report = webindex::check(shared.client()).await?;
    Ok(Json(Stats { pending, report }))
}

async fn metrics<S: RowStore>(State(shared): State<Arc<Shared<S>>>) -> Result<Response, ApiError> {
    let status = status_of(&shared).await?;
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
