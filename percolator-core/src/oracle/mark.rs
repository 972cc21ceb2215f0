//! The oracle's row in the store (`__percolator_meta` / `oracle`, column `high_water`): the
//! persisted high-water mark, the oracle that owns it, a renewal counter that changes with
//! every write (so a waiting oracle can tell a live owner from a dead one), and whether the
//! owner released it.

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::{Error, Result, StoreError};
use crate::store::{
    Columns, Condition, Family, FamilyRead, Mutation, ReadRow, RowMutation, RowStore, TsRange,
};
use crate::tables;

const HIGH_WATER_COLUMN: &[u8] = b"high_water";
/// Attempts of one compare-and-swap whose outcome stays unknown.
const CAS_ATTEMPTS: usize = 4;

/// The decoded row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MarkRow {
    /// Every timestamp handed out so far is below it.
    pub(crate) mark: u64,
    /// The oracle that wrote it.
    pub(crate) owner: u64,
    /// Bumped by every write of the owner.
    pub(crate) renewals: u64,
    /// The owner gave it up (graceful shutdown): another oracle may take over at once.
    pub(crate) released: bool,
}

impl MarkRow {
    pub(crate) fn encode(&self) -> Bytes {
        let mut out = BytesMut::with_capacity(25);
        out.put_u64(self.mark);
        out.put_u64(self.owner);
        out.put_u64(self.renewals);
        out.put_u8(u8::from(self.released));
        out.freeze()
    }

    /// Parses the row; the 16-byte format (mark, owner) that older databases hold reads as held.
    pub(crate) fn decode(bytes: &Bytes) -> Result<Self> {
        let word = |i: usize| {
            bytes
                .get(i * 8..i * 8 + 8)
                .and_then(|b| <[u8; 8]>::try_from(b).ok())
                .map(u64::from_be_bytes)
        };
        match (bytes.len(), word(0), word(1), word(2), bytes.get(24)) {
            (16, Some(mark), Some(owner), _, _) => Ok(Self {
                mark,
                owner,
                renewals: 0,
                released: false,
            }),
            (25, Some(mark), Some(owner), Some(renewals), Some(&flag)) if flag <= 1 => Ok(Self {
                mark,
                owner,
                renewals,
                released: flag == 1,
            }),
            _ => Err(Error::Corrupt(format!(
                "oracle high-water mark row is {} bytes, expected 25 (or 16)",
                bytes.len()
            ))),
        }
    }
}

/// The row's current bytes, if any.
pub(crate) async fn read<S: RowStore>(store: &S) -> Result<Option<Bytes>> {
    let cells = store
        .read_row(ReadRow {
            snapshot_ts: None,
            table: Bytes::from_static(tables::META_TABLE),
            row: Bytes::from_static(tables::ORACLE_ROW),
            reads: vec![
                FamilyRead::all(Family::Data)
                    .columns(Columns::one(Bytes::from_static(HIGH_WATER_COLUMN)))
                    .max_versions(1),
            ],
        })
        .await?;
    Ok(cells
        .into_iter()
        .next()
        .and_then(|c| c.into_iter().next())
        .map(|c| c.value))
}

/// Replaces the row's bytes `expected` (`None`: no row yet) with `new`. `Ok(None)` when it
/// applied (or an unknown outcome turned out applied on reading back), `Ok(Some(current))`
/// with the row found instead when it did not.
pub(crate) async fn compare_and_swap<S: RowStore>(
    store: &S,
    expected: Option<&Bytes>,
    new: &Bytes,
) -> Result<Option<Option<Bytes>>> {
    let condition = match expected {
        None => Condition::Absent {
            family: Family::Data,
            column: Bytes::from_static(HIGH_WATER_COLUMN),
            ts: TsRange::at(0),
        },
        Some(bytes) => Condition::Equals {
            family: Family::Data,
            column: Bytes::from_static(HIGH_WATER_COLUMN),
            ts: 0,
            value: bytes.clone(),
        },
    };
    let mutation = RowMutation {
        table: Bytes::from_static(tables::META_TABLE),
        row: Bytes::from_static(tables::ORACLE_ROW),
        conditions: vec![condition],
        mutations: vec![Mutation::Put {
            family: Family::Data,
            column: Bytes::from_static(HIGH_WATER_COLUMN),
            ts: 0,
            value: new.clone(),
        }],
    };
    for _ in 0..CAS_ATTEMPTS {
        let applied = match store.mutate_rows(vec![mutation.clone()]).await {
            Ok(outcome) => outcome.first().is_some_and(|o| o.applied()),
            Err(StoreError::Unavailable(_)) => false, // unknown: read it back below
            Err(e) => return Err(e.into()),
        };
        if applied {
            return Ok(None);
        }
        let current = read(store).await?;
        if current.as_ref() == Some(new) {
            return Ok(None); // an earlier attempt landed
        }
        if current.as_ref() != expected {
            return Ok(Some(current));
        }
        // Unchanged: our write did not land; try again.
    }
    Err(Error::Store(StoreError::Unavailable(
        "could not write the oracle's high-water mark".into(),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_round_trip_and_old_rows_read_as_held() {
        let row = MarkRow {
            mark: 7,
            owner: 9,
            renewals: 3,
            released: true,
        };
        assert_eq!(MarkRow::decode(&row.encode()).unwrap(), row);
        let mut old = BytesMut::new();
        old.put_u64(5);
        old.put_u64(6);
        assert_eq!(
            MarkRow::decode(&old.freeze()).unwrap(),
            MarkRow {
                mark: 5,
                owner: 6,
                renewals: 0,
                released: false
            }
        );
        for bad in [&b""[..], &[0u8; 24], &[2u8; 25]] {
            assert!(MarkRow::decode(&Bytes::copy_from_slice(bad)).is_err());
        }
    }
}
