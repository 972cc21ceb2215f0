//! URL validation at ingest: a page whose URL `percolator_webindex::url::normalize` refuses is
//! not stored by any loader and is counted as skipped; the others are stored under the
//! normalized URL.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::ops::Bound;
use std::sync::Arc;

use bytes::Bytes;
use percolator_backend_mem::MemStore;
use percolator_core::{Client, Columns, RowStore};
use percolator_observers::conformance::test_client;
use percolator_webindex::schema::{DOCUMENTS, RAW};
use percolator_webindex::url::Reason;
use percolator_webindex::{
    CrawledPage, LoadConfig, LoadError, PageOutcome, load_page, load_page_checked, load_pages,
    load_pages_checked,
};

fn page(url: &str) -> CrawledPage {
    CrawledPage {
        url: url.into(),
        html: Bytes::from_static(b"<title>evil</title><p>words words</p>"),
    }
}

/// The URLs stored in `documents`.
async fn stored_urls(client: &Client<MemStore>) -> Vec<Bytes> {
    let txn = client.begin().await.unwrap();
    let page = txn
        .scan_page(DOCUMENTS, Bound::Unbounded, Columns::one(RAW), 100)
        .await
        .unwrap();
    page.items.into_iter().map(|item| item.row).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_with_a_javascript_url_is_not_stored() {
    let store = Arc::new(MemStore::new());
    let client = test_client(&store).build().await.unwrap();
    let url = "javascript:alert(document.domain)//x";

    let seen = std::sync::Mutex::new(Vec::new());
    let report = load_pages(
        &client,
        [Ok::<_, std::convert::Infallible>(page(url))],
        4,
        |url, outcome| seen.lock().unwrap().push((url.to_owned(), outcome)),
    )
    .await
    .unwrap();
    assert_eq!((report.loaded, report.unchanged, report.skipped), (0, 0, 1));
    assert_eq!(
        seen.into_inner().unwrap(),
        [(url.to_owned(), PageOutcome::Skipped)]
    );
    assert_eq!(
        load_page(&client, page(url)).await.unwrap(),
        PageOutcome::Skipped
    );
    match load_page_checked(&client, page(url)).await {
        Err(LoadError::BadUrl(bad)) => {
            assert_eq!(bad.reason(), &Reason::Scheme("javascript".into()));
            assert_eq!(
                bad.to_string(),
                "bad URL \"javascript:alert(document.domain)//x\": not http or https: javascript"
            );
        }
        other => panic!("{other:?}"),
    }

    // Nothing at all was stored.
    assert!(stored_urls(&client).await.is_empty());
    let txn = client.begin().await.unwrap();
    assert_eq!(txn.get(DOCUMENTS, url, RAW).await.unwrap(), None);
    drop(txn);
    let tables = store.tables().await.unwrap();
    assert!(
        !tables.iter().any(|t| t.as_ref() == DOCUMENTS),
        "{tables:?}"
    );
    client.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bad_url_is_skipped_and_good_ones_are_stored_normalized() {
    let store = Arc::new(MemStore::new());
    let client = test_client(&store).build().await.unwrap();
    let bad = [
        "javascript:alert(document.domain)//x",
        "JavaScript:alert(1)",
        "data:text/html,<script>alert(1)</script>",
        "../../etc/passwd",
        "/relative",
        "file:///etc/passwd",
        "http://a.example/b\nc",
        "http://a.example/b\0",
        "http://a.example/\u{85}",
        "ftp://x.example/",
        "http:///nohost",
        "",
    ];
    let long = format!("http://a.example/{}", "x".repeat(2000));
    let mut urls: Vec<&str> = bad.to_vec();
    urls.push(&long);
    urls.push("HTTP://Example.COM:80/a/../b#frag");
    let pages = urls
        .iter()
        .map(|url| Ok::<_, std::convert::Infallible>(page(url)));
    let refused = std::sync::Mutex::new(Vec::new());
    let report = load_pages_checked(&client, pages, LoadConfig::new(4), |url, outcome| {
        if let Err(bad) = outcome {
            refused
                .lock()
                .unwrap()
                .push((url.to_owned(), bad.reason().clone()));
        }
    })
    .await
    .unwrap();
    assert_eq!(
        (report.loaded, report.unchanged, report.skipped),
        (1, 0, bad.len() + 1)
    );
    let refused = refused.into_inner().unwrap();
    assert_eq!(refused.len(), bad.len() + 1);
    for (url, reason) in &refused {
        let expected = match url.as_str() {
            "javascript:alert(document.domain)//x" | "JavaScript:alert(1)" => {
                Reason::Scheme("javascript".into())
            }
            "data:text/html,<script>alert(1)</script>" => Reason::Scheme("data".into()),
            "file:///etc/passwd" => Reason::Scheme("file".into()),
            "ftp://x.example/" => Reason::Scheme("ftp".into()),
            "../../etc/passwd" | "/relative" => Reason::NotAbsolute,
            "http://a.example/b\nc" | "http://a.example/b\0" => Reason::ControlCharacter(18),
            "http://a.example/\u{85}" => Reason::ControlCharacter(17),
            "http:///nohost" => Reason::NoHost,
            "" => Reason::Empty,
            other if other == long => Reason::TooLong,
            other => panic!("{other:?} refused"),
        };
        assert_eq!(reason, &expected, "{url:?}");
    }
    assert_eq!(
        stored_urls(&client).await,
        [Bytes::from_static(b"http://example.com/b")]
    );
    // The same page under another spelling of its URL is the same page.
    assert_eq!(
        load_page_checked(&client, page("http://EXAMPLE.com/b#other"))
            .await
            .unwrap(),
        PageOutcome::Unchanged
    );
    client.shutdown().await.unwrap();
}
