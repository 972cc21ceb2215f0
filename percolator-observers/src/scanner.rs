//! Scanners: find dirty rows by scanning the notify family only (paper §2.4).
//!
//! Each scanner starts at a random point of a random observed table, reads a batch of rows with
//! notifications, hands each row to a run (under the advisory row lock), and moves on, wrapping
//! from the end of one table to the start of the next. Scanners that bunch up — one reaching
//! the row another is at — would do the same work in lockstep and serialize on the row locks
//! (the paper's "bus clumping"); the one that catches up **teleports** to a random row it has
//! seen before. A sweep of every table that dispatched nothing puts the scanner to sleep, for a
//! pause that doubles up to `idle_sleep_max`.
//!
//! A row that another worker of the scan group owns (`partition`) is passed over like a row
//! without observers: the pass goes on as if it were not there.
//!
//! With the paper's lock service ([`crate::RuntimeConfig::shared_locks`]) the rows of a batch
//! that are to run are locked in one request, after this worker's own row locks (so a row one
//! of its runs holds is never asked for again, or released by mistake). A row another worker
//! holds is left to it; a batch mostly held by others means a scanner of another process is on
//! this stretch, and this one teleports, as it does from its own process's scanners.
//!
//! With [`crate::RuntimeConfig::stages`] the scanners start in the first stage instead, and
//! go back to it after every pass over a table that started a run or met one of the worker's
//! runs; a pass that began mid-table wraps to the table's start before the scanner moves on.
//! So a stage's backlog runs before the stages after it.

use std::ops::Bound;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use futures::FutureExt;
use percolator_core::{NotifyRow, RowStore};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::metrics::bump;
use crate::process::process_row;
use crate::row_locks::RowGuard;
use crate::runtime::Shared;
use crate::shared_locks::{SharedLockAnswer, SharedLockGuard};

/// Rows remembered per scanner as teleport destinations.
const SAMPLE: usize = 256;

struct Sweep {
    table: usize,
    start: Bound<Bytes>,
    /// Whether this pass (over `table`, or before a teleport into it) started a run.
    worked_here: bool,
    /// Whether this pass found a row this worker is running already.
    in_flight_here: bool,
    /// Whether this pass began at the first row of `table` (not at a random row or a
    /// teleport's destination).
    from_table_start: bool,
    tables_since_work: usize,
    idle_sleep: Duration,
    sample: Vec<(usize, Bytes)>,
    seen: u64,
}

pub(crate) async fn scan_loop<S: RowStore>(shared: Arc<Shared<S>>, id: usize) {
    let mut rng = StdRng::from_os_rng();
    let tables = shared.tables.len();
    let staged = !shared.config.stages.is_empty();
    let mut sweep = Sweep {
        // Staged: the first stage, from a random row (so that scanners spread over it).
        table: if staged {
            0
        } else {
            rng.random_range(0..tables)
        },
        start: random_start(&mut rng),
        worked_here: false,
        in_flight_here: false,
        from_table_start: false,
        tables_since_work: 0,
        idle_sleep: Duration::from_millis(1),
        sample: Vec::new(),
        seen: 0,
    };
    let batch = shared.config.scan_batch_rows.max(1);
    while !shared.stop.is_cancelled() {
        let table = shared.tables[sweep.table].clone();
        let rows = match shared
            .client
            .scan_notifications(&table, sweep.start.clone(), Bound::Unbounded, Some(batch))
            .await
        {
            Ok(rows) => rows,
            Err(e) => {
                tracing::warn!(error = %e, "notify scan failed");
                sleep_or_stop(&shared, shared.config.idle_sleep_max).await;
                continue;
            }
        };
        let reached_end = rows.len() < batch;
        let first = rows.first().map(|r| r.row.clone());
        let last = rows.last().map(|r| r.row.clone());
        let mut to_run = Vec::new();
        for row in rows {
            remember(&mut sweep, &mut rng, row.row.clone());
            if let Some(row) = dispatch(&shared, &table, row) {
                to_run.push(row);
            }
        }
        let candidates = to_run.len();
        let started = start_runs(&shared, &table, to_run).await;
        if shared.stop.is_cancelled() {
            return;
        }
        let dispatched = started.started;
        sweep.in_flight_here |= started.in_flight > 0;
        // Before a teleport, which leaves this pass: a stage that had work is not left.
        sweep.worked_here |= dispatched > 0;
        // Most of the batch held by other workers: a scanner of another process is on this
        // stretch, ahead of this one (the paper's clumping, across processes).
        let clumped_elsewhere =
            started.held_elsewhere > 0 && 2 * started.held_elsewhere >= candidates;
        if clumped_elsewhere {
            bump(&shared.metrics.cross_process_teleports, 1);
        }
        if let (Some(first), Some(last)) = (&first, &last) {
            *shared.positions[id].lock() = Some((sweep.table, last.clone()));
            sweep.start = Bound::Excluded(last.clone());
            if clumped_elsewhere || caught_up(&shared, id, sweep.table, first, last) {
                teleport(&shared, &mut sweep, &mut rng);
                continue;
            }
        }
        if dispatched > 0 {
            sweep.tables_since_work = 0;
            sweep.idle_sleep = Duration::from_millis(1);
        }
        if reached_end {
            // Staged, a pass that started a run, or found one of this worker's runs still on a
            // row, goes back to the first stage: the stages after a table wait until a pass
            // over it finds nothing to start and nothing running. (Scanners chasing each other
            // through one table see the rows just started by the one ahead; moving on then
            // would run the next stage alongside this one.)
            let upstream_busy = staged && (sweep.worked_here || sweep.in_flight_here);
            if upstream_busy && !sweep.worked_here {
                // Only running rows: let them finish rather than rescan at once.
                sleep_or_stop(&shared, Duration::from_millis(1)).await;
            }
            sweep.table = if upstream_busy {
                0
            } else if staged && !sweep.from_table_start {
                // The pass began mid-table (a random start or a teleport): the rows before
                // that point are still to be seen before the stage counts as done.
                sweep.table
            } else {
                (sweep.table + 1) % tables
            };
            sweep.worked_here = false;
            sweep.in_flight_here = false;
            sweep.start = Bound::Unbounded;
            sweep.from_table_start = true;
            sweep.tables_since_work += 1;
            if sweep.tables_since_work >= tables {
                sweep.tables_since_work = 0;
                sleep_or_stop(&shared, sweep.idle_sleep).await;
                sweep.idle_sleep = (sweep.idle_sleep * 2).min(shared.config.idle_sleep_max);
            }
        }
    }
}

