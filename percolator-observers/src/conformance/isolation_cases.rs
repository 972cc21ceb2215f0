//! Failure isolation and the observer registry: panicking and failing observers back off, are
//! parked and retried; self-triggering observers are stopped; workers with different observer
//! sets on one column do not clear each other's notifications; a writer that declared nothing
//! still notifies registered columns.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use parking_lot::Mutex;
use percolator_core::conformance::{StoreFactory, client_with, fast_config};
use percolator_core::{Client, Error, ObservedColumn, Result, RowStore, Transaction};

use super::{idle, test_client, test_runtime_config};
use crate::{Change, Observer, Observers, Runtime, RuntimeConfig, parked, retry_parked};

const TABLE: &str = "iso";
const LOG: &str = "iso_log";
const ROWS: usize = 6;

fn row(i: usize) -> String {
    format!("r{i}")
}

/// Quick backoff and parking after three failures.
fn isolation_config() -> RuntimeConfig {
    test_runtime_config()
        .with_failure_backoff(Duration::from_millis(1), Duration::from_millis(20))
        .with_park_after_failures(3)
}

async fn start_with<S: RowStore>(
    store: &Arc<S>,
    observers: Observers<S>,
    config: RuntimeConfig,
) -> Runtime<S> {
    Runtime::start(test_client(store), observers, config)
        .await
        .unwrap()
}

/// A worker running one copier of column `v`, named `name`.
async fn start_only<S: RowStore>(store: &Arc<S>, name: &'static str) -> Runtime<S> {
    let mut observers = Observers::new();
    observers.register(Copier::new(name, "v")).unwrap();
    start_with(store, observers, test_runtime_config()).await
}

/// One committed transaction per row, doing `write` on it.
async fn each_row<S: RowStore>(
    client: &Client<S>,
    write: impl Fn(&mut Transaction<S>, String) -> Result<()>,
) {
    for i in 0..ROWS {
        let mut txn = client.begin().await.unwrap();
        write(&mut txn, row(i)).unwrap();
        txn.commit().await.unwrap();
    }
}

/// A writer that declared no observed column (it relies on the store's registry).
async fn plain_writer<S: RowStore>(store: &Arc<S>) -> Client<S> {
    client_with(store, fast_config()).await
}

async fn write_rows<S: RowStore>(client: &Client<S>, column: &str, value: &str) {
    each_row(client, |txn, row| {
        txn.set(TABLE, row, column, value.to_owned())
    })
    .await;
}

