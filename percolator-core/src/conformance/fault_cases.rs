//! A fault at every step of the commit protocol, then lazy resolution: the right outcome, and no
//! locks left. Also: a failed `sync` after the commit point, reads that fail and batches that
//! are dropped before they apply, and clearing notifications while status reads fail.

use std::ops::Bound;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use futures::future::BoxFuture;

use super::faulty::{FaultRates, FaultyStore, is_commit, is_prewrite};
use super::hooks::{CrashAt, PauseAt};
use super::{
    StoreFactory, client, client_with, fast_config, fault_seed, observing_client, patient_client,
};
use crate::error::{Error, StoreError};
use crate::fault::CommitStep;
use crate::records::{CellAddr, SHORT_VALUE_MAX};
use crate::store::{Condition, Family, Mutation, MutationOutcome, RowMutation, RowStore};
use crate::txn::{Client, Settled, TxnStatus};

const ROWS: [&str; 4] = ["a", "b", "c", "d"];
const TABLE: &str = "f";

/// Column `w` of every row holds `value` padded past [`SHORT_VALUE_MAX`]: each transaction here
/// writes both layouts, a short value in `v` (carried by its lock, inline in its write record)
/// and a long one in `w` (a data version), so every fault hits both.
fn long(value: &str) -> Bytes {
    Bytes::from(format!("{value:<width$}", width = SHORT_VALUE_MAX + 1))
}

async fn seed<S: RowStore>(c: &Client<S>) {
    let mut t = c.begin().await.unwrap();
    for r in ROWS {
        t.set(TABLE, r, "v", "old").unwrap();
        t.set(TABLE, r, "w", long("old")).unwrap();
    }
    t.commit().await.unwrap();
    // The seed's secondaries are committed before a test counts locks or batches.
    c.finish_background_commits().await;
}

/// Begins a transaction writing "new" to every row (primary = row "a", column "v").
async fn writer<S: RowStore>(c: &Client<S>) -> crate::txn::Transaction<S> {
    let mut t = c.begin().await.unwrap();
    for r in ROWS {
        t.set(TABLE, r, "v", "new").unwrap();
        t.set(TABLE, r, "w", long("new")).unwrap();
    }
    t
}

/// Reads every row (resolving locks) and checks all show `expected`.
async fn assert_all<S: RowStore>(c: &Client<S>, expected: &str) {
    let r = c.begin().await.unwrap();
    for row in ROWS {
        assert_eq!(
            r.get(TABLE, row, "v").await.unwrap(),
            Some(Bytes::copy_from_slice(expected.as_bytes())),
            "row {row}"
        );
        assert_eq!(
            r.get(TABLE, row, "w").await.unwrap(),
            Some(long(expected)),
            "row {row}, long value"
        );
    }
}

