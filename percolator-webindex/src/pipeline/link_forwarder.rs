//! The link forwarder: adds the terms of a link target's anchors to the anchor terms of the
//! target's canonical duplicate, taking back what it added before, so that a canonical's
//! anchor terms cover the links to every member of its cluster.

use std::collections::BTreeMap;

use async_trait::async_trait;
use bytes::Bytes;
use percolator_core::{ObservedColumn, Result, RowStore, Transaction};
use percolator_observers::{Change, Observer};

use super::clusterer::canonical_of;
use super::scan_row;
use crate::schema::*;
use crate::sizes::{self, SizeCounts};
use crate::terms::AnchorTerms;

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
        // A target that gains its first anchor or loses its last changes the targets counted.
        sizes::add(
            txn,
            SizeCounts {
                link_targets: i64::from(linked) - i64::from(forwarded_to.is_some()),
                ..SizeCounts::default()
            },
        )?;
        if linked {
            // Written every run: concurrent runs for one target conflict (see the pipeline docs).
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
