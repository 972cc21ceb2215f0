//! The exporter: records a cluster's canonical document and its terms, and queues the cluster
//! for the inverter of its index shard, with what the index holds for it.

use async_trait::async_trait;
use percolator_core::{ObservedColumn, Result, RowStore, Transaction};
use percolator_observers::{Change, Observer};

use crate::postings::Held;
use crate::schema::*;

/// Queues each cluster whose canonical document changed for the inverter of its index shard.
#[derive(Debug, Clone, Copy, Default)]
pub struct Exporter;

#[async_trait]
impl<S: RowStore> Observer<S> for Exporter {
    fn name(&self) -> &str {
        "exporter"
    }

    fn observed(&self) -> ObservedColumn {
        ObservedColumn::strong(CLUSTERS, CANONICAL)
    }

    async fn observe(&self, txn: &mut Transaction<S>, change: &Change) -> Result<()> {
        let hash = &change.row;
        let old = txn.get(CLUSTERS, hash, EXPORTED).await?;
        let new = match &change.value {
            Some(url) => {
                let terms = txn.get(DOCUMENTS, url, TERMS).await?.unwrap_or_default();
                Some(encode_exported(url, &terms))
            }
            None => None,
        };
        if old == new {
            return Ok(());
        }
        match &new {
            Some(exported) => txn.set(CLUSTERS, hash, EXPORTED, exported.clone())?,
            None => txn.delete(CLUSTERS, hash, EXPORTED)?,
        }
        let row = shard_of(hash);
        let column = queued_column(hash);
        // A cluster still queued keeps what its queue cell says the index holds; otherwise the
        // index holds what was exported before.
        let held = match txn.get(INDEX_QUEUE, &row, &column).await? {
            Some(queued) => queued,
            None => match &old {
                Some(old) => Held::Terms(decode_exported(old).1).encode(),
                None => Held::Nothing.encode(),
            },
        };
        // Written even when unchanged: it conflicts with an inverter taking the cell from the
        // queue with an older `exported` in its snapshot.
        txn.set(INDEX_QUEUE, &row, &column, held)?;
        txn.notify(INDEX_QUEUE, &row, INVERT)?;
        Ok(())
    }
}
