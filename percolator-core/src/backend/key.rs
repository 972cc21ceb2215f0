//! Order-preserving, unambiguous encoding of `(table, row, column, timestamp)` into one byte key.
//!
//! Backends that keep cells in a single ordered byte-keyed map (sled trees, TiKV) need a key whose
//! byte order equals the logical order: tables, then rows, then columns in byte order, then
//! timestamps **newest first**. Row keys, column names and table names are arbitrary bytes (empty,
//! NUL, 0xFF, non-UTF-8), so a plain concatenation would be ambiguous (`"a" + "bc"` vs `"ab" + "c"`)
//! and would break ordering at component boundaries.
//!
//! Each byte-string component uses the "memcomparable" group encoding (as in TiKV / MyRocks):
//! the input is cut into 8-byte groups; each group is followed by a marker byte. A full group
//! that is followed by more data gets marker `0xFF`; the final group is zero-padded and gets
//! marker `0xFF - pad` (`pad` in `1..=8`; an input whose length is a multiple of 8 ends with an
//! all-padding group). This is
//! - **order-preserving**: `a < b` iff `enc(a) < enc(b)`, and for tuples the concatenation of
//!   encodings compares like the tuple;
//! - **prefix-free**: no encoding is a proper prefix of another, so a concatenation decodes
//!   unambiguously and `enc(table) ++ enc(row)` is a prefix of exactly that row's cells.
//!
//! Timestamps are appended as `(u64::MAX - ts)` big-endian, so a forward scan meets the newest
//! version of a column first.
//!
//! Decoding never panics: malformed input yields [`KeyError`].

use thiserror::Error;

const GROUP: usize = 8;
const MARKER_FULL: u8 = 0xFF;

/// Why an encoded key could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The input ended in the middle of a component.
    #[error("encoded key truncated at byte {offset}")]
    Truncated {
        /// Byte offset where more input was expected.
        offset: usize,
    },
    /// A group marker byte is not one the encoder produces.
    #[error("invalid group marker {marker:#04x} at byte {offset}")]
    BadMarker {
        /// Offending marker.
        marker: u8,
        /// Byte offset of the marker.
        offset: usize,
    },
    /// Padding bytes of the final group are not zero.
    #[error("non-zero padding in group ending at byte {offset}")]
    BadPadding {
        /// Byte offset of the group's marker.
        offset: usize,
    },
    /// Bytes remain after the last expected component.
    #[error("{extra} trailing bytes after the encoded key")]
    Trailing {
        /// Number of unexpected bytes.
        extra: usize,
    },
}

/// Number of bytes `encode_bytes` produces for an input of `len` bytes.
pub const fn encoded_len(len: usize) -> usize {
    (len / GROUP + 1) * (GROUP + 1)
}

/// Appends the memcomparable encoding of `input` to `out`.
pub fn encode_bytes(out: &mut Vec<u8>, input: &[u8]) {
    out.reserve(encoded_len(input.len()));
    let mut chunks = input.chunks_exact(GROUP);
    for chunk in &mut chunks {
        out.extend_from_slice(chunk);
        out.push(MARKER_FULL);
    }
    let rest = chunks.remainder();
    let pad = GROUP - rest.len();
    out.extend_from_slice(rest);
    out.extend(std::iter::repeat_n(0u8, pad));
    // pad is in 1..=8, so the marker is in 0xF7..=0xFE: never MARKER_FULL.
    out.push(MARKER_FULL - pad as u8);
}

/// Decodes one memcomparable component from the front of `input`.
///
/// Returns the decoded bytes and the number of input bytes consumed. `base` is only used to
/// report offsets relative to the whole key.
pub fn decode_bytes(input: &[u8], base: usize) -> Result<(Vec<u8>, usize), KeyError> {
    let mut out = Vec::with_capacity(input.len());
    let mut pos = 0;
    loop {
        let Some(group) = input.get(pos..pos + GROUP + 1) else {
            return Err(KeyError::Truncated {
                offset: base + input.len(),
            });
        };
        let (data, marker) = group.split_at(GROUP);
        let marker = marker[0];
        pos += GROUP + 1;
        if marker == MARKER_FULL {
            out.extend_from_slice(data);
            continue;
        }
        let pad = usize::from(MARKER_FULL - marker);
        if !(1..=GROUP).contains(&pad) {
            return Err(KeyError::BadMarker {
                marker,
                offset: base + pos - 1,
            });
        }
        let (kept, padding) = data.split_at(GROUP - pad);
        if padding.iter().any(|&b| b != 0) {
            return Err(KeyError::BadPadding {
                offset: base + pos - 1,
            });
        }
        out.extend_from_slice(kept);
        return Ok((out, pos));
    }
}

