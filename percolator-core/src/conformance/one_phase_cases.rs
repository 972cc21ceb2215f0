//! One-phase commit of single-row transactions: the store condition it rests on, that it is
//! used exactly where the store supports it, that a reader admitted before the write keeps its
//! snapshot (the race the condition closes), and a fault at each of its steps.
//!
//! Every case runs on every backend: where the store does not track snapshot reads the
//! transaction cases check the same outcomes through two-phase commit.

use std::ops::Bound;
use std::sync::Arc;

use bytes::Bytes;

use super::faulty::{FaultyStore, is_prewrite};
use super::hooks::{CrashAt, OnePhase, PauseAt, RecordSteps};
use super::{StoreFactory, client};
use crate::error::Error;
use crate::fault::CommitStep;
use crate::records::{SHORT_VALUE_MAX, WriteRecord};
use crate::store::{
    Columns, Condition, Family, FamilyRead, Mutation, MutationOutcome, ReadRow, RowMutation,
    RowStore, Scan,
};
use crate::txn::{Client, Transaction};

const TABLE: &str = "p";

fn put_if_unread_since(row: &str, ts: u64) -> RowMutation {
    RowMutation {
        table: Bytes::from_static(b"t"),
        row: Bytes::copy_from_slice(row.as_bytes()),
        conditions: vec![Condition::NoSnapshotReadSince { ts }],
        mutations: vec![Mutation::Put {
            family: Family::Data,
            column: Bytes::from_static(b"c"),
            ts,
            value: Bytes::from_static(b"v"),
        }],
    }
}

async fn outcome<S: RowStore>(store: &S, row: &str, ts: u64) -> MutationOutcome {
    store
        .mutate_rows(vec![put_if_unread_since(row, ts)])
        .await
        .expect("mutate_rows")[0]
}

/// `Condition::NoSnapshotReadSince`: holds until a read or scan is admitted at or after its
/// timestamp — for the row read, for a row that did not exist, for every row of a scanned
/// range. A store that does not track snapshot reads reports it failed, always.
pub async fn snapshot_read_condition<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let applied = MutationOutcome::Applied;
    let failed = MutationOutcome::ConditionFailed { condition: 0 };
    if !store.limits().tracks_snapshot_reads {
        assert_eq!(outcome(&*store, "a", 10).await, failed);
        return;
    }
    assert_eq!(outcome(&*store, "a", 10).await, applied);
    let read = |row: &str, ts| ReadRow {
        table: Bytes::from_static(b"t"),
        row: Bytes::copy_from_slice(row.as_bytes()),
        reads: vec![FamilyRead::all(Family::Data)],
        snapshot_ts: Some(ts),
    };
    // A point read of an existing row, then of a row that does not exist.
    store.read_row(read("a", 150)).await.unwrap();
    assert_eq!(outcome(&*store, "a", 150).await, failed);
    assert_eq!(outcome(&*store, "a", 151).await, applied);
    store.read_row(read("new", 200)).await.unwrap();
    assert_eq!(outcome(&*store, "new", 200).await, failed);
    assert_eq!(outcome(&*store, "new", 201).await, applied);
    // A scan covers rows of its range that do not exist yet.
    store
        .scan(Scan {
            table: Bytes::from_static(b"t"),
            start: Bound::Included(Bytes::from_static(b"m")),
            end: Bound::Excluded(Bytes::from_static(b"z")),
            read: FamilyRead::all(Family::Write),
            row_limit: None,
            snapshot_ts: Some(300),
        })
        .await
        .unwrap();
    assert_eq!(outcome(&*store, "q", 300).await, failed);
    assert_eq!(outcome(&*store, "q", 301).await, applied);
    // Reads without a snapshot timestamp (protocol bookkeeping) are not admitted.
    store
        .read_row(ReadRow {
            snapshot_ts: None,
            ..read("a", 0)
        })
        .await
        .unwrap();
    assert_eq!(outcome(&*store, "a", 302).await, applied);
}

