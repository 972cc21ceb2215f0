//! Garbage collection (`crate::gc`): what it deletes, that no admitted snapshot reads
//! differently while it runs, and that transactions it may have passed are refused.

use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;

use super::faulty::{FaultyStore, is_prewrite};
use super::hooks::{CrashAt, PauseAt};
use super::{StoreFactory, client_with, fast_config, observing_client};
use crate::error::Error;
use crate::fault::CommitStep;
use crate::gc::GcConfig;
use crate::liveness::StoreLiveness;
use crate::records::CellAddr;
use crate::store::{Family, FamilyRead, RowStore, Scan};
use crate::txn::{Client, TxnStatus};
use crate::workload::{self, ACCOUNTS};

const TABLE: &str = "g";

/// Collects below every snapshot at once: no grace.
fn eager() -> GcConfig {
    GcConfig::default()
        .with_grace(Duration::ZERO)
        .with_batch_rows(7)
}

async fn gc<S: RowStore>(c: &Client<S>) -> crate::gc::GcReport {
    c.gc(&eager(), |_| {}).await.expect("gc")
}

/// Versions stored in `family` of `table`.
async fn stored<S: RowStore>(store: &S, table: &str, family: Family) -> usize {
    store
        .scan(Scan {
            snapshot_ts: None,
            table: Bytes::copy_from_slice(table.as_bytes()),
            start: Bound::Unbounded,
            end: Bound::Unbounded,
            read: FamilyRead::all(family),
            row_limit: None,
        })
        .await
        .unwrap()
        .iter()
        .map(|r| r.cells.len())
        .sum()
}

async fn put<S: RowStore>(c: &Client<S>, row: &str, value: Option<&str>) {
    let mut t = c.begin().await.unwrap();
    match value {
        Some(v) => t.set(TABLE, row, "v", v.to_owned()).unwrap(),
        None => t.delete(TABLE, row, "v").unwrap(),
    }
    // Two rows per commit, so that both commit paths leave history (one row may go in one
    // phase with the value inline).
    t.set(
        TABLE,
        format!("{row}-twin"),
        "v",
        value.unwrap_or("gone").to_owned(),
    )
    .unwrap();
    t.commit().await.unwrap();
}

/// The lease of worker `dead` is gone from `store` and that of `live` is still there.
async fn assert_dead_lease_gone<S: RowStore>(store: &Arc<S>, dead: u64, live: u64) {
    let leases = StoreLiveness::new(Arc::clone(store))
        .leases()
        .await
        .unwrap();
    assert!(leases.iter().all(|l| l.worker != dead), "dead lease kept");
    assert!(
        leases.iter().any(|l| l.worker == live),
        "live lease removed"
    );
}

async fn value<S: RowStore>(c: &Client<S>, row: &str) -> Option<Bytes> {
    c.begin().await.unwrap().get(TABLE, row, "v").await.unwrap()
}

