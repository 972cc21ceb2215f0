//! Typed errors: [`StoreError`] from backends, [`Error`](enum@Error) from the transaction layer.
//!
//! The split matters to callers: a [`StoreError`] says what the store did (or may have done),
//! an [`Error`](enum@Error) says what happened to the *transaction*, and
//! [`Error::is_retryable`] tells the retry helper whether re-running the whole transaction can
//! succeed.

use thiserror::Error;

use crate::key::KeyError;

/// An error from a [`crate::RowStore`] backend.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The request is malformed (for example an empty table name). Nothing was applied.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// A key, value or batch exceeds the backend's limits. Nothing was applied.
    #[error("{what}: {size}, over the backend limit of {limit}")]
    TooLarge {
        /// What was too large.
        what: &'static str,
        /// Its size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// Bytes read from the store cannot be decoded.
    #[error("corrupt stored data: {0}")]
    Corrupt(String),
    /// The store could not be reached or timed out. For a mutation the outcome is unknown: it
    /// may or may not have been applied.
    #[error("store unavailable (outcome unknown): {0}")]
    Unavailable(String),
    /// Any other backend failure.
    #[error("backend error: {message}")]
    Backend {
        /// What failed.
        message: String,
        /// The backend's own error.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
}

impl StoreError {
    /// A backend error wrapping its cause.
    pub fn backend(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        StoreError::Backend {
            message: message.into(),
            source: Some(Box::new(source)),
        }
    }
}

impl From<KeyError> for StoreError {
    fn from(e: KeyError) -> Self {
        StoreError::Corrupt(format!("undecodable key: {e}"))
    }
}

/// An error from a transaction, the oracle or lock resolution.
///
/// Two transactions that write the same cell: the second to commit gets a
/// [`Conflict`](Error::Conflict), and [`Error::is_retryable`] says that running it again (from
/// its reads on, as [`crate::Client::run`] does) can succeed.
///
/// ```
/// # use std::sync::Arc;
/// # use percolator_backend_mem::MemStore;
/// # use percolator_core::{Client, Error};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> percolator_core::Result<()> {
/// let client = Client::open(Arc::new(MemStore::new())).await?;
/// let mut first = client.begin().await?;
/// let mut second = client.begin().await?;
/// first.set("accounts", "alice", "balance", "10")?;
/// second.set("accounts", "alice", "balance", "20")?;
/// first.commit().await?;
/// match second.commit().await {
///     Err(e @ Error::Conflict { .. }) => assert!(e.is_retryable()),
///     other => panic!("expected a write conflict, got {other:?}"),
/// }
/// let txn = client.begin().await?;
/// let balance = txn.get("accounts", "alice", "balance").await?;
/// assert_eq!(balance.as_deref(), Some(&b"10"[..]));
/// # client.shutdown().await }
/// ```
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum Error {
    /// Another transaction wrote or locked a cell this one writes (snapshot-isolation
    /// write-write conflict). Retrying the whole transaction may succeed.
    #[error("write conflict on {table:?}/{row:?}/{column:?}: {reason}")]
    Conflict {
        /// Table of the conflicting cell (lossy UTF-8, for display).
        table: String,
        /// Row of the conflicting cell.
        row: String,
        /// Column of the conflicting cell.
        column: String,
        /// What was found.
        reason: &'static str,
    },
    /// A cell stayed locked by a live transaction longer than the lock-wait limit.
    #[error(
        "cell {table:?}/{row:?}/{column:?} is locked by transaction {lock_ts} (waited {waited_ms} ms)"
    )]
    LockWaitTimeout {
        /// Table.
        table: String,
        /// Row.
        row: String,
        /// Column.
        column: String,
        /// Start timestamp of the lock holder.
        lock_ts: u64,
        /// How long this transaction waited.
        waited_ms: u64,
    },
    /// The transaction was rolled back (by a cleaner that judged it dead) before its commit
    /// point. Nothing it wrote is visible. Retrying may succeed.
    #[error("transaction {start_ts} was rolled back before it could commit")]
    Aborted {
        /// Start timestamp of the aborted transaction.
        start_ts: u64,
    },
    /// The store failed while committing the primary and the outcome could not be determined.
    /// The transaction is either fully committed or will be rolled back by lock resolution;
    /// [`crate::Client::settle`] finds out which (rolling it back or forward as a reader
    /// would), from the primary cell and start timestamp carried here.
    #[error("commit outcome of transaction {start_ts} (primary {primary}) unknown: {source}")]
    CommitUndetermined {
        /// Start timestamp.
        start_ts: u64,
        /// The transaction's primary cell: its lock or write record decides the outcome.
        primary: Box<crate::records::CellAddr>,
        /// The store error.
        #[source]
        source: StoreError,
    },
    /// The transaction **committed** (its commit point passed) but making it durable failed:
    /// it is visible, and may be lost if the machine crashes before the store flushes. Never
    /// retried automatically (re-running would apply the work twice).
    #[error("transaction committed at {commit_ts} but could not be made durable: {source}")]
    CommittedNotDurable {
        /// The commit timestamp.
        commit_ts: u64,
        /// The store error from `sync`.
        #[source]
        source: StoreError,
    },
    /// A fault-injection hook stopped the commit at a protocol step (feature
    /// `fault-injection`; tests only): the transaction behaves as if its process died there.
    #[cfg(feature = "fault-injection")]
    #[error("commit stopped by fault injection at {0:?}")]
    InjectedCrash(crate::txn::fault::CommitStep),
    /// The transaction's snapshot may have been garbage-collected: its start timestamp is below
    /// the store's GC safe point, or its client's worker lease lapsed (so GC may have passed it
    /// unseen). Nothing was read or written. Retryable: a new transaction gets a fresh snapshot.
    #[error("transaction {start_ts} is too old to read or write: {reason}")]
    SnapshotTooOld {
        /// The transaction's start timestamp.
        start_ts: u64,
        /// The newest safe point this client knows of.
        safe_point: u64,
        /// Which of the two.
        reason: String,
    },
    /// The transaction was already committed or failed; it cannot be used again.
    #[error("transaction already finished")]
    Finished,
    /// Invalid user input (reserved table name, empty table). Nothing was written.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// Input over the backend's limits. Nothing was written.
    #[error("{what}: {size}, over the backend limit of {limit}")]
    TooLarge {
        /// What was too large.
        what: &'static str,
        /// Its size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// Stored transaction metadata (lock or write record) cannot be decoded.
    #[error("corrupt stored data: {0}")]
    Corrupt(String),
    /// The store can be shared by several processes, and the client was built without an
    /// explicit oracle: per-process oracles on a shared store would hand out interleaved
    /// timestamps. Nothing was written.
    #[error(
        "store {store} can be shared by several processes: build the client with the one oracle \
         every process uses (`ClientBuilder::oracle`; PD's TSO, `PdOracle`, on TiKV) or, if this \
         process is the only one allocating timestamps on it, `ClientBuilder::local_oracle()`"
    )]
    OracleRequired {
        /// The store (name and id).
        store: String,
    },
    /// The timestamp oracle failed.
    #[error("timestamp oracle: {0}")]
    Oracle(String),
    /// The store failed.
    #[error(transparent)]
    Store(StoreError),
    /// Application code running inside a transaction (an observer, a workload) gave up; the
    /// transaction is not committed. Not retryable.
    #[error("application error: {0}")]
    Application(String),
}

