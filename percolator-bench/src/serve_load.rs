//! The product under load as users run it: one `percolator serve` process (fjall), a steady
//! crawler (new pages, recrawls and deletes through the API), many concurrent searchers, and a
//! CPU hog that takes a core away for the middle third of the run.
//!
//! Every second it records searches/s, search p50/p99, answers by status (503s apart), the
//! server's freshness p50/p99 and pending notifications, its resident memory and its disk. At
//! the end the crawler and the searchers stop, the server drains what is pending, and the run is
//! checked: no answer was a 5xx other than 503, every page the server acknowledged is stored
//! and processed, and every invariant of the index holds.

use std::collections::{BTreeMap, HashSet};
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use percolator_server::wire::PageIn;
use percolator_server::{Remote, RemoteError, Token};
use percolator_webindex::synthetic::{Shape, SyntheticCrawl};
use percolator_webindex::{SearchOptions, html};
use serde::Serialize;

/// What to run.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServeLoadConfig {
    /// The `percolator` executable that serves.
    pub percolator: PathBuf,
    /// Where the server's database goes (emptied first and removed after).
    pub db: PathBuf,
    /// Pages the crawler loads during the run (new ones; recrawls and deletes come on top).
    pub docs: usize,
    /// Realistic pages (about 20 KB) rather than small demo pages.
    pub realistic: bool,
    /// Concurrent searchers.
    pub searchers: usize,
    /// How long the load runs.
    pub duration: Duration,
    /// Whether a CPU hog takes a core for the middle third of the run.
    pub hog: bool,
    /// Pages per upload.
    pub batch: usize,
    /// The server's garbage collection: how often (`serve --gc-every-secs`) and how far behind
    /// the oldest snapshot in use (`--gc-grace-secs`). Recrawls add versions that only GC
    /// drops; with the default grace of 10 minutes a 10-minute run would keep them all.
    pub gc_every: Duration,
    /// See [`Self::gc_every`].
    pub gc_grace: Duration,
}

impl ServeLoadConfig {
    /// CI's smoke size: 300 demo pages, 8 searchers, 20 s.
    pub fn quick(percolator: PathBuf, db: PathBuf) -> Self {
        Self {
            percolator,
            db,
            docs: 300,
            realistic: false,
            searchers: 8,
            duration: Duration::from_secs(20),
            hog: true,
            batch: 50,
            gc_every: Duration::from_secs(5),
            gc_grace: Duration::from_secs(5),
        }
    }

    /// The full size: 20 000 realistic pages, 64 searchers, 10 minutes.
    pub fn full(percolator: PathBuf, db: PathBuf) -> Self {
        Self {
            docs: 20_000,
            realistic: true,
            searchers: 64,
            duration: Duration::from_secs(600),
            batch: 100,
            gc_every: Duration::from_secs(30),
            gc_grace: Duration::from_secs(60),
            ..Self::quick(percolator, db)
        }
    }
}

/// One second of the run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Sample {
    /// Seconds into the run.
    pub t_secs: f64,
    /// Searches answered in that second.
    pub searches_per_sec: f64,
    /// Their median latency, milliseconds.
    pub search_p50_ms: f64,
    /// Their 99th percentile, milliseconds.
    pub search_p99_ms: f64,
    /// Answers 503 (searches and uploads) in that second.
    pub busy_per_sec: f64,
    /// Other errors in that second.
    pub errors_per_sec: f64,
    /// Pages the server acknowledged so far.
    pub pages_acknowledged: u64,
    /// The server's freshness p50 and p99 (ingest → clustered), seconds.
    pub freshness_p50_secs: f64,
    /// 99th percentile.
    pub freshness_p99_secs: f64,
    /// Pending notifications.
    pub pending: u64,
    /// Documents in the search index: how far indexing trails the acknowledged pages.
    pub documents_indexed: u64,
    /// The server's resident memory, bytes.
    pub rss_bytes: u64,
    /// Its database directory, bytes.
    pub disk_bytes: u64,
    /// Whether the CPU hog ran.
    pub hog: bool,
}

