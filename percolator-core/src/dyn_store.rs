//! Type erasure: [`DynStore`], a store chosen at run time.
//!
//! Transactions and observers are generic over [`RowStore`], so a program that picks its backend
//! from a command line would otherwise compile its whole pipeline once per backend. Behind a
//! [`DynStore`] (`Arc<dyn RowStore>`) it compiles once: `Client<DynStore>`, `Runtime<DynStore>`.
//! The registry in `percolator-registry` opens every backend as one.
//!
//! The forwarding impl hands back the boxed future of the store behind the pointer as it is, so
//! a call through a `DynStore` costs one virtual call and no allocation beyond the backend's own.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;

use crate::error::StoreError;
use crate::store::{
    AtomicOutcome, Cell, MutationOutcome, ReadRow, RowCells, RowMutation, RowStore, Scan,
    StoreLimits,
};

/// A store whose backend is chosen at run time.
///
/// ```
/// use std::sync::Arc;
/// use percolator_core::{DynStore, RowStore};
///
/// fn erase<S: RowStore>(store: S) -> DynStore {
///     Arc::new(store)
/// }
/// ```
///
/// A client over it is a `Client<DynStore>`, whatever the backend behind it:
///
/// ```
/// # use std::sync::Arc;
/// # use percolator_backend_mem::MemStore;
/// # use percolator_core::{Client, DynStore, RowStore};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> percolator_core::Result<()> {
/// let store: DynStore = Arc::new(MemStore::new()); // chosen at run time, say from a flag
/// assert_eq!(store.name(), "mem");
/// let client: Client<DynStore> = Client::open(Arc::new(store)).await?;
/// let mut txn = client.begin().await?;
/// txn.set("docs", "a", "contents", "hello")?;
/// txn.commit().await?;
/// let txn = client.begin().await?;
/// assert_eq!(txn.get("docs", "a", "contents").await?.as_deref(), Some(&b"hello"[..]));
/// # client.shutdown().await }
/// ```
pub type DynStore = Arc<dyn RowStore>;

/// A boxed future, as `async_trait` returns them.
type Boxed<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Every method forwards to the store behind the pointer (the wrapper contract of
/// [`RowStore`]).
#[deny(clippy::missing_trait_methods)]
impl RowStore for Arc<dyn RowStore> {
    fn name(&self) -> &'static str {
        (**self).name()
    }

    fn limits(&self) -> StoreLimits {
        (**self).limits()
    }

    fn store_id(&self) -> String {
        (**self).store_id()
    }

    fn read_row<'life0, 'async_trait>(
        &'life0 self,
        request: ReadRow,
    ) -> Boxed<'async_trait, Result<Vec<Vec<Cell>>, StoreError>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        (**self).read_row(request)
    }

    fn read_rows<'life0, 'async_trait>(
        &'life0 self,
        requests: Vec<ReadRow>,
    ) -> Boxed<'async_trait, Result<Vec<Vec<Vec<Cell>>>, StoreError>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        (**self).read_rows(requests)
    }

    fn scan<'life0, 'async_trait>(
        &'life0 self,
        request: Scan,
    ) -> Boxed<'async_trait, Result<Vec<RowCells>, StoreError>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        (**self).scan(request)
    }

    fn mutate_rows<'life0, 'async_trait>(
        &'life0 self,
        batch: Vec<RowMutation>,
    ) -> Boxed<'async_trait, Result<Vec<MutationOutcome>, StoreError>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        (**self).mutate_rows(batch)
    }

    fn mutate_rows_atomically<'life0, 'async_trait>(
        &'life0 self,
        batch: Vec<RowMutation>,
    ) -> Boxed<'async_trait, Result<AtomicOutcome, StoreError>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        (**self).mutate_rows_atomically(batch)
    }

    fn sync<'life0, 'async_trait>(&'life0 self) -> Boxed<'async_trait, Result<(), StoreError>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        (**self).sync()
    }

    fn tables<'life0, 'async_trait>(
        &'life0 self,
    ) -> Boxed<'async_trait, Result<Vec<Bytes>, StoreError>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        (**self).tables()
    }

    fn collect_garbage<'life0, 'async_trait>(
        &'life0 self,
        safe_point: u64,
    ) -> Boxed<'async_trait, Result<(), StoreError>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        (**self).collect_garbage(safe_point)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MockRowStore;

    /// Every call through a `DynStore` reaches the store behind it.
    #[tokio::test]
    async fn a_dyn_store_forwards_every_call() {
        let mut mock = MockRowStore::new();
        mock.expect_name().return_const("mock");
        mock.expect_store_id().returning(|| "mock:1".to_owned());
        mock.expect_limits()
            .returning(|| StoreLimits::new(1, 2, 3).with_distributed(true));
        mock.expect_sync().times(1).returning(|| Ok(()));
        mock.expect_tables()
            .times(1)
            .returning(|| Ok(vec![Bytes::from_static(b"t")]));
        mock.expect_collect_garbage()
            .withf(|ts| *ts == 7)
            .times(1)
            .returning(|_| Ok(()));
        mock.expect_scan().times(1).returning(|_| Ok(Vec::new()));
        mock.expect_read_row()
            .times(1)
            .returning(|_| Ok(vec![Vec::new()]));
        mock.expect_mutate_rows()
            .times(1)
            .returning(|_| Ok(Vec::new()));
        mock.expect_mutate_rows_atomically()
            .times(1)
            .returning(|_| Ok(AtomicOutcome::Applied));
        let store: DynStore = Arc::new(mock);
        assert_eq!(RowStore::name(&store), "mock");
        assert_eq!(RowStore::store_id(&store), "mock:1");
        assert!(RowStore::limits(&store).distributed);
        RowStore::sync(&store).await.unwrap();
        assert_eq!(RowStore::tables(&store).await.unwrap().len(), 1);
        RowStore::collect_garbage(&store, 7).await.unwrap();
        let scan = Scan {
            table: Bytes::from_static(b"t"),
            start: std::ops::Bound::Unbounded,
            end: std::ops::Bound::Unbounded,
            read: crate::store::FamilyRead::all(crate::store::Family::Data),
            row_limit: None,
            snapshot_ts: None,
        };
        assert!(RowStore::scan(&store, scan).await.unwrap().is_empty());
        let read = ReadRow {
            snapshot_ts: None,
            table: Bytes::from_static(b"t"),
            row: Bytes::from_static(b"r"),
            reads: Vec::new(),
        };
        assert_eq!(RowStore::read_row(&store, read).await.unwrap().len(), 1);
        assert!(
            RowStore::mutate_rows(&store, Vec::new())
                .await
                .unwrap()
                .is_empty()
        );
        assert!(matches!(
            RowStore::mutate_rows_atomically(&store, Vec::new())
                .await
                .unwrap(),
            AtomicOutcome::Applied
        ));
    }
}
