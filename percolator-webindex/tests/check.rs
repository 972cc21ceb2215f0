//! The invariant check can fail: an index tampered with after the pipeline went idle — an entry
//! deleted, one swapped for a wrong term (same count), one for a slot no cluster holds, a chunk
//! listing a cluster that does not exist, a chunk that does not decode, a cluster left queued —
//! is reported, each time, and the untouched index passes; so are forwarded links tampered with
//! (terms counted wrong, sent to the wrong canonical, a link never forwarded, terms forwarded
//! from a page nothing links to), a posting with other counts, and the summaries (a
//! canonical's anchor terms, the corpus counts) counted wrong.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use bytes::Bytes;
use percolator_backend_mem::MemStore;
use percolator_core::{Client, Columns, ScanItem};
use percolator_observers::conformance::{idle, start, writer};
use percolator_webindex::postings::{
    ChunkBuckets, DeadSlots, Directory, Held, OwnTerms, PostingChunk, RareChunk, is_rare_row,
    rare_row,
};
use percolator_webindex::schema::{
    ANCHOR_TERMS, CHUNK_BUCKETS, CHUNK_CLUSTERS, CHUNK_OWN_TERMS, CORPUS, COUNTS, DEAD_PREFIX,
    FORWARDED, FORWARDED_TO, INDEX, INDEX_DOCS, INDEX_QUEUE, INDEX_SHARDS, LINKS, SUMMARY,
    chunk_key, dead_column, from_column, index_shard, parse_chunk_key, queued_column, shard_key,
};
use percolator_webindex::sizes::{SIZES, SizeCounts, TOTAL};
use percolator_webindex::terms::{AnchorTerms, CorpusCounts};
use percolator_webindex::{self as webindex, synthetic::SyntheticCrawl};

async fn violations(client: &Client<MemStore>) -> Vec<String> {
    webindex::check(client)
        .await
        .unwrap()
        .violations
        .iter()
        .map(ToString::to_string)
        .collect()
}

/// Asserts that `found` is one violation per `(what, row)`, in order, each saying `what` and
/// naming `row` (as the check names rows: `table:"row"`).
fn assert_found(found: &[String], expected: &[(&str, String)]) {
    assert_eq!(found.len(), expected.len(), "{found:?}");
    for (v, (what, row)) in found.iter().zip(expected) {
        assert!(
            v.contains(what) && v.contains(row.as_str()),
            "{what} at {row}: {found:?}"
        );
    }
}

/// A small crawl indexed until idle, its observers stopped, every invariant holding.
async fn indexed() -> Client<MemStore> {
    let store = Arc::new(MemStore::new());
    let runtime = start(&store, webindex::observers(None)).await;
    let client = writer(&store, &webindex::observed_columns()).await;
    let crawl = SyntheticCrawl::new(60, 5);
    let pages = crawl.initial().map(Ok::<_, std::convert::Infallible>);
    webindex::load_pages(&client, pages, 8, |_, _| {})
        .await
        .unwrap();
    idle(&runtime).await;
    runtime.shutdown().await.unwrap();
    assert_eq!(violations(&client).await, Vec::<String>::new());
    client
}

/// Rewrites the postings of `term` in `chunk` with `edit` applied, in one transaction.
async fn edit_chunk(
    client: &Client<MemStore>,
    term: &str,
    chunk: &Bytes,
    edit: impl FnOnce(&mut PostingChunk),
) {
    let mut t = client.begin().await.unwrap();
    let mut postings = t
        .get(INDEX, term, chunk)
        .await
        .unwrap()
        .map(|b| PostingChunk::decode(&b).unwrap())
        .unwrap_or_default();
    edit(&mut postings);
    if postings.is_empty() {
        t.delete(INDEX, term, chunk).unwrap();
    } else {
        t.set(INDEX, term, chunk, postings.encode()).unwrap();
    }
    t.commit().await.unwrap();
}

/// Sets (`Some`) or deletes (`None`) one cell, in one transaction.
/// Writes `cell` back as it was in `table`, and checks that the index is whole again.
async fn put_back(client: &Client<MemStore>, table: &[u8], cell: &ScanItem) {
    set_cell(
        client,
        table,
        &cell.row,
        &cell.column,
        Some(cell.value.clone()),
    )
    .await;
    assert_eq!(violations(client).await, Vec::<String>::new());
}

