//! The transaction protocol on top of a store: snapshot isolation, Figure 4, conflicts, retries,
//! bad input and corrupt bytes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;

use super::hooks::PauseAt;
use super::{StoreFactory, client, client_with, fast_config, patient_client};
use crate::error::Error;
use crate::fault::CommitStep;
use crate::records::{LockRecord, SHORT_VALUE_MAX, WriteKind, WriteRecord};
use crate::store::{Columns, Family, FamilyRead, Mutation, ReadRow, RowMutation, RowStore};
use crate::txn::Client;

/// `(column, ts, value)` of every cell of one family of a row.
pub async fn cells<S: RowStore>(
    store: &S,
    table: &str,
    row: &str,
    family: Family,
) -> Vec<(String, u64, Bytes)> {
    store
        .read_row(ReadRow {
            snapshot_ts: None,
            table: Bytes::copy_from_slice(table.as_bytes()),
            row: Bytes::copy_from_slice(row.as_bytes()),
            reads: vec![FamilyRead::all(family)],
        })
        .await
        .unwrap()
        .remove(0)
        .into_iter()
        .map(|c| {
            (
                String::from_utf8_lossy(&c.column).into_owned(),
                c.ts,
                c.value,
            )
        })
        .collect()
}

async fn get<S: RowStore>(
    client: &Client<S>,
    table: &str,
    row: &str,
    column: &str,
) -> Option<Bytes> {
    client
        .begin()
        .await
        .unwrap()
        .get(table, row, column)
        .await
        .unwrap()
}

/// Decoded write records `(commit_ts, record)` of a cell, newest first.
async fn writes<S: RowStore>(store: &S, table: &str, row: &str) -> Vec<(u64, WriteRecord)> {
    cells(store, table, row, Family::Write)
        .await
        .into_iter()
        .map(|(_, ts, v)| (ts, WriteRecord::decode(&v).unwrap()))
        .collect()
}

async fn locks<S: RowStore>(store: &S, table: &str, row: &str) -> Vec<(u64, LockRecord)> {
    cells(store, table, row, Family::Lock)
        .await
        .into_iter()
        .map(|(_, ts, v)| (ts, LockRecord::decode(&v).unwrap()))
        .collect()
}

/// Decoded write records `(commit_ts, record, inline value)` of a cell, newest first.
async fn writes_with_values<S: RowStore>(
    store: &S,
    table: &str,
    row: &str,
) -> Vec<(u64, WriteRecord, Option<Bytes>)> {
    cells(store, table, row, Family::Write)
        .await
        .into_iter()
        .map(|(_, ts, v)| {
            let (record, value) = WriteRecord::decode_with_value(&v).unwrap();
            (ts, record, value)
        })
        .collect()
}

/// The paper's Figure 4 with balances longer than [`SHORT_VALUE_MAX`]: the paper's layout, data
/// at the start timestamp and write records pointing at it.
pub async fn figure4_transfer<F: StoreFactory>(factory: &F) {
    figure4(factory, |amount| {
        Bytes::from(format!("{amount:<width$}", width = SHORT_VALUE_MAX + 1))
    })
    .await;
}

/// The paper's Figure 4 with short balances: no data cells; each lock carries its value and
/// each write record holds it inline (TiKV's short values).
pub async fn figure4_transfer_short_values<F: StoreFactory>(factory: &F) {
    figure4(factory, |amount| Bytes::from(amount.to_owned())).await;
}

