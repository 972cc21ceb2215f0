//! The walk that collects what the invariants are checked against: every document's cells,
//! every cluster's members and its `clusters` cells. Each is kept as one entry per document or
//! cluster (a document's terms as a [`TermPrint`]), so the walk's memory is bounded by the
//! number of documents and clusters; the invariants stream the other tables with
//! [`for_each_item`].

use std::collections::BTreeMap;
use std::ops::Bound;

use bytes::Bytes;
use percolator_core::{Columns, Result, RowStore, ScanItem, Transaction};

use super::{IndexSummary, lossy};
use crate::schema::*;
use crate::terms::PageTerms;

/// Calls `f` on every cell of `table`, reading [`PAGE_ROWS`] rows at a time.
pub(super) async fn for_each_item<S: RowStore>(
    txn: &Transaction<S>,
    table: &[u8],
    mut f: impl FnMut(ScanItem),
) -> Result<()> {
    let mut start = Bound::Unbounded;
    loop {
        let page = txn.scan_page(table, start, Columns::All, PAGE_ROWS).await?;
        page.items.into_iter().for_each(&mut f);
        match page.next {
            Some(next) => start = next,
            None => return Ok(()),
        }
    }
}

/// A document's `hash`, `cluster` and `declared_canonical` cells, and its postings'
/// [`TermPrint`] with its length.
pub(super) type DocCells = (
    Option<Bytes>,
    Option<Bytes>,
    Option<(TermPrint, u32)>,
    Option<Bytes>,
);

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
    /// How many clusters have an `exported` cell.
    pub(super) exported_clusters: usize,
    /// hash -> the chunk holding its postings (`clusters:posted`).
    pub(super) posted: BTreeMap<Bytes, Bytes>,
}

impl Walk {
    /// Reads `documents`, `members` and `clusters`, counting the documents with raw HTML into
    /// `summary` and reporting membership rows that name no cluster: every invariant is checked
    /// against what these hold.
    pub(super) async fn read<S: RowStore>(
        txn: &Transaction<S>,
        summary: &mut IndexSummary,
        violations: &mut Vec<String>,
    ) -> Result<Self> {
        let docs = read_documents(txn, summary).await?;
        let clusters = read_members(txn, violations).await?;
        // The `exported` cells hold term lists: paged too.
        let mut canonicals: BTreeMap<Bytes, Bytes> = BTreeMap::new();
        let mut exported_clusters = 0;
        let mut posted: BTreeMap<Bytes, Bytes> = BTreeMap::new();
        for_each_item(txn, CLUSTERS, |item| {
            if item.column.as_ref() == CANONICAL {
                canonicals.insert(item.row, item.value);
            } else if item.column.as_ref() == EXPORTED {
                exported_clusters += 1;
            } else if item.column.as_ref() == POSTED {
                posted.insert(item.row, item.value);
            }
        })
        .await?;
        Ok(Self {
            docs,
            clusters,
            canonicals,
            exported_clusters,
            posted,
        })
    }
}

/// Every document's cells ([`DocCells`]), a page at a time; counts the documents with raw HTML.
async fn read_documents<S: RowStore>(
    txn: &Transaction<S>,
    summary: &mut IndexSummary,
) -> Result<BTreeMap<Bytes, DocCells>> {
    let mut docs: BTreeMap<Bytes, DocCells> = BTreeMap::new();
    // Every column, though four are used: reading a cell resolves a lock a dead worker left on
    // it (lazily, as any reader does), and a check that leaves such locks behind would report
    // a finished pipeline that `status` still shows locks in.
    let mut start = Bound::Unbounded;
    loop {
        let page = txn
            .scan_page(DOCUMENTS, start, Columns::All, PAGE_ROWS)
            .await?;
        for item in page.items {
            let entry = docs.entry(item.row.clone()).or_default();
            match item.column.as_ref() {
                c if c == RAW => summary.documents += 1,
                c if c == HASH => entry.0 = Some(item.value),
                c if c == CLUSTER => entry.1 = Some(item.value),
                c if c == TERMS => entry.2 = Some(TermPrint::of_postings(&item.value)),
                c if c == DECLARED_CANONICAL => entry.3 = Some(item.value),
                _ => {}
            }
        }
        match page.next {
            Some(next) => start = next,
            None => break,
        }
    }
    Ok(docs)
}

/// Every cluster's members: hash -> member URL -> the URL it declares canonical (empty:
/// none). Reports the membership rows that are not `<hash>/<URL>`.
async fn read_members<S: RowStore>(
    txn: &Transaction<S>,
    violations: &mut Vec<String>,
) -> Result<BTreeMap<Bytes, BTreeMap<Bytes, Bytes>>> {
    // hash -> member URL -> the URL it declares canonical (empty: none)
    let mut clusters: BTreeMap<Bytes, BTreeMap<Bytes, Bytes>> = BTreeMap::new();
    for item in txn.scan::<Bytes>(MEMBERS, .., Columns::one(MEMBER)).await? {
        match item.row.iter().position(|&b| b == b'/') {
            Some(i) => {
                clusters
                    .entry(item.row.slice(..i))
                    .or_default()
                    .insert(item.row.slice(i + 1..), item.value);
            }
            None => violations.push(format!("malformed membership row {:?}", lossy(&item.row))),
        }
    }
    Ok(clusters)
}
