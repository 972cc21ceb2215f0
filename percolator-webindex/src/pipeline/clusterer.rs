//! The clusterer: keeps each document in the cluster of its content hash and each cluster's
//! canonical URL chosen from its members, and notifies the link targets whose anchors must be
//! forwarded anew when a canonical changes.

use std::time::Instant;

use async_trait::async_trait;
use bytes::Bytes;
use percolator_core::{Columns, ObservedColumn, Result, RowStore, Transaction};
use percolator_observers::{Change, Observer};
use tokio::sync::mpsc::UnboundedSender;

use super::{Clustered, scan_prefix};
use crate::schema::*;

/// Keeps documents in the cluster of their content hash, with one canonical URL per cluster.
#[derive(Debug, Clone, Default)]
pub struct Clusterer {
    pub(super) probe: Option<UnboundedSender<Clustered>>,
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