async fn set_cell(
    client: &Client<MemStore>,
    table: &[u8],
    row: &Bytes,
    column: &[u8],
    value: Option<Bytes>,
) {
    let mut t = client.begin().await.unwrap();
    match value {
        Some(value) => t.set(table, row, column, value).unwrap(),
        None => t.delete(table, row, column).unwrap(),
    }
    t.commit().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tampered_index_is_caught() {
    let client = indexed().await;
    let txn = client.begin().await.unwrap();
    let cells = txn.scan::<&str>(INDEX, .., Columns::All).await.unwrap();
    // Terms frequent in a chunk have cells of their own, rare ones share their bucket's.
    let (buckets, own): (Vec<_>, Vec<_>) = cells.into_iter().partition(|c| is_rare_row(&c.row));
    assert!(
        !own.is_empty() && !buckets.is_empty(),
        "{} {}",
        own.len(),
        buckets.len()
    );
    let cell = own[own.len() / 2].clone();
    let bucket = buckets[buckets.len() / 2].clone();
    let (directories, own_lists): (Vec<_>, Vec<_>) = txn
        .scan::<&str>(INDEX_DOCS, .., Columns::All)
        .await
        .unwrap()
        .into_iter()
        .filter(|item| item.column != CHUNK_BUCKETS)
        .partition(|item| item.column == CHUNK_CLUSTERS);
    drop(txn);
    let term = String::from_utf8(cell.row.to_vec()).unwrap();
    let chunk = cell.column.clone();
    let (slot, posting) = PostingChunk::decode(&cell.value)
        .unwrap()
        .postings
        .into_iter()
        .next()
        .unwrap();

    // An entry deleted.
    edit_chunk(&client, &term, &chunk, |c| {
        c.postings.remove(&slot);
    })
    .await;
    let found = violations(&client).await;
    assert!(
        found
            .iter()
            .any(|v| v.contains("index entries missing for a canonical's terms (1)")),
        "{found:?}"
    );

    // The same slot under a term its document does not have: as many entries as terms.
    edit_chunk(&client, "zzz-not-a-term", &chunk, |c| {
        c.postings.insert(slot, posting);
    })
    .await;
    let found = violations(&client).await;
    assert!(
        found
            .iter()
            .any(|v| v.contains("index entries are not the canonical's terms and counts (1)")),
        "{found:?}"
    );

    // Repaired, but the posting is back with other counts than the document's.
    edit_chunk(&client, "zzz-not-a-term", &chunk, |c| c.postings.clear()).await;
    let mut other = posting;
    other.counts.body += 99;
    edit_chunk(&client, &term, &chunk, |c| {
        c.postings.insert(slot, other);
    })
    .await;
    let found = violations(&client).await;
    assert!(
        found
            .iter()
            .any(|v| v.contains("index entries are not the canonical's terms and counts (1)")),
        "{found:?}"
    );
    edit_chunk(&client, &term, &chunk, |c| {
        c.postings.insert(slot, posting);
    })
    .await;
    assert_eq!(violations(&client).await, Vec::<String>::new());

    // An entry for a slot no cluster holds.
    edit_chunk(&client, &term, &chunk, |c| {
        c.postings.insert(999_999, posting);
    })
    .await;
    let found = violations(&client).await;
    assert!(
        found.iter().any(
            |v| v.contains("posting names an empty or missing slot of its chunk (1)")
                && v.contains("slot 999999")
        ),
        "{found:?}"
    );
    edit_chunk(&client, &term, &chunk, |c| {
        c.postings.remove(&999_999);
    })
    .await;
    assert_eq!(violations(&client).await, Vec::<String>::new());

    // A rare term's entry deleted from its bucket, then the term moved to another bucket,
    // then the bucket made unreadable.
    let rare = RareChunk::decode(&bucket.value).unwrap();
    let (rare_term, rare_postings) = rare.terms.iter().next().unwrap();
    let rare_slot = *rare_postings.postings.keys().next().unwrap();
    let mut edited = rare.clone();
    edited
        .terms
        .get_mut(rare_term)
        .unwrap()
        .postings
        .remove(&rare_slot);
    set_cell(
        &client,
        INDEX,
        &bucket.row,
        &bucket.column,
        Some(edited.encode()),
    )
    .await;
    let found = violations(&client).await;
    assert!(
        found
            .iter()
            .any(|v| v.contains("index entries missing for a canonical's terms (1)")),
        "{found:?}"
    );
    let mut moved = RareChunk::default();
    moved.terms.insert(rare_term.clone(), rare_postings.clone());
    let elsewhere = (0..)
        .map(|i| rare_row(&format!("other{i}")))
        .find(|row| *row != bucket.row)
        .unwrap();
    set_cell(
        &client,
        INDEX,
        &elsewhere,
        &bucket.column,
        Some(moved.encode()),
    )
    .await;
    let found = violations(&client).await;
    assert!(
        found
            .iter()
            .any(|v| v.contains("bucket holds a term of another bucket")
                && v.contains(&format!("(term {rare_term:?})"))),
        "{found:?}"
    );
    set_cell(&client, INDEX, &elsewhere, &bucket.column, None).await;
    put_back(&client, INDEX, &bucket).await;
    set_cell(
        &client,
        INDEX,
        &bucket.row,
        &bucket.column,
        Some(Bytes::from_static(b"\x02\x05ab")),
    )
    .await;
    let found = violations(&client).await;
    assert!(
        found
            .iter()
            .any(|v| v.contains("index cell does not decode")
                && v.contains("index:\"~rare/")
                && v.contains("malformed")),
        "{found:?}"
    );
    put_back(&client, INDEX, &bucket).await;

    // A directory listing a cluster that does not exist, in the wrong shard.
    let listed = &directories[0];
    let mut directory = Directory::decode(&listed.value);
    let (shard, _) = parse_chunk_key(&listed.row).unwrap();
    let ghost = (0..)
        .map(|i| Bytes::from(format!("{i:032x}")))
        .find(|g| index_shard(g) != shard)
        .unwrap();
    directory.clusters.push(ghost.clone());
    let mut t = client.begin().await.unwrap();
    t.set(INDEX_DOCS, &listed.row, CHUNK_CLUSTERS, directory.encode())
        .unwrap();
    t.commit().await.unwrap();
    let found = violations(&client).await;
    let ghost = String::from_utf8(ghost.to_vec()).unwrap();
    assert!(
        found
            .iter()
            .any(|v| v.contains(&format!("cluster \"{ghost}\" is posted in none"))),
        "{found:?}"
    );
    assert!(
        found
            .iter()
            .any(|v| v.contains("chunk lists a cluster of another shard (1)")),
        "{found:?}"
    );
    let mut t = client.begin().await.unwrap();
    t.set(
        INDEX_DOCS,
        &listed.row,
        CHUNK_CLUSTERS,
        listed.value.clone(),
    )
    .unwrap();
    t.commit().await.unwrap();
    assert_eq!(violations(&client).await, Vec::<String>::new());

    // The list of own terms of the term's chunk leaves the term out (a removal would look for
    // its postings in its bucket only), then does not decode.
    let list = own_lists
        .iter()
        .find(|item| item.row == chunk)
        .unwrap()
        .clone();
    let mut terms: Vec<String> = (0..).map(|i| format!("filler{i}")).take(3).collect();
    terms.push("zzzz".into());
    set_cell(
        &client,
        INDEX_DOCS,
        &chunk,
        CHUNK_OWN_TERMS,
        Some(OwnTerms::new(terms).encode()),
    )
    .await;
    let found = violations(&client).await;
    assert!(
        found.iter().any(|v| v
            .contains("term has its own cell in a chunk whose list of own terms leaves it out")
            && v.contains(&format!("index:\"{term}\""))),
        "{found:?}"
    );
    set_cell(
        &client,
        INDEX_DOCS,
        &chunk,
        CHUNK_OWN_TERMS,
        Some(Bytes::from_static(b"\xff")),
    )
    .await;
    let found = violations(&client).await;
    assert!(
        found
            .iter()
            .any(|v| v.contains("chunk's list of own terms does not decode")),
        "{found:?}"
    );
    put_back(&client, INDEX_DOCS, &list).await;

    // A chunk that does not decode, and a cluster left in the queue.
    let mut t = client.begin().await.unwrap();
    t.set(INDEX, "zzz-not-a-term", &chunk, Bytes::from_static(b"\x07"))
        .unwrap();
    t.set(
        INDEX_QUEUE,
        shard_key(0),
        queued_column(b"0123"),
        Held::Nothing.encode(),
    )
    .unwrap();
    t.commit().await.unwrap();
    let found = violations(&client).await;
    assert!(
        found
            .iter()
            .any(|v| v.contains("index:\"zzz-not-a-term\" chunk") && v.contains("version Some(7)")),
        "{found:?}"
    );
    assert!(
        found
            .iter()
            .any(|v| v.contains("cluster still queued for the inverter (1)")
                && v.contains("index_queue:\"shard-00\" (cluster \"0123\")")),
        "{found:?}"
    );
}

/// Dead slots and lists of buckets tampered with: a list that leaves out a bucket with a
/// cell, or does not decode; dead slots that name a live slot, leave out a dead one, miscount,
/// do not decode, sit in another shard's row or name no chunk. Each is reported, and the
/// untouched index passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tampered_dead_slots_are_caught() {
    let store = Arc::new(MemStore::new());
    let runtime = start(&store, webindex::observers(None)).await;
    let client = writer(&store, &webindex::observed_columns()).await;
    let crawl = SyntheticCrawl::new(60, 5);
    for pages in [crawl.initial().collect(), crawl.recrawl(1, 0.2)] {
        let pages: Vec<_> = pages;
        webindex::load_pages(
            &client,
            pages.into_iter().map(Ok::<_, std::convert::Infallible>),
            8,
            |_, _| {},
        )
        .await
        .unwrap();
        idle(&runtime).await;
    }
    runtime.shutdown().await.unwrap();
    assert_eq!(violations(&client).await, Vec::<String>::new());

    let t = client.begin().await.unwrap();
    let lists: Vec<ScanItem> = t
        .scan::<&str>(CORPUS, .., Columns::All)
        .await
        .unwrap()
        .into_iter()
        .filter(|item| item.column.starts_with(DEAD_PREFIX))
        .collect();
    let list = lists.first().expect("the recrawl left dead slots").clone();
    let chunk = Bytes::copy_from_slice(&list.column[DEAD_PREFIX.len()..]);
    let dead = DeadSlots::decode(&list.value).unwrap();
    let directory = Directory::decode(
        &t.get(INDEX_DOCS, &chunk, CHUNK_CLUSTERS)
            .await
            .unwrap()
            .unwrap(),
    );
    let buckets = t
        .scan_page(
            INDEX_DOCS,
            std::ops::Bound::Included(chunk.clone()),
            Columns::one(CHUNK_BUCKETS),
            1,
        )
        .await
        .unwrap()
        .items
        .remove(0);
    drop(t);
    let set_dead = |value: Bytes| set_cell(&client, CORPUS, &list.row, &list.column, Some(value));
    let has = |found: &[String], what: &str| {
        assert!(found.iter().any(|v| v.contains(what)), "{what}: {found:?}");
    };

    // The list of buckets leaves out every bucket, then does not decode.
    set_cell(
        &client,
        INDEX_DOCS,
        &chunk,
        CHUNK_BUCKETS,
        Some(ChunkBuckets::default().encode()),
    )
    .await;
    has(
        &violations(&client).await,
        "bucket has a cell in a chunk whose list of buckets leaves it out",
    );
    set_cell(
        &client,
        INDEX_DOCS,
        &chunk,
        CHUNK_BUCKETS,
        Some(Bytes::from_static(b"buckets\nxyz\n")),
    )
    .await;
    has(
        &violations(&client).await,
        "chunk's list of buckets does not decode",
    );
    put_back(&client, INDEX_DOCS, &buckets).await;

    // A live slot marked dead: its postings are skipped, so its cluster misses terms.
    let live = directory
        .clusters
        .iter()
        .position(|c| !c.is_empty())
        .expect("a live slot") as u32;
    let mut wrong = dead.clone();
    wrong.insert(live);
    wrong.holding += 1;
    set_dead(wrong.encode()).await;
    let found = violations(&client).await;
    has(
        &found,
        "dead slot still names a cluster in its chunk's directory",
    );
    has(&found, "index entries missing for a canonical's terms");
    // A dead slot left out: its postings name an empty slot.
    let mut wrong = DeadSlots::default();
    wrong.holding = dead.holding - 1;
    for slot in &dead.slots()[1..] {
        wrong.insert(*slot);
    }
    set_dead(wrong.encode()).await;
    has(
        &violations(&client).await,
        "posting names an empty or missing slot of its chunk",
    );
    // Only the count wrong.
    let mut wrong = dead.clone();
    wrong.holding += 1;
    set_dead(wrong.encode()).await;
    assert_found(
        &violations(&client).await,
        &[(
            "dead slots miscount",
            format!("corpus:{:?}", String::from_utf8_lossy(&list.row)),
        )],
    );
    // Bytes that do not decode.
    set_dead(Bytes::from_static(b"dead of\n\xff")).await;
    has(
        &violations(&client).await,
        "chunk's list of dead slots does not decode",
    );
    put_back(&client, CORPUS, &list).await;

    // The list in another shard's row, and a list for a chunk that does not exist.
    let other = shard_key((parse_chunk_key(&chunk).unwrap().0 + 1) % INDEX_SHARDS);
    set_cell(
        &client,
        CORPUS,
        &other,
        &list.column,
        Some(list.value.clone()),
    )
    .await;
    has(
        &violations(&client).await,
        "dead slots of a chunk that is not of the row's shard",
    );
    set_cell(&client, CORPUS, &other, &list.column, None).await;
    let ghost = dead_column(&chunk_key(parse_chunk_key(&chunk).unwrap().0, 999_999));
    set_cell(&client, CORPUS, &list.row, &ghost, Some(list.value.clone())).await;
    has(
        &violations(&client).await,
        "dead slots of a chunk without a directory",
    );
    set_cell(&client, CORPUS, &list.row, &ghost, None).await;
    assert_eq!(violations(&client).await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tampered_links_are_caught() {
    let client = indexed().await;
    let txn = client.begin().await.unwrap();
    let links = txn.scan::<&str>(LINKS, .., Columns::All).await.unwrap();
    drop(txn);
    let forwarded = links
        .iter()
        .filter(|c| c.column.as_ref() == FORWARDED)
        .nth(links.len() / 20)
        .unwrap()
        .clone();
    let forwarded_to = links
        .iter()
        .find(|c| c.row == forwarded.row && c.column.as_ref() == FORWARDED_TO)
        .unwrap()
        .clone();
    let target = format!("links:{:?}", String::from_utf8_lossy(&forwarded.row));
    let canonical = format!(
        "anchor_terms:{:?}",
        String::from_utf8_lossy(&forwarded_to.value)
    );

    // What the target says it forwarded counted wrong: its canonical's terms are still right.
    let mut wrong = AnchorTerms::decode(&forwarded.value);
    wrong.apply(b"extra words", 1);
    set_cell(
        &client,
        LINKS,
        &forwarded.row,
        FORWARDED,
        Some(wrong.encode()),
    )
    .await;
    assert_found(
        &violations(&client).await,
        &[(
            "anchor terms forwarded are not those of the target's links",
            target.clone(),
        )],
    );
    set_cell(
        &client,
        LINKS,
        &forwarded.row,
        FORWARDED,
        Some(forwarded.value.clone()),
    )
    .await;
    assert_eq!(violations(&client).await, Vec::<String>::new());

    // Forwarded to a page that is not its canonical.
    set_cell(
        &client,
        LINKS,
        &forwarded.row,
        FORWARDED_TO,
        Some(Bytes::from_static(b"http://nowhere.example/")),
    )
    .await;
    assert_found(
        &violations(&client).await,
        &[(
            "links are not forwarded to their target's canonical",
            format!("{target} (forwarded to \"http://nowhere.example/\", canonical"),
        )],
    );
    set_cell(
        &client,
        LINKS,
        &forwarded.row,
        FORWARDED_TO,
        Some(forwarded_to.value.clone()),
    )
    .await;

    // A link nobody forwarded: the target's forwarded terms and its canonical's are both short.
    let extra = from_column(b"http://nowhere.example/");
    set_cell(
        &client,
        LINKS,
        &forwarded.row,
        &extra,
        Some(Bytes::from_static(b"more anchor text")),
    )
    .await;
    assert_found(
        &violations(&client).await,
        &[
            (
                "anchor terms forwarded are not those of the target's links",
                target.clone(),
            ),
            (
                "anchor terms are not those of the links to the cluster",
                canonical.clone(),
            ),
            // The link counts too: the kept anchors are one short.
            (
                "kept size is not the size counted",
                "sizes (inlinks)".to_owned(),
            ),
        ],
    );
    set_cell(&client, LINKS, &forwarded.row, &extra, None).await;
    assert_eq!(violations(&client).await, Vec::<String>::new());

    // Anchor terms forwarded from a page nothing links to.
    let nowhere = Bytes::from_static(b"http://nowhere.example/");
    set_cell(
        &client,
        LINKS,
        &nowhere,
        FORWARDED_TO,
        Some(forwarded_to.value.clone()),
    )
    .await;
    assert_found(
        &violations(&client).await,
        &[(
            "target without links forwards anchor terms",
            "links:\"http://nowhere.example/\" (forwarded to \"".to_owned(),
        )],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tampered_summaries_are_caught() {
    let client = indexed().await;
    let txn = client.begin().await.unwrap();
    let summaries = txn
        .scan::<&str>(ANCHOR_TERMS, .., Columns::All)
        .await
        .unwrap();
    let victim = summaries[summaries.len() / 2].clone();
    let corpus = txn
        .scan::<&str>(CORPUS, .., Columns::one(COUNTS))
        .await
        .unwrap();
    drop(txn);
    let canonical = format!("anchor_terms:{:?}", String::from_utf8_lossy(&victim.row));

    // A canonical's anchor terms counted wrong.
    let mut wrong = AnchorTerms::decode(&victim.value);
    wrong.apply(b"extra words", 1);
    let mut t = client.begin().await.unwrap();
    t.set(ANCHOR_TERMS, &victim.row, SUMMARY, wrong.encode())
        .unwrap();
    t.commit().await.unwrap();
    assert_found(
        &violations(&client).await,
        &[(
            "anchor terms are not those of the links to the cluster",
            canonical,
        )],
    );
    let mut t = client.begin().await.unwrap();
    t.set(ANCHOR_TERMS, &victim.row, SUMMARY, victim.value.clone())
        .unwrap();
    t.commit().await.unwrap();
    assert_eq!(violations(&client).await, Vec::<String>::new());

    // A corpus shard off by one document, then the same total moved to another shard.
    let shard = &corpus[0];
    let counts = CorpusCounts::decode(&shard.value);
    let mut t = client.begin().await.unwrap();
    let more = counts.plus(CorpusCounts {
        documents: 1,
        ..CorpusCounts::default()
    });
    t.set(CORPUS, &shard.row, COUNTS, more.encode()).unwrap();
    t.commit().await.unwrap();
    let shard_name = format!("corpus:{:?}", String::from_utf8_lossy(&shard.row));
    assert_found(
        &violations(&client).await,
        &[(
            "corpus counts are not those of the shard's indexed clusters (1)",
            shard_name.clone(),
        )],
    );
    let other = &corpus[1];
    let less = CorpusCounts::decode(&other.value).plus(CorpusCounts {
        documents: -1,
        ..CorpusCounts::default()
    });
    let mut t = client.begin().await.unwrap();
    t.set(CORPUS, &other.row, COUNTS, less.encode()).unwrap();
    t.commit().await.unwrap();
    // The totals agree; each shard is named.
    let found = violations(&client).await;
    assert_found(
        &found,
        &[(
            "corpus counts are not those of the shard's indexed clusters (2)",
            shard_name,
        )],
    );
    assert!(
        found[0].contains(&format!("corpus:{:?}", String::from_utf8_lossy(&other.row))),
        "{found:?}"
    );
}

/// Invariant 8: the kept sizes are recounted; a size kept wrong, and a cell of `sizes` that
/// does not decode, are named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tampered_sizes_are_caught() {
    let client = indexed().await;
    let txn = client.begin().await.unwrap();
    let kept = webindex::sizes::read(&txn).await.unwrap();
    let totals = txn
        .scan::<&str>(SIZES, .., Columns::one(TOTAL))
        .await
        .unwrap();
    drop(txn);
    let report = webindex::check(&client).await.unwrap();
    assert_eq!(kept.documents, report.summary.processed as i64);
    assert_eq!(kept.inlinks, report.summary.inlinks as i64);
    assert_eq!(kept.link_targets, report.summary.link_targets as i64);
    assert_eq!(kept.clusters, report.summary.clusters as i64);
    assert_eq!(kept.postings, report.summary.postings as i64);
    assert!(report.observer_runs > 0 && report.observer_runs <= report.observed_changes);

    // One more document kept than there is.
    let total = &totals[0];
    let wrong = SizeCounts::decode(&total.value).unwrap().plus(SizeCounts {
        documents: 1,
        ..SizeCounts::default()
    });
    set_cell(&client, SIZES, &total.row, TOTAL, Some(wrong.encode())).await;
    let counted = report.summary.processed;
    assert_found(
        &violations(&client).await,
        &[(
            "kept size is not the size counted (1)",
            format!("sizes (documents): kept {}, counted {counted}", counted + 1),
        )],
    );
    put_back(&client, SIZES, total).await;

    // A delta that does not decode.
    let bad = webindex::sizes::delta_column(7);
    set_cell(
        &client,
        SIZES,
        &total.row,
        &bad,
        Some(Bytes::from_static(b"1 x")),
    )
    .await;
    assert_found(
        &violations(&client).await,
        &[(
            "kept size does not decode (1)",
            format!(
                "sizes:{:?} (column \"d:0000000000000007\")",
                String::from_utf8_lossy(&total.row)
            ),
        )],
    );
}

/// Pages stored under keys of any bytes (a `\n`, a tab and quotes, bytes that are not UTF-8,
/// a key that is no URL at all), written past the loader's URL check as another program on
/// the store could, are indexed like the rest: every invariant holds, the corpus counts
/// included. A violation at such a row names it with its bytes escaped, on one line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_keys_of_any_bytes_never_break_the_check() {
    use percolator_webindex::schema::{DOCUMENTS, HASH, RAW};

    let store = Arc::new(MemStore::new());
    let runtime = start(&store, webindex::observers(None)).await;
    let client = writer(&store, &webindex::observed_columns()).await;
    let crawl = SyntheticCrawl::new(20, 9);
    let pages = crawl.initial().map(Ok::<_, std::convert::Infallible>);
    webindex::load_pages(&client, pages, 4, |_, _| {})
        .await
        .unwrap();
    let keys: [&[u8]; 5] = [
        b"http://odd.example/a\nb",
        b"http://odd.example/\t\"quoted\"\\",
        b"http://odd.example/\xff\xfe",
        b"not a url at all",
        b"\x00\x01",
    ];
    for (i, key) in keys.iter().enumerate() {
        let html = format!(
            "<title>odd {i}</title><p>oddword{i} shared words here</p>\
             <a href=\"rel/{i}\">relative</a> <a href=\"{}\">home</a>",
            crawl.url(0)
        );
        let mut txn = client.begin().await.unwrap();
        txn.set(DOCUMENTS, key, RAW, html).unwrap();
        txn.commit().await.unwrap();
    }
    idle(&runtime).await;
    runtime.shutdown().await.unwrap();
    let report = webindex::check(&client).await.unwrap();
    assert_eq!(report.violations, vec![], "{:?}", report.violations);
    assert_eq!(report.summary.documents, 25, "{:?}", report.summary);

    let mut t = client.begin().await.unwrap();
    t.delete(DOCUMENTS, keys[0], HASH).unwrap();
    t.commit().await.unwrap();
    let found = violations(&client).await;
    assert!(
        found
            .iter()
            .any(|v| v.contains(r#"documents:"http://odd.example/a\nb""#)),
        "the row is named, escaped: {found:?}"
    );
    assert!(found.iter().all(|v| !v.contains('\n')), "{found:?}");
}
