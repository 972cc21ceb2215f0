//! The walk that collects what the invariants are checked against: every document's cells,
//! every cluster's members and its `clusters` cells. Each is kept as one entry per document or
//! cluster (a document's terms as a [`TermPrint`]), so the walk's memory is bounded by the
//! number of documents and clusters; the invariants stream the other tables with
//! [`for_each_item`].

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use bytes::Bytes;
use percolator_core::{Columns, Result, RowStore, ScanItem, Transaction};

use super::violations::{Violations, at};
use super::{IndexSummary, Progress};
use crate::schema::*;
use crate::sizes::IndexSizes;
use crate::terms::PageTerms;

/// A check's receiver of [`Progress`].
pub(super) type ProgressFn<'a> = &'a (dyn Fn(Progress<'_>) + Send + Sync);

/// Calls `f` on every cell of `table`, reading [`PAGE_ROWS`] rows at a time and telling
/// `progress` about each page (`rows`: the rows expected, if known).
pub(super) async fn for_each_item<S: RowStore>(
    txn: &Transaction<S>,
    table: &[u8],
    rows: Option<u64>,
    progress: ProgressFn<'_>,
    mut f: impl FnMut(ScanItem),
) -> Result<()> {
    progress(Progress::Table {
        table: &String::from_utf8_lossy(table),
        rows,
    });
    let mut start = Bound::Unbounded;
    let mut read = 0u64;
    let mut last_row: Option<Bytes> = None;
    loop {
        let page = txn.scan_page(table, start, Columns::All, PAGE_ROWS).await?;
        for item in page.items {
            if last_row.as_ref() != Some(&item.row) {
                read += 1;
                last_row = Some(item.row.clone());
            }
            f(item);
        }
        progress(Progress::Rows(read));
        match page.next {
            Some(next) => start = next,
            None => return Ok(()),
        }
    }
}

/// What the walk keeps of a document.
#[derive(Debug, Clone, Default)]
pub(super) struct DocCells {
    /// Whether it has raw HTML.
    pub(super) raw: bool,
    /// Its content hash.
    pub(super) hash: Option<Bytes>,
    /// The cluster its `cluster` cell names.
    pub(super) cluster: Option<Bytes>,
    /// Its postings' [`TermPrint`] and its length.
    pub(super) terms: Option<(TermPrint, u32)>,
    /// The URL it declares canonical.
    pub(super) declared: Option<Bytes>,
}

/// Rows per page of the paged scans.
pub(super) const PAGE_ROWS: usize = 64;

/// How many terms, and a fingerprint of which: equal sets give equal prints, and different
/// sets collide with probability about 2⁻⁶⁴.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct TermPrint {
    pub(super) count: usize,
    pub(super) sum: u64,
}

impl TermPrint {
    fn add(&mut self, term: &[u8]) {
        self.count += 1;
        self.sum = self.sum.wrapping_add(xxhash_rust::xxh3::xxh3_64(term));
    }

    /// Adds a `(column, value)` pair (length-prefixed, so no two pairs hash alike by
    /// construction).
    pub(super) fn add_pair(&mut self, column: &[u8], value: &[u8]) {
        let mut buf = Vec::with_capacity(8 + column.len() + value.len());
        buf.extend_from_slice(&(column.len() as u64).to_le_bytes());
        buf.extend_from_slice(column);
        buf.extend_from_slice(value);
        self.add(&buf);
    }

    /// The print of a page's postings (term, posting value) and its length.
    fn of_postings(terms_cell: &[u8]) -> (Self, u32) {
        let page = PageTerms::decode(terms_cell);
        let mut print = Self::default();
        for (term, posting) in page.postings() {
            print.add_pair(term.as_bytes(), &posting);
        }
        (print, page.length)
    }
}

/// What the invariants are checked against, read in the check's snapshot.
pub(super) struct Walk {
    /// URL -> the document's cells.
    pub(super) docs: BTreeMap<Bytes, DocCells>,
    /// hash -> member URL -> the URL it declares canonical (empty: none)
    pub(super) clusters: BTreeMap<Bytes, BTreeMap<Bytes, Bytes>>,
    /// hash -> its canonical URL (`clusters:canonical`).
    pub(super) canonicals: BTreeMap<Bytes, Bytes>,
    /// The clusters with an `exported` cell.
    pub(super) exported: BTreeSet<Bytes>,
    /// hash -> the chunk holding its postings (`clusters:posted`).
    pub(super) posted: BTreeMap<Bytes, Bytes>,
}

impl Walk {
    /// Reads `documents`, `members` and `clusters`, counting the documents with raw HTML into
    /// `summary` and reporting membership rows that name no cluster: every invariant is checked
    /// against what these hold. `kept` (the kept sizes) tells how many rows to expect.
    pub(super) async fn read<S: RowStore>(
        txn: &Transaction<S>,
        kept: &IndexSizes,
        progress: ProgressFn<'_>,
        summary: &mut IndexSummary,
        violations: &mut Violations,
    ) -> Result<Self> {
        let expected = |n: i64| u64::try_from(n).ok();
        let docs = read_documents(txn, expected(kept.documents), progress, summary).await?;
        let clusters = read_members(txn, expected(kept.documents), progress, violations).await?;
        let mut canonicals: BTreeMap<Bytes, Bytes> = BTreeMap::new();
        let mut exported = BTreeSet::new();
        let mut posted: BTreeMap<Bytes, Bytes> = BTreeMap::new();
        // The `exported` cells hold term lists: paged too.
        for_each_item(txn, CLUSTERS, expected(kept.clusters), progress, |item| {
            if item.column.as_ref() == CANONICAL {
                canonicals.insert(item.row, item.value);
            } else if item.column.as_ref() == EXPORTED {
                exported.insert(item.row);
            } else if item.column.as_ref() == POSTED {
                posted.insert(item.row, item.value);
            }
        })
        .await?;
        Ok(Self {
            docs,
            clusters,
            canonicals,
            exported,
            posted,
        })
    }
}

/// Every document's cells ([`DocCells`]), a page at a time; counts the documents with raw HTML.
async fn read_documents<S: RowStore>(
    txn: &Transaction<S>,
    rows: Option<u64>,
    progress: ProgressFn<'_>,
    summary: &mut IndexSummary,
) -> Result<BTreeMap<Bytes, DocCells>> {
    let mut docs: BTreeMap<Bytes, DocCells> = BTreeMap::new();
    // Every column, though five are used: reading a cell resolves a lock a dead worker left on
    // it (lazily, as any reader does), and a check that leaves such locks behind would report
    // a finished pipeline that `status` still shows locks in.
    for_each_item(txn, DOCUMENTS, rows, progress, |item| {
        let entry = match docs.last_entry() {
            Some(last) if *last.key() == item.row => last.into_mut(),
            _ => docs.entry(item.row.clone()).or_default(),
        };
        match item.column.as_ref() {
            c if c == RAW => {
                summary.documents += 1;
                summary.cut_pages += usize::from(crate::raw::is_cut(&item.value));
                entry.raw = true;
            }
            c if c == HASH => entry.hash = Some(item.value),
            c if c == CLUSTER => entry.cluster = Some(item.value),
            c if c == TERMS => entry.terms = Some(TermPrint::of_postings(&item.value)),
            c if c == DECLARED_CANONICAL => entry.declared = Some(item.value),
            _ => {}
        }
    })
    .await?;
    Ok(docs)
}

/// Every cluster's members: hash -> member URL -> the URL it declares canonical (empty:
/// none). Reports the membership rows that are not `<hash>/<URL>`.
async fn read_members<S: RowStore>(
    txn: &Transaction<S>,
    rows: Option<u64>,
    progress: ProgressFn<'_>,
    violations: &mut Violations,
) -> Result<BTreeMap<Bytes, BTreeMap<Bytes, Bytes>>> {
    let mut clusters: BTreeMap<Bytes, BTreeMap<Bytes, Bytes>> = BTreeMap::new();
    for_each_item(txn, MEMBERS, rows, progress, |item| {
        if item.column.as_ref() != MEMBER {
            return;
        }
        match item.row.iter().position(|&b| b == b'/') {
            Some(i) => {
                clusters
                    .entry(item.row.slice(..i))
                    .or_default()
                    .insert(item.row.slice(i + 1..), item.value);
            }
            None => violations.add(
                1,
                "membership row is not <hash>/<URL>",
                at(MEMBERS, &item.row, "no '/'"),
            ),
        }
    })
    .await?;
    Ok(clusters)
}
