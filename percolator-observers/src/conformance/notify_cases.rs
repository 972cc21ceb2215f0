//! Notifications and the runtime: strong at-most-once under crashes, collapsing, weak storms,
//! notifications of crashed, rolled-back and late writers, graceful shutdown.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::future::BoxFuture;
use percolator_core::conformance::hooks::{CrashAt, PauseAt, RandomCrash};
use percolator_core::conformance::{StoreFactory, client_with, fast_config, patient_client};
use percolator_core::fault::CommitStep;
use percolator_core::{Client, Error, ObservedColumn, Result, RowStore, Transaction};
use rand::Rng as _;

use super::{idle, start, test_client, test_runtime_config, writer};
use crate::{Change, Observer, Observers, Runtime};

const OBS: &str = "obs";
const LOG: &str = "obs_log";

fn text(b: Option<Bytes>) -> String {
    b.map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_else(|| "none".into())
}

async fn counter<S: RowStore>(txn: &Transaction<S>, table: &str, row: &[u8], column: &str) -> u64 {
    txn.get(table, row, column)
        .await
        .unwrap()
        .map(|b| String::from_utf8_lossy(&b).parse().unwrap())
        .unwrap_or(0)
}

/// Strong observer on `obs:v`: counts, per row, how many commits saw each value (`seen/<v>`)
/// and how many runs committed (`runs`).
struct Counting;

#[async_trait]
impl<S: RowStore> Observer<S> for Counting {
    fn name(&self) -> &str {
        "counting"
    }
    fn observed(&self) -> ObservedColumn {
        ObservedColumn::strong(OBS, "v")
    }
    async fn observe(&self, txn: &mut Transaction<S>, change: &Change) -> Result<()> {
        let seen = format!("seen/{}", text(change.value.clone()));
        let n = counter(txn, LOG, &change.row, &seen).await;
        txn.set(LOG, &change.row, &seen, (n + 1).to_string())?;
        let runs = counter(txn, LOG, &change.row, "runs").await;
        txn.set(LOG, &change.row, "runs", (runs + 1).to_string())?;
        Ok(())
    }
}

fn counting<S: RowStore>() -> Observers<S> {
    let mut o = Observers::new();
    o.register(Counting).unwrap();
    o
}

async fn increment<S: RowStore>(client: &Client<S>, row: &str) -> u64 {
    let row = row.to_owned();
    client
        .run(|txn| -> BoxFuture<'_, Result<u64>> {
            let row = row.clone();
            Box::pin(async move {
                let v = counter(txn, OBS, row.as_bytes(), "v").await + 1;
                txn.set(OBS, &row, "v", v.to_string())?;
                Ok(v)
            })
        })
        .await
        .unwrap()
}