async fn logged<S: RowStore>(client: &Client<S>, row: &str, column: &str) -> Option<String> {
    let txn = client.begin().await.unwrap();
    txn.get(LOG, row, column)
        .await
        .unwrap()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// Copies `iso:<column>` to `iso_log:<name>` (so each observer's work is visible), panicking or
/// failing on row `r0` while `broken` is set, and counting its attempts there.
struct Copier {
    name: &'static str,
    column: &'static str,
    broken: Arc<AtomicBool>,
    panics: bool,
    attempts_on_r0: Arc<AtomicU64>,
    /// When each attempt on row r0 began.
    r0_attempted_at: Arc<parking_lot::Mutex<Vec<std::time::Instant>>>,
}

impl Copier {
    fn new(name: &'static str, column: &'static str) -> Self {
        Self {
            name,
            column,
            broken: Arc::new(AtomicBool::new(false)),
            panics: false,
            attempts_on_r0: Arc::new(AtomicU64::new(0)),
            r0_attempted_at: Arc::default(),
        }
    }
}

#[async_trait]
impl<S: RowStore> Observer<S> for Copier {
    fn name(&self) -> &str {
        self.name
    }
    fn observed(&self) -> ObservedColumn {
        ObservedColumn::strong(TABLE, self.column)
    }
    async fn observe(&self, txn: &mut Transaction<S>, change: &Change) -> Result<()> {
        if change.row == "r0" {
            self.r0_attempted_at.lock().push(std::time::Instant::now());
            self.attempts_on_r0.fetch_add(1, Ordering::SeqCst);
            if self.broken.load(Ordering::SeqCst) {
                if self.panics {
                    panic!("copier {} cannot handle row r0", self.name);
                }
                return Err(Error::Application(format!(
                    "copier {} rejects row r0",
                    self.name
                )));
            }
        }
        let value = change.value.clone().unwrap_or_default();
        txn.set(LOG, &change.row, self.name, value)?;
        Ok(())
    }
}

/// A panicking observer is caught and counted, never jams `wait_idle`, and its change is parked
/// after three failures with the panic message; `retry_parked` hands it back once it is fixed.
pub async fn panicking_observer_is_parked_and_retried<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let mut copier = Copier::new("copier", "v");
    copier.panics = true;
    copier.broken.store(true, Ordering::SeqCst);
    let broken = Arc::clone(&copier.broken);
    let mut observers = Observers::new();
    observers.register(copier).unwrap();
    let runtime = start_with(&store, observers, isolation_config()).await;
    write_rows(&plain_writer(&store).await, "v", "one").await;
    idle(&runtime).await;
    let stats = runtime.stats();
    assert_eq!(
        stats.panics, 3,
        "three panicking runs, then parked: {stats:?}"
    );
    assert_eq!(stats.parked, 1, "{stats:?}");
    assert_eq!(runtime.in_flight(), 0);
    let checker = plain_writer(&store).await;
    for i in 1..ROWS {
        assert_eq!(
            logged(&checker, &row(i), "copier").await.as_deref(),
            Some("one")
        );
    }
    assert_eq!(
        logged(&checker, "r0", "copier").await,
        None,
        "r0 never committed"
    );
    let list = parked(store.as_ref()).await.unwrap();
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!(list[0].row, "r0");
    assert_eq!(list[0].observer, "copier");
    assert_eq!(list[0].failures, 3);
    assert!(
        list[0].error.contains("panicked") && list[0].error.contains("cannot handle row r0"),
        "the record keeps the panic: {}",
        list[0].error
    );
    // Fixed: hand it back.
    broken.store(false, Ordering::SeqCst);
    let report = retry_parked(&checker, None).await.unwrap();
    assert_eq!(report.retried, 1, "{report:?}");
    idle(&runtime).await;
    assert_eq!(
        logged(&checker, "r0", "copier").await.as_deref(),
        Some("one")
    );
    assert!(parked(store.as_ref()).await.unwrap().is_empty());
    runtime.shutdown().await.unwrap();
}

/// A row whose observer keeps failing pauses between attempts (doubling up to the maximum)
/// instead of being retried on every sweep; the other rows are processed meanwhile.
pub async fn failing_row_backs_off<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let copier = Copier::new("copier", "v");
    copier.broken.store(true, Ordering::SeqCst);
    let attempted_at = Arc::clone(&copier.r0_attempted_at);
    let broken = Arc::clone(&copier.broken);
    let mut observers = Observers::new();
    observers.register(copier).unwrap();
    // Never park; pauses of 50, 100, 200, 200, ... ms.
    let config = test_runtime_config()
        .with_failure_backoff(Duration::from_millis(50), Duration::from_millis(200))
        .with_park_after_failures(0);
    let runtime = start_with(&store, observers, config).await;
    let writer = plain_writer(&store).await;
    write_rows(&writer, "v", "one").await;
    // Five attempts on r0: the first and four retries.
    while attempted_at.lock().len() < 5 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let stats = runtime.stats();
    // Without backoff the scanners (idle pause at most 20 ms, reset by every dispatch) would
    // retry within milliseconds; each retry comes at least its pause after the attempt before.
    // (A slower machine only makes the gaps longer.)
    let at = attempted_at.lock().clone();
    for (i, pause_ms) in [50u64, 100, 200, 200].into_iter().enumerate() {
        let gap = at[i + 1] - at[i];
        assert!(
            gap + Duration::from_millis(2) >= Duration::from_millis(pause_ms),
            "retry {} of r0 came {gap:?} after the attempt before, not after the {pause_ms} ms \
             pause: {stats:?}",
            i + 1
        );
    }
    assert!(stats.backed_off > 0, "{stats:?}");
    assert_eq!(stats.parked, 0);
    for i in 1..ROWS {
        assert_eq!(
            logged(&writer, &row(i), "copier").await.as_deref(),
            Some("one")
        );
    }
    broken.store(false, Ordering::SeqCst);
    idle(&runtime).await;
    assert_eq!(
        logged(&writer, "r0", "copier").await.as_deref(),
        Some("one")
    );
    runtime.shutdown().await.unwrap();
}