/// Bob transfers $7 to Joe; the lock, write and data cells after each step, for balances
/// written as `balance` makes them.
async fn figure4<F: StoreFactory>(factory: &F, balance: impl Fn(&str) -> Bytes) {
    let store = factory.open().await;
    // The paper's order: the primary prewritten first.
    let sequential = fast_config()
        .with_lock_ttl(Duration::from_secs(60))
        .with_parallel_prewrite(false);
    let c = client_with(&store, sequential).await;
    let (bob10, joe2, bob3, joe9) = (balance("$10"), balance("$2"), balance("$3"), balance("$9"));
    let short = bob10.len() <= SHORT_VALUE_MAX;
    // What a put of `value` at `ts` leaves in the data family, and inline in its write record.
    let data_at = |ts: u64, value: &Bytes| (!short).then(|| ("bal".to_owned(), ts, value.clone()));
    let inline = |value: &Bytes| short.then(|| value.clone());
    let put = |start_ts: u64| WriteRecord {
        kind: WriteKind::Put,
        start_ts,
    };
    let mut setup = c.begin().await.unwrap();
    setup.set("bank", "Bob", "bal", bob10.clone()).unwrap();
    setup.set("bank", "Joe", "bal", joe2.clone()).unwrap();
    let s0 = setup.start_ts();
    let c0 = setup.commit().await.unwrap().commit_ts.unwrap();
    c.finish_background_commits().await;

    // 1. Initial state.
    for (row, value) in [("Bob", &bob10), ("Joe", &joe2)] {
        assert_eq!(
            cells(&*store, "bank", row, Family::Data).await,
            data_at(s0, value).into_iter().collect::<Vec<_>>()
        );
        assert!(cells(&*store, "bank", row, Family::Lock).await.is_empty());
        assert_eq!(
            writes_with_values(&*store, "bank", row).await,
            vec![(c0, put(s0), inline(value))]
        );
    }

    let (hook, mut reached, release) = PauseAt::new(
        vec![
            CommitStep::AfterPrimaryPrewrite,
            CommitStep::AfterPrewrites,
            CommitStep::AfterCommitPoint,
        ],
        None,
    );
    let mut txn = c.begin().await.unwrap();
    let s = txn.start_ts();
    assert_eq!(
        txn.get("bank", "Bob", "bal").await.unwrap(),
        Some(bob10.clone())
    );
    assert_eq!(
        txn.get("bank", "Joe", "bal").await.unwrap(),
        Some(joe2.clone())
    );
    txn.set("bank", "Bob", "bal", bob3.clone()).unwrap();
    txn.set("bank", "Joe", "bal", joe9.clone()).unwrap();
    txn.set_commit_hook(Some(hook));
    let commit = tokio::spawn(txn.commit());

    // 2. Bob's balance locked: the primary; the new value written at the start timestamp (or
    //    carried by the lock).
    assert_eq!(reached.recv().await, Some(CommitStep::AfterPrimaryPrewrite));
    assert_eq!(
        cells(&*store, "bank", "Bob", Family::Data).await,
        [data_at(s, &bob3), data_at(s0, &bob10)]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
    );
    let bob_locks = locks(&*store, "bank", "Bob").await;
    assert_eq!(bob_locks.len(), 1);
    assert_eq!(bob_locks[0].0, s);
    assert_eq!(
        &bob_locks[0].1.primary.row[..],
        b"Bob",
        "Bob's lock is the primary"
    );
    assert_eq!(bob_locks[0].1.value, inline(&bob3));
    assert!(locks(&*store, "bank", "Joe").await.is_empty());
    assert_eq!(writes(&*store, "bank", "Bob").await.len(), 1);
    release.notify_one();

    // 3. Joe's balance locked: a secondary pointing at the primary.
    assert_eq!(reached.recv().await, Some(CommitStep::AfterPrewrites));
    let joe_locks = locks(&*store, "bank", "Joe").await;
    assert_eq!(joe_locks.len(), 1);
    assert_eq!(joe_locks[0].0, s);
    assert_eq!(
        (
            &joe_locks[0].1.primary.row[..],
            &joe_locks[0].1.primary.column[..]
        ),
        (&b"Bob"[..], &b"bal"[..])
    );
    assert_eq!(joe_locks[0].1.value, inline(&joe9));
    assert_eq!(
        cells(&*store, "bank", "Joe", Family::Data).await.first(),
        data_at(s, &joe9).as_ref()
    );
    release.notify_one();

    // 4. Commit point: Bob's lock replaced by a write record at the commit timestamp.
    assert_eq!(reached.recv().await, Some(CommitStep::AfterCommitPoint));
    assert!(locks(&*store, "bank", "Bob").await.is_empty());
    let bob_writes = writes_with_values(&*store, "bank", "Bob").await;
    assert_eq!(bob_writes.len(), 2);
    let commit_ts = bob_writes[0].0;
    assert!(
        commit_ts > s,
        "commit_ts {commit_ts} must exceed start_ts {s}"
    );
    assert_eq!(bob_writes[0], (commit_ts, put(s), inline(&bob3)));
    assert_eq!(
        locks(&*store, "bank", "Joe").await.len(),
        1,
        "secondary not yet committed"
    );
    assert_eq!(writes(&*store, "bank", "Joe").await.len(), 1);
    release.notify_one();

    // 5. The secondary: write record added, lock removed.
    let info = commit.await.unwrap().unwrap();
    assert_eq!(info.commit_ts, Some(commit_ts));
    c.finish_background_commits().await;
    assert!(locks(&*store, "bank", "Joe").await.is_empty());
    assert_eq!(
        writes_with_values(&*store, "bank", "Joe").await[0],
        (commit_ts, put(s), inline(&joe9))
    );
    assert_eq!(get(&c, "bank", "Bob", "bal").await, Some(bob3));
    assert_eq!(get(&c, "bank", "Joe", "bal").await, Some(joe9));
}

