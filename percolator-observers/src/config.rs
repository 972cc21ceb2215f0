//! [`RuntimeConfig`]: how a [`Runtime`](crate::Runtime) schedules its work (scanners, runs in
//! flight, backoff, parking, stages), and [`GcSchedule`] for background garbage collection.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use percolator_core::GcConfig;

use crate::shared_locks::SharedRowLocks;

/// Tunables of a [`Runtime`](crate::Runtime)'s scheduling. The runtime's transactions are configured on the
/// [`ClientBuilder`](percolator_core::ClientBuilder) handed to [`Runtime::start`](crate::Runtime::start) (oracle, [`percolator_core::TxnConfig`], and in
/// tests fault injection), so nothing here duplicates a client option.
///
/// ```
/// # use std::time::Duration;
/// # use percolator_core::GcConfig;
/// # use percolator_observers::{GcSchedule, RuntimeConfig};
/// let config = RuntimeConfig::default()
///     .with_scanners(2)
///     .with_max_concurrent_runs(8)
///     .with_scan_batch_rows(32)
///     .with_idle_sleep_max(Duration::from_millis(20))
///     .with_failure_backoff(Duration::from_millis(10), Duration::from_secs(5))
///     .with_park_after_failures(3)
///     .with_max_self_triggers(4)
///     .with_dead_worker_sweep(Some(Duration::from_secs(5)))
///     .with_partition_refresh(Some(Duration::from_millis(500)))
///     .with_stages(["documents", "clusters"]) // upstream first
///     .with_gc(Some(GcSchedule::new(Duration::from_secs(600), GcConfig::default())));
/// assert_eq!((config.scanners, config.max_concurrent_runs), (2, 8));
/// assert_eq!(config.failure_backoff_max, Duration::from_secs(5));
/// assert_eq!(config.stages.len(), 2);
/// assert!(config.gc.is_some());
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RuntimeConfig {
    /// Scanner tasks (the paper's scanning threads).
    pub scanners: usize,
    /// Observer runs in flight at once.
    pub max_concurrent_runs: usize,
    /// Rows with notifications a scanner reads per scan call.
    pub scan_batch_rows: usize,
    /// Longest pause of a scanner that found nothing to do in a whole sweep.
    pub idle_sleep_max: Duration,
    /// Garbage collection in the background: every `interval`, one run with `config` (see
    /// `percolator_core::gc`). `None` (the default): this worker never collects; run
    /// `percolator gc` or give one worker of the cluster a schedule.
    pub gc: Option<GcSchedule>,
    /// Pause of a row after its first failed run; it doubles with each further failure (or
    /// wait for another worker's observer), up to [`Self::failure_backoff_max`].
    pub failure_backoff: Duration,
    /// Longest pause of a failing row.
    pub failure_backoff_max: Duration,
    /// Failed runs in a row of one observer on one cell after which the change is parked
    /// (`percolator status` lists it, `percolator observers retry` hands it back). 0: never park.
    pub park_after_failures: u32,
    /// Committed runs in a row of a strong observer that wrote the cell it observes (and so
    /// notified itself again) after which its next such run fails instead of committing.
    pub max_self_triggers: u32,
    /// How often the worker looks for dead workers, ends their leases and resolves the locks
    /// they left in every table ([`Client::sweep_dead_workers`](percolator_core::Client::sweep_dead_workers)); it also resolves abandoned
    /// locks once at start. Without it, a crashed worker's locks on cells nobody reads again
    /// stay until a full garbage collection. `None`: never.
    pub dead_worker_sweep: Option<Duration>,
    /// Observed tables in pipeline order, upstream first. Empty (the default): each scanner
    /// starts at a random table and takes the tables in sorted order, as the paper's scanners
    /// do. Otherwise the scanners drain the stages in that order (tables not named come last,
    /// sorted): a scanner starts in the first table, and after a pass over a table that started
    /// a run it goes back to the first one; only a pass that found nothing to start moves it on.
    /// A bulk load then runs each stage's backlog before the stages after it, the cheapest order
    /// when later stages redo their work as earlier ones keep changing their input (a link
    /// target forwarded once, not as each anchor arrives). A stage that never empties keeps
    /// the scanners from the stages after it; observers with a batch delay still run on their
    /// timers.
    pub stages: Vec<Bytes>,
    /// Partitioned scanning: how often the worker re-reads which workers of its scan group
    /// (those running the same observers on the store) are live, to divide the dirty rows
    /// among them (see `partition`). A dead worker's rows are taken over within half its lease
    /// plus this; a worker joining a group waits twice this before it scans. One read of the
    /// store's small workers table each time. `None`: this worker runs every dirty row it finds,
    /// as if it were alone, and collides with any other worker of the store.
    pub partition_refresh: Option<Duration>,
    /// The paper's lock service: advisory row locks shared with the store's other workers
    /// (see `shared_locks`). A row another worker holds is left to it, and a scanner whose
    /// batch was mostly held elsewhere has met another process's scanner and teleports. `None`
    /// (the default): only this worker's own row locks.
    pub shared_locks: Option<Arc<dyn SharedRowLocks>>,
}