/// The condition is atomic with the write against readers running at the same time: two OS
/// threads, released together by a spin barrier, race a conditional put of a new row at `ts`
/// against a scan (every fourth round a point read) admitted at `ts`. Whenever the put
/// applies, the reader must see it — the put cannot have been checked before the reader was
/// admitted and land after the reader looked. The reader starts 0–24 µs after the writer, so
/// the rounds sweep the writer's whole check-then-write window. The new row sorts first in the
/// scanned range, where the scan looks first. (sled: a scan finds rows in a tree before it
/// latches them; this case fails there if the scan does not cycle the backend's scan gates.)
pub async fn condition_is_atomic_against_concurrent_readers<F: StoreFactory>(factory: &F) {
    const ROUNDS: u64 = 500;
    let store = factory.open().await;
    let tracks = store.limits().tracks_snapshot_reads;
    let handle = tokio::runtime::Handle::current();
    let (outcomes, seen) =
        tokio::task::spawn_blocking(move || race_puts_against_readers(&*store, &handle, ROUNDS))
            .await
            .unwrap();
    let mut applied = 0;
    for (round, (outcome, seen)) in outcomes.into_iter().zip(seen).enumerate() {
        if outcome.applied() {
            applied += 1;
            assert!(
                seen,
                "round {round}: the put applied at {} but a reader admitted then did not see it",
                race_ts(round as u64)
            );
        } else {
            assert_eq!(outcome, MutationOutcome::ConditionFailed { condition: 0 });
        }
    }
    if tracks {
        // Otherwise the visibility assertion above never ran and the case proves nothing.
        assert!(
            applied > 0,
            "no racing put applied in {ROUNDS} rounds: every one-phase condition failed"
        );
    } else {
        assert_eq!(applied, 0, "the store does not track snapshot reads");
    }
    println!("{applied} of {ROUNDS} racing puts applied before their reader");
}

fn race_ts(round: u64) -> u64 {
    1_000 + round
}

/// Descending names: each round's row sorts before every row of the earlier rounds.
fn race_row(round: u64) -> Bytes {
    Bytes::from(format!("r{:05}", 99_999 - round))
}

/// Runs the rounds of [`condition_is_atomic_against_concurrent_readers`]: each put's outcome,
/// and whether each reader saw the put's row.
fn race_puts_against_readers<S: RowStore>(
    store: &S,
    handle: &tokio::runtime::Handle,
    rounds: u64,
) -> (Vec<MutationOutcome>, Vec<bool>) {
    use std::sync::atomic::{AtomicU64, Ordering};
    let arrived = AtomicU64::new(0);
    // Both threads leave round `round`'s barrier within a few hundred nanoseconds.
    let barrier = |round: u64| {
        arrived.fetch_add(1, Ordering::SeqCst);
        let mut spins = 0u32;
        while arrived.load(Ordering::SeqCst) < 2 * (round + 1) {
            spins += 1;
            if spins.is_multiple_of(4096) {
                std::thread::yield_now(); // the other thread may share our core
            } else {
                std::hint::spin_loop();
            }
        }
    };
    std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            (0..rounds)
                .map(|round| {
                    barrier(round);
                    let mut put = put_if_unread_since("", race_ts(round));
                    put.row = race_row(round);
                    handle
                        .block_on(store.mutate_rows(vec![put]))
                        .expect("mutate_rows")[0]
                })
                .collect()
        });
        let reader = scope.spawn(|| {
            (0..rounds)
                .map(|round| {
                    barrier(round);
                    spin_for_micros(round % 25);
                    handle.block_on(read_race_row(store, round))
                })
                .collect()
        });
        (writer.join().unwrap(), reader.join().unwrap())
    })
}

/// Whether a snapshot reader at round `round`'s timestamp finds the round's row.
async fn read_race_row<S: RowStore>(store: &S, round: u64) -> bool {
    let row = race_row(round);
    if round % 4 == 3 {
        let cells = store
            .read_row(ReadRow {
                table: Bytes::from_static(b"t"),
                row,
                reads: vec![FamilyRead::all(Family::Data)],
                snapshot_ts: Some(race_ts(round)),
            })
            .await
            .unwrap();
        !cells[0].is_empty()
    } else {
        let rows = store
            .scan(Scan {
                table: Bytes::from_static(b"t"),
                start: Bound::Included(Bytes::from_static(b"r")),
                end: Bound::Excluded(Bytes::from_static(b"s")),
                read: FamilyRead::all(Family::Data),
                row_limit: Some(1),
                snapshot_ts: Some(race_ts(round)),
            })
            .await
            .unwrap();
        rows.first().is_some_and(|r| r.row == row)
    }
}