pub async fn snapshot_isolation<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let c = client(&store).await;
    let mut t1 = c.begin().await.unwrap();
    t1.set("a", "r", "c", "v1").unwrap();
    t1.set("b", "r", "c", "v1").unwrap(); // cross-table
    t1.commit().await.unwrap();

    let old = c.begin().await.unwrap();
    let mut t2 = c.begin().await.unwrap();
    t2.set("a", "r", "c", "v2").unwrap();
    t2.delete("b", "r", "c").unwrap();
    // Read your own writes.
    assert_eq!(
        t2.get("a", "r", "c").await.unwrap(),
        Some(Bytes::from("v2"))
    );
    assert_eq!(t2.get("b", "r", "c").await.unwrap(), None);
    t2.commit().await.unwrap();
    // A snapshot taken before t2 committed keeps seeing the old values.
    assert_eq!(
        old.get("a", "r", "c").await.unwrap(),
        Some(Bytes::from("v1"))
    );
    assert_eq!(
        old.get("b", "r", "c").await.unwrap(),
        Some(Bytes::from("v1"))
    );
    // A later snapshot sees the new ones.
    assert_eq!(get(&c, "a", "r", "c").await, Some(Bytes::from("v2")));
    assert_eq!(get(&c, "b", "r", "c").await, None);
    assert_eq!(get(&c, "a", "missing", "c").await, None);
    // Read-only commit takes no commit timestamp.
    assert_eq!(old.commit().await.unwrap().commit_ts, None);
}

pub async fn write_write_conflict<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let c = patient_client(&store).await;
    let mut t1 = c.begin().await.unwrap();
    let mut t2 = c.begin().await.unwrap();
    t1.set("t", "x", "c", "from t1").unwrap();
    t2.set("t", "x", "c", "from t2").unwrap();
    t2.set("t", "y", "c", "from t2").unwrap();
    t1.commit().await.unwrap();
    let err = t2.commit().await.expect_err("second writer must conflict");
    assert!(matches!(err, Error::Conflict { .. }), "{err:?}");
    assert!(err.is_retryable());
    assert_eq!(get(&c, "t", "x", "c").await, Some(Bytes::from("from t1")));
    assert_eq!(
        get(&c, "t", "y", "c").await,
        None,
        "loser wrote nothing visible"
    );
    assert!(
        c.locks("t").await.unwrap().is_empty(),
        "loser left no locks"
    );

    // Concurrent overlapping commits: the one that prewrites second (while the first holds its lock) conflicts.
    let mut t3 = c.begin().await.unwrap();
    t3.set("t", "z", "c", "3").unwrap();
    let (hook, mut reached, release) = PauseAt::new(vec![CommitStep::AfterPrewrites], None);
    t3.set_commit_hook(Some(hook));
    let pending = tokio::spawn(t3.commit());
    reached.recv().await.unwrap();
    let mut t4 = c.begin().await.unwrap();
    t4.set("t", "z", "c", "4").unwrap();
    assert!(matches!(t4.commit().await, Err(Error::Conflict { .. })));
    release.notify_one();
    pending.await.unwrap().unwrap();
    assert_eq!(get(&c, "t", "z", "c").await, Some(Bytes::from("3")));
}

