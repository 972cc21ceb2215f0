//! Lazy lock resolution (paper §2.2, "lazy approach to cleanup").
//!
//! A transaction that meets a lock it cannot ignore asks the lock's **primary** what happened,
//! because the primary's lock/write cells are the single point of truth of a transaction:
//! - a write record at the primary pointing at the lock's start_ts: the transaction committed, so
//!   the lock is **rolled forward** (write record at the same commit_ts, lock removed);
//! - a rollback record at the primary: the transaction is dead, so the lock is **rolled back**;
//! - the primary still locked: if the owner's lease is gone ([`crate::liveness`]) or the lock's
//!   wall-clock TTL has run out, the primary is rolled back first — conditional on the lock bytes
//!   being exactly the ones inspected, so a concurrent heartbeat or commit wins — and then the
//!   lock; otherwise the caller waits;
//! - neither: the primary was never locked (or its prewrite is still in flight); once the lock
//!   met is cleanable (its owner dead or its TTL run out) a rollback record is written there so
//!   that the late prewrite can never succeed (TiKV #921-style races); before, the reader waits,
//!   since the primary's prewrite may be in the same batch as the lock it met.
//!
//! Rollback records are never deleted here: they are what makes a late prewrite fail.

use crate::error::{Error, Result};
use crate::records::{CellAddr, LockRecord, WriteKind, WriteRecord};
use crate::store::RowStore;

use super::layout;
use super::{Client, ClientInner};

/// What the primary says about a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TxnStatus {
    /// Committed at this timestamp.
    Committed {
        /// The commit timestamp.
        commit_ts: u64,
    },
    /// Rolled back: a rollback record at the primary forbids it from ever committing.
    RolledBack,
    /// Neither lock nor write record at the primary, and the caller asked not to clean up: the
    /// primary's prewrite may still be in flight, so the outcome is open.
    NotFound,
    /// The primary is locked. With cleanup, the owner is alive and within its TTL; without, the
    /// lock is reported whatever its owner's state.
    Locked {
        /// The primary lock.
        lock: LockRecord,
    },
}

/// The final outcome of a transaction whose commit answered [`Error::CommitUndetermined`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Settled {
    /// It committed at this timestamp: everything it wrote is visible to snapshots after it.
    Committed {
        /// The commit timestamp.
        commit_ts: u64,
    },
    /// It is rolled back for good (a rollback record at the primary forbids a late commit):
    /// nothing it wrote is visible.
    RolledBack,
}

/// How many times a status check re-reads after losing a race before giving up.
const STATUS_ATTEMPTS: usize = 16;

impl<S: RowStore> ClientInner<S> {
    /// Whether a lock may be cleaned up: its owner's lease is gone or its TTL has run out, both
    /// judged in oracle time.
    pub(crate) async fn may_clean(&self, lock: &LockRecord) -> Result<bool> {
        let now = self.clock.now_ms();
        if lock.expired(now) {
            return Ok(true);
        }
        Ok(!self.liveness.is_alive(lock.owner, now).await?)
    }

    /// Reads the status of transaction `start_ts` at its primary. With `clean`, a dead or expired
    /// primary lock — or a missing one — is rolled back so that the answer is final.
    pub(crate) async fn check_status(
        &self,
        primary: &CellAddr,
        start_ts: u64,
        clean: bool,
    ) -> Result<TxnStatus> {
        self.check_status_met(primary, start_ts, clean, None).await
    }

