//! Two-phase commit (paper Figure 6, `Prewrite` and `Commit`).
//!
//! 1. **Prewrite every row** in one batch (`TxnConfig::parallel_prewrite`, the default), or the
//!    primary row first and then every secondary row in one batch (the paper's order): per
//!    column, no write record at or after start_ts and no lock at all; then data and lock at
//!    start_ts. A lock left
//!    by a dead or expired transaction is resolved and the prewrite retried; a live one is a
//!    conflict. Our own lock (a retried request whose first answer was lost) counts as success.
//! 2. Take the **commit timestamp**.
//! 3. **Commit the primary row** — write records at commit_ts, locks removed, conditional on our
//!    primary lock still being there. This single-row mutation is the commit point. If its answer
//!    is lost, the primary is read back to learn the outcome.
//! 4. **Commit the secondaries** in one batch, by default in a background task after `commit`
//!    has returned (`background.rs`). Failures here do not matter: readers roll the remaining
//!    locks forward through the primary.
//!
//! A transaction that writes a single row first tries a one-phase commit (`one_phase.rs`) on
//! stores that support it, and comes here only if that attempt finds anything in its way.
//!
//! Notifications (paper §2.4) ride on the prewrite: a row mutation that writes a strongly
//! observed column also writes its notify cell, and the transaction's weak notifications go into
//! the prewrite of their row (or, for rows the transaction does not write, into one more batch
//! before the commit timestamp is taken). So no crash after the commit point can lose one; a
//! notification of a transaction that then aborts only makes an observer look and find nothing.
//!
//! While the commit runs, a heartbeat refreshes the wall time in the primary lock so that a
//! long commit is not mistaken for a dead one. Every step boundary is a [`CommitStep`] checkpoint
//! (`faults.at(step)`) at which, with feature `fault-injection`, a test hook may stop the commit
//! as if the process had died there; without the feature the checkpoints do nothing.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use futures::FutureExt as _;

use crate::error::{Error, Result, StoreError};
use crate::records::{CellAddr, LockRecord, NotifyRecord, WriteKind, WriteRecord};
use crate::store::{
    Columns, Family, FamilyRead, MutationOutcome, ReadRow, RowMutation, RowStore, TsRange,
};

use super::fault::{CommitStep, Faults};
use super::layout::{self, ColumnWrite, PrewriteConflict};
use super::resolve::TxnStatus;
use super::{Client, CommitInfo};

/// Buffered writes of one row, and the notify cells its prewrite sets.
pub(super) struct RowWrites {
    pub(super) table: Bytes,
    pub(super) row: Bytes,
    pub(super) columns: Vec<ColumnWrite>,
    pub(super) notify: Vec<Bytes>,
}

impl RowWrites {
    fn commits(&self) -> Vec<layout::CommitColumn> {
        self.columns
            .iter()
            .map(|(c, v)| layout::CommitColumn::of(c, v))
            .collect()
    }

    fn addrs(&self) -> impl Iterator<Item = CellAddr> + '_ {
        self.columns.iter().map(|(c, _)| CellAddr {
            table: self.table.clone(),
            row: self.row.clone(),
            column: c.clone(),
        })
    }
}

/// Rows prewritten in the primary's batch with parallel prewrite: the batch runs before the
/// primary's heartbeat starts, so it is kept short enough to land well within one lock TTL.
const PARALLEL_PREWRITE_ROWS: usize = 64;
/// How many times one row's prewrite is retried after resolving a dead lock in its way.
const PREWRITE_ATTEMPTS: usize = 3;
/// How many times a store call with an unknown outcome is retried during commit.
pub(super) const AMBIGUOUS_ATTEMPTS: usize = 3;