pub async fn snapshot_scan<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let c = client(&store).await;
    let mut t = c.begin().await.unwrap();
    for i in 0..10 {
        t.set("s", format!("r{i}"), "a", format!("a{i}")).unwrap();
        t.set("s", format!("r{i}"), "b", format!("b{i}")).unwrap();
    }
    t.set("other", "r5", "a", "x").unwrap();
    t.commit().await.unwrap();
    let before = c.begin().await.unwrap();
    let mut t = c.begin().await.unwrap();
    t.delete("s", "r3", "a").unwrap();
    t.set("s", "r4", "a", "changed").unwrap();
    t.commit().await.unwrap();

    let all = before.scan::<&str>("s", .., Columns::All).await.unwrap();
    assert_eq!(all.len(), 20, "old snapshot sees everything as before");
    let mut now = c.begin().await.unwrap();
    let only_a = now.scan("s", "r2".."r6", Columns::one("a")).await.unwrap();
    let got: Vec<(String, String)> = only_a
        .iter()
        .map(|i| {
            (
                String::from_utf8_lossy(&i.row).into(),
                String::from_utf8_lossy(&i.value).into(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("r2".into(), "a2".into()),
            ("r4".into(), "changed".into()),
            ("r5".into(), "a5".into())
        ]
    );
    // Own buffered writes are merged into the scan.
    now.set("s", "r2", "a", "mine").unwrap();
    now.delete("s", "r5", "a").unwrap();
    now.set("s", "r3", "a", "new").unwrap();
    let merged = now.scan("s", "r2"..="r5", Columns::one("a")).await.unwrap();
    let got: Vec<String> = merged
        .iter()
        .map(|i| String::from_utf8_lossy(&i.value).into())
        .collect();
    assert_eq!(got, vec!["mine", "new", "changed"]);
}

pub async fn run_reruns_whole_closure<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let c = client(&store).await;
    // Concurrent read-modify-write increments: a retry that replayed writes instead of re-reading
    // would lose increments.
    const TASKS: u32 = 8;
    const EACH: u32 = 25;
    let runs = Arc::new(AtomicU32::new(0));
    let mut handles = Vec::new();
    for _ in 0..TASKS {
        let c = c.clone();
        let runs = Arc::clone(&runs);
        handles.push(tokio::spawn(async move {
            for _ in 0..EACH {
                let runs = Arc::clone(&runs);
                c.run(move |txn| -> BoxFuture<'_, crate::Result<()>> {
                    let runs = Arc::clone(&runs);
                    Box::pin(async move {
                        runs.fetch_add(1, Ordering::Relaxed);
                        let n = match txn.get("ctr", "row", "n").await? {
                            Some(v) => u32::from_be_bytes(v.as_ref().try_into().unwrap()),
                            None => 0,
                        };
                        tokio::task::yield_now().await;
                        txn.set(
                            "ctr",
                            "row",
                            "n",
                            Bytes::copy_from_slice(&(n + 1).to_be_bytes()),
                        )?;
                        Ok(())
                    })
                })
                .await
                .unwrap();
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    let n = get(&c, "ctr", "row", "n").await.unwrap();
    assert_eq!(
        u32::from_be_bytes(n.as_ref().try_into().unwrap()),
        TASKS * EACH
    );
    assert!(runs.load(Ordering::Relaxed) >= TASKS * EACH);
    // A non-retryable error is returned at once, after one run.
    let calls = AtomicU32::new(0);
    let err = c
        .run(|txn| -> BoxFuture<'_, crate::Result<()>> {
            calls.fetch_add(1, Ordering::Relaxed);
            Box::pin(async move { txn.set("", "r", "c", "v") })
        })
        .await
        .expect_err("empty table");
    assert!(matches!(err, Error::InvalidInput(_)));
    assert_eq!(calls.load(Ordering::Relaxed), 1);
}

pub async fn bad_input_writes_nothing<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let c = client(&store).await;
    let limits = store.limits();
    let mut t = c.begin().await.unwrap();
    t.set("ok", "r1", "c", "fine").unwrap();
    assert!(matches!(
        t.set("", "r", "c", "v"),
        Err(Error::InvalidInput(_))
    ));
    assert!(matches!(
        t.set("__percolator_meta", "oracle", "high_water", "x"),
        Err(Error::InvalidInput(_))
    ));
    assert!(matches!(
        t.get("__percolator_workers", "r", "c").await,
        Err(Error::InvalidInput(_))
    ));
    assert!(matches!(
        t.set("ok", "r", "c", vec![0u8; limits.max_value_bytes + 1]),
        Err(Error::TooLarge { .. })
    ));
    assert!(matches!(
        t.set("ok", vec![b'k'; limits.max_key_bytes], "c", "v"),
        Err(Error::TooLarge { .. })
    ));
    assert!(matches!(
        t.delete("ok", "r", vec![b'c'; limits.max_key_bytes]),
        Err(Error::TooLarge { .. })
    ));
    assert_eq!(t.buffered_writes(), 1, "rejected writes are not buffered");
    drop(t);
    // More rows than one batch may carry: refused before anything is locked.
    let mut wide = c.begin().await.unwrap();
    for i in 0..=limits.max_batch_rows {
        wide.set("wide", i.to_be_bytes(), "c", "v").unwrap();
    }
    assert!(matches!(wide.commit().await, Err(Error::TooLarge { .. })));
    assert!(
        c.locks("wide").await.unwrap().is_empty(),
        "an oversize transaction locked rows"
    );
    // More operations in one row than the store takes in one row mutation (etcd's
    // --max-txn-ops): refused before anything is locked.
    if limits.max_row_ops < 100_000 {
        let mut fat = c.begin().await.unwrap();
        for i in 0..=limits.max_row_ops / 2 {
            fat.set("fat", "r", format!("c{i}"), "v").unwrap();
        }
        assert!(matches!(fat.commit().await, Err(Error::TooLarge { .. })));
        assert!(c.locks("fat").await.unwrap().is_empty());
    }
    assert!(c.locks("ok").await.unwrap().is_empty());
    assert!(
        cells(&*store, "ok", "r1", Family::Data).await.is_empty(),
        "nothing written before commit"
    );

    // Empty, NUL, 0xFF and non-UTF-8 keys and values round-trip through transactions.
    let odd: Vec<Vec<u8>> = vec![
        vec![],
        vec![0],
        vec![0xFF, 0xFF],
        vec![0xC3, 0x28],
        b"12345678".to_vec(),
    ];
    let mut t = c.begin().await.unwrap();
    for (i, k) in odd.iter().enumerate() {
        t.set("odd", k, k, [k.as_slice(), &[i as u8]].concat())
            .unwrap();
    }
    t.set("odd", "empty-value", "c", Bytes::new()).unwrap();
    t.commit().await.unwrap();
    let r = c.begin().await.unwrap();
    for (i, k) in odd.iter().enumerate() {
        assert_eq!(
            r.get("odd", k, k).await.unwrap().unwrap().as_ref(),
            [k.as_slice(), &[i as u8]].concat().as_slice()
        );
    }
    assert_eq!(
        r.get("odd", "empty-value", "c").await.unwrap(),
        Some(Bytes::new())
    );
    assert_eq!(
        r.scan::<&[u8]>("odd", .., Columns::All)
            .await
            .unwrap()
            .len(),
        odd.len() + 1
    );
}

pub async fn corrupt_stored_bytes_are_errors<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let c = client(&store).await;
    let garbage = |family, ts| RowMutation {
        table: Bytes::from("t"),
        row: Bytes::from(if family == Family::Lock {
            "locked"
        } else {
            "written"
        }),
        conditions: vec![],
        mutations: vec![Mutation::Put {
            family,
            column: Bytes::from("c"),
            ts,
            value: Bytes::from_static(b"\x01\xff\x00garbage"),
        }],
    };
    store
        .mutate_rows(vec![garbage(Family::Lock, 0), garbage(Family::Write, 0)])
        .await
        .unwrap();
    let r = c.begin().await.unwrap();
    assert!(matches!(
        r.get("t", "locked", "c").await,
        Err(Error::Corrupt(_))
    ));
    assert!(matches!(
        r.get("t", "written", "c").await,
        Err(Error::Corrupt(_))
    ));
    assert!(matches!(
        r.scan::<&str>("t", .., Columns::All).await,
        Err(Error::Corrupt(_))
    ));
    // A write record pointing at data that is not there is reported, not invented.
    let dangling = RowMutation {
        table: Bytes::from("t2"),
        row: Bytes::from("r"),
        conditions: vec![],
        mutations: vec![Mutation::Put {
            family: Family::Write,
            column: Bytes::from("c"),
            ts: 0,
            value: WriteRecord {
                kind: WriteKind::Put,
                start_ts: 0,
            }
            .encode(),
        }],
    };
    store.mutate_rows(vec![dangling]).await.unwrap();
    assert!(matches!(
        c.begin().await.unwrap().get("t2", "r", "c").await,
        Err(Error::Corrupt(_))
    ));
}

pub async fn reader_never_skips_lower_lock<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let c = patient_client(&store).await;
    let mut t = c.begin().await.unwrap();
    t.set("t", "r", "c", "old").unwrap();
    t.commit().await.unwrap();

    // Writer prewrites and pauses before taking its commit timestamp.
    let mut w = c.begin().await.unwrap();
    w.set("t", "r", "c", "new").unwrap();
    let (hook, mut reached, release) = PauseAt::new(vec![CommitStep::AfterPrewrites], None);
    w.set_commit_hook(Some(hook));
    let pending = tokio::spawn(w.commit());
    reached.recv().await.unwrap();

    // A reader that started after the lock: it must wait for the writer, not read around it.
    let reader = c.begin().await.unwrap();
    let waits_before = c.metrics().lock_waits;
    let read = tokio::spawn(async move { reader.get("t", "r", "c").await });
    // The reader meets the lock and waits (it never reads around it): wait for that, then it
    // must still be waiting, since the writer has not gone on.
    while c.metrics().lock_waits == waits_before && !read.is_finished() {
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    assert!(
        !read.is_finished(),
        "reader skipped a lock at or below its timestamp"
    );
    release.notify_one();
    pending.await.unwrap().unwrap();
    // The writer committed above the reader's timestamp, so the reader sees the old value.
    assert_eq!(read.await.unwrap().unwrap(), Some(Bytes::from("old")));
    assert_eq!(get(&c, "t", "r", "c").await, Some(Bytes::from("new")));
}

pub async fn committed_but_not_durable_is_not_retried<F: StoreFactory>(factory: &F) {
    use super::faulty::FaultyStore;
    let store = Arc::new(FaultyStore::new(factory.open().await));
    let c = super::client_with(&store, super::fast_config().with_durable_commits(true)).await;
    c.begin().await.unwrap(); // the oracle persists (and syncs) its first window now
    store.fail_syncs(1);
    let runs = AtomicU32::new(0);
    let err = c
        .run(|txn| -> BoxFuture<'_, crate::Result<()>> {
            runs.fetch_add(1, Ordering::Relaxed);
            Box::pin(async move { txn.set("d", "r", "c", "once") })
        })
        .await
        .expect_err("sync failure must be reported");
    assert!(matches!(err, Error::CommittedNotDurable { .. }), "{err:?}");
    assert!(!err.is_retryable());
    assert_eq!(
        runs.load(Ordering::Relaxed),
        1,
        "a committed transaction was run again"
    );
    assert_eq!(
        get(&c, "d", "r", "c").await,
        Some(Bytes::from("once")),
        "the commit stands"
    );
    assert!(c.locks("d").await.unwrap().is_empty());
}

