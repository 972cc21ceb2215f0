//! The document processor: the first stage, turning a page's raw HTML into the cells the
//! later stages read (title, terms, outgoing links, declared canonical, content hash) and
//! inverting its links into the `links` rows of their targets.

use std::collections::BTreeMap;

use async_trait::async_trait;
use percolator_core::{ObservedColumn, Result, RowStore, Transaction};
use percolator_observers::{Change, Observer};

use crate::html::parse_page;
use crate::raw;
use crate::schema::*;
use crate::sizes::{self, SizeCounts};

/// `n` as a count delta.
fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
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
        // The page's cells this run compares against, in one read.
        let [old_links, old_hash, old_declared]: [Option<bytes::Bytes>; 3] = txn
            .get_many([OUTLINKS, HASH, DECLARED_CANONICAL].map(|c| (DOCUMENTS, url.as_ref(), c)))
            .await?
            .try_into()
            .map_err(|_| percolator_core::Error::Corrupt("a batch read lost cells".into()))?;
        let old_links: BTreeMap<String, String> = old_links
            .map(|b| decode_outlinks(&b).into_iter().collect())
            .unwrap_or_default();
        let new_links: BTreeMap<String, String> = match &change.value {
            None => {
                for column in [HASH, TITLE, TERMS, OUTLINKS, DECLARED_CANONICAL] {
                    txn.delete(DOCUMENTS, url, column)?;
                }
                BTreeMap::new()
            }
            Some(cell) => {
                let page = parse_page(&String::from_utf8_lossy(url), &raw::html_or_stored(cell));
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
        // A page parsed for the first time, or deleted, changes the documents counted; the
        // links it adds or drops, the inlinks.
        let documents = i64::from(change.value.is_some()) - i64::from(old_hash.is_some());
        let inlinks = count(new_links.len()) - count(old_links.len());
        sizes::add(
            txn,
            SizeCounts {
                documents,
                inlinks,
                link_targets: 0,
                ..SizeCounts::default()
            },
        )?;
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
