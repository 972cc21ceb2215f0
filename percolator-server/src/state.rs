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
use crate::wire::Stats;

/// Pages ingested and not yet clustered, tracked for freshness; beyond this many the oldest
/// are no longer followed (a bulk load needs no per-page freshness).
const MAX_TRACKED: usize = 200_000;

/// Uploads (`POST /api/pages`, `/api/warc`) served at once; more are answered 503 with
/// `Retry-After`. Each holds a batch of pages in memory and loads with the server's
/// concurrency, so a few at a time already keep the loader busy.
pub const MAX_CONCURRENT_UPLOADS: usize = 2;

/// The last full check (`POST /api/stats`): when it finished and what it found.
struct LastCheck {
    finished: Instant,
    stats: Stats,
}

/// The handlers' state.
pub struct Shared<S: RowStore> {
    pub(crate) runtime: Arc<Runtime<S>>,
    pub(crate) started: Instant,
    pub(crate) load_concurrency: usize,
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
    /// One full check at a time; the last one's result.
    check: tokio::sync::Mutex<Option<LastCheck>>,
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
    pub(crate) fn new(runtime: Runtime<S>, load_concurrency: usize) -> Self {
        Self {
            runtime: Arc::new(runtime),
            started: Instant::now(),
            load_concurrency: load_concurrency.max(1),
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
            check: tokio::sync::Mutex::new(None),
        }
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
    pub(crate) async fn checked(&self) -> Result<Stats, ApiError> {
        let arrived = Instant::now();
        let mut last = self.check.lock().await;
        if let Some(done) = last.as_ref().filter(|c| c.finished >= arrived) {
            let mut stats = done.stats.clone();
            stats.age_secs = done.finished.elapsed().as_secs_f64();
            return Ok(stats);
        }
        let pending = self.runtime.pending().await?;
        let report = percolator_webindex::check(self.client()).await?;
        let stats = Stats {
            pending,
            report,
            age_secs: 0.0,
        };
        *last = Some(LastCheck {
            finished: Instant::now(),
            stats: stats.clone(),
        });
        Ok(stats)
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

/// Samples the runtime's throughput each second until the state is dropped elsewhere.
pub(crate) async fn sample<S: RowStore>(shared: Arc<Shared<S>>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        let processed = shared.runtime.stats().notifications_processed;
        shared.samples.push(Instant::now(), processed);
    }
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