    /// [`Self::check_status`] for a reader that met `met`, a secondary lock of the transaction:
    /// with cleanup, a missing primary is fenced only once `met` is cleanable itself (its owner
    /// gone or its TTL run out), since the primary's prewrite may be in flight beside it.
    pub(crate) async fn check_status_met(
        &self,
        primary: &CellAddr,
        start_ts: u64,
        clean: bool,
        met: Option<&LockRecord>,
    ) -> Result<TxnStatus> {
        for _ in 0..STATUS_ATTEMPTS {
            self.metrics.status_read();
            let read = self
                .store
                .read_row(layout::status_read(primary, start_ts))
                .await?;
            let (locks, writes) = match read.as_slice() {
                [locks, writes] => (locks, writes),
                _ => {
                    return Err(Error::Corrupt(
                        "store answered a two-family read with a different shape".into(),
                    ));
                }
            };
            for cell in writes {
                let record = WriteRecord::decode(&cell.value)?;
                if record.start_ts == start_ts {
                    return Ok(match record.kind {
                        WriteKind::Rollback => TxnStatus::RolledBack,
                        WriteKind::Put | WriteKind::Delete => {
                            TxnStatus::Committed { commit_ts: cell.ts }
                        }
                    });
                }
            }
            if let Some(cell) = locks.first() {
                let lock = LockRecord::decode(&cell.value)?;
                if !clean || !self.may_clean(&lock).await? {
                    return Ok(TxnStatus::Locked { lock });
                }
                let outcome = self
                    .store
                    .mutate_rows(vec![layout::rollback_primary(
                        primary,
                        start_ts,
                        cell.value.clone(),
                    )])
                    .await?;
                if outcome.first().is_some_and(|o| o.applied()) {
                    tracing::debug!(start_ts, "rolled back expired primary");
                    self.metrics.rolled_back();
                    return Ok(TxnStatus::RolledBack);
                }
                continue; // refreshed or committed meanwhile: look again
            }
            if !clean {
                return Ok(TxnStatus::NotFound);
            }
            if let Some(secondary) = met
                && !self.may_clean(secondary).await?
            {
                return Ok(TxnStatus::NotFound);
            }
            let outcome = self
                .store
                .mutate_rows(vec![layout::rollback_absent(primary, start_ts)])
                .await?;
            if outcome.first().is_some_and(|o| o.applied()) {
                self.metrics.rolled_back();
                return Ok(TxnStatus::RolledBack);
            }
            // A prewrite landed between our read and our fence: look again.
        }
        Err(Error::Store(crate::error::StoreError::Unavailable(
            format!("status of transaction {start_ts} kept changing under {STATUS_ATTEMPTS} reads"),
        )))
    }

    /// Drives transaction `start_ts` with primary `primary` to a final outcome (see
    /// [`Client::settle`]).
    pub(crate) async fn settle(&self, primary: &CellAddr, start_ts: u64) -> Result<Settled> {
        let mut backoff = crate::backoff::Backoff::from_config(&self.config);
        let began = std::time::Instant::now();
        loop {
            match self.check_status(primary, start_ts, false).await? {
                TxnStatus::Committed { commit_ts } => return Ok(Settled::Committed { commit_ts }),
                TxnStatus::RolledBack => return Ok(Settled::RolledBack),
                // Our own transaction: its commit returned, so nothing of ours still runs it. A
                // commit request still in flight loses to this conditional rollback or wins it;
                // either way the status read next says which.
                TxnStatus::Locked { lock } if lock.owner == self.worker_id => {
                    self.store
                        .mutate_rows(vec![layout::rollback_primary(
                            primary,
                            start_ts,
                            lock.encode(),
                        )])
                        .await?;
                }
                // Someone else's, or not there: settle it as a reader would (roll back a dead
                // or expired lock, fence a missing one), waiting out a live owner.
                TxnStatus::Locked { .. } | TxnStatus::NotFound => {
                    match self.check_status(primary, start_ts, true).await? {
                        TxnStatus::Committed { commit_ts } => {
                            return Ok(Settled::Committed { commit_ts });
                        }
                        TxnStatus::RolledBack => return Ok(Settled::RolledBack),
                        TxnStatus::Locked { .. } | TxnStatus::NotFound => {
                            backoff
                                .wait_or_timeout(began, primary, start_ts, &self.config)
                                .await?;
                        }
                    }
                }
            }
        }
    }