/// Workers running the same observers divide the rows (partitioned scanning): with the group
/// known to all, every change commits once, with no conflict and hardly a run that finds its
/// change already acknowledged, and each worker runs a share. A worker that leaves hands
/// its share over: the ones left run everything written after.
pub async fn workers_share_the_rows<F: StoreFactory>(factory: &F) {
    const ROWS: usize = 120;
    const WORKERS: usize = 3;
    let store = factory.open().await;
    let config = test_runtime_config().with_partition_refresh(Some(Duration::from_millis(20)));
    let mut runtimes = Vec::new();
    for _ in 0..WORKERS {
        runtimes.push(
            Runtime::start(test_client(&store), counting(), config.clone())
                .await
                .unwrap(),
        );
    }
    // Every worker sees the whole group before anything is written.
    for runtime in &runtimes {
        let began = std::time::Instant::now();
        while runtime.stats().group_members < WORKERS as u64 {
            assert!(
                began.elapsed() < Duration::from_secs(30),
                "the group never formed: {:?}",
                runtime.stats()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    let w = writer(&store, &counting::<F::Store>().observed_columns()).await;
    for r in 0..ROWS {
        increment(&w, &format!("r{r}")).await;
    }
    for runtime in &runtimes {
        idle(runtime).await;
    }
    let stats: Vec<_> = runtimes.iter().map(Runtime::stats).collect();
    let processed: u64 = stats.iter().map(|s| s.notifications_processed).sum();
    assert_eq!(processed, ROWS as u64, "every change once: {stats:#?}");
    for s in &stats {
        assert_eq!(s.group_members, WORKERS as u64, "{s:?}");
        // Two workers on one row conflict on its ack. (A lock of the writer's commit may still
        // be met and rolled forward: the writer is a live worker too.)
        assert_eq!(s.conflicts, 0, "no worker ran another's row: {s:?}");
        assert!(
            s.notifications_processed > 0,
            "each ran its share: {stats:#?}"
        );
    }
    // A run may find its change acknowledged when its own worker ran the row just before (a
    // notification its run did not cover); workers sharing rows would make it common.
    let acked: u64 = stats.iter().map(|s| s.already_acknowledged).sum();
    assert!(
        acked * 20 <= ROWS as u64,
        "{acked} runs found their change acknowledged"
    );
    assert!(
        stats.iter().any(|s| s.left_to_others > 0),
        "no worker passed over another's row: {stats:#?}"
    );
    // One leaves; the other two take its rows over.
    let leaving = runtimes.pop().unwrap();
    leaving.shutdown().await.unwrap();
    for runtime in &runtimes {
        let began = std::time::Instant::now();
        while runtime.stats().group_members != (WORKERS - 1) as u64 {
            assert!(
                began.elapsed() < Duration::from_secs(30),
                "the leaver stayed"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    for r in 0..ROWS {
        increment(&w, &format!("r{r}")).await;
    }
    for runtime in &runtimes {
        idle(runtime).await;
    }
    let after: u64 = runtimes
        .iter()
        .map(|r| r.stats().notifications_processed)
        .sum();
    let before: u64 = stats[..WORKERS - 1]
        .iter()
        .map(|s| s.notifications_processed)
        .sum();
    assert_eq!(after - before, ROWS as u64, "the leaver's rows ran too");
    let audit = crate::audit::strong_runs(store.as_ref(), &counting::<F::Store>())
        .await
        .unwrap();
    assert!(audit.doubled.is_empty(), "{:?}", audit.doubled);
    for runtime in runtimes {
        runtime.shutdown().await.unwrap();
    }
}

/// Two workers on one table, both running every row they find (partitioning off), observers
/// crashing at random (about 12% of commits), writers incrementing rows and throwing in
/// duplicate notifications: the latest change of every row is processed, and no change is
/// committed twice.
pub async fn strong_changes_once_with_crashes_two_workers<F: StoreFactory>(factory: &F) {
    const ROWS: usize = 16;
    const WRITERS: usize = 4;
    const WRITES: usize = 60;
    let store = factory.open().await;
    let crash_a = RandomCrash::new(0.15);
    let crash_b = RandomCrash::new(0.15);
    let runtime = |hook: Arc<RandomCrash>| {
        let store = Arc::clone(&store);
        async move {
            let client = test_client(&store).commit_hook(hook);
            // Unpartitioned: both workers run every row they find, so that they collide and
            // the protocol alone keeps changes at most once.
            let config = test_runtime_config().with_partition_refresh(None);
            Runtime::start(client, counting(), config).await.unwrap()
        }
    };
    let a = runtime(Arc::clone(&crash_a)).await;
    let b = runtime(Arc::clone(&crash_b)).await;
    let w = writer(&store, &counting::<F::Store>().observed_columns()).await;
    let mut tasks = Vec::new();
    for _ in 0..WRITERS {
        let w = w.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..WRITES {
                let row = format!("r{}", rand::rng().random_range(0..ROWS));
                increment(&w, &row).await;
                if rand::rng().random_bool(0.2) {
                    w.notify_weak(OBS, &row, "v").await.unwrap(); // a duplicate notification
                }
                // Let observers run between writes, so that not every change collapses.
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    idle(&a).await;
    idle(&b).await;
    idle(&a).await;

    let reader = w.begin().await.unwrap();
    let mut runs = 0;
    for r in 0..ROWS {
        let row = format!("r{r}");
        let v = counter(&reader, OBS, row.as_bytes(), "v").await;
        if v == 0 {
            continue;
        }
        let log = reader
            .scan(
                LOG,
                Bytes::from(row.clone())..=Bytes::from(row.clone()),
                Default::default(),
            )
            .await
            .unwrap();
        for item in &log {
            if item.column.starts_with(b"seen/") {
                assert_eq!(
                    item.value.as_ref(),
                    b"1",
                    "{row}: a change was committed twice: {item:?}"
                );
            }
        }
        assert!(
            log.iter()
                .any(|i| i.column.as_ref() == format!("seen/{v}").as_bytes()),
            "{row}: latest value {v} never processed: {log:?}"
        );
        runs += counter(&reader, LOG, row.as_bytes(), "runs").await;
    }
    assert!(
        runs as usize <= WRITERS * WRITES,
        "more observer commits ({runs}) than changes"
    );
    // The store's write records agree: no change handled by two committed runs.
    let audit = crate::audit::strong_runs(store.as_ref(), &counting::<F::Store>())
        .await
        .unwrap();
    assert!(audit.doubled.is_empty(), "{:?}", audit.doubled);
    assert_eq!(
        audit.runs, runs,
        "runs in the log and acks in the store disagree"
    );
    assert!(audit.changes >= audit.runs);
    let crashes = crash_a.crashes.load(Ordering::Relaxed) + crash_b.crashes.load(Ordering::Relaxed);
    let (sa, sb) = (a.stats(), b.stats());
    let attempts = sa.notifications_processed + sb.notifications_processed + crashes;
    assert!(
        crashes * 40 >= attempts,
        "too few crashes injected: {crashes} of {attempts} commits"
    );
    assert!(sa.notifications_processed + sb.notifications_processed > 0);
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
}

/// Many writes before the observer runs collapse into few runs, and the runtime counts it. A
/// store may coalesce notifications of one cell itself (fjall keeps those of one-phase commits
/// to a cell that already holds one in memory): then fewer versions are pending, and the runtime
/// collapses what is left.
pub async fn message_collapsing<F: StoreFactory>(factory: &F) {
    const WRITES: u64 = 40;
    let store = factory.open().await;
    let w = writer(&store, &counting::<F::Store>().observed_columns()).await;
    for _ in 0..WRITES {
        increment(&w, "hot").await;
    }
    let pending = w.pending_notifications(OBS).await.unwrap() as u64;
    assert!(
        (1..=WRITES).contains(&pending),
        "{pending} pending for {WRITES} writes"
    );
    let runtime = start(&store, counting()).await;
    idle(&runtime).await;
    let stats = runtime.shutdown().await.unwrap();
    let reader = w.begin().await.unwrap();
    let runs = counter(&reader, LOG, b"hot", "runs").await;
    assert!(
        (1..WRITES).contains(&runs),
        "runs {runs} for {WRITES} writes"
    );
    assert_eq!(
        counter(&reader, LOG, b"hot", &format!("seen/{WRITES}")).await,
        1
    );
    assert_eq!(stats.notifications_cleared, pending);
    assert!(
        stats.collapsed >= pending.saturating_sub(runs),
        "collapsed {}",
        stats.collapsed
    );
    if pending > runs {
        assert!(stats.collapse_ratio() > 1.0);
    }
}

/// Weak observer counting its runs and remembering its latest snapshot.
struct Storm;

#[async_trait]
impl<S: RowStore> Observer<S> for Storm {
    fn name(&self) -> &str {
        "storm"
    }
    fn observed(&self) -> ObservedColumn {
        ObservedColumn::weak("storm", "ping")
    }
    async fn observe(&self, txn: &mut Transaction<S>, change: &Change) -> Result<()> {
        let runs = counter(txn, "storm_log", &change.row, "runs").await;
        txn.set("storm_log", &change.row, "runs", (runs + 1).to_string())?;
        let last = counter(txn, "storm_log", &change.row, "last").await;
        txn.set(
            "storm_log",
            &change.row,
            "last",
            last.max(txn.start_ts()).to_string(),
        )?;
        Ok(())
    }
}

/// A storm of weak notifications on one row while the runtime runs: they collapse (far fewer
/// runs than notifications), nothing accumulates (no notify version is left), and the observer
/// runs at least once after the storm.
pub async fn weak_storm_stays_bounded<F: StoreFactory>(factory: &F) {
    const STORM: usize = 1500;
    let store = factory.open().await;
    let mut observers = Observers::new();
    observers.register(Storm).unwrap();
    let runtime = start(&store, observers).await;
    let c = runtime.client().clone();
    let mut peak = 0;
    for i in 0..STORM - 1 {
        c.notify_weak("storm", "hot", "ping").await.unwrap();
        if i % 100 == 0 {
            peak = peak.max(c.pending_notifications("storm").await.unwrap());
        }
    }
    let before_last = c.oracle().timestamp().await.unwrap();
    c.notify_weak("storm", "hot", "ping").await.unwrap();
    idle(&runtime).await;
    assert_eq!(c.pending_notifications("storm").await.unwrap(), 0);
    let reader = c.begin().await.unwrap();
    let runs = counter(&reader, "storm_log", b"hot", "runs").await;
    let last = counter(&reader, "storm_log", b"hot", "last").await;
    assert!(runs >= 1 && (runs as usize) < STORM, "runs {runs}");
    assert!(
        last > before_last,
        "no run after the storm's last notification"
    );
    let stats = runtime.shutdown().await.unwrap();
    assert_eq!(stats.notifications_cleared as usize, STORM);
    println!("weak storm: {STORM} notifications, {runs} runs, peak {peak} pending");
}

/// Counts its runs (as [`Storm`] does) and records when each started; waits
/// [`BATCH_DELAY`] before a run.
struct Batched(Arc<parking_lot::Mutex<Vec<std::time::Instant>>>);

/// [`Batched`]'s batch delay.
const BATCH_DELAY: Duration = Duration::from_secs(2);

#[async_trait]
impl<S: RowStore> Observer<S> for Batched {
    fn name(&self) -> &str {
        "batched"
    }
    fn observed(&self) -> ObservedColumn {
        ObservedColumn::weak("batched", "ping")
    }
    async fn observe(&self, txn: &mut Transaction<S>, change: &Change) -> Result<()> {
        self.0.lock().push(std::time::Instant::now());
        let runs = counter(txn, "batched_log", &change.row, "runs").await;
        txn.set("batched_log", &change.row, "runs", (runs + 1).to_string())?;
        Ok(())
    }
    fn batch_delay(&self) -> Duration {
        BATCH_DELAY
    }
}

/// An observer with a batch delay runs no sooner than the delay after its notification, and
/// every notification arriving meanwhile collapses into that one run.
pub async fn batch_delay_collapses_notifications<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let starts = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let mut observers = Observers::new();
    observers.register(Batched(Arc::clone(&starts))).unwrap();
    let runtime = start(&store, observers).await;
    let c = runtime.client().clone();
    let first_notified = std::time::Instant::now();
    for _ in 0..10 {
        c.notify_weak("batched", "row", "ping").await.unwrap();
    }
    assert!(
        first_notified.elapsed() < BATCH_DELAY,
        "the notifications took longer than the delay"
    );
    idle(&runtime).await;
    let reader = c.begin().await.unwrap();
    assert_eq!(counter(&reader, "batched_log", b"row", "runs").await, 1);
    let starts = starts.lock().clone();
    assert_eq!(starts.len(), 1, "runs started (retries included)");
    assert!(
        starts[0].duration_since(first_notified) >= BATCH_DELAY,
        "ran {:?} after the first notification, before the batch delay",
        starts[0].duration_since(first_notified)
    );
    let stats = runtime.shutdown().await.unwrap();
    assert!(stats.lingered > 0, "no scan saw the row lingering");
    assert_eq!(stats.notifications_cleared, 10);
}

/// A batching observer that applies at most [`DRAIN_PER_RUN`] of a queue's items per run and
/// notifies its own cell again while items are left (as the web index's inverter does).
struct Drainer;

/// Items one [`Drainer`] run applies.
const DRAIN_PER_RUN: u64 = 3;

#[async_trait]
impl<S: RowStore> Observer<S> for Drainer {
    fn name(&self) -> &str {
        "drainer"
    }
    fn observed(&self) -> ObservedColumn {
        ObservedColumn::weak("drain", "go")
    }
    async fn observe(&self, txn: &mut Transaction<S>, change: &Change) -> Result<()> {
        let left = counter(txn, "drain", &change.row, "left").await;
        let runs = counter(txn, "drain", &change.row, "runs").await;
        let taken = left.min(DRAIN_PER_RUN);
        txn.set("drain", &change.row, "left", (left - taken).to_string())?;
        txn.set("drain", &change.row, "runs", (runs + 1).to_string())?;
        if left > taken {
            txn.notify("drain", &change.row, "go")?;
        }
        Ok(())
    }
    fn batch_delay(&self) -> Duration {
        BATCH_DELAY
    }
}

/// A batching observer's backlog runs back to back: a run that leaves work queued (notifies
/// its own cell again) is followed at once by the next, not after another batch delay, and
/// every item is applied.
pub async fn batch_backlog_runs_back_to_back<F: StoreFactory>(factory: &F) {
    const ITEMS: u64 = 5 * DRAIN_PER_RUN;
    let store = factory.open().await;
    let mut observers = Observers::new();
    observers.register(Drainer).unwrap();
    let runtime = start(&store, observers).await;
    let c = runtime.client().clone();
    let mut txn = c.begin().await.unwrap();
    txn.set("drain", "queue", "left", ITEMS.to_string())
        .unwrap();
    txn.notify("drain", "queue", "go").unwrap();
    txn.commit().await.unwrap();
    idle(&runtime).await;
    let reader = c.begin().await.unwrap();
    assert_eq!(counter(&reader, "drain", b"queue", "left").await, 0);
    let runs = counter(&reader, "drain", b"queue", "runs").await;
    assert_eq!(runs, ITEMS / DRAIN_PER_RUN);
    let stats = runtime.shutdown().await.unwrap();
    assert_eq!(
        stats.batch_reruns,
        runs - 1,
        "every run after the first should follow its predecessor at once"
    );
}

/// Records, in one shared log, which stage each of its runs belongs to.
struct Stage {
    table: &'static str,
    log: Arc<parking_lot::Mutex<Vec<&'static str>>>,
}

#[async_trait]
impl<S: RowStore> Observer<S> for Stage {
    fn name(&self) -> &str {
        self.table
    }
    fn observed(&self) -> ObservedColumn {
        ObservedColumn::weak(self.table, "ping")
    }
    async fn observe(&self, txn: &mut Transaction<S>, change: &Change) -> Result<()> {
        self.log.lock().push(self.table);
        txn.set(LOG, &change.row, self.table, "seen")?;
        Ok(())
    }
}

/// With [`crate::RuntimeConfig::stages`], the scanners drain the first stage's backlog before
/// they start the next stage's runs, though the later stage's table sorts first: only the
/// first stage's rows in flight (at most the runs in flight) may still be running then.
pub async fn stages_drain_upstream_first<F: StoreFactory>(factory: &F) {
    const ROWS: usize = 120;
    let store = factory.open().await;
    let log = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let (upstream, downstream) = ("stage_b", "stage_a");
    let mut observers = Observers::new();
    for table in [upstream, downstream] {
        observers
            .register(Stage {
                table,
                log: Arc::clone(&log),
            })
            .unwrap();
    }
    let w = writer(
        &store,
        &[
            ObservedColumn::weak(upstream, "ping"),
            ObservedColumn::weak(downstream, "ping"),
        ],
    )
    .await;
    for i in 0..ROWS {
        for table in [downstream, upstream] {
            w.notify_weak(table, format!("r{i:03}"), "ping")
                .await
                .unwrap();
        }
    }
    let config = test_runtime_config().with_stages([upstream, downstream]);
    let in_flight = config.max_concurrent_runs;
    let runtime = Runtime::start(test_client(&store), observers, config)
        .await
        .unwrap();
    idle(&runtime).await;
    runtime.shutdown().await.unwrap();
    let log = log.lock().clone();
    let count = |table| log.iter().filter(|t| **t == table).count();
    assert_eq!(count(upstream), ROWS, "every upstream row ran once");
    assert_eq!(count(downstream), ROWS, "every downstream row ran once");
    let first_downstream = log.iter().position(|t| *t == downstream).unwrap();
    assert!(
        first_downstream >= ROWS - in_flight,
        "the first downstream run started after only {first_downstream} of {ROWS} upstream runs"
    );
}

/// A writer that writes `obs/a:x` (primary) and the observed `obs/b:v` = 7, and "dies" at `step`.
async fn crashed_writer<S: RowStore>(store: &Arc<S>, step: CommitStep) -> Client<S> {
    let w = Client::builder(Arc::clone(store))
        .local_oracle()
        .config(fast_config())
        .observe_all(&counting::<S>().observed_columns())
        .commit_hook(Arc::new(CrashAt(step)))
        .build()
        .await
        .unwrap();
    let mut txn = w.begin().await.unwrap();
    txn.set(OBS, "a", "x", "primary").unwrap();
    txn.set(OBS, "b", "v", "7").unwrap();
    assert!(matches!(txn.commit().await, Err(Error::InjectedCrash(_))));
    w
}

/// A writer that dies right after its commit point left its observed secondary row locked: the
/// notification (written at prewrite) is still there and the observer processes the value.
pub async fn notification_survives_crash_after_commit_point<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let w = crashed_writer(&store, CommitStep::AfterCommitPoint).await;
    assert_eq!(
        w.locks(OBS).await.unwrap().len(),
        1,
        "the secondary is still locked"
    );
    let runtime = start(&store, counting()).await;
    idle(&runtime).await;
    let reader = runtime.client().begin().await.unwrap();
    assert_eq!(text(reader.get(LOG, "b", "seen/7").await.unwrap()), "1");
    runtime.shutdown().await.unwrap();
}

/// A writer that dies before its commit point: its notification is consumed once the lock is
/// rolled back, and no observer transaction commits (there was no change).
pub async fn rolled_back_writer_runs_nothing<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let w = crashed_writer(&store, CommitStep::AfterPrewrites).await;
    assert_eq!(w.pending_notifications(OBS).await.unwrap(), 1);
    let runtime = start(&store, counting()).await;
    idle(&runtime).await;
    let stats = runtime.shutdown().await.unwrap();
    assert_eq!(stats.notifications_processed, 0);
    assert!(stats.already_acknowledged >= 1);
    let reader = w.begin().await.unwrap();
    assert_eq!(reader.get(OBS, "b", "v").await.unwrap(), None);
    assert_eq!(reader.get(LOG, "b", "runs").await.unwrap(), None);
}

/// Weak observer reading `late/x:v` and recording what it saw.
struct Late;

#[async_trait]
impl<S: RowStore> Observer<S> for Late {
    fn name(&self) -> &str {
        "late"
    }
    fn observed(&self) -> ObservedColumn {
        ObservedColumn::weak("late", "trigger")
    }
    async fn observe(&self, txn: &mut Transaction<S>, change: &Change) -> Result<()> {
        let seen = text(txn.get("late", "x", "v").await?);
        txn.set("late_log", &change.row, "seen", seen)?;
        Ok(())
    }
}

/// A writer that started before an observer's snapshot but commits after it: the observer's run
/// cannot see the write, so it must not consume the writer's notification; a later run does.
pub async fn late_writer_not_swallowed<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let (hook, mut reached, release) = PauseAt::new(vec![CommitStep::AfterPrewrites], None);
    let w = Client::builder(Arc::clone(&store))
        .local_oracle()
        .config(fast_config().with_lock_ttl(Duration::from_secs(60)))
        .commit_hook(hook)
        .build()
        .await
        .unwrap();
    let mut txn = w.begin().await.unwrap();
    txn.set("late", "x", "v", "new").unwrap();
    txn.notify("late", "r", "trigger").unwrap();
    let commit = tokio::spawn(async move { txn.commit().await });
    assert_eq!(reached.recv().await, Some(CommitStep::AfterPrewrites));
    let mut observers = Observers::new();
    observers.register(Late).unwrap();
    let runtime = start(&store, observers).await;
    // Wait until the observer's run has started (it then blocks on the writer's lock).
    for _ in 0..1000 {
        if runtime.in_flight() > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(runtime.in_flight() > 0, "the observer never started");
    tokio::time::sleep(Duration::from_millis(50)).await;
    release.notify_one();
    commit.await.unwrap().unwrap();
    idle(&runtime).await;
    let stats = runtime.shutdown().await.unwrap();
    assert!(
        stats.notifications_kept >= 1,
        "the early run should have kept the notification"
    );
    let reader = patient_client(&store).await.begin().await.unwrap();
    assert_eq!(
        text(reader.get("late_log", "r", "seen").await.unwrap()),
        "new"
    );
}

/// Strong observer that takes its time.
struct Slow;

#[async_trait]
impl<S: RowStore> Observer<S> for Slow {
    fn name(&self) -> &str {
        "slow"
    }
    fn observed(&self) -> ObservedColumn {
        ObservedColumn::strong("slow", "v")
    }
    async fn observe(&self, txn: &mut Transaction<S>, change: &Change) -> Result<()> {
        tokio::time::sleep(Duration::from_millis(30)).await;
        txn.set(
            "slow_log",
            &change.row,
            "done",
            change.value.clone().unwrap_or_default(),
        )?;
        Ok(())
    }
}

/// Shutting down with runs in flight lets them finish: no lock is left anywhere, and every
/// change is either processed or still pending for the next worker.
pub async fn graceful_shutdown_leaves_no_locks<F: StoreFactory>(factory: &F) {
    const ROWS: usize = 40;
    let store = factory.open().await;
    let slow = || {
        let mut o = Observers::<F::Store>::new();
        o.register(Slow).unwrap();
        o
    };
    let w = writer(&store, &slow().observed_columns()).await;
    for r in 0..ROWS {
        let mut txn = w.begin().await.unwrap();
        txn.set("slow", format!("r{r:02}"), "v", "x").unwrap();
        txn.commit().await.unwrap();
    }
    let runtime = start(&store, slow()).await;
    for _ in 0..2000 {
        if runtime.stats().notifications_processed >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    runtime.shutdown().await.unwrap();
    let checker = client_with(&store, fast_config()).await;
    for table in ["slow", "slow_log"] {
        let locks = checker.locks(table).await.unwrap();
        assert!(
            locks.is_empty(),
            "shutdown left locks in {table}: {locks:?}"
        );
    }
    let runtime = start(&store, slow()).await;
    idle(&runtime).await;
    runtime.shutdown().await.unwrap();
    let reader = checker.begin().await.unwrap();
    for r in 0..ROWS {
        assert_eq!(
            text(
                reader
                    .get("slow_log", format!("r{r:02}"), "done")
                    .await
                    .unwrap()
            ),
            "x"
        );
    }
}

/// A transaction that writes a weakly observed column and asks for its notification: the
/// notification goes into that row's prewrite and the observer runs.
pub async fn weak_notify_on_written_column<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let w = client_with(&store, fast_config()).await;
    let mut txn = w.begin().await.unwrap();
    txn.set("storm", "hot", "ping", "x").unwrap();
    txn.notify("storm", "hot", "ping").unwrap();
    txn.commit().await.unwrap();
    assert_eq!(w.pending_notifications("storm").await.unwrap(), 1);
    let mut observers = Observers::new();
    observers.register(Storm).unwrap();
    let runtime = start(&store, observers).await;
    idle(&runtime).await;
    runtime.shutdown().await.unwrap();
    let reader = w.begin().await.unwrap();
    assert_eq!(counter(&reader, "storm_log", b"hot", "runs").await, 1);
}

/// A writer that dies mid-commit leaves locks on a table no observer reads. A running worker's
/// dead-worker sweep resolves them (once the writer's lease lapses, or at once on a store one
/// process owns) without a reader or a garbage collection, and ends the writer's lease.
pub async fn dead_workers_locks_are_swept<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let runtime = Runtime::start(
        test_client(&store),
        counting(),
        test_runtime_config().with_dead_worker_sweep(Some(Duration::from_millis(100))),
    )
    .await
    .unwrap();
    let dead = client_with(
        &store,
        fast_config()
            .with_worker_lease(Duration::from_millis(300))
            .with_lock_ttl(Duration::from_secs(600)),
    )
    .await;
    let mut txn = dead.begin().await.unwrap();
    for row in ["a", "b", "c"] {
        txn.set("swept", row, "v", "x").unwrap();
    }
    txn.set_commit_hook(Some(Arc::new(CrashAt(CommitStep::AfterPrewrites))));
    assert!(txn.commit().await.is_err());
    let checker = runtime.client().clone();
    assert_eq!(checker.locks("swept").await.unwrap().len(), 3);
    drop(dead); // the process dies
    let until = tokio::time::Instant::now() + Duration::from_secs(20);
    while !checker.locks("swept").await.unwrap().is_empty() {
        assert!(
            tokio::time::Instant::now() < until,
            "the dead writer's locks were never swept: {:?}",
            runtime.stats()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let stats = runtime.shutdown().await.unwrap();
    assert_eq!(stats.abandoned_locks_resolved, 3, "{stats:?}");
    assert_eq!(stats.dead_leases_ended, 1, "{stats:?}");
    let reader = client_with(&store, fast_config()).await;
    let txn = reader.begin().await.unwrap();
    assert_eq!(
        txn.get("swept", "a", "v").await.unwrap(),
        None,
        "rolled back"
    );
}

/// A worker collecting garbage in the background (every 30 ms, no grace) while a writer keeps
/// changing one row and the observer keeps up: the observer still sees the latest change once,
/// and the row's history stays short.
pub async fn background_gc_keeps_observers_correct<F: StoreFactory>(factory: &F) {
    const WRITES: u64 = 60;
    let store = factory.open().await;
    // Short leases: every client republishes its oldest snapshot every 100 ms.
    let config = fast_config().with_worker_lease(Duration::from_millis(300));
    let columns = counting::<F::Store>().observed_columns();
    let w = Client::builder(Arc::clone(&store))
        .local_oracle()
        .config(config.clone())
        .observe_all(&columns)
        .build()
        .await
        .unwrap();
    let gc = crate::GcSchedule::new(
        Duration::from_millis(30),
        percolator_core::GcConfig::default().with_grace(Duration::ZERO),
    );
    let runtime = Runtime::start(
        Client::builder(Arc::clone(&store))
            .local_oracle()
            .config(config),
        counting(),
        test_runtime_config().with_gc(Some(gc)),
    )
    .await
    .unwrap();
    for _ in 0..WRITES {
        increment(&w, "hot").await;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    idle(&runtime).await;
    // The collector passes the last changes too: wait for three runs, more cells deleted than
    // there were writes, and the row's history cut short.
    let history = || async {
        store
            .read_row(percolator_core::ReadRow {
                snapshot_ts: None,
                table: Bytes::from_static(OBS.as_bytes()),
                row: Bytes::from_static(b"hot"),
                reads: vec![percolator_core::FamilyRead::all(
                    percolator_core::Family::Write,
                )],
            })
            .await
            .unwrap()[0]
            .len()
    };
    let until = tokio::time::Instant::now() + Duration::from_secs(60);
    while (runtime.stats().gc_runs < 3
        || runtime.stats().gc_cells_deleted <= WRITES
        || history().await >= (WRITES / 2) as usize)
        && tokio::time::Instant::now() < until
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let stats = runtime.shutdown().await.unwrap();
    assert!(stats.gc_runs >= 3, "{stats:?}");
    assert!(stats.gc_cells_deleted > WRITES, "{stats:?}");
    let reader = w.begin().await.unwrap();
    assert_eq!(counter(&reader, OBS, b"hot", "v").await, WRITES);
    assert_eq!(
        counter(&reader, LOG, b"hot", &format!("seen/{WRITES}")).await,
        1,
        "the latest change was observed exactly once"
    );
    let history = history().await;
    assert!(
        history < (WRITES / 2) as usize,
        "{history} write records of {WRITES} changes left"
    );
}