/// What the run found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ServeLoadReport {
    /// Pages the crawler loaded (new), searchers, seconds.
    pub docs: usize,
    /// Concurrent searchers.
    pub searchers: usize,
    /// Seconds of load.
    pub duration_secs: f64,
    /// When the hog ran, seconds into the run.
    pub hog_secs: Option<(f64, f64)>,
    /// Per second.
    pub timeline: Vec<Sample>,
    /// Searches answered by an index holding documents (those of the empty index at the start
    /// are not counted).
    pub searches: u64,
    /// Search latency over the run: median and 99th percentile, milliseconds.
    pub search_p50_ms: f64,
    /// 99th percentile.
    pub search_p99_ms: f64,
    /// Answers by HTTP status (errors only), searches and uploads together.
    pub errors_by_status: BTreeMap<u16, u64>,
    /// 5xx answers other than 503: the run's failure count.
    pub server_errors: u64,
    /// Pages acknowledged (loaded or unchanged) and not deleted since.
    pub pages_acknowledged: usize,
    /// Stored documents the server reports after the drain.
    pub documents_stored: usize,
    /// Seconds the drain took.
    pub drain_secs: f64,
    /// Invariant violations after the drain.
    pub violations: Vec<String>,
    /// Peak resident memory of the server over the run, bytes.
    pub peak_rss_bytes: u64,
    /// Its resident memory after the drain, bytes.
    pub rss_after_drain_bytes: u64,
    /// The server's background garbage collection over the run and the drain: runs completed,
    /// their wall time in seconds, and the cells they deleted.
    pub gc_runs: u64,
    /// See [`Self::gc_runs`].
    pub gc_secs: f64,
    /// See [`Self::gc_runs`].
    pub gc_cells_deleted: u64,
}

impl ServeLoadReport {
    /// Whether the run held: no 5xx but 503, every acknowledged page stored, no violation.
    pub fn ok(&self) -> bool {
        self.server_errors == 0
            && self.documents_stored == self.pages_acknowledged
            && self.violations.is_empty()
    }

    /// A markdown table of the summary.
    pub fn table(&self) -> String {
        let busy = self.errors_by_status.get(&503).copied().unwrap_or(0);
        let thirds = |of: fn(&Sample) -> u64| {
            let n = self.timeline.len().div_ceil(3).max(1);
            self.timeline
                .chunks(n)
                .map(|third| {
                    let max = third.iter().map(of).max().unwrap_or(0);
                    format!("{:.0}", max as f64 / 1e6)
                })
                .collect::<Vec<_>>()
                .join(" / ")
        };
        let rss = thirds(|s| s.rss_bytes);
        let disk = thirds(|s| s.disk_bytes);
        format!(
            "| serve load | value |\n|---|---:|\n\
             | pages crawled (new) / acknowledged / stored | {} / {} / {} |\n\
             | searchers, seconds | {}, {:.0} |\n\
             | searches answered (per second) | {} ({:.1}) |\n\
             | search p50 / p99 | {:.1} / {:.1} ms |\n\
             | answers 503 | {busy} |\n\
             | 5xx other than 503 | {} |\n\
             | freshness p50 / p99 at the end | {:.2} / {:.2} s |\n\
             | documents indexed when the load stopped | {} |\n\
             | peak RSS; max in each third of the run | {:.0} MB; {rss} MB |\n\
             | disk, max in each third of the run | {disk} MB |\n\
             | RSS after the drain | {:.0} MB |\n\
             | drain after the load | {:.1} s |\n\
             | GC runs, their time, cells deleted | {}, {:.0} s, {} |\n\
             | invariant violations | {} |\n",
            self.docs,
            self.pages_acknowledged,
            self.documents_stored,
            self.searchers,
            self.duration_secs,
            self.searches,
            self.searches as f64 / self.duration_secs.max(1e-9),
            self.search_p50_ms,
            self.search_p99_ms,
            self.server_errors,
            self.timeline.last().map_or(0.0, |s| s.freshness_p50_secs),
            self.timeline.last().map_or(0.0, |s| s.freshness_p99_secs),
            self.timeline.last().map_or(0, |s| s.documents_indexed),
            self.peak_rss_bytes as f64 / 1e6,
            self.rss_after_drain_bytes as f64 / 1e6,
            self.drain_secs,
            self.gc_runs,
            self.gc_secs,
            self.gc_cells_deleted,
            self.violations.len(),
        )
    }
}

