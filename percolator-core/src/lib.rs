//! # percolator-core
//!
//! Google's Percolator (OSDI 2010) over any Bigtable-like store: snapshot-isolation, cross-row,
//! cross-table transactions built from single-row conditional mutations, a persistent timestamp
//! oracle, lazy lock resolution, and the notification primitives that `percolator-observers`
//! builds its worker runtime on.
//!
//! ```
//! use std::sync::Arc;
//! use percolator_backend_mem::MemStore;
//! use percolator_core::Client;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> percolator_core::Result<()> {
//! let client = Client::open(Arc::new(MemStore::new())).await?;
//! let mut txn = client.begin().await?;
//! txn.set("docs", "https://example.com/", "contents", "<html>…</html>")?;
//! txn.set("dups", "hash:1234", "canonical-url", "https://example.com/")?;
//! txn.commit().await?;
//!
//! let txn = client.begin().await?;
//! let url = txn.get("dups", "hash:1234", "canonical-url").await?;
//! assert_eq!(url.as_deref(), Some(&b"https://example.com/"[..]));
//! # client.shutdown().await }
//! ```
//!
//! ## For applications
//!
//! The crate root: [`Client`] (opened on a store, with [`ClientBuilder`] for the oracle and
//! [`TxnConfig`]), [`Transaction`] (`get`, `set`, `delete`, `scan`, `commit`), [`Client::run`]
//! (the retry helper that re-runs a whole closure on a conflict), [`Error`], and the
//! [`RowStore`] trait that a store is given as. [`DynStore`] holds a store chosen at run time.
//! [`gc`] collects history below the oldest snapshot in use; [`oracle`] has the timestamp
//! oracles.
//!
//! ## For backend implementers
//!
//! [`store`] is the [`RowStore`] contract (read row, scan, batched conditional row mutations,
//! sync) with its limits and the rule that wrappers forward every method; [`backend`] has the
//! key encoding, the stored records and the checks a backend runs. The conformance suite
//! (feature `conformance`) is the behaviour every backend must show.
//!
//! ## Test machinery
//!
//! Each behind its own feature, so that the default build exposes only the product API:
//! - `fault` (feature `fault-injection`): commit hooks consulted at every step of the commit
//!   protocol, and `Error::InjectedCrash`;
//! - `workload` (feature `workload`): the bank-transfer workload of the invariant tests and the
//!   bank demo;
//! - `conformance` (feature `conformance`, which implies both): the suite every backend runs.
//!
//! The hidden `internal` module serves the workspace's own crates (the observer runtime, the
//! server, the benchmarks) and is not part of the API.
//!
//! Core never depends on a backend; transactions are generic over [`RowStore`].

pub mod backend;
pub mod dyn_store;
pub mod error;
pub mod gc;
#[doc(hidden)]
pub mod internal;
pub mod oracle;
pub mod store;
pub mod txn;

// Short paths for the crate's own code.
pub(crate) use backend::{key, records};
pub(crate) use internal::{backoff, liveness, observer_registry, tables};

#[cfg(feature = "workload")]
pub mod workload;

#[cfg(feature = "conformance")]
pub mod conformance;

/// Fault injection at the steps of the commit protocol (feature `fault-injection`).
///
/// Install a [`CommitHook`] with `ClientBuilder::commit_hook` (every commit of a client) or
/// `Transaction::set_commit_hook` (one transaction). At each [`CommitStep`] the hook may let
/// the commit go on, pause it (by awaiting) or stop it as if the process had died there
/// ([`HookAction::Crash`], reported as `Error::InjectedCrash`). Ready-made hooks live in
/// `conformance::hooks`.
#[cfg(feature = "fault-injection")]
pub mod fault {
    pub use crate::txn::fault::{CommitHook, CommitStep, HookAction};
}

pub use dyn_store::DynStore;
pub use error::{Error, Result, StoreError};
#[cfg(feature = "fault-injection")]
pub use fault::{CommitHook, CommitStep, HookAction};
pub use gc::{GcConfig, GcReport};
pub use oracle::{LocalOracle, TimestampOracle};
pub use records::CellAddr;
pub use store::{
    AtomicOutcome, Cell, Columns, Condition, Family, FamilyRead, Mutation, MutationOutcome,
    ReadRow, RowCells, RowMutation, RowStore, Scan, StoreLimits, TsRange,
};
pub use txn::{
    ClearOutcome, Client, ClientBuilder, CommitInfo, NotificationKind, NotifyRow, NotifyVersion,
    ObservedColumn, Prefetch, ScanItem, ScanPage, Settled, Transaction, TxnConfig, TxnStatus,
    Versioned,
};
