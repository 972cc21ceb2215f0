//! # percolator-observers
//!
//! Observers run application code in a transaction when a column changes (paper §2.4), which is
//! how Percolator turns a batch pipeline into an incremental one. This crate has:
//! - [`Observer`] and the [`Observers`] registry a binary fills in `main`;
//! - the worker [`Runtime`]: scanners over the notify family with random starts and teleporting,
//!   an advisory row lock service, bounded observer concurrency, worker liveness, graceful
//!   shutdown, [`Runtime::wait_idle`], and [`RuntimeStats`];
//! - [`webindex`]: the paper's web-indexing pipeline (document processing, duplicate clustering,
//!   link inversion, an exported term index) with synthetic, HTML-directory and WARC inputs,
//!   invariant checks and the freshness experiment;
//! - `conformance` (feature `conformance`): the observer layer of the conformance suite;
//! - the `percolator` CLI (`src/bin/percolator.rs`), whose backend is a cargo feature.
//!
//! The notification primitives that must be atomic with the commit protocol (notify cells in
//! prewrite, ack columns, consuming notifications safely) live in `percolator-core`
//! (`percolator_core::txn`, module `notify`); this crate schedules and runs observers on them.

mod metrics;
mod observer;
mod process;
mod row_locks;
mod runtime;
mod scanner;

pub mod webindex;

#[cfg(feature = "conformance")]
pub mod conformance;

pub use metrics::{Histogram, RuntimeStats};
pub use observer::{Change, Observer, Observers};
pub use percolator_core::{NotificationKind, ObservedColumn};
pub use row_locks::{RowGuard, RowLocks};
pub use runtime::{Runtime, RuntimeConfig, RuntimeError, pending_on};
