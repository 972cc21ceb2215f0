//! The shared conformance suite against a real TiKV cluster. Compiled only with the
//! `cluster-tests` feature (`cargo xtask conformance --backend tikv --pd HOST:PORT` enables it and
//! sets `PERCOLATOR_TIKV_PD`); each store gets a fresh random namespace on the cluster.

#![cfg(feature = "cluster-tests")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use async_trait::async_trait;
use percolator_backend_tikv::{TikvClient, TikvConfig, TikvStore};
use percolator_core::conformance::StoreFactory;

struct ClusterFactory;

fn pd() -> Vec<String> {
    let pd = std::env::var("PERCOLATOR_TIKV_PD").unwrap_or_default();
    assert!(
        !pd.is_empty(),
        "cluster-tests need PERCOLATOR_TIKV_PD=host:port[,host:port]"
    );
    pd.split(',').map(str::to_owned).collect()
}

#[async_trait]
impl StoreFactory for ClusterFactory {
    type Store = TikvStore<TikvClient>;

    async fn open(&self) -> Arc<Self::Store> {
        let namespace = format!("conformance-{:016x}", rand::random::<u64>());
        Arc::new(
            TikvStore::connect(&TikvConfig::new(pd()), namespace.as_bytes())
                .await
                .expect("connect to TiKV"),
        )
    }

    async fn restart(&self, store: Arc<Self::Store>) -> Arc<Self::Store> {
        // A new client process on the same cluster: a new handle on the same keys.
        Arc::new(store.reopen())
    }
}

percolator_core::conformance_tests!(ClusterFactory);
percolator_observers::observer_conformance_tests!(ClusterFactory);
