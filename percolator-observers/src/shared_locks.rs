//! Advisory row locks shared by the workers of a store (paper §2.4: "each worker acquires a
//! lock from a lightweight lock service before scanning the row").
//!
//! [`RowLocks`](crate::RowLocks) keeps one worker's scanners off each other's rows; a
//! [`SharedRowLocks`] service (`percolator-lock-service` serves one over TCP) keeps *workers*
//! apart. It is one of two ways to divide the dirty rows among workers, the other being
//! partitioned scanning (`partition`); a runtime may use either, both or neither.
//!
//! Correctness never depends on it: the ack column and the transaction protocol make a change
//! commit once however many workers run it. So the service keeps nothing durable, a worker that
//! cannot reach it runs the row anyway (fail open: waste, never a stall), and a lock lost to a
//! restart or an expiry only lets two workers collide, as they would without the service.

use std::fmt::Debug;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;

/// The answer for one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SharedLockAnswer {
    /// This worker holds the row's lock now; release it with [`SharedRowLocks::unlock`].
    Granted,
    /// Another worker holds it: leave the row to that worker.
    HeldElsewhere,
    /// The service could not answer (unreachable, restarting, the request too large): run the
    /// row without the lock.
    Unavailable,
}

/// An advisory lock service shared by the workers of a store.
#[async_trait]
pub trait SharedRowLocks: Debug + Send + Sync + 'static {
    /// Tries to lock each `(table, row)` for this worker, answering in order. Asking for many
    /// rows at once costs one round trip; implementations also batch concurrent callers.
    async fn try_lock_many(&self, rows: &[(Bytes, Bytes)]) -> Vec<SharedLockAnswer>;

    /// Releases a lock [`Self::try_lock_many`] granted. Does not wait: a release that never
    /// arrives (the service restarted, the connection was cut) is covered by the service's
    /// expiry and by its releasing a connection's locks when the connection ends.
    fn unlock(&self, table: Bytes, row: Bytes);
}

/// Releases a granted shared lock when dropped.
#[derive(Debug)]
pub(crate) struct SharedLockGuard {
    locks: Arc<dyn SharedRowLocks>,
    key: Option<(Bytes, Bytes)>,
}

impl SharedLockGuard {
    /// A guard for a lock `locks` granted on `table`/`row`.
    pub(crate) fn new(locks: Arc<dyn SharedRowLocks>, table: Bytes, row: Bytes) -> Self {
        Self {
            locks,
            key: Some((table, row)),
        }
    }
}

impl Drop for SharedLockGuard {
    fn drop(&mut self) {
        if let Some((table, row)) = self.key.take() {
            self.locks.unlock(table, row);
        }
    }
}
