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
//! Every observer writes a cell that every concurrent run for the same target also writes
//! (`canonical`, `forwarded_to`, the queue cell, the ack), so snapshot isolation serializes
//! them: no write skew between two runs that each read what the other changes.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use futures::future::try_join_all;
use percolator_core::key::prefix_successor;
use percolator_core::{Columns, Error, ObservedColumn, Result, RowStore, Transaction};
use tokio::sync::mpsc::UnboundedSender;

use super::html::parse_page;
use super::postings::{Directory, Held, PostingChunk, RareChunk, rare_limit, rare_row};
use super::schema::*;
use super::terms::{AnchorTerms, CorpusCounts, PageTerms, PageTermsView, Posting};
use percolator_observers::{Change, Observer, Observers};

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
    ]
}

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

/// Parses pages and inverts their links.
#[derive(Debug, Clone, Copy, Default)]
pub struct DocumentProcessor;

#[async_trait]
impl<S: RowStore> Observer<S> for DocumentProcessor {
    fn name(&self) -> &str {
        "document-processor"
    }

    fn observed(&self) -> ObservedColumn {
        ObservedColumn::strong(DOCUMENTS, RAW)
    }

    async fn observe(&self, txn: &mut Transaction<S>, change: &Change) -> Result<()> {
        let url = &change.row;
        let old_links: BTreeMap<String, String> = txn
            .get(DOCUMENTS, url, OUTLINKS)
            .await?
            .map(|b| decode_outlinks(&b).into_iter().collect())
            .unwrap_or_default();
        let old_hash = txn.get(DOCUMENTS, url, HASH).await?;
        let new_links: BTreeMap<String, String> = match &change.value {
            None => {
                for column in [HASH, TITLE, TERMS, OUTLINKS, DECLARED_CANONICAL] {
                    txn.delete(DOCUMENTS, url, column)?;
                }
                BTreeMap::new()
            }
            Some(raw) => {
                let page = parse_page(&String::from_utf8_lossy(url), raw);
                txn.set(DOCUMENTS, url, TITLE, page.title.clone())?;
                txn.set(DOCUMENTS, url, TERMS, page.terms.encode())?;
                let links: BTreeMap<String, String> = page
                    .links
                    .into_iter()
                    .filter(|l| l.target.len() <= MAX_URL_BYTES)
                    .map(|l| (l.target, l.anchor))
                    .collect();
                txn.set(
                    DOCUMENTS,
                    url,
                    OUTLINKS,
                    encode_outlinks(links.iter().map(|(t, a)| (t.as_str(), a.as_str()))),
                )?;
                let old_declared = txn.get(DOCUMENTS, url, DECLARED_CANONICAL).await?;
                let declared_changed =
                    old_declared.as_deref() != page.canonical.as_deref().map(str::as_bytes);
                match &page.canonical {
                    Some(c) if declared_changed => {
                        txn.set(DOCUMENTS, url, DECLARED_CANONICAL, c.clone())?
                    }
                    None if declared_changed => txn.delete(DOCUMENTS, url, DECLARED_CANONICAL)?,
                    _ => {}
                }
                // The clusterer observes the hash: written again when only the declared
                // canonical changed, so that the cluster's canonical is chosen again.
                if declared_changed || old_hash.as_deref() != Some(page.content_hash.as_bytes()) {
                    txn.set(DOCUMENTS, url, HASH, page.content_hash)?;
                }
                links
            }
        };
        let from = from_column(url);
        for target in old_links.keys().filter(|t| !new_links.contains_key(*t)) {
            txn.delete(LINKS, target, &from)?;
            txn.notify(LINKS, target, ANCHORS)?;
        }
        for (target, anchor) in &new_links {
            if old_links.get(target) != Some(anchor) {
                txn.set(LINKS, target, &from, anchor.clone())?;
                txn.notify(LINKS, target, ANCHORS)?;
            }
        }
        Ok(())
    }
}

/// Keeps documents in the cluster of their content hash, with one canonical URL per cluster.
#[derive(Debug, Clone, Default)]
pub struct Clusterer {
    probe: Option<UnboundedSender<Clustered>>,
}

#[async_trait]
impl<S: RowStore> Observer<S> for Clusterer {
    fn name(&self) -> &str {
        "clusterer"
    }

