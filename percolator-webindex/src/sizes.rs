//! The index's sizes, kept as the pipeline runs, so that `webindex stats` reads a few rows
//! instead of the whole index: in well under a second at any size.
//!
//! **Where each size is counted.** By the stage that knows it changed, in the transaction
//! that changes it:
//!
//! - documents and inlinks: the document processor (a page parsed for the first time or
//!   deleted; the links it adds or drops), here in [`SIZES`];
//! - link targets: the link forwarder (a target that gains its first anchor or loses its
//!   last), here in [`SIZES`];
//! - cut pages: the loader (a page stored cut, or a cut page replaced or deleted: see
//!   [`crate::raw`]), here in [`SIZES`];
//! - clusters in the index, their total length and their postings: the inverter, in its
//!   shard's [`CorpusCounts`] (which ranking reads anyway).
//!
//! **Counting without conflicts.** One counter cell would make every transaction that changes
//! a size conflict with every other. Instead a transaction writes its change as a cell of its
//! own, `d:<its start timestamp>`, in one of the [`SIZE_SHARDS`] rows of [`SIZES`] (distinct
//! cells never conflict: they only share a row), and weakly notifies the row's [`FOLD`]. The
//! size folder ([`SizeFolder`](crate::pipeline::SizeFolder)) adds the row's deltas into its
//! [`TOTAL`] and deletes them; runs for one row conflict on the total, so each delta is
//! folded once. A reader sums each row's total and the deltas not folded yet, so the sizes it
//! reads are exact in its snapshot, folded or not. [`crate::check()`] recounts them (invariant
//! 8).

use bytes::Bytes;
use percolator_core::{Columns, Result, RowStore, Transaction};
use serde::{Deserialize, Serialize};

use crate::schema::{CORPUS, COUNTS, INDEX_SHARDS, shard_key};
use crate::terms::CorpusCounts;

/// The table of kept sizes: rows `shard-<nn>` ([`SIZE_SHARDS`]).
pub const SIZES: &[u8] = b"sizes";
/// The folded sizes of a [`SIZES`] row ([`SizeCounts`]).
pub const TOTAL: &[u8] = b"total";
/// Prefix of the delta cells of a [`SIZES`] row, `d:<start ts as 16 hex digits>`.
pub const DELTA_PREFIX: &[u8] = b"d:";
/// Weakly observed trigger column of [`SIZES`]: notified with each delta; never written.
pub const FOLD: &[u8] = b"fold";
/// Rows of [`SIZES`]: a transaction's delta goes to the row of its start timestamp, so
/// deltas spread over a few rows and their folders run side by side.
pub const SIZE_SHARDS: u64 = 4;

/// Sizes counted in [`SIZES`], or a change of them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SizeCounts {
    /// Documents processed (pages with a content hash).
    pub documents: i64,
    /// Anchors: one per (page, link target) pair.
    pub inlinks: i64,
    /// Link targets with at least one anchor.
    pub link_targets: i64,
    /// Pages stored cut ([`crate::raw`]): longer than the loader's limit, or than the store's
    /// largest value once compressed.
    #[serde(default)]
    pub cut_pages: i64,
}

impl SizeCounts {
    /// `<documents> <inlinks> <link_targets> <cut_pages>` (readable in `percolator scan`).
    pub fn encode(&self) -> Bytes {
        format!(
            "{} {} {} {}",
            self.documents, self.inlinks, self.link_targets, self.cut_pages
        )
        .into()
    }

    /// Decodes [`Self::encode`], and the three-field form written before cut pages were
    /// counted (none, then); `None` when `bytes` are neither.
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(bytes).ok()?;
        let mut fields = text.split(' ').map(|f| f.parse::<i64>().ok());
        let counts = Self {
            documents: fields.next()??,
            inlinks: fields.next()??,
            link_targets: fields.next()??,
            cut_pages: fields.next().unwrap_or(Some(0))?,
        };
        fields.next().is_none().then_some(counts)
    }

    /// The sum of two counts (or a count and a delta).
    pub fn plus(self, other: Self) -> Self {
        Self {
            documents: self.documents + other.documents,
            inlinks: self.inlinks + other.inlinks,
            link_targets: self.link_targets + other.link_targets,
            cut_pages: self.cut_pages + other.cut_pages,
        }
    }

    /// Whether nothing changes.
    pub fn is_zero(&self) -> bool {
        *self == Self::default()
    }
}

/// The [`SIZES`] row a transaction started at `start_ts` writes its delta in.
pub fn sizes_row(start_ts: u64) -> Bytes {
    shard_key(start_ts % SIZE_SHARDS)
}

/// The delta cell of a transaction started at `start_ts`.
pub fn delta_column(start_ts: u64) -> Bytes {
    format!("d:{start_ts:016x}").into()
}

/// Adds `delta` to the kept sizes in `txn` (nothing when it is zero): a cell of the
/// transaction's own, and a notification of its row's folder.
pub fn add<S: RowStore>(txn: &mut Transaction<S>, delta: SizeCounts) -> Result<()> {
    if delta.is_zero() {
        return Ok(());
    }
    let start_ts = txn.start_ts();
    let row = sizes_row(start_ts);
    txn.set(SIZES, &row, delta_column(start_ts), delta.encode())?;
    txn.notify(SIZES, &row, FOLD)
}