/// Rows a batching table's scanner reads per scan call.
const BATCH_SCAN_ROWS: usize = 256;

/// A scanner of one table whose observers batch ([`crate::Observer::batch_delay`]), besides
/// the regular ones: every half `delay` it reads the table's dirty rows and arms their batch
/// timers. The regular scanners may spend minutes in another table's backlog; without this,
/// a batching observer would run only when one of them comes by, and its batches would grow
/// with that wait instead of with the delay. Such tables are small by design (a queue per
/// shard), so the scan is cheap.
pub(crate) async fn batch_scan_loop<S: RowStore>(
    shared: Arc<Shared<S>>,
    table: Bytes,
    delay: Duration,
) {
    let pause = (delay / 2).max(Duration::from_millis(1));
    while !shared.stop.is_cancelled() {
        let mut start = Bound::Unbounded;
        loop {
            let rows = match shared
                .client
                .scan_notifications(
                    &table,
                    start.clone(),
                    Bound::Unbounded,
                    Some(BATCH_SCAN_ROWS),
                )
                .await
            {
                Ok(rows) => rows,
                Err(e) => {
                    tracing::warn!(error = %e, "notify scan of a batching table failed");
                    break;
                }
            };
            let last = rows.last().map(|r| r.row.clone());
            let full = rows.len() == BATCH_SCAN_ROWS;
            let to_run: Vec<NotifyRow> = rows
                .into_iter()
                .filter_map(|row| dispatch(&shared, &table, row))
                .collect();
            start_runs(&shared, &table, to_run).await;
            match last {
                Some(last) if full => start = Bound::Excluded(last),
                _ => break,
            }
        }
        sleep_or_stop(&shared, pause).await;
    }
}

/// What [`start_runs`] did with a batch of rows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Started {
    /// Runs started.
    started: usize,
    /// Rows this worker is running already.
    in_flight: usize,
    /// Rows another worker holds in the shared lock service.
    held_elsewhere: usize,
}