/// Resolves locks until none are left (crashed locks become cleanable once their TTL passes).
pub async fn resolve_all<S: RowStore>(c: &Client<S>, table: &str) {
    for _ in 0..200 {
        let (_, live) = c.resolve_locks(table).await.unwrap();
        if live == 0 && c.locks(table).await.unwrap().is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!(
        "locks in {table} never became resolvable: {:?}",
        c.locks(table).await.unwrap()
    );
}

fn primary() -> CellAddr {
    CellAddr::new("f", "a", "v")
}

async fn crash_then_resolve<F: StoreFactory>(factory: &F, step: CommitStep, committed: bool) {
    crash_then_resolve_with(factory, fast_config(), step, committed).await;
}

/// A crash at `step` under `config`. A crash past the return (`AfterReturn`, or
/// `AfterHalfSecondaries` with background secondaries) stops the background task: `commit` has
/// already answered success, and the locks it leaves are rolled forward by readers.
async fn crash_then_resolve_with<F: StoreFactory>(
    factory: &F,
    config: crate::TxnConfig,
    step: CommitStep,
    committed: bool,
) {
    let background = config.background_secondaries;
    let store = factory.open().await;
    let c = client_with(&store, config).await;
    seed(&c).await;
    let mut t = writer(&c).await;
    let start_ts = t.start_ts();
    t.set_commit_hook(Some(Arc::new(CrashAt(step))));
    let after_return =
        step == CommitStep::AfterReturn || (background && step == CommitStep::AfterHalfSecondaries);
    if after_return {
        let info = t.commit().await.expect("the crash comes after the return");
        assert!(info.commit_ts.is_some());
        c.finish_background_commits().await;
    } else {
        let err = t.commit().await.expect_err("crash injected");
        assert!(
            matches!(err, Error::InjectedCrash(s) if s == step),
            "{err:?}"
        );
    }
    assert!(
        !c.locks(TABLE).await.unwrap().is_empty(),
        "a crash at {step:?} leaves locks"
    );

    // A reader resolves through the primary (waiting out the TTL if the outcome is still open).
    assert_all(&c, if committed { "new" } else { "old" }).await;
    resolve_all(&c, TABLE).await;
    let status = c.transaction_status(&primary(), start_ts).await.unwrap();
    if committed {
        assert!(matches!(status, TxnStatus::Committed { .. }), "{status:?}");
    } else {
        assert_eq!(status, TxnStatus::RolledBack);
    }
    assert_all(&c, if committed { "new" } else { "old" }).await;
}

/// Only the paper's order stops with the primary alone locked.
pub async fn crash_after_primary_prewrite<F: StoreFactory>(factory: &F) {
    let sequential = fast_config().with_parallel_prewrite(false);
    crash_then_resolve_with(factory, sequential, CommitStep::AfterPrimaryPrewrite, false).await;
}

pub async fn crash_after_all_prewrites<F: StoreFactory>(factory: &F) {
    crash_then_resolve(factory, CommitStep::AfterPrewrites, false).await;
}

pub async fn crash_before_commit_point<F: StoreFactory>(factory: &F) {
    crash_then_resolve(factory, CommitStep::BeforeCommitPoint, false).await;
}

pub async fn crash_after_commit_point<F: StoreFactory>(factory: &F) {
    crash_then_resolve(factory, CommitStep::AfterCommitPoint, true).await;
}

pub async fn crash_after_half_secondaries<F: StoreFactory>(factory: &F) {
    crash_then_resolve(factory, CommitStep::AfterHalfSecondaries, true).await;
}

/// The background task dies before it commits any secondary.
pub async fn crash_after_return<F: StoreFactory>(factory: &F) {
    crash_then_resolve(factory, CommitStep::AfterReturn, true).await;
}

/// Secondaries committed before `commit` returns: a crash half way through them is an error of
/// the commit itself.
pub async fn crash_after_half_secondaries_inline<F: StoreFactory>(factory: &F) {
    let inline = fast_config().with_background_secondaries(false);
    crash_then_resolve_with(factory, inline, CommitStep::AfterHalfSecondaries, true).await;
}

/// A seeded store whose writer committed "new" to every row and returned, its background task
/// held before the secondaries: the store, the writer's (patient) client and the release.
async fn committed_and_held<F: StoreFactory>(
    factory: &F,
) -> (Arc<F::Store>, Client<F::Store>, Arc<tokio::sync::Notify>) {
    let store = factory.open().await;
    let c = patient_client(&store).await;
    seed(&c).await;
    let (hook, mut reached, release) = PauseAt::new(vec![CommitStep::AfterReturn], None);
    let mut t = writer(&c).await;
    t.set_commit_hook(Some(hook));
    let info = t.commit().await.expect("returns at the commit point");
    assert_eq!(info.rows, ROWS.len());
    assert_eq!(reached.recv().await, Some(CommitStep::AfterReturn));
    (store, c, release)
}

/// Every row in `rows` shows `v` and, in its long column, `w`.
async fn assert_rows<S: RowStore>(c: &Client<S>, rows: &[&str], v: &str, w: &str) {
    let r = c.begin().await.unwrap();
    for row in rows {
        assert_eq!(
            r.get(TABLE, row, "v").await.unwrap(),
            Some(Bytes::copy_from_slice(v.as_bytes())),
            "row {row}"
        );
        assert_eq!(
            r.get(TABLE, row, "w").await.unwrap(),
            Some(long(w)),
            "row {row}"
        );
    }
}

/// Right after `commit` returns, with its secondaries held back: the same client reads every
/// new value (rolling the secondaries forward without a status read), another client does too,
/// and a transaction over the same rows commits; the held task then finds its work done.
pub async fn read_your_writes_before_secondaries<F: StoreFactory>(factory: &F) {
    let (store, c, release) = committed_and_held(factory).await;
    assert_eq!(c.background_commits_in_flight(), 1);
    let locked = c.locks(TABLE).await.unwrap().len();
    assert_eq!(
        locked,
        2 * (ROWS.len() - 1),
        "every secondary cell is still locked"
    );

    let status_reads = c.metrics().status_reads;
    assert_all(&c, "new").await;
    assert_eq!(
        c.metrics().status_reads,
        status_reads,
        "the client knows its own commit: no status read"
    );
    assert!(c.locks(TABLE).await.unwrap().is_empty(), "rolled forward");
    let other = client(&store).await;
    assert_all(&other, "new").await;

    let mut next = c.begin().await.unwrap();
    for r in ROWS {
        next.set(TABLE, r, "v", "newer").unwrap();
    }
    next.commit().await.expect("no lock in the way");
    release.notify_one();
    c.finish_background_commits().await;
    assert_eq!(c.background_commits_in_flight(), 0);
    assert!(c.locks(TABLE).await.unwrap().is_empty());
    assert_rows(&c, &ROWS, "newer", "new").await;
}

/// A write over rows whose secondaries another client is still committing rolls them forward
/// and commits, whatever the other client's liveness: a committed lock is never a conflict.
pub async fn write_over_pending_secondaries<F: StoreFactory>(factory: &F) {
    let (store, owner, release) = committed_and_held(factory).await;
    let other = client(&store).await;
    let mut w = other.begin().await.unwrap();
    for r in &ROWS[1..] {
        w.set(TABLE, r, "w", long("other")).unwrap();
    }
    w.commit().await.expect("committed locks roll forward");
    assert!(other.metrics().locks_rolled_forward >= 1);
    release.notify_one();
    owner.finish_background_commits().await;
    other.finish_background_commits().await;
    assert!(owner.locks(TABLE).await.unwrap().is_empty());
    assert_rows(&other, &ROWS[1..], "new", "other").await;
}

/// `shutdown` waits for the secondaries still being committed: none is left locked.
pub async fn shutdown_waits_for_secondaries<F: StoreFactory>(factory: &F) {
    let (store, c, release) = committed_and_held(factory).await;
    let shutdown = tokio::spawn({
        let c = c.clone();
        async move { c.shutdown().await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!shutdown.is_finished(), "shutdown waits for the held task");
    release.notify_one();
    shutdown.await.unwrap().unwrap();
    let checker = client(&store).await;
    assert!(checker.locks(TABLE).await.unwrap().is_empty());
    assert_all(&checker, "new").await;
}

/// Prewrites go out in one batch: when the primary row is locked by a live transaction, the
/// secondaries locked in the same batch are rolled back with the commit's conflict.
pub async fn parallel_prewrite_conflict_unlocks_secondaries<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let c = patient_client(&store).await;
    seed(&c).await;
    let holder_client = patient_client(&store).await;
    let (hook, mut reached, release) = PauseAt::new(vec![CommitStep::AfterPrewrites], None);
    let mut holder = holder_client.begin().await.unwrap();
    let holder_ts = holder.start_ts();
    holder.set(TABLE, "a", "v", "held").unwrap();
    holder.set_commit_hook(Some(hook));
    let held = tokio::spawn(holder.commit());
    assert_eq!(reached.recv().await, Some(CommitStep::AfterPrewrites));

    let err = writer(&c)
        .await
        .commit()
        .await
        .expect_err("the primary row is locked");
    assert!(matches!(err, Error::Conflict { .. }), "{err:?}");
    let locks = c.locks(TABLE).await.unwrap();
    assert!(
        locks.iter().all(|(_, ts, _)| *ts == holder_ts),
        "only the holder's lock is left: {locks:?}"
    );
    assert_eq!(locks.len(), 1);
    release.notify_one();
    held.await.unwrap().expect("the holder commits");
    let r = c.begin().await.unwrap();
    assert_eq!(
        r.get(TABLE, "a", "v").await.unwrap(),
        Some(Bytes::from("held"))
    );
    assert_rows(&c, &ROWS[1..], "old", "old").await;
}

/// A secondary whose primary is not locked (its prewrite still in flight, as it may be when
/// prewrites go out together) is waited for while its owner lives, not fenced; once the owner
/// is gone the primary is fenced, the secondary rolled back, and the late primary prewrite
/// fails.
pub async fn reader_waits_for_a_primary_in_flight<F: StoreFactory>(factory: &F) {
    let store = Arc::new(FaultyStore::new(factory.open().await));
    let owner = patient_client(&store).await;
    seed(&owner).await;
    let before = store.sent();
    let mut t = writer(&owner).await;
    let start_ts = t.start_ts();
    t.set_commit_hook(Some(Arc::new(CrashAt(CommitStep::AfterPrewrites))));
    assert!(t.commit().await.is_err());
    let prewrite: Vec<RowMutation> = store
        .recorded_since(before)
        .into_iter()
        .filter(|b| is_prewrite(b))
        .flatten()
        .collect();
    let primary_prewrite: Vec<RowMutation> = prewrite
        .iter()
        .filter(|m| &m.row[..] == b"a")
        .cloned()
        .collect();
    assert_eq!(
        primary_prewrite.len(),
        1,
        "one batch held every row: {prewrite:?}"
    );
    // Take the primary row's prewrite back, as if it had not landed yet.
    let undo = RowMutation {
        table: Bytes::from(TABLE),
        row: Bytes::from("a"),
        conditions: Vec::new(),
        mutations: ["v", "w"]
            .into_iter()
            .flat_map(|column| {
                [Family::Lock, Family::Data].map(|family| Mutation::Delete {
                    family,
                    column: Bytes::from(column),
                    ts: start_ts,
                })
            })
            .collect(),
    };
    store.inner().mutate_rows(vec![undo]).await.unwrap();

    let impatient = fast_config().with_lock_wait_timeout(Duration::from_millis(300));
    let reader = client_with(&store, impatient).await;
    let err = reader
        .begin()
        .await
        .unwrap()
        .get(TABLE, "b", "v")
        .await
        .expect_err("a live owner's secondary is waited for");
    assert!(matches!(err, Error::LockWaitTimeout { .. }), "{err:?}");
    assert_eq!(
        reader
            .transaction_status(&primary(), start_ts)
            .await
            .unwrap(),
        TxnStatus::NotFound,
        "the primary is not fenced while its owner lives"
    );

    owner.shutdown().await.unwrap(); // the owner is gone: its locks may be cleaned
    assert_all(&reader, "old").await;
    assert_eq!(
        reader
            .transaction_status(&primary(), start_ts)
            .await
            .unwrap(),
        TxnStatus::RolledBack
    );
    let outcomes = store.redeliver(primary_prewrite).await.unwrap();
    assert!(
        !outcomes[0].applied(),
        "the late primary prewrite is refused: {outcomes:?}"
    );
    resolve_all(&reader, TABLE).await;
    assert_all(&reader, "old").await;
}

pub async fn lost_response_to_primary_commit<F: StoreFactory>(factory: &F) {
    let store = Arc::new(FaultyStore::new(factory.open().await));
    let c = client(&store).await;
    seed(&c).await;
    store.lose_answers(1, Box::new(is_commit));
    let info = writer(&c)
        .await
        .commit()
        .await
        .expect("commit survives a lost answer");
    assert!(info.commit_ts.is_some());
    c.finish_background_commits().await;
    assert!(c.locks(TABLE).await.unwrap().is_empty());
    assert_all(&c, "new").await;

    // The same, when the answer is lost twice in a row.
    store.lose_answers(2, Box::new(is_commit));
    let mut t = c.begin().await.unwrap();
    t.set(TABLE, "a", "v", "newer").unwrap();
    t.commit().await.expect("commit survives two lost answers");
    assert_eq!(
        c.begin().await.unwrap().get(TABLE, "a", "v").await.unwrap(),
        Some(Bytes::from("newer"))
    );
}

pub async fn lost_response_to_prewrite<F: StoreFactory>(factory: &F) {
    let store = Arc::new(FaultyStore::new(factory.open().await));
    let c = client(&store).await;
    seed(&c).await;
    // Lose the primary's prewrite answer, then the secondaries'.
    store.lose_answers(2, Box::new(is_prewrite));
    writer(&c)
        .await
        .commit()
        .await
        .expect("commit survives lost prewrite answers");
    c.finish_background_commits().await;
    assert!(c.locks(TABLE).await.unwrap().is_empty());
    assert_all(&c, "new").await;
}

pub async fn two_cleaners_racing<F: StoreFactory>(factory: &F) {
    for (step, expected) in [
        (CommitStep::AfterPrewrites, "old"),
        (CommitStep::AfterCommitPoint, "new"),
    ] {
        let store = factory.open().await;
        let owner = client(&store).await;
        seed(&owner).await;
        let mut t = writer(&owner).await;
        t.set_commit_hook(Some(Arc::new(CrashAt(step))));
        assert!(t.commit().await.is_err());
        tokio::time::sleep(fast_config().lock_ttl + Duration::from_millis(50)).await;
        let (c1, c2) = (client(&store).await, client(&store).await);
        let (r1, r2) = tokio::join!(c1.resolve_locks(TABLE), c2.resolve_locks(TABLE));
        let (r1, r2) = (r1.unwrap(), r2.unwrap());
        assert_eq!(r1.1 + r2.1, 0, "both cleaners could act");
        assert!(
            c1.locks(TABLE).await.unwrap().is_empty(),
            "locks left after racing cleaners ({step:?})"
        );
        assert_all(&c1, expected).await;
    }
}

pub async fn cleanup_racing_owner_commit<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let cleaner = client(&store).await;
    seed(&cleaner).await;
    let mut outcomes = (0, 0);
    for round in 0..12 {
        let owner = patient_client(&store).await;
        let mut t = owner.begin().await.unwrap();
        let value = format!("round{round}");
        for r in ROWS {
            t.set(TABLE, r, "v", value.clone()).unwrap();
        }
        let (hook, mut reached, release) = PauseAt::new(vec![CommitStep::BeforeCommitPoint], None);
        t.set_commit_hook(Some(hook));
        let before = cleaner.begin().await.unwrap();
        let old: Vec<_> =
            futures::future::join_all(ROWS.iter().map(|r| before.get(TABLE, r, "v"))).await;
        let pending = tokio::spawn(t.commit());
        reached.recv().await.unwrap();
        // The owner "looks dead" (lease gone) while it is about to commit.
        owner.shutdown().await.unwrap();
        if round == 0 {
            // Deterministic order: the cleaner wins, so the owner must learn it was aborted.
            cleaner.resolve_locks(TABLE).await.unwrap();
            release.notify_one();
        } else {
            let resolve = cleaner.resolve_locks(TABLE);
            let go = async {
                if round % 2 == 0 {
                    tokio::task::yield_now().await;
                }
                release.notify_one();
            };
            let (r, ()) = tokio::join!(resolve, go);
            r.unwrap();
        }
        let result = pending.await.unwrap();
        resolve_all(&cleaner, TABLE).await;
        let now = cleaner.begin().await.unwrap();
        for (r, old) in ROWS.iter().zip(old) {
            let got = now.get(TABLE, r, "v").await.unwrap();
            match &result {
                Ok(_) => assert_eq!(
                    got,
                    Some(Bytes::from(value.clone())),
                    "committed but not visible"
                ),
                Err(Error::Aborted { .. }) => assert_eq!(got, old.unwrap(), "aborted but visible"),
                Err(e) => panic!("unexpected commit error {e:?}"),
            }
        }
        if round == 0 {
            assert!(matches!(result, Err(Error::Aborted { .. })), "{result:?}");
        }
        match result {
            Ok(_) => outcomes.0 += 1,
            Err(_) => outcomes.1 += 1,
        }
    }
    assert!(outcomes.1 >= 1);
}

pub async fn late_prewrite_after_rollback<F: StoreFactory>(factory: &F) {
    let store = Arc::new(FaultyStore::new(factory.open().await));
    let c = client(&store).await;
    seed(&c).await;
    let before = store.sent();
    let mut t = writer(&c).await;
    t.set_commit_hook(Some(Arc::new(CrashAt(CommitStep::AfterPrewrites))));
    assert!(t.commit().await.is_err());
    let prewrites: Vec<_> = store
        .recorded_since(before)
        .into_iter()
        .filter(|b| is_prewrite(b))
        .collect();
    assert_eq!(prewrites.len(), 1, "every row prewritten in one batch");
    resolve_all(&c, TABLE).await;
    assert_all(&c, "old").await;

    // The network delivers the old prewrites again: the rollback records must stop them.
    for batch in prewrites {
        let outcomes = store.redeliver(batch).await.unwrap();
        assert!(
            outcomes
                .iter()
                .all(|o| matches!(o, MutationOutcome::ConditionFailed { condition: 0 })),
            "late prewrite revived an aborted transaction: {outcomes:?}"
        );
    }
    c.finish_background_commits().await;
    assert!(c.locks(TABLE).await.unwrap().is_empty());
    assert_all(&c, "old").await;
}

pub async fn dead_owner_cleaned_before_ttl<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let long_ttl = fast_config()
        .with_lock_ttl(Duration::from_secs(600))
        .with_worker_lease(Duration::from_millis(300));
    let owner = Client::builder(Arc::clone(&store))
        .local_oracle()
        .config(long_ttl)
        .build()
        .await
        .unwrap();
    seed(&owner).await;
    let mut t = writer(&owner).await;
    t.set_commit_hook(Some(Arc::new(CrashAt(CommitStep::AfterPrewrites))));
    assert!(t.commit().await.is_err());
    drop(owner); // the process dies: its lease is no longer refreshed
    tokio::time::sleep(Duration::from_millis(600)).await;
    let reader = Client::builder(Arc::clone(&store))
        .local_oracle()
        .config(fast_config().with_lock_wait_timeout(Duration::from_secs(5)))
        .build()
        .await
        .unwrap();
    // The lock's TTL is ten minutes; only the dead lease lets the reader clean it now.
    assert_all(&reader, "old").await;
    resolve_all(&reader, TABLE).await;
}