/// Busy-waits (without yielding) to shift one side of a race by a few microseconds.
fn spin_for_micros(micros: u64) {
    let until = std::time::Instant::now() + std::time::Duration::from_micros(micros);
    while std::time::Instant::now() < until {
        std::hint::spin_loop();
    }
}

/// The data and write families of `row` in the transactions' table, as stored.
async fn raw_row<S: RowStore>(store: &S, row: &str) -> Vec<Vec<crate::store::Cell>> {
    store
        .read_row(ReadRow {
            table: Bytes::from_static(TABLE.as_bytes()),
            row: Bytes::copy_from_slice(row.as_bytes()),
            reads: vec![
                FamilyRead::all(Family::Data),
                FamilyRead::all(Family::Write),
            ],
            snapshot_ts: None,
        })
        .await
        .unwrap()
}

/// Whether a transaction of `rows` rows can commit in one phase on `store`.
fn atomic_rows<S: RowStore + ?Sized>(store: &S, rows: usize) -> bool {
    let limits = store.limits();
    limits.tracks_snapshot_reads && limits.max_atomic_rows >= rows
}

async fn value<S: RowStore>(c: &Client<S>, row: &str) -> Option<Bytes> {
    c.begin().await.unwrap().get(TABLE, row, "v").await.unwrap()
}

/// A single-row commit takes the one-phase path exactly when the store supports it, and leaves
/// the same visible state as two-phase commit: the value, no lock. In one phase short values
/// ride inline in the write records; long ones, and two-phase commits, use data versions, and
/// reads and scans mix both.
pub async fn used_where_supported<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let c = client(&store).await;
    let steps = Arc::new(RecordSteps::default());
    let mut t = c.begin().await.unwrap();
    t.set(TABLE, "r", "v", "one").unwrap();
    t.set(TABLE, "r", "w", "row").unwrap();
    t.set_commit_hook(Some(Arc::new(OnePhase(Arc::clone(&steps)))));
    let info = t.commit().await.unwrap();
    assert!(info.commit_ts.is_some_and(|ts| ts > info.start_ts));
    let expected = if store.limits().tracks_snapshot_reads {
        vec![
            CommitStep::BeforePrewrite,
            CommitStep::BeforeCommitPoint,
            CommitStep::AfterCommitPoint,
        ]
    } else {
        vec![
            CommitStep::BeforePrewrite,
            CommitStep::AfterPrewrites,
            CommitStep::BeforeCommitPoint,
            CommitStep::AfterCommitPoint,
        ]
    };
    assert_eq!(*steps.0.lock(), expected);
    assert_eq!(value(&c, "r").await, Some(Bytes::from("one")));
    assert!(c.locks(TABLE).await.unwrap().is_empty());
    // Short values ride in the write records, with no data versions: in one phase directly, in
    // two through the locks.
    let families = raw_row(&*store, "r").await;
    let inline: Vec<Option<Bytes>> = families[1]
        .iter()
        .map(|cell| WriteRecord::decode_with_value(&cell.value).unwrap().1)
        .collect();
    assert!(families[0].is_empty(), "data versions: {:?}", families[0]);
    assert_eq!(inline, [Some(Bytes::from("one")), Some(Bytes::from("row"))]);

    // A value too long to ride inline goes to the data family, in one phase all the same.
    let long = Bytes::from(vec![b'L'; SHORT_VALUE_MAX + 1]);
    let mut t = c.begin().await.unwrap();
    t.set(TABLE, "r", "x", long.clone()).unwrap();
    t.commit().await.unwrap();
    assert!(
        raw_row(&*store, "r").await[0]
            .iter()
            .any(|d| d.value == long)
    );

    // Two rows take one phase only where the store applies several rows all or nothing.
    let steps = Arc::new(RecordSteps::default());
    let mut t = c.begin().await.unwrap();
    t.set(TABLE, "r", "v", "two").unwrap();
    t.set(TABLE, "s", "v", "rows").unwrap();
    t.set_commit_hook(Some(Arc::new(OnePhase(Arc::clone(&steps)))));
    t.commit().await.unwrap();
    assert_eq!(
        steps.0.lock().contains(&CommitStep::AfterPrewrites),
        !atomic_rows(&*store, 2),
        "{:?}",
        steps.0.lock()
    );
    // A scan meets inline values and data versions in one row, in column order.
    let scanned: Vec<(Bytes, Bytes, Bytes)> = c
        .begin()
        .await
        .unwrap()
        .scan(TABLE, "r".."t", Columns::All)
        .await
        .unwrap()
        .into_iter()
        .map(|i| (i.row, i.column, i.value))
        .collect();
    let item = |r: &'static str, col: &'static str, v: Bytes| (Bytes::from(r), Bytes::from(col), v);
    assert_eq!(
        scanned,
        [
            item("r", "v", Bytes::from("two")),
            item("r", "w", Bytes::from("row")),
            item("r", "x", long),
            item("s", "v", Bytes::from("rows")),
        ]
    );

    // A delete commits in one phase too.
    let mut t = c.begin().await.unwrap();
    t.delete(TABLE, "r", "v").unwrap();
    t.commit().await.unwrap();
    assert_eq!(value(&c, "r").await, None);
}

