//! [`FaultyStore`]: a [`RowStore`] wrapper that injects the failures of a real network and disk.
//!
//! Armed explicitly, for a test that needs one fault at one place:
//! - [`FaultyStore::lose_answers`]: a batch is applied but its answer is lost (the ambiguous
//!   timeout: the caller gets [`StoreError::Unavailable`] and must find out what happened);
//! - [`FaultyStore::fail_syncs`]: `sync` fails without syncing.
//!
//! Armed at random, for workloads ([`FaultyStore::set_random_faults`] with [`FaultRates`] and a
//! seed): reads (`read_row`, `scan`) fail with `Unavailable`, batches are dropped **before** they
//! apply (`Unavailable`, nothing written), `sync` fails. The draws come from one seeded
//! [`StdRng`], so a seed replays the same sequence of faults (which calls they hit still depends
//! on how tasks interleave). [`FaultyStore::injected`] counts what was injected, so a test can
//! check that its faults happened at all.
//!
//! Every batch sent is also recorded so that a test can re-deliver an old message late
//! ([`FaultyStore::redeliver`]). Only the last [`RECORDED_BATCHES`] are kept (a ring buffer), so a
//! long workload over the wrapper runs in bounded memory.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use async_trait::async_trait;
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};

use crate::error::StoreError;
use crate::store::{
    AtomicOutcome, Cell, Condition, Family, Mutation, MutationOutcome, ReadRow, RowCells,
    RowMutation, RowStore, Scan, StoreLimits, TsRange,
};

/// Which batches lose their answer.
pub type BatchPredicate = Box<dyn Fn(&[RowMutation]) -> bool + Send + Sync>;

/// How many of the most recent batches a [`FaultyStore`] keeps for re-delivery.
pub const RECORDED_BATCHES: usize = 256;

/// Probabilities of the random faults of a [`FaultyStore`] (each in `0.0..=1.0`; zero: never).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct FaultRates {
    /// A `read_row` or `scan` fails with [`StoreError::Unavailable`].
    pub read_failure: f64,
    /// A `mutate_rows` batch is dropped before it applies: [`StoreError::Unavailable`], nothing
    /// written.
    pub batch_drop: f64,
    /// A `sync` fails with [`StoreError::Unavailable`] without syncing.
    pub sync_failure: f64,
}

impl FaultRates {
    /// No random faults.
    pub const NONE: FaultRates = FaultRates {
        read_failure: 0.0,
        batch_drop: 0.0,
        sync_failure: 0.0,
    };
}

/// How many faults a [`FaultyStore`] injected so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct InjectedFaults {
    /// Reads that failed.
    pub reads_failed: u64,
    /// Batches dropped before they applied.
    pub batches_dropped: u64,
    /// Batches applied whose answer was lost.
    pub answers_lost: u64,
    /// Syncs that failed.
    pub syncs_failed: u64,
}

#[derive(Default)]
struct Counters {
    reads_failed: AtomicU64,
    batches_dropped: AtomicU64,
    answers_lost: AtomicU64,
    syncs_failed: AtomicU64,
}

/// The random faults armed, and the generator that decides them.
struct Random {
    rates: FaultRates,
    rng: StdRng,
}

/// The last [`RECORDED_BATCHES`] batches, each with its sequence number.
#[derive(Default)]
struct Recorded {
    sent: u64,
    batches: VecDeque<(u64, Vec<RowMutation>)>,
}

/// Wraps a store; see the module docs.
pub struct FaultyStore<S: RowStore> {
    inner: Arc<S>,
    lose_answer: Mutex<Option<(BatchPredicate, usize)>>,
    drop_batch: Mutex<Option<(BatchPredicate, usize)>>,
    failing_syncs: AtomicUsize,
    random: Mutex<Random>,
    counters: Counters,
    recorded: Mutex<Recorded>,
    limits: Mutex<Option<StoreLimits>>,
}

impl<S: RowStore> FaultyStore<S> {
    /// Wraps `inner` with no faults armed.
    pub fn new(inner: Arc<S>) -> Self {
        Self {
            inner,
            lose_answer: Mutex::new(None),
            drop_batch: Mutex::new(None),
            failing_syncs: AtomicUsize::new(0),
            random: Mutex::new(Random {
                rates: FaultRates::NONE,
                rng: StdRng::seed_from_u64(0),
            }),
            counters: Counters::default(),
            recorded: Mutex::new(Recorded::default()),
            limits: Mutex::new(None),
        }
    }

