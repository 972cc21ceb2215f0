//! [`RuntimeError`]: what starting, waiting on or stopping a [`Runtime`](crate::Runtime) can
//! fail with.

use std::time::Duration;

/// Errors of the runtime itself (observer and transaction errors are [`percolator_core::Error`]).
///
/// ```
/// # use std::sync::Arc;
/// # use std::time::Duration;
/// # use percolator_backend_mem::MemStore;
/// # use percolator_core::Client;
/// # use percolator_observers::{Observers, Runtime, RuntimeConfig, RuntimeError};
/// # struct Failing;
/// # #[async_trait::async_trait]
/// # impl<S: percolator_core::RowStore> percolator_observers::Observer<S> for Failing {
/// #     fn name(&self) -> &str {
/// #         "failing"
/// #     }
/// #     fn observed(&self) -> percolator_core::ObservedColumn {
/// #         percolator_core::ObservedColumn::strong("docs", "contents")
/// #     }
/// #     async fn observe(
/// #         &self,
/// #         _txn: &mut percolator_core::Transaction<S>,
/// #         _change: &percolator_observers::Change,
/// #     ) -> percolator_core::Result<()> {
/// #         Err(percolator_core::Error::Application("always fails".into()))
/// #     }
/// # }
/// # #[tokio::main(flavor = "multi_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let mut observers = Observers::new();
/// # observers.register(Failing)?; // an observer whose every run fails
/// let config = RuntimeConfig::default().with_park_after_failures(0); // never park
/// let store = Arc::new(MemStore::new());
/// let runtime = Runtime::start(Client::builder(store), observers, config).await?;
/// let mut txn = runtime.client().begin().await?;
/// txn.set("docs", "a", "contents", "hello")?;
/// txn.commit().await?;
/// match runtime.wait_idle(Duration::from_millis(200)).await {
///     Err(RuntimeError::NotIdle { pending, .. }) => assert_eq!(pending, 1),
///     other => panic!("the change cannot be processed: {other:?}"),
/// }
/// runtime.shutdown().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// A transaction-layer error.
    #[error(transparent)]
    Txn(#[from] percolator_core::Error),
    /// [`Runtime::wait_idle`](crate::Runtime::wait_idle) gave up.
    #[error(
        "still {pending} notification(s) pending and {in_flight} run(s) in flight{} after {waited:?}",
        if *lock_sweep_owed { ", and the dead-worker sweep not done" } else { "" }
    )]
    NotIdle {
        /// Pending notify versions at the last look.
        pending: u64,
        /// Runs in flight at the last look.
        in_flight: u64,
        /// The dead-worker sweep still owed a pass over the locks (it failed, or has not yet
        /// run since the start).
        lock_sweep_owed: bool,
        /// How long it waited.
        waited: Duration,
    },
}