/// The race the condition closes: a reader whose start timestamp is after the writer's commit
/// timestamp reads before the write lands. It must keep its snapshot: the write may not appear
/// in it afterwards (it commits later, at a newer timestamp). Checked for a point read of an
/// existing row and for a scan over a row that does not exist yet.
pub async fn reader_admitted_before_the_write_keeps_its_snapshot<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let c = client(&store).await;
    let mut seed = c.begin().await.unwrap();
    seed.set(TABLE, "x", "v", "old").unwrap();
    seed.commit().await.unwrap();
    let tracks = store.limits().tracks_snapshot_reads;

    for new_row in [false, true] {
        let row = if new_row { "n" } else { "x" };
        let (hook, mut reached, release) = PauseAt::new(vec![CommitStep::BeforeCommitPoint], None);
        let mut writer = c.begin().await.unwrap();
        writer.set(TABLE, row, "v", "new").unwrap();
        writer.set_commit_hook(Some(Arc::new(OnePhase(hook))));
        let commit = tokio::spawn(writer.commit());
        assert_eq!(reached.recv().await, Some(CommitStep::BeforeCommitPoint));
        // The writer holds its commit timestamp; this reader starts after it.
        let reader = c.begin().await.unwrap();
        let before =
            read_racing_the_commit(tracks, &mut reached, &release, || seen(&reader, new_row)).await;
        let info = commit.await.unwrap().expect("the writer still commits");
        let after = seen(&reader, new_row).await;
        // The reader's snapshot holds the write exactly if it committed at or before the
        // reader's start, and it holds the same thing before and after the write landed.
        let commit_ts = info.commit_ts.unwrap();
        let old: Vec<Bytes> = if new_row {
            vec![]
        } else {
            vec![Bytes::from("old")]
        };
        let expected = if commit_ts <= reader.start_ts() {
            vec![Bytes::from("new")]
        } else {
            old
        };
        assert_eq!(
            before,
            expected,
            "row {row}: commit at {commit_ts}, reader at {}",
            reader.start_ts()
        );
        assert_eq!(after, expected, "row {row}: the reader's snapshot changed");
        if tracks {
            assert!(
                commit_ts > reader.start_ts(),
                "row {row}: the one-phase attempt landed at {commit_ts}"
            );
        }
        assert_eq!(value(&c, row).await, Some(Bytes::from("new")));
    }
    assert!(c.locks(TABLE).await.unwrap().is_empty());
}

/// Reads with `read` while a writer waits before its commit point. In one phase the read goes
/// first; the writer, released, must fail its one-phase mutation and come back to the step in
/// two phases (with a new commit timestamp), and is released again. In two phases the read meets
/// the writer's lock and waits for the commit, released 50 ms later.
async fn read_racing_the_commit<T, Fut: std::future::Future<Output = T>>(
    one_phase: bool,
    reached: &mut tokio::sync::mpsc::UnboundedReceiver<CommitStep>,
    release: &tokio::sync::Notify,
    read: impl FnOnce() -> Fut,
) -> T {
    if one_phase {
        let before = read().await;
        release.notify_one();
        assert_eq!(reached.recv().await, Some(CommitStep::BeforeCommitPoint));
        release.notify_one();
        before
    } else {
        let release_soon = async {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            release.notify_one();
        };
        tokio::join!(read(), release_soon).0
    }
}

