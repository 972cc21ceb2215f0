//! The shared conformance suite, run against `MemStore`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use async_trait::async_trait;
use percolator_backend_mem::MemStore;
use percolator_core::conformance::StoreFactory;

struct MemFactory;

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

percolator_core::conformance_tests!(MemFactory);
percolator_observers::observer_conformance_tests!(MemFactory);
