//! Invariants 1 and 2: documents are members of the cluster of their content hash, and each
//! cluster has the canonical its members choose. The clusterer maintains both in one
//! transaction per document, so they are checked against the walk alone.

use bytes::Bytes;

use super::walk::Walk;
use super::{IndexSummary, lossy};
use crate::schema::choose_canonical;

/// Checks invariant 1 (membership): every document with a content hash is listed, with the
/// canonical it declares, in the cluster of that hash, and its `cluster` cell names that hash;
/// every member of a cluster is a document with that hash. Counts the processed documents.
///
/// It holds because the clusterer, observing `documents:hash`, moves a document from the
/// cluster its `cluster` cell names to the cluster of its new hash and writes `cluster` in the
/// same transaction; the document processor writes the hash again when only the declared
/// canonical changes, so the membership row is rewritten too. With no notification pending,
/// every hash written has been observed.
pub(super) fn check_membership(
    walk: &Walk,
    summary: &mut IndexSummary,
    violations: &mut Vec<String>,
) {
    let (docs, clusters) = (&walk.docs, &walk.clusters);
    for (url, (hash, cluster, _, declared)) in docs {
        let Some(hash) = hash else { continue };
        summary.processed += 1;
        match clusters.get(hash).and_then(|m| m.get(url)) {
            None => violations.push(format!(
                "{} has hash {} but is not a member of its cluster",
                lossy(url),
                lossy(hash)
            )),
            Some(listed) if listed != declared.as_ref().unwrap_or(&Bytes::new()) => {
                violations.push(format!(
                    "{} declares canonical {:?} but its membership says {:?}",
                    lossy(url),
                    declared.as_deref().map(lossy),
                    lossy(listed)
                ));
            }
            Some(_) => {}
        }
        if cluster.as_ref() != Some(hash) {
            violations.push(format!(
                "{} has hash {} but its cluster column says {:?}",
                lossy(url),
                lossy(hash),
                cluster.as_deref().map(lossy)
            ));
        }
    }
    for (hash, members) in clusters {
        for url in members.keys() {
            if docs.get(url).and_then(|d| d.0.as_ref()) != Some(hash) {
                violations.push(format!(
                    "{} is listed in cluster {} but its hash differs",
                    lossy(url),
                    lossy(hash)
                ));
            }
        }
    }
}

/// Checks invariant 2 (one canonical per cluster): every cluster with members has the canonical
/// [`choose_canonical`] picks from them, and a cluster without members has none. Counts the
/// clusters and the duplicates.
///
/// It holds because the clusterer recomputes the canonical from the members in every
/// transaction that changes a membership, and writes it even when unchanged: two concurrent
/// membership changes of one cluster conflict, so neither chooses from a snapshot that misses
/// the other.
pub(super) fn check_canonicals(
    walk: &Walk,
    summary: &mut IndexSummary,
    violations: &mut Vec<String>,
) {
    let (clusters, canonicals) = (&walk.clusters, &walk.canonicals);
    for (hash, members) in clusters {
        let best = choose_canonical(members);
        if canonicals.get(hash) != best {
            violations.push(format!(
                "cluster {} has canonical {:?}, expected {:?}",
                lossy(hash),
                canonicals.get(hash).map(|c| lossy(c)),
                best.map(|b| lossy(b))
            ));
        }
    }
    for hash in canonicals.keys() {
        if !clusters.contains_key(hash) {
            violations.push(format!(
                "cluster {} has a canonical but no members",
                lossy(hash)
            ));
        }
    }
    summary.clusters = canonicals.len();
    summary.duplicates = summary.processed.saturating_sub(summary.clusters);
}
