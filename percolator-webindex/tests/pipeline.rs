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
/// buckets), and the buckets with a cell: removing a recrawled page's postings, and compacting a
/// chunk, read only listed cells. A chunk without the lists (written before there were lists)
/// has its postings removed at once, each term's own cell tried first, as before: recrawls over
/// such chunks still leave every invariant holding, and mark no slot dead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunks_list_their_cells_and_removals_work_without_the_lists() {
    use percolator_webindex::postings::{ChunkBuckets, OwnTerms, RareChunk, is_rare_row};
    use percolator_webindex::schema::{
        CHUNK_BUCKETS, CHUNK_CLUSTERS, CHUNK_OWN_TERMS, CORPUS, DEAD_PREFIX, INDEX, INDEX_DOCS,
    };
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
    let bucket_lists: Vec<(Bytes, ChunkBuckets)> = docs
        .iter()
        .filter(|item| item.column == CHUNK_BUCKETS)
        .map(|item| (item.row.clone(), ChunkBuckets::decode(&item.value).unwrap()))
        .collect();
    for chunks in [
        lists
            .iter()
            .map(|(c, _)| c.clone())
            .collect::<BTreeSet<_>>(),
        bucket_lists.iter().map(|(c, _)| c.clone()).collect(),
    ] {
        assert_eq!(chunks, directories, "one list of each per chunk");
    }
    // Every own cell is listed in its chunk, no term of a bucket is, and every bucket with a
    // cell is listed, exactly.
    let list_of = |chunk: &Bytes| &lists.iter().find(|(c, _)| c == chunk).unwrap().1;
    let buckets_of = |chunk: &Bytes| &bucket_lists.iter().find(|(c, _)| c == chunk).unwrap().1;
    let (mut own_cells, mut bucket_terms, mut bucket_cells) = (0, 0, 0);
    for item in txn.scan::<&str>(INDEX, .., Columns::All).await.unwrap() {
        let own = list_of(&item.column);
        if is_rare_row(&item.row) {
            bucket_cells += 1;
            assert!(buckets_of(&item.column).contains_row(&item.row));
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
    assert_eq!(
        bucket_cells,
        bucket_lists.iter().map(|(_, b)| b.len()).sum::<usize>()
    );
    drop(txn);

    // Chunks without lists: a recrawl removes every old posting at once.
    let mut txn = client.begin().await.unwrap();
    for item in docs
        .iter()
        .filter(|item| item.column == CHUNK_OWN_TERMS || item.column == CHUNK_BUCKETS)
    {
        txn.delete(INDEX_DOCS, &item.row, &item.column).unwrap();
    }
    txn.commit().await.unwrap();
    load(&client, crawl.recrawl(1, 0.5)).await;
    idle(&runtime).await;
    assert_invariants(&client).await;
    let dead_lists = |client: &percolator_core::Client<_>| {
        let client = client.clone();
        async move {
            client
                .begin()
                .await
                .unwrap()
                .scan::<&str>(CORPUS, .., Columns::All)
                .await
                .unwrap()
                .into_iter()
                .filter(|item| item.column.starts_with(DEAD_PREFIX))
                .count()
        }
    };
    assert_eq!(dead_lists(&client).await, 0, "removed at once");

    // The chunks the recrawl wrote list their cells: the next recrawl marks slots dead there.
    load(&client, crawl.recrawl(2, 0.5)).await;
    idle(&runtime).await;
    assert_invariants(&client).await;
    assert!(dead_lists(&client).await > 0, "removed lazily");
    let stats = runtime.shutdown().await.unwrap();
    assert_eq!((stats.failures, stats.parked), (0, 0), "{stats:?}");
}

/// The final version of each page of `crawl` after the recrawls `generations` (each with its
/// fraction), in index order.
fn final_pages(crawl: &SyntheticCrawl, generations: &[(u32, f64)]) -> Vec<webindex::CrawledPage> {
    let mut generation_of = vec![0u32; crawl.docs()];
    for &(generation, fraction) in generations {
        for index in crawl.recrawl_indexes(generation, fraction) {
            generation_of[index] = generation;
        }
    }
    (0..crawl.docs())
        .map(|index| crawl.page(index, generation_of[index]))
        .collect()
}

/// What a few queries answer (URLs and scores of the best 20, and the totals): the index's
/// meaning for a reader, whatever its chunks look like.
async fn answers<S: percolator_core::RowStore>(
    client: &percolator_core::Client<S>,
    queries: &[String],
) -> Vec<(String, usize, Vec<(String, u64)>)> {
    let mut out = Vec::new();
    for query in queries {
        let options = webindex::SearchOptions::default()
            .mode(webindex::Mode::Any)
            .limit(20)
            .snippets(false);
        let results = webindex::search(client, query, &options).await.unwrap();
        let hits = results
            .hits
            .into_iter()
            .map(|h| (h.url, h.score.to_bits()))
            .collect();
        out.push((query.clone(), results.total, hits));
    }
    out
}

/// Terms of the index (own rows: frequent in a chunk; bucket entries: rare), a few of each.
async fn some_terms<S: percolator_core::RowStore>(
    client: &percolator_core::Client<S>,
) -> Vec<String> {
    use percolator_webindex::postings::{RareChunk, is_rare_row};
    use percolator_webindex::schema::INDEX;
    let txn = client.begin().await.unwrap();
    let (mut own, mut rare) = (Vec::new(), Vec::new());
    for item in txn.scan::<&str>(INDEX, .., Columns::All).await.unwrap() {
        if is_rare_row(&item.row) {
            if rare.len() < 12 {
                rare.extend(
                    RareChunk::decode(&item.value)
                        .unwrap()
                        .terms
                        .into_keys()
                        .take(1),
                );
            }
        } else if own.len() < 12
            && own.last() != Some(&String::from_utf8_lossy(&item.row).into_owned())
        {
            own.push(String::from_utf8_lossy(&item.row).into_owned());
        }
    }
    own.into_iter().chain(rare).collect()
}

/// Recrawls mark the old postings' slots dead instead of rewriting the cells that hold them;
/// searches skip dead postings (their answers, scores included, are those of an index built
/// from the final pages alone); once half a chunk's slots are dead, the inverter compacts it,
/// and a chunk whose slots are all dead is deleted, cells and lists. Store faults (failed
/// reads, dropped batches, lost commit answers) during the compactions change none of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recrawls_mark_slots_dead_and_compaction_reclaims_them() {
    use percolator_core::conformance::faulty::{FaultRates, FaultyStore, is_commit};
    use percolator_webindex::postings::{ChunkIter, DeadSlots, RareChunk, is_rare_row};
    use percolator_webindex::schema::{CHUNK_CLUSTERS, CORPUS, DEAD_PREFIX, INDEX, INDEX_DOCS};
    use std::collections::{BTreeMap, BTreeSet};
    use std::sync::Arc;

    let store = Arc::new(FaultyStore::new(Arc::new(
        percolator_backend_mem::MemStore::new(),
    )));
    let runtime = start(&store, webindex::observers(None)).await;
    let client = writer(&store, &webindex::observed_columns()).await;
    let crawl = SyntheticCrawl::new(200, 17);
    load(&client, crawl.initial().collect()).await;
    idle(&runtime).await;
    assert_invariants(&client).await;

    // The chunks' dead slots, and the index's postings by chunk and slot.
    let dead_slots = || {
        let client = client.clone();
        async move {
            let txn = client.begin().await.unwrap();
            txn.scan::<&str>(CORPUS, .., Columns::All)
                .await
                .unwrap()
                .into_iter()
                .filter_map(|item| {
                    let chunk = item.column.strip_prefix(DEAD_PREFIX)?;
                    Some((
                        Bytes::copy_from_slice(chunk),
                        DeadSlots::decode(&item.value).unwrap(),
                    ))
                })
                .collect::<BTreeMap<Bytes, DeadSlots>>()
        }
    };
    let posted_slots = || {
        let client = client.clone();
        async move {
            let txn = client.begin().await.unwrap();
            let mut slots: BTreeSet<(Bytes, u32)> = BTreeSet::new();
            for item in txn.scan::<&str>(INDEX, .., Columns::All).await.unwrap() {
                let cells: Vec<Vec<u32>> = if is_rare_row(&item.row) {
                    RareChunk::decode(&item.value)
                        .unwrap()
                        .terms
                        .into_values()
                        .map(|p| p.postings.into_keys().collect())
                        .collect()
                } else {
                    vec![
                        ChunkIter::new(&item.value)
                            .unwrap()
                            .map(|p| p.unwrap().0)
                            .collect(),
                    ]
                };
                slots.extend(
                    cells
                        .into_iter()
                        .flatten()
                        .map(|s| (item.column.clone(), s)),
                );
            }
            slots
        }
    };
    let chunks = || {
        let client = client.clone();
        async move {
            let txn = client.begin().await.unwrap();
            let directories: BTreeSet<Bytes> = txn
                .scan::<&str>(INDEX_DOCS, .., Columns::All)
                .await
                .unwrap()
                .into_iter()
                .filter(|item| item.column == CHUNK_CLUSTERS)
                .map(|item| item.row)
                .collect();
            directories
        }
    };
    let initial_chunks = chunks().await;

    // A third of the pages change: their old slots are dead, their postings still there.
    let mut generations = vec![(1, 0.3)];
    load(&client, crawl.recrawl(1, 0.3)).await;
    idle(&runtime).await;
    assert_invariants(&client).await;
    let dead = dead_slots().await;
    assert!(!dead.is_empty(), "recrawled pages leave dead slots");
    let posted = posted_slots().await;
    let kept: usize = dead
        .iter()
        .map(|(chunk, d)| {
            d.slots()
                .iter()
                .filter(|s| posted.contains(&(chunk.clone(), **s)))
                .count()
        })
        .sum();
    assert!(kept > 0, "dead postings stay until compaction: {dead:?}");
    let queries = some_terms(&client).await;
    assert!(queries.len() >= 12, "{queries:?}");
    let fresh = |generations: Vec<(u32, f64)>| async move {
        let store = Arc::new(percolator_backend_mem::MemStore::new());
        let runtime = start(&store, webindex::observers(None)).await;
        let client = writer(&store, &webindex::observed_columns()).await;
        load(&client, final_pages(&crawl, &generations)).await;
        idle(&runtime).await;
        runtime.shutdown().await.unwrap();
        client
    };
    let reference = fresh(generations.clone()).await;
    assert_eq!(
        answers(&client, &queries).await,
        answers(&reference, &queries).await,
        "searches skip dead postings"
    );

    // Most of the rest change, under store faults: chunks past half dead are compacted.
    generations.push((2, 0.8));
    load(&client, crawl.recrawl(2, 0.8)).await;
    store.set_random_faults(
        FaultRates {
            read_failure: 0.01,
            batch_drop: 0.02,
            ..FaultRates::NONE
        },
        2,
    );
    store.lose_answers(5, Box::new(is_commit));
    // The runtime works under the faults (waiting for it to go idle reads the store too)
    // until every lost answer has been dealt, then without them.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while store.injected().answers_lost < 5 && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    store.clear_random_faults();
    idle(&runtime).await;
    assert_invariants(&client).await;
    let injected = store.injected();
    assert!(
        injected.reads_failed > 0 && injected.batches_dropped > 0 && injected.answers_lost > 0,
        "{injected:?}"
    );
    let dead = dead_slots().await;
    assert!(
        dead.values().all(|d| !d.needs_compaction()),
        "every chunk past half dead was compacted: {dead:?}"
    );
    let reference = fresh(generations.clone()).await;
    assert_eq!(
        answers(&client, &queries).await,
        answers(&reference, &queries).await,
        "compaction changes no answer"
    );

    // Every page changes: every older chunk has all its slots dead, and is deleted.
    let before = chunks().await;
    assert!(
        before.is_superset(&initial_chunks),
        "compacted, not deleted"
    );
    generations.push((3, 1.0));
    load(&client, crawl.recrawl(3, 1.0)).await;
    idle(&runtime).await;
    assert_invariants(&client).await;
    let now = chunks().await;
    assert!(now.is_disjoint(&before), "{now:?} {before:?}");
    assert_eq!(dead_slots().await, BTreeMap::new());
    let posted = posted_slots().await;
    assert!(
        posted.iter().all(|(chunk, _)| now.contains(chunk)),
        "no posting outlives its chunk's directory"
    );
    let reference = fresh(generations.clone()).await;
    assert_eq!(
        answers(&client, &queries).await,
        answers(&reference, &queries).await,
    );
    let stats = runtime.shutdown().await.unwrap();
    assert!(stats.batch_reruns > 0, "{stats:?}");
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
        cut_pages: 1,
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
            kept.cut_pages,
            kept.unfolded
        ),
        (40, 80, -40, 40, 0),
        "{kept:?}"
    );
}

