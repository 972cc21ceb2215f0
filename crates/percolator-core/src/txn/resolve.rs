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
//! - neither: the primary was never locked (or its prewrite is still in flight); a rollback record
//!   is written there so that the late prewrite can never succeed (TiKV #921-style races).
//!
//! Rollback records are never deleted here: they are what makes a late prewrite fail.

use crate::error::{Error, Result};
use crate::liveness::now_ms;
use crate::records::{CellAddr, LockRecord, WriteKind, WriteRecord};
use crate::store::RowStore;

use super::ClientInner;
use super::layout;

/// What the primary says about a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnStatus {
    /// Committed at this timestamp.
    Committed {
        /// The commit timestamp.
        commit_ts: u64,
    },
    /// Rolled back (or never got past prewrite and is now fenced off).
    RolledBack,
    /// Still locked by a live owner within its TTL.
    Locked {
        /// The primary lock.
        lock: LockRecord,
    },
}

/// How many times a status check re-reads after losing a race before giving up.
const STATUS_ATTEMPTS: usize = 16;

impl<S: RowStore> ClientInner<S> {
    /// Whether a lock may be cleaned up: its owner's lease is gone or its TTL has run out.
    pub(crate) async fn may_clean(&self, lock: &LockRecord) -> Result<bool> {
        if lock.expired(now_ms()) {
            return Ok(true);
        }
        Ok(!self.liveness.is_alive(lock.owner).await?)
    }

    /// Reads the status of transaction `start_ts` at its primary. With `clean`, a dead or expired
    /// primary lock — or a missing one — is rolled back so that the answer is final.
    pub(crate) async fn check_status(
        &self,
        primary: &CellAddr,
        start_ts: u64,
        clean: bool,
    ) -> Result<TxnStatus> {
        for _ in 0..STATUS_ATTEMPTS {
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
                    return Ok(TxnStatus::RolledBack);
                }
                continue; // refreshed or committed meanwhile: look again
            }
            if !clean {
                return Ok(TxnStatus::RolledBack);
            }
            let outcome = self
                .store
                .mutate_rows(vec![layout::rollback_absent(primary, start_ts)])
                .await?;
            if outcome.first().is_some_and(|o| o.applied()) {
                return Ok(TxnStatus::RolledBack);
            }
            // A prewrite landed between our read and our fence: look again.
        }
        Err(Error::Store(crate::error::StoreError::Unavailable(
            format!("status of transaction {start_ts} kept changing under {STATUS_ATTEMPTS} reads"),
        )))
    }

    /// Resolves the lock of transaction `start_ts` found at `addr`. Returns `false` if the owner
    /// is alive and within its TTL (the caller should wait), `true` once the lock is gone.
    pub(crate) async fn resolve_lock(
        &self,
        addr: &CellAddr,
        start_ts: u64,
        lock: &LockRecord,
    ) -> Result<bool> {
        match self.check_status(&lock.primary, start_ts, true).await? {
            TxnStatus::Committed { commit_ts } => {
                self.store
                    .mutate_rows(vec![layout::roll_forward(
                        addr, start_ts, commit_ts, lock.kind,
                    )])
                    .await?;
                self.metrics.rolled_forward();
                Ok(true)
            }
            TxnStatus::RolledBack => {
                if *addr != lock.primary {
                    self.store
                        .mutate_rows(vec![layout::rollback_locked(addr, start_ts)])
                        .await?;
                }
                self.metrics.rolled_back();
                Ok(true)
            }
            TxnStatus::Locked { .. } => Ok(false),
        }
    }
}