/// Appends a timestamp so that newer timestamps sort first.
pub fn encode_ts(out: &mut Vec<u8>, ts: u64) {
    out.extend_from_slice(&(u64::MAX - ts).to_be_bytes());
}

/// Decodes a timestamp written by [`encode_ts`] from the front of `input`.
pub fn decode_ts(input: &[u8], base: usize) -> Result<u64, KeyError> {
    let bytes: [u8; 8] =
        input
            .get(..8)
            .and_then(|b| b.try_into().ok())
            .ok_or(KeyError::Truncated {
                offset: base + input.len(),
            })?;
    Ok(u64::MAX - u64::from_be_bytes(bytes))
}

/// The logical address of one cell inside one family.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CellKey {
    /// Table name.
    pub table: Vec<u8>,
    /// Row key.
    pub row: Vec<u8>,
    /// Column qualifier.
    pub column: Vec<u8>,
    /// Version timestamp.
    pub ts: u64,
}

impl CellKey {
    /// Encodes the full key: `enc(table) ++ enc(row) ++ enc(column) ++ !ts`.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(
            encoded_len(self.table.len())
                + encoded_len(self.row.len())
                + encoded_len(self.column.len())
                + 8,
        );
        encode_bytes(&mut out, &self.table);
        encode_bytes(&mut out, &self.row);
        encode_bytes(&mut out, &self.column);
        encode_ts(&mut out, self.ts);
        out
    }

    /// Decodes a key produced by [`CellKey::encode`]; never panics.
    pub fn decode(input: &[u8]) -> Result<Self, KeyError> {
        let (table, a) = decode_bytes(input, 0)?;
        let (row, b) = decode_bytes(&input[a..], a)?;
        let (column, c) = decode_bytes(&input[a + b..], a + b)?;
        let at = a + b + c;
        let ts = decode_ts(&input[at..], at)?;
        let extra = input.len() - at - 8;
        if extra != 0 {
            return Err(KeyError::Trailing { extra });
        }
        Ok(Self {
            table,
            row,
            column,
            ts,
        })
    }
}

/// `enc(table)`: the prefix shared by every cell of a table.
pub fn table_prefix(table: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(encoded_len(table.len()));
    encode_bytes(&mut out, table);
    out
}

/// `enc(table) ++ enc(row)`: the prefix shared by every cell of one row (and of no other row).
pub fn row_prefix(table: &[u8], row: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(encoded_len(table.len()) + encoded_len(row.len()));
    encode_bytes(&mut out, table);
    encode_bytes(&mut out, row);
    out
}

/// `enc(table) ++ enc(row) ++ enc(column)`: the prefix of every version of one column.
pub fn column_prefix(table: &[u8], row: &[u8], column: &[u8]) -> Vec<u8> {
    let mut out = row_prefix(table, row);
    encode_bytes(&mut out, column);
    out
}

/// The smallest byte string greater than every string that starts with `prefix` (the exclusive
/// end of a prefix scan). Prefixes built by this module end in a group marker, never 0xFF, so this
/// is `prefix` with its last byte incremented; `None` if `prefix` is empty or all 0xFF (no finite
/// bound exists).
pub fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut out = prefix.to_vec();
    while let Some(last) = out.pop() {
        if last < 0xFF {
            out.push(last + 1);
            return Some(out);
        }
    }
    None
}

