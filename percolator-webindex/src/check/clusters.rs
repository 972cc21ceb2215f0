//! Invariants 1 and 2: documents are members of the cluster of their content hash, and each
//! cluster has the canonical its members choose. The clusterer maintains both in one
//! transaction per document, so they are checked against the walk alone.

use super::IndexSummary;
use super::violations::{Violations, at, cell, escaped};
use super::walk::Walk;
use crate::schema::{CLUSTERS, DOCUMENTS, choose_canonical, member_row};

/// Checks invariant 1 (membership): every document with a content hash is listed, with the
/// canonical it declares, in the cluster of that hash, and its `cluster` cell names that hash;
/// every member of a cluster is a document with that hash; a document has raw HTML exactly
/// when it has a hash. Counts the processed documents.
///
/// It holds because the clusterer, observing `documents:hash`, moves a document from the
/// cluster its `cluster` cell names to the cluster of its new hash and writes `cluster` in the
/// same transaction; the document processor writes the hash again when only the declared
/// canonical changes, so the membership row is rewritten too, and it writes a hash for every
/// page it parses and deletes it with the page. With no notification pending, every change
/// written has been observed.
pub(super) fn check_membership(
    walk: &Walk,
    summary: &mut IndexSummary,
    violations: &mut Violations,
) {
    let (docs, clusters) = (&walk.docs, &walk.clusters);
    for (url, doc) in docs {
        if doc.raw != doc.hash.is_some() {
            violations.add(
                1,
                "document has raw HTML without a content hash, or a hash without raw HTML",
                at(
                    DOCUMENTS,
                    url,
                    format_args!("raw {}, hash {}", doc.raw, cell(doc.hash.as_deref())),
                ),
            );
        }
        let Some(hash) = &doc.hash else { continue };
        summary.processed += 1;
        let declared = doc.declared.as_deref().unwrap_or_default();
        match clusters.get(hash).and_then(|m| m.get(url)) {
            None => violations.add(
                1,
                "document is not a member of the cluster of its hash",
                at(DOCUMENTS, url, format_args!("hash {}", escaped(hash))),
            ),
            Some(listed) if listed.as_ref() != declared => violations.add(
                1,
                "membership does not hold the canonical its document declares",
                at(
                    DOCUMENTS,
                    url,
                    format_args!(
                        "declares {}, membership says {}",
                        escaped(declared),
                        escaped(listed)
                    ),
                ),
            ),
            Some(_) => {}
        }
        if doc.cluster.as_ref() != Some(hash) {
            violations.add(
                1,
                "document's cluster column is not its hash",
                at(
                    DOCUMENTS,
                    url,
                    format_args!(
                        "hash {}, cluster {}",
                        escaped(hash),
                        cell(doc.cluster.as_deref())
                    ),
                ),
            );
        }
    }
    for (hash, members) in clusters {
        for url in members.keys() {
            let found = docs.get(url).and_then(|d| d.hash.as_ref());
            if found != Some(hash) {
                violations.add(
                    1,
                    "member of a cluster whose document has another hash",
                    at(
                        crate::schema::MEMBERS,
                        &member_row(hash, url),
                        format_args!("the document's hash is {}", cell(found.map(|h| &h[..]))),
                    ),
                );
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
    violations: &mut Violations,
) {
    let (clusters, canonicals) = (&walk.clusters, &walk.canonicals);
    for (hash, members) in clusters {
        let best = choose_canonical(members);
        let current = canonicals.get(hash);
        if current != best {
            violations.add(
                2,
                "cluster's canonical is not the member its members choose",
                at(
                    CLUSTERS,
                    hash,
                    format_args!(
                        "canonical {}, expected {}",
                        cell(current.map(|c| &c[..])),
                        cell(best.map(|b| &b[..]))
                    ),
                ),
            );
        }
    }
    for (hash, canonical) in canonicals {
        if !clusters.contains_key(hash) {
            violations.add(
                2,
                "cluster without members has a canonical",
                at(
                    CLUSTERS,
                    hash,
                    format_args!("canonical {}", escaped(canonical)),
                ),
            );
        }
    }
    summary.clusters = canonicals.len();
    summary.duplicates = summary.processed.saturating_sub(summary.clusters);
}
