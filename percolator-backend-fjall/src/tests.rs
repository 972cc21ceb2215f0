//! Tests of the store as a whole that span its modules, and the helpers that the modules' own
//! tests share.

use std::ops::Bound;

use bytes::Bytes;
use percolator_core::backend::key;
use percolator_core::{Family, FamilyRead, ReadRow, RowCells, RowStore as _, Scan, StoreError};

use crate::FjallStore;

pub(crate) fn scan_all(store: &FjallStore, family: Family) -> Result<Vec<RowCells>, StoreError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(store.scan(Scan {
        snapshot_ts: None,
        table: Bytes::from("t"),
        start: Bound::Unbounded,
        end: Bound::Unbounded,
        read: FamilyRead::all(family),
        row_limit: None,
    }))
}

#[test]
fn corrupt_keys_in_a_keyspace_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let store = FjallStore::open(dir.path()).unwrap();
    // A key that starts like table "t" but is cut short.
    let mut bad = key::table_prefix(b"t");
    bad.extend_from_slice(&[1, 2, 3]);
    store.keyspace(Family::Data).insert(bad, &b"x"[..]).unwrap();
    let err = scan_all(&store, Family::Data).unwrap_err();
    assert!(matches!(err, StoreError::Corrupt(_)), "{err:?}");

    // A whole row key whose column part is cut short, read through `read_row`: from the
    // engine (data), and from the lock mirror, which loads it when the store reopens.
    let mut bad = key::row_prefix(b"t", b"r");
    bad.extend_from_slice(&[7; 5]);
    store
        .keyspace(Family::Data)
        .insert(bad.clone(), &b"x"[..])
        .unwrap();
    store.keyspace(Family::Lock).insert(bad, &b"x"[..]).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let read_row = |store: &FjallStore, family| {
        rt.block_on(store.read_row(ReadRow {
            table: Bytes::from("t"),
            row: Bytes::from("r"),
            reads: vec![FamilyRead::all(family)],
            snapshot_ts: None,
        }))
    };
    let err = read_row(&store, Family::Data).unwrap_err();
    assert!(matches!(err, StoreError::Corrupt(_)), "{err:?}");
    drop(store);
    let store = FjallStore::open(dir.path()).unwrap();
    let err = read_row(&store, Family::Lock).unwrap_err();
    assert!(matches!(err, StoreError::Corrupt(_)), "{err:?}");

    // A key that is not even a table prefix.
    store
        .keyspace(Family::Write)
        .insert(&[0x01u8][..], &b"x"[..])
        .unwrap();
    let err = rt.block_on(store.tables()).unwrap_err();
    assert!(matches!(err, StoreError::Corrupt(_)), "{err:?}");
}