impl<S: RowStore> Client<S> {
    pub(crate) async fn commit_writes(
        &self,
        start_ts: u64,
        writes: BTreeMap<CellAddr, Option<Bytes>>,
        mut notifies: BTreeSet<CellAddr>,
        faults: Faults,
    ) -> Result<CommitInfo> {
        let cells = writes.len();
        let mut rows: Vec<RowWrites> = Vec::new();
        for (addr, value) in writes {
            // A written column is notified if it is strongly observed or the transaction asked
            // for a weak notification of it.
            let notify =
                notifies.remove(&addr) | self.inner.is_strongly_observed(&addr.table, &addr.column);
            let same_row = rows
                .last()
                .is_some_and(|last| last.table == addr.table && last.row == addr.row);
            if !same_row {
                rows.push(RowWrites {
                    table: addr.table.clone(),
                    row: addr.row.clone(),
                    columns: Vec::new(),
                    notify: Vec::new(),
                });
            }
            if let Some(row) = rows.last_mut() {
                if notify {
                    row.notify.push(addr.column.clone());
                }
                row.columns.push((addr.column, value));
            }
        }
        // Weak notifications on rows this transaction writes go into that row's prewrite.
        let mut notify_only: Vec<CellAddr> = Vec::new();
        for addr in notifies {
            match rows
                .iter_mut()
                .find(|r| r.table == addr.table && r.row == addr.row)
            {
                Some(row) => row.notify.push(addr.column),
                None => notify_only.push(addr),
            }
        }
        let Some(primary_row) = rows.first() else {
            // Nothing written: the notifications need no writer to wait for.
            self.write_notifications(
                &notify_only,
                start_ts,
                &NotifyRecord {
                    writer: None,
                    committed_at: None,
                },
            )
            .await?;
            return Ok(CommitInfo {
                start_ts,
                commit_ts: None,
                rows: 0,
                cells: 0,
            });
        };
        let row_count = rows.len();
        let limits = self.inner.store.limits();
        let max_rows = limits.max_batch_rows;
        if row_count > max_rows || notify_only.len() > max_rows {
            // Checked before anything is locked: the secondary batches could not be sent.
            return Err(Error::TooLarge {
                what: "rows written or notified by one transaction",
                size: row_count.max(notify_only.len()),
                limit: max_rows,
            });
        }
        // A row's prewrite checks two conditions per column (three counting one phase's) and puts
        // data, lock and notify cells: a store that caps operations per row mutation (etcd's
        // `--max-txn-ops`) must be able to take every row before any lock is written.
        let max_row_ops = limits.max_row_ops;
        if let Some(row) = rows.iter().find(|r| prewrite_ops(r) > max_row_ops) {
            return Err(Error::TooLarge {
                what: "store operations of one row's prewrite (2 per written column, plus notifications)",
                size: prewrite_ops(row),
                limit: max_row_ops,
            });
        }
        let primary = CellAddr {
            table: primary_row.table.clone(),
            row: primary_row.row.clone(),
            column: primary_row.columns[0].0.clone(),
        };
        let lock = LockRecord {
            kind: WriteKind::Put,
            primary: primary.clone(),
            owner: self.inner.worker_id,
            oracle_ms: self.inner.clock.now_ms(),
            ttl_ms: u64::try_from(self.config().lock_ttl.as_millis()).unwrap_or(u64::MAX),
            value: None,
        };
        let notify_record = NotifyRecord {
            writer: Some(primary.clone()),
            committed_at: None,
        };
        let notifies = !notify_only.is_empty() || rows.iter().any(|r| !r.notify.is_empty());

        faults.at(CommitStep::BeforePrewrite, start_ts).await?;
        if self.one_phase_eligible(row_count, notify_only.len(), &faults)
            && let Some(commit_ts) = self
                .try_one_phase(
                    &rows,
                    &notify_only,
                    start_ts,
                    notifies.then_some(&primary),
                    &faults,
                )
                .await?
        {
            return self
                .after_commit_point(&primary, start_ts, commit_ts, Vec::new(), &faults, cells)
                .await;
        }
        // Encoded only for two phases (a one-phase commit names its commit timestamp too), and
        // only if some cell is notified (most transactions notify nothing).
        let notify_value = if notifies {
            notify_record.encode()
        } else {
            Bytes::new()
        };
        // The rows prewritten before the heartbeat starts: the primary alone (the paper's order,
        // which lets a commit stop with only its primary locked), or the primary with up to
        // `PARALLEL_PREWRITE_ROWS - 1` secondaries in one batch; a larger transaction prewrites
        // the rest while the heartbeat keeps its primary alive.
        let parallel = self.config().parallel_prewrite;
        let first = if parallel {
            rows.len().min(PARALLEL_PREWRITE_ROWS)
        } else {
            1
        };
        if let Err(e) = self
            .prewrite_rows(&rows[..first], start_ts, &lock, &notify_value)
            .await
        {
            if first > 1 {
                // Some secondaries may be locked though the primary is not.
                self.abort_prewritten(&rows, start_ts).await;
            }
            if matches!(e, Error::Conflict { .. }) {
                self.inner.metrics.conflicted();
            }
            return Err(e);
        }
        if !parallel {
            faults
                .at(CommitStep::AfterPrimaryPrewrite, start_ts)
                .await?;
        }
        // The primary's lock as prewritten (kind and short value), for the heartbeat to rewrite.
        let primary_commit = layout::CommitColumn::of(&primary.column, &primary_row.columns[0].1);
        let primary_lock = LockRecord {
            kind: primary_commit.kind,
            value: primary_commit.inline,
            ..lock.clone()
        };
        // From here to the commit point the primary lock must look alive even if the commit is
        // slow. A commit that completes without waiting needs no heartbeat (no task is spawned).
        let to_commit_point = async {
            if let Err(e) = self
                .prewrite_rows(&rows[first..], start_ts, &lock, &notify_value)
                .await
            {
                self.abort_prewritten(&rows, start_ts).await;
                if matches!(e, Error::Conflict { .. }) {
                    self.inner.metrics.conflicted();
                }
                return Err(e);
            }
            if let Err(e) = self
                .write_notifications(&notify_only, start_ts, &notify_record)
                .await
            {
                self.abort_prewritten(&rows, start_ts).await;
                return Err(e);
            }
            faults.at(CommitStep::AfterPrewrites, start_ts).await?;
            let commit_ts = self.inner.timestamp().await?;
            faults.at(CommitStep::BeforeCommitPoint, start_ts).await?;
            self.commit_primary(&rows[0], &primary, start_ts, commit_ts)
                .await?;
            Ok(commit_ts)
        };
        let commit_ts = self
            .with_heartbeat(&primary, start_ts, primary_lock, to_commit_point)
            .await?;
        let secondaries = rows.split_off(1);
        self.after_commit_point(&primary, start_ts, commit_ts, secondaries, &faults, cells)
            .await
    }

