//! The web index's invariants, checked in one snapshot whenever no notification is pending:
//!
//! 1. every document with a content hash is a member of exactly the cluster of that hash, and
//!    its `cluster` bookkeeping says so; every membership row belongs to such a document;
//! 2. every cluster with members has exactly one canonical, the member [`choose_canonical`]
//!    picks (its duplicates' `<link rel="canonical">`, then the best [`canonical_rank`]), and
//!    each membership holds what its document declares; a cluster without members has none;
//! 3. inverted links point at canonicals: each link target says it forwarded its anchors to its
//!    canonical (`forwarded_to`), with the terms its anchors have (`forwarded`); a target nothing
//!    links to forwards nothing;
//! 4. the index holds, for each cluster, exactly the terms of its canonical document, each
//!    posting with the term's counts and the document's length;
//! 5. each canonical's anchor terms (`anchor_terms`) are those of the anchors of every link to
//!    its cluster's members;
//! 6. each corpus shard counts exactly the clusters hashing to it and their canonicals' lengths;
//! 7. no cluster is still queued for the inverter (`index_queue`); every posting chunk decodes
//!    and names a listed slot; each indexed cluster is listed in exactly the chunk its
//!    `clusters:posted` names, a chunk of its shard.
//!
//! Also counts what is in the index ([`IndexSummary`]).
//!
//! Memory stays bounded by the number of documents and clusters, not by the bytes stored: every
//! table is read a page at a time ([`Transaction::scan_page`]), and invariants 4 and 5 compare,
//! per cluster or canonical, the number and a 64-bit fingerprint (a wrapping sum of xxh3
//! hashes) of what should be there — its terms, its anchor terms — with what is there, instead
//! of holding both sets.
//!
//! [`choose_canonical`]: crate::schema::choose_canonical
//! [`canonical_rank`]: crate::schema::canonical_rank
//! [`Transaction::scan_page`]: percolator_core::Transaction::scan_page

mod clusters;
mod index;
mod links;
mod walk;

use percolator_core::{Client, Result, RowStore};
use serde::{Deserialize, Serialize};

use self::walk::Walk;

/// Sizes of the web index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct IndexSummary {
    /// Documents with raw HTML.
    pub documents: usize,
    /// Documents processed (with a content hash).
    pub processed: usize,
    /// Non-empty duplicate clusters (= canonical documents).
    pub clusters: usize,
    /// Documents that are not their cluster's canonical.
    pub duplicates: usize,
    /// Link targets with anchor text.
    pub link_targets: usize,
    /// Anchor texts of links to crawled or uncrawled pages (each counts toward its target's
    /// canonical).
    pub inlinks: usize,
    /// Distinct terms in the index.
    pub terms: usize,
    /// Index entries (term, cluster), summed over the posting blocks.
    pub postings: usize,
}

/// The result of a check.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CheckReport {
    /// What the index holds.
    pub summary: IndexSummary,
    /// Every invariant violation found (empty: all hold).
    pub violations: Vec<String>,
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Checks every invariant in one snapshot (a read-only transaction).
pub async fn check<S: RowStore>(client: &Client<S>) -> Result<CheckReport> {
    let txn = client.begin().await?;
    let mut violations = Vec::new();
    let mut summary = IndexSummary::default();

    let walk = Walk::read(&txn, &mut summary, &mut violations).await?;
    clusters::check_membership(&walk, &mut summary, &mut violations);
    clusters::check_canonicals(&walk, &mut summary, &mut violations);
    let anchor_terms =
        links::check_forwarded_links(&txn, &walk, &mut summary, &mut violations).await?;
    let (directories, misplaced) =
        index::read_directories(&txn, &walk.posted, &mut violations).await?;
    let (found, orphans) =
        index::read_postings(&txn, &directories, &mut summary, &mut violations).await?;
    index::check_posted(&walk, &mut violations);
    index::check_index_terms(&walk, found, &mut violations);
    index::check_chunk_slots(misplaced, orphans, &mut violations);
    index::check_exported(&walk, &mut violations);
    links::check_anchor_terms(&txn, &anchor_terms, &mut violations).await?;
    index::check_corpus_counts(&txn, &walk, &mut violations).await?;
    index::check_queue_empty(&txn, &mut violations).await?;
    Ok(CheckReport {
        summary,
        violations,
    })
}