    /// Reports and enforces `limits` instead of the inner store's (`None`: the inner store's
    /// again). Tighter
    /// limits make callers that size their batches by [`RowStore::limits`] (the transaction
    /// layer, applications) split their work as on a store that has them; the inner store
    /// still applies whatever reaches it.
    pub fn set_limits(&self, limits: Option<StoreLimits>) {
        *self.limits.lock() = limits;
    }

    /// The next `times` batches matching `predicate` are applied, but the caller gets
    /// [`StoreError::Unavailable`] instead of the outcomes.
    pub fn lose_answers(&self, times: usize, predicate: BatchPredicate) {
        *self.lose_answer.lock() = Some((predicate, times));
    }

    /// The next `times` batches matching `predicate` are not applied, and the caller gets
    /// [`StoreError::Unavailable`] (a request lost on its way to the store).
    pub fn drop_batches(&self, times: usize, predicate: BatchPredicate) {
        *self.drop_batch.lock() = Some((predicate, times));
    }

    /// The next `times` calls to `sync` fail with [`StoreError::Unavailable`] (without syncing).
    pub fn fail_syncs(&self, times: usize) {
        self.failing_syncs.store(times, Ordering::SeqCst);
    }

    /// Arms random faults with these rates, drawn from a generator seeded with `seed` (see the
    /// module docs). [`FaultRates::NONE`] disarms them.
    pub fn set_random_faults(&self, rates: FaultRates, seed: u64) {
        *self.random.lock() = Random {
            rates,
            rng: StdRng::seed_from_u64(seed),
        };
    }

    /// Disarms the random faults.
    pub fn clear_random_faults(&self) {
        self.random.lock().rates = FaultRates::NONE;
    }

    /// What was injected so far.
    pub fn injected(&self) -> InjectedFaults {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        InjectedFaults {
            reads_failed: load(&self.counters.reads_failed),
            batches_dropped: load(&self.counters.batches_dropped),
            answers_lost: load(&self.counters.answers_lost),
            syncs_failed: load(&self.counters.syncs_failed),
        }
    }

    /// How many batches were sent so far (the sequence number the next one gets).
    pub fn sent(&self) -> u64 {
        self.recorded.lock().sent
    }

    /// The recorded batches (the last [`RECORDED_BATCHES`] sent), oldest first.
    pub fn recorded(&self) -> Vec<Vec<RowMutation>> {
        self.recorded_since(0)
    }

    /// The recorded batches with sequence number `seq` or later ([`Self::sent`] before the
    /// calls of interest), oldest first. Batches older than the last [`RECORDED_BATCHES`] are
    /// gone.
    pub fn recorded_since(&self, seq: u64) -> Vec<Vec<RowMutation>> {
        self.recorded
            .lock()
            .batches
            .iter()
            .filter(|(n, _)| *n >= seq)
            .map(|(_, batch)| batch.clone())
            .collect()
    }

    /// Delivers `batch` again, bypassing fault injection (a late duplicate message).
    pub async fn redeliver(
        &self,
        batch: Vec<RowMutation>,
    ) -> Result<Vec<MutationOutcome>, StoreError> {
        self.inner.mutate_rows(batch).await
    }

    /// The wrapped store.
    pub fn inner(&self) -> &Arc<S> {
        &self.inner
    }

    fn record(&self, batch: &[RowMutation]) {
        let mut recorded = self.recorded.lock();
        let seq = recorded.sent;
        recorded.sent += 1;
        if recorded.batches.len() == RECORDED_BATCHES {
            recorded.batches.pop_front();
        }
        recorded.batches.push_back((seq, batch.to_vec()));
    }

    /// Whether the random fault with probability `rate(rates)` strikes now; counts it in
    /// `counter` if so.
    fn strikes(&self, rate: impl Fn(&FaultRates) -> f64, counter: &AtomicU64) -> bool {
        let hit = {
            let mut random = self.random.lock();
            let p = rate(&random.rates);
            p > 0.0 && random.rng.random_bool(p.min(1.0))
        };
        if hit {
            counter.fetch_add(1, Ordering::Relaxed);
        }
        hit
    }

    fn read_fault(&self) -> Result<(), StoreError> {
        if self.strikes(|r| r.read_failure, &self.counters.reads_failed) {
            return Err(StoreError::Unavailable("injected: read failed".into()));
        }
        Ok(())
    }
}