pub async fn live_lock_times_out_reader<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let owner = patient_client(&store).await;
    seed(&owner).await;
    let mut t = writer(&owner).await;
    let (hook, mut reached, release) = PauseAt::new(vec![CommitStep::AfterPrewrites], None);
    t.set_commit_hook(Some(hook));
    let pending = tokio::spawn(t.commit());
    reached.recv().await.unwrap();
    let impatient = Client::builder(Arc::clone(&store))
        .local_oracle()
        .config(fast_config().with_lock_wait_timeout(Duration::from_millis(700)))
        .build()
        .await
        .unwrap();
    let err = impatient
        .begin()
        .await
        .unwrap()
        .get(TABLE, "b", "v")
        .await
        .expect_err("live lock must block");
    assert!(matches!(err, Error::LockWaitTimeout { .. }), "{err:?}");
    assert!(err.is_retryable());
    release.notify_one();
    pending.await.unwrap().unwrap();
    assert_all(&impatient, "new").await;
}

pub async fn heartbeat_keeps_long_commit_alive<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let config = fast_config().with_lock_ttl(Duration::from_secs(2));
    let owner = client_with(&store, config.clone()).await;
    seed(&owner).await;
    let mut t = writer(&owner).await;
    let (hook, mut reached, release) = PauseAt::new(vec![CommitStep::AfterPrewrites], None);
    t.set_commit_hook(Some(hook));
    let pending = tokio::spawn(t.commit());
    reached.recv().await.unwrap();
    let cleaner = client(&store).await;
    // Two TTLs pass while the commit is paused; only the heartbeat (every TTL/3) keeps the
    // primary lock fresh.
    let deadline = tokio::time::Instant::now() + config.lock_ttl * 2;
    while tokio::time::Instant::now() < deadline {
        let (resolved, live) = cleaner.resolve_locks(TABLE).await.unwrap();
        assert_eq!(
            (resolved, live),
            (0, ROWS.len() * 2), // columns v and w of every row
            "a heartbeating transaction was cleaned up"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    release.notify_one();
    pending.await.unwrap().expect("long commit succeeds");
    assert_all(&cleaner, "new").await;
}

/// `Client::run` retries a transaction whose begin failed retryably: here the oracle's refill
/// cannot sync its new mark, so the first start timestamp is refused.
pub async fn run_retries_a_failed_begin<F: StoreFactory>(factory: &F) {
    let store = Arc::new(FaultyStore::new(factory.open().await));
    // A 1 ms window: after a pause, the next timestamp needs a refill (and its sync).
    let oracle: Arc<dyn crate::TimestampOracle> = Arc::new(
        crate::LocalOracle::with_window(Arc::clone(&store), Duration::from_millis(1))
            .await
            .unwrap(),
    );
    let c = Client::builder(Arc::clone(&store))
        .oracle(oracle)
        .config(fast_config())
        .build()
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    store.fail_syncs(1);
    let mut bodies = 0u32;
    c.run(|txn| -> BoxFuture<'_, crate::Result<()>> {
        bodies += 1;
        Box::pin(async move { txn.set(TABLE, "begin-retried", "c", "v") })
    })
    .await
    .expect("a failed begin is retried");
    assert_eq!(
        store.injected().syncs_failed,
        1,
        "the sync failure was injected"
    );
    assert_eq!(bodies, 1, "the body runs only once the begin succeeded");
    let txn = c.begin().await.unwrap();
    assert_eq!(
        txn.get(TABLE, "begin-retried", "c").await.unwrap(),
        Some(Bytes::from("v"))
    );
}

