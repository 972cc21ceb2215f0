//! Invariants 3 and 5: link targets forward their anchors' terms to their canonicals, and each
//! canonical's anchor terms add up what is forwarded to it. The link forwarder maintains both
//! in one transaction per link target; both are checked a target or a canonical at a time, the
//! anchor terms by their prints.

use std::collections::{BTreeSet, HashMap};

use bytes::Bytes;
use percolator_core::{Result, RowStore, Transaction};

use super::IndexSummary;
use super::violations::{Violations, at, cell, escaped};
use super::walk::{ProgressFn, Walk, for_each_item};
use crate::schema::*;
use crate::terms::AnchorTerms;

/// One link target's `links` row as the check reads it.
struct ForwardedLinks {
    row: Bytes,
    /// The terms of its anchors (one anchor per page linking to it).
    anchors: AnchorTerms,
    forwarded_to: Option<Bytes>,
    forwarded: Option<AnchorTerms>,
}

impl ForwardedLinks {
    fn new(row: Bytes) -> Self {
        Self {
            row,
            anchors: AnchorTerms::default(),
            forwarded_to: None,
            forwarded: None,
        }
    }
}

/// Checks invariant 3 (inverted links point at canonicals), streaming `links` a target at a
/// time: a target with anchors says it forwarded them to its canonical (`forwarded_to`), with
/// its anchors' terms (`forwarded`); a target nothing links to forwards nothing. Counts the
/// link targets and inlinks, and returns, for invariant 5, per canonical the summed print
/// ([`AnchorTerms::print`]) of its targets' anchor terms.
///
/// It holds because the link forwarder, weakly observing `links:anchors`, runs after every
/// change that can move a target's anchors: the document processor notifies a target whose
/// anchor from a page changed, the clusterer a document whose cluster changed and every member
/// of a cluster whose canonical changed. Each run writes both cells from the row it reads, or
/// deletes them when nothing links to the target.
pub(super) async fn check_forwarded_links<S: RowStore>(
    txn: &Transaction<S>,
    walk: &Walk,
    progress: ProgressFn<'_>,
    summary: &mut IndexSummary,
    violations: &mut Violations,
) -> Result<HashMap<Bytes, (i64, u64)>> {
    let (docs, canonicals) = (&walk.docs, &walk.canonicals);
    let canonical_of = |url: &Bytes| -> Bytes {
        docs.get(url)
            .and_then(|d| d.cluster.as_ref())
            .and_then(|h| canonicals.get(h))
            .cloned()
            .unwrap_or_else(|| url.clone())
    };

    // A target at a time: its anchors' terms are what it says it forwarded, to its canonical;
    // (gathered here for invariant 5) per canonical, the prints of its targets' anchor terms,
    // to compare with its summary (prints add up, so no canonical's terms are held).
    let mut anchor_terms: HashMap<Bytes, (i64, u64)> = HashMap::new();
    let mut current: Option<ForwardedLinks> = None;
    let mut finish = |target: Option<ForwardedLinks>, violations: &mut Violations| {
        let Some(target) = target else { return };
        let canonical = canonical_of(&target.row);
        if target.anchors.anchors > 0 {
            summary.link_targets += 1;
            summary.inlinks += usize::try_from(target.anchors.anchors).unwrap_or(0);
            if target.forwarded_to.as_ref() != Some(&canonical) {
                violations.add(
                    3,
                    "links are not forwarded to their target's canonical",
                    at(
                        LINKS,
                        &target.row,
                        format_args!(
                            "forwarded to {}, canonical {}",
                            cell(target.forwarded_to.as_deref()),
                            escaped(&canonical)
                        ),
                    ),
                );
            }
            if target.forwarded.as_ref() != Some(&target.anchors) {
                violations.add(
                    3,
                    "anchor terms forwarded are not those of the target's links",
                    at(
                        LINKS,
                        &target.row,
                        format_args!("{} anchors", target.anchors.anchors),
                    ),
                );
            }
            let (anchors, terms) = target.anchors.print();
            let sum = anchor_terms.entry(canonical).or_default();
            *sum = (sum.0 + anchors, sum.1.wrapping_add(terms));
        } else if target.forwarded_to.is_some() || target.forwarded.is_some() {
            violations.add(
                3,
                "target without links forwards anchor terms",
                at(
                    LINKS,
                    &target.row,
                    format_args!("forwarded to {}", cell(target.forwarded_to.as_deref())),
                ),
            );
        }
    };
    for_each_item(txn, LINKS, None, progress, |item| {
        if current.as_ref().map(|t| &t.row) != Some(&item.row) {
            finish(current.take(), violations);
            current = Some(ForwardedLinks::new(item.row.clone()));
        }
        let Some(target) = current.as_mut() else {
            return;
        };
        if item.column.starts_with(FROM_PREFIX) {
            target.anchors.apply(&item.value, 1);
        } else if item.column.as_ref() == FORWARDED_TO {
            target.forwarded_to = Some(item.value);
        } else if item.column.as_ref() == FORWARDED {
            target.forwarded = Some(AnchorTerms::decode(&item.value));
        }
    })
    .await?;
    finish(current.take(), violations);
    Ok(anchor_terms)
}

/// Checks invariant 5 (anchor terms): each canonical's `anchor_terms` summary has the print
/// that [`check_forwarded_links`] summed over the targets whose canonical it is
/// (`anchor_terms`), and no other row has a summary. Streams the table, keeping a print per
/// row.
///
/// It holds because the link forwarder changes a summary only by deltas, in the transaction
/// that writes the target's `forwarded_to` and `forwarded`: it takes back what the target's
/// `forwarded` cell says it added where `forwarded_to` says, and adds the target's anchors at
/// its canonical. So each summary is the sum of the `forwarded` cells that name it, which by
/// invariant 3 are the anchors of the links to its cluster's members.
pub(super) async fn check_anchor_terms<S: RowStore>(
    txn: &Transaction<S>,
    anchor_terms: &HashMap<Bytes, (i64, u64)>,
    progress: ProgressFn<'_>,
    violations: &mut Violations,
) -> Result<()> {
    let mut stored: HashMap<Bytes, (i64, u64)> = HashMap::new();
    for_each_item(txn, ANCHOR_TERMS, None, progress, |item| {
        stored.insert(item.row, AnchorTerms::decode(&item.value).print());
    })
    .await?;
    let mut rows: BTreeSet<&Bytes> = anchor_terms.keys().collect();
    rows.extend(stored.keys());
    for row in rows {
        let (what, found) = match (anchor_terms.get(row), stored.get(row)) {
            (Some(want), Some(got)) if want == got => continue,
            (Some(want), None) => (
                "canonical with links to its cluster has no anchor terms",
                format!("{} anchors expected", want.0),
            ),
            (None, Some(got)) => (
                "anchor terms of a canonical no link to its cluster forwards to",
                format!("{} anchors", got.0),
            ),
            (want, got) => (
                "anchor terms are not those of the links to the cluster",
                format!(
                    "{} anchors, {} expected",
                    got.map_or(0, |g| g.0),
                    want.map_or(0, |w| w.0)
                ),
            ),
        };
        violations.add(5, what, at(ANCHOR_TERMS, row, found));
    }
    Ok(())
}