/// Appends "+" to the column it observes until the value is `limit` long (`None`: forever).
struct Growing {
    name: &'static str,
    column: &'static str,
    limit: Option<usize>,
}

#[async_trait]
impl<S: RowStore> Observer<S> for Growing {
    fn name(&self) -> &str {
        self.name
    }
    fn observed(&self) -> ObservedColumn {
        ObservedColumn::strong(TABLE, self.column)
    }
    async fn observe(&self, txn: &mut Transaction<S>, change: &Change) -> Result<()> {
        let mut value = change.value.clone().unwrap_or_default().to_vec();
        if self.limit.is_none_or(|limit| value.len() < limit) {
            value.push(b'+');
            txn.set(TABLE, &change.row, self.column, value)?;
        }
        Ok(())
    }
}

/// An observer that writes the column it observes re-triggers itself; the runtime lets it do
/// so `max_self_triggers` times in a row, then fails and finally parks it. One that stops by
/// itself (a normalising write) is left alone.
pub async fn self_triggering_observer_is_stopped<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let mut observers = Observers::new();
    observers
        .register(Growing {
            name: "forever",
            column: "loop",
            limit: None,
        })
        .unwrap();
    observers
        .register(Growing {
            name: "settles",
            column: "calm",
            limit: Some(4),
        })
        .unwrap();
    let config = isolation_config().with_max_self_triggers(5);
    let runtime = start_with(&store, observers, config).await;
    let writer = plain_writer(&store).await;
    let mut txn = writer.begin().await.unwrap();
    txn.set(TABLE, "x", "loop", "s").unwrap();
    txn.set(TABLE, "x", "calm", "s").unwrap();
    txn.commit().await.unwrap();
    idle(&runtime).await;
    let stats = runtime.stats();
    let txn = writer.begin().await.unwrap();
    let looped = txn.get(TABLE, "x", "loop").await.unwrap().unwrap();
    let calm = txn.get(TABLE, "x", "calm").await.unwrap().unwrap();
    assert_eq!(
        looped.as_ref(),
        b"s+++++",
        "five self-triggered runs, then stopped"
    );
    assert_eq!(
        calm.as_ref(),
        b"s+++",
        "the settling observer ran to its end"
    );
    assert!(stats.self_trigger_stops >= 3, "{stats:?}");
    assert_eq!(stats.parked, 1, "{stats:?}");
    let list = parked(store.as_ref()).await.unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].observer, "forever");
    assert!(
        list[0].error.contains("wrote the column it observes"),
        "{}",
        list[0].error
    );
    runtime.shutdown().await.unwrap();
}