/// Scans read only the newest write records of each column; when those are all rollback
/// records (transactions rolled back after the last commit), the scan still finds the
/// committed value below them.
pub async fn scan_sees_past_rollback_records<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let c = client(&store).await;
    let mut t = c.begin().await.unwrap();
    t.set("sr", "row", "col", "committed").unwrap();
    t.set("sr", "other", "col", "x").unwrap();
    t.commit().await.unwrap();
    for _ in 0..3 {
        let mut t = c.begin().await.unwrap();
        t.set("sr", "row", "col", "rolled back").unwrap();
        t.set("sr", "other", "col", "rolled back").unwrap();
        t.set_commit_hook(Some(Arc::new(super::hooks::CrashAt(
            CommitStep::AfterPrewrites,
        ))));
        assert!(t.commit().await.is_err());
        super::fault_cases::resolve_all(&c, "sr").await;
    }
    let reader = c.begin().await.unwrap();
    let items = reader.scan::<&str>("sr", .., Columns::All).await.unwrap();
    let values: Vec<(&[u8], &[u8])> = items
        .iter()
        .map(|i| (i.row.as_ref(), i.value.as_ref()))
        .collect();
    assert_eq!(
        values,
        vec![(&b"other"[..], &b"x"[..]), (&b"row"[..], &b"committed"[..])]
    );
}

