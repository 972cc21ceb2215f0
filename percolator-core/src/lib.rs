//! # percolator-core
//!
//! Google's Percolator (OSDI 2010) over any Bigtable-like store: snapshot-isolation, cross-row,
//! cross-table transactions built from single-row conditional mutations, a persistent timestamp
//! oracle, lazy lock resolution, and the notification primitives that `percolator-observers`
//! builds its worker runtime on.
//!
//! Layers, bottom up:
//! - [`key`]: order-preserving, unambiguous byte encoding of `(table, row, column, ts)`;
//! - [`store`]: the [`RowStore`] trait every backend implements (read row, scan, batched
//!   conditional row mutations, sync), its limits, and the contract wrappers must keep;
//! - [`records`]: the lock and write records the protocol stores;
//! - [`oracle`]: [`TimestampOracle`] and the store-persisted [`LocalOracle`];
//! - [`liveness`]: worker leases used by lock resolution;
//! - [`observer_registry`]: which observers watch which columns, shared by every process;
//! - [`txn`]: [`Client`], [`Transaction`], the commit protocol, lock resolution and the
//!   notification primitives observers are built on;
//! - utilities shared with the other crates: [`backoff`] (the one retry backoff) and
//!   [`histogram`] (the one latency histogram).
//!
//! Test machinery, each behind its own feature so that the default build exposes only the
//! product API:
//! - `fault` (feature `fault-injection`): commit hooks consulted at every step of the commit
//!   protocol, and `Error::InjectedCrash`;
//! - `workload` (feature `workload`): the bank-transfer workload of the invariant tests and the
//!   bank demo;
//! - `conformance` (feature `conformance`, which implies both): the suite every backend runs.
//!
//! Core never depends on a backend; transactions are generic over [`RowStore`].

pub mod backoff;
pub mod dyn_store;
pub mod error;
pub mod gc;
pub mod histogram;
pub mod key;
pub mod liveness;
pub mod observer_registry;
pub mod oracle;
pub mod records;
pub mod store;
pub mod tables;
pub mod txn;

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
    ObservedColumn, ScanItem, ScanPage, Settled, Transaction, TxnConfig, TxnStatus, Versioned,
};