/// A multi-row (two-phase) commit whose `sync` fails after the commit point: the caller gets
/// [`Error::CommittedNotDurable`] with the commit timestamp, never a retryable error; the
/// transaction is committed (its primary says so) and every row becomes visible.
pub async fn sync_failure_after_commit_point<F: StoreFactory>(factory: &F) {
    let store = Arc::new(FaultyStore::new(factory.open().await));
    let c = client_with(&store, fast_config().with_durable_commits(true)).await;
    seed(&c).await;
    store.fail_syncs(1);
    let t = writer(&c).await;
    let start_ts = t.start_ts();
    let err = t
        .commit()
        .await
        .expect_err("the sync failure must be reported");
    let Error::CommittedNotDurable { commit_ts, source } = &err else {
        panic!("expected CommittedNotDurable, got {err:?}");
    };
    assert!(matches!(source, StoreError::Unavailable(_)), "{source:?}");
    assert!(
        !err.is_retryable(),
        "a committed transaction must not be re-run"
    );
    assert_eq!(store.injected().syncs_failed, 1);
    assert_eq!(
        c.transaction_status(&primary(), start_ts).await.unwrap(),
        TxnStatus::Committed {
            commit_ts: *commit_ts
        },
        "the commit point passed"
    );
    assert_all(&c, "new").await;
    resolve_all(&c, TABLE).await;

    // The next durable commit syncs normally.
    let mut t = c.begin().await.unwrap();
    t.set(TABLE, "a", "v", "newer").unwrap();
    t.set(TABLE, "b", "v", "newer").unwrap();
    t.commit().await.expect("sync works again");
}