    /// Everything after the commit point: the optional sync, then the secondaries (none for a
    /// one-phase commit), committed before returning or handed to a background task
    /// ([`super::TxnConfig::background_secondaries`]).
    pub(super) async fn after_commit_point(
        &self,
        primary: &CellAddr,
        start_ts: u64,
        commit_ts: u64,
        secondaries: Vec<RowWrites>,
        faults: &Faults,
        cells: usize,
    ) -> Result<CommitInfo> {
        // Final from here on: clearing this transaction's notifications, or rolling one of its
        // secondaries forward, needs no status read.
        self.inner
            .recent_commits
            .record(primary, start_ts, commit_ts);
        if self.config().durable_commits
            && let Err(source) = self.inner.store.sync().await
        {
            // Past the commit point nothing may report failure-and-retry.
            return Err(Error::CommittedNotDurable { commit_ts, source });
        }
        faults.at(CommitStep::AfterCommitPoint, start_ts).await?;
        let info = CommitInfo {
            start_ts,
            commit_ts: Some(commit_ts),
            rows: secondaries.len() + 1,
            cells,
        };
        if !secondaries.is_empty() && self.config().background_secondaries {
            // No slot once the client is shut down: then the secondaries are committed here.
            if let Some(slot) = self.inner.background.slot().await {
                let client = self.clone();
                let faults = faults.clone();
                tokio::spawn(async move {
                    let _slot = slot;
                    // An injected crash here stops the task as a dying process would: the
                    // secondaries stay locked for readers to roll forward.
                    if faults.at(CommitStep::AfterReturn, start_ts).await.is_ok() {
                        let _ = client
                            .commit_secondaries_in_steps(&secondaries, start_ts, commit_ts, &faults)
                            .await;
                    }
                });
                self.inner.metrics.committed();
                return Ok(info);
            }
        }
        self.commit_secondaries_in_steps(&secondaries, start_ts, commit_ts, faults)
            .await?;
        self.inner.metrics.committed();
        Ok(info)
    }

