//! One-phase commit of a single-row transaction.
//!
//! A transaction that writes one row needs no primary and no lock: its data and write records
//! can go in together, in one conditional row mutation at a commit timestamp taken first. That
//! halves the store work of the commonest small transaction (paper §3.2 names the extra round
//! trips of two-phase commit as the main cost of a Percolator write; TiKV commits single-region
//! transactions the same way). Values of up to [`SHORT_VALUE_MAX`] bytes ride inline in their
//! write records (TiKV's short values), so a one-cell commit writes one cell, not two.
//!
//! [`SHORT_VALUE_MAX`]: crate::records::SHORT_VALUE_MAX
//!
//! What the lock does in two-phase commit is stop a reader whose start timestamp is after our
//! commit timestamp but who reads the row before our write lands: it finds the lock and waits.
//! Without a lock it would miss a write that belongs in its snapshot. Stores that track snapshot
//! reads ([`crate::store::StoreLimits::tracks_snapshot_reads`]) close that gap: the mutation is
//! conditional on [`Condition::NoSnapshotReadSince`] the commit timestamp, so it applies only if
//! no such reader has been admitted, and every reader admitted after it sees it. The other
//! conditions are the prewrite's — no write record at or after start_ts, no lock — so write-write
//! conflicts are caught exactly as in two-phase commit, and a rollback record at start_ts (a
//! cleaner's fence) blocks it too.
//!
//! The notify cells go in with the commit, so their value names the commit timestamp as well
//! as the writer ([`NotifyRecord::committed_at`]): a run that consumes one knows without a
//! status read whether its snapshot covers the change, in any process and after a restart
//! (otherwise an index run would read the status of every page the loader wrote).
//!
//! The attempt never decides a failure by itself: on any failed condition it falls back to
//! two-phase commit, which resolves dead locks, reports conflicts and takes a fresh commit
//! timestamp. An unknown outcome (`Unavailable`) is retried and settled by reading our write
//! record back; stores that track snapshot reads are in-process, so a call that returned has
//! finished and cannot land later.
//!
//! ## Several rows
//! A store that can apply mutations of several rows all or nothing
//! ([`crate::StoreLimits::max_atomic_rows`]: the embedded stores, whose write batches are atomic
//! across keys) commits a transaction of up to that many rows the same way: one row mutation
//! per row — the prewrite's conditions, "no snapshot read since", write records and notify
//! cells — in one [`crate::RowStore::mutate_rows_atomically`] call, with the weak notifications
//! of rows it does not write alongside. Every argument above holds row by row, and the store
//! makes the rows visible together: a reader admitted after the check finds every row latched
//! or written. So a document that writes anchors into sixty link targets costs one store call
//! and no lock per cell instead of a lock written and removed on each of sixty-one rows in
//! three rounds.
//!
//! [`Condition::NoSnapshotReadSince`]: crate::store::Condition::NoSnapshotReadSince

use bytes::Bytes;

use crate::error::{Error, Result, StoreError};
use crate::records::{CellAddr, NotifyRecord, WriteRecord};
use crate::store::{
    AtomicOutcome, Columns, Family, FamilyRead, MutationOutcome, ReadRow, RowMutation, RowStore,
    TsRange,
};

use super::Client;
use super::commit::{AMBIGUOUS_ATTEMPTS, RowWrites};
use super::fault::{CommitStep, Faults};
use super::layout;

impl<S: RowStore> Client<S> {
    /// Whether a transaction writing `rows` rows (and notifying `notify_only` rows it does not
    /// write) may try a one-phase commit: one row, or as many rows as the store applies all or
    /// nothing.
    pub(super) fn one_phase_eligible(
        &self,
        rows: usize,
        notify_only: usize,
        faults: &Faults,
    ) -> bool {
        let limits = self.inner.store.limits();
        let fits = (rows == 1 && notify_only == 0)
            || (rows >= 1 && rows.saturating_add(notify_only) <= limits.max_atomic_rows);
        fits && self.config().one_phase_commit
            && faults.allow_one_phase()
            && limits.tracks_snapshot_reads
    }