    fn observed(&self) -> ObservedColumn {
        ObservedColumn::strong(DOCUMENTS, HASH)
    }

    async fn observe(&self, txn: &mut Transaction<S>, change: &Change) -> Result<()> {
        let url = &change.row;
        let new = change.value.clone();
        let old = txn.get(DOCUMENTS, url, CLUSTER).await?;
        let declared = match &new {
            Some(_) => txn
                .get(DOCUMENTS, url, DECLARED_CANONICAL)
                .await?
                .unwrap_or_default(),
            None => Bytes::new(),
        };
        if old == new {
            // Same cluster: only what the page declares canonical may have changed.
            if let Some(hash) = &new {
                let row = member_row(hash, url);
                if txn.get(MEMBERS, &row, MEMBER).await?.as_ref() != Some(&declared) {
                    txn.set(MEMBERS, row, MEMBER, declared)?;
                    recanonicalize(txn, hash).await?;
                }
            }
            return Ok(());
        }
        if let Some(old) = &old {
            txn.delete(MEMBERS, member_row(old, url), MEMBER)?;
            recanonicalize(txn, old).await?;
        }
        match &new {
            Some(new) => {
                txn.set(MEMBERS, member_row(new, url), MEMBER, declared)?;
                recanonicalize(txn, new).await?;
                txn.set(DOCUMENTS, url, CLUSTER, new.clone())?;
            }
            None => txn.delete(DOCUMENTS, url, CLUSTER)?,
        }
        // The document's own canonical changed: its anchors go elsewhere now.
        txn.notify(LINKS, url, ANCHORS)?;
        Ok(())
    }

    fn committed(&self, change: &Change) {
        if let Some(probe) = &self.probe {
            let _ = probe.send(Clustered {
                url: change.row.clone(),
                hash: change.value.clone(),
                at: Instant::now(),
            });
        }
    }
}

/// Recomputes the canonical URL of cluster `hash` from its members (including this
/// transaction's own membership changes). The canonical cell is written even when unchanged, so
/// that two concurrent membership changes of one cluster conflict instead of each computing the
/// canonical from a snapshot that misses the other (write skew).
async fn recanonicalize<S: RowStore>(txn: &mut Transaction<S>, hash: &[u8]) -> Result<()> {
    let prefix = members_prefix(hash);
    let rows = scan_prefix(txn, MEMBERS, &prefix, Columns::one(MEMBER)).await?;
    let members: Vec<(Bytes, Bytes)> = rows
        .into_iter()
        .map(|item| (item.row.slice(prefix.len()..), item.value))
        .collect();
    let best = choose_canonical(members.iter().map(|(u, d)| (u, d))).cloned();
    let current = txn.get(CLUSTERS, hash, CANONICAL).await?;
    match best {
        None => {
            if current.is_some() {
                txn.delete(CLUSTERS, hash, CANONICAL)?;
            }
        }
        Some(best) => {
            txn.set(CLUSTERS, hash, CANONICAL, best.clone())?;
            if current.as_ref() != Some(&best) {
                for (member, _) in &members {
                    txn.notify(LINKS, member, ANCHORS)?;
                }
            }
        }
    }
    Ok(())
}

/// The canonical URL of `url`'s cluster, or `url` itself if it is in none (not crawled yet).
pub async fn canonical_of<S: RowStore>(txn: &Transaction<S>, url: &[u8]) -> Result<Bytes> {
    if let Some(hash) = txn.get(DOCUMENTS, url, CLUSTER).await?
        && let Some(canonical) = txn.get(CLUSTERS, &hash, CANONICAL).await?
    {
        return Ok(canonical);
    }
    Ok(Bytes::copy_from_slice(url))
}

/// Forwards a link target's anchor text to its canonical duplicate.
#[derive(Debug, Clone, Copy, Default)]
pub struct LinkForwarder;

#[async_trait]
impl<S: RowStore> Observer<S> for LinkForwarder {
    fn name(&self) -> &str {
        "link-forwarder"
    }

    fn observed(&self) -> ObservedColumn {
        ObservedColumn::weak(LINKS, ANCHORS)
    }