/// What `reader` sees of the racing write: the scanned values around the new row, or the value.
async fn seen<S: RowStore>(reader: &Transaction<S>, new_row: bool) -> Vec<Bytes> {
    if new_row {
        let items = reader
            .scan(TABLE, "m".."o", Columns::one("v"))
            .await
            .unwrap();
        items.into_iter().map(|i| i.value).collect()
    } else {
        reader
            .get(TABLE, "x", "v")
            .await
            .unwrap()
            .into_iter()
            .collect()
    }
}

/// A crash before the one-phase mutation leaves nothing; a crash after it leaves the commit.
/// Neither leaves a lock for readers to resolve.
pub async fn crash_at_each_step<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let c = client(&store).await;
    for (step, committed) in [
        (CommitStep::BeforePrewrite, false),
        (CommitStep::BeforeCommitPoint, false),
        (CommitStep::AfterCommitPoint, true),
    ] {
        let row = format!("{step:?}");
        let mut t = c.begin().await.unwrap();
        t.set(TABLE, &row, "v", "value").unwrap();
        t.set_commit_hook(Some(Arc::new(OnePhase(CrashAt(step)))));
        let err = t.commit().await.expect_err("crash injected");
        assert!(
            matches!(err, Error::InjectedCrash(s) if s == step),
            "{err:?}"
        );
        if store.limits().tracks_snapshot_reads {
            assert!(c.locks(TABLE).await.unwrap().is_empty(), "{step:?}");
        } else {
            // Two-phase commit: resolve what the crash left.
            let _ = c.resolve_locks(TABLE).await;
        }
        let expected = committed.then(|| Bytes::from("value"));
        assert_eq!(value(&c, &row).await, expected, "{step:?}");
    }
}

/// The one-phase mutation's answer is lost (once, then on every attempt): the commit is
/// settled from the write record, reported committed, and applied exactly once.
pub async fn lost_answers<F: StoreFactory>(factory: &F) {
    let store = Arc::new(FaultyStore::new(factory.open().await));
    let c = client(&store).await;
    for (times, row) in [(1, "once"), (3, "always")] {
        store.lose_answers(times, Box::new(is_prewrite));
        let mut t = c.begin().await.unwrap();
        t.set(TABLE, row, "v", row).unwrap();
        let info = t.commit().await.expect("commit survives lost answers");
        let read = c.begin().await.unwrap();
        let versioned = read.get_versioned(TABLE, row, "v").await.unwrap();
        assert_eq!(versioned.value, Some(Bytes::from(row)));
        assert_eq!(versioned.commit_ts, info.commit_ts);
    }
    assert!(c.locks(TABLE).await.unwrap().is_empty());
}

/// A one-phase attempt that meets a newer write reports the write-write conflict, and one that
/// meets a live lock falls back to two-phase commit and its conflict handling.
pub async fn conflicts<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let c = client(&store).await;
    let mut early = c.begin().await.unwrap();
    let mut late = c.begin().await.unwrap();
    late.set(TABLE, "k", "v", "late").unwrap();
    late.commit().await.unwrap();
    early.set(TABLE, "k", "v", "early").unwrap();
    let err = early.commit().await.expect_err("newer write");
    assert!(matches!(err, Error::Conflict { .. }), "{err:?}");

    let (hook, mut reached, release) = PauseAt::new(vec![CommitStep::AfterPrewrites], None);
    let mut locker = c.begin().await.unwrap();
    locker.set(TABLE, "k", "v", "locker").unwrap();
    locker.set(TABLE, "k2", "v", "locker").unwrap();
    locker.set_commit_hook(Some(hook));
    let pending = tokio::spawn(locker.commit());
    assert_eq!(reached.recv().await, Some(CommitStep::AfterPrewrites));
    let mut blocked = c.begin().await.unwrap();
    blocked.set(TABLE, "k", "v", "blocked").unwrap();
    let err = blocked.commit().await.expect_err("live lock");
    assert!(matches!(err, Error::Conflict { .. }), "{err:?}");
    release.notify_one();
    pending.await.unwrap().unwrap();
    assert_eq!(value(&c, "k").await, Some(Bytes::from("locker")));
}

