//! The timestamp oracle service (paper §2.3): one server hands out the timestamps of every
//! process on a store, so that every start timestamp is above every commit timestamp issued
//! before it, whichever processes took them.
//!
//! - `server`: [`OracleServer`], one instance; several run, one leads under a lease kept in the
//!   store (a [`percolator_core::LocalOracle`] in standby mode), the others stand by.
//! - `client`: [`RemoteOracle`], a [`percolator_core::TimestampOracle`] that batches its callers'
//!   requests into one round trip and fails over between instances.
//! - `wire`: the protocol: length-delimited frames of protobuf messages.
//!
//! Timestamps carry oracle time (milliseconds on the leader's clock above an 18-bit counter,
//! PD's layout), which is what clients judge lock TTLs and worker leases by.
//!
//! ```no_run
//! # async fn demo(store: std::sync::Arc<percolator_backend_mem::MemStore>) -> percolator_core::Result<()> {
//! use percolator_oracle::{OracleServer, RemoteOracle, ServerConfig};
//! let server = OracleServer::bind(store.clone(), "127.0.0.1:0", ServerConfig::default())
//!     .await
//!     .map_err(|e| percolator_core::Error::Oracle(e.to_string()))?;
//! let oracle = RemoteOracle::connect([server.local_addr().to_string()])?;
//! let client = percolator_core::Client::builder(store).oracle(std::sync::Arc::new(oracle)).build().await?;
//! # Ok(()) }
//! ```

mod client;
mod server;
pub mod wire;

pub use client::{RemoteOracle, RemoteOracleConfig};
pub use server::{OracleServer, ServerConfig, ServerError, ServerStats};
