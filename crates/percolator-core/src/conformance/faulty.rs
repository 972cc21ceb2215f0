//! A [`RowStore`] wrapper that injects network faults: answers lost after the mutation was
//! applied (the ambiguous timeout), and a record of every batch so that a test can re-deliver an
//! old message late.

use std::sync::Arc;

use async_trait::async_trait;
use parking_lot::Mutex;

use crate::error::StoreError;
use crate::store::{
    Cell, Condition, Family, Mutation, MutationOutcome, ReadRow, RowCells, RowMutation, RowStore,
    Scan, StoreLimits, TsRange,
};

/// Which batches lose their answer.
pub type BatchPredicate = Box<dyn Fn(&[RowMutation]) -> bool + Send + Sync>;

/// Wraps a store; see the module docs.
pub struct FaultyStore<S: RowStore> {
    inner: Arc<S>,
    lose_answer: Mutex<Option<(BatchPredicate, usize)>>,
    failing_syncs: std::sync::atomic::AtomicUsize,
    recorded: Mutex<Vec<Vec<RowMutation>>>,
}

impl<S: RowStore> FaultyStore<S> {
    /// Wraps `inner` with no faults armed.
    pub fn new(inner: Arc<S>) -> Self {
        Self {
            inner,
            lose_answer: Mutex::new(None),
            failing_syncs: std::sync::atomic::AtomicUsize::new(0),
            recorded: Mutex::new(Vec::new()),
        }
    }

    /// The next `times` batches matching `predicate` are applied, but the caller gets
    /// [`StoreError::Unavailable`] instead of the outcomes.
    pub fn lose_answers(&self, times: usize, predicate: BatchPredicate) {
        *self.lose_answer.lock() = Some((predicate, times));
    }

    /// The next `times` calls to `sync` fail with [`StoreError::Unavailable`] (without syncing).
    pub fn fail_syncs(&self, times: usize) {
        self.failing_syncs
            .store(times, std::sync::atomic::Ordering::SeqCst);
    }

    /// Every batch sent so far.
    pub fn recorded(&self) -> Vec<Vec<RowMutation>> {
        self.recorded.lock().clone()
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

#[async_trait]
impl<S: RowStore> RowStore for FaultyStore<S> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn limits(&self) -> StoreLimits {
        self.inner.limits()
    }

    fn store_id(&self) -> usize {
        self.inner.store_id()
    }

    async fn read_row(&self, request: ReadRow) -> Result<Vec<Vec<Cell>>, StoreError> {
        self.inner.read_row(request).await
    }

    async fn scan(&self, request: Scan) -> Result<Vec<RowCells>, StoreError> {
        self.inner.scan(request).await
    }

    async fn mutate_rows(
        &self,
        batch: Vec<RowMutation>,
    ) -> Result<Vec<MutationOutcome>, StoreError> {
        self.recorded.lock().push(batch.clone());
        let lose = {
            let mut armed = self.lose_answer.lock();
            match armed.as_mut() {
                Some((predicate, times)) if *times > 0 && predicate(&batch) => {
                    *times -= 1;
                    true
                }
                _ => false,
            }
        };
        let outcome = self.inner.mutate_rows(batch).await?;
        if lose {
            return Err(StoreError::Unavailable(
                "injected: answer lost after apply".into(),
            ));
        }
        Ok(outcome)
    }

    async fn sync(&self) -> Result<(), StoreError> {
        use std::sync::atomic::Ordering;
        let failing = self
            .failing_syncs
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        if failing.is_ok() {
            return Err(StoreError::Unavailable("injected: sync failed".into()));
        }
        self.inner.sync().await
    }
}

/// Whether a batch writes Percolator's reserved metadata (the oracle's high-water mark).
pub fn is_oracle_mark(batch: &[RowMutation]) -> bool {
    batch
        .iter()
        .any(|m| m.table.as_ref() == crate::tables::META_TABLE)
}