    async fn observe(&self, txn: &mut Transaction<S>, change: &Change) -> Result<()> {
        let target = &change.row;
        let mut anchors = AnchorTerms::default();
        let (mut forwarded_to, mut forwarded) = (None, None);
        for item in scan_row(txn, LINKS, target).await? {
            if item.column.starts_with(FROM_PREFIX) {
                anchors.apply(&item.value, 1);
            } else if item.column.as_ref() == FORWARDED_TO {
                forwarded_to = Some(item.value);
            } else if item.column.as_ref() == FORWARDED {
                forwarded = Some(AnchorTerms::decode(&item.value));
            }
        }
        // One anchor per page linking here.
        let linked = anchors.anchors > 0;
        let canonical = canonical_of(txn, target).await?;
        // What this run changes in each canonical's anchor terms: what the target added before
        // is taken back where it went, and what it adds now goes to its canonical.
        let mut deltas: BTreeMap<Bytes, AnchorTerms> = BTreeMap::new();
        if let (Some(old), Some(before)) = (&forwarded_to, &forwarded) {
            deltas
                .entry(old.clone())
                .or_default()
                .merge(&before.negated());
        }
        if linked {
            deltas.entry(canonical.clone()).or_default().merge(&anchors);
        }
        for (row, delta) in deltas {
            if delta.is_empty() {
                continue;
            }
            let mut summary = txn
                .get(ANCHOR_TERMS, &row, SUMMARY)
                .await?
                .map(|b| AnchorTerms::decode(&b))
                .unwrap_or_default();
            summary.merge(&delta);
            if summary.anchors <= 0 && summary.terms.is_empty() {
                txn.delete(ANCHOR_TERMS, &row, SUMMARY)?;
            } else {
                txn.set(ANCHOR_TERMS, &row, SUMMARY, summary.encode())?;
            }
        }
        if linked {
            // Written every run: concurrent runs for one target conflict (see the module docs).
            txn.set(LINKS, target, FORWARDED_TO, canonical)?;
            if forwarded.as_ref() != Some(&anchors) {
                txn.set(LINKS, target, FORWARDED, anchors.encode())?;
            }
        } else {
            if forwarded_to.is_some() {
                txn.delete(LINKS, target, FORWARDED_TO)?;
            }
            if forwarded.is_some() {
                txn.delete(LINKS, target, FORWARDED)?;
            }
        }
        Ok(())
    }
}

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

/// The pipeline's tables in stage order, for [`percolator_observers::RuntimeConfig::stages`]:
/// pages are parsed and clustered (`documents`) before clusters are exported (`clusters`),
/// link targets forwarded (`links`) and chunks inverted (`index_queue`, on its batch timers
/// anyway). Scanners that drain each stage first forward a link target once, after its
/// anchors have arrived, instead of again as each one arrives; and exports come before
/// forwarding, so that the inverters' chunks are built while the forwarders run.
pub const SCAN_STAGES: [&[u8]; 4] = [DOCUMENTS, CLUSTERS, LINKS, INDEX_QUEUE];

/// The most queued clusters one inverter run applies (one chunk); more are left for the next
/// run, which the run notifies.
pub const INVERT_BATCH: usize = 1024;
/// How long a shard's queue collects clusters before its inverter runs
/// ([`Observer::batch_delay`]): the index lags the documents by about this much, and chunks
/// are as large as what the exporters queue meanwhile.
pub const INVERT_DELAY: Duration = Duration::from_secs(2);

/// Rows an inverter run writes besides terms and clusters: the queue row, the corpus row, the
/// new chunk's directory, and old chunks' directories (a few).
const BOOKKEEPING_ROWS: usize = 8;

/// Turns a shard's queued clusters into a new posting chunk, removes the postings of the
/// clusters that changed or left from the chunks holding them, and updates the shard's corpus
/// counts (see [`crate::postings`]).
#[derive(Debug, Clone, Copy)]
pub struct Inverter {
    /// Its [`Observer::batch_delay`].
    pub delay: Duration,
}

/// A queued cluster as an inverter run sees it.
struct QueuedCluster {
    hash: Bytes,
    /// What the index holds for it.
    old: Option<PageTerms>,
    /// What it should hold: its `exported` cell (decoded one cluster at a time, to keep a
    /// batch's memory small).
    exported: Option<Bytes>,
    /// The chunk holding its postings.
    posted: Option<Bytes>,
}