impl From<StoreError> for Error {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::InvalidInput(m) => Error::InvalidInput(m),
            StoreError::TooLarge { what, size, limit } => Error::TooLarge { what, size, limit },
            StoreError::Corrupt(m) => Error::Corrupt(m),
            other => Error::Store(other),
        }
    }
}

impl Error {
    /// Whether re-running the whole transaction (reads included) can succeed.
    ///
    /// ```
    /// # use percolator_core::{Error, StoreError};
    /// assert!(Error::Aborted { start_ts: 7 }.is_retryable());
    /// assert!(Error::Store(StoreError::Unavailable("timed out".into())).is_retryable());
    /// assert!(!Error::InvalidInput("empty table name".into()).is_retryable());
    /// assert!(!Error::Finished.is_retryable());
    /// ```
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Error::Conflict { .. }
                | Error::LockWaitTimeout { .. }
                | Error::Aborted { .. }
                | Error::SnapshotTooOld { .. }
                | Error::Store(StoreError::Unavailable(_))
        )
    }

    pub(crate) fn conflict(table: &[u8], row: &[u8], column: &[u8], reason: &'static str) -> Self {
        Error::Conflict {
            table: String::from_utf8_lossy(table).into_owned(),
            row: String::from_utf8_lossy(row).into_owned(),
            column: String::from_utf8_lossy(column).into_owned(),
            reason,
        }
    }
}

/// Result alias for the transaction layer.
pub type Result<T, E = Error> = std::result::Result<T, E>;
