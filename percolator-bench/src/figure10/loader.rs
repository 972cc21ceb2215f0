//! The crawler of the Figure 10 run: loads synthetic pages at a steady rate, generation after
//! generation (the whole crawl, then recrawls of a fraction with changed content), and keeps
//! what every acknowledgement promised so the end of the run can check that no acknowledged
//! commit was lost.
//!
//! It runs in the harness process: it is not one of the processes the faults kill, and its
//! acknowledgements are exact. A load that fails (the store or the oracle unreachable during a
//! fault) is retried until it succeeds or its deadline passes. A generation finishes before the
//! next one starts, so no two loads of one page are ever in flight together and the newest
//! acknowledgement of a page is the content it must have at the end — unless a later load of it
//! failed with an unknown outcome, in which case that generation is allowed too.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use percolator_core::{Client, RowStore};
use percolator_webindex::schema::{DOCUMENTS, RAW};
use percolator_webindex::synthetic::SyntheticCrawl;
use percolator_webindex::{PageOutcome, load_page};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// How the loader runs.
#[derive(Debug, Clone)]
pub struct LoaderConfig {
    /// Pages per second offered.
    pub pages_per_sec: f64,
    /// Loads in flight at most.
    pub concurrency: usize,
    /// Fraction of the crawl each recrawl generation visits.
    pub recrawl_fraction: f64,
    /// How long one page's load is retried before it counts as failed.
    pub give_up_after: Duration,
}

/// What the loader did, for the report and the final check.
#[derive(Debug, Default)]
pub struct LoaderRecord {
    /// Page index → the generation of its newest acknowledged load.
    pub acked: HashMap<usize, u32>,
    /// Page index → generations of later loads that failed (outcome unknown).
    pub unknown: HashMap<usize, Vec<u32>>,
    /// When each acknowledged load that wrote a page (not an unchanged one) ended.
    pub written_at: Vec<Instant>,
    /// Load attempts that failed and were retried.
    pub retried: u64,
    /// Loads given up on.
    pub gave_up: u64,
    /// Generations started.
    pub generations: u32,
    /// The last failure seen, for the report.
    pub last_failure: Option<String>,
}

/// A loader running in the background.
pub struct Loader {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<LoaderRecord>,
}

impl Loader {
    /// Starts loading `crawl` through `client`.
    pub fn start<S: RowStore>(
        client: Client<S>,
        crawl: SyntheticCrawl,
        config: LoaderConfig,
    ) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn(run(client, crawl, config, Arc::clone(&stop)));
        Self { stop, task }
    }

    /// Stops after the generation's loads in flight end; returns the record.
    pub async fn stop(self) -> LoaderRecord {
        self.stop.store(true, Ordering::SeqCst);
        self.task.await.unwrap_or_else(|e| LoaderRecord {
            last_failure: Some(format!("loader task: {e}")),
            ..LoaderRecord::default()
        })
    }
}

async fn run<S: RowStore>(
    client: Client<S>,
    crawl: SyntheticCrawl,
    config: LoaderConfig,
    stop: Arc<AtomicBool>,
) -> LoaderRecord {
    let record = Arc::new(Mutex::new(LoaderRecord::default()));
    let mut pace =
        tokio::time::interval(Duration::from_secs_f64(1.0 / config.pages_per_sec.max(0.1)));
    pace.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let slots = Arc::new(Semaphore::new(config.concurrency.max(1)));
    let mut generation = 0u32;
    'generations: loop {
        record.lock().generations = generation + 1;
        let indexes: Vec<usize> = if generation == 0 {
            (0..crawl.docs()).collect()
        } else {
            crawl.recrawl_indexes(generation, config.recrawl_fraction)
        };
        let mut loads = JoinSet::new();
        for index in indexes {
            pace.tick().await;
            if stop.load(Ordering::SeqCst) {
                while loads.join_next().await.is_some() {}
                break 'generations;
            }
            let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
                break 'generations;
            };
            let (client, record) = (client.clone(), Arc::clone(&record));
            let page = crawl.page(index, generation);
            let give_up_after = config.give_up_after;
            loads.spawn(async move {
                let _slot = slot;
                let deadline = Instant::now() + give_up_after;
                loop {
                    match load_page(&client, page.clone()).await {
                        Ok(outcome) => {
                            let mut r = record.lock();
                            r.acked.insert(index, generation);
                            r.unknown.remove(&index);
                            if outcome == PageOutcome::Loaded {
                                r.written_at.push(Instant::now());
                            }
                            return;
                        }
                        Err(e) => {
                            let mut r = record.lock();
                            r.retried += 1;
                            r.last_failure = Some(e.to_string());
                            if Instant::now() >= deadline {
                                r.gave_up += 1;
                                r.unknown.entry(index).or_default().push(generation);
                                return;
                            }
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            });
        }
        while loads.join_next().await.is_some() {}
        generation += 1;
    }
    let mut out = record.lock();
    std::mem::take(&mut *out)
}

/// The outcome of checking every acknowledged page against the store.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct AckCheck {
    /// Pages checked.
    pub checked: usize,
    /// Pages whose stored HTML is not that of their newest acknowledged load (nor of a later
    /// load with an unknown outcome): acknowledged commits lost.
    pub lost: Vec<String>,
}

/// Reads every acknowledged page in snapshots of `batch` pages and compares it with what the
/// acknowledgement promised.
pub async fn check_acks<S: RowStore>(
    client: &Client<S>,
    crawl: &SyntheticCrawl,
    record: &LoaderRecord,
) -> percolator_core::Result<AckCheck> {
    let mut check = AckCheck::default();
    let mut pages: Vec<(&usize, &u32)> = record.acked.iter().collect();
    pages.sort();
    for batch in pages.chunks(100) {
        let txn = client.begin().await?;
        for &(&index, &generation) in batch {
            let url = crawl.url(index);
            let stored = txn
                .get(DOCUMENTS, url.as_bytes(), RAW)
                .await?
                .map(|cell| percolator_webindex::raw::html_or_stored(&cell));
            let allowed = std::iter::once(generation)
                .chain(record.unknown.get(&index).into_iter().flatten().copied());
            let matches = allowed
                .into_iter()
                .any(|g| stored.as_ref() == Some(&crawl.page(index, g).html));
            check.checked += 1;
            if !matches {
                check
                    .lost
                    .push(format!("{url} (acknowledged at generation {generation})"));
            }
        }
    }
    Ok(check)
}