/// Snapshot reads give the same answers whichever way they read
/// ([`crate::StoreLimits::prefers_point_reads`]): the newest write record alone and the data
/// version after it, or the write records with the newest data version speculatively. Covered:
/// data versions and inline values, a delete, newest records that are all rollbacks, a commit
/// after the reader's snapshot, and a scan of the whole row.
pub async fn reads_agree_with_and_without_point_reads<F: StoreFactory>(factory: &F) {
    let store = Arc::new(super::faulty::FaultyStore::new(factory.open().await));
    let c = client(&store).await;
    let big = |tag: &str| Bytes::from(format!("{tag}:{}", "x".repeat(SHORT_VALUE_MAX * 4)));
    let mut t = c.begin().await.unwrap();
    t.set("pr", "row", "big", big("old")).unwrap();
    t.set("pr", "row", "short", "old").unwrap();
    t.set("pr", "row", "gone", "here").unwrap();
    t.set("pr", "row", "rb", big("committed")).unwrap();
    t.commit().await.unwrap();
    let mut t = c.begin().await.unwrap();
    t.set("pr", "row", "big", big("new")).unwrap();
    t.set("pr", "row", "short", "new").unwrap();
    t.delete("pr", "row", "gone").unwrap();
    t.commit().await.unwrap();
    // Newer than the committed value of `rb`: three rolled-back writes (more than a read
    // prefetches), each leaving a rollback record.
    for _ in 0..3 {
        let mut t = c.begin().await.unwrap();
        t.set("pr", "row", "rb", big("rolled back")).unwrap();
        t.set("pr", "other", "rb", "rolled back").unwrap();
        t.set_commit_hook(Some(Arc::new(super::hooks::CrashAt(
            CommitStep::AfterPrewrites,
        ))));
        assert!(t.commit().await.is_err());
        super::fault_cases::resolve_all(&c, "pr").await;
    }
    let reader = c.begin().await.unwrap();
    let mut later = c.begin().await.unwrap();
    later.set("pr", "row", "big", big("later")).unwrap();
    later.set("pr", "row", "short", "later").unwrap();
    later.commit().await.unwrap();

    let expected: Vec<(&str, Option<Bytes>)> = vec![
        ("big", Some(big("new"))),
        ("gone", None),
        ("rb", Some(big("committed"))),
        ("short", Some(Bytes::from("new"))),
    ];
    let inner = store.limits();
    for point_reads in [false, true] {
        store.set_limits(Some(inner.with_prefers_point_reads(point_reads)));
        for (column, value) in &expected {
            assert_eq!(
                reader.get("pr", "row", *column).await.unwrap(),
                *value,
                "get {column}, point reads {point_reads}"
            );
        }
        let scanned: Vec<(Bytes, Bytes)> = reader
            .scan::<&str>("pr", "row".."row\0", Columns::All)
            .await
            .unwrap()
            .into_iter()
            .map(|item| (item.column, item.value))
            .collect();
        let wanted: Vec<(Bytes, Bytes)> = expected
            .iter()
            .filter_map(|(column, value)| Some((Bytes::from(*column), value.clone()?)))
            .collect();
        assert_eq!(scanned, wanted, "scan, point reads {point_reads}");
        // A fresh reader sees the later commit, both ways.
        let now = c.begin().await.unwrap();
        assert_eq!(
            now.get("pr", "row", "big").await.unwrap(),
            Some(big("later")),
            "point reads {point_reads}"
        );
        assert_eq!(
            now.get("pr", "row", "short").await.unwrap(),
            Some(Bytes::from("later"))
        );
    }
    store.set_limits(None);
}

