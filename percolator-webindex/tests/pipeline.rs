//! The web index on every in-process backend: a synthetic crawl with mirrors and two recrawls,
//! a gzip WARC file, and a copy that names its original with `<link rel="canonical">`, each
//! checked against every invariant of the index (`check`) and by queries.
//!
//! The cases are plain async functions over a `StoreFactory` (`common/pipeline_cases.rs`);
//! `backend_tests!` instantiates them for mem, sled, fjall and the TiKV double, and
//! `pipeline_etcd.rs` for an etcd cluster.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "common/pipeline_cases.rs"]
mod cases;

use bytes::Bytes;
use cases::{assert_invariants, load, search, urls};
use percolator_core::Columns;
use percolator_observers::conformance::{idle, start, writer};
use percolator_webindex::{self as webindex, synthetic::SyntheticCrawl};

macro_rules! backend_tests {
    ($($backend:ident => $factory:expr),+ $(,)?) => {
        $(
            mod $backend {
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn webindex_synthetic_with_recrawls() {
                    super::cases::webindex_synthetic_with_recrawls(&$factory).await;
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn webindex_declared_canonical() {
                    super::cases::webindex_declared_canonical(&$factory).await;
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn webindex_warc() {
                    super::cases::webindex_warc(&$factory).await;
                }
            }
        )+
    };
}

backend_tests!(
    mem => percolator_backend_mem::conformance::MemFactory,
    sled => percolator_backend_sled::conformance::SledFactory::default(),
    fjall => percolator_backend_fjall::conformance::FjallFactory::default(),
    tikv_fake => percolator_backend_tikv::conformance::FakeTikvFactory,
);

/// A mem store with etcd-like limits: `max_row_ops` operations per row mutation, 400 rows
/// per transaction.
fn tight_store(
    max_row_ops: usize,
) -> std::sync::Arc<
    percolator_core::conformance::faulty::FaultyStore<percolator_backend_mem::MemStore>,
> {
    use percolator_core::StoreLimits;
    use percolator_core::conformance::faulty::FaultyStore;
    use std::sync::Arc;

    let store = Arc::new(FaultyStore::new(Arc::new(
        percolator_backend_mem::MemStore::new(),
    )));
    let limits = percolator_backend_mem::MEM_LIMITS;
    store.set_limits(Some(
        StoreLimits::new(limits.max_key_bytes, limits.max_value_bytes, 400)
            .with_tracks_snapshot_reads(true)
            .with_max_row_ops(max_row_ops),
    ));
    store
}

/// On a store with tight limits (few operations per row mutation, few rows per transaction, as
/// etcd's `--max-txn-ops` or TiKV's batches), the inverter splits each shard's queue into
/// chunks that fit: nothing fails or is parked, every invariant holds, and shards get several
/// chunks. With batches sized to the whole queue, the commits fail with `TooLarge`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn inverter_batches_fit_tight_store_limits() {
    use percolator_webindex::schema::{CHUNK_CLUSTERS, INDEX_DOCS, INDEX_SHARDS};

    let store = tight_store(41);
    let runtime = start(&store, webindex::observers(None)).await;
    let client = writer(&store, &webindex::observed_columns()).await;
    let crawl = SyntheticCrawl::new(160, 5);
    load(&client, crawl.initial().collect()).await;
    idle(&runtime).await;
    let stats = runtime.shutdown().await.unwrap();
    assert_eq!((stats.failures, stats.parked), (0, 0), "{stats:?}");
    let summary = assert_invariants(&client).await;
    assert_eq!(summary.processed, 160);
    let txn = client.begin().await.unwrap();
    let chunks = txn
        .scan::<&str>(
            INDEX_DOCS,
            ..,
            Columns::Only(vec![Bytes::from_static(CHUNK_CLUSTERS)]),
        )
        .await
        .unwrap()
        .len();
    // 160 pages in 4 shards, at most 19 clusters a chunk (41 operations per row): at least
    // 3 chunks in each shard, so more than twice as many chunks as shards.
    assert!(chunks as u64 > 2 * INDEX_SHARDS, "{chunks} chunks");
}

/// Every chunk lists the terms with their own posting cell, and only those (the rest are in
/// buckets): removing a recrawled page's postings reads a term's own cell only when listed.
/// A chunk without a list (written before there were lists) has each term's own cell tried
/// first, as before: recrawls over such chunks still leave every invariant holding.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunks_list_their_own_terms_and_removals_work_without_the_list() {
    use percolator_webindex::postings::{OwnTerms, RareChunk, is_rare_row};
    use percolator_webindex::schema::{CHUNK_CLUSTERS, CHUNK_OWN_TERMS, INDEX, INDEX_DOCS};
    use std::collections::BTreeSet;
    use std::sync::Arc;

    let store = Arc::new(percolator_backend_mem::MemStore::new());
    let runtime = start(&store, webindex::observers(None)).await;
    let client = writer(&store, &webindex::observed_columns()).await;
    let crawl = SyntheticCrawl::new(160, 13);
    load(&client, crawl.initial().collect()).await;
    idle(&runtime).await;
    assert_invariants(&client).await;

    let txn = client.begin().await.unwrap();
    let docs = txn
        .scan::<&str>(INDEX_DOCS, .., Columns::All)
        .await
        .unwrap();
    let directories: BTreeSet<Bytes> = docs
        .iter()
        .filter(|item| item.column == CHUNK_CLUSTERS)
        .map(|item| item.row.clone())
        .collect();
    let lists: Vec<(Bytes, OwnTerms)> = docs
        .iter()
        .filter(|item| item.column == CHUNK_OWN_TERMS)
        .map(|item| (item.row.clone(), OwnTerms::decode(&item.value).unwrap()))
        .collect();
    assert_eq!(
        lists
            .iter()
            .map(|(c, _)| c.clone())
            .collect::<BTreeSet<_>>(),
        directories,
        "one list per chunk"
    );
    // Every own cell is listed in its chunk, and no term of a bucket is.
    let list_of = |chunk: &Bytes| &lists.iter().find(|(c, _)| c == chunk).unwrap().1;
    let (mut own_cells, mut bucket_terms) = (0, 0);
    for item in txn.scan::<&str>(INDEX, .., Columns::All).await.unwrap() {
        let own = list_of(&item.column);
        if is_rare_row(&item.row) {
            for term in RareChunk::decode(&item.value).unwrap().terms.keys() {
                bucket_terms += 1;
                assert!(!own.contains(term), "{term} is in a bucket and listed");
            }
        } else {
            own_cells += 1;
            let term = std::str::from_utf8(&item.row).unwrap();
            assert!(own.contains(term), "{term} has its own cell, unlisted");
        }
    }
    assert!(
        own_cells > 0 && bucket_terms > 0,
        "{own_cells} / {bucket_terms}"
    );
    drop(txn);

    // A recrawl removes old postings through the lists.
    load(&client, crawl.recrawl(1, 0.5)).await;
    idle(&runtime).await;
    assert_invariants(&client).await;

    // Chunks without lists: a recrawl still removes every old posting.
    let mut txn = client.begin().await.unwrap();
    for item in txn
        .scan::<&str>(
            INDEX_DOCS,
            ..,
            Columns::Only(vec![Bytes::from_static(CHUNK_OWN_TERMS)]),
        )
        .await
        .unwrap()
    {
        txn.delete(INDEX_DOCS, &item.row, CHUNK_OWN_TERMS).unwrap();
    }
    txn.commit().await.unwrap();
    load(&client, crawl.recrawl(2, 0.5)).await;
    idle(&runtime).await;
    assert_invariants(&client).await;
    let stats = runtime.shutdown().await.unwrap();
    assert_eq!((stats.failures, stats.parked), (0, 0), "{stats:?}");
}

