//! The five observers of the web-indexing pipeline (paper §2.4 and Figure 2's indexing system):
//!
//! 1. [`DocumentProcessor`] (strong, `documents:raw`): parses the HTML, writes title, terms,
//!    outgoing links and the content hash; inverts links by writing the anchor text into the
//!    link target's `links` row, and weakly notifies the target.
//! 2. [`Clusterer`] (strong, `documents:hash`): moves the document into the cluster of its new
//!    content hash and keeps one canonical URL per cluster ([`choose_canonical`]: the member its
//!    duplicates declare with `<link rel="canonical">`, else the best [`canonical_rank`]). When a
//!    cluster's canonical changes, every member's anchors must be forwarded anew, so it notifies
//!    their `links` rows.
//! 3. [`LinkForwarder`] (weak, `links:anchors`): adds the terms of a target's anchor texts to
//!    the anchor terms (`anchor_terms`) of the target's canonical duplicate, taking back what it
//!    added before (the target's `forwarded` cell), there or at a former canonical. The anchor
//!    texts themselves stay in the target's `links` row: a copy per anchor at the canonical
//!    would cost a write per link and a scan of every anchor at the canonical per run.
//! 4. [`Exporter`] (strong, `clusters:canonical`): records the cluster's canonical document and
//!    its terms (`clusters:exported`) and queues the cluster in its index shard
//!    (`index_queue`), weakly notifying the shard.
//! 5. [`Inverter`] (weak, `index_queue:invert`, after a batch delay): turns up to
//!    [`INVERT_BATCH`] queued clusters of one shard into a new posting chunk (`index`,
//!    `index_docs`) and updates the shard's corpus counts (`corpus`) in one transaction. A
//!    term's postings for a whole batch cost one write instead of one per document: this is
//!    what keeps indexing throughput flat as the backlog grows (see [`crate::postings`]). A
//!    document is searchable once its shard's inverter has run.
//!
//!
//! A sixth, [`SizeFolder`] (weak, `sizes:fold`, after a batch delay), keeps the index's sizes
//! readable in a few cells: the document processor and the link forwarder add what they
//! change to the sizes as cells of their own, which it folds into totals (see
//! [`crate::sizes`]).
//!
//! Every observer writes a cell that every concurrent run for the same target also writes
//! (`canonical`, `forwarded_to`, the queue cell, the ack), so snapshot isolation serializes
//! them: no write skew between two runs that each read what the other changes.

mod clusterer;
mod document_processor;
mod exporter;
mod inverter;
mod link_forwarder;
mod size_folder;

use std::time::{Duration, Instant};

use bytes::Bytes;
use percolator_core::backend::key::prefix_successor;
use percolator_core::{Columns, ObservedColumn, Result, RowStore, Transaction};
use percolator_observers::Observers;
use tokio::sync::mpsc::UnboundedSender;

use crate::schema::*;
use crate::sizes::{FOLD, SIZES};

pub use clusterer::{Clusterer, canonical_of};
pub use document_processor::DocumentProcessor;
pub use exporter::Exporter;
pub use inverter::{INVERT_BATCH, INVERT_DELAY, Inverter};
pub use link_forwarder::LinkForwarder;
pub use size_folder::{FOLD_BATCH, FOLD_DELAY, SizeFolder};

/// A document reached its clustered state: sent by the clusterer after its commit (for the
/// freshness experiment).
#[derive(Debug, Clone)]
pub struct Clustered {
    /// Document URL.
    pub url: Bytes,
    /// The cluster (content hash) it is now in; `None` if it left every cluster.
    pub hash: Option<Bytes>,
    /// When the clusterer's transaction committed.
    pub at: Instant,
}

/// How the pipeline's observers behave.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PipelineConfig {
    /// How long a shard's queue collects clusters before its inverter runs (default
    /// [`INVERT_DELAY`]): larger chunks and fewer index writes against a staler index.
    pub invert_delay: Duration,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        Self {
            invert_delay: INVERT_DELAY,
        }
    }
}