fn lossy(b: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(b)
}

#[async_trait]
impl<S: RowStore> Observer<S> for Inverter {
    fn name(&self) -> &str {
        "inverter"
    }

    fn observed(&self) -> ObservedColumn {
        ObservedColumn::weak(INDEX_QUEUE, INVERT)
    }

    fn batch_delay(&self) -> Duration {
        self.delay
    }

    async fn observe(&self, txn: &mut Transaction<S>, change: &Change) -> Result<()> {
        let row = change.row.clone();
        let Some(shard) = (0..INDEX_SHARDS).find(|s| shard_key(*s) == row) else {
            return Err(Error::Corrupt(format!(
                "index_queue row {:?} is not an index shard",
                lossy(&row)
            )));
        };
        // Batches fit the store's limits: the queue row takes a delete per cluster (two store
        // operations each in prewrite) and the run's own notification; the transaction's rows
        // are the touched terms, the clusters and the shard's few bookkeeping rows.
        let limits = txn.store_limits();
        let max_clusters = INVERT_BATCH
            .min(limits.max_row_ops.saturating_sub(3) / 2)
            .max(1);
        let (queued, mut more) = read_queue(txn, &row, max_clusters).await?;
        if queued.is_empty() {
            return Ok(());
        }
        let next_chunk: u64 = match txn.get(CORPUS, &row, NEXT_CHUNK).await? {
            Some(b) => std::str::from_utf8(&b)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| {
                    Error::Corrupt(format!("corpus {:?} next_chunk is {b:?}", lossy(&row)))
                })?,
            None => 0,
        };
        let chunk = chunk_key(shard, next_chunk);

