//! The API's request and response bodies (JSON), shared by the server and [`crate::Remote`].

use serde::{Deserialize, Serialize};

pub use percolator_webindex::{CheckReport, IndexSizes, IndexSummary, SearchResults};

/// One page to ingest (`POST /api/pages` takes a list). HTML bytes that are not UTF-8 go in a
/// WARC upload instead (`POST /api/warc`), which keeps them as they are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageIn {
    /// The page's URL.
    pub url: String,
    /// Its HTML.
    pub html: String,
}

/// What an ingest did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IngestReport {
    /// Pages written (new or changed).
    pub loaded: usize,
    /// Pages whose stored HTML was already the same.
    pub unchanged: usize,
    /// Pages refused for their URL (not an absolute http or https URL, control characters,
    /// too long).
    pub skipped: usize,
    /// WARC records read (0 for `POST /api/pages`).
    pub records: usize,
    /// WARC records that were not an HTML page, skipped.
    pub other_records: usize,
    /// Pages stored with less than their whole HTML: longer than the server's limit (16 MiB
    /// unless `serve --max-page-bytes` says otherwise), or than the store's largest value
    /// once compressed. Counted by the loader, the same way for both ingest APIs.
    pub truncated: usize,
}

/// `POST /api/delete`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteRequest {
    /// URLs of the pages to delete.
    pub urls: Vec<String>,
}

/// What a delete did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteReport {
    /// Pages deleted.
    pub deleted: usize,
    /// URLs that were not stored.
    pub missing: Vec<String>,
}

/// `POST /api/delete-missing`: deletes the stored pages under `prefix` not in `keep` (a
/// directory load's `--delete-missing`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteMissingRequest {
    /// URL prefix of the pages the source covers.
    pub prefix: String,
    /// URLs the source still has.
    pub keep: Vec<String>,
}

/// Pending work and locks in one table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableStatus {
    /// Table name.
    pub table: String,
    /// Pending notifications.
    pub pending: u64,
    /// Locks held (transactions in flight, or left by a crash).
    pub locks: usize,
}

/// `GET /api/status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Status {
    /// Seconds since the server started.
    pub uptime_secs: f64,
    /// Documents in the search index.
    pub documents: i64,
    /// Pending notifications on the observed columns.
    pub pending: u64,
    /// Observer transactions committed since the server started.
    pub processed: u64,
    /// Observer transactions per second over the last 10 seconds.
    pub processed_per_sec: f64,
    /// Observer runs that failed (they are retried).
    pub failures: u64,
    /// Pages ingested through the API whose clustering was measured.
    pub freshness_samples: u64,
    /// Median seconds from a page's ingest until the clusterer placed it.
    pub freshness_p50_secs: f64,
    /// 99th percentile of the same.
    pub freshness_p99_secs: f64,
    /// Searches answered.
    pub searches: u64,
    /// Median search latency, milliseconds.
    pub search_p50_ms: f64,
    /// Background garbage-collection runs completed.
    #[serde(default)]
    pub gc_runs: u64,
    /// Their wall time, seconds.
    #[serde(default)]
    pub gc_secs: f64,
    /// Cells they deleted.
    #[serde(default)]
    pub gc_cells_deleted: u64,
    /// Per table.
    pub tables: Vec<TableStatus>,
}

/// `GET /api/stats`: the index's sizes as the pipeline keeps them (a few cells read), and the
/// notifications pending.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sizes {
    /// Pending notifications.
    pub pending: u64,
    /// The kept sizes.
    pub sizes: IndexSizes,
}

/// `POST /api/check`: the index's sizes and, when nothing is pending, its invariants (the full
/// check: one at a time, and a request that waited for a check to finish gets its result).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Checked {
    /// Pending notifications: with work pending the invariants are not judged.
    pub pending: u64,
    /// Sizes and invariant violations (differences still to be worked off while pending).
    pub report: CheckReport,
    /// How long ago the check finished, in seconds (more than 0 when this request waited for
    /// a check another request had started).
    #[serde(default)]
    pub age_secs: f64,
}

/// An error body: every failed request answers `{"error": {"kind": …, "message": …}}` with a
/// 4xx or 5xx status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// What failed.
    pub error: ErrorDetail,
}

/// What failed, in an [`ErrorBody`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorDetail {
    /// A short name a program can match on (`unauthorized`, `body_too_large`, `busy`, …).
    pub kind: String,
    /// What happened, for people.
    pub message: String,
}
