//! Checks a backend runs on a batch before it applies anything: the limits it declared
//! ([`StoreLimits`]), empty table names, rows repeated in an all-or-nothing batch. The
//! transaction layer runs the same checks when a write is buffered, so bad input fails before
//! any lock is written.

use bytes::Bytes;

use crate::backend::key;
use crate::error::StoreError;
use crate::store::{Mutation, RowMutation, StoreLimits};

/// Checks a batch against a backend's limits before anything is applied. Backends call this
/// first in `mutate_rows`; the transaction layer calls the same checks when a write is buffered.
pub fn validate_batch(batch: &[RowMutation], limits: &StoreLimits) -> Result<(), StoreError> {
    if batch.len() > limits.max_batch_rows {
        return Err(StoreError::TooLarge {
            what: "row mutations in one batch",
            size: batch.len(),
            limit: limits.max_batch_rows,
        });
    }
    for item in batch {
        if item.table.is_empty() {
            return Err(StoreError::InvalidInput("empty table name".into()));
        }
        let ops = item.conditions.len().max(item.mutations.len());
        if ops > limits.max_row_ops {
            return Err(StoreError::TooLarge {
                what: "conditions or mutations (items) in one row mutation",
                size: ops,
                limit: limits.max_row_ops,
            });
        }
        for m in &item.mutations {
            let column = match m {
                Mutation::Put { column, value, .. } => {
                    check_value_size(value.len(), limits)?;
                    column
                }
                Mutation::Delete { column, .. } | Mutation::DeleteRange { column, .. } => column,
            };
            check_key_size(&item.table, &item.row, column, limits)?;
        }
    }
    Ok(())
}

/// [`validate_batch`] for [`crate::RowStore::mutate_rows_atomically`]: also at most
/// [`StoreLimits::max_atomic_rows`] items, on distinct rows.
pub fn validate_atomic_batch(
    batch: &[RowMutation],
    limits: &StoreLimits,
) -> Result<(), StoreError> {
    if batch.len() > limits.max_atomic_rows {
        return Err(too_many_atomic_rows(batch.len(), limits.max_atomic_rows));
    }
    validate_batch(batch, limits)?;
    if let Some((table, row)) = repeated_row(batch) {
        return Err(StoreError::InvalidInput(format!(
            "row {:?} of table {:?} appears twice in one atomic mutation",
            String::from_utf8_lossy(row),
            String::from_utf8_lossy(table),
        )));
    }
    Ok(())
}

/// A `(table, row)` that more than one item of `batch` mutates, if any.
pub fn repeated_row(batch: &[RowMutation]) -> Option<(&Bytes, &Bytes)> {
    let mut rows: Vec<(&Bytes, &Bytes)> = batch.iter().map(|m| (&m.table, &m.row)).collect();
    rows.sort_unstable();
    rows.windows(2)
        .find(|pair| pair[0] == pair[1])
        .map(|pair| pair[0])
}

pub(crate) fn too_many_atomic_rows(size: usize, limit: usize) -> StoreError {
    StoreError::TooLarge {
        what: "row mutations in one atomic (all-or-nothing) batch",
        size,
        limit,
    }
}

/// Errors if the encoded key of `(table, row, column)` exceeds the backend's limit.
pub fn check_key_size(
    table: &[u8],
    row: &[u8],
    column: &[u8],
    limits: &StoreLimits,
) -> Result<(), StoreError> {
    let size = key::encoded_len(table.len())
        + key::encoded_len(row.len())
        + key::encoded_len(column.len())
        + 8;
    if size > limits.max_key_bytes {
        return Err(StoreError::TooLarge {
            what: "bytes of an encoded cell key (table + row + column)",
            size,
            limit: limits.max_key_bytes,
        });
    }
    Ok(())
}

/// Errors if a value exceeds the backend's limit.
pub fn check_value_size(size: usize, limits: &StoreLimits) -> Result<(), StoreError> {
    if size > limits.max_value_bytes {
        return Err(StoreError::TooLarge {
            what: "bytes of a cell value",
            size,
            limit: limits.max_value_bytes,
        });
    }
    Ok(())
}