/// Checks one arbitrary input the way the fuzz target does: decoding never panics, and anything
/// that decodes re-encodes to the same bytes (the encoding is canonical).
///
/// Returns `false` if the canonical-form property is violated.
pub fn fuzz_check(input: &[u8]) -> bool {
    match CellKey::decode(input) {
        Ok(key) => key.encode() == input,
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn enc(b: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        encode_bytes(&mut v, b);
        v
    }

    #[test]
    fn known_vectors() {
        assert_eq!(enc(b""), vec![0, 0, 0, 0, 0, 0, 0, 0, 0xF7]);
        assert_eq!(enc(b"\x01"), vec![1, 0, 0, 0, 0, 0, 0, 0, 0xF8]);
        assert_eq!(
            enc(b"12345678"),
            [b"12345678".as_slice(), &[0xFF], &[0; 8], &[0xF7]].concat()
        );
    }

    #[test]
    fn edge_inputs_round_trip_and_order() {
        let inputs: Vec<&[u8]> = vec![
            b"",
            b"\x00",
            b"\x00\x00",
            b"\xff",
            b"\xff\xff\xff\xff\xff\xff\xff\xff",
            b"\xff\xff\xff\xff\xff\xff\xff\xff\x00",
            b"a\x00b",
            b"\xc3\x28 not utf-8",
        ];
        for a in &inputs {
            let (d, used) = decode_bytes(&enc(a), 0).unwrap();
            assert_eq!(&d, a);
            assert_eq!(used, enc(a).len());
            for b in &inputs {
                assert_eq!(a.cmp(b), enc(a).cmp(&enc(b)), "{a:?} vs {b:?}");
            }
        }
    }

    #[test]
    fn prefix_successor_bounds_every_extension() {
        let p = row_prefix(b"t", &[0xFF; 8]);
        let succ = prefix_successor(&p).unwrap();
        let inside = CellKey {
            table: b"t".to_vec(),
            row: vec![0xFF; 8],
            column: vec![0xFF; 40],
            ts: 0,
        }
        .encode();
        assert!(inside < succ);
        let next_row = row_prefix(b"t", &[0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0]);
        assert!(next_row >= succ);
        assert_eq!(prefix_successor(&[1, 0xFF]), Some(vec![2]));
        assert_eq!(prefix_successor(&[0xFF, 0xFF]), None);
        assert_eq!(prefix_successor(&[]), None);
    }

    #[test]
    fn malformed_inputs_are_errors_not_panics() {
        assert!(matches!(
            decode_bytes(&[1, 2, 3], 0),
            Err(KeyError::Truncated { .. })
        ));
        assert!(matches!(
            decode_bytes(&[0, 0, 0, 0, 0, 0, 0, 0, 0x10], 0),
            Err(KeyError::BadMarker { .. })
        ));
        assert!(matches!(
            decode_bytes(&[1, 0, 0, 0, 0, 0, 0, 9, 0xF8], 0),
            Err(KeyError::BadPadding { .. })
        ));
        let mut key = CellKey {
            table: b"t".to_vec(),
            row: vec![],
            column: vec![0xFF],
            ts: 7,
        }
        .encode();
        key.push(0);
        assert!(matches!(
            CellKey::decode(&key),
            Err(KeyError::Trailing { extra: 1 })
        ));
    }

    proptest! {
        #[test]
        fn bytes_round_trip(a in proptest::collection::vec(any::<u8>(), 0..40)) {
            let e = enc(&a);
            prop_assert_eq!(e.len(), encoded_len(a.len()));
            let (d, used) = decode_bytes(&e, 0).unwrap();
            prop_assert_eq!(d, a);
            prop_assert_eq!(used, e.len());
        }

        #[test]
        fn bytes_order_preserved(a in proptest::collection::vec(any::<u8>(), 0..24),
                                 b in proptest::collection::vec(any::<u8>(), 0..24)) {
            prop_assert_eq!(a.cmp(&b), enc(&a).cmp(&enc(&b)));
        }

        #[test]
        fn encoding_is_prefix_free(a in proptest::collection::vec(any::<u8>(), 0..24),
                                   b in proptest::collection::vec(any::<u8>(), 0..24)) {
            let (ea, eb) = (enc(&a), enc(&b));
            if a != b {
                prop_assert!(!eb.starts_with(&ea));
            }
        }

        #[test]
        fn cell_keys_round_trip_and_order(
            a in (proptest::collection::vec(any::<u8>(), 0..12), proptest::collection::vec(any::<u8>(), 0..12),
                  proptest::collection::vec(any::<u8>(), 0..12), any::<u64>()),
            b in (proptest::collection::vec(any::<u8>(), 0..12), proptest::collection::vec(any::<u8>(), 0..12),
                  proptest::collection::vec(any::<u8>(), 0..12), any::<u64>()),
        ) {
            let ka = CellKey { table: a.0, row: a.1, column: a.2, ts: a.3 };
            let kb = CellKey { table: b.0, row: b.1, column: b.2, ts: b.3 };
            prop_assert_eq!(CellKey::decode(&ka.encode()).unwrap(), ka.clone());
            // Logical order: table, row, column ascending; timestamp descending.
            let logical = (&ka.table, &ka.row, &ka.column, std::cmp::Reverse(ka.ts))
                .cmp(&(&kb.table, &kb.row, &kb.column, std::cmp::Reverse(kb.ts)));
            prop_assert_eq!(logical, ka.encode().cmp(&kb.encode()));
            // A row prefix covers exactly that row's cells.
            let same_row = ka.table == kb.table && ka.row == kb.row;
            prop_assert_eq!(same_row, kb.encode().starts_with(&row_prefix(&ka.table, &ka.row)));
        }

        #[test]
        fn arbitrary_input_never_panics(input in proptest::collection::vec(any::<u8>(), 0..80)) {
            prop_assert!(fuzz_check(&input));
        }
    }
}