    /// Tries to commit `rows` (the first is the primary) and the notifications of
    /// `notify_only` in one step. `Ok(Some(commit_ts))`: committed. `Ok(None)`: nothing of ours
    /// is in the store; commit in two phases instead. `primary` is the writer the notify cells
    /// name (`None` if the transaction notifies nothing); they also name the commit timestamp,
    /// since they go in only with the commit ([`NotifyRecord::committed_at`]).
    pub(super) async fn try_one_phase(
        &self,
        rows: &[RowWrites],
        notify_only: &[CellAddr],
        start_ts: u64,
        primary: Option<&CellAddr>,
        faults: &Faults,
    ) -> Result<Option<u64>> {
        let Some(row) = rows.first() else {
            return Ok(None);
        };
        self.inner.check_snapshot(start_ts)?;
        let commit_ts = self.inner.timestamp().await?;
        faults.at(CommitStep::BeforeCommitPoint, start_ts).await?;
        let notify_value = primary.map_or_else(Bytes::new, |primary| {
            NotifyRecord {
                writer: Some(primary.clone()),
                committed_at: Some(commit_ts),
            }
            .encode()
        });
        let notify_value = &notify_value;
        let mut batch: Vec<RowMutation> = rows
            .iter()
            .map(|r| {
                layout::one_phase(
                    &r.table,
                    &r.row,
                    &r.columns,
                    &r.notify,
                    notify_value,
                    start_ts,
                    commit_ts,
                )
            })
            .collect();
        batch.extend(layout::notify_rows(notify_only, start_ts, notify_value));
        let mut ambiguous = None;
        for _ in 0..AMBIGUOUS_ATTEMPTS {
            let applied = if batch.len() == 1 {
                self.inner
                    .store
                    .mutate_rows(batch.clone())
                    .await
                    .map(|outcome| outcome.first() == Some(&MutationOutcome::Applied))
            } else {
                self.inner
                    .store
                    .mutate_rows_atomically(batch.clone())
                    .await
                    .map(|outcome| outcome == AtomicOutcome::Applied)
            };
            match applied {
                Ok(true) => {
                    self.inner.metrics.one_phase(true);
                    return Ok(Some(commit_ts));
                }
                Ok(false) => {
                    self.inner.metrics.one_phase(false);
                    break;
                }
                Err(e @ StoreError::Unavailable(_)) => ambiguous = Some(e),
                Err(e) => return Err(e.into()),
            }
        }
        let Some(error) = ambiguous else {
            return Ok(None); // a condition failed on the first try: nothing was written
        };
        // An attempt's answer was lost: our write record tells whether one applied (on the
        // first row, which stands for all: they apply together). Its first column stands for
        // the primary: `Client::settle` reads its write records.
        let primary = Box::new(CellAddr {
            table: row.table.clone(),
            row: row.row.clone(),
            column: row
                .columns
                .first()
                .map(|(c, _)| c.clone())
                .unwrap_or_default(),
        });
        match self.committed_at(row, start_ts, commit_ts).await {
            Ok(true) => Ok(Some(commit_ts)),
            Ok(false) => Ok(None),
            Err(Error::Store(source)) => Err(Error::CommitUndetermined {
                start_ts,
                primary,
                source,
            }),
            Err(_) => Err(Error::CommitUndetermined {
                start_ts,
                primary,
                source: error,
            }),
        }
    }

    /// Whether the first column of `row` has our write record at `commit_ts`.
    async fn committed_at(&self, row: &RowWrites, start_ts: u64, commit_ts: u64) -> Result<bool> {
        let Some((column, _)) = row.columns.first() else {
            return Ok(false);
        };
        let answer = self
            .inner
            .store
            .read_row(ReadRow {
                table: row.table.clone(),
                row: row.row.clone(),
                reads: vec![
                    FamilyRead::all(Family::Write)
                        .columns(Columns::one(column.clone()))
                        .ts(TsRange::at(commit_ts)),
                ],
                snapshot_ts: None,
            })
            .await?;
        for cell in answer.iter().flatten() {
            if WriteRecord::decode(&cell.value)?.start_ts == start_ts {
                return Ok(true);
            }
        }
        Ok(false)
    }
}
