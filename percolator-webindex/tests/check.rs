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
    Directory, Held, PostingChunk, RareChunk, is_rare_row, rare_row,
};
use percolator_webindex::schema::{
    ANCHOR_TERMS, CHUNK_CLUSTERS, CORPUS, COUNTS, FORWARDED, FORWARDED_TO, INDEX, INDEX_DOCS,
    INDEX_QUEUE, LINKS, SUMMARY, from_column, index_shard, parse_chunk_key, queued_column,
    shard_key,
};
use percolator_webindex::terms::{AnchorTerms, CorpusCounts};
use percolator_webindex::{self as webindex, synthetic::SyntheticCrawl};

async fn violations(client: &Client<MemStore>) -> Vec<String> {
    webindex::check(client).await.unwrap().violations
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
    let directories = txn
        .scan::<&str>(INDEX_DOCS, .., Columns::All)
        .await
        .unwrap();
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
        found.iter().any(|v| v.contains("1 index entries missing")),
        "{found:?}"
    );

    // The same slot under a term its document does not have: as many entries as terms.
    edit_chunk(&client, "zzz-not-a-term", &chunk, |c| {
        c.postings.insert(slot, posting);
    })
    .await;
    let found = violations(&client).await;
    assert!(found.iter().any(|v| v.contains("missing")), "{found:?}");
    assert!(
        found
            .iter()
            .any(|v| v.contains("non-canonical documents or absent terms")),
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
        found.iter().any(|v| v.contains("1 index entries missing")),
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
        found
            .iter()
            .any(|v| v.contains("1 index entries name an empty or missing slot")),
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
        found.iter().any(|v| v.contains("1 index entries missing")),
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
            .any(|v| v.contains(&format!("holds term {rare_term:?} of another bucket"))),
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
            .any(|v| v.starts_with("index chunk ~rare/") && v.contains("malformed")),
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
            .any(|v| v.contains(&format!("lists cluster {ghost} whose postings are in None"))),
        "{found:?}"
    );
    assert!(
        found
            .iter()
            .any(|v| v.contains("1 cluster(s) in a chunk of another shard")),
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
            .any(|v| v.starts_with("index chunk zzz-not-a-term/") && v.contains("version Some(7)")),
        "{found:?}"
    );
    assert!(
        found
            .iter()
            .any(|v| v.contains("1 cluster(s) still queued for the inverter")),
        "{found:?}"
    );
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
    let target = String::from_utf8_lossy(&forwarded.row).into_owned();
    let canonical = String::from_utf8_lossy(&forwarded_to.value).into_owned();

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
    assert_eq!(
        violations(&client).await,
        vec![format!(
            "the anchor terms forwarded from {target} are not those of its links"
        )]
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
    assert_eq!(
        violations(&client).await,
        vec![format!(
            "links to {target} are forwarded to Some(\"http://nowhere.example/\"), not to its \
             canonical {canonical}"
        )]
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
    assert_eq!(
        violations(&client).await,
        vec![
            format!("the anchor terms forwarded from {target} are not those of its links"),
            format!("the anchor terms of {canonical} are not those of the links to its cluster"),
        ]
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
    assert_eq!(
        violations(&client).await,
        vec![format!(
            "http://nowhere.example/ has no links but forwards anchor terms to Some({canonical:?})"
        )]
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
    let canonical = String::from_utf8_lossy(&victim.row).into_owned();

    // A canonical's anchor terms counted wrong.
    let mut wrong = AnchorTerms::decode(&victim.value);
    wrong.apply(b"extra words", 1);
    let mut t = client.begin().await.unwrap();
    t.set(ANCHOR_TERMS, &victim.row, SUMMARY, wrong.encode())
        .unwrap();
    t.commit().await.unwrap();
    assert_eq!(
        violations(&client).await,
        vec![format!(
            "the anchor terms of {canonical} are not those of the links to its cluster"
        )]
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
        length: 0,
    });
    t.set(CORPUS, &shard.row, COUNTS, more.encode()).unwrap();
    t.commit().await.unwrap();
    let found = violations(&client).await;
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("corpus counts say"), "{found:?}");
    let other = &corpus[1];
    let less = CorpusCounts::decode(&other.value).plus(CorpusCounts {
        documents: -1,
        length: 0,
    });
    let mut t = client.begin().await.unwrap();
    t.set(CORPUS, &other.row, COUNTS, less.encode()).unwrap();
    t.commit().await.unwrap();
    let found = violations(&client).await;
    assert!(found[0].ends_with("(in other shards)"), "{found:?}");
}
