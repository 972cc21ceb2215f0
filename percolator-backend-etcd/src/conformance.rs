//! `EtcdFactory`: etcd stores for the shared conformance suite (feature `conformance`).
//!
//! Every store gets a fresh namespace on one cluster. The cluster is the one named by
//! `PERCOLATOR_ETCD_ENDPOINTS` (comma-separated client URLs; `cargo xtask` starts a 3-member
//! cluster and sets it for the whole run), or else a 3-member cluster this factory starts on
//! loopback and stops when it is dropped. The test binaries that use it run under
//! `percolator-testkit`'s harness, which reports them as skipped, with the reason, where etcd is
//! not installed.

// Test support: a store that cannot be opened fails the test that asked for it.
#![allow(clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use percolator_core::conformance::StoreFactory;
use percolator_etcd_cluster::{ClusterConfig, LocalCluster};

use crate::{EtcdConfig, EtcdStore};

pub use percolator_etcd_cluster::{ENDPOINTS_VAR, endpoints_from_env};

/// Opens etcd stores in fresh namespaces of one cluster.
pub struct EtcdFactory {
    config: EtcdConfig,
    /// The cluster this factory started (stopped on drop), if it did not use an existing one.
    _cluster: Option<LocalCluster>,
}

impl std::fmt::Debug for EtcdFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdFactory")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Default for EtcdFactory {
    fn default() -> Self {
        Self::from_env()
    }
}

impl EtcdFactory {
    /// The cluster of [`ENDPOINTS_VAR`], else a new local 3-member cluster. The test binaries
    /// that use it run under `percolator-testkit`'s harness, which reports them as skipped where
    /// etcd is not installed, so this is never reached there.
    pub fn from_env() -> Self {
        if let Some(endpoints) = endpoints_from_env() {
            return Self {
                config: EtcdConfig::new(endpoints),
                _cluster: None,
            };
        }
        match LocalCluster::start(ClusterConfig::default()) {
            Ok(cluster) => Self {
                config: EtcdConfig::new(cluster.endpoints()),
                _cluster: Some(cluster),
            },
            Err(e) => panic!("could not start a local etcd cluster: {e}"),
        }
    }

    /// The client configuration of the cluster in use.
    pub fn config(&self) -> &EtcdConfig {
        &self.config
    }
}

fn unique_namespace() -> String {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    format!(
        "t{}-{}-{:x}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed),
        rand::random::<u32>()
    )
}

#[async_trait]
impl StoreFactory for EtcdFactory {
    type Store = EtcdStore;

    async fn open(&self) -> Arc<EtcdStore> {
        let config = &self.config;
        let namespace = unique_namespace();
        Arc::new(
            EtcdStore::connect(config, namespace.as_bytes())
                .await
                .unwrap_or_else(|e| panic!("connect to etcd: {e}")),
        )
    }

    async fn restart(&self, store: Arc<EtcdStore>) -> Arc<EtcdStore> {
        // A new process on the same cluster: a new client on the same namespace.
        let config = &self.config;
        let namespace = store.namespace().to_vec();
        drop(store);
        Arc::new(
            EtcdStore::connect(config, &namespace)
                .await
                .unwrap_or_else(|e| panic!("reconnect to etcd: {e}")),
        )
    }
}