/// The sizes of the web index, as [`read`] finds them kept.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct IndexSizes {
    /// Documents processed (pages with a content hash).
    pub documents: i64,
    /// Clusters in the index: one per set of identical pages, searchable as its canonical.
    pub clusters: i64,
    /// Processed documents that are not in the index as a canonical (`documents −
    /// clusters`; also pages processed and not yet inverted).
    pub duplicates: i64,
    /// Link targets with at least one anchor.
    pub link_targets: i64,
    /// Anchors: one per (page, link target) pair.
    pub inlinks: i64,
    /// Pages stored cut: longer than the loader's limit, or than the store's largest value
    /// once compressed ([`crate::raw`]).
    #[serde(default)]
    pub cut_pages: i64,
    /// Index entries: (term, cluster) pairs.
    pub postings: i64,
    /// Tokens of the clusters in the index, summed.
    pub length: i64,
    /// Deltas not folded yet (counted in the sizes above).
    pub unfolded: u64,
    /// Cells of `sizes` or `corpus` that do not decode (read as zero; `check` names them).
    pub malformed: u64,
}

impl IndexSizes {
    /// Average length of an indexed cluster's canonical, in tokens.
    pub fn average_length(&self) -> f64 {
        if self.clusters > 0 {
            self.length as f64 / self.clusters as f64
        } else {
            0.0
        }
    }
}

/// What one [`SIZES`] row holds: its total and its deltas summed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct SizesRow {
    pub(crate) counts: SizeCounts,
    pub(crate) deltas: u64,
    pub(crate) malformed: u64,
}

/// Sums the cells of one [`SIZES`] row (its total and its deltas); `on_malformed` gets each
/// cell that does not decode.
pub(crate) fn sum_row(
    cells: impl IntoIterator<Item = (Bytes, Bytes)>,
    mut on_malformed: impl FnMut(&Bytes),
) -> SizesRow {
    let mut row = SizesRow::default();
    for (column, value) in cells {
        let is_delta = column.starts_with(DELTA_PREFIX);
        if !is_delta && column.as_ref() != TOTAL {
            continue;
        }
        match SizeCounts::decode(&value) {
            Some(counts) => row.counts = row.counts.plus(counts),
            None => {
                row.malformed += 1;
                on_malformed(&column);
            }
        }
        row.deltas += u64::from(is_delta);
    }
    row
}

/// The kept sizes, in `txn`'s snapshot: the [`SIZES`] rows and the corpus rows, a few cells
/// each (plus the deltas not folded yet).
pub async fn read<S: RowStore>(txn: &Transaction<S>) -> Result<IndexSizes> {
    let mut sizes = IndexSizes::default();
    for shard in 0..SIZE_SHARDS {
        let row = shard_key(shard);
        let cells = txn
            .scan(SIZES, row.clone()..=row, Columns::All)
            .await?
            .into_iter()
            .map(|item| (item.column, item.value));
        let summed = sum_row(cells, |_| {});
        sizes.documents += summed.counts.documents;
        sizes.inlinks += summed.counts.inlinks;
        sizes.link_targets += summed.counts.link_targets;
        sizes.cut_pages += summed.counts.cut_pages;
        sizes.unfolded += summed.deltas;
        sizes.malformed += summed.malformed;
    }
    let mut corpus = CorpusCounts::default();
    for shard in 0..INDEX_SHARDS {
        if let Some(cell) = txn.get(CORPUS, shard_key(shard), COUNTS).await? {
            match CorpusCounts::parse(&cell) {
                Some(counts) => corpus = corpus.plus(counts),
                None => sizes.malformed += 1,
            }
        }
    }
    sizes.clusters = corpus.documents;
    sizes.length = corpus.length;
    sizes.postings = corpus.postings;
    sizes.duplicates = sizes.documents - sizes.clusters;
    Ok(sizes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_round_trip_and_refuse_other_bytes() {
        let counts = SizeCounts {
            documents: 3,
            inlinks: -7,
            link_targets: 2,
            cut_pages: -1,
        };
        assert_eq!(SizeCounts::decode(&counts.encode()), Some(counts));
        // The form from before cut pages were counted.
        assert_eq!(
            SizeCounts::decode(b"3 -7 2"),
            Some(SizeCounts {
                cut_pages: 0,
                ..counts
            })
        );
        for bad in [
            &b""[..],
            b"1 2",
            b"1 2 3 4 5",
            b"1 2 3 x",
            b"1 x 3",
            b"\xff",
            b" 1 2 3",
        ] {
            assert_eq!(SizeCounts::decode(bad), None, "{bad:?}");
        }
        assert_eq!(delta_column(255), Bytes::from_static(b"d:00000000000000ff"));
        assert!(sizes_row(6).starts_with(b"shard-"));
    }

    #[test]
    fn a_row_sums_its_total_and_deltas() {
        let one = SizeCounts {
            documents: 1,
            inlinks: 2,
            link_targets: 0,
            cut_pages: 1,
        };
        let cells = [
            (Bytes::from_static(TOTAL), one.encode()),
            (delta_column(9), one.encode()),
            (delta_column(10), Bytes::from_static(b"garbage")),
            (Bytes::from_static(b"other"), Bytes::from_static(b"ignored")),
        ];
        let mut bad = Vec::new();
        let row = sum_row(cells, |c| bad.push(c.clone()));
        assert_eq!(row.counts, one.plus(one));
        assert_eq!((row.deltas, row.malformed), (2, 1));
        assert_eq!(bad, vec![delta_column(10)]);
    }
}