    /// Commits the secondary rows: in two halves with the [`CommitStep::AfterHalfSecondaries`]
    /// checkpoint between them while a hook is installed, else in one batch.
    async fn commit_secondaries_in_steps(
        &self,
        secondaries: &[RowWrites],
        start_ts: u64,
        commit_ts: u64,
        faults: &Faults,
    ) -> Result<()> {
        if faults.installed() && secondaries.len() >= 2 {
            let (first, second) = secondaries.split_at(secondaries.len() / 2);
            self.commit_secondaries(first, start_ts, commit_ts).await;
            faults
                .at(CommitStep::AfterHalfSecondaries, start_ts)
                .await?;
            self.commit_secondaries(second, start_ts, commit_ts).await;
        } else {
            self.commit_secondaries(secondaries, start_ts, commit_ts)
                .await;
        }
        Ok(())
    }

    /// Prewrites `rows` in one batch, then settles each row that did not apply.
    async fn prewrite_rows(
        &self,
        rows: &[RowWrites],
        start_ts: u64,
        lock: &LockRecord,
        notify_value: &Bytes,
    ) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        // A prewrite below the safe point could land where GC deleted the rollback record
        // that would have stopped it.
        self.inner.check_snapshot(start_ts)?;
        let batch: Vec<RowMutation> = rows
            .iter()
            .map(|r| prewrite_of(r, start_ts, lock, notify_value))
            .collect();
        let outcomes = match self.inner.store.mutate_rows(batch).await {
            Ok(outcomes) => outcomes.into_iter().map(Some).collect(),
            // Unknown outcome: settle every row one by one (prewrites are idempotent).
            Err(StoreError::Unavailable(_)) => vec![None; rows.len()],
            Err(e) => return Err(e.into()),
        };
        for (row, outcome) in rows.iter().zip(outcomes) {
            if outcome != Some(MutationOutcome::Applied) {
                self.settle_prewrite(row, start_ts, lock, notify_value, outcome)
                    .await?;
            }
        }
        Ok(())
    }

    /// Re-tries one row's prewrite until it is ours, resolving dead locks in the way.
    async fn settle_prewrite(
        &self,
        row: &RowWrites,
        start_ts: u64,
        lock: &LockRecord,
        notify_value: &Bytes,
        mut outcome: Option<MutationOutcome>,
    ) -> Result<()> {
        for _ in 0..PREWRITE_ATTEMPTS {
            match outcome {
                Some(MutationOutcome::Applied) => return Ok(()),
                Some(MutationOutcome::ConditionFailed { condition }) => {
                    match layout::prewrite_conflict(&row.columns, condition) {
                        PrewriteConflict::NewerWrite(column) => {
                            return Err(self.newer_write_error(row, &column, start_ts).await);
                        }
                        PrewriteConflict::Locked(column) => {
                            let addr = CellAddr {
                                table: row.table.clone(),
                                row: row.row.clone(),
                                column,
                            };
                            if !self.clear_foreign_lock(&addr, start_ts).await? {
                                // Our own lock: an earlier attempt of this very prewrite applied
                                // (prewrite mutations are atomic per row).
                                return Ok(());
                            }
                        }
                    }
                }
                None => {
                    if self.row_prewritten_by(row, start_ts).await? {
                        return Ok(());
                    }
                }
            }
            let batch = vec![prewrite_of(row, start_ts, lock, notify_value)];
            outcome = match self.inner.store.mutate_rows(batch).await {
                Ok(o) => o.first().copied(),
                Err(StoreError::Unavailable(_)) => None,
                Err(e) => return Err(e.into()),
            };
        }
        match outcome {
            Some(MutationOutcome::Applied) => Ok(()),
            Some(_) => Err(Error::conflict(
                &row.table,
                &row.row,
                &row.columns[0].0,
                "prewrite kept meeting locks",
            )),
            None => Err(Error::Store(StoreError::Unavailable(
                "prewrite outcome unknown after retries".into(),
            ))),
        }
    }

    /// Writes notify cells at `ts` on rows the transaction does not otherwise write. The puts are
    /// unconditional and idempotent, so an unknown outcome is simply sent again.
    async fn write_notifications(
        &self,
        addrs: &[CellAddr],
        ts: u64,
        record: &NotifyRecord,
    ) -> Result<()> {
        if addrs.is_empty() {
            return Ok(());
        }
        let batch = layout::notify_rows(addrs, ts, &record.encode());
        let mut last_error = None;
        for _ in 0..AMBIGUOUS_ATTEMPTS {
            match self.inner.store.mutate_rows(batch.clone()).await {
                Ok(_) => return Ok(()),
                Err(e @ StoreError::Unavailable(_)) => last_error = Some(e),
                Err(e) => return Err(e.into()),
            }
        }
        Err(Error::Store(last_error.unwrap_or_else(|| {
            StoreError::Unavailable("notification writes kept failing".into())
        })))
    }

    /// Whether the first column of `row` carries our lock (an ambiguous prewrite applied).
    async fn row_prewritten_by(&self, row: &RowWrites, start_ts: u64) -> Result<bool> {
        let answer = self
            .inner
            .store
            .read_row(ReadRow {
                snapshot_ts: None,
                table: row.table.clone(),
                row: row.row.clone(),
                reads: vec![
                    FamilyRead::all(Family::Lock)
                        .columns(Columns::one(row.columns[0].0.clone()))
                        .ts(TsRange::at(start_ts)),
                ],
            })
            .await?;
        Ok(answer.first().is_some_and(|cells| !cells.is_empty()))
    }

    /// Looks at the lock on `addr`. Returns `Ok(false)` if it is ours; resolves a foreign lock of
    /// a committed transaction, or a dead or expired one, and returns `Ok(true)` (retry the
    /// prewrite); a live foreign lock is a conflict.
    async fn clear_foreign_lock(&self, addr: &CellAddr, start_ts: u64) -> Result<bool> {
        let answer = self
            .inner
            .store
            .read_row(ReadRow {
                snapshot_ts: None,
                table: addr.table.clone(),
                row: addr.row.clone(),
                reads: vec![
                    FamilyRead::all(Family::Lock)
                        .columns(Columns::one(addr.column.clone()))
                        .max_versions(1),
                ],
            })
            .await?;
        let Some(cell) = answer.first().and_then(|c| c.first()) else {
            return Ok(true); // gone already
        };
        if cell.ts == start_ts {
            return Ok(false);
        }
        let record = LockRecord::decode(&cell.value)?;
        // A lock of a committed transaction is rolled forward whoever owns it: its owner may be
        // alive and still committing its secondaries in the background. One of a live,
        // uncommitted transaction is a conflict; a dead owner's is rolled back.
        if self.inner.resolve_lock(addr, cell.ts, &record).await? {
            return Ok(true);
        }
        Err(Error::conflict(
            &addr.table,
            &addr.row,
            &addr.column,
            "locked by another transaction",
        ))
    }

    /// The error for a write record at or after our start_ts: our own rollback record means a
    /// cleaner rolled us back; anything else is a write-write conflict.
    async fn newer_write_error(&self, row: &RowWrites, column: &Bytes, start_ts: u64) -> Error {
        let answer = self
            .inner
            .store
            .read_row(ReadRow {
                snapshot_ts: None,
                table: row.table.clone(),
                row: row.row.clone(),
                reads: vec![
                    FamilyRead::all(Family::Write)
                        .columns(Columns::one(column.clone()))
                        .ts(TsRange::at(start_ts)),
                ],
            })
            .await;
        let rolled_back = answer.ok().is_some_and(|a| {
            a.iter().flatten().any(|c| {
                WriteRecord::decode(&c.value)
                    .is_ok_and(|w| w.kind == WriteKind::Rollback && w.start_ts == start_ts)
            })
        });
        if rolled_back {
            Error::Aborted { start_ts }
        } else {
            Error::conflict(&row.table, &row.row, column, "newer write record")
        }
    }

    /// Rolls back every lock this transaction may hold: the primary first (which settles the
    /// transaction as aborted for every cleaner), then the rest. Best effort: whatever fails here
    /// is cleaned up lazily by readers.
    async fn abort_prewritten(&self, rows: &[RowWrites], start_ts: u64) {
        let mut addrs = rows.iter().flat_map(|r| r.addrs());
        if let Some(primary) = addrs.next() {
            // Fence the primary even if its lock is gone, so no late prewrite can revive us.
            let fence = vec![
                layout::rollback_locked(&primary, start_ts),
                layout::rollback_absent(&primary, start_ts),
            ];
            if let Err(e) = self.inner.store.mutate_rows(fence).await {
                tracing::warn!(start_ts, error = %e, "could not roll back primary");
                return;
            }
        }
        let rest: Vec<RowMutation> = addrs
            .map(|a| layout::rollback_locked(&a, start_ts))
            .collect();
        let max_rows = self.inner.store.limits().max_batch_rows.max(1);
        for chunk in rest.chunks(max_rows) {
            if let Err(e) = self.inner.store.mutate_rows(chunk.to_vec()).await {
                tracing::warn!(start_ts, error = %e, "could not roll back secondaries");
            }
        }
    }

    /// The commit point. Returns `Ok` once the primary's write records are known to be in place.
    async fn commit_primary(
        &self,
        row: &RowWrites,
        primary: &CellAddr,
        start_ts: u64,
        commit_ts: u64,
    ) -> Result<()> {
        let mutation = layout::commit(&row.table, &row.row, &row.commits(), start_ts, commit_ts);
        let mut last_error = None;
        for _ in 0..AMBIGUOUS_ATTEMPTS {
            match self.inner.store.mutate_rows(vec![mutation.clone()]).await {
                Ok(outcome) if outcome.first().is_some_and(|o| o.applied()) => return Ok(()),
                Ok(_) => {}
                Err(e @ StoreError::Unavailable(_)) => last_error = Some(e),
                Err(e) => {
                    return Err(Error::CommitUndetermined {
                        start_ts,
                        primary: Box::new(primary.clone()),
                        source: e,
                    });
                }
            }
            // Condition failed or answer lost: the primary tells what happened.
            match self.inner.check_status(primary, start_ts, false).await {
                Ok(TxnStatus::Committed { .. }) => return Ok(()),
                Ok(TxnStatus::RolledBack) => {
                    self.inner.metrics.aborted();
                    return Err(Error::Aborted { start_ts });
                }
                // Our lock is still there (or, unreachable while we hold it, nothing is): retry.
                Ok(TxnStatus::Locked { .. } | TxnStatus::NotFound) => {}
                Err(Error::Store(e)) => last_error = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(Error::CommitUndetermined {
            start_ts,
            primary: Box::new(primary.clone()),
            source: last_error
                .unwrap_or_else(|| StoreError::Unavailable("primary commit kept failing".into())),
        })
    }

    /// Commits secondary rows; failures are left to lazy roll-forward. A row whose commit finds
    /// one of its locks gone (a reader rolled that column forward first) is committed column by
    /// column, so its other columns are not left locked.
    async fn commit_secondaries(&self, rows: &[RowWrites], start_ts: u64, commit_ts: u64) {
        if rows.is_empty() {
            return;
        }
        let batch: Vec<RowMutation> = rows
            .iter()
            .map(|r| layout::commit(&r.table, &r.row, &r.commits(), start_ts, commit_ts))
            .collect();
        let outcomes = match self.inner.store.mutate_rows(batch).await {
            Ok(outcomes) => outcomes,
            Err(e) => {
                tracing::debug!(start_ts, error = %e, "secondary commit failed; readers will roll forward");
                return;
            }
        };
        let partly_resolved: Vec<&RowWrites> = rows
            .iter()
            .zip(outcomes)
            .filter(|(row, outcome)| !outcome.applied() && row.columns.len() > 1)
            .map(|(row, _)| row)
            .collect();
        // One column of each such row per batch, so that no batch names a row twice.
        let widest = partly_resolved.iter().map(|r| r.columns.len()).max();
        for column in 0..widest.unwrap_or(0) {
            let batch: Vec<RowMutation> = partly_resolved
                .iter()
                .filter_map(|r| {
                    let (name, value) = r.columns.get(column)?;
                    let commit = layout::CommitColumn::of(name, value);
                    Some(layout::commit(
                        &r.table,
                        &r.row,
                        &[commit],
                        start_ts,
                        commit_ts,
                    ))
                })
                .collect();
            if let Err(e) = self.inner.store.mutate_rows(batch).await {
                tracing::debug!(start_ts, error = %e, "secondary commit failed; readers will roll forward");
                return;
            }
        }
    }

    /// Runs `work` while keeping the primary lock's wall time fresh (paper §2.2: a worker that
    /// is alive and committing must not be mistaken for a dead one). The heartbeat runs in this
    /// task, beside `work`, and only if `work` has to wait at all; it stops when `work` finishes
    /// or is dropped (a "crashed" commit stops heartbeating).
    async fn with_heartbeat<T>(
        &self,
        primary: &CellAddr,
        start_ts: u64,
        lock: LockRecord,
        work: impl Future<Output = T>,
    ) -> T {
        let mut work = std::pin::pin!(work);
        if let Some(out) = (&mut work).now_or_never() {
            return out;
        }
        tokio::select! {
            biased;
            out = &mut work => return out,
            () = self.heartbeat(primary, start_ts, lock) => {}
        }
        work.await
    }

    /// Refreshes the primary lock every heartbeat interval until it is gone (committed or rolled
    /// back).
    async fn heartbeat(&self, primary: &CellAddr, start_ts: u64, mut lock: LockRecord) {
        let interval = self.config().heartbeat_interval();
        loop {
            tokio::time::sleep(interval).await;
            lock.oracle_ms = self.inner.clock.now_ms();
            let refreshed = self
                .inner
                .store
                .mutate_rows(vec![layout::refresh_lock(primary, start_ts, &lock)])
                .await;
            if let Ok(outcome) = refreshed
                && !outcome.first().is_some_and(|o| o.applied())
            {
                return;
            }
        }
    }
}

/// The larger of a row's prewrite condition count (with one phase's extra one) and mutation
/// count.
fn prewrite_ops(row: &RowWrites) -> usize {
    let columns = row.columns.len();
    (2 * columns + 1).max(2 * columns + row.notify.len())
}

fn prewrite_of(
    row: &RowWrites,
    start_ts: u64,
    lock: &LockRecord,
    notify_value: &Bytes,
) -> RowMutation {
    layout::prewrite(
        &row.table,
        &row.row,
        &row.columns,
        &row.notify,
        notify_value,
        start_ts,
        lock,
    )
}
