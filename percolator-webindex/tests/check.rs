//! The invariant check can fail: an index tampered with after the pipeline went idle — an entry
//! deleted, one swapped for a wrong term (same count), one for a document that is not canonical —
//! is reported, each time, and the untouched index passes.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use bytes::Bytes;
use percolator_backend_mem::MemStore;
use percolator_core::{Client, Columns};
use percolator_observers::conformance::{idle, start, writer};
use percolator_webindex::schema::{INDEX, index_column};
use percolator_webindex::{self as webindex, synthetic::SyntheticCrawl};

async fn violations(client: &Client<MemStore>) -> Vec<String> {
    webindex::check(client).await.unwrap().violations
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tampered_index_is_caught() {
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

    // Repaired, then an entry for a URL that is not its cluster's canonical.
    let mut t = client.begin().await.unwrap();
    t.delete(INDEX, "zzz-not-a-term", &victim.column).unwrap();
    t.set(INDEX, &victim.row, &victim.column, Bytes::new())
        .unwrap();
    t.commit().await.unwrap();
    assert_eq!(violations(&client).await, Vec::<String>::new());
    let mut t = client.begin().await.unwrap();
    let hash = victim.column.split(|&b| b == 0).next_back().unwrap();
    t.set(
        INDEX,
        &victim.row,
        index_column(b"http://nowhere.example/", hash),
        Bytes::new(),
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
