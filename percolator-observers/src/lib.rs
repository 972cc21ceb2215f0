//! # percolator-observers
//!
//! Observers run application code in a transaction when a column changes (paper §2.4), which is
//! how Percolator turns a batch pipeline into an incremental one. This crate has:
//! - [`Observer`] and the [`Observers`] registry a binary fills in `main`;
//! - the worker [`Runtime`]: scanners over the notify family with random starts and teleporting,
//!   an advisory row lock service, bounded observer concurrency, batching for observers that
//!   ask for it ([`Observer::batch_delay`]: a timer starts the run, and a small scanner of their
//!   table arms it), worker liveness, graceful shutdown, [`Runtime::wait_idle`], and
//!   [`RuntimeStats`];
//! - `conformance` (feature `conformance`): the observer layer of the conformance suite.
//!
//! It is a framework only: no backend, no CLI and no application. The paper's web-indexing
//! pipeline is `percolator-webindex`, the `percolator` command is `percolator-cli`.
//!
//! The notification primitives that must be atomic with the commit protocol (notify cells in
//! prewrite, ack columns, consuming notifications safely) live in `percolator-core`
//! (`percolator_core::txn`, module `notify`); this crate schedules and runs observers on them.

pub mod audit;
mod failures;
mod metrics;
mod observer;
pub mod parking;
mod process;
mod row_locks;
mod runtime;
mod scanner;

#[cfg(feature = "conformance")]
pub mod conformance;

pub use metrics::{ObserverRuns, RuntimeStats};
pub use observer::{Change, Observer, Observers};
pub use parking::{ParkedChange, RetryReport, parked, retry_parked};
pub use percolator_core::internal::histogram::Histogram;
pub use percolator_core::{NotificationKind, ObservedColumn};
pub use row_locks::{RowGuard, RowLocks};
pub use runtime::{GcSchedule, Runtime, RuntimeConfig, RuntimeError, any_pending_on, pending_on};
