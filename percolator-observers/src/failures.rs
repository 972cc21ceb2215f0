//! Per-row failure bookkeeping of one worker: exponential backoff for rows whose runs fail (or
//! that wait for another worker's observer), the consecutive failures of each observer on each
//! cell (which decide parking, see `parking`), and the self-trigger counts that bound observers
//! writing the column they observe.
//!
//! In memory and per worker, like the row locks: another worker starts from zero, which only
//! costs it a few failed runs of its own before it backs off or parks too. Sharded, so the
//! scanners' check on every dirty row never contends on one mutex.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;

const SHARDS: usize = 32;

type RowId = (Bytes, Bytes);
/// `(column, observer name)` within a row.
type ObserverCell = (Bytes, String);

#[derive(Debug, Default)]
struct RowState {
    /// Consecutive runs of the row that failed or waited; sets the pause.
    strikes: u32,
    /// No run of the row before this.
    not_before: Option<Instant>,
    /// Consecutive failures per observer and column.
    failures: HashMap<ObserverCell, u32>,
}

#[derive(Debug)]
pub(crate) struct RowFailures {
    rows: Vec<Mutex<HashMap<RowId, RowState>>>,
    self_runs: Vec<Mutex<HashMap<(RowId, ObserverCell), u32>>>,
    hasher: std::collections::hash_map::RandomState,
    base: Duration,
    max: Duration,
}

impl RowFailures {
    pub(crate) fn new(base: Duration, max: Duration) -> Self {
        Self {
            rows: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            self_runs: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            hasher: std::collections::hash_map::RandomState::new(),
            base: base.max(Duration::from_millis(1)),
            max: max.max(base),
        }
    }

    fn shard(&self, table: &Bytes, row: &Bytes) -> usize {
        (self.hasher.hash_one((table, row)) % SHARDS as u64) as usize
    }

    /// Whether `table`/`row` is in a backoff pause at `now`.
    pub(crate) fn backing_off(&self, table: &Bytes, row: &Bytes, now: Instant) -> bool {
        let shard = self.rows[self.shard(table, row)].lock();
        shard
            .get(&(table.clone(), row.clone()))
            .and_then(|s| s.not_before)
            .is_some_and(|t| t > now)
    }

    /// Records a failed run of `observer` on `table`/`row`/`column`: the row pauses (doubling
    /// with each strike, up to the maximum). Returns the observer's consecutive failures there.
    pub(crate) fn failed(&self, table: &Bytes, row: &Bytes, column: &Bytes, observer: &str) -> u32 {
        let mut shard = self.rows[self.shard(table, row)].lock();
        let state = shard.entry((table.clone(), row.clone())).or_default();
        let count = state
            .failures
            .entry((column.clone(), observer.to_owned()))
            .or_default();
        *count += 1;
        let count = *count;
        self.strike(state);
        count
    }

    /// The row waits for something this worker cannot do (another worker's observer): it
    /// pauses like a failure, without counting against any observer.
    pub(crate) fn wait(&self, table: &Bytes, row: &Bytes) {
        let mut shard = self.rows[self.shard(table, row)].lock();
        let state = shard.entry((table.clone(), row.clone())).or_default();
        self.strike(state);
    }

    fn strike(&self, state: &mut RowState) {
        let pause = self
            .base
            .saturating_mul(1u32 << state.strikes.min(20))
            .min(self.max);
        state.strikes = state.strikes.saturating_add(1);
        state.not_before = Some(Instant::now() + pause);
    }

    /// `observer` succeeded (or was parked) on `table`/`row`/`column`: its count restarts.
    pub(crate) fn reset_observer(
        &self,
        table: &Bytes,
        row: &Bytes,
        column: &Bytes,
        observer: &str,
    ) {
        let mut shard = self.rows[self.shard(table, row)].lock();
        let key = (table.clone(), row.clone());
        if let Some(state) = shard.get_mut(&key) {
            state
                .failures
                .remove(&(column.clone(), observer.to_owned()));
        }
    }

    /// Every run of the row succeeded and its notifications were consumed: forget it.
    pub(crate) fn row_done(&self, table: &Bytes, row: &Bytes) {
        let mut shard = self.rows[self.shard(table, row)].lock();
        shard.remove(&(table.clone(), row.clone()));
    }