/// When and how a runtime collects garbage in the background.
///
/// ```
/// # use std::sync::Arc;
/// # use std::time::Duration;
/// # use percolator_backend_mem::MemStore;
/// # use percolator_core::{Client, GcConfig};
/// # use percolator_observers::{GcSchedule, Observers, Runtime, RuntimeConfig};
/// # #[tokio::main(flavor = "multi_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let schedule = GcSchedule::new(Duration::from_millis(10), GcConfig::default());
/// let config = RuntimeConfig::default().with_gc(Some(schedule));
/// let store = Arc::new(MemStore::new());
/// let runtime = Runtime::start(Client::builder(store), Observers::new(), config).await?;
/// // Collected in the background: wait for the first run.
/// while runtime.stats().gc_runs == 0 {
///     tokio::time::sleep(Duration::from_millis(10)).await;
/// }
/// runtime.shutdown().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct GcSchedule {
    /// Pause between the end of one run and the start of the next.
    pub interval: Duration,
    /// How each run behaves.
    pub config: GcConfig,
    /// The pause after a run is also at least this many times the run's wall time, so that
    /// background collection is busy at most 1 / (1 + factor) of the time whatever the
    /// interval. A pass over a large store under load takes tens of seconds: with a 30-s
    /// interval GC ran nearly back to back and took half the CPU of a 2-core server from the
    /// observers. Default 3.
    pub pause_factor: u32,
}

impl GcSchedule {
    /// A run with `config` every `interval` (see [`Self::pause_factor`]).
    pub fn new(interval: Duration, config: GcConfig) -> Self {
        Self {
            interval,
            config,
            pause_factor: 3,
        }
    }

    /// Sets [`Self::pause_factor`].
    #[must_use]
    pub fn with_pause_factor(mut self, factor: u32) -> Self {
        self.pause_factor = factor;
        self
    }

    /// The pause after a run that took `run`.
    pub fn pause_after(&self, run: Duration) -> Duration {
        self.interval.max(run.saturating_mul(self.pause_factor))
    }
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            scanners: 4,
            max_concurrent_runs: 16,
            scan_batch_rows: 64,
            idle_sleep_max: Duration::from_millis(50),
            gc: None,
            failure_backoff: Duration::from_millis(20),
            failure_backoff_max: Duration::from_secs(30),
            park_after_failures: 10,
            max_self_triggers: 16,
            dead_worker_sweep: Some(Duration::from_secs(2)),
            stages: Vec::new(),
            partition_refresh: Some(Duration::from_millis(250)),
            shared_locks: None,
        }
    }
}

impl RuntimeConfig {
    /// Sets [`Self::gc`].
    #[must_use]
    pub fn with_gc(mut self, gc: Option<GcSchedule>) -> Self {
        self.gc = gc;
        self
    }

    /// Sets [`Self::stages`].
    #[must_use]
    pub fn with_stages<T: Into<Bytes>>(mut self, tables: impl IntoIterator<Item = T>) -> Self {
        self.stages = tables.into_iter().map(Into::into).collect();
        self
    }

    /// Sets [`Self::partition_refresh`].
    #[must_use]
    pub fn with_partition_refresh(mut self, every: Option<Duration>) -> Self {
        self.partition_refresh = every;
        self
    }

    /// Sets [`Self::shared_locks`].
    #[must_use]
    pub fn with_shared_locks(mut self, locks: Option<Arc<dyn SharedRowLocks>>) -> Self {
        self.shared_locks = locks;
        self
    }

    /// Sets [`Self::dead_worker_sweep`].
    #[must_use]
    pub fn with_dead_worker_sweep(mut self, interval: Option<Duration>) -> Self {
        self.dead_worker_sweep = interval;
        self
    }

    /// Sets [`Self::failure_backoff`] and [`Self::failure_backoff_max`].
    #[must_use]
    pub fn with_failure_backoff(mut self, first: Duration, max: Duration) -> Self {
        self.failure_backoff = first;
        self.failure_backoff_max = max;
        self
    }

    /// Sets [`Self::park_after_failures`].
    #[must_use]
    pub fn with_park_after_failures(mut self, failures: u32) -> Self {
        self.park_after_failures = failures;
        self
    }

    /// Sets [`Self::max_self_triggers`].
    #[must_use]
    pub fn with_max_self_triggers(mut self, runs: u32) -> Self {
        self.max_self_triggers = runs;
        self
    }

    /// Sets [`Self::scanners`].
    #[must_use]
    pub fn with_scanners(mut self, scanners: usize) -> Self {
        self.scanners = scanners;
        self
    }

    /// Sets [`Self::max_concurrent_runs`].
    #[must_use]
    pub fn with_max_concurrent_runs(mut self, runs: usize) -> Self {
        self.max_concurrent_runs = runs;
        self
    }

    /// Sets [`Self::scan_batch_rows`].
    #[must_use]
    pub fn with_scan_batch_rows(mut self, rows: usize) -> Self {
        self.scan_batch_rows = rows;
        self
    }

    /// Sets [`Self::idle_sleep_max`].
    #[must_use]
    pub fn with_idle_sleep_max(mut self, pause: Duration) -> Self {
        self.idle_sleep_max = pause;
        self
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use percolator_core::GcConfig;

    use super::GcSchedule;

    #[test]
    fn a_long_gc_run_lengthens_the_pause_after_it() {
        let schedule = GcSchedule::new(Duration::from_secs(30), GcConfig::default());
        assert_eq!(
            schedule.pause_after(Duration::from_secs(2)),
            Duration::from_secs(30),
            "a short run waits the interval"
        );
        assert_eq!(
            schedule.pause_after(Duration::from_secs(25)),
            Duration::from_secs(75),
            "a 25-s run waits three times as long"
        );
        let back_to_back = schedule.with_pause_factor(0);
        assert_eq!(
            back_to_back.pause_after(Duration::from_secs(25)),
            Duration::from_secs(30)
        );
    }
}