/// After many overwrites, a delete and a rolled-back transaction, GC leaves one write record
/// and one data version per live cell, nothing of the deleted one, no rollback record — and
/// every read returns what it did before.
pub async fn collects_history_below_the_safe_point<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let c = client_with(&store, fast_config()).await;
    for i in 0..20 {
        put(&c, "kept", Some(&format!("v{i}"))).await;
        put(&c, "deleted", Some(&format!("v{i}"))).await;
    }
    put(&c, "deleted", None).await;
    // A transaction that dies after its prewrites and is rolled back by a reader.
    let mut t = c.begin().await.unwrap();
    t.set(TABLE, "kept", "v", "never").unwrap();
    t.set(TABLE, "kept-twin", "v", "never").unwrap();
    t.set_commit_hook(Some(Arc::new(CrashAt(CommitStep::AfterPrewrites))));
    assert!(t.commit().await.is_err());
    super::fault_cases::resolve_all(&c, TABLE).await;
    let writes_before = stored(store.as_ref(), TABLE, Family::Write).await;
    assert!(
        writes_before >= 80,
        "{writes_before} write records before GC"
    );

    let reader = c.begin().await.unwrap();
    let report = gc(&c).await;
    assert!(report.safe_point > 0 && report.safe_point <= reader.start_ts());
    // The open reader's snapshot is the oldest in use: GC stopped at it.
    assert_eq!(
        reader.get(TABLE, "kept", "v").await.unwrap().as_deref(),
        Some(&b"v19"[..])
    );
    assert_eq!(reader.get(TABLE, "deleted", "v").await.unwrap(), None);
    drop(reader);
    let total = report.total();
    assert!(total.writes_deleted >= 38, "{total:?}");
    assert!(total.rollbacks_deleted >= 1, "{total:?}");
    // What is left: per live cell one write record (and at most one data version).
    let writes = stored(store.as_ref(), TABLE, Family::Write).await;
    assert_eq!(
        writes, 3,
        "kept, kept-twin, deleted-twin keep one record each; deleted keeps none"
    );
    let data = stored(store.as_ref(), TABLE, Family::Data).await;
    assert!(data <= 3, "{data} data versions left");
    assert_eq!(value(&c, "kept").await.as_deref(), Some(&b"v19"[..]));
    assert_eq!(value(&c, "deleted").await, None);
    assert_eq!(
        value(&c, "deleted-twin").await.as_deref(),
        Some(&b"gone"[..])
    );
    // A second run finds nothing more, and the safe point never goes back.
    let again = gc(&c).await;
    assert_eq!(again.total().cells_deleted(), 0, "{again:?}");
    assert!(again.safe_point >= report.safe_point);
    let dry = c
        .gc(
            &eager()
                .with_dry_run(true)
                .with_grace(Duration::from_secs(3600)),
            |_| {},
        )
        .await
        .unwrap();
    assert_eq!(
        dry.safe_point, again.safe_point,
        "a larger grace never lowers it"
    );
}

