//! Notification primitives (paper §2.4): which columns are observed, finding dirty cells, and
//! consuming a notification safely. The observer runtime (`percolator-observers`) is built on
//! these; everything that must be atomic with the commit protocol lives here, in core.
//!
//! **Writing.** A notify cell is a version in the notify family of the changed cell. A commit
//! writes one at its start_ts for every strongly observed column it writes and for every weak
//! notification it asked for, *during prewrite* (see `commit`); its value names the writer's
//! primary. A one-phase commit (see `one_phase`) writes them with its commit instead, and its
//! value names the commit timestamp too ([`NotifyRecord::committed_at`]). [`Client::notify_weak`]
//! writes one outside any transaction, at a fresh timestamp, naming no writer.
//!
//! **Consuming.** An observer run takes a snapshot at `T` after the scanner saw the notify
//! versions. A version may be deleted only when the run's snapshot includes what it announces:
//! - a version naming no writer was written after the data it announces committed, so any
//!   version at or below `T` is covered;
//! - a version naming a writer is covered only if that writer committed at or below `T` (or was
//!   rolled back, so there is nothing to see). A writer still pending, or committed after `T`,
//!   keeps its version for a later run — deleting "everything up to `T`" would lose the change of
//!   a writer that started before `T` but committed after it.
//!
//! Versions are deleted one by one by timestamp, so a notification that arrives while an observer
//! runs is never swallowed by it.

use std::collections::HashSet;
use std::ops::Bound;

use std::sync::Arc;

use arc_swap::ArcSwap;
use bytes::Bytes;

use crate::error::Result;
use crate::observer_registry::{Registration, RegistryView};
use crate::records::{CellAddr, NotifyRecord};
use crate::store::{Family, FamilyRead, RowStore, Scan};
use crate::tables::check_user_table;

use super::resolve::TxnStatus;
use super::transaction::bytes_of;
use super::{Client, ClientInner, layout};

/// How an observer is told about changes to its column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NotificationKind {
    /// Every write of the column sets the notify cell during prewrite; the observer keeps an ack
    /// column, so at most one observer transaction commits per change.
    Strong,
    /// Only explicit notifications ([`super::Transaction::notify`], [`Client::notify_weak`]) set
    /// the notify cell: no conflicts for writers, and the observer may run more than once.
    Weak,
}

/// A column an observer watches.
///
/// ```
/// # use percolator_core::{NotificationKind, ObservedColumn};
/// let contents = ObservedColumn::strong("docs", "contents");
/// assert_eq!(contents.kind, NotificationKind::Strong);
/// assert_eq!((&contents.table[..], &contents.column[..]), (&b"docs"[..], &b"contents"[..]));
/// assert_eq!(ObservedColumn::weak("docs", "links").kind, NotificationKind::Weak);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ObservedColumn {
    /// Table.
    pub table: Bytes,
    /// Column.
    pub column: Bytes,
    /// Strong or weak.
    pub kind: NotificationKind,
}

impl ObservedColumn {
    /// A strongly observed column.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::{Client, ObservedColumn};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// let contents = ObservedColumn::strong("docs", "contents");
    /// let client = Client::builder(Arc::new(MemStore::new())).observe(&contents).build().await?;
    /// let mut txn = client.begin().await?;
    /// txn.set("docs", "a", "contents", "hello")?; // every write of it notifies
    /// txn.commit().await?;
    /// assert_eq!(client.pending_notifications("docs").await?, 1);
    /// # client.shutdown().await }
    /// ```
    pub fn strong(table: impl AsRef<[u8]>, column: impl AsRef<[u8]>) -> Self {
        Self {
            table: bytes_of(table),
            column: bytes_of(column),
            kind: NotificationKind::Strong,
        }
    }