/// Reads that fail and batches dropped before they apply (at random, seeded): every error a
/// transaction sees is retryable or says the outcome is unknown, two rows written together
/// stay equal, and every acknowledged increment is there.
pub async fn failed_reads_and_dropped_batches<F: StoreFactory>(factory: &F) {
    let store = Arc::new(FaultyStore::new(factory.open().await));
    let c = client(&store).await;
    seed(&c).await;

    // Every read fails: a retryable error, nothing changed.
    store.set_random_faults(
        FaultRates {
            read_failure: 1.0,
            ..FaultRates::NONE
        },
        0,
    );
    let err = c.begin().await.unwrap().get(TABLE, "a", "v").await;
    assert!(
        matches!(&err, Err(e @ Error::Store(StoreError::Unavailable(_))) if e.is_retryable()),
        "{err:?}"
    );
    // Every batch is dropped: the commit fails retryably before its commit point, and nothing of
    // it is ever visible.
    store.set_random_faults(
        FaultRates {
            batch_drop: 1.0,
            ..FaultRates::NONE
        },
        0,
    );
    let err = writer(&c)
        .await
        .commit()
        .await
        .expect_err("nothing applies");
    assert!(err.is_retryable(), "{err:?}");
    store.clear_random_faults();
    assert_all(&c, "old").await;
    resolve_all(&c, TABLE).await;
    assert_all(&c, "old").await;

    // Some of each, while a client increments two rows together.
    let seed = fault_seed("fault_failed_reads_and_dropped_batches");
    store.set_random_faults(
        FaultRates {
            read_failure: 0.2,
            batch_drop: 0.2,
            ..FaultRates::NONE
        },
        seed,
    );
    let (mut acked, mut unknown) = (0u64, 0u64);
    for _ in 0..30 {
        let result = c
            .run(|txn| -> BoxFuture<'_, crate::Result<()>> {
                Box::pin(async move {
                    let a = counter(txn.get(TABLE, "a", "n").await?);
                    let b = counter(txn.get(TABLE, "b", "n").await?);
                    txn.set(TABLE, "a", "n", (a + 1).to_string())?;
                    txn.set(TABLE, "b", "n", (b + 1).to_string())?;
                    Ok(())
                })
            })
            .await;
        match result {
            Ok(()) => acked += 1,
            Err(Error::CommitUndetermined { .. }) => unknown += 1,
            Err(e) => panic!("seed {seed}: unexpected error {e:?}"),
        }
    }
    store.clear_random_faults();
    let injected = store.injected();
    assert!(
        injected.reads_failed > 0 && injected.batches_dropped > 0,
        "seed {seed}: no fault injected: {injected:?}"
    );
    resolve_all(&c, TABLE).await;
    let r = c.begin().await.unwrap();
    let a = counter(r.get(TABLE, "a", "n").await.unwrap());
    let b = counter(r.get(TABLE, "b", "n").await.unwrap());
    assert_eq!(a, b, "seed {seed}: a transaction applied on one row only");
    assert!(
        (acked..=acked + unknown).contains(&a),
        "seed {seed}: {a} increments visible, {acked} acknowledged, {unknown} undetermined"
    );
}