/// Real concurrency: writers insert new rows and update existing ones with single-row
/// transactions while readers read a row and scan the table twice each, with the writers
/// running in between. Every reader must see the same thing both times (no write may land
/// inside a snapshot that has already been read), and every acknowledged insert is there at the
/// end.
pub async fn snapshots_stable_under_concurrent_single_row_commits<F: StoreFactory>(factory: &F) {
    const WRITERS: usize = 3;
    const INSERTS: usize = 60;
    const READERS: usize = 3;
    const READS: usize = 40;
    let store = factory.open().await;
    let c = client(&store).await;
    let mut seed = c.begin().await.unwrap();
    seed.set(TABLE, "hot", "v", "0").unwrap();
    seed.commit().await.unwrap();
    let mut tasks = tokio::task::JoinSet::new();
    for w in 0..WRITERS {
        let c = c.clone();
        tasks.spawn(async move {
            for i in 0..INSERTS {
                let mut t = c.begin().await.unwrap();
                t.set(TABLE, format!("row{w}-{i:03}"), "v", "x").unwrap();
                t.commit().await.unwrap();
                // The hot row conflicts between writers; losing is fine.
                let mut t = c.begin().await.unwrap();
                t.set(TABLE, "hot", "v", format!("{w}-{i}")).unwrap();
                let _ = t.commit().await;
            }
        });
    }
    for _ in 0..READERS {
        let c = c.clone();
        tasks.spawn(async move {
            for _ in 0..READS {
                let r = c.begin().await.unwrap();
                let look = || async {
                    let hot = r.get(TABLE, "hot", "v").await.unwrap();
                    let rows = r.scan(TABLE, "row".."rox", Columns::All).await.unwrap();
                    (hot, rows.len())
                };
                let first = look().await;
                tokio::task::yield_now().await;
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                assert_eq!(look().await, first, "snapshot at {} changed", r.start_ts());
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    let end = c.begin().await.unwrap();
    let rows = end.scan(TABLE, "row".."rox", Columns::All).await.unwrap();
    assert_eq!(rows.len(), WRITERS * INSERTS);
    assert!(c.locks(TABLE).await.unwrap().is_empty());
}

/// Several rows in one step, where the store applies them all or nothing: the steps of one
/// phase, every row's value and no lock afterwards, and the weak notification of a row the
/// transaction does not write goes in with them. A crash before the step leaves no row written,
/// a crash after leaves all; a lost answer is settled from the first row's write record.
pub async fn several_rows_in_one_step<F: StoreFactory>(factory: &F) {
    const ROWS: [&str; 3] = ["m1", "m2", "m3"];
    let store = Arc::new(FaultyStore::new(factory.open().await));
    let c = client(&store).await;
    let one_step = atomic_rows(&*store, ROWS.len() + 1);
    let steps = Arc::new(RecordSteps::default());
    let mut t = c.begin().await.unwrap();
    for row in ROWS {
        t.set(TABLE, row, "v", row).unwrap();
    }
    t.notify(TABLE, "watched", "v").unwrap();
    t.set_commit_hook(Some(Arc::new(OnePhase(Arc::clone(&steps)))));
    let info = t.commit().await.unwrap();
    let two_phase = steps.0.lock().contains(&CommitStep::AfterPrewrites);
    assert_eq!(two_phase, !one_step, "{:?}", steps.0.lock());
    for row in ROWS {
        assert_eq!(value(&c, row).await, Some(Bytes::from(row)), "{row}");
    }
    assert!(c.locks(TABLE).await.unwrap().is_empty());
    let notified = c
        .scan_notifications(TABLE, Bound::Unbounded, Bound::Unbounded, None)
        .await
        .unwrap();
    assert!(
        notified.iter().any(|n| n.row.as_ref() == b"watched"
            && n.columns
                .iter()
                .any(|(_, v)| v.iter().any(|v| v.ts == info.start_ts))),
        "{notified:?}"
    );

    // A crash at each step: before the commit point nothing, after it everything.
    for (step, committed) in [
        (CommitStep::BeforeCommitPoint, false),
        (CommitStep::AfterCommitPoint, true),
    ] {
        let rows: Vec<String> = ROWS.iter().map(|r| format!("{r}-{step:?}")).collect();
        let mut t = c.begin().await.unwrap();
        for row in &rows {
            t.set(TABLE, row, "v", "crash").unwrap();
        }
        t.set_commit_hook(Some(Arc::new(OnePhase(CrashAt(step)))));
        let err = t.commit().await.expect_err("crash injected");
        assert!(
            matches!(err, Error::InjectedCrash(s) if s == step),
            "{err:?}"
        );
        if one_step {
            assert!(c.locks(TABLE).await.unwrap().is_empty(), "{step:?}");
        } else {
            // Two-phase commit: resolve what the crash left.
            let _ = c.resolve_locks(TABLE).await;
        }
        for row in &rows {
            let expected = committed.then(|| Bytes::from("crash"));
            assert_eq!(value(&c, row).await, expected, "{step:?} {row}");
        }
    }

    // The answer lost once, then on every attempt: committed exactly once all the same.
    for times in [1, 3] {
        store.lose_answers(times, Box::new(is_prewrite));
        let rows: Vec<String> = ROWS.iter().map(|r| format!("{r}-lost{times}")).collect();
        let mut t = c.begin().await.unwrap();
        for row in &rows {
            t.set(TABLE, row, "v", "lost").unwrap();
        }
        let info = t.commit().await.expect("commit survives lost answers");
        let read = c.begin().await.unwrap();
        for row in &rows {
            let versioned = read.get_versioned(TABLE, row, "v").await.unwrap();
            assert_eq!(versioned.value, Some(Bytes::from("lost")), "{row}");
            assert_eq!(versioned.commit_ts, info.commit_ts, "{row}");
        }
    }
}

/// The race of [`reader_admitted_before_the_write_keeps_its_snapshot`] for a write of two rows:
/// a reader that starts after the writer took its commit timestamp and reads one row before the
/// write lands keeps its snapshot of both rows; the writer falls back to two phases.
pub async fn several_rows_reader_admitted_first_keeps_its_snapshot<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let c = client(&store).await;
    let mut seed = c.begin().await.unwrap();
    seed.set(TABLE, "x", "v", "old").unwrap();
    seed.set(TABLE, "y", "v", "old").unwrap();
    seed.commit().await.unwrap();
    let one_step = atomic_rows(&*store, 2);
    let (hook, mut reached, release) = PauseAt::new(vec![CommitStep::BeforeCommitPoint], None);
    let mut writer = c.begin().await.unwrap();
    writer.set(TABLE, "x", "v", "new").unwrap();
    writer.set(TABLE, "y", "v", "new").unwrap();
    writer.set_commit_hook(Some(Arc::new(OnePhase(hook))));
    let commit = tokio::spawn(writer.commit());
    assert_eq!(reached.recv().await, Some(CommitStep::BeforeCommitPoint));
    let reader = c.begin().await.unwrap();
    let read_both = || async {
        let mut seen = Vec::new();
        for row in ["x", "y"] {
            seen.push(reader.get(TABLE, row, "v").await.unwrap());
        }
        seen
    };
    let before = read_racing_the_commit(one_step, &mut reached, &release, read_both).await;
    let info = commit.await.unwrap().expect("the writer still commits");
    let after = read_both().await;
    let commit_ts = info.commit_ts.unwrap();
    let expected = if commit_ts <= reader.start_ts() {
        vec![Some(Bytes::from("new")); 2]
    } else {
        vec![Some(Bytes::from("old")); 2]
    };
    assert_eq!(
        before,
        expected,
        "commit at {commit_ts}, reader at {}",
        reader.start_ts()
    );
    assert_eq!(after, expected, "the reader's snapshot changed");
    if one_step {
        assert!(
            commit_ts > reader.start_ts(),
            "the one-step attempt landed at {commit_ts}"
        );
    }
    assert!(c.locks(TABLE).await.unwrap().is_empty());
}