    /// A weakly observed column.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::{Client, ObservedColumn};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// let links = ObservedColumn::weak("docs", "links");
    /// let client = Client::builder(Arc::new(MemStore::new())).observe(&links).build().await?;
    /// let mut txn = client.begin().await?;
    /// txn.set("docs", "a", "links", "b c")?; // a plain write notifies nobody
    /// txn.commit().await?;
    /// assert_eq!(client.pending_notifications("docs").await?, 0);
    /// client.notify_weak("docs", "a", "links").await?; // only an explicit notification
    /// assert_eq!(client.pending_notifications("docs").await?, 1);
    /// # client.shutdown().await }
    /// ```
    pub fn weak(table: impl AsRef<[u8]>, column: impl AsRef<[u8]>) -> Self {
        Self {
            table: bytes_of(table),
            column: bytes_of(column),
            kind: NotificationKind::Weak,
        }
    }
}

/// One pending notify version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotifyVersion {
    /// Version timestamp (the writer's start_ts, or the time of a direct notification).
    pub ts: u64,
    /// The writer's primary, if written by a transaction with writes.
    pub writer: Option<CellAddr>,
    /// The writer's commit timestamp, if the version went in with the commit (a one-phase
    /// commit; see [`NotifyRecord::committed_at`]).
    pub committed_at: Option<u64>,
}

/// The pending notifications of one row, column by column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotifyRow {
    /// Row key.
    pub row: Bytes,
    /// Columns with pending versions (ordered by column), versions newest first.
    pub columns: Vec<(Bytes, Vec<NotifyVersion>)>,
}

/// What [`Client::clear_notifications`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClearOutcome {
    /// Versions deleted.
    pub deleted: usize,
    /// Versions kept because the snapshot did not cover them.
    pub kept: usize,
}

/// The columns a client declared observed ([`super::ClientBuilder::observe`]).
#[derive(Debug, Clone, Default)]
pub(crate) struct ObservedSet {
    strong: HashSet<(Bytes, Bytes)>,
    declared: Vec<ObservedColumn>,
}

impl ObservedSet {
    pub(crate) fn add(&mut self, column: &ObservedColumn) {
        if column.kind == NotificationKind::Strong {
            self.strong
                .insert((column.table.clone(), column.column.clone()));
        }
        if !self.declared.contains(column) {
            self.declared.push(column.clone());
        }
    }

    /// The declarations, as registrations for the store's registry.
    pub(crate) fn registrations(&self) -> Vec<Registration> {
        self.declared
            .iter()
            .cloned()
            .map(Registration::declared)
            .collect()
    }
}

/// What a client's commits notify: its own declarations and the store's registry as of its last
/// read (refreshed with every lease renewal; see [`crate::observer_registry`]).
#[derive(Debug, Default)]
pub(crate) struct ObservedColumns {
    pub(crate) declared: ObservedSet,
    pub(crate) registry: ArcSwap<RegistryView>,
}

impl ObservedColumns {
    pub(crate) fn new(declared: ObservedSet) -> Self {
        Self {
            declared,
            registry: ArcSwap::from_pointee(RegistryView::default()),
        }
    }

    /// Reads the store's registry again.
    pub(crate) async fn refresh<S: RowStore + ?Sized>(&self, store: &S) -> Result<()> {
        let registrations = crate::observer_registry::list(store).await?;
        self.registry
            .store(Arc::new(RegistryView::new(&registrations)));
        Ok(())
    }

    fn is_strong(&self, table: &Bytes, column: &Bytes) -> bool {
        (!self.declared.strong.is_empty()
            && self
                .declared
                .strong
                .contains(&(table.clone(), column.clone())))
            || self.registry.load().is_strong(table, column)
    }
}

impl<S: RowStore> ClientInner<S> {
    pub(crate) fn is_strongly_observed(&self, table: &Bytes, column: &Bytes) -> bool {
        self.observed.is_strong(table, column)
    }
}

