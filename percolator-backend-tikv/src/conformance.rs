//! [`FakeTikvFactory`]: the [`StoreFactory`] that runs the shared conformance suite
//! (`percolator_core::conformance`) against [`TikvStore`] over the in-process TiKV double
//! ([`FakeKv`]) (feature `conformance`), so that the key mapping, the guard-key argument and the
//! retry logic run in CI without a cluster.
//!
//! It lives in the crate, not in its test target, so that other suites (the observers') can run
//! against the same backend with the same factory. Like the suite's cases, it panics when it
//! cannot open a store: [`StoreFactory`] has no error path, and a failure here is a failed test.

#![allow(clippy::expect_used)]

use std::sync::Arc;

use async_trait::async_trait;
use percolator_core::conformance::StoreFactory;

use crate::TikvStore;
use crate::fake::FakeKv;

/// Opens each store on a fresh [`FakeKv`] cluster; a restart is a new handle on the same keys.
///
/// ```text
/// percolator_core::conformance_tests!(percolator_backend_tikv::conformance::FakeTikvFactory);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct FakeTikvFactory;

#[async_trait]
impl StoreFactory for FakeTikvFactory {
    type Store = TikvStore<FakeKv>;

    async fn open(&self) -> Arc<Self::Store> {
        Arc::new(
            TikvStore::new(Arc::new(FakeKv::new()), b"conformance").expect("a valid namespace"),
        )
    }

    async fn restart(&self, store: Arc<Self::Store>) -> Arc<Self::Store> {
        // A new client process on the same cluster: a new handle on the same keys.
        Arc::new(store.reopen())
    }
}
