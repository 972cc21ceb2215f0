//! Parked changes: a change whose observer failed `park_after_failures` times in a row stops
//! being retried. It is recorded in the store with the last error, shown by `percolator status`,
//! and handed back to its observer by [`retry_parked`] (`percolator observers retry`).
//!
//! Parking is two steps, in this order:
//! 1. the **record** goes into the reserved table [`PARKED_TABLE`] (a plain row mutation), keyed
//!    by table, row, column and observer, holding the error, the failure count, the observer's
//!    ack before parking and the parking transaction's start timestamp;
//! 2. a **transaction** sets the observer's ack to its start timestamp, so the change counts as
//!    covered and its notification can be cleared (by this worker or any other).
//!
//! A crash between the two leaves a record whose ack was never written; retrying it only writes
//! a fresh notification. Retrying puts the old ack back if the ack is still the parking one
//! (nothing ran since), then writes a weak notification of the cell, then deletes the record.
//! A change written after parking notifies the observer as usual: the parked one is then
//! superseded for a strong observer, which sees the newest value anyway.

use std::ops::Bound;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use percolator_core::internal::tables::PARKED_TABLE;
use percolator_core::{Client, Error, Result, RowStore};
use percolator_core::{Condition, Family, FamilyRead, Mutation, RowMutation, Scan};

const RECORD_COLUMN: &[u8] = b"record";
const RECORD_FORMAT: u8 = 1;
/// Longest error text kept in a record.
const MAX_ERROR_BYTES: usize = 2048;

/// A change its observer gave up on.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ParkedChange {
    /// Table of the observed cell.
    pub table: Bytes,
    /// Row of the observed cell.
    pub row: Bytes,
    /// The observed column.
    pub column: Bytes,
    /// The observer that failed.
    pub observer: String,
    /// Its last error.
    pub error: String,
    /// Failed runs in a row before it was parked.
    pub failures: u32,
    /// The observer's ack before parking (`None`: it had never run on the cell).
    pub previous_ack: Option<u64>,
    /// Start timestamp of the parking transaction (the ack it wrote).
    pub park_ts: u64,
}

impl ParkedChange {
    fn key(&self) -> Bytes {
        let mut out = BytesMut::new();
        for part in [
            self.table.as_ref(),
            self.row.as_ref(),
            self.column.as_ref(),
            self.observer.as_bytes(),
        ] {
            out.put_u32(u32::try_from(part.len()).unwrap_or(u32::MAX));
            out.put_slice(part);
        }
        out.freeze()
    }

    fn encode(&self) -> Bytes {
        let mut out = BytesMut::new();
        out.put_u8(RECORD_FORMAT);
        out.put_u32(self.failures);
        out.put_u64(self.previous_ack.unwrap_or(0));
        out.put_u64(self.park_ts);
        let error = truncate(&self.error, MAX_ERROR_BYTES);
        out.put_slice(error.as_bytes());
        out.freeze()
    }

    fn decode(key: &Bytes, value: &Bytes) -> Result<Self> {
        let corrupt = |what: &str| {
            Error::Corrupt(format!(
                "parked change {:?}: {what}",
                String::from_utf8_lossy(key)
            ))
        };
        let mut parts = Vec::with_capacity(4);
        let mut k = key.clone();
        for _ in 0..4 {
            if k.remaining() < 4 {
                return Err(corrupt("truncated key"));
            }
            let len = k.get_u32() as usize;
            if k.remaining() < len {
                return Err(corrupt("truncated key"));
            }
            parts.push(k.split_to(len));
        }
        if k.has_remaining() {
            return Err(corrupt("trailing key bytes"));
        }
        let mut v = value.clone();
        if v.remaining() < 1 + 4 + 8 + 8 {
            return Err(corrupt("truncated record"));
        }
        if v.get_u8() != RECORD_FORMAT {
            return Err(corrupt("unknown record format"));
        }
        let failures = v.get_u32();
        let previous_ack = Some(v.get_u64()).filter(|&a| a != 0);
        let park_ts = v.get_u64();
        let observer = String::from_utf8(parts[3].to_vec())
            .map_err(|_| corrupt("observer name is not UTF-8"))?;
        Ok(Self {
            table: parts[0].clone(),
            row: parts[1].clone(),
            column: parts[2].clone(),
            observer,
            error: String::from_utf8_lossy(&v).into_owned(),
            failures,
            previous_ack,
            park_ts,
        })
    }
}