impl<S: RowStore> Client<S> {
    /// Whether this client's commits notify observers of `table`/`column` (it was built with
    /// [`super::ClientBuilder::observe`] for that column, strongly).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::{Client, ObservedColumn};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// let client = Client::builder(Arc::new(MemStore::new()))
    ///     .observe(&ObservedColumn::strong("docs", "contents"))
    ///     .build()
    ///     .await?;
    /// assert!(client.notifies_on_write("docs", "contents"));
    /// assert!(!client.notifies_on_write("docs", "title"));
    /// # client.shutdown().await }
    /// ```
    pub fn notifies_on_write(&self, table: impl AsRef<[u8]>, column: impl AsRef<[u8]>) -> bool {
        self.inner
            .is_strongly_observed(&bytes_of(table), &bytes_of(column))
    }

    /// The named observers of `table`/`column` in the store's registry, as of this client's last
    /// read of it (see [`crate::observer_registry`]).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::{Client, NotificationKind, ObservedColumn};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// use percolator_core::internal::observer_registry::Registration;
    ///
    /// let client = Client::open(Arc::new(MemStore::new())).await?;
    /// let contents = ObservedColumn::strong("docs", "contents");
    /// client.register_observers(&[Registration::observer("word-count", contents)]).await?;
    /// assert_eq!(
    ///     client.registered_observers("docs", "contents"),
    ///     [("word-count".to_string(), NotificationKind::Strong)]
    /// );
    /// assert!(client.registered_observers("docs", "title").is_empty());
    /// # client.shutdown().await }
    /// ```
    pub fn registered_observers(
        &self,
        table: impl AsRef<[u8]>,
        column: impl AsRef<[u8]>,
    ) -> Vec<(String, NotificationKind)> {
        self.inner
            .observed
            .registry
            .load()
            .observers_of(&bytes_of(table), &bytes_of(column))
    }

    /// Whether `table`/`column` has any registration (an observer or a writer's declaration),
    /// as of this client's last read of the registry.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::{Client, ObservedColumn};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// let client = Client::builder(Arc::new(MemStore::new()))
    ///     .observe(&ObservedColumn::strong("docs", "contents"))
    ///     .build()
    ///     .await?;
    /// assert!(client.is_registered("docs", "contents")); // the writer's declaration
    /// assert!(!client.is_registered("docs", "title"));
    /// # client.shutdown().await }
    /// ```
    pub fn is_registered(&self, table: impl AsRef<[u8]>, column: impl AsRef<[u8]>) -> bool {
        self.inner
            .observed
            .registry
            .load()
            .is_observed(&bytes_of(table), &bytes_of(column))
    }

    /// Writes `registrations` to the store's registry and reads it again, so this client's
    /// commits notify the new columns at once. Other clients see them at their next lease
    /// renewal (or [`Self::refresh_observed_columns`]).
    ///
    /// The observer runtime (`percolator-observers`) registers its observers itself; the
    /// registration type lives in the workspace-internal registry module.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::{Client, ObservedColumn};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// use percolator_core::internal::observer_registry::Registration;
    ///
    /// let client = Client::open(Arc::new(MemStore::new())).await?;
    /// assert!(!client.notifies_on_write("docs", "contents"));
    /// let contents = ObservedColumn::strong("docs", "contents");
    /// client.register_observers(&[Registration::observer("word-count", contents)]).await?;
    /// assert!(client.notifies_on_write("docs", "contents"));
    /// # client.shutdown().await }
    /// ```
    pub async fn register_observers(&self, registrations: &[Registration]) -> Result<()> {
        crate::observer_registry::register(self.inner.store.as_ref(), registrations).await?;
        self.refresh_observed_columns().await
    }

    /// Reads the store's observer registry now instead of at the next lease renewal.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::{Client, ObservedColumn};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// let store = Arc::new(MemStore::new());
    /// let client = Client::open(Arc::clone(&store)).await?;
    /// // Another client declares an observed column in the store's registry.
    /// let declaring = Client::builder(store)
    ///     .observe(&ObservedColumn::strong("docs", "contents"))
    ///     .build()
    ///     .await?;
    /// assert!(!client.notifies_on_write("docs", "contents")); // not read yet
    /// client.refresh_observed_columns().await?;
    /// assert!(client.notifies_on_write("docs", "contents"));
    /// # declaring.shutdown().await?;
    /// # client.shutdown().await }
    /// ```
    pub async fn refresh_observed_columns(&self) -> Result<()> {
        self.inner.observed.refresh(self.inner.store.as_ref()).await
    }

