//! The narrow transactional interface the TPC-E frames are written against, and its two
//! implementations: a Percolator [`Transaction`] and a sled [`TransactionalTree`](sled::transaction::TransactionalTree) (the peer
//! baseline). Writing the frames once keeps the comparison honest: both systems run exactly the
//! same reads and writes.

use std::future::Future;

use bytes::Bytes;
use percolator_core::{Columns, Error, Result, RowStore, Transaction};

use super::schema::COLUMN;

/// One transaction's reads and buffered writes over `table`/`row` → record.
///
/// Not `Send`: sled's transactional tree is not. Futures over [`PercolatorKv`] are `Send` all
/// the same (the compiler sees through the concrete implementation).
pub trait Kv {
    /// The record of `row`, if any.
    fn get(
        &mut self,
        table: &'static str,
        row: &[u8],
    ) -> impl Future<Output = Result<Option<Bytes>>>;

    /// The records of `rows` (table and row each), in order: what [`Self::get`] answers for
    /// each. Percolator reads them in one store call ([`Transaction::get_many`]); the default
    /// reads them one after another.
    fn get_many(
        &mut self,
        rows: &[(&'static str, Bytes)],
    ) -> impl Future<Output = Result<Vec<Option<Bytes>>>> {
        get_each(self, rows)
    }

    /// Up to `limit` rows whose key starts with `prefix`, in key order.
    fn scan_prefix(
        &mut self,
        table: &'static str,
        prefix: &[u8],
        limit: usize,
    ) -> impl Future<Output = Result<Vec<(Bytes, Bytes)>>>;

    /// Writes `row`.
    fn put(&mut self, table: &'static str, row: &[u8], value: Bytes) -> Result<()>;

    /// Deletes `row`.
    fn delete(&mut self, table: &'static str, row: &[u8]) -> Result<()>;
}

/// [`Kv::get_many`] as one [`Kv::get`] after another.
async fn get_each<K: Kv + ?Sized>(
    kv: &mut K,
    rows: &[(&'static str, Bytes)],
) -> Result<Vec<Option<Bytes>>> {
    let mut out = Vec::with_capacity(rows.len());
    for (table, row) in rows {
        out.push(kv.get(table, row).await?);
    }
    Ok(out)
}

/// The frames on a Percolator transaction (snapshot isolation, scans included).
pub struct PercolatorKv<'a, S: RowStore> {
    /// The transaction.
    pub txn: &'a mut Transaction<S>,
    /// Rows read together go to the store in one batch ([`Transaction::get_many`]); off, one
    /// read after another (the baseline the batch is measured against).
    pub batch_reads: bool,
}

/// The smallest key greater than every key starting with `prefix` (`None`: no such bound).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

impl<S: RowStore> Kv for PercolatorKv<'_, S> {
    async fn get(&mut self, table: &'static str, row: &[u8]) -> Result<Option<Bytes>> {
        self.txn.get(table, row, COLUMN).await
    }

    async fn get_many(&mut self, rows: &[(&'static str, Bytes)]) -> Result<Vec<Option<Bytes>>> {
        if self.batch_reads {
            return self
                .txn
                .get_many(rows.iter().map(|(table, row)| (*table, row, COLUMN)))
                .await;
        }
        get_each(self, rows).await
    }

    async fn scan_prefix(
        &mut self,
        table: &'static str,
        prefix: &[u8],
        limit: usize,
    ) -> Result<Vec<(Bytes, Bytes)>> {
        let items = match prefix_end(prefix) {
            Some(end) => {
                self.txn
                    .scan(table, prefix.to_vec()..end, Columns::one(COLUMN))
                    .await?
            }
            None => {
                self.txn
                    .scan(table, prefix.to_vec().., Columns::one(COLUMN))
                    .await?
            }
        };
        Ok(items
            .into_iter()
            .take(limit)
            .map(|i| (i.row, i.value))
            .collect())
    }

    fn put(&mut self, table: &'static str, row: &[u8], value: Bytes) -> Result<()> {
        self.txn.set(table, row, COLUMN, value)
    }

    fn delete(&mut self, table: &'static str, row: &[u8]) -> Result<()> {
        self.txn.delete(table, row, COLUMN)
    }
}

/// The frames on sled. sled's transactions have no range reads, and a tree scan inside a
/// transaction closure can deadlock against another thread's commit, so:
/// - read-only frames run [`SledAccess::Direct`]ly on the tree, without a transaction: each
///   read is atomic on its key, nothing more (what an embedded sled user would do, and weaker
///   than Percolator's snapshot);
/// - read-write frames run in a [`SledAccess::Transaction`]; the one that scans (broker
///   aggregation) gets its scan answer read beforehand (`prefetched`).
pub struct SledKv<'a> {
    /// How the frames reach the data.
    pub access: SledAccess<'a>,
    /// The answer of the one scan a read-write frame may make.
    pub prefetched: Option<Vec<(Bytes, Bytes)>>,
    /// Set when sled reported a conflict: the caller must return it so sled retries.
    pub conflict: bool,
}

/// See [`SledKv`].
pub enum SledAccess<'a> {
    /// Reads straight from the tree; writes are refused.
    Direct(&'a sled::Tree),
    /// A sled transaction.
    Transaction(&'a sled::transaction::TransactionalTree),
}

/// Up to `limit` rows of `table` starting with `prefix`, read from the tree.
pub fn sled_scan(
    tree: &sled::Tree,
    table: &str,
    prefix: &[u8],
    limit: usize,
) -> Result<Vec<(Bytes, Bytes)>> {
    let skip = table.len() + 1;
    let mut out = Vec::new();
    for item in tree.scan_prefix(sled_key(table, prefix)).take(limit) {
        let (k, v) = item.map_err(|e| Error::Application(format!("sled scan: {e}")))?;
        out.push((
            Bytes::copy_from_slice(&k[skip..]),
            Bytes::copy_from_slice(&v),
        ));
    }
    Ok(out)
}

/// A sled key: `table \0 row`.
pub fn sled_key(table: &str, row: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(table.len() + 1 + row.len());
    key.extend_from_slice(table.as_bytes());
    key.push(0);
    key.extend_from_slice(row);
    key
}

impl SledKv<'_> {
    fn check<T>(
        &mut self,
        result: std::result::Result<T, sled::transaction::UnabortableTransactionError>,
    ) -> Result<T> {
        result.map_err(|e| {
            if matches!(e, sled::transaction::UnabortableTransactionError::Conflict) {
                self.conflict = true;
            }
            Error::Application(format!("sled transaction: {e}"))
        })
    }

    fn transaction(&self) -> Result<&sled::transaction::TransactionalTree> {
        match self.access {
            SledAccess::Transaction(txn) => Ok(txn),
            SledAccess::Direct(_) => Err(Error::InvalidInput(
                "a read-only sled frame tried to write".into(),
            )),
        }
    }
}

impl Kv for SledKv<'_> {
    async fn get(&mut self, table: &'static str, row: &[u8]) -> Result<Option<Bytes>> {
        let key = sled_key(table, row);
        let got = match self.access {
            SledAccess::Direct(tree) => tree
                .get(key)
                .map_err(|e| Error::Application(format!("sled read: {e}")))?,
            SledAccess::Transaction(txn) => {
                let got = txn.get(key);
                self.check(got)?
            }
        };
        Ok(got.map(|v| Bytes::copy_from_slice(&v)))
    }

    async fn scan_prefix(
        &mut self,
        table: &'static str,
        prefix: &[u8],
        limit: usize,
    ) -> Result<Vec<(Bytes, Bytes)>> {
        match self.access {
            SledAccess::Direct(tree) => sled_scan(tree, table, prefix, limit),
            SledAccess::Transaction(_) => self.prefetched.clone().ok_or_else(|| {
                Error::InvalidInput("sled transactions cannot scan; prefetch the scan".into())
            }),
        }
    }

    fn put(&mut self, table: &'static str, row: &[u8], value: Bytes) -> Result<()> {
        let done = self
            .transaction()?
            .insert(sled_key(table, row), value.as_ref());
        self.check(done).map(|_| ())
    }

    fn delete(&mut self, table: &'static str, row: &[u8]) -> Result<()> {
        let done = self.transaction()?.remove(sled_key(table, row));
        self.check(done).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_is_the_next_prefix() {
        assert_eq!(prefix_end(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_end(&[1, 255]), Some(vec![2]));
        assert_eq!(prefix_end(&[255, 255]), None);
        assert_eq!(prefix_end(b""), None);
    }
}