/// Bank transfers, snapshot readers that stay open across GC runs, and a collector with no
/// grace, all at once: every snapshot sees the same total, before and after GC.
pub async fn readers_and_writers_interleaved_with_gc<F: StoreFactory>(factory: &F) {
    const ACCOUNTS_N: usize = 20;
    const INITIAL: i64 = 100;
    // Each writer's transfers: every GC pass reads the whole store (the history rows stay), so
    // an unbounded writer on a fast store makes each pass longer than the last.
    const TRANSFERS_PER_WRITER: u64 = 600;
    let store = factory.open().await;
    // Short leases: every client republishes its oldest snapshot every 100 ms.
    let config = fast_config().with_worker_lease(Duration::from_millis(300));
    let setup = client_with(&store, config.clone()).await;
    workload::create_accounts(&setup, ACCOUNTS_N, INITIAL)
        .await
        .unwrap();
    let expected = ACCOUNTS_N as i64 * INITIAL;
    let stop = Arc::new(AtomicBool::new(false));
    let transfers = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for w in 0..3u64 {
        let c = client_with(&store, config.clone()).await;
        let (stop, transfers) = (Arc::clone(&stop), Arc::clone(&transfers));
        tasks.push(tokio::spawn(async move {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                if i >= TRANSFERS_PER_WRITER {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                }
                let from = ((w * 7 + i) % ACCOUNTS_N as u64) as usize;
                let to = (from + 1 + (i % 5) as usize) % ACCOUNTS_N;
                let id = format!("w{w}-{i}");
                workload::transfer(&c, from, to, 1 + (i % 9) as i64, &id)
                    .await
                    .unwrap();
                transfers.fetch_add(1, Ordering::Relaxed);
                i += 1;
                // Paced, so that GC interleaves with the writes instead of chasing a store
                // that grows as fast as the fastest backend can write.
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }));
    }
    // Snapshots the readers checked whole (one whose read was refused proves nothing).
    let checked = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let readers = {
        let c = client_with(&store, config.clone()).await;
        let stop = Arc::clone(&stop);
        let checked = Arc::clone(&checked);
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                // Read half the accounts, let GC run, read the other half: one snapshot.
                let t = c.begin().await.unwrap();
                let mut sum = Some(0i64);
                for i in 0..ACCOUNTS_N {
                    if i == ACCOUNTS_N / 2 {
                        tokio::time::sleep(Duration::from_millis(15)).await;
                    }
                    match t
                        .get(ACCOUNTS, workload::account_key(i), workload::BALANCE)
                        .await
                    {
                        Ok(v) => {
                            let v = v.expect("account");
                            *sum.as_mut().expect("summing") +=
                                i64::from_be_bytes(v.as_ref().try_into().unwrap());
                        }
                        // A lock wait timed out, or the lease renewal ran late on a loaded
                        // machine (SnapshotTooOld): this snapshot proves nothing either way.
                        Err(e) if e.is_retryable() => {
                            sum = None;
                            break;
                        }
                        Err(e) => panic!("reader: {e}"),
                    }
                }
                if let Some(sum) = sum {
                    assert_eq!(sum, expected, "a snapshot saw money appear or vanish");
                    checked.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
    };
    let collector = client_with(&store, config.clone()).await;
    let mut runs = 0;
    let mut deleted = 0;
    // GC runs for 4 s and, on a loaded machine where many snapshots are refused, until 5 were
    // checked (at most a minute).
    let started = tokio::time::Instant::now();
    while started.elapsed() < Duration::from_secs(4)
        || (checked.load(Ordering::Relaxed) < 5 && started.elapsed() < Duration::from_secs(60))
    {
        deleted += gc(&collector).await.total().cells_deleted();
        runs += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    readers.await.unwrap();
    let checked = checked.load(Ordering::Relaxed);
    assert!(checked >= 5, "only {checked} snapshots were checked");
    assert!(transfers.load(Ordering::Relaxed) >= 20);
    assert!(deleted > 0, "{runs} GC runs deleted nothing");
    let (total, n) = workload::total(&setup).await.unwrap();
    assert_eq!((total, n), (expected, ACCOUNTS_N));
}

/// A client whose lease is gone (here: released) may have been passed by GC unseen: its old
/// transaction is refused on read and on prewrite, writes nothing, and the error is retryable.
pub async fn lapsed_client_gets_snapshot_too_old<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let a = client_with(&store, fast_config()).await;
    let b = client_with(&store, fast_config()).await;
    put(&b, "x", Some("1")).await;
    let mut t = a.begin().await.unwrap();
    assert_eq!(
        t.get(TABLE, "x", "v").await.unwrap().as_deref(),
        Some(&b"1"[..])
    );
    a.shutdown().await.unwrap();
    put(&b, "x", Some("2")).await;
    let report = gc(&b).await;
    assert!(
        report.safe_point > t.start_ts(),
        "GC passed the lapsed client"
    );
    let read = t.get(TABLE, "x", "v").await.unwrap_err();
    assert!(
        matches!(read, Error::SnapshotTooOld { start_ts, .. } if start_ts == t.start_ts()),
        "{read}"
    );
    assert!(read.is_retryable());
    t.set(TABLE, "y", "v", "zombie").unwrap();
    t.set(TABLE, "z", "v", "zombie").unwrap();
    let commit = t.commit().await.unwrap_err();
    assert!(matches!(commit, Error::SnapshotTooOld { .. }), "{commit}");
    assert!(b.locks(TABLE).await.unwrap().is_empty());
    assert_eq!(value(&b, "y").await, None);
    // A client that still holds its lease reads at once.
    assert_eq!(value(&b, "x").await.as_deref(), Some(&b"2"[..]));
}

/// A lease that lapsed while its store could not be reached is renewed by the next `begin`,
/// not left for the background renewal: the lease's registrations are dropped until the
/// lease has run out (four renewals, two leases), then the very next transaction reads
/// without `SnapshotTooOld`, and the renewal counts as late.
pub async fn lapsed_lease_is_renewed_by_the_next_begin<F: StoreFactory>(factory: &F) {
    let store = Arc::new(FaultyStore::new(factory.open().await));
    let a = client_with(
        &store,
        fast_config().with_worker_lease(Duration::from_secs(2)),
    )
    .await;
    let b = client_with(&store, fast_config()).await;
    put(&b, "x", Some("1")).await;
    let late_before = a.metrics().late_lease_renewals;
    let registrations = |batch: &[crate::store::RowMutation]| {
        batch
            .iter()
            .any(|m| m.table.as_ref() == crate::internal::tables::WORKERS_TABLE)
    };
    // The next four registrations fail: `a`'s, every half second (`b` renews its 30-s lease
    // far less often).
    store.drop_batches(4, Box::new(registrations));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while store.injected().batches_dropped < 4 {
        assert!(tokio::time::Instant::now() < deadline, "renewals stopped");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Two seconds of dropped renewals (every half second): the lease has run out, and the
    // background renewal's next try is up to half a second away.
    let t = a.begin().await.unwrap();
    let read = t.get(TABLE, "x", "v").await;
    assert_eq!(read.unwrap().as_deref(), Some(&b"1"[..]));
    assert!(
        a.metrics().late_lease_renewals > late_before,
        "the renewal found the lease lapsed"
    );
}

/// Transactions rolled back long ago stay rolled back once GC has deleted their rollback
/// records: a paused commit whose client lapsed meanwhile fails at its next prewrite, and old
/// prewrite batches the network delivers again cannot make the transaction visible.
pub async fn late_prewrites_after_gc_still_fail<F: StoreFactory>(factory: &F) {
    let store = Arc::new(FaultyStore::new(factory.open().await));
    let b = client_with(&store, fast_config()).await;
    put(&b, "p", Some("old")).await;
    put(&b, "s", Some("old")).await;

    // 1. A commit paused after its primary prewrite (the paper's order); its client shuts down
    // meanwhile.
    let a = client_with(&store, fast_config().with_parallel_prewrite(false)).await;
    let (hook, mut reached, release) = PauseAt::new(vec![CommitStep::AfterPrimaryPrewrite], None);
    let mut t = a.begin().await.unwrap();
    let zombie_ts = t.start_ts();
    t.set(TABLE, "p", "v", "zombie").unwrap();
    t.set(TABLE, "s", "v", "zombie").unwrap();
    t.set_commit_hook(Some(hook));
    let before = store.sent();
    let commit = tokio::spawn(t.commit());
    assert_eq!(reached.recv().await, Some(CommitStep::AfterPrimaryPrewrite));
    a.shutdown().await.unwrap();
    // A reader rolls it back (its owner is gone), writers move on, GC deletes the rollback.
    assert_eq!(value(&b, "p").await.as_deref(), Some(&b"old"[..]));
    put(&b, "p", Some("new")).await;
    put(&b, "s", Some("new")).await;
    let report = gc(&b).await;
    assert!(report.safe_point > zombie_ts);
    assert!(report.total().rollbacks_deleted >= 1, "{report:?}");
    release.notify_one();
    let err = commit.await.unwrap().unwrap_err();
    assert!(
        matches!(err, Error::SnapshotTooOld { .. } | Error::Aborted { .. }),
        "{err}"
    );

    // 2. The network delivers the old prewrites again.
    let prewrites: Vec<_> = store
        .recorded_since(before)
        .into_iter()
        .filter(|batch| is_prewrite(batch))
        .collect();
    assert!(!prewrites.is_empty());
    for batch in prewrites {
        let _ = store.redeliver(batch).await;
    }
    // Whatever landed belongs to a transaction that can no longer commit: readers roll it
    // back through its primary, and nothing of it is ever visible.
    super::fault_cases::resolve_all(&b, TABLE).await;
    let primary = CellAddr::new(TABLE, "p", "v");
    let status = b.transaction_status(&primary, zombie_ts).await.unwrap();
    assert!(
        matches!(status, TxnStatus::RolledBack | TxnStatus::NotFound),
        "{status:?}"
    );
    assert_eq!(value(&b, "p").await.as_deref(), Some(&b"new"[..]));
    assert_eq!(value(&b, "s").await.as_deref(), Some(&b"new"[..]));
    assert!(
        b.locks(TABLE).await.unwrap().is_empty(),
        "a revived lock was left behind"
    );
}

/// GC resolves locks below the safe point (a crashed commit of a dead worker) and deletes the
/// lease rows of dead workers, but not of live ones.
pub async fn resolves_old_locks_and_dead_leases<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let short = fast_config()
        .with_worker_lease(Duration::from_millis(300))
        .with_lock_ttl(Duration::from_secs(600));
    let dead = client_with(&store, short).await;
    let mut t = dead.begin().await.unwrap();
    t.set(TABLE, "a", "v", "x").unwrap();
    t.set(TABLE, "b", "v", "x").unwrap();
    t.set_commit_hook(Some(Arc::new(CrashAt(CommitStep::AfterPrewrites))));
    assert!(t.commit().await.is_err());
    let dead_id = dead.worker_id();
    drop(dead); // the process dies: its lease runs out
    tokio::time::sleep(Duration::from_millis(700)).await;
    let live = client_with(&store, fast_config()).await;
    assert_eq!(live.locks(TABLE).await.unwrap().len(), 2);
    let report = gc(&live).await;
    assert_eq!(report.total().locks_resolved, 2, "{report:?}");
    assert!(live.locks(TABLE).await.unwrap().is_empty());
    assert!(report.leases_deleted >= 1);
    assert_dead_lease_gone(&store, dead_id, live.worker_id()).await;
    assert_eq!(value(&live, "a").await, None);
}

/// The dead-worker sweep ends a dead worker's lease and resolves the locks it left in every
/// table, and leaves a live worker's lease and locks alone. On a store one process owns, a
/// client that is gone is dead at once; elsewhere its lease must lapse first.
pub async fn sweeps_dead_workers<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let long_locks = Duration::from_secs(600);
    let live = client_with(&store, fast_config().with_lock_ttl(long_locks)).await;
    let mut t = live.begin().await.unwrap();
    t.set(TABLE, "kept", "v", "x").unwrap();
    t.set_commit_hook(Some(Arc::new(CrashAt(CommitStep::AfterPrewrites))));
    assert!(t.commit().await.is_err());
    let dead = client_with(
        &store,
        fast_config()
            .with_worker_lease(Duration::from_millis(300))
            .with_lock_ttl(long_locks),
    )
    .await;
    let mut t = dead.begin().await.unwrap();
    t.set(TABLE, "a", "v", "x").unwrap();
    t.set("g-other", "b", "v", "x").unwrap();
    t.set_commit_hook(Some(Arc::new(CrashAt(CommitStep::AfterPrewrites))));
    assert!(t.commit().await.is_err());
    let dead_id = dead.worker_id();
    let nothing = live.sweep_dead_workers().await.unwrap();
    assert_eq!(
        nothing,
        crate::gc::DeadWorkerSweep::default(),
        "both workers live"
    );
    assert_eq!(live.locks(TABLE).await.unwrap().len(), 2);
    drop(dead); // the process dies
    if store.limits().distributed {
        tokio::time::sleep(Duration::from_millis(700)).await; // its lease lapses
    }
    let sweep = live.sweep_dead_workers().await.unwrap();
    assert_eq!(sweep.leases_ended, 1, "{sweep:?}");
    assert_eq!(sweep.locks_resolved, 2, "{sweep:?}");
    assert_eq!(sweep.locks_left, 1, "the live worker's lock: {sweep:?}");
    let locks = live.locks(TABLE).await.unwrap();
    assert_eq!(locks.len(), 1);
    assert_eq!(locks[0].2.owner, live.worker_id());
    assert!(live.locks("g-other").await.unwrap().is_empty());
    assert_dead_lease_gone(&store, dead_id, live.worker_id()).await;
    assert_eq!(value(&live, "a").await, None);
    let again = live.sweep_dead_workers().await.unwrap();
    assert_eq!(again, crate::gc::DeadWorkerSweep::default());
}

