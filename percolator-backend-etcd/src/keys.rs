//! Where a cell lives in etcd's flat key space:
//! `enc(namespace) ++ 'f' ++ family ++ CellKey::encode(table, row, column, ts)`, as in the TiKV
//! backend. One contiguous key range per family (the notify family scans alone), rows contiguous
//! inside it, versions of a column newest first (the timestamp is stored inverted). Beside the
//! families: `enc(namespace) ++ 'r' ++ key` for raw benchmark keys and `enc(namespace) ++ 'g'`,
//! the revision of the last GC run (`RowStore::collect_garbage`).

use bytes::Bytes;
use percolator_core::backend::key::{self, CellKey};
use percolator_core::{Family, StoreError, TsRange};

/// Longest namespace accepted.
pub const MAX_NAMESPACE: usize = 64;

/// The key layout of one store (one namespace).
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    namespace: Vec<u8>,
}

impl Layout {
    pub(crate) fn new(namespace: &[u8]) -> Result<Self, StoreError> {
        if namespace.len() > MAX_NAMESPACE {
            return Err(StoreError::InvalidInput(format!(
                "etcd namespace is {} bytes, at most {MAX_NAMESPACE}",
                namespace.len()
            )));
        }
        Ok(Self {
            namespace: key::table_prefix(namespace),
        })
    }

    /// Bytes every key of this store starts with.
    pub(crate) fn namespace(&self) -> &[u8] {
        &self.namespace
    }

    /// The key recording the etcd revision of the last GC run (`RowStore::collect_garbage`).
    pub(crate) fn gc_mark(&self) -> Vec<u8> {
        [self.namespace.as_slice(), b"g"].concat()
    }

    pub(crate) fn family_prefix(&self, family: Family) -> Vec<u8> {
        let mut k = Vec::with_capacity(self.namespace.len() + 2);
        k.extend_from_slice(&self.namespace);
        k.push(b'f');
        k.push(family.index() as u8);
        k
    }

    /// The first key of `table` (all its rows) in `family`.
    pub(crate) fn table_start(&self, family: Family, table: &[u8]) -> Vec<u8> {
        let mut k = self.family_prefix(family);
        k.extend_from_slice(&key::table_prefix(table));
        k
    }

    /// The first key of `row` in `family`.
    pub(crate) fn row_start(&self, family: Family, table: &[u8], row: &[u8]) -> Vec<u8> {
        let mut k = self.family_prefix(family);
        k.extend_from_slice(&key::row_prefix(table, row));
        k
    }

    pub(crate) fn cell(
        &self,
        family: Family,
        table: &[u8],
        row: &[u8],
        column: &[u8],
        ts: u64,
    ) -> Bytes {
        let mut k = self.family_prefix(family);
        k.extend_from_slice(&key::column_prefix(table, row, column));
        key::encode_ts(&mut k, ts);
        Bytes::from(k)
    }

    /// `[start, end)` covering the versions `ts` of one column (newest first).
    pub(crate) fn versions(
        &self,
        family: Family,
        table: &[u8],
        row: &[u8],
        column: &[u8],
        ts: TsRange,
    ) -> (Bytes, Bytes) {
        let start = self.cell(family, table, row, column, ts.hi);
        let end = after(&self.cell(family, table, row, column, ts.lo));
        (start, Bytes::from(end))
    }

    /// The table, row, column and timestamp of a key read from `family`.
    pub(crate) fn decode(&self, family: Family, k: &[u8]) -> Result<CellKey, StoreError> {
        let prefix = self.family_prefix(family);
        let rest = k.strip_prefix(prefix.as_slice()).ok_or_else(|| {
            StoreError::Corrupt("etcd returned a key outside the family read".into())
        })?;
        Ok(CellKey::decode(rest)?)
    }
}

/// The smallest key after `k` (`k ++ 0x00`).
pub(crate) fn after(k: &[u8]) -> Vec<u8> {
    let mut next = Vec::with_capacity(k.len() + 1);
    next.extend_from_slice(k);
    next.push(0);
    next
}

/// The first key after every key that starts with `prefix`. Our prefixes end in encoded
/// segments, never in 0xFF, so a successor always exists; the fallback covers the rest.
pub(crate) fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    key::prefix_successor(prefix).unwrap_or_else(|| vec![0xFF; prefix.len() + 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_ranges_cover_exactly_their_versions() {
        let layout = Layout::new(b"ns").unwrap();
        let (start, end) = layout.versions(Family::Write, b"t", b"r", b"c", TsRange::new(5, 9));
        for (ts, inside) in [(4, false), (5, true), (7, true), (9, true), (10, false)] {
            let k = layout.cell(Family::Write, b"t", b"r", b"c", ts);
            assert_eq!(k >= start && k < end, inside, "ts {ts}");
        }
        // Other columns, rows and families stay outside.
        for k in [
            layout.cell(Family::Write, b"t", b"r", b"c\0", 7),
            layout.cell(Family::Write, b"t", b"r\0", b"c", 7),
            layout.cell(Family::Lock, b"t", b"r", b"c", 7),
        ] {
            assert!(!(k >= start && k < end));
        }
        let decoded = layout
            .decode(
                Family::Write,
                &layout.cell(Family::Write, b"t", b"r", b"c", 7),
            )
            .unwrap();
        assert_eq!(
            (
                decoded.table.as_slice(),
                decoded.row.as_slice(),
                decoded.column.as_slice(),
                decoded.ts
            ),
            (&b"t"[..], &b"r"[..], &b"c"[..], 7)
        );
        assert!(layout.decode(Family::Lock, &start).is_err());
        assert!(Layout::new(&[0; MAX_NAMESPACE + 1]).is_err());
    }
}