/// A rolling deploy: worker A runs observer `old`, worker B runs `old` and `new` on the same
/// column. A must not clear notifications `new` has not covered; once B is back, `new` sees every
/// change; notifications end up cleared. Then B runs only `new`, the column is deleted and
/// garbage-collected (its acks too): later notifications of the empty column are still cleared.
/// The writer declared nothing.
pub async fn workers_with_different_observer_sets<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let observers_b = || {
        let mut o = Observers::<F::Store>::new();
        o.register(Copier::new("old", "v")).unwrap();
        o.register(Copier::new("new", "v")).unwrap();
        o
    };
    // B starts (registering `new`) and stops again before any write.
    let b = start_with(&store, observers_b(), test_runtime_config()).await;
    b.shutdown().await.unwrap();
    let a = start_only(&store, "old").await;
    let writer = plain_writer(&store).await;
    write_rows(&writer, "v", "one").await;
    // A processes every row but may clear nothing: `new` has not run.
    for i in 0..ROWS {
        for _ in 0..2000 {
            if logged(&writer, &row(i), "old").await.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(
            logged(&writer, &row(i), "old").await.as_deref(),
            Some("one")
        );
    }
    let waited = a.wait_idle(Duration::from_millis(500)).await;
    assert!(
        waited.is_err(),
        "A went idle although `new` never saw the changes"
    );
    assert_eq!(
        writer.pending_notifications(TABLE).await.unwrap(),
        ROWS,
        "A kept every notification for `new`"
    );
    assert!(a.stats().deferred > 0, "{:?}", a.stats());
    // B comes back: `new` runs on every row and the notifications are cleared by whichever
    // worker covers them last.
    let b = start_with(&store, observers_b(), test_runtime_config()).await;
    idle(&b).await;
    idle(&a).await;
    for i in 0..ROWS {
        assert_eq!(
            logged(&writer, &row(i), "new").await.as_deref(),
            Some("one")
        );
        assert_eq!(
            logged(&writer, &row(i), "old").await.as_deref(),
            Some("one")
        );
    }
    assert_eq!(writer.pending_notifications(TABLE).await.unwrap(), 0);
    b.shutdown().await.unwrap();
    // Disjoint sets: A runs only `old`, B only `new`, and the column is deleted.
    let b = start_only(&store, "new").await;
    each_row(&writer, |txn, row| txn.delete(TABLE, row, "v")).await;
    idle(&a).await;
    idle(&b).await;
    assert_eq!(writer.pending_notifications(TABLE).await.unwrap(), 0);
    // GC (the workers stopped, so that the safe point passes their snapshots) takes the
    // deletes and, with them, the now orphaned acks. A notification of the empty column is
    // still cleared: each worker sees that the other's strong observer, finding no value, would
    // do nothing (it never acks such a run).
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
    let gc = percolator_core::gc::GcConfig::default().with_grace(Duration::ZERO);
    let report = writer.gc(&gc, |_| {}).await.unwrap();
    assert_eq!(report.total().acks_deleted, 2 * ROWS as u64, "{report:?}");
    let a = start_only(&store, "old").await;
    let b = start_only(&store, "new").await;
    each_row(&writer, |txn, row| txn.notify(TABLE, row, "v")).await;
    idle(&a).await;
    idle(&b).await;
    assert_eq!(writer.pending_notifications(TABLE).await.unwrap(), 0);
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
}

/// Writers that declared nothing notify registered columns: one built after the worker
/// registered, and one built before it, once it has read the registry again.
pub async fn undeclared_writer_still_notifies<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let early = plain_writer(&store).await;
    assert!(!early.notifies_on_write(TABLE, "v"));
    let seen = Arc::new(Mutex::new(HashSet::new()));
    let mut observers = Observers::new();
    observers
        .register(Recorder {
            seen: Arc::clone(&seen),
        })
        .unwrap();
    let runtime = start_with(&store, observers, test_runtime_config()).await;
    let late = plain_writer(&store).await;
    assert!(late.notifies_on_write(TABLE, "v"));
    write_rows(&late, "v", "late").await;
    early.refresh_observed_columns().await.unwrap();
    assert!(early.notifies_on_write(TABLE, "v"));
    let mut txn = early.begin().await.unwrap();
    txn.set(TABLE, "early", "v", "early").unwrap();
    txn.commit().await.unwrap();
    idle(&runtime).await;
    let seen = seen.lock().clone();
    for i in 0..ROWS {
        assert!(seen.contains(&Bytes::from(row(i))), "{seen:?}");
    }
    assert!(seen.contains(&Bytes::from_static(b"early")), "{seen:?}");
    runtime.shutdown().await.unwrap();
}

/// Records the rows it saw.
struct Recorder {
    seen: Arc<Mutex<HashSet<Bytes>>>,
}

#[async_trait]
impl<S: RowStore> Observer<S> for Recorder {
    fn name(&self) -> &str {
        "recorder"
    }
    fn observed(&self) -> ObservedColumn {
        ObservedColumn::strong(TABLE, "v")
    }
    async fn observe(&self, _txn: &mut Transaction<S>, change: &Change) -> Result<()> {
        self.seen.lock().insert(change.row.clone());
        Ok(())
    }
}
