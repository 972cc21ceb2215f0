//! Batched reads ([`crate::Transaction::get_many`] over [`RowStore::read_rows`]): a batch
//! answers exactly what single reads answer at the same snapshot — across rows and tables, for
//! data versions and inline values, deletes, rollback records, commits after the snapshot,
//! missing cells, repeated cells and the transaction's own writes, whichever way the store
//! reads — and cells behind the locks of live, dead and committed transactions are resolved as
//! single reads resolve them.

use std::sync::Arc;

use bytes::Bytes;

use super::hooks::{CrashAt, PauseAt};
use super::{StoreFactory, client, patient_client};
use crate::fault::CommitStep;
use crate::records::SHORT_VALUE_MAX;
use crate::store::{Family, FamilyRead, ReadRow, RowStore};

/// A value too long to ride inline in the write record.
fn big(tag: &str) -> Bytes {
    Bytes::from(format!("{tag}:{}", "x".repeat(SHORT_VALUE_MAX * 4)))
}

/// `RowStore::read_rows` answers each request as `read_row` does, in order, repeated rows
/// included; an empty batch answers nothing.
pub async fn read_rows_answers_each_row_as_read_row<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let c = client(&store).await;
    let mut t = c.begin().await.unwrap();
    t.set("rr", "a", "x", "1").unwrap();
    t.set("rr", "a", "y", big("2")).unwrap();
    t.set("rr2", "b", "x", "3").unwrap();
    t.commit().await.unwrap();
    // The raw rows are compared: no secondary may still be committing between the reads.
    c.finish_background_commits().await;
    let request = |table: &str, row: &str| ReadRow {
        table: Bytes::copy_from_slice(table.as_bytes()),
        row: Bytes::copy_from_slice(row.as_bytes()),
        reads: vec![
            FamilyRead::all(Family::Write),
            FamilyRead::all(Family::Data).max_versions(1),
        ],
        snapshot_ts: None,
    };
    let requests = vec![
        request("rr", "a"),
        request("rr2", "b"),
        request("rr", "missing"),
        request("rr", "a"),
    ];
    let mut singles = Vec::new();
    for r in &requests {
        singles.push(store.read_row(r.clone()).await.unwrap());
    }
    let batch = store.read_rows(requests).await.unwrap();
    assert_eq!(batch, singles);
    assert!(!batch[0][0].is_empty() && batch[2].iter().all(Vec::is_empty));
    assert!(store.read_rows(Vec::new()).await.unwrap().is_empty());
}

/// `get_many` gives what `get` gives for every cell, with and without point reads.
pub async fn get_many_agrees_with_get<F: StoreFactory>(factory: &F) {
    let store = Arc::new(super::faulty::FaultyStore::new(factory.open().await));
    let c = client(&store).await;
    let mut t = c.begin().await.unwrap();
    t.set("gm", "row", "big", big("old")).unwrap();
    t.set("gm", "row", "short", "old").unwrap();
    t.set("gm", "row", "gone", "here").unwrap();
    t.set("gm", "row", "rb", big("committed")).unwrap();
    t.set("gm", "other", "short", "other").unwrap();
    t.set("gm2", "row", "short", "in another table").unwrap();
    t.commit().await.unwrap();
    let mut t = c.begin().await.unwrap();
    t.set("gm", "row", "big", big("new")).unwrap();
    t.delete("gm", "row", "gone").unwrap();
    t.commit().await.unwrap();
    // Three rolled-back writes over `rb` (more rollback records than a read prefetches).
    for _ in 0..3 {
        let mut t = c.begin().await.unwrap();
        t.set("gm", "row", "rb", big("rolled back")).unwrap();
        t.set("gm", "other", "rb", "rolled back").unwrap();
        t.set_commit_hook(Some(Arc::new(CrashAt(CommitStep::AfterPrewrites))));
        assert!(t.commit().await.is_err());
        super::fault_cases::resolve_all(&c, "gm").await;
    }
    let mut reader = c.begin().await.unwrap();
    let mut later = c.begin().await.unwrap();
    later.set("gm", "row", "short", "later").unwrap();
    later.set("gm", "new-row", "short", "later").unwrap();
    later.commit().await.unwrap();
    // The reader's own write answers for itself.
    reader.set("gm", "other", "mine", "buffered").unwrap();

    let cells: Vec<(&str, &str, &str)> = vec![
        ("gm", "row", "big"),
        ("gm", "row", "short"),
        ("gm", "row", "gone"),
        ("gm", "row", "rb"),
        ("gm", "row", "never"),
        ("gm", "other", "short"),
        ("gm", "other", "rb"),
        ("gm", "other", "mine"),
        ("gm", "new-row", "short"),
        ("gm2", "row", "short"),
        ("gm", "row", "big"),
    ];
    let inner = store.limits();
    for point_reads in [false, true] {
        store.set_limits(Some(inner.with_prefers_point_reads(point_reads)));
        let mut singles = Vec::new();
        for (table, row, column) in &cells {
            singles.push(reader.get(table, row, column).await.unwrap());
        }
        let batch = reader.get_many(cells.iter().copied()).await.unwrap();
        assert_eq!(batch, singles, "point reads {point_reads}");
        assert_eq!(
            batch,
            vec![
                Some(big("new")),
                Some(Bytes::from("old")),
                None,
                Some(big("committed")),
                None,
                Some(Bytes::from("other")),
                None,
                Some(Bytes::from("buffered")),
                None,
                Some(Bytes::from("in another table")),
                Some(big("new")),
            ],
            "point reads {point_reads}"
        );
    }
    store.set_limits(None);
    let none: Vec<(&str, &str, &str)> = Vec::new();
    assert!(reader.get_many(none).await.unwrap().is_empty());
    // Bad input is the error `get` gives, before anything is read.
    assert!(reader.get_many([("", "r", "c")]).await.is_err());
}