    /// Writes a weak notification for `table`/`row`/`column` now, outside any transaction: the
    /// observers of that column will run (at least once) with a snapshot taken after this call.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::Client;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// let client = Client::open(Arc::new(MemStore::new())).await?;
    /// client.notify_weak("docs", "a", "links").await?;
    /// client.notify_weak("docs", "b", "links").await?;
    /// assert_eq!(client.pending_notifications("docs").await?, 2);
    /// # client.shutdown().await }
    /// ```
    pub async fn notify_weak(
        &self,
        table: impl AsRef<[u8]>,
        row: impl AsRef<[u8]>,
        column: impl AsRef<[u8]>,
    ) -> Result<()> {
        check_user_table(table.as_ref())?;
        let limits = self.inner.store.limits();
        crate::backend::validate::check_key_size(
            table.as_ref(),
            row.as_ref(),
            column.as_ref(),
            &limits,
        )?;
        let addr = CellAddr::new(bytes_of(table), bytes_of(row), bytes_of(column));
        let ts = self.inner.timestamp().await?;
        let value = NotifyRecord {
            writer: None,
            committed_at: None,
        }
        .encode();
        self.inner
            .store
            .mutate_rows(layout::notify_rows(std::slice::from_ref(&addr), ts, &value))
            .await?;
        Ok(())
    }