/// Why the run could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeLoadError {
    /// The server did not start or answer.
    #[error("the server: {0}")]
    Server(String),
    /// A request the harness needs failed.
    #[error(transparent)]
    Remote(#[from] RemoteError),
}

/// What the load's tasks share.
#[derive(Default)]
struct Tally {
    latencies_us: Mutex<Vec<u64>>,
    all_latencies_us: Mutex<Vec<u64>>,
    searches: AtomicU64,
    busy: AtomicU64,
    errors: AtomicU64,
    by_status: Mutex<BTreeMap<u16, u64>>,
    acknowledged: Mutex<HashSet<String>>,
    stop: AtomicBool,
}

impl Tally {
    fn error(&self, e: &RemoteError) {
        let status = match e {
            RemoteError::Api { status, .. } => *status,
            _ => 0,
        };
        if status == 503 {
            self.busy.fetch_add(1, Relaxed);
        } else {
            self.errors.fetch_add(1, Relaxed);
        }
        *self.by_status.lock().entry(status).or_default() += 1;
    }
}

/// The server process; killed if the run ends early.
struct Served {
    child: Child,
    url: String,
    token: Token,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_server(config: &ServeLoadConfig) -> Result<Served, ServeLoadError> {
    let _ = std::fs::remove_dir_all(&config.db);
    // The server's log (one line per refused or failed request) is kept beside the database
    // for whoever has to find out why a run failed.
    let log_path = server_log(config);
    let log = std::fs::File::create(&log_path)
        .map_err(|e| ServeLoadError::Server(format!("{}: {e}", log_path.display())))?;
    let mut child = Command::new(&config.percolator)
        .arg("--db")
        .arg(&config.db)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .arg(format!("--gc-every-secs={}", config.gc_every.as_secs_f64()))
        .arg(format!("--gc-grace-secs={}", config.gc_grace.as_secs_f64()))
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .map_err(|e| ServeLoadError::Server(format!("{}: {e}", config.percolator.display())))?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| ServeLoadError::Server("no stdout".into()))?;
    let mut stdout = BufReader::new(stdout);
    let mut first = String::new();
    stdout
        .read_line(&mut first)
        .map_err(|e| ServeLoadError::Server(e.to_string()))?;
    // The server writes more lines and quits quietly when its stdout is closed (as a command
    // piped into `head` should), so the pipe is read to its end.
    std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    let url = first
        .strip_prefix("serving ")
        .and_then(|rest| rest.split_whitespace().next())
        .ok_or_else(|| ServeLoadError::Server(format!("unexpected first line {first:?}")))?
        .to_owned();
    let token = Token::read(&percolator_server::auth::token_path(&config.db))
        .map_err(|e| ServeLoadError::Server(e.to_string()))?;
    Ok(Served { child, url, token })
}

/// Where the server's stderr goes: beside its database.
pub fn server_log(config: &ServeLoadConfig) -> PathBuf {
    config.db.with_extension("server.log")
}

/// Resident memory of process `pid`, bytes (Linux).
fn rss_of(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

fn dir_bytes(path: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(path) else {
        return std::fs::metadata(path).map_or(0, |m| m.len());
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            _ => e.metadata().map_or(0, |m| m.len()),
        })
        .sum()
}

fn percentile(sorted: &[u64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i.min(sorted.len() - 1)] as f64 / 1000.0
}

