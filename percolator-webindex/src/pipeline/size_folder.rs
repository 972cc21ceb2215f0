//! The size folder: adds the deltas of a `sizes` row into the row's total and deletes them,
//! so that reading the kept sizes costs a few cells (see [`crate::sizes`]).

use std::time::Duration;

use async_trait::async_trait;
use percolator_core::{Error, ObservedColumn, Result, RowStore, Transaction};
use percolator_observers::{Change, Observer};

use super::{lossy, scan_row};
use crate::sizes::{DELTA_PREFIX, FOLD, SIZES, SizeCounts, TOTAL};

/// How long a `sizes` row collects deltas before its folder runs ([`Observer::batch_delay`]):
/// one run folds what a second of transactions added. Readers sum the unfolded deltas, so
/// the delay costs them a few cells, never exactness.
pub const FOLD_DELAY: Duration = Duration::from_secs(1);

/// The most deltas one run folds; past it the run notifies its row again.
pub const FOLD_BATCH: usize = 4096;

/// Folds a `sizes` row's deltas into its total.
#[derive(Debug, Clone, Copy, Default)]
pub struct SizeFolder;

#[async_trait]
impl<S: RowStore> Observer<S> for SizeFolder {
    fn name(&self) -> &str {
        "size-folder"
    }

    fn observed(&self) -> ObservedColumn {
        ObservedColumn::weak(SIZES, FOLD)
    }

    fn batch_delay(&self) -> Duration {
        FOLD_DELAY
    }

    async fn observe(&self, txn: &mut Transaction<S>, change: &Change) -> Result<()> {
        let row = change.row.clone();
        // A prewrite takes two store operations per column written, plus one: the deltas'
        // deletes, the total and the cleared notification are columns of this row.
        let max_deltas = FOLD_BATCH
            .min((txn.store_limits().max_row_ops.saturating_sub(1) / 2).saturating_sub(2))
            .max(1);
        // The total is read on its own: deltas sort before it, and a run that stops at its
        // batch limit must still add to the whole total, not replace it.
        let mut total = match txn.get(SIZES, &row, TOTAL).await? {
            None => SizeCounts::default(),
            Some(value) => SizeCounts::decode(&value).ok_or_else(|| {
                Error::Corrupt(format!(
                    "sizes row {:?}: the total {:?} is not `<documents> <inlinks> <link targets>`",
                    lossy(&row),
                    lossy(&value)
                ))
            })?,
        };
        let (mut folded, mut more) = (0usize, false);
        for item in scan_row(txn, SIZES, &row).await? {
            if !item.column.starts_with(DELTA_PREFIX) {
                continue;
            }
            if folded == max_deltas {
                more = true;
                break;
            }
            // A delta that does not decode stays where it is, for `check` to name.
            if let Some(delta) = SizeCounts::decode(&item.value) {
                total = total.plus(delta);
                txn.delete(SIZES, &row, &item.column)?;
                folded += 1;
            }
        }
        if folded > 0 {
            // Concurrent runs for one row both write the total: one of them commits.
            txn.set(SIZES, &row, TOTAL, total.encode())?;
        }
        if more {
            txn.notify(SIZES, &row, FOLD)?;
        }
        Ok(())
    }
}