/// Cells behind locks in one batch: a dead transaction's (rolled back), a transaction whose
/// primary committed (rolled forward), and a live one's, which the batch waits out without
/// reading around it.
pub async fn get_many_resolves_locks_per_cell<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let c = client(&store).await;
    let mut t = c.begin().await.unwrap();
    for row in ["a", "b", "c", "d", "plain"] {
        t.set("gl", row, "v", "old").unwrap();
    }
    t.commit().await.unwrap();
    // Dead: crashed after its prewrites (a primary, b secondary): rolled back once its TTL ends.
    let mut dead = c.begin().await.unwrap();
    dead.set("gl", "a", "v", "dead").unwrap();
    dead.set("gl", "b", "v", "dead").unwrap();
    dead.set_commit_hook(Some(Arc::new(CrashAt(CommitStep::AfterPrewrites))));
    assert!(dead.commit().await.is_err());
    // Committed: crashed after its commit point (c primary, d secondary): rolled forward.
    let mut committed = c.begin().await.unwrap();
    committed.set("gl", "c", "v", big("committed")).unwrap();
    committed.set("gl", "d", "v", "committed").unwrap();
    committed.set_commit_hook(Some(Arc::new(CrashAt(CommitStep::AfterCommitPoint))));
    assert!(committed.commit().await.is_err());
    assert!(!c.locks("gl").await.unwrap().is_empty());

    let reader = c.begin().await.unwrap();
    let cells = [
        ("gl", "a", "v"),
        ("gl", "b", "v"),
        ("gl", "c", "v"),
        ("gl", "d", "v"),
        ("gl", "plain", "v"),
        ("gl", "none", "v"),
    ];
    let batch = reader.get_many(cells).await.unwrap();
    assert_eq!(
        batch,
        vec![
            Some(Bytes::from("old")),
            Some(Bytes::from("old")),
            Some(big("committed")),
            Some(Bytes::from("committed")),
            Some(Bytes::from("old")),
            None,
        ]
    );
    let mut singles = Vec::new();
    for (table, row, column) in cells {
        singles.push(reader.get(table, row, column).await.unwrap());
    }
    assert_eq!(batch, singles);

    // Live: a writer paused after its prewrites; a reader that started after its locks waits
    // for it in the batch, then reads below its commit.
    let owner = patient_client(&store).await;
    let mut live = owner.begin().await.unwrap();
    live.set("gl", "plain", "v", "live").unwrap();
    live.set("gl", "e", "v", "live").unwrap();
    let (hook, mut reached, release) = PauseAt::new(vec![CommitStep::AfterPrewrites], None);
    live.set_commit_hook(Some(hook));
    let pending = tokio::spawn(live.commit());
    reached.recv().await.unwrap();
    let reader = owner.begin().await.unwrap();
    let waits_before = owner.metrics().lock_waits;
    let read = tokio::spawn(async move {
        reader
            .get_many([("gl", "a", "v"), ("gl", "plain", "v"), ("gl", "e", "v")])
            .await
    });
    while owner.metrics().lock_waits == waits_before && !read.is_finished() {
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    assert!(
        !read.is_finished(),
        "a batch read around a lock at or below its timestamp"
    );
    release.notify_one();
    pending.await.unwrap().unwrap();
    assert_eq!(
        read.await.unwrap().unwrap(),
        vec![Some(Bytes::from("old")), Some(Bytes::from("old")), None]
    );
    let after = owner.begin().await.unwrap();
    assert_eq!(
        after
            .get_many([("gl", "plain", "v"), ("gl", "e", "v")])
            .await
            .unwrap(),
        vec![Some(Bytes::from("live")), Some(Bytes::from("live"))]
    );
}