fn counter(value: Option<Bytes>) -> u64 {
    value.map_or(0, |v| {
        std::str::from_utf8(&v)
            .ok()
            .and_then(|s| s.parse().ok())
            .expect("counter is a decimal number")
    })
}

/// Commits `txn` while every read fails and `arm(store, n)` faults the next `n` commit batches;
/// disarms both afterwards.
async fn commit_unreadable<S: RowStore>(
    store: &FaultyStore<S>,
    txn: crate::txn::Transaction<FaultyStore<S>>,
    arm: impl Fn(&FaultyStore<S>, usize),
) -> crate::error::Result<crate::txn::CommitInfo> {
    let unreadable = FaultRates {
        read_failure: 1.0,
        ..FaultRates::NONE
    };
    arm(store, 1_000);
    store.set_random_faults(unreadable, fault_seed("settle"));
    let outcome = txn.commit().await;
    store.clear_random_faults();
    arm(store, 0);
    outcome
}

/// `Client::settle` after `CommitUndetermined`, on a multi-row and a single-row transaction:
/// - the primary commit applied but every answer was lost and the status reads failed: settle
///   finds it committed, at the timestamp readers see;
/// - the primary commit never reached the store: settle rolls the transaction back for good —
///   its writes never show, and a late delivery of its commit changes nothing.
pub async fn settle_undetermined_commits<F: StoreFactory>(factory: &F) {
    let store = Arc::new(FaultyStore::new(factory.open().await));
    // Sections 1 and 2 lose and drop the answers of the commit stage of two-phase commit.
    let c = client_with(&store, fast_config().with_one_phase_commit(false)).await;
    seed(&c).await;

    // 1. Applied, answers lost, status unreadable.
    let t = writer(&c).await;
    let lose = |s: &FaultyStore<F::Store>, n: usize| s.lose_answers(n, Box::new(is_commit));
    let err = commit_unreadable(&store, t, lose)
        .await
        .expect_err("no answer, no status: undetermined");
    let Error::CommitUndetermined { primary, .. } = &err else {
        panic!("expected CommitUndetermined, got {err}");
    };
    assert_eq!(
        primary.row.as_ref(),
        ROWS[0].as_bytes(),
        "the primary is row a"
    );
    let settled = c.settle(&err).await.unwrap();
    let Settled::Committed { commit_ts } = settled else {
        panic!("an applied commit settles as committed, not {settled:?}");
    };
    assert_all(&c, "new").await;
    let seen = c
        .begin()
        .await
        .unwrap()
        .get_versioned(TABLE, ROWS[0], "v")
        .await
        .unwrap();
    assert_eq!(seen.commit_ts, Some(commit_ts));
    assert_eq!(
        c.settle(&err).await.unwrap(),
        settled,
        "settling twice agrees"
    );

    // 2. Never applied: the commit batches are dropped on the way.
    let mut t2 = c.begin().await.unwrap();
    for r in ROWS {
        t2.set(TABLE, r, "v", "lost").unwrap();
    }
    let before = store.sent();
    let drop = |s: &FaultyStore<F::Store>, n: usize| s.drop_batches(n, Box::new(is_commit));
    let err = commit_unreadable(&store, t2, drop)
        .await
        .expect_err("never applied, status unreadable");
    assert!(matches!(err, Error::CommitUndetermined { .. }), "{err}");
    assert_eq!(c.settle(&err).await.unwrap(), Settled::RolledBack);
    // A commit request that arrives late cannot revive it.
    for batch in store.recorded_since(before) {
        if is_commit(&batch) {
            let outcomes = store.redeliver(batch).await.unwrap();
            assert!(
                outcomes.iter().all(|o| !o.applied()),
                "a late commit applied"
            );
        }
    }
    assert_all(&c, "new").await;
    c.finish_background_commits().await;
    assert!(c.locks(TABLE).await.unwrap().is_empty());

    // 3. A single-row transaction (one phase where the store supports it).
    let mut single = c.begin().await.unwrap();
    single.set(TABLE, ROWS[0], "v", "single").unwrap();
    // The commit, in one phase or two (the prewrite is answered).
    let committing = |batch: &[RowMutation]| {
        is_commit(batch)
            || batch.iter().any(|m| {
                m.conditions
                    .iter()
                    .any(|c| matches!(c, Condition::NoSnapshotReadSince { .. }))
            })
    };
    let lose = |s: &FaultyStore<F::Store>, n: usize| s.lose_answers(n, Box::new(committing));
    let outcome = commit_unreadable(&store, single, lose).await;
    let seen = match outcome {
        Ok(_) => Some("single"),
        Err(err @ Error::CommitUndetermined { .. }) => match c.settle(&err).await.unwrap() {
            Settled::Committed { .. } => Some("single"),
            Settled::RolledBack => Some("new"),
        },
        Err(other) => panic!("single-row commit: {other}"),
    };
    let value = c
        .begin()
        .await
        .unwrap()
        .get(TABLE, ROWS[0], "v")
        .await
        .unwrap();
    assert_eq!(value.as_deref(), seen.map(str::as_bytes));

    // 4. Every row in one step, where the store applies several rows all or nothing: its
    // answer lost and the status unreadable, it settles from the primary's write record.
    if store.limits().tracks_snapshot_reads && store.limits().max_atomic_rows >= ROWS.len() {
        let one_step = client(&store).await;
        let mut t = one_step.begin().await.unwrap();
        for r in ROWS {
            t.set(TABLE, r, "v", "one step").unwrap();
        }
        let lose = |s: &FaultyStore<F::Store>, n: usize| s.lose_answers(n, Box::new(committing));
        let err = commit_unreadable(&store, t, lose)
            .await
            .expect_err("no answer, no status: undetermined");
        assert!(matches!(err, Error::CommitUndetermined { .. }), "{err}");
        assert!(matches!(
            one_step.settle(&err).await.unwrap(),
            Settled::Committed { .. }
        ));
        let read = one_step.begin().await.unwrap();
        for r in ROWS {
            let value = read.get(TABLE, r, "v").await.unwrap();
            assert_eq!(value.as_deref(), Some(&b"one step"[..]), "row {r}");
        }
        assert!(one_step.locks(TABLE).await.unwrap().is_empty());
    }

    // Settle refuses errors it cannot settle.
    assert!(matches!(
        c.settle(&Error::Aborted { start_ts: 1 }).await,
        Err(Error::InvalidInput(_))
    ));
}

