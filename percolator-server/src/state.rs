//! What the handlers share: the runtime (its client, its stats), and the server's own
//! measurements — observer throughput sampled each second, freshness (a page's ingest until the
//! clusterer placed it), search latency and ingest counts.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use bytes::Bytes;
use percolator_core::internal::histogram::Histogram;
use percolator_core::{Client, RowStore};
use percolator_observers::Runtime;
use percolator_webindex::Clustered;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::ApiError;
use crate::wire::{Checked, Status};

/// Pages ingested and not yet clustered, tracked for freshness; beyond this many the oldest
/// are no longer followed (a bulk load needs no per-page freshness).
const MAX_TRACKED: usize = 200_000;

/// Uploads (`POST /api/pages`, `/api/warc`) served at once; more are answered 503 with
/// `Retry-After`. Each holds a batch of pages in memory and loads with the server's
/// concurrency, so a few at a time already keep the loader busy.
pub const MAX_CONCURRENT_UPLOADS: usize = 2;

/// Searches ranked at once. A search is CPU work (scoring its postings); on a 2-core machine
/// more at once only makes each slower, so the others wait their turn.
pub const MAX_CONCURRENT_SEARCHES: usize = 4;

/// How long a search waits for its turn before it is answered 503 with `Retry-After`.
pub const SEARCH_QUEUE_WAIT: Duration = Duration::from_secs(2);

/// Rows with pending notifications, over every table the pipeline observes, past which ingests are
/// answered 503 with `Retry-After` until the pipeline catches up: new pages would only wait,
/// and freshness and search latency suffer for them. Every stage counts, not only the pages
/// waiting to be parsed: under many searchers the later stages (links, clusters) fell behind
/// while the pages' own queue stayed short, and their queues grew past 90 000 (see
/// ARCHITECTURE.md, "The server's limits come from measurement").
pub const MAX_INGEST_BACKLOG: u64 = 20_000;

/// How long an answer of `GET /api/status` is served again (a status reads every table's
/// pending notifications and locks: once a second whatever the request rate).
const STATUS_MAX_AGE: Duration = Duration::from_secs(1);

/// Without a write since, a status is served again for this many times its computation's wall
/// time when that is longer than [`STATUS_MAX_AGE`]: a status counting 100 000 locks is not
/// counted again every second for a dashboard. After a write it is computed again at once, so
/// a client that wrote and waits for `pending` to reach 0 never reads a count from before.
const STATUS_PAUSE_FACTOR: u32 = 10;

/// The last status computed: when, at what cost, and whether a write came since.
struct CachedStatus {
    at: Instant,
    cost: Duration,
    status: Status,
    stale: bool,
}

impl CachedStatus {
    /// Whether it is served again: not after a write; else until [`STATUS_MAX_AGE`], or
    /// [`STATUS_PAUSE_FACTOR`] times its cost if longer.
    fn fresh(&self) -> bool {
        serve_again(self.at.elapsed(), self.cost, self.stale)
    }
}

/// Whether a status computed `age` ago in `cost` is served again; `stale`: a write came since.
fn serve_again(age: Duration, cost: Duration, stale: bool) -> bool {
    !stale && age < STATUS_MAX_AGE.max(cost * STATUS_PAUSE_FACTOR)
}

/// The last full check (`POST /api/check`): when it finished and what it found.
struct LastCheck {
    finished: Instant,
    checked: Checked,
}

/// The handlers' state.
pub struct Shared<S: RowStore> {
    pub(crate) runtime: Arc<Runtime<S>>,
    pub(crate) started: Instant,
    /// How ingests load pages.
    pub(crate) load: percolator_webindex::LoadConfig,
    samples: Samples,
    ingested: std::sync::Mutex<HashMap<Bytes, Instant>>,
    pub(crate) freshness: Histogram,
    pub(crate) searches: AtomicU64,
    pub(crate) search_latency: Histogram,
    pub(crate) pages_loaded: AtomicU64,
    pub(crate) pages_unchanged: AtomicU64,
    pub(crate) pages_skipped: AtomicU64,
    pub(crate) pages_deleted: AtomicU64,
    uploads: Arc<Semaphore>,
    searches_slots: Arc<Semaphore>,
    pub(crate) searches_rejected: AtomicU64,
    pub(crate) ingests_rejected: AtomicU64,
    /// Pending notifications of the pipeline's tables at the last sample (counted up to just
    /// past [`MAX_INGEST_BACKLOG`]).
    pub(crate) backlog: AtomicU64,
    /// One full check at a time; the last one's result.
    check: tokio::sync::Mutex<Option<LastCheck>>,
    /// The last status computed, and when.
    status: tokio::sync::Mutex<Option<CachedStatus>>,
}

/// Throughput samples: `(when, observer transactions committed)`, one a second, the last 11.
#[derive(Default)]
struct Samples(std::sync::Mutex<VecDeque<(Instant, u64)>>);