/// Hands `row` back to be run unless nothing in it is observed, another worker of the scan
/// group owns it, or its observers batch (then a timer starts the run later).
fn dispatch<S: RowStore>(
    shared: &Arc<Shared<S>>,
    table: &Bytes,
    row: NotifyRow,
) -> Option<NotifyRow> {
    bump(&shared.metrics.rows_scanned, 1);
    let unobserved: u64 = row
        .columns
        .iter()
        .filter(|(c, _)| !shared.observers.is_observed(table, c))
        .map(|(_, v)| v.len() as u64)
        .sum();
    bump(&shared.metrics.unobserved, unobserved);
    let versions: u64 = row.columns.iter().map(|(_, v)| v.len() as u64).sum();
    if unobserved == versions {
        return None; // nothing this worker observes
    }
    if let Some(partition) = &shared.partition
        && !partition.owns(table, &row.row)
    {
        bump(&shared.metrics.left_to_others, 1);
        return None; // another worker of the scan group runs it
    }
    let delay = batch_delay(shared, table, &row);
    if !delay.is_zero() {
        bump(&shared.metrics.lingered, 1);
        arm_batch_timer(shared, table, row, delay);
        return None;
    }
    Some(row)
}

/// Starts a run for each of `rows` that this worker is not running already, that no other
/// worker holds in the shared lock service (one request for the whole batch), and that is not
/// backing off after failures.
async fn start_runs<S: RowStore>(
    shared: &Arc<Shared<S>>,
    table: &Bytes,
    rows: Vec<NotifyRow>,
) -> Started {
    let mut outcome = Started::default();
    // This worker's own lock first: a row one of its runs holds is not asked for again (the
    // service would grant it to the same holder, and the release would end the run's lock).
    let mut locked = Vec::with_capacity(rows.len());
    for row in rows {
        match shared.row_locks.try_lock(table, &row.row) {
            Some(guard) => locked.push((row, guard)),
            None => {
                bump(&shared.metrics.busy_rows, 1);
                outcome.in_flight += 1;
            }
        }
    }
    let answers = match &shared.config.shared_locks {
        Some(service) if !locked.is_empty() => {
            let keys: Vec<(Bytes, Bytes)> = locked
                .iter()
                .map(|(row, _)| (table.clone(), row.row.clone()))
                .collect();
            Some((Arc::clone(service), service.try_lock_many(&keys).await))
        }
        _ => None,
    };
    for (i, (row, guard)) in locked.into_iter().enumerate() {
        let shared_guard = match &answers {
            None => None,
            // A service that answers short leaves the rest unanswered: they run unlocked.
            Some((service, answers)) => match answers.get(i) {
                Some(SharedLockAnswer::Granted) => Some(SharedLockGuard::new(
                    Arc::clone(service),
                    table.clone(),
                    row.row.clone(),
                )),
                Some(SharedLockAnswer::HeldElsewhere) => {
                    bump(&shared.metrics.held_elsewhere, 1);
                    outcome.held_elsewhere += 1;
                    continue; // another worker runs it; this worker's lock goes with `guard`
                }
                Some(SharedLockAnswer::Unavailable) | None => {
                    bump(&shared.metrics.lock_service_unavailable, 1);
                    None
                }
            },
        };
        if start_run(shared, table, row, guard, shared_guard).await {
            outcome.started += 1;
        }
    }
    outcome
}

/// Starts a run for `row`, whose locks are taken, unless it is backing off after failures or
/// the worker is stopping. Whether a run started.
async fn start_run<S: RowStore>(
    shared: &Arc<Shared<S>>,
    table: &Bytes,
    row: NotifyRow,
    guard: RowGuard,
    shared_guard: Option<SharedLockGuard>,
) -> bool {
    // Checked under the row lock: a run records its failure (and so the pause) before it lets
    // the lock go, so a check made before taking the lock could miss the pause of a run that
    // ended in between, and retry at once.
    if shared
        .failures
        .backing_off(table, &row.row, std::time::Instant::now())
    {
        bump(&shared.metrics.backed_off, 1);
        return false;
    }
    let permit = tokio::select! {
        permit = Arc::clone(&shared.permits).acquire_owned() => match permit {
            Ok(p) => p,
            Err(_) => return false,
        },
        () = shared.stop.cancelled() => return false,
    };
    bump(&shared.metrics.started, 1);
    let in_flight = InFlight::enter(Arc::clone(shared));
    let table = table.clone();
    shared.tracker.spawn(async move {
        // Observer panics are caught inside; this is the last line of defence, so that nothing
        // that unwinds can leave the row locked or the in-flight count up (`wait_idle`).
        let shared = &in_flight.shared;
        let runs = async {
            // A batching observer's backlog runs back to back, under the same row lock.
            while process_row(shared, &table, row.clone()).await && !shared.stop.is_cancelled() {
                bump(&shared.metrics.batch_reruns, 1);
            }
        };
        let run = AssertUnwindSafe(runs).catch_unwind();
        if let Err(payload) = run.await {
            bump(&in_flight.shared.metrics.panics, 1);
            bump(&in_flight.shared.metrics.failures, 1);
            tracing::error!(
                panic = crate::process::panic_message(payload.as_ref()),
                "observer run panicked"
            );
        }
        drop(shared_guard);
        drop(guard);
        drop(permit);
        drop(in_flight);
    });
    true
}

