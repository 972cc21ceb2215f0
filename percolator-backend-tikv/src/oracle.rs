//! The timestamp oracle of a TiKV deployment: PD's TSO.
//!
//! Every worker process of a deployment must draw from the same oracle (ranges handed out by
//! per-process oracles would break snapshot isolation), so with this backend the transaction
//! layer uses PD's TSO instead of `LocalOracle`. tikv-client batches concurrent timestamp
//! requests of a process into one TSO stream request, so many concurrent `begin`s cost one round
//! trip.

use std::sync::Arc;

use async_trait::async_trait;
use percolator_core::{Error, TimestampOracle};

use crate::api::KvApi;

/// [`TimestampOracle`] backed by the cluster's timestamp service.
pub struct PdOracle<A: KvApi> {
    api: Arc<A>,
}

impl<A: KvApi> PdOracle<A> {
    /// The oracle of the cluster behind `api`.
    pub fn new(api: Arc<A>) -> Self {
        Self { api }
    }
}

#[async_trait]
impl<A: KvApi> TimestampOracle for PdOracle<A> {
    async fn timestamp(&self) -> percolator_core::Result<u64> {
        self.api
            .current_timestamp()
            .await
            .map_err(|e| Error::Oracle(format!("PD TSO: {e}")))
    }
}
