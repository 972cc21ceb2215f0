//! [`SimulatedOracle`]: the timestamp oracle as one more server of the simulated cluster.
//!
//! Every timestamp request pays a round trip and queues at the oracle's own single-server queue
//! ([`SimConfig::oracle_service`](super::SimConfig::oracle_service) per request, however many
//! timestamps it carries) before the inner oracle hands the timestamp out; the timestamp is
//! taken when the oracle serves the request, as a remote oracle's would be. While the
//! simulation is on, nothing is served from an in-process window
//! ([`TimestampOracle::timestamp_now`] answers `None`): each transaction's start and commit
//! timestamps are a request each, as in the paper (whose oracle batches requests across a
//! worker's transactions; this one does not, which only makes the oracle look busier).

use std::sync::Arc;

use async_trait::async_trait;
use percolator_core::{Result, TimestampOracle};
use tokio::time::Instant;

use super::model::ClusterModel;

/// An oracle behind the simulated cluster `model` (see the module docs).
pub struct SimulatedOracle {
    inner: Arc<dyn TimestampOracle>,
    model: Arc<ClusterModel>,
}

impl SimulatedOracle {
    /// `inner` served as the oracle server of `model`.
    pub fn new(inner: Arc<dyn TimestampOracle>, model: Arc<ClusterModel>) -> Self {
        Self { inner, model }
    }

    /// Half a round trip out, queued and served, half back; `take` runs when served.
    async fn request<T>(&self, take: impl Future<Output = T>) -> T {
        let sent = Instant::now();
        let one_way = self.model.config().one_way();
        let done = self.model.book_oracle(sent + one_way);
        self.model.wait_until(done).await;
        let answer = take.await;
        tokio::time::sleep_until(done + one_way).await;
        answer
    }
}

#[async_trait]
impl TimestampOracle for SimulatedOracle {
    async fn timestamp(&self) -> Result<u64> {
        if !self.model.simulating() {
            return self.inner.timestamp().await;
        }
        self.request(self.inner.timestamp()).await
    }

    fn timestamp_now(&self) -> Option<u64> {
        if self.model.simulating() {
            None
        } else {
            self.inner.timestamp_now()
        }
    }

    async fn timestamps(&self, count: u64) -> Result<u64> {
        if !self.model.simulating() {
            return self.inner.timestamps(count).await;
        }
        self.request(self.inner.timestamps(count)).await
    }

    async fn release(&self) -> Result<()> {
        self.inner.release().await
    }
}