impl Samples {
    fn push(&self, at: Instant, processed: u64) {
        if let Ok(mut ring) = self.0.lock() {
            ring.push_back((at, processed));
            while ring.len() > 11 {
                ring.pop_front();
            }
        }
    }

    /// Per second over the ring (0 with fewer than two samples).
    fn rate(&self) -> f64 {
        let Ok(ring) = self.0.lock() else { return 0.0 };
        match (ring.front(), ring.back()) {
            (Some(a), Some(b)) if b.0 > a.0 => {
                b.1.saturating_sub(a.1) as f64 / (b.0 - a.0).as_secs_f64()
            }
            _ => 0.0,
        }
    }
}

impl<S: RowStore> Shared<S> {
    pub(crate) fn new(runtime: Runtime<S>, load: percolator_webindex::LoadConfig) -> Self {
        Self {
            runtime: Arc::new(runtime),
            started: Instant::now(),
            load,
            samples: Default::default(),
            ingested: std::sync::Mutex::new(HashMap::new()),
            freshness: Histogram::default(),
            searches: AtomicU64::new(0),
            search_latency: Histogram::default(),
            pages_loaded: AtomicU64::new(0),
            pages_unchanged: AtomicU64::new(0),
            pages_skipped: AtomicU64::new(0),
            pages_deleted: AtomicU64::new(0),
            uploads: Arc::new(Semaphore::new(MAX_CONCURRENT_UPLOADS)),
            searches_slots: Arc::new(Semaphore::new(MAX_CONCURRENT_SEARCHES)),
            searches_rejected: AtomicU64::new(0),
            ingests_rejected: AtomicU64::new(0),
            backlog: AtomicU64::new(0),
            check: tokio::sync::Mutex::new(None),
            status: tokio::sync::Mutex::new(None),
        }
    }

    /// A turn to search: at most [`MAX_CONCURRENT_SEARCHES`] at once, after a wait of at most
    /// [`SEARCH_QUEUE_WAIT`]; then 503 with `Retry-After`.
    pub(crate) async fn search_turn(&self) -> Result<OwnedSemaphorePermit, ApiError> {
        let waiting = Arc::clone(&self.searches_slots).acquire_owned();
        match tokio::time::timeout(SEARCH_QUEUE_WAIT, waiting).await {
            Ok(Ok(permit)) => Ok(permit),
            _ => {
                self.searches_rejected.fetch_add(1, Relaxed);
                Err(ApiError::busy(
                    format!(
                        "{MAX_CONCURRENT_SEARCHES} searches are running and this one waited \
                         {SEARCH_QUEUE_WAIT:?} for its turn; retry in a moment"
                    ),
                    1,
                ))
            }
        }
    }

    /// Refuses an ingest (503 with `Retry-After`) while more than [`MAX_INGEST_BACKLOG`]
    /// notifications wait to be processed.
    pub(crate) fn refuse_if_backlogged(&self) -> Result<(), ApiError> {
        let backlog = self.backlog.load(Relaxed);
        if backlog <= MAX_INGEST_BACKLOG {
            return Ok(());
        }
        self.ingests_rejected.fetch_add(1, Relaxed);
        Err(ApiError {
            kind: "backlog",
            ..ApiError::busy(
                format!(
                    "more than {MAX_INGEST_BACKLOG} notifications wait to be processed; retry \
                     once the pipeline has caught up"
                ),
                2,
            )
        })
    }

    /// Forgets the cached status: after a write, the next status request sees its effect.
    pub(crate) async fn status_changed(&self) {
        if let Some(cached) = self.status.lock().await.as_mut() {
            cached.stale = true;
        }
    }

    /// The status, computed at most once per [`STATUS_MAX_AGE`] or more when it is dear
    /// (requests meanwhile get the same answer), and after every write
    /// ([`CachedStatus::fresh`]).
    pub(crate) async fn status(&self) -> Result<Status, ApiError> {
        let mut cached = self.status.lock().await;
        if let Some(cached) = cached.as_ref()
            && cached.fresh()
        {
            return Ok(cached.status.clone());
        }
        let at = Instant::now();
        let status = crate::api::status_of(self).await?;
        *cached = Some(CachedStatus {
            at,
            cost: at.elapsed(),
            status: status.clone(),
            stale: false,
        });
        Ok(status)
    }

    /// A slot for an upload, or 503 with `Retry-After` when [`MAX_CONCURRENT_UPLOADS`] are
    /// running.
    pub(crate) fn upload_permit(&self) -> Result<OwnedSemaphorePermit, ApiError> {
        Arc::clone(&self.uploads).try_acquire_owned().map_err(|_| {
            ApiError::busy(
                format!("{MAX_CONCURRENT_UPLOADS} uploads are running; retry in a moment"),
                1,
            )
        })
    }

