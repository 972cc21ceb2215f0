//! Invariant 8: the sizes kept as the pipeline runs ([`crate::sizes`]) are the sizes the check
//! counted.

use percolator_core::{Result, RowStore, Transaction};

use super::IndexSummary;
use super::violations::{Violations, at};
use super::walk::{ProgressFn, for_each_item};
use crate::sizes::{DELTA_PREFIX, SIZES, SizeCounts, TOTAL, sum_row};

/// Checks invariant 8: the documents, inlinks, link targets and cut pages kept in `sizes` (totals and
/// deltas not folded yet) are the ones counted in `summary`, and every cell of `sizes`
/// decodes. (The postings the corpus rows keep are invariant 6.)
///
/// It holds because the stage that changes a size adds the change in the same transaction
/// (the document processor for a page it parses first or deletes and the links it adds or
/// drops, the link forwarder for a target that gains its first anchor or loses its last, the
/// loader for a page stored cut or a cut one replaced or deleted), and
/// the folder moves deltas into totals without changing their sum.
pub(super) async fn check_kept_sizes<S: RowStore>(
    txn: &Transaction<S>,
    summary: &IndexSummary,
    progress: ProgressFn<'_>,
    violations: &mut Violations,
) -> Result<()> {
    let mut cells = Vec::new();
    for_each_item(txn, SIZES, None, progress, |item| {
        if item.column.as_ref() == TOTAL || item.column.starts_with(DELTA_PREFIX) {
            cells.push(item);
        }
    })
    .await?;
    let mut kept = SizeCounts::default();
    let mut start = 0;
    while start < cells.len() {
        let row = cells[start].row.clone();
        let end = start + cells[start..].iter().take_while(|c| c.row == row).count();
        let summed = sum_row(
            cells[start..end]
                .iter()
                .map(|c| (c.column.clone(), c.value.clone())),
            |column| {
                violations.add(
                    8,
                    "kept size does not decode",
                    at(
                        SIZES,
                        &row,
                        format_args!("column {}", super::escaped(column)),
                    ),
                );
            },
        );
        kept = kept.plus(summed.counts);
        start = end;
    }
    let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    for (size, kept, counted) in [
        ("documents", kept.documents, count(summary.processed)),
        ("inlinks", kept.inlinks, count(summary.inlinks)),
        (
            "link targets",
            kept.link_targets,
            count(summary.link_targets),
        ),
        ("cut pages", kept.cut_pages, count(summary.cut_pages)),
    ] {
        if kept != counted {
            violations.add_n(
                8,
                "kept size is not the size counted",
                kept.abs_diff(counted),
                format!("sizes ({size}): kept {kept}, counted {counted}"),
            );
        }
    }
    Ok(())
}