fn truncate(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Parks `observer`'s change of `table`/`row`/`column` (see the module docs). Returns the
/// parking transaction's start timestamp: the snapshot the parked observer counts as having
/// covered.
pub(crate) async fn park<S: RowStore>(
    client: &Client<S>,
    cell: (&Bytes, &Bytes, &Bytes),
    observer: &str,
    failures: u32,
    error: &str,
) -> Result<u64> {
    let (table, row, column) = cell;
    let mut txn = client.begin().await?;
    let previous_ack = txn.ack(table, row, observer, column).await?;
    let record = ParkedChange {
        table: table.clone(),
        row: row.clone(),
        column: column.clone(),
        observer: observer.to_owned(),
        error: error.to_owned(),
        failures,
        previous_ack,
        park_ts: txn.start_ts(),
    };
    client
        .store()
        .mutate_rows(vec![RowMutation {
            table: Bytes::from_static(PARKED_TABLE),
            row: record.key(),
            conditions: Vec::new(),
            mutations: vec![Mutation::Put {
                family: Family::Data,
                column: Bytes::from_static(RECORD_COLUMN),
                ts: 0,
                value: record.encode(),
            }],
        }])
        .await?;
    txn.set_ack(table, row, observer, column)?;
    txn.commit().await?;
    Ok(record.park_ts)
}

/// Every parked change in the store, ordered by table, row, column and observer.
///
/// ```
/// # use std::sync::Arc;
/// # use std::time::Duration;
/// # use percolator_backend_mem::MemStore;
/// # use percolator_core::Client;
/// # use percolator_observers::{Observers, Runtime, RuntimeConfig, parked, retry_parked};
/// # struct Failing;
/// # #[async_trait::async_trait]
/// # impl<S: percolator_core::RowStore> percolator_observers::Observer<S> for Failing {
/// #     fn name(&self) -> &str {
/// #         "failing"
/// #     }
/// #     fn observed(&self) -> percolator_core::ObservedColumn {
/// #         percolator_core::ObservedColumn::strong("docs", "contents")
/// #     }
/// #     async fn observe(
/// #         &self,
/// #         _txn: &mut percolator_core::Transaction<S>,
/// #         _change: &percolator_observers::Change,
/// #     ) -> percolator_core::Result<()> {
/// #         Err(percolator_core::Error::Application("always fails".into()))
/// #     }
/// # }
/// # #[tokio::main(flavor = "multi_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let mut observers = Observers::new();
/// # observers.register(Failing)?; // an observer whose every run fails
/// let store = Arc::new(MemStore::new());
/// let config = RuntimeConfig::default().with_park_after_failures(1);
/// let runtime = Runtime::start(Client::builder(Arc::clone(&store)), observers, config).await?;
/// let client = Client::open(Arc::clone(&store)).await?; // a writer (and later, the operator)
/// let mut txn = client.begin().await?;
/// txn.set("docs", "a", "contents", "hello")?;
/// txn.commit().await?;
/// runtime.wait_idle(Duration::from_secs(30)).await?; // parked: no longer pending
/// runtime.shutdown().await?;
///
/// let changes = parked(store.as_ref()).await?;
/// assert_eq!(changes.len(), 1);
/// assert_eq!((changes[0].observer.as_str(), &changes[0].row[..]), ("failing", &b"a"[..]));
/// // Once the observer is fixed: hand the change back (`percolator observers retry`).
/// let report = retry_parked(&client, None).await?;
/// assert_eq!(report.retried, 1);
/// # client.shutdown().await?;
/// # Ok(()) }
/// ```
pub async fn parked<S: RowStore + ?Sized>(store: &S) -> Result<Vec<ParkedChange>> {
    let rows = store
        .scan(Scan {
            snapshot_ts: None,
            table: Bytes::from_static(PARKED_TABLE),
            start: Bound::Unbounded,
            end: Bound::Unbounded,
            read: FamilyRead::all(Family::Data).max_versions(1),
            row_limit: None,
        })
        .await?;
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        for cell in row.cells.iter().filter(|c| c.column == RECORD_COLUMN) {
            out.push(ParkedChange::decode(&row.row, &cell.value)?);
        }
    }
    Ok(out)
}

/// What [`retry_parked`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct RetryReport {
    /// Changes handed back to their observer (old ack restored, notification written).
    pub retried: usize,
    /// Parked changes whose observer ran on the cell since (a newer change); only notified.
    pub superseded: usize,
}