/// Query words: frequent words of the first pages' text (a few per page).
fn query_words(crawl: &SyntheticCrawl) -> Vec<String> {
    let mut words = Vec::new();
    for page in crawl.initial().take(20) {
        let parsed = html::parse_page(&page.url, &page.html);
        let mut counted: Vec<(String, u32)> = parsed
            .terms
            .counts
            .into_iter()
            .map(|(term, counts)| (term, counts.title + counts.body))
            .collect();
        counted.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        words.extend(counted.into_iter().take(5).map(|(term, _)| term));
    }
    words.sort();
    words.dedup();
    if words.is_empty() {
        words.push("page".to_owned());
    }
    words
}

/// The crawler: the initial crawl in batches, then recrawls of a tenth and a few deletes,
/// until the run ends. Busy answers are waited out as `Retry-After` asks.
async fn crawl(remote: Remote, pages: SyntheticCrawl, batch: usize, tally: Arc<Tally>) {
    let upload = |chunk: Vec<PageIn>| {
        let (remote, tally) = (remote.clone(), Arc::clone(&tally));
        async move {
            loop {
                if tally.stop.load(Relaxed) {
                    return;
                }
                match remote.ingest_pages(&chunk).await {
                    Ok(_) => {
                        let mut acknowledged = tally.acknowledged.lock();
                        acknowledged.extend(chunk.iter().map(|p| p.url.clone()));
                        return;
                    }
                    Err(e) => {
                        tally.error(&e);
                        let wait = match &e {
                            RemoteError::Api {
                                retry_after_secs, ..
                            } => retry_after_secs.unwrap_or(1),
                            _ => 1,
                        };
                        tokio::time::sleep(Duration::from_secs(wait.clamp(1, 10))).await;
                    }
                }
            }
        }
    };
    let as_pages = |pages: Vec<percolator_webindex::CrawledPage>| -> Vec<PageIn> {
        pages
            .into_iter()
            .filter_map(|p| {
                Some(PageIn {
                    html: String::from_utf8(p.html.to_vec()).ok()?,
                    url: p.url,
                })
            })
            .collect()
    };
    let initial: Vec<_> = pages.initial().collect();
    for chunk in as_pages(initial).chunks(batch) {
        if tally.stop.load(Relaxed) {
            return;
        }
        upload(chunk.to_vec()).await;
    }
    let mut generation = 1;
    while !tally.stop.load(Relaxed) {
        let recrawl = as_pages(pages.recrawl(generation, 0.1));
        for chunk in recrawl.chunks(batch) {
            if tally.stop.load(Relaxed) {
                return;
            }
            upload(chunk.to_vec()).await;
        }
        // A few deletes per generation.
        let doomed: Vec<String> = (0..3)
            .map(|i| pages.url((generation as usize * 7 + i * 13) % pages.docs()))
            .collect();
        match remote.delete(doomed.clone()).await {
            Ok(_) => {
                let mut acknowledged = tally.acknowledged.lock();
                for url in &doomed {
                    acknowledged.remove(url);
                }
            }
            Err(e) => tally.error(&e),
        }
        generation += 1;
    }
}

/// How long a searcher waits before it asks an empty index again.
const EMPTY_INDEX_WAIT: Duration = Duration::from_millis(500);