/// Prefetching (`Prefetch::Always`): once transactions have read `title` and `body` of a table's
/// rows together, reading `title` fetches `body` too, into the transaction's cache. The cached
/// value is the snapshot's (a commit after the start timestamp is not seen), a companion behind
/// a live lock is not waited for (the read asked for answers at once) and is left to its own
/// read, and the transaction's own writes win over the cache.
pub async fn prefetch_serves_only_the_snapshot<F: StoreFactory>(factory: &F) {
    let store = factory.open().await;
    let config = super::fast_config()
        .with_prefetch(crate::Prefetch::Always)
        .with_lock_wait_timeout(std::time::Duration::from_millis(300));
    let c = super::client_with(&store, config).await;
    let writer = patient_client(&store).await;
    let mut seed = writer.begin().await.unwrap();
    for r in 0..8 {
        let row = format!("r{r}");
        seed.set("pf", &row, "title", format!("title {r}")).unwrap();
        seed.set("pf", &row, "body", big("old")).unwrap();
        seed.set("pf", &row, "hash", "h").unwrap();
    }
    seed.commit().await.unwrap();
    writer.finish_background_commits().await;

    // Learn: title and body are read together (hash is not).
    for r in 0..4 {
        let t = c.begin().await.unwrap();
        let row = format!("r{r}");
        assert!(t.get("pf", &row, "title").await.unwrap().is_some());
        assert_eq!(t.get("pf", &row, "body").await.unwrap(), Some(big("old")));
    }
    let before = c.metrics();

    // A commit after the snapshot is not what the cache serves.
    let t = c.begin().await.unwrap();
    let mut newer = writer.begin().await.unwrap();
    newer.set("pf", "r5", "body", big("new")).unwrap();
    newer.commit().await.unwrap();
    assert_eq!(
        t.get("pf", "r5", "title").await.unwrap(),
        Some(Bytes::from("title 5"))
    );
    let after_title = c.metrics();
    assert_eq!(
        after_title.prefetched_cells,
        before.prefetched_cells + 1,
        "body fetched with title"
    );
    assert_eq!(t.get("pf", "r5", "body").await.unwrap(), Some(big("old")));
    assert_eq!(c.metrics().prefetch_hits, before.prefetch_hits + 1);
    drop(t);

    // A companion behind a live lock below the snapshot: the title read does not wait for it.
    let (hook, mut reached, release) = PauseAt::new(vec![CommitStep::AfterPrewrites], None);
    let mut held = writer.begin().await.unwrap();
    held.set("pf", "r6", "body", big("held")).unwrap();
    held.set("pf", "r7", "body", big("held")).unwrap();
    held.set_commit_hook(Some(hook));
    let held = tokio::spawn(held.commit());
    assert_eq!(reached.recv().await, Some(CommitStep::AfterPrewrites));
    let t = c.begin().await.unwrap();
    let prefetched = c.metrics().prefetched_cells;
    assert_eq!(
        t.get("pf", "r6", "title").await.unwrap(),
        Some(Bytes::from("title 6")),
        "answered without waiting for the body's lock"
    );
    assert_eq!(
        c.metrics().prefetched_cells,
        prefetched,
        "the locked body is not cached"
    );
    release.notify_one();
    held.await.unwrap().unwrap();
    // Its own read resolves the lock: committed after the snapshot, so not seen.
    assert_eq!(t.get("pf", "r6", "body").await.unwrap(), Some(big("old")));
    drop(t);

    // The transaction's own write wins over anything fetched.
    let mut t = c.begin().await.unwrap();
    t.set("pf", "r7", "body", big("mine")).unwrap();
    assert!(t.get("pf", "r7", "title").await.unwrap().is_some());
    assert_eq!(t.get("pf", "r7", "body").await.unwrap(), Some(big("mine")));
    let many = t
        .get_many([("pf", "r7", "body"), ("pf", "r7", "title")])
        .await
        .unwrap();
    assert_eq!(many[0], Some(big("mine")));
    assert_eq!(many[1], Some(Bytes::from("title 7")));
}