impl PipelineConfig {
    /// Sets [`Self::invert_delay`].
    #[must_use]
    pub fn with_invert_delay(mut self, delay: Duration) -> Self {
        self.invert_delay = delay;
        self
    }
}

/// The pipeline's observers, with an optional probe receiving [`Clustered`] events.
pub fn observers<S: RowStore>(probe: Option<UnboundedSender<Clustered>>) -> Observers<S> {
    observers_with(probe, &PipelineConfig::default())
}

/// [`observers`] configured by `config`.
pub fn observers_with<S: RowStore>(
    probe: Option<UnboundedSender<Clustered>>,
    config: &PipelineConfig,
) -> Observers<S> {
    let mut observers = Observers::new();
    // Names are unique and tables valid by construction: registration cannot fail.
    let _ = observers.register(DocumentProcessor);
    let _ = observers.register(Clusterer { probe });
    let _ = observers.register(LinkForwarder);
    let _ = observers.register(Exporter);
    let _ = observers.register(Inverter {
        delay: config.invert_delay,
    });
    let _ = observers.register(SizeFolder);
    observers
}

/// The columns loaders must declare ([`percolator_core::ClientBuilder::observe_all`]): the
/// observers' columns (a test keeps the two lists equal).
pub fn observed_columns() -> Vec<ObservedColumn> {
    vec![
        ObservedColumn::strong(DOCUMENTS, RAW),
        ObservedColumn::strong(DOCUMENTS, HASH),
        ObservedColumn::weak(LINKS, ANCHORS),
        ObservedColumn::strong(CLUSTERS, CANONICAL),
        ObservedColumn::weak(INDEX_QUEUE, INVERT),
        ObservedColumn::weak(SIZES, FOLD),
    ]
}

/// The pipeline's tables in stage order, for [`percolator_observers::RuntimeConfig::stages`]:
/// pages are parsed and clustered (`documents`) before clusters are exported (`clusters`),
/// link targets forwarded (`links`) and chunks inverted (`index_queue`, on its batch timers
/// anyway). Scanners that drain each stage first forward a link target once, after its
/// anchors have arrived, instead of again as each one arrives; and exports come before
/// forwarding, so that the inverters' chunks are built while the forwarders run. The sizes
/// come last: their folders only add up.
pub const SCAN_STAGES: [&[u8]; 5] = [DOCUMENTS, CLUSTERS, LINKS, INDEX_QUEUE, SIZES];

/// Cells of `table` whose row starts with `prefix`, restricted to `columns`.
async fn scan_prefix<S: RowStore>(
    txn: &Transaction<S>,
    table: &[u8],
    prefix: &[u8],
    columns: Columns,
) -> Result<Vec<percolator_core::ScanItem>> {
    let start = Bytes::copy_from_slice(prefix);
    match prefix_successor(prefix) {
        Some(end) => txn.scan(table, start..Bytes::from(end), columns).await,
        None => txn.scan(table, start.., columns).await,
    }
}

/// All columns of one row.
async fn scan_row<S: RowStore>(
    txn: &Transaction<S>,
    table: &[u8],
    row: &[u8],
) -> Result<Vec<percolator_core::ScanItem>> {
    let row = Bytes::copy_from_slice(row);
    txn.scan(table, row.clone()..=row, Columns::All).await
}

fn lossy(b: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_columns_match_the_observers() {
        let mut from_observers =
            observers::<percolator_backend_mem::MemStore>(None).observed_columns();
        let mut declared = observed_columns();
        from_observers.sort_by(|a, b| (&a.table, &a.column).cmp(&(&b.table, &b.column)));
        declared.sort_by(|a, b| (&a.table, &a.column).cmp(&(&b.table, &b.column)));
        assert_eq!(declared, from_observers);
    }
}
