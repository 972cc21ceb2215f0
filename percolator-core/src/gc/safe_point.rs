//! The persisted safe point: one cell in the reserved meta table, only ever raised (a
//! compare-and-swap on its old value), so every process reads the same or a newer one.

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::liveness::WorkerLease;
use crate::store::{
    Columns, Condition, Family, FamilyRead, Mutation, MutationOutcome, ReadRow, RowMutation,
    RowStore, TsRange,
};
use crate::tables::META_TABLE;

/// Row of [`META_TABLE`] holding the safe point.
pub const SAFE_POINT_ROW: &[u8] = b"gc_safe_point";
const SAFE_POINT_COLUMN: &[u8] = b"safe_point";

/// The persisted safe point (0 if none was ever set).
pub async fn read<S: RowStore + ?Sized>(store: &S) -> Result<u64> {
    Ok(read_cell(store).await?.unwrap_or(0))
}

async fn read_cell<S: RowStore + ?Sized>(store: &S) -> Result<Option<u64>> {
    let answer = store
        .read_row(ReadRow {
            snapshot_ts: None,
            table: Bytes::from_static(META_TABLE),
            row: Bytes::from_static(SAFE_POINT_ROW),
            reads: vec![
                FamilyRead::all(Family::Data)
                    .columns(Columns::one(Bytes::from_static(SAFE_POINT_COLUMN)))
                    .ts(TsRange::at(0)),
            ],
        })
        .await?;
    let Some(cell) = answer.into_iter().flatten().next() else {
        return Ok(None);
    };
    let bytes: [u8; 8] = cell.value.as_ref().try_into().map_err(|_| {
        Error::Corrupt(format!(
            "the GC safe point is {} bytes, expected 8",
            cell.value.len()
        ))
    })?;
    Ok(Some(u64::from_be_bytes(bytes)))
}

/// Raises the persisted safe point to `candidate` unless it is already at or above it; returns
/// the safe point now in force.
pub async fn advance<S: RowStore + ?Sized>(store: &S, candidate: u64) -> Result<u64> {
    loop {
        let current = read_cell(store).await?;
        if let Some(current) = current
            && current >= candidate
        {
            return Ok(current);
        }
        let column = Bytes::from_static(SAFE_POINT_COLUMN);
        let condition = match current {
            Some(old) => Condition::Equals {
                family: Family::Data,
                column: column.clone(),
                ts: 0,
                value: Bytes::copy_from_slice(&old.to_be_bytes()),
            },
            None => Condition::Absent {
                family: Family::Data,
                column: column.clone(),
                ts: TsRange::at(0),
            },
        };
        let outcome = store
            .mutate_rows(vec![RowMutation {
                table: Bytes::from_static(META_TABLE),
                row: Bytes::from_static(SAFE_POINT_ROW),
                conditions: vec![condition],
                mutations: vec![Mutation::Put {
                    family: Family::Data,
                    column,
                    ts: 0,
                    value: Bytes::copy_from_slice(&candidate.to_be_bytes()),
                }],
            }])
            .await?;
        if outcome.first() == Some(&MutationOutcome::Applied) {
            return Ok(candidate);
        }
        // Another collector moved it meanwhile: read it again.
    }
}

/// The safe point the leases allow at oracle timestamp `now_ts` (oracle time `now_ms`): the
/// oldest start timestamp any live worker published, and never above `now_ts`, less `grace`
/// (in timestamp units). A lease without a published timestamp counts as 0.
pub fn allowed_by(leases: &[WorkerLease], now_ts: u64, now_ms: u64, grace: u64) -> u64 {
    leases
        .iter()
        .filter(|lease| lease.until_ms >= now_ms)
        .map(|lease| lease.oldest_start_ts.unwrap_or(0))
        .fold(now_ts, u64::min)
        .saturating_sub(grace)
}