/// Pages are kept whole when they fit the store's largest value compressed, and cut to fit
/// when they do not (as etcd's 1 MiB values cut a page of several megabytes): the load counts
/// the cut page, the kept sizes count it (the check recounts them), what was kept is indexed
/// and what was cut is not. Loading it again is unchanged; deleting it uncounts it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_fit_the_store_value_limit_compressed() {
    use percolator_core::StoreLimits;
    use percolator_core::conformance::faulty::FaultyStore;
    use percolator_webindex::schema::{DOCUMENTS, RAW};
    use std::sync::Arc;

    const MAX_VALUE: usize = 256 * 1024;
    let store = Arc::new(FaultyStore::new(Arc::new(
        percolator_backend_mem::MemStore::new(),
    )));
    let limits = percolator_backend_mem::MEM_LIMITS;
    store.set_limits(Some(
        StoreLimits::new(limits.max_key_bytes, MAX_VALUE, limits.max_batch_rows)
            .with_tracks_snapshot_reads(true),
    ));
    let runtime = start(&store, webindex::observers(None)).await;
    let client = writer(&store, &webindex::observed_columns()).await;

    // 600 KiB of markup that compresses well: over the value limit raw, under it compressed.
    let row = "<tr><td class=\"name\">item</td><td class=\"value\">value</td></tr>\n";
    let medium = format!(
        "<html><body><p>mediumfirst</p><table>{}</table><p>tailbird</p></body></html>",
        row.repeat(600 * 1024 / row.len())
    );
    // 3 MiB of words in a random order: compressed still several times the limit.
    let mut state = 7u64;
    let mut words = String::new();
    while words.len() < 3 << 20 {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1);
        words.push_str(&format!("word{} ", (state >> 33) % 2000));
    }
    let big = format!("<html><body><p>bigfirst</p><p>{words}</p><p>lastword</p></body></html>");
    let pages = vec![
        webindex::CrawledPage {
            url: "http://fit.example/medium".into(),
            html: Bytes::from(medium.clone()),
        },
        webindex::CrawledPage {
            url: "http://fit.example/big".into(),
            html: Bytes::from(big.clone()),
        },
    ];
    let as_results = |pages: Vec<webindex::CrawledPage>| {
        pages.into_iter().map(Ok::<_, std::convert::Infallible>)
    };
    let report = webindex::load_pages(&client, as_results(pages.clone()), 2, |_, _| {})
        .await
        .unwrap();
    assert_eq!((report.loaded, report.cut), (2, 1), "{report:?}");
    let txn = client.begin().await.unwrap();
    for (url, whole) in [
        ("http://fit.example/medium", true),
        ("http://fit.example/big", false),
    ] {
        let cell = txn.get(DOCUMENTS, url, RAW).await.unwrap().unwrap();
        assert!(cell.len() <= MAX_VALUE, "{url}: {}", cell.len());
        let stored = webindex::raw::decode(&cell).unwrap();
        assert_eq!(stored.cut, !whole, "{url}");
        let original = if whole { &medium } else { &big };
        assert!(original.as_bytes().starts_with(&stored.html), "{url}");
        if whole {
            assert_eq!(stored.html.len(), original.len());
        } else {
            // Most of what fits is kept: well over the limit of HTML.
            assert!(stored.html.len() > MAX_VALUE, "{}", stored.html.len());
        }
    }
    drop(txn);
    let again = webindex::load_pages(&client, as_results(pages), 2, |_, _| {})
        .await
        .unwrap();
    assert_eq!((again.unchanged, again.cut), (2, 0), "{again:?}");

    idle(&runtime).await;
    let summary = assert_invariants(&client).await;
    assert_eq!((summary.documents, summary.cut_pages), (2, 1));
    let txn = client.begin().await.unwrap();
    assert_eq!(webindex::sizes::read(&txn).await.unwrap().cut_pages, 1);
    drop(txn);
    for (query, found) in [
        ("tailbird", vec!["http://fit.example/medium"]),
        ("bigfirst", vec!["http://fit.example/big"]),
        ("lastword", vec![]),
    ] {
        assert_eq!(urls(&client, query).await, found, "{query}");
    }

    assert!(
        webindex::delete_page(&client, b"http://fit.example/big")
            .await
            .unwrap()
    );
    idle(&runtime).await;
    let stats = runtime.shutdown().await.unwrap();
    assert_eq!((stats.failures, stats.parked), (0, 0), "{stats:?}");
    let summary = assert_invariants(&client).await;
    assert_eq!((summary.documents, summary.cut_pages), (1, 0));
}
