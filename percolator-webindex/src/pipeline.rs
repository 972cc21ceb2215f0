//! The four observers of the web-indexing pipeline (paper §2.4 and Figure 2's indexing system):
//!
//! 1. [`DocumentProcessor`] (strong, `documents:raw`): parses the HTML, writes title, terms,
//!    outgoing links and the content hash; inverts links by writing the anchor text into the
//!    link target's `links` row, and weakly notifies the target.
//! 2. [`Clusterer`] (strong, `documents:hash`): moves the document into the cluster of its new
//!    content hash and keeps one canonical URL per cluster ([`choose_canonical`]: the member its
//!    duplicates declare with `<link rel="canonical">`, else the best [`canonical_rank`]). When a
//!    cluster's canonical changes, every member's anchors must be forwarded anew, so it notifies
//!    their `links` rows.
//! 3. [`LinkForwarder`] (weak, `links:anchors`): attaches a target's anchor text to the target's
//!    canonical duplicate (`inlinks`), removing what it forwarded elsewhere before, and keeps
//!    each canonical's anchor term counts (`anchor_terms`) in step.
//! 4. [`Exporter`] (strong, `clusters:canonical`): keeps the term index (`index`: term →
//!    canonical URLs, with the term's counts) and the corpus counts (`corpus`) in step with each
//!    cluster's canonical document.
//!
//! Every observer writes a cell that every concurrent run for the same target also writes
//! (`canonical`, `forwarded_to`, the ack), so snapshot isolation serializes them: no write skew
//! between two runs that each read what the other changes.

use std::collections::BTreeMap;
use std::time::Instant;

use async_trait::async_trait;
use bytes::Bytes;
use percolator_core::key::prefix_successor;
use percolator_core::{Columns, ObservedColumn, Result, RowStore, Transaction};
use tokio::sync::mpsc::UnboundedSender;

use super::html::parse_page;
use super::schema::*;
use super::terms::{AnchorTerms, CorpusCounts, PageTerms};
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

/// The pipeline's observers, with an optional probe receiving [`Clustered`] events.
pub fn observers<S: RowStore>(probe: Option<UnboundedSender<Clustered>>) -> Observers<S> {
    let mut observers = Observers::new();
    // Names are unique and tables valid by construction: registration cannot fail.
    let _ = observers.register(DocumentProcessor);
    let _ = observers.register(Clusterer { probe });
    let _ = observers.register(LinkForwarder);
    let _ = observers.register(Exporter);
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
        let mut desired: BTreeMap<Bytes, Bytes> = BTreeMap::new();
        let mut forwarded_to = None;
        for item in scan_row(txn, LINKS, target).await? {
            if let Some(source) = item.column.strip_prefix(FROM_PREFIX) {
                desired.insert(inlink_column(target, source), item.value);
            } else if item.column.as_ref() == FORWARDED_TO {
                forwarded_to = Some(item.value);
            }
        }
        let canonical = canonical_of(txn, target).await?;
        let prefix = inlink_prefix(target);
        // What this run changes in each canonical's anchor terms.
        let mut deltas: BTreeMap<Bytes, AnchorTerms> = BTreeMap::new();
        if let Some(old) = forwarded_to.as_ref().filter(|old| **old != canonical) {
            let delta = deltas.entry(old.clone()).or_default();
            for item in scan_row(txn, INLINKS, old).await? {
                if item.column.starts_with(&prefix) {
                    txn.delete(INLINKS, old, &item.column)?;
                    delta.apply(&item.value, -1);
                }
            }
        }
        let mut existing: BTreeMap<Bytes, Bytes> = BTreeMap::new();
        for item in scan_row(txn, INLINKS, &canonical).await? {
            if item.column.starts_with(&prefix) {
                existing.insert(item.column, item.value);
            }
        }
        let delta = deltas.entry(canonical.clone()).or_default();
        for (column, anchor) in existing.iter().filter(|(c, _)| !desired.contains_key(*c)) {
            txn.delete(INLINKS, &canonical, column)?;
            delta.apply(anchor, -1);
        }
        for (column, anchor) in &desired {
            let old = existing.get(column);
            if old != Some(anchor) {
                txn.set(INLINKS, &canonical, column, anchor.clone())?;
                if let Some(old) = old {
                    delta.apply(old, -1);
                }
                delta.apply(anchor, 1);
            }
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
        if desired.is_empty() {
            if forwarded_to.is_some() {
                txn.delete(LINKS, target, FORWARDED_TO)?;
            }
        } else {
            // Written every run: concurrent runs for one target conflict (see the module docs).
            txn.set(LINKS, target, FORWARDED_TO, canonical)?;
        }
        Ok(())
    }
}

/// Keeps the term index in step with each cluster's canonical document.
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
        let (old_url, old_terms) = match txn.get(CLUSTERS, hash, EXPORTED).await? {
            Some(b) => {
                let (url, terms) = decode_exported(&b);
                (Some(url), terms)
            }
            None => (None, PageTerms::default()),
        };
        let (new_url, new_cell) = match &change.value {
            Some(url) => (
                Some(url.clone()),
                txn.get(DOCUMENTS, url, TERMS).await?.unwrap_or_default(),
            ),
            None => (None, Bytes::new()),
        };
        let new_terms = PageTerms::decode(&new_cell);
        if old_url == new_url && old_terms == new_terms {
            return Ok(());
        }
        // Postings name the cluster: a new canonical of the same cluster has the same text, so
        // only terms that differ (or whose counts do) are written.
        let column = index_column(hash);
        let new_postings: BTreeMap<&str, Bytes> = if new_url.is_some() {
            new_terms.postings().collect()
        } else {
            BTreeMap::new()
        };
        if old_url.is_some() {
            for term in old_terms.counts.keys() {
                if !new_postings.contains_key(term.as_str()) {
                    txn.delete(INDEX, term.as_str(), &column)?;
                }
            }
        }
        let old_postings: BTreeMap<&str, Bytes> = if old_url.is_some() {
            old_terms.postings().collect()
        } else {
            BTreeMap::new()
        };
        for (term, posting) in &new_postings {
            if old_postings.get(term) != Some(posting) {
                txn.set(INDEX, *term, &column, posting.clone())?;
            }
        }
        let mut corpus = CorpusCounts::default();
        if old_url.is_some() {
            corpus = corpus.plus(CorpusCounts {
                documents: -1,
                length: -i64::from(old_terms.length),
            });
        }
        match &new_url {
            Some(new_url) => {
                txn.set(
                    CLUSTERS,
                    hash,
                    EXPORTED,
                    encode_exported(new_url, &new_cell),
                )?;
                corpus = corpus.plus(CorpusCounts {
                    documents: 1,
                    length: i64::from(new_terms.length),
                });
            }
            None => txn.delete(CLUSTERS, hash, EXPORTED)?,
        }
        if corpus != CorpusCounts::default() {
            let row = corpus_row(hash);
            let now = txn
                .get(CORPUS, &row, COUNTS)
                .await?
                .map(|b| CorpusCounts::decode(&b))
                .unwrap_or_default()
                .plus(corpus);
            txn.set(CORPUS, row, COUNTS, now.encode())?;
        }
        Ok(())
    }
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
