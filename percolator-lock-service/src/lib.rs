//! The paper's lightweight lock service (§2.4): "each worker acquires a lock from a lightweight
//! lock service before scanning the row. This lock server need not persist state since it is
//! advisory and thus is very scalable."
//!
//! - `server`: [`LockServer`], one instance. It keeps `(table, row) → holder` in memory, where a
//!   holder is one client connection; a lock ends when its holder releases it, when the
//!   holder's connection closes (a worker that dies lets its rows go at once), or after
//!   [`LockServerConfig::lock_ttl`] (a worker that hangs with its connection open).
//! - `client`: [`RemoteRowLocks`], the observers runtime's
//!   [`SharedRowLocks`](percolator_observers::SharedRowLocks): it batches every caller's
//!   requests into one round trip per endpoint and, with several endpoints, spreads the rows
//!   over them by hash, so instances share nothing.
//! - `wire`: the protocol, length-delimited protobuf frames.
//!
//! Nothing here is needed for correctness: the ack column and the transaction protocol make a
//! change commit once whichever workers run it. The service only keeps workers from running the
//! same row at the same time. So it persists nothing and fails open: a row whose lock the
//! client cannot get an answer for is run without one.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use percolator_lock_service::{LockServer, LockServerConfig, RemoteRowLocks};
//! use percolator_observers::{RuntimeConfig, SharedRowLocks};
//! let server = LockServer::bind("127.0.0.1:0", LockServerConfig::default()).await?;
//! let locks = RemoteRowLocks::connect([server.local_addr().to_string()])?;
//! let config = RuntimeConfig::default().with_shared_locks(Some(std::sync::Arc::new(locks)));
//! # Ok(()) }
//! ```

mod client;
mod server;
pub mod wire;

pub use client::{ClientConfigError, RemoteRowLocks, RemoteRowLocksConfig};
pub use server::{LockServer, LockServerConfig, LockServerError, LockServerStats};
