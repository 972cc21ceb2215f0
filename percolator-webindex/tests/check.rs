//! The invariant check can fail: an index tampered with after the pipeline went idle — an entry
//! deleted, one swapped for a wrong term (same count), one for a cluster that does not exist —
//! is reported, each time, and the untouched index passes; so are inlinks tampered with (an
//! anchor deleted, changed, or put where no link points), a posting with other counts, and the
//! summaries (a canonical's anchor terms, the corpus counts) counted wrong.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use bytes::Bytes;
use percolator_backend_mem::MemStore;
use percolator_core::{Client, Columns};
use percolator_observers::conformance::{idle, start, writer};
use percolator_webindex::schema::{
    ANCHOR_TERMS, CORPUS, COUNTS, INDEX, INLINKS, SUMMARY, index_column,
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tampered_index_is_caught() {
    let client = indexed().await;
    let txn = client.begin().await.unwrap();
    let postings = txn.scan::<&str>(INDEX, .., Columns::All).await.unwrap();
    let victim = postings[postings.len() / 2].clone();
    drop(txn);

    // An entry deleted.
    let mut t = client.begin().await.unwrap();
    t.delete(INDEX, &victim.row, &victim.column).unwrap();
    t.commit().await.unwrap();
    let found = violations(&client).await;
    assert!(
        found.iter().any(|v| v.contains("1 index entries missing")),
        "{found:?}"
    );

    // The same column under a term its document does not have: as many entries as terms.
    let mut t = client.begin().await.unwrap();
    t.set(INDEX, "zzz-not-a-term", &victim.column, Bytes::new())
        .unwrap();
    t.commit().await.unwrap();
    let found = violations(&client).await;
    assert!(found.iter().any(|v| v.contains("missing")), "{found:?}");
    assert!(
        found
            .iter()
            .any(|v| v.contains("non-canonical documents or absent terms")),
        "{found:?}"
    );

    // Repaired, then an entry for a cluster that does not exist.
    let mut t = client.begin().await.unwrap();
    t.delete(INDEX, "zzz-not-a-term", &victim.column).unwrap();
    t.set(
        INDEX,
        &victim.row,
        &victim.column,
        Bytes::from_static(b"0 99 1"),
    )
    .unwrap();
    t.commit().await.unwrap();
    // The posting is back with other counts than the document's.
    let found = violations(&client).await;
    assert!(
        found.iter().any(|v| v.contains("1 index entries missing")),
        "{found:?}"
    );
    let mut t = client.begin().await.unwrap();
    t.set(INDEX, &victim.row, &victim.column, victim.value.clone())
        .unwrap();
    t.commit().await.unwrap();
    assert_eq!(violations(&client).await, Vec::<String>::new());
    let mut t = client.begin().await.unwrap();
    t.set(
        INDEX,
        &victim.row,
        index_column(b"00000000000000000000000000000000"),
        victim.value.clone(),
    )
    .unwrap();
    t.commit().await.unwrap();
    let found = violations(&client).await;
    assert!(
        found
            .iter()
            .any(|v| v.contains("1 index entries for non-canonical")),
        "{found:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tampered_inlinks_are_caught() {
    let client = indexed().await;
    let txn = client.begin().await.unwrap();
    let inlinks = txn.scan::<&str>(INLINKS, .., Columns::All).await.unwrap();
    let victim = inlinks[inlinks.len() / 2].clone();
    drop(txn);
    let canonical = String::from_utf8_lossy(&victim.row).into_owned();

    // An anchor deleted from its canonical.
    let mut t = client.begin().await.unwrap();
    t.delete(INLINKS, &victim.row, &victim.column).unwrap();
    t.commit().await.unwrap();
    let found = violations(&client).await;
    assert!(
        found
            .iter()
            .any(|v| v.contains(&format!("1 anchor(s) for links to {canonical} are not"))),
        "{found:?}"
    );

    // Put back under another anchor text: as many anchors, other ones.
    let mut t = client.begin().await.unwrap();
    t.set(INLINKS, &victim.row, &victim.column, "not the anchor text")
        .unwrap();
    t.commit().await.unwrap();
    let found = violations(&client).await;
    assert!(
        found
            .iter()
            .any(|v| v.contains(&format!("inlinks at {canonical} are not the anchors"))),
        "{found:?}"
    );

    // Repaired, then one anchor too many at a page nothing links to.
    let mut t = client.begin().await.unwrap();
    t.set(INLINKS, &victim.row, &victim.column, victim.value.clone())
        .unwrap();
    t.set(INLINKS, "http://nowhere.example/", &victim.column, "stray")
        .unwrap();
    t.commit().await.unwrap();
    let found = violations(&client).await;
    assert_eq!(
        found,
        vec![
            "1 stray inlink(s) at http://nowhere.example/ (not the target's canonical, or the \
             link is gone)"
                .to_string(),
            "http://nowhere.example/ has inlinks but no anchor terms".to_string(),
        ]
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
    let corpus = txn.scan::<&str>(CORPUS, .., Columns::All).await.unwrap();
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
            "the anchor terms of {canonical} are not those of its inlinks"
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
