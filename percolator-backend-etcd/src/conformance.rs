//! `EtcdFactory`: etcd stores for the shared conformance suite (feature `conformance`).
//!
//! Every store gets a fresh namespace on one cluster. The cluster is the one named by
//! `PERCOLATOR_ETCD_ENDPOINTS` (comma-separated client URLs; `cargo xtask` starts a 3-member
//! cluster and sets it for the whole run), or else a 3-member cluster this factory starts on
//! loopback and stops when it is dropped. Without either (no `etcd` installed), the factory
//! reports a skip reason and the suite's tests say so instead of running.

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
    config: Option<EtcdConfig>,
    skip: Option<String>,
    /// The cluster this factory started (stopped on drop), if it did not use an existing one.
    _cluster: Option<LocalCluster>,
}

impl std::fmt::Debug for EtcdFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdFactory")
            .field("config", &self.config)
            .field("skip", &self.skip)
            .finish_non_exhaustive()
    }
}

impl Default for EtcdFactory {
    fn default() -> Self {
        Self::from_env()
    }
}

impl EtcdFactory {
    /// The cluster of [`ENDPOINTS_VAR`], else a new local 3-member cluster, else a factory
    /// that reports why it cannot run.
    pub fn from_env() -> Self {
        if let Some(endpoints) = endpoints_from_env() {
            return Self {
                config: Some(EtcdConfig::new(endpoints)),
                skip: None,
                _cluster: None,
            };
        }
        if let Some(reason) = percolator_etcd_cluster::skip_reason() {
            return Self {
                config: None,
                skip: Some(format!("{reason}, and {ENDPOINTS_VAR} is not set")),
                _cluster: None,
            };
        }
        match LocalCluster::start(ClusterConfig::default()) {
            Ok(cluster) => Self {
                config: Some(EtcdConfig::new(cluster.endpoints())),
                skip: None,
                _cluster: Some(cluster),
            },
            // etcd is installed but would not start: that is a failure, not a skip.
            Err(e) => panic!("could not start a local etcd cluster: {e}"),
        }
    }

    /// The client configuration of the cluster in use (`None` when skipping).
    pub fn config(&self) -> Option<&EtcdConfig> {
        self.config.as_ref()
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

    fn skip_reason(&self) -> Option<String> {
        self.skip.clone()
    }

    async fn open(&self) -> Arc<EtcdStore> {
        let Some(config) = &self.config else {
            panic!("etcd factory used while skipping: {:?}", self.skip);
        };
        let namespace = unique_namespace();
        Arc::new(
            EtcdStore::connect(config, namespace.as_bytes())
                .await
                .unwrap_or_else(|e| panic!("connect to etcd: {e}")),
        )
    }

    async fn restart(&self, store: Arc<EtcdStore>) -> Arc<EtcdStore> {
        // A new process on the same cluster: a new client on the same namespace.
        let Some(config) = &self.config else {
            panic!("etcd factory used while skipping: {:?}", self.skip);
        };
        let namespace = store.namespace().to_vec();
        drop(store);
        Arc::new(
            EtcdStore::connect(config, &namespace)
                .await
                .unwrap_or_else(|e| panic!("reconnect to etcd: {e}")),
        )
    }
}
