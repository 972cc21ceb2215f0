//! The [`Observer`] trait and the [`Observers`] registry a binary builds in `main`.
//!
//! An observer is application code that runs inside a transaction when a column changes (paper
//! §2.4). It is registered for one column with a [`NotificationKind`]:
//! - **strong**: every commit that writes the column sets its notify cell during prewrite; the
//!   runtime keeps an ack column per observer, so at most one observer transaction commits per
//!   change (several changes may collapse into one run);
//! - **weak**: only explicit notifications trigger it; it may run more than once per change.
//!
//! Observers are generic over the store, like everything above the `RowStore` trait.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use percolator_core::internal::observer_registry::Registration;
use percolator_core::{NotificationKind, ObservedColumn, Result, RowStore, Transaction};

/// What changed, as the observer's snapshot sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// Table of the observed cell.
    pub table: Bytes,
    /// Row of the observed cell.
    pub row: Bytes,
    /// The observed column.
    pub column: Bytes,
    /// The column's value at the snapshot (`None`: deleted or never written).
    pub value: Option<Bytes>,
    /// Commit timestamp of that value's write (`None`: never written).
    pub commit_ts: Option<u64>,
    /// How many notify versions were pending when the run started (more than one: collapsed).
    pub notifications: usize,
}

/// Application code run when an observed column changes.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// use async_trait::async_trait;
/// use percolator_backend_mem::MemStore;
/// use percolator_core::{Client, ObservedColumn, RowStore, Transaction};
/// use percolator_observers::{Change, Observer, Observers, Runtime, RuntimeConfig};
///
/// // Whenever `docs:contents` changes, stores its word count in `stats:words`.
/// struct WordCount;
///
/// #[async_trait]
/// impl<S: RowStore> Observer<S> for WordCount {
///     fn name(&self) -> &str {
///         "word-count" // names its ack column: keep it stable
///     }
///
///     fn observed(&self) -> ObservedColumn {
///         ObservedColumn::strong("docs", "contents")
///     }
///
///     async fn observe(
///         &self,
///         txn: &mut Transaction<S>,
///         change: &Change,
///     ) -> percolator_core::Result<()> {
///         let text = change.value.as_deref().unwrap_or_default();
///         let words = String::from_utf8_lossy(text).split_whitespace().count();
///         // Committed by the runtime, together with the ack.
///         txn.set("stats", &change.row, "words", words.to_string())
///     }
/// }
///
/// # #[tokio::main(flavor = "multi_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let mut observers = Observers::new();
/// observers.register(WordCount)?;
/// let store = Arc::new(MemStore::new());
/// let config = RuntimeConfig::default();
/// let runtime = Runtime::start(Client::builder(store), observers, config).await?;
/// let mut txn = runtime.client().begin().await?;
/// txn.set("docs", "a", "contents", "one two three")?;
/// txn.commit().await?;
/// runtime.wait_idle(Duration::from_secs(30)).await?;
///
/// let txn = runtime.client().begin().await?;
/// assert_eq!(txn.get("stats", "a", "words").await?.as_deref(), Some(&b"3"[..]));
/// runtime.shutdown().await?;
/// # Ok(()) }
/// ```
#[async_trait]
pub trait Observer<S: RowStore>: Send + Sync + 'static {
    /// A stable, unique name: it names the observer's ack column, so renaming an observer makes
    /// it see every change again.
    fn name(&self) -> &str;

    /// The column this observer watches, and how.
    fn observed(&self) -> ObservedColumn;

    /// Reacts to `change` inside `txn` (snapshot at `txn.start_ts()`). The runtime commits the
    /// transaction afterwards (with the ack, for strong observers) and retries the whole run on
    /// conflicts, so this must not have effects outside the transaction.
    async fn observe(&self, txn: &mut Transaction<S>, change: &Change) -> Result<()>;

    /// Called after a run of this observer committed (instrumentation: freshness probes,
    /// progress). Not called for runs that found the change already acknowledged.
    fn committed(&self, _change: &Change) {}

    /// How long a scanner lets a notification of this observer wait, from when it first sees
    /// it, before starting a run: changes arriving meanwhile collapse into that one run. An
    /// observer whose work per run is mostly fixed (one that applies a whole queue at once)
    /// trades this much latency for larger batches. Zero (the default): run at once.
    fn batch_delay(&self) -> Duration {
        Duration::ZERO
    }
}

/// A shared observer.
type SharedObserver<S> = Arc<dyn Observer<S>>;

/// The observers of one worker, constructed explicitly in the binary's `main`.
///
/// ```
/// # use bytes::Bytes;
/// # use percolator_backend_mem::MemStore;
/// # use percolator_observers::Observers;
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
/// # fn main() -> percolator_core::Result<()> {
/// let mut observers: Observers<MemStore> = Observers::new();
/// assert!(observers.is_empty());
/// observers.register(WordCount)?;
/// assert_eq!(observers.len(), 1);
/// assert_eq!(observers.names(), ["word-count"]);
/// assert_eq!(observers.tables(), [Bytes::from("docs")]);
/// assert!(observers.is_observed(&Bytes::from("docs"), &Bytes::from("contents")));
/// # Ok(()) }
/// ```
pub struct Observers<S: RowStore> {
    list: Vec<SharedObserver<S>>,
    /// `(table, column)` → its observers.
    by_column: HashMap<(Bytes, Bytes), Vec<SharedObserver<S>>>,
}

