//! The shared conformance suite against `TikvStore` over the in-process TiKV double, so that the
//! key mapping, the guard-key argument and the retry logic run in CI without a cluster.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use async_trait::async_trait;
use percolator_backend_tikv::TikvStore;
use percolator_backend_tikv::fake::FakeKv;
use percolator_core::conformance::StoreFactory;

struct FakeTikvFactory;

#[async_trait]
impl StoreFactory for FakeTikvFactory {
    type Store = TikvStore<FakeKv>;

    async fn open(&self) -> Arc<Self::Store> {
        Arc::new(TikvStore::new(Arc::new(FakeKv::new()), b"conformance").unwrap())
    }

    async fn restart(&self, store: Arc<Self::Store>) -> Arc<Self::Store> {
        // A new client process on the same cluster: a new handle on the same keys.
        Arc::new(store.reopen())
    }
}

percolator_core::conformance_tests!(FakeTikvFactory);
percolator_observers::observer_conformance_tests!(FakeTikvFactory);