    /// Resolves the lock of transaction `start_ts` found at `addr`. Returns `false` if the owner
    /// is alive and within its TTL (the caller should wait), `true` once the lock is gone.
    pub(crate) async fn resolve_lock(
        &self,
        addr: &CellAddr,
        start_ts: u64,
        lock: &LockRecord,
    ) -> Result<bool> {
        // A transaction known to be committed (this client's own, whose secondaries may still be
        // committing in the background, or one whose status was read before) needs no status
        // read: a commit is final.
        let status = match self.recent_commits.commit_ts(&lock.primary, start_ts) {
            Some(commit_ts) => TxnStatus::Committed { commit_ts },
            None => {
                // A secondary's primary may not be locked yet: prewrites go out together
                // (`TxnConfig::parallel_prewrite`). While the secondary's owner lives and its
                // TTL runs, a missing primary is waited for, not fenced.
                let met = (*addr != lock.primary).then_some(lock);
                self.check_status_met(&lock.primary, start_ts, true, met)
                    .await?
            }
        };
        match status {
            TxnStatus::Committed { commit_ts } => {
                self.store
                    .mutate_rows(vec![layout::roll_forward(addr, start_ts, commit_ts, lock)])
                    .await?;
                // Counted apart when another worker is still running (it was committing this
                // very transaction): the sign of two workers on the same rows.
                let owner_alive =
                    lock.owner != self.worker_id && !self.may_clean(lock).await.unwrap_or(true);
                self.metrics.rolled_forward(owner_alive);
                Ok(true)
            }
            TxnStatus::RolledBack => {
                if *addr != lock.primary {
                    self.store
                        .mutate_rows(vec![layout::rollback_locked(addr, start_ts)])
                        .await?;
                }
                // Counted as rolled back where the decision was made (check_status).
                self.metrics.cleaned_up();
                Ok(true)
            }
            TxnStatus::Locked { .. } | TxnStatus::NotFound => Ok(false),
        }
    }
}

impl<S: RowStore> Client<S> {
    /// Finds out, and makes final, what happened to a transaction whose `commit` returned
    /// [`Error::CommitUndetermined`]: committed (at which timestamp) or rolled back. A
    /// transaction of this client that is still pending is rolled back (its commit has
    /// returned, so nothing drives it forward); one of another client is settled as a reader
    /// would settle it — rolled forward if its primary committed, rolled back once its owner is
    /// dead or its lock expired. Errors other than `CommitUndetermined` are `InvalidInput`.
    ///
    /// An application that saw `commit` fail with [`Error::CommitUndetermined`] calls it with
    /// that error (`Err(e @ Error::CommitUndetermined { .. }) => client.settle(&e).await?`).
    /// Here the error is built by hand for a commit that did go through:
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::{CellAddr, Client, Error, Settled, StoreError};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// let client = Client::open(Arc::new(MemStore::new())).await?;
    /// let mut txn = client.begin().await?;
    /// txn.set("docs", "a", "contents", "hello")?;
    /// let info = txn.commit().await?;
    ///
    /// let lost_answer = Error::CommitUndetermined {
    ///     start_ts: info.start_ts,
    ///     primary: Box::new(CellAddr::new("docs", "a", "contents")),
    ///     source: StoreError::Unavailable("connection reset".into()),
    /// };
    /// match client.settle(&lost_answer).await? {
    ///     Settled::Committed { commit_ts } => assert_eq!(Some(commit_ts), info.commit_ts),
    ///     other => panic!("it did commit: {other:?}"),
    /// }
    /// // Any other error is refused.
    /// assert!(client.settle(&Error::Finished).await.is_err());
    /// # client.shutdown().await }
    /// ```
    pub async fn settle(&self, error: &Error) -> Result<Settled> {
        match error {
            Error::CommitUndetermined {
                start_ts, primary, ..
            } => self.inner.settle(primary, *start_ts).await,
            other => Err(Error::InvalidInput(format!(
                "settle needs a CommitUndetermined error, not: {other}"
            ))),
        }
    }

    /// [`Self::settle`] from the parts of the error: transaction `start_ts` whose primary cell is
    /// `primary`.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::{CellAddr, Client, Settled};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// let client = Client::open(Arc::new(MemStore::new())).await?;
    /// // A transaction that began and never got to write its primary is fenced off for good.
    /// let unfinished = client.begin().await?;
    /// let primary = CellAddr::new("docs", "a", "contents");
    /// let settled = client.settle_transaction(&primary, unfinished.start_ts()).await?;
    /// assert_eq!(settled, Settled::RolledBack);
    /// # client.shutdown().await }
    /// ```
    pub async fn settle_transaction(&self, primary: &CellAddr, start_ts: u64) -> Result<Settled> {
        self.inner.settle(primary, start_ts).await
    }
}