        let mut directory = Directory::default();
        // term -> the new chunk's postings, in slot order
        // (foldhash maps are seeded per process: the terms are crawled text)
        let mut added: foldhash::HashMap<String, Vec<(u32, Posting)>> = Default::default();
        // chunk -> (cluster, the terms it has postings for there)
        let mut removed: BTreeMap<Bytes, Vec<(Bytes, PageTerms)>> = BTreeMap::new();
        let mut corpus = CorpusCounts::default();
        // Term rows the removals touch (besides those of `added`).
        let mut removed_terms: foldhash::HashSet<String> = Default::default();
        for (taken, cluster) in queued.into_iter().enumerate() {
            // The exported terms, read in place; a cell in another form than the document
            // processor writes is decoded and read in its re-encoded form.
            let reencoded;
            let new = match cluster.exported.as_deref().map(exported_terms) {
                None => None,
                Some(cell) => Some(match PageTermsView::parse(cell) {
                    Some(view) => view,
                    None => {
                        reencoded = PageTerms::decode(cell).encode();
                        PageTermsView::parse(&reencoded).ok_or_else(|| {
                            Error::Corrupt(format!(
                                "cluster {:?}: exported terms do not re-encode",
                                lossy(&cluster.hash)
                            ))
                        })?
                    }
                }),
            };
            // A term both in `old` and `new` counts twice: an overestimate, which is safe. The
            // terms already counted are looked up only when the cluster's terms might not fit
            // (embedded stores have no row limit to speak of).
            let fits = {
                let rows = added.len()
                    + removed_terms.len()
                    + 2 * (taken + 1)
                    + removed.len()
                    + BOOKKEEPING_ROWS;
                let old_terms = cluster.old.iter().flat_map(|t| t.counts.keys());
                let new_terms = new.iter().flat_map(|v| v.iter().map(|(t, _)| t));
                rows + cluster.old.as_ref().map_or(0, |t| t.counts.len())
                    + new.as_ref().map_or(0, PageTermsView::len)
                    <= limits.max_batch_rows
                    || rows
                        + old_terms
                            .map(String::as_str)
                            .chain(new_terms)
                            .filter(|t| !added.contains_key(*t) && !removed_terms.contains(*t))
                            .count()
                        <= limits.max_batch_rows
            };
            if taken > 0 && !fits {
                more = true; // the rest waits for the next run
                break;
            }
            txn.delete(INDEX_QUEUE, &row, queued_column(&cluster.hash))?;
            let unchanged = match (&cluster.old, &new) {
                (None, None) => true,
                (Some(old), Some(new)) => new.same_as(old),
                _ => false,
            };
            if unchanged {
                continue; // e.g. the canonical moved to a duplicate: same text
            }
            if let Some(old) = cluster.old {
                let Some(posted) = cluster.posted else {
                    return Err(Error::Corrupt(format!(
                        "cluster {:?} is queued as indexed but names no chunk",
                        lossy(&cluster.hash)
                    )));
                };
                corpus = corpus.plus(CorpusCounts {
                    documents: -1,
                    length: -i64::from(old.length),
                });
                removed_terms.extend(
                    old.counts
                        .keys()
                        .filter(|t| !added.contains_key(*t))
                        .cloned(),
                );
                removed
                    .entry(posted)
                    .or_default()
                    .push((cluster.hash.clone(), old));
            }
            match new {
                Some(new) => {
                    let slot = u32::try_from(directory.clusters.len()).unwrap_or(u32::MAX);
                    directory.clusters.push(cluster.hash.clone());
                    corpus = corpus.plus(CorpusCounts {
                        documents: 1,
                        length: i64::from(new.length),
                    });
                    for (term, counts) in new.iter() {
                        let posting = (
                            slot,
                            Posting {
                                counts,
                                length: new.length,
                            },
                        );
                        // An owned key only for a term new to the batch.
                        match added.get_mut(term) {
                            Some(postings) => postings.push(posting),
                            None => {
                                added.insert(term.to_owned(), vec![posting]);
                            }
                        }
                    }
                    txn.set(CLUSTERS, &cluster.hash, POSTED, chunk.clone())?;
                }
                None => txn.delete(CLUSTERS, &cluster.hash, POSTED)?,
            }
        }
        for (old_chunk, clusters) in removed {
            remove_postings(txn, &old_chunk, clusters).await?;
        }
        if !directory.clusters.is_empty() {
            // Blind writes: nothing was ever written under the new chunk's key. A term with
            // few postings here shares its bucket's cell: most of a batch's terms are rare, and
            // each cell costs a lock, a write record and its flush and compaction.
            let mut rare: BTreeMap<Bytes, RareChunk> = BTreeMap::new();
            let rare_below = rare_limit(directory.clusters.len());
            for (term, postings) in added {
                if postings.len() < rare_below {
                    let postings = PostingChunk {
                        postings: postings.into_iter().collect(),
                    };
                    rare.entry(rare_row(&term))
                        .or_default()
                        .terms
                        .insert(term, postings);
                } else {
                    let cell = PostingChunk::encode_sorted(postings.into_iter());
                    txn.set(INDEX, term.as_str(), &chunk, cell)?;
                }
            }
            for (row, bucket) in rare {
                txn.set(INDEX, &row, &chunk, bucket.encode())?;
            }
            txn.set(INDEX_DOCS, &chunk, CHUNK_CLUSTERS, directory.encode())?;
            txn.set(CORPUS, &row, NEXT_CHUNK, (next_chunk + 1).to_string())?;
        }
        if corpus != CorpusCounts::default() {
            let now = txn
                .get(CORPUS, &row, COUNTS)
                .await?
                .map(|b| CorpusCounts::decode(&b))
                .unwrap_or_default()
                .plus(corpus);
            txn.set(CORPUS, &row, COUNTS, now.encode())?;
        }
        if more {
            txn.notify(INDEX_QUEUE, &row, INVERT)?;
        }
        Ok(())
    }
}