/// A client that commits in two phases: its notifications are written at prewrite, before its
/// commit, and name no commit timestamp.
async fn two_phase_observing_client<S: RowStore>(
    store: &Arc<S>,
    columns: &[crate::txn::ObservedColumn],
) -> Client<S> {
    Client::builder(Arc::clone(store))
        .local_oracle()
        .config(fast_config().with_one_phase_commit(false))
        .observe_all(columns)
        .build()
        .await
        .expect("client")
}

/// Clearing a notification written at prewrite needs its writer's status. A transaction this
/// client committed is known without a read (recorded at its commit point); another client's is
/// read from its primary: while every read fails, only the own one clears (and not for a
/// snapshot older than the notification). Once a read found the other client's transaction
/// committed, its notification of a second row clears without one.
pub async fn clearing_own_notifications_needs_no_status_read<F: StoreFactory>(factory: &F) {
    let store = Arc::new(FaultyStore::new(factory.open().await));
    let watched = crate::txn::ObservedColumn::strong(TABLE, "watched");
    let ours = two_phase_observing_client(&store, std::slice::from_ref(&watched)).await;
    let theirs = two_phase_observing_client(&store, std::slice::from_ref(&watched)).await;
    let before = ours.begin().await.unwrap().start_ts();
    for (c, rows) in [
        (&ours, &["ours"][..]),
        (&theirs, &["theirs", "theirs-too"][..]),
    ] {
        let mut t = c.begin().await.unwrap();
        for row in rows {
            t.set(TABLE, *row, "watched", "x").unwrap();
        }
        t.commit().await.unwrap();
    }
    let snapshot = ours.begin().await.unwrap().start_ts();
    let pending = ours
        .scan_notifications(TABLE, Bound::Unbounded, Bound::Unbounded, None)
        .await
        .unwrap();
    let versions = |row: &str| {
        let found = pending
            .iter()
            .find(|p| p.row.as_ref() == row.as_bytes())
            .unwrap_or_else(|| panic!("no notification in row {row}"));
        assert_eq!(found.columns.len(), 1);
        found.columns[0].1.clone()
    };
    let (own, foreign, foreign_too) =
        (versions("ours"), versions("theirs"), versions("theirs-too"));
    assert!(
        own.iter()
            .chain(&foreign)
            .chain(&foreign_too)
            .all(|v| v.writer.is_some() && v.committed_at.is_none())
    );
    let addr = |row: &str| CellAddr::new(TABLE, row.to_owned(), "watched");

    store.set_random_faults(
        FaultRates {
            read_failure: 1.0,
            ..FaultRates::NONE
        },
        0,
    );
    // Newer than `before`: kept.
    let kept = ours
        .clear_notifications(&addr("ours"), &own, before)
        .await
        .expect("no read needed");
    assert_eq!((kept.deleted, kept.kept), (0, 1));
    let err = ours
        .clear_notifications(&addr("theirs"), &foreign, snapshot)
        .await
        .expect_err("another client's commit needs a status read");
    assert!(err.is_retryable(), "{err:?}");
    let cleared = ours
        .clear_notifications(&addr("ours"), &own, snapshot)
        .await
        .expect("no read needed");
    assert_eq!((cleared.deleted, cleared.kept), (1, 0));
    assert!(store.injected().reads_failed > 0);

    store.clear_random_faults();
    let reads_before = ours.metrics().status_reads;
    let cleared = ours
        .clear_notifications(&addr("theirs"), &foreign, snapshot)
        .await
        .unwrap();
    assert_eq!((cleared.deleted, cleared.kept), (1, 0));
    assert!(ours.metrics().status_reads > reads_before);

    // The same writer's notification of another row: its commit is known now.
    store.set_random_faults(
        FaultRates {
            read_failure: 1.0,
            ..FaultRates::NONE
        },
        0,
    );
    let reads_before = ours.metrics().status_reads;
    let cleared = ours
        .clear_notifications(&addr("theirs-too"), &foreign_too, snapshot)
        .await
        .expect("the commit was read before");
    assert_eq!((cleared.deleted, cleared.kept), (1, 0));
    assert_eq!(ours.metrics().status_reads, reads_before);
    store.clear_random_faults();
    let left = ours
        .scan_notifications(TABLE, Bound::Unbounded, Bound::Unbounded, None)
        .await
        .unwrap();
    assert!(left.is_empty(), "{left:?}");
}

/// Writes `value` to `TABLE`/`target`/`v` and notifies `TABLE`/`target`/`queue` in one
/// transaction; returns its commit timestamp.
async fn commit_and_notify<S: RowStore>(c: &Client<S>, value: &str) -> u64 {
    let mut t = c.begin().await.unwrap();
    t.set(TABLE, "target", "v", value.to_owned()).unwrap();
    t.notify(TABLE, "target", "queue").unwrap();
    t.commit()
        .await
        .unwrap()
        .commit_ts
        .expect("a write commits")
}

/// The pending versions of `TABLE`/`target`/`queue`.
async fn queue_versions<S: RowStore>(c: &Client<S>) -> Vec<crate::txn::NotifyVersion> {
    let rows = c
        .scan_notifications(TABLE, Bound::Unbounded, Bound::Unbounded, None)
        .await
        .unwrap();
    rows.into_iter()
        .flat_map(|r| r.columns)
        .filter(|(column, _)| column.as_ref() == b"queue")
        .flat_map(|(_, versions)| versions)
        .collect()
}