/// Whether an armed fault (`predicate`, remaining count) strikes `batch`; counts it down if so.
impl<S: RowStore> FaultyStore<S> {
    /// Sends `batch` through `apply` with the mutation faults: recorded, then dropped before it
    /// applies (armed or at random), or applied and its answer lost (armed).
    async fn with_batch_faults<T, F, Fut>(
        &self,
        batch: Vec<RowMutation>,
        apply: F,
    ) -> Result<T, StoreError>
    where
        F: FnOnce(Vec<RowMutation>) -> Fut,
        Fut: std::future::Future<Output = Result<T, StoreError>>,
    {
        self.record(&batch);
        let drop = take_armed(&self.drop_batch, &batch);
        if drop {
            self.counters
                .batches_dropped
                .fetch_add(1, Ordering::Relaxed);
        }
        if drop || self.strikes(|r| r.batch_drop, &self.counters.batches_dropped) {
            return Err(StoreError::Unavailable(
                "injected: batch dropped before it applied".into(),
            ));
        }
        let lose = take_armed(&self.lose_answer, &batch);
        let outcome = apply(batch).await?;
        if lose {
            self.counters.answers_lost.fetch_add(1, Ordering::Relaxed);
            return Err(StoreError::Unavailable(
                "injected: answer lost after apply".into(),
            ));
        }
        Ok(outcome)
    }
}

fn take_armed(armed: &Mutex<Option<(BatchPredicate, usize)>>, batch: &[RowMutation]) -> bool {
    let mut armed = armed.lock();
    match armed.as_mut() {
        Some((predicate, times)) if *times > 0 && predicate(batch) => {
            *times -= 1;
            true
        }
        _ => false,
    }
}

/// Whether a batch is a prewrite (it checks that no lock exists and puts one).
pub fn is_prewrite(batch: &[RowMutation]) -> bool {
    batch.iter().any(|m| {
        m.conditions.iter().any(|c| {
            matches!(c, Condition::Absent { family: Family::Lock, ts, .. } if *ts == TsRange::ALL)
        })
    })
}

/// Whether a batch commits something (it puts a write record and deletes a lock).
pub fn is_commit(batch: &[RowMutation]) -> bool {
    batch.iter().any(|m| {
        m.mutations.iter().any(|m| {
            matches!(
                m,
                Mutation::Put {
                    family: Family::Write,
                    ..
                }
            )
        }) && m.mutations.iter().any(|m| {
            matches!(
                m,
                Mutation::Delete {
                    family: Family::Lock,
                    ..
                }
            )
        }) && !m.mutations.iter().any(|m| {
            matches!(
                m,
                Mutation::Delete {
                    family: Family::Data,
                    ..
                }
            )
        })
    })
}

#[deny(clippy::missing_trait_methods)]
#[async_trait]
impl<S: RowStore> RowStore for FaultyStore<S> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn limits(&self) -> StoreLimits {
        (*self.limits.lock()).unwrap_or_else(|| self.inner.limits())
    }

    fn store_id(&self) -> String {
        self.inner.store_id()
    }

    async fn read_row(&self, request: ReadRow) -> Result<Vec<Vec<Cell>>, StoreError> {
        self.read_fault()?;
        self.inner.read_row(request).await
    }

    async fn read_rows(&self, requests: Vec<ReadRow>) -> Result<Vec<Vec<Vec<Cell>>>, StoreError> {
        self.read_fault()?;
        self.inner.read_rows(requests).await
    }

    async fn scan(&self, request: Scan) -> Result<Vec<RowCells>, StoreError> {
        self.read_fault()?;
        self.inner.scan(request).await
    }

    async fn mutate_rows(
        &self,
        batch: Vec<RowMutation>,
    ) -> Result<Vec<MutationOutcome>, StoreError> {
        // Tighter limits are enforced, as a backend with those limits would.
        if let Some(limits) = *self.limits.lock() {
            crate::backend::validate::validate_batch(&batch, &limits)?;
        }
        self.with_batch_faults(batch, |batch| self.inner.mutate_rows(batch))
            .await
    }

    /// The same faults as [`RowStore::mutate_rows`]: the whole batch dropped before it applies,
    /// or its answer lost after.
    async fn mutate_rows_atomically(
        &self,
        batch: Vec<RowMutation>,
    ) -> Result<AtomicOutcome, StoreError> {
        if let Some(limits) = *self.limits.lock() {
            crate::backend::validate::validate_atomic_batch(&batch, &limits)?;
        }
        self.with_batch_faults(batch, |batch| self.inner.mutate_rows_atomically(batch))
            .await
    }

    async fn sync(&self) -> Result<(), StoreError> {
        let armed = self
            .failing_syncs
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if armed {
            self.counters.syncs_failed.fetch_add(1, Ordering::Relaxed);
        }
        if armed || self.strikes(|r| r.sync_failure, &self.counters.syncs_failed) {
            return Err(StoreError::Unavailable("injected: sync failed".into()));
        }
        self.inner.sync().await
    }

    /// Forwarded without faults: maintenance, not the protocol under test.
    async fn tables(&self) -> Result<Vec<bytes::Bytes>, StoreError> {
        self.inner.tables().await
    }

    /// Forwarded without faults.
    async fn collect_garbage(&self, safe_point: u64) -> Result<(), StoreError> {
        self.inner.collect_garbage(safe_point).await
    }
}