#[cfg(test)]
mod tests {
    //! The cleaner's decisions, checked call by call against mocks of the narrow traits: which
    //! reads it makes, whether it consults liveness, and exactly which conditional mutation it
    //! sends.

    use std::sync::Arc;

    use bytes::Bytes;
    use mockall::predicate::eq;

    use super::*;
    use crate::liveness::MockLiveness;
    use crate::oracle::TimestampOracle;
    use crate::records::{CellAddr, WriteRecord};
    use crate::store::{Cell, Condition, Family, MockRowStore, Mutation, MutationOutcome};
    use crate::txn::{ClientInner, TxnConfig, TxnMetrics};

    struct NoOracle;

    #[async_trait::async_trait]
    impl TimestampOracle for NoOracle {
        async fn timestamp(&self) -> Result<u64> {
            Err(Error::Oracle("not used by lock resolution".into()))
        }
    }

    const START: u64 = 10;
    /// Oracle time of these cases: a fixed instant apart from the wall clock, so a check
    /// against the wall clock would find every lock written "now" expired or alive wrongly.
    const NOW_MS: u64 = 1_800_000_000_000;

    /// The oracle time a cleaner passes to liveness: this case's, not the wall clock's.
    fn oracle_now() -> impl mockall::Predicate<u64> + Send {
        mockall::predicate::function(|now: &u64| (NOW_MS..NOW_MS + 60_000).contains(now))
    }

    fn primary() -> CellAddr {
        CellAddr::new(&b"t"[..], &b"r"[..], &b"c"[..])
    }

    fn inner(store: MockRowStore, liveness: MockLiveness) -> ClientInner<MockRowStore> {
        ClientInner {
            store: Arc::new(store),
            oracle: Arc::new(NoOracle),
            clock: {
                let clock = crate::oracle::OracleClock::default();
                clock.observe(crate::oracle::time::first_of_ms(NOW_MS));
                Arc::new(clock)
            },
            liveness: Arc::new(liveness),
            config: TxnConfig::default(),
            worker_id: 1,
            metrics: TxnMetrics::default(),
            observed: Default::default(),
            snapshots: Default::default(),
            safety: Default::default(),
            renewal: None,
            faults: Default::default(),
            lease_refresher: parking_lot::Mutex::new(None),
            recent_commits: Default::default(),
            background: crate::txn::background::BackgroundCommits::new(1),
            read_patterns: Default::default(),
        }
    }

    fn lock(oracle_ms: u64, ttl_ms: u64) -> LockRecord {
        LockRecord {
            kind: WriteKind::Put,
            primary: primary(),
            owner: 7,
            oracle_ms,
            ttl_ms,
            value: None,
        }
    }

    fn status_answer(lock: Option<&LockRecord>, writes: Vec<(u64, WriteRecord)>) -> Vec<Vec<Cell>> {
        let locks = lock
            .map(|l| {
                vec![Cell {
                    column: Bytes::from("c"),
                    ts: START,
                    value: l.encode(),
                }]
            })
            .unwrap_or_default();
        let writes = writes
            .into_iter()
            .map(|(ts, w)| Cell {
                column: Bytes::from("c"),
                ts,
                value: w.encode(),
            })
            .collect();
        vec![locks, writes]
    }

    /// A store whose one status read finds the write record `(ts, kind)` of [`START`], and
    /// whose one mutation (the resolution) applies.
    fn store_resolving(ts: u64, kind: WriteKind) -> MockRowStore {
        let mut store = MockRowStore::new();
        store.expect_read_row().times(1).returning(move |_| {
            Ok(status_answer(
                None,
                vec![(
                    ts,
                    WriteRecord {
                        kind,
                        start_ts: START,
                    },
                )],
            ))
        });
        store
            .expect_mutate_rows()
            .times(1)
            .returning(|_| Ok(vec![MutationOutcome::Applied]));
        store
    }