/// One searcher: one query after the other until the run ends. A search answered by an empty
/// index (before the first pages are indexed) is not counted, and the searcher waits a little
/// before the next: such an answer costs nothing, and counted, the first seconds' 150 000 of
/// them made the run's search rate meaningless.
async fn search(remote: Remote, words: Arc<Vec<String>>, seed: usize, tally: Arc<Tally>) {
    let mut i = seed;
    while !tally.stop.load(Relaxed) {
        let query = format!(
            "{} {}",
            words[i % words.len()],
            words[(i * 7 + 3) % words.len()]
        );
        i += 1;
        let options = if i.is_multiple_of(2) {
            SearchOptions::default()
        } else {
            SearchOptions::default().mode(percolator_webindex::Mode::Any)
        };
        let began = Instant::now();
        match remote.search(&query, &options).await {
            Ok(results) if results.documents == 0 => {
                tokio::time::sleep(EMPTY_INDEX_WAIT).await;
            }
            Ok(_) => {
                let us = u64::try_from(began.elapsed().as_micros()).unwrap_or(u64::MAX);
                tally.latencies_us.lock().push(us);
                tally.all_latencies_us.lock().push(us);
                tally.searches.fetch_add(1, Relaxed);
            }
            Err(e) => {
                tally.error(&e);
                if let RemoteError::Api {
                    retry_after_secs: Some(wait),
                    ..
                } = e
                {
                    tokio::time::sleep(Duration::from_secs(wait.min(5))).await;
                }
            }
        }
    }
}

/// Takes one core: spins until `until`.
fn hog(until: Instant) {
    let mut x = 0u64;
    while Instant::now() < until {
        for i in 0..100_000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
        }
        std::hint::black_box(x);
    }
}