/// The first `limit` clusters queued in shard row `row`, with what the index holds for each and
/// what it should hold, and whether more are queued.
async fn read_queue<S: RowStore>(
    txn: &Transaction<S>,
    row: &Bytes,
    limit: usize,
) -> Result<(Vec<QueuedCluster>, bool)> {
    let mut queued = Vec::new();
    let mut more = false;
    for item in scan_row(txn, INDEX_QUEUE, row).await? {
        if queued.len() == limit {
            more |= item.column.starts_with(QUEUED_PREFIX);
            continue;
        }
        let Some(hash) = item.column.strip_prefix(QUEUED_PREFIX) else {
            continue; // the trigger's notifications, the inverter's ack
        };
        let hash = Bytes::copy_from_slice(hash);
        if shard_of(&hash) != row {
            return Err(Error::Corrupt(format!(
                "index_queue row {:?} queues cluster {:?} of another shard",
                lossy(row),
                lossy(&hash)
            )));
        }
        let old = match Held::decode(&item.value) {
            Some(Held::Terms(terms)) => Some(terms),
            Some(Held::Nothing) => None,
            None => {
                return Err(Error::Corrupt(format!(
                    "index_queue cell {:?}/{:?} is not a held state",
                    lossy(row),
                    lossy(&item.column)
                )));
            }
        };
        queued.push(QueuedCluster {
            hash,
            old,
            exported: None,
            posted: None,
        });
    }
    let states = try_join_all(queued.iter().map(|cluster| async move {
        let exported = txn.get(CLUSTERS, &cluster.hash, EXPORTED).await?;
        let posted = txn.get(CLUSTERS, &cluster.hash, POSTED).await?;
        Ok::<_, Error>((exported, posted))
    }))
    .await?;
    for (cluster, (exported, posted)) in queued.iter_mut().zip(states) {
        cluster.exported = exported;
        cluster.posted = posted;
    }
    Ok((queued, more))
}

/// Removes the postings of `clusters` (each with the terms it was inverted with) from chunk
/// `chunk`, and empties their slots in its directory.
async fn remove_postings<S: RowStore>(
    txn: &mut Transaction<S>,
    chunk: &Bytes,
    clusters: Vec<(Bytes, PageTerms)>,
) -> Result<()> {
    let corrupt = |what: String| Error::Corrupt(format!("index chunk {:?}: {what}", lossy(chunk)));
    let mut directory = txn
        .get(INDEX_DOCS, chunk, CHUNK_CLUSTERS)
        .await?
        .map(|b| Directory::decode(&b))
        .ok_or_else(|| corrupt("no directory".into()))?;
    let mut slots: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for (hash, terms) in clusters {
        let slot = directory
            .clusters
            .iter()
            .position(|c| *c == hash)
            .ok_or_else(|| corrupt(format!("cluster {:?} is not in it", lossy(&hash))))?;
        directory.clusters[slot] = Bytes::new();
        let slot = u32::try_from(slot).map_err(|_| corrupt("too many slots".into()))?;
        for term in terms.counts.into_keys() {
            slots.entry(term).or_default().push(slot);
        }
    }
    // A term's postings in a chunk are in its own cell, or else in its bucket's.
    let mut rare: BTreeMap<Bytes, Vec<(String, Vec<u32>)>> = BTreeMap::new();
    for (term, slots) in slots {
        let Some(cell) = txn.get(INDEX, term.as_str(), chunk).await? else {
            rare.entry(rare_row(&term)).or_default().push((term, slots));
            continue;
        };
        let mut postings =
            PostingChunk::decode(&cell).map_err(|e| corrupt(format!("term {term:?}: {e}")))?;
        for slot in slots {
            postings.postings.remove(&slot);
        }
        if postings.is_empty() {
            txn.delete(INDEX, term.as_str(), chunk)?;
        } else {
            txn.set(INDEX, term.as_str(), chunk, postings.encode())?;
        }
    }
    for (row, terms) in rare {
        let Some(cell) = txn.get(INDEX, &row, chunk).await? else {
            continue;
        };
        let mut bucket = RareChunk::decode(&cell)
            .map_err(|e| corrupt(format!("bucket {:?}: {e}", lossy(&row))))?;
        for (term, slots) in terms {
            if let Some(postings) = bucket.terms.get_mut(&term) {
                for slot in slots {
                    postings.postings.remove(&slot);
                }
                if postings.is_empty() {
                    bucket.terms.remove(&term);
                }
            }
        }
        if bucket.terms.is_empty() {
            txn.delete(INDEX, &row, chunk)?;
        } else {
            txn.set(INDEX, &row, chunk, bucket.encode())?;
        }
    }
    if directory.clusters.iter().all(Bytes::is_empty) {
        txn.delete(INDEX_DOCS, chunk, CHUNK_CLUSTERS)?;
    } else {
        txn.set(INDEX_DOCS, chunk, CHUNK_CLUSTERS, directory.encode())?;
    }
    Ok(())
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