    /// Rows with failure state now (pausing or not).
    #[cfg(test)]
    pub(crate) fn rows_tracked(&self) -> usize {
        self.rows.iter().map(|s| s.lock().len()).sum()
    }

    /// Runs in a row of `observer` on `table`/`row`/`column` that wrote that very cell.
    pub(crate) fn self_runs(
        &self,
        table: &Bytes,
        row: &Bytes,
        column: &Bytes,
        observer: &str,
    ) -> u32 {
        let key = (
            (table.clone(), row.clone()),
            (column.clone(), observer.to_owned()),
        );
        self.self_runs[self.shard(table, row)]
            .lock()
            .get(&key)
            .copied()
            .unwrap_or(0)
    }

    /// A committed run of `observer` on `table`/`row`/`column` wrote that very cell (`wrote`),
    /// which notifies it again, or did not. Returns how many runs in a row did (0 after one that
    /// did not).
    pub(crate) fn record_self_run(
        &self,
        table: &Bytes,
        row: &Bytes,
        column: &Bytes,
        observer: &str,
        wrote: bool,
    ) -> u32 {
        let key = (
            (table.clone(), row.clone()),
            (column.clone(), observer.to_owned()),
        );
        let mut shard = self.self_runs[self.shard(table, row)].lock();
        if !wrote {
            shard.remove(&key);
            return 0;
        }
        let count = shard.entry(key).or_default();
        *count += 1;
        *count
    }

    /// Forgets the self-trigger count of `observer` on the cell (after its runs stopped).
    pub(crate) fn clear_self_runs(
        &self,
        table: &Bytes,
        row: &Bytes,
        column: &Bytes,
        observer: &str,
    ) {
        let key = (
            (table.clone(), row.clone()),
            (column.clone(), observer.to_owned()),
        );
        self.self_runs[self.shard(table, row)].lock().remove(&key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &'static str) -> Bytes {
        Bytes::from_static(s.as_bytes())
    }

    #[test]
    fn failures_pause_the_row_and_double() {
        let f = RowFailures::new(Duration::from_millis(100), Duration::from_secs(1));
        let now = Instant::now();
        assert!(!f.backing_off(&b("t"), &b("r"), now));
        assert_eq!(f.failed(&b("t"), &b("r"), &b("c"), "o"), 1);
        assert!(f.backing_off(&b("t"), &b("r"), Instant::now()));
        assert!(!f.backing_off(&b("t"), &b("other"), Instant::now()));
        assert_eq!(f.failed(&b("t"), &b("r"), &b("c"), "o"), 2);
        assert_eq!(f.failed(&b("t"), &b("r"), &b("c"), "p"), 1, "per observer");
        // Three strikes: 100, 200, 400 ms; the third pause ends ~400 ms from now.
        let later = Instant::now() + Duration::from_millis(350);
        assert!(f.backing_off(&b("t"), &b("r"), later));
        let capped = Instant::now() + Duration::from_millis(1100);
        for _ in 0..10 {
            f.wait(&b("t"), &b("r"));
        }
        assert!(
            !f.backing_off(&b("t"), &b("r"), capped),
            "capped at the max"
        );
        f.reset_observer(&b("t"), &b("r"), &b("c"), "o");
        assert_eq!(f.failed(&b("t"), &b("r"), &b("c"), "o"), 1);
        f.row_done(&b("t"), &b("r"));
        assert_eq!(f.rows_tracked(), 0);
        assert!(!f.backing_off(&b("t"), &b("r"), Instant::now()));
    }

    #[test]
    fn self_trigger_counts_reset_on_a_quiet_run() {
        let f = RowFailures::new(Duration::from_millis(1), Duration::from_millis(10));
        assert_eq!(f.record_self_run(&b("t"), &b("r"), &b("c"), "o", true), 1);
        assert_eq!(f.record_self_run(&b("t"), &b("r"), &b("c"), "o", true), 2);
        assert_eq!(f.self_runs(&b("t"), &b("r"), &b("c"), "o"), 2);
        assert_eq!(f.record_self_run(&b("t"), &b("r"), &b("c"), "o", false), 0);
        assert_eq!(f.record_self_run(&b("t"), &b("r"), &b("c"), "o", true), 1);
        f.clear_self_runs(&b("t"), &b("r"), &b("c"), "o");
        assert_eq!(f.self_runs(&b("t"), &b("r"), &b("c"), "o"), 0);
    }
}
