//! Whether anything is pending for a set of observers: notifications on their observed columns
//! that no run has cleared yet. For callers without a running [`Runtime`](crate::Runtime), such
//! as a check that the pipeline is finished.

use percolator_core::{Client, Result, RowStore};

use crate::observer::Observers;

/// Rows per page of [`any_pending_on`]'s scan.
pub(crate) const PENDING_PAGE: usize = 64;

/// Whether any notify version is pending on a column `observers` watch: the notify family is
/// read page by page only until the first one (rows before it hold only other workers'
/// columns), so a backlog costs one page, not a scan of it all.
///
/// ```
/// # use std::sync::Arc;
/// # use percolator_backend_mem::MemStore;
/// # use percolator_core::Client;
/// # use percolator_observers::{Observers, any_pending_on, pending_on};
/// # struct WordCount;
/// # #[async_trait::async_trait]
/// # impl<S: percolator_core::RowStore> percolator_observers::Observer<S> for WordCount {
/// #     fn name(&self) -> &str {
/// #         "word-count"
/// #     }
/// #     fn observed(&self) -> percolator_core::ObservedColumn {
/// #         percolator_core::ObservedColumn::strong("docs", "contents")
/// #     }
/// #     async fn observe(
/// #         &self,
/// #         txn: &mut percolator_core::Transaction<S>,
/// #         change: &percolator_observers::Change,
/// #     ) -> percolator_core::Result<()> {
/// #         let text = change.value.as_deref().unwrap_or_default();
/// #         let words = String::from_utf8_lossy(text).split_whitespace().count();
/// #         txn.set("stats", &change.row, "words", words.to_string())
/// #     }
/// # }
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> percolator_core::Result<()> {
/// let mut observers: Observers<MemStore> = Observers::new();
/// observers.register(WordCount)?;
/// let client = Client::builder(Arc::new(MemStore::new()))
///     .observe_all(&observers.observed_columns())
///     .build()
///     .await?;
/// assert!(!any_pending_on(&client, &observers).await?);
/// let mut txn = client.begin().await?;
/// txn.set("docs", "a", "contents", "hello")?;
/// txn.commit().await?;
/// assert!(any_pending_on(&client, &observers).await?); // no worker runs here
/// # client.shutdown().await }
/// ```
pub async fn any_pending_on<S: RowStore>(
    client: &Client<S>,
    observers: &Observers<S>,
) -> Result<bool> {
    for table in observers.tables() {
        let mut start = std::ops::Bound::Unbounded;
        loop {
            let rows = client
                .scan_notifications(
                    &table,
                    start,
                    std::ops::Bound::Unbounded,
                    Some(PENDING_PAGE),
                )
                .await?;
            let observed = rows.iter().any(|row| {
                row.columns
                    .iter()
                    .any(|(column, _)| observers.is_observed(&table, column))
            });
            if observed {
                return Ok(true);
            }
            match rows.last() {
                Some(last) if rows.len() >= PENDING_PAGE => {
                    start = std::ops::Bound::Excluded(last.row.clone());
                }
                _ => break,
            }
        }
    }
    Ok(false)
}

/// Pending notify versions on the columns `observers` watch.
///
/// ```
/// # use std::sync::Arc;
/// # use percolator_backend_mem::MemStore;
/// # use percolator_core::Client;
/// # use percolator_observers::{Observers, any_pending_on, pending_on};
/// # struct WordCount;
/// # #[async_trait::async_trait]
/// # impl<S: percolator_core::RowStore> percolator_observers::Observer<S> for WordCount {
/// #     fn name(&self) -> &str {
/// #         "word-count"
/// #     }
/// #     fn observed(&self) -> percolator_core::ObservedColumn {
/// #         percolator_core::ObservedColumn::strong("docs", "contents")
/// #     }
/// #     async fn observe(
/// #         &self,
/// #         txn: &mut percolator_core::Transaction<S>,
/// #         change: &percolator_observers::Change,
/// #     ) -> percolator_core::Result<()> {
/// #         let text = change.value.as_deref().unwrap_or_default();
/// #         let words = String::from_utf8_lossy(text).split_whitespace().count();
/// #         txn.set("stats", &change.row, "words", words.to_string())
/// #     }
/// # }
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> percolator_core::Result<()> {
/// let mut observers: Observers<MemStore> = Observers::new();
/// observers.register(WordCount)?;
/// let client = Client::builder(Arc::new(MemStore::new()))
///     .observe_all(&observers.observed_columns())
///     .build()
///     .await?;
/// for row in ["a", "b"] {
///     let mut txn = client.begin().await?;
///     txn.set("docs", row, "contents", "hello")?;
///     txn.set("docs", row, "title", "not observed")?;
///     txn.commit().await?;
/// }
/// assert_eq!(pending_on(&client, &observers).await?, 2); // no worker runs here
/// # client.shutdown().await }
/// ```
pub async fn pending_on<S: RowStore>(client: &Client<S>, observers: &Observers<S>) -> Result<u64> {
    let mut pending = 0;
    for table in observers.tables() {
        let rows = client
            .scan_notifications(
                &table,
                std::ops::Bound::Unbounded,
                std::ops::Bound::Unbounded,
                None,
            )
            .await?;
        for row in rows {
            for (column, versions) in row.columns {
                if observers.is_observed(&table, &column) {
                    pending += versions.len() as u64;
                }
            }
        }
    }
    Ok(pending)
}