/// Notify versions below the safe point of columns nobody registered are deleted; those of
/// registered columns (an observer's, or a writer's declaration) stay for their observers.
pub async fn collects_notifications_nobody_observes<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let declared = crate::txn::ObservedColumn::strong(TABLE, "watched");
    let writer = observing_client(&store, std::slice::from_ref(&declared)).await;
    assert!(writer.is_registered(TABLE, "watched"));
    assert!(!writer.is_registered(TABLE, "orphan"));
    for row in ["a", "b", "c"] {
        let mut t = writer.begin().await.unwrap();
        t.set(TABLE, row, "watched", "x").unwrap();
        t.commit().await.unwrap();
        writer.notify_weak(TABLE, row, "orphan").await.unwrap();
    }
    assert_eq!(stored(store.as_ref(), TABLE, Family::Notify).await, 6);
    let dry = writer
        .gc(&eager().with_dry_run(true), |_| {})
        .await
        .unwrap();
    assert_eq!(dry.total().notifications_deleted, 3, "{dry:?}");
    assert_eq!(stored(store.as_ref(), TABLE, Family::Notify).await, 6);
    let report = gc(&writer).await;
    assert_eq!(report.total().notifications_deleted, 3, "{report:?}");
    let left = writer
        .scan_notifications(TABLE, Bound::Unbounded, Bound::Unbounded, None)
        .await
        .unwrap();
    assert_eq!(left.len(), 3);
    for row in &left {
        let columns: Vec<&[u8]> = row.columns.iter().map(|(c, _)| c.as_ref()).collect();
        assert_eq!(columns, vec![b"watched".as_ref()], "row {:?}", row.row);
    }
    // A column registered later keeps what is pending from then on.
    writer.notify_weak(TABLE, "d", "orphan").await.unwrap();
    writer
        .register_observers(&[crate::observer_registry::Registration::observer(
            "late",
            crate::txn::ObservedColumn::weak(TABLE, "orphan"),
        )])
        .await
        .unwrap();
    gc(&writer).await;
    assert_eq!(stored(store.as_ref(), TABLE, Family::Notify).await, 4);
}

