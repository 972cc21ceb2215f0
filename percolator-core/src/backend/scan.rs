//! Helpers for backends that answer scans and row reads by walking their own key order: bounds,
//! version limits, paging.

use std::ops::Bound;

use bytes::Bytes;

use crate::store::{Cell, RowCells};

/// How many versions of `column` the last of `rows` already holds, if that row is `row`: what
/// a backend paging through a scan compares with `max_versions` to skip the rest of a
/// column's history instead of reading it.
pub fn versions_taken(rows: &[RowCells], row: &[u8], column: &[u8]) -> usize {
    rows.last()
        .filter(|r| r.row.as_ref() == row)
        .map_or(0, |r| {
            r.cells
                .iter()
                .rev()
                .take_while(|c| c.column.as_ref() == column)
                .count()
        })
}

/// Whether `row` lies within `[start, end]` bounds (used by backends that filter while scanning).
pub fn row_in_bounds(row: &[u8], start: &Bound<Bytes>, end: &Bound<Bytes>) -> bool {
    let after_start = match start {
        Bound::Included(s) => row >= s.as_ref(),
        Bound::Excluded(s) => row > s.as_ref(),
        Bound::Unbounded => true,
    };
    after_start && !row_past_end(row, end)
}

/// Whether `row` lies beyond `end` (a scan in row order can stop there).
pub fn row_past_end(row: &[u8], end: &Bound<Bytes>) -> bool {
    match end {
        Bound::Included(e) => row > e.as_ref(),
        Bound::Excluded(e) => row >= e.as_ref(),
        Bound::Unbounded => false,
    }
}

/// Keeps at most `max` newest versions per column of a list ordered by column then newest first.
pub fn truncate_versions(cells: &mut Vec<Cell>, max: Option<usize>) {
    let Some(max) = max else { return };
    let mut kept = 0usize;
    let mut current: Option<Bytes> = None;
    cells.retain(|cell| {
        if current.as_ref() != Some(&cell.column) {
            current = Some(cell.column.clone());
            kept = 0;
        }
        kept += 1;
        kept <= max
    });
}
