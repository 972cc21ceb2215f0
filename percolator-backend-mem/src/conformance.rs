//! [`MemFactory`]: the [`StoreFactory`] that runs the shared conformance suite
//! (`percolator_core::conformance`) against [`MemStore`] (feature `conformance`).
//!
//! It lives in the crate, not in its test target, so that other suites (the observers') can
//! run against the same backend with the same factory.

use std::sync::Arc;

use async_trait::async_trait;
use percolator_core::conformance::StoreFactory;

use crate::MemStore;

/// Opens a fresh [`MemStore`] per case.
///
/// ```text
/// percolator_core::conformance_tests!(percolator_backend_mem::conformance::MemFactory);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct MemFactory;

#[async_trait]
impl StoreFactory for MemFactory {
    type Store = MemStore;

    async fn open(&self) -> Arc<MemStore> {
        Arc::new(MemStore::new())
    }

    async fn restart(&self, store: Arc<MemStore>) -> Arc<MemStore> {
        // Nothing is persistent: a "restart" keeps the process's store.
        store
    }
}