/// Whether a batch writes Percolator's reserved metadata (the oracle's high-water mark).
pub fn is_oracle_mark(batch: &[RowMutation]) -> bool {
    batch
        .iter()
        .any(|m| m.table.as_ref() == crate::tables::META_TABLE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MockRowStore;

    fn put(row: &str) -> RowMutation {
        RowMutation {
            table: bytes::Bytes::from("t"),
            row: bytes::Bytes::copy_from_slice(row.as_bytes()),
            conditions: vec![],
            mutations: vec![],
        }
    }

    fn applying_mock() -> MockRowStore {
        let mut inner = MockRowStore::new();
        inner
            .expect_mutate_rows()
            .returning(|b| Ok(vec![MutationOutcome::Applied; b.len()]));
        inner.expect_sync().returning(|| Ok(()));
        inner.expect_store_id().returning(|| "mock:1".to_owned());
        inner
    }

    #[tokio::test]
    async fn keeps_only_the_most_recent_batches() {
        let store = FaultyStore::new(Arc::new(applying_mock()));
        for i in 0..RECORDED_BATCHES + 10 {
            store.mutate_rows(vec![put(&i.to_string())]).await.unwrap();
        }
        let recorded = store.recorded();
        assert_eq!(recorded.len(), RECORDED_BATCHES);
        assert_eq!(recorded[0][0].row, bytes::Bytes::from("10"));
        let seq = store.sent();
        store.mutate_rows(vec![put("last")]).await.unwrap();
        let since = store.recorded_since(seq);
        assert_eq!(since.len(), 1);
        assert_eq!(since[0][0].row, bytes::Bytes::from("last"));
        assert_eq!(store.store_id(), "mock:1");
    }

    #[tokio::test]
    async fn dropped_batches_never_reach_the_store_and_seeds_replay() {
        let run = |seed| async move {
            let mut inner = MockRowStore::new();
            let applied = Arc::new(AtomicUsize::new(0));
            let counted = Arc::clone(&applied);
            inner.expect_mutate_rows().returning(move |b| {
                counted.fetch_add(1, Ordering::SeqCst);
                Ok(vec![MutationOutcome::Applied; b.len()])
            });
            inner.expect_sync().returning(|| Ok(()));
            let store = FaultyStore::new(Arc::new(inner));
            store.set_random_faults(
                FaultRates {
                    batch_drop: 0.3,
                    sync_failure: 0.5,
                    ..FaultRates::NONE
                },
                seed,
            );
            let mut pattern = Vec::new();
            for i in 0..100 {
                pattern.push(store.mutate_rows(vec![put(&i.to_string())]).await.is_ok());
                pattern.push(store.sync().await.is_ok());
            }
            let injected = store.injected();
            let dropped = usize::try_from(injected.batches_dropped).unwrap();
            assert_eq!(applied.load(Ordering::SeqCst) + dropped, 100);
            assert!(injected.batches_dropped > 0 && injected.syncs_failed > 0);
            store.clear_random_faults();
            assert!(store.mutate_rows(vec![put("x")]).await.is_ok());
            pattern
        };
        assert_eq!(run(7).await, run(7).await, "a seed replays its faults");
        assert_ne!(run(7).await, run(8).await);
    }
}