/// Hands every parked change (of `observer`, if given) back to its observer: the old ack is put
/// back unless the observer ran on the cell since, a weak notification is written, and the
/// record is deleted. Workers pick the changes up at their next scan.
///
/// ```
/// # use std::sync::Arc;
/// # use std::time::Duration;
/// # use percolator_backend_mem::MemStore;
/// # use percolator_core::Client;
/// # use percolator_observers::{Observers, Runtime, RuntimeConfig, parked, retry_parked};
/// # struct Failing;
/// # #[async_trait::async_trait]
/// # impl<S: percolator_core::RowStore> percolator_observers::Observer<S> for Failing {
/// #     fn name(&self) -> &str {
/// #         "failing"
/// #     }
/// #     fn observed(&self) -> percolator_core::ObservedColumn {
/// #         percolator_core::ObservedColumn::strong("docs", "contents")
/// #     }
/// #     async fn observe(
/// #         &self,
/// #         _txn: &mut percolator_core::Transaction<S>,
/// #         _change: &percolator_observers::Change,
/// #     ) -> percolator_core::Result<()> {
/// #         Err(percolator_core::Error::Application("always fails".into()))
/// #     }
/// # }
/// # #[tokio::main(flavor = "multi_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let mut observers = Observers::new();
/// # observers.register(Failing)?; // an observer whose every run fails
/// # let store = Arc::new(MemStore::new());
/// # let config = RuntimeConfig::default().with_park_after_failures(1);
/// # let client = Client::builder(Arc::clone(&store));
/// # let runtime = Runtime::start(client, observers, config).await?;
/// # let client = Client::open(Arc::clone(&store)).await?;
/// # let mut txn = client.begin().await?;
/// # txn.set("docs", "a", "contents", "hello")?;
/// # txn.commit().await?;
/// # runtime.wait_idle(Duration::from_secs(30)).await?;
/// # runtime.shutdown().await?;
/// // Observer "failing" gave up on docs/a/contents and parked it; it is fixed now.
/// assert_eq!(parked(store.as_ref()).await?.len(), 1);
/// let report = retry_parked(&client, Some("failing")).await?;
/// assert_eq!((report.retried, report.superseded), (1, 0));
/// assert!(parked(store.as_ref()).await?.is_empty());
/// // The observer's ack is back as before and the cell is notified again.
/// assert_eq!(client.pending_notifications("docs").await?, 1);
/// # client.shutdown().await?;
/// # Ok(()) }
/// ```
pub async fn retry_parked<S: RowStore>(
    client: &Client<S>,
    observer: Option<&str>,
) -> Result<RetryReport> {
    let mut report = RetryReport::default();
    for change in parked(client.store().as_ref()).await? {
        if observer.is_some_and(|name| name != change.observer) {
            continue;
        }
        let mut txn = client.begin().await?;
        let ack = txn
            .ack(&change.table, &change.row, &change.observer, &change.column)
            .await?;
        if ack == Some(change.park_ts) {
            txn.restore_ack(
                &change.table,
                &change.row,
                &change.observer,
                &change.column,
                change.previous_ack.unwrap_or(0),
            )?;
            txn.commit().await?;
            report.retried += 1;
        } else {
            report.superseded += 1;
        }
        client
            .notify_weak(&change.table, &change.row, &change.column)
            .await?;
        // Only this record: a change parked again meanwhile keeps its newer one.
        client
            .store()
            .mutate_rows(vec![RowMutation {
                table: Bytes::from_static(PARKED_TABLE),
                row: change.key(),
                conditions: vec![Condition::Equals {
                    family: Family::Data,
                    column: Bytes::from_static(RECORD_COLUMN),
                    ts: 0,
                    value: change.encode(),
                }],
                mutations: vec![Mutation::Delete {
                    family: Family::Data,
                    column: Bytes::from_static(RECORD_COLUMN),
                    ts: 0,
                }],
            }])
            .await?;
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_reject_garbage() {
        let change = ParkedChange {
            table: Bytes::from_static(b"t"),
            row: Bytes::from_static(b"r\x00"),
            column: Bytes::from_static(b"c"),
            observer: "obs".into(),
            error: "boom ✓".into(),
            failures: 8,
            previous_ack: Some(42),
            park_ts: 99,
        };
        let back = ParkedChange::decode(&change.key(), &change.encode()).unwrap();
        assert_eq!(back, change);
        let never_ran = ParkedChange {
            previous_ack: None,
            ..change.clone()
        };
        assert_eq!(
            ParkedChange::decode(&never_ran.key(), &never_ran.encode()).unwrap(),
            never_ran
        );
        assert!(ParkedChange::decode(&change.key(), &Bytes::from_static(b"\x01")).is_err());
        assert!(
            ParkedChange::decode(&Bytes::from_static(b"\x00\x00\x00\x09t"), &change.encode())
                .is_err()
        );
        let long = "é".repeat(MAX_ERROR_BYTES);
        assert!(truncate(&long, MAX_ERROR_BYTES).len() <= MAX_ERROR_BYTES);
    }
}
