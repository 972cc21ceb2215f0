//! Secondary commits that run after `commit` has returned.
//!
//! A transaction's commit point is its primary's write record (paper §2.2): once that is written
//! the transaction is committed, and a reader that meets one of its secondary locks rolls the
//! lock forward through the primary. So `commit` need not wait for the secondaries: with
//! [`crate::TxnConfig::background_secondaries`] it returns at the commit point and a task commits
//! the secondaries afterwards, as TiKV's clients do. On a store where each write is a consensus
//! round (etcd, TiKV) that takes a round trip off every multi-row transaction's latency.
//!
//! The work is bounded: at most [`crate::TxnConfig::max_background_commits`] transactions'
//! secondaries are in flight per client. A commit that finds every slot taken waits for one
//! (back pressure, so a fast writer cannot pile up unbounded work). [`crate::Client::shutdown`]
//! and [`crate::Client::finish_background_commits`] wait until every slot is free again; after
//! shutdown the slots are closed and commits commit their secondaries before returning.
//!
//! Why it is safe is in ARCHITECTURE.md ("Secondaries after the return"): the committed
//! transaction's locks are still in place, and a lock whose primary is committed is rolled
//! forward by the first reader that meets it, before the reader reads the cell.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The slots for background secondary commits of one client.
#[derive(Debug)]
pub(crate) struct BackgroundCommits {
    slots: Arc<Semaphore>,
    capacity: u32,
}

impl BackgroundCommits {
    /// `capacity` slots (at least one).
    pub(crate) fn new(capacity: usize) -> Self {
        let capacity = u32::try_from(capacity.max(1)).unwrap_or(u32::MAX);
        Self {
            slots: Arc::new(Semaphore::new(capacity as usize)),
            capacity,
        }
    }

    /// A slot for one transaction's secondaries, waiting while all are taken; `None` once the
    /// client is shut down (the caller then commits them itself).
    pub(crate) async fn slot(&self) -> Option<OwnedSemaphorePermit> {
        Arc::clone(&self.slots).acquire_owned().await.ok()
    }

    /// Waits until every background commit started before this call has finished. The
    /// semaphore is fair, so commits that ask for a slot meanwhile wait behind this call.
    pub(crate) async fn wait_idle(&self) {
        if let Ok(all) = self.slots.acquire_many(self.capacity).await {
            drop(all);
        }
    }

    /// Waits as [`Self::wait_idle`], then closes the slots for good.
    pub(crate) async fn close(&self) {
        self.wait_idle().await;
        self.slots.close();
    }

    /// How many transactions' secondaries are being committed now.
    pub(crate) fn in_flight(&self) -> usize {
        (self.capacity as usize).saturating_sub(self.slots.available_permits())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn waiting_for_idle_waits_for_every_taken_slot() {
        let background = Arc::new(BackgroundCommits::new(2));
        let first = background.slot().await.expect("open");
        let second = background.slot().await.expect("open");
        assert_eq!(background.in_flight(), 2);
        let waiter = tokio::spawn({
            let background = Arc::clone(&background);
            async move { background.wait_idle().await }
        });
        drop(first);
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "one slot is still taken");
        drop(second);
        waiter.await.expect("no panic");
        assert_eq!(background.in_flight(), 0);
    }

    #[tokio::test]
    async fn a_closed_client_gives_no_slots() {
        let background = BackgroundCommits::new(0);
        assert!(background.slot().await.is_some(), "at least one slot");
        background.close().await;
        assert!(background.slot().await.is_none());
        assert_eq!(background.in_flight(), 0);
    }
}