/// A `documents:terms` cell in another form than the document processor writes (its lines out
/// of order, CRLF line ends, a malformed line) is exported byte for byte and indexed as
/// `PageTerms::decode` reads it: the inverter's in-place reading declines such a cell and reads
/// its decoded form instead. The check compares every posting with the decoded cell.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terms_cells_in_another_form_are_indexed_as_decoded() {
    use percolator_webindex::pipeline::canonical_of;
    use percolator_webindex::schema::{CANONICAL, CLUSTER, CLUSTERS, DOCUMENTS, TERMS};
    use percolator_webindex::terms::{PageTerms, PageTermsView};
    use std::sync::Arc;

    let store = Arc::new(percolator_backend_mem::MemStore::new());
    let runtime = start(&store, webindex::observers(None)).await;
    let client = writer(&store, &webindex::observed_columns()).await;
    let crawl = SyntheticCrawl::new(24, 3);
    load(&client, crawl.initial().collect()).await;
    idle(&runtime).await;
    assert_invariants(&client).await;

    let txn = client.begin().await.unwrap();
    let url = canonical_of(&txn, crawl.url(0).as_bytes()).await.unwrap();
    let hash = txn.get(DOCUMENTS, &url, CLUSTER).await.unwrap().unwrap();
    let terms = txn.get(DOCUMENTS, &url, TERMS).await.unwrap().unwrap();
    let mut page = PageTerms::decode(&terms);
    let first = page.counts.keys().next().unwrap().clone();
    page.counts.get_mut(&first).unwrap().body += 5;
    // Out of order, CRLF, a malformed line, and a term no page has.
    let mut lines: Vec<String> = page
        .counts
        .iter()
        .map(|(t, c)| format!("{t} {} {}", c.title, c.body))
        .collect();
    lines.push("zzqqvariant 0 3".into());
    lines.reverse();
    lines.insert(1, "malformed".into());
    let cell = format!("{}\r\n{}\r\n", page.length + 3, lines.join("\r\n"));
    assert!(PageTermsView::parse(cell.as_bytes()).is_none());
    drop(txn);

    // Writing the cluster's canonical again (same value) runs its exporter.
    let mut txn = client.begin().await.unwrap();
    txn.set(DOCUMENTS, &url, TERMS, Bytes::from(cell)).unwrap();
    txn.set(CLUSTERS, &hash, CANONICAL, url.clone()).unwrap();
    txn.commit().await.unwrap();
    idle(&runtime).await;
    assert_invariants(&client).await;
    let url = String::from_utf8(url.to_vec()).unwrap();
    assert_eq!(urls(&client, "zzqqvariant").await, vec![url.clone()]);
    let hits = search(&client, &first, 1000).await.hits;
    assert!(hits.iter().any(|h| h.url == url), "{first}: {hits:?}");
    let stats = runtime.shutdown().await.unwrap();
    assert_eq!((stats.failures, stats.parked), (0, 0), "{stats:?}");
}