/// An observer's ack of a column that has no value at the safe point and no notification at or
/// below it goes with the column's history; an ack of a live column, or of one with a pending
/// notification, stays, and so does the delete record that notification is about.
pub async fn collects_orphaned_acks<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let watched = crate::txn::ObservedColumn::strong(TABLE, "watched");
    let c = observing_client(&store, std::slice::from_ref(&watched)).await;
    // Each row: a value, then an observer run's ack; "dead" and "pending" then lose the value.
    for row in ["live", "dead", "pending"] {
        let mut t = c.begin().await.unwrap();
        t.set(TABLE, row, "watched", "x").unwrap();
        t.commit().await.unwrap();
        let mut t = c.begin().await.unwrap();
        t.set_ack(TABLE, row, "o", "watched").unwrap();
        t.commit().await.unwrap();
    }
    for row in ["dead", "pending"] {
        let mut t = c.begin().await.unwrap();
        t.delete(TABLE, row, "watched").unwrap();
        t.commit().await.unwrap();
    }
    // Every notification is consumed, except those of "pending".
    let snapshot = c.begin().await.unwrap().start_ts();
    for pending in c
        .scan_notifications(TABLE, Bound::Unbounded, Bound::Unbounded, None)
        .await
        .unwrap()
    {
        if pending.row.as_ref() == b"pending" {
            continue;
        }
        for (column, versions) in &pending.columns {
            let addr = CellAddr::new(TABLE, pending.row.clone(), column.clone());
            c.clear_notifications(&addr, versions, snapshot)
                .await
                .unwrap();
        }
    }
    let report = gc(&c).await;
    assert_eq!(report.total().acks_deleted, 1, "{report:?}");
    let t = c.begin().await.unwrap();
    assert_eq!(t.ack(TABLE, "dead", "o", "watched").await.unwrap(), None);
    assert!(
        t.ack(TABLE, "live", "o", "watched")
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        t.ack(TABLE, "pending", "o", "watched")
            .await
            .unwrap()
            .is_some(),
        "a pending notification may still need the ack"
    );
    // The delete that notification is about stays visible as a delete, with its commit: a
    // strong observer yet to run must see that something changed.
    let pending = t.get_versioned(TABLE, "pending", "watched").await.unwrap();
    assert_eq!(pending.value, None);
    assert!(
        pending.commit_ts.is_some(),
        "GC erased the delete a pending notification is about"
    );
    assert_eq!(
        t.get(TABLE, "live", "watched").await.unwrap(),
        Some(Bytes::from("x"))
    );
    // Nothing of "dead" is left in any family: the row is gone.
    for family in [Family::Data, Family::Write, Family::Lock, Family::Notify] {
        let rows = store
            .scan(Scan {
                snapshot_ts: None,
                table: Bytes::from(TABLE),
                start: Bound::Included(Bytes::from("dead")),
                end: Bound::Included(Bytes::from("dead")),
                read: FamilyRead::all(family),
                row_limit: None,
            })
            .await
            .unwrap();
        assert!(
            rows.iter().all(|r| r.cells.is_empty()),
            "{family:?}: {rows:?}"
        );
    }
}