/// `scan_page` pages, concatenated, give exactly what one `scan` gives — deleted cells and the
/// transaction's own writes included — for any page size, and every page reads the
/// transaction's snapshot, not later commits.
pub async fn scan_pages_cover_the_scan<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let c = client(&store).await;
    let mut t = c.begin().await.unwrap();
    for i in 0..23 {
        t.set("p", format!("r{i:02}"), "a", format!("a{i}"))
            .unwrap();
        if i % 3 == 0 {
            t.set("p", format!("r{i:02}"), "b", format!("b{i}"))
                .unwrap();
        }
    }
    t.commit().await.unwrap();
    let mut t = c.begin().await.unwrap();
    for i in [4, 5, 6, 7, 8, 9] {
        t.delete("p", format!("r{i:02}"), "a").unwrap();
    }
    t.commit().await.unwrap();
    let mut reader = c.begin().await.unwrap();
    reader.set("p", "r11", "a", "mine").unwrap();
    reader.set("p", "r99", "a", "beyond").unwrap();
    reader.delete("p", "r12", "a").unwrap();
    // Committed after the reader's snapshot: no page may show it.
    let mut later = c.begin().await.unwrap();
    later.set("p", "r13", "a", "later").unwrap();
    later.commit().await.unwrap();
    for columns in [Columns::All, Columns::one("a")] {
        let whole = reader.scan::<&str>("p", .., columns.clone()).await.unwrap();
        for limit in [1, 4, 7, 100] {
            let mut paged = Vec::new();
            let mut start = std::ops::Bound::Unbounded;
            let mut pages = 0;
            loop {
                let page = reader
                    .scan_page("p", start, columns.clone(), limit)
                    .await
                    .unwrap();
                pages += 1;
                paged.extend(page.items);
                match page.next {
                    Some(next) => start = next,
                    None => break,
                }
            }
            assert_eq!(paged, whole, "row limit {limit}, {columns:?}");
            assert!(pages >= 23 / limit, "{pages} pages of {limit} rows");
        }
    }
    let r13: Vec<_> = reader
        .scan::<&str>("p", "r13".."r14", Columns::All)
        .await
        .unwrap();
    assert_eq!(
        r13[0].value,
        Bytes::from("a13"),
        "the snapshot, not the later commit"
    );
}