/// A query whose words have more postings than it may read is refused with an error that says
/// so, instead of being ranked at whatever cost; within the budget the same query answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_too_broad_for_its_budget_is_refused() {
    use std::sync::Arc;

    let store = Arc::new(percolator_backend_mem::MemStore::new());
    let runtime = start(&store, webindex::observers(None)).await;
    let client = writer(&store, &webindex::observed_columns()).await;
    load(&client, SyntheticCrawl::new(60, 3).initial().collect()).await;
    idle(&runtime).await;
    runtime.shutdown().await.unwrap();
    let txn = client.begin().await.unwrap();
    let terms = txn
        .get(
            webindex::schema::DOCUMENTS,
            SyntheticCrawl::new(60, 3).url(0),
            webindex::schema::TERMS,
        )
        .await
        .unwrap()
        .unwrap();
    // The first page's most frequent word: on many pages.
    let word = webindex::terms::PageTerms::decode(&terms)
        .counts
        .into_iter()
        .max_by_key(|(_, count)| count.body)
        .unwrap()
        .0;
    let options = webindex::SearchOptions::default();
    let answered = webindex::search(&client, &word, &options).await.unwrap();
    assert!(answered.total > 2, "{word}: {answered:?}");
    let tight = options.max_postings(answered.total - 1);
    match webindex::search(&client, &word, &tight).await {
        Err(percolator_core::Error::InvalidInput(message)) => {
            assert!(message.contains("too broad"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

/// The size folder on a store with few operations per row mutation folds a few deltas a run
/// (3 here) and notifies itself for the rest; each run adds to the whole kept total, so after
/// two rounds of 20 transactions the total is exactly their sum and nothing is left unfolded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn size_folds_keep_the_whole_total_under_tight_limits() {
    use percolator_observers::Observers;
    use percolator_webindex::pipeline::SizeFolder;
    use percolator_webindex::sizes::{self, SizeCounts};

    let store = tight_store(10);
    let mut observers = Observers::new();
    observers.register(SizeFolder).unwrap();
    let runtime = start(&store, observers).await;
    let client = writer(&store, &webindex::observed_columns()).await;
    let one = SizeCounts {
        documents: 1,
        inlinks: 2,
        link_targets: -1,
    };
    for _round in 0..2 {
        for _ in 0..20 {
            let mut txn = client.begin().await.unwrap();
            sizes::add(&mut txn, one).unwrap();
            txn.commit().await.unwrap();
        }
        idle(&runtime).await;
    }
    let stats = runtime.shutdown().await.unwrap();
    assert_eq!((stats.failures, stats.parked), (0, 0), "{stats:?}");
    let txn = client.begin().await.unwrap();
    let kept = sizes::read(&txn).await.unwrap();
    assert_eq!(
        (
            kept.documents,
            kept.inlinks,
            kept.link_targets,
            kept.unfolded
        ),
        (40, 80, -40, 0),
        "{kept:?}"
    );
}
