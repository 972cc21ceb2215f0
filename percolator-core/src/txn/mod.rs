//! Snapshot-isolation transactions over any [`RowStore`](crate::RowStore) (paper §2.2).
//!
//! - [`Client`]: one per process (or per simulated worker); owns the store handle, the oracle,
//!   the worker's liveness lease and the configuration. Cheap to clone.
//! - [`Transaction`]: `begin` takes a start timestamp; `get`/`scan` read the snapshot at it (and
//!   the transaction's own buffered writes); `set`/`delete` buffer writes, checked against the
//!   backend's limits immediately; `commit` runs the two-phase protocol.
//! - [`Client::run`] re-runs a whole closure on retryable errors.
//!
//! Submodules (laid out like TiKV's `client-rust` `transaction` module):
//! - `config`: [`TxnConfig`];
//! - `client`: [`Client`], [`ClientBuilder`] and the state their clones share;
//! - `transaction`: [`Transaction`] and the values it returns ([`Versioned`], [`ScanItem`],
//!   [`CommitInfo`]);
//! - `metrics`: [`TxnMetrics`] counters;
//! - `fault`: the protocol's step boundaries and, with feature `fault-injection`, the commit
//!   hooks consulted there (public as `percolator_core::fault`);
//!
//! and one protocol action each: `layout` (the cells every step touches), `read` (snapshot
//! get/scan), `prefetch` (columns read together fetched ahead into a per-transaction cache),
//! `commit` (prewrite/commit), `background` (secondaries committed after `commit`
//! returns), `one_phase` (single-row commit), `resolve` (lazy lock
//! cleanup), `retry` (the run helper; the backoff itself is [`crate::backoff`]), `notify`
//! (observed columns, finding and consuming notifications).

mod background;
mod client;
mod commit;
mod config;
pub(crate) mod fault;
mod layout;
mod lease;
mod metrics;
mod notify;
mod one_phase;
mod prefetch;
mod read;
mod recent_commits;
mod resolve;
mod retry;
mod transaction;

pub use client::{Client, ClientBuilder};
pub(crate) use client::{ClientInner, random_id};
pub use config::TxnConfig;
#[cfg(feature = "fault-injection")]
pub use fault::{CommitHook, CommitStep, HookAction};
pub use metrics::{TxnMetrics, TxnMetricsSnapshot};
pub use notify::{ClearOutcome, NotificationKind, NotifyRow, NotifyVersion, ObservedColumn};
pub use prefetch::Prefetch;
pub use resolve::{Settled, TxnStatus};
pub use transaction::{CommitInfo, ScanItem, ScanPage, Transaction, Versioned};