impl<S: RowStore> Default for Observers<S> {
    fn default() -> Self {
        Self {
            list: Vec::new(),
            by_column: HashMap::new(),
        }
    }
}

impl<S: RowStore> std::fmt::Debug for Observers<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.list.iter().map(|o| o.name().to_owned()))
            .finish()
    }
}

impl<S: RowStore> Observers<S> {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `observer`. Errors if another observer already uses its name.
    ///
    /// ```
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_observers::Observers;
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
    /// # fn main() -> percolator_core::Result<()> {
    /// let mut observers: Observers<MemStore> = Observers::new();
    /// observers.register(WordCount)?;
    /// assert!(observers.register(WordCount).is_err()); // its name is taken
    /// assert_eq!(observers.len(), 1);
    /// # Ok(()) }
    /// ```
    pub fn register(&mut self, observer: impl Observer<S>) -> Result<&mut Self> {
        self.register_arc(Arc::new(observer))
    }

    /// Registers a shared observer.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use bytes::Bytes;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_observers::{Observer, Observers};
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
    /// # fn main() -> percolator_core::Result<()> {
    /// let shared: Arc<dyn Observer<MemStore>> = Arc::new(WordCount);
    /// let mut observers = Observers::new();
    /// observers.register_arc(Arc::clone(&shared))?;
    /// let (docs, contents) = (Bytes::from("docs"), Bytes::from("contents"));
    /// assert_eq!(observers.of(&docs, &contents).len(), 1);
    /// # Ok(()) }
    /// ```
    pub fn register_arc(&mut self, observer: Arc<dyn Observer<S>>) -> Result<&mut Self> {
        if self.list.iter().any(|o| o.name() == observer.name()) {
            return Err(percolator_core::Error::InvalidInput(format!(
                "two observers are named {:?}",
                observer.name()
            )));
        }
        let observed = observer.observed();
        percolator_core::internal::tables::check_user_table(&observed.table)?;
        self.by_column
            .entry((observed.table, observed.column))
            .or_default()
            .push(Arc::clone(&observer));
        self.list.push(observer);
        Ok(self)
    }

    /// Every observed column: hand these to every client that writes them
    /// ([`percolator_core::ClientBuilder::observe_all`]).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_core::Client;
    /// # use percolator_observers::Observers;
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
    /// // A writer that runs no observers declares the columns the workers observe.
    /// let writer = Client::builder(Arc::new(MemStore::new()))
    ///     .observe_all(&observers.observed_columns())
    ///     .build()
    ///     .await?;
    /// assert!(writer.notifies_on_write("docs", "contents"));
    /// # writer.shutdown().await }
    /// ```
    pub fn observed_columns(&self) -> Vec<ObservedColumn> {
        self.list.iter().map(|o| o.observed()).collect()
    }

    /// The registrations of these observers in the store's observer registry
    /// ([`percolator_core::internal::observer_registry`]), which [`crate::Runtime::start`] writes.
    pub fn registrations(&self) -> Vec<Registration> {
        self.list
            .iter()
            .map(|o| Registration::observer(o.name(), o.observed()))
            .collect()
    }

    /// The observed tables, each once, sorted.
    ///
    /// ```
    /// # use bytes::Bytes;
    /// # use percolator_backend_mem::MemStore;
    /// # use percolator_observers::Observers;
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
    /// # fn main() -> percolator_core::Result<()> {
    /// let mut observers: Observers<MemStore> = Observers::new();
    /// assert!(observers.tables().is_empty());
    /// observers.register(WordCount)?;
    /// assert_eq!(observers.tables(), [Bytes::from("docs")]);
    /// # Ok(()) }
    /// ```
    pub fn tables(&self) -> Vec<Bytes> {
        let mut tables: Vec<Bytes> = self.by_column.keys().map(|(t, _)| t.clone()).collect();
        tables.sort();
        tables.dedup();
        tables
    }

    /// The tables with an observer that batches ([`Observer::batch_delay`]), each with the
    /// shortest such delay.
    pub fn batching_tables(&self) -> Vec<(Bytes, Duration)> {
        let mut tables: std::collections::BTreeMap<Bytes, Duration> = Default::default();
        for ((table, _), observers) in &self.by_column {
            for delay in observers.iter().map(|o| o.batch_delay()) {
                if !delay.is_zero() {
                    let entry = tables.entry(table.clone()).or_insert(delay);
                    *entry = (*entry).min(delay);
                }
            }
        }
        tables.into_iter().collect()
    }

    /// The observers of `table`/`column`.
    pub fn of(&self, table: &Bytes, column: &Bytes) -> &[Arc<dyn Observer<S>>] {
        self.by_column
            .get(&(table.clone(), column.clone()))
            .map_or(&[], Vec::as_slice)
    }

    /// The longest [`Observer::batch_delay`] of the observers of `table`/`column`.
    pub fn batch_delay(&self, table: &Bytes, column: &Bytes) -> Duration {
        self.of(table, column)
            .iter()
            .map(|o| o.batch_delay())
            .max()
            .unwrap_or_default()
    }

    /// Whether `table`/`column` has an observer.
    pub fn is_observed(&self, table: &Bytes, column: &Bytes) -> bool {
        !self.of(table, column).is_empty()
    }

    /// Number of observers.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Names of the observers, in registration order.
    pub fn names(&self) -> Vec<String> {
        self.list.iter().map(|o| o.name().to_owned()).collect()
    }
}

/// Whether the kind keeps an ack column.
pub(crate) fn is_strong(kind: NotificationKind) -> bool {
    kind == NotificationKind::Strong
}
