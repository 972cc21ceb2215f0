//! Garbage collection of MVCC history below a **safe point**.
//!
//! Percolator never overwrites: every commit adds a write record and (unless the value is
//! inline) a data version, every rollback a rollback record, every observer run an ack version.
//! A pipeline that runs for months must drop the versions no snapshot can read any more.
//!
//! **The safe point.** Every client publishes, with each renewal of its worker lease, the
//! oldest start timestamp its transactions still use (`snapshots::ActiveSnapshots`). The safe
//! point is the minimum over live leases (never above the collector's own fresh timestamp),
//! less [`GcConfig::grace`] of oracle time. It is persisted in the store and only moves
//! forward ([`safe_point`]), so every process agrees on it.
//!
//! **The invariants.**
//! - GC never changes what an admitted snapshot reads: a snapshot at or above the safe point
//!   finds, per column, either an untouched version above the safe point or the newest
//!   committed one at or below it, which GC keeps (unless it is a delete, and then reading
//!   nothing is what the delete shows). See [`collect`].
//! - A snapshot below the safe point is never served: a read or prewrite at such a start
//!   timestamp fails with [`crate::Error::SnapshotTooOld`] (retryable), not a wrong answer. A
//!   live client's transactions cannot fall below it; a client whose lease lapsed refuses its
//!   own reads and prewrites until it renews, and then refuses every transaction that began
//!   before (`snapshots::SnapshotSafety`). This is also why a prewrite of a transaction
//!   rolled back long ago still fails once its rollback record is gone.
//! - Locks below the safe point are resolved in every table before any write record is
//!   deleted (resolving a secondary asks its primary's write records).
//! - Each store call touches at most [`GcConfig::batch_rows`] rows, so GC never holds a row
//!   latch for long, and versions above the safe point are never touched, so GC needs no
//!   conditions against concurrent writers (they all write above it).
//!
//! - A column whose newest version at or below the safe point is a delete loses its history,
//!   except that delete record while a notification on the column is pending: the observer
//!   yet to run must see the delete (a strong observer skips a column with no value and no
//!   commit).
//! - Notify versions are kept while their column has a registration in the observer registry
//!   ([`crate::observer_registry`]); below the safe point, those of columns nobody registered
//!   are deleted (a writer that declares its observed columns registers them, so its
//!   notifications survive until the workers start).
//!
//! Apart from collection, [`dead_workers`] ends the leases of workers that are gone and
//! resolves the locks they left, without waiting for a reader or a collection.
//!
//! As with lock TTLs and worker leases, this assumes a request sent while a lease held is
//! served before a margin of a quarter lease has passed.

pub mod collect;
pub mod dead_workers;
pub mod safe_point;
pub(crate) mod snapshots;

pub use collect::{GcConfig, GcProgress, GcReport, TableGc};
pub use dead_workers::DeadWorkerSweep;