    #[tokio::test]
    async fn committed_primary_is_read_not_written() {
        let mut store = MockRowStore::new();
        store.expect_read_row().times(1).returning(|_| {
            Ok(status_answer(
                None,
                vec![
                    (
                        25,
                        WriteRecord {
                            kind: WriteKind::Put,
                            start_ts: 12,
                        },
                    ),
                    (
                        20,
                        WriteRecord {
                            kind: WriteKind::Put,
                            start_ts: START,
                        },
                    ),
                ],
            ))
        });
        store.expect_mutate_rows().times(0);
        let mut liveness = MockLiveness::new();
        liveness.expect_is_alive().times(0);
        let status = inner(store, liveness)
            .check_status(&primary(), START, true)
            .await
            .unwrap();
        assert_eq!(status, TxnStatus::Committed { commit_ts: 20 });
    }

    #[tokio::test]
    async fn live_owner_within_ttl_is_left_alone() {
        let held = lock(NOW_MS, 60_000);
        let mut store = MockRowStore::new();
        let answer = status_answer(Some(&held), vec![]);
        store
            .expect_read_row()
            .times(1)
            .returning(move |_| Ok(answer.clone()));
        store.expect_mutate_rows().times(0);
        let mut liveness = MockLiveness::new();
        liveness
            .expect_is_alive()
            .with(eq(7), oracle_now())
            .times(1)
            .returning(|_, _| Ok(true));
        let status = inner(store, liveness)
            .check_status(&primary(), START, true)
            .await
            .unwrap();
        assert_eq!(status, TxnStatus::Locked { lock: held });
    }

    fn expect_rollback_of(store: &mut MockRowStore, held: &LockRecord) {
        let lock_bytes = held.encode();
        store.expect_mutate_rows().times(1).returning(move |batch| {
            assert_eq!(batch.len(), 1);
            let item = &batch[0];
            assert_eq!(
                item.conditions,
                vec![Condition::Equals {
                    family: Family::Lock,
                    column: Bytes::from("c"),
                    ts: START,
                    value: lock_bytes.clone()
                }],
                "a primary is rolled back only if its lock is exactly the one inspected"
            );
            assert!(
                item.mutations.contains(&Mutation::Put {
                    family: Family::Write,
                    column: Bytes::from("c"),
                    ts: START,
                    value: WriteRecord {
                        kind: WriteKind::Rollback,
                        start_ts: START
                    }
                    .encode(),
                }),
                "rollback record missing"
            );
            assert!(item.mutations.contains(&Mutation::Delete {
                family: Family::Lock,
                column: Bytes::from("c"),
                ts: START
            }));
            Ok(vec![MutationOutcome::Applied])
        });
    }

    #[tokio::test]
    async fn dead_owner_is_rolled_back_before_ttl() {
        let held = lock(NOW_MS, 60_000);
        let mut store = MockRowStore::new();
        let answer = status_answer(Some(&held), vec![]);
        store
            .expect_read_row()
            .times(1)
            .returning(move |_| Ok(answer.clone()));
        expect_rollback_of(&mut store, &held);
        let mut liveness = MockLiveness::new();
        liveness
            .expect_is_alive()
            .with(eq(7), oracle_now())
            .times(1)
            .returning(|_, _| Ok(false));
        let inner = inner(store, liveness);
        let status = inner.check_status(&primary(), START, true).await.unwrap();
        assert_eq!(status, TxnStatus::RolledBack);
        assert_eq!(inner.metrics.snapshot().locks_rolled_back, 1);
    }

    #[tokio::test]
    async fn a_lock_of_an_aborted_transaction_is_cleaned_up_not_rolled_back() {
        // The owner fenced its primary after a conflict; a reader meets one of its secondaries.
        let store = store_resolving(START, WriteKind::Rollback);
        let mut liveness = MockLiveness::new();
        liveness.expect_is_alive().times(0);
        let inner = inner(store, liveness);
        let secondary = CellAddr::new("t", "other-row", "c");
        let gone = inner
            .resolve_lock(&secondary, START, &lock(NOW_MS, 60_000))
            .await
            .unwrap();
        assert!(gone);
        let metrics = inner.metrics.snapshot();
        assert_eq!(
            (metrics.locks_rolled_back, metrics.locks_cleaned_up),
            (0, 1)
        );
    }

