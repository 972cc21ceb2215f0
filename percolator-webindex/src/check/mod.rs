//! The web index's invariants, checked in one snapshot whenever no notification is pending:
//!
//! 1. every document with a content hash is a member of exactly the cluster of that hash, and
//!    its `cluster` bookkeeping says so; every membership row belongs to such a document; a
//!    document has raw HTML exactly when it has a content hash;
//! 2. every cluster with members has exactly one canonical, the member [`choose_canonical`]
//!    picks (its duplicates' `<link rel="canonical">`, then the best [`canonical_rank`]), and
//!    each membership holds what its document declares; a cluster without members has none;
//! 3. inverted links point at canonicals: each link target says it forwarded its anchors to its
//!    canonical (`forwarded_to`), with the terms its anchors have (`forwarded`); a target nothing
//!    links to forwards nothing;
//! 4. the index holds, for each cluster, exactly the terms of its canonical document, each
//!    posting with the term's counts and the document's length; a cluster is exported exactly
//!    when it has a canonical;
//! 5. each canonical's anchor terms (`anchor_terms`) are those of the anchors of every link to
//!    its cluster's members;
//! 6. each corpus shard counts exactly the clusters hashing to it, their canonicals' lengths
//!    and their postings;
//! 7. no cluster is still queued for the inverter (`index_queue`); every posting chunk decodes
//!    and each of its postings names a listed slot or a dead one; a chunk's lists of cells and
//!    of dead slots decode and hold (dead slots are empty and counted right); each indexed
//!    cluster is listed in exactly the chunk its `clusters:posted` names, a chunk of its shard;
//! 8. the sizes kept as the pipeline runs ([`crate::sizes`]) are the sizes counted here;
//! 9. every strong observer ran at most once per change of its column, by any worker that
//!    ever ran ([`percolator_observers::audit`]).
//!
//! Also counts what is in the index ([`IndexSummary`]).
//!
//! **Cost.** Each table is read once, in key order, a page at a time
//! ([`Transaction::scan_page`]), so the check's work grows linearly with the data; it reports
//! its progress table by table ([`Progress`]). Its memory grows with the number of documents
//! and clusters (a few dozen bytes and a URL each), never with the bytes stored: invariants 4
//! and 5 compare, per cluster or canonical, the number and a 64-bit fingerprint (a wrapping
//! sum of xxh3 hashes) of what should be there — its terms, its anchor terms — with what is
//! there, instead of holding both sets.
//!
//! **Reports.** A [`Violation`] says what is wrong, how many rows it concerns, and names the
//! first ten, their bytes escaped ([`escaped`]): a stored key of any bytes is named, never
//! breaks the check.
//!
//! [`choose_canonical`]: crate::schema::choose_canonical
//! [`canonical_rank`]: crate::schema::canonical_rank
//! [`Transaction::scan_page`]: percolator_core::Transaction::scan_page

mod clusters;
mod index;
mod links;
mod runs;
mod sizes;
mod violations;
mod walk;

use percolator_core::{Client, Result, RowStore};
use serde::{Deserialize, Serialize};

use self::violations::Violations;
use self::walk::Walk;

pub use self::violations::{NAMED_ROWS, Violation, escaped, row_name};

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
    /// Documents whose raw HTML was stored cut ([`crate::raw`]).
    #[serde(default)]
    pub cut_pages: usize,
}

/// The result of a check.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CheckReport {
    /// What the index holds.
    pub summary: IndexSummary,
    /// Committed changes of strongly observed columns (invariant 9).
    #[serde(default)]
    pub observed_changes: u64,
    /// Committed runs of strong observers (invariant 9).
    #[serde(default)]
    pub observer_runs: u64,
    /// Every way an invariant does not hold (empty: all hold).
    pub violations: Vec<Violation>,
}

/// How far a check is, as it reads table after table (see [`check_with`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Progress<'a> {
    /// The check starts reading `table`; `rows` is how many rows it holds, when the kept sizes
    /// tell.
    Table {
        /// What is read (a table, or a table's write records for the observer audit).
        table: &'a str,
        /// Rows expected.
        rows: Option<u64>,
    },
    /// Rows of the current table read so far.
    Rows(u64),
}

/// A receiver of [`Progress`] that ignores it.
pub fn no_progress(_: Progress<'_>) {}

/// Checks every invariant in one snapshot (a read-only transaction), the audit of strong
/// observer runs (invariant 9) included.
pub async fn check<S: RowStore>(client: &Client<S>) -> Result<CheckReport> {
    check_with(client, &no_progress).await
}

/// [`check`], telling `progress` how far it is.
pub async fn check_with<S: RowStore>(
    client: &Client<S>,
    progress: &(dyn Fn(Progress<'_>) + Send + Sync),
) -> Result<CheckReport> {
    let txn = client.begin().await?;
    let mut violations = Violations::default();
    let mut summary = IndexSummary::default();

    let kept = crate::sizes::read(&txn).await?;
    let walk = Walk::read(&txn, &kept, progress, &mut summary, &mut violations).await?;
    clusters::check_membership(&walk, &mut summary, &mut violations);
    clusters::check_canonicals(&walk, &mut summary, &mut violations);
    let anchor_terms =
        links::check_forwarded_links(&txn, &walk, progress, &mut summary, &mut violations).await?;
    let chunks = index::read_directories(&txn, &walk.posted, progress, &mut violations).await?;
    let found =
        index::read_postings(&txn, &chunks, progress, &mut summary, &mut violations).await?;
    drop(chunks);
    index::check_posted(&walk, &mut violations);
    index::check_index_terms(&walk, found, &mut violations);
    index::check_exported(&walk, &mut violations);
    links::check_anchor_terms(&txn, &anchor_terms, progress, &mut violations).await?;
    index::check_corpus_counts(&txn, &walk, progress, &mut violations).await?;
    index::check_queue_empty(&txn, progress, &mut violations).await?;
    sizes::check_kept_sizes(&txn, &summary, progress, &mut violations).await?;
    drop(walk);
    let (observed_changes, observer_runs) =
        runs::check_observer_runs(client, progress, &mut violations).await?;
    Ok(CheckReport {
        summary,
        observed_changes,
        observer_runs,
        violations: violations.into_vec(),
    })
}
