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
//!   conditional row mutations, sync) and its limits;
//! - [`records`]: the lock and write records the protocol stores;
//! - [`oracle`]: [`TimestampOracle`] and the store-persisted [`LocalOracle`];
//! - [`liveness`]: worker leases used by lock resolution;
//! - [`txn`]: [`Client`], [`Transaction`], the commit protocol, lock resolution and the
//!   notification primitives observers are built on;
//! - `conformance` (feature `conformance`): the suite every backend runs.
//!
//! Core never depends on a backend; transactions are generic over [`RowStore`].

pub mod error;
pub mod key;
pub mod liveness;
pub mod oracle;
pub mod records;
pub mod store;
pub mod tables;
pub mod txn;
pub mod workload;

#[cfg(feature = "conformance")]
pub mod conformance;

pub use error::{Error, Result, StoreError};
pub use oracle::{LocalOracle, TimestampOracle};
pub use records::CellAddr;
pub use store::{
    Cell, Columns, Condition, Family, FamilyRead, Mutation, MutationOutcome, ReadRow, RowCells,
    RowMutation, RowStore, Scan, StoreLimits, TsRange,
};
pub use txn::{
    ClearOutcome, Client, ClientBuilder, CommitHook, CommitInfo, CommitStep, HookAction,
    NotificationKind, NotifyRow, NotifyVersion, ObservedColumn, ScanItem, Transaction, TxnConfig,
    TxnStatus, Versioned,
};