/// The longest batch delay ([`crate::Observer::batch_delay`]) of the observers of `row`'s dirty
/// columns.
fn batch_delay<S: RowStore>(shared: &Shared<S>, table: &Bytes, row: &NotifyRow) -> Duration {
    // Most tables have no batching observer: no per-column lookup for them.
    if !shared.batching.iter().any(|(t, _)| t == table) {
        return Duration::ZERO;
    }
    row.columns
        .iter()
        .map(|(column, _)| shared.observers.batch_delay(table, column))
        .max()
        .unwrap_or_default()
}

/// Starts a run for `row` once `delay` has passed, unless a timer already waits for it: what
/// arrives meanwhile collapses into that run. The timer, not a later scan, starts the run, so
/// the delay holds however long the scanners take to come back (a scanner may be deep in
/// another table's backlog). A run that cannot start then (the row is busy or backing off) is
/// left to the next scan that finds the row, which arms a new timer.
fn arm_batch_timer<S: RowStore>(
    shared: &Arc<Shared<S>>,
    table: &Bytes,
    row: NotifyRow,
    delay: Duration,
) {
    let key = (table.clone(), row.row.clone());
    if !shared.lingering.lock().insert(key.clone()) {
        return;
    }
    let shared = Arc::clone(shared);
    let table = table.clone();
    let tracker = shared.tracker.clone();
    tracker.spawn(async move {
        let stopped = tokio::select! {
            () = tokio::time::sleep(delay) => false,
            () = shared.stop.cancelled() => true,
        };
        shared.lingering.lock().remove(&key);
        if !stopped {
            start_runs(&shared, &table, vec![row]).await;
        }
    });
}

/// Counts a run in flight until dropped, however the run ends.
struct InFlight<S: RowStore> {
    shared: Arc<Shared<S>>,
}

impl<S: RowStore> InFlight<S> {
    fn enter(shared: Arc<Shared<S>>) -> Self {
        shared.metrics.in_flight.fetch_add(1, Ordering::SeqCst);
        Self { shared }
    }
}

impl<S: RowStore> Drop for InFlight<S> {
    fn drop(&mut self) {
        self.shared.metrics.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Whether another scanner stands on the stretch `[first, last]` of `table` this one just read.
fn caught_up<S: RowStore>(
    shared: &Shared<S>,
    id: usize,
    table: usize,
    first: &Bytes,
    last: &Bytes,
) -> bool {
    shared.positions.iter().enumerate().any(|(other, pos)| {
        other != id
            && pos
                .lock()
                .as_ref()
                .is_some_and(|(t, row)| *t == table && row >= first && row < last)
    })
}

fn teleport<S: RowStore>(shared: &Shared<S>, sweep: &mut Sweep, rng: &mut StdRng) {
    bump(&shared.metrics.teleports, 1);
    if sweep.sample.is_empty() {
        sweep.table = if shared.config.stages.is_empty() {
            rng.random_range(0..shared.tables.len())
        } else {
            0 // the first stage
        };
        sweep.start = random_start(rng);
    } else {
        let (table, row) = sweep.sample[rng.random_range(0..sweep.sample.len())].clone();
        sweep.table = table;
        sweep.start = Bound::Included(row);
    }
    sweep.from_table_start = false;
}

/// Reservoir sampling of rows seen, as teleport destinations.
fn remember(sweep: &mut Sweep, rng: &mut StdRng, row: Bytes) {
    sweep.seen += 1;
    if sweep.sample.len() < SAMPLE {
        sweep.sample.push((sweep.table, row));
    } else {
        let slot = rng.random_range(0..sweep.seen);
        if let Some(s) = usize::try_from(slot).ok().filter(|&s| s < SAMPLE) {
            sweep.sample[s] = (sweep.table, row);
        }
    }
}

/// A random row key to start from (rows before it are reached after wrapping around).
fn random_start(rng: &mut StdRng) -> Bound<Bytes> {
    let len = rng.random_range(1..=2);
    let key: Vec<u8> = (0..len).map(|_| rng.random()).collect();
    Bound::Included(Bytes::from(key))
}

async fn sleep_or_stop<S: RowStore>(shared: &Shared<S>, pause: Duration) {
    tokio::select! {
        () = tokio::time::sleep(pause) => {}
        () = shared.stop.cancelled() => {}
    }
}