    /// A secondary lock whose primary committed is rolled forward; it counts as a live
    /// worker's only when its owner's TTL and lease both held.
    #[tokio::test]
    async fn roll_forward_of_a_live_owner_is_counted_apart() {
        for (ttl_ms, alive, of_live) in [(60_000, true, 1), (60_000, false, 0), (5, true, 0)] {
            let store = store_resolving(20, WriteKind::Put);
            let mut liveness = MockLiveness::new();
            liveness
                .expect_is_alive()
                .with(mockall::predicate::eq(7), oracle_now())
                .times(usize::from(ttl_ms > 5))
                .returning(move |_, _| Ok(alive));
            let inner = inner(store, liveness);
            let secondary = CellAddr::new("t", "other-row", "c");
            let held = if ttl_ms > 5 {
                lock(NOW_MS, ttl_ms)
            } else {
                lock(1_000, ttl_ms) // long expired
            };
            assert!(inner.resolve_lock(&secondary, START, &held).await.unwrap());
            let metrics = inner.metrics.snapshot();
            assert_eq!(
                (
                    metrics.locks_rolled_forward,
                    metrics.locks_rolled_forward_of_live
                ),
                (1, of_live),
                "ttl {ttl_ms} ms, owner alive: {alive}"
            );
        }
    }

    #[tokio::test]
    async fn expired_lock_is_rolled_back_without_asking_liveness() {
        let held = lock(1_000, 5);
        let mut store = MockRowStore::new();
        let answer = status_answer(Some(&held), vec![]);
        store
            .expect_read_row()
            .times(1)
            .returning(move |_| Ok(answer.clone()));
        expect_rollback_of(&mut store, &held);
        let mut liveness = MockLiveness::new();
        liveness.expect_is_alive().times(0);
        let status = inner(store, liveness)
            .check_status(&primary(), START, true)
            .await
            .unwrap();
        assert_eq!(status, TxnStatus::RolledBack);
    }

    #[tokio::test]
    async fn lost_race_to_a_heartbeat_rereads() {
        let held = lock(1_000, 5);
        let refreshed = lock(NOW_MS, 60_000);
        let mut store = MockRowStore::new();
        let mut seq = mockall::Sequence::new();
        let first = status_answer(Some(&held), vec![]);
        store
            .expect_read_row()
            .times(1)
            .in_sequence(&mut seq)
            .returning(move |_| Ok(first.clone()));
        store
            .expect_mutate_rows()
            .times(1)
            .in_sequence(&mut seq)
            .returning(|_| Ok(vec![MutationOutcome::ConditionFailed { condition: 0 }]));
        let second = status_answer(Some(&refreshed), vec![]);
        store
            .expect_read_row()
            .times(1)
            .in_sequence(&mut seq)
            .returning(move |_| Ok(second.clone()));
        let mut liveness = MockLiveness::new();
        liveness.expect_is_alive().returning(|_, _| Ok(true));
        let status = inner(store, liveness)
            .check_status(&primary(), START, true)
            .await
            .unwrap();
        assert_eq!(status, TxnStatus::Locked { lock: refreshed });
    }

    #[tokio::test]
    async fn missing_primary_is_fenced_with_a_rollback_record() {
        let mut store = MockRowStore::new();
        store
            .expect_read_row()
            .times(1)
            .returning(|_| Ok(status_answer(None, vec![])));
        store.expect_mutate_rows().times(1).returning(|batch| {
            assert_eq!(
                batch[0].conditions,
                vec![Condition::Absent {
                    family: Family::Lock,
                    column: Bytes::from("c"),
                    ts: crate::store::TsRange::at(START)
                }]
            );
            assert!(matches!(
                &batch[0].mutations[..],
                [Mutation::Put {
                    family: Family::Write,
                    ts: START,
                    ..
                }]
            ));
            Ok(vec![MutationOutcome::Applied])
        });
        let status = inner(store, MockLiveness::new())
            .check_status(&primary(), START, true)
            .await
            .unwrap();
        assert_eq!(status, TxnStatus::RolledBack);
    }
}