/// A notification written with its writer's commit (a one-phase commit) names the commit
/// timestamp, so clearing it needs no status read, even by another client and while every read
/// fails: it is kept for a snapshot older than the commit and cleared for one that covers it.
/// On a store where a transaction cannot commit in one step, the notification is written at
/// prewrite and names none.
pub async fn one_step_notifications_name_their_commit<F: StoreFactory>(factory: &F) {
    let store = Arc::new(FaultyStore::new(factory.open().await));
    let watched = crate::txn::ObservedColumn::weak(TABLE, "queue");
    let writer = observing_client(&store, std::slice::from_ref(&watched)).await;
    let runner = observing_client(&store, std::slice::from_ref(&watched)).await;
    // One row: every store that tracks snapshot reads commits it in one step.
    let commit_ts = commit_and_notify(&writer, "x").await;
    let one_step = store.limits().tracks_snapshot_reads;
    let versions = queue_versions(&runner).await;
    assert_eq!(versions.len(), 1, "{versions:?}");
    assert_eq!(
        versions[0].committed_at,
        one_step.then_some(commit_ts),
        "{versions:?}"
    );
    if !one_step {
        return;
    }
    let addr = CellAddr::new(TABLE, "target", "queue");
    store.set_random_faults(
        FaultRates {
            read_failure: 1.0,
            ..FaultRates::NONE
        },
        0,
    );
    let kept = runner
        .clear_notifications(&addr, &versions, commit_ts - 1)
        .await
        .expect("no read needed");
    assert_eq!((kept.deleted, kept.kept), (0, 1));
    let cleared = runner
        .clear_notifications(&addr, &versions, commit_ts)
        .await
        .expect("no read needed");
    assert_eq!((cleared.deleted, cleared.kept), (1, 0));
    assert_eq!(runner.metrics().status_reads, 0);
    store.clear_random_faults();
    let left = queue_versions(&runner).await;
    assert!(left.is_empty(), "{left:?}");
}

/// Changes notified to a cell while a run consumes it are never lost with what the run clears.
/// After the run's scan, one commit lands before its snapshot `T` and one after. Clearing what
/// the scan listed deletes that alone. The change committed after `T` then stays pending through
/// a clear at `T`, and one at a snapshot that covers it leaves nothing. Whatever a store keeps of
/// a cell's notifications (it may fold several into one), a change a run did not see survives.
pub async fn notifications_committed_during_a_run_stay_pending<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let watched = crate::txn::ObservedColumn::weak(TABLE, "queue");
    let writer = observing_client(&store, std::slice::from_ref(&watched)).await;
    let runner = observing_client(&store, std::slice::from_ref(&watched)).await;
    let addr = CellAddr::new(TABLE, "target", "queue");
    let first = commit_and_notify(&writer, "first").await;
    let listed = queue_versions(&runner).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    let before_snapshot = commit_and_notify(&writer, "before the snapshot").await;
    let snapshot = runner.begin().await.unwrap().start_ts();
    let after_snapshot = commit_and_notify(&writer, "after the snapshot").await;
    assert!(first < before_snapshot && before_snapshot < snapshot && snapshot < after_snapshot);

    let cleared = runner
        .clear_notifications(&addr, &listed, snapshot)
        .await
        .unwrap();
    assert_eq!((cleared.deleted, cleared.kept), (1, 0));
    let left = queue_versions(&runner).await;
    assert!(
        !left.is_empty(),
        "the later commits' notifications were lost"
    );
    let cleared = runner
        .clear_notifications(&addr, &left, snapshot)
        .await
        .unwrap();
    assert!(
        cleared.kept >= 1,
        "{cleared:?}: the change after {snapshot} was cleared"
    );
    let left = queue_versions(&runner).await;
    assert!(
        !left.is_empty(),
        "the change committed at {after_snapshot} was lost"
    );

    let covering = runner.begin().await.unwrap().start_ts();
    runner
        .clear_notifications(&addr, &left, covering)
        .await
        .unwrap();
    let left = queue_versions(&runner).await;
    assert!(left.is_empty(), "{left:?}");
}

/// A backlog of notify versions on one cell larger than a row mutation may hold (etcd's
/// `--max-txn-ops`) is cleared in several mutations: none of them over the limit, and nothing
/// left (a single mutation would fail every time, so a busy cell's backlog would only grow).
pub async fn clearing_a_backlog_larger_than_a_row_mutation<F: StoreFactory>(factory: &F) {
    let store = Arc::new(FaultyStore::new(factory.open().await));
    let watched = crate::txn::ObservedColumn::weak(TABLE, "queue");
    let c = observing_client(&store, std::slice::from_ref(&watched)).await;
    let limit = 4;
    store.set_limits(Some(store.inner().limits().with_max_row_ops(limit)));
    for _ in 0..3 * limit + 1 {
        c.notify_weak(TABLE, "busy", "queue").await.unwrap();
    }
    let snapshot = c.begin().await.unwrap().start_ts();
    let pending = c
        .scan_notifications(TABLE, Bound::Unbounded, Bound::Unbounded, None)
        .await
        .unwrap();
    assert_eq!(pending.len(), 1, "{pending:?}");
    let versions = pending[0].columns[0].1.clone();
    assert_eq!(versions.len(), 3 * limit + 1);
    // In one mutation, the whole backlog is over the limit.
    let too_many = RowMutation {
        table: Bytes::from_static(TABLE.as_bytes()),
        row: Bytes::from_static(b"busy"),
        conditions: Vec::new(),
        mutations: versions
            .iter()
            .map(|v| crate::store::Mutation::Delete {
                family: crate::store::Family::Notify,
                column: Bytes::from_static(b"queue"),
                ts: v.ts,
            })
            .collect(),
    };
    let err = store.mutate_rows(vec![too_many]).await.unwrap_err();
    assert!(matches!(err, StoreError::TooLarge { .. }), "{err:?}");

    let cleared = c
        .clear_notifications(&CellAddr::new(TABLE, "busy", "queue"), &versions, snapshot)
        .await
        .unwrap();
    assert_eq!((cleared.deleted, cleared.kept), (3 * limit + 1, 0));
    let left = c
        .scan_notifications(TABLE, Bound::Unbounded, Bound::Unbounded, None)
        .await
        .unwrap();
    assert!(left.is_empty(), "{left:?}");
}
