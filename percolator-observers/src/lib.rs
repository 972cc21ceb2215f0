//! # percolator-observers
//!
//! Observers run application code in a transaction when a column changes (paper §2.4), which is
//! how Percolator turns a batch pipeline into an incremental one. This crate has:
//! - [`Observer`] and the [`Observers`] registry a binary fills in `main`;
//! - the worker [`Runtime`]: scanners over the notify family with random starts and teleporting,
//!   an advisory row lock service, bounded observer concurrency, batching for observers that
//!   ask for it ([`Observer::batch_delay`]: a timer starts the run, and a small scanner of their
//!   table arms it), worker liveness, partitioned scanning (worker processes running the same
//!   observers on one store divide the dirty rows among the live ones), graceful shutdown,
//!   [`Runtime::wait_idle`], and [`RuntimeStats`] with the counters of wasted work;
//! - `conformance` (feature `conformance`): the observer layer of the conformance suite.
//!
//! It is a framework only: no backend, no CLI and no application. The paper's web-indexing
//! pipeline is `percolator-webindex`, the `percolator` command is `percolator-cli`.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! use async_trait::async_trait;
//! use percolator_backend_mem::MemStore;
//! use percolator_core::{Client, ObservedColumn, RowStore, Transaction};
//! use percolator_observers::{Change, Observer, Observers, Runtime, RuntimeConfig};
//!
//! /// Whenever `docs:contents` changes, stores its word count in `stats:words`.
//! struct WordCount;
//!
//! #[async_trait]
//! impl<S: RowStore> Observer<S> for WordCount {
//!     fn name(&self) -> &str {
//!         "word-count"
//!     }
//!
//!     fn observed(&self) -> ObservedColumn {
//!         ObservedColumn::strong("docs", "contents")
//!     }
//!
//!     async fn observe(
//!         &self,
//!         txn: &mut Transaction<S>,
//!         change: &Change,
//!     ) -> percolator_core::Result<()> {
//!         let text = change.value.as_deref().unwrap_or_default();
//!         let words = String::from_utf8_lossy(text).split_whitespace().count();
//!         txn.set("stats", &change.row, "words", words.to_string())
//!     }
//! }
//!
//! # #[tokio::main(flavor = "multi_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut observers = Observers::new();
//! observers.register(WordCount)?;
//! let store = Arc::new(MemStore::new());
//! let config = RuntimeConfig::default();
//! let runtime = Runtime::start(Client::builder(store), observers, config).await?;
//!
//! // Writers must declare the observed columns; the runtime's own client does.
//! let client = runtime.client().clone();
//! for (url, text) in [("a", "one two three"), ("b", "four five"), ("a", "six")] {
//!     let mut txn = client.begin().await?;
//!     txn.set("docs", url, "contents", text)?;
//!     txn.commit().await?;
//! }
//! runtime.wait_idle(Duration::from_secs(30)).await?;
//!
//! let txn = client.begin().await?;
//! assert_eq!(txn.get("stats", "a", "words").await?.as_deref(), Some(&b"1"[..]));
//! assert_eq!(txn.get("stats", "b", "words").await?.as_deref(), Some(&b"2"[..]));
//! runtime.shutdown().await?; // in-flight runs finish; no lock is left behind
//! # Ok(()) }
//! ```
//!
//! The notification primitives that must be atomic with the commit protocol (notify cells in
//! prewrite, ack columns, consuming notifications safely) live in `percolator-core`
//! (`percolator_core::txn`, module `notify`); this crate schedules and runs observers on them.

pub mod audit;
mod background;
mod config;
mod error;
mod failures;
mod metrics;
mod observer;
pub mod parking;
mod partition;
mod pending;
mod process;
mod row_locks;
mod runtime;
mod scanner;
mod shared_locks;

#[cfg(feature = "conformance")]
pub mod conformance;

pub use config::{GcSchedule, RuntimeConfig};
pub use error::RuntimeError;
pub use metrics::{ObserverRuns, RuntimeStats};
pub use observer::{Change, Observer, Observers};
pub use parking::{ParkedChange, RetryReport, parked, retry_parked};
pub use pending::{any_pending_on, pending_on};
pub use percolator_core::internal::histogram::Histogram;
pub use percolator_core::{NotificationKind, ObservedColumn};
pub use row_locks::{RowGuard, RowLocks};
pub use runtime::Runtime;
pub use shared_locks::{SharedLockAnswer, SharedRowLocks};