    /// Up to `row_limit` rows of `table` with pending notifications, starting at `start`. Reads
    /// only the notify family.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::{Client, ObservedColumn};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// # use std::ops::Bound;
    /// let client = Client::builder(Arc::new(MemStore::new()))
    ///     .observe(&ObservedColumn::strong("docs", "contents"))
    ///     .build()
    ///     .await?;
    /// for row in ["a", "b"] {
    ///     let mut txn = client.begin().await?;
    ///     txn.set("docs", row, "contents", "hello")?;
    ///     txn.commit().await?;
    /// }
    /// let rows = client
    ///     .scan_notifications("docs", Bound::Unbounded, Bound::Unbounded, None)
    ///     .await?;
    /// assert_eq!(rows.len(), 2);
    /// assert_eq!(&rows[0].row[..], b"a");
    /// let (column, versions) = &rows[0].columns[0];
    /// assert_eq!((&column[..], versions.len()), (&b"contents"[..], 1));
    /// # client.shutdown().await }
    /// ```
    pub async fn scan_notifications(
        &self,
        table: impl AsRef<[u8]>,
        start: Bound<Bytes>,
        end: Bound<Bytes>,
        row_limit: Option<usize>,
    ) -> Result<Vec<NotifyRow>> {
        let rows = self
            .inner
            .store
            .scan(Scan {
                snapshot_ts: None,
                table: bytes_of(table),
                start,
                end,
                read: FamilyRead::all(Family::Notify),
                row_limit,
            })
            .await?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let mut columns: Vec<(Bytes, Vec<NotifyVersion>)> = Vec::new();
            for cell in row.cells {
                let record = NotifyRecord::decode(&cell.value)?;
                let version = NotifyVersion {
                    ts: cell.ts,
                    writer: record.writer,
                    committed_at: record.committed_at,
                };
                match columns.last_mut() {
                    Some((column, versions)) if *column == cell.column => versions.push(version),
                    _ => columns.push((cell.column, vec![version])),
                }
            }
            out.push(NotifyRow {
                row: row.row,
                columns,
            });
        }
        Ok(out)
    }

    /// Deletes the versions of `addr`'s notifications (as listed by a scan) that a run with a
    /// snapshot at `snapshot_ts` has covered (see the module docs); keeps the others. Resolves
    /// dead writers on the way, like any reader.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::{CellAddr, ClearOutcome, Client, ObservedColumn};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// # use std::ops::Bound;
    /// let client = Client::builder(Arc::new(MemStore::new()))
    ///     .observe(&ObservedColumn::strong("docs", "contents"))
    ///     .build()
    ///     .await?;
    /// let mut txn = client.begin().await?;
    /// txn.set("docs", "a", "contents", "hello")?;
    /// txn.commit().await?;
    /// let rows = client
    ///     .scan_notifications("docs", Bound::Unbounded, Bound::Unbounded, None)
    ///     .await?;
    /// let (column, versions) = &rows[0].columns[0];
    /// // An observer run's snapshot, taken after the change: it covers the notification.
    /// let run = client.begin().await?;
    /// let addr = CellAddr::new("docs", rows[0].row.clone(), column.clone());
    /// let outcome = client.clear_notifications(&addr, versions, run.start_ts()).await?;
    /// assert_eq!(outcome, ClearOutcome { deleted: 1, kept: 0 });
    /// assert_eq!(client.pending_notifications("docs").await?, 0);
    /// # client.shutdown().await }
    /// ```
    pub async fn clear_notifications(
        &self,
        addr: &CellAddr,
        versions: &[NotifyVersion],
        snapshot_ts: u64,
    ) -> Result<ClearOutcome> {
        let mut covered = Vec::new();
        let mut kept = 0;
        for version in versions {
            if version.ts > snapshot_ts {
                kept += 1;
                continue;
            }
            let done = match &version.writer {
                None => true,
                // A version written with its commit names the commit timestamp. A commit
                // known to this client needs no status read either (see `recent_commits`): its
                // own, or one a status read found before. A commit the store reports is
                // remembered there too, since its writer notified other rows as well. (Within
                // one call every version has its own writer: one version per writer and cell.)
                Some(primary) => match version
                    .committed_at
                    .or_else(|| self.inner.recent_commits.commit_ts(primary, version.ts))
                {
                    Some(commit_ts) => commit_ts <= snapshot_ts,
                    None => match self.inner.check_status(primary, version.ts, true).await? {
                        TxnStatus::Committed { commit_ts } => {
                            self.inner
                                .recent_commits
                                .record(primary, version.ts, commit_ts);
                            commit_ts <= snapshot_ts
                        }
                        TxnStatus::RolledBack | TxnStatus::NotFound => true,
                        TxnStatus::Locked { .. } => false,
                    },
                },
            };
            if done {
                covered.push(version.ts);
            } else {
                kept += 1;
            }
        }
        // A row mutation holds at most `max_row_ops` deletes (etcd's --max-txn-ops): a backlog
        // of versions on one cell is cleared in as many mutations as it takes. Each is a
        // delete of versions already consumed, so stopping half-way only leaves some to be
        // seen (and cleared) again.
        let per_mutation = self.inner.store.limits().max_row_ops.max(1);
        for versions in covered.chunks(per_mutation) {
            self.inner
                .store
                .mutate_rows(vec![layout::clear_notify(addr, versions)])
                .await?;
        }
        Ok(ClearOutcome {
            deleted: covered.len(),
            kept,
        })
    }

    /// Number of pending notify versions in `table` (a full scan of its notify family).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::{Client, ObservedColumn};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> percolator_core::Result<()> {
    /// let client = Client::builder(Arc::new(MemStore::new()))
    ///     .observe(&ObservedColumn::strong("docs", "contents"))
    ///     .build()
    ///     .await?;
    /// assert_eq!(client.pending_notifications("docs").await?, 0);
    /// for text in ["one", "two"] {
    ///     let mut txn = client.begin().await?;
    ///     txn.set("docs", "a", "contents", text)?;
    ///     txn.commit().await?;
    /// }
    /// // One version per change, until an observer run consumes them.
    /// assert_eq!(client.pending_notifications("docs").await?, 2);
    /// # client.shutdown().await }
    /// ```
    pub async fn pending_notifications(&self, table: impl AsRef<[u8]>) -> Result<usize> {
        let rows = self
            .scan_notifications(table, Bound::Unbounded, Bound::Unbounded, None)
            .await?;
        Ok(rows
            .iter()
            .flat_map(|r| r.columns.iter())
            .map(|(_, v)| v.len())
            .sum())
    }
}