/// Runs the load and checks the result; `say` gets progress lines.
pub async fn run(
    config: &ServeLoadConfig,
    say: impl Fn(&str),
) -> Result<ServeLoadReport, ServeLoadError> {
    let mut served = start_server(config)?;
    let pid = served.child.id();
    let remote = Remote::new(served.url.clone()).with_token(served.token.clone());
    let pages = SyntheticCrawl::new(config.docs, 17).with_shape(if config.realistic {
        Shape::Realistic
    } else {
        Shape::Demo
    });
    let words = Arc::new(query_words(&pages));
    say(&format!(
        "serving at {}; {} searchers, {} pages, {:?}",
        served.url, config.searchers, config.docs, config.duration
    ));
    let tally = Arc::new(Tally::default());
    let mut tasks = vec![tokio::spawn(crawl(
        remote.clone(),
        pages,
        config.batch,
        Arc::clone(&tally),
    ))];
    for i in 0..config.searchers {
        tasks.push(tokio::spawn(search(
            remote.clone(),
            Arc::clone(&words),
            i * 31,
            Arc::clone(&tally),
        )));
    }
    let origin = Instant::now();
    let third = config.duration / 3;
    let hog_window = config.hog.then(|| (origin + third, origin + third * 2));
    let hog_thread = hog_window.map(|(from, until)| {
        std::thread::spawn(move || {
            std::thread::sleep(from.saturating_duration_since(Instant::now()));
            hog(until);
        })
    });
    let mut timeline = Vec::new();
    let mut last = (0u64, 0u64, 0u64);
    let mut peak_rss = 0;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.tick().await;
    while origin.elapsed() < config.duration {
        tick.tick().await;
        if let Ok(Some(exit)) = served.child.try_wait() {
            tally.stop.store(true, Relaxed);
            return Err(ServeLoadError::Server(format!(
                "the server quit during the run ({exit}); its log is {}",
                server_log(config).display()
            )));
        }
        let now = Instant::now();
        let mut latencies = std::mem::take(&mut *tally.latencies_us.lock());
        latencies.sort_unstable();
        let counts = (
            tally.searches.load(Relaxed),
            tally.busy.load(Relaxed),
            tally.errors.load(Relaxed),
        );
        let status = remote.status().await.ok();
        let rss = rss_of(pid);
        peak_rss = peak_rss.max(rss);
        let sample = Sample {
            t_secs: origin.elapsed().as_secs_f64(),
            searches_per_sec: (counts.0 - last.0) as f64,
            search_p50_ms: percentile(&latencies, 0.5),
            search_p99_ms: percentile(&latencies, 0.99),
            busy_per_sec: (counts.1 - last.1) as f64,
            errors_per_sec: (counts.2 - last.2) as f64,
            pages_acknowledged: tally.acknowledged.lock().len() as u64,
            freshness_p50_secs: status.as_ref().map_or(0.0, |s| s.freshness_p50_secs),
            freshness_p99_secs: status.as_ref().map_or(0.0, |s| s.freshness_p99_secs),
            pending: status.as_ref().map_or(0, |s| s.pending),
            documents_indexed: status
                .as_ref()
                .map_or(0, |s| u64::try_from(s.documents).unwrap_or(0)),
            rss_bytes: rss,
            disk_bytes: dir_bytes(&config.db),
            hog: hog_window.is_some_and(|(from, until)| now >= from && now < until),
        };
        if timeline.len().is_multiple_of(10) {
            say(&format!(
                "{:.0} s: {:.0} searches/s (p99 {:.0} ms), {} acknowledged, {} indexed, {} pending, {:.0} MB{}",
                sample.t_secs,
                sample.searches_per_sec,
                sample.search_p99_ms,
                sample.pages_acknowledged,
                sample.documents_indexed,
                sample.pending,
                rss as f64 / 1e6,
                if sample.hog { ", hog on" } else { "" }
            ));
        }
        timeline.push(sample);
        last = counts;
    }
    tally.stop.store(true, Relaxed);
    for task in tasks {
        let _ = task.await;
    }
    if let Some(thread) = hog_thread {
        let _ = thread.join();
    }
    say("load stopped; draining");
    let drained = Instant::now();
    let deadline = drained + Duration::from_secs(1800);
    // Polled through `/api/stats`, which reads a few cells: `/api/status` also counts every
    // table's locks, and with an inverter commit of 100 000 cells in flight that scan was a
    // third of the server's CPU, slowing the drain it measured.
    loop {
        let pending = remote.stats().await?.pending;
        if pending == 0 {
            break;
        }
        if Instant::now() > deadline {
            return Err(ServeLoadError::Server(format!(
                "{pending} notifications still pending after 30 minutes"
            )));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let drain_secs = drained.elapsed().as_secs_f64();
    let final_status = remote.status().await?;
    let rss_after_drain = rss_of(pid);
    say("checking");
    let stats = remote.check().await?;
    let mut all = std::mem::take(&mut *tally.all_latencies_us.lock());
    all.sort_unstable();
    let by_status = tally.by_status.lock().clone();
    let server_errors = by_status
        .iter()
        .filter(|(status, _)| **status >= 500 && **status != 503)
        .map(|(_, n)| n)
        .sum();
    let acknowledged = tally.acknowledged.lock().len();
    drop(served);
    let _ = std::fs::remove_dir_all(&config.db);
    Ok(ServeLoadReport {
        docs: config.docs,
        searchers: config.searchers,
        duration_secs: config.duration.as_secs_f64(),
        hog_secs: config
            .hog
            .then(|| (third.as_secs_f64(), (third * 2).as_secs_f64())),
        timeline,
        searches: tally.searches.load(Relaxed),
        search_p50_ms: percentile(&all, 0.5),
        search_p99_ms: percentile(&all, 0.99),
        errors_by_status: by_status,
        server_errors,
        pages_acknowledged: acknowledged,
        documents_stored: stats.report.summary.documents,
        drain_secs,
        violations: stats
            .report
            .violations
            .iter()
            .map(ToString::to_string)
            .collect(),
        peak_rss_bytes: peak_rss,
        rss_after_drain_bytes: rss_after_drain,
        gc_runs: final_status.gc_runs,
        gc_secs: final_status.gc_secs,
        gc_cells_deleted: final_status.gc_cells_deleted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_and_query_words() {
        assert_eq!(percentile(&[], 0.5), 0.0);
        assert_eq!(percentile(&[1000, 2000, 3000], 0.5), 2.0);
        assert_eq!(percentile(&[1000, 2000, 3000], 0.99), 3.0);
        let words = query_words(&SyntheticCrawl::new(30, 1));
        assert!(words.len() >= 5, "{words:?}");
    }
}