    /// The full check of the index: one at a time. A request that waited while another ran
    /// one gets that one's result (with its age) instead of running it again.
    pub(crate) async fn checked(&self) -> Result<Checked, ApiError> {
        let arrived = Instant::now();
        let mut last = self.check.lock().await;
        if let Some(done) = last.as_ref().filter(|c| c.finished >= arrived) {
            let mut checked = done.checked.clone();
            checked.age_secs = done.finished.elapsed().as_secs_f64();
            return Ok(checked);
        }
        let pending = self.runtime.pending().await?;
        let report = percolator_webindex::check(self.client()).await?;
        let checked = Checked {
            pending,
            report,
            age_secs: 0.0,
        };
        *last = Some(LastCheck {
            finished: Instant::now(),
            checked: checked.clone(),
        });
        Ok(checked)
    }

    pub(crate) fn client(&self) -> &Client<S> {
        self.runtime.client()
    }

    /// Observer transactions per second over the last 10 seconds.
    pub(crate) fn rate(&self) -> f64 {
        self.samples.rate()
    }

    /// Notes that `url` was written by an ingest now.
    pub(crate) fn ingested(&self, url: Bytes) {
        if let Ok(mut pages) = self.ingested.lock() {
            if pages.len() >= MAX_TRACKED {
                pages.clear();
            }
            pages.insert(url, Instant::now());
        }
    }

    fn clustered(&self, event: &Clustered) {
        let since = self
            .ingested
            .lock()
            .ok()
            .and_then(|mut p| p.remove(&event.url));
        if let Some(since) = since {
            self.freshness
                .record(event.at.saturating_duration_since(since));
        }
    }
}

/// The backlog is measured again after at least this many times its last measurement's wall
/// time (and at least a second): counting 20 000 pending rows every second took a sixth of a
/// 2-core server's CPU under the serve load test.
const BACKLOG_PAUSE_FACTOR: u32 = 20;

/// Samples the runtime's throughput each second, and the ingest backlog at most once a second
/// and paced by its cost ([`BACKLOG_PAUSE_FACTOR`]), until the state is dropped elsewhere.
pub(crate) async fn sample<S: RowStore>(shared: Arc<Shared<S>>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut next_backlog = Instant::now();
    loop {
        tick.tick().await;
        let processed = shared.runtime.stats().notifications_processed;
        shared.samples.push(Instant::now(), processed);
        if Instant::now() < next_backlog {
            continue;
        }
        // Counted up to just past the limit: the scans cost no more however long the backlog.
        let started = Instant::now();
        match backlog(shared.client(), MAX_INGEST_BACKLOG + 1).await {
            Ok(pending) => shared.backlog.store(pending, Relaxed),
            Err(e) => tracing::warn!(error = %e, "could not measure the ingest backlog"),
        }
        next_backlog = started + started.elapsed() * BACKLOG_PAUSE_FACTOR;
    }
}

/// Pending notifications of the tables the pipeline observes, counted up to `cap`.
async fn backlog<S: RowStore>(client: &Client<S>, cap: u64) -> percolator_core::Result<u64> {
    let mut tables: Vec<Bytes> = percolator_webindex::observed_columns()
        .into_iter()
        .map(|observed| observed.table)
        .collect();
    tables.sort();
    tables.dedup();
    let mut pending = 0u64;
    for table in tables {
        let left = usize::try_from(cap.saturating_sub(pending)).unwrap_or(usize::MAX);
        if left == 0 {
            break;
        }
        let rows = client
            .scan_notifications(
                &table,
                std::ops::Bound::Unbounded,
                std::ops::Bound::Unbounded,
                Some(left),
            )
            .await?;
        pending += rows.len() as u64;
    }
    Ok(pending)
}

/// Records freshness from the clusterer's events.
pub(crate) async fn follow_clustering<S: RowStore>(
    shared: Arc<Shared<S>>,
    mut events: UnboundedReceiver<Clustered>,
) {
    while let Some(event) = events.recv().await {
        shared.clustered(&event);
    }
}

/// Counts one page's load outcome.
pub(crate) fn count(counter: &AtomicU64, n: usize) {
    counter.fetch_add(n as u64, Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_is_computed_again_after_a_write_and_paced_by_its_cost_otherwise() {
        let ms = Duration::from_millis;
        // Cheap: served again for a second, recomputed at once after a write.
        assert!(serve_again(ms(500), ms(5), false));
        assert!(!serve_again(ms(1_000), ms(5), false));
        assert!(!serve_again(ms(60), ms(5), true));
        // Dear: served again for ten times its cost, but not after a write.
        assert!(serve_again(ms(1_900), ms(200), false));
        assert!(!serve_again(ms(2_000), ms(200), false));
        assert!(!serve_again(ms(100), ms(200), true));
    }
}
